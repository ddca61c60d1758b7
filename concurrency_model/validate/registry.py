"""Every dataset in ``data/`` through its predictor: predicted vs measured per row, APE per dataset.

Datasets (:func:`names`): ``deepbench-gemm``, ``deepbench-conv``, ``deepbench-rnn`` (kernel times,
:mod:`.kernels`), ``deepbench-inference`` (DeepBench's int8 GEMM / convolution and fp32 RNN inference
kernels, forward), ``deepbench-sparse`` (pruned GEMMs and the same products dense, :mod:`.sparse`);
``deepbench-allreduce``, ``nccl-tests-allreduce``, ``vtrain-allreduce`` (all-reduce times, :mod:`.collectives`, sizes
>= 64 KiB; vTrain's A100 tables start at 1 MiB), ``nccl-tests-allgather`` (all-gather times on two A3-Mega nodes);
``vtrain-single``, ``vtrain-multi``, ``megatron-2020``, ``megatron-2021``, ``narayanan2021-table2``
(training iterations, :mod:`.training`); ``torchtitan-llama3``, ``torchtitan-llama3-memory``, ``llmfoundry-mpt``,
``megatron-bridge`` (its dense Llama rows), ``megatron-bridge-moe`` (its mixtures of experts: DeepSeek-V3, Qwen3 MoE,
GPT-OSS, reported apart), ``nemo-2407-longseq``, ``bigscience-tr11`` (BigScience's DeepSpeed layout search of 2022;
``bigscience-tr11-memory`` its peaks) (tokens/s per GPU of training stacks, and torchtitan's and BigScience's peak
memory, :mod:`.modern`); ``trtllm-hopper`` (TensorRT-LLM's output tokens/s at full load on H100 and H200,
:mod:`.trtllm`);
``tf-cnn-benchmarks``, ``torchgpipe``, ``horovod``,
``dle-resnet50``, ``dle-resnext101``, ``dle-se-resnext101``, ``dle-bert`` (data-parallel images/s and
sequences/s, pipeline speedups, 512-GPU scaling efficiency, :mod:`.scaling`); ``fastertransformer-13b``
(inference latencies, :mod:`.inference`); and one per run of the toolkit's own calibration under
``data/measured/`` (``measured-compute-HOST-DATE``, ``measured-network-HOST-BACKEND-DATE``,
``measured-kernels-DEVICE-DATE``: DeepBench's shapes timed by ``calibrate kernels``, ``measured-steps-DEVICE-DATE``:
GPT steps timed by ``calibrate steps``; :mod:`.measured`).

Modes (the ``mode`` column; DESIGN.md, "Accuracy methodology"). Each dataset has one main mode, the
most honest figure available at the speed asked for:

* ``datasheet``: kernel constants fitted on the *other* devices only (leave-one-device-out, on all three
  DeepBench kernel files), so nothing is fitted on the device predicted. About a minute: ``quick=False``.
* ``preset``: the device and cluster presets with the default efficiency constants, which are round
  values, not fitted on these data; the training sets have no constant fitted on them at all.
* ``in-sample``: constants fitted on the rows predicted (the default RNN constants were fitted on all
  DeepBench RNN rows, so ``deepbench-rnn`` in quick mode is in-sample; a calibration profile on its own
  measurements).
* ``held-out``: constants fitted on every other row of the same device or system (alpha and beta per
  system and message size order; kernels: :func:`.kernels.halves`, what ``kernel_accuracy.py`` calls
  *calibrated*), predicted on the rest.

Main mode per dataset: kernels ``datasheet`` (``quick``: ``preset``, RNN ``in-sample``),
``deepbench-allreduce`` ``held-out`` (no preset for those machines), ``nccl-tests-allreduce``, ``vtrain-allreduce`` and
``nccl-tests-allgather`` ``preset``,
training sets ``preset``, measured compute and network runs ``held-out``, measured kernels as DeepBench's
(``datasheet``, quick ``preset``), measured steps ``preset``. ``all_modes=True`` adds the others where they
exist (``held-out`` kernels, nccl-tests and ``in-sample`` compute profiles; ``datasheet`` only with
``quick=False``), reported in ``other_modes`` by :func:`summarize`.

``quick=True`` (the default, about 20-40 s on 2 cores) evaluates every ``QUICK_EVERY``-th row of the
slow training sets (the estimate takes 0.1-3.5 s a row) and skips the leave-one-device-out kernel fits;
``quick=False`` evaluates every row. APE is a fraction: ``|predicted - measured| / measured`` (0.12 = 12%).

>>> df = validate("deepbench-rnn")
>>> s = summarize(df)[0]
>>> s["name"], s["mode"], s["rows"] == s["rows_total"] == 740, 0 < s["median_ape"] < 1
('deepbench-rnn', 'in-sample', True, True)
"""
from __future__ import annotations

