"""Error bands: sampling the fitted constants' spread through the lambdified step."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from concurrency_model import uncertainty
from concurrency_model.training.estimate import estimate
from concurrency_model.sweep import sweep

SC = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 16, "global_batch": 128, "microbatch_size": 8},
      "training": {"dtype": "fp16"}}


def test_spreads_are_the_documented_positive_numbers():
    s = uncertainty.spreads()
    assert set(s) == {*uncertainty.SCALES, "model"} and all(0 < v < 2 for v in s.values())
    assert s["flops"] == s["mem_bw"] == s["launch"] and s["intra_bw"] == s["inter_bw"]


def test_band_of_a_known_function_is_the_lognormal_quantiles():
    s = uncertainty.spreads()
    sigma = math.hypot(s["flops"], s["model"])  # two independent log-normals on the same step multiply
    lo, hi = uncertainty.band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 1.0 / flops, n=200_000)
    z = 1.2815515655446004  # standard normal 90th percentile
    assert lo == pytest.approx(math.exp(-z * sigma), rel=0.01)
    assert hi == pytest.approx(math.exp(z * sigma), rel=0.01)


def test_estimate_band_brackets_the_step_and_collapses_without_spread(monkeypatch):
    e = estimate(SC)
    assert e.step_time_p10_s < e.step_time_s < e.step_time_p90_s
    zero = {k: 0.0 for k in (*uncertainty.SCALES, "model")}
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


# --- the model-form spread, the per-dataset bands and their coverage ---------------------------------------
def test_model_spread_is_the_std_of_the_log_residuals():
    pred, meas = np.array([1.1, 0.9, 2.0, 3.0]), np.array([1.0, 1.0, 2.5, 2.0])
    logs = [math.log(1.1), math.log(0.9), math.log(0.8), math.log(1.5)]
    mean = sum(logs) / 4
    by_hand = math.sqrt(sum((x - mean) ** 2 for x in logs) / 4)
    assert uncertainty.log_spread(pred, meas) == pytest.approx(by_hand, rel=1e-12)
    assert by_hand == pytest.approx(0.2382, abs=1e-4)


def test_model_spread_in_the_file_is_the_calibration_fit_s(monkeypatch):
    import pandas as pd

    from concurrency_model.validate import training
    fake = pd.DataFrame({"status": ["ok", "ok", "ok", "refused"], "predicted_time_s": [1.0, 2.0, 4.0, np.nan],
                         "measured_time_s": [1.0, 1.0, 4.0, 1.0]})
    seen = {}
    monkeypatch.setattr(training, "vtrain_fit_rows", lambda: pd.DataFrame({"i": range(16)}))
    monkeypatch.setattr(training, "evaluate", lambda df, workers: seen.setdefault("rows", list(df["i"])) and fake)
    from concurrency_model.validate import spreads
    sigma, rows = spreads.model_spread(every=8)
    assert seen["rows"] == [0, 8] and rows == 3   # every 8th calibration row; the refused row is left out
    assert sigma == pytest.approx(np.std([0.0, math.log(2.0), 0.0]), rel=1e-12)  # 0.3267
    assert sigma == pytest.approx(0.32675, abs=1e-5)


def test_band_applies_the_model_factor_and_collapses_without_any_spread(monkeypatch):
    zero = {k: 0.0 for k in (*uncertainty.SCALES, "model")}
    monkeypatch.setattr(uncertainty, "spreads", lambda: zero)
    assert uncertainty.band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 3.0 / flops) == (3.0, 3.0)
    monkeypatch.setattr(uncertainty, "spreads", lambda: {**zero, "model": 0.5})
    lo, hi = uncertainty.band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 3.0 + 0 * flops, n=200_000)
    assert (lo, hi) == pytest.approx((3.0 * math.exp(-uncertainty.Z90 * 0.5), 3.0 * math.exp(uncertainty.Z90 * 0.5)),
                                     rel=0.01)   # (1.58, 5.69)
    lo0, hi0 = uncertainty.lognormal_band([2.0, 5.0], [0.0, 0.0])
    assert list(lo0) == [2.0, 5.0] and list(hi0) == [2.0, 5.0]


def test_leave_one_device_out_sigma_ignores_the_held_out_device():
    r = np.array([0.1, 0.3, -0.2, -0.2, 5.0, -5.0])  # device c is wild: it must not widen its own band
    g = np.array(["a", "a", "b", "b", "c", "c"])
    expected = math.sqrt((0.2 ** 2 + 0.2 ** 2) / 2 + (0.1 ** 2 + 0.1 ** 2) / 4)   # medians +-0.2, scatter
    assert uncertainty.leave_one_out_sigma(r, g, "c") == pytest.approx(expected, rel=1e-12)   # 0.2121
    assert uncertainty.leave_one_out_sigma(r, g, "c") == pytest.approx(0.21213, abs=1e-5)
    # a's band comes from b and c: c's scatter (5 about median 0) dominates
    assert uncertainty.leave_one_out_sigma(r, g, "a") == pytest.approx(math.sqrt((0.04 + 0) / 2 + 50 / 4), rel=1e-12)


def test_kernel_band_is_leave_one_device_out():
    import pandas as pd

    from concurrency_model.validate.adapters import kernel_band
    e = math.exp
    p = pd.DataFrame({"op": "gemm", "preset": ["a", "a", "b", "b", "c"],
                      "measured_s": [1.0, 1.0, 1.0, 1.0, 1.0],
                      "predicted_s": [e(0.1), e(0.3), e(-0.2), e(-0.2), 2.0]})
    out = kernel_band(p, p)
    sigma_c = math.sqrt(0.04 + 0.005)   # from a and b only
    assert out.loc[4, "p10_s"] == pytest.approx(2.0 * math.exp(-uncertainty.Z90 * sigma_c), rel=1e-12)
    assert out.loc[4, "p90_s"] == pytest.approx(2.0 * math.exp(uncertainty.Z90 * sigma_c), rel=1e-12)
    assert (out.loc[4, "p10_s"], out.loc[4, "p90_s"]) == pytest.approx((1.5239, 2.6248), abs=1e-4)
    # changing device c's own residual leaves c's band unchanged
    p2 = p.assign(measured_s=[1.0, 1.0, 1.0, 1.0, 100.0])
    assert kernel_band(p2, p2).loc[4, "p90_s"] == pytest.approx(out.loc[4, "p90_s"], rel=1e-12)


def test_coverage_on_a_hand_example():
    import pandas as pd

    from concurrency_model.validate.registry import summarize
    assert uncertainty.coverage([1.0, 2.0, 5.0, 3.0, 1.0], [0.5, 2.5, 4.0, 3.0, np.nan],
                                [1.5, 3.0, 6.0, 3.0, np.nan]) == 0.75   # the edge counts, no band is skipped
    assert uncertainty.coverage([1.0], [np.nan], [np.nan]) is None
    df = pd.DataFrame({"dataset": "x", "mode": "preset", "row": [2, 3, 4, 5], "label": "", "group": "",
                       "measured": [1.0, 2.0, 5.0, 9.0], "predicted": [1.0, 2.0, 5.0, 9.0], "unit": "s",
                       "ape": [0.0, 0.0, 0.0, 0.0], "status": ["ok", "ok", "ok", "refused"], "note": "",
                       "p10": [0.5, 2.5, 4.0, 1.0], "p90": [1.5, 3.0, 6.0, 2.0]})
    assert summarize(df)[0]["band_coverage"] == pytest.approx(2 / 3)   # the refused row is not counted


def test_bands_draw_once_a_process_the_same_numbers_read_only():
    seen = []

    def fn(**s):
        seen.append(s)
        return [s["flops"] * 2.0]
    first, again = uncertainty.bands(fn), uncertainty.bands(fn)
    assert first == again and seen[0]["flops"] is seen[1]["flops"]
    rng = np.random.default_rng(0)  # the numbers drawn afresh, as before the draws were kept
    fresh = uncertainty.sample_scales(uncertainty.SAMPLES, rng=rng)
    assert all(np.array_equal(fresh[k], seen[0][k]) for k in uncertainty.SCALES)
    factor = np.exp(rng.normal(0.0, uncertainty.spreads()[uncertainty.MODEL], uncertainty.SAMPLES))
    lo, hi = np.quantile(fresh["flops"] * 2.0 * factor, uncertainty.QUANTILES)
    assert first == [(float(lo), float(hi))]
    with pytest.raises(ValueError):
        seen[0]["flops"][0] = 1.0  # kept for the next call: nobody changes them
