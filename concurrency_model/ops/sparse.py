"""Sparse matrix products: a pruned weight matrix A (m x k) times dense activations B (k x n), C = A B.

* **Unstructured sparsity, CSR** (compressed sparse row; Saad 2003, *Iterative Methods for Sparse Linear
  Systems*, §3.4): ``nnz`` values with one column index each and ``m + 1`` row offsets. One multiply-add
  per nonzero and column of B, ``W = 2 nnz n``; each output is a dot product over its row's nonzeros, at
  most ``ceil(nnz / m)`` of them when they are spread evenly over the rows (paper §2.5: depth of a
  reduction ``ceil(log2 n)``).
* **2:4 structured sparsity** (NVIDIA Ampere architecture, hardware.md [R1]: two nonzeros in every group
  of four along k, stored as the two values and a 2-bit index each; the sparse tensor cores skip the
  zeros): ``nnz = m k / 2``, the same counts with ``METADATA_BITS`` per kept value instead of an index.

Passes (as :func:`.dense.linear`, Appendix B of the paper): forward ``C = A B``; ``grad_input`` is
``∇B = Aᵀ ∇C`` over the same nonzeros (a column of A has ``ceil(nnz / k)`` of them when spread evenly);
``grad_weight`` is ``∇A = ∇C Bᵀ`` at the nonzeros only (a sampled dense-dense product: pruned weights stay
zero), a dot product of length n each.
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ..choices import STRUCTURED, parse_sparsity  # the field's values (re-exported)
from ..cost import Cost, OpCost, clog2
from . import checks

SRC_SPARSE = ("CSR: Saad 2003 §3.4; 2:4: NVIDIA Ampere architecture [R1]; W = 2 nnz n (one multiply-add per "
              "nonzero and column), paper §2.5 depth of a reduction")
INDEX_BYTES = 4  # a CSR column index or row offset (int32, as cuSPARSE's default)
METADATA_BITS = 2  # 2:4: the position of each kept value within its group of four


def nnz_of(m, k, sparsity: float):
    """Nonzeros of an ``m x k`` matrix with a fraction ``sparsity`` of zeros, rounded (an int, or an array
    for arrays of ``m`` and ``k``).

    >>> nnz_of(7680, 2560, 0.95), nnz_of(np.array([10, 20]), 10, 0.5).tolist()
    (983040, [50.0, 100.0])
    """
    s = parse_sparsity(sparsity)
    if s == STRUCTURED:
        raise ValueError("sparsity: a fraction of zeros is needed here; 2:4 keeps m k / 2 values")
    n = np.round((1.0 - s) * np.asarray(m, dtype=float) * np.asarray(k, dtype=float))
    return int(n) if n.ndim == 0 else n


def sparse_gemm(m, n, k, nnz, value_bytes=4, index_bytes=INDEX_BYTES) -> OpCost:
    """``C = A B`` with A (m x k) holding ``nnz`` nonzeros in CSR, B (k x n) and C dense.

    ``index_bytes`` per column index and row offset; for the 2:4 format use :func:`structured_gemm`.

    >>> c = sparse_gemm(4, 3, 8, 8)          # 2 nonzeros a row
    >>> c.forward.flop, c.forward.depth, c.forward.bytes   # 48 FLOP; 8*(4+4) + 5*4 + (24 + 12)*4
    (48, 2, 228)
    >>> c.grad_weight.flop, c.grad_weight.depth, c.params
    (48, 3, 8)
    """
    m, n, k = checks.size("m", m), checks.size("n", n), checks.size("k", k)
    nnz = checks.size("nnz", nnz, minimum=0)
    vb, ib = checks.value_bytes(value_bytes), checks.value_bytes(index_bytes)
    if nnz.is_number and nnz > m * k:
        raise ValueError(f"nnz: at most m * k = {m * k} nonzeros, got {nnz}")
    a_bytes = nnz * (vb + ib) + (m + 1) * ib
    return _passes("sparse_gemm", m, n, k, nnz, a_bytes, vb)


def structured_gemm(m, n, k, value_bytes=2) -> OpCost:
    """``C = A B`` with A (m x k) pruned to 2:4 along k (half of its values kept, each with a 2-bit index).

    >>> c = structured_gemm(4, 3, 8)
    >>> c.forward.flop, c.forward.bytes      # half the dense 192 FLOP; 16 values * (2 B + 2 bits) + (24 + 12) * 2
    (96, 108)
    """
    m, n, k = checks.size("m", m), checks.size("n", n), checks.size("k", k)
    vb = checks.value_bytes(value_bytes)
    nnz = m * k / 2
    return _passes("structured_gemm", m, n, k, nnz, nnz * (vb + sp.Rational(METADATA_BITS, 8)), vb)


def _passes(name, m, n, k, nnz, a_bytes, vb) -> OpCost:
    dense_bytes = (k * n + m * n) * vb
    work = 2 * nnz * n
    fwd = Cost(flop=work, depth=1 + clog2(sp.Max(1, sp.ceiling(nnz / m))), bytes=a_bytes + dense_bytes, params=nnz,
               act_bytes=k * n * vb, macs=nnz * n)
    gin = Cost(flop=work, depth=1 + clog2(sp.Max(1, sp.ceiling(nnz / k))), bytes=a_bytes + dense_bytes, macs=nnz * n)
    gw = Cost(flop=work, depth=1 + clog2(n), bytes=a_bytes + dense_bytes, macs=nnz * n)
    return OpCost(name, fwd, gin, gw, SRC_SPARSE)
