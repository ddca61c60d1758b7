"""Time of recurrent layers (RNN, LSTM, GRU), as cuDNN runs them (Appleyard, Kocisky & Blunsom 2016):
one GEMM for the input projections of all steps, then per step the recurrent GEMM (batch x G*H x H)
and an element-wise cell kernel; ``efficiency.rnn`` scales the total.
"""
from __future__ import annotations

import numpy as np

from ..units import dtype_bytes
from . import Coeffs, OpTime, device, gemm_coeffs, positive_int, roofline_coeffs


RNN_PASSES = ("forward", "grad_input", "grad_weight")


def rnn_parts(cell: str, hidden, batch, timesteps, dev, dtype: str = "fp32", input_size=None,
              pass_: str = "forward", math_dtype: str | None = None) -> list[tuple[Coeffs, np.ndarray]]:
    """The kernels of one RNN/LSTM/GRU layer pass as (coefficients, how many times) for rows of sizes:
    ``forward``: the input GEMM of all steps, then per step the recurrent GEMM and the cell kernel;
    ``grad_input``: the same shapes transposed (back-propagation through time); ``grad_weight``: two
    GEMMs summing over batch and time."""
    from ..ops.recurrent import CELLS
    if cell not in CELLS:
        raise ValueError(f"cell: unknown {cell!r}; allowed: {', '.join(CELLS)}")
    if pass_ not in RNN_PASSES:
        raise ValueError(f"pass: unknown {pass_!r}; allowed: {', '.join(RNN_PASSES)}")
    h, nb, T = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (hidden, batch, timesteps)))
    i = h if input_size is None else np.broadcast_to(np.asarray(input_size, dtype=np.int64), h.shape)
    g, cell_ops, _ = CELLS[cell]
    vb = dtype_bytes(dtype)

    def gm(m, n_, k):
        return gemm_coeffs(m, n_, k, dev, dtype, 1, math_dtype)

    one = np.ones(len(h))
    if pass_ == "grad_weight":
        return [(gm(g * h, i, T * nb), one), (gm(g * h, h, T * nb), one)]
    cell_k = roofline_coeffs(nb * h * cell_ops, nb * h * (g + 2) * vb * 2, dev, dtype)
    if pass_ == "forward":
        return [(gm(T * nb, g * h, i), one), (gm(nb, g * h, h), T.astype(float)), (cell_k, T.astype(float))]
    return [(gm(T * nb, i, g * h), one), (gm(nb, h, g * h), T.astype(float)), (cell_k, T.astype(float))]


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
    """
    dev = device(dev)
    h, nb, T = positive_int("hidden", hidden), positive_int("batch", batch), positive_int("timesteps", timesteps)
    i = None if input_size is None else positive_int("input_size", input_size)
    out = None
    for c, k in rnn_parts(cell, h, nb, T, dev, dtype, i, pass_, math_dtype):
        part = c.assemble(dev).scale(int(k[0]))
        out = part if out is None else out + part
    r = dev.efficiency.rnn
    return OpTime(out.time_s * r, out.compute_s * r, out.memory_s * r, out.overhead_s * r, out.flop, out.bytes,
                  out.bound, {"timesteps": T}, dev.decide)


__all__ = ["rnn_parts", "rnn_seconds", "rnn_time"]
