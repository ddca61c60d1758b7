"""Overlap interference: a tier's overlap_slowdown charges the compute that runs beside overlapped transfers."""
from __future__ import annotations

import json

import pytest

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.training.estimate import estimate
from concurrency_model.sweep import sweep

PRESET = json.loads(json.dumps(load_cluster("dgx-a100").to_dict()))


def cluster(kappa: float) -> dict:
    c = json.loads(json.dumps(PRESET))
    c["inter"]["overlap_slowdown"] = kappa
    c["device"] = "a100-sxm4-80gb"
    return c


def scenario(kappa: float, overlap: bool = True) -> dict:
    return {"model": "gpt2", "cluster": cluster(kappa), "parallel": {"data": 32, "microbatch_size": 8,
            "global_batch": 512}, "training": {"dtype": "fp16", "overlap": overlap, "framework": "ideal"}}


def test_zero_is_free_overlap_and_one_is_no_overlap():
    free, none = estimate(scenario(0.0)), estimate(scenario(1.0))
    serial = estimate(scenario(0.0, overlap=False))
    assert free.breakdown["data_parallel_overlapped_s"] > 0
    assert free.breakdown["overlap_interference_s"] == 0
    assert none.step_time_s == pytest.approx(serial.step_time_s, rel=1e-12)
    half = estimate(scenario(0.5))
    assert half.step_time_s == pytest.approx(free.step_time_s + 0.5 * free.breakdown["data_parallel_overlapped_s"],
                                             rel=1e-12)


def test_only_the_tier_crossed_counts():
    # 8 GPUs in one node: the all-reduce stays on NVSwitch, the network tier's factor changes nothing
    one_node = {**scenario(1.0), "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64}}
    base = {**scenario(0.0), "parallel": one_node["parallel"]}
    assert estimate(one_node).step_time_s == estimate(base).step_time_s


def test_sweep_agrees_with_estimate_and_bad_values_are_refused():
    r = sweep({**scenario(0.4), "parallel": {"global_batch": 512, "tensor": 1, "pipeline": 1}}, 32)
    row = r.top(1).iloc[0]
    assert estimate(r.scenario(row)).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    for bad in (-0.1, 1.5, "x"):
        with pytest.raises(ValueError, match="inter.overlap_slowdown"):
            estimate(scenario(bad))
