"""Time of a 2-D convolution pass: the fastest of the algorithms cuDNN has for it.

* Implicit GEMM (Chetlur et al. 2014, cuDNN; cuDNN's IMPLICIT_(PRECOMP_)GEMM): forward ``M = N H' W'``,
  ``N = C_out``, ``K = C_in K_y K_x`` per group. The operands move once (input, weights, output), not the
  lowered matrix; ``efficiency.conv`` scales the math for the gather. The forward and ∇x implicit-GEMM
  kernels reduce over ``K`` inside one thread block (no split-K: cuDNN developer guide, the reduction of
  an implicit-GEMM tile runs over C R S in the main loop), so tile and wave quantization of ``M x N``
  is all there is (NVIDIA, "Convolutional Layers User's Guide", implicit-GEMM tiles and waves).
* ∇x (BWD_DATA): strided ∇x is split by output phase (cuDNN; Dumoulin & Visin 2016, transposed
  convolution): ``min(s, K)^2`` phases with work, each a GEMM over ``N ceil(H/s) ceil(W/s)`` input
  positions reducing over ``C_out ceil(K_y/s) ceil(K_x/s)`` taps. Or cuDNN's BWD_DATA_ALGO_0: one GEMM
  ``(N H' W') x (C_in K_y K_x) x C_out`` into columns and a col2im scatter-add (Jia 2014, Caffe's
  backward), which wins when ``C_in`` is small (first layers, where the phase GEMM has ``N = C_in``).
* ∇w (BWD_FILTER): ``M = C_out``, ``N = C_in K_y K_x``, ``K = N H' W'``; the reduction over batch and
  space is split into chunks whose partial sums are added (split-K of :mod:`.gemm`); ``conv_wgrad``
  scales these kernels.
* Forward ALGO_GEMM: explicit im2col (the lowered (N H' W') x (C_in K_y K_x) matrix written and read
  once) and a GEMM that may split K (Chetlur et al. 2014, Sec. 3), which wins for long reductions on
  few output tiles (e.g. 5x5 kernels over many channels on 7x7 maps).
* Winograd for 3x3 stride-1 layers (Lavin & Gray 2016), in all three passes: fused F(2x2, 3x3)
  (cuDNN's WINOGRAD: the transforms stay on chip; 16 products per 2x2 outputs; its kernels compute in
  fp32 on the CUDA cores, cuDNN's FLOAT / PSEUDO_HALF configurations, not on tensor cores), or non-fused F(4x4, 3x3) (WINOGRAD_NONFUSED: 36 batched GEMMs, forward
  tiles x C_out x C_in, ∇w C_out x C_in x tiles, plus the transforms, each a memory-bound pass);
  ``winograd`` scales their math.
* FFT (cuDNN's FFT and FFT_TILING; Mathieu, Henaff & LeCun 2014; Vasilache et al. 2015), stride 1,
  dilation 1, one group, pad < kernel, in all three passes: forward transforms of the inputs and
  filters, per frequency bin a complex GEMM (4 real products; forward ``N x C_out x C_in``, ∇x
  ``N x C_in x C_out``, ∇w ``C_out x C_in x N``) at the GEMM model's efficiency, an inverse transform.
  Transform size: the padded input ``(H + 2p) x (W + 2p)`` (FFT, at most 256 per dimension) or ``32 x 32``
  tiles of ``33 - K`` outputs per dimension (FFT_TILING, kernels up to 32; cuDNN API reference,
  supported configurations of cudnnConvolutionForward). Transform work and spectra traffic are
  :func:`concurrency_model.ops.conv.conv2d`'s (``5 n log2 n`` real FLOP per ``n``-point transform,
  Cooley & Tukey 1965 radix-2 count; complex spectra, 2 values each); the transforms are memory-bound
  passes (operands once plus the spectra the GEMM reads and writes) at ``efficiency.memory``, with their
  butterflies at the fp32 CUDA-core rate as a floor, plus 3 launches. Selectable as ``algorithm="fft"``;
  not in ``auto`` (:data:`FFT_IN_AUTO`; it did not improve the DeepBench medians).

cuDNN's ``cudnnFind*`` / heuristics pick the fastest, reported as ``algorithm``.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..ops.conv import conv2d
from ..units import dtype_bytes
from . import Coeffs, cuda_core_factor, decided_float, gemm as gemm_model, gemm_coeffs

CONV_PASSES = ("forward", "grad_input", "grad_weight")
WINOGRAD_M, WINOGRAD_R = 4, 3
WINOGRAD_ALPHA = WINOGRAD_M + WINOGRAD_R - 1
FUSED_M = 2  # fused Winograd F(2x2, 3x3): 4x4 input tiles
ALGORITHMS = ("auto", "implicit_gemm", "winograd", "fft")
FFT_TILE = 32  # cuDNN FFT_TILING: 32x32 tiles; kernels up to 32x32
FFT_MAX = 256  # cuDNN FFT: padded input up to 256 per dimension
FFT_LAUNCHES = 3  # input, filter and inverse transforms (the complex GEMM is counted by gemm_coeffs)
# FFT is not in ``auto``: on DeepBench (benchmarks/kernel_accuracy.py) it moved the leave-one-device-out conv
# median APE from 25.94% to 25.95% (calibrated 22.13% both), so by the project's rule it stays selectable only
FFT_IN_AUTO = False
_FIELDS = ("a_math", "a_feed", "a_mem", "a_extra", "launches", "rate")


def _out(size, k, stride, pad, dil):
    return (size + 2 * pad - dil * (k - 1) - 1) // stride + 1


def implicit_gemm(m, n, k, batch, dev, dtype: str, math_dtype: str | None) -> Coeffs:
    """An implicit-GEMM kernel without split-K: the best tile of :data:`gemm.TILES`, ``ceil(tiles / (SMs
    x blocks per SM))`` waves, each at the smaller of the math rate and the L2 feed (as in :mod:`.gemm`)."""
    e = dev.efficiency
    m, n, k, batch = (np.atleast_1d(np.asarray(x, dtype=np.float64)) for x in np.broadcast_arrays(m, n, k, batch))
    vb, sms = dtype_bytes(dtype), dev.multiprocessors
    peak, bw = decided_float(dev.peak(math_dtype or dtype), dev.decide), decided_float(dev.mem_bw, dev.decide)
    tm, tn = (gemm_model.TILES[:, i][:, None].astype(np.float64) for i in (0, 1))
    ctas = np.maximum(1.0, np.floor(gemm_model.FULL_TILE / (tm * tn)))
    waves = np.ceil(np.ceil(m / tm) * np.ceil(n / tn) * batch / (sms * ctas))
    kk = k + e.k_startup
    a_math = waves * ctas * 2 * tm * tn * kk * sms / e.compute
    a_feed = waves * ctas * (tm + tn) * kk * vb * sms / e.l2_factor
    a_mem = batch * (m * k + k * n + m * n) * vb / e.memory
    t = np.maximum(np.maximum(a_math / peak, a_feed / bw), a_mem / bw)
    best = np.argmin(t, axis=0)
    r = np.arange(len(m))
    info = {"tile": np.array([f"{a}x{b}" for a, b in gemm_model.TILES[best]]), "split_k": np.ones(len(m), int),
            "waves": waves[best, r]}
    return Coeffs(a_math[best, r], a_feed[best, r], a_mem, np.zeros(len(m)), np.ones(len(m)),
                  np.full(len(m), peak), 2 * m * n * k * batch, (m * k + k * n + m * n) * batch * vb, info,
                  math_dtype or dtype)


def _scaled(c: Coeffs, gain, extra=0.0, launches=0, algorithm="", n=1, mem=None) -> Coeffs:
    """``c`` with its math scaled by ``gain``; ``mem``: the traffic of an implicit kernel (operands once)."""
    return Coeffs(c.a_math * gain, c.a_feed * gain, c.a_mem if mem is None else mem + 0 * c.a_mem, c.a_extra + extra, c.launches + launches, c.rate,
                  c.flop, c.bytes, {**c.info, "algorithm": np.full(n, algorithm)}, c.math_dtype)


def _fastest(cands, dev) -> Coeffs:
    t = np.stack([c.seconds(dev) for c in cands])
    best = np.argmin(t, axis=0)
    pick = {f: np.choose(best, [getattr(c, f) for c in cands]) for f in _FIELDS}
    info = {k: np.choose(best, [c.info[k] for c in cands]) for k in cands[0].info}
    return Coeffs(**pick, flop=cands[0].flop, bytes=cands[0].bytes, info=info, math_dtype=cands[0].math_dtype)


def conv_coeffs(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, pass_: str, dev, dtype: str,
                math_dtype: str | None = None, algorithm: str = "auto", stride_w=None, pad_w=None) -> Coeffs:
    """Coefficients of the fastest convolution algorithm per row (arrays or numbers). ``stride`` and
    ``pad`` are the height's, ``stride_w`` and ``pad_w`` the width's (the same when omitted: Inception v3's
    1x7 layers pad 0 x 3)."""
    if pass_ not in CONV_PASSES:
        raise ValueError(f"pass: unknown {pass_!r}; allowed: {', '.join(CONV_PASSES)}")
    if algorithm not in ALGORITHMS:
        raise ValueError(f"algorithm: unknown {algorithm!r}; allowed: {', '.join(ALGORITHMS)}")
    stride_w, pad_w = stride if stride_w is None else stride_w, pad if pad_w is None else pad_w
    n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, stride_w, pad_w = np.broadcast_arrays(
        *(np.atleast_1d(np.asarray(x, dtype=np.int64)) for x in
          (n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups, stride_w, pad_w)))
    rows = len(n)
    ho, wo = _out(h, kh, stride, pad, dilation), _out(w, kw, stride_w, pad_w, dilation)
    cig, cog = c_in // groups, c_out // groups
    vb = dtype_bytes(dtype)
    e = dev.efficiency
    io = (n * c_in * h * w + c_out * cig * kh * kw + n * c_out * ho * wo) * vb / e.memory
    flop = 2.0 * n * c_out * ho * wo * cig * kh * kw

    def fix(c: Coeffs) -> Coeffs:  # the layer's work and minimum traffic, whatever the algorithm
        c.flop, c.bytes = flop, io * e.memory
        return c

    gain = e.conv * (e.conv_wgrad if pass_ == "grad_weight" else 1.0)
    if pass_ == "forward":
        cands = [_scaled(implicit_gemm(n * ho * wo, cog, cig * kh * kw, groups, dev, dtype, math_dtype), gain,
                         algorithm="implicit_gemm", n=rows, mem=io)]
        # ALGO_GEMM: im2col writes the lowered input (N H' W') x (C_in K_y K_x), a GEMM (split-K allowed) reads it
        cols = (n * ho * wo * c_in * kh * kw + n * c_in * h * w) * vb / e.memory  # the GEMM's a_mem reads them
        g = gemm_coeffs(n * ho * wo, cog, cig * kh * kw, dev, dtype, groups, math_dtype)
        cands.append(_scaled(g, gain, extra=cols, launches=1, algorithm="implicit_gemm", n=rows))
    elif pass_ == "grad_input":
        ty, tx = -(-kh // stride), -(-kw // stride_w)
        cands = [_scaled(implicit_gemm(n * h * w, cig, cog * ty * tx, groups, dev, dtype, math_dtype), gain,
                         algorithm="implicit_gemm", n=rows, mem=io)]
        # BWD_DATA_ALGO_0: columns (N H' W') x (C_in K_y K_x) written by a GEMM, then scatter-added (col2im)
        cols = 2 * n * ho * wo * c_in * kh * kw * vb / e.memory  # GEMM writes (its a_mem), col2im reads and adds
        g = gemm_coeffs(n * ho * wo, cig * kh * kw, cog, dev, dtype, groups, math_dtype)
        cands.append(_scaled(g, gain, extra=cols + n * c_in * h * w * vb / e.memory, launches=2,
                             algorithm="implicit_gemm", n=rows))
    else:
        g = gemm_coeffs(cog, cig * kh * kw, n * ho * wo, dev, dtype, groups, math_dtype)
        cands = [_scaled(g, gain, algorithm="implicit_gemm", n=rows, mem=io)]
    best = fix(_fastest(cands, dev))
    if algorithm == "implicit_gemm":
        return best
    extra = []  # (coefficients, rows where the algorithm exists)
    ok = (kh == 3) & (kw == 3) & (stride == 1) & (stride_w == 1) & (dilation == 1) & (groups == 1)
    if algorithm == "winograd" and not ok.all():
        raise ValueError("algorithm: winograd needs a 3x3 kernel, stride 1, dilation 1 and one group")
    if algorithm in ("auto", "winograd") and ok.any():
        extra.append((_winograd(n, c_in, c_out, ho, wo, pass_, dev, dtype, math_dtype, io, gain, fix, rows), ok))
    if algorithm == "fft" or (algorithm == "auto" and FFT_IN_AUTO):
        fft, ok_fft = _fft(n, c_in, c_out, h, w, kh, kw, ho, wo, stride, pad, dilation, groups, pass_, dev, dtype,
                           math_dtype, io, stride_w, pad_w)
        if algorithm == "fft" and not ok_fft.all():
            raise ValueError("algorithm: fft needs stride 1, dilation 1, one group, pad < kernel and a padded "
                             "input of at most 256x256 (FFT) or a kernel of at most 32x32 (FFT_TILING)")
        if algorithm == "fft":
            return fix(fft)
        if ok_fft.any():
            extra.append((fix(fft), ok_fft))
    if algorithm == "winograd":
        return extra[0][0]
    out = best
    for cand, mask in extra:
        both = _fastest([out, cand], dev)
        pick = {f: np.where(mask, getattr(both, f), getattr(out, f)) for f in _FIELDS}
        info = {k: np.where(mask, both.info[k], out.info[k]) for k in out.info}
        out = Coeffs(**pick, flop=flop, bytes=io * e.memory, info=info, math_dtype=best.math_dtype)
    return out


def _winograd(n, c_in, c_out, ho, wo, pass_, dev, dtype, math_dtype, io, gain, fix, rows) -> Coeffs:
    """The faster of non-fused F(4x4, 3x3) and fused F(2x2, 3x3) Winograd per row."""
    e, vb = dev.efficiency, dtype_bytes(dtype)
    ci, co = (c_in, c_out) if pass_ != "grad_input" else (c_out, c_in)
    wg = []
    # non-fused F(4x4, 3x3): per tile position, (tiles x ci) by (ci x co); ∇w: (co x tiles) by (tiles x ci)
    a2 = WINOGRAD_ALPHA ** 2
    tiles = n * -(-ho // WINOGRAD_M) * -(-wo // WINOGRAD_M)
    g = gemm_coeffs(tiles, co, ci, dev, dtype, a2, math_dtype) if pass_ != "grad_weight" else \
        gemm_coeffs(co, ci, tiles, dev, dtype, a2, math_dtype)
    transforms = 2 * a2 * tiles * (ci + co) * vb / e.memory  # tiles written and read in the alpha^2 domain
    wg.append(_scaled(g, gain * e.winograd, extra=transforms, launches=2, algorithm="winograd", n=rows))
    # fused F(2x2, 3x3): one kernel, transforms on chip; CUDA-core rate (a_math is in units of the peak)
    a2f = (FUSED_M + WINOGRAD_R - 1) ** 2
    tf = n * -(-ho // FUSED_M) * -(-wo // FUSED_M)
    g = implicit_gemm(tf, co, ci, a2f, dev, dtype, math_dtype) if pass_ != "grad_weight" else \
        gemm_coeffs(co, ci, tf, dev, dtype, a2f, math_dtype)
    md = math_dtype or dtype
    # fused Winograd runs in fp32 on the CUDA cores (cuDNN: FLOAT and PSEUDO_HALF configurations only)
    g.a_math = g.a_math * cuda_core_factor(dev, md)
    g.a_mem = np.maximum(g.a_mem * 0, io)
    wg.append(_scaled(g, gain * e.winograd, algorithm="winograd", n=rows))
    return fix(_fastest(wg, dev))


@lru_cache(maxsize=4096)
def _fft_counts(n: int, a: int, b: int, hp: int, wp: int, kh: int, kw: int, vb: int) -> tuple[float, float]:
    """(transform FLOP, spectra bytes) of :func:`concurrency_model.ops.conv.conv2d`'s FFT convolution of
    ``n`` images (or tiles) of ``hp x wp`` (already padded) with ``a`` -> ``b`` channels: the operator
    library's formula (``5 hw log2 hw`` per transform, complex spectra written and read), less its
    pointwise products (``8 hw n a b``), which :func:`_fft` times as a complex GEMM."""
    c = conv2d(n, a, b, hp, wp, kh, kw, bias=False, algorithm="fft", value_bytes=vb).forward
    hw = hp * wp
    io = vb * (n * a * hw + b * a * kh * kw + n * b * (hp - kh + 1) * (wp - kw + 1))
    return float(c.flop) - 8.0 * hw * n * a * b, float(c.bytes) - io


def _fft(n, c_in, c_out, h, w, kh, kw, ho, wo, stride, pad, dilation, groups, pass_, dev, dtype, math_dtype,
         io, stride_w, pad_w) -> tuple[Coeffs, np.ndarray]:
    """FFT convolution per row: the faster of cuDNN's FFT (one transform of the padded input, ``(H + 2p) x
    (W + 2p)``, at most 256 each) and FFT_TILING (``32 x 32`` tiles, each giving ``33 - K`` outputs per
    dimension); and the rows where one of them exists (stride 1, dilation 1, one group, pad < kernel)."""
    e, vb, rows = dev.efficiency, dtype_bytes(dtype), len(n)
    base = (stride == 1) & (stride_w == 1) & (dilation == 1) & (groups == 1) & (pad < kh) & (pad_w < kw)
    hp, wp = h + 2 * pad, w + 2 * pad_w
    sy, sx = np.maximum(FFT_TILE - kh + 1, 1), np.maximum(FFT_TILE - kw + 1, 1)
    layouts = [  # (images or tiles, transform height, width, rows where it exists)
        (n, hp, wp, base & (hp <= FFT_MAX) & (wp <= FFT_MAX)),
        (n * -(-ho // sy) * -(-wo // sx), np.full(rows, FFT_TILE), np.full(rows, FFT_TILE),
         base & (kh <= FFT_TILE) & (kw <= FFT_TILE) )]
    if not (layouts[0][3] | layouts[1][3]).any():
        return None, base & False
    cands, masks = [], []
    bw = decided_float(dev.mem_bw, dev.decide)
    vec = decided_float(dev.vector_flops.get("fp32", dev.peak_flops.get("fp32", dev.peak(math_dtype or dtype))), dev.decide)
    for m, th, tw, ok in layouts:
        tflop, spectra = np.zeros(rows), np.zeros(rows)
        for i in np.flatnonzero(ok):
            tflop[i], spectra[i] = _fft_counts(int(m[i]), int(c_in[i]), int(c_out[i]), int(th[i]), int(tw[i]),
                                               int(kh[i]), int(kw[i]), vb)
        bins = th * tw
        # per frequency bin a complex GEMM (4 real products): forward (m x C_in) by (C_in x C_out), ∇x
        # (m x C_out) by (C_out x C_in), ∇w (C_out x m) by (m x C_in); operands complex (2 values each)
        g = gemm_coeffs(m, c_out, c_in, dev, dtype, bins, math_dtype) if pass_ == "forward" else \
            gemm_coeffs(m, c_in, c_out, dev, dtype, bins, math_dtype) if pass_ == "grad_input" else \
            gemm_coeffs(c_out, c_in, m, dev, dtype, bins, math_dtype)
        g.a_mem = 2 * g.a_mem
        # the transforms: memory-bound passes that read the operands, write the spectra the GEMM reads
        # (half the written-and-read spectra) and read the one it writes; their butterflies in fp32
        # on the CUDA cores, which bind only if the memory does not
        transforms = np.maximum((io + spectra / 2 / e.memory), tflop / e.compute * bw / vec)
        cands.append(_scaled(g, 4.0, extra=transforms, launches=FFT_LAUNCHES, algorithm="fft", n=rows))
        masks.append(ok)
    both = _fastest(cands, dev)
    pick = {f: np.where(masks[0] & masks[1], getattr(both, f), np.where(masks[0], getattr(cands[0], f),
                                                                         getattr(cands[1], f))) for f in _FIELDS}
    out = Coeffs(**pick, flop=cands[0].flop, bytes=cands[0].bytes,
                 info={k: np.where(masks[0] & masks[1], both.info[k],
                                   np.where(masks[0], cands[0].info[k], cands[1].info[k])) for k in both.info},
                 math_dtype=cands[0].math_dtype)
    return out, masks[0] | masks[1]
