"""Pipeline parallelism: partitioning, schedule closed forms, bubbles, in-flight counts, event simulation."""
import itertools
import math

import matplotlib
import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import symbols as S
from concurrency_model.parallel.pipeline import (SCHEDULES, T_B, T_F, T_P2P, T_W, bubble_fraction,
                                                 bubble_fraction_of_step, bubble_time, in_flight_microbatches,
                                                 partition, partition_graph, plot_timeline, step_time,
                                                 step_time_expr, timeline)

matplotlib.use("Agg")


# -- closed forms, hand-derived ------------------------------------------------------------------------
def test_hand_values():
    # p=4, m=8, t_f=1, t_b=2: (8 + 3) * 3 = 33; interleaved v=2: (8 + 3/2) * 3 = 28.5; async 8 * 3 = 24
    assert step_time("gpipe", 4, 8, 1, 2) == 33
    assert step_time("1f1b", 4, 8, 1, 2) == 33
    assert step_time("interleaved", 4, 8, 1, 2, v=2) == pytest.approx(28.5)
    assert step_time("interleaved", 4, 8, 1, 2, v=4) == pytest.approx((8 + 0.75) * 3)
    assert step_time("async", 4, 8, 1, 2) == 24
    # p2p: 2(p-1) = 6 transfers on the fill/drain path; interleaved 2(vp-1) = 14; async 2(p-1)m/p = 12
    assert step_time("gpipe", 4, 8, 1, 2, t_p2p=0.1) == pytest.approx(33.6)
    assert step_time("interleaved", 4, 8, 1, 2, v=2, t_p2p=0.1) == pytest.approx(29.9)
    assert step_time("async", 4, 8, 1, 2, t_p2p=0.1) == pytest.approx(25.2)
    # one stage: no bubble, no transfer
    for sch in ("gpipe", "1f1b", "async"):
        assert step_time(sch, 1, 5, 1, 2, t_p2p=7) == 15
    assert step_time("interleaved", 1, 5, 1, 2, v=3, t_p2p=7) == 15


def test_symbolic_matches_numeric():
    e = step_time("interleaved", S.p, S.m, T_F, T_B, v=S.v, t_p2p=T_P2P)
    assert isinstance(e, sp.Expr) and e.free_symbols == {S.p, S.m, S.v, T_F, T_B, T_P2P}
    f = sp.lambdify((S.p, S.m, S.v, T_F, T_B, T_P2P), e, modules="numpy", cse=True)
    assert f(4, 8, 2, 1.0, 2.0, 0.1) == pytest.approx(step_time("interleaved", 4, 8, 1, 2, v=2, t_p2p=0.1))
    for sch in SCHEDULES:
        assert step_time_expr(sch).free_symbols <= {S.p, S.m, S.v, T_F, T_B, T_P2P, T_W}
    assert step_time("1f1b", S.p, 8, 1, 2) == 3 * (S.p + 7)


def test_bubble_fractions():
    assert bubble_fraction("gpipe", 4, 8) == pytest.approx(3 / 8)
    assert bubble_fraction("1f1b", 4, 8) == pytest.approx(3 / 8)
    assert bubble_fraction("interleaved", 4, 8, 2) == pytest.approx(3 / 16)
    assert bubble_fraction("async", 4, 8) == 0
    assert bubble_fraction_of_step("gpipe", 4, 8) == pytest.approx(3 / 11)
    assert bubble_fraction_of_step("interleaved", 4, 8, 2) == pytest.approx(1.5 / 9.5)
    assert bubble_fraction_of_step("async", 4, 8) == 0
    assert bubble_fraction("1f1b", 1, 8) == 0
    for sch, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("async", 1)):
        ideal = 8 * 3
        bt = bubble_time(sch, 4, 8, 1, 2, v=v)
        assert bt == pytest.approx(step_time(sch, 4, 8, 1, 2, v=v) - ideal)
        assert bt / ideal == pytest.approx(bubble_fraction(sch, 4, 8, v))
        assert bt / (ideal + bt) == pytest.approx(bubble_fraction_of_step(sch, 4, 8, v))
    assert bubble_fraction("gpipe", S.p, S.m) == (S.p - 1) / S.m


