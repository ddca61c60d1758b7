"""A cached prompt prefix (inference.prefix_len): the new tokens' pass, the shared blocks held once, the plans."""
from __future__ import annotations

import json

import pytest
import sympy as sp
from hypothesis import given, settings, strategies as st

from concurrency_model.serving.capacity import max_batch
from concurrency_model.cli import main
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving.kernels import prefill_pass, prompt_attention
from concurrency_model.serving.disaggregated import plan
from concurrency_model.serving.decoder import infer, model_shape
from concurrency_model.ops.attention import attention
from concurrency_model.serving.overheads import Comm, model_graph
from concurrency_model.timing.graph import layer_parts

P, O = 512, 64


def sc(prefix=None, **inf):
    base = {"batch": 8, "prompt_len": P, "decode_len": O, "dtype": "fp16", **inf}
    if prefix is not None:
        base["prefix_len"] = prefix
    return {"model": "gpt2", "cluster": "dgx-a100", "inference": base}


@pytest.mark.parametrize("batching", ["static", "continuous"])
def test_no_prefix_is_the_model_without_one(batching):
    a, b = infer(sc(batching=batching)).to_dict(), infer(sc(0, batching=batching)).to_dict()
    assert a == b and a["inference"]["prefix_len"] == 0


def test_the_shared_blocks_are_held_once():
    # gpt2: 12 layers, 12 KV heads of 64, fp16; 8 sequences of 576 positions, the first 384 of each shared
    r = infer(sc(384))
    assert r.kv_cache_bytes == 2 * 12 * (8 * (576 - 384) + 384) * 12 * 64 * 2
    replicas = infer({**sc(384, batch=16), "parallel": {"data": 2}})
    assert replicas.kv_cache_bytes_total == 2 * r.kv_cache_bytes  # each replica keeps its own copy of the prefix


def test_the_new_queries_attend_to_the_whole_prompt():
    # queries at positions 3 and 4 of 4: a fused causal kernel computes 3 + 4 of the 8 pairs, an unfused one all 8
    full = attention(1, 1, 2, 2, seq_kv=4).forward.flop
    assert attention(1, 1, 2, 2, seq_kv=4, fused=True, causal=True).forward.flop == full * sp.Rational(7, 8)
    assert attention(1, 1, 4, 2, fused=True, causal=True).forward.flop == attention(1, 1, 4, 2).forward.flop * \
        sp.Rational(5, 8)  # no prefix: (s + 1) / 2s, as before
    with pytest.raises(ValueError, match="^causal: seq_q = 5 queries exceed the seq_kv = 4 positions"):
        attention(1, 1, 5, 2, seq_kv=4, causal=True)
    dev = load_cluster("dgx-a100").device
    for model in ("gpt2", {"hf_config": "llama-2-7b"}):  # unfused and fused attention
        g = model_graph(model, 2, P, 2)
        cores = [row["forward"] for node, row in zip(g.layers(), layer_parts(g, dev, "fp16", tensor=2))
                 if node.kind == "attention"]
        assert prompt_attention(g, dev, "fp16", 2).total() == pytest.approx(sum(c.total() for c in cores), rel=1e-12)
        assert prompt_attention(g, dev, "fp16", 2, 384).total() < prompt_attention(g, dev, "fp16", 2, 256).total()


@settings(max_examples=15, deadline=None)
@given(st.integers(min_value=1, max_value=P - 2))
def test_a_prefix_pass_lies_between_its_new_tokens_alone_and_the_whole_prompt(S):
    cl = load_cluster("dgx-a100")
    dev, shape = cl.device, model_shape(model_graph("gpt2", 1, None, 2))

    def seconds(g, prompt, cached=0, whole=None):
        return sum(prefill_pass(g, shape["hidden"], dev, "fp16", 1, 4, Comm(cl, 1, 1), prompt, cached=cached,
                                whole=whole).breakdown.values())

    new = model_graph("gpt2", 4, P - S, 2)
    with_prefix = seconds(new, P, S, model_graph("gpt2", 4, P, 2))
    assert seconds(new, P - S) < with_prefix < seconds(model_graph("gpt2", 4, P, 2), P)


