"""Steps to a target quality against the global batch (issue 40): the closed forms, the fits, the data, bad input."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from concurrency_model.convergence import forms
from scipy.optimize import least_squares

from concurrency_model.convergence.fit import band, evaluate, fit, fit_form, forward_difference, held_out_errors
from concurrency_model.convergence.forms import B, SYMBOLS
from concurrency_model.convergence.points import Points, benchmarks, from_csv, mlperf, short_unit


def test_mccandlish_closed_forms_at_b_noise():
    # McCandlish et al. 2018 eq. 2.11: S = S_min (1 + B_noise / B), E = E_min (1 + B / B_noise), E_min = S_min B_noise
    e_min, b_noise = SYMBOLS["E_min"], SYMBOLS["B_noise"]
    s = forms.steps("mccandlish")
    s_min = e_min / b_noise
    assert sp.simplify(s.subs(B, b_noise) - 2 * s_min) == 0
    assert sp.simplify(forms.samples("mccandlish").subs(B, b_noise) - 2 * e_min) == 0
    assert sp.limit(s, B, sp.oo) == s_min  # the steps fall to S_min, never below
    assert sp.limit(forms.samples("mccandlish"), B, 0) == e_min  # the data falls to E_min
    # hand numbers: E_min 1e6 samples, B_noise 1000: at B = 250, E = 1.25e6 samples, S = 5000 steps
    p = {"E_min": 1e6, "B_noise": 1000.0}
    assert float(forms.samples("mccandlish", p).subs(B, 250)) == pytest.approx(1.25e6)
    assert float(forms.steps("mccandlish", p).subs(B, 250)) == pytest.approx(5000)


def test_three_regime_form_by_hand():
    p = {"E_min": 100.0, "B_1": 64.0, "w": math.log(4)}  # B_2 = 256
    e = forms.samples("three_regime", p)
    s = forms.steps("three_regime", p)
    assert float(e.subs(B, 8)) == pytest.approx(100) and float(e.subs(B, 64)) == pytest.approx(100)  # perfect scaling
    # B_2: ln E = ln E_min + w / 2 (the middle segment's integral), so E(256) = 100 * sqrt(4) = 200
    assert float(e.subs(B, 256)) == pytest.approx(200)
    # no gain above B_2: the steps stay at E(B_2) / B_2
    assert float(s.subs(B, 1024)) == pytest.approx(200 / 256) and float(s.subs(B, 4096)) == pytest.approx(200 / 256)
    # the middle: slope of ln S against ln B is -1 + (ln B - ln B_1) / w, -1/2 halfway (B = 128)
    u = sp.Symbol("u")
    middle = e.args[1][0] / B  # the second piece of E, over B
    slope = sp.diff(sp.log(middle.subs(B, sp.exp(u))), u)
    assert float(slope.subs(u, math.log(128))) == pytest.approx(-0.5)


@settings(max_examples=60, deadline=None)
@given(form=st.sampled_from(forms.FORMS), e_min=st.floats(1e-2, 1e9), b=st.floats(1.0, 1e6),
       w=st.floats(0.01, 30.0), b1=st.floats(1.0, 1e6), growth=st.floats(1.0001, 100.0))
def test_larger_batch_never_lowers_samples_nor_raises_steps(form, e_min, b, w, b1, growth):
    params = {"E_min": e_min, "B_noise": b1} if form == "mccandlish" else {"E_min": e_min, "B_1": b1, "w": w}
    e_lo, e_hi = evaluate(form, params, [b, b * growth])
    assert e_hi >= e_lo * (1 - 1e-12)
    assert e_hi / (b * growth) <= e_lo / b * (1 + 1e-12)


@settings(max_examples=15, deadline=None)
@given(values=st.lists(st.floats(1.0, 1e6), min_size=4, max_size=6), form=st.sampled_from(forms.FORMS))
def test_a_fitted_curve_is_monotone_in_batch(values, form):
    batch = 2.0 ** np.arange(5, 5 + len(values))
    p = fit_form(form, batch, values)
    grid = np.geomspace(1, 1e7, 200)
    e = evaluate(form, p, grid)
    assert np.all(np.diff(e) >= -1e-9 * e[1:])  # samples to target never fall
    s = e / grid
    assert np.all(np.diff(s) <= 1e-9 * s[:-1])  # steps to target never rise


def test_fit_recovers_mccandlish_parameters_and_holds_out_exactly():
    b = np.array([64.0, 128, 256, 512, 1024, 2048])
    v = 5e5 * (1 + b / 700)
    p = fit_form("mccandlish", b, v)
    assert p["E_min"] == pytest.approx(5e5, rel=1e-4) and p["B_noise"] == pytest.approx(700, rel=1e-4)
    pts = Points("synthetic", "samples", "samples", b, v, tuple(np.array([x]) for x in v), 1.0, "")
    assert held_out_errors("mccandlish", pts).max() < 1e-4
    c = fit(pts)
    assert c.held_out["mccandlish"] < 1e-4 and c.band == pytest.approx((1.0, 1.0), abs=1e-3)
    out = c.predict(700)
    assert out["value_to_target"] == pytest.approx(1e6, rel=1e-4)
    assert out["steps_to_target"] == pytest.approx(1e6 / 700, rel=1e-4)


def test_band_combines_run_spread_and_curve_error():
    assert band([0.9, 1.0, 1.1], []) == pytest.approx((0.92, 1.08))
    lo, hi = band([1.0], [math.log(1.2), math.log(0.8)])  # a curve 20% high or low: the run at 1/1.2 or 1/0.8
    width = 1 / 0.8 - 1 / 1.2
    assert lo == pytest.approx(1 / 1.2 + 0.1 * width) and hi == pytest.approx(1 / 0.8 - 0.1 * width)


def test_mlperf_points_units_and_steps():
    assert {"bert", "resnet", "gpt3", "llama31_8b", "dlrm_dcnv2", "unet3d"} <= set(benchmarks())
    r = mlperf("resnet")
    assert r.unit == "epochs" and r.samples_per_unit == 1281167  # ImageNet-1k, derived_steps_how
    assert r.batch[0] == 1632 and r.value[0] == 35.0 and len(r.runs[0]) == 17
    g = mlperf("gpt3")
    assert g.unit == "tokens" and g.samples_per_unit == 1 / 2048
    assert g.value[2] == pytest.approx(1.218026e9, rel=1e-6)  # the olympic mean, not the mean (one run at 1.1e10)
    assert mlperf("cosmoflow").samples_per_unit is None
    assert short_unit("epoch_num as logged (values 1.7-2.0 look 1-based)") == "epoch_num"
    out = fit(mlperf("bert")).predict(3072)
    assert out["unit"] == "samples" and out["steps_to_target"] == pytest.approx(out["value_to_target"] / 3072)
    # the measured BERT point at 3,072 is 2.764e6 samples (olympic mean): the curve within 10%
    assert out["value_to_target"] == pytest.approx(2.764499e6, rel=0.10)
    assert fit(mlperf("cosmoflow")).predict(64)["steps_to_target"] is None


def test_unknown_benchmark_names_the_field_and_suggests():
    with pytest.raises(ValueError, match=r"^benchmark: unknown MLPerf benchmark 'bertt'.*did you mean 'bert'"):
        mlperf("bertt")


@pytest.mark.parametrize("batch", [0, -4, float("nan")])
def test_batch_not_positive_is_refused(batch):
    c = fit(Points("x", "samples", "samples", np.array([1.0, 2.0, 4.0]), np.array([10.0, 12.0, 16.0]),
                   ((), (), ()), 1.0, ""))
    with pytest.raises(ValueError, match=r"^batch: must be a positive number"):
        c.predict(batch)


def _csv(tmp_path, text):
    f = tmp_path / "runs.csv"
    f.write_text(text)
    return f


def test_user_csv_fit(tmp_path):
    rows = "\n".join(f"{b},{v * (1 + d)},samples" for b in (32, 64, 128, 256) for d in (-0.05, 0.05)
                     for v in [1e4 * (1 + b / 100)])
    c = fit(from_csv(_csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")))
    assert c.params["mccandlish"]["B_noise"] == pytest.approx(100, rel=1e-3)
    assert c.predict(100)["value_to_target"] == pytest.approx(2e4, rel=1e-3)
    assert c.band == pytest.approx((0.95, 1.05), abs=1e-3)  # runs at +-5%: the 10th and 90th percentiles


def test_user_csv_bad_input(tmp_path):
    with pytest.raises(ValueError, match=r"column 'convergence_unit': missing"):
        from_csv(_csv(tmp_path, "global_batch_size,value_to_converge\n32,100\n64,120\n"))
    with pytest.raises(ValueError, match=r"column 'value_to_converge': missing"):
        from_csv(_csv(tmp_path, "global_batch_size,convergence_unit\n32,samples\n"))
    with pytest.raises(ValueError, match=r"column 'global_batch_size': at least two distinct batch sizes"):
        from_csv(_csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n32,100,samples\n"
                                "32,110,samples\n"))
    with pytest.raises(ValueError, match=r"column 'convergence_unit': one unit throughout, got samples, epochs"):
        from_csv(_csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n32,100,samples\n64,3,epochs\n"))
    with pytest.raises(ValueError, match=r"row 2, column 'global_batch_size': must be > 0"):
        from_csv(_csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n0,100,samples\n64,3,samples\n"))
    with pytest.raises(ValueError, match=r"^points: mccandlish needs at least 2 batch sizes to fit, got 1"):
        fit_form("mccandlish", [32.0], [100.0])
    with pytest.raises(ValueError, match=r"^points: at least two batch sizes"):
        fit(Points("x", "samples", "samples", np.array([32.0]), np.array([100.0]), ((),), 1.0, ""))


def test_converge_command_json_and_bad_input(capsys):
    import json

    from concurrency_model.cli import main
    assert main(["converge", "--benchmark", "bert", "--batch", "4096", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"value_to_target", "unit", "steps_to_target", "value_to_target_p10", "value_to_target_p90",
            "form"} <= set(out)
    assert out["unit"] == "samples" and out["form"] in out["forms"]
    assert out["steps_to_target"] == pytest.approx(out["value_to_target"] / 4096)
    assert out["value_to_target_p10"] < out["value_to_target"] < out["value_to_target_p90"]
    # the measured olympic mean at 4,096 is 2.844e6 samples: the curve within 10% of it
    assert out["value_to_target"] == pytest.approx(2.843989e6, rel=0.10)
    for argv, msg in ((["--benchmark", "bertt", "--batch", "8"], "--benchmark: unknown MLPerf benchmark 'bertt'"),
                      (["--benchmark", "bert", "--batch", "0"], "--batch: must be an integer >= 1"),
                      (["--batch", "8"], "give exactly one of --benchmark NAME or --csv FILE")):
        try:
            code = main(["converge", *argv])
        except SystemExit as e:  # argparse's own errors
            code = e.code
        err = capsys.readouterr().err
        assert code == 2 and msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_estimate_time_to_target_is_steps_times_step_time(tmp_path):
    from concurrency_model.training.estimate import estimate
    # a user's runs on McCandlish's curve exactly: E = 1e5 (1 + B / 64) samples, so at B = 64, 2e5 samples = 3,125 steps
    rows = "\n".join(f"{b},{1e5 * (1 + b / 64)},samples" for b in (16, 32, 64, 128, 256))
    f = _csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")
    sc = {"model": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000},
          "cluster": "dgx-a100", "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64},
          "training": {"target": {"csv": str(f), "unit": "samples"}},
          "run": {"samples": 1000, "price_per_gpu_hour": 3.0}}
    out = estimate(sc).to_dict()
    step = out["step_time_s"]
    assert out["steps_to_target"] == pytest.approx(3125, rel=1e-4)
    assert out["time_to_target_s"] == pytest.approx(3125 * step, rel=1e-4)
    assert out["gpu_hours_to_target"] == pytest.approx(3125 * step * 8 / 3600, rel=1e-4)
    assert out["cost_to_target"] == pytest.approx(3.0 * out["gpu_hours_to_target"])
    assert out["time_to_target_p10_s"] <= out["time_to_target_s"] <= out["time_to_target_p90_s"]
    assert out["value_to_target_unit"] == "samples" and out["target_curve"] == "runs"
    with pytest.raises(ValueError, match=r"^training.target.unit: 'tokens' does not match runs's curve"):
        estimate({**sc, "training": {"target": {"csv": str(f), "unit": "tokens"}}})
    with pytest.raises(ValueError, match=r"^training.target: cosmoflow's curve is in epochs .* cannot be derived"):
        estimate({**sc, "training": {"target": "cosmoflow"}})
    with pytest.raises(ValueError, match=r"^training.target.benchmrk: unknown key; did you mean 'benchmark'"):
        estimate({**sc, "training": {"target": {"benchmrk": "bert"}}})
    assert "time_to_target_s" not in estimate({**sc, "training": {}}).to_dict()


@settings(max_examples=60, deadline=None)
@given(s_min=st.floats(1.0, 1e6), b_noise=st.floats(1.0, 1e6), batch=st.floats(1.0, 1e6), tau=st.floats(0, 100),
       delta=st.floats(1e-4, 1.0), omega=st.floats(0, 1e3), workers=st.integers(1, 4096))
def test_penalties_never_lower_the_steps_and_vanish_at_their_neutral_values(s_min, b_noise, batch, tau, delta, omega,
                                                                           workers):
    from concurrency_model.convergence.penalties import steps_with
    sync = s_min * (1 + b_noise / batch)  # McCandlish's S(B)
    assert float(steps_with("staleness", s_min, b_noise, batch, tau=0)) == pytest.approx(sync)
    assert float(steps_with("error_feedback", s_min, b_noise, batch, delta=1.0)) == pytest.approx(sync)
    assert float(steps_with("unbiased", s_min, b_noise, batch, omega=0.0, workers=workers)) == pytest.approx(sync)
    for kind, kw in (("staleness", {"tau": tau}), ("error_feedback", {"delta": delta}),
                     ("unbiased", {"omega": omega, "workers": workers})):
        assert float(steps_with(kind, s_min, b_noise, batch, **kw)) >= sync * (1 - 1e-12)


def test_qsgd_omega_and_bad_penalty_input():
    from concurrency_model.convergence.penalties import qsgd_omega, steps_with
    assert qsgd_omega(100, 1) == pytest.approx(10.0)  # min(100 / 1, sqrt(100) / 1)
    assert qsgd_omega(100, 20) == pytest.approx(0.25)  # min(100 / 400, 10 / 20)
    with pytest.raises(ValueError, match=r"^kind: unknown 'local_sgd'"):
        steps_with("local_sgd", 1.0, 1.0, 1.0)
    with pytest.raises(ValueError, match=r"^delta: must be a number in \(0, 1\]"):
        steps_with("error_feedback", 1.0, 1.0, 1.0, delta=2.0)
    with pytest.raises(ValueError, match=r"^batch: must be a positive number"):
        steps_with("staleness", 1.0, 1.0, 0)


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=64), levels=st.integers(1, 64))
def test_qsgd_variance_within_the_derived_bound(values, levels):
    """QSGD's quantizer rounds a_i s = s |x_i| / |x| up with probability p_i = a_i s - floor(a_i s): unbiased, with
    variance sum p_i (1 - p_i) / s^2 of |x|^2, computed here exactly, never above min(d / s^2, sqrt(d) / s)."""
    from concurrency_model.convergence.penalties import qsgd_omega
    x = np.array(values)
    norm = np.linalg.norm(x)
    if norm == 0:
        return
    a = np.abs(x) / norm * levels
    p = a - np.floor(a)
    assert np.all(np.floor(a) / levels + p / levels == pytest.approx(np.abs(x) / norm))  # E[rounded] = a_i: unbiased
    omega_exact = float(np.sum(p * (1 - p))) / levels**2
    assert omega_exact <= qsgd_omega(len(x), levels) * (1 + 1e-12)


def test_qsgd_bound_reached_in_its_sqrt_branch_within_a_factor():
    """A vector spread evenly, |x_i| / |x| = 1 / sqrt(d) with s = 1: each rounds up with p = 1 / sqrt(d), so the
    exact variance is d p (1 - p) = sqrt(d) - 1, against the bound sqrt(d) / s = sqrt(d)."""
    from concurrency_model.convergence.penalties import qsgd_omega
    d = 10_000
    p = 1 / math.sqrt(d)
    assert d * p * (1 - p) == pytest.approx(99.0)
    assert qsgd_omega(d, 1) == pytest.approx(100.0)


@settings(max_examples=80, deadline=None)
@given(values=st.lists(st.floats(-1e3, 1e3, allow_nan=False), min_size=1, max_size=64), data=st.data())
def test_topk_is_a_k_over_d_contraction(values, data):
    """Top-k keeps at least k / d of the squared norm: |topk(x) - x|^2 <= (1 - k / d) |x|^2 (the penalties' delta)."""
    x = np.array(values)
    k = data.draw(st.integers(1, len(x)))
    kept = np.zeros_like(x)
    top = np.argsort(-np.abs(x))[:k]
    kept[top] = x[top]
    assert np.sum((kept - x) ** 2) <= (1 - k / len(x)) * np.sum(x**2) * (1 + 1e-12) + 1e-300


def test_estimate_staleness_penalty_is_labelled_model_only(tmp_path):
    from concurrency_model.training.estimate import estimate
    rows = "\n".join(f"{b},{1e5 * (1 + b / 64)},samples" for b in (16, 32, 64, 128, 256))
    f = _csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")
    sc = {"model": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000},
          "cluster": "dgx-a100", "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64},
          "training": {"target": {"csv": str(f)}, "consistency": "ssp", "staleness": 2}}
    out = estimate(sc).to_dict()
    # S_min = E_min / B_noise = 1e5 / 64 = 1,562.5; synchronous 2 S_min = 3,125; staleness 2: 3 S_min + S_min = 6,250
    assert out["steps_to_target"] == pytest.approx(3125, rel=1e-4)
    assert out["steps_to_target_model_only"] == pytest.approx(6250, rel=1e-4)
    assert out["time_to_target_model_only_s"] == pytest.approx(6250 * out["step_time_s"], rel=1e-4)
    assert out["convergence_penalty"] == "staleness tau=2.0 (model only)"


