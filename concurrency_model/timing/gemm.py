"""The GEMM kernel model, vectorised over rows of shapes (numpy), with the decisions a library makes.

A GEMM kernel (cuBLAS, CUTLASS) covers C (m x n) with Tm x Tn output tiles, one thread block each; a
multiprocessor holds ``FULL_TILE / (Tm Tn)`` blocks at once, so the device computes in
``ceil(tiles / (SMs x blocks))`` waves and a partial last wave costs a full one (tile and wave
quantization: NVIDIA, "Matrix Multiplication Background User's Guide"). Per wave each multiprocessor
runs its blocks at the smaller of its math rate (``peak / SMs x compute``) and its share of the L2
bandwidth that feeds the tiles ((Tm + Tn) values per k step; L2 = ``l2_factor`` x DRAM bandwidth);
each tile pays ``k_startup`` extra k steps (pipeline fill, epilogue). B (k x n, the weights of a layer) may
be stored narrower than A and C (``weight_bytes``: weight-only quantization, dequantized inside the kernel's
main loop, so that only its DRAM and L2 traffic shrink). Split-K divides k over more blocks
(each block runs at least ``MIN_SPLIT_K`` steps, zero-padded, so a larger k is never faster) and adds a
pass over the fp32 partial sums. The whole kernel cannot be faster than moving its operands
once through DRAM at ``memory`` x the bandwidth. The library's choice is the fastest candidate.

Every time is returned as coefficients of ``1/peak``, ``1/bw`` and ``launch``, so that the caller can put
numbers or sympy symbols in: ``t = max(max(a_math/peak, a_feed/bw), a_mem/bw) + a_red/bw + launches*launch``.
"""
from __future__ import annotations

import numpy as np

TILES = np.array([(256, 128), (128, 256), (128, 128), (256, 64), (64, 256), (128, 64), (64, 128), (64, 64),
                  (128, 32), (32, 128), (64, 32), (32, 64), (32, 32), (128, 16), (16, 128)])
FULL_TILE = 128 * 128
SPLITS = np.array([1, 2, 4, 8, 16, 32, 64, 128, 256])
MIN_SPLIT_K = 64  # a block of a split runs at least this many k steps (k is zero-padded if needed)
ACCUMULATOR_BYTES = 4  # split-K partial sums are fp32


def kernel(m, n, k, batch, value_bytes, sms, peak, bw, launch, eff, weight_bytes=None) -> dict:
    """Best kernel for each row. ``m, n, k, batch``: int arrays of one length (or scalars); ``weight_bytes``:
    bytes per value of B (default ``value_bytes``);
    ``peak`` (per row or one), ``bw``, ``launch``: numbers used for the choice; ``eff``: an
    :class:`~concurrency_model.hardware.devices.Efficiency`.

    Returns arrays: ``a_math, a_feed, a_mem, a_red, launches`` (see the module docstring), ``time``
    (seconds, with the launch overheads), ``tile`` index into ``TILES``, ``split``, ``waves``.
    """
    m, n, k, batch = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in (m, n, k, batch)))
    peak = np.asarray(peak, dtype=np.float64)
    vb = np.asarray(value_bytes, dtype=np.float64)
    wb = vb if weight_bytes is None else np.asarray(weight_bytes, dtype=np.float64)
    tm = TILES[:, 0][:, None, None].astype(np.float64)  # (tiles, 1, 1)
    tn = TILES[:, 1][:, None, None].astype(np.float64)
    s = SPLITS[None, :, None].astype(np.float64)  # (1, splits, 1)
    tiles = np.ceil(m / tm) * np.ceil(n / tn) * batch  # (tiles, 1, rows)
    ctas = np.maximum(1.0, np.floor(FULL_TILE / (tm * tn)))
    kk = np.maximum(np.ceil(k / s), np.where(s > 1, MIN_SPLIT_K, 1)) + eff.k_startup
    waves = np.ceil(tiles * s / (sms * ctas))
    a_math = waves * ctas * 2 * tm * tn * kk * sms / eff.compute  # seconds x peak
    a_feed = waves * ctas * (tm * vb + tn * wb) * kk * sms / eff.l2_factor  # seconds x bw
    a_mem = batch * ((m * k + m * n) * vb + k * n * wb) / eff.memory  # seconds x bw
    a_red = np.where(s > 1, 2 * s * m * n * batch * ACCUMULATOR_BYTES / eff.memory, 0.0)
    launches = np.where(s > 1, 1.0, 0.0) + 0 * a_math
    t = np.maximum(np.maximum(a_math / peak, a_feed / bw), a_mem / bw) + a_red / bw + launches * launch
    rows = t.shape[-1]
    flat = t.reshape(-1, rows)
    best = np.argmin(flat, axis=0)
    ti, si = np.unravel_index(best, t.shape[:2])
    pick = (ti, si, np.arange(rows))

    def at(a):
        return np.broadcast_to(a, t.shape)[pick]

    return {"a_math": at(a_math), "a_feed": at(a_feed), "a_mem": at(a_mem), "a_red": at(a_red),
            "launches": at(launches), "time": flat[best, np.arange(rows)] + launch, "tile": ti,
            "split": SPLITS[si], "waves": at(waves)}
