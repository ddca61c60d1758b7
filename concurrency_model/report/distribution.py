"""Training distribution (the paper's §7): synchronisation schemes and consistency models in ``estimate``.

One workload, VGG-16 (138 M parameters: a gradient of 277 MB in fp16; momentum SGD, 64 images per GPU) on
``dgx1-v100`` nodes (8 V100 on NVLink 2, 4 x 100 Gb/s EDR InfiniBand), data parallel: the step time of each
``training.sync`` / ``compression`` scheme as the workers grow (:func:`sync_frame`), and of each ``training.consistency`` as the replicas'
compute time spreads (:func:`consistency_frame`), and a hyperparameter search whose trials are such trainings
(§7.5, :func:`search_frame`). The paper names these schemes but gives no cost
formulas: every time is derived in the alpha-beta model (:mod:`concurrency_model.parallel.distribution`,
:mod:`~concurrency_model.parallel.consistency`, :mod:`~concurrency_model.parallel.compression`), not measured.
"""
from __future__ import annotations

import pandas as pd

from ..parallel.search import search_seconds
from ..training.estimate import estimate
from ._plot import group_lines, legend_outside, new_axes

BASE = {"model": "vgg16", "cluster": "dgx1-v100", "parallel": {"microbatch_size": 64},
        "training": {"dtype": "fp16", "optimizer": "momentum", "overlap": False}}
SCHEMES = {"allreduce": {}, "allreduce, 1-bit SGD": {"compression": "1bit"},
           "threshold sparsification (Strom), allgathered": {"compression": "threshold"},
           "sufficient factors (fully connected) + allreduce": {"compression": "sfb"},
           "parameter servers (one shard per worker)": {"sync": "parameter_server"},
           "gossip, ring": {"sync": "gossip"}, "gossip, exponential graph": {"sync": "gossip",
                                                                            "gossip_topology": "exponential"}}
CONSISTENCY = {"synchronous": {}, "SSP, staleness 3": {"consistency": "ssp", "staleness": 3},
               "local SGD, 4 steps": {"consistency": "local_sgd", "local_steps": 4},
               "asynchronous (parameter servers)": {"consistency": "asynchronous", "sync": "parameter_server"}}
WORKERS = (8, 16, 32, 64, 128, 256)
SPREADS = (0.0, 0.05, 0.1, 0.2, 0.3)
SEARCHES = {"random search": ("random", {}), "SMBO, 8 proposals a round": ("smbo", {"q": 8}),
            "evolution, population 64": ("evolution", {"population": 64})}
TRIAL_GPUS, TRIAL_STEPS, TRIALS = 8, 20_000, 512  # one trial: VGG-16 on one DGX-1 node for 20,000 steps
SEARCH_GPUS = (8, 32, 128, 512, 2048, 4096)


def _step(data: int, **training) -> dict:

    e = estimate({**BASE, "parallel": {**BASE["parallel"], "data": data, "global_batch": 64 * data},
                  "training": {**BASE["training"], **training}})
    b = e.breakdown
    return {"step_s": e.step_time_s, "sync_s": b["data_parallel_exposed_s"], "straggler_s": b["straggler_wait_s"]}


def sync_frame(workers=WORKERS) -> pd.DataFrame:
    """``scheme, workers, step_s, sync_s`` (the exposed synchronisation; no overlap, as the paper's
    synchronous SGD) for each scheme of :data:`SCHEMES`.

    >>> f = sync_frame((8, 64))
    >>> bool((f.groupby("scheme")["step_s"].count() == 2).all())
    True
    """
    return pd.DataFrame([{"scheme": name, "workers": P, **_step(P, **tr)}
                         for name, tr in SCHEMES.items() for P in workers])


def consistency_frame(workers: int = 64, spreads=SPREADS) -> pd.DataFrame:
    """``mode, straggler_cv, step_s, straggler_s, sync_s`` on ``workers`` replicas for each mode of
    :data:`CONSISTENCY` (the gradient all-reduce overlapped with the backward pass, as PyTorch DDP does)."""
    return pd.DataFrame([{"mode": name, "straggler_cv": cv, **_step(workers, overlap=True, straggler_cv=cv, **tr)}
                         for name, tr in CONSISTENCY.items() for cv in spreads])


def search_frame(gpus=SEARCH_GPUS) -> pd.DataFrame:
    """``search, gpus, days``: :data:`TRIALS` trials of VGG-16 for :data:`TRIAL_STEPS` steps on one node of
    :data:`TRIAL_GPUS` GPUs (the step from ``estimate``), searched as :data:`SEARCHES` on ``gpus`` GPUs
    (:func:`concurrency_model.parallel.search.search_seconds`, one trial per node).

    >>> f = search_frame((8, 512))
    >>> sorted(f["search"].unique()) == sorted(SEARCHES), bool((f["days"] > 0).all())
    (True, True)
    """

    trial_s = TRIAL_STEPS * _step(TRIAL_GPUS, overlap=True)["step_s"]
    return pd.DataFrame([{"search": name, "gpus": g,
                          "days": search_seconds(strategy, trial_s, TRIALS, g // TRIAL_GPUS, **kw) / 86400}
                         for name, (strategy, kw) in SEARCHES.items() for g in gpus])


def search_strategies(frame: pd.DataFrame | None = None, ax=None):
    """Days of a search against the GPUs it has (log-log), one line per strategy."""
    frame = search_frame() if frame is None else frame
    ax = new_axes(ax)
    for (name, g), style in zip(frame.groupby("search", sort=False), ("-o", "--s", ":^")):
        ax.plot(g["gpus"], g["days"], style, label=name)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set(xlabel=f"GPUs ({TRIAL_GPUS} per trial)", ylabel="days",
           title=f"search: {TRIALS} trials of VGG-16, {TRIAL_STEPS:,} steps each")
    ax.grid(alpha=0.3)
    legend_outside(ax, "right")
    return ax


def sync_schemes(frame: pd.DataFrame | None = None, ax=None):
    """Step time against the number of workers (log x), one line per synchronisation scheme."""
    frame = sync_frame() if frame is None else frame
    ax = new_axes(ax)
    group_lines(ax, frame, "scheme", "workers", "step_s", 1e3)
    ax.set_xscale("log", base=2)
    ax.set(xlabel="workers (V100, 8 per node)", ylabel="step time (ms)",
           title="VGG-16, 64 images per GPU: synchronisation schemes")
    ax.grid(alpha=0.3)
    legend_outside(ax, "right")
    return ax


def consistency_models(frame: pd.DataFrame | None = None, ax=None):
    """Step time against the straggler spread, one line per consistency model."""
    frame = consistency_frame() if frame is None else frame
    ax = new_axes(ax)
    group_lines(ax, frame, "mode", "straggler_cv", "step_s", 1e3)
    ax.set(xlabel="straggler_cv (std / mean of a replica's compute time)", ylabel="step time (ms)",
           title="64 workers: consistency models under stragglers")
    ax.grid(alpha=0.3)
    legend_outside(ax, "right")
    return ax
