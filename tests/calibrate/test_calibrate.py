"""``calibrate compute``: microbenchmarks, the fitted profile, atomic writes that never overwrite
unless forced, the CLI contract, the fit on synthetic data, and the progress bar."""
from __future__ import annotations

import io
import json
import subprocess
import sys
import time

import numpy as np
import pandas as pd
import pytest

from concurrency_model import timing
from concurrency_model.calibrate import compute
from concurrency_model.cli import main
from concurrency_model.hardware.devices import Efficiency, device_from_dict, load_device
from concurrency_model.progress import Progress, progress

TINY = [(64, 64, 64), (128, 256, 64), (256, 256, 256), (512, 128, 256), (32, 512, 512)]
TINY_KW = dict(shapes=TINY, fp64_shapes=[(128, 128, 128)], use_torch=False, copy_bytes=16 * 2**20)
NUMERIC_FIELDS = ("peak_flops", "vector_flops", "mem_bw_Bps", "mem_capacity_bytes", "launch_overhead_s",
                  "multiprocessors", "l2_bytes", "board_power_w")


@pytest.fixture(scope="module")
def calibrated(tmp_path_factory):
    out = tmp_path_factory.mktemp("cal") / "run"  # not there yet: calibrate creates it
    t = time.perf_counter()
    result = compute.calibrate(out, stream=io.StringIO(), **TINY_KW)
    return out, result, time.perf_counter() - t


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


def test_tiny_calibration_is_fast_and_writes_two_files(calibrated):
    out, result, elapsed = calibrated
    assert elapsed < 10
    assert sorted(p.name for p in out.iterdir()) == ["measurements.csv", "profile.json"]  # no temporary files
    assert set(result) >= {"out", "rows", "fitted"}
    assert result["out"] == str(out) and result["rows"] == len(TINY) + 1 + 2
    assert {"compute", "memory", "k_startup", "l2_factor", "peak_flops", "mem_bw_Bps"} <= set(result["fitted"])


def test_measurements_csv_columns_and_values(calibrated):
    out, _, _ = calibrated
    df = pd.read_csv(out / "measurements.csv")
    assert list(df.columns) == compute.COLUMNS
    for col in ("op", "m", "n", "k", "dtype", "median_s", "repetitions", "host", "numpy_version", "torch_version",
                "date", "backend", "device", "cpu_count"):
        assert col in df.columns
    g = df[df["op"] == "gemm"]
    assert len(g) == len(TINY) + 1
    assert set(map(tuple, g[["m", "n", "k"]].astype(int).to_numpy()[:len(TINY)])) == set(TINY)
    assert set(g["dtype"]) == {"fp32", "fp64"}
    assert (g["median_s"] > 0).all() and (g["repetitions"] >= compute.MIN_REPS).all()
    assert (g["flop"] == 2.0 * g["m"] * g["n"] * g["k"]).all()
    assert set(df["op"]) == {"gemm", "copy", "launch"}
    assert (df["backend"] == "numpy").all() and (df["device"] == "cpu").all()
    assert df["numpy_version"].iloc[0] == np.__version__
    assert df["host"].notna().all() and df["date"].str.endswith("+00:00").all()
    assert ((df["busy_cpus"] >= 0) & (df["busy_cpus"] <= df["cpu_count"] + 0.5)).all()
    rate = (g["flop"] / g["median_s"]).max()
    assert 1e8 < rate < 1e14  # FLOP/s of a CPU, whatever it is
    copy = df[df["op"] == "copy"].iloc[0]
    assert copy["bytes"] == 2 * 16 * 2**20 and 1e8 < copy["bytes"] / copy["median_s"] < 1e13


def test_profile_loads_and_times_gemms(calibrated):
    out, result, _ = calibrated
    dev = load_device(out / "profile.json")
    raw = json.loads((out / "profile.json").read_text())
    assert dev.name == "cpu-host" and dev.kind == "cpu"
    assert set(dev.peak_flops) == {"fp32", "fp64"}
    assert dev.efficiency.fitted_on != "default" and "numpy" in dev.efficiency.fitted_on
    assert dev.efficiency.compute == pytest.approx(result["fitted"]["compute"])
    assert dev.mem_bw == result["fitted"]["mem_bw_Bps"] and dev.launch_overhead > 0
    t = timing.gemm_time(256, 256, 256, dev)
    assert t.time_s > 0 and np.isfinite(t.time_s)
    assert timing.gemm_time(512, 512, 512, str(out / "profile.json"), "fp64").time_s > 0
    # every numeric field names how it was measured, like a preset's sources
    present = [k for k in NUMERIC_FIELDS if k in raw]
    assert set(raw["sources"]) == set(present)
    assert all("estimate" in raw["sources"][k] and "calibrate compute" in raw["sources"][k] for k in present)


def test_second_run_refuses_and_leaves_files(calibrated):
    out, _, _ = calibrated
    before = _snapshot(out)
    with pytest.raises(ValueError, match="--force") as e:
        compute.calibrate(out, stream=io.StringIO(), **TINY_KW)
    assert "measurements.csv" in str(e.value)
    with pytest.raises(ValueError, match="measurements.csv.*--force"):
        compute.write(out, pd.DataFrame({"a": [1]}), {"name": "x"})
    assert _snapshot(out) == before


