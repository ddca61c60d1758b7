"""Data-parallel scaling and pipeline speedups against :func:`~concurrency_model.parallel.estimate.estimate`.

Four published sets (``data/``; origins in ``data/SOURCES.md``), each compared on what it publishes:

* ``tf_cnn_benchmarks``: images/s of ResNet-50, ResNet-152, AlexNet and VGG16 (and InceptionV3, not in the
  zoo) on 1 to 8 GPUs of a DGX-1 (P100), of GCE and EC2 8 x K80 instances, and on 1 to 64 K80s over 10 GbE
  (TensorFlow ``tf_cnn_benchmarks``, May 2017). Compared on images/s.
* ``torchgpipe``: GPipe speedups of ResNet-101 on 1 to 8 P40s over the plain model on one GPU
  (``kakaobrain/torchgpipe``; AmoebaNet-D and the U-Net are not in the zoo). Compared on the speedup.
* ``horovod``: 512-GPU scaling efficiency (128 servers x 4 Pascal GPUs, 25 Gb/s RoCE) of ResNet-101 and
  VGG-16 (Inception V3 is not in the zoo). Compared on the efficiency, in percentage points.
* ``dle_resnet50``: ResNet-50 v1.5 (torchvision's ``resnet50``) images/s on 1 to 16 GPUs of DGX-1 (V100),
  DGX-2 and DGX A100, FP32 / TF32 and mixed precision, from NVIDIA DeepLearningExamples' README tables;
  only the tables that state the batch per GPU (the TensorFlow ones, run with XLA) can be predicted.

Every row is mapped by one rule per set (:data:`ASSUMPTIONS`), never per row; the systems are cluster
objects built from the device presets and the sources' descriptions (:func:`systems`). Nothing is fitted
on these rows. The one constant that is not a datasheet number, the achievable fraction of a PCIe Gen3 x16
link in an NCCL all-reduce, is fitted on *other* data: DeepBench's one-node all-reduces on dual-root PCIe
machines (:func:`pcie_efficiency`). Devices without DeepBench kernel data (K80, P40) use the default
efficiency constants of :class:`~concurrency_model.hardware.Efficiency` and their boost-clock peaks.

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
['unmappable', 'ok', 'ok']
"""
from __future__ import annotations

import re
from functools import lru_cache

import numpy as np
import pandas as pd

from .. import datasets
from ..cluster import load_cluster, tier_from_dict

DATASETS = ("tf_cnn_benchmarks", "torchgpipe", "horovod", "dle_resnet50")
FILES = {"tf_cnn_benchmarks": "tf_cnn_benchmarks_dp_scaling_2017", "torchgpipe": "torchgpipe_pipeline_speed",
         "horovod": "horovod_docs_scaling_efficiency", "dle_resnet50": "nvidia_dle_training_perf_long"}
SOURCE = ("source_repo", "source_path", "source_commit")
SCHEMAS = {  # file stem -> (numeric columns, other required columns, optional numeric columns)
    FILES["tf_cnn_benchmarks"]: (("num_gpus", "batch_size_per_gpu"),
                                 ("platform", "instance", "gpu", "model", "data", "variable_update_config")
                                 + SOURCE, ("throughput_images_per_s",)),
    FILES["torchgpipe"]: (("num_partitions", "global_batch_size", "throughput_samples_per_s", "speedup_torchgpipe"),
                          ("benchmark", "model", "experiment", "checkpoint", "hardware") + SOURCE,
                          ("num_microbatches",)),
    FILES["horovod"]: (("num_gpus", "num_servers", "gpus_per_server", "scaling_efficiency_pct"),
                       ("model", "gpu", "network", "framework") + SOURCE, ()),
    FILES["dle_resnet50"]: (("table_index", "row_index", "col_index"),
                            ("readme", "framework", "model_dir", "section_heading", "column", "value_as_published",
                             "source_repo", "source_commit"), ()),
}
METRIC = {"tf_cnn_benchmarks": ("images/s", "images per second"), "torchgpipe": ("speedup", "x over one GPU"),
          "horovod": ("efficiency", "% scaling efficiency"), "dle_resnet50": ("images/s", "images per second")}
