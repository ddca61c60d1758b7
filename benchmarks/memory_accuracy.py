"""Predicted against measured peak memory per device: torchtitan's Llama 3.1 runs (FSDP2, + TP / PP / CP, float8).

Reads ``torchtitan_llama3_train_tps_memory.csv`` (pytorch/torchtitan @ b5bcd76c, ``benchmarks/*.md``; see the
shared ``SOURCES.md`` caveats: memory is the largest over ranks, in GiB) from ``$CM_SHARED_DATA`` (default
``/work/shared/data``) and prints, for every row with a memory figure and a named model:

* ``ideal``: today's analysis (:mod:`concurrency_model.parallel.memory`, framework ``ideal``);
* ``central``: the same layout under ``training.framework = "fsdp2"`` (:mod:`concurrency_model.parallel.allocator`);
* ``reserved``: what the caching allocator reserves at its peak, the figure torchtitan logs
  (``reserved_bytes.all.peak``, ``torchtitan/components/metrics.py`` ``DeviceMemoryMonitor``);
* ``upper``: the band's upper end, and whether the estimate says "at risk".

The mapping: FSDP2 is ZeRO-3 over the data-parallel degree with framework ``fsdp2``; float8 is dtype ``fp8``;
activation checkpointing ``selective`` / ``full`` is recompute of that name; SDPA's fused attention
(``fused_attention``); sequence parallelism with tensor parallelism (torchtitan's TP is sequence-parallel); the
local batch is the microbatch without pipelining, microbatch 1 with it (torchtitan's default); Interleaved 1F1B with
2 chunks a rank (as recalled of torchtitan's 405B config). The 96 GB H100 boards (Grand Teton) have no preset:
the ``dgx-h100`` cluster with the device's memory set to 96 GiB (a cluster dict). H200 rows use ``dgx-h200``.

The allocator's fragmentation fraction (:data:`~concurrency_model.parallel.allocator.FRAGMENTATION`) is fitted on
Table 2 (Llama 3.1 8B, FSDP + CP, full activation checkpointing, 4 rows): ``--fit`` prints the fraction those rows
imply (the median of ``(measured - allocated) / transient``); the other rows are the out-of-sample check. The
selective rows (Tables 1, 3, H200) are torchtitan's per-op selective checkpointing (it saves every other matmul's
output), which stores less than Korthikanti's selective recompute that ``recompute = "selective"`` models: their
activations are over-predicted, so they are kept out of the fit. Run:
``python benchmarks/memory_accuracy.py [--fit]``.
"""
from __future__ import annotations

import argparse
import csv
import os
import statistics
from pathlib import Path

from concurrency_model.cluster import load_cluster
from concurrency_model.hardware import load_device
from concurrency_model.parallel import allocator
from concurrency_model.parallel.estimate import memory_at
from concurrency_model.parallel.features import workload
from concurrency_model.scenario import load_scenario

GIB = 2 ** 30
DATA = Path(os.environ.get("CM_SHARED_DATA", "/work/shared/data")) / "torchtitan_llama3_train_tps_memory.csv"
MODELS = {"Llama 3.1 8B": "llama-3-8b", "Llama 3.1 70B": "llama-3-70b", "Llama 3.1 405B": "llama-3.1-405b"}
FIT_TABLES = ("Table 2",)


def cluster(gpu: str):
    """The cluster of a row's board: dgx-h100 with 96 GiB devices for the Grand Teton H100s, else dgx-h200."""
    if gpu.startswith("H100"):
        c, d = load_cluster("dgx-h100").to_dict(), load_device("h100-sxm5-80gb").to_dict()
        c["device"] = {**d, "name": "h100-sxm5-96gb", "mem_capacity_bytes": 96 * GIB}
        return c
    return "dgx-h200"


def scenario(r: dict, framework: str) -> dict:
    """A torchtitan row as a scenario (module docstring)."""
    dp, tp, pp, cp = (int(r[k]) for k in ("fsdp", "tp", "pp", "cp"))
    local = int(r["local_batch_size"])
    schedule = {"": "1f1b", "1F1B": "1f1b", "Interleaved 1F1B": "interleaved"}[r["pp_schedule"]]
    return {"model": {"hf_config": MODELS[r["model"]], "seq_len": int(r["seq_len"]), "fused_attention": True},
            "cluster": cluster(r["gpu"]),
            "parallel": {"data": dp, "tensor": tp, "pipeline": pp, "context": cp,
                         "microbatch_size": 1 if pp > 1 else local, "global_batch": local * dp, "schedule": schedule,
                         "interleave": 2 if schedule == "interleaved" else 1, "sequence_parallel": tp > 1},
            "training": {"dtype": "fp8" if "float8" in r["precision"] else "bf16", "zero_stage": 3,
                         "recompute": "full" if r["activation_checkpointing"].startswith("full") else "selective",
                         "framework": framework}}


def predict(r: dict) -> dict:
    """Memory figures of one row (bytes): ideal, central, reserved, upper, and the transient bytes."""
    out = {}
    for fw in ("ideal", "fsdp2"):
        sc = load_scenario(scenario(r, fw))
        w = workload(sc.model, sc.cluster, sc.training["dtype"])
        out[fw] = memory_at(sc, w, sc.parallel["microbatch_size"], sc.microbatches)[1]
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
    rows = [r for r in csv.DictReader(DATA.open()) if r["peak_memory"] and r["model"] in MODELS]
    print(f"{'row':<44} {'meas':>6} {'ideal':>6} {'centr':>6} {'resv':>6} {'upper':>6}  GiB  (fit: * rows)")
    errs = {k: {"fit": [], "other": []} for k in ("ideal", "central", "reserved")}
    implied = []
    for r in rows:
        meas = float(r["peak_memory"]) * GIB
        p = predict(r)
        fit = r["table"] in FIT_TABLES
        for k in errs:
            errs[k]["fit" if fit else "other"].append(ape(p[k], meas))
        if fit:
            implied.append((meas - p["allocated"]) / p["transient"])
        label = f"{r['table']}: {r['config_label']}"[:43] + ("*" if fit else " ")
        print(f"{label:<44} {meas / GIB:6.1f} {p['ideal'] / GIB:6.1f} {p['central'] / GIB:6.1f} "
              f"{p['reserved'] / GIB:6.1f} {p['upper'] / GIB:6.1f}  {'at risk' if p['at_risk'] else ''}")
    print(f"\nmedian APE, measured (max reserved) vs predicted; fitting rows {len(errs['ideal']['fit'])}, "
          f"others {len(errs['ideal']['other'])}, all {len(rows)}:")
    for k, e in errs.items():
        every = e["fit"] + e["other"]
        print(f"  {k:<9} fit {statistics.median(e['fit']):6.1%}   others {statistics.median(e['other']):6.1%}   "
              f"all {statistics.median(every):6.1%}   (max {max(every):.1%})")
    print(f"fragmentation fraction in use: {allocator.FRAGMENTATION}")
    if a.fit:
        print(f"fraction the fitting rows imply (median of (measured - allocated) / transient): "
              f"{statistics.median(implied):.4f}  (each: {', '.join(f'{x:.3f}' for x in implied)})")


if __name__ == "__main__":
    main()
