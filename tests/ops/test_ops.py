"""Exact work, depth, traffic and parameter counts of every operator on small shapes, derived by hand.

Conventions (module docstrings, DESIGN.md): a multiply-add is 2 FLOP; a dot product of length k has
depth 1 + ceil(log2 k) (one multiply, then a reduction tree); a reduction of n values costs W = n - 1,
D = ceil(log2 n) (paper §2.5); fp32 (4 bytes per value) unless stated.
"""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
import sympy as sp

from concurrency_model.cost import Cost
from concurrency_model.ops import attention as att
from concurrency_model.ops.checks import size as check_size
from concurrency_model.ops.conv import conv2d, max_taps, out_size, table6
from concurrency_model.ops.dense import gemm, linear
from concurrency_model.ops.elementwise import ACTIVATIONS, activation, add, concat, dropout, scale
from concurrency_model.ops.embedding import embedding
from concurrency_model.ops.norm import batch_norm, group_norm, layer_norm, rms_norm, weight_norm
from concurrency_model.ops.optimizer import optimizer_update
from concurrency_model.ops.pool import pool2d
from concurrency_model.ops.recurrent import recurrent
from concurrency_model.ops.reduction import reduction
from concurrency_model.ops.softmax import softmax
from concurrency_model.symbols import N, s

attention, multi_head_attention = att.attention, att.multi_head_attention


def wd(c: Cost):
    return c.flop, c.depth


# ---------------------------------------------------------------------------------------------------
# dense
# ---------------------------------------------------------------------------------------------------

def test_gemm_hand_counts():
    g = gemm(2, 3, 4)  # A 2x4, B 4x3, C 2x3
    f = g.forward
    assert f.macs == 24  # 2*3*4
    assert wd(f) == (48, 3)  # 2 FLOP per MAC; one multiply + tree over k=4: 1 + 2
    assert f.bytes == 104  # 4 B * (A 8 + B 12 + C 6)
    assert f.act_bytes == 80  # A and B kept: 4 * (8 + 12)
    assert f.params == 0
    # ∇A = ∇C Bᵀ sums over n = 3: depth 1 + 2; ∇B = Aᵀ ∇C sums over m = 2: depth 1 + 1
    assert wd(g.grad_input) == (48, 3) and g.grad_input.bytes == 104 and g.grad_input.macs == 24
    assert wd(g.grad_weight) == (48, 2) and g.grad_weight.bytes == 104
    assert wd(g.backward) == (96, 3)


def test_gemm_batched():
    g = gemm(2, 3, 4, batch=5)
    assert g.forward.macs == 120 and g.forward.flop == 240  # 5 independent 24-MAC products
    assert g.forward.depth == 3  # batching adds no depth
    assert g.forward.bytes == 520
    assert gemm(1, 1, 1).forward.flop == 2 and gemm(1, 1, 1).forward.depth == 1


def test_linear_hand_counts():
    fc = linear(2, 3, 4)  # 2 rows, 3 -> 4
    f = fc.forward
    assert fc.params == 16  # 3*4 weights + 4 biases
    assert f.macs == 24  # 2*3*4
    assert f.flop == 56  # 2*24 + 2*4 bias adds
    assert f.depth == 4  # multiply 1 + tree over c_in=3 (2) + bias add 1
    assert f.bytes == 120  # 4 * (x 6 + params 16 + y 8)
    assert f.act_bytes == 24  # x stored: 4 * 6
    # ∇x = ∇y wᵀ (2x4 by 4x3): 48 FLOP, sums over c_out = 4: depth 1 + 2
    assert wd(fc.grad_input) == (48, 3) and fc.grad_input.bytes == 104
    # ∇w = xᵀ ∇y: 48 FLOP, depth 1 + log2(2); ∇b: 4 column sums of 2 values: 4 adds, depth 1
    assert wd(fc.grad_weight) == (52, 2)
    assert fc.grad_weight.bytes == 104 + 48  # ∇w: 4*(6+8+12); ∇b: 4*(8 + 4)
    assert wd(fc.backward) == (100, 3)


def test_linear_no_bias_and_bias_reduction_depth():
    fc = linear(2, 3, 4, bias=False)
    assert fc.params == 12 and wd(fc.forward) == (48, 3)  # no bias add: depth 1 + 2
    assert wd(fc.grad_weight) == (48, 2)
    fc5 = linear(5, 3, 2)
    # ∇w: 2*5*3*2 = 60, depth 1 + ceil(log2 5) = 4; ∇b: 2 * (5 - 1) = 8, depth 3 -> max 4
    assert wd(fc5.grad_weight) == (68, 4)
    # linear without bias is the gemm y(n x c_out) = x(n x c_in) w(c_in x c_out)
    g = gemm(2, 4, 3)
    assert wd(fc.forward) == wd(g.forward) and fc.forward.macs == g.forward.macs
    assert wd(fc.grad_input) == wd(g.grad_input) and wd(fc.grad_weight) == wd(g.grad_weight)


def test_fc_depth_table4_logs():
    # Table 4: FC y depth O(log C_in), ∇x O(log C_out), ∇w O(log N)
    fc = linear(64, 256, 16, bias=False)
    assert fc.forward.depth == 1 + 8
    assert fc.grad_input.depth == 1 + 4
    assert fc.grad_weight.depth == 1 + 6


# ---------------------------------------------------------------------------------------------------
# convolution
# ---------------------------------------------------------------------------------------------------

def test_out_size_and_max_taps():
    assert out_size(224, 7, 2, 3) == 112
    assert out_size(3, 2) == 2
    assert out_size(5, 3, 2, 1, 2) == 2  # effective extent 2*2+1 = 5: (5 + 2 - 5)//2 + 1
    # 3x3, stride 1, pad 1 on 5: an interior input is read by 3 windows
    assert max_taps(5, 3, 1, 1, 1, 5) == 3
    # stride = kernel: windows do not overlap
    assert max_taps(4, 2, 2, 0, 1, 2) == 1
    # 2 on 3, stride 1: the middle input is in both windows
    assert max_taps(3, 2, 1, 0, 1, 2) == 2
    # kernel 3, stride 2, pad 1, dilation 2, 2 outputs on 5: o=0 reads -1,1,3; o=1 reads 1,3,5 -> 2
    assert max_taps(5, 3, 2, 1, 2, 2) == 2


def test_conv_2x2_kernel_on_3x3_input():
    c = conv2d(1, 1, 1, 3, 3, 2, bias=False)
    f = c.forward
    assert f.macs == 16  # 4 outputs of 4 taps
    assert f.flop == 32
    assert f.depth == 3  # 1 multiply + log2(1) + log2(2) + log2(2)
    assert c.params == 4
    assert f.bytes == 68  # 4 * (x 9 + w 4 + y 4)
    assert f.act_bytes == 36  # x stored
    # ∇x: the centre input gets 2 taps per dimension: 1 + log2(1) + log2(2) + log2(2)
    assert wd(c.grad_input) == (32, 3) and c.grad_input.bytes == 68
    # ∇w: sums over N=1, H'=2, W'=2: 1 + 0 + 1 + 1
    assert wd(c.grad_weight) == (32, 3) and c.grad_weight.bytes == 68


def test_conv_2x2_kernel_on_3x3_input_with_bias():
    c = conv2d(1, 1, 1, 3, 3, 2)
    assert c.params == 5
    assert wd(c.forward) == (36, 4)  # + 4 bias adds, + 1 depth
    # ∇w 32 FLOP depth 3, alongside ∇b: a sum of 4 values (3 adds, depth 2)
    assert wd(c.grad_weight) == (35, 3)
    assert c.forward.bytes == 72  # 4 * (9 + 5 + 4)


