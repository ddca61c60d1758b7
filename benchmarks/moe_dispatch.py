"""MoE token dispatchers and the EP all-to-all overlap (issue 36): what ``parallel.moe_dispatcher`` and
``parallel.expert_overlap`` change on the Megatron-Bridge mixture-of-experts rows, and one controlled measurement.

1. The controlled pair: Megatron-Bridge's EP-overlap skill page (NVIDIA-NeMo/Megatron-Bridge @ 067f987d
   ``skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md``, "HybridEP Production-Shape Benchmark"): Qwen3
   30B-A3B pretraining on 16 H100 (2 DGX nodes), BF16, sequence 4,096, TP1 PP1 EP16, MBS 1, GBS 1,024, forced
   balanced routing, flex + HybridEP; step 24.7138 s with the overlap off, 20.9920 s (independent validation run)
   with it on. The page's recompute is not stated; ``selective`` here. The same page's "Correctness-First alltoall
   Benchmark": the same model and 16 H100, EP16, BF16, GBS 1,024, the NCCL ``alltoall`` dispatcher, CUDA graphs off,
   ``moe_permute_fusion`` off (not modelled); steady mean 41.25 s without the overlap, 31.31 s with it (SFT of
   sequence 4,096 taken as pre-training; MBS 1 as the HybridEP run's).
2. The Megatron-Bridge MoE rows (``concurrency_model.validate.modern``, set ``megatron_bridge_moe``): APE of
   tokens/s per GPU with every row as the dispatcher ``alltoall`` without overlap (the model before the fields)
   and as the recipes set them (``MOE_RUNTIME``), the median per model and over all rows.

    python benchmarks/moe_dispatch.py [--rows]
"""
from __future__ import annotations

import argparse

import pandas as pd

from concurrency_model.training.estimate import estimate
from concurrency_model.validate.modern import evaluate, rows

# step seconds, SKILL.md tables: (dispatcher, overlap) -> measured
SKILL = {"hybridep, overlap off": ("hybridep", False, 24.7138), "hybridep, overlap on": ("hybridep", True, 20.9920),
         "alltoall, overlap off": ("alltoall", False, 41.25), "alltoall, overlap on": ("alltoall", True, 31.31)}


def skill_pair() -> pd.DataFrame:
    """The controlled pairs of the module doc: measured against predicted step seconds."""
    out = []
    for case, (dispatcher, overlap, measured) in SKILL.items():
        sc = {"model": {"hf_config": "qwen3-30b-a3b", "seq_len": 4096, "fused_attention": "cudnn"},
              "cluster": "dgx-h100",
              "parallel": {"data": 16, "expert": 16, "microbatch_size": 1, "global_batch": 1024,
                           "moe_dispatcher": dispatcher, "expert_overlap": overlap},
              "training": {"dtype": "bf16", "recompute": "selective", "zero_stage": 1, "framework": "megatron"}}
        e = estimate(sc)
        out.append({"case": case, "measured_step_s": measured, "predicted_step_s": e.step_time_s,
                    "expert_comm_s": e.breakdown["expert_parallel_comm_s"], "compute_s": e.breakdown["compute_s"],
                    "error_%": 100 * (e.step_time_s / measured - 1)})
    return pd.DataFrame(out)


def moe_rows() -> pd.DataFrame:
    """Every mappable MoE row predicted twice: as ``alltoall`` without overlap, and as the recipes run it."""
    df = rows("megatron_bridge_moe")
    before = df.copy()
    before["moe_dispatcher"], before["expert_overlap"] = "alltoall", False
    a, b = evaluate(before), evaluate(df)
    keep = ["label", "model", "cluster", "expert", "moe_dispatcher", "expert_overlap", "measured_tps"]
    out = b[keep].copy()
    out["tps_alltoall"], out["tps_recipe"] = a["predicted_tps"], b["predicted_tps"]
    out["ape_alltoall_%"], out["ape_recipe_%"] = 100 * a["ape_tps"], 100 * b["ape_tps"]
    return out[(a["status"] == "ok") & (b["status"] == "ok")]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--rows", action="store_true", help="print every row, not only the medians")
    args = ap.parse_args()
    pd.set_option("display.width", 200)
    print(skill_pair().round(2).to_string(index=False))
    r = moe_rows()
    if args.rows:
        print(r.round(1).to_string(index=False))
    med = r.groupby("model")[["ape_alltoall_%", "ape_recipe_%"]].median()
    med.loc["all rows"] = r[["ape_alltoall_%", "ape_recipe_%"]].median()
    med["rows"] = list(r.groupby("model").size()) + [len(r)]
    print(med.round(1).to_string())


if __name__ == "__main__":
    main()
