"""``concurrency-model validate [--dataset NAME] [--all-rows] [--all-modes]``: predicted vs measured, APE per dataset.

JSON: ``{"datasets": [{name, mode, rows, rows_total, median_ape, mean_ape, max_ape, ...}], ...}`` with APE as
fractions (0.12 = 12%), see :func:`concurrency_model.validate.registry.summarize`. A dataset that cannot
be read is reported with one line naming the file, row and column: with ``--dataset`` that is the error
(exit 2); over all datasets the others are still validated, the output is printed, each broken dataset
gets its line on stderr and the exit code is 1.
"""
from __future__ import annotations

import sys
import time

from ..checks import did_you_mean
from . import add_json

APE_DOC = "absolute percentage errors as fractions of the measured value (0.12 = 12%)"


def run(a) -> dict:
    from ..validate import registry
    if a.dataset is not None and a.dataset not in registry.names():
        raise ValueError(f"dataset: unknown {a.dataset!r}{did_you_mean(a.dataset, registry.names())}; allowed: "
                         f"{', '.join(registry.names())}")
    t0 = time.perf_counter()
    df = registry.validate(a.dataset, quick=not a.all_rows, all_modes=a.all_modes,
                           progress=sys.stderr if sys.stderr.isatty() else None)
    summary = registry.summarize(df)
    failed = [s for s in summary if s["error"]]
    if a.dataset is not None and failed:
        raise ValueError(failed[0]["error"])
    out = {"datasets": summary, "quick": not a.all_rows, "ape": APE_DOC,
           "elapsed_s": round(time.perf_counter() - t0, 2), "failed": [s["name"] for s in failed]}
    if failed:  # the results are printed, then one line per broken dataset; exit code 1
        out["_exit_code"] = 1
        out["_errors"] = [f"{s['name']}: {s['error']}" for s in failed]
    return out


def _pct(v) -> str:
    return "" if v is None else f"{100 * v:.1f}%"


def show(out: dict) -> None:
    rows = [("dataset", "mode", "rows", "of", "median", "mean", "max", "unit", "note")]
    for s in out["datasets"]:
        if s["error"]:
            rows.append((s["name"], "", "", "", "", "", "", "", f"error: {s['error']}"))
            continue
        note = "" if s["sampled"] == "all rows" else s["sampled"]
        if s["not_predicted"]:
            note += ("; " if note else "") + f"{s['not_predicted']} not predicted"
        rows.append((s["name"], s["mode"], str(s["rows"]), str(s["rows_total"]), _pct(s["median_ape"]),
                     _pct(s["mean_ape"]), _pct(s["max_ape"]), s["unit"] or "", note))
        for mode, o in s.get("other_modes", {}).items():
            rows.append(("", mode, str(o["rows"]), "", _pct(o["median_ape"]), _pct(o["mean_ape"]),
                         _pct(o["max_ape"]), "", ""))
    widths = [max(len(r[i]) for r in rows) for i in range(8)]
    for r in rows:
        print(("  ".join(c.rjust(w) if 2 <= i <= 6 else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths)))
               + "  " + r[8]).rstrip())
    print(f"absolute percentage error of each row; {'quick: slow sets sampled, ' if out['quick'] else ''}"
          f"{out['elapsed_s']:.1f} s")


def register(sub) -> None:
    v = sub.add_parser("validate", help="predicted vs measured for every dataset in data/ (APE per dataset)")
    from ..validate.registry import names
    v.add_argument("--dataset", metavar="NAME", help=f"one dataset (default: all): {', '.join(names())}")
    v.add_argument("--all-rows", action="store_true",
                   help="every row, and kernel constants fitted leave-one-device-out (minutes; default: quick)")
    v.add_argument("--all-modes", action="store_true", help="also the held-out / in-sample figures")
    add_json(v)
    v.set_defaults(run=run, show=show)
