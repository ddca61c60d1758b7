"""Model parallelism of CNNs (the paper's §6.2 and §6.4) through ``estimate``: the same 8 GPUs split by
samples (data), channels (``tensor``), rows (``context``) and Krizhevsky's per-layer hybrid
(``tensor_layers: "fc"``), and the hybrid's speedup trend on a PCIe box like Krizhevsky's. Model only:
``data/`` holds no model-parallel CNN measurements; Krizhevsky's 6.25x is the one published figure.
"""
from __future__ import annotations

from dataclasses import replace

import pandas as pd

from ..hardware.clusters import load_cluster
from ..hardware.devices import load_device
from ..parallel import hybrid
from ..training.estimate import estimate
from ._plot import legend_outside, new_axes

MODELS = ("alexnet", "vgg16", "resnet50")
#: 8 A100 of one node, global batch 256 (32 images per GPU), fp16, no host gaps
SPLITS = {"data 8": {"data": 8, "microbatch_size": 32},
          "channels: data 4 x tensor 2": {"data": 4, "tensor": 2, "microbatch_size": 64},
          "rows: data 4 x context 2": {"data": 4, "context": 2, "microbatch_size": 64},
          "hybrid: tensor 8 on FC layers": {"data": 1, "tensor": 8, "tensor_layers": "fc", "microbatch_size": 256}}


def pcie_box():
    """Krizhevsky's machine as :mod:`concurrency_model.parallel.hybrid` models it: the ``dgx1-v100`` preset
    with M40s for his K20s (``hybrid.DEFAULT_DEVICE``) on PCIe inside the node (``hybrid.PCIE_ALPHA_S``,
    ``hybrid.PCIE_BETA_S_PER_BYTE``: 8 GB/s at 75%, 10 us a message)."""

    box = load_cluster("dgx1-v100")
    pcie = replace(box.intra, name="pcie-gen2", kind="pcie", bw=1 / hybrid.PCIE_BETA_S_PER_BYTE,
                   latency=hybrid.PCIE_ALPHA_S, efficiency=1.0)
    return replace(box, name="pcie-box", device=load_device(hybrid.DEFAULT_DEVICE), intra=pcie)


def _estimate(model, cluster, parallel: dict, dtype: str, optimizer: str):

    return estimate({"model": model, "cluster": cluster,
                     "parallel": {**parallel, "global_batch": parallel.get("data", 1) * parallel["microbatch_size"]},
                     "training": {"dtype": dtype, "optimizer": optimizer, "host_overhead_s": 0}})


def splits_frame(models=MODELS) -> pd.DataFrame:
    """``model, split, step_s, memory_gb, comm_s`` (exposed), ``optimizer_s`` of :data:`SPLITS` on ``dgx-a100``."""
    rows = []
    for m in models:
        for name, par in SPLITS.items():
            e = _estimate(m, "dgx-a100", par, "fp16", "momentum")
            b = e.breakdown
            rows.append({"model": m, "split": name, "step_s": e.step_time_s,
                         "memory_gb": e.memory_bytes_per_device / 1e9, "optimizer_s": b["optimizer_s"],
                         "comm_s": b["tensor_parallel_comm_s"] + b["context_parallel_comm_s"]
                         + b["data_parallel_exposed_s"]})
    return pd.DataFrame(rows)


def trick_frame(gpus=(1, 2, 4, 8)) -> pd.DataFrame:
    """AlexNet's speedup over one GPU (128 images) on :func:`pcie_box`: data parallel (128 images per GPU),
    model parallel (every layer's channels split, 128 images) and the hybrid (128 images per GPU through
    the convolutions)."""
    box = pcie_box()

    def rate(d, t, layers="all", mb=128):
        par = {"data": d, "tensor": t, "tensor_layers": layers, "microbatch_size": mb}
        return _estimate("alexnet", box, par, "fp32", "momentum").throughput_samples_per_s
    one = rate(1, 1)
    return pd.DataFrame([{"gpus": P, "data parallel": rate(P, 1) / one, "model parallel": rate(1, P) / one,
                          "one weird trick": rate(1, P, "fc", 128 * P) / one if P > 1 else 1.0} for P in gpus])


def splits_plot(frame: pd.DataFrame, ax=None):
    """Step time of each split, per model, relative to the data-parallel one (bars), memory per GPU on top."""
    ax = new_axes(ax)
    models, splits = list(dict.fromkeys(frame["model"])), list(SPLITS)
    width = 0.8 / len(splits)
    for i, s in enumerate(splits):
        d = frame[frame["split"] == s].set_index("model").loc[models]
        base = frame[frame["split"] == splits[0]].set_index("model").loc[models, "step_s"]
        x = [k + (i - (len(splits) - 1) / 2) * width for k in range(len(models))]
        bars = ax.bar(x, d["step_s"] / base, width, label=s)
        for bar, gb in zip(bars, d["memory_gb"]):
            ax.text(bar.get_x() + bar.get_width() / 2, bar.get_height(), f"{gb:.1f}", ha="center", va="bottom",
                    fontsize=7)
    ax.set_xticks(range(len(models)), models)
    ax.set_ylabel("step time / data-parallel step")
    ax.set_title("8 A100, 32 images per GPU, fp16 (labels: GB per GPU)")
    legend_outside(ax, "below", ncol=2)
    return ax


def trick_plot(frame: pd.DataFrame, ax=None):
    """Speedups of :func:`trick_frame` with Krizhevsky's 6.25x on 8 GPUs."""
    ax = new_axes(ax)
    for col, style in (("one weird trick", "o-"), ("data parallel", "s--"), ("model parallel", "^:")):
        ax.plot(frame["gpus"], frame[col], style, label=col)
    ax.plot([8], [6.25], "k*", ms=12, label="Krizhevsky 2014: 6.25x")
    ax.plot(frame["gpus"], frame["gpus"], color="0.7", lw=1, label="linear")
    ax.set_xlabel("GPUs")
    ax.set_ylabel("speedup over one GPU")
    ax.set_title("AlexNet, fp32, PCIe box")
    legend_outside(ax, "below", ncol=2)
    return ax
