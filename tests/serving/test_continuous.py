"""Continuous batching in steady state (concurrency_model.serving.continuous_batching; Orca, Sarathi-Serve, vLLM)."""
from __future__ import annotations

import json

import pytest

from concurrency_model.serving.capacity import max_batch
from concurrency_model.cli import main
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving.continuous_batching import iteration, prompt_tokens
from concurrency_model.serving.kernels import decode_step, pass_parts
from concurrency_model.serving.decoder import infer, model_shape
from concurrency_model.serving.overheads import Comm, model_graph
from concurrency_model.timing.graph import layer_parts

LLAMA = {"hf_config": "llama-2-7b"}
P, O = 1024, 128


def sc(batch, batching="continuous", **par):
    return {"model": LLAMA, "cluster": "dgx-h100", "parallel": par,
            "inference": {"batch": batch, "prompt_len": P, "decode_len": O, "batching": batching}}


def parts_of(slots):
    cl = load_cluster("dgx-h100")
    shape = model_shape(model_graph(LLAMA, 1, None, 2))
    return cl, shape, iteration(lambda b, s: model_graph(LLAMA, b, s, 2), shape, cl.device, "fp16", 1, slots, P, O,
                                Comm(cl, 1, 1))


def test_an_iteration_by_its_parts():
    cl, shape, it = parts_of(64)
    dev = cl.device
    assert prompt_tokens(64, P, O) == 512  # 64 slots finish every 128 iterations: half a 1,024-token prompt each
    # the decode attention is a decode step's: the same slots at the same contexts P + 1 .. P + O
    step = decode_step(model_graph(LLAMA, 64, 1, 2), shape, dev, "fp16", 1, 64, Comm(cl, 1, 1), P + 1, P + O)
    assert it.breakdown["kv_attention_s"] == pytest.approx(step.breakdown["kv_attention_s"], rel=1e-12)
    # the prompts' attention: 64 / 128 of one prompt's attention cores at batch 1
    g1 = model_graph(LLAMA, 1, P, 2)
    one = sum(float(r["forward"].total()) for n, r in zip(g1.layers(), layer_parts(g1, dev, "fp16")) if n.kind == "attention")
    assert it.breakdown["prompt_attention_s"] == pytest.approx(one / 2, rel=1e-9)
    # the linear layers run once on 576 rows: cheaper than a decode step of 64 rows plus a pass of 512 rows, which
    # read the weights twice; dearer than either alone
    alone = [pass_parts(model_graph(LLAMA, n, 1, 2), dev, "fp16", 1, n, True).total() for n in (64, 512)]
    assert max(alone) < it.breakdown["compute_s"] < sum(alone)
    # the logits of the 64 sampling rows only: 512 more rows of the 32,000 x 4,096 output layer would cost more
    full = pass_parts(model_graph(LLAMA, 576, 1, 2), dev, "fp16", 1, 576, True).total()
    assert it.breakdown["compute_s"] < full


