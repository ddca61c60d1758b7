"""``concurrency-model sweep --scenario FILE --gpus N [N ...] [--top K] [--scale NAME=V1,V2 ...]``: every
configuration of a scenario, fastest first.

With a quality target (the scenario's ``training.target`` or ``--target NAME_OR_CSV``, issue 40) the sweep also
ranks by time to that target with the global batch swept (``--batches B ...``, default the scenario's batch times
1/2, 1, 2 and 4: :func:`concurrency_model.sweep.to_target.default_batches`): the JSON keeps every key of the plain
sweep (of the scenario's own batch) and adds ``to_target`` (:func:`concurrency_model.sweep.to_target.to_dict`: the
rows quickest first, the time-to-target and throughput picks, why they differ, the Pareto front of time against
GPU-hours to the target); the text shows the time-to-target table in place of the step-time table.
"""
from __future__ import annotations

import argparse

from ..checks import count
from ..sweep import SCALES, sweep
from ..sweep.to_target import default_batches, sweep_to_target, to_dict
from . import add_json, add_scenario, currency_of, positive_int, scenario_of
from .converge import show_sweep


def _scale(text: str) -> tuple[str, list[float]]:
    name, sep, values = text.partition("=")
    if not sep or name not in SCALES:
        raise argparse.ArgumentTypeError(f"expected NAME=V1,V2,... with NAME one of {', '.join(SCALES)}, got {text!r}")
    try:
        vals = [float(v) for v in values.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{name}: values must be numbers, got {values!r}") from None
    if any(not v > 0 for v in vals):
        raise argparse.ArgumentTypeError(f"{name}: values must be positive, got {values!r}")
    return name, vals


def run(a) -> dict:
    raw = scenario_of(a)
    if a.target is not None:  # --target NAME_OR_CSV: training.target (issue 40)
        raw = {**raw, "training": {**(raw.get("training") or {}), "target": a.target}}
    target = (raw.get("training") or {}).get("target")
    hardware = dict(a.scale or [])
    if target is None:
        if a.batches is not None:
            raise ValueError("--batches: sweeping the global batch needs a quality target (--target NAME_OR_CSV or "
                             "the scenario's training.target)")
        r, tt = sweep(raw, a.gpus, hardware=hardware, progress=not a.json), None
    else:
        own = (raw.get("parallel") or {}).get("global_batch")
        if own is None:
            raise ValueError("parallel.global_batch: a sweep needs the global batch (the work of one step)")
        own = count("parallel.global_batch", own)
        batches = a.batches if a.batches is not None else default_batches(own)
        tt = sweep_to_target(raw, a.gpus, batches, hardware=hardware)
        # the plain sweep's keys, of the scenario's own batch (swept again only when it is not among the batches)
        r = tt["results"].get(own) or sweep(raw, a.gpus, hardware=hardware, progress=not a.json)
    out = r.to_dict(top=a.top)
    if tt is not None:
        out["to_target"] = to_dict(tt, batches)
    if out["best"] and "cost" in out["best"][0]:
        out["currency"] = currency_of(raw, "run")  # the unit of every cost
    if a.csv:  # the rows of "best", in its order, with their 80% bands
        df = r.top(a.top)
        at = df.columns.get_loc("step_time_s") + 1
        for i, k in enumerate(("step_time_p10_s", "step_time_p90_s")):
            df.insert(at + i, k, [x[k] for x in out["best"]])
        out["csv"] = csv_in_units(df, out.get("currency")).to_csv(index=False)
    return out


def csv_in_units(df, currency: str | None = None):
    """A sweep's rows as the CSV prints them: byte columns in GB (``memory_bytes_per_device`` becomes
    ``memory_GB_per_device``, 1 GB = 1e9 bytes) and ``cost`` named with its currency (``cost_USD``).

    >>> import pandas as pd
    >>> csv_in_units(pd.DataFrame({"weights_bytes": [72158920032.0], "cost": [5.0]}), "EUR").round(2).to_dict("list")
    {'weights_GB': [72.16], 'cost_EUR': [5.0]}
    """
    out = df.copy()
    for k in [c for c in out.columns if "_bytes" in c]:
        out[k] = out[k] / 1e9
    return out.rename(columns={**{c: c.replace("_bytes", "_GB") for c in out.columns if "_bytes" in c},
                               **({"cost": f"cost_{currency}"} if currency else {})})


def show(out: dict) -> None:
    if "csv" in out:
        print(out["csv"], end="")
        return
    if "to_target" in out:  # ranked by time to the target: that table in place of the step-time table
        print(f"{out['feasible']:,} feasible of {out['evaluated']:,} configurations at the scenario's global batch "
              f"in {out['elapsed_s']:.2f} s; every batch swept:")
        show_sweep(out["to_target"])
        return
    print(f"{out['feasible']:,} feasible of {out['evaluated']:,} configurations in {out['elapsed_s']:.2f} s "
          f"({out['compile_s']:.2f} s compiling, then {out['evaluated_per_s']:,.0f} evaluated and "
          f"{out['feasible_per_s']:,.0f} feasible per second)")
    for reason, n in sorted(out["rejected"].items(), key=lambda kv: -kv[1]):
        print(f"  rejected {n:>10,}  {reason}")
    runtimes = "frameworks" in out  # a sweep over several runtimes: each row names its own
    _table(out["best"], out.get("currency", "USD"), runtimes)
    if "runner_up" in out:
        ru, b = out["runner_up"], out["best"][0]
        print(f"\nrunner-up of another layout: {_words(ru)}, {ru['step_time_s']:.4g} s against {_words(b)}, "
              f"{b['step_time_s']:.4g} s; what separates them (runner-up minus best):")
        for x in ru["separates"][:4]:
            print(f"  {x['runner_up_minus_best_s']:>+10.4g} s  {x['part']}")
    if runtimes:
        print("\nthe fastest under each runtime:")
        _table(out["per_framework"], out.get("currency", "USD"), runtimes)
    if len(out.get("per_gpus", [])) > 1:
        print("\nthe fastest at each GPU count:")
        _table(out["per_gpus"], out.get("currency", "USD"), runtimes)


def _words(row: dict) -> str:
    """A configuration's layout in words: ``data 32 x tensor 4 x pipeline 8, ZeRO-1 (megatron)``."""
    p, t = row["parallel"], row["training"]
    extra = "".join(f" x {k} {p[k]}" for k in ("context", "expert") if p.get(k, 1) > 1)
    return (f"data {p['data']} x tensor {p['tensor']} x pipeline {p['pipeline']}{extra}, ZeRO-{t['zero_stage']} "
            f"({t['framework']})")


def _table(rows: list, currency: str = "USD", runtimes: bool = False) -> None:
    run = "run_days" in rows[0]
    cost = run and "cost" in rows[0]
    print(f"{'step s':>10} {'80% band s':>19} {'GPUs':>6} {'d':>4} {'t':>3} {'p':>4} {'c':>3} {'e':>3} {'b':>3} "
          f"{'schedule':>12} {'v':>2} {'sp':>3} {'recompute':>10} {'ZeRO':>4}"
          + (f" {'runtime':>13}" if runtimes else "") + f" {'GB/dev':>7}"
          + (f" {'days':>8} {'GPU-hours':>11}" if run else "") + (f" {'cost ' + currency:>12}" if cost else "")
          + "  hardware")
    for b in rows:
        p, t = b["parallel"], b["training"]
        ctx = f"{p.get('context', 1)}{'u' if p.get('context_algorithm') == 'ulysses' else ''}"
        band = f"{b['step_time_p10_s']:.4g}-{b['step_time_p90_s']:.4g}"
        print(f"{b['step_time_s']:>10.4g} {band:>19} {b['gpus']:>6} {p['data']:>4} {p['tensor']:>3} {p['pipeline']:>4} "
              f"{ctx:>3} {p.get('expert', 1):>3} {p['microbatch_size']:>3} {p['schedule']:>12} {p['interleave']:>2} "
              f"{'y' if p['sequence_parallel'] else 'n':>3} {t['recompute']:>10} {t['zero_stage']:>4} "
              + (f"{t['framework']:>13} " if runtimes else "")
              + f"{b['memory_bytes_per_device'] / 1e9:>7.1f}{'!' if b.get('memory_at_risk') else ' '}"
              + (f" {b['run_days']:>8.2f} {b['gpu_hours']:>11,.0f}" if run else "")
              + (f" {b['cost']:>12,.0f}" if cost else "") + "  "
              + (" ".join(f"{k}x{v:g}" for k, v in b["hardware_scales"].items() if v != 1) or "preset"))
    if any(b.get("memory_at_risk") for b in rows):
        print("! memory at risk: the central figure fits, the upper end of its band (the allocator's reserved "
              "headroom and measured peaks' spread) does not")


def register(sub) -> None:
    s = sub.add_parser("sweep", help="every data x tensor x pipeline configuration of a scenario, fastest first")
    add_scenario(s, "; the parallel and training fields left out are searched")
    s.add_argument("--gpus", required=True, nargs="+", type=positive_int, help="GPU count(s)")
    s.add_argument("--top", type=positive_int, default=10, help="configurations to list (default 10)")
    s.add_argument("--scale", action="append", type=_scale, metavar="NAME=V1,V2",
                   help=f"hardware grid, factors of the preset's numbers; NAME one of {', '.join(SCALES)}")
    s.add_argument("--target", metavar="NAME_OR_CSV", default=None,
                   help="rank by time to a quality target, the global batch swept: an MLPerf benchmark (bert, gpt3, "
                        "...) or a CSV of your convergence runs (sets training.target; concurrency-model converge)")
    s.add_argument("--batches", type=positive_int, nargs="+", default=None,
                   help="global batches to sweep with a target (default: the scenario's batch x 1/2, 1, 2, 4)")
    fmt = s.add_mutually_exclusive_group()
    add_json(fmt)
    fmt.add_argument("--csv", action="store_true", help="print the top configurations as CSV")
    s.set_defaults(run=run, show=show)
