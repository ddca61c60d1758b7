"""Hugging Face config.json import: published parameter counts, the zoo's numbers, top-k MoE work, and
that the graphs work everywhere a model is accepted (get_model, scenarios, the CLI).

Hand counts of the published parameter numbers (h hidden, f MLP width, V vocabulary, L layers):

* GPT-2 (12 x 768, V 50257, 1024 positions, tied): per layer 4h^2+4h (attention) + 8h^2+5h (MLP) +
  4h (2 LN) = 7,087,872; x12 = 85,054,464; + wte 38,597,376 + wpe 786,432 + ln_f 1,536 = 124,439,808.
* Llama-2-7B (h 4096, f 11008, V 32000, L 32, untied, no biases): per layer 4h^2 = 67,108,864 +
  3hf = 135,266,304 + 2h = 8,192 -> 202,383,360; x32 = 6,476,267,520; + embed and lm_head 2 x 131,072,000
  + final norm 4,096 = 6,738,415,616.
* Mistral-7B (as Llama with f 14336 and 8 KV heads of 128): attention 2h^2 + 2 x h x 1024 = 41,943,040,
  MLP 3hf = 176,160,768, norms 8,192 -> 218,112,000; x32 = 6,979,584,000; + 262,144,000 + 4,096 =
  7,241,732,096.
* Mixtral-8x7B (Mistral with 8 experts): attention 41,943,040 + experts 8 x 176,160,768 = 1,409,286,144
  + router h x 8 = 32,768 + norms 8,192 -> 1,451,270,144; x32 = 46,440,644,608; + 262,148,096 =
  46,702,792,704.
* bert-base (BertModel with pooler): per layer 4h^2+4h + 8h^2+5h + 4h = 7,087,872; x12 = 85,054,464;
  embeddings (30522 + 512 + 2) x 768 = 23,835,648 + LN 1,536; pooler h^2+h = 590,592 -> 109,482,240.
* GPT-NeoX-20B (h 6144, f 24576, V 50432, L 44, biases, untied embed_out): qkv 3h^2+3h = 113,264,640,
  dense h^2+h = 37,754,880, MLP 2hf+f+h = 302,020,608, 2 LN 24,576 -> 453,064,704; x44 =
  19,934,846,976; + 2 x 309,854,208 + final LN 12,288 = 20,554,567,680.
* Llama-2-13B (h 5120, f 13824, V 32000, L 40, 40 KV heads): 4h^2 = 104,857,600 + 3hf = 212,336,640 + 2h
  = 10,240 -> 317,204,480; x40 = 12,688,179,200; + 2 x 163,840,000 + 5,120 = 13,015,864,320 (Meta: 13B).
* Llama-2-70B and Llama-3-70B (h 8192, f 28672, L 80, 8 KV heads of 128): attention 2h^2 + 2 x h x 1024 =
  150,994,944, MLP 704,643,072, norms 16,384 -> 855,654,400; x80 = 68,452,352,000; + 2 x V h + 8,192:
  V 32000 -> 68,976,648,192 (Meta: 69B / 70B), V 128256 -> 70,553,706,496 (Meta: 70.6B).
* Llama-3-8B (as Mistral-7B's layers, 218,112,000 x 32 = 6,979,584,000; V 128256): + 2 x 525,336,576 +
  4,096 = 8,030,261,248 (Meta: 8.03B).
* Llama-3.1-405B (h 16384, f 53248, L 126, 8 KV heads of 128, V 128256): attention 2h^2 + 2 x h x 1024 =
  570,425,344, MLP 3hf = 2,617,245,696, norms 32,768 -> 3,187,703,808; x126 = 401,650,679,808;
  + 2 x 2,101,346,304 + 16,384 = 405,853,388,800 (Meta: 405B).
* The mixtures of experts (Qwen3 MoE, GPT-OSS, DeepSeek-V3): tests/training/test_moe_models.py derives them.
"""
import json
import sys

import pytest

from concurrency_model import from_hf_config, get_model
from concurrency_model.cli import main
from concurrency_model.frontends.hf import preset_names
from concurrency_model.training.estimate import estimate
from concurrency_model.symbols import N

