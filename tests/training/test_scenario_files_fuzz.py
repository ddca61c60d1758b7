"""Scenario files, valid and near-valid, through ``estimate`` and ``infer`` in-process (issue 39): no exception but
``ValueError`` (one line), every number finite and >= 0, the step never slower with more inter-node bandwidth, and a
token's decode latency never smaller at a larger batch.

A local run draws ``CONCURRENCY_MODEL_FUZZ_FILES`` files (default 60, a few seconds); CI (``.ci/run``) sets it to the
issue's 2,000: 800 training and 1,200 inference files, about 200 s on one core with the compiled-function cache
(20 s for 200 files here)."""
import json
import math
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concurrency_model.serving.decoder import infer
from concurrency_model.training.estimate import estimate

FUZZ_FILES = int(os.environ.get("CONCURRENCY_MODEL_FUZZ_FILES", "60"))
PRESETS = os.path.join(os.path.dirname(__file__), "..", "..", "concurrency_model", "presets", "clusters")
GPTS = [{"kind": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 500},
        {"kind": "gpt", "layers": 4, "hidden": 128, "heads": 4, "seq_len": 128, "vocab": 1000}]
HOSTILE = [0, -1, 1.5, 3, 64, "x", "", None, [], {}, True, float("nan"), float("inf"), -1e-9, 10**9, 2**53 + 1,
           1e308, "fp8", "ring", "1f1b", 10**30]


def _cluster(name: str, inter_scale: float) -> dict:
    with open(os.path.join(PRESETS, f"{name}.json")) as f:
        c = json.load(f)
    c["inter"]["bw_Bps"] *= inter_scale
    return c


def _numbers(x, where=""):
    if isinstance(x, dict):
        for k, v in x.items():
            yield from _numbers(v, f"{where}.{k}")
    elif isinstance(x, (list, tuple)):
        for i, v in enumerate(x):
            yield from _numbers(v, f"{where}[{i}]")
    elif isinstance(x, (int, float)) and not isinstance(x, bool):
        yield where, x


def _check_numbers(out: dict) -> None:
    bad = [(k, v) for k, v in _numbers(out) if not (math.isfinite(v) and v >= 0)]
    assert not bad, bad[:5]


def _run(fn, sc: dict, tmp_path, name: str):
    """``fn`` of the scenario written to a file; None when it is refused with a one-line ValueError."""
    path = tmp_path / name
    path.write_text(json.dumps(sc))
    try:
        return fn(str(path)).to_dict()
    except ValueError as e:
        assert str(e) and "\n" not in str(e), str(e)
        return None


def _mutate(sc: dict, mutation):
    if mutation is None:
        return sc
    section, key, value = mutation
    return {**sc, section: {**(sc.get(section) or {}), key: value}}


TRAIN_MUTATIONS = st.none() | st.tuples(
    st.sampled_from(["parallel", "training"]),
    st.sampled_from(["data", "tensor", "pipeline", "microbatch_size", "global_batch", "schedule", "dtype", "recompute",
                     "zero_stage", "host_overhead_s", "straggler_cv", "overlap", "ps_servers", "sequence_parallel",
                     "framework"]),
    st.sampled_from(HOSTILE))
TRAIN = st.fixed_dictionaries({
    "model": st.sampled_from(["gpt2", "bert-base", *GPTS]),
    "cluster": st.sampled_from(["dgx-a100", "dgx-h100"]),
    "data": st.sampled_from([1, 2, 16]), "tensor": st.sampled_from([1, 2, 4]), "pipeline": st.sampled_from([1, 2]),
    "mb": st.sampled_from([1, 2, 4]), "m": st.sampled_from([1, 2, 4]), "schedule": st.sampled_from(["1f1b", "gpipe"]),
    "sp": st.booleans(), "dtype": st.sampled_from(["bf16", "fp16", "fp32"]),
    "recompute": st.sampled_from(["none", "selective", "full"]), "zero": st.integers(0, 3),
    "overlap": st.sampled_from([None, True, False]),
    "framework": st.sampled_from([None, "megatron", "deepspeed", "fsdp2"]),
    "host": st.sampled_from([None, 0.0, 5e-5, 1e-3]), "cv": st.sampled_from([0.0, 0.05]),
    "mutation": TRAIN_MUTATIONS})


def _train(d: dict, inter_scale: float = 1.0) -> dict:
    sc = {"model": d["model"], "cluster": _cluster(d["cluster"], inter_scale),
          "parallel": {"data": d["data"], "tensor": d["tensor"], "pipeline": d["pipeline"], "microbatch_size": d["mb"],
                       "global_batch": d["data"] * d["mb"] * d["m"], "schedule": d["schedule"],
                       "sequence_parallel": d["sp"] and d["tensor"] > 1},
          "training": {"dtype": d["dtype"], "recompute": d["recompute"], "zero_stage": d["zero"],
                       "overlap": d["overlap"], "host_overhead_s": d["host"], "straggler_cv": d["cv"],
                       "framework": d["framework"]}}
    return _mutate(sc, d["mutation"])


@settings(max_examples=max(1, FUZZ_FILES * 2 // 5), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(TRAIN)
def test_estimate_of_scenario_files(tmp_path, d):
    out = _run(estimate, _train(d), tmp_path, "train.json")
    if out is None:
        return
    _check_numbers(out)
    faster = _run(estimate, _train(d, inter_scale=4.0), tmp_path, "train-4x.json")
    assert faster is not None
    assert faster["step_time_s"] <= out["step_time_s"] * (1 + 1e-9)  # more inter-node bandwidth is never slower


INFER = st.fixed_dictionaries({
    "model": st.sampled_from(["gpt2", *GPTS]), "cluster": st.sampled_from(["dgx-a100", "dgx-h100", "dgx-h200"]),
    "tensor": st.sampled_from([1, 2]), "batch": st.integers(1, 48), "prompt": st.sampled_from([16, 64, 128]),
    "decode": st.sampled_from([1, 8, 32]), "dtype": st.sampled_from(["fp16", "bf16"]),
    "host": st.sampled_from([0.0, 5e-6, 6.3e-5, 2e-4]), "batching": st.sampled_from(["static", "continuous"]),
    "mutation": st.none() | st.tuples(st.just("inference"), st.sampled_from(
        ["batch", "prompt_len", "decode_len", "dtype", "host_overhead_s", "prefix_len", "kv_dtype", "load_rps",
         "max_batched_tokens"]), st.sampled_from(HOSTILE))})


def _infer(d: dict, batch: int) -> dict:
    sc = {"model": d["model"], "cluster": d["cluster"], "parallel": {"tensor": d["tensor"]},
          "inference": {"batch": batch, "prompt_len": d["prompt"], "decode_len": d["decode"], "dtype": d["dtype"],
                        "host_overhead_s": d["host"], "batching": d["batching"]}}
    return _mutate(sc, d["mutation"])


@settings(max_examples=max(1, FUZZ_FILES * 3 // 5), deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(INFER)
def test_infer_of_scenario_files(tmp_path, d):
    out = _run(infer, _infer(d, d["batch"]), tmp_path, "infer.json")
    if out is None:
        return
    _check_numbers(out)
    if d["mutation"] is not None and d["mutation"][1] == "batch":
        return  # the batch itself was replaced
    more = _run(infer, _infer(d, d["batch"] + 1), tmp_path, "infer-b.json")
    if more is not None:  # a batch one larger may not fit
        assert more["decode_s_per_token"] >= out["decode_s_per_token"] * (1 - 1e-9)