def test_conv_stride2_pad1_dilation2_groups2():
    c = conv2d(1, 4, 6, 5, 5, 3, stride=2, pad=1, dilation=2, groups=2)
    # effective kernel 2*(3-1)+1 = 5; H' = (5 + 2 - 5)//2 + 1 = 2; C_in/g = 2, C_out/g = 3
    f = c.forward
    assert c.params == 6 * 2 * 9 + 6 == 114
    assert f.macs == 1 * 6 * 2 * 2 * 2 * 9 == 432  # N C_out H' W' (C_in/g) K K
    assert f.flop == 2 * 432 + 24  # + bias add on 1*6*2*2 = 24 outputs
    assert f.depth == 1 + 1 + 2 + 2 + 1  # multiply, log2(2), log2(3), log2(3), bias
    assert f.bytes == 4 * (100 + 114 + 24)  # x 1*4*5*5, params, y 24
    assert f.act_bytes == 400
    # ∇x: max_taps = 2 per dimension (see test_out_size_and_max_taps): 1 + log2(3) + 1 + 1
    assert wd(c.grad_input) == (864, 5)
    assert c.grad_input.bytes == 4 * (24 + 108 + 100)
    # ∇w: 1 + log2(1) + log2(2) + log2(2) = 3; ∇b: 6 sums of 4 values, 18 adds, depth 2
    assert wd(c.grad_weight) == (864 + 18, 3)


def test_conv_rectangular_pairs():
    # stride (2, 1), pad (1, 0), dilation (2, 1), kernel 3x2 on 5x4
    c = conv2d(1, 1, 1, 5, 4, 3, 2, stride=(2, 1), pad=(1, 0), dilation=(2, 1), bias=False)
    # H' = 2 (as above); W' = 4 - 2 + 1 = 3; MACs = 2*3*3*2 = 36
    assert c.forward.macs == 36 and c.forward.flop == 72
    assert c.forward.depth == 1 + 0 + 2 + 1
    # taps: rows 2 (as above), columns 2 (kernel 2, stride 1): 1 + 0 + 1 + 1
    assert c.grad_input.depth == 3
    assert c.grad_weight.depth == 1 + 0 + 1 + 2  # N=1, H'=2, W'=3


def test_conv_grad_input_depth_unit_stride_3x3():
    c = conv2d(2, 8, 4, 5, 5, 3, pad=1, bias=False)
    # every interior input is read by 3x3 windows: 1 + log2(4) + log2(3) + log2(3) = 1 + 2 + 2 + 2
    assert c.grad_input.depth == 7
    # forward 1 + log2(8) + 2 + 2
    assert c.forward.depth == 8
    # ∇w: 1 + log2(2) + log2(5) + log2(5) = 1 + 1 + 3 + 3
    assert c.grad_weight.depth == 8


def test_conv_direct_and_im2col_same_work_and_depth():
    for shape in [dict(n=1, c_in=1, c_out=1, h=3, w=3, kh=2), dict(n=2, c_in=3, c_out=5, h=7, w=6, kh=3, pad=1),
                  dict(n=1, c_in=4, c_out=6, h=5, w=5, kh=3, stride=2, pad=1, dilation=2, groups=2)]:
        d, i = conv2d(**shape), conv2d(algorithm="im2col", **shape)
        for part in ("forward", "grad_input", "grad_weight"):
            assert getattr(d, part).flop == getattr(i, part).flop
            assert getattr(d, part).macs == getattr(i, part).macs
            # Table 6 prints the same depth for direct and im2col
            assert getattr(d, part).depth == getattr(i, part).depth
        assert d.params == i.params
    # C_in = 3, 3x3: Table 6 depth log2(3) + log2(3) + log2(3) = 6 (+1 multiply); not log2(27) = 5
    assert conv2d(1, 3, 1, 5, 5, 3, bias=False, algorithm="im2col").forward.depth == 7


def test_conv_im2col_bytes():
    c = conv2d(1, 1, 1, 3, 3, 2, bias=False, algorithm="im2col")
    # lowered matrix: N H' W' x C_in K K = 4 x 4 values, written and read: 2 * 4 * 16 = 128 bytes
    assert c.forward.bytes == 68 + 128
    assert c.grad_input.bytes == 68 + 128 and c.grad_weight.bytes == 68 + 128
    assert c.forward.act_bytes == 36


def test_conv_fft_hand_counts():
    c = conv2d(1, 1, 1, 4, 4, 3, bias=False, algorithm="fft")  # fft_c = 5
    f = c.forward
    # HW = 16, log2 16 = 4: 5*16*4*(1 + 1 + 1) transforms + 8 FLOP per complex multiply-add * 16
    assert f.flop == 960 + 128
    assert f.depth == 2 * 4 + 0  # Table 6: 2 log2(HW) + log2(C_in)
    assert f.macs == 36  # the direct count, whatever the algorithm
    # spectra: complex (2 values), written then read, 16 points * (1 + 1 + 1): 4*2*2*16*3 = 768
    assert f.bytes == 116 + 768
    assert c.params == 9
    assert wd(c.grad_input) == (1088, 8) and c.grad_input.bytes == 4 * (4 + 9 + 16) + 768
    assert wd(c.grad_weight) == (1088, 8)


def test_conv_fft_channels_and_bias():
    c = conv2d(2, 2, 3, 4, 4, 3, algorithm="fft")
    # 5*16*4*(3*2 + 2*2 + 2*3) + 8*16*2*2*3 + bias on 2*3*2*2 outputs
    assert c.forward.flop == 5120 + 1536 + 24
    assert c.forward.depth == 8 + 1 + 1  # 2 log2 16 + log2(2) + bias
    assert c.grad_input.depth == 8 + 2  # + log2(C_out = 3)
    # ∇w: 8 + log2(N = 2) = 9, alongside ∇b (3 sums of 8: 21 adds, depth 3)
    assert wd(c.grad_weight) == (6656 + 21, 9)
    sym_c = sp.Symbol("c", positive=True)
    cs = conv2d(1, 1, 1, 4, 4, 3, bias=False, algorithm="fft", fft_c=sym_c)
    assert sp.expand(cs.forward.flop - (192 * sym_c + 128)) == 0


def test_conv_winograd_hand_counts():
    c = conv2d(1, 1, 1, 4, 4, 3, bias=False, algorithm="winograd")  # F(2x2, 3x3): alpha = 4, 1 tile
    # kernel G g Gᵀ: 4*9 + 16*3 = 84; input Bᵀ d B: 2*64 = 128; output Aᵀ M A: 16*2 + 4*4 = 48;
    # GEMM stage: 16 * 1 * 1 * 1 = 16 multiply-adds; 2 FLOP each: 2 * 276
    f = c.forward
    assert f.flop == 552
    assert f.depth == 2 * 2 + 4 * 2 + 0  # 2 log2 r + 4 log2 alpha + log2 C_in
    assert f.macs == 36
    # traffic of transformed tiles: 2 * 4 * 16 * (1 + 1 + 1) = 384, plus x 16, w 9, y 4
    assert f.bytes == 116 + 384
    assert wd(c.grad_input) == (552, 12)
    assert wd(c.grad_weight) == (552, 12)