def test_cli_refuses_with_exit_2_and_one_line(calibrated):
    out, _, _ = calibrated
    before = _snapshot(out)
    args = [sys.executable, "-m", "concurrency_model", "calibrate", "compute", "--quick", "--out", str(out)]
    p = subprocess.run(args, capture_output=True, text=True, timeout=120)
    assert p.returncode == 2
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in p.stderr
    assert "exists" in lines[0] and "--force" in lines[0]
    assert p.stdout == ""
    assert _snapshot(out) == before


def test_cli_force_overwrites_and_json_contract(tmp_path, monkeypatch, capsys):
    out = tmp_path / "cal"
    out.mkdir()
    (out / "measurements.csv").write_text("old\n")
    (out / "profile.json").write_text("{}\n")
    monkeypatch.setattr(compute, "QUICK_SHAPES", TINY)
    monkeypatch.setattr(compute, "FP64_QUICK", [])
    monkeypatch.setattr(compute, "STREAM_SHAPES", [])
    monkeypatch.setattr(compute, "COPY_BYTES", 8 * 2**20)
    assert main(["calibrate", "compute", "--quick", "--out", str(out), "--json"]) == 2
    assert (out / "measurements.csv").read_text() == "old\n"
    capsys.readouterr()
    assert main(["calibrate", "compute", "--quick", "--out", str(out), "--force", "--json"]) == 0
    captured = capsys.readouterr()
    res = json.loads(captured.out)
    assert set(res) >= {"out", "rows", "fitted"} and res["out"] == str(out)
    assert "calibrate compute:" in captured.err  # the progress summary goes to stderr, not into the JSON
    df = pd.read_csv(out / "measurements.csv")
    assert len(df) == res["rows"] and (df["backend"] == "numpy").sum() == len(TINY) + 2  # + torch rows if any
    assert load_device(out / "profile.json").name == "cpu-host"
    torch_there = int((df["backend"] == "torch").any())  # with torch: its CPU kernels' own profile too
    files = ["measurements.csv"] + ["profile-torch.json"] * torch_there + ["profile.json"]  # sorted
    assert sorted(p.name for p in out.iterdir()) == files
    if torch_there:
        assert load_device(out / "profile-torch.json").name == "cpu-host-torch"
    assert main(["calibrate", "compute", "--quick", "--out", str(out), "--force"]) == 0
    assert "wrote" in capsys.readouterr().out


def test_torch_and_cuda_profiles_see_products_that_stream_from_memory():
    """A decode step's layers read a weight matrix once per call: torch's and CUDA's GEMM sets carry products whose
    256 MB k x n operand no cache holds, so their profiles' memory efficiency is fitted, not left at its bound."""
    numpy_set, torch_set, gpu = compute.gemm_sets(quick=True)
    assert torch_set == compute.QUICK_SHAPES[:8] + compute.STREAM_SHAPES and numpy_set == compute.QUICK_SHAPES
    assert all(k * n * 4 == 2**28 and m <= 8 for m, n, k in compute.STREAM_SHAPES)
    assert all(set(compute.STREAM_SHAPES) <= set(shapes) for _, shapes in gpu)
    tiny = [(64, 64, 64)]
    assert compute.gemm_sets(quick=True, shapes=tiny)[:2] == (tiny, tiny)  # given shapes are timed alone


