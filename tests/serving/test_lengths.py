"""Unequal output lengths: what a static batch waits for (concurrency_model.serving.output_lengths)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from concurrency_model.serving.kernels import decode_step
from concurrency_model.serving.decoder import infer
from concurrency_model.serving.output_lengths import lengths

LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100"}


def sc(batch, kind, batching="static", **extra):
    return {**LLAMA, "inference": {"batch": batch, "prompt_len": 1024, "decode_len": 128, "batching": batching,
                                   "output_lengths": kind, **extra}}


def test_expected_longest_by_hand():
    u = lengths("uniform", 2, 10)  # 1, 2 or 3 tokens
    assert u.mean == pytest.approx(2.0) and u.longest == 3
    assert u.expected_max(3) == pytest.approx(1 + (1 - 1 / 27) + (1 - 8 / 27))
    f = lengths("fixed", 128, 4000)
    assert f.expected_max(64) == 128 and f.longest == 128
    g = lengths("geometric", 10, 50)  # truncated at 50: the mean falls below 10
    assert g.longest == 50 and 9.5 < g.mean < 10 and abs(g.pmf.sum() - 1) < 1e-12


@given(st.sampled_from(["uniform", "geometric"]), st.integers(1, 300), st.integers(1, 512))
def test_the_longest_grows_with_the_batch(kind, mean, batch):
    d = lengths(kind, mean, 1000)
    assert d.expected_max(1) == pytest.approx(d.mean, rel=1e-9)  # one request: its own length
    e, e_more = d.expected_max(batch), d.expected_max(batch + 1)
    assert d.mean - 1e-9 <= e <= e_more + 1e-9 and e_more <= d.longest + 1e-9


def test_a_static_batch_waits_for_its_longest():
    r = infer(sc(32, "uniform"))
    steps = lengths("uniform", 128, 4096 - 1024).expected_max(32)  # lengths 1..255
    assert r.inference["decode_steps"] == pytest.approx(steps) and r.inference["mean_decode_len"] == pytest.approx(128)
    assert r.total_s == pytest.approx(r.prefill_s + steps * r.decode_s_per_token, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(32 * 128 / r.total_s, rel=1e-12)  # the tokens are the mean's
    assert r.kv_cache_bytes == 2 * 32 * 32 * (1024 + 255) * 32 * 128 * 2  # the longest possible request's cache
    fixed = infer(sc(32, "fixed"))
    assert r.tokens_per_s < 0.65 * fixed.tokens_per_s  # 248 steps for 128 tokens a sequence
    # continuous batching refills the slots: only the mean matters
    cont, cont_fixed = infer(sc(32, "uniform", "continuous")), infer(sc(32, "fixed", "continuous"))
    assert cont.tokens_per_s == cont_fixed.tokens_per_s > 1.7 * r.tokens_per_s
    assert "decode_steps" not in cont.inference


def test_bad_input():
    with pytest.raises(ValueError, match="^inference.output_lengths: unknown 'poisson'; allowed: fixed, uniform"):
        infer(sc(1, "poisson"))
    with pytest.raises(ValueError, match=r"^inference.decode_len: uniform lengths reach 2 x 2000 - 1 = 3999 tokens"):
        infer({**LLAMA, "inference": {"prompt_len": 1024, "decode_len": 2000, "output_lengths": "uniform"}})
    with pytest.raises(ValueError, match="^inference.output_lengths: unequal lengths with speculative decoding"):
        infer(sc(1, "geometric", speculative={"draft": {"kind": "gpt", "layers": 2, "hidden": 512, "heads": 8,
                                                        "seq_len": 4096, "vocab": 32000}, "tokens": 4,
                                              "acceptance": 0.8}))
    with pytest.raises(ValueError, match="^memory: .* exceeds 80.0 GB"):  # a cache for the whole context per sequence
        infer(sc(32, "geometric"))