def _winograd_transforms(n_tiles, ci, co, m, r):
    a = m + r - 1
    return co * ci * (a * r**2 + a**2 * r) + n_tiles * ci * 2 * a**3 + n_tiles * co * (a**2 * m + a * m**2)


@pytest.mark.parametrize("m, ratio", [(2, sp.Rational(9, 4)), (4, 4)])
def test_winograd_gemm_stage_multiplies_fewer(m, ratio):
    # F(m x m, 3 x 3) on an input whose H' = W' = 4m are multiples of m: 16 tiles per image
    n, ci, co, r = 2, 2, 3, 3
    h = 4 * m + r - 1
    c = conv2d(n, ci, co, h, h, r, bias=False, algorithm="winograd", winograd_m=m)
    tiles = n * 4 * 4
    a = m + r - 1
    gemm_stage = c.forward.flop / 2 - _winograd_transforms(tiles, ci, co, m, r)
    assert gemm_stage == a**2 * co * ci * tiles
    direct = conv2d(n, ci, co, h, h, r, bias=False).forward.macs
    assert direct == n * co * (4 * m) ** 2 * ci * r * r
    # Lavin & Gray: F(2x2,3x3) 2.25x fewer multiplies, F(4x4,3x3) 4x
    assert direct / gemm_stage == ratio


def test_winograd_partial_tiles_round_up():
    # H' = W' = 3 with m = 2: ceil(3/2)^2 = 4 tiles per image
    c = conv2d(1, 1, 1, 5, 5, 3, bias=False, algorithm="winograd")
    assert c.forward.flop == 2 * (_winograd_transforms(4, 1, 1, 2, 3) + 16 * 4)


def test_table6_each_method():
    # direct / im2col: N C_out H' W' C_in K_y K_x with H' = W' = 3: 1*3*3*3*2*3*3 = 486;
    # depth log2(2) + log2(3) + log2(3) = 5
    assert table6("direct", 1, 2, 3, 5, 5, 3, 3) == (486, 5)
    assert table6("im2col", 1, 2, 3, 5, 5, 3, 3) == (486, 5)
    # FFT: c HW log2(HW) (C_out C_in + N C_in + N C_out) + HW N C_in C_out = 5*16*4*3 + 16
    assert table6("fft", 1, 1, 1, 4, 4, 3, 3, c=5) == (976, 8)
    c = sp.Symbol("c", positive=True)
    w, d = table6("fft", 1, 1, 1, 4, 4, 3, 3)
    assert sp.expand(w - (192 * c + 16)) == 0 and d == 8
    # Winograd, alpha = 2 + 3 - 1 = 4: 4*(9 + 12 + 32 + 8 + 4) = 260 per tile, + C_out C_in P (P = 1*2*2)
    assert table6("winograd", 1, 1, 1, 4, 4, 3, 3) == (264, 12)
    # N=2, C_in=2, C_out=3, 6x6: P = 2*3*3 = 18 -> 260 + 108; depth 4 + 8 + log2(2)
    assert table6("winograd", 2, 2, 3, 6, 6, 3, 3) == (368, 13)


def test_table6_matches_full_count_structure():
    # the full count adds the multiply to Table 6's reduction depth for direct / im2col, and equals
    # Table 6's depth for FFT and Winograd (no bias, no padding)
    for alg in ("direct", "im2col"):
        assert conv2d(1, 2, 3, 5, 5, 3, bias=False, algorithm=alg).forward.depth == \
            table6(alg, 1, 2, 3, 5, 5, 3, 3)[1] + 1
        assert conv2d(1, 2, 3, 5, 5, 3, bias=False, algorithm=alg).forward.macs == \
            table6(alg, 1, 2, 3, 5, 5, 3, 3)[0]
    for alg in ("fft", "winograd"):
        assert conv2d(1, 2, 3, 6, 6, 3, bias=False, algorithm=alg).forward.depth == \
            table6(alg, 1, 2, 3, 6, 6, 3, 3)[1]


def test_conv_symbolic_batch():
    c = conv2d(N, 2, 3, 5, 5, 3)
    assert c.forward.flop == N * (2 * 3 * 9 * 2 * 9 + 3 * 9)
    assert N not in c.forward.depth.free_symbols  # forward depth: channels and kernel only
    assert N in c.grad_weight.depth.free_symbols  # ∇w: O(log N + log H' + log W') (Table 4)
    assert c.grad_weight.depth.subs(N, 8) == 1 + 3 + 2 + 2


# ---------------------------------------------------------------------------------------------------
# pooling
# ---------------------------------------------------------------------------------------------------

def test_maxpool_2x2():
    p = pool2d("max", 1, 1, 4, 4, 2)  # stride 2: 4 outputs, windows of 4
    assert wd(p.forward) == (12, 2)  # 3 comparisons per output; depth log2 2 + log2 2
    assert p.forward.bytes == 80 and p.forward.act_bytes == 64  # 4*(16 + 4), x stored
    assert wd(p.grad_input) == (4, 1)  # route ∇y to the arg-max: 1 op per output, no overlap
    assert p.grad_weight.flop == 0 and p.params == 0
    assert p.op == "maxpool"


def test_avgpool_2x2():
    p = pool2d("avg", 1, 1, 4, 4, 2)
    assert wd(p.forward) == (16, 3)  # 3 adds + 1 divide per output; + 1 depth
    # ∇y/K (4) then spread to 4 positions each (16): 20, depth 2
    assert wd(p.grad_input) == (20, 2)
    assert p.op == "avgpool"


def test_pool_overlapping_windows():
    p = pool2d("max", 2, 3, 4, 4, 3, stride=1, pad=1)  # 3x3 s1 p1: 2*3*4*4 = 96 outputs
    assert wd(p.forward) == (96 * 8, 4)
    # max_taps = 3 per dimension: accumulate 3x3 contributions, 1 + log2 3 + log2 3
    assert wd(p.grad_input) == (96, 5)
    assert p.forward.bytes == 4 * (96 + 96)
    a = pool2d("avg", 2, 3, 4, 4, 3, stride=1, pad=1)
    assert wd(a.forward) == (96 * 9, 5)
    assert wd(a.grad_input) == (96 * 9 + 96, 6)


def test_pool_rectangular():
    p = pool2d("max", 1, 1, 4, 6, 2, 3)  # stride (2, 3): 2 x 2 outputs of 6
    assert wd(p.forward) == (4 * 5, 1 + 2)


def test_pool_symbolic_batch():
    p = pool2d("avg", N, 1, 4, 4, 2)
    assert p.forward.flop == 16 * N and p.grad_input.flop == 20 * N
    assert p.forward.depth == 3


# ---------------------------------------------------------------------------------------------------
# normalization
# ---------------------------------------------------------------------------------------------------

def test_batch_norm_hand_counts():
    bn = batch_norm(2, 1, 2)  # m = 2*2 = 4 values per channel, 1 channel
    f = bn.forward
    # mean 3+1, x-mu 4, square 4, var 3+1, eps+rsqrt 2, times rstd 4, gamma and beta 8 -> 7*4 + 2
    assert f.flop == 30
    # mean: log2 4 + 1, x-mu 1, square 1, var: log2 4 + 1, eps 1, rsqrt 1, rstd 1, gamma 1, beta 1
    assert f.depth == 13
    assert bn.params == 2
    assert f.bytes == 4 * (2 * 4 + 2) and f.act_bytes == 16
    # ∇x: Σ∇y (3) and Σ∇y·x̂ (4 + 3), depth 1 + 2; then 5*4 + 2 after, depth 3
    assert wd(bn.grad_input) == (10 + 22, 6)
    assert bn.grad_input.bytes == 4 * (3 * 4 + 2)
    assert bn.grad_weight == Cost()  # ∇gamma, ∇beta are the sums ∇x needs anyway