def test_static_prefill_shrinks_and_decode_stays():
    rs = [infer(sc(s)) for s in (0, 256, 448)]
    assert rs[0].prefill_s > rs[1].prefill_s > rs[2].prefill_s
    assert rs[0].decode_s_per_token == rs[1].decode_s_per_token == rs[2].decode_s_per_token  # the same contexts read


def test_continuous_iterations_carry_the_new_tokens_only():
    a, b = infer(sc(batching="continuous", batch=32)), infer(sc(384, batching="continuous", batch=32))
    assert a.inference["prompt_tokens_per_iteration"] == round(32 * 512 / 64) == 256
    assert b.inference["prompt_tokens_per_iteration"] == round(32 * 128 / 64) == 64
    assert b.decode_s_per_token < a.decode_s_per_token and b.prefill_s < a.prefill_s
    assert b.inference["requests_per_s"] > a.inference["requests_per_s"]


def test_more_slots_fit_with_a_shared_prefix():
    long = {"model": {"kind": "gpt", "layers": 12, "hidden": 768, "heads": 12, "seq_len": 8192, "vocab": 50257},
            "cluster": "dgx-a100", "inference": {"batch": 1, "prompt_len": 7168, "decode_len": 256, "dtype": "fp16",
                                                 "batching": "continuous"}}
    plain = max_batch(long)[0]
    shared = max_batch({**long, "inference": {**long["inference"], "prefix_len": 6144}})[0]
    # each slot holds 7,424 positions, or 1,280 of its own beside one shared 6,144: over 5x as many fit
    assert shared > 5 * plain


def test_a_disaggregated_plan_moves_the_new_tokens_cache_only():
    a = plan(sc(), 100.0, max_first_token_s=0.05, max_decode_s=0.01)
    b = plan(sc(384), 100.0, max_first_token_s=0.05, max_decode_s=0.01)
    cols = ["prefill_tensor", "prefill_batch", "decode_tensor", "slots"]
    m = a.merge(b, on=cols, suffixes=("", "_prefix"))
    alpha = load_cluster("dgx-a100").inter.latency
    assert list(m["kv_transfer_s_prefix"] - alpha) == pytest.approx(list((m["kv_transfer_s"] - alpha) / 4), rel=1e-9)
    assert (m["prefill_s_prefix"] < m["prefill_s"]).all()
    assert b["gpus"].iloc[0] <= a["gpus"].iloc[0]


@pytest.mark.parametrize("scenario, message", [
    (sc(512), r"^inference\.prefix_len: must be below prompt_len = 512"),
    (sc(-1), r"^inference\.prefix_len: must be an integer >= 0, got -1$"),
    (sc(1.5), r"^inference\.prefix_len: must be an integer >= 0, got 1\.5$"),
    (sc(8, speculative={"draft": "gpt2", "tokens": 4, "acceptance": 0.8}),
     r"^inference\.prefix_len: a cached prefix with speculative decoding is not modelled$"),
    ({**sc(8), "model": "bert-base"}, r"^inference\.prefix_len: a cached prefix needs a causal decoder's KV cache$"),
])
def test_bad_prefix_names_the_field(scenario, message):
    with pytest.raises(ValueError, match=message):
        infer(scenario)


def test_cli(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sc(384, batching="continuous", batch=32)))
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inference"]["prefix_len"] == 384 and out["inference"]["prompt_tokens_per_iteration"] == 64
    assert main(["infer", "--scenario", str(f)]) == 0
    assert "prompts of 512 tokens, the first 384 a cached prefix (64 new prompt tokens an iteration)" in \
        capsys.readouterr().out
    f.write_text(json.dumps(sc(600)))
    assert main(["infer", "--scenario", str(f)]) == 2
    assert capsys.readouterr().err.strip().endswith("inference.prefix_len: must be below prompt_len = 512 (the last "
                                                    "prompt position runs to give the first token), got 600")
