"""Stored activations of mixture-of-experts transformer layers (Megatron-Core's layer: the routed copies, the GLU
experts, the model's own hidden and attention widths), derived by hand."""
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.frontends.hf import from_hf_config, load_hf_config
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel.memory import activation_bytes_per_device, moe_layer_values, \
    transformer_activation_bytes
from concurrency_model.training.estimate import estimate
from concurrency_model.parallel.runtime import kernel_policies
from concurrency_model.training.workload import transformer_shape, workload

# Qwen3-235B-A22B (its Hugging Face config): hidden 4096, 64 query heads and 4 key/value heads of 128, 128 experts, 8 a
# token, each 1536 wide, QK-norm
QWEN3_235B = (4096, 512, 128, 8, 1536, 0, True)


def test_qwen3_235b_layer_by_hand():
    # replicated: two norm inputs 2 x 2 x 4096, the two blocks' normed inputs 2 x 2 x 4096, two masks 2 x 4096, the
    # router's fp32 logits 4 x 128 = 40960 + 512; split: Q 2 x 8192, K and V 2 x 2 x 512, the output projection's
    # input 2 x 8192, QK-norm inputs 2 x 8192 + 2 x 512, and per routed copy fc1's input 2 x 4096 + gate and up
    # 2 x 2 x 1536 + the GLU's output 2 x 1536 = 17408, eight of them
    rep, split = moe_layer_values(8192, QWEN3_235B)
    assert rep == 40 * 1024 + 512
    assert split == 16384 + 2048 + 16384 + 17408 + 8 * 17408
    # Korthikanti's dense count at the attention width 8192 stores 34 x 8192 = 278,528 bytes a token: 1.2x this
    assert (rep + split) / (34 * 8192) == pytest.approx(232960 / 278528)


def test_eight_bit_inputs_by_hand():
    # Transformer Engine keeps the 8-bit copy of a linear's input: the attention's normed input 4096 bytes (not 8192)
    # and, per routed copy, fc1's input 4096 and fc2's input 1536 (not 8192 and 3072); gate and up stay 16-bit
    rep, split = moe_layer_values(8192, QWEN3_235B)
    rep8, split8 = moe_layer_values(8192, QWEN3_235B, eight_bit=True)
    assert rep - rep8 == 4096 and split - split8 == 8 * (4096 + 1536)


@pytest.mark.parametrize("framework, dtype, q8", [("megatron", "fp8", True), ("megatron", "mxfp8", True),
                                                  ("megatron", "bf16", False), ("fsdp2", "fp8", False)])
def test_eight_bit_inputs_follow_the_runtime_casts(framework, dtype, q8):
    # Transformer Engine's casts keep 8-bit inputs; torchao's float8 (fsdp2, torchtitan) keeps the 16-bit ones
    model = {"hf_config": "qwen3-30b-a3b", "seq_len": 1024}
    w = workload(model, load_cluster("dgx-h100"), dtype, "all", 0, None, 1.0, *kernel_policies(framework)[:2])
    shape = w.memory_shape(transformer_shape(w.graph(1)))
    # (..., moe, 8-bit inputs, recompute modules, multi-latent attention, dense widths, dropout, ...)
    assert shape[7] is q8 and shape[6] == transformer_shape(w.graph(1))["moe"]
    assert shape[8:12] == ((), False, None, False)
    dense = workload({"kind": "gpt", "layers": 2, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1024},
                     load_cluster("dgx-h100"), dtype, "all", 0, None, 1.0, *kernel_policies(framework)[:2])
    assert dense.memory_shape(None) is None
    assert dense.memory_shape(transformer_shape(dense.graph(1)))[7] is False  # a dense layer's count is 16-bit