def test_batch_norm_without_affine():
    bn = batch_norm(2, 1, 2, affine=False)
    assert bn.params == 0
    assert wd(bn.forward) == (5 * 4 + 2, 11)  # no gamma, beta: 2m ops and 2 levels fewer
    assert bn.grad_input.flop == 10 + 21  # (rstd / m) instead of (gamma rstd / m)


def test_batch_norm_m_equals_one():
    bn = batch_norm(1, 1, 1)  # every step is a single op on the critical path: W = D = 9
    assert wd(bn.forward) == (9, 9)


def test_batch_norm_channels_and_symbolic_batch():
    bn = batch_norm(8, 3, 1)  # 3 channels of m = 8
    assert wd(bn.forward) == (3 * 58, 2 * 3 + 9)
    bs = batch_norm(N, 3, 4)
    assert bs.forward.flop == 3 * (7 * 4 * N + 2)
    assert bs.forward.depth.subs(N, 8) == 2 * 5 + 9  # m = 32


def test_batch_norm_depth_grows_with_log_n_weight_norm_does_not():
    # paper §6.1.1: weight normalization takes the depth from O(log N) to O(1)
    bn_depths = [batch_norm(2**k, 16, 1).forward.depth for k in range(0, 11)]
    assert bn_depths == [2 * k + 9 for k in range(0, 11)]  # 2 reductions over N
    assert N in batch_norm(N, 16, 1).forward.depth.free_symbols
    assert N in batch_norm(N, 16, 1).grad_input.depth.free_symbols
    wn = weight_norm(16, 64)
    assert wn.forward.depth == 6 + 4  # log2(fan_in) + 4, no batch anywhere
    assert wn.forward.free_symbols == set()
    # the normalized layer on a batch of N: only the layer's ∇w reduction depends on N
    assert N not in (weight_norm(16, 64).forward + linear(N, 64, 16).forward).depth.free_symbols


def test_weight_norm_hand_counts():
    wn = weight_norm(2, 8)
    # per output unit: square 8, sum 7, sqrt and g/||v|| 2, times v 8 = 25
    assert wd(wn.forward) == (50, 3 + 4)  # square, tree, sqrt, divide, times v
    assert wn.params == 2  # the gains
    assert wn.forward.bytes == 4 * (2 * 16 + 2)
    assert wd(wn.grad_input) == (2 * 40, 7)  # 5k per unit
    assert wd(wn.grad_weight) == (2 * 16, 5)  # ∇g: a dot of 8, 1 + 3, + 1
    assert wn.grad_input.bytes == 4 * 3 * 16


def test_layer_norm_hand_counts():
    ln = layer_norm(3, 4)  # 3 rows of 4 features
    f = ln.forward
    assert f.flop == 3 * (7 * 4 + 2)
    assert f.depth == 13
    assert ln.params == 8
    assert f.bytes == 4 * (24 + 8) and f.act_bytes == 48
    assert wd(ln.grad_input) == (3 * 10 + 3 * 22, 6)
    # ∇gamma = Σ_rows ∇y x̂ (3 + 2), ∇beta = Σ_rows ∇y (2): 7 per feature; depth 1 + log2 3
    assert wd(ln.grad_weight) == (28, 3) and ln.grad_weight.bytes == 4 * 2 * 12
    lf = layer_norm(3, 4, affine=False)
    assert lf.params == 0 and wd(lf.forward) == (3 * 22, 11) and lf.grad_weight == Cost()


def test_group_norm_hand_counts():
    gn = group_norm(2, 4, 3, 2)  # 2 samples x 2 groups = 4 normalizations of m = 2*3 = 6
    assert wd(gn.forward) == (4 * 44, 2 * 3 + 9)
    assert gn.params == 8
    assert gn.forward.bytes == 4 * (48 + 8)
    assert wd(gn.grad_input) == (4 * 16 + 4 * 32, 1 + 3 + 3)
    # ∇gamma, ∇beta per channel over N*spatial = 6 values: 3*6 - 2 = 16 each of 4 channels
    assert wd(gn.grad_weight) == (64, 1 + 3)
    # one group per channel on the whole batch reduces like layer norm of each (sample, channel)
    assert group_norm(2, 4, 3, 4).forward.flop == layer_norm(8, 3).forward.flop


def test_rms_norm_hand_counts():
    r = rms_norm(3, 4)
    # per row: square 4, sum 3, divide, + eps, rsqrt 3, times rstd 4, times g 4 = 18
    assert wd(r.forward) == (54, 2 + 6)
    assert r.params == 4 and r.forward.bytes == 4 * (24 + 4) and r.forward.act_bytes == 48
    assert wd(r.grad_input) == (72, 2 + 5)
    assert wd(r.grad_weight) == (4 * 5, 1 + 2)  # Σ over 3 rows of ∇y·x̂: 3 + 2 per feature


# ---------------------------------------------------------------------------------------------------
# element-wise
# ---------------------------------------------------------------------------------------------------

# (forward ops, forward depth, backward ops, backward depth) per element, by hand:
#   relu     max(x, 0)                                   | mask * ∇y
#   sigmoid  neg, exp, add, div (a chain)                | ∇y*y and 1-y in parallel, then their product
#   tanh     one op                                      | y², 1 - y², * ∇y (a chain of three)
#   gelu     x², x³, *0.044715, +x, *√(2/π), tanh, +1, *0.5x (0.5x in parallel): 9 ops, depth 8
#   silu     sigmoid (4, a chain) then * x: 5, depth 5
# relu6, and the backward of gelu and silu, are the module's stated convention [D].
HAND = {"relu": (1, 1, 1, 1), "sigmoid": (4, 4, 3, 2), "tanh": (1, 1, 3, 3), "gelu": (9, 8, 14, 9),
        "silu": (5, 5, 7, 4), "relu6": (2, 2, 2, 1), "identity": (0, 0, 0, 0)}


def test_every_activation_is_covered():
    assert set(HAND) == set(ACTIVATIONS)


@pytest.mark.parametrize("kind", sorted(HAND))
def test_activation(kind):
    fo, fd, bo, bd = HAND[kind]
    a = activation(kind, 10)
    assert wd(a.forward) == (10 * fo, fd)
    assert wd(a.grad_input) == (10 * bo, bd)
    assert a.grad_weight == Cost() and a.params == 0
    assert a.forward.bytes == 80 and a.forward.act_bytes == 40  # read x, write y; keep 10 values
    assert a.grad_input.bytes == 120  # read ∇y and the stored value, write ∇x
    assert a.op == kind


def test_activation_table4_depth_is_constant():
    # Table 4: O(NCHW) work, O(1) depth
    for kind in HAND:
        small, big = activation(kind, 10), activation(kind, 10**6)
        assert big.forward.depth == small.forward.depth
        assert big.forward.flop == 10**5 * small.forward.flop


def test_dropout():
    d = dropout(10)
    assert wd(d.forward) == (30, 3)  # draw, compare, scale
    assert d.forward.bytes == 4 * 20 + 10 and d.forward.act_bytes == 10  # 1-byte mask kept
    assert wd(d.grad_input) == (10, 1) and d.grad_input.bytes == 90


