"""The minibatch against the paper's three regions (§3, Fig. 6a), predicted for one CNN on two cluster sizes.

Fig. 6a draws, over the minibatch size, the hardware's utilization rising and generalization falling:
region A too small to use the hardware, B the sweet spot, C too large to generalize [S1]. The toolkit
predicts the first half (:mod:`concurrency_model.parallel.batch_size`); the second is the paper's reported
ceilings (8k, 32k, 64k), not a model.
"""
from __future__ import annotations

import pandas as pd

from ..parallel.batch_size import LARGE_BATCH_RULES, UNDERUSED
from ..training.estimate import estimate
from ._plot import legend_outside, new_axes

BATCHES = tuple(2 ** k for k in range(7, 18))  # 128 .. 131,072 images a step
GPUS = (32, 256)
MICROBATCH = 256  # at most this many images a GPU a microbatch; more are accumulated
SCENARIO = {"model": "resnet50", "cluster": "dgx1-v100", "training": {"dtype": "fp16", "optimizer": "momentum"}}


def regions_frame(batches=BATCHES, gpus=GPUS) -> pd.DataFrame:
    """One row per GPU count and global batch (at least one image a GPU): ``gpus, global_batch,
    microbatch, images_per_s, images_per_s_per_gpu, device_utilization, region`` from
    :func:`~concurrency_model.training.estimate.estimate` (ResNet-50, fp16, momentum SGD, DGX-1 V100 nodes).

    >>> f = regions_frame(batches=(256, 16384), gpus=(256,))
    >>> f["region"].tolist()
    ['A', 'C']
    """

    rows = []
    for p in gpus:
        for b in batches:
            if b < p:
                continue
            mb = min(b // p, MICROBATCH)
            e = estimate({**SCENARIO, "parallel": {"data": p, "microbatch_size": mb, "global_batch": b}})
            r = e.batch_region
            rows.append({"gpus": p, "global_batch": b, "microbatch": mb, "images_per_s": e.throughput_samples_per_s,
                         "images_per_s_per_gpu": e.throughput_samples_per_s / p,
                         "device_utilization": r.device_utilization, "region": r.region, "ceiling": r.ceiling})
    return pd.DataFrame(rows)


def batch_regions(frame: pd.DataFrame | None = None, ax=None):
    """Images/s per GPU against the global batch (log x) for each GPU count: hollow markers in region A,
    region C shaded beyond the ceiling, the paper's 32k and 64k marked.

    >>> batch_regions(regions_frame(batches=(256, 16384), gpus=(256,))).get_xscale()
    'log'
    """

    df = regions_frame() if frame is None else frame
    ax = new_axes(ax)
    for (p, g), color in zip(df.groupby("gpus"), ("tab:blue", "tab:orange", "tab:green", "tab:red")):
        ax.plot(g["global_batch"], g["images_per_s_per_gpu"], color=color, lw=1.5, label=f"{p} GPUs")
        a = g["region"] == "A"
        ax.scatter(g.loc[a, "global_batch"], g.loc[a, "images_per_s_per_gpu"], facecolor="white", edgecolor=color,
                   s=40, zorder=3)
        ax.scatter(g.loc[~a, "global_batch"], g.loc[~a, "images_per_s_per_gpu"], color=color, s=40, zorder=3)
    ceiling = int(df["ceiling"].iloc[0])
    hi = df["global_batch"].max() * 1.5
    ax.axvspan(ceiling, hi, color="tab:red", alpha=0.08, lw=0)
    top = df["images_per_s_per_gpu"].max() * 1.15
    ax.text(ceiling * 1.1, top * 0.5, f"region C: above {ceiling:,}\n(Fig. 6b, training.max_global_batch)",
            fontsize=7, va="top", color="tab:red")
    for size, name in LARGE_BATCH_RULES.items():
        ax.axvline(size, color="tab:red", lw=0.8, ls=":")
        ax.text(size * 1.05, top * 0.05, name.split(" ")[0], fontsize=7, color="tab:red")
    ax.scatter([], [], facecolor="white", edgecolor="gray", label=f"region A: a GPU under {UNDERUSED:.0%} of its "
               "saturated images/s")
    ax.set_xscale("log", base=2)
    ticks = sorted(df["global_batch"].unique())
    ax.set_xticks(ticks, [f"{t // 1024:,}k" if t >= 1024 else f"{t:,}" for t in ticks])
    ax.set_xlim(df["global_batch"].min() / 1.5, hi)
    ax.set_ylim(0, top)
    ax.set_xlabel("global minibatch (images a step)")
    ax.set_ylabel("images/s per GPU (predicted)")
    ax.set_title("The paper's minibatch regions (§3, Fig. 6a): ResNet-50, fp16, DGX-1 V100 nodes", fontsize=10)
    ax.grid(True, alpha=0.3)
    legend_outside(ax, "right")
    return ax
