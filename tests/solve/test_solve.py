"""Closed forms (concurrency_model.solve): every answer against a brute-force numeric search."""
from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import symbols as S
from concurrency_model.comm.collectives import ALGORITHMS, collective_time
from concurrency_model.parallel import pipeline as pp
from concurrency_model.solve import (BUBBLE, EFFICIENCY, LINK_BW, T_COMPUTE, T_FIXED, T_SAMPLE, Solution,
                                     bandwidth_for_time, bandwidth_to_hide, crossover_bytes, max_data_parallel,
                                     max_pipeline_stages, optimal_microbatches)

AR = ALGORITHMS["allreduce"]


def cost(op, alg, n, P, a, b, g=0.0) -> float:
    return float(collective_time(op, alg, n, P, a, b, g))


# -- 1. crossover_bytes -------------------------------------------------------------------------------
def brute_crossings(op, x, y, P, a, b, g=0.0):
    """Sign changes of T_x - T_y on a log grid of n, each refined by 200 bisection steps."""
    grid = np.logspace(-2, 15, 700)
    d = np.array([cost(op, x, n, P, a, b, g) - cost(op, y, n, P, a, b, g) for n in grid])
    out = []
    for i in range(len(grid) - 1):
        if d[i] * d[i + 1] < 0:
            lo, hi = grid[i], grid[i + 1]
            for _ in range(200):
                mid = (lo + hi) / 2
                dm = cost(op, x, mid, P, a, b, g) - cost(op, y, mid, P, a, b, g)
                lo, hi = (mid, hi) if dm * d[i] > 0 else (lo, mid)
            out.append((lo + hi) / 2)
    return out


def test_crossover_hand_derived():
    # P = 64: tree 12 alpha + 12 n beta + 6 n gamma; ring 126 alpha + (63/32) n beta + (63/64) n gamma
    s = crossover_bytes("allreduce", "tree", "ring", 64, 1e-6, 1e-9)
    assert sp.simplify(s.expr - 2432 * S.alpha / (107 * (2 * S.beta + S.gamma_red))) == 0
    assert s.value == pytest.approx(114e-6 / ((12 - 63 / 32) * 1e-9), rel=1e-12)
    assert s.variable == S.n_bytes and isinstance(s, Solution)
    # the cheaper algorithm changes there: tree below, ring above
    def diff(n):
        return cost("allreduce", "tree", n, 64, 1e-6, 1e-9) - cost("allreduce", "ring", n, 64, 1e-6, 1e-9)

    assert diff(0.99 * s.value) < 0 < diff(1.01 * s.value)


CROSS = [("allreduce", "tree", "ring", 64, 1e-6, 1e-9, 0.0),
         ("allreduce", "recursive_doubling", "rabenseifner", 16, 5e-6, 4e-11, 1e-11),
         ("allreduce", "recursive_doubling", "ring", 24, 2e-6, 1e-10, 0.0),
         ("allreduce", "double_binary_tree", "ring", 256, 3e-6, 5e-11, 0.0),
         ("broadcast", "tree", "scatter_allgather", 32, 1e-5, 1e-9, 0.0),
         ("allgather", "recursive_doubling", "ring", 12, 1e-6, 1e-9, 0.0),
         ("alltoall", "bruck", "pairwise", 64, 1e-5, 1e-10, 0.0),
         ("broadcast", "tree", "pipelined_chain", 16, 1e-6, 1e-9, 0.0)]


@pytest.mark.parametrize("op, x, y, P, a, b, g", CROSS)
def test_crossover_matches_brute_force(op, x, y, P, a, b, g):
    s = crossover_bytes(op, x, y, P, a, b, g)
    roots = brute_crossings(op, x, y, P, a, b, g)
    assert roots, "the parameter set must have a crossing"
    assert s.value == pytest.approx(min(roots), rel=1e-6)
    if y == "pipelined_chain":
        assert s.expr is None
    else:  # the closed form gives the same number
        assert float(s.expr.subs(s.inputs)) == pytest.approx(s.value, rel=1e-12)
        assert s.expr.free_symbols <= {S.alpha, S.beta, S.gamma_red}


