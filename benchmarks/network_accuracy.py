"""How well the alpha-beta models of ``calibrate network`` predict collective sizes they were not fitted on.

Reads saved measurements (default: the newest ``data/measured/network-*/measurements.csv``; or ``--csv``
PATH). For every collective and rank count, fits alpha and beta (:func:`fit_alpha_beta` with the model
and loss of :mod:`concurrency_model.calibrate.network`) on every other size (1 KiB, 4 KiB, ...), predicts
the sizes in between (2 KiB, 8 KiB, ...), and prints one JSON object: per collective and rank count the
median and 90th-percentile absolute percentage error of the held-back sizes (``median_ape``,
``p90_ape``, %), the fitted ``alpha_s`` and ``bw_Bps``; ``overall`` pools every held-back row;
``meets_target``: overall median APE <= 20 %. Needs no torch.

    python benchmarks/network_accuracy.py [--csv data/measured/network-cpu-host-gloo-YYYYMMDD/measurements.csv]
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import pandas as pd

from concurrency_model.calibrate.fit_comm import LOSS, MODELS, fit_alpha_beta, predict

ROOT = Path(__file__).resolve().parents[1]
TARGET_MEDIAN_APE = 20.0


def _newest() -> Path:
    found = sorted(ROOT.glob("data/measured/network-*/measurements.csv"), key=lambda p: p.parent.name[-8:])
    if not found:
        raise SystemExit("no data/measured/network-*/measurements.csv; run concurrency-model calibrate network")
    return found[-1]


def evaluate(df: pd.DataFrame) -> dict:
    """``{results: {collective: {ranks: {...}}}, overall: {...}}`` of the every-other-size hold-out."""
    results, pooled = {}, []
    for (coll, ranks), g in df.groupby(["collective", "num_ranks"], sort=False):
        g = g.sort_values("size_bytes")
        n, t = g["size_bytes"].to_numpy(float), g["time_us"].to_numpy(float) * 1e-6
        train, test = np.arange(len(g)) % 2 == 0, np.arange(len(g)) % 2 == 1
        if train.sum() < 2 or not test.any():
            continue
        f = fit_alpha_beta(n[train], int(ranks), t[train], MODELS[coll], loss=LOSS)
        ape = 100.0 * np.abs(predict(MODELS[coll], f, n[test], int(ranks)) / t[test] - 1.0)
        pooled.extend(ape)
        results.setdefault(coll, {})[str(int(ranks))] = {
            "median_ape": round(float(np.median(ape)), 2), "p90_ape": round(float(np.percentile(ape, 90)), 2),
            "train_sizes": int(train.sum()), "test_sizes": int(test.sum()), "alpha_s": float(f"{f.alpha:.4g}"),
            "bw_Bps": float(f"{f.bw:.4g}"), "fit_median_ape": round(f.median_ape, 2)}
    pooled = np.asarray(pooled)
    overall = {"median_ape": round(float(np.median(pooled)), 2), "p90_ape": round(float(np.percentile(pooled, 90)), 2),
               "rows": int(len(pooled))} if len(pooled) else {}
    return {"results": results, "overall": overall}


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--csv", help="measurements.csv of calibrate network (default: the newest under data/measured)")
    a = p.parse_args(argv)
    path = Path(a.csv) if a.csv else _newest()
    out = evaluate(pd.read_csv(path))
    medians = [r["median_ape"] for c in out["results"].values() for r in c.values()]
    out = {"csv": str(path.relative_to(ROOT) if path.resolve().is_relative_to(ROOT) else path), **out,
           "target_median_ape": TARGET_MEDIAN_APE,
           "meets_target": bool(out["overall"]) and out["overall"]["median_ape"] <= TARGET_MEDIAN_APE,
           "groups_over_target": sum(m > TARGET_MEDIAN_APE for m in medians), "groups": len(medians)}
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
