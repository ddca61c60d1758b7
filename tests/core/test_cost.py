"""The cost algebra of the work-depth model (paper §2.5): composition, evaluation, clog2, W/D, Brent."""
from __future__ import annotations

import pytest
import sympy as sp

from concurrency_model.cost import ZERO, Cost, OpCost, chain, clog2, par, seq
from concurrency_model.symbols import N, p


# -- clog2 -----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("n, expected", [(1, 0), (2, 1), (3, 2), (4, 2), (5, 3), (8, 3), (9, 4),
                                         (1024, 10), (1025, 11), (2**40, 40), (2**40 + 1, 41)])
def test_clog2_exact_integers(n, expected):
    r = clog2(n)
    assert r == expected
    assert isinstance(r, sp.Integer)  # exact, not a float
    assert clog2(sp.Integer(n)) == expected


def test_clog2_non_integer_number_and_symbol():
    assert clog2(sp.Rational(5, 2)) == 2  # log2 2.5 = 1.32 -> 2
    assert clog2(4.0) == 2
    e = clog2(N)
    assert e.free_symbols == {N}
    assert e.subs(N, 1025) == 11  # the symbolic form evaluates to the exact value
    assert e.subs(N, 1024) == 10


@pytest.mark.parametrize("bad", [0, -1, -1024])
def test_clog2_rejects_non_positive(bad):
    with pytest.raises(ValueError, match="n"):
        clog2(bad)


# -- construction, seq / par / repeat -------------------------------------------------------------------

def test_fields_are_sympified():
    c = Cost(flop=3, depth=2.0)
    assert isinstance(c.flop, sp.Basic) and isinstance(c.bytes, sp.Basic)
    assert c.bytes == 0 and c.params == 0 and c.act_bytes == 0 and c.macs == 0


A = Cost(flop=8, depth=3, bytes=10, params=1, act_bytes=5, macs=2)
B = Cost(flop=4, depth=2, bytes=6, params=2, act_bytes=1, macs=1)
C = Cost(flop=1, depth=7, bytes=0, params=0, act_bytes=0, macs=0)


def test_sequential_adds_everything():
    s = A + B
    assert s == A.then(B)
    # 8+4, 3+2, 10+6, 1+2, 5+1, 2+1
    assert (s.flop, s.depth, s.bytes, s.params, s.act_bytes, s.macs) == (12, 5, 16, 3, 6, 3)


def test_parallel_takes_max_depth_adds_the_rest():
    q = A | B
    assert q == A.alongside(B)
    # depth max(3, 2) = 3; everything else adds
    assert (q.flop, q.depth, q.bytes, q.params, q.act_bytes, q.macs) == (12, 3, 16, 3, 6, 3)


def test_seq_and_par_of_several():
    assert seq() == ZERO and par() == ZERO
    assert seq(A) == A and par(A) == A
    s = seq(A, B, C)
    assert (s.flop, s.depth) == (13, 12)  # 8+4+1, 3+2+7
    q = par(A, B, C)
    assert (q.flop, q.depth, q.bytes) == (13, 7, 16)  # depth max(3, 2, 7)
    assert seq(A, B, C) == (A + B) + C
    assert par(A, B, C).depth == ((A | B) | C).depth


def test_composition_with_symbols():
    a = Cost(flop=2 * N, depth=clog2(N))
    b = Cost(flop=N, depth=1)
    q = a | b
    assert q.flop == 3 * N
    assert q.depth.subs(N, 16) == 4  # max(log2 16, 1)
    assert q.depth.subs(N, 1) == 1  # max(0, 1)
    assert (a + b).depth.subs(N, 16) == 5


