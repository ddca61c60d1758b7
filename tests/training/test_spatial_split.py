"""parallel.context on a CNN: the spatial (domain) split of every feature map by rows (paper §6.2,
paper-models §4.2 [D]; parallel.spatial): halo exchanges around windowed layers, batch-norm statistics
all-reduced over the group, a gather or reduction where the rows end."""
from __future__ import annotations

import copy

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.comm.on_cluster import collective_on_cluster
from concurrency_model.training.workload import workload
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.sweep import sweep
from concurrency_model.timing import conv_time

BASE = {"model": "vgg16", "cluster": "dgx-a100",
        "parallel": {"data": 1, "context": 2, "microbatch_size": 8, "global_batch": 8},
        "training": {"dtype": "fp16", "optimizer": "sgd", "host_overhead_s": 0}}

# (input channels, input width) of VGG16's 2nd to 13th convolutions at 224x224; the first reads the image
VGG16_HALO_INPUTS = [(64, 224), (64, 112), (128, 112), (128, 56), (256, 56), (256, 56), (256, 28), (512, 28),
                     (512, 28), (512, 14), (512, 14), (512, 14)]


def nccl2(op, nbytes):
    """Seconds of ``op`` on two GPUs of a dgx-a100 node as NCCL runs it (comm.nccl)."""
    return collective_on_cluster(op, nbytes, 2, "dgx-a100")[1]


def run(model="vgg16", **parallel):
    sc = copy.deepcopy(BASE)
    sc["model"] = model
    sc["parallel"].update(parallel)
    return estimate(sc)


def test_halo_exchange_hand_value_on_two_gpus():
    # two devices: each 3x3 convolution (pad 1) exchanges one row of b x C x W values with its neighbour,
    # alpha + n beta; the 2x2 poolings need no halo; the flatten all-gathers b x 512 x 7 x 7 (as NCCL runs
    # it: comm.nccl)
    intra = load_cluster("dgx-a100").intra
    alpha, beta = intra.latency, 1 / (intra.bw * intra.efficiency)
    halos = sum(alpha + 8 * c * w * 2 * beta for c, w in VGG16_HALO_INPUTS)
    gather = nccl2("allgather", 8 * 512 * 7 * 7 * 2)
    e = run()
    assert e.breakdown["context_parallel_comm_s"] == pytest.approx(2 * halos + gather, rel=1e-9)
    # a full recompute exchanges the forward halos again (and gathers again)
    rec = copy.deepcopy(BASE)
    rec["training"]["recompute"] = "full"
    assert estimate(rec).breakdown["context_parallel_comm_s"] == pytest.approx(3 * halos + 2 * gather, rel=1e-9)


def test_compute_is_the_device_rows():
    w = workload("vgg16", load_cluster("dgx-a100"), "fp16")
    rows = {r["name"]: r for r in w.layers(8, 1, False, 2)}
    # the second convolution: 112 of the 224 output rows; its 112 input rows with a one-row halo on each
    # side, which takes the padding's place
    f = rows["features.conv1"]["f"].total()
    assert f == pytest.approx(conv_time(8, 64, 64, 112, 224, 3, pad=1, device="a100-sxm4-80gb", dtype="fp16").time_s,
                              rel=1e-12)
    whole = {r["name"]: r for r in w.layers(8, 1, False, 1)}
    assert f < 0.6 * whole["features.conv1"]["f_s"]
    # layers after the flatten run whole on each device; an element-wise layer does half the work, with
    # the same kernel launch
    assert rows["classifier.fc1"]["f_s"] == whole["classifier.fc1"]["f_s"]
    launch = float(w.dev.launch_overhead)
    assert rows["relu"]["f_s"] == pytest.approx((whole["relu"]["f_s"] - launch) / 2 + launch, rel=1e-12)


def test_batch_norm_statistics_and_global_pool():
    w = workload("resnet50", load_cluster("dgx-a100"), "fp16")
    intra = load_cluster("dgx-a100").intra
    alpha, beta = intra.latency, 1 / (intra.bw * intra.efficiency)
    rows = w.layers(8, 1, False, 2)
    bn = [r for r in rows if r["kind"] == "batch_norm"]
    assert len(bn) == 53
    # two ranks: a small all-reduce in each pass, as NCCL runs it (comm.nccl)
    g = w.graph(8)
    for r in bn[:3]:
        c = g.nodes[r["name"]].shape[0]
        one = nccl2("allreduce", 2 * c * 4)
        assert (sum(r["halo_f"]), sum(r["halo_b"])) == (pytest.approx(one, rel=1e-9), pytest.approx(one, rel=1e-9))
    pool = next(r for r in rows if r["name"] == "avgpool")
    assert sum(pool["halo_f"]) == pytest.approx(nccl2("allreduce", 8 * 2048 * 2), rel=1e-9) and \
        pool["halo_b"] == (0, 0, 0)


