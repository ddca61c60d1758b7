"""``concurrency-model report [--out DIR] [--force] [--full] [--workers N] [--json]``: the HTML report, the
toolkit's main job.

Writes ``DIR/report.html`` (default ``reports/``; self-contained, figures embedded) and the figures as
``DIR/figures/*.png`` from the embedded default data (:func:`concurrency_model.report.build_report`).
A directory that is not empty and was not written by this command is refused unless ``--force``; an
earlier report is replaced whole at the end (the new one is built beside it and swapped in with one rename, so
that a report stopped half-way leaves the old one intact). One report at a time writes into a directory: a
second is refused with one line naming the lock file (``.DIR.report-lock`` beside ``DIR``). Progress goes to
stderr, one line a part as it is done (also when stderr is not a terminal); ``--json`` prints ``{out, figures,
html, elapsed_s, timings_s, cpu_s, errors}``. ``--full`` validates every row (the validation's quick mode samples
the slow sets); ``--workers`` sets the processes the parts are built in (default: the CPUs, at most 2). A
section that could not be computed is shown on the page with its error, named on stderr, and the exit code is 1.
"""
from __future__ import annotations

import os

from ..checks import count
from . import add_json


def run(args) -> dict:
    os.environ.setdefault("MPLBACKEND", "Agg")  # no display needed; figures are written to files
    from ..report import build_report

    workers = count("--workers", args.workers, none_ok=True)
    out = build_report(args.out, force=args.force, progress=not args.no_progress, quick=not args.full, workers=workers)
    if out["errors"]:  # the page is written, with the failed sections saying why; exit 1 (cli.main)
        out["_exit_code"] = 1
        out["_errors"] = [f"section {e['section']} failed: {e['error']}" for e in out["errors"]]
    return out


def show(out: dict) -> None:
    print(f"wrote {out['html']} ({len(out['figures'])} figures in {out['elapsed_s']:.0f} s)")


def register(sub) -> None:
    r = sub.add_parser("report", help="the HTML report: every figure from the embedded data (the main job)")
    r.add_argument("--out", default="reports", help="output directory (default: reports/)")
    r.add_argument("--force", action="store_true", help="write into a non-empty directory this command did not write")
    r.add_argument("--no-progress", action="store_true", help="no progress lines on stderr")
    r.add_argument("--full", action="store_true", help="validate every row (slower; default: the quick validation)")
    r.add_argument("--workers", type=int, default=None,
                   help="processes to build the parts in (default: the CPUs, at most 2)")
    add_json(r)
    r.set_defaults(run=run, show=show)
