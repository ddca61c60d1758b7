"""Measured training iterations against :func:`~concurrency_model.training.estimate.estimate`.

Four published sets (``data/``; origins in ``data/SOURCES.md``):

* ``vtrain_single`` (1,440 rows, 2-8 A100 in one node) and ``vtrain_multi`` (109 rows, 64-512 A100):
  Megatron-DeepSpeed iteration times from vTrain's ground truth (Bang et al., MICRO 2024). Compared on
  the iteration time.
* ``megatron_2020``: the Megatron-LM README of 2020-09 (GPT-2 1B-8B, tensor parallel 1-8, on one DGX-2
  V100 node, one DGX-A100 node, and 128-way data parallel on DGX-A100). Compared on the iteration time.
* ``megatron_2021``: the Megatron-LM README tables of 2021-01 and 2021-04 (1.7B-1T on Selene), and
  ``narayanan_table2``: Narayanan et al. 2021 (SC21) Table 2, PTD parallelism vs ZeRO-3 for 175B and
  530B. Both publish achieved TFLOP/s per GPU counted with Narayanan et al.'s Eq. (3) (training-formulas
  §1.2), ``F = 96 B s l h^2 (1 + s/6h + V/16lh)``, which includes the recomputed forward pass. The
  prediction is compared like with like: ``F`` of the row divided by the predicted step time and the GPU
  count (:func:`narayanan_flops`), against the published TFLOP/s.

Every row is mapped to a scenario by one rule per set (:func:`scenario_for`), never per row. What the
files do not say is assumed, the same for every row of a set (``ASSUMPTIONS``). Rows the estimate
refuses (memory, divisibility) or that cannot be mapped (no time or shape published) are kept with
``status`` and ``reason``.
"""
from __future__ import annotations

import json
import os
from concurrent.futures import ProcessPoolExecutor
from importlib import resources

import numpy as np
import pandas as pd

from ..datasets import load
from ..training.estimate import estimate

VOCAB = 51200  # Megatron's GPT-2 BPE vocabulary padded (50257 -> 51200), as in the Megatron README rows
DATASETS = ("vtrain_single", "vtrain_multi", "megatron_2020", "megatron_2021", "narayanan_table2")
METRIC = {"vtrain_single": "iteration_time", "vtrain_multi": "iteration_time", "megatron_2020": "iteration_time",
          "megatron_2021": "tflops_per_gpu", "narayanan_table2": "tflops_per_gpu"}
TARGETS = {"vtrain_single": ("mean_ape", 8.0), "vtrain_multi": ("mean_ape", 12.0),
           "megatron_2021": ("median_ape", 10.0), "narayanan_table2": ("median_ape", 10.0)}
PUBLISHED_SIMULATOR_MAPE = {"vtrain_single": 8.37, "vtrain_multi": 14.73}  # vTrain's own (Bang et al. 2024)
ASSUMPTIONS = {
    "vtrain": "cluster dgx-a100 (A100-SXM4-80GB; the files give no memory size), multi-node with 800 Gb/s a node as "
              "vTrain's configurations of those runs state (4 HDR ports, vtrain_multi_cluster), vocab 51200, fp16, "
              "Adam, "
              "schedule 1f1b, no sequence parallelism, unfused attention (Megatron's fused scale-mask-softmax where "
              "its conditions hold, parallel.host.softmax_fused), ZeRO 0, gradient all-reduce after the "
              "backward pass (Megatron's local DDP); full recompute in both sets. vTrain's own configurations "
              "of these runs say so: all 1,440 config/validation/single/*.json and the 108 config/validation/multi/"
              "*.json (VIA-Research/vTrain @ f8dda847) have use_checkpoint true, use_gradient_bucket false, "
              "pipeline_scheduling 1f1b (and without recompute 83 of the 109 multi-node runs would need "
              "92-1,000+ GB per GPU)",
    "megatron_2020": "fp16, Adam, full recompute (the published TFLOP/s equal Eq. (3) over the time, which "
                     "counts it), microbatch = global batch / data parallel (no accumulation), vocab 51200, "
                     "pipeline 1; DGX-A100 of 2020-09 = A100-SXM4-40GB; DGX-2 = a cluster dict of 16 "
                     "v100-sxm2-32gb on NVSwitch (150 GB/s per GPU per direction, hardware.md 3A), the "
                     "dgx1-v100 preset's other numbers",
    "megatron_2021": "Selene = dgx-a100 (A100-SXM4-80GB, Narayanan et al. 2021 §5); model parallel split "
                     "tensor = min(MP, 8), pipeline = MP / tensor (matches Narayanan et al. Table 1); "
                     "microbatch 1; schedule 1f1b; full recompute; fp16; Adam; heads of the 2021-04 rows "
                     "taken from the 2021-01 row of the same hidden size",
    "narayanan_table2": "Selene = dgx-a100 (A100-SXM4-80GB); PTD: tensor x pipeline from the llm-analysis "
                        "run scripts (8x12, 8x35), data = GPUs / 96 or / 280; ZeRO-3: tensor = pipeline = 1, "
                        "data = GPUs, zero_stage 3 under DeepSpeed of March 2021 (framework deepspeed-0.3, v0.3.13, "
                        "configured as DeepSpeedExamples @ 2cd968f ran Megatron's GPT under ZeRO-3); "
                        "175B = 96 x 12288, 96 heads; 530B = 105 x 20480, "
                        "128 heads; seq 2048, vocab 51200; full recompute; fp16; Adam; 1f1b",
}

