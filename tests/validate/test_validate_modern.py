"""Modern training sets (:mod:`concurrency_model.validate.modern`): the cell parser, the row -> scenario rule of
each set on hand-picked rows, the unmappable reasons, and the Grand Teton presets against their sources."""
from __future__ import annotations

import math

import numpy as np
import pytest

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.hardware.devices import load_device
from concurrency_model.models import get_model
from concurrency_model.validate import modern
from concurrency_model.validate.registry import names


@pytest.fixture(scope="module")
def titan():
    return modern.rows("torchtitan")


@pytest.fixture(scope="module")
def foundry():
    return modern.rows("llmfoundry")


@pytest.fixture(scope="module")
def bridge():
    return modern.rows("megatron_bridge")


# -- cells as published ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("cell, value, alt", [
    ("37556 (36108)", 37556.0, 36108.0), ("5,762", 5762.0, None), ("1,071", 1071.0, None),
    ("30624 (29521)", 30624.0, 29521.0), ("475[^nemotron-3-super-b200-nvfp4-note]", 475.0, None),
    ("597.3", 597.3, None), (" 829 ", 829.0, None), ("n/a", None, None), ("", None, None), (16, 16.0, None),
])
def test_cells_parse(cell, value, alt):
    got = modern.number(cell)
    assert (math.isnan(got) if value is None else got == value)
    a = modern.alternative(cell)
    assert (math.isnan(a) if alt is None else a == alt)


# -- torchtitan --------------------------------------------------------------------------------------------------

def test_torchtitan_fsdp_row(titan):
    r = titan.iloc[0]  # Table 1 FSDP: Llama 3.1 8B, 8 GPUs, local batch 2, selective AC, bf16, 5,762 tps, 82.4 GiB
    sc = modern.scenario_for(r)
    assert sc["model"] == {"hf_config": "llama-3.1-8b", "seq_len": 8192, "fused_attention": True}
    assert sc["cluster"] == "grand-teton-h100"
    p, t = sc["parallel"], sc["training"]
    assert (p["data"], p["tensor"], p["pipeline"], p["context"]) == (8, 1, 1, 1)
    assert (p["microbatch_size"], p["global_batch"]) == (2, 16)
    assert (t["dtype"], t["recompute"], t["zero_stage"], t["framework"]) == ("bf16", "selective", 3, "fsdp2")
    assert r["measured_tps"] == 5762 and r["measured_memory_bytes"] == pytest.approx(82.4 * 2 ** 30)
    assert titan.iloc[1]["note"] == "torch.compile" and titan.iloc[2]["dtype"] == "fp8"  # + Float8


def test_torchtitan_context_parallel_row(titan):
    p = modern.scenario_for(titan.iloc[4])["parallel"]  # Table 2 FSDP 4, CP 2 at 65,536 tokens, local batch 1
    assert (p["data"], p["context"], p["global_batch"], p["microbatch_size"]) == (4, 2, 4, 1)
    assert modern.scenario_for(titan.iloc[4])["model"]["seq_len"] == 65536
    assert modern.scenario_for(titan.iloc[4])["training"]["recompute"] == "full"


def test_torchtitan_pipeline_rows(titan):
    # Table 5, 405B on 512 GPUs (FSDP 8, TP 8, PP 8), local batch 32: torchtitan's default of as many microbatches
    # as stages (8) -> microbatch 4; interleaved 1F1B: 2 stages a rank
    one, inter = (modern.scenario_for(titan.iloc[i]) for i in (12, 13))
    p = one["parallel"]
    assert (p["data"], p["tensor"], p["pipeline"], p["microbatch_size"], p["global_batch"]) == (8, 8, 8, 4, 256)
    assert p["sequence_parallel"] and (p["schedule"], p["interleave"]) == ("1f1b", 1)
    assert (inter["parallel"]["schedule"], inter["parallel"]["interleave"]) == ("interleaved", 2)
    assert one["training"]["dtype"] == "fp8" and titan.iloc[12]["note"] == "torch.compile; async TP"
    assert p["tp_overlap"] and "tp_overlap" not in modern.scenario_for(titan.iloc[9])["parallel"]  # Table 4: 2D


