"""3D parallelism of gpt3-175b: the best step time over (tensor, pipeline) and where the best step goes.

The grid is :func:`concurrency_model.sweep.sweep` of gpt3-175b on 1024 GPUs of the ``dgx-a100`` preset,
global batch 1536, fp16 with Adam, every other field searched (data, tensor, pipeline, microbatch,
schedule, interleave, sequence parallelism, recompute, ZeRO stage); the breakdown is
:func:`~concurrency_model.training.estimate.estimate` of the fastest configuration.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..sweep import sweep
from ..training.step_parts import STEP_PARTS
from ..training.estimate import MEMORY_PARTS, estimate
from ._plot import legend_outside, new_axes

MODEL, CLUSTER, GPUS, GLOBAL_BATCH, DTYPE = "gpt3-175b", "dgx-a100", 1024, 1536, "fp16"
SEQ_LEN = 2048  # GPT-3's context (Brown et al. 2020, Table 2.1): tokens a sequence, for the run's steps
# an illustrative failure model for the run's days (training.run; not a measured rate): a GPU (with its share of
# the node) fails every 50,000 h, a checkpoint stalls training 2 minutes, a restart takes 10
FAILURES = {"gpu_mtbf_hours": 50_000, "checkpoint_s": 120, "restart_s": 600}
# a label for each of the breakdown's parts that add up to the step (training.step_parts.STEP_PARTS)
PARTS = {"forward_s": "forward", "backward_s": "backward", "recompute_s": "recompute",
         "tensor_parallel_comm_s": "tensor-parallel comm", "expert_parallel_comm_s": "expert-parallel all-to-all",
         "context_parallel_comm_s": "context-parallel comm", "batch_norm_sync_s": "batch-norm sync",
         "pipeline_p2p_s": "pipeline p2p", "bubble_s": "pipeline bubble",
         "data_parallel_exposed_s": "data-parallel comm (exposed)", "embedding_sync_s": "tied embedding all-reduce",
         "overlap_interference_s": "overlap interference",
         "optimizer_s": "optimizer", "host_wait_s": "host (kernel issue) wait", "straggler_wait_s": "straggler wait"}


def base_scenario() -> dict:
    """The sweep's scenario: gpt3-175b on dgx-a100, global batch 1536, fp16, Adam; the rest is searched."""
    return {"model": MODEL, "cluster": CLUSTER, "parallel": {"global_batch": GLOBAL_BATCH},
            "training": {"dtype": DTYPE, "optimizer": "adam"}}


def sweep_result(scenario: dict | None = None, gpus: int = GPUS):
    """:func:`concurrency_model.sweep.sweep` of :func:`base_scenario` (or ``scenario``) on ``gpus`` devices."""

    return sweep(scenario or base_scenario(), gpus)


def best_cells(frame: pd.DataFrame) -> pd.DataFrame:
    """The fastest configuration per (tensor, pipeline) of a sweep frame (one row per configuration).

    >>> f = pd.DataFrame({"tensor": [1, 1, 2], "pipeline": [2, 2, 1], "step_time_s": [3.0, 2.0, 5.0]})
    >>> best_cells(f)["step_time_s"].tolist()
    [2.0, 5.0]
    """
    ok = frame[np.isfinite(frame["step_time_s"].astype(float))]
    return ok.loc[ok.groupby(["tensor", "pipeline"])["step_time_s"].idxmin()].reset_index(drop=True)


