"""The stream's queue between the host that issues kernels and the GPU that runs them (parallel.host: Daydream's
kernel-level graph, Zhu et al. ATC 2020)."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel import host
from concurrency_model.parallel.triples import triple_seconds
from concurrency_model.training.workload import workload

TINY = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1024}


def _loop(kernels, gpu, h):  # the recurrence itself: F_i = max(F_{i-1}, H_i) + g_i
    issue = done = 0.0
    for k, g in zip(kernels, gpu):
        issue += k * h
        done = max(done, issue) + g
    return max(done, issue)


def test_hand_derived_queues():
    # host-bound: 3 issues of 10 us, the GPU waits for each; the pass ends with the last item's 2 us
    assert host.issue_queue_seconds([1, 1, 1], [2e-6, 2e-6, 2e-6], 10e-6) == pytest.approx(32e-6)
    # GPU-bound: everything issued in 3 us, the GPU runs 1 us after the first issue for 90 us
    assert host.issue_queue_seconds([1, 1, 1], [30e-6, 30e-6, 30e-6], 1e-6) == pytest.approx(91e-6)
    # balanced totals (30 us each) but the heavy item comes last: 20 us issued, then 25 us of GPU
    assert host.issue_queue_seconds([1, 1, 1], [2.5e-6, 2.5e-6, 25e-6], 10e-6) == pytest.approx(55e-6)
    # a collective issues no kernel: it starts with the item before it
    assert host.issue_queue_seconds([1, 0, 1], [1e-6, 50e-6, 1e-6], 10e-6) == pytest.approx(62e-6)
    assert host.issue_queue_seconds([], [], 10e-6) == 0.0


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.tuples(st.integers(0, 4), st.floats(0.0, 1e-3)), min_size=1, max_size=40),
       h=st.floats(0.0, 1e-4))
def test_queue_between_the_max_and_the_sum(items, h):
    k = np.array([x[0] for x in items], dtype=float)
    g = np.array([x[1] for x in items])
    t = host.issue_queue_seconds(k, g, h)
    assert t == pytest.approx(_loop(k, g, h), rel=1e-9, abs=1e-15)
    lo, hi = max(k.sum() * h, g.sum()), k.sum() * h + g.sum()
    assert lo * (1 - 1e-12) <= t <= hi * (1 + 1e-12) + 1e-15
    assert host.issue_queue_seconds(k, g, 2 * h) >= t * (1 - 1e-12)  # a slower host never shortens a pass


@pytest.mark.parametrize("recompute", ["full", "selective", "none"])
@pytest.mark.parametrize("b", [1, 2])
def test_queue_holds_the_stage_kernels_and_seconds(recompute, b):
    # the ordered items add up to what host_seconds counts and to the GPU seconds of the passes, collectives included
    w = workload(TINY, load_cluster("dgx-a100"), "fp16")
    la = float(w.dev.launch_overhead)
    stage = w.stage(b, 4, False, recompute, 1)
    (kf, gf, _), (kb, gb, _) = stage["queue"]["f"], stage["queue"]["b"]
    xf, xb = stage["host_extra"]
    assert kf.sum() == pytest.approx(host.issued(stage["f"], la) + xf)
    assert kb.sum() == pytest.approx(host.issued(stage["b"], la) + host.issued(stage["r"], la) + xb)
    assert gf.sum() == pytest.approx(stage["f"].seconds() + triple_seconds(stage["tp_f"]), rel=1e-12)
    assert gb.sum() == pytest.approx(stage["b"].seconds() + stage["r"].seconds() + triple_seconds(stage["tp_b"])
                                     + triple_seconds(stage["tp_r"]), rel=1e-12)
    q_f, q_b = host.queue_wait(stage, 60e-6)
    assert q_f >= 0 and q_b >= 0
    assert host.queue_wait(stage, 0.0) == (0.0, 0.0)  # no host cost (a CPU device): no queue


def test_full_recompute_runs_each_block_forward_before_its_backward():
    # one block of two rows: forward a, b; backward: a, b again (recompute), then b, a backwards
    from concurrency_model.timing.parts import Parts
    z = (0.0, 0.0, 0.0)

    def one(us):
        return Parts(*(np.array([x]) for x in (us * 1e-6, 0.0, 0.0, 0.0, 1.0)))
    rows = [{"name": "h.0.a", "f": one(1), "b": one(10), "tp_f": z, "tp_b": z, "tp_again": z, "again": 0.0},
            {"name": "h.0.b", "f": one(2), "b": one(20), "tp_f": z, "tp_b": z, "tp_again": z, "again": 0.0},
            {"name": "h.1.a", "f": one(3), "b": one(30), "tp_f": z, "tp_b": z, "tp_again": z, "again": 0.0}]
    q = host.issue_sequence(rows, [(0, 0)] * 3, "full", 4e-6)
    assert np.round(q["f"][1] * 1e6, 9).tolist() == [1, 2, 3]
    assert np.round(q["b"][1] * 1e6, 9).tolist() == [3, 30, 1, 2, 20, 10]
    q = host.issue_sequence(rows, [(0, 0)] * 3, "none", 4e-6)
    assert np.round(q["b"][1] * 1e6, 9).tolist() == [30, 20, 10]


@pytest.mark.parametrize("micro", [1, 4])
def test_the_queue_never_speeds_a_pass_up(micro):
    # the step's host inputs with the stage's queue against the same stage without it: never less, by queue_wait
    from concurrency_model.scenario import load_scenario
    from concurrency_model.training.prepare import prepare, step_inputs, sync_of
    sc = load_scenario({"model": TINY, "cluster": "dgx-a100",
                        "parallel": {"data": 1, "tensor": 4, "pipeline": 1, "global_batch": 8,
                                     "microbatch_size": micro},
                        "training": {"dtype": "fp16", "recompute": "full", "host_overhead_s": 60e-6}})
    w, stage, state, _, key = prepare(sc)
    bare = {k: v for k, v in stage.items() if k != "queue"}
    x = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=60e-6)
    y = step_inputs(w, bare, *key, state, sync=sync_of(sc), host=60e-6)
    q_f, q_b = host.queue_wait(stage, 60e-6)
    assert q_f + q_b > 0  # the last item's GPU seconds at least
    assert x["h_f"] == pytest.approx(y["h_f"] + q_f, rel=1e-12)
    assert x["h_b"] == pytest.approx(y["h_b"] + q_b, rel=1e-12)
    for p, h in (("f", x["h_f"]), ("b", x["h_b"])):  # the pass (max of GPU and host) is the queue's own seconds
        gpu = x["c_f"] + x["c_tf"] if p == "f" else x["c_b"] + x["c_r"] + x["c_tb"]
        k, g, sync = stage["queue"][p]
        assert max(gpu, h) == pytest.approx(host.issue_queue_seconds(k, g, 60e-6, sync), rel=1e-9)


def _loop_sync(kernels, gpu, h, sync):  # the recurrence with the host's waits: after a sync item it resumes at F_i
    issue = done = 0.0
    for k, g, s in zip(kernels, gpu, sync):
        issue += k * h
        done = max(done, issue) + g
        if s:
            issue = done
    return max(done, issue)


def test_hand_derived_host_wait():
    # 2 issues of 10 us; the first item runs from 10 to 60 us, the host waits for it at the second (a dropless MoE
    # dispatch) and issues the third at 60 + 10 us, which runs 5 us: 75 us; with no wait the third is issued at
    # 20 us and runs after the first: 65 us
    assert host.issue_queue_seconds([1, 0, 1], [50e-6, 0.0, 5e-6], 10e-6, [False, True, False]) == pytest.approx(75e-6)
    assert host.issue_queue_seconds([1, 0, 1], [50e-6, 0.0, 5e-6], 10e-6) == pytest.approx(65e-6)


@settings(max_examples=200, deadline=None)
@given(items=st.lists(st.tuples(st.integers(0, 4), st.floats(0.0, 1e-3), st.booleans()), min_size=1, max_size=40),
       h=st.floats(0.0, 1e-4))
def test_a_host_wait_never_shortens_a_pass(items, h):
    k = np.array([x[0] for x in items], dtype=float)
    g = np.array([x[1] for x in items])
    s = np.array([x[2] for x in items])
    t = host.issue_queue_seconds(k, g, h, s)
    assert t == pytest.approx(_loop_sync(k, g, h, s), rel=1e-9, abs=1e-15)
    assert t >= host.issue_queue_seconds(k, g, h) * (1 - 1e-12)
    assert t <= k.sum() * h + g.sum() * (1 + 1e-12) + 1e-15  # never more than the host and the GPU one after the other


CFG = json.loads((Path(__file__).parents[2] / "concurrency_model/presets/hf/mixtral-8x7b.json").read_text())
CFG.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=8,
           vocab_size=1024)  # a small Mixtral: 8 experts, top 2, 2 layers
MOE = {"hf_config": CFG, "seq_len": 128}


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_dropless_moe_layers_wait_for_their_token_counts(recompute):
    # Megatron-Core's dropless dispatchers wait once a MoE layer's forward, again in a recomputed forward, never in
    # the backward (parallel.runtime, moe_sync); capacity buffers and runtimes without the wait have none
    cl = load_cluster("dgx-a100")

    def syncs(model, moe_sync):
        w = workload(model, cl, "bf16", moe_sync=moe_sync)
        q = w.stage(1, 1, False, recompute, 1)["queue"]
        return int(q["f"][2].sum()), int(q["b"][2].sum())
    layers = CFG["num_hidden_layers"]
    assert syncs(MOE, True) == (layers, layers if recompute == "full" else 0)
    assert syncs(MOE, False) == (0, 0)
    assert syncs({**MOE, "capacity_factor": 1.0}, True) == (0, 0)  # padded buffers: the counts are known
    assert syncs(TINY, True) == (0, 0)