def test_repeat_sequential_and_parallel():
    r = A.repeat(3)
    assert (r.flop, r.depth, r.bytes, r.params, r.act_bytes, r.macs) == (24, 9, 30, 3, 15, 6)
    rp = A.repeat(3, parallel=True)
    assert (rp.flop, rp.depth, rp.bytes) == (24, 3, 30)
    assert A.scale_work(3) == rp
    assert A.repeat(3) == A + A + A
    assert A.repeat(3, parallel=True) == (A | A | A).with_(depth=A.depth)
    sym = A.repeat(N)
    assert sym.flop == 8 * N and sym.depth == 3 * N


def test_with_replaces_fields():
    c = A.with_(depth=1, flop=N)
    assert c.depth == 1 and c.flop == N and c.bytes == A.bytes
    assert A.depth == 3  # frozen: the original is unchanged


# -- subs / evaluate / free_symbols ---------------------------------------------------------------------

def test_subs_every_field():
    x = sp.Symbol("x", positive=True)
    c = Cost(flop=2 * N * x, depth=clog2(N), bytes=4 * N, params=x, act_bytes=N, macs=N * x)
    d = c.subs({N: 8, x: 3})
    assert (d.flop, d.depth, d.bytes, d.params, d.act_bytes, d.macs) == (48, 3, 32, 3, 8, 24)
    assert c.free_symbols == {N, x}
    assert d.free_symbols == set()


def test_evaluate_returns_floats():
    c = Cost(flop=2 * N, depth=clog2(N), bytes=4 * N)
    out = c.evaluate({N: 1025})
    assert out == {"flop": 2050.0, "depth": 11.0, "bytes": 4100.0, "params": 0.0, "act_bytes": 0.0,
                   "macs": 0.0}
    assert all(isinstance(v, float) for v in out.values())
    assert Cost(flop=3, depth=1).evaluate() == {"flop": 3.0, "depth": 1.0, "bytes": 0.0, "params": 0.0,
                                                "act_bytes": 0.0, "macs": 0.0}


def test_evaluate_names_unbound_symbols():
    x = sp.Symbol("x_unbound", positive=True)
    c = Cost(flop=2 * N * x, depth=1)
    with pytest.raises(ValueError, match=r"unbound symbols.*N.*x_unbound"):
        c.evaluate()
    with pytest.raises(ValueError, match=r"flop: unbound symbols x_unbound"):
        c.evaluate({N: 4})
    assert c.evaluate({N: 4, x: 2})["flop"] == 16.0


def test_evaluate_names_the_field():
    with pytest.raises(ValueError, match="depth: unbound symbols N"):
        Cost(flop=3, depth=N).evaluate()


# -- average parallelism and Brent ---------------------------------------------------------------------

def test_average_parallelism():
    assert Cost(flop=12, depth=3).average_parallelism == 4
    # reduction tree of 8 values: W = 7, D = 3 -> 7/3
    assert Cost(flop=7, depth=3).average_parallelism == sp.Rational(7, 3)
    assert Cost(flop=2 * N, depth=2).average_parallelism == N
    with pytest.raises(ValueError, match="depth"):
        Cost(flop=5, depth=0).average_parallelism


def test_brent_bounds_p1_and_large_p():
    c = Cost(flop=100, depth=10)
    lo, hi = c.brent_bounds(1)
    assert (lo, hi) == (100, 110)  # p = 1: (W, W + D)
    lo, hi = c.brent_bounds(1000)
    assert lo == 10  # W/p = 0.1 < D: the depth bound
    assert hi == sp.Rational(1, 10) + 10
    lo, hi = c.brent_bounds(4)
    assert (lo, hi) == (25, 35)  # max(25, 10), 25 + 10
    lo, hi = c.brent_bounds(10)
    assert (lo, hi) == (10, 20)  # W/p == D


def test_brent_bounds_symbolic_p():
    c = Cost(flop=100, depth=10)
    lo, hi = c.brent_bounds(p)
    for pv in (1, 2, 3, 7, 10, 11, 64, 10**6):
        lo_v, hi_v = lo.subs(p, pv), hi.subs(p, pv)
        assert lo_v == max(sp.Rational(100, pv), 10)
        assert hi_v == sp.Rational(100, pv) + 10
        assert lo_v <= hi_v
    assert lo.subs(p, 1) == 100 and hi.subs(p, 1) == 110


