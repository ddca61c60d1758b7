"""1F1B with uneven stages: the composed step against a simulation of the schedule's dependencies."""
from __future__ import annotations

import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model.training.step import step_fn
from concurrency_model.training.step_parts import STEP_INPUTS


def simulate_1f1b(f: list, b: list, m: int) -> float:
    """Makespan of 1F1B (Narayanan et al. 2021 §2.2.1: stage i runs p - i - 1 forwards, then one forward and one
    backward in turn, then the remaining backwards) with stage i's forward and backward lasting ``f[i]`` and ``b[i]``;
    a forward needs the previous stage's forward of its microbatch, a backward the next stage's backward and its own
    forward; no transfer time."""
    p = len(f)
    order = []
    for i in range(p):
        warm = min(p - i - 1, m)
        ops = [("F", j) for j in range(warm)]
        nf, nb = warm, 0
        while nf < m:
            ops += [("F", nf), ("B", nb)]
            nf, nb = nf + 1, nb + 1
        ops += [("B", j) for j in range(nb, m)]
        order.append(ops)
    done, clock, at = {}, [0.0] * p, [0] * p
    moved = True
    while moved:
        moved = False
        for i in range(p):
            while at[i] < len(order[i]):
                kind, j = order[i][at[i]]
                needs = [("F", i - 1, j)] if kind == "F" and i else []
                if kind == "B":
                    needs = [("F", i, j)] + ([("B", i + 1, j)] if i < p - 1 else [])
                if not all(n in done for n in needs):
                    break
                start = max([clock[i]] + [done[n] for n in needs])
                clock[i] = done[(kind, i, j)] = start + (f[i] if kind == "F" else b[i])
                at[i] += 1
                moved = True
    return max(clock)


def composed(f: list, b: list, m: int) -> float:
    """The step of :mod:`concurrency_model.training.compose` for these stages: the slowest stage's passes and the
    other stages' share of the fill and drain (``fill``, as :meth:`.Workload.stage` computes it)."""
    p = len(f)
    w = [x + y for x, y in zip(f, b)]
    k = max(range(p), key=w.__getitem__)
    inputs = dict.fromkeys(STEP_INPUTS, 0.0) | {"c_f": f[k], "c_b": b[k], "p": float(p), "m": float(m), "v": 1.0,
                                                "sync_frac": 1.0, "fill": (sum(w) - w[k]) / ((p - 1) * w[k])}
    return float(step_fn("1f1b", 0, False, ("step",))(**inputs)["step"])


def test_a_heavy_last_stage_hand_count():
    # stages of 1 + 2 s, the last of 2 + 4 s, 3 microbatches: the last stage runs 3 x 6 s, after the first
    # stage's forward (1 s) and before its backward (2 s): 21 s, where (m + p - 1) x 6 s would be 24 s
    assert simulate_1f1b([1, 2], [2, 4], 3) == 21
    assert composed([1, 2], [2, 4], 3) == pytest.approx(21)


@settings(max_examples=60, deadline=None)
@given(st.lists(st.tuples(st.floats(0.1, 2.0), st.floats(1.0, 3.0)), min_size=2, max_size=6),
       st.integers(1, 12), st.floats(1.0, 3.0))
def test_uneven_stages_against_the_schedule(stages, m, heavy):
    f = [x for x, _ in stages]
    b = [x * r for x, r in stages]
    f[-1], b[-1] = f[-1] * heavy, b[-1] * heavy
    sim, step = simulate_1f1b(f, b, m), composed(f, b, m)
    slowest = max(x + y for x, y in zip(f, b))
    # never faster than the schedule, never slower than every stage at the slowest one's seconds
    assert sim - 1e-9 <= step <= (m + len(f) - 1) * slowest + 1e-9
    if f[-1] + b[-1] >= slowest:  # the last stage the slowest (an output layer and loss): exact
        assert step == pytest.approx(sim, rel=1e-9)
