"""Each dataset of :mod:`.registry` through its predictor: loaders and per-row predictions in the registry's
row shape (:data:`COLUMNS`)."""
from __future__ import annotations

from dataclasses import replace

import numpy as np
import pandas as pd

from .. import datasets
from ..calibrate.compute import fit_gemm
from ..calibrate.fit_comm import LOSS, MODELS, fit_alpha_beta, predict
from ..hardware.devices import load_device
from ..timing import gemm_coeffs
from ..uncertainty import group_sigma, leave_one_out_sigma, lognormal_band
from . import collectives, inference, kernels, modern, scaling, sparse, training, trtllm

COLUMNS = ["dataset", "mode", "row", "label", "group", "measured", "predicted", "unit", "ape", "status", "note",
           "p10", "p90"]  # p10/p90: the prediction's 80% band where the predictor gives one (training steps)
KERNELS = {"deepbench-gemm": "gemm", "deepbench-conv": "conv", "deepbench-rnn": "rnn"}
KERNEL_INFERENCE = ("deepbench-inference",)  # int8 GEMM / conv and fp32 RNN forward kernels, all three files
KERNEL_SPARSE = ("deepbench-sparse",)  # pruned fp32 GEMMs (CSR) and the same products dense (:mod:`.sparse`)
COLLECTIVES = {"deepbench-allreduce": "DeepBench", "nccl-tests-allreduce": "nccl-tests", "vtrain-allreduce": "vTrain",
               "nccl-tests-allgather": "nccl-tests all-gather"}
TRAINING = {"vtrain-single": "vtrain_single", "vtrain-multi": "vtrain_multi", "megatron-2020": "megatron_2020",
            "megatron-2021": "megatron_2021", "narayanan2021-table2": "narayanan_table2"}
# modern training stacks (:mod:`.modern`): name -> (its set, the compared quantity)
MODERN = {"torchtitan-llama3": ("torchtitan", "tps"), "torchtitan-llama3-memory": ("torchtitan", "memory"),
          "llmfoundry-mpt": ("llmfoundry", "tps"), "megatron-bridge": ("megatron_bridge", "tps"),
          "megatron-bridge-moe": ("megatron_bridge_moe", "tps"), "nemo-2407-longseq": ("nemo", "tps"),
          "bigscience-tr11": ("bigscience", "tps"), "bigscience-tr11-memory": ("bigscience", "memory")}
SCALING = {"tf-cnn-benchmarks": "tf_cnn_benchmarks", "torchgpipe": "torchgpipe", "horovod": "horovod",
           "dle-resnet50": "dle_resnet50", "dle-resnext101": "dle_resnext101", "dle-se-resnext101": "dle_se_resnext101",
           "dle-bert": "dle_bert"}
INFERENCE = ("fastertransformer-13b",)  # prefill, decode per token and total latency (:mod:`.inference`)
TRTLLM = ("trtllm-hopper",)  # output tokens/s at full load, TensorRT-LLM's Hopper table (:mod:`.trtllm`)
FILES = {"deepbench-gemm": "deepbench_gemm.csv", "deepbench-conv": "deepbench_conv.csv",
         "deepbench-rnn": "deepbench_rnn.csv", "deepbench-allreduce": "deepbench_allreduce.csv",
         "nccl-tests-allreduce": "nccltests_allreduce_sweeps.csv", "vtrain-allreduce": "vtrain_allreduce_lut_a100.csv",
         "nccl-tests-allgather": "nccltests_allgather_a3mega.csv",
         "vtrain-single": "vtrain_ground_truth_single.csv",
         "vtrain-multi": "vtrain_ground_truth_multi.csv", "megatron-2020": "megatron_readme_scaling.csv",
         "megatron-2021": "megatron_readme_scaling.csv",
         "narayanan2021-table2": "narayanan2021_table2_ptd_vs_zero3.csv",
         "tf-cnn-benchmarks": "tf_cnn_benchmarks_dp_scaling_2017.csv", "torchgpipe": "torchgpipe_pipeline_speed.csv",
         "horovod": "horovod_docs_scaling_efficiency.csv", "dle-resnet50": "nvidia_dle_training_perf_long.csv",
         "dle-resnext101": "nvidia_dle_training_perf_long.csv",
         "dle-se-resnext101": "nvidia_dle_training_perf_long.csv",
         "dle-bert": "nvidia_dle_training_perf_long.csv",
         "fastertransformer-13b": "fastertransformer_13b_inference_latency.csv",
         "trtllm-hopper": "trtllm_perf_overview_hopper.csv",
         "deepbench-inference": "deepbench_gemm.csv, deepbench_conv.csv, deepbench_rnn.csv",
         "deepbench-sparse": "deepbench_sparse.csv",
         "torchtitan-llama3": "torchtitan_llama3_train_tps_memory.csv",
         "torchtitan-llama3-memory": "torchtitan_llama3_train_tps_memory.csv",
         "llmfoundry-mpt": "llmfoundry_mpt_train_throughput.csv",
         "megatron-bridge": "megatron_bridge_train_throughput.csv",
         "megatron-bridge-moe": "megatron_bridge_train_throughput.csv",
         "nemo-2407-longseq": "nemo_2407_and_longseq_train_throughput.csv",
         "bigscience-tr11": "bigscience_tr11_layout_search.csv",
         "bigscience-tr11-memory": "bigscience_tr11_layout_search.csv"}
