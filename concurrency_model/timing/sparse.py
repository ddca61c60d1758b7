"""Time of a sparse matrix product on one device: A (m x k) pruned, B (k x n) and C dense (:mod:`..ops.sparse`).

* **Unstructured (CSR)**, ``sparsity`` a fraction of zeros: sparse kernels have no register tiles to reuse
  A across the columns of B, so they are memory-bound (Bell & Garland 2009, "Implementing sparse
  matrix-vector multiplication on throughput-oriented processors": CSR kernels run at the bandwidth).
  Model (this toolkit's assumption): each column of B is its own sparse matrix-vector product, which
  streams A's CSR arrays (values, column indices, row offsets) once; the column of B it gathers from
  (``k`` values) stays in cache, B and C move once. A's arrays come from DRAM at ``efficiency.memory``
  when they are larger than the L2 (``l2_bytes``), else, after the first column, from the L2 at
  ``l2_factor`` x the DRAM bandwidth. The math (``2 nnz n`` FLOP on the CUDA cores at
  ``efficiency.compute``) is a floor that these shapes never reach. DeepBench's sparse sheet supports it:
  at n = 1,500-6,000 the measured time per column of B is A's CSR bytes at 0.75-0.95 of the DRAM
  bandwidth on the three GP102 boards (``benchmarks/kernel_accuracy.py``, ``sparse``).
* **2:4 structured** (``sparsity="2:4"``): the GEMM model of :mod:`.gemm` on the sparse tensor cores: the
  math at the device's ``sparse_flops`` (twice the dense rate, datasheet figures in dense-equivalent
  FLOP), A read at half its size plus a 2-bit index per kept value (NVIDIA Ampere architecture [R1]).
  Only devices with a ``sparse_flops`` rate for the dtype have it (Ampere and later).

Each time comes with the same product dense (``dense_time_s``) and ``speedup_vs_dense``.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from ..ops.sparse import INDEX_BYTES, METADATA_BITS, STRUCTURED, nnz_of, parse_sparsity
from ..units import dtype_bytes
from . import Coeffs, OpTime, decided_float, device, gemm_coeffs, positive_int

__all__ = ["STRUCTURED", "parse_sparsity", "csr_coeffs", "structured_coeffs", "sparse_core", "sparse_gemm_time",
           "break_even_n"]


def csr_coeffs(m, n, k, sparsity: float, dev, dtype: str = "fp32", batch=1) -> Coeffs:
    """Coefficients of the CSR product (see the module docstring) for rows of shapes (arrays or numbers)."""
    m, n, k, batch = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (m, n, k, batch)))
    e, vb = dev.efficiency, dtype_bytes(dtype)
    nnz = nnz_of(m, k, sparsity)
    csr = nnz * (vb + INDEX_BYTES) + (m + 1) * INDEX_BYTES
    cached = csr <= dev.l2_bytes
    again = np.where(cached, 1.0 / e.l2_factor, 1.0 / e.memory)  # A once more per further column of B
    dense = (k * n + m * n) * vb
    a_mem = batch * (csr / e.memory + (n - 1) * csr * again + dense / e.memory)
    flop = 2.0 * nnz * n * batch
    rate = dev.vector_flops.get(dtype, dev.peak(dtype))
    zero = np.zeros_like(m)
    info = {"format": "csr", "nnz": nnz.astype(np.int64), "csr_in_l2": cached}
    return Coeffs(flop / e.compute, zero, a_mem, zero, np.ones_like(m), np.full(m.shape, decided_float(rate, dev.decide)),
                  flop, batch * (csr + dense), info, dtype, vector=True)


def sparse_core(dev, dtype: str):
    """The device whose ``dtype`` peak is its 2:4 ``sparse_flops`` rate; ``ValueError`` naming ``sparsity``
    where it has none."""
    rate = dev.sparse_flops.get(dtype)
    if rate is None:
        have = ", ".join(dev.sparse_flops) or "none"
        raise ValueError(f"sparsity: {STRUCTURED} needs sparse tensor cores with a {dtype} rate; {dev.name} has "
                         f"sparse_flops for {have}")
    return replace(dev, peak_flops={**dev.peak_flops, dtype: rate})


def structured_coeffs(m, n, k, dev, dtype: str = "fp16", batch=1, value_bytes: float | None = None) -> Coeffs:
    """Coefficients of the 2:4 product on the sparse tensor cores (assemble them with :func:`sparse_core`
    of the device): :func:`gemm_coeffs` of ``Cᵀ = Bᵀ Aᵀ``, whose weight operand is Aᵀ, stored at
    ``(value + 2 bits) / 2`` bytes a value (``value_bytes`` a kept value, default ``dtype``'s)."""
    vb = dtype_bytes(dtype) if value_bytes is None else value_bytes
    c = gemm_coeffs(n, m, k, sparse_core(dev, dtype), dtype, batch, weight_bytes=(vb + METADATA_BITS / 8) / 2)
    c.flop = c.flop / 2  # the products actually computed (ops.sparse.structured_gemm's W)
    c.info["format"] = STRUCTURED
    return c


def sparse_gemm_time(m, n, k, dev, dtype: str = "fp32", sparsity=0.9, batch: int = 1) -> OpTime:
    """Time of ``batch`` products C (m x n) = A (m x k) B (k x n) with A sparse: ``sparsity`` a fraction of zeros
    (CSR) or ``"2:4"`` (sparse tensor cores), with the dense product's time for comparison.

    >>> t = sparse_gemm_time(7680, 1, 2560, "gtx-1080-ti", "fp32", 0.95)   # DeepBench: 34 us measured
    >>> round(t.time_s * 1e6), t.bound, t.detail["speedup_vs_dense"] > 1
    (24, 'memory', True)
    """
    dev = device(dev)
    m, n, k, batch = (positive_int(a, v) for a, v in (("m", m), ("n", n), ("k", k), ("batch", batch)))
    s = parse_sparsity(sparsity)
    if s == STRUCTURED:
        t = structured_coeffs(m, n, k, dev, dtype, batch).assemble(sparse_core(dev, dtype))
    else:
        t = csr_coeffs(m, n, k, s, dev, dtype, batch).assemble(dev)
    dense = gemm_coeffs(m, n, k, dev, dtype, batch).assemble(dev)
    ts, td = decided_float(t.time_s, dev.decide), decided_float(dense.time_s, dev.decide)
    keep = {key: t.detail[key] for key in ("format", "nnz", "csr_in_l2", "tile", "split_k") if key in t.detail}
    detail = {**keep, "sparsity": s, "dense_time_s": td, "speedup_vs_dense": td / ts}
    return replace(t, detail=detail)


def break_even_n(m, k, dev, dtype: str = "fp32", sparsity=0.9, batch: int = 1, limit: int = 8192):
    """The smallest n (columns of B: the batch of a layer) from which the dense product is faster than the sparse
    one, or ``None`` if the sparse one is at least as fast up to ``limit`` (every n evaluated at once).

    >>> break_even_n(7680, 2560, "gtx-1080-ti", "fp32", 0.95)   # DeepBench: 4.3x faster at n = 4, 5.7x slower at 1,500
    11
    """
    dev = device(dev)
    s = parse_sparsity(sparsity)
    n = np.arange(1, positive_int("limit", limit) + 1)
    if s == STRUCTURED:
        sparse = structured_coeffs(m, n, k, dev, dtype, batch).seconds(sparse_core(dev, dtype))
    else:
        sparse = csr_coeffs(m, n, k, s, dev, dtype, batch).seconds(dev)
    slower = gemm_coeffs(m, n, k, dev, dtype, batch).seconds(dev) < sparse
    return int(n[np.argmax(slower)]) if slower.any() else None
