"""Fully connected layers and matrix products (paper §4.1, §5.2, Appendix B; Table 4 "fully connected").

Counting: a multiply-add is 2 FLOP (Narayanan et al. 2021, Appendix), so a dot product of length k is
``2k`` FLOP; its depth is one multiply followed by a reduction tree, ``1 + ceil(log2 k)`` (paper §2.5).
Forward ``y = x w`` (N x C_in by C_in x C_out), ``∇x = ∇y wᵀ`` (sums over C_out, depth log C_out),
``∇w = xᵀ ∇y`` (sums over N, depth log N), as in Appendix B.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks

SRC_FC = "paper §4.1/App. B (FC = GEMM), Table 4; 2 FLOP per multiply-add (Narayanan et al. 2021, App.)"


def gemm(m, n, k, batch=1, value_bytes=4) -> OpCost:
    """``C = A B`` with A (m x k), B (k x n), ``batch`` independent products (batched GEMM).

    ``grad_input`` is ∇A = ∇C Bᵀ (m x n by n x k); ``grad_weight`` is ∇B = Aᵀ ∇C (k x m by m x n).

    >>> c = gemm(2, 3, 4)
    >>> c.forward.flop, c.forward.depth, c.forward.bytes, c.forward.macs
    (48, 3, 104, 24)
    """
    m, n, k = checks.size("m", m), checks.size("n", n), checks.size("k", k)
    batch, vb = checks.size("batch", batch), checks.value_bytes(value_bytes)
    macs = batch * m * n * k
    fwd = Cost(flop=2 * macs, depth=1 + clog2(k), bytes=vb * batch * (m * k + k * n + m * n), macs=macs,
               act_bytes=vb * batch * (m * k + k * n))
    gin = Cost(flop=2 * macs, depth=1 + clog2(n), bytes=vb * batch * (m * n + k * n + m * k), macs=macs)
    gw = Cost(flop=2 * macs, depth=1 + clog2(m), bytes=vb * batch * (m * k + m * n + k * n), macs=macs)
    return OpCost("gemm", fwd, gin, gw, SRC_FC)


def linear(n, c_in, c_out, bias: bool = True, value_bytes=4) -> OpCost:
    """Fully connected layer on ``n`` rows (samples or tokens): ``y = x w + b``.

    Parameters are ``c_in*c_out (+ c_out)``; the stored activation is the input x.

    >>> fc = linear(2, 3, 4)
    >>> fc.params, fc.forward.flop, fc.forward.depth
    (16, 56, 4)
    >>> fc.grad_input.flop, fc.grad_input.depth, fc.grad_weight.flop, fc.grad_weight.depth
    (48, 3, 52, 2)
    """
    n, c_in, c_out = checks.size("n", n), checks.size("c_in", c_in), checks.size("c_out", c_out)
    vb = checks.value_bytes(value_bytes)
    macs = n * c_in * c_out
    nb = 1 if bias else 0
    params = c_in * c_out + nb * c_out
    fwd = Cost(flop=2 * macs + nb * n * c_out, depth=1 + clog2(c_in) + nb,
               bytes=vb * (n * c_in + params + n * c_out), params=params, act_bytes=vb * n * c_in, macs=macs)
    gin = Cost(flop=2 * macs, depth=1 + clog2(c_out), bytes=vb * (n * c_out + c_in * c_out + n * c_in), macs=macs)
    # ∇w = xᵀ∇y (2 n c_in c_out) alongside ∇b = column sums of ∇y (c_out reductions of n values, W = n - 1)
    gw_w = Cost(flop=2 * macs, depth=1 + clog2(n), bytes=vb * (n * c_in + n * c_out + c_in * c_out), macs=macs)
    gw_b = Cost(flop=nb * c_out * (n - 1), depth=nb * clog2(n), bytes=nb * vb * (n * c_out + c_out))
    return OpCost("linear", fwd, gin, gw_w | gw_b, SRC_FC)