# issue 5: images/s median APE <= 15%; every torchgpipe speedup within 15%; every Horovod efficiency within
# 10 percentage points
TARGETS = {"tf_cnn_benchmarks": ("median_ape", 15.0), "torchgpipe": ("max_ape", 15.0),
           "horovod": ("max_points", 10.0)}
ZOO = {"ResNet-50": "resnet50", "ResNet-152": "resnet152", "ResNet-101": "resnet101", "AlexNet": "alexnet",
       "VGG16": "vgg16", "VGG-16": "vgg16"}
_INCEPTION = "Inception v3 is not in the zoo (googlenet is Inception v1, another network)"
NOT_IN_ZOO = {"InceptionV3": _INCEPTION, "Inception V3": _INCEPTION, "AmoebaNet-D": "AmoebaNet-D is not in the zoo",
              "simplified U-Net": "torchgpipe's U-Net is not in the zoo"}
PS_PENDING = "not predicted: parameter-server model pending (concurrency_model.parallel.distribution)"
ASSUMPTIONS = {
    "tf_cnn_benchmarks": "fp32, SGD, per-GPU batch as published, data parallel over num_gpus with overlap; "
                         "DGX-1 = 8 x p100-sxm2-16gb on NVLink 1 (80 GB/s per GPU per direction); GCE and EC2 "
                         "8 x K80 = 8 x k80-gk210-12gb (one GPU of a K80 board) on PCIe Gen3; EC2 distributed = "
                         "8-GPU p2.8xlarge hosts on one 10 Gb/s Ethernet link each; synthetic and real data "
                         "predicted alike (no input-pipeline model); replicated without NCCL and "
                         "distributed_replicated priced as the bandwidth-equivalent all-reduce (module doc)",
    "torchgpipe": "8 x p40-24gb on PCIe Gen3 in one host; fp32; GPipe schedule with the published partitions "
                  "and micro-batches (micro-batch = batch / chunks, rounded); stages by PipeDream's partitioner "
                  "(torchgpipe balanced by measured time); checkpoint 'except_last' (the default): full "
                  "recompute less the last micro-batch's on the critical path; baseline = the plain model on "
                  "one GPU at the published batch",
    "horovod": "128 servers x 4 p100-pcie-16gb ('Pascal GPUs', model not stated) on PCIe Gen3, one 25 Gb/s "
               "RoCE NIC per server; batch 64 per GPU (the docs' example command); fp32; SGD; all-reduce "
               "overlapped with the backward pass; efficiency = images/s on 512 GPUs / (512 x images/s on one)",
    "dle_resnet50": "resnet50 (v1.5 = torchvision's); FP32 -> fp32, TF32 -> tf32, mixed precision -> fp16 "
                    "(tensor cores); the batch per GPU of the table; SGD; all-reduce overlapped; DGX-1 = the "
                    "dgx1-v100 preset (V100-SXM2-32GB; the 16 GB boards differ in memory only), DGX-2 = the "
                    "cluster of validate.training, DGX A100 80GB = dgx-a100, 40GB = dgx-a100 with "
                    "a100-sxm4-40gb; XLA fusion and the input pipeline are not modelled",
}

# --- systems ------------------------------------------------------------------------------------------------
PCIE_GEN3_X16_BPS = 15.75e9  # hardware.md 3B: PCIe Gen3 x16, bytes/s per direction [R1]
_DUAL_ROOT_PCIE = ("NVIDIA Tesla P100", "NVIDIA Tesla M40", "NVIDIA TitanX (Maxwell)")  # DeepBench README


@lru_cache(maxsize=None)
def pcie_efficiency() -> float:
    """Achievable fraction of a PCIe Gen3 x16 link (15.75 GB/s per direction) in an NCCL all-reduce:
    the median bus bandwidth ``2(P-1)/P n / t`` of DeepBench's one-node all-reduces of >= 1M floats on its
    dual-root PCIe machines (P100, M40, TitanX Maxwell; NCCL 2.0; 54 rows, ~6.0 GB/s), over 15.75 GB/s.
    Fitted on DeepBench, not on the scaling data; used for every PCIe tier here.

    >>> round(pcie_efficiency(), 2)
    0.38
    """
    d = datasets.load("deepbench_allreduce")
    d = d[(d["num_nodes"] == 1) & d["device"].isin(_DUAL_ROOT_PCIE) & (d["size_floats"] >= 1e6)]
    p = d["num_ranks"].astype(float)
    busbw = d["size_floats"] * 4.0 * 2 * (p - 1) / p / (d["mean_time_ms"] * 1e-3)
    return float(busbw.median() / PCIE_GEN3_X16_BPS)