# rows in file order, quick mode
QUICK_EVERY = {"vtrain-single": 20, "vtrain-multi": 8, "megatron-2021": 2, "llmfoundry-mpt": 6, "trtllm-hopper": 8,
               "megatron-bridge-moe": 6, "torchtitan-llama3": 3, "torchtitan-llama3-memory": 2,
               "nemo-2407-longseq": 3, "bigscience-tr11": 3, "bigscience-tr11-memory": 3}
MIN_BYTES = 64 * 1024  # all-reduce sizes compared (issue 4's range)
# why a dataset's predictions carry no 80% band (benchmarks/accuracy.py prints it in the note column)
NO_BAND = {
    "torchgpipe": "no band: speedup = ratio of two estimates on the same hardware, whose sampled scales "
                  "mostly cancel; not propagated",
    "deepbench-sparse": "no band: its three boards share one chip (GP102), so no other device's residuals to "
                        "take a spread from",
    "vtrain-allreduce": "no band: one system (one A100 node), so no other system's preset residuals to take a spread "
                        "from",
    "nccl-tests-allgather": "no band: one system (two A3-Mega nodes), so no other system's all-gather residuals to "
                            "take a spread from",
    "horovod": "no band: scaling efficiency = ratio of two estimates (the scales mostly cancel); not propagated",
    "torchtitan-llama3-memory": "no band: memory is counted, not timed; the uncertainty model samples rates, not "
                                "bytes",
    "bigscience-tr11-memory": "no band: memory is counted, not timed; the uncertainty model samples rates, not bytes",
    "trtllm-hopper": "no band: the full-load throughput's band is not propagated (the slots follow from memory, "
                     "the iteration's band is not carried through max_throughput)",
}


def no_band_reason(name: str) -> str:
    """Why ``name`` has no band (:data:`NO_BAND`), or ``""``."""
    if name.startswith("measured-steps-") and name.endswith("-memory"):
        return "no band: memory is counted, not timed; the uncertainty model samples rates, not bytes"
    return NO_BAND.get(name, "")


_KERNEL_KEYS = ["source_file", "sheet", "source_row"]  # unique per row of a DeepBench file


def read_frame(name, mode, row, label, group, measured, predicted, unit, status="ok", note="", p10=np.nan,
           p90=np.nan) -> pd.DataFrame:
    measured, predicted = np.asarray(measured, dtype=float), np.asarray(predicted, dtype=float)
    with np.errstate(invalid="ignore", divide="ignore"):
        ape = np.abs(predicted - measured) / measured
    return pd.DataFrame({"dataset": name, "mode": mode, "row": np.asarray(row, dtype=np.int64), "label": label,
                         "group": group, "measured": measured, "predicted": predicted, "unit": unit, "ape": ape,
                         "status": status, "note": note, "p10": np.asarray(p10, dtype=float),
                         "p90": np.asarray(p90, dtype=float)}, columns=COLUMNS)


# --- kernels ------------------------------------------------------------------------------------------------
def kernel_rows(op: str, benchmark: str = "train") -> pd.DataFrame:
    """:func:`.kernels.rows` with each row's file line in ``row``."""
    raw = datasets.load(f"deepbench_{op}")
    lines = raw[_KERNEL_KEYS].assign(row=raw.index + 2)
    return kernels.rows(op, benchmark).merge(lines, on=_KERNEL_KEYS, how="left")


