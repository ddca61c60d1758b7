"""Error bands: sampling the fitted constants' spread through the lambdified step."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from concurrency_model import uncertainty
from concurrency_model.parallel.estimate import estimate
from concurrency_model.sweep import sweep

SC = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 16, "global_batch": 128, "microbatch_size": 8},
      "training": {"dtype": "fp16"}}


def test_spreads_are_the_documented_positive_numbers():
    s = uncertainty.spreads()
    assert set(s) == set(uncertainty.SCALES) and all(0 < v < 2 for v in s.values())
    assert s["flops"] == s["mem_bw"] == s["launch"] and s["intra_bw"] == s["inter_bw"]


def test_band_of_a_known_function_is_the_lognormal_quantiles():
    sigma = uncertainty.spreads()["flops"]
    lo, hi = uncertainty.band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 1.0 / flops, n=200_000)
    z = 1.2815515655446004  # standard normal 90th percentile
    assert lo == pytest.approx(math.exp(-z * sigma), rel=0.01)
    assert hi == pytest.approx(math.exp(z * sigma), rel=0.01)


def test_estimate_band_brackets_the_step_and_collapses_without_spread(monkeypatch):
    e = estimate(SC)
    assert e.step_time_p10_s < e.step_time_s < e.step_time_p90_s
    zero = {k: 0.0 for k in uncertainty.SCALES}
    monkeypatch.setattr(uncertainty, "spreads", lambda: zero)
    e0 = estimate(SC)
    assert e0.step_time_p10_s == pytest.approx(e0.step_time_s, rel=1e-12)
    assert e0.step_time_p90_s == pytest.approx(e0.step_time_s, rel=1e-12)


def test_only_the_spread_of_what_the_step_depends_on_matters(monkeypatch):
    # one device, no communication: the network's spread leaves the band unchanged
    one = {**SC, "parallel": {"data": 1, "global_batch": 8, "microbatch_size": 8}}
    base = estimate(one)
    wide = {**uncertainty.spreads(), "intra_bw": 1.5, "inter_bw": 1.5}
    monkeypatch.setattr(uncertainty, "spreads", lambda: wide)
    again = estimate(one)
    assert (again.step_time_p10_s, again.step_time_p90_s) == pytest.approx((base.step_time_p10_s,
                                                                            base.step_time_p90_s), rel=1e-12)


def test_sweep_best_rows_and_cli_carry_the_band():
    r = sweep({**SC, "parallel": {"global_batch": 128}}, 16)
    d = r.to_dict(top=2)
    for b in d["best"]:
        assert b["step_time_p10_s"] < b["step_time_s"] < b["step_time_p90_s"]
    row = r.top(1).iloc[0]
    e = estimate(r.scenario(row))
    assert d["best"][0]["step_time_p90_s"] == pytest.approx(e.step_time_p90_s, rel=1e-9)
    out = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "/dev/stdin", "--json"],
                         input=json.dumps(SC), capture_output=True, text=True)
    j = json.loads(out.stdout)
    assert j["step_time_p10_s"] < j["step_time_s"] < j["step_time_p90_s"]
    assert np.isfinite([j["step_time_p10_s"], j["step_time_p90_s"]]).all()