def test_cli_needs_out():
    p = subprocess.run([sys.executable, "-m", "concurrency_model", "calibrate", "compute", "--quick"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "--out" in p.stderr


def test_out_that_is_a_file_is_refused(tmp_path):
    f = tmp_path / "plain"
    f.write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        compute.calibrate(f, force=True, **TINY_KW)


def test_write_failure_leaves_no_temporary_file_and_keeps_old(tmp_path, monkeypatch):
    out = tmp_path / "w"
    out.mkdir()
    (out / "profile.json").write_text("{}\n")
    rows = pd.DataFrame({"op": ["gemm"], "median_s": [1e-3]})

    def boom(src, dst):
        raise OSError("disk full")

    monkeypatch.setattr(compute.os, "replace", boom)
    with pytest.raises(OSError, match="disk full"):
        compute.write(out, rows, {"name": "x"}, force=True)
    assert sorted(p.name for p in out.iterdir()) == ["profile.json"]
    assert (out / "profile.json").read_text() == "{}\n"


def test_write_is_all_or_nothing_when_one_target_exists(tmp_path):
    out = tmp_path / "w"
    out.mkdir()
    (out / "profile.json").write_text("{}\n")
    with pytest.raises(ValueError, match="profile.json"):
        compute.write(out, pd.DataFrame({"a": [1]}), {"name": "x"})
    assert sorted(p.name for p in out.iterdir()) == ["profile.json"]  # measurements.csv not written either


def test_torch_rows_when_torch_is_installed():
    pytest.importorskip("torch")
    g = compute.measure([(64, 64, 64), (128, 96, 32)], "fp32", "torch", repeats=3, budget_s=0.05)
    assert list(g.columns) == compute.COLUMNS and (g["backend"] == "torch").all() and (g["median_s"] > 0).all()
    layers = compute.measure_torch_layers("torch", 3, 0.05, conv=[(1, 3, 8, 16, 16, 3, 1, 1)],
                                          attention=[(1, 2, 16, 8)])
    assert list(layers["op"]) == ["conv", "attention"]
    conv = layers.iloc[0]
    assert (conv["c_in"], conv["c_out"], conv["kh"], conv["pad"]) == (3, 8, 3, 1)
    assert conv["flop"] == 2.0 * 1 * 8 * 16 * 16 * 3 * 9
    assert layers.iloc[1]["flop"] == 4.0 * 1 * 2 * 16 * 16 * 8 and layers.iloc[1]["seq"] == 16
    assert layers["torch_version"].iloc[0] != ""


# -- the fit on synthetic data: times generated by the model itself ---------------------------------

SYNTH_SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                (2048, 2048, 2048), (1024, 1024, 64), (64, 1024, 1024), (2048, 32, 2048), (16, 4096, 4096),
                (4096, 4096, 16), (384, 768, 1536), (3000, 200, 700), (96, 96, 8192), (8192, 8192, 8192)]
TRUTH = Efficiency(compute=0.6, memory=0.7, k_startup=32.0, l2_factor=4.0)


@pytest.mark.parametrize("dev", [
    dict(name="cpu-like", kind="cpu", peak_flops={"fp32": 3e11, "fp64": 1.5e11}, mem_bw_Bps=2.5e10,
         mem_capacity_bytes=25e9, launch_overhead_s=3e-7, multiprocessors=2),
    dict(name="gpu-like", peak_flops={"fp32": 15.7e12}, mem_bw_Bps=900e9, mem_capacity_bytes=32e9,
         launch_overhead_s=3.8e-6, multiprocessors=80),
])
def test_fit_recovers_the_model_on_synthetic_data(dev):
    dev = device_from_dict(dev)
    m, n, k = (np.array([s[i] for s in SYNTH_SHAPES]) for i in range(3))
    dtypes = np.array(["fp32"] * len(m))
    truth = compute._predictor(dev, m, n, k, dtypes)(TRUTH)
    default = compute._predictor(dev, m, n, k, dtypes)(Efficiency())
    assert np.max(compute.ape(default, truth)) > 5  # the data can tell the truth from the defaults
    eff = compute.fit_gemm(dev, m, n, k, dtypes, truth, label="synthetic")
    fitted = compute._predictor(dev, m, n, k, dtypes)(eff)
    assert np.max(compute.ape(fitted, truth)) < 1.0
    assert eff.fitted_on == "synthetic" and eff.sigma < 0.01
    assert eff.compute == pytest.approx(0.6, rel=0.05)


def test_profile_from_synthetic_rows_recovers_efficiency():
    dev = device_from_dict(dict(name="cpu-host", kind="cpu", peak_flops={"fp32": 3e11}, mem_bw_Bps=2.5e10,
                                mem_capacity_bytes=25e9, launch_overhead_s=3e-7, multiprocessors=2))
    m, n, k = (np.array([s[i] for s in SYNTH_SHAPES]) for i in range(3))
    t = compute._predictor(dev, m, n, k, np.array(["fp32"] * len(m)))(TRUTH)
    rows = [compute._row("gemm", "fp32", (ti, 5, 1), "numpy", "cpu", 2.0 * a * b * c, 0.0, m=a, n=b, k=c)
            for a, b, c, ti in zip(m, n, k, t)]
    rows.append(compute._row("copy", "fp64", (1e-2, 5, 1), "numpy", "cpu", 0.0, 2.5e8))
    prof = compute.profile(compute._frame(rows))
    fitted = device_from_dict(prof)
    pred = timing.gemm_coeffs(m, n, k, fitted, "fp32").seconds(fitted)
    assert np.median(compute.ape(pred, t)) < 1.0
    assert prof["mem_bw_Bps"] == 2.5e10 and prof["launch_overhead_s"] == 0.0
    with pytest.raises(ValueError, match="GEMM rows"):
        compute.profile(compute._frame(rows[:2] + rows[-1:]))


# -- progress bar ------------------------------------------------------------------------------------

class _Tty(io.StringIO):
    def isatty(self):
        return True


def test_progress_summary_line_without_tty():
    s = io.StringIO()
    assert list(progress(range(5), "work", stream=s)) == [0, 1, 2, 3, 4]
    text = s.getvalue()
    assert text.count("\n") == 1 and text.startswith("work: 5/5 in ") and "\r" not in text


def test_progress_bar_redraws_on_a_tty_and_reports_stop():
    s = _Tty()
    with pytest.raises(RuntimeError):
        with Progress(4, "job", stream=s) as bar:
            bar.update(1, "first")
            bar.update(1)
            raise RuntimeError("x")
    text = s.getvalue()
    assert "\r" in text and "[" in text and "first" in text
    assert text.rstrip().endswith("(stopped)") and "job: 2/4" in text