def _pcie(notes: str) -> dict:
    return {"name": "pcie-gen3-x16", "kind": "pcie", "bw_Bps": PCIE_GEN3_X16_BPS, "latency_s": 5e-6,
            "efficiency": round(pcie_efficiency(), 4),
            "sources": {"bw_Bps": "hardware.md 3B: PCIe Gen3 x16 15.75 GB/s per direction [R1]",
                        "latency_s": "estimate (as the network tiers of the presets; no PCIe latency in "
                                     "hardware.md)",
                        "efficiency": "fitted on DeepBench one-node NCCL 2.0 all-reduces on dual-root PCIe "
                                      "machines (validate.scaling.pcie_efficiency), not on these data"},
            "notes": notes}


def _net(name, kind, gbit, latency, notes, source) -> dict:
    return {"name": name, "kind": kind, "bw_Bps": gbit * 1e9 / 8, "latency_s": latency, "efficiency": 0.9,
            "sources": {"bw_Bps": source, "latency_s": "estimate (unconfirmed), as the presets' network tiers",
                        "efficiency": "estimate (unconfirmed): 0.9 of line rate, as the presets' network tiers"},
            "notes": notes}


@lru_cache(maxsize=None)
def systems() -> dict:
    """The clusters of the sources (DGX-1 P100, GCE and EC2 K80, Horovod's servers, torchgpipe's P40 host), as
    :class:`~concurrency_model.cluster.Cluster` objects."""
    edr = _net("infiniband-edr", "infiniband", 100, 5e-6, "4 per node; unused (one node)",
               "hardware.md 3A DGX-1 (P100): 4 x InfiniBand EDR 100 Gb/s [R24]")
    spec = {
        "dgx1-p100": {"name": "dgx1-p100", "device": "p100-sxm2-16gb", "gpus_per_node": 8, "nics_per_node": 4,
                      "intra": {"name": "nvlink1-hybrid-cube-mesh", "kind": "nvlink", "bw_Bps": 80e9,
                                "latency_s": 2e-6, "efficiency": 0.8,
                                "sources": {"bw_Bps": "hardware.md 3A DGX-1 (P100) and 3B NVLink 1: 4 links x "
                                                      "20 GB/s = 80 GB/s per GPU per direction [R9][R24]",
                                            "latency_s": "as the dgx1-v100 preset (estimate)",
                                            "efficiency": "as the dgx1-v100 preset (estimate, 0.8)"}},
                      "inter": edr, "sources": {"device": "hardware.md 3A DGX-1 (P100): 8 x Tesla P100 SXM2 16GB"}},
        "gce-k80x8": {"name": "gce-n1-standard-32-k80x8", "device": "k80-gk210-12gb", "gpus_per_node": 8,
                      "nics_per_node": 1, "intra": _pcie("4 K80 boards (8 GPUs) on PCIe Gen3"),
                      "inter": _net("gce-network", "ethernet", 10, 3e-5, "unused (one instance)",
                                    "unused placeholder (the rows use one instance)"),
                      "sources": {"device": "tf_cnn_benchmarks rows: 8x NVIDIA Tesla K80 (8 GPUs = 4 boards)"}},
        "ec2-p2.8xlarge": {"name": "ec2-p2.8xlarge", "device": "k80-gk210-12gb", "gpus_per_node": 8,
                           "nics_per_node": 1, "intra": _pcie("4 K80 boards (8 GPUs) on PCIe Gen3"),
                           "inter": _net("ec2-10gbe", "ethernet", 10, 3e-5, "one link per instance; TensorFlow "
                                         "1.x sends over gRPC/TCP",
                                         "AWS EC2 instance types: p2.8xlarge '10 Gigabit' network performance "
                                         "(not in shared/reference; unconfirmed)"),
                           "sources": {"device": "tf_cnn_benchmarks rows: p2.8xlarge, 8x NVIDIA Tesla K80"}},
        "horovod-pascal": {"name": "horovod-128x4-pascal", "device": "p100-pcie-16gb", "gpus_per_node": 4,
                           "nics_per_node": 1, "intra": _pcie("4 GPUs per server on PCIe Gen3"),
                           "inter": _net("roce-25g", "roce", 25, 5e-6, "one NIC per server (assumed)",
                                         "horovod docs/benchmarks.rst: RoCE-capable 25 Gbit/s network"),
                           "sources": {"device": "horovod docs: 'Pascal GPUs' (model not stated); the PCIe "
                                                 "P100 assumed"}},
        "p40x8": {"name": "torchgpipe-8xp40", "device": "p40-24gb", "gpus_per_node": 8, "nics_per_node": 1,
                  "intra": _pcie("8 P40 on PCIe Gen3 (Intel E5-2650 v4 host)"),
                  "inter": _net("unused", "ethernet", 10, 3e-5, "unused (one host)", "unused placeholder"),
                  "sources": {"device": "torchgpipe benchmarks: 8x NVIDIA Tesla P40 (PCIe)"}},
    }
    return {k: load_cluster(v) for k, v in spec.items()}