def test_torchtitan_h200_and_b200(titan):
    h200 = titan[titan["label"].str.startswith("Trainy")]
    assert set(h200["cluster"]) == {"dgx-h200"} and (h200["unmappable"] == "").all()
    b200 = titan[titan["label"].str.startswith("MXFP8")]
    assert len(b200) == 4
    assert set(b200["unmappable"]) == {"not mappable: no preset for B200 (and the model is not stated)"}
    assert b200["measured_memory_bytes"].isna().all()  # published in GB, a unit not compared
    with pytest.raises(ValueError, match="no preset for B200"):
        modern.scenario_for(b200.iloc[0])


def test_torchtitan_compiles_the_loss_from_bbb1b616e_on(titan):
    """torch.compile under torchtitan e7c0cae (the Trainy rows) also compiles the loss: a fused loss, 4 bytes a logit
    where the upcast one holds 12; under 9dec370 (Tables 1-6) the loss stays eager, compiled or not."""
    trainy = titan[titan["label"].str.startswith("Trainy")]
    assert set(trainy["loss"]) == {"fused"}
    tables = titan[titan["label"].str.startswith("Table")]
    assert tables["compile"].any() and not tables["loss"].map(lambda x: isinstance(x, str)).any()
    assert modern.scenario_for(tables.iloc[0])["training"]["loss"] is None
    sc = modern.scenario_for(trainy.iloc[0])
    fused, upcast = (estimate({**sc, "training": {**sc["training"], "loss": loss}}).memory["loss_buffers_bytes"]
                     for loss in ("fused", None))
    logits = 2 * 8192 * 128_256  # local batch 2 x sequence 8192 x Llama 3's vocabulary
    assert (fused, upcast) == (0, pytest.approx((12 - 4) * logits, rel=1e-12))


def test_torchtitan_selective_rows_are_estimated_with_the_reserved_figure():
    """Table 1 (Llama 3.1 8B, FSDP 8, local batch 2, torchtitan's per-op selective checkpointing) ran in 82.4 GiB: it
    is estimated, not refused, and the memory compared is the allocator's reserved figure (what torchtitan logs)."""
    r = modern.evaluate(modern.rows("torchtitan").iloc[:1])
    assert r.loc[0, "status"] == "ok" and r.loc[0, "recompute_used"] == "selective"
    assert r.loc[0, "predicted_reserved_bytes"] > r.loc[0, "predicted_memory_bytes"] - 1e9  # cached headroom added
    assert r.loc[0, "ape_memory"] == pytest.approx(abs(r.loc[0, "predicted_reserved_bytes"] / (82.4 * 2 ** 30) - 1))
    assert r.loc[0, "ape_memory"] < 0.15


def test_a_configuration_over_the_device_is_still_refused():
    """The same row at local batch 4: its activations alone (~2 x 33 GB) and the loss exceed the 96 GiB board."""
    row = modern.rows("torchtitan").iloc[:1].assign(microbatch=4, global_batch=32)
    r = modern.evaluate(row)
    assert r.loc[0, "status"] == "refused" and r.loc[0, "reason"].startswith("memory:")
    assert np.isnan(r.loc[0, "ape_tps"])


# -- llm-foundry -------------------------------------------------------------------------------------------------

