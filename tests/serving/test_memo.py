"""The serving memo (concurrency_model.serving.memo) and the lazy bands: answers identical with and without them."""
from __future__ import annotations

import pickle
from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model.graph import Graph, Node
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving import decoder, kernels, memo, overheads
from concurrency_model.serving.capacity import max_batch, max_throughput
from concurrency_model.serving.decoder import infer, predict
from concurrency_model.serving.kernels import pass_parts, pass_rows
from concurrency_model.serving.memo import device_key, memoized
from concurrency_model.serving.overheads import model_graph, weights_bytes, workspace_bytes
from concurrency_model.timing.parts import total

LLAMA = {"hf_config": "llama-2-7b"}
H100 = load_cluster("dgx-h100").device


def test_memoized_computes_once_and_again_after_nodes_are_added():
    g = Graph("memo", 1)  # a graph of its own: adding to a shared one would change it for the other tests
    g.add(Node("x", "input", (), (4,)))
    calls = []

    def compute():
        calls.append(1)
        return len(calls)
    assert [memoized(g, ("t", 1), compute) for _ in range(3)] == [1, 1, 1]
    assert memoized(g, ("t", 2), compute) == 2  # another key
    assert memoized(g, ("t", [1]), compute) == 3  # unhashable: computed afresh, every time
    assert memoized(g, ("t", [1]), compute) == 4
    g.add(Node("y", "input", (), (2,)))  # a graph changed after it was built: its memo is dropped
    assert memoized(g, ("t", 1), compute) == 5


def test_device_key_ignores_only_the_memory_capacity():
    assert device_key(H100) == device_key(replace(H100, mem_capacity=1e30))
    assert device_key(H100) != device_key(replace(H100, mem_bw=H100.mem_bw * 0.5))
    assert device_key(H100) != device_key(replace(H100, launch_overhead=2 * H100.launch_overhead))
    assert device_key(H100) != device_key(replace(H100, decide={"x": 1.0}))


def test_pass_parts_memo_is_the_sum_of_its_rows_and_shared_by_an_unbounded_copy():
    g = model_graph(LLAMA, 8, 1, 2)
    a = pass_parts(g, H100, "fp16", 2, 8, True, head_rows=4)
    fresh = total(p for _, p in pass_rows(g, H100, "fp16", 2, 8, True, head_rows=4))
    for f in ("compute", "memory", "extra", "launch", "count"):
        assert np.array_equal(getattr(a, f), getattr(fresh, f))
    assert pass_parts(g, replace(H100, mem_capacity=1e30), "fp16", 2, 8, True, head_rows=4) is a
    assert pass_parts(g, H100, "fp16", 1, 8, True, head_rows=4) is not a  # another tensor degree
    assert pass_parts(g, H100, "fp16", 1, 8, True, head_rows=4).total() > a.total()


@settings(max_examples=6, deadline=None)
@given(st.integers(2, 300), st.sampled_from(["llama-2-7b", "mixtral-8x7b"]),
       st.sampled_from([None, "int8", "int4"]), st.sampled_from([1, 2, 8]))
def test_weights_do_not_depend_on_the_batch(batch, name, weight_dtype, expert):
    # the decoder's weights and tensor-split checks read the graph of one prompt (serving.decoder.predict)
    model = {"hf_config": name}
    if name == "llama-2-7b":
        expert = 1
    one = weights_bytes(model_graph(model, 1, 64, 2), 2, weight_dtype, None, expert)
    assert weights_bytes(model_graph(model, batch, 64, 2), 2, weight_dtype, None, expert) == one


def _unmemoized(monkeypatch):
    """Every memo of the serving modules computing afresh, the bands computed at once."""
    monkeypatch.setattr(memo, "memoized", lambda graph, key, compute: compute())
    for mod in (kernels, overheads):
        monkeypatch.setattr(mod, "memoized", lambda graph, key, compute: compute())


SCENARIOS = [
    {"model": LLAMA, "cluster": "dgx-h100", "parallel": {"tensor": 2},
     "inference": {"batch": 32, "prompt_len": 512, "decode_len": 64, "batching": "continuous", "load_rps": 8,
                   "output_lengths": "geometric"}},
    {"model": LLAMA, "cluster": "dgx-h100",
     "inference": {"batch": 16, "prompt_len": 512, "decode_len": 64, "batching": "continuous",
                   "max_batched_tokens": 256}},
    {"model": LLAMA, "cluster": "dgx-h100", "parallel": {"pipeline": 2},
     "inference": {"batch": 8, "prompt_len": 512, "decode_len": 64, "prefix_len": 128, "weight_dtype": "int8"}},
]


@pytest.mark.parametrize("i", range(len(SCENARIOS)))
def test_answers_are_the_same_without_the_memo(i, monkeypatch):
    sc = SCENARIOS[i]
    memoized_answer = infer(sc).to_dict()
    again = infer(sc).to_dict()  # every pass from the memo now
    _unmemoized(monkeypatch)
    fresh = infer(sc).to_dict()
    assert memoized_answer == fresh == again