_KERNEL_LABEL = {"gemm": "{pass} m={m} n={n} k={k}",
                 "conv": "{pass} n={n} c={c} {h}x{w} k={k} {filter_h}x{filter_w} stride {stride_h} pad {pad_h}",
                 "rnn": "{pass} {cell} hidden={hidden_units} n={n} t={timesteps}"}


def kernel_frame(name: str, mode: str, p: pd.DataFrame) -> pd.DataFrame:
    label = [_KERNEL_LABEL[r["op"]].format(**r) for r in p.to_dict("records")]
    group = (p["preset"] + " " + p["math_dtype"]).to_numpy()
    lo, hi = (p[c] if c in p else np.nan for c in ("p10_s", "p90_s"))
    return read_frame(name, mode, p["row"], label, group, p["measured_s"], p["predicted_s"], "s", p10=lo, p90=hi)


def _log_ratio(p: pd.DataFrame) -> np.ndarray:
    return np.log(p["predicted_s"].to_numpy(float) / p["measured_s"].to_numpy(float))


def kernel_band(p: pd.DataFrame, reference: pd.DataFrame, other_devices: bool = True) -> pd.DataFrame:
    """``p`` with ``p10_s``, ``p90_s``: per op and device, the log-normal 80% band whose spread is
    :func:`~concurrency_model.uncertainty.group_sigma` of the ``reference`` rows of that op (predicted the
    same way), of the *other* devices when ``other_devices`` (leave-one-device-out: the systematic part is
    the other devices' median log ratios, the scatter their per-kernel spread), else of all of them (a
    held-out half: the training half of the same device)."""
    sigma = np.full(len(p), np.nan)
    for (op, preset), idx in p.reset_index(drop=True).groupby(["op", "preset"], sort=False).indices.items():
        ref = reference[(reference["op"] == op) & ((reference["preset"] != preset) if other_devices else True)]
        sigma[idx] = group_sigma(_log_ratio(ref), ref["preset"].to_numpy())
    lo, hi = lognormal_band(p["predicted_s"], sigma)
    return p.reset_index(drop=True).assign(p10_s=lo, p90_s=hi)


def kernel_datasheet(df: pd.DataFrame, preset: str) -> pd.DataFrame:
    """Rows of ``preset`` predicted with constants fitted on the other devices' rows; the band from the
    other devices' rows under the same constants (:func:`kernel_band`)."""
    eff = kernels.fit(df[df["preset"] != preset], label=f"DeepBench without {preset}")
    everyone = kernels.predict(df.reset_index(drop=True), {d: eff for d in df["preset"].unique()})
    mine = everyone[everyone["preset"] == preset]
    return kernel_band(mine, everyone)


def kernel_held_out(df: pd.DataFrame) -> pd.DataFrame:
    """One device's rows: constants fitted on every other row, predicted on the rest; the band from the
    training half's residuals (:func:`kernel_band`)."""
    train, test = kernels.halves(df.reset_index(drop=True))
    eff = {df["preset"].iloc[0]: kernels.fit(train, label="half of the device")}
    return kernel_band(kernels.predict(test, eff), kernels.predict(train, eff), other_devices=False)


def kernel_inference(per_op: list) -> pd.DataFrame:
    """DeepBench's inference kernels (int8 GEMMs and convolutions, fp32 RNNs, forward; ``per_op``: each op's
    :func:`kernel_rows` of ``"inference"``, one op at a time as each has its own columns) with the presets
    and the default constants; bands as the training kernels' preset mode (:func:`kernel_band`)."""
    parts = []
    for rows in per_op:
        p = kernels.predict(rows)
        parts.append(kernel_frame("deepbench-inference", "preset", kernel_band(p, p)))
    return pd.concat(parts, ignore_index=True)


def kernel_sparse() -> pd.DataFrame:
    r = sparse.evaluate()
    note = np.where(r["status"] == "ok", "measured speed-up " + r["measured_speedup"].map("{:.2f}".format)
                    + ", predicted " + r["predicted_speedup"].map("{:.2f}".format), "")
    return read_frame("deepbench-sparse", "preset", r["row"], r["label"], r["preset"].fillna(r["device"]) + " "
                  + r["kind"], r["measured"], r["predicted"], "s", r["status"], note)