import os
import sys
from concurrent.futures import ProcessPoolExecutor, as_completed

import numpy as np
import pandas as pd

from .. import datasets, uncertainty
from ..progress import Progress
from . import kernels, modern
from .adapters import (COLLECTIVES, COLUMNS, FILES, INFERENCE, KERNEL_INFERENCE, KERNEL_SPARSE, KERNELS, MIN_BYTES,
                       MODERN, QUICK_EVERY, SCALING, TRAINING, TRTLLM, collective_frame, collective_rows,
                       inference_frame, kernel_band, kernel_datasheet, kernel_frame, kernel_held_out, kernel_inference,
                       kernel_rows, kernel_sparse, measured_compute, measured_network, modern_frame, modern_rows,
                       no_band_reason, scaling_frame, scaling_rows, training_chunk, training_mode, training_rows,
                       trtllm_frame, trtllm_rows)
from .measured import run_profile



def _measured() -> dict:
    """Dataset name -> folder of the toolkit's own runs; a ``steps-*`` run that measured memory is a second
    dataset, ``measured-steps-...-memory`` (bytes, not seconds: its own error figures and plot)."""
    out = {}
    for p in datasets.measured_runs():
        out[f"measured-{p.name}"] = p
        if p.name.startswith("steps-"):
            from .measured import has_memory
            if has_memory(p):
                out[f"measured-{p.name}-memory"] = p
    return out


def names() -> list[str]:
    """Names of the datasets :func:`validate` knows, in report order.

    >>> names()[:3]
    ['deepbench-gemm', 'deepbench-conv', 'deepbench-rnn']
    """
    return [*KERNELS, *KERNEL_INFERENCE, *KERNEL_SPARSE, *COLLECTIVES, *TRAINING, *MODERN, *SCALING, *INFERENCE,
            *TRTLLM, *_measured()]