def test_in_flight():
    assert in_flight_microbatches("gpipe", 4, 8, stage=2) == 8
    assert [in_flight_microbatches("1f1b", 4, 8, stage=s) for s in range(4)] == [4, 3, 2, 1]
    assert in_flight_microbatches("1f1b", 4, 2, stage=0) == 2
    assert [in_flight_microbatches("async", 4, 2, stage=s) for s in range(4)] == [4, 3, 2, 1]
    # Korthikanti et al. 2022 §4.2.3: first stage holds p (1 + (p-1)/(p v)) microbatches' worth
    for p, v in ((4, 2), (8, 3), (2, 4)):
        assert in_flight_microbatches("interleaved", p, 4 * p, v, 0) == pytest.approx(p * (1 + (p - 1) / (p * v)))
    assert in_flight_microbatches("1f1b", S.p, S.m, stage=0) == sp.Min(S.p, S.m)


# -- input checks --------------------------------------------------------------------------------------
@pytest.mark.parametrize("call, field", [
    (lambda: step_time("zigzag", 4, 8, 1, 2), "schedule"),
    (lambda: step_time("gpipe", 0, 8, 1, 2), "p"),
    (lambda: step_time("gpipe", 4, 0, 1, 2), "m"),
    (lambda: step_time("gpipe", 4, 2.5, 1, 2), "m"),
    (lambda: step_time("interleaved", 4, 8, 1, 2, v=0), "v"),
    (lambda: step_time("1f1b", 4, 8, 1, 2, v=2), "v"),
    (lambda: step_time("interleaved", 4, 6, 1, 2, v=2), "m"),
    (lambda: step_time("gpipe", 4, 8, -1, 2), "t_f"),
    (lambda: step_time("gpipe", 4, 8, 1, float("nan")), "t_b"),
    (lambda: step_time("gpipe", 4, 8, 1, 2, t_p2p=-1), "t_p2p"),
    (lambda: bubble_fraction("gpipe", 4, -1), "m"),
    (lambda: in_flight_microbatches("1f1b", 4, 8, stage=4), "stage"),
    (lambda: in_flight_microbatches("1f1b", 4, 8, stage=-1), "stage"),
    (lambda: timeline("gpipe", 4, 8, 1, 2, steps=0), "steps"),
    (lambda: timeline("gpipe", S.p, 8, 1, 2), "p"),
    (lambda: partition([1, 2, 3], 0), "stages"),
    (lambda: partition([1, 2, 3], 4), "stages"),
    (lambda: partition([1, 2, 3], 1.5), "stages"),
    (lambda: partition([], 1), "stages"),
    (lambda: partition([1, -2, 3], 2), "stage_costs"),
    (lambda: partition([1, -2, 3], 2), r"stage_costs\[1\]: must be a number >= 0, got -2$"),
    (lambda: partition(list(np.array([1.0, np.inf])), 1), r"stage_costs\[1\]"),   # numpy floats: the array path
    (lambda: partition([1.0, "2"], 1), r"stage_costs\[1\]"),   # a string numpy would read as a number
    (lambda: partition([True, 1.0], 1), r"stage_costs\[0\]"),   # a bool is not a cost
])
def test_errors_name_field(call, field):
    with pytest.raises(ValueError, match=rf"^{field}"):
        call()


def test_unknown_schedule_lists_allowed():
    with pytest.raises(ValueError, match="gpipe, 1f1b, interleaved, async"):
        bubble_fraction("pipedream-3bw", 4, 8)