# --- collectives --------------------------------------------------------------------------------------------
def collective_rows(source: str) -> pd.DataFrame:
    """As :func:`.collectives.rows`, one source at a time and with the file line in ``row``."""
    if source == "vTrain":
        return collectives.vtrain_rows()
    if source == "nccl-tests all-gather":
        return collectives.allgather_rows()
    if source == "nccl-tests":
        nt = datasets.load("nccltests_allreduce_sweeps")
        nt = nt[nt["collective"] == "all_reduce"]
        out = pd.DataFrame({"system": nt["run_id"], "source": source, "ranks": nt["num_ranks"],
                            "nodes": nt["num_nodes"], "size_bytes": nt["size_bytes"].astype(float),
                            "measured_s": nt["oop_time_us"] * 1e-6, "row": nt.index + 2})
    else:
        db = datasets.load("deepbench_allreduce")
        tier = np.where(db["num_nodes"] > 1, "multi-node", "one node")
        out = pd.DataFrame({"system": db["device"] + " / " + db["algorithm"] + " / " + tier, "source": source,
                            "ranks": db["num_ranks"], "nodes": db["num_nodes"], "size_bytes": db["size_floats"] * 4.0,
                            "measured_s": db["mean_time_ms"] * 1e-3, "row": db.index + 2})
    out = out[out["measured_s"] > 0]
    return out.sort_values(["system", "ranks", "size_bytes"]).reset_index(drop=True)


def collective_frame(name: str, mode: str, df: pd.DataFrame) -> pd.DataFrame:
    if name == "vtrain-allreduce":
        p = collectives.vtrain_preset(df)
    else:
        p = collectives.fitted(df) if mode == "held-out" else collectives.preset(df)
    p = p[p["size_bytes"] >= MIN_BYTES].reset_index(drop=True)
    label = [f"{int(r)} ranks, {int(n):,} B" for r, n in zip(p["ranks"], p["size_bytes"])]
    lo, hi = collective_band(p, mode)
    return read_frame(name, mode, p["row"], label, p["system"].to_numpy(), p["measured_s"], p["predicted_s"], "s",
                  p10=lo, p90=hi)


def collective_band(p: pd.DataFrame, mode: str) -> tuple[np.ndarray, np.ndarray]:
    """The 80% band of each all-reduce: ``held-out``, the system's leave-one-out spread on its training
    rows (``loo_sigma``); ``preset``, the other systems' preset residuals (:func:`~concurrency_model.
    uncertainty.leave_one_out_sigma`, by system)."""
    if mode == "held-out":
        sigma = p["loo_sigma"].to_numpy(float)
    else:
        r, g = np.log(p["predicted_s"] / p["measured_s"]).to_numpy(), p["system"].to_numpy()
        # one figure a system (it depends on the held-out system alone), not one a row: 7,204 rows, a few systems
        per_system = {s: leave_one_out_sigma(r, g, s) for s in dict.fromkeys(g.tolist())}
        sigma = np.array([per_system[s] for s in g.tolist()])
    return lognormal_band(p["predicted_s"], sigma)


# --- training -----------------------------------------------------------------------------------------------
def training_rows(name: str) -> pd.DataFrame:
    key = TRAINING[name]
    if key == "vtrain_single":  # the odd rows: the even ones fit the host seconds per kernel
        return training.vtrain_held_out_rows()
    if key.startswith("vtrain"):
        return training.vtrain_rows(key.split("_")[1])
    if key.startswith("megatron"):
        df = training.megatron_rows()
        return df[df["dataset"] == key].reset_index(drop=True)
    return training.narayanan_rows()


def training_mode(name: str) -> str:
    """``held-out`` for vtrain-single (its odd rows; the even rows fit ``HOST_S_PER_KERNEL``), else ``preset``."""
    return "held-out" if name == "vtrain-single" else "preset"


def training_chunk(name: str, df: pd.DataFrame) -> pd.DataFrame:
    r = training.evaluate(df, workers=1)
    by_time = training.METRIC[TRAINING[name]] == "iteration_time"
    meas, pred = (r["measured_time_s"], r["predicted_time_s"]) if by_time else (r["measured_tflops"],
                                                                                r["predicted_tflops"])
    lo, hi = (r["predicted_time_p10_s"], r["predicted_time_p90_s"]) if by_time else (r["predicted_tflops_p10"],
                                                                                     r["predicted_tflops_p90"])
    label = [x["label"] if isinstance(x["label"], str) and x["label"] else
             "tensor {tensor:g} x data {data:g} x pipeline {pipeline:g}, microbatch {microbatch:g}, batch "
             "{global_batch:g}, hidden {hidden:g}, {layers:g} layers".format(**x) for x in r.to_dict("records")]
    group = r["gpus"].map(lambda g: f"{int(g)} GPUs") if name.startswith("vtrain") else \
        r["label"].astype(str).str.split(" ").str[0]
    return read_frame(name, training_mode(name), r["source_row"], label, group.to_numpy(), meas, pred,
                  "s" if by_time else "TFLOP/s per GPU", r["status"].to_numpy(), r["reason"].fillna("").to_numpy(),
                  lo.to_numpy(), hi.to_numpy())