def test_llmfoundry_rows(foundry):
    sc = modern.scenario_for(foundry.iloc[0])  # 70b on 512 H100, FULL_SHARD, AC, mbs 8, global 4096 sequences
    assert sc["model"] == {"kind": "gpt", "layers": 80, "hidden": 8192, "heads": 64, "seq_len": 2048, "vocab": 50368,
                           "fused_attention": "flash1", "dropout": 0}  # its Triton FlashAttention; MPT's pdrop 0
    assert (sc["cluster"], sc["parallel"]["data"], sc["parallel"]["microbatch_size"]) == ("dgx-h100", 512, 8)
    assert sc["training"]["zero_stage"] == 3 and sc["training"]["recompute"] == "full"
    assert sc["training"]["framework"] == "fsdp"
    sgo = modern.scenario_for(foundry.iloc[12])  # 3b SHARD_GRAD_OP, no AC
    assert sgo["training"]["zero_stage"] == 2 and sgo["training"]["recompute"] == "none"
    assert modern.scenario_for(foundry.iloc[70])["training"]["dtype"] == "fp8"  # amp_fp8
    assert modern.scenario_for(foundry.iloc[77])["cluster"] == "dgx-a100"
    # Composer's DEFAULT mixed precision reduces in fp32 from v0.16.4, which the H100 tables' llm-foundry pinned; the
    # A100 table's Composer 0.15 left FSDP's default (bf16), and PURE reduces in bf16
    assert sc["training"]["reduce_dtype"] == "fp32" and sgo["training"]["reduce_dtype"] == "fp32"
    assert "reduce_dtype" not in modern.scenario_for(foundry.iloc[79])["training"]   # A100, DEFAULT
    assert "reduce_dtype" not in modern.scenario_for(foundry.iloc[77])["training"]   # A100, PURE
    h100 = foundry["cluster"] == "dgx-h100"
    assert (foundry.loc[h100, "reduce_dtype"] == "fp32").all() and foundry.loc[~h100, "reduce_dtype"].isna().all()
    assert (foundry["unmappable"] == "").all() and foundry.loc[0, "measured_tps"] == 1007


def test_mpt_shapes_reproduce_every_published_parameter_count(foundry):
    from concurrency_model.datasets import load
    published = load("llmfoundry_mpt_train_throughput")["num_params"]
    for (model, seq), idx in foundry.groupby(["model", "seq"]).groups.items():
        spec = modern.model_spec(foundry.loc[idx[0]])
        assert get_model(spec).params == published[idx[0]], (model, seq)
        assert (published[idx] == published[idx[0]]).all()


# -- Megatron-Bridge ---------------------------------------------------------------------------------------------

def test_megatron_bridge_rows(bridge):
    sc = modern.scenario_for(bridge.iloc[0])  # 26.06 405B on 1024 H100: TP 8, PP 8, CP 2, VP 8, GBS 1536, FP8
    p, t = sc["parallel"], sc["training"]
    assert (p["data"], p["tensor"], p["pipeline"], p["context"]) == (8, 8, 8, 2)
    assert (p["schedule"], p["interleave"], p["sequence_parallel"]) == ("interleaved", 8, True)
    assert (t["dtype"], t["zero_stage"], t["framework"], t["recompute"]) == ("fp8", 1, "megatron", "none")
    fsdp = modern.scenario_for(bridge.loc[80])  # 25.11 Llama 3 8B on 8 H100, FSDP 8, FP8-CS
    assert fsdp["training"]["zero_stage"] == 3 and fsdp["parallel"]["data"] == 8
    assert fsdp["model"]["hf_config"] == "llama-3-8b" and fsdp["parallel"]["sequence_parallel"] is False
    assert bridge.loc[91, "dtype"] == "fp8"  # 25.09: no precision column (ASSUMPTIONS)
    assert modern.megatron_bridge_rows().loc[30, "measured_tflops"] == 475  # a footnote marker in the cell


def test_megatron_bridge_unmappable_reasons(bridge):
    assert len(bridge) == 19 and not bridge["moe"].any()  # the dense Llama rows; the MoE rows are a set apart
    assert (bridge["unmappable"] == "").sum() == 18  # dense Llama on DGX-H100 (14, not LoRA) and DGX-B200 (4)
    moe = modern.rows("megatron_bridge_moe")
    assert len(moe) == 78 and (moe["unmappable"] == "").sum() == 59  # all but the 19 Nemotron 3 rows
    assert moe.loc[5, "unmappable"].startswith("not mappable: Nemotron_3_Nano is a hybrid Mamba")
    assert bridge.loc[74, "unmappable"] == "" and bridge.loc[74, "cluster"] == "dgx-b200"  # issue 36: a preset now
    assert bridge.loc[74, "measured_tps"] == 30624  # "30624 (29521)": the first configuration
    assert bridge.loc[10, "unmappable"] == "not mappable: LoRA rank and target modules are not published"