# -- partitioning --------------------------------------------------------------------------------------
def _brute(costs, k):
    L = len(costs)
    best = math.inf
    for cuts in itertools.combinations(range(1, L), k - 1):
        b = (0, *cuts, L)
        best = min(best, max(sum(costs[b[i]:b[i + 1]]) for i in range(k)))
    return best


def _check_ranges(ranges, L, k):
    assert len(ranges) == k and ranges[0][0] == 0 and ranges[-1][1] == L
    assert all(a < b for a, b in ranges) and all(ranges[i][1] == ranges[i + 1][0] for i in range(k - 1))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.floats(0, 100, allow_nan=False), min_size=1, max_size=8), st.data())
def test_partition_optimal_vs_brute_force(costs, data):
    k = data.draw(st.integers(1, len(costs)))
    ranges = partition(costs, k)
    _check_ranges(ranges, len(costs), k)
    got = max(sum(costs[a:b]) for a, b in ranges)
    assert got == pytest.approx(_brute(costs, k), rel=1e-9, abs=1e-9)


@pytest.mark.parametrize("L", [1, 2, 7, 10, 24, 31])
def test_partition_uniform_is_balanced(L):
    for k in range(1, L + 1):
        ranges = partition([0.5] * L, k)
        _check_ranges(ranges, L, k)
        sizes = [b - a for a, b in ranges]
        assert max(sizes) - min(sizes) <= 1


def test_partition_graph():
    from concurrency_model import get_model
    from concurrency_model.timing.graph import layer_times

    g = get_model("resnet50", batch=8)
    df = partition_graph(g, 4, "v100-sxm2-32gb", "fp16")
    lt = layer_times(g, "v100-sxm2-32gb", "fp16")
    costs = list(lt["forward_s"] + lt["grad_input_s"] + lt["grad_weight_s"])
    assert list(df["stage"]) == [0, 1, 2, 3] and int(df["layers"].sum()) == len(costs)
    assert df["time_s"].sum() == pytest.approx(sum(costs))
    assert df["time_s"].max() == pytest.approx(max(sum(costs[a:b]) for a, b in partition(costs, 4)))
    assert df["time_s"].max() <= sum(costs) / 4 + max(costs) + 1e-12  # the greedy bound


# -- event simulation ----------------------------------------------------------------------------------
GRID = [(1, 3, 1.0, 2.0), (2, 4, 1.0, 1.0), (4, 8, 1.0, 2.0), (4, 4, 2.0, 1.0), (3, 9, 0.5, 1.5), (8, 16, 1.0, 2.0)]


def _in_flight(df, stage):
    peak = cur = 0
    for r in df[df["stage"] == stage].itertuples():
        cur += 1 if r.kind == "F" else -1
        peak = max(peak, cur)
    return peak


def _check_events(df, p, v):
    for s, g in df.groupby("stage"):  # one operation at a time per stage
        assert (g["start_s"].to_numpy()[1:] >= g["end_s"].to_numpy()[:-1] - 1e-9).all()
    end = {(r.kind, r.step, r.microbatch, r.chunk * p + r.stage): r.end_s for r in df.itertuples()}
    for r in df.itertuples():  # dependencies
        g = r.chunk * p + r.stage
        if r.kind == "F" and g > 0:
            assert r.start_s >= end[("F", r.step, r.microbatch, g - 1)] - 1e-9
        if r.kind == "B":
            dep = ("B", r.step, r.microbatch, g + 1) if g < v * p - 1 else ("F", r.step, r.microbatch, g)
            assert r.start_s >= end[dep] - 1e-9


