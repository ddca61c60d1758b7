"""The vectorised sweep: same step time as ``estimate``, the space it enumerates, its refusals, the CLI."""
from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from concurrency_model.training.estimate import estimate
from concurrency_model.sweep import sweep
from concurrency_model.sweep.to_target import sweep_to_target

GPT2 = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}, "training": {"dtype": "fp16"}}


@pytest.fixture(scope="module")
def gpt2_sweep():
    return sweep(GPT2, [8, 16])


@pytest.mark.parametrize("spec,gpus", [
    (GPT2, [8, 16]),
    ({"model": "bert-base", "cluster": "dgx1-v100", "parallel": {"global_batch": 32, "tensor": 2},
      "training": {"dtype": "fp16", "overlap": False}}, [8]),
    ({"model": "resnet50", "cluster": "dgx-a100", "parallel": {"global_batch": 64, "tensor": 1},
      "training": {"dtype": "bf16"}}, [4]),
    # LoRA fine-tuning: frozen base, adapters trained (the optimizer's state and the memory differ)
    ({**GPT2, "training": {"dtype": "fp16", "lora_rank": 8}}, [8]),
    # context parallelism searched (ring and Ulysses, degrees 1-8) on a 16k-token sequence
    ({"model": {"kind": "gpt", "layers": 4, "hidden": 1024, "heads": 16, "seq_len": 16384, "vocab": 1024,
                "fused_attention": True}, "cluster": "dgx-a100", "parallel": {"global_batch": 4},
      "training": {"dtype": "bf16"}}, [16]),
])
def test_sweep_equals_estimate_to_the_last_bit_on_random_configurations(spec, gpus):
    r = sweep(spec, gpus)
    rng = np.random.default_rng(7)
    rows = r.frame.iloc[rng.choice(r.feasible, size=min(25, r.feasible), replace=False)]
    for _, row in rows.iterrows():
        e = estimate(r.scenario(row))
        # one compiled function, one point or arrays (:mod:`concurrency_model.compiled`): equal to the last bit
        assert e.step_time_s == row["step_time_s"]
        assert e.memory_bytes_per_device == row["memory_bytes_per_device"]
        for k in ("weights_bytes", "gradients_bytes", "optimizer_bytes", "activations_bytes"):
            assert e.memory[k] == row[k]


def test_space_counts_and_fixed_fields(gpt2_sweep):
    lay = gpt2_sweep.layouts
    assert set(lay["gpus"]) == {8, 16}
    assert (lay["data"] * lay["tensor"] * lay["pipeline"] == lay["gpus"]).all()
    assert (64 % (lay["data"] * lay["microbatch_size"]) == 0).all()
    assert set(lay["tensor"]) == {1, 2, 4}  # 8 does not divide gpt2's 12 heads
    assert not lay.loc[lay["tensor"] == 1, "sequence_parallel"].any()
    assert (lay.loc[lay["data"] == 1, "zero_stage"] == 0).all()
    assert gpt2_sweep.rejected["tensor: does not divide the model's heads or hidden size"] == 2  # once per GPU count
    # what the scenario gives is not searched
    fixed = sweep({**GPT2, "parallel": {"global_batch": 64, "tensor": 2, "pipeline": 2},
                   "training": {"dtype": "fp16", "recompute": "full"}}, 8)
    assert set(fixed.layouts["tensor"]) == {2} and set(fixed.layouts["pipeline"]) == {2}
    assert set(fixed.layouts["recompute"]) == {"full"} and set(fixed.layouts["data"]) == {2}


def test_hardware_grid_is_monotone_and_scales_compute():
    r = sweep({**GPT2, "parallel": {"global_batch": 64, "data": 8}}, 8,
              hardware={"flops": [1, 2, 4], "mem_bw": [1, 2], "inter_bw": [1, 3]})
    assert r.step_time_s.shape[1] == 12
    hw = r.hardware
    for col in ("flops", "mem_bw", "inter_bw"):
        others = [c for c in ("flops", "mem_bw", "inter_bw") if c != col]
        for _, g in hw.groupby(others):
            idx = g.sort_values(col).index.to_numpy()
            t = r.step_time_s[:, idx]
            assert (np.diff(t, axis=1) <= 1e-15).all()  # faster hardware never makes a step slower
    # data parallel on one node: inter-node bandwidth changes nothing
    j1 = hw.index[(hw.flops == 1) & (hw.mem_bw == 1) & (hw.inter_bw == 1)][0]
    j3 = hw.index[(hw.flops == 1) & (hw.mem_bw == 1) & (hw.inter_bw == 3)][0]
    assert np.array_equal(r.step_time_s[:, j1], r.step_time_s[:, j3])