def test_the_capacity_searches_are_the_same_without_the_memo(monkeypatch):
    sc = {"model": {"hf_config": "llama-3.1-8b"}, "cluster": "dgx-h100",
          "inference": {"prompt_len": 1000, "decode_len": 1000, "dtype": "fp8", "kv_dtype": "fp8"}}
    m = max_throughput(sc)
    b, r = max_batch({**sc, "inference": {**sc["inference"], "batching": "continuous"}})
    _unmemoized(monkeypatch)
    m2 = max_throughput(sc)
    b2, r2 = max_batch({**sc, "inference": {**sc["inference"], "batching": "continuous"}})
    assert (m.slots, m.limited_by, m.output_tokens_per_s) == (m2.slots, m2.limited_by, m2.output_tokens_per_s)
    assert m.to_dict() == m2.to_dict()
    assert b == b2 and r.to_dict() == r2.to_dict()


def test_bands_are_computed_when_read_and_are_the_same_numbers():
    r = predict(LLAMA, "dgx-h100", 4, 256, 32)
    assert r.bands._values is None  # not computed yet
    lo, hi = r.bands["prefill_p10_s"], r.bands["prefill_p90_s"]
    assert lo < r.prefill_s < hi
    assert r.bands._latencies is None  # dropped once computed
    # the same numbers however many other results were computed in between
    for b in (1, 2, 8):
        predict(LLAMA, "dgx-h100", b, 256, 32).to_dict()
    assert dict(predict(LLAMA, "dgx-h100", 4, 256, 32).bands) == dict(r.bands)
    assert pickle.loads(pickle.dumps(r.bands)) == dict(r.bands)
    assert set(r.bands) == {k for pair in decoder.BAND_KEYS for k in pair}


@settings(max_examples=8, deadline=None)
@given(st.integers(2, 500), st.sampled_from([1, 2, 4]), st.sampled_from([1, 7, 64]),
       st.sampled_from(["gpt2", "llama-2-7b", "mixtral-8x7b"]))
def test_the_workspace_of_a_batch_is_read_off_the_graph_of_one(batch, t, seq, name):
    # node shapes are per sample, so the serving paths price a batch's workspace on the graph at batch 1
    model = name if name == "gpt2" else {"hf_config": name}
    assert workspace_bytes(model_graph(model, batch, seq, 2), t, batch, 2) == \
        workspace_bytes(model_graph(model, 1, seq, 2), t, batch, 2)


MEMORY_CASES = SCENARIOS + [
    {"model": "gpt2", "cluster": "dgx-a100",
     "inference": {"batch": 8, "prompt_len": 256, "decode_len": 64,
                   "speculative": {"draft": "gpt2", "tokens": 3, "acceptance": 0.7}}},
    {"model": {"hf_config": "mixtral-8x7b"}, "cluster": "dgx-h100", "parallel": {"tensor": 2, "data": 4, "expert": 4},
     "inference": {"batch": 64, "prompt_len": 512, "decode_len": 64, "dtype": "bf16", "batching": "continuous"}},
    {"model": "bert-base", "cluster": "dgx-a100", "inference": {"batch": 8, "prompt_len": 128}},
]


@pytest.mark.parametrize("i", range(len(MEMORY_CASES)))
def test_memory_only_is_the_results_memory(i):
    sc = MEMORY_CASES[i]
    assert infer(sc, memory_only=True) == infer(sc).memory


def test_memory_only_refuses_what_does_not_fit_in_the_same_words():
    sc = {"model": LLAMA, "cluster": "dgx-h100", "inference": {"batch": 4096, "prompt_len": 1024, "decode_len": 128}}
    with pytest.raises(ValueError) as full:
        infer(sc)
    with pytest.raises(ValueError) as only:
        infer(sc, memory_only=True)
    assert str(full.value) == str(only.value) and str(full.value).startswith("memory:")



@settings(max_examples=25, deadline=None)
@given(st.integers(1, 400), st.sampled_from([(32, 8), (32, 32), (48, 8), (96, 96)]), st.integers(1, 9),
       st.sampled_from([64, 96, 128]), st.sampled_from(["fp16", "fp8", "fp32"]), st.sampled_from([1, 2, 8]))
def test_the_cache_attentions_work_line_is_the_symbolic_one(batch, heads, queries, head_dim, dtype, t):
    # kv_attention's a L + c from three points on the line is the coefficient pair of the work's polynomial in L
    import sympy as sp
    from concurrency_model.ops.attention import attention
    from concurrency_model.timing import decided_float
    from concurrency_model.units import dtype_bytes, value_dtype
    L = sp.Symbol("L", positive=True, integer=True)
    hq = heads[0] // t
    flop = sp.Poly(sp.expand(attention(batch, hq, queries, head_dim, seq_kv=L, fused=True,
                                       value_bytes=dtype_bytes(value_dtype(dtype))).forward.flop), L)
    rate = decided_float(H100.vector_flops.get(value_dtype(dtype), H100.peak(value_dtype(dtype))), H100.decide) * \
        H100.efficiency.compute
    a_c, c_c = kernels.kv_attention(batch, heads[0], heads[1], head_dim, H100, dtype, t, queries)[:2]
    assert (a_c, c_c) == (float(flop.coeff_monomial(L)) / rate, float(flop.coeff_monomial(1)) / rate)