# --- running ------------------------------------------------------------------------------------------------
def _plan(asked: list[str], quick: bool, all_modes: bool, info: dict) -> list:
    """Jobs ``(names, fn, args)``: every prediction to make, heaviest first; load errors go to ``info``."""
    jobs, measured = [], _measured()

    def fail(name, e):
        info[name]["error"] = " ".join(str(e).split())

    kern = {}
    for name in asked:
        if name in KERNELS:
            try:
                kern[name] = kernel_rows(KERNELS[name])
            except ValueError as e:
                fail(name, e)
    for name, df in kern.items():
        info[name]["rows_total"] = len(df)
    fitted_modes = (["datasheet"] if not quick else []) + (["held-out"] if all_modes else [])
    if kern and fitted_modes:  # the fits use every kernel file that loads (the GEMM constants come first)
        pool = dict(kern)
        for other in set(KERNELS) - set(kern):
            try:
                pool[other] = kernel_rows(KERNELS[other])
            except ValueError:
                pass
        everything = pd.concat(pool.values(), ignore_index=True)
        for preset in everything["preset"].unique():
            if "datasheet" in fitted_modes:
                jobs.append((list(kern), _kernels_job, ("datasheet", everything, preset, list(kern))))
            if "held-out" in fitted_modes:
                mine = everything[everything["preset"] == preset]
                jobs.append((list(kern), _kernels_job, ("held-out", mine, preset, list(kern))))
    for name, df in kern.items():
        if quick or all_modes:
            jobs.append(([name], _kernels_job, ("preset", df, None, [name])))
        info[name]["mode"] = ("in-sample" if name == "deepbench-rnn" else "preset") if quick else "datasheet"
    for name in asked:
        try:
            if name in TRAINING:
                df = training_rows(name)
                info[name].update(rows_total=len(df), mode=training_mode(name))
                every = QUICK_EVERY.get(name, 1) if quick else 1
                if every > 1:
                    df = df.iloc[::every].reset_index(drop=True)
                    info[name]["sampled"] = f"1 row in {every}, in file order (quick)"
                for _, g in df.groupby(["hidden", "layers"], sort=False, dropna=False):  # a model's rows share
                    jobs.extend(([name], training_chunk, (name, g.iloc[i:i + 8]))   # the estimate's caches
                                for i in range(0, len(g), 8))
            elif name in MODERN:
                df = modern_rows(name)  # the rows with the compared figure (not a run that went out of memory)
                compared = "measured_memory_bytes" if MODERN[name][1] == "memory" else "measured_tps"
                df = df[df[compared].notna()].reset_index(drop=True)
                # the set that fitted the GH100's sustained rate is reported held out (its fit rows in-sample)
                fitted = MODERN[name][1] != "memory" and MODERN[name][0] == modern.SUSTAINED_FIT_SET
                info[name].update(rows_total=len(df), mode="held-out" if fitted else "preset")
                every = QUICK_EVERY.get(name, 1) if quick else 1
                if every > 1:
                    df = df.iloc[::every].reset_index(drop=True)
                    info[name]["sampled"] = f"1 row in {every}, in file order (quick)"
                jobs.extend(([name], modern_frame, (name, df.iloc[i:i + 8])) for i in range(0, len(df), 8))
            elif name in SCALING:
                df = scaling_rows(name)
                info[name].update(rows_total=len(df), mode="preset")
                jobs.append(([name], scaling_frame, (name, df)))
            elif name in KERNEL_INFERENCE:
                from .kernels import OPS
                per_op = [kernel_rows(op, "inference") for op in OPS]
                info[name].update(mode="preset", rows_total=sum(len(x) for x in per_op))
                jobs.append(([name], kernel_inference, (per_op,)))
            elif name in KERNEL_SPARSE:
                from . import sparse
                info[name].update(mode="preset", rows_total=2 * len(sparse.rows()))
                jobs.append(([name], kernel_sparse, ()))
            elif name in INFERENCE:
                from . import inference
                info[name].update(rows_total=len(inference.rows()) * len(inference.METRICS), mode="preset")
                jobs.append(([name], inference_frame, ()))
            elif name in TRTLLM:
                df = trtllm_rows()
                info[name].update(rows_total=len(df), mode="preset")
                every = QUICK_EVERY.get(name, 1) if quick else 1
                if every > 1:  # ~2 s a mappable row
                    df = df.iloc[::every].reset_index(drop=True)
                    info[name]["sampled"] = f"1 row in {every}, in file order (quick)"
                jobs.extend(([name], trtllm_frame, (df.iloc[i:i + 8],)) for i in range(0, len(df), 8))
            elif name in COLLECTIVES:
                df = collective_rows(COLLECTIVES[name])
                modes = (["preset", "held-out"] if name == "nccl-tests-allreduce" else ["preset"]
                         if name in ("vtrain-allreduce", "nccl-tests-allgather") else ["held-out"])
                info[name].update(rows_total=len(df), mode=modes[0], sampled=f"sizes >= {MIN_BYTES // 1024} KiB"
                                  + ("; every other size held out" if modes[0] == "held-out" else ""))
                jobs.extend(([name], collective_frame, (name, m, df)) for m in (modes if all_modes else modes[:1]))
            elif name in measured:
                _plan_measured(name, measured[name], quick, all_modes, info, jobs)
        except ValueError as e:
            fail(name, e)
    return sorted(jobs, key=_cost, reverse=True)  # heaviest first, so that the cheap ones fill the gaps


