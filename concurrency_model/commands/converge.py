"""``concurrency-model converge --benchmark NAME --batch B [--json]``: the data and the steps to a benchmark's target
quality at global batch ``B`` (issue 40), from its fitted curve (:mod:`concurrency_model.convergence`).

JSON: ``value_to_target`` (in ``unit``, the benchmark's own), ``unit``, ``steps_to_target`` (``null`` where the
unit has no known samples per unit), ``value_to_target_p10``, ``value_to_target_p90``, ``form`` (the form kept by
its held-out error), and beside them every fitted form's parameters, held-out error and value (``forms``), the
curve's expression in ``B``, the points fitted and their source. ``--csv FILE`` fits a user's convergence runs
instead of a benchmark.

``--scenario FILE --gpus N ... [--batches B ...]``: the sweep of the scenario ranked by time to the target, the
global batch swept (:func:`concurrency_model.sweep.to_target.sweep_to_target`): the fastest layout at each batch and
GPU count, the time-to-target and throughput picks and why they differ, the Pareto front of time against GPU-hours.
"""
from __future__ import annotations

from . import add_json, positive_int


def run(a) -> dict:
    from ..convergence.fit import evaluate
    from ..convergence.target import curve_of
    if a.scenario is not None:
        return run_sweep(a)
    if (a.benchmark is None) == (a.csv is None):
        raise ValueError("--benchmark: give exactly one of --benchmark NAME or --csv FILE")
    if a.batch is None:
        raise ValueError("--batch: the global batch size is required with --benchmark or --csv")
    c = curve_of({"benchmark": a.benchmark} if a.benchmark is not None else {"csv": a.csv},
                 "--benchmark" if a.benchmark is not None else "--csv")
    out = c.predict(a.batch, "--batch")
    pts = c.points
    forms = {f: {"params": p, "held_out_median_ape": c.held_out.get(f),
                 "value_to_target": float(evaluate(f, p, a.batch))} for f, p in c.params.items()}
    return {**out, "benchmark": pts.name, "batch": a.batch, "unit_source": pts.unit_source,
            "samples_per_unit": pts.samples_per_unit, "band": list(c.band), "forms": forms,
            "expression": str(c.samples()),
            "points": [{"global_batch_size": float(b), "value_to_target": float(v), "runs": len(r)}
                       for b, v, r in zip(pts.batch, pts.value, pts.runs)],
            "source": pts.source}


def run_sweep(a) -> dict:
    """``--scenario FILE --gpus N ... [--batches B ...]``: the sweep ranked by time to the target."""
    from ..convergence.target import curve_of
    from ..scenario import read_scenario, with_settings
    from ..sweep.to_target import sweep_to_target, to_dict
    if a.gpus is None:
        raise ValueError("--gpus: a time-to-target sweep needs the GPU counts (--gpus N [N ...])")
    raw = with_settings(read_scenario(a.scenario), a.set)
    target = None
    if a.benchmark is not None or a.csv is not None:
        target = {"benchmark": a.benchmark} if a.benchmark is not None else {"csv": a.csv}
    spec = target if target is not None else (raw.get("training") or {}).get("target")
    if spec is None:
        raise ValueError("training.target: a time-to-target sweep needs a target (--benchmark, --csv or the "
                         "scenario's training.target)")
    field = "training.target" if target is None else ("--benchmark" if a.benchmark is not None else "--csv")
    c = curve_of(spec, field, steps=True)
    # default: the target's own batches, so that nothing is extrapolated past its measured range
    batches = a.batches if a.batches is not None else [int(b) for b in c.points.batch]
    return to_dict(sweep_to_target(raw, a.gpus, batches, target), batches)


def _num(v) -> str:
    return "n/a" if v is None else f"{v:,.6g}"


