"""Routing imbalance of a mixture-of-experts layer split over an expert group (``parallel.expert_imbalance``).

Under expert parallelism every MoE layer waits for the busiest device of its expert group: the all-to-alls
are collective, so the layer takes the time of the device whose experts received the most routed rows
(GShard, Lepikhin et al. 2021 §2.2, and Switch Transformer, Fedus et al. 2022 §2.2, cap that load with a
capacity factor for this reason; dropless MoE runs it whole). The factor here is that device's rows over
the mean ``assignments / e``; it multiplies its expert GEMMs' rows and the all-to-all bytes it receives and
returns. Given as:

* a number ``f`` >= 1: measured router statistics (the busiest device's share of the routed rows times
  ``e``), at most ``e`` (every row on one device);
* ``"uniform"``: tokens routed independently and uniformly (an untrained or perfectly load-balanced router
  still draws its loads at random). A device's load is then binomial, ``Bin(N, 1/e)`` for the ``N`` routed
  rows of the group (top-k choosing distinct experts makes it slightly less spread; ignored),
  mean ``N / e`` and relative spread ``sqrt((e - 1) / N)``; its expected maximum over the ``e`` devices is
  taken in the Gaussian approximation, ``1 + z_e sqrt((e - 1) / N)`` with ``z_e`` the expected maximum of
  ``e`` standard normals (Blom's plotting position, ``Phi^-1((e - 3/8) / (e + 1/4))``, as
  :func:`~concurrency_model.parallel.consistency.expected_max` takes it)
  [D: derived here]. It falls as batches grow (``N`` = 65,536 rows over 8 devices: 1.015) and is large for
  the few rows of a decode step (16 rows over 8 devices: 1.95). Against 20,000 multinomial draws the
  approximation is low by 7% at 16 rows over 8 devices (2.10 drawn), 4% at 64 (1.53), 0.8% at 1,024 (1.128)
  and 0.3% at 8,192 over 4 (1.023): a binomial's right skew, which matters only where so few rows make the
  layer's time its weights' reads. Rows are whole, so the busiest device has at least ``ceil(N / e)`` of them
  (with fewer rows than devices one row is already ``e / N`` times the mean).

With fixed-capacity buffers (a model built with ``capacity_factor``) every device computes and sends its
padded buffers whatever the routing (tokens past the capacity are dropped), so the factor is 1 there.

Distinct targets (:func:`targets_reached`, for the deduplicating dispatchers of :mod:`.parallel.expert`): a token
routed uniformly to ``k`` distinct experts of ``E`` misses a given set of ``m`` experts with probability
``C(E - m, k) / C(E, k)`` (hypergeometric), so it reaches on average ``g (1 - C(E - E/g, k) / C(E, k))`` of ``g``
equal groups of experts (ranks or nodes) [D]. Qwen3-30B-A3B (128 experts, top 8) over 2 nodes: 1.994 nodes
against 8 copies, 4 of them for the other node.
"""
from __future__ import annotations

import math
import numbers


MODES = ("uniform",)


def check_imbalance(where: str, spec):
    """``spec`` if it is ``"uniform"`` or a number >= 1, else a ``ValueError`` naming ``where``."""
    if isinstance(spec, str):
        if spec not in MODES:
            raise ValueError(f"{where}: unknown {spec!r}; allowed: a number >= 1 or {', '.join(MODES)}")
        return spec
    if isinstance(spec, bool) or not isinstance(spec, numbers.Real) or not math.isfinite(spec) or spec < 1:
        raise ValueError(f"{where}: must be a number >= 1 (the busiest device's routed rows over the mean) or "
                         f"\"uniform\", got {spec!r}")
    return float(spec)


def check_applies(spec, experts: int) -> None:
    """``ValueError`` naming ``parallel.expert_imbalance`` when it is set for a model without mixture-of-experts
    layers (``experts``: experts a layer, 0 for none), where it would be silently ignored."""
    if spec != 1.0 and not experts:
        raise ValueError(f"parallel.expert_imbalance: {spec!r} needs a model with mixture-of-experts layers; this one "
                         "has none")


def blom_max(n: int) -> float:
    """Expected maximum of ``n`` standard normals by Blom's plotting position (Blom 1958),
    ``Phi^-1((n - 3/8) / (n + 1/4))``.

    >>> round(blom_max(8), 4), round(blom_max(16), 4)
    (1.4342, 1.7688)
    """
    from scipy.special import ndtri  # scipy loads on first use (the CLI's start stays light)
    return float(ndtri((n - 3 / 8) / (n + 1 / 4)))


def imbalance(spec, assignments: float, e: int) -> float:
    """The busiest of ``e`` devices' routed rows over the mean, for ``assignments`` (token, expert) rows routed
    in the expert group (module doc). 1 for ``e`` = 1.

    >>> imbalance(1.3, 4096, 8), imbalance(3.0, 4096, 2), imbalance("uniform", 4096, 1)
    (1.3, 2.0, 1.0)
    >>> round(imbalance("uniform", 16, 8), 3), round(imbalance("uniform", 65536, 8), 4)
    (1.949, 1.0148)
    """
    if e <= 1:
        return 1.0
    if spec == "uniform":
        n = max(float(assignments), 1.0)
        z = blom_max(e)
        # whole rows: some device has at least ceil(n / e) of them (fewer rows than devices: one row is e / n)
        f = max(1.0 + z * math.sqrt((e - 1) / n), math.ceil(n / e - 1e-9) * e / n)
    else:
        f = float(spec)
    return min(f, float(e))


def targets_reached(experts: int, top_k: int, groups: int) -> float:
    """Expected distinct groups a token's ``top_k`` distinct experts fall in, the ``experts`` split evenly into
    ``groups`` (module doc, uniform routing); ``top_k`` for ``groups == experts``, 1 for one group.

    >>> round(targets_reached(128, 8, 2), 4), round(targets_reached(128, 8, 16), 4), targets_reached(8, 2, 8)
    (1.9938, 6.5965, 2.0)
    """
    if groups <= 1:
        return 1.0
    miss = math.comb(experts - experts // groups, top_k) / math.comb(experts, top_k)
    return groups * (1.0 - miss)


def dispatch_imbalance(node, batch: int, e: int, spec) -> float:
    """:func:`imbalance` of a ``moe_dispatch`` node's all-to-alls for ``batch`` samples a device: 1 with
    capacity buffers, else over the group's ``batch x rows x e`` routed rows (``node.shape``: rows, hidden)."""
    if e <= 1 or node.attrs.get("fixed_capacity"):
        return 1.0
    return imbalance(spec, batch * node.shape[0] * e, e)
