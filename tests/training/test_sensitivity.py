"""Elasticities of the step time: symbolic derivatives against finite differences and Euler's identity."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from concurrency_model.training.estimate import estimate
from concurrency_model.training.sensitivity import bound_by, sensitivities, step_expression
from concurrency_model.sweep import sweep

CASES = [
    {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 64, "global_batch": 512, "microbatch_size": 8},
     "training": {"dtype": "fp16", "overlap": False}},
    {"model": "bert-base", "cluster": "dgx1-v100", "parallel": {"data": 2, "tensor": 2, "pipeline": 2,
     "global_batch": 32, "microbatch_size": 2}, "training": {"dtype": "fp16", "recompute": "full"}},
]


@pytest.mark.parametrize("sc", CASES)
def test_expression_reproduces_estimate(sc):
    expr, at = step_expression(sc)
    assert float(expr.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)


@pytest.mark.parametrize("sc", CASES)
def test_elasticities_match_finite_differences(sc):
    el = sensitivities(sc).set_index("symbol")["elasticity"]
    h = 1e-4
    for scale, sym in (("flops", "s_flops"), ("mem_bw", "s_mem_bw"), ("inter_bw", "s_inter"),
                       ("intra_bw", "s_intra"), ("launch", "s_launch")):
        fixed = {**sc["parallel"], **{k: v for k, v in sc["training"].items() if k in ("recompute", "zero_stage")}}
        par = {k: fixed[k] for k in ("data", "tensor", "pipeline", "microbatch_size", "global_batch") if k in fixed}
        par.setdefault("tensor", 1)
        par.setdefault("pipeline", 1)
        tr = {**sc["training"], "zero_stage": 0, "recompute": sc["training"].get("recompute", "none")}
        r = sweep({**sc, "parallel": {**par, "schedule": "1f1b", "sequence_parallel": False},
                   "training": tr}, par["data"] * par["tensor"] * par["pipeline"],
                  hardware={scale: [1.0, 1.0 + h]})
        assert r.step_time_s.shape == (1, 2)
        t0, t1 = r.step_time_s[0]
        fd = (math.log(t1) - math.log(t0)) / math.log1p(h)
        assert el[sym] == pytest.approx(fd, abs=2e-3)


@pytest.mark.parametrize("sc", CASES)
def test_euler_identity_time_is_homogeneous_of_degree_one(sc):
    # scaling every rate up by k and every latency down by k divides the step by k:
    # -e_flops - e_mem_bw - e_intra - e_inter + e_launch + e_latency + e_host = 1
    el = sensitivities(sc).set_index("symbol")["elasticity"]
    total = -el["s_flops"] - el["s_mem_bw"] - el["s_intra"] - el["s_inter"] + el["s_launch"] + el["s_latency"] \
        + el["s_host"]
    assert total == pytest.approx(1.0, abs=1e-9)


def test_bound_by_names_the_largest_hardware_elasticity():
    line = bound_by(CASES[0])
    assert line.startswith("bound by memory bandwidth")
    out = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "/dev/stdin",
                          "--sensitivities", "--json"], input=json.dumps(CASES[0]), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert d["bound_by"] == line and d["sensitivities"][0]["symbol"] == "m"
