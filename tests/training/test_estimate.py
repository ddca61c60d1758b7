"""Scenario estimates: composition rules, scaling properties and bad input."""
import json
import subprocess
import sys

import numpy as np
import pytest

from concurrency_model.cli import main
from concurrency_model.models import get_model
from concurrency_model.parallel import pipeline
from concurrency_model.training.step_parts import STEP_PARTS
from concurrency_model.training.estimate import estimate
from concurrency_model.scenario import load_scenario
from concurrency_model.timing.graph import step_time

GPT = {"kind": "gpt", "layers": 8, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 51200}


def sc(model=GPT, **par):
    training = par.pop("training", {})
    return {"model": model, "cluster": "dgx-a100", "parallel": par, "training": training}


def exposed_sum(b):
    return sum(b[k] for k in STEP_PARTS)


def test_one_device_is_the_graph_step_and_the_breakdown_adds_up(loss_seconds):
    e = estimate(sc(microbatch_size=4, global_batch=4))
    one = step_time(get_model(GPT, batch=4, value_bytes=2), "a100-sxm4-80gb", "bf16")
    # the graph's layers plus the fp32 cross-entropy on its 4 x 1024 x 51,200 logits
    loss_f, loss_b = loss_seconds(4 * 1024, 51200)
    assert e.breakdown["forward_s"] == pytest.approx(one["forward_s"] + loss_f)
    assert e.breakdown["backward_s"] == pytest.approx(one["backward_s"] + loss_b)
    assert e.breakdown["bubble_s"] == 0 and e.breakdown["data_parallel_comm_s"] == 0
    assert e.step_time_s == pytest.approx(exposed_sum(e.breakdown))
    assert e.throughput_samples_per_s == pytest.approx(4 / e.step_time_s)


def test_weak_scaling_over_data_parallel_ranks():
    one = estimate(sc(microbatch_size=4, global_batch=4))
    eight = estimate(sc(data=8, microbatch_size=4, global_batch=32))
    assert eight.breakdown["data_parallel_comm_s"] > 0
    assert eight.step_time_s == pytest.approx(exposed_sum(eight.breakdown))
    speedup = eight.throughput_samples_per_s / one.throughput_samples_per_s
    assert 6.0 < speedup <= 8.0  # gradients overlap the backward pass inside one NVSwitch node
    # without overlap the whole allreduce is exposed
    serial = estimate(sc(data=8, microbatch_size=4, global_batch=32, training={"overlap": False}))
    assert serial.breakdown["data_parallel_exposed_s"] == pytest.approx(serial.breakdown["data_parallel_comm_s"])
    assert serial.step_time_s > eight.step_time_s


def test_tensor_parallelism_splits_compute_and_adds_collectives():
    one = estimate(sc(microbatch_size=2, global_batch=2))
    two = estimate(sc(tensor=2, microbatch_size=2, global_batch=2))
    assert two.breakdown["compute_s"] < one.breakdown["compute_s"]
    assert two.breakdown["tensor_parallel_comm_s"] > 0
    assert two.memory_bytes_per_device < one.memory_bytes_per_device


@pytest.mark.parametrize("split", ["balanced", "layers"])
def test_pipeline_bubble_is_the_other_stages_seconds(split):
    # GPU-bound (microbatch 8, no host wait): 1F1B's fill and drain run the other three stages once each, so the
    # slowest stage's seconds plus the bubble are the whole model's seconds a microbatch on one device
    one = estimate(sc(microbatch_size=8, global_batch=8))
    e = estimate(sc(pipeline=4, microbatch_size=8, global_batch=64, stage_split=split))
    assert e.breakdown["host_wait_s"] == 0 == one.breakdown["host_wait_s"]
    slowest = e.breakdown["compute_s"] / 8
    assert e.breakdown["bubble_s"] + slowest == pytest.approx(one.breakdown["compute_s"], rel=1e-9)
    assert e.breakdown["bubble_s"] < 3 * slowest  # the stages are uneven: less than (p - 1) slowest stages


