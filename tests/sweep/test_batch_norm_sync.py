"""Synchronous batch normalization in estimate and sweep (training.batch_norm = "sync"): per batch-norm
layer an all-reduce of 2 C fp32 values forward and one backward over the data-parallel replicas, on the
passes' critical path (hybrid.batch_norm_sync [D]; the paper's §6.1 note on batch norm)."""
from __future__ import annotations

import copy

import pytest

from concurrency_model import estimate, get_model
from concurrency_model.comm import nccl
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.sweep import sweep

BASE = {"model": "resnet50", "cluster": "dgx-a100",
        "parallel": {"data": 8, "microbatch_size": 32, "global_batch": 256},
        "training": {"dtype": "fp32", "optimizer": "sgd", "host_overhead_s": 0}}


def run(batch_norm="sync", **training):
    sc = copy.deepcopy(BASE)
    sc["training"].update(batch_norm=batch_norm, **training)
    return estimate(sc)


def test_hand_value_on_one_node():
    # 8 replicas on one NVSwitch node: each 2C-value fp32 all-reduce (512 B - 16 KiB) is what NCCL runs
    # (comm.nccl, v2.23 tables): ring LL, 6.6 + 14 x 0.6 us + the 3.8 us launch, at min(87.7, 230.1 / 2)
    # x 8/14 GB/s on the channels NCCL gives so small a call: each of the graph's 12 carries at least
    # 512 threads x 8 B x 8 ranks = 32 KiB (comm.nccl.channels_used), so one channel, 1/12 of the bandwidth;
    # ResNet-50 has 53 batch-norm layers with 26,560 channels in all
    channels = [n.shape[0] for n in get_model("resnet50").layers() if n.kind == "batch_norm"]
    assert (len(channels), sum(channels)) == (53, 26_560)
    cl = load_cluster("dgx-a100")
    lat = (6.6 + 14 * 0.6) * 1e-6 + cl.device.launch_overhead
    def ring_ll(n):
        return lat + n / (87.7e9 * 8 / 14 * max(1.0, n / 32768) / 12)

    # the 16 KiB calls of the 2,048-channel layers run faster as tree LL on 4 of the 12 channels (NCCL's pick)
    lay = nccl.Layout(ranks=8, nodes=1, cc=80, nvlink=True, nvls=False, intra_bw=230.1e9)
    tree = nccl.nccl_choice("allreduce", 16384, lay)
    assert tree.name == "nccl:tree/LL" and tree.channels == 4.0
    assert tree.time_s + cl.device.launch_overhead < ring_ll(16384)
    one_pass = sum(ring_ll(8 * c) if 8 * c <= 8192 else tree.time_s + cl.device.launch_overhead for c in channels)
    sync, local = run(), run("local")
    assert sync.breakdown["batch_norm_sync_s"] == pytest.approx(2 * one_pass, rel=1e-9)  # forward + backward
    assert local.breakdown["batch_norm_sync_s"] == 0.0
    # no host bound here: the step grows by exactly the all-reduces; compute is unchanged
    assert sync.step_time_s - local.step_time_s == pytest.approx(2 * one_pass, rel=1e-6)
    assert sync.breakdown["forward_s"] == local.breakdown["forward_s"]
    # a full recompute runs the forward all-reduces again
    rec = run(recompute="full")
    assert rec.breakdown["recompute_s"] - run("local", recompute="full").breakdown["recompute_s"] == \
        pytest.approx(one_pass, rel=1e-9)


def test_one_replica_and_across_nodes():
    one = copy.deepcopy(BASE)
    one["parallel"].update(data=1, global_batch=32)
    one["training"]["batch_norm"] = "sync"
    assert estimate(one).breakdown["batch_norm_sync_s"] == 0.0  # nothing to synchronise with
    wide = copy.deepcopy(BASE)
    wide["parallel"].update(data=32, global_batch=1024)
    wide["training"]["batch_norm"] = "sync"
    assert estimate(wide).breakdown["batch_norm_sync_s"] > 2 * run().breakdown["batch_norm_sync_s"]


def test_the_step_expression_and_the_sweep_agree():
    sc = copy.deepcopy(BASE)
    sc["training"]["batch_norm"] = "sync"
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)
    r = sweep({**sc, "parallel": {"global_batch": 256}}, [8, 16])
    flat = r.frame
    for _, row in flat.sort_values("step_time_s").head(3).iterrows():
        assert estimate(r.scenario(row)).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    local = sweep({**BASE, "parallel": {"global_batch": 256}}, [8, 16]).frame
    assert flat["step_time_s"].min() >= local["step_time_s"].min()


@pytest.mark.parametrize("model, training, message", [
    ("resnet50", {"batch_norm": "global"}, r"^training.batch_norm: unknown 'global'"),
    ("gpt2", {"batch_norm": "sync"}, r"^training.batch_norm: \"sync\" needs a model with batch-norm layers"),
    ("resnet50", {"batch_norm": "sync", "consistency": "local_sgd", "local_steps": 4},
     r"^training.batch_norm: \"sync\" .* needs synchronous consistency and no gossip"),
    ("resnet50", {"batch_norm": "sync", "sync": "gossip"}, r"^training.batch_norm: \"sync\" .* and no gossip"),
])
def test_bad_input_names_the_field(model, training, message):
    sc = copy.deepcopy(BASE)
    sc["model"] = model
    sc["training"].update(training)
    with pytest.raises(ValueError, match=message):
        estimate(sc)
