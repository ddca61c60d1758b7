"""Routing imbalance of expert parallelism (parallel.expert_imbalance): the busiest device of an expert group sets
each mixture-of-experts layer's time, in training (estimate, sweep) and serving (infer)."""
from __future__ import annotations

import copy
import json
import math
from statistics import NormalDist

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.serving.decoder import infer
from concurrency_model.training.workload import workload
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.ops.routing import check_imbalance, imbalance
from concurrency_model.scenario import load_scenario
from concurrency_model.sweep import sweep
from concurrency_model.timing.graph import expert_gemms

from test_expert_parallel import BASE, CFG


def run(f=None, **parallel):
    sc = copy.deepcopy(BASE)
    sc["parallel"].update(parallel)
    if f is not None:
        sc["parallel"]["expert_imbalance"] = f
    return estimate(sc)


def test_uniform_routing_by_hand():
    # 16 routed rows over 8 devices: binomial(16, 1/8) loads, mean 2, relative spread sqrt(7 / 16); the expected
    # maximum of 8 standard normals by Blom's position: Phi^-1((8 - 0.375) / 8.25)
    z8 = NormalDist().inv_cdf((8 - 0.375) / 8.25)
    assert imbalance("uniform", 16, 8) == pytest.approx(1 + z8 * math.sqrt(7 / 16), rel=1e-9)
    assert imbalance("uniform", 10**9, 8) == pytest.approx(1.0, abs=2e-4)
    assert imbalance("uniform", 2, 64) == 32.0  # whole rows: the busiest of 64 devices has one of the 2
    assert imbalance("uniform", 1, 64) == 64.0  # one row: on one device
    assert imbalance(1.4, 100, 1) == 1.0        # one device holds every expert
    assert imbalance(1.4, 100, 8) == 1.4


@pytest.mark.parametrize("rows,e", [(16, 8), (64, 8), (1024, 8), (8192, 4), (256, 64), (2, 64), (12, 8)])
def test_uniform_routing_against_draws(rows, e):
    """The Gaussian approximation is within 10% of the drawn maximum load (low: the binomial's skew)."""
    draws = np.random.default_rng(1).multinomial(rows, [1 / e] * e, size=20000).max(axis=1).mean() / (rows / e)
    assert imbalance("uniform", rows, e) == pytest.approx(draws, rel=0.10)
    assert imbalance("uniform", rows, e) <= draws * 1.005


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 10**7), st.sampled_from([2, 4, 8, 16, 64]))
def test_uniform_is_a_factor_that_falls_with_the_rows(rows, e):
    f = imbalance("uniform", rows, e)
    assert 1.0 < f <= e
    assert imbalance("uniform", 2 * rows, e) <= f


@pytest.mark.parametrize("bad", [0.9, 0, -1, float("nan"), float("inf"), True, "zipf", None, [1.2]])
def test_bad_imbalance_is_refused_by_name(bad):
    with pytest.raises(ValueError, match=r"^parallel.expert_imbalance: "):
        check_imbalance("parallel.expert_imbalance", bad)
    sc = copy.deepcopy(BASE)
    sc["parallel"]["expert_imbalance"] = bad
    with pytest.raises(ValueError, match=r"^parallel.expert_imbalance: "):
        load_scenario(sc)


def test_expert_gemms_run_the_busiest_rows():
    moe = {"experts": 8, "top_k": 2}
    assert expert_gemms(moe, 4096, 4, 1.5) == (2, 3072)        # 2 experts a device, 1.5 x 4,096 rows between them
    assert expert_gemms(moe, 4096, 4, 8.0) == (2, 8192)        # capped at the group's 4 x 4,096 rows
    assert expert_gemms(moe, 4096, 1, 1.5) == (8, 512)         # one device holds all 8 experts: no imbalance
    assert expert_gemms({**moe, "fixed_capacity": True}, 4096, 4, 1.5) == (2, 2048)  # padded buffers


def test_training_step_waits_for_the_busiest_device():
    sc = {"expert": 2}
    balanced, default = run(1.0, **sc), run(**sc)
    assert default.step_time_s == balanced.step_time_s
    skewed = run(1.5, **sc)
    # the all-to-alls carry 1.5 x the bytes: per MoE layer and microbatch four of n = b s top_k h bf16 values
    w = workload(BASE["model"], load_scenario(BASE).cluster, "bf16", expert_imbalance=1.5)
    dispatch = next(n for n in w.graph(4).layers() if n.kind == "moe_dispatch")
    f, _ = w.expert_triples(dispatch, 4, 1, 2)
    plain = workload(BASE["model"], load_scenario(BASE).cluster, "bf16")._coll(
        "alltoall", 1.5 * 4 * dispatch.numel * 2, 2, 2, 1)
    assert np.allclose(np.asarray(f, float), 2 * np.asarray(plain, float), rtol=1e-12)  # dispatch and combine
    assert skewed.breakdown["expert_parallel_comm_s"] > 1.4 * balanced.breakdown["expert_parallel_comm_s"]
    # the experts' GEMMs grow, the rest of the layer does not
    assert balanced.breakdown["forward_s"] < skewed.breakdown["forward_s"] < 1.5 * balanced.breakdown["forward_s"]
    assert run(1.2, **sc).step_time_s < skewed.step_time_s < run(2.0, **sc).step_time_s
    T, at = step_expression({**copy.deepcopy(BASE), "parallel": {**BASE["parallel"], **sc, "expert_imbalance": 1.5}})
    assert float(T.subs(at)) == pytest.approx(skewed.step_time_s, rel=1e-12)


