"""Batch, layer, group, RMS and weight normalization (paper Table 4 "batch normalization", App. B, §6.1.1).

Batch normalization reduces every channel over its ``m = N*H*W`` values (App. B:
``mu = mean(x)``, ``sigma² = mean((x - mu)²)``, ``y = gamma (x - mu) / sqrt(sigma² + eps) + beta``), so its
depth is O(log N) (Table 4). Counting each elementary operation once:

* forward, per reduced group of m values: mean (m-1 adds, 1 divide), x - mu (m), square (m),
  variance (m-1 adds, 1 divide), + eps and rsqrt (2), times rstd (m), gamma and beta (2m, only when
  affine): ``W = 7m + 2``, ``D = 2 ceil(log2 m) + 9`` (without affine: ``5m + 2``, ``2 ceil(log2 m) + 7``);
* backward (Ioffe & Szegedy 2015, §3): ∇beta = Σ∇y (m-1), ∇gamma = Σ∇y·x̂ (2m-1);
  ∇x = (gamma rstd / m)(m∇y - ∇beta - x̂ ∇gamma): 5m + 2 (5m + 1 without gamma), after the two sums.

Weight normalization (Salimans & Kingma 2016) normalizes the weights, not the activations: its depth
does not depend on the minibatch, "from O(log N) to O(1)" (paper §6.1.1, [S1]).
"""
from __future__ import annotations

from ..cost import ZERO, Cost, OpCost, clog2
from . import checks

SRC_BN = "paper Table 4 (BN: O(NCHW) work, O(log N) depth), App. B; Ioffe & Szegedy 2015"


def _normalize(groups, m, params, vb, elements, op, source, affine_grad: Cost = ZERO,
               affine: bool = True) -> OpCost:
    """``groups`` independent normalizations over ``m`` values each.

    ``affine_grad`` is the extra work of ∇gamma, ∇beta when they are reduced over other groups than the
    statistics (layer and group norm); for batch norm they are the per-channel sums ∇x needs anyway.
    """
    a = 1 if affine else 0
    fwd = Cost(flop=groups * ((5 + 2 * a) * m + 2), depth=2 * clog2(m) + 7 + 2 * a,
               bytes=vb * (2 * elements + params), params=params, act_bytes=vb * elements)
    sums = Cost(flop=groups * (3 * m - 2), depth=1 + clog2(m))  # Σ∇y and Σ∇y·x̂ per group
    gin = sums + Cost(flop=groups * (5 * m + 1 + a), depth=3, bytes=vb * (3 * elements + params))
    return OpCost(op, fwd, gin, affine_grad, source)


def batch_norm(n, c, spatial=1, affine: bool = True, value_bytes=4) -> OpCost:
    """Training-mode batch normalization of ``n x c x spatial`` values (statistics per channel).

    >>> bn = batch_norm(2, 1, 2)           # m = 4 values per channel
    >>> bn.forward.flop, bn.forward.depth, bn.params
    (30, 13, 2)
    """
    n = checks.size("n", n)
    c, spatial = checks.size("c", c), checks.size("spatial", spatial)
    vb = checks.value_bytes(value_bytes)
    return _normalize(c, n * spatial, 2 * c if affine else 0, vb, n * c * spatial, "batch_norm", SRC_BN,
                      affine=affine)


def layer_norm(rows, features, affine: bool = True, value_bytes=4) -> OpCost:
    """Layer normalization (Ba et al. 2016) of ``rows`` vectors of ``features`` values; no batch dependency.

    >>> ln = layer_norm(3, 4)
    >>> ln.forward.flop, ln.forward.depth, ln.params
    (90, 13, 8)
    """
    rows, features = checks.size("rows", rows), checks.size("features", features)
    vb = checks.value_bytes(value_bytes)
    gw = Cost(flop=features * (3 * rows - 2), depth=1 + clog2(rows), bytes=vb * 2 * rows * features) \
        if affine else ZERO
    return _normalize(rows, features, 2 * features if affine else 0, vb, rows * features, "layer_norm",
                      "Ba et al. 2016; counts as batch_norm over the feature dimension", gw, affine)


def group_norm(n, c, spatial, groups, affine: bool = True, value_bytes=4) -> OpCost:
    """Group normalization (Wu & He 2018): ``groups`` groups of ``c/groups`` channels per sample."""
    n = checks.size("n", n)
    c, spatial, groups = checks.size("c", c), checks.size("spatial", spatial), checks.size("groups", groups)
    if c % groups:
        raise ValueError(f"groups: c={c} must be divisible by groups={groups}")
    vb = checks.value_bytes(value_bytes)
    el = n * c * spatial
    gw = Cost(flop=c * (3 * n * spatial - 2), depth=1 + clog2(n * spatial), bytes=vb * 2 * el) if affine else ZERO
    return _normalize(n * groups, c // groups * spatial, 2 * c if affine else 0, vb, el, "group_norm",
                      "Wu & He 2018; counts as batch_norm per group", gw, affine)


def rms_norm(rows, features, value_bytes=4) -> OpCost:
    """RMS normalization (Zhang & Sennrich 2019): ``y = g x / sqrt(mean(x²) + eps)``.

    Forward per row: square (h), sum (h-1), divide, + eps, rsqrt (3), times rstd (h), times g (h).
    """
    rows, h = checks.size("rows", rows), checks.size("features", features)
    vb = checks.value_bytes(value_bytes)
    el = rows * h
    fwd = Cost(flop=rows * (4 * h + 2), depth=clog2(h) + 6, bytes=vb * (2 * el + h), params=h, act_bytes=vb * el)
    gin = Cost(flop=rows * (6 * h), depth=clog2(h) + 5, bytes=vb * (3 * el + h))
    gw = Cost(flop=h * (2 * rows - 1), depth=1 + clog2(rows), bytes=vb * (2 * el + h))
    return OpCost("rms_norm", fwd, gin, gw, "Zhang & Sennrich 2019")


def weight_norm(c_out, fan_in, value_bytes=4) -> OpCost:
    """Weight normalization of a layer's weights, ``w = g v / ||v||`` per output unit.

    Per output unit: square (k), sum (k-1), sqrt, g/||v|| (2), times v (k): ``W = c_out (3k + 1)``,
    ``D = ceil(log2 k) + 4``, independent of the minibatch (paper §6.1.1). Parameters: the gains g
    (v is the layer's own weight).

    >>> wn = weight_norm(2, 8)
    >>> wn.forward.flop, wn.forward.depth, wn.params
    (50, 7, 2)
    """
    c_out, k = checks.size("c_out", c_out), checks.size("fan_in", fan_in)
    vb = checks.value_bytes(value_bytes)
    fwd = Cost(flop=c_out * (3 * k + 1), depth=clog2(k) + 4, bytes=vb * (2 * c_out * k + c_out), params=c_out)
    # ∇v = (g/||v||)(∇w - w (w·∇w)/||w||²): dot (2k-1), scale and subtract (3k); ∇g = (∇w·v)/||v|| (2k)
    gin = Cost(flop=c_out * (5 * k), depth=clog2(k) + 4, bytes=vb * 3 * c_out * k)
    gw = Cost(flop=c_out * 2 * k, depth=1 + clog2(k) + 1, bytes=vb * 2 * c_out * k)
    return OpCost("weight_norm", fwd, gin, gw, "paper §6.1.1 ([S1]: depth O(1) in N); Salimans & Kingma 2016")
