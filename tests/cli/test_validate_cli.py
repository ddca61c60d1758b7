"""``concurrency-model validate`` and :mod:`concurrency_model.validate.registry`: contract keys, bad input, and
a guard against the accuracy getting worse."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

from concurrency_model.cli import main
from concurrency_model.validate import registry

DATA = Path(__file__).resolve().parents[2] / "data"

# Median APE (fraction) of the quick run, measured 2026-12-02, plus a margin of 2 percentage points: a
# change that makes a dataset's median worse than this fails. Lower a number when the model improves.
# (dataset: (main mode of the quick run, current median APE + 0.02))
GUARD = {
    "deepbench-gemm": ("preset", 0.2310 + 0.02),
    "deepbench-conv": ("preset", 0.2597 + 0.02),
    "deepbench-rnn": ("in-sample", 0.3372 + 0.02),
    "deepbench-inference": ("preset", 0.2273 + 0.02),  # 2026-12-03
    "deepbench-sparse": ("preset", 0.1511 + 0.02),  # 2026-12-04: CSR and dense times of the pruned GEMMs
    "deepbench-allreduce": ("held-out", 0.0497 + 0.02),
    "nccl-tests-allreduce": ("preset", 0.1044 + 0.02),  # 2026-12-06: the A100 run's 4 queue pairs (comm.nccl)
    "vtrain-single": ("held-out", 0.0874 + 0.02),  # quick: 36 of the 720 odd rows
    "megatron-2020": ("preset", 0.0434 + 0.02),
    "megatron-2021": ("preset", 0.0515 + 0.02),  # quick: 10 of the 20 rows
    "narayanan2021-table2": ("preset", 0.3047 + 0.02),
}


def cli(*args, data_dir=None):
    env = dict(os.environ)
    if data_dir is not None:
        env["CONCURRENCY_MODEL_DATA"] = str(data_dir)
    return subprocess.run([sys.executable, "-m", "concurrency_model", "validate", *args], capture_output=True,
                          text=True, env=env, cwd=Path(__file__).resolve().parents[2])




@pytest.fixture(scope="module")
def guarded():
    return registry.summarize(registry.validate(list(GUARD), quick=True))


def test_json_has_the_contract_keys(capsys):
    assert main(["validate", "--dataset", "deepbench-rnn", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    (s,) = out["datasets"]
    assert set(s) >= {"name", "rows", "median_ape", "mean_ape", "max_ape", "mode", "rows_total", "error"}
    assert s["name"] == "deepbench-rnn" and s["rows"] == s["rows_total"] == 740 and s["error"] is None
    assert 0 < s["median_ape"] <= s["mean_ape"] <= s["max_ape"] and s["median_ape"] < 1  # fractions
    assert main(["validate", "--dataset", "deepbench-gemm"]) == 0
    text = capsys.readouterr().out
    assert "deepbench-gemm" in text and "median" in text and "%" in text


def test_rows_and_summary_agree():
    df = registry.validate("deepbench-allreduce")
    assert list(df.columns) == registry.COLUMNS and (df["dataset"] == "deepbench-allreduce").all()
    assert (df["row"] >= 2).all() and df["row"].is_unique  # lines of the CSV file
    raw = pd.read_csv(DATA / "deepbench_allreduce.csv")
    r = df.iloc[0]
    assert raw.loc[r["row"] - 2, "mean_time_ms"] * 1e-3 == pytest.approx(r["measured"])
    (s,) = registry.summarize(df)
    assert s["rows"] == len(df) and s["median_ape"] == pytest.approx(df["ape"].median())
    assert s["mean_ape"] == pytest.approx(((df["predicted"] - df["measured"]).abs() / df["measured"]).mean())


def test_unknown_dataset_exits_2_with_one_line():
    p = cli("--dataset", "no-such-data")
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and p.stdout == ""
    assert "no-such-data" in lines[0] and "deepbench-gemm" in lines[0] and "narayanan2021-table2" in lines[0]
    with pytest.raises(ValueError, match="allowed"):
        registry.validate("no-such-data")


def test_broken_csv_is_reported_and_the_others_still_validated(broken_copy, tmp_path):
    broken_copy("deepbench_gemm.csv", "time_ms", row=7)  # data row 7 = line 9
    for name in ("deepbench_allreduce.csv", "nccltests_allreduce_sweeps.csv"):
        shutil.copy(DATA / name, tmp_path / name)
    p = cli("--json", data_dir=tmp_path)
    assert p.returncode == 1
    out = {s["name"]: s for s in json.loads(p.stdout)["datasets"]}
    assert "deepbench_gemm.csv: row 9, column 'time_ms': 'fast'" in out["deepbench-gemm"]["error"]
    for name in ("deepbench-allreduce", "nccl-tests-allreduce"):
        assert out[name]["error"] is None and out[name]["rows"] > 10 and out[name]["median_ape"] < 0.5
    lines = p.stderr.strip().splitlines()
    failed = [n for n, s in out.items() if s["error"]]
    assert len(lines) == len(failed) and "Traceback" not in p.stderr  # one line per broken dataset
    assert any("deepbench-gemm: deepbench_gemm.csv: row 9, column 'time_ms'" in line for line in lines)


def test_missing_column_of_the_one_dataset_asked_exits_2(broken_copy, tmp_path):
    broken_copy("deepbench_allreduce.csv", "mean_time_ms", drop=True)
    p = cli("--dataset", "deepbench-allreduce", data_dir=tmp_path)
    lines = p.stderr.strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1
    assert "deepbench_allreduce.csv: row 1 (header), column 'mean_time_ms': missing" in lines[0]


def test_non_numeric_time_in_a_column_that_may_be_blank(broken_copy, tmp_path, monkeypatch):
    broken_copy("deepbench_conv.csv", "bwd_filter_time_ms", row=3, value="1.2ms")
    monkeypatch.setenv("CONCURRENCY_MODEL_DATA", str(tmp_path))
    (s,) = registry.summarize(registry.validate("deepbench-conv"))
    assert s["rows"] == 0 and "deepbench_conv.csv: row 5, column 'bwd_filter_time_ms': '1.2ms'" in s["error"]


@pytest.mark.parametrize("name", list(GUARD))
def test_median_ape_not_worse_than_guard(guarded, name):
    s = {x["name"]: x for x in guarded}[name]
    mode, limit = GUARD[name]
    assert s["error"] is None and s["mode"] == mode and s["rows"] > 0
    assert s["median_ape"] <= limit, f"{name}: median APE {s['median_ape']:.4f} > guard {limit:.4f}"