def _plan_measured(name: str, folder, quick: bool, all_modes: bool, info: dict, jobs: list) -> None:
    """Jobs for one folder of the toolkit's own measurements (``compute``, ``network``, ``kernels``,
    ``steps``; :mod:`.measured` for the last two)."""
    kind = folder.name.split("-")[0]
    own = run_profile(folder) is not None  # the run's own device file: predicted on it first
    if kind == "kernels":
        from .measured import kernel_rows, kernels_frame
        main = "calibrated" if own else "preset" if quick else "datasheet"
        others = [m for m in ("calibrated", "preset", "datasheet", "held-out")
                  if m != main and (m != "calibrated" or own) and (m != "datasheet" or not quick)]
        info[name].update(mode=main, rows_total=len(kernel_rows(folder)), file=f"measured/{folder.name}/")
        jobs.extend(([name], kernels_frame, (name, folder, m)) for m in [main] + (others if all_modes else []))
        return
    if kind == "steps":
        from .measured import steps_frame
        what = "memory" if name.endswith("-memory") else "time"
        rows = datasets.load_measured(folder, "gpt_steps.csv")
        main = "calibrated" if own else "preset"
        info[name].update(mode=main, file=f"measured/{folder.name}/gpt_steps.csv",
                          rows_total=int(rows["peak_allocated_bytes"].notna().sum()) if what == "memory" else len(rows))
        jobs.extend(([name], steps_frame, (name, folder, what, m))
                    for m in [main] + (["preset"] if own and all_modes else []))
        return
    info[name].update(mode="held-out", sampled="held-out: every other row per group")
    if kind == "compute":
        jobs.extend(([name], measured_compute, (name, folder, m))
                    for m in (["held-out", "in-sample"] if all_modes else ["held-out"]))
    else:
        jobs.append(([name], measured_network, (name, folder)))
    if kind == "compute":
        from .adapters import measured_gemms
        info[name]["rows_total"] = len(measured_gemms(folder))
    else:
        info[name]["rows_total"] = len(datasets.load_measured(folder))


def _cost(job) -> float:
    """Rough relative cost of a job: a kernel fit ~ 5 s, a training row ~ layers / 30 s, the rest ~ 0."""
    fn, args = job[1], job[2]
    if fn is _kernels_job:
        return 0.0 if args[0] == "preset" else 1e4
    if fn is training_chunk:
        return float(args[1]["layers"].fillna(0).sum())
    if fn is modern_frame:  # ~0.3 s a row on one core (a 405B or 70B row ~1 s)
        return 30.0 * len(args[1])
    if fn is trtllm_frame:  # ~2 s a mappable row (a search over the slots, then the full-load iteration)
        return 200.0 * float((args[0]["unmappable"] == "").sum())
    return 0.0


def _kernels_job(mode: str, df: pd.DataFrame, preset, wanted: list) -> pd.DataFrame:
    if mode == "datasheet":
        p = kernel_datasheet(df, preset)
    elif mode == "held-out":
        p = kernel_held_out(df)
    else:
        p = kernels.predict(df)
        p = kernel_band(p, p)  # leave-one-device-out spreads of the same predictions
    op_names = {op: n for n, op in KERNELS.items()}
    parts = [kernel_frame(op_names[op], mode if not (mode == "preset" and op == "rnn") else "in-sample", g)
             for op, g in p.groupby("op", sort=False) if op_names[op] in wanted]
    return pd.concat(parts, ignore_index=True) if parts else pd.DataFrame(columns=COLUMNS)


def _call(fn, args):
    try:
        return fn(*args), None
    except ValueError as e:
        return None, " ".join(str(e).split())


