"""Kernel-time accuracy on DeepBench (data/deepbench_*.csv): datasheet and calibrated modes.

datasheet  : each device's preset with efficiency constants fitted on the other devices only
             (leave-one-device-out), so nothing is fitted on the device being predicted;
calibrated : constants fitted on every other row of the device, predicted on the rest;
roofline90 : a plain roofline at 90% of peak and 100% of bandwidth, plus launch (the baseline).

Prints one JSON object (``--markdown`` prints the README table instead), with ``gemm_layout_scatter``: the
median APE of an oracle that predicts each GEMM row by the geometric mean of its shape's measured layouts
(:func:`layout_scatter`), the floor of a model of the shape alone, and ``inference_kernels``: DeepBench's
inference sheets (int8 GEMMs and convolutions, fp32 RNNs) per device in datasheet mode and with the default
constants (:func:`inference`; no target), and ``sparse``: DeepBench's pruned GEMMs (CSR) and the same
products dense with the presets and default constants, per device and regime of n, with how often the
model says rightly whether the sparse product is the faster (:func:`sparse`; no target). Targets (issue 3): datasheet
GEMM median APE <= 10% and p90 <= 30%, conv median <= 20% on every NVIDIA device; calibrated median
<= 6% GEMM, <= 12% conv, <= 15% RNN.

    python benchmarks/kernel_accuracy.py [--markdown]
"""
from __future__ import annotations

import json
import sys
import time

import numpy as np
import pandas as pd

from concurrency_model.hardware.devices import load_device
from concurrency_model.units import dtype_bytes
from concurrency_model.validate import kernels
from concurrency_model.validate import sparse as sparse_validation

TARGETS = {("datasheet", "gemm"): (10, 30), ("datasheet", "conv"): (20, None),
           ("calibrated", "gemm"): (6, None), ("calibrated", "conv"): (12, None), ("calibrated", "rnn"): (15, None)}


def roofline90(df: pd.DataFrame) -> pd.DataFrame:
    """The baseline for GEMM and conv rows: max(flop/(0.9 peak), bytes/bw) + launch."""
    out = []
    for (preset, op), g in df[df["op"].isin(["gemm", "conv"])].groupby(["preset", "op"]):
        dev = load_device(preset)
        vb = g["dtype"].map(dtype_bytes).to_numpy()
        peak = np.array([dev.peak(m) for m in g["math_dtype"]])
        if op == "gemm":
            m, n, k = (g[c].to_numpy(float) for c in ("m", "n", "k"))
            flop, byt = 2 * m * n * k, (m * k + k * n + m * n) * vb
        else:
            ho = (g["h"] + 2 * g["pad_h"] - g["filter_h"]) // g["stride_h"] + 1
            wo = (g["w"] + 2 * g["pad_w"] - g["filter_w"]) // g["stride_w"] + 1
            flop = (2 * g["n"] * g["k"] * g["c"] * g["filter_h"] * g["filter_w"] * ho * wo).to_numpy(float)
            byt = ((g["n"] * g["c"] * g["h"] * g["w"] + g["k"] * g["c"] * g["filter_h"] * g["filter_w"]
                    + g["n"] * g["k"] * ho * wo) * vb).to_numpy(float)
        p = g.copy()
        p["predicted_s"] = np.maximum(flop / (0.9 * peak), byt / dev.mem_bw) + dev.launch_overhead
        p["ape"] = (p["predicted_s"] - p["measured_s"]).abs() / p["measured_s"] * 100
        p["mode"] = "roofline90"
        out.append(p)
    return pd.concat(out, ignore_index=True)


def layout_scatter(df: pd.DataFrame) -> pd.DataFrame:
    """How far apart DeepBench's layouts of one GEMM shape are: each row of a shape measured in more than one
    layout (NN / NT / TN) predicted by the geometric mean of that shape's measured times, an oracle that knows
    the answer up to the layout. Its median APE is what a model of the shape alone cannot beat on average:
    the GEMM model sees (m, n, k), not the layout."""
    g = df[df["op"] == "gemm"].copy()
    g["log_t"] = np.log(g["measured_s"])
    by = g.groupby(["preset", "math_dtype", "m", "n", "k"])["log_t"]
    g = g[by.transform("size") > 1]
    oracle = np.exp(by.transform("mean")[g.index])
    g["ape"] = (oracle - g["measured_s"]).abs() / g["measured_s"] * 100
    s = g.groupby(["preset", "math_dtype"])["ape"]
    return pd.DataFrame({"rows": s.size(), "median_ape": s.median()}).reset_index()


