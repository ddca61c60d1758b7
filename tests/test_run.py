"""A whole training run: steps, days, GPU-hours, cost, energy; gradient accumulation in closed form."""
from __future__ import annotations

import json
import subprocess
import sys

import pytest

from concurrency_model.parallel.estimate import estimate
from concurrency_model.parallel.run import run_cost
from concurrency_model.sweep import sweep

GPT2 = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "fp16", "overlap": False}}


def test_hand_values():
    r = run_cost({"samples": 1_281_167, "epochs": 90, "price_per_gpu_hour": 3.0}, 0.25, 1024, 32, 0.5, 400)
    steps = -(-1_281_167 * 90 // 1024)  # ImageNet-1k, 90 epochs at batch 1024: 112,603 steps
    assert r["run_steps"] == steps == 112_603
    assert r["run_days"] == pytest.approx(steps * 0.25 / 86400)
    assert r["gpu_hours"] == pytest.approx(32 * steps * 0.25 / 3600)
    assert r["cost"] == pytest.approx(3.0 * 32 * steps * 0.25 / 3600)
    assert r["energy_kwh"] == pytest.approx(32 * steps * 0.25 / 3600 * 400 * 0.5 / 1000)
    assert run_cost({"samples": 10}, 1.0, 4, 1, 1.0, 100)["cost"] is None


@pytest.mark.parametrize("m", [1, 2, 3, 8, 64])
def test_gradient_accumulation_closed_form_equals_the_explicit_sum(m):
    # one device, m microbatches of 2 accumulated: the closed form m (t_f + t_b) + optimizer equals the
    # sum, microbatch after microbatch, of one microbatch's forward and backward (each at least the host's
    # time to issue its kernels: GPT-2 at batch 2 waits on the host), then the optimizer
    one = estimate({**GPT2, "parallel": {"microbatch_size": 2, "global_batch": 2}}).breakdown
    many = estimate({**GPT2, "parallel": {"microbatch_size": 2, "global_batch": 2 * m}})
    explicit = 0.0
    for _ in range(m):
        explicit += one["forward_s"] + one["backward_s"] + one["host_wait_s"]
    explicit += one["optimizer_s"]
    assert many.step_time_s == pytest.approx(explicit, rel=1e-12)


def test_estimate_and_sweep_carry_the_run():
    run = {"tokens": 1e9, "price_per_gpu_hour": 2.5}
    sc = {**GPT2, "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64}, "run": run}
    e = estimate(sc)
    steps = -(-int(1e9) // (64 * 1024))
    assert e.run["run_steps"] == steps
    assert e.run["gpu_hours"] == pytest.approx(8 * steps * e.step_time_s / 3600)
    assert e.to_dict()["cost"] == pytest.approx(2.5 * e.run["gpu_hours"])
    r = sweep({**sc, "parallel": {"global_batch": 64}}, [8, 16])
    front = r.pareto("cost")
    assert list(front["cost"]) == sorted(front["cost"]) and (front["step_time_s"].diff().dropna() < 0).all()
    row = r.top(1).iloc[0]
    again = estimate(r.scenario(row))
    assert again.run["cost"] == pytest.approx(row["cost"], rel=1e-9)
    assert again.run["energy_kwh"] == pytest.approx(row["energy_kwh"], rel=1e-9)


@pytest.mark.parametrize("run,field", [
    ({"tokens": 1e9, "price_per_gpu_hour": -1}, "run.price_per_gpu_hour"),
    ({"tokens": 1e9, "board_power_w": 0}, "run.board_power_w"),
    ({"tokens": 1e9, "samples": 5}, "run"),
    ({"samples": 100, "watts": 3}, "run.watts"),
])
def test_bad_run_names_the_field(run, field):
    with pytest.raises(ValueError, match=rf"^{field}[:]"):
        estimate({**GPT2, "run": run})
    out = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "/dev/stdin", "--json"],
                         input=json.dumps({**GPT2, "run": run}), capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1 and field in out.stderr
