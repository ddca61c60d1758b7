"""Data-parallel scaling against measurements, and pipeline schedule timelines.

Data-parallel scaling: the Megatron-LM README's 2020-09 tables (``data/megatron_readme_scaling.csv``):
GPT-2 1.2B-8.3B (tensor parallel 1-8) on one DGX-A100 with 16 sequences per model replica, and the same
models 128-way data parallel (batch 2048) on a DGX-A100 cluster: measured iteration times at
d = 1 and d = 128. The other measured training sets vary the configuration at a fixed GPU count (vTrain)
or the model with the GPU count (Megatron 2021, Narayanan et al. 2021 Table 2), so they give no
data-parallel scaling curve. Predictions: :func:`concurrency_model.training.estimate.estimate` on the
scenarios of :mod:`concurrency_model.validate.training` with ``data`` (and the batch) varied.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..parallel import pipeline
from ..training.estimate import estimate
from ..validate.training import megatron_rows, scenario_for
from ._plot import legend_outside, new_axes

DP_DEGREES = (1, 2, 4, 8, 16, 32, 64, 128)
DP_TABLES = ("2020_mp_weak_scaling_dgxa100", "2020_dp_x_mp_scaling_dgxa100")


def _dp_point(job):

    row, d = job
    r = dict(row, data=d, gpus=row["tensor"] * row["pipeline"] * d, global_batch=int(row["microbatch"]) * d)
    try:
        e = estimate(scenario_for(r))
    except ValueError as err:
        return {"d": d, "predicted_s": np.nan, "reason": str(err)}
    return {"d": d, "predicted_s": e.step_time_s, "p10_s": e.step_time_p10_s, "p90_s": e.step_time_p90_s,
            "dp_exposed_s": e.breakdown["data_parallel_exposed_s"], "reason": ""}


def dp_scaling_frame(degrees=DP_DEGREES, models=None, mapper=map) -> pd.DataFrame:
    """Predicted and measured iteration time of Megatron-LM 2020's GPT-2 models under data-parallel weak
    scaling on DGX-A100 (16 sequences per replica): one row per model and data-parallel degree ``d`` with
    ``model, tensor, d, gpus, predicted_s, measured_s`` (measured only at d = 1 and 128) and
    ``dp_exposed_s`` (the exposed gradient allreduce). ``mapper`` may be a pool's ``map``.

    >>> f = dp_scaling_frame(degrees=(1, 128), models=["1B"])
    >>> f[["d", "measured_s"]].values.tolist()
    [[1.0, 1.076], [128.0, 1.153]]
    """

    rows = megatron_rows()
    rows = rows[rows["label"].str.split().str[0].isin(DP_TABLES)].copy()
    rows["model"] = rows["label"].str.split().str[-1]
    measured = {(r.model, int(r.data)): r.measured_time_s for r in rows.itertuples()}
    base = rows[rows["data"] == 1]
    if models is not None:
        base = base[base["model"].isin(models)]
    jobs = [(r, d) for r in base.to_dict("records") for d in degrees]
    out = []
    for (r, d), res in zip(jobs, mapper(_dp_point, jobs)):
        out.append({"model": r["model"], "tensor": int(r["tensor"]), "d": d, "gpus": int(r["tensor"]) * d,
                    "measured_s": measured.get((r["model"], d), np.nan), **res})
    return pd.DataFrame(out)


def dp_scaling(frame: pd.DataFrame | None = None, ax=None):
    """Iteration time against the data-parallel degree (weak scaling, log x): predicted lines with their 80%
    bands and the measured points of the Megatron-LM README (2020-09, DGX-A100), with the measured and
    predicted efficiency at the largest degree in the legend.

    >>> ax = dp_scaling(dp_scaling_frame(degrees=(1, 128), models=["1B"]))
    >>> ax.get_xscale()
    'log'
    """
    df = dp_scaling_frame() if frame is None else frame
    ax = new_axes(ax)
    colors = dict(zip(sorted(df["model"].unique(), key=lambda s: float(s.rstrip("B"))),
                      ["tab:blue", "tab:orange", "tab:green", "tab:red", "tab:purple"]))
    for model, g in df.groupby("model"):
        g = g.sort_values("d")
        c = colors[model]
        t = int(g["tensor"].iloc[0])
        top = g["d"].max()
        p1, pn = g.loc[g["d"] == 1, "predicted_s"], g.loc[g["d"] == top, "predicted_s"]
        m1, mn = g.loc[g["d"] == 1, "measured_s"], g.loc[g["d"] == top, "measured_s"]
        eff_p = float(p1.iloc[0] / pn.iloc[0]) if len(p1) and len(pn) else np.nan
        eff_m = float(m1.iloc[0] / mn.iloc[0]) if len(m1) and len(mn) else np.nan
        ax.plot(g["d"], g["predicted_s"], color=c, lw=1.8, marker=".",
                label=f"GPT-2 {model} (tensor {t}) predicted: {eff_p:.0%} at d = {top}")
        if "p10_s" in g:  # the prediction's 80% band (concurrency_model.uncertainty)
            ax.fill_between(g["d"], g["p10_s"], g["p90_s"], color=c, alpha=0.12, lw=0)
        meas = g[g["measured_s"].notna()]
        ax.plot(meas["d"], meas["measured_s"], color=c, lw=0.8, ls=":")
        ax.scatter(meas["d"], meas["measured_s"], color=c, s=70, marker="*", edgecolor="k", lw=0.5, zorder=4,
                   label=f"GPT-2 {model} measured: {eff_m:.0%} at d = {top}")
    ax.set_xscale("log", base=2)
    ds = sorted(df["d"].unique())
    ax.set_xticks(ds, [str(int(d)) for d in ds])
    cols = [c for c in ("predicted_s", "measured_s", "p10_s", "p90_s") if c in df]
    lo, hi = df[cols].min().min(), df[cols].max().max()
    ax.set_ylim(lo * 0.9, hi + (hi - lo * 0.9) * 0.05)
    ax.set_xlabel("data-parallel degree d (model replicas; GPUs = d x tensor)")
    ax.set_ylabel("iteration time (s; axis not from 0)")
    ax.set_title("Data-parallel weak scaling, 16 sequences per replica, DGX-A100 (Megatron-LM README 2020-09)",
                 fontsize=10)
    ax.grid(True, alpha=0.3)
    legend_outside(ax, "below", ncol=2, below=-0.14)
    return ax


SCHEDULES = (("gpipe", 1, "GPipe"), ("1f1b", 1, "1F1B (PipeDream-Flush)"),
             ("interleaved", 2, "interleaved 1F1B, v = 2"), ("zb-h1", 1, "ZB-H1 (zero bubble, W = half the backward)"))


def pipeline_timeline(schedule: str = "1f1b", p: int = 4, m: int = 8, t_f: float = 1.0, t_b: float = 2.0,
                      v: int = 1, title: str | None = None, ax=None, t_w: float | None = None):
    """Gantt chart of one pipeline schedule (:func:`concurrency_model.parallel.pipeline.timeline`) with
    the step, the bubble fraction and the in-flight microbatches in the title; zb-h1 splits ``t_w`` (default
    half the backward) off as the weight gradient.

    >>> pipeline_timeline("gpipe", 2, 2).get_xlabel()
    'time (s)'
    """

    ax = new_axes(ax, (10, 2.5))
    t_w = (t_b / 2 if t_w is None else t_w) if schedule == "zb-h1" else 0.0
    df = pipeline.timeline(schedule, p, m, t_f, t_b, v=v, t_w=t_w)
    pipeline.plot_timeline(df, ax=ax)
    span = float(df["end_s"].max())
    frac = 1 - m * (t_f + t_b) / span  # the bubble's share of the simulated step (no transfers here)
    peak = float(pipeline.in_flight_microbatches(schedule, p, m, v))
    ax.axvline(span, color="k", lw=0.8, ls="--")
    ax.set_xlim(0, max(ax.get_xlim()[1], span * 1.2))  # room for the legend right of the step
    ax.set_title(f"{title or schedule}: step {span:g} s, bubble {frac:.1%} of the step, stage 0 holds "
                 f"{peak:g} microbatches", fontsize=9, loc="left")
    return ax
