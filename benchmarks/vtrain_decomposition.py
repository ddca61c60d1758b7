"""vTrain single node, per microbatch and per step apart: where the training estimate's error comes from.

vTrain's single-node set measures each configuration (model, tensor, pipeline and data degrees, microbatch) at
several global batches. :func:`concurrency_model.validate.training.microbatch_slopes` fits the measured time
against the microbatches a step, ``m``: the slope is the seconds a microbatch (``t_f + t_b`` of the 1F1B step,
Narayanan et al. 2021 §2.2.1), the intercept the seconds a step (bubble, gradient all-reduce, optimizer). The
same split of the estimate: its per-microbatch seconds ``max(GPU, host)`` forward plus backward
(:mod:`concurrency_model.training.compose`) and the rest of its step. A second fit, of the per-microbatch
seconds against the layer count (12-24 layers of one hidden size), gives seconds a layer and a microbatch,
measured and modelled (GPU and host apart), by tensor degree and microbatch: where the host issues the kernels
(small GEMMs) the measured seconds a layer over the model's kernels a layer is the host's seconds per kernel.

Prints JSON: the mean APE of the slopes and of the intercepts, their median signed errors by tensor degree x
microbatch, and the per-layer table. About 2 minutes on 2 cores (one estimate per configuration).

    python benchmarks/vtrain_decomposition.py [--pipeline P ...] [--workers N]
"""
from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from concurrency_model.training.estimate import estimate
from concurrency_model.training.prepare import prepare, step_inputs, sync_of
from concurrency_model.parallel.host import host_seconds
from concurrency_model.scenario import load_scenario
from concurrency_model.validate import training as vt


def _model(rec: dict) -> dict:
    """The estimate of one configuration split as the measurement is: seconds a microbatch (GPU, host, and the
    pass-wise larger of the two) and the rest of the step."""
    sc = load_scenario(vt.scenario_for(rec))
    w, stage, state, _, key = prepare(sc)
    tr = sc.training
    x = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=tr.host_overhead_s)
    gpu_f = x["c_f"] + x["c_tf"] + x["c_ef"] + x["c_nf"]
    gpu_b = x["c_b"] + x["c_r"] + x["c_tb"] + x["c_eb"] + x["c_nb"]
    h_f, h_b = host_seconds(stage, w.dev, tr.host_overhead_s)
    per_mb = max(gpu_f, h_f) + max(gpu_b, h_b)
    step = estimate(sc).step_time_s
    m = rec["global_batch"] / (rec["microbatch"] * rec["data"])
    return {"model_slope_s": per_mb, "model_intercept_s": step - m * per_mb, "model_gpu_s": gpu_f + gpu_b,
            "model_host_s": h_f + h_b, "model_tp_s": x["c_tf"] + x["c_tb"]}


def _by(df: pd.DataFrame, col: str) -> dict:
    t = df.pivot_table(index="microbatch", columns="tensor", values=col, aggfunc="median").round(1)
    return {f"microbatch {int(i)}": {f"tensor {int(c)}": (None if pd.isna(v) else float(v)) for c, v in r.items()}
            for i, r in t.iterrows()}


def per_layer(res: pd.DataFrame) -> list:
    """Seconds a layer and a microbatch (a line through the 12-24 layer models of one hidden size), measured and
    modelled, by hidden size, tensor degree and microbatch (the data degree with the most rows)."""
    out = []
    for (h, t, mb), g in res.groupby(["hidden", "tensor", "microbatch"]):
        g = g[g["data"] == g["data"].mode().iloc[0]]
        if g["layers"].nunique() < 3:
            continue
        fit = {k: float(np.polyfit(g["layers"], g[k], 1)[0]) * 1e3 for k in ("slope_s", "model_gpu_s", "model_host_s",
                                                                            "model_slope_s")}
        out.append({"hidden": int(h), "tensor": int(t), "microbatch": int(mb), "measured_ms": round(fit["slope_s"], 3),
                    "model_ms": round(fit["model_slope_s"], 3), "model_gpu_ms": round(fit["model_gpu_s"], 3),
                    "model_host_ms": round(fit["model_host_s"], 3)})
    return out


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pipeline", type=int, nargs="+", default=[1], help="pipeline degrees to take (default 1)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    a = ap.parse_args(argv)
    rows = vt.vtrain_rows("single")
    rows = rows[rows["pipeline"].isin(a.pipeline)]
    sl = vt.microbatch_slopes(rows)
    recs = rows.loc[sl["first"]].to_dict("records")
    with ProcessPoolExecutor(a.workers) as ex:
        res = pd.concat([sl.reset_index(drop=True), pd.DataFrame(list(ex.map(_model, recs, chunksize=4)))], axis=1)
    res["slope_err_pct"] = (res["model_slope_s"] / res["slope_s"] - 1) * 100
    res["intercept_err_pct"] = (res["model_intercept_s"] / res["intercept_s"] - 1) * 100
    out = {"configurations": len(res), "pipeline": a.pipeline,
           "slope_mean_ape": round(float(res["slope_err_pct"].abs().mean()), 2),
           "intercept_mean_ape": round(float(res["intercept_err_pct"].abs().mean()), 2),
           "slope_signed_by_microbatch_tensor": _by(res, "slope_err_pct"),
           "intercept_signed_by_microbatch_tensor": _by(res, "intercept_err_pct"),
           "per_layer": per_layer(res)}
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
