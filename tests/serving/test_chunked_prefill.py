"""Continuous batching under a token budget (``inference.max_batched_tokens``, :class:`~concurrency_model.serving.continuous_batching.
Chunked`): the slots it keeps busy, a prompt's chunks, the prefill lane's wait, and the first token by hand."""
from __future__ import annotations

import math

import pytest

from concurrency_model.cli import main
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving.continuous_batching import budget_slots, chunked, iteration
from concurrency_model.serving.disaggregated import plan
from concurrency_model.serving.decoder import infer, model_shape
from concurrency_model.serving.overheads import Comm, model_graph

LLAMA = {"hf_config": "llama-2-7b"}
P, O = 1024, 128


def sc(budget, batch=64, **inference):
    return {"model": LLAMA, "cluster": "dgx-h100",
            "inference": {"batch": batch, "prompt_len": P, "decode_len": O, "batching": "continuous",
                          "max_batched_tokens": budget, **inference}}


def test_the_slots_a_budget_keeps_busy():
    # a slot adds 1 decode token and P / O = 8 prompt tokens an iteration: g + 8 g < budget
    assert [budget_slots(b, 64, P, O) for b in (10, 512, 577, 4096)] == [1, 56, 64, 64]
    with pytest.raises(ValueError, match=r"^inference.max_batched_tokens: 9 tokens an iteration do not carry even one"):
        budget_slots(9, 64, P, O)
    r = infer(sc(512))
    assert r.inference["slots_busy_at_most"] == 56 and r.inference["prefill_chunks"] == math.ceil(P / (512 - 56))
    assert r.tokens_per_s == pytest.approx(infer(sc(None, batch=56)).tokens_per_s, rel=1e-12)  # 56 slots decode


def test_first_token_by_hand():
    """Half a mean iteration, the lane's M/D/1 wait and two full iterations, then the iteration of the last chunk."""
    budget, slots = 2048, 64
    lane = budget - slots  # 1,984 tokens: the whole prompt in one chunk
    cl = load_cluster("dgx-h100")
    shape = model_shape(model_graph(LLAMA, 1, None, 2))

    def build(chunk=None):
        return iteration(lambda b, s: model_graph(LLAMA, b, s, 2), shape, cl.device, "fp16", 1, slots, P, O,
                         Comm(cl, 1, 1), chunk=chunk)
    mean, full = build(), build(P)
    rho = slots * P / O / lane  # 512 prompt tokens an iteration in a lane of 1,984
    wait = rho * (P / lane) / (2 * (1 - rho))
    r = infer(sc(budget))
    assert r.inference["prefill_chunks"] == 1
    assert r.inference["prefill_lane_utilization"] == pytest.approx(rho, rel=1e-12)
    assert r.prefill_s == pytest.approx(0.5 * mean.seconds + wait * full.seconds + full.seconds, rel=1e-12)
    assert r.decode_s_per_token == pytest.approx(mean.seconds, rel=1e-12)  # the steady iteration is unchanged
    assert full.seconds > mean.seconds  # a whole prompt beside the decode tokens, against 512 prompt tokens

    c = chunked(build, slots, P, O, 640)  # a lane of 576: two chunks, the second of 448 tokens
    assert (c.chunks, c.last.seconds) == (2, pytest.approx(build(P - 576).seconds, rel=1e-12))


def test_a_chunk_carries_its_share_of_the_prompts_attention():
    cl = load_cluster("dgx-h100")
    shape = model_shape(model_graph(LLAMA, 1, None, 2))

    def att(chunk):
        return iteration(lambda b, s: model_graph(LLAMA, b, s, 2), shape, cl.device, "fp16", 1, 16, P, O,
                         Comm(cl, 1, 1), chunk=chunk).breakdown["prompt_attention_s"]
    assert att(256) == pytest.approx(att(P) / 4, rel=1e-12) and att(P) == pytest.approx(att(None) * O / 16, rel=1e-12)


def test_a_larger_budget_never_delays_the_first_token():
    load = {"load_rps": 10.0}
    firsts = [infer(sc(b, **load)).prefill_s for b in (300, 400, 600, 1000, 2000, 4000, 8000)]
    assert firsts == sorted(firsts, reverse=True)
    tpot = {infer(sc(b, **load)).decode_s_per_token for b in (300, 2000, 8000)}
    assert max(tpot) == pytest.approx(min(tpot), rel=1e-12)  # the same slots in use under the load


@pytest.mark.parametrize("change, message", [
    ({"batching": "static"}, r"^inference.max_batched_tokens: a token budget an iteration is modelled with batching"),
    ({"max_batched_tokens": 0}, r"^inference.max_batched_tokens: must be a positive integer, got 0"),
    ({"speculative": {"draft": "gpt2", "tokens": 4, "acceptance": 0.7}}, r"^inference.max_batched_tokens: "),
])
def test_bad_input(change, message):
    with pytest.raises(ValueError, match=message):
        infer(sc(512, **change))


def test_a_load_the_budget_cannot_carry_names_it():
    with pytest.raises(ValueError, match=r"^inference.load_rps: 40 requests a second exceed the capacity of 33 slots.*"
                                         r"inference.max_batched_tokens = 300 keeps at most 33 of the 64 slots decoding$"):
        infer(sc(300, load_rps=40.0))


def test_refused_where_it_does_not_apply():
    with pytest.raises(ValueError, match=r"^inference.batching: for a causal decoder"):  # the budget needs it
        infer({"model": "bert-base", "inference": {"batch": 4, "batching": "continuous", "max_batched_tokens": 512}})
    with pytest.raises(ValueError, match=r"^inference.max_batched_tokens: not in a disaggregated plan$"):
        plan(sc(512), load_rps=10.0)


def test_cli(capsys):
    args = ["infer", "--scenario", "llama-2-7b-serving", "--set", "inference.max_batched_tokens=512"]
    assert main(args) == 0
    assert "prompts in chunks under 512 tokens an iteration: 3 a prompt" in capsys.readouterr().out
    assert main(args + ["--set", "inference.load_rps=null", "--compare", "inference.max_batched_tokens=4096"]) == 0
    capsys.readouterr()
    assert main(args[:3] + ["--set", "inference.max_batched_tokens=8"]) == 2
    assert capsys.readouterr().err.startswith("concurrency-model infer: error: inference.max_batched_tokens: 8 tokens")


def test_a_budget_trades_the_first_token_against_the_longest_iteration():
    from concurrency_model.report.inference import budget_frame

    f = budget_frame(budgets=(256, 512, 1024, 4096))
    whole, chunked = f[f["budget"].isna()].iloc[0], f[f["budget"].notna()]
    assert list(chunked["longest_iteration_s"]) == sorted(chunked["longest_iteration_s"])
    assert list(chunked["first_token_s"]) == sorted(chunked["first_token_s"], reverse=True)
    assert chunked["longest_iteration_s"].max() <= whole["longest_iteration_s"] * (1 + 1e-9)
    assert chunked["decode_s_per_token"].to_numpy() == pytest.approx(whole["decode_s_per_token"], rel=1e-12)
    assert list(chunked["prefill_chunks"]) == [5, 3, 2, 1]  # 1,024-token prompts beside a few decoding slots
