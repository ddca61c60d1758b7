"""Max and average pooling (paper Table 4 "pooling", Appendix B: a reduction over a K_y x K_x window).

Forward: every output reduces its window, ``W = K_y K_x - 1`` comparisons (max) or adds plus one divide
(avg) per output; ``D = ceil(log2 K_y) + ceil(log2 K_x)`` (Table 4: O(log K_x + log K_y)), +1 for avg's
divide. ∇x: max routes ∇y to the arg-max, avg spreads ∇y/K over the window; O(NCHW) work, O(1) depth
(Table 4), plus the accumulation where windows overlap.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks
from .conv import max_taps, out_size, pair

KINDS = ("max", "avg")


def pool2d(kind: str, n, c, h, w, kh, kw=None, stride=None, pad=0, value_bytes=4, ceil_mode: bool = False) -> OpCost:
    """Pooling of an ``n x c x h x w`` input; ``stride`` defaults to the kernel size (PyTorch).

    With ``ceil_mode`` the last, partial window is counted as a full one (a slight over-count).

    >>> p = pool2d("max", 1, 1, 4, 4, 2)
    >>> p.forward.flop, p.forward.depth
    (12, 2)
    """
    kind = checks.choice("pool", kind, KINDS)
    kw = kh if kw is None else kw
    stride = (kh, kw) if stride is None else stride
    (sh, sw), (ph, pw) = pair("stride", stride), pair("pad", pad)
    n = checks.size("n", n)
    c, h, w, kh, kw = (int(checks.size(k, v)) for k, v in (("c", c), ("h", h), ("w", w), ("kh", kh), ("kw", kw)))
    sh, sw, ph, pw = int(checks.size("stride", sh)), int(checks.size("stride", sw)), \
        int(checks.size("pad", ph, 0)), int(checks.size("pad", pw, 0))
    ho, wo = out_size(h, kh, sh, ph, 1, "h", ceil_mode), out_size(w, kw, sw, pw, 1, "w", ceil_mode)
    vb = checks.value_bytes(value_bytes)
    outs, ins, k = n * c * ho * wo, n * c * h * w, kh * kw
    is_avg = int(kind == "avg")  # an int: bool * sympy expression raises TypeError
    fwd = Cost(flop=outs * (k - 1 + is_avg), depth=clog2(kh) + clog2(kw) + is_avg, bytes=vb * (ins + outs),
               act_bytes=vb * ins)
    overlap = clog2(max_taps(h, kh, sh, ph, 1, ho)) + clog2(max_taps(w, kw, sw, pw, 1, wo))
    # avg: ∇y/K then scatter to K positions; max: scatter to the arg-max; overlapping windows accumulate
    gin = Cost(flop=outs * (k if is_avg else 1) + is_avg * outs, depth=1 + is_avg + overlap,
               bytes=vb * (ins + outs))
    return OpCost(f"{kind}pool", fwd, gin, source="paper Table 4 (pooling), App. B")
