"""``sweep --target``: the sweep ranked by time to a quality target, the global batch swept (issue 40)."""
from __future__ import annotations

import json

import pytest

from concurrency_model.cli import main
from concurrency_model.sweep import sweep
from concurrency_model.sweep.to_target import default_batches, sweep_to_target

TINY = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000}


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """A user's runs exactly on McCandlish's curve, E = 1e5 (1 + B / 64) samples, at batches 16-256."""
    f = tmp_path_factory.mktemp("runs") / "runs.csv"
    rows = "\n".join(f"{b},{1e5 * (1 + b / 64)},samples" for b in (16, 32, 64, 128, 256))
    f.write_text("global_batch_size,value_to_converge,convergence_unit\n" + rows + "\n")
    return str(f)


def test_default_batches_and_bad_batch():
    assert default_batches(64) == [32, 64, 128, 256]
    assert default_batches(3) == [2, 3, 6, 12]  # 1.5 rounds to 2 (Python's round: to even)
    with pytest.raises(ValueError, match=r"^parallel.global_batch: must be a positive integer, got 0"):
        default_batches(0)


def test_time_to_target_is_steps_times_the_sweeps_step_time(runs):
    sc = {"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
          "training": {"target": {"csv": runs, "unit": "samples"}}, "run": {"samples": 1000, "price_per_gpu_hour": 2.0}}
    out = sweep_to_target(sc, [4, 8], [32, 64, 512])
    df = out["rows"]
    assert sorted(set(df["global_batch"])) == [32, 64, 512] and sorted(set(df["gpus"])) == [4, 8]
    for _, r in df.iterrows():
        b = r["global_batch"]
        steps = 1e5 * (1 + b / 64) / b  # hand value: samples to the target over the batch
        assert r["steps_to_target"] == pytest.approx(steps, rel=1e-3)
        assert r["time_to_target_s"] == pytest.approx(r["steps_to_target"] * r["step_time_s"], rel=1e-12)
        assert r["gpu_hours_to_target"] == pytest.approx(r["time_to_target_s"] * r["gpus"] / 3600, rel=1e-12)
        assert r["cost_to_target"] == pytest.approx(2.0 * r["gpu_hours_to_target"], rel=1e-12)
        assert r["throughput_samples_per_s"] == pytest.approx(b / r["step_time_s"], rel=1e-12)
        assert r["extrapolated"] == (b == 512)  # the runs span 16-256
        # the step time is the plain sweep's fastest at that batch and GPU count
        fastest = sweep({**sc, "parallel": {"global_batch": int(b)}}, int(r["gpus"])).top(1)["step_time_s"].item()
        assert r["step_time_s"] == pytest.approx(fastest, rel=1e-12)
    assert out["time_best"]["time_to_target_s"] == df["time_to_target_s"].min()
    assert out["throughput_best"]["throughput_samples_per_s"] == df["throughput_samples_per_s"].max()
    assert set(out["results"]) == {32, 64, 512}


def test_sweep_command_adds_to_target_and_keeps_the_plain_keys(runs, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64}}))
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "--top", "3", "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "--top", "3", "--target", runs, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out) == set(plain) | {"to_target"}  # keys added, none changed
    assert [b["step_time_s"] for b in out["best"]] == [b["step_time_s"] for b in plain["best"]]
    tt = out["to_target"]
    assert tt["batches"] == [32, 64, 128, 256] and tt["unit"] == "samples" and tt["target"] == "runs"
    assert {"time_best", "throughput_best", "why", "pareto", "rows"} <= set(tt)
    times = [r["time_to_target_s"] for r in tt["rows"]]
    assert times == sorted(times) and tt["time_best"]["time_to_target_s"] == times[0]
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "--target", runs, "--batches", "16", "64"]) == 0
    text = capsys.readouterr().out
    assert "time-to-target pick: global batch" in text and "; throughput pick: global batch" in text
    assert "Pareto front, time against GPU-hours to the target" in text


@pytest.mark.parametrize("extra,msg", [
    (["--target", "bertt"], "training.target.benchmark: unknown MLPerf benchmark 'bertt'"),
    (["--batches", "64"], "--batches: sweeping the global batch needs a quality target"),
    (["--target", "bert", "--batches", "0"], "--batches: must be an integer >= 1"),
    (["--target", "cosmoflow"], "training.target: cosmoflow's curve is in epochs"),
])
def test_sweep_target_bad_input_is_one_line_and_exit_2(extra, msg, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64}}))
    try:
        code = main(["sweep", "--scenario", str(f), "--gpus", "8", *extra])
    except SystemExit as e:  # argparse's own errors
        code = e.code
    err = capsys.readouterr().err
    assert code == 2 and msg in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


def test_sweep_target_unit_mismatch_names_the_field(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
                             "training": {"target": {"benchmark": "bert", "unit": "tokens"}}}))
    assert main(["sweep", "--scenario", str(f), "--gpus", "8"]) == 2
    err = capsys.readouterr().err
    assert "training.target.unit: 'tokens' does not match bert's curve, which is in samples" in err


def test_compressed_updates_add_model_only_columns_and_keep_the_ranking(runs):
    sc = {"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
          "training": {"target": runs, "compression": "topk"}}
    df = sweep_to_target(sc, 8, [32, 128])["rows"]
    for _, r in df.iterrows():
        b = r["global_batch"]
        # top-k, error feedback at ratio 0.001: S = S_min (1 / 0.001 + 64 / B) against S_min (1 + 64 / B)
        assert r["steps_to_target_model_only"] == pytest.approx(r["steps_to_target"] * (1000 + 64 / b) / (1 + 64 / b))
        assert r["time_to_target_model_only_s"] == pytest.approx(r["steps_to_target_model_only"] * r["step_time_s"])
        assert r["convergence_penalty"] == "error_feedback delta=0.001 (model only)"
    assert list(df["time_to_target_s"]) == sorted(df["time_to_target_s"])
    plain = sweep_to_target({**sc, "training": {"target": runs}}, 8, [32, 128])["rows"]
    assert "steps_to_target_model_only" not in plain.columns


def test_sweep_text_says_the_model_only_penalty(runs, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": TINY, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
                             "training": {"target": runs, "compression": "qsgd"}}))
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "--batches", "64"]) == 0
    text = capsys.readouterr().out
    assert "  with unbiased omega=3.23248814256707" in text and "(model only):" in text