# -- OpCost and chain ----------------------------------------------------------------------------------

def test_opcost_backward_and_training():
    op = OpCost("x", Cost(flop=10, depth=4, params=7), Cost(flop=6, depth=5), Cost(flop=8, depth=2))
    assert op.params == 7
    assert (op.backward.flop, op.backward.depth) == (14, 5)  # ∇x | ∇w: 6+8, max(5, 2)
    assert (op.training.flop, op.training.depth) == (24, 9)  # forward + backward: 10+14, 4+5
    k = op.scaled(3)
    assert (k.forward.flop, k.forward.depth, k.params) == (30, 4, 21)
    assert (k.grad_input.flop, k.grad_input.depth, k.grad_weight.flop, k.grad_weight.depth) == (18, 5, 24, 2)


def _op(name, f, d_f, gi, d_gi, gw, d_gw):
    return OpCost(name, Cost(flop=f, depth=d_f), Cost(flop=gi, depth=d_gi), Cost(flop=gw, depth=d_gw),
                  source=f"src-{name}")


def test_chain_backward_critical_path_hand_example():
    # Three layers applied in order 1 -> 2 -> 3:
    #   layer: (fwd W, D) (∇x W, D) (∇w W, D)
    #   1:     (10, 2)    (10, 4)   (10, 9)
    #   2:     (20, 3)    (20, 5)   (0, 0)     <- no weights (e.g. an activation)
    #   3:     (30, 1)    (30, 6)   (30, 1)
    # backward DAG: ∇y -> ∇x3 (6) -> ∇x2 (5) -> ∇x1 (4); ∇w3 hangs off ∇y, ∇w2 would hang off ∇x3,
    # ∇w1 hangs off ∇x2. Paths: ∇w3: 1; ∇w1: 6 + 5 + 9 = 20; ∇x chain: 6 + 5 + 4 = 15.
    ops = [_op("a", 10, 2, 10, 4, 10, 9), _op("b", 20, 3, 20, 5, 0, 0), _op("c", 30, 1, 30, 6, 30, 1)]
    c = chain("net", *ops)
    assert (c.forward.flop, c.forward.depth) == (60, 6)  # 10+20+30, 2+3+1
    assert (c.grad_input.flop, c.grad_input.depth) == (60, 15)  # 6+5+4
    assert c.grad_weight.flop == 40  # 10 + 0 + 30
    assert c.grad_weight.depth == 20  # max(1, 6+5+9)
    assert c.backward.depth == 20  # max(15, 20): ∇w1 is the end of the critical path
    assert c.training.depth == 26
    assert c.source == "src-a; src-b; src-c"


def test_chain_depth_when_input_gradient_dominates():
    # 1: ∇w depth 1; 2: ∇x depth 10, ∇w 2. ∇w1 path: 10 + 1 = 11, ∇w2: 2, ∇x: 10 + 3 = 13
    ops = [_op("a", 1, 1, 1, 3, 1, 1), _op("b", 1, 1, 1, 10, 1, 2)]
    c = chain("net", *ops)
    assert c.grad_input.depth == 13
    assert c.grad_weight.depth == 11
    assert c.backward.depth == 13


def test_chain_without_weights_has_zero_weight_gradient():
    ops = [_op("a", 1, 1, 1, 3, 0, 0), _op("b", 1, 1, 1, 10, 0, 0)]
    c = chain("net", *ops, source="mine")
    assert c.grad_weight.flop == 0 and c.grad_weight.depth == 0
    assert c.backward.depth == 13
    assert c.source == "mine"


def test_chain_of_one_is_the_operator():
    op = _op("a", 10, 2, 10, 4, 10, 9)
    c = chain("one", op)
    assert c.forward == op.forward and c.grad_input == op.grad_input
    assert c.grad_weight.flop == 10 and c.grad_weight.depth == 9
