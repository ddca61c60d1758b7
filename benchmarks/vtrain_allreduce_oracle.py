"""Does the in-node all-reduce explain the vTrain single-node error? The training sets with the model's one-node
all-reduce replaced by vTrain's own measurement of it.

vTrain's all-reduce tables (``data/vtrain_allreduce_lut_a100.csv``: nccl-tests on 2-8 GPUs of the A100 node of its
single-node ground truth, 1 MiB - 1 GiB every 1 MiB; VIA-Research/vTrain @ f8dda847 ``trace/a100/AR_GPU*_LUT``) are
what vTrain's own simulator charges a tensor-parallel all-reduce (``src/predictor.py`` ``compute_comm_time``, the
in-place column). Against them the model's one-node NCCL all-reduce (:mod:`concurrency_model.comm.nccl`, the
``dgx-a100`` preset) is 29-51% fast at 1-2 MiB and 14-39% at 2-8 MiB (``validate.collectives.vtrain_preset``), the
sizes of the tensor-parallel calls of vTrain's rows (microbatch x 1024 tokens x hidden 1024-2048 x 2 bytes: 2-32
MiB). This script answers whether that gap is what the training rows miss: it evaluates vTrain single node (the
held-out odd rows), vTrain multi-node, the Megatron-LM README sets and Narayanan et al. Table 2 twice, with the
model's all-reduce and with the measured one (the out-of-place time, linearly interpolated in size; a call below 1
MiB at the 1 MiB time, an upper bound) in place of every one-node all-reduce of 2-8 ranks, and prints each set's
APE and the single-node rows' median signed error by tensor degree x microbatch (each pass in a fresh process, both
at once on 2 cores). The measured tables are the answer key for the collective model, not fitted to anything
here. About 1 minute on 2 cores.

    python benchmarks/vtrain_allreduce_oracle.py [--every K] [--json]
"""
from __future__ import annotations

import os
import tempfile

# a fresh cache of compiled functions, removed at exit: the oracle's numbers must not come from, or go into, the
# user's cache (the worker processes inherit the variable; each pass takes a directory of its own in it)
if "VTRAIN_ORACLE_CACHE" not in os.environ:
    _CACHE = tempfile.TemporaryDirectory(prefix="vtrain-oracle-")
    os.environ["VTRAIN_ORACLE_CACHE"] = os.environ["CONCURRENCY_MODEL_CACHE_DIR"] = _CACHE.name

import argparse  # noqa: E402 (after the cache directory is chosen)
import json  # noqa: E402
import multiprocessing  # noqa: E402
from concurrent.futures import ProcessPoolExecutor  # noqa: E402
from unittest import mock  # noqa: E402

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from concurrency_model.comm import nccl, on_cluster  # noqa: E402
from concurrency_model.parallel import triples  # noqa: E402
from concurrency_model.validate import collectives as vc  # noqa: E402
from concurrency_model.validate import training as vt  # noqa: E402

MODEL_NCCL_ON = on_cluster.nccl_on


def measured_tables() -> dict:
    """``{ranks: (sizes in bytes, out-of-place seconds)}`` of vTrain's tables."""
    rows = vc.vtrain_rows()
    return {int(p): (g["size_bytes"].to_numpy(float), g["measured_s"].to_numpy(float))
            for p, g in rows.groupby("ranks")}


def measured_nccl_on(tables: dict):
    """``nccl_on`` with a one-node all-reduce of a ranks count in ``tables`` at its measured time (all of it as
    latency, so that it reaches the step as measured); every other call as the model prices it."""
    def nccl_on(op, n, placement, nccl_version=None, nccl_env=None):
        c = MODEL_NCCL_ON(op, n, placement, nccl_version, nccl_env)
        if c is None or op != "allreduce" or placement.nodes != 1 or placement.ranks not in tables:
            return c
        x, y = tables[placement.ranks]
        t = float(np.interp(float(n), x, y))  # below the first size: the first size's time
        return nccl.Choice(c.algorithm, c.protocol, t, float("inf"), t, "intra", t, c.channels)
    return nccl_on


def _evaluate(rows: pd.DataFrame, measured: bool) -> pd.DataFrame:
    # a cache directory of its own: the cached numbers (``compiled.arrays``) are keyed by the model's arguments,
    # which the measured all-reduce does not change
    path = os.path.join(os.environ["VTRAIN_ORACLE_CACHE"], "measured" if measured else "model")
    os.makedirs(path, exist_ok=True)
    os.environ["CONCURRENCY_MODEL_CACHE_DIR"] = path
    if not measured:
        return vt.evaluate(rows, workers=1)
    fn = measured_nccl_on(measured_tables())
    with mock.patch.object(on_cluster, "nccl_on", fn), mock.patch.object(triples, "nccl_on", fn):
        return vt.evaluate(rows, workers=1)


def evaluate(rows: pd.DataFrame) -> dict:
    """``{"model": ..., "measured": ...}``: the rows predicted with the model's all-reduce and with vTrain's, each in
    a fresh process (the workloads cache their collectives, ``lru_cache``: a second pass in one process would reuse
    the first's), the two at once."""
    ctx = multiprocessing.get_context("spawn")
    with ProcessPoolExecutor(2, mp_context=ctx, max_tasks_per_child=1) as ex:
        jobs = {label: ex.submit(_evaluate, rows, label == "measured") for label in ("model", "measured")}
        return {label: job.result() for label, job in jobs.items()}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=1, help="every K-th row of each set (default 1)")
    ap.add_argument("--json", action="store_true", help="print JSON instead of tables")
    a = ap.parse_args(argv)
    if a.every < 1:
        raise SystemExit("--every: must be >= 1")
    rows = pd.concat([vt.vtrain_held_out_rows(), vt.vtrain_rows("multi"), vt.megatron_rows(),
                      vt.narayanan_rows()]).iloc[::a.every].reset_index(drop=True)
    out: dict = {"sets": [], "single_signed_by_tensor_microbatch": {}}
    for label, res in evaluate(rows).items():
        ok = res[res["status"] == "ok"]
        for name, g in ok.groupby("dataset"):
            out["sets"].append({"dataset": name, "allreduce": label, "rows": len(g),
                                "mean_ape": round(float(g["ape"].mean()), 2),
                                "median_ape": round(float(g["ape"].median()), 2),
                                "median_signed_pct": round(float(g["signed_error_pct"].median()), 2)})
        single = ok[ok["dataset"] == "vtrain_single"]
        t = single.pivot_table(index="microbatch", columns="tensor", values="signed_error_pct", aggfunc="median")
        out["single_signed_by_tensor_microbatch"][label] = {
            f"microbatch {int(i)}": {f"tensor {int(c)}": round(float(v), 1) for c, v in r.items() if pd.notna(v)}
            for i, r in t.iterrows()}
    if a.json:
        print(json.dumps(out, indent=1))
        return out
    print(pd.DataFrame(out["sets"]).sort_values(["dataset", "allreduce"]).to_string(index=False))
    for label, table in out["single_signed_by_tensor_microbatch"].items():
        print(f"\nvTrain single node, median signed error % (+: predicted slower), {label} all-reduce\n"
              f"{pd.DataFrame(table).T.to_string()}")
    return out


if __name__ == "__main__":
    main()