def test_estimate_compression_penalty_is_labelled_model_only(tmp_path):
    from concurrency_model.convergence.penalties import compression_penalty
    from concurrency_model.training.estimate import estimate
    rows = "\n".join(f"{b},{1e5 * (1 + b / 64)},samples" for b in (16, 32, 64, 128, 256))
    f = _csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")
    sc = {"model": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000},
          "cluster": "dgx-a100", "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64},
          "training": {"target": {"csv": str(f)}, "compression": "qsgd"}}
    out = estimate(sc).to_dict()
    # QSGD, 7 levels on buckets of 512: omega = min(512 / 49, sqrt(512) / 7) = sqrt(512) / 7; 8 workers;
    # S_min = 1,562.5: S = S_min (1 + omega / 8) + (1 + omega) S_min
    w = 512 ** 0.5 / 7
    assert out["steps_to_target"] == pytest.approx(3125, rel=1e-4)
    assert out["steps_to_target_model_only"] == pytest.approx(1562.5 * (1 + w / 8 + 1 + w), rel=1e-4)
    assert out["convergence_penalty"] == f"unbiased omega={w} workers=8 (model only)"
    # top-k, error feedback at DGC's ratio 0.001: S_min / 0.001 + S_min = 1,001 S_min; with SSP 2 on top, x 1.5
    out = estimate({**sc, "training": {**sc["training"], "compression": "topk"}}).to_dict()
    assert out["steps_to_target_model_only"] == pytest.approx(1001 * 1562.5, rel=1e-4)
    out = estimate({**sc, "training": {**sc["training"], "compression": "topk", "consistency": "ssp",
                                       "staleness": 2}}).to_dict()
    assert out["steps_to_target_model_only"] == pytest.approx(1001 * 1562.5 * 2, rel=1e-4)  # 6,250 / 3,125 = 2
    for scheme in ("none", "fp16", "bf16", "int8", "1bit", "terngrad", "threshold", "powersgd"):
        assert compression_penalty(scheme, 8) is None, scheme
        if scheme in ("none", "fp16", "int8", "1bit"):
            assert "steps_to_target_model_only" not in estimate(
                {**sc, "training": {**sc["training"], "compression": scheme}}).to_dict()
    with pytest.raises(ValueError, match=r"^training.compression: unknown 'zip'"):
        compression_penalty("zip", 8)


