"""The NeMo 24.07 and long-sequence rows of :mod:`concurrency_model.validate.modern` mapped to scenarios (hand-picked
rows checked against the published tables), NeMo's FLOP count, and the Megatron-Bridge B200 rows now mappable."""
from __future__ import annotations

import pytest

from concurrency_model.validate import modern


@pytest.fixture(scope="module")
def nemo():
    return modern.nemo_rows()


def test_nemo_flop_count_reproduces_the_published_pairs(nemo):
    # rows that publish both tokens/s and TFLOP/s per GPU: NeMo's formula links them within the rounding of the cells
    # (pre-training only: the fine-tuning rows' TFLOP/s are 8-73% above tokens/s x this count, another count)
    both = nemo[nemo["label"].str.startswith("24.07 Pretraining") & nemo["measured_tflops"].notna()
                & nemo["flops_per_token"].notna()]
    assert len(both) == 8  # 12 pre-training rows less 3 Nemotron and the 175B cell that links to MLPerf
    ratio = both["measured_tps"] * both["flops_per_token"] / 1e12 / both["measured_tflops"]
    assert ratio.between(0.995, 1.005).all()


def test_b200_long_sequence_128k_row(nemo):
    r = nemo[nemo["label"] == "long-seq LLAMA3-8B (FP8) - B200: LLAMA3-8B seq 128K on 128 DGX-B200"].iloc[0]
    # the table: TP 2, PP 1, DP 4, CP 4, batch 32, 1,588 TFLOP/s per GPU; Llama 3 8B: 32 layers, hidden 4096, 32 heads,
    # 8 groups, MLP 14336, vocabulary 128256; NeMo: L h^2 (12 + 12 g/a + 18 f/h + 12 s/h + 6 V/(L h))
    per_token = 32 * 4096 ** 2 * (12 + 12 * 8 / 32 + 18 * 14336 / 4096 + 12 * 131072 / 4096 + 6 * 128256 / (32 * 4096))
    assert r["flops_per_token"] == pytest.approx(per_token)
    assert r["measured_tps"] == pytest.approx(1588e12 / per_token)
    sc = modern.scenario_for(r)
    assert sc["cluster"] == "dgx-b200" and sc["model"] == {"hf_config": "llama-3-8b", "seq_len": 131072,
                                                           "fused_attention": "cudnn"}  # Megatron-Core: TE -> cuDNN
    par = sc["parallel"]
    assert (par["tensor"], par["pipeline"], par["context"], par["data"]) == (2, 1, 4, 4)
    assert (par["global_batch"], par["microbatch_size"], par["sequence_parallel"]) == (32, 1, True)
    assert sc["training"]["dtype"] == "fp8" and sc["training"]["framework"] == "megatron"
    assert r["recompute"] == "auto" and r["without_cp_tflops"] == 1438 and r["measured_speedup"] == 1.10
    assert "published # of GPUs 128 != TP x PP x DP x CP = 32" in r["note"]


def test_gpt3_175b_row_and_the_rows_left_out(nemo):
    r = nemo[nemo["label"] == "24.07 Pretraining: GPT3-175B seq 2048 on 128 DGX-H100"].iloc[0]
    sc = modern.scenario_for(r)
    assert sc["model"] == {"kind": "gpt", "layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048,
                           "vocab": 51200, "fused_attention": "cudnn"}
    par = sc["parallel"]
    assert (par["tensor"], par["pipeline"], par["interleave"], par["schedule"], par["data"]) == \
        (4, 8, 6, "interleaved", 4)
    assert r["measured_tps"] == 716
    left = nemo[nemo["unmappable"] != ""]
    assert len(left) == 6 and left["label"].str.contains("Nemotron|LoRA").all()


def test_megatron_bridge_dense_and_moe_b200_rows_are_mappable_nemotron_not():
    df = modern.megatron_bridge_rows()
    b200 = df[df["label"].str.contains("DGX-B200")]
    dense = b200[b200["label"].str.contains("LLAMA")]
    assert len(dense) == 4 and (dense["unmappable"] == "").all() and (dense["cluster"] == "dgx-b200").all()
    nemotron = b200["label"].str.contains("Nemotron")
    assert (b200.loc[nemotron, "unmappable"] != "").all()
    assert (b200.loc[~nemotron, "unmappable"] == "").all() and b200.loc[~nemotron & ~b200.index.isin(dense.index),
                                                                        "moe"].all()