DGX2 = {
    "name": "dgx-2 (assumed)", "device": "v100-sxm2-32gb", "gpus_per_node": 16, "nodes": 1, "nics_per_node": 8,
    "intra": {"name": "nvlink2-nvswitch", "kind": "nvswitch", "bw_Bps": 150e9, "latency_s": 2e-6,
              "efficiency": 0.8, "sources": {"bw_Bps": "hardware.md 3A DGX-2: 6 NVLinks per GPU, 150 GB/s per "
                                             "direction", "efficiency": "as dgx1-v100 (assumed)"}},
    "inter": {"name": "infiniband-edr", "kind": "infiniband", "bw_Bps": 12.5e9, "latency_s": 5e-6,
              "efficiency": 0.9, "sources": {"bw_Bps": "hardware.md 3A DGX-2: 8 x 100 Gb/s InfiniBand"}},
}


def gpt(layers, hidden, heads, seq, vocab=VOCAB) -> dict:
    return {"kind": "gpt", "layers": int(layers), "hidden": int(hidden), "heads": int(heads), "seq_len": int(seq),
            "vocab": int(vocab)}


def narayanan_flops(batch, seq, layers, hidden, vocab=VOCAB):
    """Narayanan et al. 2021 Eq. (3): FLOP per iteration with full recompute (training-formulas §1.2).

    >>> round(float(narayanan_flops(8, 1024, 24, 1920, 51200)) / 1.121 / 1e12, 1)   # Megatron README 1B on V100: 71.9
    71.9
    """
    b, s, l, h, v = (np.asarray(x, dtype=float) for x in (batch, seq, layers, hidden, vocab))
    return 96 * b * s * l * h ** 2 * (1 + s / (6 * h) + v / (16 * l * h))


def _scenario(model, cluster, data, tensor, pipeline, micro, global_batch, recompute="none", zero=0, dtype="fp16"):
    # every set here ran Megatron-LM or Megatron-DeepSpeed, which split the layers evenly over the pipeline stages,
    # the embedding on the first and the output layer on the last (NVIDIA/Megatron-LM @ a8d172b3, 2021-04,
    # megatron/model/transformer.py ParallelTransformer: num_layers // pipeline size, asserted to divide;
    # microsoft/Megatron-DeepSpeed @ f4157bea megatron/model/transformer.py _get_num_layers, and its GPTModelPipe's
    # partition_method "type:transformer" under DeepSpeed's pipeline engine)
    split = {"stage_split": "layers"} if int(pipeline) > 1 else {}
    return {"model": model, "cluster": cluster,
            "parallel": {"data": int(data), "tensor": int(tensor), "pipeline": int(pipeline),
                         "microbatch_size": int(micro), "global_batch": int(global_batch), "schedule": "1f1b", **split},
            # Megatron-LM's local DDP (the default of the 2020-2021 releases measured here) all-reduces the
            # gradients after the backward pass, and DeepSpeed's ZeRO-1/2 leave overlap_comm off by default:
            # no overlap; ZeRO-3 prefetches parameters and reduces gradients during the passes. Every set here
            # ran in 2020-2021: ZeRO-3 is DeepSpeed of that time (deepspeed-0.3, :mod:`..parallel.runtime`)
            "training": {"dtype": dtype, "recompute": recompute, "optimizer": "adam", "zero_stage": zero,
                         "overlap": zero == 3, "framework": "deepspeed-0.3" if zero == 3 else "megatron"}}