def validate(name=None, quick: bool = True, progress=None, all_modes: bool = False,
             workers: int | None = None) -> pd.DataFrame:
    """Predicted vs measured, one row per measurement and mode (columns ``COLUMNS``; ``row`` is the line of
    the data file, ``ape`` a fraction, ``status`` ``ok`` or why a training row was not predicted).

    ``name``: one dataset (see :func:`names`), a list of them, or ``None`` for all. ``quick``: sample the
    slow training sets and skip the leave-one-device-out kernel fits (module docstring). ``progress``:
    ``True`` (stderr) or a stream to draw a progress bar on. ``workers``: processes (default: the CPUs,
    at most 8). A dataset that cannot be read (missing column, non-numeric value: the message names the
    file, row and column) is not raised: its error is kept for :func:`summarize` in ``df.attrs``, and
    the other datasets are still validated.
    """
    known = names()
    asked = known if name is None else [name] if isinstance(name, str) else list(name)
    bad = [n for n in asked if n not in known]
    if bad:
        raise ValueError(f"dataset: unknown {bad[0]!r}; allowed: {', '.join(known)}")
    info = {n: {"mode": None, "rows_total": 0, "sampled": "all rows", "error": None,
                "file": FILES.get(n, f"measured/{n[len('measured-'):]}/measurements.csv")} for n in asked}
    stream = sys.stderr if progress is True else progress
    jobs, frames = _plan(asked, quick, all_modes, info), []
    workers = workers or min(8, os.cpu_count() or 1)
    with Progress(len(jobs), "validate", stream, enabled=bool(progress)) as bar:
        def done(names_, out, err):
            for n in names_:
                if err and not info[n]["error"]:
                    info[n]["error"] = err
            if out is not None:
                frames.append(out)
            bar.update(1, note=", ".join(names_))

        if workers > 1 and len(jobs) > 1:
            with ProcessPoolExecutor(workers) as ex:
                futures = {ex.submit(_call, fn, args): names_ for names_, fn, args in jobs}
                for f in as_completed(futures):
                    done(futures[f], *f.result())
        else:
            for names_, fn, args in jobs:
                done(names_, *_call(fn, args))
    df = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)
    order = {n: i for i, n in enumerate(asked)}
    df = df.sort_values(["dataset", "mode", "row"], key=lambda s: s.map(order) if s.name == "dataset" else s,
                        kind="stable").reset_index(drop=True)
    df.attrs["datasets"] = info
    df.attrs["quick"] = quick
    return df


def _ok(g: pd.DataFrame) -> pd.Series:
    return g["status"] == "ok" if "status" in g else pd.Series(True, index=g.index)


def _stats(g: pd.DataFrame) -> dict:
    ape = g["ape"].astype(float)
    keep = _ok(g) & np.isfinite(ape)
    ape = ape[keep]
    if not len(ape):
        return {"rows": 0, "median_ape": None, "mean_ape": None, "max_ape": None, "band_coverage": None,
                "band_rows": 0}
    kept = g[keep]
    coverage = uncertainty.coverage(kept["measured"], kept["p10"], kept["p90"]) if "p10" in g else None
    banded = int(np.isfinite(kept["p10"].astype(float)).sum()) if "p10" in g else 0
    return {"rows": int(len(ape)), "median_ape": float(ape.median()), "mean_ape": float(ape.mean()),
            "max_ape": float(ape.max()), "band_coverage": coverage, "band_rows": banded}


def summarize(df: pd.DataFrame) -> list[dict]:
    """One dict per dataset: ``name, mode, rows, median_ape, mean_ape, max_ape`` (APE as fractions, 0.12 =
    12%, over the rows of the main ``mode`` that have a prediction), ``rows_total`` (measurements of the
    dataset the predictor applies to; ``rows`` is fewer when sampled, held out or not predicted),
    ``not_predicted`` (rows the estimate refused or could not map), ``unit``, ``sampled``, ``file``,
    ``error`` (``None``, or one line naming the file, row and column), ``band_coverage`` (the share of
    measured values inside the prediction's 80% band, where the predictor gives one; None otherwise),
    ``band_rows`` (how many of ``rows`` have a band), ``band_note`` (why the dataset has no band, or ``""``) and
    ``other_modes`` (mode ->
    ``rows, median_ape, mean_ape, max_ape``) where :func:`validate` ran more than one mode."""
    info = df.attrs.get("datasets") or {n: {} for n in dict.fromkeys(df["dataset"])}
    out = []
    for name, meta in info.items():
        d = df[df["dataset"] == name]
        mode = meta.get("mode") or (d["mode"].iloc[0] if len(d) and "mode" in d else None)
        main = d[d["mode"] == mode] if "mode" in d else d
        entry = {"name": name, "mode": mode, **_stats(main), "rows_total": int(meta.get("rows_total") or len(main)),
                 "not_predicted": int((~_ok(main)).sum()),
                 "unit": str(main["unit"].iloc[0]) if len(main) and "unit" in main else None,
                 "sampled": meta.get("sampled", "all rows"), "file": meta.get("file"), "error": meta.get("error"),
                 "band_note": no_band_reason(name)}
        modes = d.groupby("mode", sort=False) if "mode" in d else []
        others = {m: _stats(g) for m, g in modes if m != mode}
        if others:
            entry["other_modes"] = others
        out.append(entry)
    return out