def test_megatron_bridge_moe_rows_map_experts_folding_and_tokendrop():
    moe = modern.rows("megatron_bridge_moe")
    sc = modern.scenario_for(moe.loc[14])  # 26.04.01 DeepSeek-V3 on 256 B200: PP 8, VP 2, EP 32, MXFP8, GBS 4096
    p, t = sc["parallel"], sc["training"]
    assert (p["data"], p["pipeline"], p["expert"], p["interleave"]) == (32, 8, 32, 2)
    assert sc["model"] == {"hf_config": "deepseek-v3", "seq_len": 4096, "fused_attention": "cudnn"}
    assert (t["dtype"], t["zero_stage"], t["recompute"], sc["cluster"]) == ("mxfp8", 1, "auto", "dgx-b200")
    fold = modern.scenario_for(moe.loc[23])  # Qwen3 235B on 256 H100: TP 2, PP 8, EP 32 > DP 16: EP / TP = 16
    assert (fold["parallel"]["data"], fold["parallel"]["tensor"], fold["parallel"]["expert"]) == (16, 2, 16)
    assert "EP 32 over TP 2 x DP 16" in moe.loc[23, "note"]
    drop = modern.scenario_for(moe.loc[89])  # 25.09 Qwen3 30B (tokendrop) on 8 B200: no precision column
    assert drop["model"]["capacity_factor"] == 1.0 and drop["training"]["dtype"] == "mxfp8"
    assert modern.scenario_for(moe.loc[95])["training"]["dtype"] == "fp8"  # the same on H100
    assert modern.scenario_for(moe.loc[17])["training"]["dtype"] == "bf16"  # GPT-OSS BF16



def test_megatron_bridge_moe_rows_take_the_recipes_dispatcher_and_overlap():
    moe = modern.rows("megatron_bridge_moe")
    # DeepSeek-V3 on 256 B200 with EP 32: the fp8mx recipe's flex + deepep and EP overlap (PP 8 with VP 2)
    assert {k: modern.scenario_for(moe.loc[14])["parallel"][k] for k in ("moe_dispatcher", "expert_overlap")} == \
        {"moe_dispatcher": "deepep", "expert_overlap": True}
    fold = modern.scenario_for(moe.loc[23])["parallel"]  # Qwen3 235B on 256 H100: alltoall with the overlap (VP 4)
    assert "moe_dispatcher" not in fold and fold["expert_overlap"] is True
    h100 = moe[(moe["model"] == "qwen3-30b-a3b") & (moe["cluster"] == "dgx-h100") & (moe["expert"] == 16)]
    assert len(h100) == 3 and (h100["moe_dispatcher"] == "hybridep").all() and not h100["expert_overlap"].any()
    # overlap needs virtual stages with pipelining: the B300 DeepSeek-V3 rows without VP run without it
    pp = moe[(moe["model"] == "deepseek-v3") & (moe["cluster"] == "dgx-b300")]
    assert (pp["expert_overlap"] == (pp["interleave"] > 1)).all() and (pp["moe_dispatcher"] == "hybridep").all()
    gpt = moe[(moe["model"] == "gpt-oss-120b") & (moe["cluster"] == "dgx-h100")]  # recipes/gpt_oss: alltoall
    assert (gpt["moe_dispatcher"] == "alltoall").all()
    # Megatron-Bridge's apply_moe_token_drop asserts the alltoall dispatcher: every "(tokendrop)" row ran it, whatever
    # its model's recipe sets (Qwen3 30B: hybridep)
    drop = moe[moe["label"].str.contains("(tokendrop)", regex=False)]
    assert len(drop) == 5 and (drop["moe_dispatcher"] == "alltoall").all()
    assert "moe_dispatcher" not in modern.scenario_for(moe.loc[89])["parallel"]  # 25.09 Qwen3 30B on 8 B200


