"""Per-layer device time of whole graphs (timing.graph)."""
import pytest

from concurrency_model import get_model
from concurrency_model.symbols import N
from concurrency_model.timing import conv_coeffs, gemm_coeffs
from concurrency_model.frontends.hf import from_hf_config
from concurrency_model.timing.graph import cast_fusion, layer_parts, layer_times, step_time
from concurrency_model.hardware.devices import load_device

V100 = load_device("v100-sxm2-32gb")


def test_layers_map_to_their_kernel_models():
    g = get_model("resnet50", batch=8)
    t = layer_times(g, V100, "fp16").set_index("name")
    # the first convolution: 8 x 3 x 224 x 224, 64 filters 7x7, stride 2, pad 3
    c = conv_coeffs(8, 3, 64, 224, 224, 7, 7, 2, 3, 1, 1, "forward", V100, "fp16")
    assert t.loc["conv1.conv2d", "forward_s"] == pytest.approx(float(c.seconds(V100)[0]))
    assert t.loc["conv1.conv2d", "grad_input_s"] == 0.0  # the image needs no gradient
    # the classifier: 8 rows x 1000 outputs x 2048 inputs, then ∇x (8 x 2048 x 1000), ∇w (2048 x 1000 x 8)
    for col, shape in (("forward_s", (8, 1000, 2048)), ("grad_input_s", (8, 2048, 1000)),
                       ("grad_weight_s", (2048, 1000, 8))):
        assert t.loc["fc", col] == pytest.approx(float(gemm_coeffs(*shape, V100, "fp16").seconds(V100)[0]))
    assert t.loc["flatten", ["forward_s", "grad_input_s", "grad_weight_s"]].sum() == 0.0


def test_step_time_adds_up_and_grows_with_batch():
    small, big = (step_time(get_model("resnet50", batch=b), V100, "fp16") for b in (8, 32))
    for s in (small, big):
        assert s["step_s"] == pytest.approx(s["forward_s"] + s["backward_s"] + s["update_s"])
        assert s["backward_s"] > s["forward_s"]  # ∇x and ∇w: about twice the forward work
    assert big["forward_s"] > small["forward_s"] and big["update_s"] == pytest.approx(small["update_s"])
    per_image_small, per_image_big = small["step_s"] / 8, big["step_s"] / 32
    assert per_image_big < per_image_small  # larger batches use the device better


def test_transformer_and_recurrent_layers():
    t = layer_times(get_model("gpt2", batch=2), "a100-sxm4-80gb", "bf16")
    att = t[t["op"] == "attention"]
    assert len(att) == 12 and (att["grad_input_s"] > att["forward_s"]).all()
    r = layer_times(get_model("lstm-lm", batch=4), V100, "fp32")
    assert r.loc[r["op"] == "lstm", "forward_s"].iloc[0] > 0


def test_symbolic_batch_is_refused():
    with pytest.raises(ValueError, match="batch"):
        layer_times(get_model("lenet5", batch=N), V100)
    with pytest.raises(ValueError, match="optimizer"):
        step_time(get_model("lenet5"), V100, optimizer="lion")


def test_megatron_core_cast_fusion_on_llama_block():
    # Megatron-Core's TE layer (gpt_layer_specs @ 00611e6e): qkv and fc1 are LayerNormLinear (the norm writes the 8-bit
    # input), proj and fc2 plain TE Linear behind Megatron's attention output and activation; no output gradient fused
    g = from_hf_config("llama-2-7b")
    f = cast_fusion(g, "te-mcore")
    assert [f[f"layers.3.{k}"] for k in ("qkv", "proj", "mlp.gate_proj", "mlp.up_proj", "mlp.down_proj")] == \
        [(True, False), (False, False), (True, False), (True, False), (False, False)]
    assert cast_fusion(g)["layers.3.mlp.down_proj"] == (True, False)  # TE's LayerNormMLP: activation + cast fused


def test_megatron_core_casts_hand_bytes():
    # Llama 2 7B, one 4,096-token microbatch: down_proj's input cast (read 2, write 1 bytes a value) forward and its
    # transposed copy (1) with the weight gradient; gate and up each cast their output gradient (read 2, write 1 + 1)
    dev = load_device("h100-sxm5-80gb")
    g = from_hf_config("llama-2-7b", batch=1)  # seq 4096
    rows = {r["name"]: r for r in layer_parts(g, dev, "fp8", fp8_recipe="te-mcore")}
    te = {r["name"]: r for r in layer_parts(g, dev, "fp8", fp8_recipe="te")}
    bw = 3.35e12 * 0.8

    def mem(r, p):
        return float((r[p].memory * r[p].count).sum())

    x = 4096 * 11008
    assert mem(rows["layers.0.mlp.down_proj"], "forward") - mem(te["layers.0.mlp.down_proj"], "forward") == \
        pytest.approx(3 * x / bw, rel=1e-9)
    assert mem(rows["layers.0.mlp.up_proj"], "grad_weight") - mem(te["layers.0.mlp.up_proj"], "grad_weight") == \
        pytest.approx(4 * x / bw, rel=1e-9)


def test_eight_bit_rate_scales_only_the_eight_bit_gemms():
    dev = load_device("h100-sxm5-80gb")
    g = get_model({"kind": "gpt", "layers": 1, "hidden": 1024, "heads": 8, "seq_len": 512, "vocab": 1000,
                   "fused_attention": True}, batch=2)
    a = {r["name"]: r for r in layer_parts(g, dev, "fp8")}
    b = {r["name"]: r for r in layer_parts(g, dev, "fp8", rate_8bit=0.5)}
    for name, r in a.items():
        for p in ("forward", "grad_input", "grad_weight"):
            ka, kb = r[p], b[name][p]
            if r["op"] == "linear" and name != "lm_head":  # the output layer stays in 16 bits
                assert kb.compute[0] == pytest.approx(2 * ka.compute[0])  # the GEMM row first, then the casts
                assert (kb.compute[1:] == ka.compute[1:]).all() and (kb.memory == ka.memory).all()
            else:
                assert (kb.compute == ka.compute).all()