def test_add():
    a = add(10)
    assert wd(a.forward) == (10, 1) and a.forward.bytes == 4 * 3 * 10
    assert wd(add(10, inputs=3).forward) == (20, 2)  # 2 adds per element as a tree of 3
    assert wd(add(10, inputs=4).forward) == (30, 2)
    assert add(10, inputs=4).forward.bytes == 4 * 5 * 10
    assert wd(a.grad_input) == (0, 0)  # the gradient is passed unchanged


def test_scale_and_concat():
    sc = scale(10)
    assert wd(sc.forward) == (10, 1) and wd(sc.grad_input) == (10, 1) and sc.forward.bytes == 80
    c = concat(10)
    assert wd(c.forward) == (0, 0) and c.forward.bytes == 80 and c.grad_input == Cost()


# ---------------------------------------------------------------------------------------------------
# softmax, embedding
# ---------------------------------------------------------------------------------------------------

def test_softmax_hand_counts():
    sm = softmax(2, 4)
    # per row of 4: max 3, x - max 4, exp 4, sum 3, divide 4 = 18; depth 2 + 1 + 1 + 2 + 1
    assert wd(sm.forward) == (36, 7)
    assert sm.forward.bytes == 64 and sm.forward.act_bytes == 32
    # ∇y⊙y 4, sum 3, ∇y - sum 4, y⊙ 4 = 15; depth 1 + 2 + 1 + 1
    assert wd(sm.grad_input) == (30, 5) and sm.grad_input.bytes == 96
    sm5 = softmax(3, 5)
    assert wd(sm5.forward) == (3 * 23, 2 * 3 + 3) and wd(sm5.grad_input) == (3 * 19, 3 + 3)


def test_embedding_hand_counts():
    e = embedding(4, 10, 3)
    assert e.params == 30
    assert wd(e.forward) == (0, 0)  # a gather
    assert e.forward.bytes == 4 * 2 * 12 + 8 * 4  # rows read and written, int64 ids
    assert e.forward.act_bytes == 32  # the ids
    # scatter-add of 4 rows of 3; worst case all 4 tokens on one row: depth log2 4
    assert wd(e.grad_weight) == (12, 2)
    assert e.grad_weight.bytes == 4 * 3 * 12 + 32
    assert e.grad_input == Cost()


# ---------------------------------------------------------------------------------------------------
# attention
# ---------------------------------------------------------------------------------------------------

def test_attention_plain_hand_counts():
    a = attention(1, 1, 4, 2)  # one head, s = 4, d = 2
    f = a.forward
    # S = Q Kᵀ: 4*4*2 = 32 MACs, depth 1 + log2 2; scale 16, depth 1; softmax 4 rows of 4: 72, depth 7;
    # O = P V: 4*2*4 = 32 MACs, depth 1 + log2 4
    assert f.macs == 64
    assert f.flop == 64 + 16 + 72 + 64
    assert f.depth == 2 + 1 + 7 + 3
    # QKᵀ 4*(8+8+16), scale 4*32, softmax 4*32, PV 4*(16+8+8)
    assert f.bytes == 512
    assert f.act_bytes == 4 * (8 + 2 * 8 + 16)  # Q, K, V and P
    # backward, in reverse: PV grads (both inputs: 128 FLOP, depth max(1+1, 1+2) = 3), softmax 60 / 5,
    # scale 16 / 1, QKᵀ grads (128 FLOP, depth max(1+2, 1+2) = 3)
    assert wd(a.grad_input) == (128 + 60 + 16 + 128, 3 + 5 + 1 + 3)
    assert a.grad_input.macs == 128
    assert a.grad_input.bytes == 256 + 192 + 128 + 256
    assert a.grad_weight.flop == 0 and a.params == 0


def test_attention_fused_hand_counts():
    a = attention(1, 1, 4, 2, fused=True)
    f = a.forward
    assert wd(f) == (216, 13) and f.macs == 64  # the same arithmetic as plain
    # Q, K, V read and O written: 4*(8+8+8+8) = 128, plus a 4-byte log-sum-exp per row (16)
    assert f.bytes == 144 and f.act_bytes == 144
    # backward recomputes QKᵀ, scale, softmax (64 + 16 + 72 = 152, depth 2 + 1 + 7) then the plain backward
    assert wd(a.grad_input) == (152 + 332, 10 + 12)
    assert a.grad_input.macs == 32 + 128
    assert a.grad_input.bytes == 2 * 128 + 16  # read Q K V O ∇O, lse; write ∇Q ∇K ∇V
    assert a.op == "flash_attention"


def test_attention_fused_causal():
    a = attention(1, 1, 4, 2, fused=True, causal=True)
    frac = sp.Rational(5, 8)  # (s + 1) / (2 s) of the s² blocks
    assert a.forward.flop == 216 * frac and a.forward.macs == 64 * frac
    assert a.grad_input.flop == 484 * frac
    assert a.forward.depth == 13 and a.forward.bytes == 144  # depth and traffic unchanged
    full = attention(1, 1, 4, 2, fused=True)
    assert a.forward.flop < full.forward.flop


def test_attention_cross_lengths():
    a = attention(1, 1, 2, 2, seq_kv=3)
    # QKᵀ 2*3*2 = 12 MACs (depth 2), scale 6, softmax 2 rows of 3: 2*13 (depth 7), PV 2*2*3 (depth 1+2)
    assert wd(a.forward) == (24 + 6 + 26 + 24, 2 + 1 + 7 + 3)
    assert a.forward.act_bytes == 4 * (4 + 2 * 6 + 6)


def test_attention_fused_moves_less_and_stores_no_s_squared():
    plain, fused = attention(1, 12, s, 64), attention(1, 12, s, 64, fused=True)
    assert sp.Poly(plain.forward.bytes, s).degree() == 2
    assert sp.Poly(plain.forward.act_bytes, s).degree() == 2
    assert sp.Poly(fused.forward.bytes, s).degree() == 1
    assert sp.Poly(fused.forward.act_bytes, s).degree() == 1  # no s² activations stored
    assert sp.Poly(fused.grad_input.bytes, s).degree() == 1
    for seq in (512, 2048, 8192):
        p, f = attention(2, 12, seq, 64), attention(2, 12, seq, 64, fused=True)
        assert f.forward.bytes < p.forward.bytes
        assert f.forward.act_bytes < p.forward.act_bytes
        assert f.training.bytes < p.training.bytes
        assert f.forward.flop == p.forward.flop  # the same arithmetic forward
        assert f.training.flop > p.training.flop  # recomputation in the backward


def test_multi_head_attention_hand_counts():
    m = multi_head_attention(1, 4, 8, 2)  # 4 tokens, hidden 8, 2 heads of 4
    # QKV linear(4, 8, 24): 768 MACs, 1536 + 96 bias; core attention(1, 2, 4, 4): QKᵀ 128 MACs (256,
    # depth 3), scale 32, softmax 8 rows of 4 (144, depth 7), PV 128 MACs (256, depth 3);
    # out linear(4, 8, 8): 256 MACs, 512 + 32
    assert m.params == 4 * 8 * 8 + 4 * 8
    assert m.forward.macs == 768 + 256 + 256
    assert m.forward.flop == 1632 + 688 + 544
    assert m.forward.depth == 5 + 14 + 5
    # ∇x: out (1 + log2 8 = 4), core (3 + 5 + 1 + 3 = 12), QKV (1 + log2 24 = 6)
    assert wd(m.grad_input) == (512 + 1176 + 1536, 22)
    # ∇w: out's at depth 3; QKV's after out and core's ∇x: 4 + 12 + 3 = 19
    assert wd(m.grad_weight) == (536 + 1608, 19)
    assert m.backward.depth == 22