def test_moe_layer_bytes_with_and_without_sequence_parallelism():
    s, b, t = 4096, 2, 4
    rep, split = moe_layer_values(8192, QWEN3_235B)
    assert transformer_activation_bytes(s, b, 8192, 64, t, True, "none", 3, True, QWEN3_235B) == \
        3 * s * b * (rep + split) // t
    assert transformer_activation_bytes(s, b, 8192, 64, t, False, "none", 3, True, QWEN3_235B) == \
        3 * s * b * (rep + split / t)
    # full recompute keeps the layer's input: hidden 4096 values, not the attention's 8192
    full = transformer_activation_bytes(s, b, 8192, 64, t, True, "full", 3, True, QWEN3_235B)
    assert full == 3 * 2 * s * b * 4096 / t
    # an unfused attention also stores its scores, their softmax and mask: Korthikanti's 5 a s a token; Megatron's
    # selective recompute drops them again
    unfused = transformer_activation_bytes(s, 1, 8192, 64, 1, False, "none", 1, False, QWEN3_235B)
    assert unfused - (rep + split) * s == 5 * 64 * s * s
    assert transformer_activation_bytes(s, 1, 8192, 64, 1, False, "selective", 1, False, QWEN3_235B) == \
        (rep + split) * s


@settings(max_examples=30, deadline=None)
@given(h=st.sampled_from([1024, 2048, 4096]), t=st.sampled_from([1, 2, 8]))
def test_dense_widths_give_korthikantis_attention_and_norm_terms(h, t):
    # with hidden = attention = key/value width and no experts, what remains is Korthikanti's Eq. 2 (fused attention:
    # 10 h + 24 h / t a token) less the MLP's fc1 and GELU outputs, 16 h / t: the replicated 10 h and the attention's
    # 8 h / t
    rep, split = moe_layer_values(h, (h, h, 0, 0, 0, 0, False))
    assert (rep, split) == (10 * h, 8 * h)
    dense = transformer_activation_bytes(512, 1, h, 8, t, False, "selective")
    assert dense - transformer_activation_bytes(512, 1, h, 8, t, False, "none", 1, True, (h, h, 0, 0, 0, 0, False)) \
        == pytest.approx(512 * 16 * h / t)


def test_output_terms_use_the_hidden_size():
    # one stage (first and last): the embedding dropout s b H / t, the final norm and output input 4 s b H / t and the
    # fp32 logits 4 s b V / t, with H = 4096 (the attention width 8192 would double the first two)
    s, t, V = 4096, 2, 151936
    layers = activation_bytes_per_device(s, 1, 8192, 64, 2, t, True, "full", vocab=V, moe=QWEN3_235B)
    assert layers == 2 * 2 * s * 4096 / t + s * 4096 / t + 4 * s * 4096 / t + 4 * s * V / t


def test_shapes_of_the_moe_presets():
    qwen = transformer_shape(from_hf_config(load_hf_config("qwen3-235b-a22b")[0], seq_len=4096))
    assert qwen["moe"] == QWEN3_235B and qwen["vocab"] == 151936 and qwen["h"] == 8192
    ds = transformer_shape(from_hf_config(load_hf_config("deepseek-v3")[0], seq_len=4096))
    # DeepSeek-V3: hidden 7168, 256 experts of 2048, 8 a token, one shared expert of 2048, vocabulary 129280
    assert ds["moe"][0] == 7168 and ds["moe"][2:6] == (256, 8, 2048, 2048) and ds["vocab"] == 129280
    assert transformer_shape(from_hf_config(load_hf_config("llama-3-8b")[0], seq_len=4096))["moe"] is None


def test_qwen3_235b_h100_recipe_fits_without_recompute():
    # Megatron-Bridge @ 067f987d perf_recipes/qwen/h100/qwen3_moe.py runs Qwen3-235B-A22B on 256 H100 with TP 2, PP 8,
    # VP 4, sequence parallelism, microbatch 1 and recompute_granularity None; the 26.04.01 table's layout has EP 16
    sc = {"model": {"hf_config": "qwen3-235b-a22b", "seq_len": 4096, "fused_attention": "cudnn"},
          "cluster": "dgx-h100",
          "parallel": {"data": 16, "tensor": 2, "pipeline": 8, "interleave": 4, "schedule": "interleaved",
                       "sequence_parallel": True, "microbatch_size": 1, "global_batch": 8192, "expert": 16},
          "training": {"dtype": "fp8", "recompute": "none", "optimizer": "adam", "zero_stage": 1,
                       "framework": "megatron"}}
    e = estimate(sc)
    assert e.memory_bytes_per_device < 80e9
