"""parallel.tensor_layers = "fc": Krizhevsky's "one weird trick" inside estimate and sweep (paper §6.4):
data-parallel convolutions over data x tensor devices, model-parallel fully connected layers over each
tensor group, the last convolutional activations gathered in the group (parallel.layerwise)."""
from __future__ import annotations

import copy

import pytest

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.comm.on_cluster import collective_on_cluster
from concurrency_model.parallel import memory
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.report.cnn_parallel import pcie_box, trick_frame
from concurrency_model.sweep import sweep

# Krizhevsky's machine as parallel.hybrid models it: a PCIe box (8 GB/s at 75%, 10 us a message) of M40s
PCIE = pcie_box()
ALPHA, BETA = 10e-6, 1 / (8e9 * 0.75)
ALEXNET_CONV_PARAMS = (64 * 3 * 11 * 11 + 64) + (192 * 64 * 5 * 5 + 192) + (384 * 192 * 9 + 384) \
    + (256 * 384 * 9 + 256) + (256 * 256 * 9 + 256)  # torchvision's five convolutions: 2,469,696


def run(d, t, layers="all", mb=128, gb=None, model="alexnet", **training):
    return estimate({"model": model, "cluster": PCIE,
                     "parallel": {"data": d, "tensor": t, "tensor_layers": layers, "microbatch_size": mb,
                                  "global_batch": gb or d * mb},
                     "training": {"dtype": "fp32", "optimizer": "momentum", "host_overhead_s": 0,
                                  "framework": "ideal", **training}})  # the paper's collectives, hand-derived


def test_krizhevsky_trend():
    # speedup over one GPU at 128 images: the hybrid (128 images per GPU through the convolutions) beats pure
    # data parallelism, which beats pure model parallelism; on 8 GPUs the hybrid is near Krizhevsky's 6.25x
    f = trick_frame().set_index("gpus")
    for P in (2, 4, 8):
        assert f.loc[P, "one weird trick"] > f.loc[P, "data parallel"] > f.loc[P, "model parallel"]
    assert f.loc[8, "one weird trick"] == pytest.approx(6.25, rel=0.15)
    assert f.loc[1].tolist() == [1.0, 1.0, 1.0]


def test_gradients_and_redistribution_hand_values():
    e = run(1, 8, "fc", mb=1024)
    # the convolutions' gradients over all 8 GPUs, one all-reduce as NCCL runs it on the box (comm.nccl); the fully
    # connected layers' eighths have no replica to meet
    n = ALEXNET_CONV_PARAMS * 4
    assert e.breakdown["data_parallel_comm_s"] == pytest.approx(
        collective_on_cluster("allreduce", n, 8, load_cluster(PCIE), 8)[1], rel=1e-9)
    # the paper's Rabenseifner (2 lg P alpha + 2 (P-1)/P n beta) is what an explicit algorithm gives
    assert collective_on_cluster("allreduce", n, 8, load_cluster(PCIE), 8, algorithm="rabenseifner")[1] == \
        pytest.approx(6 * ALPHA + 2 * 7 / 8 * n * BETA, rel=1e-9)
    # the gathered activations: fc1's 9,216 inputs of 1,024 images, all-gathered forward and their gradient
    # reduce-scattered backward, then fc2's and fc3's 4,096 inputs likewise (recursive doubling / halving:
    # lg P alpha + (P-1)/P n beta each)
    sizes = [1024 * 9216 * 4, 1024 * 4096 * 4, 1024 * 4096 * 4]
    box = load_cluster(PCIE)
    assert e.breakdown["tensor_parallel_comm_s"] == pytest.approx(
        sum(collective_on_cluster(op, x, 8, box, 8)[1] for x in sizes for op in ("allgather", "reduce_scatter")),
        rel=1e-9)  # as NCCL runs them (comm.nccl); the paper's recursive doubling / halving when named:
    assert sum(collective_on_cluster(op, x, 8, box, 8, algorithm="recursive_doubling")[1] for x in sizes
               for op in ("allgather", "reduce_scatter")) == pytest.approx(
        sum(2 * (3 * ALPHA + 7 / 8 * x * BETA) for x in sizes), rel=1e-9)


def test_memory_keeps_the_convolutions_whole():
    e = run(1, 8, "fc", mb=1024)
    fc = 61_100_840 - ALEXNET_CONV_PARAMS
    expect = sum(memory.model_state_bytes(n, "momentum", "fp32", tensor=t)["total"]
                 for n, t in ((ALEXNET_CONV_PARAMS, 1), (fc, 8)))
    assert e.memory["model_state_bytes"] == pytest.approx(float(expect), rel=1e-12)
    # each GPU stores its own 128 images' convolutional activations
    assert e.memory["activations_bytes"] < run(1, 8, "fc", mb=2048, gb=2048).memory["activations_bytes"]


def test_estimate_the_expression_and_the_sweep_agree():
    sc = {"model": "alexnet", "cluster": PCIE, "parallel": {"data": 2, "tensor": 4, "tensor_layers": "fc",
                                                            "microbatch_size": 256, "global_batch": 1024},
          "training": {"dtype": "fp32", "optimizer": "momentum", "host_overhead_s": 0}}
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)
    r = sweep({**sc, "parallel": {"tensor_layers": "fc", "global_batch": 1024}}, [8])
    split = r.frame[r.frame["tensor"] > 1]
    assert len(split) > 0 and (split["microbatch_size"] % split["tensor"] == 0).all()
    assert set(r.frame["pipeline"]) == {1} and set(r.frame["zero_stage"]) == {0}
    for _, row in split.sort_values("step_time_s").head(3).iterrows():
        s = r.scenario(row)
        assert s["parallel"]["tensor_layers"] == "fc"
        e = estimate(s)
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert e.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)


@pytest.mark.parametrize("change, message", [
    ({"parallel": {"tensor_layers": "conv"}}, r"^parallel.tensor_layers: unknown 'conv'; allowed: all, fc$"),
    ({"parallel": {"microbatch_size": 100, "global_batch": 100}},
     r"^parallel.microbatch_size: 100 is not divisible by tensor = 8"),
    ({"parallel": {"tensor": 4, "pipeline": 2}}, r"^parallel.tensor_layers: \"fc\" is modelled with .*; pipeline "),
    ({"training": {"zero_stage": 1}}, r"^parallel.tensor_layers: .*; training.zero_stage differs$"),
    ({"model": "gpt2", "parallel": {"tensor": 2, "microbatch_size": 2, "global_batch": 2}},
     r"^parallel.tensor_layers: \"fc\" needs convolutional layers followed by fully connected"),
])
def test_bad_input_names_the_field(change, message):
    sc = {"model": "alexnet", "cluster": PCIE,
          "parallel": {"data": 1, "tensor": 8, "tensor_layers": "fc", "microbatch_size": 1024, "global_batch": 1024},
          "training": {"dtype": "fp32"}}
    for k, v in change.items():
        sc[k] = {**sc[k], **v} if isinstance(v, dict) else v
    with pytest.raises(ValueError, match=message):
        estimate(copy.deepcopy(sc))
