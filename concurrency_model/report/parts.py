"""The report's parts, each computed whole (its data, its figures rendered to PNG, its HTML sections) by one call
of :func:`run_part`, so that a process pool can build them side by side (:func:`concurrency_model.report.build_report`).

A part returns plain, picklable values: its :class:`~.html.Section` list, its :class:`~.html.Figure` list, the
process time and wall time it took, and what the "At a glance" section needs from it (the 3D sweep's headline,
the validation's per-dataset summary), so the sweep and the validation are computed once for both.

:data:`PARTS` lists them in the order the page shows them after "At a glance"; :data:`ORDER` is the order they are
started in, the longest first, so that two workers finish together.
"""
from __future__ import annotations

import time

from . import glance, sweep3d
from .accuracy import error_table, validation_rows
from .convergence import convergence_section
from .examples import examples_section
from .finetune import finetune_section
from .sections import (cnn_parallel_section, comm_section, distribution_section, dp_section, failed_section,
                       pipeline_section, ranking_section, roofline_section, sweep_section, validation_section,
                       zoo_sections)
from .serving import inference_section


def _sweep(figs: list, quick: bool) -> tuple[list, dict]:
    """The 3D sweep section and the headline: the sweep, the best estimate and the runner-up computed once."""
    res = sweep3d.sweep_result()
    ru = res.runner_up()
    best = ru["estimates"][0] if ru else sweep3d.best_estimate(res)
    sections = sweep_section(figs, res, best, ru)
    head = glance.headline(res, best, ru, sweep3d.PARTS, best.scenario.cluster.device.board_power_w,
                           seq_len=sweep3d.SEQ_LEN, gpus=sweep3d.GPUS)
    return sections, {"headline": head}


def _validation(figs: list, quick: bool) -> tuple[list, dict]:
    """The validation section and the glance's summary, from one run of the registry."""
    rows = validation_rows(quick)
    table = error_table(rows)  # the last reader of the registry's notes in ``rows.attrs``
    # pandas deep-copies a frame's attrs into every frame derived from it (pandas 3.1 pandas/core/generic.py,
    # NDFrame.__finalize__), each filter of the figures below: 1.2 s of the 8.6 s of this section, measured here
    rows.attrs = {}
    summary = glance.validation_summary(table, rows)
    return validation_section(figs, rows, table, summary, quick), {"summary": summary}


def _plain(builder):
    def run(figs: list, quick: bool) -> tuple[list, dict]:
        return builder(figs), {}
    return run


# name -> (title, builder(figs, quick) -> (sections, extra)), in the page's order
PARTS = {
    "examples": ("Try it: the example scenarios", _plain(examples_section)),
    "zoo": ("Work, depth and average parallelism of the model zoo", _plain(zoo_sections)),
    "roofline": ("The zoo's layers on a roofline", _plain(roofline_section)),
    "collectives": ("Collective algorithms: crossovers and measurements", _plain(comm_section)),
    "data parallel": ("Data-parallel scaling against measurements", _plain(dp_section)),
    "cnn parallel": ("Model parallelism of CNNs: channels, rows and the one weird trick", _plain(cnn_parallel_section)),
    "pipeline": ("Pipeline schedules", _plain(pipeline_section)),
    "distribution": ("Training distribution: synchronisation and consistency", _plain(distribution_section)),
    "3d sweep": ("3D parallelism of GPT-3 175B", _sweep),
    "time to train": ("Time to train: batch against utilisation", _plain(convergence_section)),
    "fine-tuning": ("Fine-tuning: full, LoRA and QLoRA", _plain(finetune_section)),
    "inference": ("Inference: latency, batching and quantized weights", _plain(inference_section)),
    "validation": ("Predicted against measured", _validation),
    "ranking": ("Choosing right: rank order, A/B pairs and what fits",
                lambda figs, quick: (ranking_section(figs, quick), {})),
}
# started longest first (per-part process seconds of benchmarks/report_speed.py)
# (time to train: about 6 s before its fits were cached, about 1 s after)
ORDER = ("validation", "3d sweep", "ranking", "inference", "data parallel", "examples", "collectives", "roofline",
         "distribution", "fine-tuning", "cnn parallel", "zoo", "time to train", "pipeline")


def run_part(name: str, quick: bool = True) -> dict:
    """Build one part: ``{"name", "sections", "figures", "extra", "error", "cpu_s", "wall_s"}``. A part that raises
    gives one section saying what failed (``error``: the exception in one line) instead of its figures.

    >>> r = run_part("pipeline")
    >>> r["error"], [s.anchor for s in r["sections"]], len(r["figures"]), r["cpu_s"] > 0
    (None, ['pipeline'], 1, True)
    """
    title, build = PARTS[name]
    t, c = time.perf_counter(), time.process_time()
    figs: list = []
    try:
        sections, extra = build(figs, quick)
        error = None
    except Exception as e:  # noqa: BLE001 -- a failed part must not lose the rest of the report
        sections, extra, error = [failed_section(name, title, e)], {}, f"{type(e).__name__}: {e}"
        figs = []
    return {"name": name, "sections": sections, "figures": figs, "extra": extra, "error": error,
            "cpu_s": time.process_time() - c, "wall_s": time.perf_counter() - t}