def test_multi_head_attention_fused_causal():
    plain = multi_head_attention(2, 16, 32, 4)
    fused = multi_head_attention(2, 16, 32, 4, fused=True, causal=True)
    assert fused.params == plain.params == 4 * 32 * 32 + 4 * 32
    core_plain = attention(2, 4, 16, 8)
    core_fused = attention(2, 4, 16, 8, fused=True, causal=True)
    assert fused.forward.flop - plain.forward.flop == core_fused.forward.flop - core_plain.forward.flop
    assert fused.forward.flop < plain.forward.flop


# ---------------------------------------------------------------------------------------------------
# recurrent
# ---------------------------------------------------------------------------------------------------

def torch_params(gates, input_size, hidden, layers, bias=True):
    """nn.RNN / nn.GRU / nn.LSTM: G H (I + H) + 2 G H per layer, I = hidden above the first."""
    total = 0
    for layer in range(layers):
        i = input_size if layer == 0 else hidden
        total += gates * hidden * (i + hidden) + (2 * gates * hidden if bias else 0)
    return total


@pytest.mark.parametrize("cell, gates", [("rnn", 1), ("gru", 3), ("lstm", 4)])
@pytest.mark.parametrize("i, h, layers", [(3, 4, 1), (3, 4, 2), (10, 20, 2), (128, 256, 3)])
def test_recurrent_params_equal_torch(cell, gates, i, h, layers):
    assert recurrent(cell, 5, 2, i, h, layers=layers).params == torch_params(gates, i, h, layers)
    assert recurrent(cell, 5, 2, i, h, layers=layers, bias=False).params == \
        torch_params(gates, i, h, layers, bias=False)


def test_recurrent_known_torch_counts():
    assert recurrent("lstm", 1, 1, 10, 20, layers=2).params == 5920  # nn.LSTM(10, 20, 2)
    assert recurrent("gru", 1, 1, 10, 20).params == 1920  # nn.GRU(10, 20): 3*20*30 + 120
    assert recurrent("rnn", 1, 1, 10, 20).params == 640  # nn.RNN(10, 20): 20*30 + 40


def test_rnn_two_layers_hand_counts():
    r = recurrent("rnn", 3, 1, 2, 4, layers=2)  # T = 3, batch 1, I = 2, H = 4
    f = r.forward
    assert r.params == (4 * 6 + 8) + (4 * 8 + 8)
    assert f.macs == 3 * 4 * 6 + 3 * 4 * 8  # T n G H (I + H) per layer: 72 + 96
    # 2*168 + cell (tanh 1 + 1 projection add) * 2*3*4 + 2 bias adds * 2*3*4
    assert f.flop == 336 + 48 + 48
    # D_in = 1 + log2 2 + 1 = 3; D_up = D_rec = 1 + log2 4 + 1 = 4; D_cell = 1 + 1 = 2;
    # longest path: 3 + (L-1) 4 + (T-1) 4 + (T+L-1) 2 = 3 + 4 + 8 + 8
    assert f.depth == 23
    assert f.bytes == 4 * (6 + 72 + 12)
    assert f.act_bytes == 4 * (6 + 2 * 3 * 4 * 3)  # x, and per layer and step gates + h + c
    assert wd(r.grad_input) == (336 + 72, 23 + 6)  # 1.5x the cell ops; + L T depth
    assert wd(r.grad_weight) == (336 + 24, 1 + 2)  # sums over n T = 3
    assert r.grad_input.bytes == 4 * (12 + 72 + 6 + 72)


def test_lstm_two_layers_hand_counts():
    r = recurrent("lstm", 2, 1, 3, 4, layers=2)
    f = r.forward
    assert r.params == 304  # (4*4*7 + 32) + (4*4*8 + 32)
    assert f.macs == 2 * 16 * 7 + 2 * 16 * 8  # 224 + 256
    # cell: 3 sigmoids (12), tanh g, f c + i g (3), tanh c, o tanh c = 18, + 4 projection adds: 22 per
    # unit * L T n H = 16; bias adds 2 * 4 * 16 = 128
    assert f.flop == 960 + 352 + 128
    # D_in = 1 + 2 + 1, D_up = D_rec = 4, D_cell = 1 + 8; 4 + 4 + 4 + 3 * 9
    assert f.depth == 39
    assert f.act_bytes == 4 * (6 + 16 * 6)
    assert wd(r.grad_input) == (960 + 528, 39 + 4)
    assert wd(r.grad_weight) == (960 + 64, 2)


def test_gru_hand_counts():
    r = recurrent("gru", 2, 1, 3, 4)
    assert r.params == 3 * 4 * 7 + 24
    assert r.forward.macs == 2 * 12 * 7
    # cell: 2 sigmoids (8), r ⊙ (W_hn h + b_hn), + W_in x, tanh, (1-z) ⊙ n + z ⊙ h (4) = 15; projection
    # adds for r and z (n's is the "+" above): 17 per unit * 8; bias adds 2 * 3 * 8 = 48
    assert r.forward.flop == 336 + 136 + 48
    # D_in = 1 + 2 + 1 = 4, D_rec = 4, D_cell = 1 + 9: 4 + 4 + 2 * 10
    assert r.forward.depth == 28
    assert wd(r.grad_input) == (336 + 204, 30)
    assert wd(r.grad_weight) == (336 + 24, 2)


@pytest.mark.parametrize("cell", ["rnn", "gru", "lstm"])
def test_recurrent_depth_linear_in_sequence_length(cell):
    d = [recurrent(cell, t, 2, 8, 8).forward.depth for t in range(1, 12)]
    steps = {b - a for a, b in zip(d, d[1:])}
    assert len(steps) == 1  # a constant increment per step: D linear in T
    step = steps.pop()
    cell_depth = {"rnn": 1, "gru": 9, "lstm": 8}[cell]
    assert step == (1 + 3 + 1) + (1 + cell_depth)  # D_rec + D_cell
    # and independent of the batch
    assert recurrent(cell, 5, 1, 8, 8).forward.depth == recurrent(cell, 5, 64, 8, 8).forward.depth
    assert recurrent("rnn", 20, 1, 4, 4).forward.depth - recurrent("rnn", 10, 1, 4, 4).forward.depth == 60


def test_recurrent_layers_add_depth_up_the_stack():
    one, three = recurrent("lstm", 4, 1, 8, 8), recurrent("lstm", 4, 1, 8, 8, layers=3)
    assert three.forward.depth - one.forward.depth == 2 * ((1 + 3 + 1) + (1 + 8))


# ---------------------------------------------------------------------------------------------------
# reduction and optimizer
# ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, depth", [(1, 0), (2, 1), (3, 2), (8, 3), (1000, 10), (1024, 10), (1025, 11)])
def test_reduction_tree_paper(n, depth):
    r = reduction(n)
    assert wd(r.forward) == (n - 1, depth)  # paper §2.5: W = n - 1, D = ceil(log2 n)
    assert r.forward.bytes == 4 * (n + 1)
    assert wd(r.grad_input) == (0, 1)  # ∇y broadcast: copies, no arithmetic
    assert r.op == "reduction"


def test_reduction_chain():
    r = reduction(8, tree=False)
    assert wd(r.forward) == (7, 7)  # Fig. 5a: D = n - 1
    assert r.op == "reduction_chain"
    assert wd(reduction(1, tree=False).forward) == (0, 0)
    assert reduction(N).forward.flop == N - 1


