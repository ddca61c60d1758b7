"""Predicted against measured peak memory per device: torchtitan's Llama 3.1 runs (FSDP2, + TP / PP / CP, float8).

Reads ``data/torchtitan_llama3_train_tps_memory.csv`` (pytorch/torchtitan @ b5bcd76c, ``benchmarks/*.md``; see
``data/SOURCES.md``'s caveats: memory is the largest over ranks, in GiB) through
:func:`concurrency_model.validate.modern.rows` and prints, for every row with a memory figure and a named model:

* ``ideal``: today's analysis (:mod:`concurrency_model.parallel.memory`, framework ``ideal``);
* ``central``: the same layout under ``training.framework = "fsdp2"`` (:mod:`concurrency_model.parallel.allocator`);
* ``reserved``: what the caching allocator reserves at its peak, the figure torchtitan logs
  (``reserved_bytes.all.peak``, ``torchtitan/components/metrics.py`` ``DeviceMemoryMonitor``);
* ``upper``: the band's upper end, and whether the estimate says "at risk".

The mapping is the validation's (:func:`concurrency_model.validate.modern.scenario_for`, its ``ASSUMPTIONS``):
FSDP2 is ZeRO-3 over the data-parallel degree with framework ``fsdp2``, float8 is ``fp8``, torchtitan's selective
activation checkpointing is its per-op policy (:func:`concurrency_model.parallel.memory.per_op_sac_bytes`), full is
``full``; the 96 GB H100 boards are the ``grand-teton-h100`` cluster, the H200 rows ``dgx-h200``.

The allocator's fragmentation fraction (:data:`~concurrency_model.parallel.allocator.FRAGMENTATION`) is fitted on
Table 2 (Llama 3.1 8B, FSDP + CP, full activation checkpointing, 4 rows): ``--fit`` prints the fraction those rows
imply (the median of ``(measured - allocated) / transient``); the other rows are the out-of-sample check, and
``--fit`` prints their 90th percentile of measured over reserved, what the band's upper end adds
(:data:`~concurrency_model.parallel.allocator.RESERVED_P90_EXCESS`). Last, the estimate's verdict ("fits", "at risk",
"does not fit") on BigScience's layout search of 2022, whose runs ran or went out of memory
(:func:`concurrency_model.validate.modern.memory_verdicts`), and on the shared sets' runs, all of which ran. Run:
``python benchmarks/memory_accuracy.py [--fit]``.
"""
from __future__ import annotations

import argparse
import statistics

import numpy as np

from concurrency_model.parallel import allocator
from concurrency_model.training.prepare import memory_at
from concurrency_model.training.workload import workload
from concurrency_model.scenario import load_scenario
from concurrency_model.validate import modern

GIB = 2 ** 30
FIT_TABLES = ("Table 2:",)


def predict(r: dict) -> dict:
    """Memory figures of one row (bytes): ideal, central, reserved, upper, and the transient bytes."""
    out = {}
    for fw in ("ideal", "fsdp2"):
        sc = load_scenario(modern.scenario_for({**r, "framework": fw}))
        w = workload(sc.model, sc.cluster, sc.training.dtype)
        out[fw] = memory_at(sc, w, sc.parallel.microbatch_size, sc.microbatches)[1]
    m = out["fsdp2"]
    outside = sum(m[f"{k}_bytes"] for k in allocator.OUTSIDE)
    transient = m["activations_bytes"] + sum(m[f"{k}_bytes"] for k in allocator.TRANSIENT)
    return {"ideal": out["ideal"]["total_bytes"], "central": m["total_bytes"], "reserved": m["reserved_bytes"],
            "upper": m["upper_bytes"], "at_risk": m["at_risk"], "allocated": m["total_bytes"] - outside,
            "transient": transient, "capacity": m["capacity_bytes"], "outside": outside}


def ape(pred: float, meas: float) -> float:
    return abs(pred / meas - 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fit", action="store_true", help="print the fragmentation fraction the fitting rows imply")
    a = ap.parse_args()
    rows = [r for r in modern.rows("torchtitan").to_dict("records")
            if np.isfinite(r["measured_memory_bytes"]) and not r["unmappable"]]
    print(f"{'row':<44} {'meas':>6} {'ideal':>6} {'centr':>6} {'resv':>6} {'upper':>6}  GiB  (fit: * rows)")
    errs = {k: {"fit": [], "other": []} for k in ("ideal", "central", "reserved")}
    implied, ratios, covered = [], [], 0
    for r in rows:
        meas = float(r["measured_memory_bytes"])
        p = predict(r)
        fit = r["label"].startswith(FIT_TABLES)
        for k in errs:
            errs[k]["fit" if fit else "other"].append(ape(p[k], meas))
        if fit:
            implied.append((meas - p["allocated"]) / p["transient"])
        else:
            ratios.append(meas / p["reserved"])
        covered += meas <= p["upper"]
        label = r["label"][:43] + ("*" if fit else " ")
        print(f"{label:<44} {meas / GIB:6.1f} {p['ideal'] / GIB:6.1f} {p['central'] / GIB:6.1f} "
              f"{p['reserved'] / GIB:6.1f} {p['upper'] / GIB:6.1f}  {'at risk' if p['at_risk'] else ''}")
    print(f"\nmedian APE, measured (max reserved) vs predicted; fitting rows {len(errs['ideal']['fit'])}, "
          f"others {len(errs['ideal']['other'])}, all {len(rows)}:")
    for k, e in errs.items():
        every = e["fit"] + e["other"]
        print(f"  {k:<9} fit {statistics.median(e['fit']):6.1%}   others {statistics.median(e['other']):6.1%}   "
              f"all {statistics.median(every):6.1%}   (max {max(every):.1%})")
    print(f"fragmentation fraction in use: {allocator.FRAGMENTATION}; the band's excess over the reserved figure: "
          f"{allocator.RESERVED_P90_EXCESS}; measured at or under the upper end: {covered} of {len(rows)}")
    if a.fit:
        print(f"fraction the fitting rows imply (median of (measured - allocated) / transient): "
              f"{statistics.median(implied):.4f}  (each: {', '.join(f'{x:.3f}' for x in implied)})")
        print(f"the other rows' 90th percentile of measured / reserved: {np.quantile(ratios, 0.9):.4f}")
    verdicts()


def verdicts() -> None:
    """The estimate's word on memory against what the runs did (:func:`~concurrency_model.validate.modern.
    verdicts_by_set`): BigScience's (held out: none of its rows fitted a constant), some of which went out of memory,
    and the shared sets', every one of which ran; then each miss."""
    counts, misses = modern.verdicts_by_set(workers=2)
    print("\nThe estimate's verdict against what the runs did (BigScience's layout search of 2022 on DeepSpeed, read "
          "by nvidia-smi; the shared sets, every run of which ran)")
    print(counts.to_string())
    for _, r in misses.iterrows():
        why = (r["reason"].split(" (")[0] if r["memory_verdict"] == "does not fit"
               else f"expected peak {r['predicted_peak_bytes'] / 1e9:.1f} GB")
        print(f"  {'went out of memory' if r['went_oom'] else 'ran'}: {r['dataset']}: {r['label']} -> "
              f"{r['memory_verdict']} ({why})")


if __name__ == "__main__":
    main()