def test_estimate_target_flag(tmp_path, capsys):
    import json

    from concurrency_model.cli import main
    rows = "\n".join(f"{b},{1e5 * (1 + b / 64)},samples" for b in (16, 32, 64, 128, 256))
    f = _csv(tmp_path, "global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")
    sc = tmp_path / "sc.json"
    sc.write_text(json.dumps({"model": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128,
                                        "vocab": 1000}, "cluster": "dgx-a100",
                              "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64}}))
    assert main(["estimate", "--scenario", str(sc), "--target", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["steps_to_target"] == pytest.approx(3125, rel=1e-4)
    assert out["time_to_target_s"] == pytest.approx(3125 * out["step_time_s"], rel=1e-4)
    assert main(["estimate", "--scenario", str(sc), "--target", "bertt"]) == 2
    err = capsys.readouterr().err
    assert "training.target.benchmark: unknown MLPerf benchmark 'bertt'" in err and len(err.splitlines()) == 1


def test_time_to_target_sweep_front_and_bad_input():
    import pandas as pd

    from concurrency_model.sweep.to_target import pareto_front, sweep_to_target
    df = pd.DataFrame({"time_to_target_s": [10.0, 20.0, 15.0, 30.0], "gpu_hours_to_target": [8.0, 4.0, 9.0, 5.0]})
    # (15 s, 9 h) is beaten by (10 s, 8 h), (30 s, 5 h) by (20 s, 4 h): the front is the other two, quickest first
    assert pareto_front(df)["time_to_target_s"].tolist() == [10.0, 20.0]
    sc = {"model": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}}
    with pytest.raises(ValueError, match=r"^training.target: a time-to-target sweep needs a target"):
        sweep_to_target(sc, 8, [64])
    with pytest.raises(ValueError, match=r"^batches: must be a positive integer, got 0"):
        sweep_to_target(sc, 8, [0], target="bert")


@pytest.fixture
def fit_cache(cache):
    """The ``compiled`` module over an empty cache of this test's own (the shared ``cache`` fixture)."""
    from concurrency_model import compiled
    return compiled


def test_fit_cached_across_processes_bit_for_bit(fit_cache):
    """The fits go through the persistent cache (:func:`concurrency_model.compiled.arrays`): a cold call fits and
    writes one entry, a later one reads it back without fitting, and both equal the forms fitted directly; other
    points (one batch fewer) get their own entry, never the first one's numbers."""
    pts = mlperf("gpt3")
    start = dict(fit_cache.STATS)

    def counts():
        return tuple(fit_cache.STATS[k] - start[k] for k in ("builds", "written", "hits"))
    cold = fit(pts)
    assert counts() == (1, 1, 0)
    warm = fit(pts)
    assert counts() == (1, 1, 1)
    for form in ("mccandlish", "three_regime"):
        direct = fit_form(form, pts.batch, pts.value)
        assert cold.params[form] == warm.params[form] == direct
        assert all(type(v) is float for v in warm.params[form].values())
    assert (cold.form, cold.held_out, cold.band) == (warm.form, warm.held_out, warm.band)
    fewer = fit(pts.without(0))
    assert counts() == (2, 2, 1)
    assert fewer.params["mccandlish"] == fit_form("mccandlish", pts.without(0).batch, pts.without(0).value)
    assert fewer.params["mccandlish"] != cold.params["mccandlish"]


@settings(max_examples=60, deadline=None)
@given(st.lists(st.floats(1.0, 1e6), min_size=1, max_size=6), st.floats(1.0, 1e7), st.floats(1.0, 1e5),
       st.floats(0.02, 20.0))
def test_evaluate_is_the_lambdified_form_bit_for_bit(batch, e_min, b1, w):
    """The fits' faster function (numpy.where for lambdify's numpy.select) gives the very numbers of
    forms.lambdified, in every regime of three_regime (below B_1, between, above B_1 e^w)."""
    b = np.array(batch + [b1, b1 * math.exp(w), b1 * 0.5, b1 * math.exp(w) * 2])
    for form, p in (("mccandlish", {"E_min": e_min, "B_noise": b1}), ("three_regime", {"E_min": e_min, "B_1": b1,
                                                                                        "w": w})):
        with np.errstate(over="ignore", invalid="ignore"):
            want = forms.lambdified(form)(b, *(p[k] for k in forms.PARAMS[form]))
        got = evaluate(form, p, b)
        assert got.dtype == np.float64 and got.tobytes() == np.asarray(want, float).tobytes()


@settings(max_examples=40, deadline=None)
@given(st.floats(-0.999, 0.999), st.floats(-0.999, 0.999), st.floats(-3.0, 3.0), st.floats(0.5, 2.0),
       st.sampled_from([1e-12, 1e-9, 1e-3, 0.5]))
def test_forward_difference_is_scipys_two_point(u, v, a, c, gap):
    # the fits' Jacobian (forward_difference) against least_squares' own "2-point" one: the same steps, the same
    # iterates, bit for bit, also from starts a hair inside a bound (where scipy turns or shortens the step)
    lb, ub = np.array([-1.0, -2.0]), np.array([1.0, 5.0])
    t = np.linspace(0.0, 2.0, 7)

    def g(x):
        return np.exp(a * x[0]) * (1 + t * x[1]) - c * (1 + t)

    def g_rows(xs):
        return np.array([g(x) for x in xs])

    x0 = np.array([u, ub[1] - gap if v > 0 else lb[1] + gap])
    ref = least_squares(g, x0, bounds=(lb, ub), method="trf")
    fun, jac = forward_difference(g, g_rows, lb, ub)
    got = least_squares(fun, x0, jac=jac, bounds=(lb, ub), method="trf")
    assert np.array_equal(ref.x, got.x) and ref.nfev == got.nfev and ref.cost == got.cost
    assert np.array_equal(ref.jac, got.jac)


def test_fit_form_is_plain_least_squares_bit_for_bit():
    """fit_form (residuals of all rows at once, numpy's warnings off once around the fits, the Jacobian's rows at
    once) against the plain construction: each residual ln(E(B)) - ln(value) on its own (non-finite: 1e3), scipy's
    own "2-point" Jacobian, from the same five starts within the same bounds: the same parameters, bit for bit; and
    numpy's error state as it was."""
    pts = mlperf("gpt3")
    lb, lv = np.log(pts.batch), np.log(pts.value)
    f = forms.lambdified("mccandlish")

    def resid(theta):
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            r = np.log(f(pts.batch, math.exp(theta[0]), math.exp(theta[1]))) - lv
        return np.where(np.isfinite(r), r, 1e3)
    lower, upper = [lv.min() - 10, lb.min() - 10], [lv.max() + 10, lb.max() + 10]
    best = None
    for g in np.linspace(lb.min() - 1, lb.max() + 1, 5):
        x0 = np.clip([lv.min(), g], np.array(lower) + 1e-9, np.array(upper) - 1e-9)
        res = least_squares(resid, x0, jac="2-point", bounds=(lower, upper), method="trf")
        if best is None or res.cost < best.cost:
            best = res
    before = np.geterr()
    got = fit_form("mccandlish", pts.batch, pts.value)
    assert np.geterr() == before
    assert got == {"E_min": math.exp(best.x[0]), "B_noise": math.exp(best.x[1])}


def test_mlperf_points_read_once_and_handed_out_as_copies():
    """mlperf reads the tables once a name; each call gets arrays of its own: a caller that writes into its points
    never changes another's."""
    a = mlperf("bert")
    b = mlperf("bert")
    assert a.batch is not b.batch and a.value is not b.value and a.runs[0] is not b.runs[0]
    assert a.batch.tolist() == b.batch.tolist() and a.value.tolist() == b.value.tolist()
    a.batch[0], a.value[0], a.runs[0][:] = -1.0, -1.0, -1.0
    c = mlperf("bert")
    assert c.batch.tolist() == b.batch.tolist() and c.value.tolist() == b.value.tolist()
    assert [r.tolist() for r in c.runs] == [r.tolist() for r in b.runs] and c.batch[0] > 0
    with pytest.raises(ValueError, match=r"^benchmark: unknown MLPerf benchmark 'brt'; did you mean 'bert'\?"):
        mlperf("brt")
