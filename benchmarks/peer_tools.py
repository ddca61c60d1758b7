"""Peer tools on the training-step datasets, next to this toolkit's figures (issue 5: "next to the same
figures for any peer tool you can run here").

The one peer that installs here is **llm-analysis** (Cheng Li, ``cli99/llm-analysis``; PyPI 0.2.2,
Apache-2.0): its ``LLMAnalysis.training`` gives an iteration's latency as the step's FLOP (forward,
backward, recompute) over ``tensor x pipeline`` GPUs at ``flops_efficiency`` x the GPU's fp16 peak, times
the gradient-accumulation steps (no communication, bubble or host time). Its default efficiency is 1;
its source notes that "FLOPS efficiency achieved by Megatron-LM is ~0.5 for LLM training"
(``constant.py``), so both are run. vTrain, calculon and ASTRA-sim are not on PyPI and cannot be installed
here; vTrain's own published MAPE (8.37% single node, 14.73% multi-node) is quoted by
``training_accuracy.py``.

The rows, the mapping and the metric (iteration time, or TFLOP/s per GPU by Narayanan et al.'s Eq. (3))
are ``training_accuracy.py``'s; this toolkit's figures are computed again here, so the columns compare
the same rows. Not a project dependency: install it (without its ``transformers`` dependency, which only
fetches Hugging Face configs) with

    pip install llm-analysis==0.2.2 --no-deps && pip install "fire>=0.5,<0.6"
    python benchmarks/peer_tools.py [--markdown] [--workers N]
"""
from __future__ import annotations

import argparse
import json
import logging
import sys
import time

import numpy as np
import pandas as pd

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.validate import training as vt

SINGLE_EVERY = 2  # as training_accuracy.py
PEER_GPU = {"a100-sxm4-80gb": "a100-sxm-80gb", "a100-sxm4-40gb": "a100-sxm-40gb", "v100-sxm2-32gb": "v100-sxm-32gb"}
EFFICIENCIES = (1.0, 0.5)  # llm-analysis's default, and its note for Megatron-LM


def _device(cluster) -> str:
    if isinstance(cluster, dict):
        d = cluster["device"]
        return d if isinstance(d, str) else d["name"]
    return load_cluster(cluster).device.name


def llm_analysis_time_s(r: dict, efficiency: float) -> float:
    """llm-analysis's iteration latency for one row (the same model, parallelism and batch)."""
    from llm_analysis.analysis import ActivationRecomputation, LLMAnalysis
    from llm_analysis.config import ModelConfig, ParallelismConfig, get_gpu_config_by_name
    m = ModelConfig(name="gpt", num_layers=int(r["layers"]), n_head=int(r["heads"]), hidden_dim=int(r["hidden"]),
                    vocab_size=int(r["vocab"]) if pd.notna(r["vocab"]) else vt.VOCAB, max_seq_len=int(r["seq"]))
    par = ParallelismConfig(tp_size=int(r["tensor"]), pp_size=int(r["pipeline"]), dp_size=int(r["data"]))
    a = LLMAnalysis(m, get_gpu_config_by_name(PEER_GPU[_device(r["cluster"])]), parallelism_config=par,
                    flops_efficiency=efficiency)
    recompute = {"full": ActivationRecomputation.FULL, "selective": ActivationRecomputation.SELECTIVE}.get(
        r["recompute"], ActivationRecomputation.NONE)
    s = a.training(batch_size_per_gpu=int(r["microbatch"]), global_batch_size=int(r["global_batch"]),
                   seq_len=int(r["seq"]), activation_recomputation=recompute)
    return float(s["latency_per_iter"])


def _ape(res: pd.DataFrame, time_s: pd.Series) -> pd.Series:
    """APE (%) on each row's metric: iteration time, or Eq. (3) TFLOP/s per GPU."""
    by_time = res["dataset"].map(vt.METRIC) == "iteration_time"
    tflops = res["formula_flop"] / (time_s * res["gpus"]) / 1e12
    return pd.Series(np.where(by_time, (time_s / res["measured_time_s"] - 1).abs(),
                              (tflops / res["measured_tflops"] - 1).abs()) * 100, index=res.index)


def compare(workers: int | None = None) -> pd.DataFrame:
    """Per dataset: rows, and median / mean APE of this toolkit and of llm-analysis at each efficiency."""
    df = pd.concat([vt.sample(vt.vtrain_held_out_rows(), SINGLE_EVERY), vt.vtrain_rows("multi"), vt.megatron_rows(),
                    vt.narayanan_rows()], ignore_index=True)
    res = vt.evaluate(df, workers=workers)
    res = res[res["status"] == "ok"].copy()
    cols = {"concurrency_model": res["ape"]}
    for eff in EFFICIENCIES:
        t = pd.Series([llm_analysis_time_s(r, eff) for r in res.to_dict("records")], index=res.index)
        cols[f"llm-analysis (flops_efficiency {eff:g})"] = _ape(res, t)
    ape = pd.DataFrame(cols)
    ape["dataset"] = res["dataset"]
    g = ape.groupby("dataset", sort=False)
    out = pd.concat({"median": g.median(), "mean": g.mean()}, axis=1).round(1)
    out.insert(0, ("rows", ""), g.size())
    return out


def markdown(table: pd.DataFrame) -> str:
    tools = [c for c in table["median"].columns]
    head = "| dataset | rows | " + " | ".join(f"{t} median / mean %" for t in tools) + " |"
    lines = [head, "|" + " --- |" * (len(tools) + 2)]
    for name, r in table.iterrows():
        cells = " | ".join(f"{r[('median', t)]:.1f} / {r[('mean', t)]:.1f}" for t in tools)
        lines.append(f"| {name} | {int(r[('rows', '')])} | {cells} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--markdown", action="store_true", help="print the README table")
    ap.add_argument("--workers", type=int, default=None)
    args = ap.parse_args(argv)
    logging.getLogger("__name__").setLevel(logging.ERROR)  # llm-analysis's logger has this literal name
    try:
        import llm_analysis  # noqa: F401
    except ImportError:
        print("peer_tools: llm-analysis is not installed; pip install llm-analysis==0.2.2 --no-deps && "
              "pip install 'fire>=0.5,<0.6'", file=sys.stderr)
        return 2
    t0 = time.perf_counter()
    table = compare(args.workers)
    if args.markdown:
        print(markdown(table))
    else:
        print(json.dumps({"elapsed_s": round(time.perf_counter() - t0, 1),
                          "median_ape": table["median"].to_dict("index"), "mean_ape": table["mean"].to_dict("index"),
                          "rows": table[("rows", "")].to_dict()}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