def test_throughput_latency_and_first_token():
    r = infer(sc(64))
    it = parts_of(64)[2]
    assert r.decode_s_per_token == pytest.approx(it.seconds, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(64 / it.seconds, rel=1e-12)
    assert r.inference["requests_per_s"] == pytest.approx(r.tokens_per_s / O, rel=1e-12)
    # first token: half an iteration waiting, the iteration carrying the whole prompt (half of it beyond the
    # 512-token share: half a batch-1 prompt pass more)
    prefill_1 = infer(sc(1, "static")).prefill_s
    assert r.prefill_s == pytest.approx(1.5 * it.seconds + 0.5 * prefill_1, rel=1e-12)
    assert r.total_s == pytest.approx(r.prefill_s + (O - 1) * it.seconds, rel=1e-12)
    assert r.bands["prefill_p10_s"] < r.prefill_s < r.bands["prefill_p90_s"]
    # against static batching of the same 64: the first token in 67 ms instead of the whole batch's prefill
    # (1.7 s), each token slower (the prompts ride along), the throughput within 2%
    s = infer(sc(64, "static"))
    assert r.prefill_s < s.prefill_s / 20 and r.decode_s_per_token > 1.5 * s.decode_s_per_token
    assert r.tokens_per_s == pytest.approx(s.tokens_per_s, rel=0.02)


def test_more_slots_fit_than_a_static_batch():
    # a static batch holds the workspace of all its prompts' prefill; continuous batching one prompt's
    static, _ = max_batch(sc(1, "static"))
    cont, r = max_batch(sc(1))
    assert static == 86 and cont > static
    assert r.kv_cache_bytes == 2 * 32 * cont * (P + O) * 32 * 128 * 2  # every slot at P + O positions
    assert r.memory["activations_bytes"] < infer(sc(static, "static")).memory["activations_bytes"] / 10


@pytest.mark.parametrize("change, message", [
    ({"inference": {"batching": "dynamic"}}, "^inference.batching: unknown 'dynamic'; allowed: static, continuous"),
    ({"parallel": {"pipeline": 3}}, r"^inference.batch: 8 slots do not split into 3 equal groups, one a pipeline stage"),
    ({"parallel": {"pipeline": 2}, "inference": {"speculative": {
        "draft": {"kind": "gpt", "layers": 2, "hidden": 512, "heads": 8, "seq_len": 4096, "vocab": 32000}, "tokens": 4,
        "acceptance": 0.8}}}, "^inference.speculative: speculative decoding with continuous batching over pipeline"),
])
def test_bad_input(change, message):
    s = sc(8)
    s["parallel"].update(change.get("parallel", {}))
    s["inference"].update(change.get("inference", {}))
    with pytest.raises(ValueError, match=message):
        infer(s)


def test_cli(tmp_path, capsys):
    f = tmp_path / "c.json"
    f.write_text(json.dumps(sc(16, tensor=2)))
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inference"]["batching"] == "continuous" and out["gpus"] == 2
    assert out["time_to_first_token_s"] == out["prefill_s"] and out["inference"]["prompt_tokens_per_iteration"] == 128
    assert main(["infer", "--scenario", str(f)]) == 0
    assert "continuous batching: 16 slots, prompts of 1024 tokens" in capsys.readouterr().out


def loaded(load, batch=109):
    return {**sc(batch), "inference": {**sc(batch)["inference"], "load_rps": load}}


def test_under_a_load_littles_law_sets_the_slots():
    r = infer(loaded(10.0))
    n, used = r.inference["slots_run"], r.inference["slots_in_use"]
    cl, shape, _ = parts_of(1)

    def it(slots):
        return iteration(lambda b, s: model_graph(LLAMA, b, s, 2), shape, cl.device, "fp16", 1, slots, P, O,
                         Comm(cl, 1, 1)).seconds
    # the fewest slots whose iterations carry 10 requests a second of 128 tokens each: n >= 10 x 128 x it(n)
    assert 10 * O * it(n) <= n and 10 * O * it(n - 1) > n - 1
    assert used == pytest.approx(10 * O * it(n), rel=1e-12) and r.decode_s_per_token == pytest.approx(it(n), rel=1e-12)
    assert r.tokens_per_s == pytest.approx(10 * O, rel=1e-12) and r.inference["requests_per_s"] == pytest.approx(10)


def test_latency_and_cost_against_the_load():
    rows = [infer(loaded(x, 109)) for x in (1.0, 5.0, 10.0, 14.0)]
    tpot = [r.decode_s_per_token for r in rows]
    assert tpot == sorted(tpot) and tpot[0] < 0.008 < 0.02 < tpot[-1]  # 7 ms at 1 request a second, 23 at 14
    full = infer(sc(109))  # every slot busy: the capacity
    assert tpot[-1] < full.decode_s_per_token and full.inference["requests_per_s"] > 14
    with_price = [infer({**loaded(x), "inference": {**loaded(x)["inference"], "price_per_gpu_hour": 2.0}})
                  .economics["cost_per_million_tokens"] for x in (1.0, 10.0)]
    assert with_price[0] > 5 * with_price[1]  # an idle GPU's hours are paid for too


def test_a_load_over_the_capacity_or_with_a_static_batch_is_refused():
    with pytest.raises(ValueError, match=r"^inference.load_rps: 20 requests a second exceed the capacity of 109 slots, "
                                         r"16\.\d\d"):
        infer(loaded(20.0))
    with pytest.raises(ValueError, match=r"^inference.load_rps: a load is modelled with batching \"continuous\""):
        infer({**sc(8, "static"), "inference": {**sc(8, "static")["inference"], "load_rps": 1.0}})
    with pytest.raises(ValueError, match=r"^inference.load_rps: must be a positive number"):
        infer(loaded(0))


DRAFT = {"kind": "gpt", "layers": 4, "hidden": 1024, "heads": 16, "seq_len": 4096, "vocab": 32000}


def spec_sc(slots, acceptance=0.8, tokens=4, **inf):
    s = sc(slots)
    s["inference"].update(speculative={"draft": DRAFT, "tokens": tokens, "acceptance": acceptance}, **inf)
    return s


def test_speculative_continuous_batching_by_hand():
    """An iteration of 16 slots: 4 draft steps, the draft's share of the prompts, one verification of 5 positions a
    slot with the prompt chunk; it yields E = (1 - 0.8^5) / 0.2 = 3.3616 tokens a slot, so a request holds its slot
    128 / E iterations and an iteration takes in 16 x 1024 x E / 128 = 430.3 -> 430 prompt tokens."""
    from concurrency_model.serving.continuous_batching import speculative_maker
    from concurrency_model.serving.speculative import Speculation
    r = infer(spec_sc(16))
    sp = r.inference["speculative"]
    assert sp["tokens_per_iteration"] == 3.3616
    assert r.inference["prompt_tokens_per_iteration"] == round(16 * P * 3.3616 / O) == 430
    assert r.decode_s_per_token == pytest.approx(sp["iteration_s"] / 3.3616, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(16 / r.decode_s_per_token, rel=1e-12)
    assert r.inference["requests_per_s"] == pytest.approx(16 / (O * r.decode_s_per_token), rel=1e-12)
    assert sum(v for k, v in r.breakdown.items()) == pytest.approx(r.decode_s_per_token, rel=1e-12)
    # the parts, rebuilt: the verification is the plain iteration's code at 5 queries a slot
    cl, shape, plain = parts_of(16)
    graph_of = lambda b, s: model_graph(LLAMA, b, s, 2)  # noqa: E731
    spec = Speculation({"draft": DRAFT, "tokens": 4, "acceptance": 0.8}, shape, model_shape, 2, 16, P, O)
    it = speculative_maker(spec, graph_of, shape, cl.device, "fp16", 1, P, O, Comm(cl, 1, 1))(16)
    verify = iteration(graph_of, shape, cl.device, "fp16", 1, 16, P, O, Comm(cl, 1, 1), queries=5, lifetime=O / 3.3616)
    assert it.verify.seconds == pytest.approx(verify.seconds, rel=1e-12) and verify.seconds > plain.seconds
    assert sp["iteration_s"] == pytest.approx(verify.seconds + 4 * sp["draft_step_s"] + it.share * sum(
        it.draft_prompt.breakdown.values()), rel=1e-12)
    assert it.share == pytest.approx(16 * 3.3616 / O)  # prompts an iteration takes in
    assert sp["speedup"] == pytest.approx(sp["plain_decode_s_per_token"] / r.decode_s_per_token, rel=1e-12)
    assert sp["plain_decode_s_per_token"] == pytest.approx(infer(sc(16)).decode_s_per_token, rel=1e-12)
    assert r.prefill_s == pytest.approx(it.first_token_s, rel=1e-12)
    assert r.bands["decode_s_per_token_p10"] < r.decode_s_per_token < r.bands["decode_s_per_token_p90"]


@pytest.mark.parametrize("slots", [4, 32])
def test_speculation_pays_with_acceptance(slots):
    """Nothing accepted: every iteration costs the draft and a wider verification for one token, slower than the
    plain iteration; all accepted: 5 tokens an iteration. The time per token falls as the acceptance rises."""
    plain = infer(sc(slots)).decode_s_per_token
    times = [infer(spec_sc(slots, a)).decode_s_per_token for a in (0.0, 0.5, 0.8, 1.0)]
    assert times[0] > plain and times == sorted(times, reverse=True)
    assert infer(spec_sc(slots, 1.0)).inference["speculative"]["tokens_per_iteration"] == 5.0


def test_speculative_memory_and_load():
    plain, r = infer(sc(16)), infer(spec_sc(16))
    assert r.memory_bytes_per_device > plain.memory_bytes_per_device  # the draft's weights and cache
    # the draft's cache: K and V of its 4 layers, 16 slots at P + O + 4 positions (the last iteration's drafts),
    # 1,024 values wide
    assert r.memory["draft_kv_cache_bytes"] == 2 * 4 * 16 * (P + O + 4) * 1024 * 2
    loaded = infer(spec_sc(16, load_rps=5.0))
    n, used = loaded.inference["slots_run"], loaded.inference["slots_in_use"]
    assert used == pytest.approx(5.0 * O * loaded.decode_s_per_token, rel=1e-9) and used <= n <= 16
    assert loaded.tokens_per_s == pytest.approx(5.0 * O, rel=1e-9)  # Little's law: the load's tokens
