"""Data-parallel scaling and pipeline speedups against :func:`~concurrency_model.training.estimate.estimate`.

Six published sets (``data/``; origins in ``data/SOURCES.md``), each compared on what it publishes:

* ``tf_cnn_benchmarks``: images/s of InceptionV3, ResNet-50, ResNet-152, AlexNet and VGG16 on 1 to 8 GPUs
  of a DGX-1 (P100), of GCE and EC2 8 x K80 instances, and on 1 to 64 K80s over 10 GbE (TensorFlow
  ``tf_cnn_benchmarks``, May 2017). Compared on images/s.
* ``torchgpipe``: GPipe speedups of ResNet-101 on 1 to 8 P40s over the plain model on one GPU
  (``kakaobrain/torchgpipe``; AmoebaNet-D and the U-Net are not in the zoo). Compared on the speedup.
* ``horovod``: 512-GPU scaling efficiency (128 servers x 4 Pascal GPUs, 25 Gb/s RoCE) of ResNet-101,
  VGG-16 and Inception V3. Compared on the efficiency, in percentage points.
* ``dle_resnet50``: ResNet-50 v1.5 (torchvision's ``resnet50``) images/s on 1 to 16 GPUs of DGX-1 (V100),
  DGX-2 and DGX A100, FP32 / TF32 and mixed precision, from NVIDIA DeepLearningExamples' README tables;
  only the tables that state the batch per GPU (the TensorFlow ones, run with XLA) can be predicted.
* ``dle_resnext101``: ResNeXt-101 32x4d images/s from the same READMEs (grouped convolutions), same rule.
* ``dle_bert``: BERT-large pre-training sequences/s (sequence 128 and 512) from the same READMEs' PyTorch,
  TensorFlow, TensorFlow 2 and PaddlePaddle tables: 1 to 16 GPUs of DGX-1, DGX-2 and DGX A100 and 1 to 32
  DGX A100 nodes, with the tables' micro-batches and gradient-accumulation steps (:func:`bert_scenario`).

Every row is mapped by one rule per set (:data:`ASSUMPTIONS`), never per row; the systems are cluster
objects built from the device presets and the sources' descriptions (:func:`systems`). Nothing is fitted
on these rows. The one constant that is not a datasheet number, the achievable fraction of a PCIe Gen3 x16
link in an NCCL all-reduce, is fitted on *other* data: DeepBench's one-node all-reduces on dual-root PCIe
machines (:func:`pcie_efficiency`). Devices without DeepBench kernel data (K80, P40) use the default
efficiency constants of :class:`~concurrency_model.hardware.devices.Efficiency` and their boost-clock peaks.

Synchronisation (derived; byte counts per GPU of a gradient of ``n`` bytes over ``P`` ranks):

* ``replicated`` with NCCL and Horovod: an all-reduce, overlapped with the backward pass (``estimate``);
* ``replicated`` without NCCL (TensorFlow 2017 sums each variable on one GPU, the GPUs taken in turn, and
  copies the sum back) and ``distributed_replicated`` across hosts (one parameter-server shard per host,
  on the workers' hosts: assumed) move ``2 n (P-1)/P`` bytes per rank, the reduce-scatter + allgather of
  a bandwidth-optimal all-reduce, so they are priced as the all-reduce the estimate picks;
* ``parameter_server`` rows (variables on the CPU, or on the GPUs): the push and pull of
  :func:`ps_sync_seconds` (:mod:`concurrency_model.parallel.distribution`), overlapped as the estimate
  overlaps an all-reduce (:func:`ps_throughput`); not predicted ("parameter-server model pending") while
  that module is missing.

Each images/s row also gets the measured and predicted weak-scaling efficiency against the 1-GPU row of
the same source and configuration, which tells the scaling error from the one-GPU (compute) error.

A configuration the estimate refuses for memory is predicted anyway (the same composition without the
check) and noted, because the published run did fit: the memory model stores every activation of a CNN
(no in-place ReLU, no checkpointed pipeline boundaries).

>>> res = evaluate(horovod_rows())
>>> list(res["status"])
['ok', 'ok', 'ok']
"""
from __future__ import annotations

from functools import lru_cache, partial

import numpy as np
import pandas as pd

from ..hardware.clusters import load_cluster, tier_from_dict
from .dle import dle_bert_rows, dle_rows
from .scaling_data import (ASSUMPTIONS, DATASETS, DLE_CNNS, FILES, METRIC, PS_PENDING, SCHEMAS,  # noqa: F401
                           TARGETS, pcie_notes, horovod_rows, pcie_efficiency, systems, tf_cnn_rows, torchgpipe_rows)