def test_crossover_none_when_they_never_cross():
    s = crossover_bytes("allreduce", "ring", "rabenseifner", 64, 1e-6, 1e-9)
    assert s.value is None and brute_crossings("allreduce", "ring", "rabenseifner", 64, 1e-6, 1e-9) == []
    assert "never cross" in s.note


@pytest.mark.parametrize("call, field", [
    (lambda: crossover_bytes("allreduce", "ring", "bruck", 8, 1e-6, 1e-9), "alg_b"),
    (lambda: crossover_bytes("allreduce", "nope", "ring", 8, 1e-6, 1e-9), "alg_a"),
    (lambda: crossover_bytes("gather", "ring", "tree", 8, 1e-6, 1e-9), "op"),
    (lambda: crossover_bytes("allreduce", "tree", "ring", 0, 1e-6, 1e-9), "P"),
    (lambda: crossover_bytes("allreduce", "tree", "ring", 8, 0, 1e-9), "alpha_s"),
    (lambda: crossover_bytes("allreduce", "tree", "ring", 8, 1e-6, -1e-9), "beta_s_per_byte"),
    (lambda: crossover_bytes("allreduce", "tree", "ring", 8, 1e-6, 1e-9, -1), "gamma_s_per_byte"),
    (lambda: crossover_bytes("allreduce", "tree", "ring", 8, float("nan"), 1e-9), "alpha_s"),
])
def test_crossover_bad_input(call, field):
    with pytest.raises(ValueError, match=field):
        call()


# -- 2. optimal_microbatches --------------------------------------------------------------------------
def brute_microbatches(schedule, p, B, a, c, v=1, t_p2p=0.0):
    """(best step, all m reaching it) over every divisor of B (multiples of p for interleaved)."""
    steps = {}
    for m in range(1, B + 1):
        if B % m or (schedule == "interleaved" and m % p):
            continue
        t = a + c * B / m  # forward + backward of one microbatch, split 1:2 between t_f and t_b
        steps[m] = float(pp.step_time(schedule, p, m, t / 3, 2 * t / 3, v, t_p2p))
    best = min(steps.values())
    return best, {m for m, x in steps.items() if x <= best * (1 + 1e-12)}


def _step(schedule, p, m, B, a, c, v=1, t_p2p=0.0):
    return float(pp.step_time(schedule, p, m, a + c * B / m, 0.0, v, t_p2p))


def test_microbatches_hand_derived():
    # 1F1B, p = 4, B = 64: (m + 3)(0.01 + 0.16/m); m* = sqrt(3 * 0.0025 * 64 / 0.01) = sqrt(48)
    s = optimal_microbatches("1f1b", 4, 64, 0.01, 0.0025)
    assert s.continuous == pytest.approx(math.sqrt(48), rel=1e-14)
    assert s.value == 8  # step(4) = 7 * 0.05 = 0.35, step(8) = 11 * 0.03 = 0.33
    assert _step("1f1b", 4, 8, 64, 0.01, 0.0025) == pytest.approx(0.33)
    assert sp.simplify(s.expr - sp.sqrt((S.p - 1) * T_SAMPLE * S.B / T_FIXED)) == 0
    # interleaved divides the bubble by v: m* = sqrt((p-1) c B / (v a))
    si = optimal_microbatches("interleaved", 4, 64, 0.01, 0.0025, v=3)
    assert sp.simplify(si.expr - sp.sqrt((S.p - 1) * T_SAMPLE * S.B / (S.v * T_FIXED))) == 0
    assert si.continuous == pytest.approx(4.0) and si.value % 4 == 0
    # async: no stationary point; one microbatch
    sa = optimal_microbatches("async", 4, 64, 0.01, 0.0025)
    assert sa.expr is None and sa.value == 1
    # one stage: overhead only grows with m
    assert optimal_microbatches("gpipe", 1, 64, 0.01, 0.0025).value == 1