def test_no_expert_group_or_capacity_buffers_means_no_imbalance():
    assert run(1.5).step_time_s == run().step_time_s  # expert 1: each device runs every expert
    sc = copy.deepcopy(BASE)
    sc["model"] = {**sc["model"], "capacity_factor": 1.25}
    sc["parallel"]["expert"] = 2
    fixed = estimate(sc).step_time_s
    sc["parallel"]["expert_imbalance"] = 1.5
    assert estimate(sc).step_time_s == fixed


def test_serving_waits_for_the_busiest_device():
    def sc(f):
        return {"model": {"hf_config": CFG}, "cluster": "dgx-h100",
                "parallel": {"data": 4, "expert": 4, "expert_imbalance": f},
                "inference": {"batch": 64, "prompt_len": 512, "decode_len": 64, "dtype": "bf16"}}
    one, uni, two = infer(sc(1.0)), infer(sc("uniform")), infer(sc(2.0))
    for k in ("prefill_s", "decode_s_per_token"):
        assert getattr(one, k) < getattr(uni, k) < getattr(two, k)
    # a decode step routes 16 x 2 rows a device, 128 in the group of 4: uniform routing's factor is large there
    assert imbalance("uniform", 128, 4) == pytest.approx(1.0 + NormalDist().inv_cdf(3.625 / 4.25)
                                                         * math.sqrt(3 / 128), rel=1e-9)


def test_sweep_keeps_the_imbalance_and_agrees_with_estimate():
    sc = {**copy.deepcopy(BASE), "parallel": {"global_batch": 32, "expert_imbalance": 1.5}}
    r = sweep(sc, 8)
    flat = r.frame
    row = flat[flat["expert"] == 4].sort_values("step_time_s").iloc[0]
    again = r.scenario(row)
    assert again["parallel"]["expert_imbalance"] == 1.5
    assert estimate(again).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    balanced = sweep({**sc, "parallel": {"global_batch": 32}}, 8).frame
    same = (balanced[list(r.layouts.columns.intersection(balanced.columns))] == row[
        list(r.layouts.columns.intersection(balanced.columns))]).all(axis=1)
    assert balanced.loc[same, "step_time_s"].iloc[0] < row["step_time_s"]


def test_an_imbalance_on_a_dense_model_is_refused():
    msg = r"^parallel.expert_imbalance: 'uniform' needs a model with mixture-of-experts layers; this one has none$"
    dense = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 2, "global_batch": 8,
                                                                   "expert_imbalance": "uniform"}}
    with pytest.raises(ValueError, match=msg):
        estimate(dense)
    with pytest.raises(ValueError, match=msg):
        sweep({**dense, "parallel": {"global_batch": 8, "expert_imbalance": "uniform"}}, 2)
    with pytest.raises(ValueError, match=msg):
        infer({**dense, "parallel": {"expert_imbalance": "uniform"},
               "inference": {"batch": 1, "prompt_len": 64, "decode_len": 8}})


def test_estimate_reports_the_factor(tmp_path, capsys):
    from concurrency_model.cli import main
    sc = copy.deepcopy(BASE)
    sc["parallel"].update(expert=2, expert_imbalance="uniform")
    e = estimate(sc)
    # 4 samples x 1,024 tokens x top 2 routed rows a device, 2 devices: 16,384 rows in the group
    assert e.expert_imbalance_factor == imbalance("uniform", 4 * 1024 * 2 * 2, 2)
    assert e.to_dict()["parallel"]["expert_imbalance_factor"] == e.expert_imbalance_factor
    assert "expert_imbalance_factor" not in run().to_dict()["parallel"]  # no expert parallelism
    f = tmp_path / "moe.json"
    f.write_text(json.dumps(sc))
    assert main(["estimate", "--scenario", str(f)]) == 0
    assert f"experts split over 2 replicas (busiest device {e.expert_imbalance_factor:.3f}x the mean rows)" in \
        capsys.readouterr().out