def test_every_optimizer_has_its_state_in_the_memory_model():
    from concurrency_model.ops.optimizer import RULES
    from concurrency_model.parallel.memory import OPTIMIZER_STATES
    assert set(RULES) == set(OPTIMIZER_STATES)


@pytest.mark.parametrize("kind, ops, depth, tensors", [
    ("sgd", 2, 2, 3),  # lr*g, w - (reads w, g; writes w)
    ("momentum", 4, 4, 5),  # mu v, + g, lr v, w - (reads w, g, v; writes w, v)
    ("nesterov", 6, 6, 5),  # mu v, + g, mu v, + g, * lr, w -
    ("adagrad", 7, 7, 5),  # g², A +; + eps, sqrt, /, * lr, w - (reads w, g, A; writes w, A)
    ("rmsprop", 9, 8, 5),  # g², (1-b) g², b A, +; + eps, sqrt, /, * lr, w -; b A is off the chain
    ("adam", 14, 9, 7),  # m: 3, v: 4, corrections 2, sqrt, +eps, /, *lr, - : 5
    ("adamw", 16, 9, 7),  # + lr wd w, subtract; off the critical path
    ("lamb", 20, 14 + 4, 10),  # adam to r: 12, + wd w: 2, two norms: 4, scale + subtract: 2; reduce over 10: 4
])
def test_optimizer_update(kind, ops, depth, tensors):
    u = optimizer_update(kind, 10)
    assert wd(u.forward) == (10 * ops, depth)
    assert u.forward.bytes == 4 * tensors * 10
    assert u.op == f"{kind}_update"
    z = optimizer_update(kind, 0)
    assert wd(z.forward) == (0, 0)


# ---------------------------------------------------------------------------------------------------
# bad input: ValueError naming the field
# ---------------------------------------------------------------------------------------------------

BAD_SIZES = [0, -3, 2.5, True, False, "4", None, sp.Rational(1, 2)]


def _pool_stride(v):
    return pool2d("max", 1, 1, 4, 4, 2, stride=v)


SIZE_FIELDS = [
    (lambda v: gemm(v, 2, 2), "m"), (lambda v: gemm(2, v, 2), "n"), (lambda v: gemm(2, 2, v), "k"),
    (lambda v: gemm(2, 2, 2, batch=v), "batch"),
    (lambda v: linear(v, 2, 2), "n"), (lambda v: linear(2, v, 2), "c_in"), (lambda v: linear(2, 2, v), "c_out"),
    (lambda v: conv2d(v, 1, 1, 4, 4, 3), "n"), (lambda v: conv2d(1, v, 1, 4, 4, 3), "c_in"),
    (lambda v: conv2d(1, 1, v, 4, 4, 3), "c_out"), (lambda v: conv2d(1, 1, 1, v, 4, 3), "h"),
    (lambda v: conv2d(1, 1, 1, 4, v, 3), "w"), (lambda v: conv2d(1, 1, 1, 4, 4, v), "kh"),
    (lambda v: conv2d(1, 1, 1, 4, 4, 3, v), "kw"), (lambda v: conv2d(1, 1, 1, 4, 4, 3, stride=v), "stride"),
    (lambda v: conv2d(1, 1, 1, 4, 4, 3, dilation=v), "dilation"),
    (lambda v: conv2d(1, 1, 1, 4, 4, 3, groups=v), "groups"),
    (lambda v: conv2d(1, 1, 1, 4, 4, 3, algorithm="winograd", winograd_m=v), "winograd_m"),
    (lambda v: pool2d("max", v, 1, 4, 4, 2), "n"), (lambda v: pool2d("max", 1, v, 4, 4, 2), "c"),
    (lambda v: pool2d("max", 1, 1, 4, 4, v), "kh"), (_pool_stride, "stride"),
    (lambda v: batch_norm(v, 2), "n"), (lambda v: batch_norm(2, v), "c"), (lambda v: batch_norm(2, 2, v), "spatial"),
    (lambda v: layer_norm(v, 4), "rows"), (lambda v: layer_norm(4, v), "features"),
    (lambda v: group_norm(2, 4, 1, v), "groups"), (lambda v: rms_norm(2, v), "features"),
    (lambda v: weight_norm(v, 4), "c_out"), (lambda v: weight_norm(4, v), "fan_in"),
    (lambda v: activation("relu", v), "elements"), (lambda v: dropout(v), "elements"),
    (lambda v: add(v), "elements"), (lambda v: scale(v), "elements"), (lambda v: concat(v), "elements"),
    (lambda v: softmax(v, 4), "rows"), (lambda v: softmax(4, v), "k"),
    (lambda v: embedding(v, 10, 3), "tokens"), (lambda v: embedding(4, v, 3), "vocab"),
    (lambda v: embedding(4, 10, v), "dim"),
    (lambda v: attention(v, 1, 4, 2), "batch"), (lambda v: attention(1, v, 4, 2), "heads"),
    (lambda v: attention(1, 1, v, 2), "seq_q"), (lambda v: attention(1, 1, 4, v), "head_dim"),
    (lambda v: attention(1, 1, 4, 2, seq_kv=v), "seq_kv"),
    (lambda v: multi_head_attention(1, 4, v, 2), "hidden"), (lambda v: multi_head_attention(1, 4, 8, v), "heads"),
    (lambda v: multi_head_attention(v, 4, 8, 2), "batch"), (lambda v: multi_head_attention(1, v, 8, 2), "seq"),
    (lambda v: recurrent("lstm", v, 1, 4, 4), "seq_len"), (lambda v: recurrent("lstm", 2, v, 4, 4), "batch"),
    (lambda v: recurrent("lstm", 2, 1, v, 4), "input_size"), (lambda v: recurrent("lstm", 2, 1, 4, v), "hidden"),
    (lambda v: recurrent("lstm", 2, 1, 4, 4, layers=v), "layers"),
    (lambda v: reduction(v), "n"),
]
OPTIONAL = {"kw", "seq_kv"}  # None means "the default" there (and for pooling's stride)


@pytest.mark.parametrize("call, field, bad", [(c, f, b) for c, f in SIZE_FIELDS for b in BAD_SIZES
                                              if not (b is None and (f in OPTIONAL or c is _pool_stride))])
def test_bad_sizes_name_the_field(call, field, bad):
    with pytest.raises(ValueError, match=rf"^{field}:"):
        call(bad)


@pytest.mark.parametrize("bad", [-1, 1.5, True, "3"])
def test_bad_minimum_zero_sizes(bad):
    with pytest.raises(ValueError, match=r"^params:"):
        optimizer_update("sgd", bad)
    with pytest.raises(ValueError, match=r"^pad:"):
        conv2d(1, 1, 1, 4, 4, 3, pad=bad)
    with pytest.raises(ValueError, match=r"^pad:"):
        pool2d("max", 1, 1, 4, 4, 2, pad=bad)


def test_add_needs_two_inputs():
    with pytest.raises(ValueError, match=r"^inputs: must be an integer >= 2"):
        add(10, inputs=1)


def test_integral_floats_and_numpy_ints_are_accepted():
    np = pytest.importorskip("numpy")
    assert linear(2.0, 3, np.int64(4)).forward == linear(2, 3, 4).forward
    assert check_size("x", sp.Integer(3)) == 3


@pytest.mark.parametrize("bad", [sp.Symbol("x_neg", negative=True), sp.Symbol("x_free"),
                                 sp.Symbol("x_real", positive=True, integer=False)])
