"""Property tests of the operator library (hypothesis): W >= D >= 1, monotone work, batch splitting,
identities between operators, and symbolic batch == numeric batch."""
from __future__ import annotations

import math

import pytest
import sympy as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concurrency_model.cost import Cost, OpCost, chain, clog2
from concurrency_model.ops.attention import attention, multi_head_attention
from concurrency_model.ops.conv import conv2d
from concurrency_model.ops.dense import gemm, linear
from concurrency_model.ops.elementwise import ACTIVATIONS, activation, add, channel_scale, concat, dropout, scale
from concurrency_model.ops.embedding import embedding
from concurrency_model.ops.norm import batch_norm, group_norm, layer_norm, rms_norm, weight_norm
from concurrency_model.ops.optimizer import RULES, optimizer_update
from concurrency_model.ops.pool import pool2d
from concurrency_model.ops.recurrent import CELLS, recurrent
from concurrency_model.ops.reduction import reduction
from concurrency_model.ops.softmax import softmax
from concurrency_model.symbols import N

SETTINGS = settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
small = st.integers(1, 6)
tiny = st.integers(1, 3)


def parts(op: OpCost) -> list[Cost]:
    return [op.forward, op.grad_input, op.grad_weight, op.backward, op.training]


def num(e) -> float:
    return float(sp.sympify(e))


# ---------------------------------------------------------------------------------------------------
# strategies: valid keyword arguments for every operator
# ---------------------------------------------------------------------------------------------------

@st.composite
def conv_args(draw, algorithm=None):
    alg = draw(st.sampled_from(["direct", "im2col", "fft", "winograd"])) if algorithm is None else algorithm
    simple = alg in ("fft", "winograd")
    kh = draw(st.integers(1, 3))
    kw = kh if alg == "winograd" else draw(st.integers(1, 3))
    stride = 1 if simple else draw(st.integers(1, 2))
    dil = 1 if simple else draw(st.integers(1, 2))
    groups = 1 if simple else draw(st.integers(1, 2))
    pad = draw(st.integers(0, 1))
    eh, ew = dil * (kh - 1) + 1, dil * (kw - 1) + 1
    h = draw(st.integers(max(1, eh - 2 * pad), eh + 4))
    w = draw(st.integers(max(1, ew - 2 * pad), ew + 4))
    if alg == "fft" and (h + 2 * pad) * (w + 2 * pad) < 2:
        # Table 6's FFT depth 2 log2(HW) + log2(C_in) is 0 for a 1x1 transform: no W >= D >= 1 there
        h = 2
    return dict(n=draw(small), c_in=groups * draw(tiny), c_out=groups * draw(tiny), h=h, w=w, kh=kh, kw=kw,
                stride=stride, pad=pad, dilation=dil, groups=groups, bias=draw(st.booleans()), algorithm=alg,
                winograd_m=draw(st.integers(2, 4)))