from ..models import get_model
from ..scenario import load_scenario
from ..training.estimate import estimate
from ..training.workload import BUCKET_BYTES
from .training import DGX2, dgx_a100_40gb

#: each dataset's row loader (:data:`DATASETS`)
ROWS = {"tf_cnn_benchmarks": tf_cnn_rows, "torchgpipe": torchgpipe_rows, "horovod": horovod_rows,
        **{k: partial(dle_rows, k) for k in DLE_CNNS}, "dle_bert": dle_bert_rows}


def all_rows() -> pd.DataFrame:
    """The rows of every dataset."""
    return pd.concat([rows() for rows in ROWS.values()], ignore_index=True)


__all__ = ["ASSUMPTIONS", "DATASETS", "FILES", "METRIC", "ROWS", "SCHEMAS", "TARGETS", "all_rows", "bert_scenario",
           "dle_bert_rows", "dle_rows", "horovod_rows",
           "pcie_efficiency", "systems", "tf_cnn_rows", "torchgpipe_rows", "scenario", "step", "throughput",
           "efficiency", "ps_sync_seconds", "ps_throughput", "evaluate", "summary"]


# --- predictors ---------------------------------------------------------------------------------------------
def scenario(model: str, cluster, data: int = 1, batch_per_gpu: int = 64, pipeline: int = 1,
             microbatches: int = 1, recompute: str = "none", dtype: str = "fp32") -> dict:
    """The scenario of one configuration: ``dtype`` (fp32), SGD, overlap, GPipe when ``pipeline`` > 1."""
    return {"model": model, "cluster": cluster,
            "parallel": {"data": int(data), "pipeline": int(pipeline), "microbatch_size": int(batch_per_gpu),
                         "global_batch": int(batch_per_gpu * data * microbatches),
                         "schedule": "gpipe" if pipeline > 1 else "1f1b"},
            "training": {"dtype": dtype, "optimizer": "sgd", "recompute": recompute, "overlap": True}}


def step(spec: dict) -> tuple[float, dict, str]:
    """``(step seconds, breakdown, note)`` of a scenario: :func:`estimate`, or, when it refuses for memory
    only, :func:`estimate` on the same cluster with the device's memory capacity lifted (the capacity
    enters no time), and a note that says so. The breakdown carries the step's 80% band too
    (``step_time_p10_s``, ``step_time_p90_s``; :mod:`concurrency_model.uncertainty`)."""
    from dataclasses import replace

    try:
        e = estimate(spec)
        return e.step_time_s, _with_band(e), ""
    except ValueError as err:
        if not str(err).startswith("memory:"):
            raise
        note = f"predicted beyond the memory model ({err}); the published run fit"
    cl = load_scenario(spec).cluster
    e = estimate({**spec, "cluster": replace(cl, device=replace(cl.device, mem_capacity=1e18))})
    return e.step_time_s, _with_band(e), note


def _with_band(e) -> dict:
    return {**e.breakdown, "step_time_p10_s": e.step_time_p10_s, "step_time_p90_s": e.step_time_p90_s}


def _throughput_band(thr: float, bd: dict, t: float) -> dict:
    """``predicted_p10``, ``predicted_p90`` of a throughput ``thr`` = work / ``t``: the slower step gives
    the lower one."""
    return {"predicted_p10": thr * t / bd["step_time_p90_s"], "predicted_p90": thr * t / bd["step_time_p10_s"]}


def throughput(model: str, cluster, gpus: int, batch_per_gpu: int, dtype: str = "fp32") -> tuple:
    """``(images/s, breakdown, note)`` of data parallelism over ``gpus`` at ``batch_per_gpu`` (all-reduce,
    overlapped; :func:`step`).

    >>> thr, bd, note = throughput("resnet50", systems()["dgx1-p100"], 8, 64)
    >>> 1500 < thr < 2500, bd["data_parallel_exposed_s"] < 0.01 * bd["compute_s"], note
    (True, True, '')
    """
    t, bd, note = step(scenario(model, cluster, gpus, batch_per_gpu, dtype=dtype))
    return gpus * batch_per_gpu / t, bd, note


def efficiency(model: str, cluster, gpus: int, batch_per_gpu: int) -> float:
    """Weak-scaling efficiency: images/s on ``gpus`` over ``gpus`` x images/s on one GPU (a fraction).

    >>> e = [efficiency("alexnet", systems()["ec2-p2.8xlarge"], g, 128) for g in (1, 8, 64)]
    >>> e[0] == 1.0 and e[0] >= e[1] >= e[2]
    True
    """
    return throughput(model, cluster, gpus, batch_per_gpu)[0] / (gpus * throughput(model, cluster, 1,
                                                                                     batch_per_gpu)[0])


