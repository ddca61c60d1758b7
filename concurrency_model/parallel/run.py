"""A whole training run: steps, wall-clock days, GPU-hours, cost and energy from one step's estimate.

A scenario's ``run`` object gives the work as ``tokens`` (transformers: one step consumes
``global_batch x seq_len`` tokens) or ``samples`` (optionally times ``epochs``), and optionally
``price_per_gpu_hour`` (no default: prices differ too much to bake one in) and ``board_power_w`` (default:
the device preset's board power, whose source is in the preset file).

* steps = ceil(tokens / (global_batch x seq_len)) or ceil(samples x epochs / global_batch);
* run seconds = steps x step time (every step of a run has the same shape; gradient accumulation is the
  ``m`` microbatches inside one step's closed form, not a loop);
* GPU-hours = GPUs x run seconds / 3600; cost = GPU-hours x price;
* energy = GPUs x board power x utilisation x run seconds, with utilisation the busy share of the step
  (compute seconds / step seconds, at most 1) [D]: a board at its power limit while it computes and
  drawing nothing extra while it waits, a first-order model (Patterson et al. 2021, "Carbon emissions and
  large neural network training", use measured or TDP power times time in the same way).

All functions take numbers or numpy arrays (a sweep's rows).
"""
from __future__ import annotations

import numbers

import numpy as np

FIELDS = ("tokens", "samples", "epochs", "price_per_gpu_hour", "board_power_w")


def check_run(run: dict) -> dict:
    """The ``run`` object with its numbers checked (``ValueError`` naming ``run.FIELD``)."""
    if not isinstance(run, dict):
        raise ValueError("run: expected an object with tokens or samples")
    unknown = sorted(set(run) - set(FIELDS))
    if unknown:
        raise ValueError(f"run.{unknown[0]}: unknown field; allowed: {', '.join(FIELDS)}")
    if ("tokens" in run) == ("samples" in run):
        raise ValueError("run: give exactly one of tokens or samples")
    for k, v in run.items():
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not v > 0:
            raise ValueError(f"run.{k}: must be a positive number, got {v!r}")
    if "epochs" in run and "samples" not in run:
        raise ValueError("run.epochs: goes with samples, not tokens")
    return dict(run)


def run_cost(run: dict, step_time_s, global_batch, gpus, utilisation, board_power_w: float,
             seq_len: int | None = None) -> dict:
    """``run_steps, run_days, gpu_hours, cost`` (None without a price) and ``energy_kwh`` of a run.

    >>> r = run_cost({"tokens": 300e9, "price_per_gpu_hour": 2.0}, 28.4, 1536, 1024, 0.9, 400, seq_len=2048)
    >>> r["run_steps"], round(r["run_days"], 2), round(r["gpu_hours"]), round(r["cost"])   # 300e9 / (1536 x 2048) steps
    (95368, 31.35, 770404, 1540808)
    >>> round(r["energy_kwh"])   # 770,404 GPU-hours x 400 W x 0.9
    277345
    """
    run = check_run(run)
    if "tokens" in run:
        if not seq_len:
            raise ValueError("run.tokens: the model has no sequence length; give samples instead")
        steps = np.ceil(run["tokens"] / (np.asarray(global_batch, dtype=float) * seq_len))
    else:
        steps = np.ceil(run["samples"] * run.get("epochs", 1) / np.asarray(global_batch, dtype=float))
    seconds = steps * np.asarray(step_time_s, dtype=float)
    gpu_hours = np.asarray(gpus, dtype=float) * seconds / 3600
    power = run.get("board_power_w", board_power_w)
    if not power:
        raise ValueError("run.board_power_w: the device preset has no board power; give it here")
    u = np.clip(np.asarray(utilisation, dtype=float), 0.0, 1.0)
    out = {"run_steps": steps, "run_days": seconds / 86400, "gpu_hours": gpu_hours,
           "cost": gpu_hours * run["price_per_gpu_hour"] if "price_per_gpu_hour" in run else None,
           "energy_kwh": gpu_hours * power * u / 1000}
    return {k: (v if v is None or np.ndim(v) else (int(v) if k == "run_steps" else float(v))) for k, v in out.items()}
