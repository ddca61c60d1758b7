"""The toolkit's own kernel and step measurements (``data/measured/kernels-*``, ``steps-*``) against its models.

* ``kernels-*`` folders (``calibrate kernels``: DeepBench's training shapes timed with torch, in DeepBench's
  columns): each row's device is the preset :func:`.kernels.preset_of` names (an unknown device is refused,
  naming it). Modes as DeepBench's (:mod:`.registry`): ``preset`` (the preset's default constants),
  ``datasheet`` (constants fitted on every DeepBench row of the *other* devices: nothing of the device
  measured) and ``held-out`` (fitted on every other row of the run).
* ``steps-*`` folders (``calibrate steps``: a GPT-2-architecture model in plain torch on one
  device): each row as a one-device scenario of the same graph (``{"kind": "gpt", ...}`` with the measured
  model's layers, width, heads, vocabulary, positions, and fused attention where it ran
  ``scaled_dot_product_attention``), compared on the step time (``estimate``: Adam, no recompute, ZeRO 0,
  the row's dtype), the peak of allocated memory where measured, the prompt pass (``infer``'s
  ``prefill_s``) and the decode step (``decode_s_per_token`` over 64 tokens after ``seq``); the peaks of
  memory are a dataset of their own (``measured-steps-...-memory``, bytes). The eager
  loop's host cost is the training estimate's own constant (:data:`~concurrency_model.parallel.host.
  HOST_S_PER_KERNEL` on a GPU, nothing on a CPU), for inference too: the same one set of constants.
"""
from __future__ import annotations

import json
from importlib import resources
from pathlib import Path

import numpy as np
import pandas as pd

from .. import datasets
from ..hardware.devices import load_device
from ..parallel.host import host_per_kernel
from ..serving.decoder import infer
from ..training.estimate import estimate
from ..uncertainty import lognormal_band
from . import kernels
from .adapters import kernel_band, kernel_frame, read_frame
from .kernels import preset_of

DECODE_TOKENS = 64  # the decode rows' positions seq .. seq + 63 (calibrate.steps' cache window)


# --- kernels ------------------------------------------------------------------------------------------------
def kernel_rows(folder) -> pd.DataFrame:
    """:func:`.kernels.rows` of every ``deepbench_{op}.csv`` in ``folder``, with the file line in ``row``."""
    folder, parts = Path(folder), []
    for op in kernels.OPS:
        file = f"deepbench_{op}.csv"
        if not (folder / file).is_file():
            continue
        raw = datasets.load_measured(folder, file)
        unknown = sorted({d for d in raw["device"].astype(str) if kernels.preset_of(d) is None})
        if unknown:
            raise ValueError(f"{folder.name}/{file}: device {unknown[0]!r} has no preset; known: "
                             f"{', '.join([*kernels.MEASURED_DEVICES, 'CPU ...'])}")
        parts.append(kernels.rows(op, "train", raw.assign(row=raw.index + 2)))
    if not parts:
        raise ValueError(f"{folder.name}: no deepbench_gemm.csv, deepbench_conv.csv or deepbench_rnn.csv")
    return pd.concat(parts, ignore_index=True)


def kernels_frame(name: str, folder, mode: str) -> pd.DataFrame:
    """Predicted vs measured for a ``kernels-*`` folder in ``mode`` (module docstring); ``group`` is
    ``OP PRESET DTYPE``."""
    mine = kernel_rows(folder)
    if mode == "calibrated":
        return _kernels_calibrated(name, folder, mine)
    if mode == "held-out":
        from .adapters import kernel_held_out
        p = pd.concat([kernel_held_out(g) for _, g in mine.groupby("preset", sort=False)], ignore_index=True)
    elif mode in ("preset", "datasheet"):
        ref = kernels.all_rows()  # the reference devices' rows (their file lines are not needed)
        both = pd.concat([ref.assign(origin="deepbench"), mine.assign(origin="measured")], ignore_index=True)
        eff = None
        if mode == "datasheet":
            fitted = kernels.fit(ref[~ref["preset"].isin(mine["preset"].unique())],
                                 label=f"DeepBench without {', '.join(mine['preset'].unique())}")
            eff = {d: fitted for d in both["preset"].unique()}
        everyone = kernels.predict(both, eff)
        # the band's spread from the DeepBench devices under the same constants (leave-one-device-out)
        p = kernel_band(everyone[everyone["origin"] == "measured"], everyone[everyone["origin"] == "deepbench"],
                        other_devices=False)
    else:
        raise ValueError(f"mode: unknown {mode!r}; allowed: preset, datasheet, held-out, calibrated")
    out = pd.concat([kernel_frame(name, mode, g).assign(group=lambda d, op=op: op + " " + d["group"])
                     for op, g in p.groupby("op", sort=False)], ignore_index=True)
    return out


