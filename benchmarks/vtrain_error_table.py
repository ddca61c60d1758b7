"""vTrain single node, the per-row error grouped by feature: which rows move the mean APE, and what they share.

Evaluates vTrain's single-node rows (``--rows``: ``odd``, the held-out rows :mod:`concurrency_model.validate.training`
validates; ``even``, those ``HOST_S_PER_KERNEL`` is fitted on; ``all``) and prints, for each feature and for the
crossings that locate the worst rows (tensor x microbatch, hidden x tensor x microbatch, pipeline x microbatch, and
whether the model's step waits for the host), :func:`~concurrency_model.validate.training.error_table`: rows, mean
APE, median signed error (+: predicted slower), max APE and the group's share of the total APE; then the worst rows.
About 10 s for the 720 odd rows on 2 cores.

    python benchmarks/vtrain_error_table.py [--rows odd|even|all] [--every K] [--worst N] [--json]
"""
from __future__ import annotations

import argparse
import json
import os

import pandas as pd

from concurrency_model.validate import training as vt

FEATURES = (["tensor"], ["pipeline"], ["data"], ["microbatch"], ["hidden"], ["layers"], ["host_bound"],
            ["tensor", "microbatch"], ["pipeline", "microbatch"], ["hidden", "tensor", "microbatch"])
SHOWN = ["hidden", "layers", "tensor", "pipeline", "data", "microbatch", "global_batch", "measured_time_s",
         "predicted_time_s", "signed_error_pct", "host_bound"]


def rows_of(which: str) -> pd.DataFrame:
    """vTrain single node's ``odd`` (held-out), ``even`` (fit) or ``all`` rows."""
    if which not in ("odd", "even", "all"):
        raise ValueError(f"--rows: unknown {which!r}; allowed: odd, even, all")
    return {"odd": vt.vtrain_held_out_rows, "even": vt.vtrain_fit_rows,
            "all": lambda: vt.vtrain_rows("single")}[which]()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", default="odd", help="odd (held out, default), even (the fit's) or all")
    ap.add_argument("--every", type=int, default=1, help="every K-th row (default 1; 20 is the quick sample)")
    ap.add_argument("--worst", type=int, default=15, help="the N rows of largest APE (default 15)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    a = ap.parse_args(argv)
    if a.every < 1 or a.worst < 0:
        raise SystemExit("--every: must be >= 1; --worst: must be >= 0")
    res = vt.evaluate(rows_of(a.rows).iloc[::a.every], workers=a.workers)
    res["host_bound"] = res["host_wait_s"] > 0  # the step waits for the host to issue kernels
    ok = res[res["status"] == "ok"]
    out = {"rows": len(ok), "mean_ape": round(float(ok["ape"].mean()), 2),
           "median_ape": round(float(ok["ape"].median()), 2),
           "tables": {" x ".join(f): vt.error_table(res, f).round(3).to_dict("records") for f in FEATURES},
           "worst": ok.nlargest(a.worst, "ape")[SHOWN].round(4).to_dict("records")}
    if a.json:
        print(json.dumps(out, indent=1, default=float))
        return out
    print(f"vTrain single node, {a.rows} rows (every {a.every}): {out['rows']} rows, mean APE {out['mean_ape']}%, "
          f"median {out['median_ape']}%")
    for name, table in out["tables"].items():
        print(f"\nby {name}\n{pd.DataFrame(table).to_string(index=False)}")
    print(f"\nworst {a.worst}\n{pd.DataFrame(out['worst']).to_string(index=False)}")
    return out


if __name__ == "__main__":
    main()