PUBLISHED = {
    "gpt2": 124_439_808,
    "llama-2-7b": 6_738_415_616,
    "mistral-7b": 7_241_732_096,
    "mixtral-8x7b": 46_702_792_704,
    "bert-base-uncased": 109_482_240,
    "gpt-neox-20b": 20_554_567_680,
    "llama-2-13b": 13_015_864_320,
    "llama-2-70b": 68_976_648_192,
    "llama-3-8b": 8_030_261_248,
    "llama-3-70b": 70_553_706_496,
    "llama-3.1-405b": 405_853_388_800,
    # Llama 3.1 8B / 70B: the Llama 3 shapes (torchtitan's llama3_configs "8B" / "70B" at 9dec370 build both
    # versions from the same dim, layers, heads, FFN) with a 128K context; RoPE scaling adds no weights
    "llama-3.1-8b": 8_030_261_248,
    "llama-3.1-70b": 70_553_706_496,
    # mixtures of experts, derived by hand in tests/training/test_moe_models.py (published: 30.5B, 235B, 116.83B, 20.91B;
    # DeepSeek-V3 671B main model + 11.6B of its multi-token prediction module)
    "qwen3-30b-a3b": 30_532_122_624,
    "qwen3-235b-a22b": 235_093_634_560,
    "gpt-oss-120b": 116_829_156_672,
    "gpt-oss-20b": 20_914_757_184,
    "deepseek-v3": 682_636_487_424,
}

TINY_LLAMA = {"model_type": "llama", "hidden_size": 64, "intermediate_size": 160, "num_hidden_layers": 2,
              "num_attention_heads": 8, "num_key_value_heads": 2, "vocab_size": 100, "max_position_embeddings": 32}


def test_imports_neither_torch_nor_onnx():
    import subprocess
    code = "import sys, concurrency_model; from concurrency_model import from_hf_config; " \
           "from_hf_config('gpt2', seq_len=8); print('torch' in sys.modules, 'onnx' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["False", "False"]


@pytest.mark.parametrize("name", sorted(PUBLISHED))
def test_published_parameter_counts_exact(name):
    assert from_hf_config(name, seq_len=16).params == PUBLISHED[name]


def test_presets_are_the_published_ones():
    assert set(preset_names()) == set(PUBLISHED)


def test_gpt2_and_bert_equal_the_zoo():
    for preset, zoo in (("gpt2", "gpt2"), ("bert-base-uncased", "bert-base")):
        g, z = from_hf_config(preset, batch=N), get_model(zoo, batch=N)
        assert g.params == z.params
        assert g.forward_flop() == z.forward_flop()
        assert g.training("adam").flop == z.training("adam").flop


def test_llama_forward_macs_by_hand():
    """Per token: 4h^2 (q, k, v, o: 32 KV heads) + 3hf (SwiGLU) per layer, 2 s h for QK^T and PV (the
    plain causal kernel computes every score), and h V for the logits."""
    s, h, f, L, V = 128, 4096, 11008, 32, 32000
    g = from_hf_config("llama-2-7b", seq_len=s)
    assert g.forward_macs() == s * (L * (4 * h * h + 3 * h * f + 2 * s * h) + h * V)


def test_mixtral_counts_all_experts_but_works_top2():
    s, h, f, L, V, kv = 64, 4096, 14336, 32, 32000, 1024
    g = from_hf_config("mixtral-8x7b", seq_len=s)
    per_token = L * (h * (h + 2 * kv) + h * h + h * 8 + 2 * 3 * h * f + 2 * s * h) + h * V
    assert g.forward_macs() == s * per_token
    dense = from_hf_config("mistral-7b", seq_len=s)
    extra = g.forward_macs() - dense.forward_macs()
    assert extra == s * L * (3 * h * f + h * 8)  # one more expert per token, and the router


def test_gqa_attention_nodes_and_grouped_projection():
    g = from_hf_config(TINY_LLAMA, seq_len=16)
    att = [n for n in g.layers() if n.kind == "attention"]
    assert len(att) == 2
    assert att[0].attrs["heads"] == 8 and att[0].attrs["kv_heads"] == 2 and att[0].attrs["head_dim"] == 8
    qkv = g.nodes["layers.0.qkv"]
    assert qkv.attrs["c_out"] == (8 + 2 * 2) * 8 and qkv.attrs["split"] == "column"
    # embedding + lm_head untied + per layer (qkv 64x96, o 64x64, SwiGLU 3x64x160, 2 RMSNorm) + final norm
    assert g.params == 2 * 100 * 64 + 2 * (64 * 96 + 64 * 64 + 3 * 64 * 160 + 2 * 64) + 64
    assert {"rotary", "rms_norm", "silu", "mul"} <= {n.kind for n in g.layers()}