COLUMNS = [("gemm", "roofline90", "median_ape"), ("gemm", "datasheet", "median_ape"), ("gemm", "datasheet", "p90_ape"),
           ("gemm", "calibrated", "median_ape"), ("conv", "roofline90", "median_ape"),
           ("conv", "datasheet", "median_ape"), ("conv", "calibrated", "median_ape"),
           ("rnn", "datasheet", "median_ape"), ("rnn", "calibrated", "median_ape")]


def markdown(per: pd.DataFrame) -> str:
    """README table: median (and GEMM p90) APE in % per device and math dtype."""
    head = "| device | dtype | " + " | ".join(f"{op} {mode} {'p90' if 'p90' in v else 'median'}"
                                              for op, mode, v in COLUMNS) + " |"
    lines = [head, "|" + " --- |" * (len(COLUMNS) + 2)]
    for (preset, dt), g in per.groupby(["preset", "math_dtype"]):
        cells = []
        for op, mode, v in COLUMNS:
            r = g[(g["op"] == op) & (g["mode"] == mode)]
            cells.append(f"{r[v].iloc[0]:.0f}" if len(r) else "")
        lines.append(f"| {preset} | {dt} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def inference(train: pd.DataFrame) -> pd.DataFrame:
    """DeepBench's inference kernels (int8 GEMMs and convolutions, fp32 RNNs, forward) in datasheet mode: each
    device's rows with the constants fitted on the *other* devices' training rows, and with the defaults."""
    rows = pd.concat([kernels.rows(op, "inference") for op in kernels.OPS], ignore_index=True)
    out = [kernels.predict(rows).assign(mode="default constants")]
    for preset, mine in rows.groupby("preset"):
        eff = kernels.fit(train[train["preset"] != preset], label=f"DeepBench training rows without {preset}")
        out.append(kernels.predict(mine, {preset: eff}).assign(mode="datasheet"))
    return kernels.summary(pd.concat(out, ignore_index=True), ("mode", "op", "preset", "math_dtype"))


def sparse() -> dict:
    """DeepBench's sparse sheet (:mod:`concurrency_model.validate.sparse`): median APE and median
    predicted / measured per device, kind and n (n <= 4: matrix-vector-like; n >= 1,500: many columns)."""
    res = sparse_validation.evaluate()
    ok = res[res["status"] == "ok"].assign(regime=lambda d: np.where(d["label"].str.contains(r"n=[1-4] "),
                                                                     "n <= 4", "n >= 1500"),
                                           ratio=lambda d: d["predicted"] / d["measured"])
    per = ok.groupby(["preset", "kind", "regime"]).agg(rows=("ape", "size"), median_ape=("ape", "median"),
                                                       median_ratio=("ratio", "median")).reset_index()
    per["median_ape"] *= 100
    return {**{k: (round(v * 100, 2) if isinstance(v, float) else v)
               for k, v in sparse_validation.summary(res).items()},
            "per_device": per.round(2).to_dict("records")}


def main() -> None:
    t0 = time.perf_counter()
    df = kernels.all_rows()
    res = pd.concat([kernels.evaluate(df), roofline90(df)], ignore_index=True)
    per = kernels.summary(res, ("mode", "op", "preset", "math_dtype"))
    overall = kernels.summary(res, ("mode", "op"))
    nvidia = per[~per["preset"].isin(["mi25", "vega-fe", "xeon-phi-7250"])]
    checks = []
    for (mode, op), (med, p90) in TARGETS.items():
        rows = nvidia[(nvidia["mode"] == mode) & (nvidia["op"] == op)]
        ok = bool((rows["median_ape"] <= med).all() and (p90 is None or (rows["p90_ape"] <= p90).all()))
        checks.append({"mode": mode, "op": op, "median_target": med, "p90_target": p90, "met_on_every_device": ok,
                       "worst_median": round(float(rows["median_ape"].max()), 1)})
    if "--markdown" in sys.argv:
        print(markdown(per))
        return
    print(json.dumps({"elapsed_s": round(time.perf_counter() - t0, 1), "rows": int(len(df)),
                      "overall": overall.round(2).to_dict("records"), "targets": checks,
                      "gemm_layout_scatter": layout_scatter(df).round(2).to_dict("records"),
                      "inference_kernels": inference(df).round(2).to_dict("records"), "sparse": sparse(),
                      "per_device": per.round(2).to_dict("records")}, indent=1))


if __name__ == "__main__":
    main()