TF_SYSTEM = {"NVIDIA® DGX-1™": "dgx1-p100", "n1-standard-32-k80x8": "gce-k80x8", "p2.8xlarge": "ec2-p2.8xlarge"}


# --- loaders ------------------------------------------------------------------------------------------------
def _read(key: str) -> pd.DataFrame:
    stem = FILES[key]
    numeric, other, optional = SCHEMAS[stem]
    return datasets.read_checked(datasets.data_dir() / f"{stem}.csv", numeric, other, optional)


def _zoo(model: str) -> tuple[str | None, str]:
    if model in ZOO:
        return ZOO[model], ""
    why = next((v for k, v in NOT_IN_ZOO.items() if model.startswith(k)), f"{model} is not in the zoo")
    return None, f"not mappable: {why}"


def _sync(config: str) -> str:
    c = config.split("/")[0].strip()
    if c.startswith("parameter_server"):
        return "parameter_server_" + config.split("/")[1].strip()
    return {"replicated (with NCCL)": "allreduce", "replicated (without NCCL)": "allreduce_copy",
            "distributed_replicated": "allreduce_ps_sharded"}.get(c, c)


def tf_cnn_rows() -> pd.DataFrame:
    """tf_cnn_benchmarks 2017, one row per published images/s (209; InceptionV3 and the two N/A cells are
    kept with ``reason``).

    >>> r = tf_cnn_rows().iloc[4].to_dict()   # file line 6
    >>> [r[k] for k in ("zoo_model", "system", "gpus", "batch_per_gpu", "sync", "measured")]
    ['vgg16', 'dgx1-p100', 1, 64, 'allreduce', 154.0]
    """
    df = _read("tf_cnn_benchmarks")
    rows = []
    for i, r in df.iterrows():
        zoo, why = _zoo(r["model"])
        system = TF_SYSTEM.get(r["instance"])
        if system is None:
            why = why or f"not mappable: no system for instance {r['instance']!r}"
        if pd.isna(r["throughput_images_per_s"]):
            why = why or "not mappable: no images/s published (N/A in source)"
        sync = _sync(r["variable_update_config"])
        dist = "Distributed" in r["platform"]
        rows.append({"dataset": "tf_cnn_benchmarks", "source_row": i + 2, "model": r["model"], "zoo_model": zoo,
                     "system": system, "gpus": int(r["num_gpus"]), "batch_per_gpu": int(r["batch_size_per_gpu"]),
                     "sync": sync, "data": r["data"], "measured": float(r["throughput_images_per_s"]),
                     "label": f"{r['model']} {int(r['num_gpus'])} GPUs, batch {int(r['batch_size_per_gpu'])}/GPU, "
                              f"{r['data']}",
                     "group": f"{system}{' distributed' if dist else ''} {sync}", "reason": why})
    return pd.DataFrame(rows)


