"""Time of convolution, recurrent and attention layers, and of any operator of the library.

* Convolution: :mod:`.conv` (implicit GEMM, im2col GEMM, col2im ∇x, Winograd; the fastest is used).
* Recurrent layers: :mod:`.recurrent`.
* Attention: plain = two batched GEMMs around a memory-bound softmax; fused (FlashAttention) = one
  kernel with Q/K/V/O traffic only, at its published speed where the device carries one
  (:mod:`.attention`), else compute-bound at the GEMMs' efficiency. The plain GEMMs of a 16-bit head whose rows
  are not a multiple of 16 bytes (a head dimension not a multiple of 8) run on the CUDA cores in fp32
  (:func:`.cuda_core_factor`; :data:`ALIGN_BYTES`).
* Anything else: the roofline of its work and minimum traffic (``op_time``).
"""
from __future__ import annotations

import numpy as np

from ..ops.attention import attention
from ..ops.conv import conv2d, pair
from ..units import dtype_bytes
from . import OpTime, cuda_core_factor, decided_float, gemm_coeffs, positive_int, roofline, roofline_coeffs
from . import device as as_device
from .attention import HALF_PRECISION, BOARD_PEAK, benchmark_flop, kernel_name
from .attention import efficiency as fused_efficiency
from .conv import CONV_PASSES, conv_coeffs  # noqa: F401 (re-exported)


def conv_time(n, c_in, c_out, h, w, kh, kw=None, stride=1, pad=0, dilation=1, groups=1, device="a100-sxm4-80gb",
              dtype: str = "fp32", pass_: str = "forward", algorithm: str = "auto",
              math_dtype: str | None = None) -> OpTime:
    """Time of a 2-D convolution's ``forward``, ``grad_input`` or ``grad_weight`` pass on a device;
    ``stride`` and ``pad`` are numbers or (height, width) pairs.

    >>> t = conv_time(32, 64, 64, 56, 56, 3, pad=1, device="v100-sxm2-32gb", dtype="fp16")
    >>> t.detail["algorithm"] in ("implicit_gemm", "winograd"), t.bound
    (True, 'compute')
    """
    dev = as_device(device)
    kw = kh if kw is None else kw
    (sh, sw), (ph, pw), (dilation, dw) = pair("stride", stride), pair("pad", pad), pair("dilation", dilation)
    if dilation != dw:
        raise ValueError(f"dilation: the timing model takes one value for both dimensions, got ({dilation}, {dw})")
    conv2d(n, c_in, c_out, h, w, kh, kw, (sh, sw), (ph, pw), dilation, groups, False)  # checks every argument
    c = conv_coeffs(n, c_in, c_out, h, w, kh, kw, sh, ph, dilation, groups, pass_, dev, dtype, math_dtype,
                    algorithm, stride_w=sw, pad_w=pw)
    return c.assemble(dev)


# The alignment tensor-core kernels need: NVIDIA/cutlass issue 75 (an NVIDIA answer): most tensor-core kernels
# "require 128b aligned memory accesses ... a documented requirement in cublas" (cuBLAS documentation, "Tensor Core
# Usage": a 16-bit product's dimensions, leading dimensions and pointers in multiples of 16 bytes, as recalled; the
# page was not read here). A plain attention's QKᵀ reduces over the head dimension d and its PV writes rows of d, and
# the rows of Q, K and V lie d values apart (torch's [b, heads, s, d]) or their heads 3d apart (Megatron's
# interleaved QKV), so a d whose 16-bit rows are not 16-byte aligned misaligns both products. That the library then
# takes a CUDA-core kernel (fp32 accumulation, the fp32 vector rate) is [D]; BigScience's layout search measured it:
# the same 182B model at head dimension 108 against 216 and 144 ran 27-31% slower in tokens/s at tensor 4 (this
# rule, not fitted: 30-32%), and its hidden-14,400 models (heads of 225, 150 and 450) were predicted 62% fast
# (median) without it, 25% with it, near the aligned widths' 14-20% (bigscience-workshop/bigscience @ 9e64ede,
# train/tr11-176B-ml/chronicles-prequel.md; docs/residuals.md).
ALIGN_BYTES = 16


def unaligned_head(head_dim: int, dtype: str) -> bool:
    """Whether a plain attention's products over heads of ``head_dim`` values in ``dtype`` leave the tensor cores
    (:data:`ALIGN_BYTES`: 16-bit rows not 16-byte aligned).

    >>> unaligned_head(108, "bf16"), unaligned_head(128, "bf16"), unaligned_head(108, "fp32")
    (True, False, False)
    """
    return dtype in HALF_PRECISION and (head_dim * dtype_bytes(dtype)) % ALIGN_BYTES != 0


