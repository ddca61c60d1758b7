"""A whole training run: steps, wall-clock days, GPU-hours, cost and energy from one step's estimate.

A scenario's ``run`` object gives the work as ``tokens`` (transformers: one step consumes
``global_batch x seq_len`` tokens) or ``samples`` (optionally times ``epochs``), and optionally
``price_per_gpu_hour`` (no default: prices differ too much to bake one in) in ``currency`` (a three-letter ISO 4217
code, default ``USD``: the label of the cost, no exchange rate) and ``board_power_w`` (default: the device preset's
board power, whose source is in the preset file).

* steps = ceil(tokens / (global_batch x seq_len)) or ceil(samples x epochs / global_batch);
* run seconds = steps x step time (every step of a run has the same shape; gradient accumulation is the
  ``m`` microbatches inside one step's closed form, not a loop);
* GPU-hours = GPUs x run seconds / 3600; cost = GPU-hours x price;
* energy = GPUs x board power x utilisation x run seconds, with utilisation the busy share of the step
  (:func:`busy_share`: the step less its waits, the pipeline bubble, the host's and the stragglers', over the
  step, at most 1) [D]: a board at its power limit while it runs kernels, its computation's or its
  communication's (NCCL "implements each collective in a single kernel handling both communication and
  computation": NCCL user guide, "Overview of NCCL", docs.nvidia.com/deeplearning/nccl/user-guide/docs/overview.html),
  and drawing nothing extra while it waits, a first-order model
  (Patterson et al. 2021, "Carbon emissions and large neural network training", use measured or TDP power times
  time in the same way). Exposed communication therefore costs energy as it costs GPU-hours; a board's idle draw
  in the waits is left out (no sourced figure at hand).

Failures and checkpoints (optional: ``gpu_mtbf_hours``, the mean time between failures of one GPU and its
share of the node; ``checkpoint_s``, the seconds training stalls to write a checkpoint; ``restart_s``, the
seconds to restart and reload after a failure, default 0; ``checkpoint_interval_s``, default Young's
optimum). The job fails when any of its GPUs does: its MTBF is ``M = gpu_mtbf / gpus`` (independent
failures). Young's first-order model (J. W. Young, "A first order approximation to the optimum
checkpoint interval", CACM 17(9), 1974; Daly, FGCS 22(3), 2006, for the higher orders): checkpoints every
``tau = sqrt(2 delta M)`` seconds of work, each costing ``delta``; a failure loses on average half an
interval (``(tau + delta) / 2``) plus the restart ``R``. The wall time of ``T`` seconds of work is

    ``W = T (1 + delta / tau) / (1 - (R + (tau + delta) / 2) / M)``

(``ValueError`` naming ``run.gpu_mtbf_hours`` when failures come faster than the run can make progress;
infinite days for such rows of a sweep),
``expected_failures = W / M``; GPU-hours, cost and energy count the wall time. Without ``gpu_mtbf_hours``
and ``checkpoint_s`` a run neither fails nor checkpoints.

All functions take numbers or numpy arrays (a sweep's rows).
"""
from __future__ import annotations

import numpy as np

from ..scenario import Run, check_run


# the breakdown's parts in which a board waits rather than runs a kernel (:func:`busy_share`)
WAIT_PARTS = ("bubble_s", "host_wait_s", "straggler_wait_s")


def busy_share(step_time_s, waits_s):
    """The share of a step a board spends in kernels: ``(step - waits) / step``, clipped to [0, 1] (module doc).

    ``waits_s``: the seconds of the step's :data:`WAIT_PARTS` (one number or array, or several summed by the
    caller). A 20 s step with 0.8 s of bubble and 0.2 s of host wait is busy 95% of the time:

    >>> round(float(busy_share(20.0, 0.8 + 0.2)), 3)
    0.95
    """
    step = np.asarray(step_time_s, dtype=float)
    return np.clip((step - np.asarray(waits_s, dtype=float)) / step, 0.0, 1.0)


