"""The HTML report: the toolkit's main job (``concurrency-model report [--out DIR]``).

:func:`build_report` computes every figure from the embedded default data with the toolkit's own API and
writes ``DIR/report.html`` (self-contained: the figures are embedded as PNG data URIs) and the same
figures as ``DIR/figures/*.png``. Figure functions live in small modules by topic (:mod:`.zoo`,
:mod:`.comm`, :mod:`.parallel`, :mod:`.minibatch`, :mod:`.sweep3d`, :mod:`.inference`, :mod:`.finetune`,
:mod:`.accuracy`); each takes ``ax=None`` and returns the Axes (:mod:`.finetune`'s plot its two), so they also work
in a notebook. The page opens with "At a glance" (:mod:`.glance`: the headline answers with their bands and the
validation summary), then the shipped example scenarios with their commands (:mod:`.examples`), then the contents
and the other sections; :mod:`.parts` builds each part in a worker process.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from contextlib import contextmanager
from pathlib import Path

from ..calibrate.files import discard, stage_dir, swap_in
from ..progress import Progress
from . import parts
from .glance import glance_section
from .html import render, write_atomic
from .parts import PARTS
from .sections import about, escape, lead, meta

MARKER = ".concurrency-model-report"
HTML_NAME = "report.html"
FIGURE_DIR = "figures"
OURS = (HTML_NAME, FIGURE_DIR, MARKER)  # what a report writes into its directory; the rest is kept


def prepare_out(out: Path, force: bool = False) -> None:
    """Check and create the output directory.

    A directory that is not empty and holds no marker of an earlier report is refused (``ValueError``
    asking for ``force``). An earlier report stays whole until the new one replaces it (:func:`build_report`).
    """
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out: {out} exists and is not a directory")
    if out.is_dir() and any(out.iterdir()) and not (out / MARKER).is_file() and not force:
        raise ValueError(f"--out: {out} is not empty and was not written by concurrency-model report; "
                         f"use --force to write into it anyway")
    out.mkdir(parents=True, exist_ok=True)


def lock_path(out) -> Path:
    """The lock file of a report into ``out``: ``.NAME.report-lock`` beside it (not inside: the directory itself
    is swapped)."""
    out = Path(out).absolute()
    return out.parent / f".{out.name}.report-lock"


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)  # signal 0: no signal, only whether the process exists (kill(2))
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


@contextmanager
def report_lock(out):
    """Hold :func:`lock_path` of ``out`` while a report is written: created with ``O_EXCL`` (one creator wins,
    open(2)), holding the writer's process id, removed at the end. A second report into the same directory is
    refused with one line naming the lock, whose process is or is not running (then the lock is stale: a report
    killed before it could remove it, and the line says to remove it)."""
    path = lock_path(out)
    try:
        fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        try:
            pid = int(path.read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pid = None
        if pid is not None and _running(pid):
            raise ValueError(f"--out: another report (process {pid}) is writing into {out}; wait for it to finish "
                             f"(lock {path})") from None
        raise ValueError(f"--out: {path} is left by a report that is no longer running (process {pid}); if no "
                         f"report is writing into {out}, remove it: rm {path}") from None
    with os.fdopen(fd, "w") as f:
        f.write(f"{os.getpid()}\n")
    try:
        yield path
    finally:
        path.unlink(missing_ok=True)


def build_report(out_dir="reports", force: bool = False, progress: bool = True, quick: bool = True,
                 workers: int | None = None) -> dict:
    """Compute every figure and write ``out_dir/report.html`` and ``out_dir/figures/*.png``.

    Returns ``{"out", "html", "figures", "elapsed_s", "timings_s", "cpu_s", "errors"}``: the directory, the page,
    the PNG paths, the wall time in all and per part, the process seconds per part (and ``"all"``: this process
    and its workers together), and the parts that failed (each shown on the page with its error instead of its
    figures; empty when all went well). ``progress`` writes a line on stderr as each part is done (also when
    stderr is not a terminal); ``quick`` is the validation's quick mode. The parts (:mod:`.parts`) are built in
    ``workers`` processes (default: the CPUs, at most 2), the longest first.
    """

    t0 = time.perf_counter()
    out = Path(out_dir)
    prepare_out(out, force)
    with report_lock(out):  # one report at a time into a directory
        # built beside the old one and swapped in with one rename: a report stopped half-way leaves the old whole
        stage = stage_dir(out, "--out")
        try:
            with Progress(len(PARTS) + 1, "report", enabled=progress) as bar:  # the parts and the page
                result = _build(out, quick, bar, t0, into=stage, workers=workers)
            swap_in(stage, out, OURS)
        finally:
            discard(stage)  # not swapped in, or (swapped) the old report
    return result


def _cpu_s() -> float:
    """Process seconds of this process and its finished (waited-for) children, user and system."""
    import resource

    return sum(getattr(resource.getrusage(w), f) for w in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)
               for f in ("ru_utime", "ru_stime"))


def _build(out: Path, quick: bool, bar, t0: float, into: Path | None = None, workers: int | None = None) -> dict:
    """The parts, built in a process pool and written into ``into`` (default ``out``); the paths returned are those
    under ``out``."""
    into = out if into is None else into

    cpu0 = _cpu_s()
    _preload()
    workers = workers or max(1, min(2, os.cpu_count() or 1))
    done = {}
    if workers == 1:
        for name in parts.ORDER:
            bar.update(0, name)
            done[name] = parts.run_part(name, quick)
            _tell(bar, done[name])
    else:
        # forked workers inherit the imports above (sympy, matplotlib, the report's modules) instead of repeating them
        with ProcessPoolExecutor(workers) as pool:
            futures = {pool.submit(parts.run_part, name, quick): name for name in parts.ORDER}
            for fut in as_completed(futures):
                done[futures[fut]] = r = fut.result()
                _tell(bar, r)
    bar.update(0, "writing the page")
    figs, sections, errors = [], [], []
    extra = {k: v for r in done.values() for k, v in r["extra"].items()}
    for name in parts.PARTS:
        r = done[name]
        figs += r["figures"]
        sections += r["sections"]
        if r["error"]:
            errors.append({"section": name, "error": r["error"]})
    failed = {e["section"]: e["error"] for e in errors}
    sections.insert(0, glance_section(extra.get("headline"), extra.get("summary"), failed))
    (into / FIGURE_DIR).mkdir(exist_ok=True)
    paths = []
    for f in figs:
        write_atomic(into / FIGURE_DIR / f"{f.name}.png", f.png)
        paths.append(str(out / FIGURE_DIR / f"{f.name}.png"))
    elapsed = time.perf_counter() - t0
    notes = [f"The {e['section']} section failed: {escape(e['error'])}" for e in errors]
    page = render("concurrency_model report", lead(), sections, meta=meta(elapsed), notes=notes, front=2,
                  about=about())
    html_path = out / HTML_NAME
    write_atomic(into / HTML_NAME, page.encode("utf-8"))
    write_atomic(into / MARKER, json.dumps({"written_by": "concurrency-model report", "html": HTML_NAME,
                                            "figures": [Path(p).name for p in paths]}).encode())
    bar.update(1, "done")
    timings = {name: round(done[name]["wall_s"], 2) for name in parts.PARTS}
    cpu = {name: round(done[name]["cpu_s"], 2) for name in parts.PARTS}
    cpu["all"] = round(_cpu_s() - cpu0, 2)
    return {"out": str(out), "html": str(html_path), "figures": paths, "elapsed_s": round(elapsed, 2),
            "timings_s": timings, "cpu_s": cpu, "errors": errors}


def _preload() -> None:
    """Import the heavy modules every part uses before the workers fork, so that each inherits them."""
    import matplotlib.backends.backend_agg  # noqa: F401
    import matplotlib.figure  # noqa: F401

    from ..training import estimate  # noqa: F401
    from ..sweep import sweep  # noqa: F401
    from ..validate import registry  # noqa: F401


def _tell(bar, r: dict) -> None:
    """One line for a finished part (its wall and process seconds, or its error) and the bar one step on."""
    bar.update(1, r["name"])
    state = f"failed ({r['error']})" if r["error"] else f"{r['wall_s']:.1f} s ({r['cpu_s']:.1f} s of CPU)"
    bar.log(f"{bar.done}/{bar.total} {r['name']}: {state}")
