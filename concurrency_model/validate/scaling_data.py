"""Data and systems of the scaling validation (:mod:`.scaling`): the datasets' schemas, loaders and the
machines they were measured on, each number with its source (the DeepLearningExamples tables: :mod:`.dle`)."""
from __future__ import annotations

from functools import lru_cache

import pandas as pd

from .. import datasets
from ..hardware.clusters import load_cluster

# NVIDIA DeepLearningExamples CNN tables: dataset -> (model directories, model name, zoo model)
DLE_CNNS = {"dle_resnet50": (("RN50v1.5", "resnet50v1.5"), "ResNet-50 v1.5", "resnet50"),  # v1.5 = torchvision's
            "dle_resnext101": (("resnext101-32x4d",), "ResNeXt-101 32x4d", "resnext101_32x4d"),
            "dle_se_resnext101": (("se-resnext101-32x4d",), "SE-ResNeXt-101 32x4d", "se_resnext101_32x4d")}
DATASETS = ("tf_cnn_benchmarks", "torchgpipe", "horovod", *DLE_CNNS, "dle_bert")
FILES = {"tf_cnn_benchmarks": "tf_cnn_benchmarks_dp_scaling_2017", "torchgpipe": "torchgpipe_pipeline_speed",
         "horovod": "horovod_docs_scaling_efficiency", **dict.fromkeys(DLE_CNNS, "nvidia_dle_training_perf_long"),
         "dle_bert": "nvidia_dle_training_perf_long"}
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
          "horovod": ("efficiency", "% scaling efficiency"),
          **dict.fromkeys(DLE_CNNS, ("images/s", "images per second")),
          "dle_bert": ("sequences/s", "sequences per second")}
# issue 5: images/s median APE <= 15%; every torchgpipe speedup within 15%; every Horovod efficiency within
# 10 percentage points
TARGETS = {"tf_cnn_benchmarks": ("median_ape", 15.0), "torchgpipe": ("max_ape", 15.0),
           "horovod": ("max_points", 10.0)}
ZOO = {"ResNet-50": "resnet50", "ResNet-152": "resnet152", "ResNet-101": "resnet101", "AlexNet": "alexnet",
       "VGG16": "vgg16", "VGG-16": "vgg16", "InceptionV3": "inception_v3", "Inception V3": "inception_v3"}
NOT_IN_ZOO = {"AmoebaNet-D": "AmoebaNet-D is not in the zoo",
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
    "dle_resnext101": "resnext101_32x4d (torchvision's ResNeXt bottleneck with 32 groups of 4 channels at the "
                      "first stage, Xie et al. 2017; 44,177,704 parameters); otherwise as dle_resnet50",
    "dle_se_resnext101": "se_resnext101_32x4d (resnext101_32x4d with a squeeze-and-excitation module of reduction 16 "
                         "on every block, Hu et al. 2018; 48,955,416 parameters); otherwise as dle_resnet50",
    "dle_bert": "bert-large with the pre-training heads (masked-LM decoder on every position, next-sentence "
                "classifier; Devlin et al. 2019), padded to the table's sequence length; FP32 -> fp32, TF32 -> "
                "tf32, FP16 / mixed precision -> fp16; LAMB; micro-batch and gradient-accumulation steps of "
                "the table (micro-batch = accumulated batch per GPU / steps where the table gives it; where "
                "it gives neither that nor a global batch, its 'Batch size / GPU' is the accumulated one); "
                "data parallel over "
                "nodes x GPUs per node, all-reduce overlapped with the last micro-batch's backward; systems "
                "as dle_resnet50, multi-node DGX A100 = dgx-a100 nodes on their 8 HDR NICs; DGX-2H (V100 at "
                "450 W) has no preset; framework, fused kernels, XLA and unpadding are not modelled",
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


def pcie_notes(notes: str) -> dict:
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
    :class:`~concurrency_model.hardware.clusters.Cluster` objects."""
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
                      "nics_per_node": 1, "intra": pcie_notes("4 K80 boards (8 GPUs) on PCIe Gen3"),
                      "inter": _net("gce-network", "ethernet", 10, 3e-5, "unused (one instance)",
                                    "unused placeholder (the rows use one instance)"),
                      "sources": {"device": "tf_cnn_benchmarks rows: 8x NVIDIA Tesla K80 (8 GPUs = 4 boards)"}},
        "ec2-p2.8xlarge": {"name": "ec2-p2.8xlarge", "device": "k80-gk210-12gb", "gpus_per_node": 8,
                           "nics_per_node": 1, "intra": pcie_notes("4 K80 boards (8 GPUs) on PCIe Gen3"),
                           "inter": _net("ec2-10gbe", "ethernet", 10, 3e-5, "one link per instance; TensorFlow "
                                         "1.x sends over gRPC/TCP",
                                         "AWS EC2 instance types: p2.8xlarge '10 Gigabit' network performance "
                                         "(not in shared/reference; unconfirmed)"),
                           "sources": {"device": "tf_cnn_benchmarks rows: p2.8xlarge, 8x NVIDIA Tesla K80"}},
        "horovod-pascal": {"name": "horovod-128x4-pascal", "device": "p100-pcie-16gb", "gpus_per_node": 4,
                           "nics_per_node": 1, "intra": pcie_notes("4 GPUs per server on PCIe Gen3"),
                           "inter": _net("roce-25g", "roce", 25, 5e-6, "one NIC per server (assumed)",
                                         "horovod docs/benchmarks.rst: RoCE-capable 25 Gbit/s network"),
                           "sources": {"device": "horovod docs: 'Pascal GPUs' (model not stated); the PCIe "
                                                 "P100 assumed"}},
        "p40x8": {"name": "torchgpipe-8xp40", "device": "p40-24gb", "gpus_per_node": 8, "nics_per_node": 1,
                  "intra": pcie_notes("8 P40 on PCIe Gen3 (Intel E5-2650 v4 host)"),
                  "inter": _net("unused", "ethernet", 10, 3e-5, "unused (one host)", "unused placeholder"),
                  "sources": {"device": "torchgpipe benchmarks: 8x NVIDIA Tesla P40 (PCIe)"}},
    }
    return {k: load_cluster(v) for k, v in spec.items()}


TF_SYSTEM = {"NVIDIA® DGX-1™": "dgx1-p100", "n1-standard-32-k80x8": "gce-k80x8", "p2.8xlarge": "ec2-p2.8xlarge"}


# --- loaders ------------------------------------------------------------------------------------------------
def read_set(key: str) -> pd.DataFrame:
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
    """tf_cnn_benchmarks 2017, one row per published images/s (209; the two N/A cells are kept with
    ``reason``).

    >>> r = tf_cnn_rows().iloc[4].to_dict()   # file line 6
    >>> [r[k] for k in ("zoo_model", "system", "gpus", "batch_per_gpu", "sync", "measured")]
    ['vgg16', 'dgx1-p100', 1, 64, 'allreduce', 154.0]
    """
    df = read_set("tf_cnn_benchmarks")
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
    df = read_set("torchgpipe")
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
    df = read_set("horovod")
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
