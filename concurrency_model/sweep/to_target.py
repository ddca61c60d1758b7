"""The sweep ranked by time to a quality target, the global batch swept (issue 40).

For each global batch ``B`` of ``batches`` and each GPU count, the fastest layout of :func:`.engine.sweep` (its step
time ``T(B)``); the steps to the target ``S(B)`` from the target's fitted curve (:mod:`..convergence`); time to
target ``S(B) T(B)`` with the curve's band, GPU-hours ``GPUs x S(B) T(B) / 3600``. A larger batch raises the
throughput ``B / T(B)`` (more data parallelism, fewer bubbles) but costs more samples to reach the same quality
(``E(B)`` grows: McCandlish et al. 2018, Shallue et al. 2018), so the throughput pick and the time-to-target pick
can differ; :func:`sweep_to_target` names both and why. The Pareto front is time against GPU-hours to the target
(cost is GPU-hours times one price, so the same front). A batch outside the curve's measured batches is flagged
``extrapolated`` (the fitted form carried past its points). :func:`default_batches`: the scenario's batch times
1/2, 1, 2 and 4 when the user names none (``sweep --target``). Stale or compressed updates
(:func:`..convergence.target.penalty_of`) add ``steps_to_target_model_only`` and ``time_to_target_model_only_s`` to
each row (**model only**, :mod:`..convergence.penalties`); the ranking stays by the measured curve's time.
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..checks import items, count
from ..convergence.target import curve_of, penalty_of, with_penalty
from ..scenario import load_scenario, read_scenario
from .engine import sweep

COLUMNS = ("global_batch", "gpus", "data", "tensor", "pipeline", "microbatch_size", "schedule", "recompute",
           "zero_stage", "step_time_s", "throughput_samples_per_s", "value_to_target", "steps_to_target",
           "time_to_target_s", "time_to_target_p10_s", "time_to_target_p90_s", "gpu_hours_to_target", "extrapolated")
MODEL_ONLY = ("steps_to_target_model_only", "time_to_target_model_only_s", "convergence_penalty")
FACTORS = (0.5, 1, 2, 4)  # default batches around the scenario's: half to four times it


def default_batches(batch) -> list[int]:
    """The global batches a time-to-target sweep tries when none are named: ``batch`` times :data:`FACTORS`,
    rounded to whole samples (at least 1), without repeats.

    >>> default_batches(1536), default_batches(1)
    ([768, 1536, 3072, 6144], [1, 2, 4])
    """
    b = count("parallel.global_batch", batch)
    return list(dict.fromkeys(max(1, round(b * f)) for f in FACTORS))


def sweep_to_target(scenario, gpus, batches, target=None, hardware: dict | None = None) -> dict:
    """The fastest layout at each (global batch, GPU count), ranked by time to ``target`` (default: the scenario's
    ``training.target``): ``rows`` (a DataFrame, quickest to the target first), ``time_best`` and
    ``throughput_best`` (rows), ``pareto`` (time against GPU-hours to the target), ``why`` (one line: where the two
    picks differ and why), ``skipped`` (batches with no feasible layout, and the reason), ``curve``, ``results`` (the
:class:`~.result.SweepResult` of each batch swept). ``hardware``: the grid of scales, as :func:`.engine.sweep`.

    >>> tiny = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}
    >>> out = sweep_to_target({"model": tiny, "cluster": "dgx-a100", "training": {"target": "llama31_8b"}}, 8,
    ...                       [16, 32, 64])
    >>> sorted(out["rows"]["global_batch"].tolist()), int(out["time_best"]["global_batch"]) in (16, 32, 64)
    ([16, 32, 64], True)
    """
    raw = read_scenario(scenario)
    if isinstance((raw.get("training") or {}).get("framework"), (list, tuple)):
        raise ValueError("training.framework: one runtime for a time-to-target sweep (a list of runtimes is searched "
                         "by the step-time sweep, without a target)")
    spec = target if target is not None else (raw.get("training") or {}).get("target")
    if spec is None:
        raise ValueError("training.target: a time-to-target sweep needs a target (an MLPerf benchmark or a CSV)")
    curve = curve_of(spec, "training.target" if target is None else "target", steps=True)
    batches = [count("batches", b) for b in items("batches", batches)]
    if not batches:
        raise ValueError("batches: at least one global batch to sweep")
    rows, skipped, results = [], {}, {}
    lo, hi = curve.band
    seen = (float(np.min(curve.points.batch)), float(np.max(curve.points.batch)))
    price = raw["run"].get("price_per_gpu_hour") if isinstance(raw.get("run"), dict) else None
    for b in dict.fromkeys(batches):
        sc = {**raw, "parallel": {**(raw.get("parallel") or {}), "global_batch": b}}
        try:
            r = sweep(sc, gpus, hardware=hardware)
        except ValueError as e:  # no feasible layout at this batch: say so, keep the others
            skipped[b] = str(e).splitlines()[0]
            continue
        results[b] = r
        training = load_scenario(sc).training
        pred = curve.predict(b, "batches")
        for _, row in r.fastest_per_gpus().iterrows():
            step = float(row["step_time_s"])
            steps = pred["steps_to_target"]
            rows.append({"global_batch": b, **{k: row[k] for k in COLUMNS[1:9]}, "step_time_s": step,
                         "throughput_samples_per_s": b / step, "value_to_target": pred["value_to_target"],
                         "steps_to_target": steps, "time_to_target_s": steps * step,
                         "time_to_target_p10_s": steps * step * lo, "time_to_target_p90_s": steps * step * hi,
                         "gpu_hours_to_target": steps * step * float(row["gpus"]) / 3600,
                         "extrapolated": not seen[0] <= b <= seen[1]})
            if price is not None:
                rows[-1]["cost_to_target"] = rows[-1]["gpu_hours_to_target"] * float(price)
            penalty = penalty_of(training, int(row["data"]))
            if penalty is not None:
                pen = with_penalty(curve, {"steps_to_target": steps}, b, step, float(row["gpus"]), penalty)
                rows[-1].update({k: pen[k] for k in MODEL_ONLY})
    if not rows:
        raise ValueError(f"batches: no feasible layout at any of {', '.join(map(str, batches))} "
                         f"({'; '.join(f'{b}: {m}' for b, m in skipped.items())})")
    cols = COLUMNS + (("cost_to_target",) if price is not None else ()) \
        + (MODEL_ONLY if any(MODEL_ONLY[0] in r for r in rows) else ())
    df = pd.DataFrame(rows, columns=cols).sort_values("time_to_target_s", kind="stable").reset_index(drop=True)
    best = df.iloc[0]
    fast = df.loc[df["throughput_samples_per_s"].idxmax()]
    return {"rows": df, "time_best": best, "throughput_best": fast, "pareto": pareto_front(df),
            "why": why(best, fast, curve.points.unit), "skipped": skipped, "curve": curve, "results": results}


def _plain(r: pd.Series) -> dict:
    return {k: (v.item() if hasattr(v, "item") else v) for k, v in r.items()}


def to_dict(out: dict, batches) -> dict:
    """The JSON object of a :func:`sweep_to_target` result ``out`` over ``batches``: ``target``, ``unit``, ``form``,
    ``batches``, ``time_best``, ``throughput_best``, ``why``, ``pareto`` and ``rows`` (rows as plain dicts),
    ``skipped``, ``source``.

    >>> tiny = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}
    >>> d = to_dict(sweep_to_target({"model": tiny, "training": {"target": "llama31_8b"}}, 8, [16, 32]), [16, 32])
    >>> d["target"], d["unit"], type(d["time_best"]["gpus"]).__name__, d["rows"][0]["extrapolated"]
    ('llama31_8b', 'samples', 'int', False)
    """
    c = out["curve"]
    return {"target": c.points.name, "unit": c.points.unit, "form": c.form, "batches": [int(b) for b in batches],
            "time_best": _plain(out["time_best"]), "throughput_best": _plain(out["throughput_best"]),
            "why": out["why"], "pareto": [_plain(r) for _, r in out["pareto"].iterrows()],
            "rows": [_plain(r) for _, r in out["rows"].iterrows()],
            "skipped": {str(k): v for k, v in out["skipped"].items()}, "source": c.points.source}


def pareto_front(df: pd.DataFrame) -> pd.DataFrame:
    """Rows no other beats on both time and GPU-hours to the target, quickest first.

    >>> df = pd.DataFrame({"time_to_target_s": [10.0, 20.0, 15.0], "gpu_hours_to_target": [8.0, 4.0, 9.0]})
    >>> pareto_front(df)["time_to_target_s"].tolist()
    [10.0, 20.0]
    """
    order = df.sort_values(["gpu_hours_to_target", "time_to_target_s"], kind="stable")
    keep, best = [], np.inf
    for i, r in order.iterrows():
        if r["time_to_target_s"] < best:
            keep.append(i)
            best = r["time_to_target_s"]
    return df.loc[keep].sort_values("time_to_target_s", kind="stable")


def why(best: pd.Series, fast: pd.Series, unit: str) -> str:
    """One line: whether the time-to-target pick and the throughput pick differ, and by what.

    >>> a = pd.Series({"global_batch": 1024, "gpus": 64, "throughput_samples_per_s": 1000.0, "value_to_target": 1e6,
    ...                "steps_to_target": 977.0, "time_to_target_s": 1000.0})
    >>> b = pd.Series({"global_batch": 4096, "gpus": 64, "throughput_samples_per_s": 1500.0, "value_to_target": 2e6,
    ...                "steps_to_target": 488.0, "time_to_target_s": 1333.0})
    >>> why(a, b, "samples").split(" but ")[1]
    'needs 2x the samples to the target (2e+06 against 1e+06 samples), so it reaches the target 1.33x later'
    """
    if best["global_batch"] == fast["global_batch"] and best["gpus"] == fast["gpus"]:
        return (f"the same configuration (global batch {int(best['global_batch']):,} on {int(best['gpus']):,} GPUs) "
                "has the highest throughput and the shortest time to the target")
    return (f"the throughput pick (global batch {int(fast['global_batch']):,} on {int(fast['gpus']):,} GPUs) runs "
            f"{fast['throughput_samples_per_s'] / best['throughput_samples_per_s']:.3g}x the samples/s of the "
            f"time-to-target pick (global batch {int(best['global_batch']):,} on {int(best['gpus']):,} GPUs) but "
            f"needs {fast['value_to_target'] / best['value_to_target']:.3g}x the {unit} to the target "
            f"({fast['value_to_target']:.4g} against {best['value_to_target']:.4g} {unit}), so it reaches the "
            f"target {fast['time_to_target_s'] / best['time_to_target_s']:.3g}x later")


__all__ = ["sweep_to_target", "default_batches", "to_dict", "pareto_front", "why", "COLUMNS", "FACTORS"]