def torchgpipe_rows() -> pd.DataFrame:
    """torchgpipe speed benchmarks: one row per published speedup (ResNet-101 against the plain model on
    one GPU; AmoebaNet-D and U-Net rows kept with ``reason``)."""
    df = _read("torchgpipe")
    rows = []
    for i, r in df.iterrows():
        zoo, why = _zoo(r["model"])
        base = r["experiment"] == "baseline"
        if base:
            why = why or "reference: the plain model on one GPU, the speedups' denominator"
        m = r["num_microbatches"]
        rows.append({"dataset": "torchgpipe", "source_row": i + 2, "model": r["model"], "zoo_model": zoo,
                     "system": "p40x8", "gpus": int(r["num_partitions"]), "partitions": int(r["num_partitions"]),
                     "microbatches": 1 if pd.isna(m) else int(m), "global_batch": int(r["global_batch_size"]),
                     "checkpoint": r["checkpoint"], "baseline": bool(base), "benchmark": r["benchmark"],
                     "measured": float(r["speedup_torchgpipe"]),
                     "label": f"{r['model']} {r['experiment']}, batch {int(r['global_batch_size'])}",
                     "group": r["benchmark"], "reason": why})
    return pd.DataFrame(rows)


def horovod_rows() -> pd.DataFrame:
    """Horovod docs: 512-GPU scaling efficiency, one row per model."""
    df = _read("horovod")
    rows = []
    for i, r in df.iterrows():
        zoo, why = _zoo(r["model"])
        if int(r["num_servers"]) * int(r["gpus_per_server"]) != int(r["num_gpus"]):
            why = why or "not mappable: servers x GPUs per server != GPUs"
        rows.append({"dataset": "horovod", "source_row": i + 2, "model": r["model"], "zoo_model": zoo,
                     "system": "horovod-pascal", "gpus": int(r["num_gpus"]), "batch_per_gpu": 64,
                     "sync": "allreduce", "measured": float(r["scaling_efficiency_pct"]),
                     "label": f"{r['model']} on {int(r['num_gpus'])} GPUs", "group": "horovod 512 GPUs",
                     "reason": why})
    return pd.DataFrame(rows)


DLE_MODEL_DIRS = ("RN50v1.5", "resnet50v1.5")  # ResNet-50 v1.5: stride 2 on the 3x3 conv, as torchvision
DLE_DTYPE = {"FP32": "fp32", "TF32": "tf32", "mixed precision": "fp16"}


def _dle_system(heading) -> str | None:
    h = str(heading)
    if "DGX A100" in h:
        return "dgx-a100-40gb" if "40GB" in h else "dgx-a100"
    return "dgx1-v100" if "DGX-1" in h else "dgx-2" if "DGX-2" in h else None


def _dle_batch(cell, dtype: str) -> int | None:
    """``256`` or ``128 (FP32) / 256 (AMP)`` -> the batch per GPU of ``dtype``."""
    if not isinstance(cell, str):
        return None
    per = dict((k, int(v)) for v, k in re.findall(r"(\d+)\s*\((FP32|TF32|AMP)\)", cell))
    if per:
        return per.get({"fp16": "AMP", "fp32": "FP32", "tf32": "TF32"}[dtype])
    return int(cell) if cell.strip().isdigit() else None


def dle_rows() -> pd.DataFrame:
    """NVIDIA DeepLearningExamples ResNet-50 v1.5 training tables: one row per images/s cell (``source_row``
    is the cell's line in the long file); cells without a batch per GPU in their table kept with ``reason``.

    >>> df = dle_rows()
    >>> len(df), int((df["reason"] == "").sum())
    (56, 12)
    """
    df = _read("dle_resnet50")
    df = df[df["model_dir"].str.split("/").str[-1].isin(DLE_MODEL_DIRS)]
    rows = []
    for (readme, _, _), g in df.groupby(["readme", "table_index", "row_index"], sort=False):
        cells = dict(zip(g["column"], g["value_as_published"]))
        system = _dle_system(g["section_heading"].iloc[0])
        gpus = pd.to_numeric(cells.get("GPUs"), errors="coerce")
        for i, r in g[g["column"].str.startswith("Throughput - ")].iterrows():
            prec = r["column"][len("Throughput - "):]
            dtype = next((v for k, v in DLE_DTYPE.items() if prec.startswith(k)), None)
            value = re.match(r"\s*([\d.]+)", str(r["value_as_published"]))
            batch = _dle_batch(cells.get("Batch Size / GPU"), dtype) if dtype else None
            why = ("not mappable: sparsity (ASP) is not modelled" if "ASP" in prec else
                   f"not mappable: precision {prec!r}" if dtype is None else
                   "not mappable: no images/s published" if value is None else
                   f"not mappable: no system for {g['section_heading'].iloc[0]!r}" if system is None else
                   "not mappable: no GPU count" if pd.isna(gpus) else
                   "not mappable: the table gives no batch per GPU" if batch is None else "")
            rows.append({"dataset": "dle_resnet50", "source_row": i + 2, "model": "ResNet-50 v1.5",
                         "zoo_model": "resnet50", "system": system, "gpus": 0 if pd.isna(gpus) else int(gpus),
                         "batch_per_gpu": batch, "dtype": dtype, "sync": "allreduce",
                         "measured": float(value.group(1)) if value else np.nan,
                         "label": f"{readme.split('/')[0]} {r['column']}, {cells.get('GPUs')} GPUs",
                         "group": f"{readme.split('/')[0]} {system}", "reason": why})
    return pd.DataFrame(rows)


