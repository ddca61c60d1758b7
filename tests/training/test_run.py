"""A whole training run: steps, days, GPU-hours, cost, energy; gradient accumulation in closed form."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.training.estimate import estimate
from concurrency_model.training.run import run_cost
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


# -- failures and checkpoints (Young 1974) -------------------------------------------------------------------

def test_failures_hand_values_and_outputs():
    # 1,024 GPUs of 50,000 h: M = 50,000 x 3600 / 1024 = 175,781 s; checkpoints of 120 s every sqrt(2 x 120 x M)
    run = {"tokens": 300e9, "gpu_mtbf_hours": 50000, "checkpoint_s": 120, "restart_s": 600}
    r = run_cost(run, 20.0, 1536, 1024, 0.9, 400, seq_len=2048)
    M = 50000 * 3600 / 1024
    tau = math.sqrt(2 * 120 * M)
    work = 95368 * 20.0
    wall = work * (1 + 120 / tau) / (1 - (600 + (tau + 120) / 2) / M)
    assert r["checkpoint_interval_s"] == pytest.approx(tau)
    assert r["run_days"] == pytest.approx(wall / 86400) and r["failure_free_days"] == pytest.approx(work / 86400)
    assert r["expected_failures"] == pytest.approx(wall / M)
    assert r["gpu_hours"] == pytest.approx(1024 * wall / 3600)  # restarts are paid for
    plain = run_cost({"tokens": 300e9}, 20.0, 1536, 1024, 0.9, 400, seq_len=2048)
    assert "expected_failures" not in plain and plain["run_days"] == pytest.approx(work / 86400)


@settings(max_examples=60, deadline=None)
@given(mtbf=st.floats(1e3, 1e6), ckpt=st.floats(1.0, 600.0), gpus=st.integers(8, 65536), k=st.floats(1.2, 3.0))
def test_young_interval_is_the_first_order_optimum(mtbf, ckpt, gpus, k):
    from concurrency_model.training.run import with_failures
    base = {"gpu_mtbf_hours": mtbf, "checkpoint_s": ckpt}
    M = mtbf * 3600 / gpus
    if ckpt > M / 20:  # Young's approximation needs checkpoints much shorter than the MTBF
        return
    best = float(with_failures(base, 1e6, gpus)["wall_s"])
    # Young's interval minimises the first-order waste delta/tau + tau/(2M); the exact form moves the optimum
    # by a term of order delta/M, so a 1.2-3x longer or shorter interval is never better than that
    for tau in (with_failures(base, 1e6, gpus)["checkpoint_interval_s"] * f for f in (k, 1 / k)):
        other = float(with_failures({**base, "checkpoint_interval_s": float(tau)}, 1e6, gpus)["wall_s"])
        assert other >= best * (1 - (ckpt / M) ** 1.5)
    # more GPUs fail more often and take longer
    assert float(with_failures(base, 1e6, 2 * gpus)["wall_s"]) > best


def test_failure_fields_and_no_progress():
    for run, field in (({"tokens": 1e9, "restart_s": 10}, "run.restart_s"),
                       ({"tokens": 1e9, "gpu_mtbf_hours": 1e4}, "run.gpu_mtbf_hours"),
                       ({"tokens": 1e9, "gpu_mtbf_hours": 1e4, "checkpoint_s": -1}, "run.checkpoint_s"),
                       ({"tokens": 1e9, "gpu_mtbf_hours": "a", "checkpoint_s": 1}, "run.gpu_mtbf_hours"),
                       ({"tokens": 1e9, "gpu_mtbf_hours": 1e4, "checkpoint_s": 60, "restart_s": -1}, "run.restart_s")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            run_cost(run, 1.0, 64, 8, 1.0, 400, seq_len=1024)
    # 10,000 GPUs of 1 h each: the job fails every 0.36 s
    with pytest.raises(ValueError, match=r"^run.gpu_mtbf_hours: the job fails every .* no progress"):
        run_cost({"tokens": 1e9, "gpu_mtbf_hours": 1, "checkpoint_s": 60}, 1.0, 64, 10000, 1.0, 400, seq_len=1024)
    # in a sweep such rows take forever instead of stopping it
    r = run_cost({"tokens": 1e9, "gpu_mtbf_hours": 1, "checkpoint_s": 60}, np.array([1.0, 1.0]), np.array([64, 64]),
                 np.array([10000, 8]), np.array([1.0, 1.0]), 400, seq_len=1024)
    assert np.isinf(r["run_days"][0]) and np.isfinite(r["run_days"][1])