def test_top_and_pareto(gpt2_sweep):
    top = gpt2_sweep.top(5)
    assert list(top["step_time_s"]) == sorted(top["step_time_s"])
    assert top["step_time_s"].iloc[0] == gpt2_sweep.step_time_s.min()
    front = gpt2_sweep.pareto("gpus")
    assert list(front["gpus"]) == sorted(front["gpus"])
    assert (np.diff(front["step_time_s"]) < 0).all()
    for g, t in zip(front["gpus"], front["step_time_s"]):
        assert t == gpt2_sweep.frame.loc[gpt2_sweep.frame["gpus"] <= g, "step_time_s"].min()


def test_fastest_at_each_gpu_count(gpt2_sweep, tmp_path, capsys):
    per = gpt2_sweep.fastest_per_gpus()
    assert list(per["gpus"]) == [8, 16]
    for g, t in zip(per["gpus"], per["step_time_s"]):
        assert t == gpt2_sweep.frame.loc[gpt2_sweep.frame["gpus"] == g, "step_time_s"].min()
    from concurrency_model.cli import main
    f = tmp_path / "s.json"
    f.write_text(json.dumps({**GPT2, "run": {"tokens": 1e9, "price_per_gpu_hour": 2}}))
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "16", "--top", "2", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert [r["gpus"] for r in d["per_gpus"]] == [8, 16]
    assert [r["step_time_s"] for r in d["per_gpus"]] == pytest.approx(list(per["step_time_s"]), rel=1e-12)
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "16", "--top", "2"]) == 0
    text = capsys.readouterr().out
    assert "the fastest at each GPU count:" in text and "GPU-hours" in text
    r = d["per_gpus"][0]  # days and cost in the table, as in the JSON
    assert f"{r['run_days']:.2f} {r['gpu_hours']:>11,.0f} {r['cost']:>12,.0f}" in text


def test_empty_space_says_why():
    with pytest.raises(ValueError, match=r"no valid configuration; rejected: global_batch: not divisible"):
        sweep({**GPT2, "parallel": {"global_batch": 3, "tensor": 1, "pipeline": 1}}, 8)
    with pytest.raises(ValueError, match=r"memory: over the device's capacity \(\d+\)"):
        sweep({"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 8, "tensor": 1,
               "pipeline": 1, "microbatch_size": 1}, "training": {"dtype": "fp16", "zero_stage": 0}}, 8)


@pytest.mark.parametrize("kwargs,field", [
    ({"hardware": {"inter_bw": [0, 1]}}, "hardware.inter_bw"),
    ({"hardware": {"inter_bw": [-2.0]}}, "hardware.inter_bw"),
    ({"hardware": {"nic": [1]}}, "hardware.nic"),
    ({"gpus": [0]}, "gpus"),
    ({"gpus": [10 ** 20]}, "gpus"),  # refused at once, not an hours-long enumeration of its divisors
    ({"hardware": {"flops": [float("inf")]}}, "hardware.flops"),
])
def test_bad_ranges_name_the_field(kwargs, field):
    args = {"gpus": 8, **kwargs}
    with pytest.raises(ValueError, match=rf"^{field}: "):
        sweep(GPT2, args.pop("gpus"), **args)
    with pytest.raises(ValueError, match=r"^parallel.global_batch: "):
        sweep({"model": "gpt2"}, 8)


def test_a_sweep_over_runtimes_is_each_runtime_s_sweep_in_one_table():
    """``training.framework`` as a list: each runtime swept, their layouts in one table; each row's estimate is the
    sweep's, and the fastest under each runtime is that runtime's own sweep's fastest."""
    each = {fw: sweep({**GPT2, "training": {"dtype": "fp16", "framework": fw}}, [8]) for fw in ("megatron", "fsdp2")}
    both = sweep({**GPT2, "training": {"dtype": "fp16", "framework": ["megatron", "fsdp2"]}}, [8])
    assert both.feasible == sum(r.feasible for r in each.values())
    assert both.evaluated == sum(r.evaluated for r in each.values())
    per = both.fastest_per_runtime()
    assert list(per["framework"]) == ["megatron", "fsdp2"]
    for _, row in per.iterrows():
        assert row["step_time_s"] == each[row["framework"]].top(1)["step_time_s"].item()
    for _, row in both.top(4).iterrows():
        assert estimate(both.scenario(row)).step_time_s == row["step_time_s"]
    out = both.to_dict(top=2)
    assert out["frameworks"] == ["megatron", "fsdp2"] and len(out["per_framework"]) == 2
    assert "frameworks" not in each["fsdp2"].to_dict(top=1)


