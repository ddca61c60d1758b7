"""The report's "Time to train: batch against utilisation" section (issue 40): MLPerf's reference convergence points
with the fitted curves (:mod:`concurrency_model.convergence`), and ResNet-50's time to MLPerf's ResNet target over
GPUs and global batch (steps at the batch x the step :func:`~concurrency_model.training.estimate.estimate` gives)."""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..convergence.fit import evaluate
from ..convergence.target import curve_of
from ..training.estimate import estimate
from ._plot import figure
from .html import Section
from .sections import add_figure

BENCHMARKS = ("resnet", "bert", "gpt3", "llama31_8b", "stable_diffusion", "retinanet")
SCENARIO = {"model": "resnet50", "cluster": "dgx-a100", "training": {"dtype": "fp16", "optimizer": "momentum",
                                                                     "target": {"benchmark": "resnet"}}}
GPUS = (8, 32, 128, 512)
BATCHES = (2048, 4096, 8192, 16384, 32768, 65536)  # inside MLPerf ResNet's measured 1,632-65,536
MICROBATCH = 256  # at most this many images a GPU a microbatch; more are accumulated


def curves_frame(names=BENCHMARKS) -> pd.DataFrame:
    """One row per benchmark and batch: the measured value (``measured``) and the kept curve's (``fitted``), both
    over the curve at the smallest batch, with the form and its held-out error.

    >>> f = curves_frame(("gpt3",))
    >>> f["benchmark"].unique().tolist(), bool((f["fitted"].dropna() > 0).all())
    (['gpt3'], True)
    """

    rows = []
    for name in names:
        c = curve_of({"benchmark": name})
        p = c.params[c.form]
        ref = float(evaluate(c.form, p, c.points.batch[0]))
        grid = np.geomspace(c.points.batch[0], c.points.batch[-1], 40)
        for b, v in zip(c.points.batch, c.points.value):
            rows.append({"benchmark": name, "global_batch": float(b), "measured": v / ref, "fitted": np.nan,
                         "form": c.form, "held_out": c.held_out.get(c.form)})
        for b in grid:
            rows.append({"benchmark": name, "global_batch": float(b), "measured": np.nan,
                         "fitted": float(evaluate(c.form, p, b)) / ref, "form": c.form,
                         "held_out": c.held_out.get(c.form)})
    return pd.DataFrame(rows)


