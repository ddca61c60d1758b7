"""Time of recurrent layers (RNN, LSTM, GRU), as cuDNN runs them (Appleyard, Kocisky & Blunsom 2016,
arXiv 1604.01946): one GEMM for the input projections of all steps, then per step the recurrent GEMM
(batch x G*H x H) and an element-wise cell kernel; ``efficiency.rnn`` scales the total.

Per step the library's host loop launches the kernels and keeps the stream in order; what that costs
beyond the two launches is ``efficiency.rnn_sync`` launch overheads a step (cuDNN's
CUDNN_RNN_ALGO_STANDARD, which DeepBench uses, issues every step from the host; DeepBench's smallest
layers take 14-75 us a step on every GPU, far above their GEMM and cell work). cuDNN fuses the whole
cell into one kernel (Appleyard et al. 2016, "fusing element-wise operations"); a library that runs
each element-wise stage as its own kernel (MIOpen's RNN, src/ocl/rnnocl.cpp, calls OpTensor and
activation kernels per gate) pays ``efficiency.rnn_unfused`` launch overheads per dependent stage of the cell (the cell depth of
:data:`..ops.recurrent.CELLS`: RNN 1, LSTM 8, GRU 9). Both are fitted per device (0 if fused).

``input_size=0`` is a layer without input projection (cuDNN ``CUDNN_SKIP_INPUT``, MIOpen
``miopenRNNskip``: x, of the hidden size, is added to every gate): no input GEMM, no ∇W_ih GEMM and no
∇x GEMM (∇x is the sum of the gate gradients, read by the cell kernel). Baidu DeepBench's
``rnn_bench`` builds its layers this way; its published TFLOP/s count the recurrent GEMM only.
"""
from __future__ import annotations

import numpy as np

from ..ops.recurrent import CELLS
from ..units import dtype_bytes
from . import Coeffs, OpTime, device, gemm_coeffs, positive_int, roofline_coeffs


RNN_PASSES = ("forward", "grad_input", "grad_weight")


def _nothing(rows: int, c: Coeffs) -> Coeffs:
    """A part that takes no time (the input GEMM of a layer without input projection)."""
    z = np.zeros(rows)
    return Coeffs(z, z, z, z, z, c.rate, z, z, {}, c.math_dtype)


def rnn_parts(cell: str, hidden, batch, timesteps, dev, dtype: str = "fp32", input_size=None,
              pass_: str = "forward", math_dtype: str | None = None) -> list[tuple[Coeffs, np.ndarray]]:
    """The kernels of one RNN/LSTM/GRU layer pass as (coefficients, how many times) for rows of sizes:
    ``forward``: the input GEMM of all steps, then per step the recurrent GEMM and the cell kernel;
    ``grad_input``: the same shapes transposed (back-propagation through time); ``grad_weight``: two
    GEMMs summing over batch and time. ``input_size`` 0: no input projection (see the module)."""
    if cell not in CELLS:
        raise ValueError(f"cell: unknown {cell!r}; allowed: {', '.join(CELLS)}")
    if pass_ not in RNN_PASSES:
        raise ValueError(f"pass: unknown {pass_!r}; allowed: {', '.join(RNN_PASSES)}")
    h, nb, T = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (hidden, batch, timesteps)))
    i = h if input_size is None else np.broadcast_to(np.asarray(input_size, dtype=np.int64), h.shape)
    skip = i == 0
    i = np.where(skip, h, i)  # shapes for the (then unused) input GEMM
    g, cell_ops, depth = CELLS[cell]
    vb = dtype_bytes(dtype)
    e = dev.efficiency

    def gm(m, n_, k):
        return gemm_coeffs(m, n_, k, dev, dtype, 1, math_dtype)

    def unless_skip(c: Coeffs) -> Coeffs:
        if not skip.any():
            return c
        z = _nothing(len(h), c)
        pick = {f: np.where(skip, getattr(z, f), getattr(c, f))
                for f in ("a_math", "a_feed", "a_mem", "a_extra", "launches", "flop", "bytes")}
        return Coeffs(**pick, rate=c.rate, info=c.info, math_dtype=c.math_dtype)

    one = np.ones(len(h))
    if pass_ == "grad_weight":
        return [(unless_skip(gm(g * h, i, T * nb)), one), (gm(g * h, h, T * nb), one)]
    # the cell reads the gate pre-activations and c, writes h and c (and the gates for BPTT); one kernel
    # plus the step's synchronisation and, if the library does not fuse the cell, a launch per stage
    cell_k = roofline_coeffs(nb * h * cell_ops, nb * h * (g + 2) * vb * 2, dev, dtype,
                             1 + e.rnn_sync + e.rnn_unfused * depth)
    if pass_ == "forward":
        return [(unless_skip(gm(T * nb, g * h, i)), one), (gm(nb, g * h, h), T.astype(float)),
                (cell_k, T.astype(float))]
    return [(unless_skip(gm(T * nb, i, g * h)), one), (gm(nb, h, g * h), T.astype(float)), (cell_k, T.astype(float))]


def rnn_seconds(*args, **kwargs) -> np.ndarray:
    """Seconds of :func:`rnn_parts` for every row (numbers only), times ``efficiency.rnn``."""
    dev = args[4]
    return sum(c.seconds(dev) * k for c, k in rnn_parts(*args, **kwargs)) * dev.efficiency.rnn


def rnn_time(cell: str, hidden, batch, timesteps, dev, dtype: str = "fp32", input_size=None,
             pass_: str = "forward", math_dtype: str | None = None) -> OpTime:
    """Time of one unidirectional RNN/LSTM/GRU layer pass (see :func:`rnn_parts`).

    >>> t = rnn_time("lstm", 512, 16, 50, "v100-sxm2-32gb")
    >>> t.detail["timesteps"], t.time_s > 50 * 2 * 5e-6     # two kernels a step, 5 us launches
    (50, True)
    >>> rnn_time("lstm", 512, 16, 50, "v100-sxm2-32gb", input_size=0).time_s < t.time_s   # no input GEMM
    True
    """
    dev = device(dev)
    h, nb, T = positive_int("hidden", hidden), positive_int("batch", batch), positive_int("timesteps", timesteps)
    i = None if input_size is None or input_size == 0 else positive_int("input_size", input_size)
    out = None
    for c, k in rnn_parts(cell, h, nb, T, dev, dtype, 0 if input_size == 0 else i, pass_, math_dtype):
        part = c.assemble(dev).scale(int(k[0]))
        out = part if out is None else out + part
    r = dev.efficiency.rnn
    return OpTime(out.time_s * r, out.compute_s * r, out.memory_s * r, out.overhead_s * r, out.flop, out.bytes,
                  out.bound, {"timesteps": T}, dev.decide)


__all__ = ["rnn_parts", "rnn_seconds", "rnn_time"]
