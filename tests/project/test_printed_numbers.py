"""Printed numbers agree with each other: energy follows the GPU-hours and the communication, a serving plan's wait
for a slot counts against the targets it is said to meet, every cost carries its currency, bytes print as GB."""
from __future__ import annotations

import json
import re
import subprocess
import sys

import pytest

from concurrency_model.cli import main
from concurrency_model.training.estimate import estimate
from concurrency_model.training.run import WAIT_PARTS

# GPT-2 on 4 DGX A100s with a run: small enough for the CLI in a test
GPT2 = {"model": "gpt2", "cluster": "dgx-a100",
        "parallel": {"data": 32, "microbatch_size": 4, "global_batch": 512},
        "training": {"dtype": "bf16", "overlap": False}, "run": {"tokens": 1e10, "price_per_gpu_hour": 2.0}}
LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100",
         "inference": {"prompt_len": 1024, "decode_len": 128, "batching": "continuous",
                       "price_per_gpu_hour": 2.0}}


def _cli(args: list, scenario: dict) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "concurrency_model", *args, "--scenario", "/dev/stdin"],
                          input=json.dumps(scenario), capture_output=True, text=True)


def test_energy_is_the_gpu_hours_at_the_busy_share():
    e = estimate(GPT2)
    b, step = e.breakdown, e.step_time_s
    busy = (step - sum(b[k] for k in WAIT_PARTS)) / step
    assert 0.5 < busy <= 1.0
    power = e.scenario.cluster.device.board_power_w  # 400 W, the A100 SXM4 preset
    assert power == 400
    assert e.run["energy_kwh"] == pytest.approx(e.run["gpu_hours"] * power * busy / 1000, rel=1e-12)


def test_energy_follows_exposed_communication():
    """ZeRO-3 adds exposed gathers: GPU-hours grow by the step's ratio and energy with them (it stayed flat when
    only the compute seconds drew power)."""
    base = estimate(GPT2)
    z3 = estimate({**GPT2, "training": {**GPT2["training"], "zero_stage": 3, "framework": "fsdp2"}})
    assert z3.breakdown["data_parallel_exposed_s"] > base.breakdown["data_parallel_exposed_s"]
    hours = z3.run["gpu_hours"] / base.run["gpu_hours"]
    energy = z3.run["energy_kwh"] / base.run["energy_kwh"]
    assert hours > 1.01 and energy > 1.01
    # the busy shares differ only by the waits: the two ratios are within the waits' shares of each other
    waits = max(sum(x.breakdown[k] for k in WAIT_PARTS) / x.step_time_s for x in (base, z3))
    assert abs(energy / hours - 1) <= waits + 1e-12


def test_cli_compare_prints_energy_moving_with_gpu_hours():
    out = _cli(["estimate", "--compare", "training.zero_stage=3", "--compare", "training.framework=fsdp2"], GPT2)
    assert out.returncode == 0, out.stderr
    rows = {line.split()[0]: line.split() for line in out.stdout.splitlines() if line.strip()}
    hours, kwh = float(rows["GPU-hours"][-1].rstrip("%")), float(rows["kWh"][-1].rstrip("%"))
    assert hours > 1 and kwh > 1 and abs(kwh - hours) < 0.2 * hours
    assert "cost USD" in out.stdout