def test_pipeline_bubble_follows_the_schedule():
    e = estimate(sc(pipeline=4, microbatch_size=1, global_batch=8))
    inter = estimate(sc(pipeline=4, interleave=2, schedule="interleaved", microbatch_size=1, global_batch=8))
    assert inter.breakdown["bubble_s"] < e.breakdown["bubble_s"]
    assert len(e.stages) == 4 and e.stages[0][0] == 0
    assert pipeline.bubble_fraction("1f1b", 4, 8) == pytest.approx(3 / 8)


def test_recompute_costs_time_and_saves_memory():
    none = estimate(sc(microbatch_size=4, global_batch=4))
    full = estimate(sc(microbatch_size=4, global_batch=4, training={"recompute": "full"}))
    # the blocks' forward again, not the embedding, final norm, output layer and loss (recompute.full_recompute_rows)
    layers = full.layers()
    blocks = layers["layer"].str.match(r"^h\.\d+\.")
    assert full.breakdown["forward_s"] == pytest.approx(layers["forward_s"].sum(), rel=1e-9)
    assert full.breakdown["recompute_s"] == pytest.approx(layers.loc[blocks, "forward_s"].sum(), rel=1e-9)
    assert full.breakdown["recompute_s"] < full.breakdown["forward_s"]
    assert full.memory_bytes_per_device < none.memory_bytes_per_device


def test_cnn_data_parallel_and_bad_degrees():
    e = estimate(sc("resnet50", data=8, microbatch_size=32, global_batch=256, training={"dtype": "fp16"}))
    assert e.throughput_samples_per_s > 0 and e.scenario.gpus == 8
    for bad, field in ((sc("resnet50", tensor=3, global_batch=3), "parallel.tensor: 3 does not divide"),
                       (sc(tensor=3, global_batch=3), "parallel.tensor"),
                       (sc(pipeline=500, global_batch=500), "parallel.pipeline"),
                       (sc(data=3, global_batch=16), "parallel.global_batch"),
                       (sc(schedule="zigzag"), "parallel.schedule"),
                       (sc(training={"optimizer": "lion"}), "training.optimizer")):
        with pytest.raises(ValueError, match=field):
            estimate(bad)


def test_memory_over_the_device_is_refused_with_the_reason():
    with pytest.raises(ValueError, match="memory: .* exceeds"):
        estimate(sc("gpt3-175b", microbatch_size=1, global_batch=1))


