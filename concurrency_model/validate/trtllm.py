"""TensorRT-LLM's Hopper throughput table against :func:`~concurrency_model.serving.capacity.max_throughput`.

``data/trtllm_perf_overview_hopper.csv`` (origin in ``data/SOURCES.md``): NVIDIA/TensorRT-LLM @ 00f37686,
``docs/source/performance/perf-overview.md``: ``trtllm-bench throughput`` (PyTorch backend) fed every request at once,
uniform input / output lengths (``isl`` / ``osl``), FP8 checkpoints quantized with ModelOpt, on H100 SXM 80GB (DGX
H100) and H200 SXM 141GB (DGX H200), each row's tensor and pipeline degrees; the published figure is "Total Output
Throughput (tokens/sec)". Every row is mapped to a scenario by one rule (:func:`scenario_for`); what the page does
not say is assumed the same for every row (:data:`ASSUMPTIONS`). No constant is fitted on these rows: the presets
with the default efficiency constants (mode ``preset``). APE is a fraction: ``|predicted - measured| / measured``.

Per system, not per GPU: the page's example output prints "Total Output Throughput" beside a separate "Per GPU
Output Throughput" (the two equal on its one-GPU example), and the tables' Llama 3.3 70B rows give more on two H100s
(TP2) than on one H200 (TP1) at every length, as a total over the GPUs does and a figure per GPU would not.

>>> df = rows()
>>> len(df), int((df["unmappable"] == "").sum())
(112, 60)
"""
from __future__ import annotations

import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from ..datasets import data_dir, read_checked
from ..serving.capacity import max_throughput

FILE = "trtllm_perf_overview_hopper.csv"
NUMERIC = ("num_gpus", "tp", "pp", "isl", "osl")
OTHER = ("model", "gpu", "precision", "column_header", "total_output_throughput_tok_per_s", "source_row")
# the page's models -> the toolkit's Hugging Face config presets (meta-llama's config.json); Llama 3.3 70B has the
# layers, widths, heads and vocabulary of Llama 3.1 70B (meta-llama/Llama-3.3-70B-Instruct config.json, as recalled)
MODELS = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.3 70B": "llama-3.1-70b", "Llama 3.1 405B": "llama-3.1-405b"}
# perf-overview.md, "Hardware": H100 SXM 80GB (DGX H100), H200 SXM 141GB (DGX H200)
CLUSTERS = {"H100": "dgx-h100", "H200": "dgx-h200"}
DTYPES = {"FP8": "fp8"}
ASSUMPTIONS = ("Llama 3.1 8B / 3.3 70B / 3.1 405B as the llama-3.1 Hugging Face presets (3.3 70B = 3.1 70B's shape); "
               "FP8 weights and math (ModelOpt FP8 checkpoints, perf-overview.md 'FP8 Models') and an FP8 KV cache "
               "(trtllm-bench gives FP8 checkpoints an FP8 cache: tensorrt_llm/bench/benchmark/utils/general.py "
               "@ 0171265e, _KV_CACHE_MAP); fused (flash) attention; H100 = dgx-h100, H200 = dgx-h200 "
               "(perf-overview.md 'Hardware'); TP and PP from the row; the KV cache at 95% of the memory left free "
               "(the page: 0.95 'in many cases', 0.90 as fallback) and trtllm-bench's own max batch size and max "
               "num tokens (capacity.max_throughput); the figure per system")
UNMAPPABLE = {"Llama 4 Scout": "no Llama 4 preset (a mixture of experts; the page does not give the expert-parallel "
                               "degree either)",
              "Llama 4 Maverick": "no Llama 4 preset (a mixture of experts; the page does not give the "
                                  "expert-parallel degree either)",
              "Qwen3-235B-A22B": "no Qwen3 MoE preset (the page does not give the expert-parallel degree either)"}


def rows() -> pd.DataFrame:
    """The measured rows (schema checked: ``ValueError`` naming file, row and column), with ``measured`` (output
    tokens/s of the system, the file's thousands separators read), ``source_line`` and ``unmappable`` (why a row is
    not predicted, else ``""``)."""
    df = read_checked(data_dir() / FILE, NUMERIC, OTHER)
    measured = pd.to_numeric(df["total_output_throughput_tok_per_s"].astype(str).str.replace(",", ""),
                             errors="coerce")
    if measured.isna().any() or (measured <= 0).any():
        row = int((measured.isna() | (measured <= 0)).to_numpy().argmax())
        raise ValueError(f"{FILE}: row {row + 2}, column 'total_output_throughput_tok_per_s': "
                         f"{df['total_output_throughput_tok_per_s'].iloc[row]!r} is not a positive number")
    df = df.assign(measured=measured.astype(float), source_line=df.index + 2)
    df["unmappable"] = [_why_not(r) for r in df.to_dict("records")]
    return df