def show_sweep(out: dict) -> None:
    """The time-to-target sweep (:func:`concurrency_model.sweep.to_target.to_dict`) as a table, quickest first, the
    two picks and why they differ (also ``sweep --target``)."""
    print(f"time to {out['target']}'s target ({out['form']} curve, {out['unit']}) at global batches "
          f"{', '.join(f'{b:,}' for b in out['batches'])}; the fastest layout at each batch and GPU count, quickest "
          "to the target first:")
    print(f"  {'batch':>7} {'GPUs':>6} {'d x t x p':>12} {'step s':>9} {'samples/s':>11} {'steps':>9} "
          f"{'hours':>8} {'80% band':>15} {'GPU-hours':>11}")
    for r in out["rows"]:
        band = f"{r['time_to_target_p10_s'] / 3600:.3g}-{r['time_to_target_p90_s'] / 3600:.3g}"
        layout = f"{r['data']}x{r['tensor']}x{r['pipeline']}"
        star = "*" if r.get("extrapolated") else " "
        print(f"  {r['global_batch']:>6,}{star} {r['gpus']:>6,} {layout:>12} {r['step_time_s']:>9.4g} "
              f"{r['throughput_samples_per_s']:>11,.1f} {r['steps_to_target']:>9,.0f} "
              f"{r['time_to_target_s'] / 3600:>8.3g} {band:>15} {r['gpu_hours_to_target']:>11,.0f}")
    t, f = out["time_best"], out["throughput_best"]
    print(f"time-to-target pick: global batch {t['global_batch']:,} on {t['gpus']:,} GPUs, "
          f"{t['time_to_target_s'] / 3600:.3g} h; throughput pick: global batch {f['global_batch']:,} on "
          f"{f['gpus']:,} GPUs, {f['time_to_target_s'] / 3600:.3g} h")
    print(out["why"])
    if t.get("convergence_penalty") is not None:
        print(f"  with {t['convergence_penalty']}: {t['steps_to_target_model_only']:,.0f} steps, "
              f"{t['time_to_target_model_only_s'] / 3600:.3g} h at the time-to-target pick")
    print("Pareto front, time against GPU-hours to the target: " + "; ".join(
        f"batch {r['global_batch']:,} on {r['gpus']:,} GPUs {r['time_to_target_s'] / 3600:.3g} h "
        f"{r['gpu_hours_to_target']:,.4g} GPU-hours" for r in out["pareto"]))
    if any(r.get("extrapolated") for r in out["rows"]):
        print(f"  * outside the batches {out['target']}'s curve was fitted on: the fitted form extrapolated")
    for b, m in out["skipped"].items():
        print(f"  global batch {b}: no feasible layout ({m})")


def show(out: dict) -> None:
    if "rows" in out:
        show_sweep(out)
        return
    print(f"{out['benchmark']} at global batch {out['batch']:,}: {_num(out['value_to_target'])} {out['unit']} to the "
          f"target (p10 {_num(out['value_to_target_p10'])}, p90 {_num(out['value_to_target_p90'])}), "
          f"{_num(out['steps_to_target'])} steps")
    print(f"  form kept: {out['form']} (smaller leave-one-batch-out median error)")
    for f, d in out["forms"].items():
        held = "n/a (too few batches)" if d["held_out_median_ape"] is None else f"{100 * d['held_out_median_ape']:.1f}%"
        params = ", ".join(f"{k} {v:,.4g}" for k, v in d["params"].items())
        print(f"  {f:<13} {_num(d['value_to_target']):>12} {out['unit']}  held-out median APE {held:<8}  {params}")
    print("  points: " + ", ".join(f"{p['global_batch_size']:,.0f}: {p['value_to_target']:,.4g}"
                                   for p in out["points"]))
    print(f"  {out['source']}")


def register(sub) -> None:
    c = sub.add_parser("converge", help="data and steps to a target quality at a global batch (MLPerf's reference "
                       "convergence points, or your own runs); with --scenario, the sweep ranked by time to it")
    c.add_argument("--benchmark", metavar="NAME", default=None,
                   help="an MLPerf benchmark as named in its data: bert, resnet, gpt3, llama31_8b, ...")
    c.add_argument("--csv", metavar="FILE", default=None,
                   help="your convergence runs instead: columns global_batch_size, value_to_converge, "
                        "convergence_unit (one row per run), optional samples_per_unit")
    c.add_argument("--batch", type=positive_int, default=None, help="the global batch size (samples per step)")
    c.add_argument("--scenario", metavar="FILE", default=None,
                   help="rank the sweep of this scenario (layout fields left out are searched) by time to the target "
                        "(--benchmark, --csv or its training.target), the global batch swept over --batches")
    c.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="change one field of the scenario (as estimate --set; repeatable)")
    c.add_argument("--gpus", type=positive_int, nargs="+", default=None, help="GPU counts of the sweep (--scenario)")
    c.add_argument("--batches", type=positive_int, nargs="+", default=None,
                   help="global batches of the sweep (--scenario; default: the target's measured batches)")
    add_json(c)
    c.set_defaults(run=run, show=show)