def test_cli_json_toml_and_bad_input(tmp_path, capsys):
    path = tmp_path / "s.json"
    path.write_text(json.dumps(sc(data=2, tensor=2, pipeline=2, microbatch_size=1, global_batch=16)))
    assert main(["estimate", "--scenario", str(path), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("step_time_s", "throughput_samples_per_s", "flop_per_step", "achieved_flops_per_device",
                "memory_bytes_per_device", "breakdown"):
        assert key in out
    assert {"compute_s", "communication_s", "bubble_s"} <= set(out["breakdown"])
    toml = tmp_path / "s.toml"
    toml.write_text('model = "gpt2"\ncluster = "dgx-a100"\n[parallel]\ndata = 2\nglobal_batch = 8\n')
    assert load_scenario(toml).gpus == 2
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(sc(tensor=3, global_batch=3)))
    p = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", str(bad)],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "parallel.tensor" in p.stderr and "Traceback" not in p.stderr


def test_pipeline_stages_weigh_the_host():
    # a pass lasts max(GPU, host): the stages balance each layer's larger of its GPU and host seconds (as
    # torchgpipe's balance_by_time measures wall time) and the slowest is the stage with the largest max
    from concurrency_model.hardware.clusters import load_cluster
    from concurrency_model.parallel import host as host_mod
    from concurrency_model.training.workload import workload
    w = workload("resnet50", load_cluster("dgx-a100"), "fp16")
    h, la = 60e-6, float(w.dev.launch_overhead)
    cols = w._columns(4, 1, False, "none")
    gpu, host = np.array(cols["per_layer"]), h * cols["kernels"]
    st = w.stage(4, 1, False, "none", 2, host=h)
    units = w.units()
    expect = [(units[a][0], units[z - 1][1])
              for a, z in pipeline.partition([float(np.maximum(gpu, host)[a:z].sum()) for a, z in units], 2)]
    assert st["stages"] == expect
    slowest = max(expect, key=lambda r: max(gpu[r[0]:r[1]].sum(), host[r[0]:r[1]].sum()))
    # the host's calls as the pass's host seconds count them (parallel.host.issued: a library call's further launches,
    # ResNet's im2col and split-K, are the library's), so the cut and the pass weigh the host alike
    calls = sum(host_mod.issued(st[x], la) for x in ("f", "b", "r"))
    assert calls == pytest.approx(cols["kernels"][slowest[0]:slowest[1]].sum(), rel=1e-12)
    assert calls < st["f"].kernels(la) + st["b"].kernels(la) + st["r"].kernels(la)  # fewer than the launches
    assert sum(host_mod.host_seconds(st, w.dev, h)) == pytest.approx(h * calls + sum(host_mod.queue_wait(st, h)),
                                                                     rel=1e-12)  # the issues, and the queue's wait
    # without host time the stages are PipeDream's on GPU seconds, as before: here a different cut
    plain = w.stage(4, 1, False, "none", 2)
    assert plain["stages"] == [(units[a][0], units[z - 1][1]) for a, z in pipeline.partition(
        [float(gpu[a:z].sum()) for a, z in units], 2)] != expect


@pytest.mark.parametrize("host", [None, 0.0, 1e-4])
def test_host_aware_stages_agree_in_estimate_expression_and_sweep(host):
    from concurrency_model.training.sensitivity import step_expression
    from concurrency_model.sweep import sweep
    sc = {"model": "resnet50", "cluster": "dgx-a100",
          "parallel": {"data": 2, "tensor": 1, "context": 1, "pipeline": 2, "global_batch": 32, "microbatch_size": 4,
                       "schedule": "1f1b"},
          "training": {"dtype": "fp16", "recompute": "none", "zero_stage": 0,
                       **({} if host is None else {"host_overhead_s": host})}}
    e = estimate(sc)
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(e.step_time_s, rel=1e-12)
    r = sweep(sc, [4])
    assert len(r.frame) == 1 and r.frame["step_time_s"].iloc[0] == pytest.approx(e.step_time_s, rel=1e-9)


@pytest.mark.parametrize("global_batch, note", [(8192, None), (16384, "32k (You et al., LARS) was reached"),
                                                (65536, "64k was reached"), (131072, "64k is the largest")])
def test_a_batch_in_the_papers_region_c_gets_a_note(global_batch, note):
    # paper §3 (Fig. 6): 8k (Goyal et al.), 32k (LARS) and 64k are the largest sizes reported feasible
    e = estimate({"model": "lenet5", "cluster": "dgx-a100",
                  "parallel": {"data": 2, "microbatch_size": 1024, "global_batch": global_batch},
                  "training": {"dtype": "fp32", "optimizer": "sgd"}}).to_dict()
    if note is None:
        assert "notes" not in e
    else:
        (text,) = e["notes"]
        assert note in text and f"{global_batch:,} is above 8,192 samples" in text
        assert e["batch_region"]["region"] == "C"


@pytest.mark.parametrize("model, par, training", [
    (GPT, {"data": 4, "tensor": 2, "pipeline": 2, "global_batch": 64, "schedule": "gpipe"}, {"recompute": "full"}),
    (GPT, {"data": 2, "tensor": 2, "pipeline": 4, "global_batch": 64, "schedule": "interleaved", "interleave": 2,
           "sequence_parallel": True}, {"recompute": "selective"}),
    (GPT, {"data": 4, "tensor": 2, "pipeline": 2, "global_batch": 64, "schedule": "async"}, {}),
    (GPT, {"data": 16, "global_batch": 64}, {"zero_stage": 3, "host_overhead_s": 2e-4}),
    (GPT, {"data": 16, "global_batch": 64}, {"zero_stage": 2, "overlap": False}),
    (GPT, {"data": 2, "context": 4, "global_batch": 8, "context_algorithm": "ulysses"}, {}),
    ("resnet50", {"data": 16, "global_batch": 512}, {"sync": "parameter_server", "compression": "qsgd"}),
    ("resnet50", {"data": 16, "global_batch": 512}, {"sync": "gossip", "gossip_topology": "exponential",
                                                      "consistency": "ssp", "staleness": 2, "straggler_cv": 0.1}),
    ("resnet50", {"data": 16, "global_batch": 512}, {"consistency": "local_sgd", "local_steps": 4}),
    ("resnet50", {"data": 16, "global_batch": 512, "microbatch_size": 32}, {"batch_norm": "sync",
                                                                             "straggler_cv": 0.2}),
    ("resnet50", {"data": 2, "context": 4, "global_batch": 32}, {}),
])
def test_the_step_parts_add_up_to_the_step(model, par, training):
    """Whatever the layout and training distribution, the breakdown's STEP_PARTS sum to the step (the text output
    prints them as shares of it); communication_s is the exposed communication among them."""
    e = estimate(sc(model, **par, training=training))
    b = e.breakdown
    assert e.step_time_s == pytest.approx(exposed_sum(b), rel=1e-12)
    assert b["compute_s"] == pytest.approx(b["forward_s"] + b["backward_s"] + b["recompute_s"])
    assert b["data_parallel_comm_s"] == pytest.approx(b["data_parallel_exposed_s"] + b["data_parallel_overlapped_s"])
    assert sum(1 for k in STEP_PARTS if b[k] > 0) >= 3
    frame = e.to_frame()
    assert frame[frame.in_step].share.sum() == pytest.approx(1) and frame[~frame.in_step].share.isna().all()


def test_memory_splits_the_model_state(capsys, tmp_path):
    """Weights, gradients and optimizer state per device add up to the model state; hand-derived for mixed-precision
    Adam under ZeRO-1 (ZeRO §3.1, §5.1: 2 + 2 bytes a parameter, 12 sharded over the data ranks), tensor 2."""
    e = estimate(sc(data=4, tensor=2, global_batch=8, training={"zero_stage": 1}))
    m, psi = e.memory, get_model(GPT).params
    assert m["weights_bytes"] == pytest.approx(2 * psi / 2)
    assert m["gradients_bytes"] == pytest.approx(2 * psi / 2)
    assert m["optimizer_bytes"] == pytest.approx(12 * psi / 2 / 4)
    assert m["weights_bytes"] + m["gradients_bytes"] + m["optimizer_bytes"] == pytest.approx(m["model_state_bytes"])
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sc(data=4, tensor=2, global_batch=8, training={"zero_stage": 1})))
    assert main(["estimate", "--scenario", str(f)]) == 0
    text = capsys.readouterr().out
    assert f"weights {m['weights_bytes'] / 1e9:,.2f}, gradients" in text and "2 microbatches of 1 a replica" in text
    assert repr(e).startswith(f"Estimate(step {e.step_time_s:.4g} s, 80% band ") and "data 4 x tensor 2 x" in repr(e)
    shares = [float(line.split()[-1].rstrip("%")) for line in text.splitlines() if line.strip().endswith("%")]
    assert sum(shares) == pytest.approx(100, abs=0.1 * len(shares))  # the printed parts are the whole step
