"""The report's first section, "At a glance": the headline answers with their bands and a one-line-a-dataset
validation summary.

The headline scenario is the report's 3D sweep (:mod:`.sweep3d`: GPT-3 175B on 1,024 A100s). :func:`headline`
reduces its :class:`~concurrency_model.sweep.SweepResult` to plain numbers (the step and its 80% band, where the
step goes, memory per GPU with its band and whether it fits, the best layout and the runner-up of another
layout with what separates them, the whole run's days, GPU-hours and cost); it runs where the sweep ran, so the
two estimates are not computed twice. :func:`validation_summary` takes the per-dataset figures of
:func:`.accuracy.error_table` (``validate.registry.summarize``) and the targets of
:mod:`concurrency_model.validate.targets`, nothing recomputed.
"""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ..training.step_parts import STEP_PARTS
from ..training.run import run_cost
from ..validate.targets import FAR, check, grade, targets_for
from .html import Section

# the run priced in the glance: 300 billion tokens (Brown et al. 2020, as the 3D sweep section) at the example
# scenario gpt3-175b-3d's illustrative price (presets/scenarios/gpt3-175b-3d.json: "an illustrative price of 2 a
# GPU-hour"); the currency is a label the reader may change, not a market rate
RUN_TOKENS = 300e9
PRICE_PER_GPU_HOUR = 2.0
CURRENCY = "USD"
SHOWN_PARTS = 3  # parts of the step named under "where it goes"
RESULT_COLORS = {"met": "#d7f0d2", "near": "#fff1c2", "missed": "#f8d3cf", "not run": "#eeeeee", "": "#ffffff"}


def _layout(par: dict, tr: dict) -> str:
    return (f"data {par.data} x tensor {par.tensor} x pipeline {par.pipeline}, microbatch "
            f"{par.microbatch_size}, {par.schedule}, recompute {tr.recompute}, ZeRO {tr.zero_stage}")


def headline(result, best, ru: dict | None, parts: dict, board_power_w: float, seq_len: int, gpus: int) -> dict:
    """The headline answers of a sweep as plain numbers and strings (picklable): ``step_s, step_p10_s,
    step_p90_s, where`` (the largest parts of the step: ``[(label, seconds, share)]``), ``memory_gb,
    memory_p90_gb, capacity_gb, fits, at_risk, best, runner_up`` (layouts in words), ``runner_up_s, separates``
    (``[(label, runner-up minus best seconds)]``), ``run`` (``days, days_p10, days_p90, days_with_failures,
    gpu_hours, cost, currency, price_per_gpu_hour, tokens``) and ``evaluated, feasible``.

    ``best`` is the estimate of the sweep's fastest configuration and ``ru`` its ``runner_up()`` (whose
    ``estimates`` hold ``best`` again), both computed once by the caller; ``parts`` names the breakdown's parts
    (:data:`.sweep3d.PARTS`).

    >>> from concurrency_model.sweep import sweep
    >>> res = sweep({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}}, 8)
    >>> ru = res.runner_up()
    >>> h = headline(res, ru["estimates"][0], ru, {}, 400.0, 1024, 8)
    >>> h["step_p10_s"] <= h["step_s"] <= h["step_p90_s"], round(sum(s for _, s, _ in h["where"]), 9) <= h["step_s"]
    (True, True)
    """
    second = ru["estimates"][1] if ru else None
    b = best.breakdown
    step = float(best.step_time_s)
    shares = sorted(((parts.get(k, k), float(b[k])) for k in STEP_PARTS if b[k]), key=lambda kv: -kv[1])
    par, tr = best.scenario.parallel, best.scenario.training
    busy = float(b["compute_s"]) / step
    batch = par.global_batch
    days = {}
    for key, t in (("days", step), ("days_p10", best.step_time_p10_s), ("days_p90", best.step_time_p90_s)):
        days[key] = run_cost({"tokens": RUN_TOKENS}, t, batch, gpus, busy, board_power_w, seq_len=seq_len)["run_days"]
    priced = run_cost({"tokens": RUN_TOKENS, "price_per_gpu_hour": PRICE_PER_GPU_HOUR}, step, batch, gpus, busy,
                      board_power_w, seq_len=seq_len)
    mem = best.memory
    out = {"step_s": step, "step_p10_s": float(best.step_time_p10_s), "step_p90_s": float(best.step_time_p90_s),
           "where": [(label, s, s / step) for label, s in shares[:SHOWN_PARTS]],
           "memory_gb": best.memory_bytes_per_device / 1e9,
           "memory_p90_gb": (best.memory_p90_bytes_per_device or best.memory_bytes_per_device) / 1e9,
           "capacity_gb": float(mem["capacity_bytes"]) / 1e9, "fits": bool(mem.get("fits")),
           "at_risk": bool(best.memory_at_risk), "best": _layout(par, tr), "framework": tr.framework or "",
           "flops_per_gpu": float(best.achieved_flops_per_device), "evaluated": int(result.evaluated),
           "feasible": int(result.feasible), "gpus": gpus, "global_batch": batch,
           "run": {**days, "gpu_hours": priced["gpu_hours"], "cost": priced["cost"], "currency": CURRENCY,
                   "price_per_gpu_hour": PRICE_PER_GPU_HOUR, "tokens": RUN_TOKENS},
           "runner_up": None, "runner_up_s": None, "separates": []}
    if second is not None:
        p2, t2 = second.scenario.parallel, second.scenario.training
        out.update(runner_up=_layout(p2, t2), runner_up_framework=t2.framework or "",
                   runner_up_s=float(second.step_time_s),
                   separates=[(parts.get(x["part"], x["part"]), float(x["runner_up_minus_best_s"]))
                              for x in ru["separates"][:SHOWN_PARTS]])
    return out


