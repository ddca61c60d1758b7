"""``concurrency-model converge --benchmark NAME --batch B [--json]``: the data and the steps to a benchmark's target
quality at global batch ``B`` (issue 40), from its fitted curve (:mod:`concurrency_model.convergence`).

JSON: ``value_to_target`` (in ``unit``, the benchmark's own), ``unit``, ``steps_to_target`` (``null`` where the
unit has no known samples per unit), ``value_to_target_p10``, ``value_to_target_p90``, ``form`` (the form kept by
its held-out error), and beside them every fitted form's parameters, held-out error and value (``forms``), the
curve's expression in ``B``, the points fitted and their source. ``--csv FILE`` fits a user's convergence runs
instead of a benchmark.
"""
from __future__ import annotations

from . import add_json, positive_int


def run(a) -> dict:
    from ..convergence.fit import evaluate
    from ..convergence.target import curve_of
    if (a.benchmark is None) == (a.csv is None):
        raise ValueError("--benchmark: give exactly one of --benchmark NAME or --csv FILE")
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


def _num(v) -> str:
    return "n/a" if v is None else f"{v:,.6g}"


def show(out: dict) -> None:
    print(f"{out['benchmark']} at global batch {out['batch']:,}: {_num(out['value_to_target'])} {out['unit']} to the "
          f"target (p10 {_num(out['value_to_target_p10'])}, p90 {_num(out['value_to_target_p90'])}), "
          f"{_num(out['steps_to_target'])} steps")
    print(f"  form kept: {out['form']} (smaller leave-one-batch-out median error)")
    for f, d in out["forms"].items():
        held = "n/a (too few batches)" if d["held_out_median_ape"] is None else f"{100 * d['held_out_median_ape']:.1f}%"
        params = ", ".join(f"{k} {v:,.4g}" for k, v in d["params"].items())
        print(f"  {f:<13} {_num(d['value_to_target']):>12} {out['unit']}  held-out median APE {held:<8}  {params}")
    print(f"  points: " + ", ".join(f"{p['global_batch_size']:,.0f}: {p['value_to_target']:,.4g}"
                                     for p in out["points"]))
    print(f"  {out['source']}")


def register(sub) -> None:
    c = sub.add_parser("converge", help="data and steps to a target quality at a global batch (MLPerf's reference "
                       "convergence points, or your own runs)")
    c.add_argument("--benchmark", metavar="NAME", default=None,
                   help="an MLPerf benchmark as named in its data: bert, resnet, gpt3, llama31_8b, ...")
    c.add_argument("--csv", metavar="FILE", default=None,
                   help="your convergence runs instead: columns global_batch_size, value_to_converge, "
                        "convergence_unit (one row per run), optional samples_per_unit")
    c.add_argument("--batch", type=positive_int, required=True, help="the global batch size (samples per step)")
    add_json(c)
    c.set_defaults(run=run, show=show)