def run_profile(folder) -> Path | None:
    """The run's own device file, ``FOLDER/profile.json`` (a ``calibrate compute`` profile of the machine the
    rows were timed on, e.g. its ``profile-torch.json`` for torch's CPU kernels), or None: the rows are then
    predicted from their device's preset."""
    path = Path(folder) / "profile.json"
    return path if path.is_file() else None


def _kernels_calibrated(name: str, folder, mine: pd.DataFrame) -> pd.DataFrame:
    """The rows predicted on the run's own profile (``calibrated``: fitted to other GEMMs of the same machine
    and library); the 80% band from that fit's log spread (its ``sigma``)."""
    path = run_profile(folder)
    if path is None:
        raise ValueError(f"{Path(folder).name}/profile.json: not found (the run's own device file)")
    dev = load_device(path)
    p = kernels.predict(mine.assign(preset=str(path)))
    p["p10_s"], p["p90_s"] = lognormal_band(p["predicted_s"].to_numpy(float),
                                            np.full(len(p), dev.efficiency.sigma))
    p["preset"] = dev.name
    return pd.concat([kernel_frame(name, "calibrated", g).assign(group=lambda d, op=op: op + " " + d["group"])
                      for op, g in p.groupby("op", sort=False)], ignore_index=True)


# --- GPT steps ----------------------------------------------------------------------------------------------
def one_device_cluster(preset: str) -> dict:
    """A cluster object of one device ``preset`` (no communication happens on it; its tiers are the
    ``cpu-host`` cluster preset's loopback, unused)."""
    text = resources.files("concurrency_model").joinpath("presets/clusters/cpu-host.json").read_text()
    c = json.loads(text)
    return {**c, "name": f"one {preset}", "device": preset, "gpus_per_node": 1, "nodes": 1,
            "notes": "one device (validation of single-device measurements)"}


def _scenario(r: dict, preset: str) -> dict:
    """The row's model on one device: trained on ``seq`` tokens; served with the measured model's positions
    as its context (a prompt of ``seq`` and the tokens after it)."""
    positions = int(r["positions"]) if pd.notna(r.get("positions")) else int(r["seq"]) + DECODE_TOKENS
    model = {"kind": "gpt", "layers": int(r["layers"]), "hidden": int(r["hidden"]), "heads": int(r["heads"]),
             "seq_len": int(r["seq"]) if r["kind"] == "train" else positions, "vocab": int(r["vocab"]),
             "fused_attention": r["attention"] == "flash", "max_positions": positions}
    return {"model": model, "cluster": one_device_cluster(preset)}


