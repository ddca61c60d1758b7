"""``calibrate kernels`` (DeepBench's training shapes timed with torch) and ``calibrate steps`` (GPT steps):
the files they write are the files the validation reads, nothing is overwritten, bad input is one line."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from concurrency_model import datasets
from concurrency_model.cli import main

torch = pytest.importorskip("torch")
from concurrency_model.calibrate import kernels, steps  # noqa: E402  (after the skip: they time torch)
from concurrency_model.validate import measured  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run(tmp_path_factory):
    out = tmp_path_factory.mktemp("kern") / "kernels-cpu-test"
    return out, kernels.calibrate(out, limit=2, stream=io.StringIO())


def test_shapes_are_deepbench_training_shapes_in_file_order():
    g = kernels.shapes("gemm")
    raw = datasets.load("deepbench_gemm")
    first = raw[raw["benchmark"] == "train"].iloc[0]
    assert len(g) == 171 and (g.iloc[0]["m"], g.iloc[0]["n"], g.iloc[0]["k"]) == (first["m"], first["n"], first["k"])
    assert len(kernels.shapes("conv")) == 90 and len(kernels.shapes("rnn")) == 53
    assert len(kernels.shapes("rnn", limit=3)) == 3


def test_files_are_in_deepbench_columns_and_the_validation_reads_them(run):
    out, result = run
    assert result["missing"] == [] and result["device"].startswith("CPU ")
    assert sorted(Path(f).name for f in result["files"]) == ["deepbench_conv.csv", "deepbench_gemm.csv",
                                                               "deepbench_rnn.csv"]
    conv = datasets.load_measured(out, "deepbench_conv.csv")  # the schema check of data/measured/kernels-*
    assert len(conv) == 2 and (conv[["fwd_time_ms", "bwd_data_time_ms", "bwd_filter_time_ms"]] > 0).all().all()
    assert conv["total_time_ms"].to_numpy() == pytest.approx(
        conv[["fwd_time_ms", "bwd_data_time_ms", "bwd_filter_time_ms"]].sum(axis=1).to_numpy())
    rnn = datasets.load_measured(out, "deepbench_rnn.csv")
    assert (rnn["input_size"] == rnn["hidden_units"]).all()  # torch's layers project their input
    rows = measured.kernel_rows(out)
    assert len(rows) == 2 + 2 * 3 + 2 * 2 and set(rows["preset"]) == {"cpu-host"}
    assert result["rows"] == 6


def test_rnn_rows_are_predicted_with_their_input_projection(run):
    rows = measured.kernel_rows(run[0])
    rnn = rows[rows["op"] == "rnn"].reset_index(drop=True)
    from concurrency_model.validate import kernels as vk
    with_input = vk.predict(rnn)["predicted_s"].to_numpy()
    without = vk.predict(rnn.drop(columns="input_size"))["predicted_s"].to_numpy()
    assert (with_input > without).all()  # the input GEMM costs time


def test_nothing_is_overwritten_unless_forced(run):
    out, _ = run
    before = (out / "deepbench_gemm.csv").read_bytes()
    with pytest.raises(ValueError, match="deepbench_gemm.csv exists; pass --force"):
        kernels.calibrate(out, ops=["gemm"], limit=1, stream=io.StringIO())
    assert (out / "deepbench_gemm.csv").read_bytes() == before


@pytest.mark.parametrize("kw, field", [({"ops": ["gemx"]}, "ops: unknown 'gemx'"), ({"dtypes": ["fp8"]}, "dtypes"),
                                       ({"ops": []}, "ops: empty")])
def test_bad_ops_and_dtypes_name_the_field(tmp_path, kw, field):
    with pytest.raises(ValueError, match=field):
        kernels.calibrate(tmp_path / "x", limit=1, stream=io.StringIO(), **kw)


def test_cli_exit_2_with_one_line(tmp_path, capsys):
    assert main(["calibrate", "kernels", "--out", str(tmp_path / "x"), "--ops", "gemm,pool"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "ops: unknown 'pool'" in err[0]
    with pytest.raises(SystemExit) as e:
        main(["calibrate", "kernels", "--out", str(tmp_path / "x"), "--budget-s", "0"])
    assert e.value.code == 2


def test_budget_leaves_the_rest_listed_as_missing(tmp_path):
    r = kernels.calibrate(tmp_path / "b", ops=["gemm"], limit=kernels.CHUNK + 2, budget_s=1e-9,
                          stream=io.StringIO())
    assert len(r["missing"]) == kernels.CHUNK + 2 and r["missing"][0]["reason"] == "time budget spent"


def test_steps_write_rows_the_validation_predicts(tmp_path):
    folder = tmp_path / "steps-cpu-test"
    r = steps.calibrate(folder, quick=True, stream=io.StringIO())
    assert r["failed"] == [] and r["rows"] == 4 and r["device"].startswith("CPU ")
    df = datasets.load_measured(folder, "gpt_steps.csv")
    assert list(df["kind"]) == ["train", "train", "prefill", "decode"] and (df["median_ms"] > 0).all()
    assert (df["params"] == df["params"].iloc[0]).all() and (df["dtype"] == "fp32").all()
    frame = measured.steps_frame("measured-steps-cpu-test", folder)
    assert len(frame) == 4 and (frame["status"] == "ok").all() and np.isfinite(frame["predicted"]).all()
    before = (folder / "gpt_steps.csv").read_bytes()
    with pytest.raises(ValueError, match="gpt_steps.csv exists; pass --force"):
        steps.calibrate(folder, quick=True, stream=io.StringIO())
    assert (folder / "gpt_steps.csv").read_bytes() == before
    left = steps.calibrate(folder, force=True, budget_s=1e-9, stream=io.StringIO(), runs=steps.TINY[:2])
    assert [f["reason"] for f in left["failed"]] == ["time budget spent"] * 2 and left["files"] == []
    with pytest.raises(ValueError, match="runs: "):
        steps.calibrate(tmp_path / "bad", runs=[("serve", "gpt2", 1, 8, "flash")], stream=io.StringIO())


def test_cli_steps_exit_2_on_an_existing_file(tmp_path, capsys):
    (tmp_path / "gpt_steps.csv").write_text("kept\n")
    assert main(["calibrate", "steps", "--quick", "--out", str(tmp_path)]) == 2
    assert "gpt_steps.csv exists" in capsys.readouterr().err
    assert (tmp_path / "gpt_steps.csv").read_text() == "kept\n"

@pytest.mark.parametrize("name, positions", [("gpt2", 1024), ("gpt-mini", 320), ("tiny", 128)])
def test_step_model_is_the_toolkits_graph(name, positions):
    """The torch model and the toolkit's ``{"kind": "gpt"}`` graph of the same sizes hold the same parameters
    (GPT-2 small: 124,439,808, transformer.gpt's docstring, Radford et al. 2019)."""
    from concurrency_model.models import get_model
    layers, h, heads = steps.SIZES[name]
    torch_params = sum(p.numel() for p in steps.GPT(layers, h, heads, positions).parameters())
    spec = {"kind": "gpt", "layers": layers, "hidden": h, "heads": heads, "seq_len": 64, "vocab": steps.VOCAB,
            "max_positions": positions}
    assert get_model(spec).params == torch_params
    if name == "gpt2":
        assert torch_params == 124_439_808


def test_one_device_cluster_estimates_a_single_device():
    from concurrency_model.training.estimate import estimate
    e = estimate({"model": "gpt2", "cluster": measured.one_device_cluster("cpu-host"),
                  "parallel": {"microbatch_size": 1, "global_batch": 1}, "training": {"dtype": "fp32"}})
    assert e.scenario.gpus == 1 and e.step_time_s > 0


def test_unknown_device_is_refused_naming_it(tmp_path):
    src = ROOT / "data" / "measured" / "kernels-cpu-host-20261204" / "deepbench_gemm.csv"
    folder = tmp_path / "kernels-x"
    folder.mkdir()
    pd.read_csv(src).assign(device="Some NPU").to_csv(folder / "deepbench_gemm.csv", index=False)
    with pytest.raises(ValueError, match="device 'Some NPU' has no preset"):
        measured.kernel_rows(folder)


def test_a_failed_run_is_a_row_with_its_error(tmp_path, monkeypatch):
    real = steps.run

    def run(kind, *a, **k):
        if kind == "prefill":
            raise torch.OutOfMemoryError("CUDA out of memory. Tried to allocate 2.00 GiB")
        return real(kind, *a, **k)
    monkeypatch.setattr(steps, "run", run)
    folder = tmp_path / "steps-oom-test"
    r = steps.calibrate(folder, quick=True, stream=io.StringIO())
    assert [f["run"].split()[0] for f in r["failed"]] == ["prefill"] and r["rows"] == 4
    df = datasets.load_measured(folder, "gpt_steps.csv")  # the failed row keeps its shape: the schema holds
    assert df.loc[df["kind"] == "prefill", "error"].str.startswith("CUDA out of memory").all()
    frame = measured.steps_frame("s", folder)
    assert len(frame) == 3 and "prefill" not in " ".join(frame["label"])  # nothing to compare, not a failure


def test_a_run_stopped_from_outside_keeps_the_chunks_it_timed(tmp_path, monkeypatch):
    """``timeout`` kills a part of the device script mid-way: every chunk of shapes timed is already on disk."""
    real, calls = kernels.bench, []

    def bench(*a, **k):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt  # the second chunk never finishes
        return real(*a, **k)
    monkeypatch.setattr(kernels, "bench", bench)
    out = tmp_path / "kernels-stopped"
    with pytest.raises(KeyboardInterrupt):
        kernels.calibrate(out, ops=["gemm"], limit=kernels.CHUNK + 2, stream=io.StringIO())
    kept = datasets.load_measured(out, "deepbench_gemm.csv")
    assert len(kept) == kernels.CHUNK and (kept["time_ms"] > 0).all()
    assert not list(out.glob(".*.tmp"))  # no temporary file left behind
