"""Time of an operator on one device: a roofline with the efficiencies that make real kernels slower.

``T = max(flop / (peak * eff_c), bytes / (bw * eff_m)) + launch`` (Williams, Waterman & Patterson 2009,
the roofline model), refined for the matrix products that dominate DNN time (:mod:`.gemm`: tile and wave
quantization, L2 feed of small tiles, split-K, kernel choice) and for the algorithm a convolution uses
(:mod:`.layers`). Matrix math runs at the device's peak for its dtype (tensor cores where there are
any; libraries pad shapes that are not multiples of 8, which DeepBench's V100 fp16 rows confirm).

Kernel models compute :class:`Coeffs`: numpy arrays of coefficients of ``1/peak``, ``1/bw`` and ``launch``.
``seconds`` evaluates them for many rows at once (validation, fitting, sweeps); ``assemble`` builds one
row's time as a number, or as a sympy expression when the device's fields are symbols
(``hardware.symbolic``); discrete choices are then made with the numbers in ``device.decide``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import sympy as sp

from ..checks import count
from ..cost import to_json
from ..hardware.devices import Device, load_device
from ..units import dtype_bytes
from . import gemm as gemm_model

@dataclass(frozen=True)
class OpTime:
    """Seconds of one operator on one device, with the part that binds (``compute`` or ``memory``)."""

    time_s: object
    compute_s: object
    memory_s: object
    overhead_s: object
    flop: object
    bytes: object
    bound: str
    detail: dict = field(default_factory=dict, compare=False)
    decide: dict = field(default_factory=dict, compare=False, repr=False)  # numbers for a symbolic device

    def __add__(self, other: "OpTime") -> "OpTime":
        """Kernels one after another; the bound is the one of the longer part."""
        d = {**other.decide, **self.decide}
        mine, theirs = decided_float(self.time_s - self.overhead_s, d), decided_float(other.time_s - other.overhead_s, d)
        return OpTime(self.time_s + other.time_s, self.compute_s + other.compute_s, self.memory_s + other.memory_s,
                      self.overhead_s + other.overhead_s, self.flop + other.flop, self.bytes + other.bytes,
                      self.bound if mine >= theirs else other.bound, {**other.detail, **self.detail}, d)

    def scale(self, k) -> "OpTime":
        """``k`` identical kernels one after another."""
        return OpTime(self.time_s * k, self.compute_s * k, self.memory_s * k, self.overhead_s * k,
                      self.flop * k, self.bytes * k, self.bound, self.detail, self.decide)

    def as_dict(self) -> dict:
        return {"time_s": to_json(self.time_s), "flop": to_json(self.flop), "bytes": to_json(self.bytes), "bound": self.bound,
                "compute_s": to_json(self.compute_s), "memory_s": to_json(self.memory_s),
                "overhead_s": to_json(self.overhead_s), **self.detail}


def decided_float(x, decide: dict | None = None) -> float:
    """A float for decisions; symbols are replaced by ``decide``."""
    if isinstance(x, (int, float, np.floating, np.integer)):
        return float(x)
    x = sp.sympify(x)
    if decide:
        x = x.subs(decide)
    if x.free_symbols:
        names = ", ".join(sorted(s.name for s in x.free_symbols))
        raise ValueError(f"decide: pass numbers for {names} to choose kernels for a symbolic device")
    return float(x)


def _max(a, b):
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return max(a, b)
    return sp.Max(a, b)


def device(d) -> Device:
    return d if isinstance(d, Device) else load_device(d)


def positive_int(name: str, v) -> int:
    """A size: a positive integer, also written as a whole float (DeepBench's columns, pandas rows)."""
    return count(name, int(v) if isinstance(v, float) and v.is_integer() else v)


@dataclass
class Coeffs:
    """Time coefficients per row: ``max(max(a_math/peak, a_feed/bw), a_mem/bw) + a_extra/bw +
    launches*launch``; ``rate`` is the peak FLOP/s used for the choice; ``flop``/``bytes`` the work and minimum traffic."""

    a_math: np.ndarray
    a_feed: np.ndarray
    a_mem: np.ndarray
    a_extra: np.ndarray
    launches: np.ndarray
    rate: np.ndarray
    flop: np.ndarray
    bytes: np.ndarray
    info: dict = field(default_factory=dict)
    math_dtype: str = "fp32"
    vector: bool = False  # element-wise work: the non-tensor rate

    def seconds(self, dev: Device) -> np.ndarray:
        bw, launch = decided_float(dev.mem_bw, dev.decide), decided_float(dev.launch_overhead, dev.decide)
        return (np.maximum(np.maximum(self.a_math / self.rate, self.a_feed / bw), self.a_mem / bw)
                + self.a_extra / bw + self.launches * launch)

    def assemble(self, dev: Device, i: int = 0) -> OpTime:
        """Row ``i`` as an :class:`OpTime`, in the device's (possibly symbolic) peak, bandwidth and launch."""
        rate = dev.vector_flops.get(self.math_dtype, dev.peak(self.math_dtype)) if self.vector \
            else dev.peak(self.math_dtype)
        bw, launch = dev.mem_bw, dev.launch_overhead
        comp = _max(float(self.a_math[i]) / rate, float(self.a_feed[i]) / bw) if self.a_feed[i] else \
            float(self.a_math[i]) / rate
        mem = float(self.a_mem[i]) / bw
        over = float(self.a_extra[i]) / bw + float(self.launches[i]) * launch
        bound = "compute" if decided_float(comp, dev.decide) >= decided_float(mem, dev.decide) \
            else "memory"
        detail = {k: (v[i].item() if isinstance(v, np.ndarray) else v) for k, v in self.info.items()}
        return OpTime(_max(comp, mem) + over, comp, mem, over, _num(self.flop[i]), _num(self.bytes[i]), bound, detail,
                      dev.decide)


def _num(x):
    x = float(x)
    return int(x) if x.is_integer() else x


def roofline_coeffs(flop, bytes_, dev: Device, dtype: str = "fp32", kernels=1, vector: bool = True) -> Coeffs:
    """Coefficients of ``max(flop/(peak compute), bytes/(bw memory)) + kernels * launch`` (rows: arrays),
    for element-wise and memory-bound work (``vector``: arithmetic on the non-tensor units)."""
    flop, bytes_, kernels = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.float64))
                                                  for x in (flop, bytes_, kernels)))
    e = dev.efficiency
    rate = dev.vector_flops.get(dtype, dev.peak(dtype)) if vector else dev.peak(dtype)
    zero = np.zeros_like(flop)
    return Coeffs(flop / e.compute, zero, bytes_ / e.memory, zero, kernels, np.full(len(flop), decided_float(rate, dev.decide)),
                  flop, bytes_, {}, dtype, vector)


