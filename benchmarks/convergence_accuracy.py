"""Accuracy of the steps-to-target curves on MLPerf's reference convergence points (issue 40).

Over the benchmarks with at least 4 batch sizes (``--min-batches``):

* leave-one-batch-out: fit on the other batches (the form chosen by its held-out error on those batches alone,
  so the held-out batch never picks the form), predict the held-out one; APE of the value to the target against
  the checker's olympic mean. Target: median <= 10%.
* extrapolation: fit on all but the largest batch, predict the largest. Target: median <= 15%.
* band coverage: the share of the held-out batch's runs inside the predicted p10-p90 band (the band from the other
  batches' runs). Target: 70-90%.

Each figure is printed for the form chosen per fit and for each form alone.

    python benchmarks/convergence_accuracy.py [--min-batches 4] [--benchmark NAME ...]
"""
from __future__ import annotations

import argparse
import time

import numpy as np

from concurrency_model.convergence.fit import (FORMS, MIN_POINTS, band, evaluate, fit, fit_form, held_out_residuals,
                                               run_ratios)
from concurrency_model.convergence.points import benchmarks, mlperf


def predict(points, form):
    """The prediction function of ``points`` fitted with ``form`` (``"chosen"``: the held-out choice), its band,
    and the form used; ``None`` where that form cannot be fitted."""
    if form == "chosen":
        c = fit(points)
        return (lambda b: float(evaluate(c.form, c.params[c.form], b))), c.band, c.form
    if len(points.batch) < MIN_POINTS[form]:
        return None
    p = fit_form(form, points.batch, points.value)
    return (lambda b: float(evaluate(form, p, b))), band(run_ratios(points), held_out_residuals(form, points)), form


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--min-batches", type=int, default=4)
    ap.add_argument("--benchmark", action="append", default=None)
    a = ap.parse_args()
    t0 = time.perf_counter()
    names = [n for n in (a.benchmark or benchmarks()) if len(mlperf(n).batch) >= a.min_batches]
    kinds = ("chosen", *FORMS)
    loo = {k: [] for k in kinds}
    per_bench = {k: {} for k in kinds}
    extra = {k: {} for k in kinds}
    inside = {k: [0, 0] for k in kinds}
    picked = {}
    for name in names:
        pts = mlperf(name)
        n = len(pts.batch)
        for kind in kinds:
            errs = []
            for i in range(n):
                got = predict(pts.without(i), kind)
                if got is None:
                    continue
                f, band, _ = got
                v = f(pts.batch[i])
                errs.append(abs(v / pts.value[i] - 1))
                runs = pts.runs[i]
                inside[kind][0] += int(np.sum((runs >= v * band[0]) & (runs <= v * band[1])))
                inside[kind][1] += len(runs)
            loo[kind] += errs
            per_bench[kind][name] = float(np.median(errs)) if errs else None
            got = predict(pts.without(n - 1), kind)
            if got is not None:
                extra[kind][name] = abs(got[0](pts.batch[-1]) / pts.value[-1] - 1)
                if kind == "chosen":
                    picked[name] = got[2]
    print(f"benchmarks with >= {a.min_batches} batch sizes: {len(names)} ({', '.join(names)})")
    print(f"{'benchmark':<18} {'batches':>7} " + " ".join(f"{'LOO ' + k:>17}" for k in kinds)
          + f" {'extrap (chosen)':>16} {'form':>13}")
    for name in names:
        cells = " ".join(f"{'' if per_bench[k].get(name) is None else f'{100 * per_bench[k][name]:.1f}%':>17}"
                         for k in kinds)
        ex = extra["chosen"].get(name)
        print(f"{name:<18} {len(mlperf(name).batch):>7} {cells} {'' if ex is None else f'{100 * ex:.1f}%':>16} "
              f"{picked.get(name, ''):>13}")
    print()
    for k in kinds:
        e, x = np.array(loo[k]), np.array(list(extra[k].values()))
        cov = inside[k][0] / inside[k][1] if inside[k][1] else float("nan")
        medians = [v for v in per_bench[k].values() if v is not None]
        print(f"{k:<13} leave-one-batch-out median APE {100 * np.median(e):.1f}% over {len(e)} held-out batches "
              f"(median of the benchmarks' medians {100 * np.median(medians):.1f}%; "
              f"target <= 10%); extrapolation to the largest batch median APE {100 * np.median(x):.1f}% over "
              f"{len(x)} benchmarks (target <= 15%); band coverage {100 * cov:.1f}% of {inside[k][1]} runs "
              f"(target 70-90%)")
    print(f"{time.perf_counter() - t0:.1f} s")


if __name__ == "__main__":
    main()
