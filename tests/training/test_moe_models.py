"""Mixtures of experts as trained at scale: Qwen3 MoE, GPT-OSS and DeepSeek-V3 from their Hugging Face configs
(presets/hf), their parameter counts and per-token forward FLOP derived by hand, and bad input naming the field.

Hand counts (h hidden, L layers, V vocabulary, E experts, k experts a token, f expert width; a SwiGLU expert
has 3 h f weights):

* Qwen3-30B-A3B (h 2048, L 48, 32 query / 4 KV heads of 128, E 128, k 8, f 768, V 151936, untied; Qwen3
  Technical Report Table 2): attention q 2048 x 4096 = 8,388,608, k and v 2 x 2048 x 512 = 2,097,152, o
  8,388,608, QK-norms 2 x 128, 2 RMSNorms 4,096 -> 18,878,720; router 2048 x 128 = 262,144; experts 128 x
  4,718,592 = 603,979,776 -> 623,120,640 a layer; x48 = 29,909,790,720; + embedding and head 2 x 311,164,928 +
  final norm 2,048 = 30,532,122,624 (model card: 30.5B, 29.9B without the embeddings).
  Active: 18,878,720 + 262,144 + 8 x 4,718,592 = 56,889,600 a layer; x48 + 622,331,904 = 3,353,032,704 (3.3B).
* Qwen3-235B-A22B (h 4096, L 94, 64 / 4 heads of 128, f 1536): attention 2 x 33,554,432 + 4,194,304 + 256 +
  8,192 = 71,311,616; router 524,288; experts 128 x 18,874,368 = 2,415,919,104 -> 2,487,755,008 a layer; x94 =
  233,848,970,752; + 2 x 622,329,856 + 4,096 = 235,093,634,560. Active: 71,311,616 + 524,288 + 8 x 18,874,368
  = 222,830,848 a layer; x94 + 1,244,663,808 = 22,190,763,520 (A22B).
* GPT-OSS-120B (h 2880, L 36, 64 / 8 heads of 64, E 128, k 4, f 2880, V 201088, biases on qkv, out, router,
  experts; one sink a head): attention qkv 2880 x 5120 + 5120 = 14,750,720, out 4096 x 2880 + 2880 = 11,799,360,
  sinks 64, norm 2,880 -> 26,553,024; MoE norm 2,880, router 368,640 + 128, experts 128 x (2880 x 5760 + 5760 +
  2880 x 2880 + 2880) = 128 x 24,891,840 = 3,186,155,520 -> 3,186,527,168; a layer 3,213,080,192; x36 =
  115,670,886,912; + 2 x 579,133,440 + 2,880 = 116,829,156,672 (model card 116.83B; README "117B").
  GPT-OSS-20B (L 24, E 32): 26,553,024 + 2,880 + 92,160 + 32 + 32 x 24,891,840 = 823,186,976 a layer; x24 +
  1,158,269,760 = 20,914,757,184 (20.91B; README "21B").
* DeepSeek-V3 (h 7168, L 61 of which 3 dense (f 18432), 128 heads, MLA q_lora 1536, kv_lora 512, qk 128 + 64,
  v 128, E 256 + 1 shared, k 8, f 2048, V 129280): MLA q_a 7168 x 1536 = 11,010,048 + norm 1,536, q_b 1536 x
  128 x 192 = 37,748,736, kv_a 7168 x 576 = 4,128,768 + norm 512, kv_b 512 x 128 x 256 = 16,777,216, o 16,384 x
  7168 = 117,440,512 -> 187,107,328, + 2 norms 14,336 = 187,121,664; dense MLP 3 x 7168 x 18432 = 396,361,728;
  MoE: 256 experts x 44,040,192 = 11,274,289,152, shared 44,040,192, router 1,835,008 + 256 (balancing bias) =
  11,320,164,608. 3 x 583,483,392 + 58 x 11,507,286,272 + 2 x 926,679,040 + 7,168 = 671,026,419,200 (the report's
  671B). The MTP module: a MoE block 11,507,286,272 + enorm and hnorm 14,336 + eh_proj 14,336 x 7168 =
  102,760,448 + its head norm 7,168 = 11,610,068,224 (embedding and head shared) -> 682,636,487,424. The Hugging
  Face checkpoint stores the shared embedding and head again in layer 61: + 2 x 926,679,040 = 684,489,845,504,
  the README's "685B ... 671B of the Main Model weights and 14B of the Multi-Token Prediction (MTP) Module weights"
  (deepseek-ai/DeepSeek-V3 @ 9b4e978 README.md; README_WEIGHTS.md gives the MTP module's unique weights as 11.5B).

Per-token forward FLOP of the active parameters: 2 FLOP a weight of every matrix a token passes (its k experts,
the shared expert, the router) plus one add a bias; the embedding lookup and the attention core aside.
DeepSeek-V3 (no MTP): a MoE layer 187,105,280 (MLA matrices) + 1,835,008 + 9 x 44,040,192 = 585,302,016, a dense
layer 187,105,280 + 396,361,728 = 583,467,008, head 926,679,040: 58 x 585,302,016 + 3 x 583,467,008 + 926,679,040
= 36,624,596,992 weights -> 73,249,193,984 FLOP + 58 x 256 router biases = 73,249,208,832 a token.
Qwen3-30B-A3B: (18,874,368 + 262,144 + 37,748,736) x 48 + 311,164,928 = 3,041,656,832 weights -> 6,083,313,664.
GPT-OSS-120B: (14,745,600 + 11,796,480 + 368,640 + 4 x 24,883,200) x 36 + 579,133,440 = 5,131,100,160 weights and
(5,120 + 2,880 + 128 + 4 x 8,640) x 36 = 1,536,768 bias adds -> 10,263,737,088.
"""
from __future__ import annotations