def roofline(flop, bytes_, dev, dtype: str = "fp32", kernels: int = 1, vector: bool = True) -> OpTime:
    """Roofline time of one element-wise or memory-bound kernel (see :func:`roofline_coeffs`)."""
    dev = device(dev)
    if isinstance(flop, sp.Basic) or isinstance(bytes_, sp.Basic):
        flop, bytes_ = decided_float(flop), decided_float(bytes_)
    return roofline_coeffs(flop, bytes_, dev, dtype, kernels, vector).assemble(dev)


def gemm_coeffs(m, n, k, dev: Device, dtype: str = "fp32", batch=1, math_dtype: str | None = None,
                weight_bytes: float | None = None) -> Coeffs:
    """Coefficients of the chosen GEMM kernel for rows of shapes (arrays or numbers); ``weight_bytes``: bytes
    per value of B (k x n) when it is stored narrower than ``dtype`` (weight-only quantization, :mod:`.gemm`)."""
    m, n, k, batch = np.broadcast_arrays(*(np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in (m, n, k, batch)))
    vb = dtype_bytes(dtype)
    rate = np.full(len(m), decided_float(dev.peak(math_dtype or dtype), dev.decide))
    kern = gemm_model.kernel(m, n, k, batch, vb, dev.multiprocessors, rate, decided_float(dev.mem_bw, dev.decide),
                        decided_float(dev.launch_overhead, dev.decide), dev.efficiency, weight_bytes)
    tiles = gemm_model.TILES[kern["tile"]]
    info = {"tile": np.array([f"{a}x{b}" for a, b in tiles]), "split_k": kern["split"], "waves": kern["waves"]}
    wb = vb if weight_bytes is None else weight_bytes
    return Coeffs(kern["a_math"], kern["a_feed"], kern["a_mem"], kern["a_red"], kern["launches"] + 1.0, rate,
                  2.0 * m * n * k * batch, ((m * k + m * n) * vb + k * n * wb) * batch, info, math_dtype or dtype)


def cuda_core_factor(dev: Device, dtype: str) -> float:
    """How much slower a product whose math would run at ``dtype``'s peak runs on the CUDA cores in fp32: the peak
    over the fp32 vector rate (A100: 312 / 19.5 = 16 for fp16), for the kernels a library runs there (cuDNN's fused
    Winograd, :mod:`.conv`; a 16-bit product whose operands are not 16-byte aligned, :mod:`.layers`).

    >>> cuda_core_factor(device("a100-sxm4-80gb"), "fp16")
    16.0
    """
    fp32 = dev.vector_flops.get("fp32", dev.peak_flops.get("fp32", dev.peak(dtype)))
    return decided_float(dev.peak(dtype), dev.decide) / decided_float(fp32, dev.decide)


def gemm_time(m, n, k, dev, dtype: str = "fp32", batch: int = 1, math_dtype: str | None = None) -> OpTime:
    """Time of ``batch`` products C (m x n) = A (m x k) B (k x n) stored in ``dtype``, multiplied in
    ``math_dtype`` (default ``dtype``; e.g. fp16 storage with fp32 math on a P100).

    >>> t = gemm_time(8192, 8192, 8192, "a100-sxm4-80gb", "fp16")
    >>> t.bound, t.detail["tile"]
    ('compute', '256x128')
    """
    dev = device(dev)
    m, n, k, batch = (positive_int(a, v) for a, v in (("m", m), ("n", n), ("k", k), ("batch", batch)))
    return gemm_coeffs(m, n, k, dev, dtype, batch, math_dtype).assemble(dev)


from .layers import attention_time, conv_coeffs, conv_time, op_time  # noqa: E402
from .recurrent import rnn_parts, rnn_seconds, rnn_time  # noqa: E402

__all__ = ["OpTime", "Coeffs", "roofline", "roofline_coeffs", "gemm_coeffs", "gemm_time", "cuda_core_factor",
           "conv_coeffs", "conv_time", "rnn_parts", "rnn_seconds", "rnn_time", "attention_time", "op_time"]
