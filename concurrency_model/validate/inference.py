"""FasterTransformer inference latencies against :func:`~concurrency_model.serving.decoder.infer`.

``data/fastertransformer_13b_inference_latency.csv`` (origin in ``data/SOURCES.md``): a 13B GPT-style
model served by FasterTransformer on one and two A100 40GB, batch 1, a 512-token prompt and 10 generated
tokens; prefill latency, latency per decoding step and total latency. Every row is mapped to a scenario by
one rule (:func:`scenario_for`); what the file does not say is assumed, the same for every row
(``ASSUMPTIONS``). No constant is fitted on these rows: the device and cluster presets with the default
efficiency constants (mode ``preset``). APE is a fraction: ``|predicted - measured| / measured``.

>>> res = evaluate()
>>> len(res), sorted(summary(res))
(2, ['all', 'decode_s_per_token', 'prefill_s', 'total_s'])
"""
from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pandas as pd

from ..datasets import data_dir, read_checked
from ..serving.decoder import infer

FILE = "fastertransformer_13b_inference_latency.csv"
NUMERIC = ("num_gpus", "tensor_parallel", "batch_size", "prompt_len", "generated_tokens", "prefill_latency_ms",
           "decode_latency_per_token_ms", "total_latency_ms")
OTHER = ("model", "framework", "gpu", "source_repo", "source_path", "source_commit")
# cli99/llm-analysis model_configs/test-13b.json (in the llm-analysis 0.2.2 wheel): 40 layers, n_head 40,
# hidden_dim 5120, vocab 50272, ffn_embed_dim 20480, max_seq_len 2048
MODEL_13B = {"kind": "gpt", "layers": 40, "hidden": 5120, "heads": 40, "seq_len": 2048, "vocab": 50272, "ffn": 20480}
METRICS = {"prefill_s": "prefill_latency_ms", "decode_s_per_token": "decode_latency_per_token_ms",
           "total_s": "total_latency_ms"}
ASSUMPTIONS = ("model: llm-analysis test-13b.json as a GPT-2-style decoder (learned positions, pre-LN, GELU MLP, "
               "tied output layer, unfused attention in the prefill); fp16 weights, activations and KV cache "
               "(the source does not state the precision); A100 40GB = the a100-sxm4-40gb preset in a DGX A100 "
               "node (the dgx-a100 cluster preset with 40 GB GPUs: NVSwitch for the tensor-parallel allreduces); "
               "no pipeline parallelism; decode_len = generated_tokens decoding steps after the prefill (the "
               "file's total is prefill + 10 x the per-step latency)")


def cluster_a100_40gb() -> dict:
    """The ``dgx-a100`` cluster preset with A100-SXM4-40GB GPUs (the 320 GB DGX A100, hardware.md 3A)."""
    spec = json.loads(resources.files("concurrency_model.presets.clusters").joinpath("dgx-a100.json").read_text())
    spec["name"] = "dgx-a100-40gb (assumed)"
    spec["device"] = "a100-sxm4-40gb"
    return spec


def rows() -> pd.DataFrame:
    """The measured rows (schema checked: ``ValueError`` naming file, row and column)."""
    df = read_checked(data_dir() / FILE, NUMERIC, OTHER)
    return df.assign(source_row=df.index + 2)


def model_for(r) -> dict:
    """The model spec of a row (``ValueError`` for a model the rule does not know)."""
    if not str(r["model"]).startswith("13B GPT-style"):
        raise ValueError(f"{FILE}: row {r['source_row']}, column 'model': no mapping for {r['model']!r}")
    return dict(MODEL_13B)


def scenario_for(r) -> dict:
    """The ``infer`` scenario of a row (one rule for every row)."""
    if int(r["num_gpus"]) != int(r["tensor_parallel"]):
        raise ValueError(f"{FILE}: row {r['source_row']}: num_gpus != tensor_parallel (no pipeline is assumed)")
    return {"model": model_for(r), "cluster": cluster_a100_40gb(),
            "parallel": {"tensor": int(r["tensor_parallel"]), "pipeline": 1},
            "inference": {"batch": int(r["batch_size"]), "prompt_len": int(r["prompt_len"]),
                          "decode_len": int(r["generated_tokens"]), "dtype": "fp16"}}


def evaluate(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per measured row: measured and predicted seconds of each metric and its APE."""
    df = rows() if df is None else df
    out = []
    for r in df.to_dict("records"):
        pred = infer(scenario_for(r)).to_dict()
        rec = {"source_row": r["source_row"], "label": f"13B tp{int(r['tensor_parallel'])} on {r['gpu']}, batch "
               f"{int(r['batch_size'])}, prompt {int(r['prompt_len'])}, {int(r['generated_tokens'])} tokens",
               "tensor": int(r["tensor_parallel"])}
        for key, col in METRICS.items():
            measured = float(r[col]) / 1e3
            rec[f"measured_{key}"] = measured
            rec[f"predicted_{key}"] = pred[key]
            rec[f"ape_{key}"] = abs(pred[key] - measured) / measured
            for q in ("p10", "p90"):  # the prediction's 80% band (inference.predict)
                rec[f"{q}_{key}"] = pred[f"{key[:-2]}_{q}_s" if key.endswith("_s") else f"{key}_{q}"]
        out.append(rec)
    return pd.DataFrame(out)


def summary(res: pd.DataFrame) -> dict:
    """Per metric and over all of them (``all``): ``rows``, ``median_ape``, ``mean_ape``, ``max_ape``."""
    def stats(v) -> dict:
        v = np.asarray(v, dtype=float)
        return {"rows": int(len(v)), "median_ape": float(np.median(v)), "mean_ape": float(v.mean()),
                "max_ape": float(v.max())}

    out = {k: stats(res[f"ape_{k}"]) for k in METRICS}
    out["all"] = stats(np.concatenate([res[f"ape_{k}"].to_numpy() for k in METRICS]))
    return out


def frame(res: pd.DataFrame | None = None) -> pd.DataFrame:
    """The rows in the shape of :mod:`.registry` (``dataset, mode, row, label, group, measured, predicted,
    unit, ape, status, note``), one per measured row and metric, for registering the dataset there."""
    res = evaluate() if res is None else res
    parts = []
    for key in METRICS:
        parts.append(pd.DataFrame({"dataset": "fastertransformer-13b", "mode": "preset", "row": res["source_row"],
                                   "label": res["label"] + f": {key}", "group": key,
                                   "measured": res[f"measured_{key}"], "predicted": res[f"predicted_{key}"],
                                   "unit": "s", "ape": res[f"ape_{key}"], "status": "ok", "note": "",
                                   "p10": res[f"p10_{key}"], "p90": res[f"p90_{key}"]}))
    return pd.concat(parts, ignore_index=True)


__all__ = ["rows", "scenario_for", "evaluate", "summary", "frame", "cluster_a100_40gb", "MODEL_13B", "ASSUMPTIONS"]