def test_megatron_bridge_moe_rows_take_their_containers_recipe():
    # the CUDA graphs and dispatchers each container's recipe ran (MOE_CUDA_GRAPH at the snapshot, MOE_RECIPE_HISTORY
    # before it): B300 Qwen3 30B fp8mx full-iteration graphs from 26.06 only, router graphs before; B200 Qwen3 30B
    # alltoall with router graphs to 26.02, HybridEP with attention graphs from 26.02.01
    moe = modern.rows("megatron_bridge_moe")
    q = moe[moe["model"] == "qwen3-30b-a3b"].set_index("label")
    assert q.loc["26.06 Qwen3_30B_a3B on 8 DGX-B300", "cuda_graph"] == "full_iteration"
    assert q.loc["26.04.01 Qwen3_30B_a3B on 8 DGX-B300", ["cuda_graph", "expert_overlap"]].tolist() == \
        ["moe_router,moe_preprocess", False]
    assert q.loc["26.02 Qwen3_30B_a3B on 8 DGX-B200", ["moe_dispatcher", "cuda_graph"]].tolist() == \
        ["alltoall", "moe_router,moe_preprocess"]
    assert q.loc["26.02.01 Qwen3_30B_a3B on 8 DGX-B200", ["moe_dispatcher", "cuda_graph"]].tolist() == \
        ["hybridep", "attn,moe_router,moe_preprocess"]
    sc = modern.scenario_for(moe.loc[moe["label"] == "26.06 Qwen3_30B_a3B on 8 DGX-B300"].iloc[0])
    assert sc["training"]["cuda_graph"] == "full_iteration"
    gpt = moe[(moe["model"] == "gpt-oss-120b") & (moe["cluster"] == "dgx-h100")]  # no graphs in its recipes
    assert (gpt["cuda_graph"] == "none").all() and "cuda_graph" not in modern.scenario_for(gpt.iloc[0])["training"]


def test_megatron_bridge_rows_take_the_recipes_tp_overlap(bridge):
    # Megatron-Bridge @ 067f987d perf recipes: TE userbuffers TP overlap on for the 70B (pretrain, SFT) and 405B
    # recipes on H100 and the 405B one on B200 (RECIPE_TP_OVERLAP); the 8B recipes (TP 1) set it False
    on = {i: modern.scenario_for(bridge.loc[i])["parallel"].get("tp_overlap", False) for i in (0, 9, 11, 75, 74, 80)}
    assert on == {0: True, 9: True, 11: True, 75: True, 74: False, 80: False}
    tp = bridge[bridge["unmappable"] == ""]
    assert (tp["tp_overlap"] == (tp["tensor"] > 1)).all()  # every dense row with TP here runs a recipe with it on
    assert bridge["overlap"].all()  # the Llama recipes overlap the gradient reduction (ddp.overlap_grad_reduce)
    moe = modern.rows("megatron_bridge_moe")
    assert not moe["tp_overlap"].any()  # Qwen3-235B and DeepSeek-V3 on H100 (TP 2): tp_comm_overlap=False
    # DeepSeek-V3's H100 recipes turn the overlapped gradient reduction off, the B200 ones keep it
    assert modern.scenario_for(moe.loc[94])["training"]["overlap"] is False
    assert modern.scenario_for(moe.loc[14])["training"]["overlap"] is True
    assert not modern.recipe_tp_overlap("LLAMA3_70B", "DGX-H100", "LoRA Performance", 2, True)  # not listed: off


def test_megatron_bridge_tp_overlap_hides_the_tensor_parallel_traffic(bridge):
    r = bridge.loc[[9]].copy()  # 26.06 SFT Llama 3 70B on 32 H100, TP 4 with sequence parallelism
    without = modern.evaluate(r.assign(tp_overlap=False))
    with_overlap = modern.evaluate(r)
    assert with_overlap.loc[0, "predicted_time_s"] < without.loc[0, "predicted_time_s"]


