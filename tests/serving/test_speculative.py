"""Speculative decoding (concurrency_model.serving.speculative; Leviathan et al. 2023)."""
from __future__ import annotations

import json

import pytest
from hypothesis import given
from hypothesis import strategies as st

from concurrency_model.cli import main
from concurrency_model.serving.decoder import infer, predict
from concurrency_model.serving.speculative import tokens_per_iteration

LLAMA = {"hf_config": "llama-2-7b"}
DRAFT = {"kind": "gpt", "layers": 4, "hidden": 1024, "heads": 16, "seq_len": 4096, "vocab": 32000}


def spec(tokens=4, acceptance=0.8, draft=DRAFT):
    return {"draft": draft, "tokens": tokens, "acceptance": acceptance}


def test_tokens_per_iteration_by_hand():
    # (1 - 0.8^5) / 0.2 = (1 - 0.32768) / 0.2 = 3.3616; no acceptance: the target's own token only
    assert tokens_per_iteration(4, 0.8) == pytest.approx(3.3616, abs=1e-12)
    assert tokens_per_iteration(2, 0.5) == pytest.approx(1 + 0.5 + 0.25, abs=1e-12)
    assert tokens_per_iteration(7, 0.0) == 1.0 and tokens_per_iteration(7, 1.0) == 8.0


@given(gamma=st.integers(1, 16), a=st.floats(0, 0.999), b=st.floats(0, 0.999))
def test_tokens_per_iteration_is_bounded_and_monotone(gamma, a, b):
    lo, hi = sorted((a, b))
    assert 1.0 <= tokens_per_iteration(gamma, lo) <= tokens_per_iteration(gamma, hi) <= gamma + 1
    assert tokens_per_iteration(gamma, hi) <= tokens_per_iteration(gamma + 1, hi) + 1e-12


def test_one_iteration_over_the_tokens_it_yields():
    plain = predict(LLAMA, "dgx-a100", 1, 512, 128, "fp16")
    r = predict(LLAMA, "dgx-a100", 1, 512, 128, "fp16", speculative=spec())
    s = r.inference["speculative"]
    assert r.decode_s_per_token == pytest.approx((4 * s["draft_step_s"] + s["verify_step_s"]) / 3.3616, rel=1e-9)
    assert sum(v for k, v in r.breakdown.items() if k.startswith("decode_")) == pytest.approx(r.decode_s_per_token)
    assert s["plain_decode_s_per_token"] == pytest.approx(plain.decode_s_per_token, rel=1e-12)
    # batch 1 is bound by reading the weights: verifying 5 tokens costs about one step, so the speed-up is near
    # Leviathan et al.'s E / (gamma c + 1) with c = draft / target step
    assert s["verify_step_s"] < 1.1 * s["plain_decode_s_per_token"]
    c = s["draft_step_s"] / s["plain_decode_s_per_token"]
    assert s["speedup"] == pytest.approx(3.3616 / (4 * c + 1), rel=0.1)
    # the draft's prompt pass comes after the target's; memory holds both models and both KV caches
    assert r.breakdown["prefill_draft_s"] > 0 and r.prefill_s > plain.prefill_s
    assert r.memory["draft_kv_cache_bytes"] > 0 and r.memory_bytes_per_device > plain.memory_bytes_per_device


def test_large_batches_and_no_acceptance_gain_less():
    small = predict(LLAMA, "dgx-a100", 1, 512, 128, "fp16", speculative=spec()).inference["speculative"]
    big = predict(LLAMA, "dgx-a100", 64, 512, 128, "fp16", speculative=spec()).inference["speculative"]
    assert big["verify_step_s"] > 1.3 * big["plain_decode_s_per_token"]  # 5 x 64 rows: no longer weight-bound
    assert big["speedup"] < small["speedup"]
    none = predict(LLAMA, "dgx-a100", 1, 512, 128, "fp16", speculative=spec(acceptance=0.0))
    assert none.inference["speculative"]["speedup"] < 1  # every draft token rejected: the draft is pure cost


@pytest.mark.parametrize("bad,msg", [
    ({"draft": DRAFT, "tokens": 4}, r"^inference\.speculative\.acceptance: missing"),
    ({**spec(), "temperature": 1}, r"^inference\.speculative\.temperature: unknown field"),
    (spec(tokens=0), r"^inference\.speculative\.tokens: .* positive integer"),
    (spec(acceptance=1.5), r"^inference\.speculative\.acceptance: must be a number in \[0, 1\]"),
    (spec(draft="resnet50"), r"^inference\.speculative\.draft: model: "),
    (spec(draft={**DRAFT, "seq_len": 600}), r"^inference\.speculative\.draft: its context of 600"),
    ("fast", r"^inference\.speculative: expected an object"),
    (spec(draft={**DRAFT, "vocab": 50257}), r"^inference\.speculative\.draft: a vocabulary of 50257 tokens"),
])
def test_bad_speculation_names_the_field(bad, msg):
    with pytest.raises(ValueError, match=msg):
        infer({"model": LLAMA, "cluster": "dgx-a100",
               "inference": {"batch": 1, "prompt_len": 512, "decode_len": 128, "speculative": bad}})


def test_the_draft_takes_the_target_split():
    base = {"model": LLAMA, "cluster": "dgx-a100", "parallel": {"tensor": 8},
            "inference": {"batch": 1, "prompt_len": 64, "decode_len": 8,
                          "speculative": spec(draft={**DRAFT, "heads": 12, "hidden": 768})}}
    with pytest.raises(ValueError, match=r"^inference\.speculative\.draft: parallel\.tensor: 8 does not divide the 12"):
        infer(base)


def test_cli_infer_reports_the_speculation(tmp_path, capsys):
    f = tmp_path / "spec.json"
    f.write_text(json.dumps({"model": LLAMA, "cluster": "dgx-h100", "parallel": {"tensor": 2},
                             "inference": {"batch": 4, "prompt_len": 256, "decode_len": 64, "speculative": spec()}}))
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    s = out["inference"]["speculative"]
    assert s["tokens_per_iteration"] == pytest.approx(3.3616) and s["speedup"] > 1
    assert out["decode_s_per_token_p10"] < out["decode_s_per_token"] < out["decode_s_per_token_p90"]
    assert main(["infer", "--scenario", str(f)]) == 0
    assert "speculative" in capsys.readouterr().out