def test_serving_plan_says_which_targets_it_meets(tmp_path, capsys):
    """Under a load with a per-token target only, the best plan's wait for a slot is printed as what no target
    bounds, with the first token's mean time including it; with a first-token target the wait counts against it."""
    f = tmp_path / "llama.json"
    f.write_text(json.dumps(LLAMA))
    args = ["infer", "--scenario", str(f), "--sweep", "--load", "100", "--max-decode-ms", "20"]
    assert main(args + ["--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    assert best["decode_s_per_token"] <= 0.020 and best["queue_wait_s"] > 0.1
    assert main(args) == 0
    text = capsys.readouterr().out
    line = next(x for x in text.splitlines() if x.startswith("fewest GPUs"))
    assert "within 20 ms per token:" in line and "within the target" not in text
    first = (best["prefill_s"] + best["queue_wait_s"]) * 1e3
    assert (f"no target on the first token: {first:,.1f} ms on average, {best['queue_wait_s'] * 1e3:,.1f} ms of it "
            "waiting for a slot") in text
    assert "USD/Mtok" in text and "wait ms" in text
    assert main(args + ["--max-first-token-ms", "200", "--json"]) == 0
    bound = json.loads(capsys.readouterr().out)
    ok = [r for r in bound["sweep"] if r["meets_target"]]
    assert ok and all(r["prefill_s"] + r["queue_wait_s"] <= 0.2 * (1 + 1e-12) for r in ok)
    assert bound["best"]["prefill_s"] + bound["best"]["queue_wait_s"] <= 0.2 * (1 + 1e-12)


def test_currency_labels_every_cost(capsys):
    out = _cli(["estimate", "--currency", "eur"], GPT2)
    assert out.returncode == 0 and "cost " in out.stdout
    run_line = next(x for x in out.stdout.splitlines() if x.startswith("run:"))
    assert re.search(r", cost [\d,]+ EUR, ", run_line), run_line
    data = json.loads(_cli(["estimate", "--json"], {**GPT2, "run": {**GPT2["run"], "currency": "JPY"}}).stdout)
    assert data["currency"] == "JPY" and data["cost"] == pytest.approx(2.0 * data["gpu_hours"])
    assert "currency" not in json.loads(_cli(["estimate", "--json"], {**GPT2, "run": {"tokens": 1e10}}).stdout)
    inf = json.loads(_cli(["infer", "--currency", "GBP", "--json"], LLAMA).stdout)
    assert inf["currency"] == "GBP" and inf["cost_per_million_tokens"] > 0
    assert "GBP" in _cli(["infer", "--currency", "GBP"], LLAMA).stdout


@pytest.mark.parametrize("args,scenario,field", [
    (["estimate", "--currency", "dollars"], GPT2, "--currency"),
    (["estimate"], {**GPT2, "run": {**GPT2["run"], "currency": "U$"}}, "run.currency"),
    (["estimate"], {**GPT2, "run": {**GPT2["run"], "currency": 840}}, "run.currency"),
    (["estimate"], {**GPT2, "run": {**GPT2["run"], "price_per_gpu_hour": -2}}, "run.price_per_gpu_hour"),
    (["infer"], {**LLAMA, "inference": {**LLAMA["inference"], "currency": "EURO"}}, "inference.currency"),
    (["infer"], {**LLAMA, "inference": {**LLAMA["inference"], "price_per_gpu_hour": -1}},
     "inference.price_per_gpu_hour"),
])
def test_bad_currency_or_price_is_one_line_naming_the_field(args, scenario, field):
    out = _cli(args, scenario)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert f"{field}:" in out.stderr


def test_sweep_prints_bytes_as_gb_and_cost_with_its_currency(capsys):
    sc = {**GPT2, "parallel": {"global_batch": 512}}
    out = _cli(["sweep", "--gpus", "8", "--top", "2", "--csv"], sc)
    assert out.returncode == 0, out.stderr
    header, *rows = out.stdout.strip().splitlines()
    cols = header.split(",")
    assert "memory_GB_per_device" in cols and "cost_USD" in cols and not any("bytes" in c for c in cols)
    data = json.loads(_cli(["sweep", "--gpus", "8", "--top", "2", "--json"], sc).stdout)
    first = dict(zip(cols, rows[0].split(",")))
    assert float(first["memory_GB_per_device"]) == pytest.approx(data["best"][0]["memory_bytes_per_device"] / 1e9)
    assert data["currency"] == "USD"
    text = _cli(["sweep", "--gpus", "8", "--top", "2"], sc).stdout
    assert "cost USD" in text and "GB/dev" in text
    assert main(["sweep", "--scenario", "gpt3-175b-3d", "--gpus", "8", "--currency", "X1Y"]) == 2
    assert "--currency:" in capsys.readouterr().err
