"""vTrain single node: a microbatch's modelled GPU seconds by kernel kind, against the tensor degree (issue 35).

The question it answers (docs/residuals.md, vTrain section, "The tensor-8 rows and the kernel model"): does some kind
of kernel get faster with the tensor degree in the model than the measured steps allow? For each (hidden,
microbatch) group given, at pipeline 1 and 12 layers, and tensor 1, 2, 4, 8 (the smallest data degree measured), it
prints per microbatch (forward, the full recompute's forward again, backward; ms):

* the model's GPU seconds by layer kind (``linear``: the GEMMs; ``attention``: its batched GEMMs and softmax;
  the element-wise kinds; ``tp_coll``: the tensor-parallel all-reduces), its host seconds and ``x = host / GPU``;
* the measured seconds a microbatch: the measured step less the model's own per-step seconds (bubble, gradient
  all-reduce, optimizer), over the microbatches a step;
* what a per-kernel floor of F us would add (``sum max(kernel, F) - kernel`` over the microbatch's kernels);
* the largest GPU time a monotone kernel model can give at tensor ``t``: the GEMM and attention kinds no faster than
  at ``t / 2`` (a kernel of a device's half-width share is never slower than the one of the whole width).

``--bands`` adds, over every pipeline-1 row, the median of measured / ``max(GPU, host)`` and of
``a = (measured - host) / GPU`` by ``x`` band and tensor degree. Prints JSON; about 10 s on 2 cores.

    python benchmarks/vtrain_kernel_kinds.py [--group HIDDEN MICROBATCH ...] [--bands]
"""
from __future__ import annotations

import argparse
import collections
import json

import numpy as np
import pandas as pd

from concurrency_model.parallel.host import host_seconds
from concurrency_model.scenario import load_scenario
from concurrency_model.training.estimate import estimate
from concurrency_model.training.prepare import prepare, step_inputs, sync_of
from concurrency_model.validate import training as vt

FLOORS_US = (5, 10, 20, 40)
SHRINKING = ("linear", "attention")  # the kinds whose per-device work falls as 1 / tensor


def split(rec: dict) -> dict:
    """One row's model per microbatch: GPU and host seconds, the measured seconds a microbatch, the kernels."""
    sc = load_scenario(vt.scenario_for(rec))
    w, stage, state, _, key = prepare(sc)
    x = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=sc.training.host_overhead_s)
    gpu_f = x["c_f"] + x["c_tf"] + x["c_ef"] + x["c_nf"]
    gpu_b = x["c_b"] + x["c_r"] + x["c_tb"] + x["c_eb"] + x["c_nb"]
    h_f, h_b = host_seconds(stage, w.dev, sc.training.host_overhead_s)
    m = rec["global_batch"] / (rec["microbatch"] * rec["data"])
    rest = estimate(sc).step_time_s - m * (max(gpu_f, h_f) + max(gpu_b, h_b))
    return {"sc": sc, "w": w, "stage": stage, "gpu": gpu_f + gpu_b, "host": h_f + h_b,
            "measured_mb": (rec["measured_time_s"] - rest) / m}


def kinds(w, b: int, t: int) -> dict:
    """Seconds a microbatch by layer kind: forward twice (the full recompute) and backward; and the collectives."""
    out = collections.defaultdict(float)
    for row in w.layers(b, t, False, 1, "ring"):
        out[row["kind"]] += 2 * row["f"].total() + row["b"].total()
        out["tp_coll"] += 2 * float(row["tp_f_s"]) + float(row["tp_b_s"])
    return dict(out)


def floors(stage: dict) -> dict:
    """What a per-kernel floor of F us would add to a microbatch's GPU seconds (ms)."""
    t, n = [], []
    for name in ("f", "b", "r"):
        p = stage[name]
        t.append(np.maximum(p.compute, p.memory) + p.extra + p.launch)
        n.append(p.count)
    t, n = np.concatenate(t), np.concatenate(n)
    return {f"{f} us": round(float(((np.maximum(t, f * 1e-6) - t) * n).sum() * 1e3), 2) for f in FLOORS_US} | \
        {"median kernel us": round(float(np.median(np.repeat(t, n.astype(int)))) * 1e6, 1)}


def group(rows: pd.DataFrame, hidden: int, microbatch: int, layers: int = 12) -> list:
    g = rows[(rows["pipeline"] == 1) & (rows["hidden"] == hidden) & (rows["microbatch"] == microbatch)
             & (rows["layers"] == layers)]
    out, prev = [], None
    for t in sorted(g["tensor"].unique()):
        rec = g[g["tensor"] == t].sort_values("data").iloc[0].to_dict()
        s = split(rec)
        k = kinds(s["w"], microbatch, int(t))
        bound = None
        if prev is not None and prev[0] * 2 == t:  # the shrinking kinds no faster than at half the degree
            bound = s["gpu"] + sum(max(prev[1].get(n, 0.0) - k.get(n, 0.0), 0.0) for n in SHRINKING)
        out.append({"tensor": int(t), "data": int(rec["data"]), "measured_ms": round(s["measured_mb"] * 1e3, 2),
                    "model_ms": round(max(s["gpu"], s["host"]) * 1e3, 2), "gpu_ms": round(s["gpu"] * 1e3, 2),
                    "host_ms": round(s["host"] * 1e3, 2), "x": round(s["host"] / s["gpu"], 2),
                    "kinds_ms": {n: round(v * 1e3, 2) for n, v in sorted(k.items(), key=lambda z: -z[1])},
                    "floor_adds_ms": floors(s["stage"]),
                    "monotone_bound_gpu_ms": None if bound is None else round(bound * 1e3, 2)})
        prev = (int(t), k)
    return out


def bands(rows: pd.DataFrame) -> list:
    """Measured / max(GPU, host) and (measured - host) / GPU by x band and tensor degree, pipeline-1 rows."""
    recs = []
    for rec in rows[rows["pipeline"] == 1].to_dict("records"):
        s = split(rec)
        recs.append({"tensor": rec["tensor"], "x": s["host"] / s["gpu"],
                     "ratio": s["measured_mb"] / max(s["gpu"], s["host"]),
                     "a": (s["measured_mb"] - s["host"]) / s["gpu"]})
    df = pd.DataFrame(recs)
    df["band"] = pd.cut(df["x"], [0, .5, .7, .85, 1.0, 1.15, 1.3, 2, 3, 100]).astype(str)
    t = df.groupby(["band", "tensor"], observed=True).agg(rows=("a", "size"), ratio=("ratio", "median"),
                                                            a=("a", "median")).round(2).reset_index()
    return t.to_dict("records")


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--group", type=int, nargs=2, action="append", metavar=("HIDDEN", "MICROBATCH"),
                    help="a (hidden, microbatch) group (default: 1024 8 and 2048 4, the GPU-bound tensor-8 rows)")
    ap.add_argument("--bands", action="store_true", help="add the x-band table over every pipeline-1 row")
    a = ap.parse_args(argv)
    rows = vt.vtrain_rows("single")
    out = {f"hidden {h}, microbatch {mb}": group(rows, h, mb) for h, mb in (a.group or [(1024, 8), (2048, 4)])}
    if a.bands:
        out["bands"] = bands(rows)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
