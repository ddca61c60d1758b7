"""The cold build's fast paths give what the plain sympy calls give, value and type (the report's speed, issue 38):
``cost.sum_work``'s integer sums, ``symbols.nsimplified``, and the memory model's kept in-flight counts."""
from __future__ import annotations

import sympy as sp
from hypothesis import given, settings, strategies as st

from concurrency_model.cost import FIELDS, Cost, _plus, sum_work
from concurrency_model.parallel import memory, pipeline
from concurrency_model.symbols import nsimplified

x = sp.Symbol("x", positive=True)
VALUES = st.one_of(st.integers(-10**20, 10**20).map(sp.Integer),
                   st.floats(-1e12, 1e12, allow_nan=False).map(sp.Float),
                   st.fractions(max_denominator=1000).map(lambda f: sp.Rational(f.numerator, f.denominator)),
                   st.integers(1, 5).map(lambda k: k * x))


def ordered(costs) -> dict:
    """Every field but depth added in order with sympy, as sum_work did before its integer path."""
    out = {k: sp.Integer(0) for k in FIELDS}
    for c in costs:
        for k in FIELDS:
            if k != "depth":
                out[k] = _plus(out[k], getattr(c, k))
    return out


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(VALUES, VALUES, st.integers(0, 10**15).map(sp.Integer)), max_size=12))
def test_sum_work_is_sympys_ordered_sum(rows):
    costs = [Cost(flop=f, bytes=b, params=n, depth=3) for f, b, n in rows]
    got, want = sum_work(costs), ordered(costs)
    for k in FIELDS:
        if k != "depth":
            assert getattr(got, k) == want[k] and type(getattr(got, k)) is type(want[k]), k
    assert got.depth == 0


def test_sum_work_integers_by_hand():
    got = sum_work([Cost(flop=2**70, bytes=3), Cost(flop=-5, bytes=sp.Integer(4)), Cost(flop=1)])
    assert got.flop == sp.Integer(2**70 - 4) and got.bytes == 7 and got.flop.is_Integer


@given(st.one_of(st.floats(1e-6, 1e13, allow_nan=False), st.integers(0, 10**12)))
@settings(max_examples=60, deadline=None)
def test_nsimplified_is_nsimplify(v):
    assert nsimplified(v) == sp.nsimplify(v) and type(nsimplified(v)) is type(sp.nsimplify(v))


def test_nsimplified_keeps_types_apart():
    assert nsimplified(0.11) == sp.Rational(11, 100)
    assert nsimplified(1.5) is nsimplified(1.5)
    assert nsimplified(2.0) == 2 and nsimplified(2) == 2


def test_in_flight_kept_equals_built():
    p, m, v = sp.Symbol("p", positive=True), sp.Symbol("m", positive=True), sp.Symbol("v", positive=True)
    for schedule in ("gpipe", "1f1b", "interleaved", "async", "zb-h1"):
        w, k = (v, 2) if schedule == "interleaved" else (1, 1)
        for args in ((p, m, w, 0), (4, 8, k, 1), (p, None, w, 0), (p, m, k, sp.Symbol("q", integer=True))):
            want = memory._in_flight_of(schedule, *args)
            assert memory._in_flight(schedule, *args) == want
            assert memory._in_flight(schedule, *args) is memory._in_flight(schedule, *args)
    assert memory._in_flight("1f1b", 4, 8, 1, 0) == pipeline.in_flight_microbatches("1f1b", 4, 8, 1, 0) == 4