def _ps_model():
    """:mod:`concurrency_model.parallel.distribution` when it is there with the functions used here
    (``ps_time``, ``ps_on_cluster``), else None (parameter-server rows are then not predicted)."""
    try:
        from ..parallel import distribution
    except ImportError:
        return None
    return distribution if all(hasattr(distribution, f) for f in ("ps_time", "ps_on_cluster")) else None


def ps_sync_seconds(nbytes: float, gpus: int, cluster, where: str) -> float:
    """One push of ``nbytes`` of gradients and one pull of as many weights per GPU, through parameter
    servers (:mod:`concurrency_model.parallel.distribution`, derived there in the alpha-beta model):

    * ``gpu``: tf_cnn_benchmarks ``parameter_server / gpu`` places the variables on the GPUs in turn, a
      shard on every GPU: ``ps_on_cluster(n, P, servers=P, colocated)`` over the node's GPU links;
    * ``cpu``: the variables live in host memory, reached through the PCIe uplinks that each serve two
      GPUs (one x16 edge connector per K80 board, hardware.md Table 1B [R17]; a PCIe switch per GPU pair on
      the DGX-1, hardware.md 3A, count unconfirmed): ``ps_time(n, P, alpha, beta, servers=ceil(P/2))`` with
      the alpha and beta of a PCIe Gen3 x16 link (:func:`pcie_efficiency`; on the DGX-1 too, whose NVLinks
      do not reach the host), and ``2 alpha + 2 n beta`` for one GPU, whose variables are still on the
      host. The host's summation (gamma) is not counted (no host memory bandwidth in hardware.md).
    """
    dist = _ps_model()
    if where == "gpu":
        return float(dist.ps_on_cluster(nbytes, gpus, cluster, servers=gpus, server_placement="colocated"))
    alpha, beta = tier_from_dict(pcie_notes("GPU to host")).alpha_beta()
    if gpus == 1:
        return 2 * alpha + 2 * nbytes * beta
    return float(dist.ps_time(nbytes, gpus, alpha, beta, servers=-(-gpus // 2)))


def ps_throughput(model: str, cluster, gpus: int, batch_per_gpu: int, where: str) -> tuple[float, dict, str]:
    """Images/s with parameter servers: the one-GPU step (forward, backward, update) plus the exposed part
    of :func:`ps_sync_seconds`, overlapped as the estimate overlaps an all-reduce (derived): the push hides
    behind the backward pass and the pull behind the forward pass, except the last 25 MiB of the push
    (:data:`concurrency_model.training.workload.BUCKET_BYTES`); exposed = min(sync, max(0, push - backward)
    + max(0, pull - forward) + last)."""
    t1, bd, note = step(scenario(model, cluster, 1, batch_per_gpu))
    n = float(get_model(model).params) * 4.0  # fp32 gradients and weights
    sync = ps_sync_seconds(n, gpus, cluster, where)
    last = ps_sync_seconds(min(n, BUCKET_BYTES), gpus, cluster, where) / 2
    exposed = min(sync, max(0.0, sync / 2 - bd["backward_s"]) + max(0.0, sync / 2 - bd["forward_s"]) + last)
    return gpus * batch_per_gpu / (t1 + exposed), {**bd, "data_parallel_exposed_s": exposed}, note


def _predict_tf(r: dict) -> dict:
    cl = systems()[r["system"]]
    if r["sync"].startswith("parameter_server"):
        if _ps_model() is None:
            return {"status": "pending", "reason": PS_PENDING}
        try:
            thr, bd, note = ps_throughput(r["zoo_model"], cl, r["gpus"], r["batch_per_gpu"],
                                          r["sync"].rsplit("_", 1)[1])
        except TypeError as e:  # distribution's signature changed under us
            return {"status": "pending", "reason": f"{PS_PENDING} (its API differs: {e})"}
        return {"status": "ok", "reason": "", "predicted": thr, "note": note, "compute_s": bd["compute_s"],
                "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}
    thr, bd, note = throughput(r["zoo_model"], cl, r["gpus"], r["batch_per_gpu"])
    return {"status": "ok", "reason": "", "predicted": thr, "note": note,
            **_throughput_band(thr, bd, r["gpus"] * r["batch_per_gpu"] / thr),
            "compute_s": bd["compute_s"], "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}


def _gpipe_throughput(model: str, cluster, r: dict) -> tuple[float, str]:
    """Samples/s of torchgpipe: GPipe over ``partitions`` with ``microbatches`` chunks; checkpointing
    ``except_last`` / ``default`` recomputes every micro-batch but the last, whose backward is the one on
    the critical path of the drain, so the step is the full-recompute GPipe step less one micro-batch's
    recompute of the slowest stage (derived); ``always`` recomputes all, ``never`` / ``none`` none."""
    p, m, batch = r["partitions"], r["microbatches"], r["global_batch"]
    mb = max(1, round(batch / m))
    ck = r["checkpoint"]
    rec = "none" if ck in ("none", "never") or m == 1 and ck != "always" else "full"
    t, bd, note = step(scenario(model, cluster, 1, mb, pipeline=p, microbatches=m, recompute=rec))
    if rec == "full" and ck in ("except_last", "default"):
        t -= bd["recompute_s"] / m
    return mb * m / t, note


def _predict_gpipe(r: dict) -> dict:
    cl = systems()[r["system"]]
    thr, note = _gpipe_throughput(r["zoo_model"], cl, r)
    base = _baseline(r["zoo_model"], r["benchmark"])
    if base is None:
        return {"status": "unmappable", "reason": "not mappable: no baseline row for this benchmark"}
    return {"status": "ok", "reason": "", "predicted": thr / base, "note": note}


@lru_cache(maxsize=None)
def _baseline(model: str, benchmark: str) -> float | None:
    rows = torchgpipe_rows()
    b = rows[(rows["benchmark"] == benchmark) & rows["baseline"]]
    if not len(b):
        return None
    return throughput(model, systems()["p40x8"], 1, int(b["global_batch"].iloc[0]))[0]


def _predict_horovod(r: dict) -> dict:
    cl = systems()[r["system"]]
    thr, bd, note = throughput(r["zoo_model"], cl, r["gpus"], r["batch_per_gpu"])
    one = throughput(r["zoo_model"], cl, 1, r["batch_per_gpu"])[0]
    return {"status": "ok", "reason": "", "predicted": 100 * thr / (r["gpus"] * one), "note": note,
            "compute_s": bd["compute_s"], "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}


def _predict_dle(r: dict) -> dict:
    thr, bd, note = throughput(r["zoo_model"], _dle_cluster(r["system"]), r["gpus"], r["batch_per_gpu"], r["dtype"])
    return {"status": "ok", "reason": "", "predicted": thr, "note": note,
            **_throughput_band(thr, bd, r["gpus"] * r["batch_per_gpu"] / thr), "compute_s": bd["compute_s"],
            "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}


def bert_scenario(cluster, gpus: int, seq_len: int, microbatch: int, microbatches: int, dtype: str) -> dict:
    """BERT-large pre-training (both heads, LAMB) data parallel over ``gpus`` with ``microbatches``
    gradient-accumulation steps of ``microbatch`` sequences per GPU."""
    return {"model": {"name": "bert-large", "seq_len": int(seq_len), "head": "pretraining"}, "cluster": cluster,
            "parallel": {"data": int(gpus), "microbatch_size": int(microbatch),
                         "global_batch": int(microbatch * microbatches * gpus)},
            "training": {"dtype": dtype, "optimizer": "lamb", "recompute": "none", "overlap": True}}


def _predict_dle_bert(r: dict) -> dict:
    spec = bert_scenario(_dle_cluster(r["system"]), r["gpus"], r["seq_len"], r["batch_per_gpu"], r["microbatches"],
                         r["dtype"])
    t, bd, note = step(spec)
    thr = spec["parallel"]["global_batch"] / t
    return {"status": "ok", "reason": "", "predicted": thr, "note": note, **_throughput_band(thr, bd, t),
            "compute_s": bd["compute_s"], "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}


@lru_cache(maxsize=None)
def _dle_cluster(name: str):
    return load_cluster({"dgx-2": DGX2, "dgx-a100-40gb": {"name": "dgx-a100-40gb", **dgx_a100_40gb()}}.get(name,
                                                                                                          name))


PREDICT = {"tf_cnn_benchmarks": _predict_tf, "torchgpipe": _predict_gpipe, "horovod": _predict_horovod,
           **dict.fromkeys(DLE_CNNS, _predict_dle), "dle_bert": _predict_dle_bert}


def _predict(r: dict) -> dict:
    if isinstance(r.get("reason"), str) and r["reason"]:
        kind = "reference" if r["reason"].startswith("reference") else "unmappable"
        return {"status": kind, "reason": r["reason"]}
    try:
        return PREDICT[r["dataset"]](r)
    except ValueError as e:
        return {"status": "refused", "reason": " ".join(str(e).split())}


def evaluate(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Predict every row of ``df`` (default :func:`all_rows`): adds ``status`` (``ok``, ``pending``,
    ``unmappable``, ``reference``, ``refused``), ``reason``, ``predicted`` (with its 80% band
    ``predicted_p10``, ``predicted_p90`` where the metric is one estimate's throughput), ``note``, ``ape`` (in %),
    ``signed_error_pct`` and, for efficiencies, ``points`` (predicted - measured, percentage points)."""
    df = all_rows() if df is None else df
    order = df.sort_values(["dataset", "zoo_model", "system"], kind="stable", na_position="last").index
    out = {i: _predict(df.loc[i].to_dict()) for i in order}  # a model's rows share the estimate's caches
    pred = pd.DataFrame([out[i] for i in df.index], index=df.index)
    res = pd.concat([df.drop(columns=["reason"]), pred], axis=1)
    for col in ("predicted", "predicted_p10", "predicted_p90", "note", "compute_s", "data_parallel_exposed_s"):
        if col not in res:
            res[col] = np.nan if col != "note" else ""
    res["note"] = res["note"].fillna("")
    res["ape"] = (res["predicted"] - res["measured"]).abs() / res["measured"] * 100
    res["signed_error_pct"] = (res["predicted"] / res["measured"] - 1) * 100
    res["points"] = np.where(res["dataset"] == "horovod", res["predicted"] - res["measured"], np.nan)
    return _efficiencies(res)


def _efficiencies(res: pd.DataFrame) -> pd.DataFrame:
    """Images/s rows: measured and predicted weak-scaling efficiency (%) against the 1-GPU row of the same
    system, update, model, batch, data and precision, which separates the scaling from the one-GPU error."""
    res = res.assign(measured_efficiency=np.nan, predicted_efficiency=np.nan)
    keys = [k for k in ("dataset", "group", "model", "batch_per_gpu", "data", "dtype") if k in res]
    imgs = res[res["dataset"].isin(["tf_cnn_benchmarks", *DLE_CNNS, "dle_bert"])
               & (res["status"] == "ok")]
    for _, g in imgs.groupby(keys, dropna=False):
        one = g[g["gpus"] == 1]
        if len(one):
            base = one.iloc[0]
            res.loc[g.index, "measured_efficiency"] = 100 * g["measured"] / (g["gpus"] * base["measured"])
            res.loc[g.index, "predicted_efficiency"] = 100 * g["predicted"] / (g["gpus"] * base["predicted"])
    return res


def _stats(ok: pd.DataFrame) -> dict:
    if not len(ok):
        return {"rows": 0, "median_ape": None, "mean_ape": None, "max_ape": None}
    return {"rows": int(len(ok)), "median_ape": float(ok["ape"].median()), "mean_ape": float(ok["ape"].mean()),
            "max_ape": float(ok["ape"].max()), "median_signed_error_pct": float(ok["signed_error_pct"].median())}


def summary(res: pd.DataFrame) -> dict:
    """Per dataset: rows, predicted, not predicted (by reason), median / mean / max APE (%), the signed
    median, Horovod's point errors, the issue's target and whether it is met, and the same per group."""
    out = {}
    for name, g in res.groupby("dataset", sort=False):
        ok = g[g["status"] == "ok"]
        s = {"metric": METRIC[name][1], "rows_total": int(len(g)), "predicted": int(len(ok)), **_stats(ok)}
        s["not_predicted"] = {k: int(v) for k, v in g.loc[g["status"] != "ok", "reason"].value_counts().items()}
        eff = ok[(ok["gpus"] > 1) & ok["measured_efficiency"].notna()]
        if len(eff):  # weak-scaling efficiency against the same source's 1-GPU row
            d = eff["predicted_efficiency"] - eff["measured_efficiency"]
            s["efficiency_points"] = {"rows": int(len(d)), "median_abs": float(d.abs().median()),
                                      "max_abs": float(d.abs().max()), "median_signed": float(d.median())}
        if name == "horovod":
            s["points"] = {r["model"]: round(float(r["points"]), 1) for _, r in ok.iterrows()}
            s["max_points"] = float(ok["points"].abs().max()) if len(ok) else None
        if name in TARGETS:
            stat, limit = TARGETS[name]
            s["target"] = f"{stat} <= {limit}"
            s["meets_target"] = bool(s.get(stat) is not None and s[stat] <= limit)
        s["by_group"] = {k: _stats(v) for k, v in ok.groupby("group", sort=True)}
        out[name] = s
    return out