def test_megatron_bridge_row_predicted(bridge):
    r = modern.evaluate(bridge.loc[[80]])
    assert r.loc[0, "status"] == "ok"
    # tokens/s per GPU = 128 sequences x 8192 tokens / (step x 8 GPUs)
    assert r.loc[0, "predicted_tps"] == pytest.approx(128 * 8192 / (r.loc[0, "predicted_time_s"] * 8))
    assert r.loc[0, "ape_tps"] == pytest.approx(abs(r.loc[0, "predicted_tps"] / 14451 - 1))


def test_registered():
    assert {"torchtitan-llama3", "torchtitan-llama3-memory", "llmfoundry-mpt", "megatron-bridge",
            "megatron-bridge-moe"} <= set(names())
    with pytest.raises(ValueError, match="dataset: unknown 'mpt'"):
        modern.rows("mpt")


# -- presets of torchtitan's hosts -------------------------------------------------------------------------------

def test_grand_teton_presets_match_their_sources():
    d = load_device("h100-sxm-96gb-hbm2e")
    # torchtitan @ b5bcd76c benchmarks/llama3_h100_202412_torchtitan.md: 96GB HBM2e, 2.4 TB/sec, 500W limit
    assert (d.mem_bw, d.mem_capacity, d.board_power_w) == (2.4e12, 96e9, 500)
    assert "2.4 TB/sec" in d.sources["mem_bw_Bps"] and "500W" in d.sources["board_power_w"]
    # the tensor peaks: H100 SXM5's at the clock the 500 W cap sustains, x (500 / 700)^(1/3), rounded to 0.1 TFLOP/s;
    # inside torchtitan's interval (NVL 835.5 <= peak <= SXM 989.4); the CUDA-core rates stay SXM5's
    sxm = load_device("h100-sxm5-80gb")
    for k in ("tf32", "bf16", "fp16", "fp8", "int8"):
        assert abs(d.peak(k) - sxm.peak(k) * (500 / 700) ** (1 / 3)) <= 0.05e12
    assert 835.5e12 < d.peak("bf16") < 989.4e12 and d.peak("fp32") == sxm.peak("fp32")
    # the same GH100 die: the sustained math rate of the SXM5 (fitted on llm-foundry H100 bf16), its L2 bandwidth;
    # torchao's achievable fractions measured on this board (roofline_utils.py: 0.78 of the GEMM peak, 0.92 of 2.4 TB/s)
    assert d.efficiency.sustained == sxm.efficiency.sustained == 0.90
    assert (d.efficiency.compute, d.efficiency.memory) == (0.78, 0.92)
    assert d.efficiency.l2_factor * d.mem_bw == sxm.efficiency.l2_factor * sxm.mem_bw
    c = load_cluster("grand-teton-h100")
    assert c.device == d and (c.gpus_per_node, c.nics_per_node) == (8, 8)
    assert c.inter.bw == 400e9 / 8  # 400 Gb/s per GPU, bytes per second per direction
    assert c.intra.bw == 450e9 and c.intra.kind == "nvswitch"


def test_megatron_bridge_ab_rows_map_each_case_as_run():
    # the A/B cases keep their own dispatcher, EP overlap and graphs (not a recipe's); throughput from the step time
    ab = modern.rows("megatron_bridge_ab")
    assert ab["group"].tolist()[:3] == ["hybridep-ep-overlap"] * 3 and len(ab) == 5
    off, on = (modern.scenario_for(ab.iloc[i]) for i in (0, 2))
    assert (off["parallel"]["expert"], off["parallel"]["data"], off["parallel"]["moe_dispatcher"]) == (16, 16, "hybridep")
    assert "expert_overlap" not in off["parallel"] and on["parallel"]["expert_overlap"] is True
    assert off["training"]["cuda_graph"] == "moe_router,moe_preprocess" and off["training"]["recompute"] == "none"
    eager, graphed = (modern.scenario_for(ab.iloc[i]) for i in (3, 4))
    assert "cuda_graph" not in eager["training"] and graphed["training"]["cuda_graph"] == "attn,moe_router,moe_preprocess"
    assert ab.loc[0, "measured_tps"] == pytest.approx(1024 * 4096 / 24.7138 / 16)