import json

import pytest

from concurrency_model import from_hf_config
from concurrency_model.frontends.hf import load_hf_config
from concurrency_model.cli import main

COUNTS = {  # total, active (module docstring)
    "qwen3-30b-a3b": (30_532_122_624, 3_353_032_704),
    "qwen3-235b-a22b": (235_093_634_560, 22_190_763_520),
    "gpt-oss-120b": (116_829_156_672, None),
    "gpt-oss-20b": (20_914_757_184, None),
}
FORWARD_PER_TOKEN = {"deepseek-v3": 73_249_208_832, "qwen3-30b-a3b": 6_083_313_664, "gpt-oss-120b": 10_263_737_088}


def _active(g) -> int:
    """Parameters a token passes: every node's, the experts' counted for ``top_k`` of them."""
    out = 0
    for n in g.layers():
        p = int(n.cost.params)
        if "experts" in n.attrs:
            p = p * n.attrs["top_k"] // n.attrs["experts"]
        out += p
    return out


@pytest.mark.parametrize("name", sorted(COUNTS))
def test_total_and_active_parameters_by_hand(name):
    g = from_hf_config(name, seq_len=16)
    total, active = COUNTS[name]
    assert g.params == total
    if active is not None:
        assert _active(g) == active


def test_deepseek_v3_main_model_mtp_module_and_checkpoint():
    main_model = from_hf_config("deepseek-v3", seq_len=16, mtp_layers=0).params
    with_mtp = from_hf_config("deepseek-v3", seq_len=16).params
    assert main_model == 671_026_419_200
    assert with_mtp - main_model == 11_610_068_224
    assert round((with_mtp + 2 * 129280 * 7168) / 1e9) == 684  # + the shared embedding and head stored again: "685B"


@pytest.mark.parametrize("name, kw", [("deepseek-v3", {"mtp_layers": 0}), ("qwen3-30b-a3b", {}),
                                      ("gpt-oss-120b", {})])
def test_forward_flop_per_token_of_the_active_matrices(name, kw):
    s = 32
    g = from_hf_config(name, seq_len=s, **kw)
    linear = sum(int(n.cost.forward.flop) for n in g.layers() if n.kind == "linear")
    assert linear == FORWARD_PER_TOKEN[name] * s


def test_deepseek_v3_layers_dense_first_shared_expert_and_mla_shapes():
    g = from_hf_config("deepseek-v3", seq_len=8)
    names = {n.name: n for n in g.layers()}
    assert "layers.2.mlp.gate_proj" in names and "layers.3.mlp.router" in names  # first_k_dense_replace = 3
    assert "layers.2.mlp.router" not in names
    assert names["layers.3.mlp.shared_experts.gate_proj"].attrs["c_out"] == 2048
    assert names["layers.0.q_b_proj"].attrs["c_out"] == 128 * 192
    assert names["layers.0.kv_b_proj"].attrs["c_in"] == 512
    att = names["layers.0.attention"]
    assert att.shape == (8, 128 * 128) and att.attrs["head_dim"] == (192 + 128) // 2
    assert "mtp.0.eh_proj" in names and names["mtp.0.lm_head"].cost.params == 0


def test_qwen3_has_query_key_norms_and_no_shared_expert():
    g = from_hf_config("qwen3-30b-a3b", seq_len=8)
    names = {n.name for n in g.layers()}
    assert {"layers.0.q_norm", "layers.0.k_norm"} <= names
    assert not any("shared_experts" in n for n in names)


@pytest.mark.parametrize("patch, field", [
    ({"num_experts_per_tok": 9, "num_local_experts": 8}, "hf_config.num_experts_per_tok"),
    ({"num_local_experts": 0}, "hf_config.num_local_experts"),
])
def test_top_k_beyond_the_experts_names_the_field(patch, field):
    cfg, _ = load_hf_config("gpt-oss-20b")
    with pytest.raises(ValueError, match=field):
        from_hf_config({**cfg, **patch}, seq_len=8)