def _vtrain(name: str) -> pd.DataFrame:
    df = load(name)
    out = pd.DataFrame({
        "dataset": "vtrain_single" if name.endswith("single") else "vtrain_multi",
        "source_row": df.index + 2, "gpus": df["# GPUs"], "global_batch": df["global batch"],
        "microbatch": df["micro batch"], "hidden": df["hidden size"], "heads": df["attention heads"],
        "layers": df["# layers"], "seq": df["sequence length"], "vocab": VOCAB,
        "tensor": df["tensor parallelism"], "data": df["data parallelism"], "pipeline": df["pipeline parallelism"],
        "measured_time_s": df["iteration time (ms)"] * 1e-3, "measured_tflops": np.nan,
        # full recompute in both sets: vTrain's configurations of these runs have use_checkpoint true (ASSUMPTIONS)
        "cluster": "dgx-a100", "recompute": "full", "zero_stage": 0, "label": "",
    })
    if name.endswith("multi"):  # the nodes' 800 Gb/s (ASSUMPTIONS): one node's cluster dict, nodes from the GPUs
        out["cluster"] = [vtrain_multi_cluster()] * len(out)
    return out


def vtrain_multi_cluster() -> dict:
    """The cluster of vTrain's multi-node runs: a DGX A100 node whose network totals 800 Gb/s, as every one of its
    configurations says (VIA-Research/vTrain @ f8dda847 ``config/validation/multi/*.json``: ``inter_node_bandwidth``
    800, "total bandwidth of inter-node communication in Gbps", ``src/config.py``), half the ``dgx-a100`` preset's
    8 x 200 Gb/s: taken as 4 of the preset's HDR 200 Gb/s ports (the split is not stated).

    >>> c = vtrain_multi_cluster(); c["nics_per_node"] * c["inter"]["bw_Bps"] * 8 / 1e9   # Gb/s a node
    800.0
    """
    spec = dgx_a100_spec()
    spec["nics_per_node"] = 4
    spec["inter"] = {**spec["inter"], "sources": {**spec["inter"]["sources"], "nics": "vTrain's 800 Gb/s a node"}}
    return {"name": "dgx-a100 (4 x HDR: vTrain's 800 Gb/s a node)", **spec}


def vtrain_rows(which: str = "single") -> pd.DataFrame:
    """vTrain ground truth, one row per measured iteration (``which``: ``single`` or ``multi``)."""
    return _vtrain(f"vtrain_ground_truth_{which}")


def vtrain_fit_rows() -> pd.DataFrame:
    """The even rows (file order) of vTrain single node: the rows :data:`~concurrency_model.parallel.
    host.HOST_S_PER_KERNEL` is fitted on (``benchmarks/fit_host_overhead.py``)."""
    return vtrain_rows("single").iloc[0::2].reset_index(drop=True)


def vtrain_held_out_rows() -> pd.DataFrame:
    """The odd rows of vTrain single node, which no constant is fitted on: the ones validated."""
    return vtrain_rows("single").iloc[1::2].reset_index(drop=True)