def test_symbols_must_be_declared_positive_integers(bad):
    with pytest.raises(ValueError, match=r"^n: symbol"):
        linear(bad, 2, 2)
    with pytest.raises(ValueError, match=r"^batch: symbol"):
        attention(bad, 1, 4, 2)


def test_declared_symbols_are_accepted():
    assert linear(N, 2, 2).forward.flop == 2 * N * 4 + 2 * N
    q = sp.Symbol("q_nonneg", integer=True, nonnegative=True)
    assert optimizer_update("sgd", q).forward.flop == 2 * q  # params may be 0


@pytest.mark.parametrize("bad", [0, -4, True, "fp32", None])
def test_bad_value_bytes(bad):
    with pytest.raises(ValueError, match=r"^value_bytes:"):
        linear(2, 2, 2, value_bytes=bad)
    with pytest.raises(ValueError, match=r"^value_bytes:"):
        conv2d(1, 1, 1, 4, 4, 3, value_bytes=bad)


def test_kernel_larger_than_padded_input():
    with pytest.raises(ValueError, match=r"^kh: kernel extent 5 is larger than the padded input 4"):
        conv2d(1, 1, 1, 4, 4, 5)
    with pytest.raises(ValueError, match=r"^kw: kernel extent 4 is larger than the padded input 3"):
        conv2d(1, 1, 1, 8, 3, 3, 4)
    with pytest.raises(ValueError, match=r"^kh: kernel extent 5 "):  # dilation 2 makes 3 into 5
        conv2d(1, 1, 1, 4, 4, 3, dilation=2)
    with pytest.raises(ValueError, match=r"^kh:"):
        pool2d("max", 1, 1, 2, 2, 3)
    # padding makes room: 5 on 3 + 2*1
    assert conv2d(1, 1, 1, 3, 3, 5, pad=1).forward.macs == 25


def test_channels_not_divisible_by_groups():
    with pytest.raises(ValueError, match=r"^groups: c_in=3 and c_out=4 must both be divisible by groups=2"):
        conv2d(1, 3, 4, 5, 5, 3, groups=2)
    with pytest.raises(ValueError, match=r"^groups:"):
        conv2d(1, 4, 3, 5, 5, 3, groups=2)
    with pytest.raises(ValueError, match=r"^groups:"):
        group_norm(1, 6, 1, 4)
    with pytest.raises(ValueError, match=r"^heads: hidden=10 must be divisible by heads=4"):
        multi_head_attention(1, 4, 10, 4)


@pytest.mark.parametrize("call, field", [
    (lambda: conv2d(1, 1, 1, 4, 4, 3, algorithm="gemm"), "algorithm"),
    (lambda: table6("gemm", 1, 1, 1, 4, 4, 3, 3), "method"),
    (lambda: pool2d("min", 1, 1, 4, 4, 2), "pool"),
    (lambda: activation("swish", 10), "activation"),
    (lambda: activation("RELU", 10), "activation"),
    (lambda: optimizer_update("lars", 10), "optimizer"),
    (lambda: recurrent("transformer", 2, 1, 4, 4), "cell"),
])
def test_unknown_names(call, field):
    with pytest.raises(ValueError, match=rf"^{field}: unknown .*allowed: "):
        call()


def test_algorithm_restrictions():
    for alg in ("fft", "winograd"):
        with pytest.raises(ValueError, match=r"^algorithm: .* needs stride 1, dilation 1 and groups 1"):
            conv2d(1, 2, 2, 8, 8, 3, stride=2, algorithm=alg)
        with pytest.raises(ValueError, match=r"^algorithm:"):
            conv2d(1, 2, 2, 8, 8, 3, dilation=2, algorithm=alg)
        with pytest.raises(ValueError, match=r"^algorithm:"):
            conv2d(1, 2, 2, 8, 8, 3, groups=2, algorithm=alg)
    with pytest.raises(ValueError, match=r"^kw: winograd needs a square kernel"):
        conv2d(1, 1, 1, 8, 8, 3, 2, algorithm="winograd")
    with pytest.raises(ValueError, match=r"^stride: expected one integer or a pair"):
        conv2d(1, 1, 1, 8, 8, 3, stride=(1, 1, 1))
    with pytest.raises(ValueError, match=r"^causal: seq_q = 8 queries exceed the seq_kv = 4 positions they attend to"):
        attention(1, 1, 8, 2, seq_kv=4, fused=True, causal=True)


SYM = sp.symbols("N C_in C_out H W K", positive=True, integer=True)


@given(n=st.integers(1, 8), ci=st.integers(1, 64), co=st.integers(1, 64), h=st.integers(3, 64),
       w=st.integers(3, 64), k=st.sampled_from([1, 2, 3]), method=st.sampled_from(["direct", "im2col", "fft",
                                                                                      "winograd"]))
@settings(max_examples=40, deadline=None)
def test_table6_is_symbolic_in_every_size(n, ci, co, h, w, k, method):
    # paper Table 6 is printed in N, C_in, C_out, H, W and the kernel size: the symbolic entry, substituted,
    # is the numeric one
    N_, Ci, Co, H, W, K = SYM
    sub = {N_: n, Ci: ci, Co: co, H: h, W: w, K: k}
    ws, ds = table6(method, N_, Ci, Co, H, W, K, K, c=5)
    wn, dn = table6(method, n, ci, co, h, w, k, k, c=5)
    assert sp.simplify(ws.subs(sub) - wn) == 0 and ds.subs(sub) == dn


@given(n=st.integers(1, 8), ci=st.integers(1, 32), co=st.integers(1, 32), h=st.integers(12, 40),
       w=st.integers(12, 40), k=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]),
       dilation=st.sampled_from([1, 2]), pad=st.integers(0, 2),
       algorithm=st.sampled_from(["direct", "im2col", "fft", "winograd"]))
@settings(max_examples=30, deadline=None)
def test_conv2d_is_symbolic_in_batch_channels_sizes_and_kernel(n, ci, co, h, w, k, stride, dilation, pad,
                                                                algorithm):
    # every count of the full model (work, depth, bytes, MACs of the three passes) substituted equals the
    # numeric count, once the input is larger than the kernel's extent plus the stride (interior taps)
    if algorithm in ("fft", "winograd"):
        stride = dilation = 1
    N_, Ci, Co, H, W, K = SYM
    sub = {N_: n, Ci: ci, Co: co, H: h, W: w, K: k}
    kw = dict(stride=stride, pad=pad, dilation=dilation, algorithm=algorithm, bias=True)
    s_, c_ = conv2d(N_, Ci, Co, H, W, K, **kw), conv2d(n, ci, co, h, w, k, **kw)
    for part in ("forward", "grad_input", "grad_weight"):
        for f in ("flop", "depth", "bytes", "macs"):
            got, want = getattr(getattr(s_, part), f).subs(sub), getattr(getattr(c_, part), f)
            assert float(got) == pytest.approx(float(want), rel=1e-12), (part, f)


def test_symbolic_conv_refuses_symbolic_strides_and_unsigned_symbols():
    N_, Ci, Co, H, W, K = SYM
    with pytest.raises(ValueError, match="stride: must be a number"):
        conv2d(1, 1, 1, H, W, 3, stride=sp.Symbol("S", positive=True, integer=True))
    with pytest.raises(ValueError, match="c_in: symbol x must be a positive integer symbol"):
        conv2d(1, sp.Symbol("x"), 1, 8, 8, 3)
