"""The HTML report: the toolkit's main job (``concurrency-model report [--out DIR]``).

:func:`build_report` computes every figure from the embedded default data with the toolkit's own API and
writes ``DIR/report.html`` (self-contained: the figures are embedded as PNG data URIs) and the same
figures as ``DIR/figures/*.png``. Figure functions live in small modules by topic (:mod:`.zoo`,
:mod:`.comm`, :mod:`.parallel`, :mod:`.minibatch`, :mod:`.sweep3d`, :mod:`.inference`, :mod:`.finetune`,
:mod:`.accuracy`); each takes ``ax=None`` and returns the Axes (:mod:`.finetune`'s plot its two), so they also work
in a notebook. The last section (:mod:`.examples`) lists the shipped example scenarios with their commands.
"""
from __future__ import annotations

import json
import os
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path

from ..calibrate.files import discard, stage_dir, swap_in

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


def build_report(out_dir="reports", force: bool = False, progress: bool = True, quick: bool = True) -> dict:
    """Compute every figure and write ``out_dir/report.html`` and ``out_dir/figures/*.png``.

    Returns ``{"out", "html", "figures", "elapsed_s", "timings_s", "errors"}``: the directory, the page, the
    PNG paths, the wall time in all and per step, and the sections that failed (each shown on the page
    with its error instead of its figures; empty when all went well). ``progress`` draws a bar on stderr;
    ``quick`` is the validation's quick mode. Heavy parts (the validation, the sweep, the scaling
    estimates) run in two worker processes while the figures are drawn.
    """
    from ..progress import Progress

    t0 = time.perf_counter()
    out = Path(out_dir)
    prepare_out(out, force)
    with report_lock(out):  # one report at a time into a directory
        # built beside the old one and swapped in with one rename: a report stopped half-way leaves the old whole
        stage = stage_dir(out, "--out")
        try:
            with Progress(13, "report", enabled=progress) as bar:  # 12 sections and the page
                result = _build(out, quick, bar, t0, into=stage)
            swap_in(stage, out, OURS)
        finally:
            discard(stage)  # not swapped in, or (swapped) the old report
    return result


def _build(out: Path, quick: bool, bar, t0: float, into: Path | None = None) -> dict:
    """The sections, written into ``into`` (default ``out``); the paths returned are those under ``out``."""
    into = out if into is None else into
    from . import accuracy, parallel, sweep3d
    from .html import render, write_atomic
    from .sections import (cnn_parallel_section, comm_section, distribution_section, dp_section, escape,
                           failed_section, lead, meta, pipeline_section, roofline_section, sweep_section,
                           validation_section, zoo_sections)
    from .finetune import finetune_section
    from .serving import inference_section
    from .examples import examples_section

    figs, sections, errors, timings = [], [], [], {}

    def run(name: str, title: str, build, *args) -> None:
        """One step: its sections, or one section saying what failed."""
        bar.update(0, name)
        t = time.perf_counter()
        try:
            made = build(figs, *args)
        except Exception as e:  # noqa: BLE001 -- a failed figure must not lose the rest of the report
            errors.append({"section": name, "error": f"{type(e).__name__}: {e}"})
            made = [failed_section(name, title, e)]
        sections.extend(made)
        timings[name] = round(time.perf_counter() - t, 2)
        bar.update(1, name)

    workers = max(1, min(2, os.cpu_count() or 1))
    with ProcessPoolExecutor(workers) as pool, ThreadPoolExecutor(1) as threads:
        pool.submit(int, 0).result()  # start the workers now, before any thread exists
        # the slow parts run in the workers (the validation may start its own pool there: no threads to fork)
        fut_val = pool.submit(accuracy.validation_rows, quick)
        fut_sweep = pool.submit(sweep3d.sweep_result)
        fut_dp = threads.submit(parallel.dp_scaling_frame, mapper=pool.map)
        run("zoo", "Work, depth and average parallelism of the model zoo", zoo_sections)
        run("roofline", "The zoo's layers on a roofline", roofline_section)
        run("collectives", "Collective algorithms: crossovers and measurements", comm_section)
        run("data parallel", "Data-parallel scaling against measurements", dp_section, fut_dp)
        run("cnn parallel", "Model parallelism of CNNs: channels, rows and the one weird trick", cnn_parallel_section)
        run("pipeline", "Pipeline schedules", pipeline_section)
        run("distribution", "Training distribution: synchronisation and consistency", distribution_section)
        run("3d sweep", "3D parallelism of GPT-3 175B", sweep_section, fut_sweep)
        run("fine-tuning", "Fine-tuning: full, LoRA and QLoRA", finetune_section)
        run("inference", "Inference: latency, batching and quantized weights", inference_section)
        run("validation", "Predicted against measured", validation_section, fut_val, quick)
        run("examples", "Try it: the example scenarios", examples_section)

    bar.update(0, "writing the page")
    (into / FIGURE_DIR).mkdir(exist_ok=True)
    paths = []
    for f in figs:
        write_atomic(into / FIGURE_DIR / f"{f.name}.png", f.png)
        paths.append(str(out / FIGURE_DIR / f"{f.name}.png"))
    elapsed = time.perf_counter() - t0
    notes = [f"The {e['section']} section failed: {escape(e['error'])}" for e in errors]
    page = render("concurrency_model report", lead(), sections, meta=meta(elapsed), notes=notes)
    html_path = out / HTML_NAME
    write_atomic(into / HTML_NAME, page.encode("utf-8"))
    write_atomic(into / MARKER, json.dumps({"written_by": "concurrency-model report", "html": HTML_NAME,
                                            "figures": [Path(p).name for p in paths]}).encode())
    bar.update(1, "done")
    return {"out": str(out), "html": str(html_path), "figures": paths, "elapsed_s": round(elapsed, 2),
            "timings_s": timings, "errors": errors}
