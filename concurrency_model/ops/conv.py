"""Convolution by direct loops, im2col + GEMM, FFT and Winograd (paper §5.3, Table 6, Appendices B-C).

Conventions of the full counts (``conv2d``):

* every kernel tap is a multiply-add of 2 FLOP, padding taps included, as Table 6 and FLOP counters
  (torchvision, fvcore, ``torch.utils.flop_counter``) count them; forward, ∇x and ∇w each cost
  ``2 * MACs`` for direct and im2col (∇x is the transposed convolution, ∇w the correlation of x with ∇y);
* depth follows Table 6: one multiply, then a reduction tree per reduced dimension,
  ``1 + ceil(log2 C_in/g) + ceil(log2 K_y) + ceil(log2 K_x)`` (+1 for the bias add). For ∇x the reduced
  extents are C_out/g and the largest number of taps that land on one input position; for ∇w they are
  N, H' and W' (Table 4, [M]/[D] rows);
* ``macs`` is always the direct-convolution count ``N C_out H' W' (C_in/g) K_y K_x``, whatever the
  algorithm: it measures *what* is computed, the FLOP measure *how*.

FFT and Winograd need stride 1, dilation 1 and one group. Their backward passes use the same algorithm
on the transposed problem (∇x: C_in and C_out swapped; ∇w: the same transforms); that is a derivation
for the toolkit [D], not a row of the paper.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

import sympy as sp

from ..cost import Cost, OpCost, clog2
from . import checks

ALGORITHMS = ("direct", "im2col", "fft", "winograd")
SRC_TABLE6 = "paper §5.3 Table 6 and App. C (W-D per convolution algorithm)"


def pair(name: str, v) -> tuple:
    """One value or an ``(h, w)`` pair, as a pair (the form PyTorch's convolution and pooling take).

    >>> pair("stride", 2), pair("pad", (1, 0))
    ((2, 2), (1, 0))
    """
    if isinstance(v, Sequence) and not isinstance(v, str):
        if len(v) != 2:
            raise ValueError(f"{name}: expected one integer or a pair, got {v!r}")
        return tuple(v)
    return v, v


def _numbers(*values) -> bool:
    return all(not isinstance(v, sp.Basic) or v.is_number for v in values)


def out_size(size, kernel, stride=1, pad=0, dilation=1, name: str = "h", ceil_mode: bool = False):
    """Output extent of a convolution or pooling along one dimension (PyTorch's formula, including
    pooling's ``ceil_mode``, where the last window may start in the input and hang over its end).

    Symbolic sizes give ``floor((size + 2 pad - dilation (kernel - 1) - 1) / stride) + 1`` (no ``ceil_mode``).

    >>> out_size(224, 7, 2, 3), out_size(112, 3, 2, ceil_mode=True)
    (112, 56)
    >>> from sympy import Symbol
    >>> out_size(Symbol("H", positive=True, integer=True), Symbol("K", positive=True, integer=True))
    H - K + 1
    """
    eff = dilation * (kernel - 1) + 1
    if not _numbers(size, kernel, stride, pad, dilation):
        if ceil_mode:
            raise ValueError(f"k{name}: ceil_mode needs numeric sizes")
        return sp.floor((size + 2 * pad - eff) / sp.sympify(stride)) + 1
    size, kernel, stride, pad, dilation = (int(v) for v in (size, kernel, stride, pad, dilation))
    eff = dilation * (kernel - 1) + 1
    if eff > size + 2 * pad:
        raise ValueError(f"k{name}: kernel extent {eff} is larger than the padded input {size + 2 * pad}")
    if not ceil_mode:
        return (size + 2 * pad - eff) // stride + 1
    out = -(-(size + 2 * pad - eff) // stride) + 1
    return out - 1 if (out - 1) * stride >= size + pad else out


def max_taps(size, kernel, stride, pad, dilation, out):
    """Largest number of (output, tap) pairs that read one input position along one dimension.

    Numbers are counted exactly. With a symbolic size or kernel, it is the count at an interior position:
    the taps ``k`` whose offsets ``k dilation`` fall in one residue class modulo ``stride`` (at most
    ``ceil(kernel g / stride)``, ``g = gcd(dilation, stride)``) and within the outputs' span (at most
    ``floor((out - 1) g / dilation) + 1``); exact once the input is larger than the kernel's extent.

    >>> max_taps(5, 3, 1, 0, 1, 3), max_taps(9, 3, 2, 0, 1, 4)
    (3, 2)
    >>> from sympy import Symbol
    >>> H = Symbol("H", positive=True, integer=True)
    >>> max_taps(H, 3, 2, 0, 1, out_size(H, 3, 2))
    Min(2, floor(H/2 - 3/2) + 1)
    """
    if not _numbers(size, kernel, stride, pad, dilation, out):
        if not _numbers(stride, dilation):
            raise ValueError("stride: symbolic strides and dilations are not modelled; give numbers")
        g, st = math.gcd(int(dilation), int(stride)), int(stride)
        return sp.Min(sp.ceiling(sp.sympify(kernel) * g / st), sp.floor((out - 1) * g / sp.sympify(dilation)) + 1)
    size, kernel, stride, pad, dilation, out = (int(v) for v in (size, kernel, stride, pad, dilation, out))
    hits = [0] * size
    for o in range(out):
        for k in range(kernel):
            i = o * stride - pad + k * dilation
            if 0 <= i < size:
                hits[i] += 1
    return max(max(hits), 1)


def _numeric(name: str, value, minimum: int = 1):
    """A size the toolkit keeps numeric (stride, padding, dilation, groups, tile size)."""
    v = checks.size(name, value, minimum)
    if not v.is_number:
        raise ValueError(f"{name}: must be a number, not the symbol {v}")
    return v


def conv2d(n, c_in, c_out, h, w, kh, kw=None, stride=1, pad=0, dilation=1, groups=1, bias=True,
           algorithm: str = "direct", value_bytes=4, winograd_m: int = 2, fft_c=5) -> OpCost:
    """A 2-D convolution layer on an ``n x c_in x h x w`` input (NCHW, paper Fig. 8a).

    ``stride``, ``pad`` and ``dilation`` take one integer or an ``(h, w)`` pair. The batch, channels, input
    sizes and kernel sizes may be positive integer symbols (the paper's Tables 4 and 6 are symbolic in all
    of them); stride, padding, dilation and groups are numbers.

    >>> c = conv2d(1, 1, 1, 3, 3, 2, bias=False)     # 2x2 kernel on 3x3: 4 outputs of 4 taps
    >>> c.forward.macs, c.forward.flop, c.forward.depth
    (16, 32, 3)
    >>> from sympy import symbols
    >>> N, C, K, H, R = symbols("N C K H R", positive=True, integer=True)
    >>> conv2d(N, C, K, H, H, R, bias=False).forward.macs
    C*K*N*R**2*(H - R + 1)**2
    """
    kw = kh if kw is None else kw
    algorithm = checks.choice("algorithm", algorithm, ALGORITHMS)
    n, c_in, c_out, h, w, kh, kw = (checks.size(k, v) for k, v in
                                    (("n", n), ("c_in", c_in), ("c_out", c_out), ("h", h), ("w", w),
                                     ("kh", kh), ("kw", kw)))
    groups = int(_numeric("groups", groups))
    (sh, sw), (ph, pw), (dh, dw) = pair("stride", stride), pair("pad", pad), pair("dilation", dilation)
    sh, sw, dh, dw = (int(_numeric(k, v)) for k, v in
                      (("stride", sh), ("stride", sw), ("dilation", dh), ("dilation", dw)))
    ph, pw = int(_numeric("pad", ph, 0)), int(_numeric("pad", pw, 0))
    if groups > 1 and _numbers(c_in, c_out) and (c_in % groups or c_out % groups):
        raise ValueError(f"groups: c_in={c_in} and c_out={c_out} must both be divisible by groups={groups}")
    ho, wo = out_size(h, kh, sh, ph, dh, "h"), out_size(w, kw, sw, pw, dw, "w")
    vb = checks.value_bytes(value_bytes)
    cig, cog = c_in / groups, c_out / groups
    nb = 1 if bias else 0
    weights = c_out * cig * kh * kw
    params = weights + nb * c_out
    x_el, y_el = n * c_in * h * w, n * c_out * ho * wo
    macs = y_el * cig * kh * kw
    io_bytes = vb * (x_el + params + y_el)
    bias_grad = Cost(flop=nb * c_out * (n * ho * wo - 1), depth=nb * clog2(n * ho * wo))

    if algorithm in ("direct", "im2col"):
        taps_h = max_taps(h, kh, sh, ph, dh, ho)
        taps_w = max_taps(w, kw, sw, pw, dw, wo)
        d_fwd = 1 + clog2(cig) + clog2(kh) + clog2(kw)  # Table 6: the same depth for direct and im2col
        # im2col: the lowered matrix is written, then read by the GEMM, a blow-up of K_y*K_x (paper §5.3)
        extra = 0 if algorithm == "direct" else 2 * vb * n * ho * wo * c_in * kh * kw
        fwd = Cost(flop=2 * macs + nb * y_el, depth=d_fwd + nb, bytes=io_bytes + extra, params=params,
                   act_bytes=vb * x_el, macs=macs)
        gin = Cost(flop=2 * macs, depth=1 + clog2(cog) + clog2(taps_h) + clog2(taps_w),
                   bytes=vb * (y_el + weights + x_el) + extra, macs=macs)
        gw = Cost(flop=2 * macs, depth=1 + clog2(n) + clog2(ho) + clog2(wo),
                  bytes=vb * (x_el + y_el + weights) + extra, macs=macs)
        return OpCost(f"conv2d_{algorithm}", fwd, gin, gw | bias_grad, SRC_TABLE6)

    if (sh, sw) != (1, 1) or (dh, dw) != (1, 1) or groups != 1:
        raise ValueError(f"algorithm: {algorithm} needs stride 1, dilation 1 and groups 1")
    if algorithm == "fft":
        hw = (h + 2 * ph) * (w + 2 * pw)  # transform size: the padded input; the kernel is zero-padded to it
        fft_c = sp.sympify(fft_c)

        def fft_cost(a, bb, depth):  # transforms of the three operands + complex products (8 FLOP each)
            flop = fft_c * hw * sp.log(hw, 2) * (a * bb + n * a + n * bb) + 8 * hw * n * a * bb
            spectra = 2 * 2 * vb * hw * (n * a + a * bb + n * bb)  # complex: 2 values, written then read
            return flop, spectra, depth

        f, extra, _ = fft_cost(c_in, c_out, None)
        fwd = Cost(flop=f + nb * y_el, depth=2 * clog2(hw) + clog2(c_in) + nb, bytes=io_bytes + extra,
                   params=params, act_bytes=vb * x_el, macs=macs)
        f_in, e_in, _ = fft_cost(c_out, c_in, None)
        gin = Cost(flop=f_in, depth=2 * clog2(hw) + clog2(c_out), bytes=vb * (y_el + weights + x_el) + e_in,
                   macs=macs)
        gw = Cost(flop=f, depth=2 * clog2(hw) + clog2(n), bytes=vb * (x_el + y_el + weights) + extra, macs=macs)
        return OpCost("conv2d_fft", fwd, gin, gw | bias_grad, SRC_TABLE6)

    # Winograd F(m x m, r x r), alpha = m + r - 1 (Lavin & Gray 2016; paper Table 6 and App. C)
    if kh != kw:
        raise ValueError(f"kw: winograd needs a square kernel, got {kh}x{kw}")
    r, mt = kh, int(_numeric("winograd_m", winograd_m))
    a = mt + r - 1
    tiles = n * sp.ceiling(sp.sympify(ho) / mt) * sp.ceiling(sp.sympify(wo) / mt)

    def wino(ci, co):  # multiply-adds of the transforms and the alpha^2 batched GEMMs, 2 FLOP each
        kernel_t = co * ci * (a * r**2 + a**2 * r)
        input_t = tiles * ci * 2 * a**3
        output_t = tiles * co * (a**2 * mt + a * mt**2)
        gemm = a**2 * co * ci * tiles
        traffic = 2 * vb * a**2 * (co * ci + tiles * ci + tiles * co)
        return 2 * (kernel_t + input_t + output_t + gemm), traffic

    f, extra = wino(c_in, c_out)
    depth = 2 * clog2(r) + 4 * clog2(a)
    fwd = Cost(flop=f + nb * y_el, depth=depth + clog2(c_in) + nb, bytes=io_bytes + extra, params=params,
               act_bytes=vb * x_el, macs=macs)
    f_in, e_in = wino(c_out, c_in)
    gin = Cost(flop=f_in, depth=depth + clog2(c_out), bytes=vb * (y_el + weights + x_el) + e_in, macs=macs)
    gw = Cost(flop=f, depth=depth + clog2(n), bytes=vb * (x_el + y_el + weights) + extra, macs=macs)
    return OpCost("conv2d_winograd", fwd, gin, gw | bias_grad, SRC_TABLE6)


def table6(method: str, N, C_in, C_out, H, W, K_y, K_x, m: int = 2, c=None) -> tuple[sp.Expr, sp.Expr]:
    """Work and depth of one convolution exactly as the paper's Table 6 prints them (§5.3, [S1]).

    Every size may be a positive integer symbol, as in the paper. Unit stride, no padding:
    ``H' = H - K_y + 1``. For Winograd, ``r = K_x`` (square kernels), ``alpha = m + r - 1`` and
    ``P = N ceil(H/m) ceil(W/m)`` tiles ([M]); the printed W counts one tile's transforms plus
    ``C_out C_in P``, so it is *not* a full count (use :func:`conv2d`).

    >>> table6("direct", 1, 2, 3, 5, 5, 3, 3)
    (486, 5)
    >>> from sympy import symbols
    >>> N, C, K, H, W, R = symbols("N C_in C_out H W K", positive=True, integer=True)
    >>> table6("direct", N, C, K, H, W, R, R)[0]
    C_in*C_out*K**2*N*(H - K + 1)*(-K + W + 1)
    """
    method = checks.choice("method", method, ALGORITHMS)
    N, C_in, C_out, H, W, K_y, K_x = (checks.size(k, v) for k, v in
                                      (("N", N), ("C_in", C_in), ("C_out", C_out), ("H", H), ("W", W),
                                       ("K_y", K_y), ("K_x", K_x)))
    m = _numeric("m", m)
    c = sp.Symbol("c", positive=True) if c is None else sp.sympify(c)
    Hp, Wp = H - K_y + 1, W - K_x + 1
    if method in ("direct", "im2col"):
        return N * C_out * Hp * Wp * C_in * K_y * K_x, clog2(C_in) + clog2(K_y) + clog2(K_x)
    if method == "fft":
        hw = H * W
        work = c * hw * sp.log(hw, 2) * (C_out * C_in + N * C_in + N * C_out) + hw * N * C_in * C_out
        return work, 2 * clog2(hw) + clog2(C_in)
    r = K_x
    a = m + r - 1
    tiles = N * sp.ceiling(H / m) * sp.ceiling(W / m)
    work = a * (r**2 + a * r + 2 * a**2 + a * m + m**2) + C_out * C_in * tiles
    return work, 2 * clog2(r) + 4 * clog2(a) + clog2(C_in)
