"""DeepBench kernels (Baidu DeepBench @ da81ba7; ``data/deepbench_*.csv``) predicted per row.

Two modes (``benchmarks/kernel_accuracy.py`` reports both):

* ``datasheet``: each device's preset numbers with efficiency constants fitted on the *other* devices
  only (leave-one-device-out), so nothing is fitted on the device being predicted;
* ``calibrated``: the constants fitted on half of a device's rows (even positions of each op and pass),
  predictions on the other half.

Which preset a DeepBench device is (hardware.md, "Which variants the published measurements used"):
V100 ran on a DGX-1 (SXM2); the P100 was a PCIe card; the KNL a Xeon Phi 7250(F).
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import timing
from ..calibrate.fit import fit_efficiency
from ..datasets import load
from ..hardware.devices import Device, Efficiency, load_device

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
# the names ``torch.cuda.get_device_name`` gives, for rows of ``calibrate kernels`` (data/measured/kernels-*);
# its CPU rows ("CPU ...") are the calibrated ``cpu-host`` preset's
MEASURED_DEVICES = {"NVIDIA H200": "h200-sxm-141gb", "NVIDIA H100 80GB HBM3": "h100-sxm5-80gb",
                    "NVIDIA A100-SXM4-80GB": "a100-sxm4-80gb", "NVIDIA A100-SXM4-40GB": "a100-sxm4-40gb",
                    "Tesla V100-SXM2-32GB": "v100-sxm2-32gb", "Tesla T4": "t4", "NVIDIA T4": "t4"}
# precision label -> (storage dtype, math dtype)
PRECISIONS = {
    "Float": ("fp32", "fp32"),
    "16 bit inputs, 16 bit multiplication, 32 bit addition": ("fp16", "fp16"),
    "16 bit inputs, 32 bit multiplication, 32 bit addition": ("fp16", "fp32"),
    # calibrate kernels' labels for what DeepBench did not time (calibrate.kernels.PRECISIONS)
    "bf16 inputs, bf16 multiplication, 32 bit addition": ("bf16", "bf16"),
    "fp32 inputs, tf32 multiplication, 32 bit addition": ("fp32", "tf32"),
}
# DeepBench's inference sheets: int8 GEMMs and convolutions (int32 accumulation), fp32 RNNs
INFERENCE_PRECISION = "GEMM, Conv: Int8 multiplication, 32 bit accumulation | Sparse Ops, RNN: single precision"
INFERENCE_DTYPES = {"gemm": ("int8", "int8"), "conv": ("int8", "int8"), "rnn": ("fp32", "fp32")}
OPS = ("gemm", "conv", "rnn")
_PASS_COLUMNS = {"gemm": {"forward": "time_ms"},
                 "conv": {"forward": "fwd_time_ms", "grad_input": "bwd_data_time_ms",
                          "grad_weight": "bwd_filter_time_ms"},
                 "rnn": {"forward": "fwd_time_ms", "backward": "bwd_time_ms"}}


def preset_of(device: str) -> str | None:
    """The preset of a device name in DeepBench's files or in ``calibrate kernels``' (None if unknown)."""
    if device in DEVICES or device in MEASURED_DEVICES:
        return DEVICES.get(device) or MEASURED_DEVICES[device]
    return "cpu-host" if str(device).startswith("CPU ") else None


def rows(op: str, benchmark: str = "train", frame: pd.DataFrame | None = None) -> pd.DataFrame:
    """Rows of DeepBench's ``benchmark`` sheets (``train``, or ``inference``: forward only, int8 GEMMs and
    convolutions, fp32 RNNs) for ``op`` on devices with a preset, one measured time per row and pass, with
    ``preset``, ``dtype``, ``math_dtype``, ``pass`` and ``measured_s``. ``frame``: rows of the same columns
    instead of ``data/deepbench_{op}.csv`` (``calibrate kernels``' files)."""
    if op not in OPS:
        raise ValueError(f"op: unknown {op!r}; allowed: {', '.join(OPS)}")
    if benchmark not in ("train", "inference"):
        raise ValueError(f"benchmark: unknown {benchmark!r}; allowed: train, inference")
    precisions = PRECISIONS if benchmark == "train" else {INFERENCE_PRECISION: INFERENCE_DTYPES[op]}
    df = load(f"deepbench_{op}") if frame is None else frame
    df = df.assign(preset=df["device"].map(preset_of))
    df = df[(df["benchmark"] == benchmark) & df["preset"].notna() & df["precision"].isin(precisions)].copy()
    df["dtype"] = df["precision"].map(lambda p: precisions[p][0])
    df["math_dtype"] = df["precision"].map(lambda p: precisions[p][1])
    if op == "rnn":
        df["cell"] = df["cell"].replace({"vanilla": "rnn"})
    parts = []
    for pass_, col in _PASS_COLUMNS[op].items():
        p = df[pd.to_numeric(df[col], errors="coerce") > 0].copy()
        p["pass"] = pass_
        p["measured_s"] = pd.to_numeric(p[col]) * 1e-3
        parts.append(p)
    out = pd.concat(parts).reset_index(drop=True)
    out["op"] = op
    return out


def _i(df, col):
    return df[col].to_numpy(dtype=np.int64)


def seconds(op: str, df: pd.DataFrame, dev: Device) -> np.ndarray:
    """Predicted seconds for rows of one device (vectorised per dtype, pass and cell)."""
    out = np.empty(len(df))
    keys = ["dtype", "math_dtype", "pass"] + (["cell"] if op == "rnn" else [])
    for key, g in df.groupby(keys, sort=False):
        dt, mdt, pass_ = key[:3]
        idx = df.index.get_indexer(g.index)
        if op == "gemm":
            out[idx] = timing.gemm_coeffs(_i(g, "m"), _i(g, "n"), _i(g, "k"), dev, dt, 1, mdt).seconds(dev)
        elif op == "conv":
            hw_differ = (g["stride_w"] != g["stride_h"]) | (g["pad_w"] != g["pad_h"])
            if hw_differ.any():  # the timing model takes square strides and pads; none in DeepBench
                raise ValueError("conv: rows with different strides or pads per dimension")
            out[idx] = timing.conv_coeffs(_i(g, "n"), _i(g, "c"), _i(g, "k"), _i(g, "h"), _i(g, "w"),
                                          _i(g, "filter_h"), _i(g, "filter_w"), _i(g, "stride_h"), _i(g, "pad_h"),
                                          1, 1, pass_, dev, dt, mdt).seconds(dev)
        else:
            # DeepBench times the recurrence alone (cuDNN's skip-input mode): its published TFLOP/s count
            # the recurrent GEMM only, and with an input GEMM V100 rows would exceed the device's peak
            # (calibrate kernels' torch rows project the input: their ``input_size`` column)
            inp = _i(g, "input_size") if "input_size" in g and g["input_size"].notna().all() else 0
            args = (key[3], _i(g, "hidden_units"), _i(g, "n"), _i(g, "timesteps"), dev, dt, inp)
            if pass_ == "forward":
                out[idx] = timing.rnn_seconds(*args, pass_="forward", math_dtype=mdt)
            else:
                out[idx] = timing.rnn_seconds(*args, pass_="grad_input", math_dtype=mdt) \
                    + timing.rnn_seconds(*args, pass_="grad_weight", math_dtype=mdt)
    return out


def predict(df: pd.DataFrame, efficiency: dict | None = None) -> pd.DataFrame:
    """``df`` (rows of one or more ops, see :func:`rows`) with ``predicted_s`` and ``ape`` (%).

    ``efficiency`` maps a preset name to an :class:`~concurrency_model.hardware.devices.Efficiency` to use
    instead of the preset's.
    """
    df = df.reset_index(drop=True)
    pred = np.empty(len(df))
    for (preset, op), g in df.groupby(["preset", "op"], sort=False):
        dev = load_device(preset)
        if efficiency and preset in efficiency:
            dev = replace(dev, efficiency=efficiency[preset])
        pred[g.index.to_numpy()] = seconds(op, g.reset_index(drop=True), dev)
    out = df.copy()
    out["predicted_s"] = pred
    out["ape"] = (out["predicted_s"] - out["measured_s"]).abs() / out["measured_s"] * 100
    return out


def summary(pred: pd.DataFrame, by=("preset", "op", "math_dtype")) -> pd.DataFrame:
    """Rows, median and 90th-percentile APE per group."""
    g = pred.groupby(list(by))["ape"]
    return pd.DataFrame({"rows": g.size(), "median_ape": g.median(), "p90_ape": g.quantile(0.9)}).reset_index()


def all_rows() -> pd.DataFrame:
    return pd.concat([rows(op) for op in OPS], ignore_index=True)


STAGES = (("gemm", ("compute", "memory", "k_startup", "l2_factor")), ("conv", ("conv", "conv_wgrad", "winograd")),
          ("rnn", ("rnn", "rnn_sync", "rnn_unfused")))


def fit(df: pd.DataFrame, start=None, label: str = "fit"):
    """One :class:`Efficiency` for all rows of ``df`` (one device, or several for a global fit), fitted in
    stages: the GEMM constants on GEMM rows, then the convolution factor on conv rows and the recurrent
    factor on RNN rows with the GEMM constants held."""
    eff = start or Efficiency()
    sigmas = []
    for op, params in STAGES:
        part = df[df["op"] == op].reset_index(drop=True)
        if len(part) < 2 * len(params):
            continue
        eff = fit_efficiency(lambda e, p=part: predict(p, {d: e for d in p["preset"].unique()})["predicted_s"]
                             .to_numpy(), part["measured_s"].to_numpy(), eff, params, label)
        sigmas.append(eff.sigma)
    return replace(eff, sigma=float(max(sigmas)) if sigmas else 0.0, fitted_on=label)


def halves(df: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Every other row of each (device, op, precision, pass) in file order: (fit half, test half)."""
    k = df.groupby(["preset", "op", "math_dtype", "pass"]).cumcount() % 2
    return df[k == 0].reset_index(drop=True), df[k == 1].reset_index(drop=True)


def evaluate(df: pd.DataFrame | None = None, modes=("datasheet", "calibrated")) -> pd.DataFrame:
    """Predictions for every row in each mode (``datasheet``: constants fitted on the other devices;
    ``calibrated``: on the other half of the device's rows), concatenated with a ``mode`` column."""
    df = all_rows() if df is None else df
    out = []
    presets = list(df["preset"].unique())
    for mode in modes:
        for preset in presets:
            mine = df[df["preset"] == preset].reset_index(drop=True)
            if mode == "datasheet":
                eff = fit(df[df["preset"] != preset], label=f"DeepBench without {preset}")
                p = predict(mine, {preset: eff})
            elif mode == "calibrated":
                train, test = halves(mine)
                p = predict(test, {preset: fit(train, label=f"half of {preset}")})
            else:
                raise ValueError(f"mode: unknown {mode!r}; allowed: datasheet, calibrated")
            p["mode"] = mode
            out.append(p)
    return pd.concat(out, ignore_index=True)