def validation_summary(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """One row a dataset: ``dataset, mode, rows, rows_total, median_ape_pct`` (from :func:`.accuracy.error_table`),
    ``target`` (the dataset's target in the mode shown, in words), ``worst_pct`` (the target's statistic, worst over
    its scope, from :func:`~concurrency_model.validate.targets.check` of ``rows``), ``result`` (``met``, ``near``,
    ``missed``; ``not run`` where the target is for a mode not run, then ``target`` names that mode; ``""`` without a
    target) and ``far`` (the statistic above
    :data:`~concurrency_model.validate.targets.FAR` times the target).

    >>> rows = pd.DataFrame({"dataset": "megatron-2021", "mode": "preset", "group": "", "status": "ok",
    ...                      "ape": [0.05, 0.12, 0.2], "measured": 1.0, "predicted": 1.0})
    >>> t = pd.DataFrame({"dataset": ["megatron-2021"], "mode": ["preset"], "rows": [3], "rows_total": [20],
    ...                   "median_ape_pct": [12.0]})
    >>> validation_summary(t, rows).loc[0, ["target", "result"]].tolist()
    ['median <= 10%', 'near']
    """
    checks = {(c["dataset"], c["mode"]): c for c in check(rows)} if len(rows) else {}
    out = []
    for r in table.itertuples():
        mode = r.mode
        every = targets_for(str(r.dataset))
        shown = [t for t in every if t[0] == mode]
        c = checks.get((r.dataset, mode)) if shown else None
        target, worst, result, far = "", None, "", False
        if every and not shown:  # its target is for another mode (e.g. the datasheet fits, not run in quick mode)
            _, stat, scope, limit = every[0]
            target, result = f"{stat} <= {limit:.0%} in {every[0][0]} mode", "not run"
        if shown:
            _, stat, scope, limit = shown[0]
            target = f"{stat} <= {limit:.0%}" + {"all": "", "each": ", each system",
                                                  "nvidia": ", each NVIDIA device"}.get(scope, "")
            worst = None if c is None else c.get("worst")
            result = grade(worst, limit)
            far = worst is not None and worst > FAR * limit
        out.append({"dataset": r.dataset, "mode": mode, "rows": r.rows, "rows_total": r.rows_total,
                    "median_ape_pct": r.median_ape_pct, "target": target,
                    "worst_pct": None if worst is None else 100 * worst, "result": result, "far": bool(far)})
    return pd.DataFrame(out)


def summary_html(summary: pd.DataFrame) -> str:
    """The validation summary as two compact HTML tables side by side (halves of the datasets), each result cell
    coloured (met / near / missed).

    >>> s = pd.DataFrame({"dataset": ["a"], "mode": ["preset"], "rows": [3], "rows_total": [20],
    ...                   "median_ape_pct": [12.0], "target": ["median <= 10%"], "worst_pct": [12.0],
    ...                   "result": ["near"], "far": [False]})
    >>> "<td>3 of 20</td><td>12.0%</td><td>median &lt;= 10%</td>" in summary_html(s)
    True
    """
    head = "<tr><th>dataset</th><th>rows</th><th>median error</th><th>target</th><th>result</th></tr>"
    body = []
    for r in summary.itertuples():
        rows = "" if pd.isna(r.rows) else f"{int(r.rows):,}"
        if not pd.isna(r.rows_total) and r.rows_total != r.rows:
            rows += f" of {int(r.rows_total):,}"
        med = "" if pd.isna(r.median_ape_pct) else f"{r.median_ape_pct:.1f}%"
        res = {"": "no target", "not run": "not run here"}.get(r.result, r.result)
        plain = r.target.startswith("median") and "," not in r.target  # the target's statistic is the median shown
        if r.result and not plain and r.worst_pct is not None and not pd.isna(r.worst_pct):
            res += f" ({r.worst_pct:.1f}%)"
        res += " &#9888;" if r.far else ""
        body.append(f"<tr><td>{html.escape(str(r.dataset))}</td><td>{rows}</td><td>{med}</td>"
                    f"<td>{html.escape(r.target)}</td><td class='res' style='background:{RESULT_COLORS[r.result]}'>"
                    f"{res}</td></tr>")
    half = (len(body) + 1) // 2
    return "".join(f"<table class='glance-val'>{head}{''.join(part)}</table>" for part in (body[:half], body[half:])
                   if part)


def glance_section(head: dict | None, summary: pd.DataFrame | None, errors: dict | None = None) -> Section:
    """The "At a glance" section from :func:`headline` and :func:`validation_summary` (either may be None when
    its part of the report failed; ``errors`` then says why)."""
    errors = errors or {}
    parts = []
    if head is not None:
        h = head
        where = ", ".join(f"{label} {s:.2f} s ({share:.0%})" for label, s, share in h["where"])
        fits = ("at risk: the central figure fits, the band's upper end does not" if h["at_risk"] else
                "fits" if h["fits"] else "does not fit")
        run = h["run"]
        rows = [("Step time", f"<b>{h['step_s']:.2f} s</b> per step of {h['global_batch']:,} sequences",
                 f"80% band {h['step_p10_s']:.2f}-{h['step_p90_s']:.2f} s"),
                ("Where it goes", html.escape(where), f"the largest {len(h['where'])} parts of the step"),
                ("Memory per GPU", f"<b>{h['memory_gb']:.1f} GB</b> of {h['capacity_gb']:.0f} GB: {fits}",
                 f"upper end {h['memory_p90_gb']:.1f} GB (the allocator's reserve, measured peaks' spread)"),
                ("Best layout", html.escape(h["best"] + (f" under {h['framework']}" if h["framework"] else "")),
                 f"{h['flops_per_gpu'] / 1e12:.0f} TFLOP/s of model FLOPs per GPU; best of {h['feasible']:,} "
                 f"feasible of {h['evaluated']:,} configurations")]
        if h["runner_up"]:
            sep = ", ".join(f"{label} {d:+.2f} s" for label, d in h["separates"])
            rows.append(("Runner-up (another layout)",
                         html.escape(h["runner_up"] + (f" under {h['runner_up_framework']}"
                                                       if h.get("runner_up_framework") else "")) +
                         f": {h['runner_up_s']:.2f} s ({h['runner_up_s'] / h['step_s'] - 1:+.1%})",
                         "what separates them, runner-up minus best: " + html.escape(sep)))
        rows.append(("Whole run", f"<b>{run['days']:.1f} days</b> for {run['tokens'] / 1e9:.0f} billion tokens, "
                                  f"{run['gpu_hours']:,.0f} GPU-hours, <b>{run['cost'] / 1e6:.2f} million "
                                  f"{run['currency']}</b>",
                     f"{run['days_p10']:.1f}-{run['days_p90']:.1f} days (the step's band); at an illustrative "
                     f"{run['price_per_gpu_hour']:.2f} {run['currency']} a GPU-hour; failures not included"))
        trs = "".join(f"<tr><th>{q}</th><td>{a}</td><td><small>{b}</small></td></tr>" for q, a, b in rows)
        parts.append(f"<p>The headline scenario: GPT-3 175B trained on {h['gpus']:,} A100-80GB GPUs (DGX A100 "
                     f"nodes), global batch {h['global_batch']:,}, fp16 with Adam; every layout searched "
                     f"(<a href='#sweep'>3D parallelism</a>).</p><table class='glance'>{trs}</table>")
    else:
        parts.append(f"<p class='note'>The headline could not be computed: {html.escape(errors.get('3d sweep', ''))}"
                     "</p>")
    if summary is not None and len(summary):
        n = {k: int((summary["result"] == k).sum()) for k in ("met", "near", "missed")}
        parts.append(f"<p>Validation against published measurements, one row a dataset (median error: the median "
                     f"absolute percentage error of the rows compared; the target's statistic in brackets where it is "
                     f"not that median; &#9888;: more than {FAR:g} times the target). Targets met: {n['met']}, near "
                     f"(within 1.5 times): {n['near']}, missed: {n['missed']}. Details: "
                     f"<a href='#validation'>predicted against measured</a>.</p>"
                     f"<div class='glance-grid'>{summary_html(summary)}</div>")
    elif "validation" in errors:
        parts.append(f"<p class='note'>The validation could not be computed: {html.escape(errors['validation'])}</p>")
    return Section("glance", "At a glance", "".join(parts))