def test_deepseek_bad_fields():
    cfg, _ = load_hf_config("deepseek-v3")
    with pytest.raises(ValueError, match="hf_config.num_experts_per_tok: 300 experts a token exceed the 256"):
        from_hf_config({**cfg, "num_experts_per_tok": 300}, seq_len=8)
    with pytest.raises(ValueError, match="hf_config.moe_layer_freq"):
        from_hf_config({**cfg, "moe_layer_freq": 2}, seq_len=8)
    with pytest.raises(ValueError, match="hf_config.kv_lora_rank"):
        from_hf_config({**cfg, "kv_lora_rank": 0}, seq_len=8)
    with pytest.raises(ValueError, match="mtp_layers: a qwen3_moe model"):
        from_hf_config("qwen3-30b-a3b", seq_len=8, mtp_layers=1)


def test_cli_top_k_beyond_experts_is_one_line_exit_2(tmp_path, capsys):
    cfg, _ = load_hf_config("qwen3-30b-a3b")
    path = tmp_path / "config.json"
    path.write_text(json.dumps({**cfg, "num_experts_per_tok": 129}))
    sc = tmp_path / "sc.json"
    sc.write_text(json.dumps({"model": {"hf_config": str(path), "seq_len": 64}, "cluster": "dgx-h100",
                              "parallel": {"data": 8, "microbatch_size": 1, "global_batch": 8}}))
    assert main(["estimate", "--scenario", str(sc)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "hf_config.num_experts_per_tok: 129 experts a token exceed the 128" in err


# -- expert parallelism on the tiers --------------------------------------------------------------------------------

def test_expert_all_to_all_by_hand_inside_and_across_nodes():
    """One MoE layer of a small Mixtral-shaped model (h 1024, 16 experts, top-2, 512 tokens, bf16): the dispatch
    buffer is 512 x 2 x 1024 = 1,048,576 values, 2,097,152 bytes a device. Expert group of 8 on one DGX H100
    (group_placement: the 8 fit the NVLink domain): the cheapest all-to-all is Bruck, ceil(lg 8) = 3 steps of
    alpha 2 us + n/2 beta on NVLink (450 GB/s x 0.822): 6 us + 3 x 1,048,576 / 369.9e9 = 14.504 us, all on the
    intra tier. Group of 16 over two nodes (8 a node): Bruck's latency, 4 steps on InfiniBand (alpha 5 us), and each
    peer's 1/16 of the 2,097,152 bytes on its own tier, at once (parallel.expert.alltoall_bytes): 8 shares to the
    other node at 50 GB/s x 0.9 per GPU's NIC (23.30 us), 7 over NVLink (2.48 us): 20 + 23.30 = 43.30 us.
    Forward = dispatch + combine = twice."""
    import dataclasses

    from concurrency_model.hardware.clusters import load_cluster
    from concurrency_model.training.workload import workload
    cfg = {"model_type": "mixtral", "hidden_size": 1024, "intermediate_size": 2048, "num_hidden_layers": 2,
           "num_attention_heads": 8, "num_key_value_heads": 8, "vocab_size": 1000, "max_position_embeddings": 512,
           "num_local_experts": 16, "num_experts_per_tok": 2}
    n = 2 * 512 * 2 * 1024
    nvlink, nic = 450e9 * 0.822, 50e9 * 0.9
    for nodes, e in ((1, 8), (2, 16)):
        cl = dataclasses.replace(load_cluster("dgx-h100"), nodes=nodes)
        w = workload({"hf_config": cfg, "seq_len": 512}, cl, "bf16")
        node = next(x for x in w.graph(1).layers() if x.kind == "moe_dispatch")
        fwd, bwd = w.expert_triples(node, 1, 1, e)
        assert fwd == bwd
        if nodes == 1:
            assert fwd == pytest.approx((2 * 3 * 2e-6, 2 * 3 * n / 2 / nvlink, 0.0))
    assert fwd == pytest.approx((2 * 4 * 5e-6, 2 * n * 7 / 16 / nvlink, 2 * n * 8 / 16 / nic))
    assert (fwd[0] + max(fwd[1], fwd[2])) * 1e6 / 2 == pytest.approx(43.30, abs=0.01)


def test_expert_degree_not_dividing_the_experts_names_the_field(tmp_path, capsys):
    from concurrency_model.training.estimate import estimate
    sc = {"model": {"hf_config": "qwen3-30b-a3b", "seq_len": 64}, "cluster": "dgx-h100",
          "parallel": {"data": 6, "expert": 3, "microbatch_size": 1, "global_batch": 6},
          "training": {"dtype": "bf16"}}
    with pytest.raises(ValueError, match="^parallel.expert: 3 does not divide the 128 experts of a layer$"):
        estimate(sc)
    path = tmp_path / "sc.json"
    path.write_text(json.dumps(sc))
    assert main(["estimate", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "parallel.expert: 3 does not divide the 128 experts" in err