def test_the_gb200_history_maps_each_step_as_run():
    # DeepSeek-V3 without MTP on 256 GB200 NVL72: TP1 PP8 x 4 virtual stages, EP 32 over the 32 data replicas, the
    # stated recompute modules and graphs; its measure is TFLOP/s, so the speed-ups are TFLOP/s ratios
    from concurrency_model.validate.ranking import ab_pairs
    rows = modern.rows("megatron_dsv3_ab")
    assert len(rows) == 8 and rows["measured_tps"].isna().all()
    sc = modern.scenario_for(rows.iloc[2])
    assert sc["cluster"] == "gb200-nvl72" and sc["model"]["mtp_layers"] == 0
    assert (sc["parallel"]["data"], sc["parallel"]["pipeline"], sc["parallel"]["interleave"],
            sc["parallel"]["expert"], sc["parallel"]["schedule"]) == (32, 8, 4, 32, "interleaved")
    assert (sc["training"]["recompute"], sc["training"]["recompute_modules"]) == ("selective", "mlp,mla_up_proj")
    pairs = ab_pairs(workers=1).set_index("pair")
    assert pairs.loc["gb200-up-proj-recompute", "measured_speedup"] == pytest.approx(610.71 / 566.07)
    assert pairs.loc["gb200-cuda-graphs", "measured_speedup"] == pytest.approx(663.27 / 610.71)



def test_verdicts_by_set_counts_each_outcome_and_names_each_miss(monkeypatch):
    # two sets: one whose runs all ran (one refused: a false refusal), one with runs that went out of memory (one
    # said to fit: the miss that misleads); unmapped rows are left out
    import pandas as pd
    frames = {"a": pd.DataFrame({"dataset": "a", "label": ["a1", "a2", "a3"], "unmappable": ["", "", "no shape"],
                                 "memory_verdict": ["fits", "does not fit", "fits"],
                                 "reason": ["", "memory: 81 GB", ""],
                                 "predicted_peak_bytes": [1e9, 81e9, 1e9]}),
              "b": pd.DataFrame({"dataset": "b", "label": ["b1", "b2", "b3"], "unmappable": "",
                                 "went_oom": [True, True, False], "memory_verdict": ["fits", "does not fit", "at risk"],
                                 "reason": ["", "memory: 90 GB", ""], "predicted_peak_bytes": [70e9, 90e9, 75e9]})}
    monkeypatch.setattr(modern, "rows", lambda name: frames[name])
    monkeypatch.setattr(modern, "evaluate", lambda df, workers=1: df.reset_index(drop=True))
    counts, misses = modern.verdicts_by_set(("a", "b"))
    assert counts.to_dict("index") == {"a: ran": {"fits": 1, "at risk": 0, "does not fit": 1},
                                       "b: ran": {"fits": 0, "at risk": 1, "does not fit": 0},
                                       "b: went out of memory": {"fits": 1, "at risk": 0, "does not fit": 1}}
    assert misses[["label", "memory_verdict", "went_oom"]].to_dict("records") == [
        {"label": "a2", "memory_verdict": "does not fit", "went_oom": False},
        {"label": "b1", "memory_verdict": "fits", "went_oom": True}]


def test_nemo_sft_rows_take_the_fine_tuning_configuration():
    # NeMo-Framework-Launcher's SFT configuration: the optimizer's state in bf16, the examples' virtual stages
    df = modern.rows("nemo")
    sft = df[df["label"].str.contains("SFT")].set_index("model", drop=False)
    assert set(sft["optimizer_dtype"]) == {"bf16"}
    assert sft.loc["llama-2-13b", "interleave"] == 10 and sft.loc["llama-2-70b", "interleave"] == 20
    assert modern.scenario_for(sft.loc["llama-2-70b"])["training"]["optimizer_dtype"] == "bf16"
    pre = df[~df["label"].str.contains("SFT|LoRA")]
    assert pre["optimizer_dtype"].isna().all()  # pre-training keeps mixed-precision Adam
