"""DeepBench kernels (Baidu DeepBench @ da81ba7; ``data/deepbench_*.csv``) predicted per row.

Two modes:

* ``datasheet``: each device's preset alone, with the global efficiency constants (never fitted on the
  device being predicted);
* ``calibrated``: the efficiency constants fitted on half of a device's rows (every other row, in file
  order), predictions on the other half (see :mod:`concurrency_model.validate.fit`).

Which preset a DeepBench device is (hardware.md, "Which variants the published measurements used"):
V100 ran on a DGX-1 (SXM2); the P100 was a PCIe card; the KNL a Xeon Phi 7250(F).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import timing
from ..datasets import load
from ..hardware import Efficiency, load_device

DEVICES = {
    "NVIDIA V100": "v100-sxm2-32gb",
    "NVIDIA Tesla P100": "p100-pcie-16gb",
    "NVIDIA Tesla M40": "m40-24gb",
    "NVIDIA TitanX (Maxwell)": "titanx-maxwell",
    "NVIDIA TitanX Pascal": "titanx-pascal",
    "NVIDIA TitanXp": "titan-xp",
    "NVIDIA GTX 1080 Ti": "gtx-1080-ti",
    "NVIDIA T4": "t4",
    "AMD Radeon Instinct MI25": "mi25",
    "AMD Vega Frontier Edition 16GB": "vega-fe",
    "Intel Xeon Phi 7250 (KNL)": "xeon-phi-7250",
}
# precision label -> (storage dtype, math dtype)
PRECISIONS = {
    "Float": ("fp32", "fp32"),
    "16 bit inputs, 16 bit multiplication, 32 bit addition": ("fp16", "fp16"),
    "16 bit inputs, 32 bit multiplication, 32 bit addition": ("fp16", "fp32"),
}
OPS = ("gemm", "conv", "rnn")


def rows(op: str) -> pd.DataFrame:
    """Training rows of DeepBench for ``op`` on devices with a preset, one measured time per row
    (conv and rnn: one row per pass), with ``preset``, ``dtype``, ``math_dtype`` and ``measured_s``."""
    if op not in OPS:
        raise ValueError(f"op: unknown {op!r}; allowed: {', '.join(OPS)}")
    df = load(f"deepbench_{op}")
    df = df[(df["benchmark"] == "train") & df["device"].isin(DEVICES) & df["precision"].isin(PRECISIONS)].copy()
    df["preset"] = df["device"].map(DEVICES)
    df["dtype"] = df["precision"].map(lambda p: PRECISIONS[p][0])
    df["math_dtype"] = df["precision"].map(lambda p: PRECISIONS[p][1])
    passes = {"gemm": {"forward": "time_ms"},
              "conv": {"forward": "fwd_time_ms", "grad_input": "bwd_data_time_ms", "grad_weight": "bwd_filter_time_ms"},
              "rnn": {"forward": "fwd_time_ms", "backward": "bwd_time_ms"}}[op]
    parts = []
    for pass_, col in passes.items():
        p = df[pd.to_numeric(df[col], errors="coerce") > 0].copy()
        p["pass"] = pass_
        p["measured_s"] = pd.to_numeric(p[col]) * 1e-3
        parts.append(p)
    out = pd.concat(parts)
    out["row_id"] = np.arange(len(out))
    return out.reset_index(drop=True)


def predict_row(op: str, r, device) -> float:
    """Predicted seconds of one DeepBench row on ``device``."""
    dt, mdt = r["dtype"], r["math_dtype"]
    if op == "gemm":
        return float(timing.gemm_time(int(r["m"]), int(r["n"]), int(r["k"]), device, dt, math_dtype=mdt).time_s)
    if op == "conv":
        if int(r["stride_w"]) != int(r["stride_h"]) or int(r["pad_w"]) != int(r["pad_h"]):
            stride, pad = (int(r["stride_h"]), int(r["stride_w"])), (int(r["pad_h"]), int(r["pad_w"]))
        else:
            stride, pad = int(r["stride_h"]), int(r["pad_h"])
        t = timing.conv_time(int(r["n"]), int(r["c"]), int(r["k"]), int(r["h"]), int(r["w"]), int(r["filter_h"]),
                             int(r["filter_w"]), stride, pad, device=device, dtype=dt, pass_=r["pass"], math_dtype=mdt)
        return float(t.time_s)
    cell = {"vanilla": "rnn"}.get(r["cell"], r["cell"])
    args = (cell, int(r["hidden_units"]), int(r["n"]), int(r["timesteps"]), device, dt)
    if r["pass"] == "forward":
        return float(timing.rnn_time(*args, pass_="forward", math_dtype=mdt).time_s)
    return float(timing.rnn_time(*args, pass_="grad_input", math_dtype=mdt).time_s
                 + timing.rnn_time(*args, pass_="grad_weight", math_dtype=mdt).time_s)


def predict(op: str, df: pd.DataFrame | None = None, efficiency: dict | None = None) -> pd.DataFrame:
    """``df`` (default: :func:`rows`) with ``predicted_s`` and ``ape`` (absolute percentage error, %).

    ``efficiency`` maps a preset name to an :class:`Efficiency` that replaces the preset's.
    """
    df = rows(op) if df is None else df
    devices = {}
    preds = []
    for _, r in df.iterrows():
        name = r["preset"]
        if name not in devices:
            dev = load_device(name)
            if efficiency and name in efficiency:
                dev = replace(dev, efficiency=efficiency[name])
            devices[name] = dev
        preds.append(predict_row(op, r, devices[name]))
    out = df.copy()
    out["predicted_s"] = preds
    out["ape"] = (out["predicted_s"] - out["measured_s"]).abs() / out["measured_s"] * 100
    return out


def summary(pred: pd.DataFrame) -> pd.DataFrame:
    """Median and 90th-percentile APE per device and precision."""
    g = pred.groupby(["preset", "math_dtype", "pass"])["ape"]
    return pd.DataFrame({"rows": g.size(), "median_ape": g.median(), "p90_ape": g.quantile(0.9)}).reset_index()


__all__ = ["rows", "predict", "summary", "DEVICES", "PRECISIONS", "Efficiency"]