def megatron_rows() -> pd.DataFrame:
    """Megatron-LM README rows: ``megatron_2020`` (iteration times) and ``megatron_2021`` (TFLOP/s)."""
    df = load("megatron_readme_scaling")
    heads_by_hidden = df[df["attention_heads"].notna()].groupby("hidden_size")["attention_heads"].first()
    rows = []
    for i, r in df.iterrows():
        tid = r["table_id"]
        base = {"source_row": i + 2, "label": f"{tid} {r['model_label']}", "gpus": r["num_gpus"],
                "global_batch": r["global_batch_size"], "hidden": r["hidden_size"], "layers": r["num_layers"],
                "seq": r["seq_len"], "vocab": r["vocab_size"], "measured_time_s": r["iteration_time_ms"] * 1e-3,
                "measured_tflops": r["achieved_tflops_per_gpu"], "recompute": "full", "zero_stage": 0}
        heads = r["attention_heads"] if pd.notna(r["attention_heads"]) else heads_by_hidden.get(r["hidden_size"])
        mp = r["model_parallel_size"]
        if tid.startswith("2020_"):
            t, p = r["tensor_mp"], 1
            cluster = DGX2 if "dgx2" in tid else {"name": "dgx-a100 (40GB)", **dgx_a100_40gb()}
            dataset = "megatron_2020"
        else:
            t = min(mp, 8)
            p = mp // t
            cluster, dataset = "dgx-a100", "megatron_2021" if tid.startswith("2021") else "megatron_2020"
        d = r["data_parallel"]
        micro = r["global_batch_size"] / d if tid.startswith("2020_") else 1
        rows.append({**base, "dataset": dataset, "heads": heads, "tensor": t, "pipeline": p, "data": d,
                     "microbatch": micro, "cluster": cluster})
    return pd.DataFrame(rows)


def dgx_a100_spec() -> dict:
    """The ``dgx-a100`` preset's file as a dict, without its name."""
    spec = json.loads(resources.files("concurrency_model.presets.clusters").joinpath("dgx-a100.json").read_text())
    spec.pop("name")
    return spec


def dgx_a100_40gb() -> dict:
    spec = dgx_a100_spec()
    spec["device"] = "a100-sxm4-40gb"
    return spec


NARAYANAN_SHAPES = {174.6: (96, 12288, 96), 529.6: (105, 20480, 128)}  # layers, hidden, heads


def narayanan_rows() -> pd.DataFrame:
    """Narayanan et al. 2021 Table 2: PTD parallelism and ZeRO-3, achieved TFLOP/s per GPU."""
    df = load("narayanan2021_table2_ptd_vs_zero3")
    rows = []
    for i, r in df.iterrows():
        layers, hidden, heads = NARAYANAN_SHAPES[float(r["params_billion"])]
        split = r["tp_pp_split_per_llm_analysis_scripts"]
        if isinstance(split, str):
            kv = dict(x.split("=") for x in split.split(","))
            t, p, zero = int(kv["tp"]), int(kv["pp"]), 0
        else:
            t, p, zero = 1, 1, 3
        rows.append({"dataset": "narayanan_table2", "source_row": i + 2,
                     "label": f"{r['scheme']} {r['params_billion']}B on {r['num_gpus']}", "gpus": r["num_gpus"],
                     "global_batch": r["global_batch_size"], "microbatch": r["micro_batch_size"], "hidden": hidden,
                     "heads": heads, "layers": layers, "seq": r["seq_len"], "vocab": VOCAB, "tensor": t,
                     "pipeline": p, "data": r["num_gpus"] // (t * p), "measured_time_s": np.nan,
                     "measured_tflops": r["achieved_tflops_per_gpu"], "cluster": "dgx-a100", "recompute": "full",
                     "zero_stage": zero})
    return pd.DataFrame(rows)


def all_rows() -> pd.DataFrame:
    return pd.concat([vtrain_rows("single"), vtrain_rows("multi"), megatron_rows(), narayanan_rows()],
                     ignore_index=True)


def _unmappable(r) -> str | None:
    need = ["hidden", "heads", "layers", "seq", "global_batch", "gpus", "tensor", "data"]
    missing = [k for k in need if pd.isna(r[k])]
    if missing:
        return f"not mappable: the source gives no {', '.join(missing)}"
    if METRIC[r["dataset"]] == "iteration_time" and pd.isna(r["measured_time_s"]):
        return "not mappable: no iteration time published"
    if METRIC[r["dataset"]] == "tflops_per_gpu" and pd.isna(r["measured_tflops"]):
        return "not mappable: no TFLOP/s published"
    if r["tensor"] * r["data"] * r["pipeline"] != r["gpus"]:
        return f"not mappable: tensor x data x pipeline != {r['gpus']} GPUs"
    if r["microbatch"] != int(r["microbatch"]):
        return "not mappable: microbatch not an integer"
    return None


def scenario_for(r) -> dict:
    """The scenario dict of one row of :func:`all_rows` (raises ``ValueError`` if it cannot be mapped)."""
    why = _unmappable(r)
    if why:
        raise ValueError(why)
    model = gpt(r["layers"], r["hidden"], r["heads"], r["seq"], r["vocab"] if pd.notna(r["vocab"]) else VOCAB)
    return _scenario(model, r["cluster"], r["data"], r["tensor"], r["pipeline"], r["microbatch"],
                     r["global_batch"], r["recompute"], int(r["zero_stage"]))