def test_rows_and_channels_together():
    # tensor 2 x context 2 on one node: each convolution gathers its input's channels for the device's
    # rows only (half the map), the halos and the flatten gather carry half the channels
    intra = load_cluster("dgx-a100").intra
    alpha, beta = intra.latency, 1 / (intra.bw * intra.efficiency)
    e = run(tensor=2)
    maps = [c * w * w // 2 for c, w in VGG16_HALO_INPUTS]  # each 2nd-13th convolution's input, half its rows
    gathered = maps + [512 * 7 * 7, 4096, 4096]  # the fully connected layers' inputs are whole rows
    assert e.breakdown["tensor_parallel_comm_s"] == pytest.approx(
        sum(nccl2("allgather", 8 * x * 2) + nccl2("reduce_scatter", 8 * x * 2) for x in gathered), rel=1e-9)
    halos = sum(alpha + 8 * c * w * 2 / 2 * beta for c, w in VGG16_HALO_INPUTS)
    gather = nccl2("allgather", 8 * 512 * 7 * 7 * 2 / 2)
    assert e.breakdown["context_parallel_comm_s"] == pytest.approx(2 * halos + gather, rel=1e-9)
    # and the device holds a quarter of the activations other than the gathered inputs
    assert e.memory["activations_bytes"] < run().memory["activations_bytes"]


def test_memory_and_gradients():
    one, two = run(context=1, data=2, global_batch=16), run()
    # the same samples per device, half the rows: activations shrink, the model state does not
    assert two.memory["model_state_bytes"] == one.memory["model_state_bytes"]
    assert two.memory["activations_bytes"] == pytest.approx(one.memory["activations_bytes"] / 2, rel=1e-12)
    # both all-reduce the whole gradient over two ranks
    assert two.breakdown["data_parallel_comm_s"] == pytest.approx(one.breakdown["data_parallel_comm_s"], rel=1e-9)


def test_the_output_names_the_split():
    assert run().to_dict()["parallel"]["context_split"] == "rows"
    assert "context_split" not in run(context=1, data=2, global_batch=16).to_dict()["parallel"]
    gpt = estimate({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"context": 2, "microbatch_size": 1,
                                                                          "global_batch": 1}})
    assert gpt.to_dict()["parallel"]["context_split"] == "sequence"


def test_estimate_the_expression_and_the_sweep_agree():
    sc = copy.deepcopy(BASE)
    sc["model"] = "resnet50"
    sc["parallel"].update(data=2, global_batch=32, microbatch_size=8)
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)
    r = sweep({**sc, "parallel": {"global_batch": 32}}, [8])
    split = r.frame[r.frame["context"] > 1]
    assert set(split["context"]) == {2, 4}  # ResNet-50's last maps have 7 rows: 8 devices are refused
    assert r.rejected["context: more devices than a feature map has rows"] > 0
    for _, row in split.sort_values("step_time_s").head(3).iterrows():
        e = estimate(r.scenario(row))
        assert e.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert e.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)


@pytest.mark.parametrize("model, parallel, message", [
    ("resnet50", {"context": 8, "global_batch": 8}, r"^parallel.context: 8 devices exceed the 7 rows of "),
    ("resnet50", {"context": 2, "context_algorithm": "ulysses"}, r"^parallel.context_algorithm: 'ulysses' is for"),
    ("alexnet", {"context": 2, "tensor": 2, "tensor_layers": "fc"},
     r"^parallel.tensor_layers: \"fc\" is modelled with pipeline, context and expert 1, .*; context differs$"),
    ("lstm-lm", {"context": 2}, r"^parallel.context: 2 > 1 splits a transformer's sequences or a CNN's feature "
                                r"maps; this model has neither$"),
])
def test_bad_input_names_the_field(model, parallel, message):
    with pytest.raises(ValueError, match=message):
        run(model, **parallel)


def _cnn(batch, c1, c2, size, k, stride):
    from concurrency_model.models.builder import Builder
    b = Builder("random", batch, 2)
    x = b.input((3, size, size))
    x = b.relu(b.bn(b.conv(x, c1, k, stride, k // 2)))
    x = b.maxpool(x, 2)
    x = b.relu(b.conv(x, c2, 3, 1, 1))
    b.linear(b.flatten(x), 8 * c1)
    return b.graph


@settings(max_examples=25, deadline=None)
@given(batch=st.sampled_from([1, 4, 16]), c1=st.sampled_from([8, 16, 48, 64]), c2=st.sampled_from([16, 32, 96]),
       size=st.sampled_from([16, 32, 56]), k=st.sampled_from([1, 3, 5]), stride=st.sampled_from([1, 2]),
       degree=st.sampled_from([1, 2, 4]))
def test_no_device_does_less_than_its_share(batch, c1, c2, size, k, stride, degree):
    # split by channels or by rows over `degree` devices, a device's kernels take at least 1/degree of the
    # serial time of each pass (quantisation only rounds up), and degree 1 is the serial timing itself
    from concurrency_model.parallel.spatial import spatial_rows
    from concurrency_model.timing.graph import layer_parts
    g = _cnn(batch, c1, c2, size, k, stride)
    dev = "a100-sxm4-80gb"
    serial = layer_parts(g, dev, "fp16")
    by_channels = layer_parts(g, dev, "fp16", tensor=degree)
    by_rows = layer_parts(g, dev, "fp16", spatial=spatial_rows(g, degree)[0] if degree > 1 else None)
    for p in ("forward", "grad_input", "grad_weight"):
        whole = sum(r[p].total() for r in serial)
        for split in (by_channels, by_rows):
            mine = sum(r[p].total() for r in split)
            assert mine >= whole / degree * (1 - 1e-9)
            if degree == 1:
                assert mine == pytest.approx(whole, rel=1e-12)