def predict_step(r: dict, device=None) -> dict:
    """``{"time_s", "p10_s", "p90_s", "memory_bytes"}`` predicted for one row of ``gpt_steps.csv``: the time
    with its 80% band (:mod:`concurrency_model.uncertainty`, as ``estimate`` and ``infer`` give it), and the
    memory for training rows only. ``device``: a device file to predict on instead of the row's preset."""
    preset = str(device) if device is not None else preset_of(str(r["device"]))
    if preset is None:
        raise ValueError(f"device: {r['device']!r} has no preset")
    sc, b, s = _scenario(r, preset), int(r["batch"]), int(r["seq"])
    host = host_per_kernel(load_device(preset), None)
    if r["kind"] == "train":
        e = estimate({**sc, "parallel": {"microbatch_size": b, "global_batch": b},
                      "training": {"dtype": r["dtype"], "optimizer": "adam", "recompute": "none", "zero_stage": 0}})
        return {"time_s": e.step_time_s, "p10_s": e.step_time_p10_s, "p90_s": e.step_time_p90_s,
                "memory_bytes": e.memory_bytes_per_device}
    inf = {"batch": b, "prompt_len": s, "decode_len": 1 if r["kind"] == "prefill" else DECODE_TOKENS,
           "dtype": r["dtype"], "host_overhead_s": host}
    if r["kind"] not in ("prefill", "decode"):
        raise ValueError(f"kind: unknown {r['kind']!r}; allowed: train, prefill, decode")
    got = infer({**sc, "inference": inf})
    if r["kind"] == "prefill":
        return {"time_s": got.prefill_s, "p10_s": got.bands["prefill_p10_s"], "p90_s": got.bands["prefill_p90_s"],
                "memory_bytes": np.nan}
    return {"time_s": got.decode_s_per_token, "p10_s": got.bands["decode_s_per_token_p10"],
            "p90_s": got.bands["decode_s_per_token_p90"], "memory_bytes": np.nan}


def has_memory(folder) -> bool:
    """Whether a ``steps-*`` run measured the peak memory of a training step (GPU runs do)."""
    df = datasets.load_measured(folder, "gpt_steps.csv")
    return bool((df["kind"].eq("train") & pd.to_numeric(df["peak_allocated_bytes"], errors="coerce").gt(0)).any())


def steps_frame(name: str, folder, what: str = "time", mode: str = "preset") -> pd.DataFrame:
    """Predicted vs measured for a ``steps-*`` folder: ``what`` = ``time``, one row per measured time
    (``group``: the kind and device), or ``memory``, one per measured peak memory of a training step;
    ``mode`` ``preset`` (the device's preset) or ``calibrated`` (the run's own profile, :func:`run_profile`)."""
    if what not in ("time", "memory"):
        raise ValueError(f"what: unknown {what!r}; allowed: time, memory")
    if mode not in ("preset", "calibrated"):
        raise ValueError(f"mode: unknown {mode!r}; allowed: preset, calibrated")
    device = run_profile(folder) if mode == "calibrated" else None
    if mode == "calibrated" and device is None:
        raise ValueError(f"{Path(folder).name}/profile.json: not found (the run's own device file)")
    df = datasets.load_measured(folder, "gpt_steps.csv")
    parts = []
    for i, r in enumerate(df.to_dict("records")):
        label = f"{r['kind']} {r['model']} b{int(r['batch'])} s{int(r['seq'])} {r['attention']} {r['dtype']}"
        peak = float(r["peak_allocated_bytes"]) if pd.notna(r.get("peak_allocated_bytes")) else np.nan
        wanted = np.isfinite(float(r["median_ms"])) if what == "time" else r["kind"] == "train" and peak > 0
        if not wanted:
            continue  # a failed run (its error is in the file), or no memory measured
        try:
            got, status, note = predict_step(r, device), "ok", ""
        except ValueError as e:
            got, status, note = dict.fromkeys(("time_s", "p10_s", "p90_s", "memory_bytes"), np.nan), \
                "not predicted", " ".join(str(e).split())
        if what == "time":
            parts.append(read_frame(name, mode, [i + 2], [label], f"{r['kind']} {r['device']}",
                                [r["median_ms"] * 1e-3], [got["time_s"]], "s", status, note, p10=[got["p10_s"]],
                                p90=[got["p90_s"]]))
        else:
            parts.append(read_frame(name, mode, [i + 2], [label], f"memory {r['device']}", [peak],
                                [got["memory_bytes"]], "B", status, note))
    return pd.concat(parts, ignore_index=True) if parts else read_frame(name, mode, [], [], [], [], [], "s")
