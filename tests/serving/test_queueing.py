"""Waiting for a free slot under a load (concurrency_model.serving.queueing: Erlang C, Allen-Cunneen) and what it does to
the first token of continuous batching and to the fleet a serving sweep sizes."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.serving.capacity import replicas_for_load
from concurrency_model.serving.decoder import infer
from concurrency_model.serving.output_lengths import lengths
from concurrency_model.serving.queueing import erlang_c, mean_wait, replicas_for, wait_quantile


def test_erlang_c_by_hand():
    assert erlang_c(1, 0.7) == pytest.approx(0.7, rel=1e-12)  # M/M/1: the utilisation
    assert erlang_c(2, 1.0) == pytest.approx(1 / 3, rel=1e-12)
    assert erlang_c(3, 2.0) == pytest.approx(4 / 9, rel=1e-12)  # B = 4/19, C = 3B / (3 - 2 (1 - B))
    assert erlang_c(4, 0.0) == 0.0
    assert 0 < erlang_c(500, 490.0) < 1  # hundreds of slots: the recursion stays finite


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 5000), st.floats(0.0, 0.999))
def test_erlang_c_stops_early_only_where_the_recurrence_stays_zero(c, u):
    """The Erlang B recurrence ends once it underflows to 0 (a sweep's 32,768 slots at a load of 10 took 0.8 ms a
    call); the answer is the full recurrence's."""
    a, b = u * c, 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
    assert erlang_c(c, a) == c * b / (c - a * (1 - b))


def test_mean_waits_of_the_textbook_queues():
    lam, s = 0.8, 1.0  # M/M/1 and M/D/1 at rho = 0.8: rho S / (1 - rho) and half of it (Pollaczek-Khinchine)
    assert mean_wait(1, lam * s, s, 1.0) == pytest.approx(0.8 / 0.2, rel=1e-12)
    assert mean_wait(1, lam * s, s, 0.0) == pytest.approx(0.8 / 0.4, rel=1e-12)
    with pytest.raises(ValueError, match="grows without bound"):
        mean_wait(4, 4.0, 1.0, 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 200), st.floats(0.01, 0.98), st.floats(0.01, 0.98))
def test_a_heavier_load_waits_longer(c, u1, u2):
    lo, hi = sorted((u1 * c, u2 * c))
    assert erlang_c(c, lo) <= erlang_c(c, hi) + 1e-12
    assert mean_wait(c, lo, 1.0, 0.0) <= mean_wait(c, hi, 1.0, 0.0) + 1e-12


@settings(max_examples=60, deadline=None)
@given(st.floats(0.5, 500.0), st.integers(1, 128), st.floats(0.1, 30.0), st.floats(0.0, 1.0),
       st.floats(0.0, 2.0))
def test_the_fewest_replicas(load, slots, service, cs2, room):
    r, wait = replicas_for(load, slots, service, cs2, room)
    assert load / r * service < slots and wait == mean_wait(slots, load / r * service, service, cs2)
    assert room <= 0 or wait <= room
    if r > 1:  # one fewer is unstable, or (with room for a wait) waits longer than the room
        fewer = load / (r - 1) * service
        assert fewer >= slots or (room > 0 and mean_wait(slots, fewer, service, cs2) > room)


LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100"}


def loaded(load, lengths="fixed"):
    return infer({**LLAMA, "inference": {"batch": 109, "prompt_len": 1024, "decode_len": 128, "batching": "continuous",
                                         "load_rps": load, "output_lengths": lengths}})


def test_the_first_token_waits_for_a_slot_near_capacity():
    light, heavy = loaded(4), loaded(16)  # capacity 16.3 requests a second
    i = heavy.inference
    # 109 slots, Little's law's busy slots at the iteration the engine runs, a request holding one for 128 iterations
    assert i["wait_probability"] == pytest.approx(erlang_c(109, i["slots_in_use"]), rel=1e-12)
    service = 128 * heavy.decode_s_per_token
    assert i["queue_wait_s"] == pytest.approx(mean_wait(109, i["slots_in_use"], service, 0.0), rel=1e-12)
    assert 0.2 < i["queue_wait_s"] < 1.0 and light.inference["queue_wait_s"] < 1e-9
    # 58% wait at all, so the 99th percentile is deep in the exponential tail: (W / C) ln(C / 0.01)
    c = i["wait_probability"]
    assert i["queue_wait_p99_s"] == pytest.approx(i["queue_wait_s"] / c * math.log(c / 0.01), rel=1e-12)
    assert light.inference["queue_wait_p99_s"] == 0.0  # fewer than 1% wait at all
    assert heavy.total_s == pytest.approx(heavy.prefill_s + 127 * heavy.decode_s_per_token, rel=1e-12)
    # geometric lengths (c_s^2 = 1 - 1/128): about twice the wait of equal ones at the same occupancy
    geo = loaded(16, "geometric").inference
    assert geo["queue_wait_s"] / i["queue_wait_s"] == pytest.approx((1 + (1 - 1 / 128)) / 1, rel=0.01)


def test_a_fleet_row_of_an_expert_group_queues_per_replica():
    # 8 replicas share a row's 256 slots: 32 each, a request holding one for 128 iterations of 10 ms
    row = {"expert": 8, "batch": 256, "prefill_s": 0.2, "decode_s_per_token": 0.010}
    dist = lengths("fixed", 128, 4096)
    r, wait = replicas_for_load(400.0, row, dist, 0.25)
    assert (r, wait) == replicas_for(50.0, 32, 1.28, 0.0, 0.05)
    assert wait <= 0.05 and 50.0 / r * 1.28 < 32
    assert replicas_for_load(400.0, {**row, "expert": None}, dist, None) == replicas_for(400.0, 256, 1.28, 0.0)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 100), st.floats(0.05, 0.97), st.floats(0.0, 1.0), st.floats(0.5, 0.999))
def test_wait_quantiles_rise_with_the_quantile_and_bound_the_waiting_share(c, u, cs2, q):
    a = u * c
    t = wait_quantile(c, a, 1.0, cs2, q)
    assert t >= 0 and wait_quantile(c, a, 1.0, cs2, min(0.9999, q + 0.0005)) >= t
    # the exponential tail: the share waiting longer than t is 1 - q (or fewer than that wait at all)
    w = mean_wait(c, a, 1.0, cs2) / erlang_c(c, a) if erlang_c(c, a) > 0 else 0.0
    share = erlang_c(c, a) * math.exp(-t / w) if w > 0 else 0.0
    assert share == pytest.approx(1 - q, rel=1e-9) or (t == 0 and erlang_c(c, a) <= 1 - q)