def all_rows() -> pd.DataFrame:
    return pd.concat([tf_cnn_rows(), torchgpipe_rows(), horovod_rows(), dle_rows()], ignore_index=True)


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
    enters no time), and a note that says so."""
    from dataclasses import replace

    from ..parallel.estimate import estimate
    from ..scenario import load_scenario
    try:
        e = estimate(spec)
        return e.step_time_s, e.breakdown, ""
    except ValueError as err:
        if not str(err).startswith("memory:"):
            raise
        note = f"predicted beyond the memory model ({err}); the published run fit"
    cl = load_scenario(spec).cluster
    e = estimate({**spec, "cluster": replace(cl, device=replace(cl.device, mem_capacity=1e18))})
    return e.step_time_s, e.breakdown, note


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
    alpha, beta = tier_from_dict(_pcie("GPU to host")).alpha_beta()
    if gpus == 1:
        return 2 * alpha + 2 * nbytes * beta
    return float(dist.ps_time(nbytes, gpus, alpha, beta, servers=-(-gpus // 2)))


def ps_throughput(model: str, cluster, gpus: int, batch_per_gpu: int, where: str) -> tuple[float, dict, str]:
    """Images/s with parameter servers: the one-GPU step (forward, backward, update) plus the exposed part
    of :func:`ps_sync_seconds`, overlapped as the estimate overlaps an all-reduce (derived): the push hides
    behind the backward pass and the pull behind the forward pass, except the last 25 MiB of the push
    (:data:`concurrency_model.parallel.features.BUCKET_BYTES`); exposed = min(sync, max(0, push - backward)
    + max(0, pull - forward) + last)."""
    from ..models import get_model
    from ..parallel.features import BUCKET_BYTES
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
    return {"status": "ok", "reason": "", "predicted": thr, "note": note, "compute_s": bd["compute_s"],
            "data_parallel_exposed_s": bd["data_parallel_exposed_s"]}


@lru_cache(maxsize=None)
def _dle_cluster(name: str):
    from .training import DGX2, _dgx_a100_40gb
    return load_cluster({"dgx-2": DGX2, "dgx-a100-40gb": {"name": "dgx-a100-40gb", **_dgx_a100_40gb()}}.get(name,
                                                                                                          name))


PREDICT = {"tf_cnn_benchmarks": _predict_tf, "torchgpipe": _predict_gpipe, "horovod": _predict_horovod,
           "dle_resnet50": _predict_dle}


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
    ``unmappable``, ``reference``, ``refused``), ``reason``, ``predicted``, ``note``, ``ape`` (in %),
    ``signed_error_pct`` and, for efficiencies, ``points`` (predicted - measured, percentage points)."""
    df = all_rows() if df is None else df
    order = df.sort_values(["dataset", "zoo_model", "system"], kind="stable", na_position="last").index
    out = {i: _predict(df.loc[i].to_dict()) for i in order}  # a model's rows share the estimate's caches
    pred = pd.DataFrame([out[i] for i in df.index], index=df.index)
    res = pd.concat([df.drop(columns=["reason"]), pred], axis=1)
    for col in ("predicted", "note", "compute_s", "data_parallel_exposed_s"):
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
    imgs = res[res["dataset"].isin(["tf_cnn_benchmarks", "dle_resnet50"]) & (res["status"] == "ok")]
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