def _predict(r: dict) -> dict:
    try:
        sc = scenario_for(r)
    except ValueError as e:
        return {"status": "unmappable", "reason": str(e)}
    try:
        e = estimate(sc)
    except ValueError as e:
        return {"status": "refused", "reason": str(e)}
    bd = e.breakdown
    return {"status": "ok", "reason": "", "predicted_time_s": e.step_time_s,
            "predicted_time_p10_s": e.step_time_p10_s, "predicted_time_p90_s": e.step_time_p90_s,
            "predicted_model_tflops": e.achieved_flops_per_device / 1e12,
            **{k: bd[k] for k in ("compute_s", "tensor_parallel_comm_s", "bubble_s", "pipeline_p2p_s",
                                  "data_parallel_exposed_s", "optimizer_s", "host_wait_s")}}


def evaluate(df: pd.DataFrame, workers: int | None = None) -> pd.DataFrame:
    """Predict every row of ``df``; add ``status``, ``reason``, predictions and ``ape`` (in %) on the set's
    metric (iteration time, or Eq. (3) TFLOP/s per GPU)."""
    recs = df.to_dict("records")
    workers = workers or min(2, os.cpu_count() or 1)
    if workers > 1 and len(recs) > 8:
        with ProcessPoolExecutor(workers) as ex:
            out = list(ex.map(_predict, recs, chunksize=max(1, len(recs) // (8 * workers))))
    else:
        out = [_predict(r) for r in recs]
    res = pd.concat([df.reset_index(drop=True), pd.DataFrame(out)], axis=1)
    for k in ("predicted_time_s", "predicted_time_p10_s", "predicted_time_p90_s"):
        if k not in res:
            res[k] = np.nan
    f = narayanan_flops(res["global_batch"], res["seq"], res["layers"], res["hidden"],
                        res["vocab"].fillna(VOCAB))
    res["formula_flop"] = f
    res["predicted_tflops"] = f / (res["predicted_time_s"] * res["gpus"]) / 1e12
    res["predicted_tflops_p10"] = f / (res["predicted_time_p90_s"] * res["gpus"]) / 1e12  # slower step, fewer FLOP/s
    res["predicted_tflops_p90"] = f / (res["predicted_time_p10_s"] * res["gpus"]) / 1e12
    res["measured_time_from_tflops_s"] = f / (res["measured_tflops"] * 1e12 * res["gpus"])
    by_time = res["dataset"].map(METRIC) == "iteration_time"
    ape_t = (res["predicted_time_s"] - res["measured_time_s"]).abs() / res["measured_time_s"] * 100
    ape_f = (res["predicted_tflops"] - res["measured_tflops"]).abs() / res["measured_tflops"] * 100
    res["ape"] = np.where(by_time, ape_t, ape_f)
    res["signed_error_pct"] = np.where(by_time, (res["predicted_time_s"] / res["measured_time_s"] - 1) * 100,
                                       (res["predicted_tflops"] / res["measured_tflops"] - 1) * 100)
    return res


def summary(res: pd.DataFrame) -> dict:
    """Per dataset: rows, predicted, refused/unmappable with reasons, median / mean / max APE, bias, target."""
    out = {}
    for name, g in res.groupby("dataset", sort=False):
        ok = g[g["status"] == "ok"]
        s = {"metric": METRIC[name], "rows": int(len(g)), "predicted": int(len(ok)),
             "refused": int((g["status"] == "refused").sum()), "unmappable": int((g["status"] == "unmappable").sum()),
             "median_ape": float(ok["ape"].median()) if len(ok) else None,
             "mean_ape": float(ok["ape"].mean()) if len(ok) else None,
             "max_ape": float(ok["ape"].max()) if len(ok) else None,
             "median_signed_error_pct": float(ok["signed_error_pct"].median()) if len(ok) else None}
        reasons = g[g["status"] != "ok"]["reason"].map(_reason_kind).value_counts()
        s["not_predicted_reasons"] = {k: int(v) for k, v in reasons.items()}
        if name in TARGETS:
            stat, limit = TARGETS[name]
            s["target"] = f"{stat} <= {limit}"
            s["meets_target"] = bool(s[stat] is not None and s[stat] <= limit)
        if name in PUBLISHED_SIMULATOR_MAPE:
            s["vtrain_published_mape"] = PUBLISHED_SIMULATOR_MAPE[name]
        out[name] = s
    return out


def _reason_kind(reason: str) -> str:
    """Group reasons: the text up to the first number, so one memory message per kind is counted together."""
    import re
    m = re.split(r"\d", reason, maxsplit=1)[0].strip(" :(")
    return m or reason


def microbatch_slopes(df: pd.DataFrame) -> pd.DataFrame:
    """Per-microbatch and per-step seconds of each configuration measured at several global batches.

    Rows of a vTrain set that differ only in the global batch (same model, tensor, pipeline and data degrees,
    microbatch) run ``m = global batch / (microbatch x data)`` microbatches a step. A 1F1B step is
    ``(m + p - 1)(t_f + t_b)`` plus per-step costs (Narayanan et al. 2021 §2.2.1): linear in ``m`` with slope
    ``t_f + t_b``, whatever the pipeline degree. A least-squares line of the measured time against ``m`` splits
    each group into ``slope_s`` (seconds a microbatch) and ``intercept_s`` (the bubble, the gradient reduction and
    the optimizer step: once a step), so that a model's per-microbatch seconds are compared apart from its
    per-step ones. Groups with fewer than two distinct ``m`` are left out.

    >>> df = pd.DataFrame({"hidden": 1024, "layers": 12, "tensor": 1, "pipeline": 1, "data": 2, "microbatch": 1,
    ...                    "global_batch": [4, 8, 16], "measured_time_s": [0.05, 0.09, 0.17]})
    >>> r = microbatch_slopes(df).iloc[0]
    >>> round(float(r["slope_s"]), 3), round(float(r["intercept_s"]), 3), int(r["rows"])
    (0.02, 0.01, 3)
    """
    keys = ["hidden", "layers", "tensor", "pipeline", "data", "microbatch"]
    m = df["global_batch"] / (df["microbatch"] * df["data"])
    out = []
    for key, g in df.assign(m=m).groupby(keys, sort=True):
        if g["m"].nunique() < 2:
            continue
        slope, icpt = np.polyfit(g["m"].to_numpy(float), g["measured_time_s"].to_numpy(float), 1)
        out.append({**dict(zip(keys, key)), "rows": len(g), "slope_s": float(slope), "intercept_s": float(icpt),
                    "first": g.index[0]})
    return pd.DataFrame(out)


def error_table(res: pd.DataFrame, by) -> pd.DataFrame:
    """The predicted rows of :func:`evaluate` grouped by the columns ``by`` (a name or a list): ``rows``, ``mean_ape``,
    ``median_signed_pct`` (+: predicted slower, or for a TFLOP/s set faster), ``max_ape`` and ``ape_share`` (the
    group's part of the total APE, so the groups that move a mean most come first), largest share first.

    >>> res = pd.DataFrame({"status": "ok", "tensor": [1, 1, 8, 8], "ape": [2.0, 4.0, 10.0, 24.0],
    ...                     "signed_error_pct": [2.0, -4.0, -10.0, -24.0]})
    >>> error_table(res, "tensor")[["tensor", "rows", "mean_ape", "median_signed_pct", "ape_share"]].values.tolist()
    [[8.0, 2.0, 17.0, -17.0, 0.85], [1.0, 2.0, 3.0, -1.0, 0.15]]
    """
    by = [by] if isinstance(by, str) else list(by)
    ok = res[res["status"] == "ok"]
    out = ok.groupby(by).agg(rows=("ape", "size"), mean_ape=("ape", "mean"), median_signed_pct=("signed_error_pct",
                                                                                               "median"),
                             max_ape=("ape", "max"), ape_sum=("ape", "sum")).reset_index()
    out["ape_share"] = out.pop("ape_sum") / ok["ape"].sum()
    return out.sort_values("ape_share", ascending=False, kind="stable").reset_index(drop=True)


def sample(df: pd.DataFrame, every: int) -> pd.DataFrame:
    """Every ``every``-th row in file order (deterministic)."""
    return df.iloc[::every].reset_index(drop=True)