MB_CASES = [("gpipe", 8, 256, 0.002, 0.001, 1, 0.0), ("1f1b", 4, 64, 0.01, 0.0025, 1, 0.0),
            ("1f1b", 16, 1024, 5e-4, 2e-4, 1, 1e-4), ("1f1b", 3, 360, 1e-3, 1e-2, 1, 0.0),
            ("interleaved", 4, 512, 0.003, 0.001, 2, 1e-4), ("interleaved", 8, 384, 1e-4, 1e-3, 4, 0.0),
            ("async", 4, 96, 0.001, 0.001, 1, 1e-3), ("gpipe", 7, 97, 0.01, 0.001, 1, 0.0)]


@pytest.mark.parametrize("schedule, p, B, a, c, v, t_p2p", MB_CASES)
def test_microbatches_match_brute_force(schedule, p, B, a, c, v, t_p2p):
    s = optimal_microbatches(schedule, p, B, a, c, v, t_p2p)
    best, argmin = brute_microbatches(schedule, p, B, a, c, v, t_p2p)
    assert s.value in argmin
    assert _step(schedule, p, s.value, B, a, c, v, t_p2p) == pytest.approx(best, rel=1e-12)
    if s.expr is not None:  # the closed form is the stationary point of the continuous step
        assert float(s.expr.subs(s.inputs)) == pytest.approx(s.continuous, rel=1e-12)
        f = sp.lambdify(S.m, pp.step_time_expr(schedule).subs(
            {pp.T_F: a + c * B / S.m, pp.T_B: 0, pp.T_P2P: t_p2p, S.p: p, S.v: v}))
        m0 = s.continuous
        assert f(m0) <= min(f(m0 * 0.99), f(m0 * 1.01))


@settings(max_examples=60, deadline=None)
@given(schedule=st.sampled_from(["gpipe", "1f1b", "async", "interleaved"]), p=st.integers(1, 16),
       k=st.integers(1, 40), a=st.floats(1e-5, 1e-1), c=st.floats(1e-6, 1e-1), v=st.integers(1, 4),
       t_p2p=st.sampled_from([0.0, 1e-4]))
def test_microbatches_property(schedule, p, k, a, c, v, t_p2p):
    B = k * p if schedule == "interleaved" else k * 3
    v = v if schedule == "interleaved" else 1
    s = optimal_microbatches(schedule, p, B, a, c, v, t_p2p)
    best, argmin = brute_microbatches(schedule, p, B, a, c, v, t_p2p)
    assert s.value in argmin


@pytest.mark.parametrize("kw, field", [
    (dict(schedule="zb"), "schedule"), (dict(p=0), "p"), (dict(global_batch=0), "global_batch"),
    (dict(global_batch=2.5), "global_batch"), (dict(t_fixed_s=0), "t_fixed_s"),
    (dict(t_per_sample_s=-1e-3), "t_per_sample_s"), (dict(t_p2p_s=-1), "t_p2p_s"), (dict(v=2), "v"),
    (dict(schedule="interleaved", p=3, global_batch=4), "global_batch"), (dict(t_fixed_s=True), "t_fixed_s"),
])
def test_microbatches_bad_input(kw, field):
    args = dict(schedule="1f1b", p=4, global_batch=64, t_fixed_s=0.01, t_per_sample_s=0.001)
    args.update(kw)
    with pytest.raises(ValueError, match=field):
        optimal_microbatches(**args)


# -- 3. max_data_parallel -----------------------------------------------------------------------------
PMAX = 4096
DP_SETS = [(1e8, 1e-5, 1e-10, 0.0), (2.5e7, 2e-6, 4e-11, 1e-11), (1e6, 5e-5, 1e-9, 0.0)]


@lru_cache(maxsize=None)
def cost_table(alg, n, a, b, g) -> np.ndarray:
    """Allreduce seconds for P = 1..PMAX (index P)."""
    if alg == "auto":
        return np.min([cost_table(x, n, a, b, g) for x in AR], axis=0)
    return np.array([np.nan] + [cost("allreduce", alg, n, P, a, b, g) for P in range(1, PMAX + 1)])


