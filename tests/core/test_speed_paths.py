"""The fast paths of the cost algebra and the operators' memo give exactly what the plain computation gives."""
from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.cost import FIELDS, Cost
from concurrency_model.ops import attention as att
from concurrency_model.symbols import N

# a field value: zero (skipped by the fast addition), an integer, a rational, a float or an expression in N
values = st.one_of(st.just(0), st.integers(-10**12, 10**12), st.fractions(max_denominator=1000).map(sp.Rational),
                   st.floats(-1e12, 1e12, allow_nan=False).map(sp.Float), st.integers(1, 9).map(lambda k: k * N))
costs = st.builds(lambda vs: Cost(*vs), st.lists(values, min_size=len(FIELDS), max_size=len(FIELDS)))


@settings(max_examples=200, deadline=None)
@given(costs, costs)
def test_then_is_the_fieldwise_sympy_sum(a, b):
    s = a + b
    for name in FIELDS:
        want = sp.sympify(getattr(a, name)) + sp.sympify(getattr(b, name))
        assert getattr(s, name) == want and type(getattr(s, name)) is type(want), name
    plain = Cost(**{n: getattr(s, n) for n in FIELDS})  # through the dataclass's own __init__
    assert s == plain and hash(s) == hash(plain)


@settings(max_examples=100, deadline=None)
@given(costs, values)
def test_with_replaces_one_field_and_sympifies(a, v):
    c = a.with_(depth=v)
    assert c.depth == sp.sympify(v) and isinstance(c.depth, sp.Basic)
    assert all(getattr(c, n) == getattr(a, n) for n in FIELDS if n != "depth")


def test_with_unknown_field_is_refused():
    with pytest.raises(TypeError, match="flops"):
        Cost(flop=1).with_(flops=2)


def test_zero_fields_keep_their_sympy_type():
    c = Cost(flop=3) + Cost(bytes=sp.Float(2.5))
    assert (c.flop, c.bytes, c.depth) == (3, 2.5, 0)
    assert isinstance(c.flop, sp.Integer) and isinstance(c.bytes, sp.Float) and c.depth is sp.S.Zero


def test_attention_memo_returns_what_a_fresh_computation_gives():
    args = dict(batch=2, heads=4, seq_q=8, head_dim=16, fused=True, causal=True, value_bytes=2)
    att.MEMO.clear()
    first = att.attention(**args)
    assert att.attention(**args) is first  # asked again: the same frozen OpCost
    att.MEMO.clear()
    assert att.attention(**args) == first
    # the symbolic batch is not memoized and agrees once substituted
    sym = att.attention(**{**args, "batch": N})
    assert sym.forward.subs({N: 2}) == first.forward


def test_attention_memo_keeps_types_apart():
    att.MEMO.clear()
    a = att.attention(1, 1, 4, 2, value_bytes=2)
    b = att.attention(1, 1, 4, 2, value_bytes=2.0)
    assert a is not b and len(att.MEMO) == 2
    assert (a.forward.macs, a.forward.flop, a.forward.depth) == (64, 216, 13)  # the docstring's hand count


def test_attention_errors_are_not_memoized():
    with pytest.raises(ValueError, match="causal"):
        att.attention(1, 1, 8, 2, seq_kv=4, causal=True)
    with pytest.raises(ValueError, match="causal"):  # raised again, not a cached result
        att.attention(1, 1, 8, 2, seq_kv=4, causal=True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(-10**15, 10**15), min_size=1, max_size=40))
def test_max_of_integers_is_sympys_max(xs):
    from concurrency_model.cost import max_of
    got, want = max_of(*xs), sp.Max(*xs)
    assert got == want and type(got) is type(want)


def test_max_of_falls_back_to_sympy_with_symbols_and_floats():
    from concurrency_model.cost import max_of
    assert max_of(2, N) == sp.Max(2, N)
    assert max_of(sp.Float(2.5), 2) == sp.Max(sp.Float(2.5), 2)


def test_a_cnn_depth_is_the_same_through_the_fast_max():
    from concurrency_model.models import get_model
    g = get_model("googlenet", batch=4)
    d = g.forward().depth
    assert isinstance(d, sp.Integer) and d > 0
    # the longest path recomputed from the per-node depths with sympy's own Max
    done = {}
    for n in g.nodes.values():
        start = sp.Max(*(done[i] for i in n.inputs)) if n.inputs else sp.Integer(0)
        done[n.name] = start + (n.cost.forward.depth if n.cost is not None else 0)
    assert d == sp.Max(*done.values())


def test_layer_parts_is_the_same_asked_again_and_follows_added_nodes():
    import copy

    from concurrency_model.graph import Node
    from concurrency_model.models import get_model
    from concurrency_model.timing.graph import layer_parts

    def totals(rows):
        return [(r["name"], r["algorithm"], *(r[p].total() for p in ("forward", "grad_input", "grad_weight")))
                for r in rows]
    g = copy.deepcopy(get_model("gpt2", batch=3, value_bytes=2))
    first = totals(layer_parts(g, "a100-sxm4-80gb", "fp16", tensor=2))
    other = totals(layer_parts(g, "a100-sxm4-80gb", "fp16", tensor=1))
    assert totals(layer_parts(g, "a100-sxm4-80gb", "fp16", tensor=2)) == first != other
    fresh = copy.deepcopy(get_model("gpt2", batch=3, value_bytes=2))  # never asked before: nothing remembered
    assert totals(layer_parts(fresh, "a100-sxm4-80gb", "fp16", tensor=2)) == first
    last = g.layers()[-1]
    g.add(Node("again", last.kind, (last.name,), last.shape, last.cost, dict(last.attrs)))
    rows = totals(layer_parts(g, "a100-sxm4-80gb", "fp16", tensor=2))
    assert len(rows) == len(first) + 1 and rows[-1][1:] == first[-1][1:]


@settings(max_examples=100, deadline=None)
@given(st.lists(costs, max_size=12))
def test_sum_work_is_adding_each_cost_without_its_depth(cs):
    from concurrency_model.cost import ZERO, sum_work
    want = ZERO
    for c in cs:
        want = want + c.with_(depth=0)
    got = sum_work(cs)
    assert all(getattr(got, n) == getattr(want, n) and type(getattr(got, n)) is type(getattr(want, n))
               for n in FIELDS)


def test_a_pass_without_depth_has_the_work_of_the_pass_with_it():
    from concurrency_model.models import get_model
    g = get_model("resnet50", batch=2)
    for run in (g.forward, g.backward):
        a, b = run(depth=False), run()
        assert a.depth == 0 and b.depth > 0
        assert all(getattr(a, n) == getattr(b, n) for n in FIELDS if n != "depth")