def surface_frame(gpus=GPUS, batches=BATCHES) -> pd.DataFrame:
    """One row per GPU count and global batch: step seconds, images/s, steps and hours to MLPerf ResNet's target
    (ResNet-50, fp16, momentum SGD, DGX A100 nodes, data parallel).

    >>> f = surface_frame(gpus=(8,), batches=(2048, 65536))
    >>> bool(f["steps_to_target"].iloc[0] > f["steps_to_target"].iloc[1])
    True
    """

    rows = []
    for p in gpus:
        for b in batches:
            if b < p:
                continue
            # the estimate's fields, not to_dict(): that also computes the batch region, which this table does not show
            e = estimate({**SCENARIO, "parallel": {"data": p, "microbatch_size": min(b // p, MICROBATCH),
                                                   "global_batch": b}})
            rows.append({"gpus": p, "global_batch": b, "step_time_s": e.step_time_s,
                         "images_per_s": e.throughput_samples_per_s, "steps_to_target": e.target["steps_to_target"],
                         "hours_to_target": e.target["time_to_target_s"] / 3600,
                         "gpu_hours_to_target": e.target["gpu_hours_to_target"]})
    return pd.DataFrame(rows)


def curves_plot(df: pd.DataFrame, ax) -> None:
    """Measured points and fitted curves: data to the target over the curve's at the smallest batch."""
    for i, (name, g) in enumerate(df.groupby("benchmark", sort=False)):
        colour = f"C{i}"
        pts, line = g.dropna(subset=["measured"]), g.dropna(subset=["fitted"])
        held = "" if g["held_out"].iloc[0] is None else f", {100 * g['held_out'].iloc[0]:.0f}%"
        ax.plot(line["global_batch"], line["fitted"], color=colour, label=f"{name} ({g['form'].iloc[0]}{held})")
        ax.plot(pts["global_batch"], pts["measured"], "o", color=colour, markersize=4)
    ax.set(xscale="log", xlabel="global batch (samples a step)",
           ylabel="data to the target / at the smallest batch")
    ax.legend(fontsize=7, title="form, held-out median error", title_fontsize=7)


def surface_plot(df: pd.DataFrame, ax) -> None:
    """Hours to the target over GPU count and batch (blank: fewer images than GPUs), the quickest batch of each GPU
    count boxed."""
    grid = df.pivot(index="gpus", columns="global_batch", values="hours_to_target")
    logs = np.log10(grid.to_numpy(dtype=float))
    im = ax.imshow(logs, aspect="auto", cmap="viridis_r")
    middle = np.nanmean([np.nanmin(logs), np.nanmax(logs)])
    for i, p in enumerate(grid.index):
        row = grid.loc[p]
        best = row.idxmin()
        for j, b in enumerate(grid.columns):
            if np.isfinite(row[b]):
                ink = "red" if b == best else ("white" if logs[i, j] > middle else "black")
                ax.text(j, i, f"{row[b]:.2g}", ha="center", va="center", fontsize=7, color=ink,
                        fontweight="bold" if b == best else "normal")
    ax.set(xticks=range(len(grid.columns)), xticklabels=[f"{int(b):,}" for b in grid.columns],
           yticks=range(len(grid.index)), yticklabels=[str(p) for p in grid.index], xlabel="global batch",
           ylabel="GPUs (DGX A100)")
    ax.figure.colorbar(im, ax=ax, label="log10 hours to the target")


def convergence_section(figs) -> list[Section]:
    curves, surface = curves_frame(), surface_frame()
    fig, ax = figure(11, 4.4, 1, 2)
    curves_plot(curves, ax[0][0])
    surface_plot(surface, ax[0][1])
    f = add_figure(figs, "time-to-train", fig, "MLPerf reference convergence points with the fitted curves, and "
                   "ResNet-50's hours to MLPerf's ResNet target over GPUs and global batch",
                   "Left: MLPerf's reference convergence points (the checker's olympic mean at each batch) and the "
                   "curve kept by its held-out error. Right: steps to the target at the batch (the fitted ResNet "
                   "curve) times ResNet-50's step on DGX A100 nodes (fp16, momentum SGD, data parallel); red: the "
                   "quickest batch for each GPU count.")
    big = surface[surface["gpus"] == max(GPUS)]
    best = big.loc[big["hours_to_target"].idxmin()]
    fast = big.loc[big["images_per_s"].idxmax()]
    intro = ("<p>A larger global batch keeps more GPUs busy, but it costs more samples to reach the same quality "
             "(McCandlish et al. 2018: <code>E = E_min (1 + B / B_noise)</code>; Shallue et al. 2018: perfect "
             "scaling, then diminishing returns, then none). The curves are fitted on MLPerf's reference "
             "convergence points (<code>concurrency-model converge</code>): held out one batch at a time, the "
             "median error is 4.3% over 16 benchmarks, 6.0% extrapolating to the largest batch "
             "(<code>benchmarks/convergence_accuracy.py</code>). "
             f"On {max(GPUS)} GPUs ResNet-50 runs fastest at a global batch of {int(fast['global_batch']):,} "
             f"({fast['images_per_s']:,.0f} images/s, {fast['hours_to_target']:.2g} h to the target) but reaches "
             f"the target soonest at {int(best['global_batch']):,} ({best['images_per_s']:,.0f} images/s, "
             f"{best['hours_to_target']:.2g} h). The curves are tuned reference runs (hyperparameters re-tuned at "
             "each batch). Stale updates (SSP, asynchronous SGD) and compressed ones (QSGD; top-k and DGC with error "
             "feedback) add a step penalty to <code>estimate</code> and <code>sweep --target</code>: <b>model "
             "only</b>, from published convergence bounds (<code>concurrency_model.convergence.penalties</code>); "
             "no measurement of steps to a target under them has been found, and local SGD's period has no "
             "model.</p>")
    return [Section("time-to-train", "Time to train: batch against utilisation", intro, [f])]


__all__ = ["curves_frame", "surface_frame", "curves_plot", "surface_plot", "convergence_section"]