def sweep_heatmap(frame: pd.DataFrame | None = None, ax=None, title: str | None = None, runner_up: dict | None = None):
    """Best step time (s) per tensor x pipeline degree (data = GPUs / (t p)) of a sweep frame; cells
    without a feasible configuration grey and hatched; the fastest cell outlined in red and, given
    ``runner_up`` (a row of ``SweepResult.to_dict()``'s ``runner_up``), the runner-up's cell in orange.

    >>> df = pd.DataFrame({"tensor": [1, 2, 2], "pipeline": [2, 1, 2], "step_time_s": [3.0, 2.0, 2.5]})
    >>> sweep_heatmap(df).get_xlabel()
    'pipeline degree p'
    """
    from matplotlib.patches import Rectangle

    df = sweep_result().frame if frame is None else frame
    ax = new_axes(ax, (8, 4.5))
    best = best_cells(df).set_index(["tensor", "pipeline"])["step_time_s"]
    ts = sorted(int(t) for t in df["tensor"].unique())
    ps = sorted(int(p) for p in df["pipeline"].unique())
    ts = [2**k for k in range(int(np.log2(max(ts))) + 1)] if all(t & (t - 1) == 0 for t in ts) else ts
    ps = [2**k for k in range(int(np.log2(max(ps))) + 1)] if all(p & (p - 1) == 0 for p in ps) else ps
    grid = np.full((len(ts), len(ps)), np.nan)
    for (t, p), v in best.items():
        grid[ts.index(int(t)), ps.index(int(p))] = v
    finite = grid[np.isfinite(grid)]
    vmin, vmax = (float(finite.min()), float(finite.max())) if finite.size else (0.0, 1.0)
    im = ax.imshow(np.ma.masked_invalid(grid), cmap="viridis_r", vmin=vmin, vmax=max(vmax, vmin * 1.001 + 1e-12),
                   aspect="auto", origin="lower")
    for i in range(len(ts)):
        for j in range(len(ps)):
            v = grid[i, j]
            if np.isfinite(v):
                dark = (v - vmin) / max(vmax - vmin, 1e-12) > 0.6  # viridis_r: slow cells are dark
                ax.text(j, i, f"{v:.1f}", ha="center", va="center", fontsize=8, color="white" if dark else "k")
            else:
                ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="0.88", edgecolor="0.6", hatch="//",
                                       lw=0.5))
                ax.text(j, i, "none\nfeasible", ha="center", va="center", fontsize=7, color="0.25",
                        bbox={"facecolor": "0.88", "edgecolor": "none", "pad": 1})
    if len(best):
        tb, pb = best.idxmin()
        ax.add_patch(Rectangle((ps.index(int(pb)) - 0.5, ts.index(int(tb)) - 0.5), 1, 1, fill=False,
                               edgecolor="red", lw=2.5))
    if runner_up is not None:
        t2, p2 = runner_up["parallel"]["tensor"], runner_up["parallel"]["pipeline"]
        if t2 in ts and p2 in ps:
            ax.add_patch(Rectangle((ps.index(p2) - 0.42, ts.index(t2) - 0.42), 0.84, 0.84, fill=False,
                                   edgecolor="orange", lw=2, ls="--"))
    ax.set_xticks(range(len(ps)), [str(p) for p in ps])
    ax.set_yticks(range(len(ts)), [str(t) for t in ts])
    ax.set_xlabel("pipeline degree p")
    ax.set_ylabel("tensor degree t")
    ax.set_title(title or f"{MODEL} on {GPUS} GPUs ({CLUSTER}), global batch {GLOBAL_BATCH}: best step time (s) "
                          "per (t, p); red: fastest" + ("; orange: runner-up" if runner_up else ""), fontsize=10)
    ax.figure.colorbar(im, ax=ax, label="step time (s)")
    return ax


def best_estimate(result):
    """``estimate`` of the fastest configuration of a :class:`~concurrency_model.sweep.SweepResult`."""

    return result.estimate_of(result.top(1).iloc[0])


