"""parallel.tensor on a network without transformer blocks: the paper's model parallelism (§6.2), every
convolution and fully connected layer split by output channels over the tensor group (paper-models §4.2
[D]: an allgather of the input forward, a reduce-scatter of the partial ∇x backward; channel-local
layers on 1 / t of the channels; grouped convolutions by whole groups)."""
from __future__ import annotations

import copy

import pytest

from concurrency_model import estimate, get_model
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.comm.on_cluster import collective_on_cluster
from concurrency_model.parallel import memory
from concurrency_model.training.workload import workload
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.sweep import sweep
from concurrency_model.timing import conv_time
from concurrency_model.timing.graph import layer_times

BASE = {"model": "vgg16", "cluster": "dgx-a100",
        "parallel": {"data": 1, "tensor": 2, "microbatch_size": 16, "global_batch": 16},
        "training": {"dtype": "fp16", "optimizer": "sgd", "host_overhead_s": 0}}

# VGG16's gathered inputs at 224x224 (per sample): its 2nd ... 13th convolution, then fc1, fc2, fc3. The first reads
# the image, which every device holds: nothing to gather, no ∇x.
VGG16_GATHERED = [64 * 224 * 224, 64 * 112 * 112, 128 * 112 * 112, 128 * 56 * 56, 256 * 56 * 56, 256 * 56 * 56,
                  256 * 28 * 28, 512 * 28 * 28, 512 * 28 * 28, 512 * 14 * 14, 512 * 14 * 14, 512 * 14 * 14,
                  512 * 7 * 7, 4096, 4096]


def run(**parallel):
    sc = copy.deepcopy(BASE)
    sc["parallel"].update(parallel)
    return estimate(sc)


def test_communication_hand_value_on_two_gpus():
    # two ranks on NVSwitch: an allgather forward and a reduce-scatter backward of n bytes each, as NCCL runs
    # them (comm.nccl)
    both = sum(collective_on_cluster(op, 16 * x * 2, 2, "dgx-a100")[1] for x in VGG16_GATHERED
               for op in ("allgather", "reduce_scatter"))
    e = run()
    assert e.breakdown["tensor_parallel_comm_s"] == pytest.approx(both, rel=1e-9)  # forward + backward
    assert run(tensor=1, data=2, global_batch=32).breakdown["tensor_parallel_comm_s"] == 0.0


def test_compute_is_the_device_share():
    g = get_model("vgg16", batch=16)
    whole, half = layer_times(g, "a100-sxm4-80gb", "fp16"), layer_times(g, "a100-sxm4-80gb", "fp16", tensor=2)
    # the second convolution (64 -> 64 channels at 224x224, 3x3, pad 1) computes 32 filters from the whole input
    row = half[half["name"] == "features.conv1"].iloc[0]
    assert row["forward_s"] == pytest.approx(conv_time(16, 64, 32, 224, 224, 3, pad=1, device="a100-sxm4-80gb",
                                                       dtype="fp16").time_s, rel=1e-12)
    # channel-local layers do half the element-wise work; every pass gets faster, none below half
    relu = whole["op"] == "relu"
    assert half.loc[relu, "forward_s"].sum() < whole.loc[relu, "forward_s"].sum()
    for p in ("forward_s", "grad_input_s", "grad_weight_s"):
        assert whole[p].sum() / 2 <= half[p].sum() * (1 + 1e-12) < whole[p].sum()


def test_memory_splits_all_but_the_gathered_inputs():
    g = get_model("alexnet", batch=8)
    nodes = g.layers()
    first = nodes[0].name
    expect = sum(float(n.cost.forward.act_bytes) * (1 if n.kind in ("conv2d", "linear") or n.name == first else 0.25)
                 for n in nodes)
    assert float(memory.graph_activation_bytes(g, "none", 4)) == pytest.approx(expect, rel=1e-12)
    assert memory.graph_activation_bytes(g, "none", 1) == memory.graph_activation_bytes(g)
    full = float(memory.graph_activation_bytes(g, "full", 4))
    assert full <= float(memory.graph_activation_bytes(g, "full"))
    # the model state divides by the tensor degree (every weight is split)
    assert run().memory["model_state_bytes"] == pytest.approx(
        run(tensor=1).memory["model_state_bytes"] / 2, rel=1e-12)


def test_pipeline_boundary_and_batch_norm_share():
    w = workload("resnet50", load_cluster("dgx-a100"), "fp16")
    one, two = w.p2p(8, 1, False, "none", 2, 1), w.p2p(8, 2, False, "none", 2, 1)
    assert two[1] == pytest.approx(one[1] / 2, rel=1e-12)  # each tensor rank sends its half of the channels
    assert sum(w.stage(8, 2, False, "none", 1)["bn_channels"]) == 26_560 // 2


def test_grouped_convolutions_split_by_groups_without_communication():
    w = workload("mobilenet_v2", load_cluster("dgx-a100"), "fp16")
    rows = w.layers(8, 2, False)
    g = w.graph(8)
    for r in rows:
        n = g.nodes[r["name"]]
        if n.kind == "conv2d" and n.attrs["groups"] > 1:
            assert r["tp_f"] == (0.0, 0.0, 0.0) and r["tp_b"] == (0.0, 0.0, 0.0)
    assert sum(r["tp_f_s"] > 0 for r in rows) == sum(
        1 for n in g.layers() if n.kind == "linear" or (n.kind == "conv2d" and n.attrs["groups"] == 1)) - 1


def test_estimate_the_expression_and_the_sweep_agree():
    sc = copy.deepcopy(BASE)
    sc["model"] = "resnet50"
    sc["parallel"].update(data=2, global_batch=64)
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)
    r = sweep({**sc, "parallel": {"global_batch": 64}}, [8])
    split = r.frame[r.frame["tensor"] > 1]
    assert len(split) > 0
    for _, row in split.sort_values("step_time_s").head(3).iterrows():
        e = estimate(r.scenario(row))
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert e.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)


def test_convolutions_prefer_data_parallelism():
    # the paper's §6.4 rationale: convolutions hold the compute and little weight, so on 8 GPUs the pure
    # data-parallel split beats every channel split of VGG16, and the channel split saves memory
    steps = {t: run(data=8 // t, tensor=t, global_batch=128) for t in (1, 2, 4, 8)}
    times = [steps[t].step_time_s for t in (1, 2, 4, 8)]
    assert times == sorted(times)
    mems = [steps[t].memory_bytes_per_device for t in (1, 2, 4, 8)]
    assert mems == sorted(mems, reverse=True)


@pytest.mark.parametrize("model, tensor, message", [
    ("lenet5", 4, r"^parallel.tensor: 4 does not divide c1's 6 output channels$"),
    ("lstm-lm", 2, r"^parallel.tensor: 2 > 1 splits convolutions and fully connected layers by channels; "
                   r"embedding \(embedding\) mixes channels"),
    ("mobilenet_v2", 64, r"^parallel.tensor: 64 does not divide"),
])
def test_bad_input_names_the_field(model, tensor, message):
    with pytest.raises(ValueError, match=message):
        workload(model, load_cluster("dgx-a100"), "fp16").check_tensor(tensor)
