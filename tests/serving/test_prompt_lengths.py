"""Prompts of unequal lengths (inference.prompt_lengths): padded static batches, continuous slots at the mean."""
from __future__ import annotations

import pytest

from concurrency_model.serving.disaggregated import plan
from concurrency_model.serving.decoder import infer
from concurrency_model.serving.output_lengths import lengths, spread_factor
from concurrency_model.serving.overheads import kv_cache_bytes

LLAMA = {"hf_config": "llama-2-7b"}
P, O = 1024, 128


def sc(batching="static", batch=16, **inf):
    return {"model": LLAMA, "cluster": "dgx-h100",
            "inference": {"batch": batch, "prompt_len": P, "decode_len": O, "dtype": "bf16", "batching": batching,
                          **inf}}


@pytest.mark.parametrize("batching", ["static", "continuous"])
def test_equal_prompts_are_the_default(batching):
    assert infer(sc(batching)).to_dict() == infer(sc(batching, prompt_lengths="fixed")).to_dict()


def test_a_static_batch_pads_to_its_longest_prompt():
    r = infer(sc(prompt_lengths="uniform"))
    law = lengths("uniform", P, 4096 - O)  # 1 .. 2,047 tokens
    padded = round(law.expected_max(16))
    assert r.inference["padded_prompt_len"] == padded and r.inference["mean_prompt_len"] == pytest.approx(P)
    same = infer(sc(prompt_len=padded))  # equal prompts of the padded length: the same passes
    assert r.prefill_s == pytest.approx(same.prefill_s, rel=1e-12)
    assert r.decode_s_per_token == pytest.approx(same.decode_s_per_token, rel=1e-12)
    # the cache of the longest possible prompt and output
    assert r.kv_cache_bytes == kv_cache_bytes(32, 16, 2047 + O, 32, 128, 2)
    assert r.tokens_per_s < infer(sc()).tokens_per_s


def test_continuous_slots_follow_the_mean_prompt():
    fixed, uni = infer(sc("continuous", 32)), infer(sc("continuous", 32, prompt_lengths="uniform"))
    assert uni.kv_cache_bytes == fixed.kv_cache_bytes  # the slots at the mean prompt
    f, u = fixed.breakdown["iteration_prompt_attention_s"], uni.breakdown["iteration_prompt_attention_s"]
    k = spread_factor(lengths("uniform", P, 4096 - O))
    assert k == pytest.approx(1 + 1 / 3, rel=1e-3) and f < u < k * f  # the kernels' launches do not scale
    geo = infer(sc("continuous", 32, prompt_lengths="geometric", prefix_len=512))
    law = lengths("geometric", P - 512, 4096 - 512 - O)  # truncated where a request no longer fits: mean below 512
    assert geo.inference["mean_prompt_len"] == pytest.approx(512 + law.mean, rel=1e-6) and law.mean < 512


def test_spread_factor_by_hand():
    law = lengths("uniform", 2, 10)  # new tokens 1, 2, 3 after 4 cached: E[q (4 + q / 2)] = (4.5 + 10 + 16.5) / 3
    assert spread_factor(law, 4) == pytest.approx((31 / 3) / (2 * (4 + 1)), rel=1e-12)
    assert spread_factor(lengths("fixed", 7, 10), 3) == 1.0


def test_a_disaggregated_prefill_queue_feels_the_spread():
    a = plan(sc(), 100.0, 0.1, 0.015)
    b = plan(sc(prompt_lengths="uniform"), 100.0, 0.1, 0.015)
    m = a.merge(b, on=["prefill_tensor", "prefill_batch", "decode_tensor", "slots"], suffixes=("", "_u"))
    same = m[m["prefill_replicas"] == m["prefill_replicas_u"]]
    assert len(same) and (same["prefill_s"] == same["prefill_s_u"]).all()
    assert (same["prefill_wait_s_u"] > same["prefill_wait_s"]).all()


@pytest.mark.parametrize("change, message", [
    ({"prompt_lengths": "zipf"}, "^inference.prompt_lengths: unknown 'zipf'; allowed: fixed, uniform, geometric$"),
    ({"prompt_lengths": "uniform", "prompt_len": 3000}, "^inference.prompt_len: uniform lengths reach 2 x 3000 - 1"),
    ({"prompt_lengths": "uniform", "speculative": {"draft": {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4,
                                                             "seq_len": 4096, "vocab": 32000},
                                                   "tokens": 4, "acceptance": 0.8}},
     "^inference.prompt_lengths: unequal lengths with speculative decoding are not modelled$"),
])
def test_bad_input(change, message):
    with pytest.raises(ValueError, match=message):
        infer(sc(**change))


def test_an_encoder_has_no_prompt_law():
    with pytest.raises(ValueError, match="^inference.prompt_lengths: for a causal decoder's generated tokens"):
        infer({"model": "bert-base", "cluster": "dgx-a100",
               "inference": {"batch": 8, "prompt_len": 128, "prompt_lengths": "uniform"}})
