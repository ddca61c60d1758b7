"""Inference of models without a KV cache (forward_inference): one forward pass of a batch, through
``infer`` and the CLI."""
import json

import pytest

from concurrency_model.cli import main
from concurrency_model.serving.forward_pass import predict_forward
from concurrency_model.serving.decoder import infer
from concurrency_model.models import get_model
from concurrency_model.timing.graph import layer_times

DNN = {"kind": "mlp", "inputs": 429, "hidden": 2048, "layers": 7, "outputs": 9304}


def run(model, parallel=None, **inference):
    return infer({"model": model, "cluster": "dgx-a100", "parallel": parallel or {},
                  "inference": {"batch": 64, "dtype": "fp16", **inference}})


def test_latency_is_the_forward_layer_times():
    r = run("resnet50")
    times = layer_times(get_model("resnet50", batch=64, value_bytes=2), "a100-sxm4-80gb", "fp16")
    assert r.latency_s == pytest.approx(times["forward_s"].sum(), rel=1e-12)
    assert r.samples_per_s == pytest.approx(64 / r.latency_s)
    assert r.bands["latency_p10_s"] < r.latency_s < r.bands["latency_p90_s"]
    # weights in fp16 and the largest operator's inputs and output, nothing kept for a backward pass
    assert r.memory["model_state_bytes"] == 2 * 25_557_032
    train_like = 64 * sum(n.numel for n in get_model("resnet50").layers()) * 2
    assert r.memory["activations_bytes"] < train_like / 10


def test_bert_sequence_length_tensor_parallelism_and_dropout():
    short, long = run("bert-large", prompt_len=128), run("bert-large", prompt_len=512)
    assert long.latency_s > 3.5 * short.latency_s  # 4x the tokens, and attention grows with the square
    assert short.inference["prompt_len"] == 128
    tp = run("bert-large", {"tensor": 2}, prompt_len=128)
    assert tp.breakdown["tensor_comm_s"] > 0 and tp.breakdown["compute_s"] < short.breakdown["compute_s"]
    assert tp.memory["model_state_bytes"] == pytest.approx(short.memory["model_state_bytes"] / 2)
    # dropout is the identity in eval mode: the forward pass without its kernels
    g = get_model("bert-large", batch=64, value_bytes=2, seq_len=128)
    t = layer_times(g, "a100-sxm4-80gb", "fp16")
    assert short.latency_s == pytest.approx(t.loc[t["op"] != "dropout", "forward_s"].sum(), rel=1e-12)


def test_quantized_weights_of_a_memory_bound_network():
    # batch 1: every layer is a GEMV that reads its weights (five of 8192 x 8192: 671 MB in fp16, 0.41 ms at
    # 80% of 2,039 GB/s, beside about 60 us of launches); int8 weights about halve it
    wide = {"kind": "mlp", "inputs": 8192, "hidden": 8192, "layers": 4, "outputs": 8192}
    fp16, int8 = run(wide, batch=1), run(wide, batch=1, weight_dtype="int8")
    assert 0.5 < int8.latency_s / fp16.latency_s < 0.6
    assert fp16.memory["model_state_bytes"] - int8.memory["model_state_bytes"] == 5 * 8192 * 8192
    assert predict_forward(wide, "dgx-a100", 1, "fp16", weight_dtype="int8").latency_s == int8.latency_s
    # the speech DNN (90 MB of weights) is launch-bound at batch 1: quantization helps less
    small16, small8 = run(DNN, batch=1), run(DNN, batch=1, weight_dtype="int8")
    assert int8.latency_s / fp16.latency_s < small8.latency_s / small16.latency_s < 1


@pytest.mark.parametrize("model, parallel, inference, message", [
    ("resnet50", {}, {"decode_len": 8}, "inference.decode_len: the model has no causal attention"),
    ("resnet50", {}, {"prompt_len": 128}, "inference.prompt_len: an image model"),
    ("resnet50", {"pipeline": 2}, {}, "parallel.pipeline: inference of a model without a KV cache"),
    ("resnet50", {"tensor": 2}, {}, "parallel.tensor: 2 > 1 is modelled for transformer encoders"),
    ("bert-large", {"tensor": 3}, {}, "parallel.tensor: 3 does not divide"),
    ("resnet50", {}, {"weight_dtype": "int2"}, "inference.weight_dtype: unknown 'int2'"),
    ("resnet50", {}, {"batch": 0}, "inference.batch: must be a positive integer"),
    ("bert-large", {}, {"prompt_len": 4096}, "inference.prompt_len: 4096 exceeds the 512 learned positions"),
    # a decoder's serving options are refused, not ignored
    ("resnet50", {}, {"batching": "continuous"}, "inference.batching: for a causal decoder's generated tokens"),
    ("bert-large", {}, {"price_per_gpu_hour": 2.0}, "inference.price_per_gpu_hour: for a causal decoder"),
    ("vit_b_16", {}, {"output_lengths": "uniform"}, "inference.output_lengths: for a causal decoder"),
])
def test_bad_input_names_the_field(model, parallel, inference, message):
    with pytest.raises(ValueError, match="^" + message):
        run(model, parallel, **inference)


def test_cli(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": {"name": "resnet50", "image_size": 128}, "cluster": "dgx-a100",
                             "inference": {"batch": 32, "dtype": "fp16"}}))
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["kind"] == "forward" and out["samples_per_s"] == pytest.approx(32 / out["latency_s"])
    assert out["latency_p10_s"] < out["latency_s"] < out["latency_p90_s"]
    assert main(["infer", "--scenario", str(f)]) == 0
    assert "samples/s" in capsys.readouterr().out


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(b=st.integers(1, 96), extra=st.integers(1, 32))
def test_a_larger_batch_never_takes_less_time(b, extra):
    # every kernel's time is the cheapest candidate's, and no candidate gets faster with more rows
    small = predict_forward({"name": "resnet50", "image_size": 64}, "dgx-a100", b, "fp16")
    large = predict_forward({"name": "resnet50", "image_size": 64}, "dgx-a100", b + extra, "fp16")
    assert large.latency_s >= small.latency_s * (1 - 1e-12)


def test_host_overhead_of_an_eager_framework():
    base = run("resnet50", batch=1)
    slow = run("resnet50", batch=1, host_overhead_s=1e-3)
    kernels = round(slow.latency_s / 1e-3)
    assert slow.latency_s == pytest.approx(1e-3 * kernels)
    eager = run("resnet50", batch=1, host_overhead_s=60e-6)
    assert eager.latency_s == pytest.approx(max(base.latency_s, 60e-6 * kernels))
    assert eager.breakdown["host_wait_s"] == pytest.approx(eager.latency_s - base.latency_s)
    # a large batch keeps the GPU busier than the host
    assert run("resnet50", batch=256, host_overhead_s=60e-6).breakdown["host_wait_s"] == 0


def test_repr_is_one_line_of_the_headline_figures():
    r = infer({"model": "resnet50", "inference": {"batch": 8}})
    assert repr(r) == (f"ForwardInference(batch 8: {r.latency_s * 1e3:,.4g} ms a pass, {r.samples_per_s:,.4g} "
                       f"samples/s; tensor 1; {r.memory_bytes_per_device / 1e9:,.3g} GB per device)")