def step_breakdown(est=None, ax=None):
    """Where the step of one estimate goes: one horizontal bar per component of ``breakdown`` (they add up
    to the step time), and below a rule, hatched and without a share of the step, the data-parallel traffic that
    overlaps the backward pass (it takes no time of its own, so it is not one of the parts).

    >>> from concurrency_model.training.estimate import estimate
    >>> e = estimate({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 8, "global_batch": 64,
    ...               "microbatch_size": 8}})
    >>> step_breakdown(e).get_xlabel()
    'seconds per step'
    """
    if est is None:
        est = best_estimate(sweep_result())
    ax = new_axes(ax, (8, 4))
    b = est.breakdown
    shown = [k for k in STEP_PARTS if b[k] or k in ("forward_s", "backward_s")]  # the parts of this step
    names = [PARTS[k] for k in shown] + ["not in the step: data-parallel\ncomm overlapped with backward"]
    vals = [float(b[k]) for k in shown] + [float(b.get("data_parallel_overlapped_s", 0.0))]
    colors = [*[f"C{i}" for i in range(len(names) - 1)], "white"]
    y = np.arange(len(names), dtype=float)
    y[-1] += 0.6  # set apart below a rule: it runs during the backward bar, it is not one more part of the step
    bars = ax.barh(y, vals, color=colors, edgecolor="k", lw=0.4)
    bars[-1].set_hatch("///")
    bars[-1].set_edgecolor("0.45")
    ax.axhline((y[-2] + y[-1]) / 2, color="0.3", lw=0.8)
    step = est.step_time_s
    for yi, v in zip(y[:-1], vals[:-1]):
        ax.text(v + step * 0.01, yi, f"{v:.3g} s ({v / step:.1%})", va="center", fontsize=8)
    ax.text(vals[-1] + step * 0.01, y[-1], f"{vals[-1]:.3g} s (not added)", va="center", fontsize=8, color="0.3")
    ax.set_yticks(y, names, fontsize=8)
    ax.invert_yaxis()
    # the step's 80% band (concurrency_model.uncertainty), against the largest bar's scale
    ax.axvspan(est.step_time_p10_s, est.step_time_p90_s, color="0.5", alpha=0.12, lw=0,
               label=f"step's 80% band {est.step_time_p10_s:.3g}-{est.step_time_p90_s:.3g} s")
    ax.axvline(step, color="k", lw=0.8, ls="--", label=f"step {step:.3g} s")
    legend_outside(ax, "right")
    ax.set_xlim(0, max(max(vals), est.step_time_p90_s) * 1.3)
    ax.set_xlabel("seconds per step")
    par, tr = est.scenario.parallel, est.scenario.training
    ax.set_title(f"step {step:.2f} s = the sum of the bars above the rule; (d, t, p) = ({par.data}, "
                 f"{par.tensor}, "
                 f"{par.pipeline}), microbatch {par.microbatch_size},\n{par.schedule}, recompute "
                 f"{tr.recompute}, ZeRO {tr.zero_stage}, {est.achieved_flops_per_device / 1e12:.0f} TFLOP/s "
                 f"per GPU, {est.memory_bytes_per_device / 1e9:.0f} GB per GPU", fontsize=8.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def runner_up_breakdown(best, second, ax=None):
    """The best configuration's and the runner-up's step side by side, part by part (the breakdown's parts that
    add up to the step, :data:`~concurrency_model.training.step_parts.STEP_PARTS`): what separates them.

    >>> from concurrency_model.training.estimate import estimate
    >>> a = estimate({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> b = estimate({"model": "gpt2", "parallel": {"data": 4, "tensor": 2, "global_batch": 64, "microbatch_size": 8}})
    >>> runner_up_breakdown(a, b).get_xlabel()
    'seconds per step'
    """
    ax = new_axes(ax, (8, 4))
    shown = [k for k in STEP_PARTS if best.breakdown[k] or second.breakdown[k]]
    y = np.arange(len(shown))

    def label(e):
        p, t = e.scenario.parallel, e.training
        return (f"(d, t, p) = ({p.data}, {p.tensor}, {p.pipeline}), ZeRO {t.zero_stage} "
                f"({t.framework}): {e.step_time_s:.2f} s")
    for k, (e, color) in enumerate(((best, "C3"), (second, "C1"))):
        vals = [float(e.breakdown[x]) for x in shown]
        ax.barh(y + (k - 0.5) * 0.4, vals, height=0.4, color=color, edgecolor="k", lw=0.4,
                label=("best " if k == 0 else "runner-up ") + label(e))
    ax.set_yticks(y, [PARTS[k] for k in shown], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds per step")
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    ax.set_title("what separates the fastest layout from the runner-up of another layout, part by part",
                 fontsize=8.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    return ax


def memory_tradeoff(result=None, ax=None):
    """Memory per GPU against step time: the fastest configuration of each ZeRO stage and recompute policy in a
    sweep (:func:`sweep_result`), its memory split into weights, gradients, optimizer state, activations
    (``estimate(...).memory``) and what the runtime holds beside them, the device's capacity as a line.

    >>> memory_tradeoff(sweep_result(gpus=64, scenario={"model": "gpt2", "cluster": "dgx-a100",
    ...                 "parallel": {"global_batch": 512}})).get_xlabel()
    'GB per GPU'
    """

    result = result if result is not None else sweep_result()
    frame = result.frame
    best = frame.loc[frame.groupby(["zero_stage", "recompute"])["step_time_s"].idxmin()]
    best = best.sort_values("step_time_s", ascending=False)  # the fastest on top
    ax = new_axes(ax, (8, 4))
    y = np.arange(len(best))
    left = np.zeros(len(best))
    rows = [(row, result.estimate_of(row)) for _, row in best.iterrows()]  # the sweep's fastest: runner_up's
    for i, (key, label) in enumerate(MEMORY_PARTS.items()):
        gb = np.array([e.memory[key] / 1e9 for _, e in rows])
        ax.barh(y, gb, left=left, color=f"C{i}", edgecolor="k", lw=0.4, label=label)
        left += gb
    # what the runtime holds beside them (CUDA context, NCCL buffers, gradient buffers, ...: parallel.allocator)
    gb = np.array([e.memory_bytes_per_device / 1e9 for _, e in rows]) - left
    ax.barh(y, gb, left=left, color="0.7", edgecolor="k", lw=0.4, label="runtime buffers")
    left += gb
    for yi, (_, e) in zip(y, rows):
        ax.text(left[yi] + 0.5, yi, f"{e.step_time_s:.2f} s a step", va="center", fontsize=7.5)
    cap = rows[0][1].memory["capacity_bytes"] / 1e9
    ax.axvline(cap, color="k", lw=0.8, ls="--", label=f"capacity {cap:.0f} GB")
    ax.set_yticks(y, [f"ZeRO {int(r['zero_stage'])}, recompute {r['recompute']}: (d, t, p) = ({int(r['data'])}, "
                      f"{int(r['tensor'])}, {int(r['pipeline'])}), microbatch {int(r['microbatch_size'])}"
                      for r, _ in rows], fontsize=7.5)
    ax.set_xlim(0, cap * 1.3)
    ax.set_xlabel("GB per GPU")
    legend_outside(ax, "right")
    ax.set_title("the fastest configuration of each ZeRO stage and recompute policy: memory per GPU and step time",
                 fontsize=8.5, loc="left")
    ax.grid(True, axis="x", alpha=0.3)
    return ax