# --- modern training stacks ---------------------------------------------------------------------------------
def modern_rows(name: str) -> pd.DataFrame:
    return modern.rows(MODERN[name][0])


def modern_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    """Rows of one modern set (:mod:`.modern`) predicted, in the registry's shape: tokens/s per GPU, or peak memory
    per GPU in bytes (``-memory``: the peak as the set's measurement read it, the caching allocator's reserved bytes
    for torchtitan's, nvidia-smi's for BigScience's). The registry passes the rows with the compared figure only."""
    what = MODERN[name][1]
    r = modern.evaluate(df, workers=1)
    note = np.where(r["status"] == "ok", r["note"], r["reason"].fillna(""))
    if what == "memory":
        return read_frame(name, "preset", r["source_row"], r["label"], r["group"].to_numpy(), r["measured_memory_bytes"],
                      r["predicted_peak_bytes"], "B", r["status"].to_numpy(), note)
    # the set the GH100's sustained rate was fitted on: its fit rows in-sample, its other rows held out
    fitted = (r["dataset"] == modern.SUSTAINED_FIT_SET).all()
    mode = np.where(modern.in_sustained_fit(r), "in-sample", "held-out") if fitted else "preset"
    return read_frame(name, mode, r["source_row"], r["label"], r["group"].to_numpy(), r["measured_tps"],
                  r["predicted_tps"], "tokens/s per GPU", r["status"].to_numpy(), note, r["predicted_tps_p10"],
                  r["predicted_tps_p90"])


# --- data-parallel scaling and pipeline speedups ------------------------------------------------------------
def scaling_rows(name: str) -> pd.DataFrame:
    return scaling.ROWS[SCALING[name]]()


def scaling_frame(name: str, df: pd.DataFrame) -> pd.DataFrame:
    r = scaling.evaluate(df)
    note = np.where(r["status"] == "ok", r["note"], r["reason"].fillna(""))
    return read_frame(name, "preset", r["source_row"], r["label"], r["group"].to_numpy(), r["measured"], r["predicted"],
                  scaling.METRIC[SCALING[name]][1], r["status"].to_numpy(), note, r["predicted_p10"].to_numpy(),
                  r["predicted_p90"].to_numpy())


def inference_frame() -> pd.DataFrame:
    f = inference.frame()
    return read_frame("fastertransformer-13b", "preset", f["row"], f["label"], f["group"], f["measured"], f["predicted"],
                  "s", p10=f["p10"], p90=f["p90"])


def trtllm_rows() -> pd.DataFrame:
    return trtllm.rows()


def trtllm_frame(df: pd.DataFrame) -> pd.DataFrame:
    """Rows of TensorRT-LLM's Hopper table (:mod:`.trtllm`) predicted at full load, in the registry's shape: output
    tokens/s of the system; rows without a model preset (MoE) ``unmappable`` with the reason."""
    r = trtllm.evaluate(df, workers=1)
    note = np.where(r["status"] == "ok", "slots " + r["slots"].fillna(0).astype(int).astype(str) + " ("
                    + r["limited_by"].fillna("").astype(str) + ")", r["reason"].fillna(""))
    return read_frame("trtllm-hopper", "preset", r["source_line"], r["label"], r["group"].to_numpy(), r["measured"],
                  r["predicted"], "output tokens/s", r["status"].to_numpy(), note)


# --- the toolkit's own measurements -------------------------------------------------------------------------
# calibrate compute's fitted device per backend (the host's BLAS, torch's CPU kernels, the GPU)
PROFILES = {"numpy": "profile.json", "torch": "profile-torch.json", "cuda": "profile-cuda.json"}