def with_failures(run: Run | dict, work_s, gpus) -> dict:
    """``wall_s, expected_failures, checkpoint_interval_s`` of ``work_s`` seconds of training on ``gpus``
    GPUs under the run's failures and checkpoints (module doc; Young 1974).

    16,384 GPUs of 50,000 h each: the job fails every 10,986 s (3.05 h); a 60 s checkpoint every
    sqrt(2 x 60 x 10,986) = 1,148 s; 30 days of work take 30 x (1 + 60/1,148) / (1 - (1,148 + 60)/2/10,986)
    = 33.4 days, with 263 failures:

    >>> r = with_failures(Run(tokens=1e12, gpu_mtbf_hours=50000, checkpoint_s=60), 30 * 86400, 16384)
    >>> round(r["checkpoint_interval_s"]), round(float(r["expected_failures"])), round(float(r["wall_s"]) / 86400, 2)
    (1148, 263, 33.4)
    """
    run = run if isinstance(run, Run) else Run(**run)  # a plain dict of the fields (the Python API)
    work = np.asarray(work_s, dtype=float)
    if run.gpu_mtbf_hours is None:
        return {"wall_s": work, "expected_failures": np.zeros_like(work), "checkpoint_interval_s": None}
    M = run.gpu_mtbf_hours * 3600 / np.asarray(gpus, dtype=float)
    delta, R = run.checkpoint_s, run.restart_s if run.restart_s is not None else 0.0
    tau = run.checkpoint_interval_s if run.checkpoint_interval_s is not None else np.sqrt(2 * delta * M)
    lost = 1 - (R + (tau + delta) / 2) / M
    if np.ndim(lost) == 0 and lost <= 0:  # name the field whose seconds eat the time between failures
        R_, half, M_ = float(R), float(tau + delta) / 2, float(M)
        culprit = "run.gpu_mtbf_hours"  # failures too frequent, unless one given field alone outlasts them
        if R_ >= M_:
            culprit = "run.restart_s"
        elif run.checkpoint_interval_s is not None and float(tau) / 2 >= M_:
            culprit = "run.checkpoint_interval_s"
        raise ValueError(f"{culprit}: the job fails every {float(M) / 3600:.3g} h, and restarting ({R_:.3g} s) and "
                         f"losing half a checkpoint interval ({half:.3g} s) take longer; no progress")
    # a sweep's rows that cannot progress take forever (and rank last) instead of stopping the sweep
    wall = np.where(lost > 0, work * (1 + delta / tau) / np.where(lost > 0, lost, 1.0), np.inf)
    return {"wall_s": wall, "expected_failures": wall / M, "checkpoint_interval_s": tau}


def run_cost(run: Run | dict, step_time_s, global_batch, gpus, utilisation, board_power_w: float,
             seq_len: int | None = None) -> dict:
    """``run_steps, run_days, gpu_hours, cost`` (None without a price) and ``energy_kwh`` of a run; with
    failures also ``failure_free_days, expected_failures, checkpoint_interval_s``.

    >>> r = run_cost({"tokens": 300e9, "price_per_gpu_hour": 2.0}, 28.4, 1536, 1024, 0.9, 400, seq_len=2048)
    >>> r["run_steps"], round(r["run_days"], 2), round(r["gpu_hours"]), round(r["cost"])   # 300e9 / (1536 x 2048) steps
    (95368, 31.35, 770404, 1540808)
    >>> round(r["energy_kwh"])   # 770,404 GPU-hours x 400 W x 0.9
    277345
    """
    run = check_run(run)
    if run.tokens is not None:
        if not seq_len:
            raise ValueError("run.tokens: the model has no sequence length; give samples instead")
        steps = np.ceil(run.tokens / (np.asarray(global_batch, dtype=float) * seq_len))
    else:
        epochs = run.epochs if run.epochs is not None else 1
        steps = np.ceil(run.samples * epochs / np.asarray(global_batch, dtype=float))
    work = steps * np.asarray(step_time_s, dtype=float)
    fail = with_failures(run, work, gpus)
    seconds = fail["wall_s"]
    gpu_hours = np.asarray(gpus, dtype=float) * seconds / 3600
    power = run.board_power_w if run.board_power_w is not None else board_power_w
    if not power:
        raise ValueError("run.board_power_w: the device preset has no board power; give it here")
    u = np.clip(np.asarray(utilisation, dtype=float), 0.0, 1.0)
    out = {"run_steps": steps, "run_days": seconds / 86400, "gpu_hours": gpu_hours,
           "cost": gpu_hours * run.price_per_gpu_hour if run.price_per_gpu_hour is not None else None,
           "energy_kwh": gpu_hours * power * u / 1000}
    if run.gpu_mtbf_hours is not None:
        out.update(failure_free_days=work / 86400, expected_failures=fail["expected_failures"],
                   checkpoint_interval_s=fail["checkpoint_interval_s"])
    return {k: (v if v is None or np.ndim(v) else (int(v) if k == "run_steps" else float(v))) for k, v in out.items()}