def brute_dp(alg, C, n, a, b, g, E, overlap, scaling) -> int:
    P = np.arange(PMAX + 1, dtype=float)
    P[0] = np.nan
    c = C / P if scaling == "strong" else np.full_like(P, C)
    T = cost_table(alg, n, a, b, g)
    exposed = np.maximum(0.0, T - c) if overlap else T
    ok = c / (c + exposed) >= E
    return int(np.nonzero(ok)[0].max())


def test_dp_ring_hand_derived():
    # K = 0.1 (1 - 0.8)/0.8 = 0.025 s; 2(P-1) alpha + 2(P-1)/P n beta = K, times P:
    # 2 alpha P^2 + (2 n beta - 2 alpha - K) P - 2 n beta = 0
    s = max_data_parallel(0.1, 1e8, 1e-5, 1e-10, 0.8)
    K, a, nb = 0.025, 1e-5, 1e-2
    B_ = 2 * nb - 2 * a - K
    root = (-B_ + math.sqrt(B_ ** 2 + 16 * a * nb)) / (4 * a)
    assert s.continuous == pytest.approx(root, rel=1e-12) and s.value == math.floor(root) == 254
    assert cost("allreduce", "ring", 1e8, 254, a, 1e-10) <= K < cost("allreduce", "ring", 1e8, 255, a, 1e-10)
    assert s.variable == S.P and {T_COMPUTE, EFFICIENCY} <= s.expr.free_symbols
    # tree: 2 ceil(lg P)(alpha + n beta) <= K  ->  P = 2**floor(K / (2(alpha + n beta)))
    t = max_data_parallel(1.0, 1e6, 1e-5, 1e-9, 0.5, algorithm="tree")
    assert t.continuous == pytest.approx(2 ** (1.0 / (2 * (1e-5 + 1e-3))), rel=1e-12)  # 2**495
    assert t.value == 2 ** 30 and "capped" in t.note  # max_ranks
    assert max_data_parallel(1.0, 1e6, 1e-5, 1e-9, 0.5, algorithm="tree", max_ranks=2 ** 500).value == 2 ** 495


@pytest.mark.parametrize("alg", AR + ("auto",))
@pytest.mark.parametrize("n, a, b, g", DP_SETS)
def test_dp_matches_brute_force(alg, n, a, b, g):
    nontrivial = 0
    ring_bw = 2 * n * b + n * g  # the bandwidth part: budgets around it make every algorithm interesting
    for C in (ring_bw * 0.5, ring_bw * 1.5, ring_bw * 4):
        for E in (0.3, 0.6, 0.9):
            for overlap in (False, True):
                for scaling in ("weak", "strong"):
                    s = max_data_parallel(C, n, a, b, E, alg, overlap, g, scaling)
                    ref = brute_dp(alg, C, n, a, b, g, E, overlap, scaling)
                    if ref < PMAX:
                        assert s.value == ref, (C, E, overlap, scaling, s.note)
                        nontrivial += ref > 1
                    else:
                        assert s.value >= PMAX
    assert nontrivial >= 3


@pytest.mark.parametrize("alg", ["ring", "tree", "recursive_doubling", "rabenseifner", "double_binary_tree"])
def test_dp_closed_form_seeds_the_answer(alg):
    n, a, b, cap = 1e7, 1e-5, 1e-10, 2 ** 30  # n beta = 1 ms
    for K in (2.13e-3, 2.31e-3, 3.7e-3, 4.1e-2):
        for scaling in ("weak", "strong"):
            C = K * 9 * (2 if scaling == "strong" else 1)  # E = 0.9: K = C/9 (weak)
            s = max_data_parallel(C, n, a, b, 0.9, alg, scaling=scaling)
            assert s.expr is not None
            if s.continuous == math.inf:
                assert s.value == cap
                continue
            assert float(s.expr.subs(s.inputs).evalf(30)) == pytest.approx(s.continuous, rel=1e-9)
            if alg == "ring":
                assert s.value == min(cap, math.floor(s.continuous))
            else:  # the root is exact over powers of two; weak scaling: the answer is that power of two
                k = math.floor(math.log2(s.continuous))
                if scaling == "weak":
                    assert s.value == min(cap, 2 ** k)
                else:  # the budget shrinks with P: a smaller P of the next octave may still fit
                    assert 2 ** k <= s.value < 2 ** (k + 1)
            if alg == "rabenseifner":
                assert s.expr.has(sp.LambertW)


