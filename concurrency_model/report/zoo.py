"""Figures of the model zoo: work and depth, average parallelism, and the layers on a roofline.

Data come from :func:`concurrency_model.get_model` (``Graph.forward()``, ``training()``) and
:func:`concurrency_model.timing.graph.layer_times` (the device-time model). The work-depth scatter's 15 labels
crowd where models of one family sit close (the ResNets, BERT base and large); they are placed by adjustText
(Flyamer, https://github.com/Phlya/adjustText), the common matplotlib add-on that moves text until no two labels
and no label and point overlap, and draws a thin line to a label it had to move.
"""
from __future__ import annotations

import functools

import numpy as np
import pandas as pd

from adjustText import adjust_text

from .. import MODEL_NAMES, get_model
from ..hardware.devices import load_device
from ..timing.graph import layer_times
from ..units import dtype_bytes
from ._plot import kind_color, legend_outside, new_axes

# batch per model family for the roofline: images 32, sequences 8 (gpt3-175b 1: one sequence of 2048)
ROOFLINE_BATCH = {"gpt3-175b": 1}
SEQUENCE = ("bert-base", "bert-large", "gpt2", "gpt3-175b", "lstm-lm")


def zoo_frame(batch: int = 1, models=None) -> pd.DataFrame:
    """Work, depth and average parallelism of the zoo: one row per model, forward pass and training step.

    Columns ``model, params, forward_flop, forward_depth, forward_parallelism, training_flop,
    training_depth, training_parallelism``.

    >>> int(zoo_frame(models=["lenet5"]).loc[0, "forward_depth"])
    61
    """

    rows = []
    for name in models or MODEL_NAMES:
        g = get_model(name, batch=batch)
        f, t = g.forward(), g.training()
        rows.append({"model": name, "params": int(g.params), "forward_flop": float(f.flop),
                     "forward_depth": int(f.depth), "forward_parallelism": float(f.flop) / int(f.depth),
                     "training_flop": float(t.flop), "training_depth": int(t.depth),
                     "training_parallelism": float(t.flop) / int(t.depth)})
    return pd.DataFrame(rows)


def work_depth(frame: pd.DataFrame | None = None, ax=None):
    """Work W against depth D of each zoo model (training step), log-log, with lines of equal W/D.

    >>> ax = work_depth(zoo_frame(models=["lenet5", "alexnet"]))
    >>> ax.get_xscale(), ax.get_yscale()
    ('log', 'log')
    """
    ax, place = work_depth_unplaced(frame, ax)
    place()
    return ax


def work_depth_unplaced(frame: pd.DataFrame | None = None, ax=None):
    """:func:`work_depth` with each label still on its point, and the step that places them (a picklable callable
    of no arguments), so that the report's figure cache (:func:`._plot.png_bytes`) keys the figure before the
    labels move and skips the placement with the drawing.

    >>> ax, place = work_depth_unplaced(zoo_frame(models=["lenet5", "alexnet"]))
    >>> [t.get_text() for t in ax.texts[-2:]], place.func is place_labels
    (['lenet5', 'alexnet'], True)
    """
    df = zoo_frame() if frame is None else frame
    ax = new_axes(ax)
    d, w = df["training_depth"].to_numpy(float), df["training_flop"].to_numpy(float)
    xs = np.array([d.min() / 2, d.max() * 2])
    for k in range(3, 13, 3):  # iso-parallelism lines W = 10^k D
        ax.plot(xs, xs * 10.0**k, color="0.75", lw=0.8, ls="--", zorder=0)
        ax.text(xs[0] * 1.15, xs[0] * 1.15 * 10.0**k * 1.4, f"W/D = $10^{{{k}}}$", color="0.45", fontsize=7,
                rotation=0, va="bottom", clip_on=True)  # clipped: a line's label outside the limits takes no room
    seq = df["model"].isin(SEQUENCE)
    ax.scatter(d[~seq], w[~seq], s=36, color="tab:green", edgecolor="k", lw=0.5, zorder=3, label="image models")
    ax.scatter(d[seq], w[seq], s=36, color="tab:purple", marker="D", edgecolor="k", lw=0.5, zorder=3,
               label="sequence models")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(xs[0], xs[1] * 1.5)
    ax.set_ylim(w.min() / 5, w.max() * 5)
    ax.set_xlabel("depth D of a training step (operations on the critical path)")
    ax.set_ylabel("work W of a training step (FLOP)")
    ax.set_title("Work and depth of the model zoo (batch 1, training step)")
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax, "below", ncol=2, fontsize=8, below=-0.13)
    # labels placed last, once the legend has taken its room: adjustText moves them in the final axes
    texts = [ax.text(x, y, name, fontsize=7) for x, y, name in zip(d, w, df["model"])]
    return ax, functools.partial(place_labels, texts, d, w, ax)


def place_labels(texts: list, x, y, ax) -> None:
    """Move ``texts`` (labels of the points ``x``, ``y`` of ``ax``) until no two overlap, with a line to each point
    it left (adjustText).

    >>> ax, _ = work_depth_unplaced(zoo_frame(models=["lenet5"]))
    >>> place_labels(ax.texts[-1:], [1.0], [1.0], ax)
    """
    # room around each label (adjustText's default 1.05, 1.2); a bound on iterations, not adjustText's default of one
    # second of wall time, so that the same figure comes out on a loaded machine (about 1.8 s of CPU for the zoo)
    adjust_text(texts, x=x, y=y, ax=ax, expand=(1.3, 1.6), iter_lim=1000,
                arrowprops={"arrowstyle": "-", "color": "0.5", "lw": 0.5})


