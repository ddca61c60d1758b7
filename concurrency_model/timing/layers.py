"""Time of convolution, recurrent and attention layers, and of any operator of the library.

* Convolution (Chetlur et al. 2014, cuDNN): implicit GEMM with forward ``M = N H' W'``, ``N = C_out``,
  ``K = C_in K_y K_x`` per group; ∇x ``M = N H W``, ``N = C_in``, ``K = C_out K_y K_x``; ∇w ``M = C_out``,
  ``N = C_in K_y K_x``, ``K = N H' W'``. The operands move once (input, weights, output), not the
  lowered matrix; ``efficiency.conv`` scales the math for the gather, ``conv_wgrad`` that of ∇w kernels
  (reductions over batch and space) and ``winograd`` that of the Winograd GEMMs. Strided ∇x is split by
  output phase, so each input position reduces over ``C_out ceil(K_y/s) ceil(K_x/s)`` values. 3x3 stride-1 layers may instead use
  Winograd F(4x4, 3x3) (Lavin & Gray 2016) in all three passes (cuDNN's WINOGRAD_NONFUSED): 36 batched
  GEMMs (forward: tiles x C_out x C_in; ∇w: C_out x C_in x tiles) plus the transforms, each a
  memory-bound pass. The faster is used (cuDNN's heuristics pick the fastest) and
  reported as ``algorithm``.
* Recurrent layers: :mod:`.recurrent`.
* Attention: plain = two batched GEMMs around a memory-bound softmax; fused (FlashAttention) = one
  compute-bound kernel with Q/K/V/O traffic only.
* Anything else: the roofline of its work and minimum traffic (``op_time``).
"""
from __future__ import annotations

import numpy as np

from ..units import dtype_bytes
from . import Coeffs, OpTime, device, gemm_coeffs, positive_int, roofline

CONV_PASSES = ("forward", "grad_input", "grad_weight")
WINOGRAD_M, WINOGRAD_R = 4, 3
WINOGRAD_ALPHA = WINOGRAD_M + WINOGRAD_R - 1


