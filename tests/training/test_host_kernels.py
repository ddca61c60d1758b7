"""Host-issued kernels the graph does not list (Megatron's eager softmax fallback) and the per-microbatch split of
vTrain's measurements."""
import numpy as np
import pandas as pd
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel import host
from concurrency_model.training.workload import workload
from concurrency_model.validate import training as vt

TINY = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1024}


@given(b=st.integers(1, 64), heads=st.integers(1, 128), seq=st.integers(1, 8192))
def test_fused_softmax_conditions(b, heads, seq):
    # Megatron's FusedScaleMaskSoftmax (vTrain @ f8dda847 src/model/fused_softmax.py): 16 < sk <= 2048, sq % 4 == 0,
    # (b * np) % 4 == 0
    expect = 16 < seq <= 2048 and seq % 4 == 0 and (b * heads) % 4 == 0
    assert host.softmax_fused(b, heads, seq, seq) is expect
    f, bw = host.softmax_fallback_kernels(b, heads, seq, False, "fp16", True)
    assert (f, bw) == ((0, 0) if expect else (4, 8))


def test_fallback_only_for_unfused_half_precision():
    assert host.softmax_fallback_kernels(1, 2, 1024, True, "fp16", True) == (0, 0)  # FlashAttention: no softmax
    assert host.softmax_fallback_kernels(1, 2, 1024, "flash2", "bf16", False) == (0, 0)
    assert host.softmax_fallback_kernels(1, 2, 1024, False, "fp32", True) == (0, 0)  # the eager path is the graph's
    assert host.softmax_fallback_kernels(1, 2, 1024, False, "bf16", False) == (4, 4)  # no recompute: once each way
    assert host.softmax_fallback_kernels(1, 16, 4096, False, "fp16", True) == (4, 8)  # past the kernel's 2048 keys


@pytest.mark.parametrize("recompute, extra", [("full", (4, 8)), ("selective", (4, 8)), ("none", (4, 4))])
def test_stage_issues_the_fallback_kernels_per_attention_layer(recompute, extra):
    # tensor 4 leaves 2 of the 8 heads per device: a microbatch of 1 misses (b x np) % 4, one of 2 meets it
    w = workload(TINY, load_cluster("dgx-a100"), "fp16")
    h, la = 60e-6, float(w.dev.launch_overhead)
    for b, want in ((1, extra), (2, (0, 0))):
        stage = w.stage(b, 4, False, recompute, 1)
        assert stage["host_extra"] == (TINY["layers"] * want[0], TINY["layers"] * want[1])
        h_f, h_b = host.host_seconds(stage, w.dev, h)
        graph_f = host.issued(stage["f"], la)
        graph_b = host.issued(stage["b"], la) + host.issued(stage["r"], la)
        q_f, q_b = host.queue_wait(stage, h)  # what the stream's queue adds (tests/parallel/test_issue_queue.py)
        assert h_f == pytest.approx(h * (graph_f + TINY["layers"] * want[0]) + q_f, rel=1e-12)
        assert h_b == pytest.approx(h * (graph_b + TINY["layers"] * want[1]) + q_b, rel=1e-12)
    # the kernels the stage partition weighs include them (a layer's host seconds)
    cols = w._columns(1, 4, False, recompute)
    att = [i for i, n in enumerate(w.graph(1).layers()) if n.kind == "attention"]
    assert cols["host_extra"][att].sum(axis=0).tolist() == [TINY["layers"] * extra[0], TINY["layers"] * extra[1]]


def test_estimate_waits_for_the_fallback_kernels():
    # a tiny model on 4-way tensor parallelism is host-bound: the host's wait in the breakdown is m passes of
    # (host - GPU) seconds, the host's counting the 4 + 8 fallback kernels of each of its 2 attention layers
    from concurrency_model.training.estimate import estimate
    from concurrency_model.training.prepare import prepare, step_inputs, sync_of
    from concurrency_model.scenario import load_scenario
    sc = load_scenario({"model": TINY, "cluster": "dgx-a100",
                        "parallel": {"data": 1, "tensor": 4, "pipeline": 1, "global_batch": 8, "microbatch_size": 1},
                        "training": {"dtype": "fp16", "recompute": "full", "host_overhead_s": 60e-6}})
    w, stage, state, _, key = prepare(sc)
    x = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=60e-6)
    la = float(w.dev.launch_overhead)
    q_f, q_b = host.queue_wait(stage, 60e-6)
    assert x["h_f"] == pytest.approx(60e-6 * (host.issued(stage["f"], la) + 8) + q_f, rel=1e-12)
    assert x["h_b"] == pytest.approx(60e-6 * (host.issued(stage["b"], la) + host.issued(stage["r"], la) + 16) + q_b,
                                     rel=1e-12)
    gpu_f = x["c_f"] + x["c_tf"]
    gpu_b = x["c_b"] + x["c_r"] + x["c_tb"]
    assert x["h_f"] > gpu_f and x["h_b"] > gpu_b
    e = estimate(sc)
    assert e.breakdown["host_wait_s"] == pytest.approx(8 * (x["h_f"] - gpu_f + x["h_b"] - gpu_b), rel=1e-9)


@settings(max_examples=30, deadline=None)
@given(slope=st.floats(1e-3, 10.0), icpt=st.floats(0.0, 5.0), mb=st.sampled_from([1, 2, 4]),
       data=st.sampled_from([1, 2, 8]))
def test_microbatch_slopes_recover_a_line(slope, icpt, mb, data):
    gb = np.array([2, 4, 8, 16]) * mb * data
    m = gb / (mb * data)
    df = pd.DataFrame({"hidden": 1024, "layers": 12, "tensor": 1, "pipeline": 1, "data": data, "microbatch": mb,
                       "global_batch": gb, "measured_time_s": icpt + slope * m})
    r = vt.microbatch_slopes(df).iloc[0]
    assert float(r["slope_s"]) == pytest.approx(slope, rel=1e-9, abs=1e-12)
    assert float(r["intercept_s"]) == pytest.approx(icpt, rel=1e-9, abs=1e-9)


def test_microbatch_slopes_leave_out_single_batches():
    df = pd.DataFrame({"hidden": 1024, "layers": [12, 12, 16], "tensor": 1, "pipeline": 1, "data": 1,
                       "microbatch": 1, "global_batch": [4, 8, 4], "measured_time_s": [1.0, 2.0, 3.0]})
    out = vt.microbatch_slopes(df)
    assert len(out) == 1 and int(out["layers"].iloc[0]) == 12
    assert float(out["slope_s"].iloc[0]) == pytest.approx(0.25)  # (2 - 1) s over 4 more microbatches


def test_fallback_kernels_agree_in_estimate_expression_and_sweep():
    from concurrency_model.training.estimate import estimate
    from concurrency_model.training.sensitivity import step_expression
    from concurrency_model.sweep import sweep
    sc = {"model": TINY, "cluster": "dgx-a100",
          "parallel": {"data": 1, "tensor": 4, "context": 1, "pipeline": 2, "global_batch": 8, "microbatch_size": 1,
                       "schedule": "1f1b"},
          "training": {"dtype": "fp16", "recompute": "full", "zero_stage": 0}}
    e = estimate(sc)
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(e.step_time_s, rel=1e-12)
    f = sweep(sc, [8]).frame
    f = f[~f["sequence_parallel"].astype(bool)]  # the sweep also tries sequence parallelism, left out above
    assert len(f) == 1 and f["step_time_s"].iloc[0] == pytest.approx(e.step_time_s, rel=1e-9)