def _why_not(r: dict) -> str:
    if r["model"] in UNMAPPABLE:
        return f"{r['model']}: {UNMAPPABLE[r['model']]}"
    for col, known in (("model", MODELS), ("gpu", CLUSTERS), ("precision", DTYPES)):
        if r[col] not in known:
            return f"{col} {r[col]!r}: no mapping (known: {', '.join(known)})"
    if int(r["num_gpus"]) != int(r["tp"]) * int(r["pp"]):
        return f"num_gpus {r['num_gpus']} != tp x pp = {int(r['tp']) * int(r['pp'])}"
    return ""


def scenario_for(r: dict) -> dict:
    """The scenario of a row (one rule for every row; ``ValueError`` with the reason for a row it cannot map)."""
    why = _why_not(r)
    if why:
        raise ValueError(f"{FILE}: row {r['source_line']}: {why}")
    dtype = DTYPES[r["precision"]]
    return {"model": {"hf_config": MODELS[r["model"]], "fused_attention": True}, "cluster": CLUSTERS[r["gpu"]],
            "parallel": {"tensor": int(r["tp"]), "pipeline": int(r["pp"])},
            "inference": {"prompt_len": int(r["isl"]), "decode_len": int(r["osl"]), "dtype": dtype,
                          "kv_dtype": dtype}}


def _predict(r: dict) -> dict:
    try:
        sc = scenario_for(r)
    except ValueError:
        return {"status": "unmappable", "reason": r["unmappable"]}
    try:
        m = max_throughput(sc)
    except ValueError as e:
        return {"status": "refused", "reason": " ".join(str(e).split())}
    return {"status": "ok", "reason": "", "predicted": m.output_tokens_per_s, "slots": m.slots,
            "limited_by": m.limited_by, "max_batch_size": m.max_batch_size, "max_num_tokens": m.max_num_tokens}


def evaluate(df: pd.DataFrame | None = None, workers: int | None = None) -> pd.DataFrame:
    """Every row of ``df`` (default :func:`rows`) predicted: ``status`` (``ok``, ``unmappable``, ``refused``),
    ``reason``, ``predicted`` (output tokens/s of the system), ``slots`` and ``limited_by`` (:class:`~concurrency_model.
    capacity.MaxLoad`), ``ape``, ``label`` and ``group`` (GPU and tensor degree)."""
    df = rows() if df is None else df
    recs = df.to_dict("records")
    if (workers or 1) > 1 and len(recs) > 4:
        with ProcessPoolExecutor(min(workers, os.cpu_count() or 1)) as ex:
            out = list(ex.map(_predict, recs))
    else:
        out = [_predict(r) for r in recs]
    res = pd.concat([df.reset_index(drop=True), pd.DataFrame(out)], axis=1)
    for k in ("predicted", "slots", "max_batch_size", "max_num_tokens"):
        if k not in res:
            res[k] = np.nan
    if "limited_by" not in res:
        res["limited_by"] = ""
    res["ape"] = (res["predicted"] - res["measured"]).abs() / res["measured"]
    res["label"] = [f"{r['model']} {r['gpu']} TP{int(r['tp'])} PP{int(r['pp'])} {r['precision']}, "
                    f"{int(r['isl'])}/{int(r['osl'])}" for r in res.to_dict("records")]
    res["group"] = res["gpu"] + " " + res["model"]
    return res


def summary(res: pd.DataFrame) -> dict:
    """``rows`` (predicted), ``rows_total``, ``median_ape``, ``mean_ape``, ``max_ape`` over the predicted rows."""
    ok = res[res["status"] == "ok"]
    v = ok["ape"].to_numpy(float)
    return {"rows": int(len(ok)), "rows_total": int(len(res)), "median_ape": float(np.median(v)) if len(v) else np.nan,
            "mean_ape": float(v.mean()) if len(v) else np.nan, "max_ape": float(v.max()) if len(v) else np.nan}


__all__ = ["rows", "scenario_for", "evaluate", "summary", "ASSUMPTIONS", "MODELS", "CLUSTERS", "FILE"]