@st.composite
def pool_args(draw):
    kh, kw = draw(tiny), draw(tiny)
    stride = draw(st.sampled_from([None, 1, 2]))
    pad = draw(st.integers(0, min(kh, kw) // 2))
    return dict(kind=draw(st.sampled_from(["max", "avg"])), n=draw(small), c=draw(tiny),
                h=draw(st.integers(kh, kh + 4)), w=draw(st.integers(kw, kw + 4)), kh=kh, kw=kw, stride=stride,
                pad=pad)


@st.composite
def attention_args(draw):
    fused = draw(st.booleans())
    causal = fused and draw(st.booleans())
    sq = draw(small)
    skv = sq if causal else draw(st.sampled_from([None, 1, 2, 5]))
    return dict(batch=draw(tiny), heads=draw(tiny), seq_q=sq, head_dim=draw(small), seq_kv=skv, fused=fused,
                causal=causal)


@st.composite
def mha_args(draw):
    fused = draw(st.booleans())
    return dict(batch=draw(tiny), seq=draw(small), head_dim=draw(tiny), heads=draw(tiny), fused=fused,
                causal=fused and draw(st.booleans()), bias=draw(st.booleans()))


def _mha(batch, seq, head_dim, heads, **kw):
    return multi_head_attention(batch, seq, head_dim * heads, heads, **kw)


def _group_norm(n, c_per_group, spatial, groups, affine):
    return group_norm(n, c_per_group * groups, spatial, groups, affine)


# name -> (builder, strategy of keyword arguments)
BUILDERS = {
    "gemm": (gemm, st.fixed_dictionaries(dict(m=small, n=small, k=small, batch=tiny))),
    "linear": (linear, st.fixed_dictionaries(dict(n=small, c_in=small, c_out=small, bias=st.booleans()))),
    "conv2d": (conv2d, conv_args()),
    "pool2d": (pool2d, pool_args()),
    "batch_norm": (batch_norm, st.fixed_dictionaries(dict(n=small, c=tiny, spatial=tiny, affine=st.booleans()))),
    "layer_norm": (layer_norm, st.fixed_dictionaries(dict(rows=small, features=small, affine=st.booleans()))),
    "group_norm": (_group_norm, st.fixed_dictionaries(dict(n=tiny, c_per_group=tiny, spatial=tiny, groups=tiny,
                                                           affine=st.booleans()))),
    "rms_norm": (rms_norm, st.fixed_dictionaries(dict(rows=small, features=small))),
    "weight_norm": (weight_norm, st.fixed_dictionaries(dict(c_out=small, fan_in=small))),
    "activation": (activation, st.fixed_dictionaries(dict(kind=st.sampled_from(sorted(ACTIVATIONS)),
                                                          elements=small))),
    "dropout": (dropout, st.fixed_dictionaries(dict(elements=small))),
    "add": (add, st.fixed_dictionaries(dict(elements=small, inputs=st.integers(2, 5)))),
    "scale": (scale, st.fixed_dictionaries(dict(elements=small))),
    "channel_scale": (channel_scale, st.fixed_dictionaries(dict(maps=small, spatial=small))),
    "concat": (concat, st.fixed_dictionaries(dict(elements=small))),
    "softmax": (softmax, st.fixed_dictionaries(dict(rows=small, k=small))),
    # tokens >= 2: with one token the scatter-add does `dim` adds at depth ceil(log2 1) = 0 (module convention)
    "embedding": (embedding, st.fixed_dictionaries(dict(tokens=st.integers(2, 6), vocab=small, dim=small))),
    "attention": (attention, attention_args()),
    "multi_head_attention": (_mha, mha_args()),
    "recurrent": (recurrent, st.fixed_dictionaries(dict(cell=st.sampled_from(sorted(CELLS)), seq_len=small,
                                                        batch=tiny, input_size=tiny, hidden=tiny,
                                                        layers=tiny, bias=st.booleans()))),
    "reduction": (reduction, st.fixed_dictionaries(dict(n=small, tree=st.booleans()))),
    "optimizer_update": (optimizer_update, st.fixed_dictionaries(dict(kind=st.sampled_from(sorted(RULES)),
                                                                      params=st.integers(0, 6)))),
}


@st.composite
def any_op(draw):
    name = draw(st.sampled_from(sorted(BUILDERS)))
    build, args = BUILDERS[name]
    kw = draw(args)
    return name, kw, build(**kw)


# ---------------------------------------------------------------------------------------------------
# W >= D >= 1 wherever there is arithmetic
# ---------------------------------------------------------------------------------------------------

def assert_work_dominates_depth(name, kw, op):
    """Every evaluation with arithmetic has W >= D >= 1; one without has D = 0. The one documented
    exception is the reduction's ∇x, a broadcast of ∇y: copies (no FLOP) at depth 1.

    A composite built by ``chain`` (multi-head attention) gives its ∇w the depth of the backward critical
    path through the later layers' ∇x (cost.chain), so only ``backward`` = ∇x | ∇w must have W >= D.
    """
    broadcast = name == "reduction"
    chained = name == "multi_head_attention"
    for part in ("forward", "grad_input", "grad_weight"):
        c = getattr(op, part)
        w, d = num(c.flop), num(c.depth)
        assert w >= 0 and d >= 0 and num(c.bytes) >= 0 and num(c.macs) >= 0 and num(c.act_bytes) >= 0
        assert 2 * num(c.macs) <= w or c.macs == 0, (name, kw, part, c)  # a MAC is 2 of the FLOP
        if w > 0 and chained and part == "grad_weight":
            assert d >= 1
        elif w > 0:
            assert w >= d >= 1, (name, kw, part, c)
        elif broadcast and part == "grad_input":
            assert d == 1
        else:
            assert d == 0, (name, kw, part, c)
    if not broadcast:  # then sequential and parallel compositions keep W >= D
        for c in (op.backward, op.training):
            if num(c.flop) > 0:
                assert num(c.flop) >= num(c.depth) >= 1, (name, kw, c)


@SETTINGS
@given(any_op())
def test_work_dominates_depth(case):
    assert_work_dominates_depth(*case)


@pytest.mark.parametrize("name", sorted(BUILDERS))
@settings(max_examples=5, deadline=None)
@given(data=st.data())
def test_every_builder_is_exercised(name, data):
    # a few examples per operator family, so that every builder runs whatever the draw above
    build, args = BUILDERS[name]
    kw = data.draw(args)
    assert_work_dominates_depth(name, kw, build(**kw))


# ---------------------------------------------------------------------------------------------------
# work grows with every size argument
# ---------------------------------------------------------------------------------------------------

# name -> (size arguments that can be increased freely, those of them along which work must grow strictly)
GROWTH = {
    "gemm": ({"m", "n", "k", "batch"}, {"m", "n", "k", "batch"}),
    "linear": ({"n", "c_in", "c_out"}, {"n", "c_in", "c_out"}),
    # kernel sizes are left out: a larger kernel shrinks H' W' (Table 6 work is not monotone in K)
    "conv2d": ({"n", "h", "w"}, {"n"}),
    "pool2d": ({"n", "c", "h", "w"}, {"n", "c"}),
    "batch_norm": ({"n", "c", "spatial"}, {"n", "c", "spatial"}),
    "layer_norm": ({"rows", "features"}, {"rows", "features"}),
    "group_norm": ({"n", "c_per_group", "spatial", "groups"}, {"n", "c_per_group", "spatial", "groups"}),
    "rms_norm": ({"rows", "features"}, {"rows", "features"}),
    "weight_norm": ({"c_out", "fan_in"}, {"c_out", "fan_in"}),
    "activation": ({"elements"}, set()),  # identity: no work at all
    "dropout": ({"elements"}, {"elements"}),
    "add": ({"elements", "inputs"}, {"elements", "inputs"}),
    "scale": ({"elements"}, {"elements"}),
    "channel_scale": ({"maps", "spatial"}, {"maps", "spatial"}),
    "concat": ({"elements"}, set()),
    "softmax": ({"rows", "k"}, {"rows", "k"}),
    "embedding": ({"tokens", "vocab", "dim"}, {"tokens", "dim"}),
    "attention": ({"batch", "heads", "seq_q", "head_dim"}, {"batch", "heads", "seq_q", "head_dim"}),
    "multi_head_attention": ({"batch", "seq", "head_dim", "heads"}, {"batch", "seq", "head_dim", "heads"}),
    "recurrent": ({"seq_len", "batch", "input_size", "hidden", "layers"},
                  {"seq_len", "batch", "input_size", "hidden", "layers"}),
    "reduction": ({"n"}, {"n"}),
    "optimizer_update": ({"params"}, {"params"}),
}


def test_growth_table_covers_every_builder():
    assert set(GROWTH) == set(BUILDERS)


@SETTINGS
@given(st.data())
def test_work_grows_with_every_size(data):
    name = data.draw(st.sampled_from(sorted(BUILDERS)))
    build, args = BUILDERS[name]
    kw = data.draw(args)
    free, strict = GROWTH[name]
    arg = data.draw(st.sampled_from(sorted(free)))
    delta = data.draw(st.integers(1, 3))
    bigger = dict(kw, **{arg: kw[arg] + delta})
    if name == "attention" and kw["causal"] and arg == "seq_q":
        bigger["seq_kv"] = bigger["seq_q"]
    a, b = build(**kw), build(**bigger)
    assert num(b.forward.flop) >= num(a.forward.flop)
    assert num(b.training.flop) >= num(a.training.flop)
    assert num(b.forward.bytes) >= num(a.forward.bytes)
    strict_here = arg in strict or (name == "activation" and kw["kind"] != "identity")
    if strict_here:
        assert num(b.training.flop) > num(a.training.flop), (name, kw, arg)


@SETTINGS
@given(st.integers(1, 12), st.integers(1, 4), st.integers(1, 3))
def test_conv_work_strict_in_channels_and_unit_stride_size(n, c, k):
    base = conv2d(n, c, c, k + 2, k + 2, k)
    assert conv2d(n, c + 1, c, k + 2, k + 2, k).forward.flop > base.forward.flop
    assert conv2d(n, c, c + 1, k + 2, k + 2, k).forward.flop > base.forward.flop
    assert conv2d(n, c, c, k + 3, k + 2, k).forward.flop > base.forward.flop  # stride 1: H' grows


# ---------------------------------------------------------------------------------------------------
# splitting a batch conserves work; depth does not grow
# ---------------------------------------------------------------------------------------------------

def _split(build, n1, n2):
    return build(n1), build(n2), build(n1 + n2)


def _assert_split(build, n1, n2, weight_combine=0):
    a, b, whole = _split(build, n1, n2)
    for part in ("forward", "grad_input"):
        ca, cb, cw = getattr(a, part), getattr(b, part), getattr(whole, part)
        assert cw.flop == ca.flop + cb.flop
        assert cw.macs == ca.macs + cb.macs
        assert cw.bytes <= ca.bytes + cb.bytes  # the whole never moves more (weights are read once)
        assert ca.depth == cw.depth and cb.depth == cw.depth  # batch-independent depth
    # partial weight gradients must be added together: exactly `weight_combine` more operations
    assert whole.grad_weight.flop == a.grad_weight.flop + b.grad_weight.flop + weight_combine
    assert whole.grad_weight.macs == a.grad_weight.macs + b.grad_weight.macs
    assert num(a.grad_weight.depth) <= num(whole.grad_weight.depth)
    assert num(b.grad_weight.depth) <= num(whole.grad_weight.depth)
    assert whole.params == a.params == b.params


@SETTINGS
@given(small, small, small, small, st.booleans())
def test_split_linear(n1, n2, ci, co, bias):
    # the bias gradient is a reduction (W = n - 1): two partial sums need one more add per output
    _assert_split(lambda n: linear(n, ci, co, bias), n1, n2, co if bias else 0)


@SETTINGS
@given(small, small, conv_args(algorithm="direct"))
def test_split_conv2d_direct(n1, n2, kw):
    kw = {k: v for k, v in kw.items() if k not in ("n", "winograd_m")}
    _assert_split(lambda n: conv2d(n, **kw), n1, n2, kw["c_out"] if kw["bias"] else 0)


@SETTINGS
@given(small, small, st.sampled_from(sorted(ACTIVATIONS)), small)
def test_split_activation(n1, n2, kind, per_sample):
    _assert_split(lambda n: activation(kind, n * per_sample), n1, n2)


@SETTINGS
@given(small, small, small, st.booleans())
def test_split_layer_norm(n1, n2, features, affine):
    # ∇gamma and ∇beta are per-feature sums over rows: 2 adds per feature to combine two halves
    _assert_split(lambda n: layer_norm(n, features, affine), n1, n2, 2 * features if affine else 0)


@SETTINGS
@given(tiny, tiny, attention_args())
def test_split_attention(n1, n2, kw):
    kw = {k: v for k, v in kw.items() if k != "batch"}
    _assert_split(lambda n: attention(n, **kw), n1, n2)


# ---------------------------------------------------------------------------------------------------
# identities ("P = 1" and degenerate shapes)
# ---------------------------------------------------------------------------------------------------

@SETTINGS
@given(attention_args())
def test_attention_depends_on_batch_times_heads(kw):
    b, h = kw.pop("batch"), kw.pop("heads")
    whole = attention(b, h, **kw)
    folded = attention(b * h, 1, **kw)
    one = attention(b, 1, **kw).scaled(h)  # heads are independent copies
    for x, y, z in zip(parts(whole), parts(folded), parts(one)):
        assert x == y
        assert (x.flop, x.depth, x.bytes, x.act_bytes, x.macs) == (z.flop, z.depth, z.bytes, z.act_bytes, z.macs)


@SETTINGS
@given(small, small, small, st.booleans())
def test_pointwise_conv_on_one_pixel_is_linear(n, ci, co, bias):
    c, fc = conv2d(n, ci, co, 1, 1, 1, bias=bias), linear(n, ci, co, bias)
    assert c.params == fc.params
    for x, y in zip(parts(c), parts(fc)):
        assert (x.flop, x.depth, x.macs) == (y.flop, y.depth, y.macs)
    assert c.forward.bytes == fc.forward.bytes and c.grad_input.bytes == fc.grad_input.bytes
    assert c.forward.act_bytes == fc.forward.act_bytes


@SETTINGS
@given(small, small, small)
def test_linear_without_bias_is_gemm(n, ci, co):
    fc, g = linear(n, ci, co, bias=False), gemm(n, co, ci)
    for part in ("forward", "grad_input", "grad_weight"):
        x, y = getattr(fc, part), getattr(g, part)
        assert (x.flop, x.depth, x.macs) == (y.flop, y.depth, y.macs)


@SETTINGS
@given(small, small, small, small)
def test_conv_groups_equal_independent_convs(n, cig, cog, g):
    # a grouped convolution does the work of g convolutions of C/g channels side by side
    whole = conv2d(n, cig * g, cog * g, 5, 5, 3, groups=g, bias=False)
    one = conv2d(n, cig, cog, 5, 5, 3, bias=False)
    assert whole.forward.flop == g * one.forward.flop and whole.forward.depth == one.forward.depth
    assert whole.params == g * one.params
    assert whole.grad_input.depth == one.grad_input.depth
    assert conv2d(n, cig, cog, 5, 5, 3, groups=1) == conv2d(n, cig, cog, 5, 5, 3)


@SETTINGS
@given(small, small)
def test_batch_norm_of_one_sample_is_a_per_channel_layer_norm(c, spatial):
    bn, ln = batch_norm(1, c, spatial), layer_norm(c, spatial)
    assert (bn.forward.flop, bn.forward.depth) == (ln.forward.flop, ln.forward.depth)
    assert (bn.grad_input.flop, bn.grad_input.depth) == (ln.grad_input.flop, ln.grad_input.depth)


@SETTINGS
@given(small, small, small, st.booleans())
def test_group_norm_with_one_group_is_layer_norm(n, c, spatial, affine):
    gn, ln = group_norm(n, c, spatial, 1, affine), layer_norm(n, c * spatial, affine)
    assert (gn.forward.flop, gn.forward.depth) == (ln.forward.flop, ln.forward.depth)
    assert (gn.grad_input.flop, gn.grad_input.depth) == (ln.grad_input.flop, ln.grad_input.depth)


@SETTINGS
@given(st.integers(1, 64))
def test_reduction_tree_vs_chain(n):
    t, c = reduction(n).forward, reduction(n, tree=False).forward
    assert t.flop == c.flop == n - 1
    assert t.depth <= c.depth
    assert (t.depth == c.depth) == (n <= 3)  # ceil(log2 n) == n - 1 only for n = 1, 2, 3
    assert t.depth == math.ceil(math.log2(n))


@SETTINGS
@given(any_op())
def test_single_copy_and_single_processor_identities(case):
    _, _, op = case
    assert op.scaled(1) == op
    single = chain("one", op)
    assert single.forward == op.forward and single.grad_input == op.grad_input
    assert single.grad_weight.flop == op.grad_weight.flop
    assert single.backward.depth == op.backward.depth
    for c in parts(op):
        assert c.repeat(1) == c and c.repeat(1, parallel=True) == c
        lo, hi = c.brent_bounds(1)
        assert lo == sp.Max(c.flop, c.depth) and hi == c.flop + c.depth
        if num(c.flop) >= num(c.depth):
            assert num(lo) == num(c.flop)  # T_1 = W


@SETTINGS
@given(small, small, small, small)
def test_one_step_rnn_is_one_fc(n, i, h, extra):
    r = recurrent("rnn", 1, n, i, h, bias=False)
    fc = linear(n, i + h, h, bias=False)  # [x, h_0] @ [W_ih; W_hh]
    assert r.forward.macs == fc.forward.macs and r.params == fc.params
    # T more steps: T times the work of the products
    assert recurrent("rnn", extra, n, i, h, bias=False).forward.macs == extra * fc.forward.macs


@SETTINGS
@given(st.integers(1, 8), st.integers(1, 8), st.integers(1, 4))
def test_mha_with_one_head(batch, seq, hidden):
    m = multi_head_attention(batch, seq, hidden, 1, bias=False)
    core = attention(batch, 1, seq, hidden)
    tok = batch * seq
    qkv, out = linear(tok, hidden, 3 * hidden, False), linear(tok, hidden, hidden, False)
    expected = qkv.forward + core.forward + out.forward
    assert m.forward == expected


# ---------------------------------------------------------------------------------------------------
# symbolic batch N, substituted, equals the numeric build
# ---------------------------------------------------------------------------------------------------

SYMBOLIC = {
    "gemm": lambda n: gemm(3, 2, 4, batch=n),
    "linear": lambda n: linear(n, 3, 5),
    "conv2d_direct": lambda n: conv2d(n, 4, 6, 5, 5, 3, stride=2, pad=1, dilation=2, groups=2),
    "conv2d_im2col": lambda n: conv2d(n, 2, 3, 6, 5, 3, 2, pad=1, algorithm="im2col"),
    "conv2d_fft": lambda n: conv2d(n, 2, 3, 6, 6, 3, pad=1, algorithm="fft"),
    "conv2d_winograd": lambda n: conv2d(n, 2, 3, 7, 7, 3, algorithm="winograd"),
    "pool2d_max": lambda n: pool2d("max", n, 2, 5, 5, 3, stride=2, pad=1),
    "pool2d_avg": lambda n: pool2d("avg", n, 2, 4, 4, 2),
    "batch_norm": lambda n: batch_norm(n, 3, 5),
    "layer_norm": lambda n: layer_norm(n * 3, 8),
    "group_norm": lambda n: group_norm(n, 4, 3, 2),
    "rms_norm": lambda n: rms_norm(n * 2, 6),
    "activation": lambda n: activation("gelu", n * 7),
    "dropout": lambda n: dropout(n * 7),
    "add": lambda n: add(n * 7, 3),
    "softmax": lambda n: softmax(n * 4, 5),
    "embedding": lambda n: embedding(n * 4, 10, 3),
    "attention": lambda n: attention(n, 2, 5, 4),
    "attention_fused_causal": lambda n: attention(n, 2, 5, 4, fused=True, causal=True),
    "multi_head_attention": lambda n: multi_head_attention(n, 3, 8, 2),
    "lstm": lambda n: recurrent("lstm", 3, n, 4, 6, layers=2),
    "gru": lambda n: recurrent("gru", 3, n, 4, 6),
    "reduction": lambda n: reduction(n),
    "optimizer_update": lambda n: optimizer_update("adam", n),
}


def _same(sym_expr, value, num_expr):
    a = sp.sympify(sym_expr).subs(N, value)
    b = sp.sympify(num_expr)
    assert not a.free_symbols
    if a.is_Integer and b.is_Integer:
        assert a == b
    else:
        assert float(a) == pytest.approx(float(b), rel=1e-12)


@pytest.mark.parametrize("name", sorted(SYMBOLIC))
@settings(max_examples=8, deadline=None)
@given(n=st.integers(1, 40))
def test_symbolic_batch_equals_numeric(name, n):
    build = SYMBOLIC[name]
    sym, numeric = build(N), build(n)
    assert N in sym.forward.free_symbols | sym.grad_weight.free_symbols | sym.grad_input.free_symbols
    for cs, cn in zip(parts(sym), parts(numeric)):
        for field in ("flop", "depth", "bytes", "params", "act_bytes", "macs"):
            _same(getattr(cs, field), n, getattr(cn, field))


@settings(max_examples=50, deadline=None)
@given(st.integers(1, 2**40))
def test_symbolic_clog2_equals_exact(n):
    assert clog2(N).subs(N, n) == clog2(n) == (n - 1).bit_length()


# ---------------------------------------------------------------------------------------------------
# Brent bounds on operator costs
# ---------------------------------------------------------------------------------------------------

@SETTINGS
@given(any_op(), st.integers(1, 10**6))
def test_brent_bounds_bracket(case, p):
    _, _, op = case
    c = op.training
    lo, hi = (num(x) for x in c.brent_bounds(p))
    w, d = num(c.flop), num(c.depth)
    assert lo <= hi
    assert lo >= w / p - 1e-9 and lo >= d
    assert hi == pytest.approx(w / p + d)
    lo2, hi2 = (num(x) for x in c.brent_bounds(p + 1))
    assert lo2 <= lo and hi2 <= hi  # more processors never raise either bound
