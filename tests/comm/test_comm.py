"""Communication models (concurrency_model.comm): collectives per algorithm, bounds, the paper's forms,
selection, LogGP, nccl-tests bandwidths, hierarchical collectives."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.comm import (ALGORITHMS, OPS, algbw, auto, busbw, collective_time, crossover,
                                    hierarchical_allgather, hierarchical_allreduce,
                                    hierarchical_reduce_scatter, lower_bound, p2p_time)
from concurrency_model.comm import paper
from concurrency_model.comm.chain import chain_time, optimal_segments
from concurrency_model.comm.loggp import (loggp_messages, loggp_p2p, loggp_ring_allreduce,
                                          to_alpha_beta)
from concurrency_model.symbols import P, alpha, beta, gamma_red, n_bytes as n

PAIRS = [(op, alg) for op, algs in ALGORITHMS.items() for alg in algs]
a, b, g = alpha, beta, gamma_red


def same(x, y) -> bool:
    return sp.simplify(sp.sympify(x) - sp.sympify(y)) == 0


# -- hand-derived values ---------------------------------------------------------------------------------

HAND_P4 = {  # P = 4 (a power of two): lg P = 2
    ("allreduce", "ring"): 6 * a + sp.Rational(3, 2) * n * b + sp.Rational(3, 4) * n * g,
    ("allreduce", "tree"): 4 * a + 4 * n * b + 2 * n * g,
    ("allreduce", "recursive_doubling"): 2 * a + 2 * n * b + 2 * n * g,
    ("allreduce", "rabenseifner"): 4 * a + sp.Rational(3, 2) * n * b + sp.Rational(3, 4) * n * g,
    ("allreduce", "double_binary_tree"): 4 * a + 2 * n * b + n * g,
    ("allreduce", "pipelined_chain"): None,  # checked separately
    ("broadcast", "tree"): 2 * a + 2 * n * b,
    ("broadcast", "scatter_allgather"): 5 * a + sp.Rational(3, 2) * n * b,
    ("reduce", "tree"): 2 * a + 2 * n * b + 2 * n * g,
    ("reduce", "rabenseifner"): 4 * a + sp.Rational(3, 2) * n * b + sp.Rational(3, 4) * n * g,
    ("allgather", "ring"): 3 * a + sp.Rational(3, 4) * n * b,
    ("allgather", "recursive_doubling"): 2 * a + sp.Rational(3, 4) * n * b,
    ("allgather", "bruck"): 2 * a + sp.Rational(3, 4) * n * b,
    ("reduce_scatter", "ring"): 3 * a + sp.Rational(3, 4) * n * (b + g),
    ("reduce_scatter", "pairwise"): 3 * a + sp.Rational(3, 4) * n * (b + g),
    ("reduce_scatter", "recursive_doubling"): 2 * a + sp.Rational(3, 4) * n * (b + g),
    ("alltoall", "pairwise"): 3 * a + sp.Rational(3, 4) * n * b,
    ("alltoall", "bruck"): 2 * a + n * b,
    ("p2p", "direct"): a + n * b,
}


@pytest.mark.parametrize("op, alg", [k for k, v in HAND_P4.items() if v is not None])
def test_hand_values_P4(op, alg):
    assert same(collective_time(op, alg, n, 4, a, b, g), HAND_P4[(op, alg)])


def test_ring_allreduce_P4_numbers():
    # 6 alpha + 1.5 n beta + 0.75 n gamma at n = 1000, alpha = 2, beta = 0.5, gamma = 0.25
    assert collective_time("allreduce", "ring", 1000, 4, 2, sp.Rational(1, 2), sp.Rational(1, 4)) == sp.Rational(1899, 2)  # 12 + 750 + 187.5


def test_ring_allreduce_symbolic_P_exact():
    e = collective_time("allreduce", "ring", n, P, a, b)
    assert sp.simplify(e - (2 * (P - 1) * a + 2 * (P - 1) / P * n * b)) == 0


def test_non_power_of_two_P6_extra_steps():
    # floor(lg 6) = 2, p' = 4, two extra ranks: pre-step a + n b + n g, post-step a + n b
    assert same(collective_time("allreduce", "recursive_doubling", n, 6, a, b, g), 4 * a + 4 * n * b + 3 * n * g)
    # Rabenseifner: 2*2 a + 2*(3/4) n b + (3/4) n g, plus the same two steps
    assert same(collective_time("allreduce", "rabenseifner", n, 6, a, b, g),
                6 * a + sp.Rational(7, 2) * n * b + sp.Rational(7, 4) * n * g)
    # recursive halving: 2 a + (3/4) n (b+g), pre a + n (b+g), post a + (n/6) b
    assert same(collective_time("reduce_scatter", "recursive_doubling", n, 6, a, b, g),
                4 * a + sp.Rational(23, 12) * n * b + sp.Rational(7, 4) * n * g)
    # reduce: pre-step only
    assert same(collective_time("reduce", "rabenseifner", n, 6, a, b, g),
                5 * a + sp.Rational(5, 2) * n * b + sp.Rational(7, 4) * n * g)
    # allgather: 2 a + (3/4) n b, pre a + (n/6) b, post a + n b
    assert same(collective_time("allgather", "recursive_doubling", n, 6, a, b),
                4 * a + sp.Rational(23, 12) * n * b)
    # binomial tree: ceil(lg 6) = 3 steps; Bruck alltoall: 3 a + (n/2) 3 b
    assert same(collective_time("broadcast", "tree", n, 6, a, b), 3 * a + 3 * n * b)
    assert same(collective_time("alltoall", "bruck", n, 6, a, b), 3 * a + sp.Rational(3, 2) * n * b)


@pytest.mark.parametrize("op, alg", [pa for pa in PAIRS if pa[1] != "pipelined_chain"])
def test_symbolic_P_substitutes_to_numeric(op, alg):
    e = collective_time(op, alg, n, P, a, b, g)
    f = sp.lambdify((P, n, a, b, g), e, "numpy")  # the symbolic form lambdifies to numpy
    for Pv in [1, 2, 3, 5, 6, 7, 8, 12, 16, 33]:
        want = collective_time(op, alg, n, Pv, a, b, g)
        assert same(e.subs(P, Pv), want), (op, alg, Pv)
        assert math.isclose(f(Pv, 1000.0, 1e-6, 1e-9, 1e-10),
                            float(want.subs({n: 1000, a: 1e-6, b: 1e-9, g: 1e-10})), rel_tol=1e-12)


def test_symbolic_chain_with_segments_substitutes():
    for op in ("broadcast", "reduce", "allreduce"):
        e = collective_time(op, "pipelined_chain", n, P, a, b, g, segments=4)
        for Pv in [1, 2, 3, 8]:
            assert same(e.subs(P, Pv), collective_time(op, "pipelined_chain", n, Pv, a, b, g, segments=4))


def test_chain_hand_value():
    # broadcast, P = 4, k = 2: (4 + 2 - 2)(a + (n/2) b) = 4 a + 2 n b
    assert same(collective_time("broadcast", "pipelined_chain", n, 4, a, b, segments=2), 4 * a + 2 * n * b)
    assert same(collective_time("allreduce", "pipelined_chain", n, 4, a, b, g, segments=2),
                4 * (2 * a + n / 2 * (2 * b + g)))


# -- P = 1, monotonicity, lower bounds ------------------------------------------------------------------

@pytest.mark.parametrize("op, alg", PAIRS)
def test_P1_costs_nothing(op, alg):
    assert collective_time(op, alg, 1000, 1, 1e-6, 1e-9, 1e-10) == 0
    assert collective_time(op, alg, n, 1, a, b, g) == 0
    if alg != "pipelined_chain":
        assert collective_time(op, alg, n, P, a, b, g).subs(P, 1) == 0
    assert lower_bound(op, 1000, 1, 1e-6, 1e-9, 1e-10) == 0


@pytest.mark.parametrize("op, alg", PAIRS)
def test_monotone_in_n(op, alg):
    for Pv in [2, 3, 6, 16]:
        ns = [0, 1, 2, 3, 7, 64, 1000, 4096, 10**5, 10**7, 10**9]
        ts = [float(collective_time(op, alg, nv, Pv, 1e-6, 1e-9, 1e-10)) for nv in ns]
        assert all(t2 >= t1 * (1 - 1e-12) for t1, t2 in zip(ts, ts[1:])), (op, alg, Pv, ts)


@settings(max_examples=40, deadline=None)
@given(nv=st.integers(0, 10**10), Pv=st.integers(1, 300),
       av=st.floats(0, 1e-3), bv=st.floats(0, 1e-8), gv=st.floats(0, 1e-8))
def test_every_algorithm_at_least_its_lower_bound(nv, Pv, av, bv, gv):
    for op, alg in PAIRS:
        t = float(collective_time(op, alg, nv, Pv, av, bv, gv))
        lb = float(lower_bound(op, nv, Pv, av, bv, gv))
        assert t >= lb * (1 - 1e-12) - 1e-300, (op, alg, nv, Pv, t, lb)


def test_rabenseifner_and_bruck_meet_the_bound_power_of_two():
    # gamma = 0, alpha = 0: Rabenseifner is bandwidth-optimal; Bruck allgather equals the bound exactly
    for Pv in [2, 4, 8, 64]:
        assert same(collective_time("allreduce", "rabenseifner", n, Pv, 0, b), lower_bound("allreduce", n, Pv, 0, b))
        assert same(collective_time("allgather", "bruck", n, Pv, a, b), lower_bound("allgather", n, Pv, a, b))


def test_lower_bound_table():
    assert same(lower_bound("broadcast", n, 8, a, b), 3 * a + n * b)
    assert same(lower_bound("reduce", n, 8, a, b, g), 3 * a + n * b + sp.Rational(7, 8) * n * g)
    assert same(lower_bound("allgather", n, 8, a, b), 3 * a + sp.Rational(7, 8) * n * b)
    assert same(lower_bound("reduce_scatter", n, 8, a, b, g), 3 * a + sp.Rational(7, 8) * n * (b + g))
    assert same(lower_bound("allreduce", n, 8, a, b, g),
                3 * a + sp.Rational(7, 4) * n * b + sp.Rational(7, 8) * n * g)
    assert same(lower_bound("alltoall", n, 5, a, b), 3 * a + sp.Rational(4, 5) * n * b)


# -- the paper's forms ----------------------------------------------------------------------------------

@pytest.mark.parametrize("name", list(paper.PAPER_FORMS))
def test_paper_forms_equal_general_allreduce(name):
    alg, tag = paper.PAPER_FORMS[name]
    assert tag in ("[S1]", "[M+]", "[M]")  # only these may be presented as the paper's
    f = getattr(paper, name)
    for Pv in [1, 2, 4, 8, 16, 64, 1024]:
        assert same(f(n, Pv, a, b), collective_time("allreduce", alg, n, Pv, a, b, 0)), (name, Pv)


def test_paper_lower_bound_flag_and_message_bytes():
    assert same(paper.T_lower(n, 8, a, b), 3 * a + sp.Rational(7, 4) * n * b)
    assert same(paper.T_lower(n, 8, a, b, factor_two=False), 3 * a + sp.Rational(7, 8) * n * b)
    for Pv in [2, 8, 64]:  # with the factor 2 it is Chan's allreduce bound at gamma = 0
        assert same(paper.T_lower(n, Pv, a, b), lower_bound("allreduce", n, Pv, a, b))
        assert same(paper.T_rabe(n, Pv, a, b) - paper.T_lower(n, Pv, a, b), sp.log(Pv, 2) * a)
    assert paper.message_bytes(10, 4) == 40
    assert same(paper.T_lower_latency(16, a), 4 * a) and same(paper.T_lower_bandwidth(n, b), n * b)


# -- selection --------------------------------------------------------------------------------------------

def test_auto_small_and_large_messages_P64():
    assert auto("allreduce", 1, 64, 5e-6, 1e-10)[0] in ("recursive_doubling", "tree")
    assert auto("allreduce", 10**10, 64, 5e-6, 1e-10)[0] in ("ring", "rabenseifner")
    name, t = auto("allgather", 10**9, 64, 5e-6, 1e-10)
    assert name in ALGORITHMS["allgather"]
    assert t == min(collective_time("allgather", x, 10**9, 64, 5e-6, 1e-10) for x in ALGORITHMS["allgather"])


def test_auto_needs_numbers():
    with pytest.raises(ValueError, match="^n:"):
        auto("allreduce", n, 8, 1e-6, 1e-9)
    with pytest.raises(ValueError, match="^alpha:"):
        auto("allreduce", 100, 8, a, 1e-9)


def _brute_crossover(op, x, y, Pv, av, bv):
    ns = np.logspace(0, 12, 200001)
    f = sp.lambdify(n, collective_time(op, x, n, Pv, av, bv) - collective_time(op, y, n, Pv, av, bv), "numpy")
    d = f(ns) * np.ones_like(ns)
    i = int(np.nonzero(np.sign(d[:-1]) != np.sign(d[1:]))[0][0])
    return ns[i]


@pytest.mark.parametrize("Pv", [8, 64, 100])
def test_crossover_tree_ring_matches_brute_force(Pv):
    c = crossover("allreduce", "tree", "ring", Pv, 2e-6, 1e-10)
    assert c is not None
    assert abs(float(c) / _brute_crossover("allreduce", "tree", "ring", Pv, 2e-6, 1e-10) - 1) < 0.01


def test_crossover_none_and_chain_fallback():
    assert crossover("allreduce", "ring", "rabenseifner", 64, 1e-6, 1e-9) is None  # never cross
    assert crossover("reduce_scatter", "ring", "pairwise", 8, 1e-6, 1e-9) is None  # identical
    c = crossover("broadcast", "tree", "pipelined_chain", 16, 1e-6, 1e-9)  # numeric fallback
    t1 = float(collective_time("broadcast", "tree", c, 16, 1e-6, 1e-9))
    t2 = float(collective_time("broadcast", "pipelined_chain", c, 16, 1e-6, 1e-9))
    assert abs(t1 - t2) <= 0.01 * t1
    assert float(collective_time("broadcast", "tree", 10, 16, 1e-6, 1e-9)) < \
        float(collective_time("broadcast", "pipelined_chain", 10, 16, 1e-6, 1e-9))


# -- pipelined chain k* ---------------------------------------------------------------------------------

@pytest.mark.parametrize("op", ["broadcast", "reduce", "allreduce"])
@pytest.mark.parametrize("Pv, nv, av, bv, gv", [(3, 10**6, 1e-5, 1e-9, 0), (16, 10**6, 1e-6, 1e-9, 1e-10),
                                                (64, 5000, 1e-6, 1e-8, 0), (8, 7, 1e-9, 1e-6, 0),
                                                (100, 10**8, 1e-5, 1e-10, 5e-11)])
def test_chain_optimal_k_no_worse_than_scan(op, Pv, nv, av, bv, gv):
    k = int(optimal_segments(op, nv, sp.Integer(Pv), av, bv, gv))
    assert 1 <= k <= max(1, nv)
    best = float(collective_time(op, "pipelined_chain", nv, Pv, av, bv, gv))
    for kk in range(1, min(nv, 3000) + 1):
        assert best <= float(chain_time(op, nv, sp.Integer(Pv), av, bv, gv, kk)) * (1 + 1e-12)
    if gv == 0 and k < nv:  # k* = sqrt((P-2) n beta / alpha), to the nearest integer
        assert abs(k - math.sqrt((Pv - 2) * nv * bv / av)) <= 1


def test_chain_k_symbolic_and_clipping():
    k = optimal_segments("broadcast", n, P, a, b)
    assert k.subs({n: 10**6, P: 10, a: 1, b: sp.Rational(1, 1000)}) == 89  # sqrt(8000) = 89.4
    assert optimal_segments("broadcast", 10**6, sp.Integer(2), 1e-6, 1e-9) == 1  # P = 2: no pipelining
    assert optimal_segments("broadcast", 100, sp.Integer(64), 0, 1e-9) == 100  # alpha = 0: one byte each


# -- LogGP --------------------------------------------------------------------------------------------------

def test_loggp_reduces_to_alpha_beta():
    L, G, o, gg = sp.symbols("L G o g", positive=True)
    al, be = to_alpha_beta(L, 0, G)
    assert same(loggp_p2p(n, L, 0, G), p2p_time(n, al, be))
    assert same(al, L - G) and be == G
    assert same(p2p_time(n, *to_alpha_beta(L, 0, G, paper=True)) - loggp_p2p(n, L, 0, G), G)  # one byte-time
    assert same(loggp_p2p(n, L, o, G), p2p_time(n, *to_alpha_beta(L, o, G)))
    for Pv in [2, 4, 7]:
        assert same(loggp_ring_allreduce(n, Pv, L, 0, G, 0, g),
                    collective_time("allreduce", "ring", n, Pv, L - G, G, g))
    assert loggp_ring_allreduce(n, 1, L, o, G, gg) == 0
    assert loggp_messages(1, 100, 10, 1, 1, 50) == loggp_p2p(100, 10, 1, 1)
    assert loggp_messages(3, 1, 10, 1, 0, 4) == 20  # the gap dominates: 2 * 4 + 12


# -- nccl-tests bandwidths ----------------------------------------------------------------------------------

def test_algbw_busbw_factors():
    assert algbw(8e9, 2.0) == 4e9
    for Pv in [1, 2, 8, 64]:
        ab = 1e9
        assert math.isclose(busbw("allreduce", 1e9, 1.0, Pv), ab * 2 * (Pv - 1) / Pv)
        for op in ("allgather", "reduce_scatter", "alltoall"):
            assert math.isclose(busbw(op, 1e9, 1.0, Pv), ab * (Pv - 1) / Pv)
        for op in ("broadcast", "reduce", "p2p"):
            assert busbw(op, 1e9, 1.0, Pv) == ab
    # ring allreduce at alpha = 0 runs at busbw = 1/beta (the link speed)
    t = collective_time("allreduce", "ring", 1e9, 8, 0, 1 / 25e9)
    assert math.isclose(busbw("allreduce", 1e9, t, 8), 25e9)
    assert same(busbw("allgather", n, a, P), n / a * (P - 1) / P)


# -- hierarchical ---------------------------------------------------------------------------------------

AI, BI, AX, BX = sp.symbols("alpha_intra beta_intra alpha_inter beta_inter", nonnegative=True)


def test_hierarchical_allreduce_limits():
    for gv in [1, 2, 8]:
        assert same(hierarchical_allreduce(n, gv, 1, AI, BI, AX, BX, g),
                    collective_time("reduce_scatter", "ring", n, gv, AI, BI, g)
                    + collective_time("allgather", "ring", n, gv, AI, BI))
    for Nv in [1, 2, 5, 16]:
        for alg in ALGORITHMS["allreduce"]:
            assert same(hierarchical_allreduce(n, 1, Nv, AI, BI, AX, BX, g, inter_algorithm=alg),
                        collective_time("allreduce", alg, n, Nv, AX, BX, g)), (Nv, alg)


def test_hierarchical_allreduce_matches_training_formulas_6_6():
    gv, Nv = 8, 4
    want = (2 * ((gv - 1) * AI + sp.Rational(gv - 1, gv) * n * BI) + 2 * (Nv - 1) * AX
            + 2 * sp.Rational(Nv - 1, Nv) * (n / gv) * BX)
    assert same(hierarchical_allreduce(n, gv, Nv, AI, BI, AX, BX), want)


def test_hierarchical_allgather_reduce_scatter_limits():
    assert same(hierarchical_allgather(n, 8, 1, AI, BI, AX, BX), collective_time("allgather", "ring", n, 8, AI, BI))
    assert same(hierarchical_allgather(n, 1, 4, AI, BI, AX, BX), collective_time("allgather", "ring", n, 4, AX, BX))
    assert same(hierarchical_reduce_scatter(n, 8, 1, AI, BI, AX, BX, g),
                collective_time("reduce_scatter", "ring", n, 8, AI, BI, g))
    assert same(hierarchical_reduce_scatter(n, 1, 4, AI, BI, AX, BX, g),
                collective_time("reduce_scatter", "ring", n, 4, AX, BX, g))
    # inter-node traffic is n/g: (N-1)/N (n/g) beta_inter
    e = hierarchical_allgather(n, 8, 4, 0, 0, 0, BX)
    assert same(e, sp.Rational(3, 4) * n / 8 * BX)


# -- input errors name the field --------------------------------------------------------------------------

@pytest.mark.parametrize("call, field", [
    (lambda: collective_time("allreduc", "ring", 1, 2, 1, 1), "op"),
    (lambda: collective_time("allgather", "tree", 1, 2, 1, 1), "algorithm"),
    (lambda: collective_time("allreduce", "bogus", 1, 2, 1, 1), "algorithm"),
    (lambda: collective_time("allreduce", "ring", -1, 2, 1, 1), "n"),
    (lambda: collective_time("allreduce", "ring", 1, 0, 1, 1), "P"),
    (lambda: collective_time("allreduce", "ring", 1, 2.5, 1, 1), "P"),
    (lambda: collective_time("allreduce", "ring", 1, sp.Symbol("x", negative=True), 1, 1), "P"),
    (lambda: collective_time("allreduce", "ring", 1, 2, -1, 1), "alpha"),
    (lambda: collective_time("allreduce", "ring", 1, 2, 1, -1), "beta"),
    (lambda: collective_time("allreduce", "ring", 1, 2, 1, 1, -1), "gamma"),
    (lambda: collective_time("allreduce", "ring", 1, 2, 1, 1, segments=2), "segments"),
    (lambda: collective_time("broadcast", "pipelined_chain", 1, 2, 1, 1, segments=0), "segments"),
    (lambda: lower_bound("gather", 1, 2, 1, 1), "op"),
    (lambda: crossover("allreduce", "ring", "bruck", 8, 1, 1), "alg_b"),
    (lambda: busbw("allreduce", 1, 0, 2), "t"),
    (lambda: hierarchical_allreduce(1, 0, 2, 1, 1, 1, 1), "ranks_per_node"),
    (lambda: hierarchical_allreduce(1, 2, 2, 1, 1, 1, 1, inter_algorithm="bruck"), "algorithm"),
])
def test_errors_name_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        call()


def test_inapplicable_algorithm_lists_allowed():
    with pytest.raises(ValueError) as e:
        collective_time("alltoall", "ring", 1, 4, 1, 1)
    assert "bruck" in str(e.value) and "pairwise" in str(e.value)
    assert set(OPS) == {"broadcast", "reduce", "allreduce", "allgather", "reduce_scatter", "alltoall", "p2p"}


def test_cached_results_keep_argument_types_and_checks():
    # collective_time caches by (type, value): a cached P=1 must not let P=True (== 1) through, and the exact
    # result for integer inputs must not be returned for float ones (or the other way round)
    assert collective_time("allreduce", "ring", 800, 1, 1, 2) == 0
    assert collective_time("allreduce", "ring", 800, 2, 1, 2) == 2 + 1600
    with pytest.raises(ValueError, match="P"):
        collective_time("allreduce", "ring", 800, True, 1, 2)
    exact = collective_time("allreduce", "ring", 800, 4, 1, 3)
    approx = collective_time("allreduce", "ring", 800.0, 4, 1, 3)
    assert exact == 6 + 3600 and isinstance(exact, sp.Integer)  # 2(P-1) a + 2(P-1)/P n b
    assert isinstance(approx, sp.Float) and float(approx) == 3606.0
    assert collective_time("allreduce", "ring", 800, 4, 1, 3) is exact  # served from the cache