def test_solution_is_frozen():
    s = max_pipeline_stages("gpipe", 8, 0.5)
    with pytest.raises(AttributeError):
        s.value = 3


def test_dp_more_budget_more_ranks():
    base = dict(compute_s=0.05, grad_bytes=1e8, alpha_s=1e-5, beta_s_per_byte=1e-10)
    plain = max_data_parallel(**base, efficiency=0.8).value
    assert max_data_parallel(**base, efficiency=0.8, overlap=True).value > plain
    assert max_data_parallel(**base, efficiency=0.9).value < plain
    assert max_data_parallel(**base, efficiency=0.8, scaling="strong").value < plain
    # the budget is below the bandwidth term: no second rank
    assert max_data_parallel(0.01, 1e8, 1e-5, 1e-10, 0.8).value == 1


@settings(max_examples=40, deadline=None)
@given(C=st.floats(1e-3, 1.0), n=st.floats(1e5, 1e9), a=st.floats(1e-6, 1e-3), bw=st.floats(1e9, 1e11),
       E=st.floats(0.05, 0.95), overlap=st.booleans(), strong=st.booleans())
def test_dp_ring_property(C, n, a, bw, E, overlap, strong):
    s = max_data_parallel(C, n, a, 1 / bw, E, "ring", overlap, scaling="strong" if strong else "weak")
    P = np.arange(1, 2 ** 16 + 1, dtype=float)  # independent float form of the ring cost
    T = 2 * (P - 1) * a + 2 * (P - 1) / P * n / bw
    c = C / P if strong else C
    ok = c / (c + (np.maximum(0, T - c) if overlap else T)) >= E
    ref = int(P[ok].max())
    if ref < 2 ** 16 and s.value != ref:  # only a float tie at the boundary may differ
        Q = max(s.value, ref)
        c = C / Q if strong else C
        limit = c / E if overlap else c * (1 - E) / E
        assert T[Q - 1] == pytest.approx(limit, rel=1e-12)
    elif ref < 2 ** 16:
        assert s.value == ref


@pytest.mark.parametrize("kw, field", [
    (dict(compute_s=0), "compute_s"), (dict(grad_bytes=-1), "grad_bytes"), (dict(alpha_s=0), "alpha_s"),
    (dict(beta_s_per_byte=0), "beta_s_per_byte"), (dict(efficiency=0), "efficiency"),
    (dict(efficiency=1), "efficiency"), (dict(efficiency=1.5), "efficiency"),
    (dict(algorithm="bruck"), "algorithm"), (dict(max_ranks=0), "max_ranks"),
    (dict(scaling="linear"), "scaling"), (dict(overlap="yes"), "overlap"),
    (dict(gamma_s_per_byte=-1e-12), "gamma_s_per_byte"), (dict(compute_s="1"), "compute_s"),
])
def test_dp_bad_input(kw, field):
    args = dict(compute_s=0.1, grad_bytes=1e8, alpha_s=1e-5, beta_s_per_byte=1e-10, efficiency=0.8)
    args.update(kw)
    with pytest.raises(ValueError, match=field):
        max_data_parallel(**args)


# -- 4. bandwidth_to_hide -----------------------------------------------------------------------------
def brute_bandwidth(time_of_beta, C):
    """Smallest bandwidth on a log grid (1 part in 1e4) at which the transfer fits in C, and the one below."""
    grid = np.logspace(3, 15, 120001)
    T = np.array([time_of_beta(1 / x) for x in grid[::100]])  # coarse pass, then fine around the switch
    i = int(np.argmax(T <= C))
    assert T[i] <= C and i > 0
    fine = grid[(i - 1) * 100:i * 100 + 1]
    Tf = np.array([time_of_beta(1 / x) for x in fine])
    j = int(np.argmax(Tf <= C))
    return fine[j - 1], fine[j]


