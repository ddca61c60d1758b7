"""ZB-H1 (Qi et al. 2024): the weight gradients deferred into the pipeline's drain (parallel.pipeline, estimate)."""
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.parallel import pipeline as pp

GPT3 = {"model": "gpt3-175b", "cluster": "dgx-a100",
        "parallel": {"data": 8, "tensor": 8, "pipeline": 16, "global_batch": 1536, "sequence_parallel": True},
        "training": {"dtype": "bf16", "recompute": "selective", "zero_stage": 1}}


def with_schedule(sc, schedule):
    return {**sc, "parallel": {**sc["parallel"], "schedule": schedule}}


def test_closed_form_by_hand():
    # F = B = W = 1 (t_b = B + W = 2), p = 4, m = 8: ideal 8 x 3 = 24; 1F1B's bubble 3 x 3 = 9, ZB-H1's 3 x 1 = 3
    assert pp.step_time("zb-h1", 4, 8, 1, 2, t_w=1) == 27 and pp.step_time("1f1b", 4, 8, 1, 2) == 33
    assert pp.bubble_time("zb-h1", 4, 8, 1, 2, t_w=1) == 3
    # one microbatch: no W to fill with, 1F1B's chain less the last W: 5 + 7 x (2 + 1) = 26
    assert pp.step_time("zb-h1", 8, 1, 2, 3, t_w=2) == 26
    assert pp.step_time("zb-h1", 1, 5, 2, 3, t_w=2) == 25  # one stage: serial
    assert pp.step_time("zb-h1", 4, 8, 1, 2, t_w=0) == pp.step_time("1f1b", 4, 8, 1, 2)  # nothing to defer
    assert pp.in_flight_microbatches("zb-h1", 4, 8, stage=3) == 4  # 1F1B's peak, on every stage


@settings(max_examples=60, deadline=None)
@given(st.integers(2, 8), st.integers(1, 20), st.floats(0.2, 3), st.floats(0.2, 3), st.floats(0, 1))
def test_closed_form_bounds_the_event_simulation(p, m, f, b_input, share):
    w = share * (b_input + 1)  # W up to B + 1
    b = b_input + w
    sim = pp.timeline("zb-h1", p, m, f, b, t_w=w)
    step = float(sim["end_s"].max())
    closed = float(pp.step_time("zb-h1", p, m, f, b, t_w=w))
    assert closed <= step * (1 + 1e-9)  # a lower bound of this greedy schedule
    assert step <= float(pp.step_time("1f1b", p, m, f, b)) * (1 + 1e-9)  # never worse than 1F1B
    assert closed >= m * (f + b) + (p - 1) * max(f, b - w) - 1e-9
    # memory: F started minus W done never above p on any stage (1F1B's peak)
    for _, ops in sim.groupby("stage"):
        events = sorted([(r.start_s, 1) for r in ops.itertuples() if r.kind == "F"] +
                        [(r.end_s, -1) for r in ops.itertuples() if r.kind == "W"], key=lambda e: (e[0], e[1]))
        held = peak = 0
        for _, d in events:
            held += d
            peak = max(peak, held)
        assert peak <= p


@pytest.mark.parametrize("p, m", [(4, 4), (4, 8), (8, 16)])
def test_equal_passes_meet_the_papers_third(p, m):
    """F = B = W: the bubble is a third of 1F1B's (Qi et al. 2024), in the closed form and in the simulation."""
    sim = float(pp.timeline("zb-h1", p, m, 1.0, 2.0, t_w=1.0)["end_s"].max())
    assert sim == pytest.approx(float(pp.step_time("zb-h1", p, m, 1, 2, t_w=1))) == pytest.approx(3 * m + p - 1)


def test_estimate_defers_the_weight_gradients():
    # the analysis' first-stage peak (framework "ideal"): a runtime's loss buffers also weigh the last stage, where
    # zb-h1 keeps p microbatches beside the logits (parallel.allocator)
    ideal = {**GPT3, "training": {**GPT3.get("training", {}), "framework": "ideal"}}
    one, zb = (estimate(with_schedule(ideal, s)) for s in ("1f1b", "zb-h1"))
    assert zb.memory_bytes_per_device == one.memory_bytes_per_device
    assert zb.breakdown["bubble_s"] < 0.6 * one.breakdown["bubble_s"]
    assert one.step_time_s - zb.step_time_s == pytest.approx(one.breakdown["bubble_s"] - zb.breakdown["bubble_s"])
    for k in ("forward_s", "backward_s", "recompute_s", "tensor_parallel_comm_s"):
        assert zb.breakdown[k] == pytest.approx(one.breakdown[k])


def test_lora_has_no_weight_gradient_to_defer():
    lora = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-a100",
            "parallel": {"data": 2, "pipeline": 4, "global_batch": 32},
            "training": {"dtype": "bf16", "lora_rank": 16, "recompute": "selective"}}
    one, zb = (estimate(with_schedule(lora, s)).step_time_s for s in ("1f1b", "zb-h1"))
    assert zb == pytest.approx(one)


def test_sweep_agrees_with_estimate():
    from concurrency_model.sweep import sweep
    sc = with_schedule(GPT3, "zb-h1")  # data, tensor and pipeline given: one layout a microbatch size
    res = sweep({**sc, "parallel": {**sc["parallel"], "microbatch_size": 1}}, gpus=1024)
    row = res.frame.iloc[0]
    assert row["schedule"] == "zb-h1" and row["step_time_s"] == pytest.approx(estimate(sc).step_time_s, rel=1e-9)


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match="t_w"):
        pp.step_time("zb-h1", 4, 8, 1, 2, t_w=3)
    with pytest.raises(ValueError, match="schedule: zb-h1"):
        pp.bubble_fraction("zb-h1", 4, 8)