def _out(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def conv_coeffs(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, pass_: str, dev, dtype: str,
                math_dtype: str | None = None, algorithm: str = "auto") -> Coeffs:
    """Coefficients of the fastest convolution algorithm per row (arrays or numbers; square stride/pad)."""
    if pass_ not in CONV_PASSES:
        raise ValueError(f"pass: unknown {pass_!r}; allowed: {', '.join(CONV_PASSES)}")
    if algorithm not in ("auto", "implicit_gemm", "winograd"):
        raise ValueError(f"algorithm: unknown {algorithm!r}; allowed: auto, implicit_gemm, winograd")
    n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in
          (n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups)))
    ho, wo = _out(h, kh, stride, pad, dilation), _out(w, kw, stride, pad, dilation)
    cig, cog = c_in // groups, c_out // groups
    vb = dtype_bytes(dtype)
    e = dev.efficiency
    if pass_ == "forward":
        shape = (n * ho * wo, cog, cig * kh * kw)
    elif pass_ == "grad_input":
        # strided ∇x is decomposed by output phase (cuDNN): each input position sums over the
        # ceil(K/stride) taps that reach it, not over all K taps
        shape = (n * h * w, cig, cog * -(-kh // stride) * -(-kw // stride))
    else:
        shape = (cog, cig * kh * kw, n * ho * wo)
    g = gemm_coeffs(*shape, dev, dtype, groups, math_dtype)
    gain = e.conv * (e.conv_wgrad if pass_ == "grad_weight" else 1.0)
    io = (n * c_in * h * w + c_out * cig * kh * kw + n * c_out * ho * wo) * vb / e.memory
    flop = 2.0 * n * c_out * ho * wo * cig * kh * kw
    best = Coeffs(g.a_math * gain, g.a_feed * gain, io, g.a_extra, g.launches, g.rate, flop, io * e.memory,
                  {**g.info, "algorithm": np.full(len(n), "implicit_gemm")}, g.math_dtype)
    if algorithm == "implicit_gemm":
        return best
    ok = (kh == 3) & (kw == 3) & (stride == 1) & (dilation == 1) & (groups == 1)
    if algorithm == "winograd" and not ok.all():
        raise ValueError("algorithm: winograd needs a 3x3 kernel, stride 1, dilation 1 and one group")
    if not ok.any():
        return best
    a2 = WINOGRAD_ALPHA ** 2
    tiles = n * -(-ho // WINOGRAD_M) * -(-wo // WINOGRAD_M)
    ci, co = (c_in, c_out) if pass_ != "grad_input" else (c_out, c_in)
    # forward and ∇x: per tile position, (tiles x ci) by (ci x co); ∇w: (co x tiles) by (tiles x ci)
    wg = gemm_coeffs(tiles, co, ci, dev, dtype, a2, math_dtype) if pass_ != "grad_weight" else \
        gemm_coeffs(co, ci, tiles, dev, dtype, a2, math_dtype)
    transforms = 2 * a2 * tiles * (ci + co) * vb / e.memory  # tiles written and read in the alpha^2 domain
    wino = Coeffs(wg.a_math * gain * e.winograd, wg.a_feed * gain * e.winograd, wg.a_mem, wg.a_extra + transforms, wg.launches + 2,
                  wg.rate, flop, io * e.memory, {**wg.info, "algorithm": np.full(len(n), "winograd")}, wg.math_dtype)
    use = ok & (wino.seconds(dev) < best.seconds(dev)) if algorithm == "auto" else ok
    pick = {f: np.where(use, getattr(wino, f), getattr(best, f)) for f in
            ("a_math", "a_feed", "a_mem", "a_extra", "launches", "rate")}
    info = {k: np.where(use, wino.info[k], best.info[k]) for k in best.info}
    return Coeffs(**pick, flop=flop, bytes=io * e.memory, info=info, math_dtype=g.math_dtype)


def _pair(v, name):
    if isinstance(v, (tuple, list)):
        if len(v) != 2 or v[0] != v[1]:
            raise ValueError(f"{name}: the timing model takes one value for both dimensions, got {v!r}")
        return v[0]
    return v


def conv_time(n, c_in, c_out, h, w, kh, kw=None, stride=1, pad=0, dilation=1, groups=1, device_="a100-sxm4-80gb",
              dtype: str = "fp32", pass_: str = "forward", algorithm: str = "auto", math_dtype: str | None = None, **kwargs) -> OpTime:
    """Time of a 2-D convolution's ``forward``, ``grad_input`` or ``grad_weight`` pass on a device.

    >>> t = conv_time(32, 64, 64, 56, 56, 3, pad=1, device_="v100-sxm2-32gb", dtype="fp16")
    >>> t.detail["algorithm"] in ("implicit_gemm", "winograd"), t.bound
    (True, 'compute')
    """
    from ..ops.conv import conv2d
    dev = device(kwargs.pop("device", device_))
    if kwargs:
        raise ValueError(f"{next(iter(kwargs))}: unknown argument")
    kw = kh if kw is None else kw
    stride, pad, dilation = _pair(stride, "stride"), _pair(pad, "pad"), _pair(dilation, "dilation")
    conv2d(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, False)  # checks every argument
    c = conv_coeffs(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, pass_, dev, dtype, math_dtype,
                    algorithm)
    return c.assemble(dev)


def attention_time(batch, heads, seq, head_dim, dev, dtype: str = "fp16", fused: bool = False,
                   causal: bool = False, pass_: str = "forward") -> OpTime:
    """Attention core: plain (batched QKᵀ and PV GEMMs around a memory-bound softmax; backward twice
    each GEMM) or fused (one compute-bound kernel, FlashAttention; backward recomputes QKᵀ)."""
    from ..ops.attention import attention
    dev = device(dev)
    b, hd = positive_int("batch", batch), positive_int("heads", heads)
    s, d = positive_int("seq", seq), positive_int("head_dim", head_dim)
    if pass_ not in ("forward", "backward"):
        raise ValueError(f"pass: unknown {pass_!r}; allowed: forward, backward")
    vb = dtype_bytes(dtype)
    op = attention(b, hd, s, d, fused=fused, causal=causal, value_bytes=vb)
    cost = op.forward if pass_ == "forward" else op.backward
    if fused:
        t = roofline(cost.flop, cost.bytes, dev, dtype, kernels=1, vector=False)
        return OpTime(t.time_s, t.compute_s, t.memory_s, t.overhead_s, t.flop, t.bytes, t.bound, {"fused": True},
                      dev.decide)
    k = 1 if pass_ == "forward" else 2
    bh = b * hd
    qk = gemm_coeffs(s, s, d, dev, dtype, bh, None).assemble(dev).scale(k)
    pv = gemm_coeffs(s, d, s, dev, dtype, bh, None).assemble(dev).scale(k)
    # scale, (mask,) softmax: element-wise kernels that each read and write the s x s scores
    passes = 3 if causal else 2
    sm = roofline(bh * s * (5 * s + passes - 1), 2 * passes * k * bh * s * s * vb, dev, dtype, kernels=passes * k)
    out = qk + sm + pv
    return OpTime(out.time_s, out.compute_s, out.memory_s, out.overhead_s, int(cost.flop), int(cost.bytes),
                  out.bound, {"fused": False}, dev.decide)


def op_time(cost, dev, dtype: str = "fp32", tensor: bool = False) -> OpTime:
    """Roofline time of any operator's :class:`~concurrency_model.cost.Cost` (one kernel)."""
    return roofline(cost.flop, cost.bytes, device(dev), dtype, kernels=1, vector=not tensor)


__all__ = ["conv_coeffs", "conv_time", "attention_time", "op_time"]