def test_bandwidth_hand_derived():
    # ring allreduce on 4 ranks: T = 6 alpha + 1.5 n beta = C  ->  bw = 1.5 n / (C - 6 alpha)
    s = bandwidth_to_hide("allreduce", "ring", 1e9, 4, 1e-3, 0.5)
    assert s.value == pytest.approx(1.5e9 / (0.5 - 6e-3), rel=1e-12)
    assert float(s.expr.subs(s.inputs)) == pytest.approx(s.value, rel=1e-12)
    assert s.variable == LINK_BW
    # one message: alpha + n / bw = C
    p = bandwidth_to_hide("p2p", "direct", 1e6, 2, 1e-3, 2e-3)
    assert p.value == pytest.approx(1e9, rel=1e-12)
    # latency alone exceeds the compute: no bandwidth is enough; exactly equal: infinite bandwidth
    assert bandwidth_to_hide("allreduce", "tree", 1e6, 1024, 0.1, 0.5).value is None
    assert bandwidth_to_hide("p2p", "direct", 1e6, 2, 0.5, 0.5).value == math.inf
    assert bandwidth_to_hide("allreduce", "ring", 1e6, 1, 1e-3, 0.5).value == 0.0  # nothing to send


BW_CASES = [("allreduce", "ring", 1e8, 64, 5e-6, 0.05, 0.0), ("allreduce", "tree", 4e7, 16, 1e-5, 0.02, 1e-11),
            ("allreduce", "rabenseifner", 1e8, 24, 2e-6, 0.03, 0.0),
            ("allreduce", "recursive_doubling", 1e6, 100, 1e-6, 1e-3, 0.0),
            ("allreduce", "double_binary_tree", 1e8, 512, 5e-6, 0.04, 0.0),
            ("allgather", "bruck", 3e8, 8, 1e-5, 0.1, 0.0), ("reduce_scatter", "ring", 3e8, 8, 1e-5, 0.1, 1e-11),
            ("alltoall", "bruck", 1e8, 32, 1e-5, 0.2, 0.0),
            ("broadcast", "pipelined_chain", 1e8, 16, 1e-5, 0.05, 0.0),
            ("allreduce", "pipelined_chain", 5e7, 8, 2e-5, 0.08, 1e-11)]


@pytest.mark.parametrize("op, alg, n, P, a, C, g", BW_CASES)
def test_bandwidth_matches_brute_force(op, alg, n, P, a, C, g):
    s = bandwidth_to_hide(op, alg, n, P, a, C, g)
    below, at = brute_bandwidth(lambda beta: cost(op, alg, n, P, a, beta, g), C)
    assert below < s.value * (1 + 1e-9) and s.value <= at * (1 + 1e-9)
    assert cost(op, alg, n, P, a, 1 / s.value, g) == pytest.approx(C, rel=1e-9)  # exactly hidden
    if alg == "pipelined_chain":
        assert s.expr is None
    else:
        assert float(s.expr.subs(s.inputs)) == pytest.approx(s.value, rel=1e-9)


@settings(max_examples=50, deadline=None)
@given(alg=st.sampled_from(["ring", "tree", "rabenseifner", "recursive_doubling"]), n=st.floats(1e3, 1e10),
       P=st.integers(1, 300), a=st.floats(0, 1e-4), C=st.floats(1e-4, 1.0))
def test_bandwidth_property(alg, n, P, a, C):
    s = bandwidth_to_hide("allreduce", alg, n, P, a, C)
    latency = cost("allreduce", alg, n, P, a, 0.0)
    if latency > C:
        assert s.value is None
    elif P == 1:
        assert s.value == 0.0
    elif s.value != math.inf:
        assert cost("allreduce", alg, n, P, a, 1 / s.value) == pytest.approx(C, rel=1e-9)
        assert cost("allreduce", alg, n, P, a, 1 / (s.value * 0.999)) > C  # any slower link does not hide it