@pytest.mark.parametrize("p, m, tf, tb", GRID)
def test_timeline_makespan_gpipe_1f1b_exact(p, m, tf, tb):
    for sch in ("gpipe", "1f1b"):
        df = timeline(sch, p, m, tf, tb)
        assert len(df) == 2 * p * m and set(df.columns) >= {"stage", "microbatch", "kind", "chunk", "start_s",
                                                            "end_s"}
        _check_events(df, p, 1)
        assert df["end_s"].max() == pytest.approx(step_time(sch, p, m, tf, tb), rel=1e-12)
        for s in range(p):
            assert _in_flight(df, s) == in_flight_microbatches(sch, p, m, stage=s)
    # GPipe with transfers: exactly 2(p-1) t_p2p more; 1F1B: the closed form is a lower bound
    assert timeline("gpipe", p, m, tf, tb, t_p2p=0.1)["end_s"].max() == pytest.approx(
        step_time("gpipe", p, m, tf, tb, t_p2p=0.1))
    assert timeline("1f1b", p, m, tf, tb, t_p2p=0.1)["end_s"].max() >= step_time("1f1b", p, m, tf, tb, t_p2p=0.1) - 1e-9


@pytest.mark.parametrize("p, m, v, tf, tb", [(4, 8, 2, 1.0, 2.0), (4, 8, 4, 1.0, 2.0), (2, 4, 2, 1.0, 1.0),
                                             (4, 4, 2, 1.0, 2.0), (4, 16, 3, 1.0, 2.0), (8, 16, 2, 2.0, 1.0),
                                             (3, 9, 2, 1.0, 3.0), (1, 3, 2, 1.0, 2.0)])
def test_timeline_interleaved(p, m, v, tf, tb):
    # Megatron's order reproduces (m + (p-1)/v)(t_f + t_b) exactly on every case tried, and with
    # transfers exactly 2(vp-1) t_p2p more; the test asks for exactness.
    df = timeline("interleaved", p, m, tf, tb, v=v)
    assert len(df) == 2 * p * m * v
    _check_events(df, p, v)
    assert df["end_s"].max() == pytest.approx(step_time("interleaved", p, m, tf, tb, v=v), rel=1e-12)
    for s in range(p):
        assert _in_flight(df, s) / v == pytest.approx(in_flight_microbatches("interleaved", p, m, v, s))
    t = timeline("interleaved", p, m, tf, tb, v=v, t_p2p=0.05)["end_s"].max()
    assert t == pytest.approx(step_time("interleaved", p, m, tf, tb, v=v, t_p2p=0.05), rel=1e-12)


@pytest.mark.parametrize("p, m, tf, tb, c", [(4, 8, 1.0, 2.0, 0.0), (4, 8, 1.0, 2.0, 0.1), (2, 8, 1.0, 1.0, 0.3),
                                             (8, 16, 1.0, 2.0, 0.05), (4, 4, 1.0, 2.0, 2.0)])
def test_timeline_async_steady_state(p, m, tf, tb, c):
    df = timeline("async", p, m, tf, tb, t_p2p=c, steps=4)
    assert sorted(df["step"].unique()) == [0, 1, 2, 3] and df["microbatch"].max() == m - 1
    first = df[(df["stage"] == 0) & (df["kind"] == "F") & (df["microbatch"] == 0)].set_index("step")["start_s"]
    for k in (2, 3):  # period between steps once the pipeline is full
        assert first[k] - first[k - 1] == pytest.approx(step_time("async", p, m, tf, tb, t_p2p=c), rel=1e-9)
    for s in range(p):
        assert _in_flight(df, s) == in_flight_microbatches("async", p, m, stage=s)


def test_timeline_steps_repeat_after_flush():
    one = timeline("1f1b", 4, 8, 1.0, 2.0)
    two = timeline("1f1b", 4, 8, 1.0, 2.0, steps=2)
    assert len(two) == 2 * len(one) and two["end_s"].max() == pytest.approx(66.0)


def test_plot_timeline():
    import matplotlib.pyplot as plt

    df = timeline("interleaved", 4, 8, 1.0, 2.0, v=2)
    ax = plot_timeline(df)
    assert ax.get_xlabel() == "time (s)" and len(ax.patches) >= len(df)
    fig, ax2 = plt.subplots()
    assert plot_timeline(timeline("gpipe", 2, 2, 1.0, 1.0), ax=ax2) is ax2
    plt.close("all")