def average_parallelism(frame: pd.DataFrame | None = None, ax=None):
    """Average parallelism W/D of each zoo model, forward pass and training step (log scale).

    >>> average_parallelism(zoo_frame(models=["lenet5"])).get_xscale()
    'log'
    """
    df = zoo_frame() if frame is None else frame
    ax = new_axes(ax)
    y = np.arange(len(df))
    ax.barh(y - 0.2, df["forward_parallelism"], 0.4, label="forward pass", color="tab:blue")
    ax.barh(y + 0.2, df["training_parallelism"], 0.4, label="training step", color="tab:orange")
    ax.set_yticks(y, df["model"], fontsize=8)
    ax.invert_yaxis()
    ax.set_xscale("log")
    ax.set_xlabel("average parallelism W/D (log scale)")
    ax.set_title("Average parallelism of the model zoo (batch 1)")
    ax.grid(True, axis="x", which="major", alpha=0.3)
    legend_outside(ax, "below", ncol=2, fontsize=8, below=-0.13)
    return ax


def roofline_frame(device: str = "a100-sxm4-80gb", dtype: str = "fp16", models=None, batch: int = 32) -> pd.DataFrame:
    """Every forward layer of the zoo on one device: ``model, layer, kind, flop, bytes, time_s, intensity,
    flops`` (FLOP per byte of minimum traffic; predicted FLOP/s). Image models at ``batch``, sequence
    models at batch 8 (gpt3-175b: 1).

    >>> f = roofline_frame(models=["lenet5"])
    >>> bool((f["intensity"] > 0).all() and (f["flops"] > 0).all())
    True
    """

    rows = []
    for name in models or MODEL_NAMES:
        b = ROOFLINE_BATCH.get(name, 8 if name in SEQUENCE else batch)
        g = get_model(name, batch=b, value_bytes=dtype_bytes(dtype))
        t = layer_times(g, device, dtype).set_index("name")
        for node in g.layers():
            flop, traffic = float(node.cost.forward.flop), float(node.cost.forward.bytes)
            sec = float(t.loc[node.name, "forward_s"])
            if flop <= 0 or traffic <= 0 or sec <= 0:
                continue
            rows.append({"model": name, "batch": b, "layer": node.name, "kind": node.kind, "flop": flop,
                         "bytes": traffic, "time_s": sec})
    df = pd.DataFrame(rows)
    df["intensity"] = df["flop"] / df["bytes"]
    df["flops"] = df["flop"] / df["time_s"]
    return df


def roofline(frame: pd.DataFrame | None = None, device: str = "a100-sxm4-80gb", dtype: str = "fp16", ax=None):
    """The zoo's forward layers on the roofline of ``device`` (log-log): the roof is the device's peak and
    memory bandwidth times their efficiencies; each point a layer (colour: kind; identical layers drawn
    once).

    >>> roofline(roofline_frame(models=["lenet5"])).get_xlabel()
    'arithmetic intensity (FLOP / byte of minimum traffic)'
    """

    df = roofline_frame(device, dtype) if frame is None else frame
    dev = load_device(device)
    ax = new_axes(ax)
    e = dev.efficiency
    top, bw = dev.peak(dtype) * e.compute, dev.mem_bw * e.memory
    lo, hi = max(df["intensity"].min() / 2, 1e-2), df["intensity"].max() * 2
    x = np.logspace(np.log10(lo), np.log10(hi), 200)
    ax.plot(x, np.minimum(top, x * bw), color="k", lw=2, zorder=1, label="roof (peak x eff., bandwidth x eff.)")
    ax.plot(x, np.minimum(dev.peak(dtype), x * dev.mem_bw), color="k", lw=0.8, ls=":", zorder=1,
            label="datasheet peak and bandwidth")
    ax.axvline(top / bw, color="grey", lw=0.8, ls="--", zorder=0)
    ax.text(top / bw * 1.1, top * 0.02, f"ridge {top / bw:.0f} FLOP/B", color="grey", fontsize=8)
    pts = df.drop_duplicates(["kind", "intensity", "flops"])
    for i, (kind, grp) in enumerate(sorted(pts.groupby("kind"), key=lambda kv: -len(kv[1]))):
        ax.scatter(grp["intensity"], grp["flops"], s=14, color=kind_color(kind, i), alpha=0.75, edgecolor="k",
                   linewidth=0.3, zorder=2, label=f"{kind} ({len(grp)})")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(lo, hi)
    ax.set_ylim(max(df["flops"].min() / 3, 1e7), dev.peak(dtype) * 2)
    ax.set_xlabel("arithmetic intensity (FLOP / byte of minimum traffic)")
    ax.set_ylabel("predicted FLOP/s")
    ax.set_title(f"Forward layers of {df['model'].nunique()} zoo models on {dev.name}, {dtype}")
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax, "right", title="layer kind\n(distinct points)", title_fontsize=7)
    return ax