def measured_gemms(folder) -> pd.DataFrame:
    """The GEMM rows of a ``compute-*`` run whose backend has a fitted profile there (``numpy``: the host,
    ``profile.json``; ``torch``: its CPU kernels, ``profile-torch.json``, written since 2026-12-04; ``cuda``: the
    GPU, ``profile-cuda.json``), with the file line in ``row``."""
    df = datasets.load_measured(folder)
    backend = df["backend"] if "backend" in df else pd.Series("numpy", index=df.index)
    have = [b for b, f in PROFILES.items() if (folder / f).is_file()]
    if "numpy" not in have:
        raise ValueError(f"{folder.name}/profile.json: not found (the fitted device of the run)")
    keep = (df["op"] == "gemm") & backend.isin(have)
    return df[keep].assign(row=lambda d: d.index + 2, backend=backend[keep]).reset_index(drop=True)


def measured_compute(name: str, folder, mode: str) -> pd.DataFrame:
    """A ``compute-*`` run's GEMMs predicted with the profile of their backend (held-out: its efficiencies
    refitted on every other GEMM of the backend, the peaks kept)."""

    def seconds(d, rows):
        out = np.empty(len(rows))
        for dt, g in rows.groupby("dtype"):
            m, n, k = (g[c].to_numpy(np.int64) for c in ("m", "n", "k"))
            out[rows.index.get_indexer(g.index)] = gemm_coeffs(m, n, k, d, str(dt)).seconds(d)
        return out
    parts = []
    for backend, df in measured_gemms(folder).groupby("backend", sort=False):
        df, dev, lo, hi = df.reset_index(drop=True), load_device(folder / PROFILES[backend]), np.nan, np.nan
        if mode == "held-out":
            train, df = df.iloc[::2].reset_index(drop=True), df.iloc[1::2].reset_index(drop=True)
            dev = replace(dev, efficiency=fit_gemm(dev, *(train[c].to_numpy(np.int64) for c in ("m", "n", "k")),
                                                   train["dtype"].to_numpy(str), train["median_s"],
                                                   "every other GEMM"))
            lo, hi = _residual_band(seconds(dev, df), df["dtype"], np.log(seconds(dev, train) / train["median_s"]),
                                    train["dtype"])
        tag = "" if backend == "numpy" else f"{backend} "  # the host's rows keep their labels of before
        label = [f"{tag}gemm {m}x{n}x{k}" for m, n, k in zip(df["m"].astype(int), df["n"].astype(int),
                                                            df["k"].astype(int))]
        parts.append(read_frame(name, mode, df["row"], label, (tag + df["dtype"].astype(str)).to_numpy(), df["median_s"],
                            seconds(dev, df), "s", p10=lo, p90=hi))
    return pd.concat(parts, ignore_index=True)


def _residual_band(predicted, groups, train_log_ratio, train_groups) -> tuple[np.ndarray, np.ndarray]:
    """80% band of each prediction from its group's training residuals (:func:`~concurrency_model.
    uncertainty.group_sigma` of that group's training rows alone)."""
    r, tg, g = np.asarray(train_log_ratio, dtype=float), np.asarray(train_groups), np.asarray(groups)
    sigma = np.array([group_sigma(r[tg == x], tg[tg == x]) for x in g])
    return lognormal_band(predicted, sigma)


def measured_network(name: str, folder) -> pd.DataFrame:
    df = datasets.load_measured(folder).assign(row=lambda d: d.index + 2)
    parts = []
    for (coll, ranks), g in df.groupby(["collective", "num_ranks"], sort=False):
        if coll not in MODELS:
            raise ValueError(f"{folder.name}/measurements.csv: collective {coll!r} has no model; "
                             f"allowed: {', '.join(MODELS)}")
        g = g.sort_values("size_bytes")
        train, test = g.iloc[::2], g.iloc[1::2]
        if len(train) < 2 or not len(test):
            continue
        f = fit_alpha_beta(train["size_bytes"], int(ranks), train["time_us"] * 1e-6, MODELS[coll], loss=LOSS)
        pred = predict(MODELS[coll], f, test["size_bytes"], int(ranks))
        fit_r = np.log(np.asarray(predict(MODELS[coll], f, train["size_bytes"], int(ranks)), dtype=float)
                       / (train["time_us"].to_numpy(float) * 1e-6))  # the calibration residuals
        lo, hi = _residual_band(pred, np.zeros(len(test)), fit_r, np.zeros(len(train)))
        parts.append(read_frame(name, "held-out", test["row"], [f"{int(s):,} B" for s in test["size_bytes"]],
                            f"{coll} {int(ranks)} ranks", test["time_us"] * 1e-6, pred, "s", p10=lo, p90=hi))
    return pd.concat(parts, ignore_index=True) if parts else read_frame(name, "held-out", [], [], [], [], [], "s")