def test_gpt_neox_parallel_residual_and_partial_rotary():
    cfg = {"model_type": "gpt_neox", "hidden_size": 64, "intermediate_size": 256, "num_hidden_layers": 2,
           "num_attention_heads": 4, "vocab_size": 128, "max_position_embeddings": 32, "rotary_pct": 0.25,
           "use_parallel_residual": True, "hidden_act": "gelu_fast"}
    g = from_hf_config(cfg)
    adds = [n for n in g.layers() if n.kind == "add"]
    assert len(adds) == 2 and all(len(n.inputs) == 3 for n in adds)
    rot = g.nodes["layers.0.rotary"]
    assert rot.cost.forward.flop == 3 * 32 * (4 + 4) * 4  # q and k, a quarter of each 16-wide head
    sequential = from_hf_config({**cfg, "use_parallel_residual": False})
    assert sequential.params == g.params and sequential.depth() > g.depth()


def test_seq_len_defaults_and_sliding_window():
    assert from_hf_config("llama-2-7b").nodes["tokens"].shape == (4096,)
    assert from_hf_config("mistral-7b").nodes["tokens"].shape == (4096,)  # the sliding window
    assert from_hf_config("mistral-7b", seq_len=512).nodes["tokens"].shape == (512,)


def test_sources_path_directory_dict(tmp_path):
    (tmp_path / "config.json").write_text(json.dumps(TINY_LLAMA))
    a = from_hf_config(tmp_path)
    b = from_hf_config(tmp_path / "config.json")
    c = from_hf_config(TINY_LLAMA)
    assert a.params == b.params == c.params
    assert a.forward_flop() == c.forward_flop()


def test_get_model_scenario_and_cli_accept_hf_config(tmp_path, capsys):
    path = tmp_path / "config.json"
    path.write_text(json.dumps(TINY_LLAMA))
    g = get_model({"hf_config": str(path), "seq_len": 16}, batch=2)
    assert g.params == from_hf_config(TINY_LLAMA).params
    assert g.forward_flop() == from_hf_config(TINY_LLAMA, batch=2, seq_len=16).forward_flop()
    e = estimate({"model": {"hf_config": "llama-2-7b", "seq_len": 1024}, "cluster": "dgx-a100",
                  "parallel": {"tensor": 8, "data": 2, "microbatch_size": 1, "global_batch": 8},
                  "training": {"recompute": "full"}})
    assert e.step_time_s > 0 and e.breakdown["tensor_parallel_comm_s"] > 0
    assert main(["workdepth", "--model", json.dumps({"hf_config": "mixtral-8x7b"}), "--seq-len", "32", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["params"] == PUBLISHED["mixtral-8x7b"]


def test_graph_as_model_is_rebuilt_for_the_batch():
    g = from_hf_config(TINY_LLAMA, seq_len=16)
    g4 = get_model(g, batch=4)
    assert g4.params == g.params and g4.forward_flop() == 4 * g.forward_flop()
    assert get_model(g) is g
    e = estimate({"model": g, "cluster": "dgx-a100", "parallel": {"tensor": 2, "microbatch_size": 2}})
    assert e.step_time_s > 0


@pytest.mark.parametrize("cfg, field", [
    ({"model_type": "t5"}, "model_type"),
    ({"model_type": "llama", "hidden_size": 64}, "num_attention_heads"),
    ({**TINY_LLAMA, "num_key_value_heads": 3}, "kv_heads"),
    ({**TINY_LLAMA, "hidden_act": "swoosh"}, "hidden_act"),
    ({**TINY_LLAMA, "num_hidden_layers": 0}, "num_hidden_layers"),
    ("no-such-model", "hf_config"),
])
def test_bad_configs_name_the_field(cfg, field):
    with pytest.raises(ValueError, match=field):
        from_hf_config(cfg)


def test_bad_spec_field_is_a_value_error():
    with pytest.raises(ValueError, match="hf_config"):
        get_model({"hf_config": "gpt2", "layers": 3})


def test_a_preset_name_given_as_a_zoo_name_says_how_to_ask_for_it():
    with pytest.raises(ValueError, match=r"""'llama-2-7b' is a Hugging Face config preset: \{"hf_config": "llama-2-7b"\}"""):
        get_model("llama-2-7b")
    with pytest.raises(ValueError, match=r"model: unknown 'llama'; .* with NAME one of bert-base-uncased, .*qwen3-30b-a3b$"):
        get_model("llama")