@pytest.mark.parametrize("frameworks, message", [
    ([], "an empty list"), (["fsdp2", "fsdp2"], "'fsdp2' given twice"), (["fsdp3"], "unknown 'fsdp3'"),
    ([2], "each entry names a runtime"),
])
def test_bad_runtime_lists_name_the_field(frameworks, message):
    with pytest.raises(ValueError, match=rf"^training.framework: {message}"):
        sweep({**GPT2, "training": {"framework": frameworks}}, 8)
    with pytest.raises(ValueError, match=r"^training.framework: one runtime here"):
        estimate({**GPT2, "parallel": {"data": 8, "global_batch": 64}, "training": {"framework": ["fsdp2"]}})
    with pytest.raises(ValueError, match=r"^training.framework: one runtime for a time-to-target sweep"):
        sweep_to_target({**GPT2, "training": {"framework": ["fsdp2"], "target": "bert"}}, 8, [32, 64])


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "concurrency_model", *args], capture_output=True, text=True)


def test_cli_json_contract_and_bad_input(tmp_path):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(GPT2))
    out = _cli("sweep", "--scenario", str(f), "--gpus", "8", "--top", "3", "--json")
    assert out.returncode == 0, out.stderr
    d = json.loads(out.stdout)
    assert {"evaluated", "feasible", "elapsed_s", "configs_per_s", "best"} <= set(d)
    assert len(d["best"]) == 3 and d["best"][0]["step_time_s"] <= d["best"][1]["step_time_s"]
    b = d["best"][0]
    assert {"parallel", "training", "step_time_s", "memory_bytes_per_device"} <= set(b)
    again = estimate({"model": "gpt2", "cluster": "dgx-a100", "parallel": b["parallel"], "training": b["training"]})
    assert again.step_time_s == pytest.approx(b["step_time_s"], rel=1e-9)
    for k in ("model_state_bytes", "weights_bytes", "gradients_bytes", "optimizer_bytes",
              "activations_bytes"):  # the memory split, as estimate has it
        assert b["memory"][k] == pytest.approx(again.memory[k], rel=1e-9)
    bad = _cli("sweep", "--scenario", str(f), "--gpus", "8", "--scale", "inter_bw=0,1")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1 and "inter_bw" in bad.stderr
    empty = tmp_path / "e.json"
    empty.write_text(json.dumps({**GPT2, "parallel": {"global_batch": 3, "tensor": 1, "pipeline": 1}}))
    none = _cli("sweep", "--scenario", str(empty), "--gpus", "8")
    assert none.returncode == 2 and "rejected: global_batch" in none.stderr
    csv = _cli("sweep", "--scenario", str(f), "--gpus", "8", "--top", "2", "--csv")
    assert csv.returncode == 0 and csv.stdout.splitlines()[0].startswith("gpus,data,tensor")
    assert len(csv.stdout.strip().splitlines()) == 3


def test_all_degrees_given_the_gpu_count_decides_data():
    r = sweep({**GPT2, "parallel": {"global_batch": 64, "data": 2, "tensor": 2, "pipeline": 2}}, [8, 16])
    assert set(zip(r.layouts["gpus"], r.layouts["data"])) == {(8, 2), (16, 4)}


def test_estimate_of_is_the_rows_estimate_made_once(gpt2_sweep):
    """``estimate_of`` gives ``estimate(scenario(row))``'s figures, the same object on a second call, and the
    runner-up's estimates are the ones it keeps (the report's memory figure reads them again)."""
    res = gpt2_sweep
    row = res.top(1).iloc[0]
    fresh = estimate(res.scenario(row))
    kept = res.estimate_of(row)
    assert kept.step_time_s == fresh.step_time_s and kept.memory == fresh.memory
    assert kept.breakdown == fresh.breakdown
    assert res.estimate_of(row) is kept
    ru = res.runner_up()
    if ru is not None:
        assert ru["estimates"][0] is kept and ru["estimates"][1] is not kept
