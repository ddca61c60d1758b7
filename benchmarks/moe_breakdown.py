"""Where the Megatron-Bridge mixture-of-experts rows' predicted step goes, against the measured step (issue 36).

For every mappable row of the set ``megatron_bridge_moe`` (:mod:`concurrency_model.validate.modern`), at the recompute
the adapter chose: the predicted step split into the slowest stage's parts (attention cores, the experts' GEMMs, the
other GEMMs, the output layer, the element-wise and routing kernels, the EP all-to-alls, all times the microbatches a
step runs) and the rest of the step (bubble, exposed data-parallel sync, optimizer); the measured step
(``global_batch x seq / GPUs / tokens-per-s-per-GPU``); the seconds the model leaves out (``missing_s``); and
those seconds per MoE layer and per 4,096 tokens of a microbatch (``gap_ms_per_layer_4k``). The last column,
``gap_tflop_at_peak``, is that gap times the board's dense 16-bit peak: the work a board would do at its
datasheet rate in the missing time. A gap that is one number of TFLOP across boards scales with the board's
math rate (GPU work the model lacks or prices too cheaply); a gap that is one number of milliseconds does not
(host, latency).

``--host`` prints the predicted step of a few rows at host seconds per kernel 0, 60 (the fitted
``parallel.host.HOST_S_PER_KERNEL``), 120 and 240 us (``training.host_overhead_s``), and the controlled
HybridEP pair of ``benchmarks/moe_dispatch.py`` (Qwen3-30B-A3B on 16 H100 in BF16, EP 16: Megatron-Bridge
@ 067f987d ``skills/nemo-mbridge-perf-expert-parallel-overlap/SKILL.md``) beside them.

    python benchmarks/moe_breakdown.py [--model gpt-oss-120b] [--host]
"""
from __future__ import annotations

import argparse
import copy

import pandas as pd

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.training.estimate import estimate
from concurrency_model.validate.modern import evaluate, rows, scenario_for

PARTS = ("attention_s", "expert_gemm_s", "other_gemm_s", "lm_head_s", "elementwise_s", "ep_comm_s")
GAP_TOKENS = 4096  # the gap is quoted per this many tokens of a microbatch


def part_of(layer: str, kind: str) -> str:
    """The part of :data:`PARTS` a layer of :meth:`Estimate.layers` counts in (its compute; EP seconds apart).

    >>> part_of("layers.3.mlp.experts.w1", "linear"), part_of("lm_head", "linear"), part_of("layers.3.qkv", "linear")
    ('expert_gemm_s', 'lm_head_s', 'other_gemm_s')
    >>> part_of("layers.3.attention", "attention"), part_of("layers.3.mlp.dispatch", "moe_dispatch")
    ('attention_s', 'elementwise_s')
    """
    if kind == "attention":
        return "attention_s"
    if kind == "linear":
        return "expert_gemm_s" if ".experts." in layer else "lm_head_s" if layer == "lm_head" else "other_gemm_s"
    return "elementwise_s"


def breakdown(r: dict, recompute: str) -> dict:
    """The predicted step of row ``r`` (of :func:`rows`) split into :data:`PARTS` and ``rest_s``, with the measured
    step, the missing seconds and the gap per MoE layer (module doc)."""
    sc = scenario_for(r)
    mode = recompute.split(" ")[0]  # "selective (modules)": the recipe's modules, which scenario_for set
    sc["training"]["recompute"] = mode
    if mode != "selective":
        sc["training"].pop("recompute_modules", None)
    e = estimate(sc)
    t = e.layers()
    m = r["global_batch"] // (r["data"] * r["microbatch"])  # microbatches a stage runs in a step
    out = dict.fromkeys(PARTS, 0.0)
    for _, x in t.iterrows():
        out[part_of(x["layer"], x["kind"])] += m * (x["forward_s"] + x["backward_s"] + x["recompute_s"] +
                                                   x["tensor_comm_s"] + x["context_comm_s"])
        out["ep_comm_s"] += m * x["expert_comm_s"]
    out["rest_s"] = e.step_time_s - sum(out.values())
    moe_layers = int((t["kind"] == "moe_dispatch").sum())
    measured = r["global_batch"] * r["seq"] / r["gpus"] / r["measured_tps"]
    missing = measured - e.step_time_s
    per_layer = missing / (m * max(1, moe_layers)) * GAP_TOKENS / (r["microbatch"] * r["seq"])
    peak = load_cluster(r["cluster"]).device.peak_flops["bf16"]
    return {"label": r["label"], "dtype": r["dtype"], "mbs": r["microbatch"], "recompute": recompute, **out,
            "predicted_s": e.step_time_s, "measured_s": measured, "missing_s": missing,
            "gap_ms_per_layer_4k": 1e3 * per_layer, "gap_tflop_at_peak": per_layer * peak / 1e12}


def table(model: str | None = None) -> pd.DataFrame:
    """:func:`breakdown` of every mappable MoE row (of ``model``, a preset name, if given)."""
    df = rows("megatron_bridge_moe")
    df = df[df["unmappable"] == ""]
    if model:
        df = df[df["model"] == model]
    res = evaluate(df)
    out = [breakdown(r, r["recompute_used"]) for r in res.to_dict("records") if r["status"] == "ok"]
    return pd.DataFrame(out)


def host_sweep(labels=("26.04.01 GPT OSS 120B on 64 DGX-H100", "26.04.01 GPT OSS 120B on 64 DGX-B300",
                       "26.04.01 Qwen3_30B_a3B on 16 DGX-H100")) -> pd.DataFrame:
    """Predicted steps at host seconds per kernel 0 / 60 / 120 / 240 us (module doc), recompute none."""
    df = rows("megatron_bridge_moe")
    skill = {"model": {"hf_config": "qwen3-30b-a3b", "seq_len": 4096, "fused_attention": "cudnn"},
             "cluster": "dgx-h100", "parallel": {"data": 16, "expert": 16, "microbatch_size": 1, "global_batch": 1024,
                                                 "moe_dispatcher": "hybridep"},
             "training": {"dtype": "bf16", "recompute": "selective", "zero_stage": 1, "framework": "megatron"}}
    cases = [("SKILL.md Qwen3-30B-A3B BF16, overlap off", skill, 24.7138)]
    for lab in labels:
        r = df[df["label"] == lab].to_dict("records")[0]
        sc = scenario_for(r)
        sc["training"]["recompute"] = "none"
        cases.append((lab, sc, r["global_batch"] * r["seq"] / r["gpus"] / r["measured_tps"]))
    out = []
    for lab, sc, measured in cases:
        rec = {"case": lab, "measured_s": measured}
        for h in (0.0, 60e-6, 120e-6, 240e-6):
            s = copy.deepcopy(sc)
            s["training"]["host_overhead_s"] = h
            rec[f"host_{round(h * 1e6)}us_s"] = estimate(s).step_time_s
        out.append(rec)
    return pd.DataFrame(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", help="one preset, e.g. gpt-oss-120b")
    ap.add_argument("--host", action="store_true", help="the host-overhead sweep (module doc)")
    args = ap.parse_args()
    pd.set_option("display.width", 250)
    pd.set_option("display.max_columns", 30)
    print(table(args.model).round(2).to_string(index=False))
    if args.host:
        print(host_sweep().round(2).to_string(index=False))


if __name__ == "__main__":
    main()
