"""GPU-hours, energy and cost per million generated tokens (concurrency_model.serving.economics)."""
from __future__ import annotations

import pytest

from concurrency_model.serving.capacity import serving_sweep
from concurrency_model.serving.economics import busy_seconds
from concurrency_model.serving.decoder import infer

LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100"}


def sc(**inf):
    return {**LLAMA, "inference": {"batch": 64, "prompt_len": 1024, "decode_len": 128, **inf}}


def test_static_batch_by_hand():
    r = infer(sc(price_per_gpu_hour=2.5))
    e = r.to_dict()
    hours = 1e6 / r.tokens_per_s / 3600  # one GPU
    assert e["gpu_hours_per_million_tokens"] == pytest.approx(hours, rel=1e-12)
    assert e["cost_per_million_tokens"] == pytest.approx(2.5 * hours, rel=1e-12)
    b = r.breakdown  # one request: the prefill once, the decode breakdown per token
    busy = b["prefill_compute_s"] + 128 * (b["decode_compute_s"] + b["decode_kv_attention_s"])
    assert e["energy_per_token_j"] == pytest.approx(700 * busy / r.total_s / r.tokens_per_s, rel=1e-12)
    assert 0.9 < busy / r.total_s <= 1.0  # one GPU, compiled runtime: the kernels fill the time


def test_idle_time_draws_no_power_and_no_price_no_cost():
    # an eager host's waits are counted in GPU-hours, not in energy; the tensor-parallel collectives, kernels, in both
    r = infer({**sc(batch=1, host_overhead_s=60e-6), "parallel": {"tensor": 2}}).to_dict()
    assert "cost_per_million_tokens" not in r
    joules_at_full_power = 2 * 700 / r["tokens_per_s"]
    assert r["energy_per_token_j"] < 0.8 * joules_at_full_power
    assert busy_seconds({"decode_host_wait_s": 1.0, "decode_tensor_comm_s": 1.0, "decode_pipeline_p2p_s": 1.0}) == 2


def test_continuous_batching_and_the_sweep():
    c = infer(sc(batching="continuous", price_per_gpu_hour=1.0)).to_dict()
    assert c["cost_per_million_tokens"] == pytest.approx(1e6 / c["tokens_per_s"] / 3600, rel=1e-12)
    df = serving_sweep(sc(price_per_gpu_hour=2.0))
    per_gpu = df["tokens_per_s_per_gpu"]
    assert df["cost_per_million_tokens"].to_numpy() == pytest.approx((2.0 * 1e6 / per_gpu / 3600).to_numpy(), rel=1e-12)
    assert df["cost_per_million_tokens"].is_monotonic_increasing  # sorted by tokens/s per GPU: the cheapest first


@pytest.mark.parametrize("bad", [-1, "2", float("inf"), True])
def test_bad_price(bad):
    with pytest.raises(ValueError, match="^inference.price_per_gpu_hour: must be a number >= 0"):
        infer(sc(price_per_gpu_hour=bad))