def test_bandwidth_for_time():
    a, b, n = S.alpha, S.beta, S.n_bytes
    s = bandwidth_for_time(3 * a + 2 * n * b + n * b / 4, 0.01, {a: 1e-3, n: 1e7})
    assert s.value == pytest.approx(2.25e7 / (0.01 - 3e-3), rel=1e-12)
    assert sp.simplify(s.expr - 9 * n / (4 * (T_COMPUTE - 3 * a))) == 0
    # not linear in beta (a compressed transfer, made up): bisection
    q = bandwidth_for_time(a + sp.sqrt(n * b), 0.01, {a: 1e-3, n: 1e7})
    assert 1e-3 + math.sqrt(1e7 / q.value) == pytest.approx(0.01, rel=1e-9)
    assert bandwidth_for_time(a + n * b, 0.01, {a: 0.02, n: 1}).value is None
    with pytest.raises(ValueError, match="comm_time"):
        bandwidth_for_time(a + n, 0.01, {a: 1, n: 1})
    with pytest.raises(ValueError, match="values"):
        bandwidth_for_time(a + n * b, 0.01, {a: 1e-3})
    with pytest.raises(ValueError, match="compute_s"):
        bandwidth_for_time(a + n * b, 0, {a: 1e-3, n: 1})


@pytest.mark.parametrize("kw, field", [
    (dict(size_bytes=0), "size_bytes"), (dict(compute_s=0), "compute_s"), (dict(compute_s=-1), "compute_s"),
    (dict(alpha_s=-1e-6), "alpha_s"), (dict(P=0), "P"), (dict(op="gather"), "op"),
    (dict(algorithm="bruck"), "algorithm"), (dict(gamma_s_per_byte=-1), "gamma_s_per_byte"),
])
def test_bandwidth_bad_input(kw, field):
    args = dict(op="allreduce", algorithm="ring", size_bytes=1e8, P=8, alpha_s=1e-5, compute_s=0.05)
    args.update(kw)
    with pytest.raises(ValueError, match=field):
        bandwidth_to_hide(**args)


# -- 5. max_pipeline_stages ---------------------------------------------------------------------------
def test_stages_hand_derived():
    s = max_pipeline_stages("1f1b", 32, 0.25)  # (p - 1)/32 <= 1/4  ->  p <= 9
    assert s.value == 9 and s.continuous == 9.0 and sp.simplify(s.expr - (1 + BUBBLE * S.m * S.v)) == 0
    t = max_pipeline_stages("1f1b", 32, 0.25, of="step")  # (p - 1)/(31 + p) <= 1/4  ->  p <= 11.67
    assert t.value == 11 and t.continuous == pytest.approx(1 + 32 / 3)
    assert max_pipeline_stages("async", 8, 0.1).value == math.inf
    assert max_pipeline_stages("interleaved", 24, 0.2, v=2).value == 8  # p <= 10.6, p divides 24


@pytest.mark.parametrize("schedule, m, f, v, of", [
    ("gpipe", 64, 0.1, 1, "ideal"), ("gpipe", 64, 0.1, 1, "step"), ("1f1b", 7, 0.5, 1, "step"),
    ("1f1b", 100, 0.29, 1, "ideal"), ("interleaved", 48, 0.05, 4, "ideal"), ("interleaved", 60, 0.3, 2, "step"),
    ("1f1b", 1, 0.99, 1, "step"), ("gpipe", 3, 0.01, 1, "ideal")])
def test_stages_match_brute_force(schedule, m, f, v, of):
    frac = pp.bubble_fraction if of == "ideal" else pp.bubble_fraction_of_step
    ok = []
    for p in range(1, PMAX + 1):
        try:
            if frac(schedule, p, m, v) <= f:
                ok.append(p)
        except ValueError:  # interleaved: m not a multiple of p
            pass
    assert max_pipeline_stages(schedule, m, f, v, of).value == max(ok) < PMAX


@pytest.mark.parametrize("kw, field", [
    (dict(schedule="x"), "schedule"), (dict(m=0), "m"), (dict(bubble_fraction=0), "bubble_fraction"),
    (dict(bubble_fraction=1), "bubble_fraction"), (dict(v=2), "v"), (dict(of="total"), "of"),
])
def test_stages_bad_input(kw, field):
    args = dict(schedule="1f1b", m=32, bubble_fraction=0.25)
    args.update(kw)
    with pytest.raises(ValueError, match=field):
        max_pipeline_stages(**args)