def attention_time(batch, heads, seq, head_dim, dev, dtype: str = "fp16", fused: bool = False,
                   causal: bool = False, pass_: str = "forward") -> OpTime:
    """Attention core: plain (batched QKᵀ and PV GEMMs around a memory-bound softmax; backward twice
    each GEMM) or fused (one compute-bound kernel, FlashAttention; backward recomputes QKᵀ)."""
    dev = as_device(dev)
    b, hd = positive_int("batch", batch), positive_int("heads", heads)
    s, d = positive_int("seq", seq), positive_int("head_dim", head_dim)
    if pass_ not in ("forward", "backward"):
        raise ValueError(f"pass: unknown {pass_!r}; allowed: forward, backward")
    vb = dtype_bytes(dtype)
    op = attention(b, hd, s, d, fused=fused, causal=causal, value_bytes=vb)
    cost = op.forward if pass_ == "forward" else op.backward
    out = None
    for c, k in attention_kernels(cost, b, hd, s, d, dev, dtype, fused, causal, pass_):
        part = c.assemble(dev).scale(k)
        out = part if out is None else out + part
    return OpTime(out.time_s, out.compute_s, out.memory_s, out.overhead_s, int(cost.flop), int(cost.bytes),
                  out.bound, {"fused": fused}, dev.decide)


def attention_kernels(cost, b: int, hd: int, s: int, d: int, dev, dtype: str, fused: bool, causal: bool,
                      pass_: str, s_kv: int | None = None) -> list:
    """The kernels of :func:`attention_time` as ``(Coeffs, times)``; ``s`` queries against ``s_kv`` keys (default
    ``s``; more: a prompt after a cached prefix, ``cost`` the op's for those sizes)."""
    if fused:
        published = _published_kernel(cost, b, hd, s, d, dev, dtype, fused, causal, pass_, s_kv)
        if published is not None:
            return [(published, 1)]
        return [(roofline_coeffs(decided_float(cost.flop), decided_float(cost.bytes), dev, dtype, kernels=1, vector=False), 1)]
    k = 1 if pass_ == "forward" else 2
    bh = b * hd
    vb = dtype_bytes(dtype)
    t = s if s_kv is None else s_kv
    # scale, (mask,) softmax: element-wise kernels that each read and write the s x t scores
    passes = 3 if causal else 2
    qk, pv = gemm_coeffs(s, t, d, dev, dtype, bh, None), gemm_coeffs(s, d, t, dev, dtype, bh, None)
    if unaligned_head(d, dtype):  # a 16-bit head not 16-byte aligned (ALIGN_BYTES)
        slow = cuda_core_factor(dev, dtype)
        qk.a_math, pv.a_math = qk.a_math * slow, pv.a_math * slow
    return [(qk, k),
            (roofline_coeffs(bh * s * (5 * t + passes - 1), 2 * passes * k * bh * s * t * vb, dev, dtype,
                             kernels=passes * k), 1),
            (pv, k)]


def _published_kernel(cost, b: int, hd: int, s: int, d: int, dev, dtype: str, fused, causal: bool, pass_: str,
                      s_kv: int | None):
    """The fused kernel at its published speed (:mod:`.attention`) where the device carries figures for it
    (``attention_board``) and the math is 16-bit: the benchmark's FLOP over the rate, the traffic of ``cost``
    (Q, K, V, O, log-sum-exp) at the memory roofline, one launch. ``None`` elsewhere (the GEMM-efficiency
    roofline applies)."""
    kernel = kernel_name(fused)
    if not dev.attention_board or dtype not in HALF_PRECISION:
        return None
    if dev.attention_board not in BOARD_PEAK:
        raise ValueError(f"hardware.attention_board: unknown board {dev.attention_board!r}; allowed: "
                         f"{', '.join(BOARD_PEAK)}")
    t = s if s_kv is None else s_kv
    eff = fused_efficiency(dev.attention_board, kernel, pass_, causal, d, t)
    if eff is None:
        return None
    pairs = (s * (t - s) + s * (s + 1) / 2) / (s * t) if causal else 1.0  # ops.attention's causal pairs
    pairs = 0.5 if causal and s == t else pairs  # the benchmark's count over a whole causal sequence
    flop = benchmark_flop(b, hd, s, d, t, pairs, pass_)
    c = roofline_coeffs(flop / eff, decided_float(cost.bytes), dev, dtype, kernels=1, vector=False)
    c.a_math = c.a_math * dev.efficiency.compute  # roofline_coeffs divided by the GEMM efficiency: undo
    c.flop = np.atleast_1d(np.asarray(decided_float(cost.flop), dtype=np.float64))
    c.info = {"kernel": kernel}
    return c


def op_time(cost, dev, dtype: str = "fp32", tensor: bool = False) -> OpTime:
    """Roofline time of any operator's :class:`~concurrency_model.cost.Cost` (one kernel)."""
    return roofline(cost.flop, cost.bytes, as_device(dev), dtype, kernels=1, vector=not tensor)


__all__ = ["ALIGN_BYTES", "unaligned_head", "CONV_PASSES", "conv_coeffs", "conv_time", "attention_time",
           "attention_kernels", "op_time"]