def test_fp8_tensor_degrees_follow_transformer_engine_widths():
    # TE runs a GEMM in FP8 only with its operands' last dimension a multiple of 16 (check_dim_for_fp8_exec): Llama 2
    # 7B's MLP of 11,008 splits into 16 widths of 688 = 43 x 16, not into 32 of 344 = 21.5 x 16; Llama 3 8B's 14,336
    # into 32 of 448 = 28 x 16; a width of 100 (not a multiple of 16) never
    llama2 = {"hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 11008}
    assert [t for t in (1, 2, 4, 8, 16, 32) if modern.fp8_tensor_ok(llama2, t)] == [1, 2, 4, 8, 16]
    llama3 = {"hidden_size": 4096, "num_attention_heads": 32, "num_key_value_heads": 8, "intermediate_size": 14336}
    assert modern.fp8_tensor_ok(llama3, 32)
    assert not modern.fp8_tensor_ok({"hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 100}, 1)


def test_layouts_without_cp_reach_tp16_and_deep_pipelines(nemo):
    # Llama 2 7B at 1M tokens on 1,024 H100, batch 4: without CP every layout has TP x PP >= 1024 / 4 = 256; TP stops
    # at 16 (FP8 widths) and PP at the 32 layers: TP 8 x PP 32, TP 16 x PP 16 or 32 (TP 32 x PP 8 is left out)
    r = nemo[nemo["label"] == "long-seq LLAMA2-7B (FP8) - H100: LLAMA2-7B seq 1024K on 1024 DGX-H100"].iloc[0]
    got = sorted((v["tensor"], v["pipeline"], v["data"]) for v in modern._without_cp(r.to_dict()))
    assert got == [(8, 32, 4), (16, 16, 4), (16, 32, 2)]
    # Llama 3 8B on B200 (8 query groups): TP at most 8, whatever FP8 allows
    r = nemo[nemo["label"] == "long-seq LLAMA3-8B (FP8) - B200: LLAMA3-8B seq 512K on 512 DGX-B200"].iloc[0]
    assert max(v["tensor"] for v in modern._without_cp(r.to_dict())) == 8


def test_least_recompute_starts_at_the_floor_and_prefers_a_whole_fit():
    # (status, tokens/s, over the expected peak): "auto" takes the least mode whose expected peak fits, else the
    # least that fits at the central figure; a floor from the table's shorter sequence rules out the modes below it
    ok, risky, refused = ("ok", 10.0, False), ("ok", 12.0, True), ("refused", float("nan"), True)
    three = {"none": ok, "selective": ok, "full": ok}
    assert [modern.least_recompute(three, f) for f in modern.RECOMPUTE_ORDER] == ["none", "selective", "full"]
    assert modern.least_recompute({"none": risky, "selective": risky, "full": ok}) == "full"
    assert modern.least_recompute({"none": risky, "selective": refused, "full": refused}) == "none"
    assert modern.least_recompute({"none": ok, "selective": ok, "full": risky}, "full") == "full"
    assert modern.least_recompute({"none": ok, "selective": ok, "full": refused}, "full") is None
    with pytest.raises(ValueError, match="^floor: unknown 'ful'"):
        modern.least_recompute(three, "ful")


def test_outcome_of_a_layout_without_cp_at_512k(nemo):
    # Llama 2 7B, 512K tokens on 512 H100, batch 8, TP 16 x PP 4 x DP 8: one sequence a pipeline. Without recompute
    # the first stage keeps 8 layers x 34 s h / t = 8 x 34 x 524288 x 4096 / 16 bytes = 36.5 GB: it fits in 80 GB
    # whole; full recompute runs every layer's forward again, so it is slower and fits too
    r = nemo[nemo["label"] == "long-seq LLAMA2-7B (FP8) - H100: LLAMA2-7B seq 512K on 512 DGX-H100"].iloc[0].to_dict()
    v = next(v for v in modern._without_cp(r) if (v["tensor"], v["pipeline"]) == (16, 4))
    assert v["data"] == 8
    none, full = modern._outcome((v, "none")), modern._outcome((v, "full"))
    assert none[0] == full[0] == "ok" and not none[2] and not full[2]
    assert none[1] > full[1] > 0.7 * none[1]
    assert modern.least_recompute({"none": none, "full": full}) == "none"
    assert modern.least_recompute({"none": none, "full": full}, "full") == "full"
