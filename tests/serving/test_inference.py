"""Inference (prefill, decode with a KV cache, memory): hand counts, scaling properties, the CLI and a
regression guard on the FasterTransformer latencies."""
import json
import random

import pandas as pd
import pytest

from concurrency_model.cli import main
from concurrency_model.serving.decoder import infer, kv_cache_bytes, predict, sum_max_affine
from concurrency_model.models import get_model
from concurrency_model.timing import gemm_time
from concurrency_model.timing.graph import layer_times
from concurrency_model.validate import inference as vi

GPT = {"kind": "gpt", "layers": 4, "hidden": 1024, "heads": 16, "seq_len": 2048, "vocab": 51200}


def sc(model=GPT, cluster="dgx-a100", parallel=None, **inference):
    return {"model": model, "cluster": cluster, "parallel": parallel or {},
            "inference": {"batch": 1, "prompt_len": 128, "decode_len": 16, "dtype": "fp16", **inference}}


def test_kv_cache_of_llama_2_7b_against_a_hand_count():
    # LLaMA-2-7B: 32 layers, 32 heads (no GQA) of 128 dims, fp16. K and V of every position:
    # 2 x 32 layers x 2 sequences x (1000 + 24) positions x 32 heads x 128 x 2 bytes
    # = 2^1 * 2^5 * 2^1 * 2^10 * 2^5 * 2^7 * 2^1 = 2^30 bytes = 1 GiB in all; per token 2*32*32*128*2 = 512 KiB.
    r = infer(sc({"hf_config": "llama-2-7b"}, batch=2, prompt_len=1000, decode_len=24))
    assert r.kv_cache_bytes == r.kv_cache_bytes_total == 2**30
    assert r.shape["kv_heads"] == 32 and r.shape["head_dim"] == 128 and r.shape["layers"] == 32
    # tensor 2 holds 16 of the 32 heads, pipeline 2 holds 16 of the 32 layers: a quarter per device
    r4 = infer(sc({"hf_config": "llama-2-7b"}, parallel={"tensor": 2, "pipeline": 2}, batch=2, prompt_len=1000,
                  decode_len=24))
    assert r4.kv_cache_bytes == 2**28 and r4.kv_cache_bytes_total == 2**30


def test_kv_cache_of_gpt2_and_grouped_query_attention():
    # gpt2: 12 layers x 768 (12 heads of 64), fp16: 2 x 12 x 768 x 2 = 36,864 bytes per token
    r = infer(sc("gpt2", batch=3, prompt_len=100, decode_len=28))
    assert r.kv_cache_bytes == 3 * 128 * 36_864
    # Mistral-7B: 8 KV heads of 128 for 32 query heads: 2 x 32 x 8 x 128 x 2 = 131,072 bytes per token;
    # with tensor 16 > 8 KV heads each device keeps one whole KV head (replicated)
    assert kv_cache_bytes(32, 1, 4096, 8, 128, 2) == 4096 * 131_072
    assert kv_cache_bytes(32, 1, 4096, 8, 128, 2, tensor=16) == 4096 * 131_072 // 8


def test_tokens_per_s_and_total_follow_their_definitions():
    r = infer(sc(batch=4, prompt_len=64, decode_len=32))
    assert r.total_s == pytest.approx(r.prefill_s + 32 * r.decode_s_per_token)
    assert r.tokens_per_s == pytest.approx(4 * 32 / r.total_s)
    assert r.prefill_s == pytest.approx(sum(v for k, v in r.breakdown.items() if k.startswith("prefill_")))
    assert r.decode_s_per_token == pytest.approx(sum(v for k, v in r.breakdown.items() if k.startswith("decode_")))


def test_decode_time_grows_with_the_context():
    steps = [infer(sc(batch=8, prompt_len=p, decode_len=16)).decode_s_per_token for p in (64, 256, 1024, 2000)]
    assert all(a < b for a, b in zip(steps, steps[1:]))
    att = [infer(sc(batch=8, prompt_len=p, decode_len=16)).breakdown["decode_kv_attention_s"]
           for p in (500, 1000, 1500)]
    # reading the cache (memory-bound): affine in its length, a kernel launch per layer the constant
    assert att[2] - att[1] == pytest.approx(att[1] - att[0], rel=1e-9) and att[1] - att[0] > 0.3 * att[0]


def test_mean_over_decode_steps_is_the_closed_form_sum():
    a = predict(GPT, "dgx-a100", 4, 100, 1, "fp16").breakdown["decode_kv_attention_s"]
    b = predict(GPT, "dgx-a100", 4, 100, 50, "fp16").breakdown["decode_kv_attention_s"]
    c = predict(GPT, "dgx-a100", 4, 149, 1, "fp16").breakdown["decode_kv_attention_s"]
    assert a < b < c  # the mean context of 50 steps from 101 lies between the first and the last step's
    rng = random.Random(0)
    for _ in range(200):
        a1, c1, a2, c2 = (rng.uniform(-3, 3) for _ in range(4))
        lo = rng.randint(-5, 20)
        hi = lo + rng.randint(-1, 30)
        brute = sum(max(a1 * x + c1, a2 * x + c2) for x in range(lo, hi + 1))
        assert sum_max_affine(a1, c1, a2, c2, lo, hi) == pytest.approx(brute, abs=1e-9)


def test_prefill_is_about_proportional_to_a_long_prompt():
    big = {"kind": "gpt", "layers": 2, "hidden": 4096, "heads": 32, "seq_len": 8192, "vocab": 50272}
    t = [predict(big, "dgx-a100", 1, s, 1, "fp16").prefill_s for s in (1024, 2048, 4096)]
    assert 1.8 < t[1] / t[0] < 2.5 and 1.8 < t[2] / t[1] < 2.5


def test_one_device_is_the_sum_of_layer_times():
    b, s = 2, 256
    r = predict(GPT, "dgx-a100", b, s, 8, "fp16")
    pre = layer_times(get_model({**GPT, "seq_len": s}, batch=b, value_bytes=2), "a100-sxm4-80gb", "fp16")
    head = pre["name"] == "lm_head"
    # dropout is the identity at inference; the output layer runs on the last position only
    expect = pre.loc[(pre["op"] != "dropout") & ~head, "forward_s"].sum() \
        + float(gemm_time(b, 51200, 1024, "a100-sxm4-80gb", "fp16").time_s)
    assert r.prefill_s == pytest.approx(expect, rel=1e-9)
    assert r.breakdown["prefill_tensor_comm_s"] == r.breakdown["prefill_pipeline_p2p_s"] == 0
    dec = layer_times(get_model({**GPT, "seq_len": 1}, batch=b, value_bytes=2), "a100-sxm4-80gb", "fp16")
    assert r.breakdown["decode_compute_s"] == pytest.approx(
        dec.loc[~dec["op"].isin(["dropout", "attention"]), "forward_s"].sum(), rel=1e-9)


def test_decode_is_bound_by_reading_the_weights():
    # one token per sequence: every GEMM reads its whole weight matrix; the step takes at least
    # weight bytes / bandwidth (Pope et al. 2022; Chen 2022)
    r = infer(sc(vi.MODEL_13B, cluster=vi.cluster_a100_40gb(), prompt_len=512, decode_len=10))
    floor = r.shape["params"] * 2 / 1.555e12
    assert floor < r.decode_s_per_token < 1.6 * floor


def test_tensor_and_pipeline_parallelism():
    one = infer(sc(batch=8, prompt_len=512, decode_len=64))
    tp = infer(sc(parallel={"tensor": 4}, batch=8, prompt_len=512, decode_len=64))
    pp = infer(sc(parallel={"pipeline": 2}, batch=8, prompt_len=512, decode_len=64))
    assert tp.breakdown["prefill_tensor_comm_s"] > 0 and tp.breakdown["decode_tensor_comm_s"] > 0
    assert tp.breakdown["decode_compute_s"] < one.breakdown["decode_compute_s"] and \
        tp.kv_cache_bytes == one.kv_cache_bytes / 4
    # a 4-layer model at batch 8: each 16 KiB tensor all-reduce costs NCCL's ring LL latency on 4 A100s
    # (6.6 + 6 x 0.6 us + the 3.8 us launch, comm.nccl), more than the three quarters of compute it saves
    assert tp.decode_s_per_token > one.decode_s_per_token
    # one batch without microbatches: the stages run one after another, plus the sends between them
    assert pp.prefill_s == pytest.approx(one.prefill_s + pp.breakdown["prefill_pipeline_p2p_s"])
    assert pp.breakdown["prefill_pipeline_p2p_s"] > 0 and pp.kv_cache_bytes == one.kv_cache_bytes / 2
    assert pp.memory_bytes_per_device < one.memory_bytes_per_device


def test_over_capacity_and_bad_input_name_the_field():
    with pytest.raises(ValueError, match=r"^memory: .* exceeds 80.0 GB of a100-sxm4-80gb"):
        infer(sc("gpt3-175b"))
    for inf, field in (({"decode_len": 0}, "inference.decode_len"), ({"batch": -1}, "inference.batch"),
                       ({"prompt_len": 1.5}, "inference.prompt_len"), ({"dtype": "fp12"}, "inference.dtype"),
                       ({"beam": 4}, "inference.beam"), ({"prompt_len": 2040, "decode_len": 9}, "inference.decode_len")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            infer(sc(**inf))
    with pytest.raises(ValueError, match="^parallel.tensor: 3 does not divide the 16 attention heads"):
        infer(sc(parallel={"tensor": 3}))
    with pytest.raises(ValueError, match="^parallel.pipeline: 5 stages exceed the 4"):
        infer(sc(parallel={"pipeline": 5}))
    with pytest.raises(ValueError, match="^inference.batch: 1 sequences do not split evenly over parallel.data = 2"):
        infer(sc(parallel={"data": 2}))
    with pytest.raises(ValueError, match="^parallel.context: inference is modelled with tensor, pipeline and expert"):
        infer(sc(parallel={"context": 2}))  # not modelled for inference: refused, not ignored
    with pytest.raises(ValueError, match="^parallel.expert: 2 needs a model with mixture-of-experts layers"):
        infer(sc(parallel={"expert": 2}))
    with pytest.raises(ValueError, match="^inference.decode_len: the model has no causal attention"):
        infer(sc("bert-base"))  # an encoder: one forward pass (forward_inference), no decode steps
    with pytest.raises(ValueError, match="^model: .*causal decoder"):
        predict("bert-base", "dgx-a100", 1, 128, 16)
    with pytest.raises(ValueError, match="^inference: missing"):
        infer({"model": "gpt2"})
    for model in ("gpt2", "resnet50"):  # a dtype the device has no math for names the inference field
        with pytest.raises(ValueError, match="^inference.dtype: v100-sxm2-32gb has no bf16 peak"):
            infer({**sc(model, dtype="bf16"), "cluster": "dgx1-v100"})


def test_cli_json_keys_and_exit_2_on_a_zero_decode_length(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sc("gpt2", batch=2, prompt_len=64, decode_len=8)))
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for k in ("prefill_s", "decode_s_per_token", "tokens_per_s", "kv_cache_bytes", "memory_bytes_per_device"):
        assert isinstance(out[k], (int, float)) and out[k] > 0
    assert out["kv_cache_bytes"] == 2 * (64 + 8) * 36_864
    assert main(["infer", "--scenario", str(f)]) == 0
    text = capsys.readouterr().out
    m = out["memory"]
    assert "tokens/s" in text and f"(weights {m['model_state_bytes'] / 1e9:,.2f}, activations" in text
    shown = [line.split()[0] for line in text.splitlines() if line.strip().endswith(" s") and line.startswith("  ")]
    assert shown == [k for k, v in out["breakdown"].items() if v]  # the breakdown's non-zero seconds, in order
    zero = sum(1 for v in out["breakdown"].values() if not v)
    assert zero and f"({zero} more are 0 s; --json lists every key)" in text
    f.write_text(json.dumps(sc("gpt2", decode_len=0)))
    assert main(["infer", "--scenario", str(f), "--json"]) == 2
    cap = capsys.readouterr()
    assert cap.out == "" and cap.err.count("\n") == 1
    assert cap.err.startswith("concurrency-model infer: error: inference.decode_len: must be a positive integer")


def test_fastertransformer_rows_and_regression_guard():
    res = vi.evaluate()
    assert len(res) == 2 and list(res["tensor"]) == [1, 2]
    raw = pd.read_csv(vi.data_dir() / vi.FILE)
    assert list(raw["prefill_latency_ms"]) == [63.17, 45.45]  # the measured numbers, unedited
    s = vi.summary(res)
    # 2026-12-02: median APE over the 6 (row, metric) pairs 6.8% (prefill 9.8%, decode 5.0%, total 6.1%);
    # guard = current + 3 points
    assert s["all"]["median_ape"] <= 0.098
    assert s["prefill_s"]["median_ape"] <= 0.128
    assert s["decode_s_per_token"]["median_ape"] <= 0.080
    assert s["total_s"]["median_ape"] <= 0.091
    f = vi.frame(res)
    assert len(f) == 6 and set(f["status"]) == {"ok"}


# --- 80% bands (issue 9): the sampled passes reduce to the point prediction at unit scales -----------------
BAND_SC = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"tensor": 2},
           "inference": {"batch": 4, "prompt_len": 128, "decode_len": 32, "dtype": "fp16"}}


def test_bands_collapse_to_the_prediction_without_spread(monkeypatch):
    from concurrency_model import uncertainty
    zero = {k: 0.0 for k in (*uncertainty.SCALES, uncertainty.MODEL)}
    monkeypatch.setattr(uncertainty, "spreads", lambda: zero)
    d = infer(BAND_SC).to_dict()
    for point, lo, hi in (("prefill_s", "prefill_p10_s", "prefill_p90_s"),
                          ("decode_s_per_token", "decode_s_per_token_p10", "decode_s_per_token_p90"),
                          ("total_s", "total_p10_s", "total_p90_s")):
        assert d[lo] == pytest.approx(d[point], rel=1e-9) and d[hi] == pytest.approx(d[point], rel=1e-9)


def test_bands_bracket_the_prediction():
    d = infer(BAND_SC).to_dict()
    assert d["prefill_p10_s"] < d["prefill_s"] < d["prefill_p90_s"]
    assert d["total_p10_s"] < d["total_s"] < d["total_p90_s"]
    # total = prefill + 32 x step on every draw; both rise with the same draws (comonotonic), so the total's
    # quantiles are about the sums of the parts' quantiles
    assert d["prefill_p10_s"] + 32 * d["decode_s_per_token_p10"] == pytest.approx(d["total_p10_s"], rel=0.02)
    assert d["prefill_p90_s"] + 32 * d["decode_s_per_token_p90"] == pytest.approx(d["total_p90_s"], rel=0.02)


def test_gemm_with_narrower_weights_hand_counts():
    from concurrency_model.timing import gemm_coeffs
    from concurrency_model.hardware.devices import load_device
    dev = load_device("a100-sxm4-80gb")
    # y (1 x 8192) = x (1 x 8192) w (8192 x 8192): activations in fp16, weights at 1 byte
    c = gemm_coeffs(1, 8192, 8192, dev, "fp16", weight_bytes=1)
    assert c.bytes[0] == (8192 + 8192) * 2 + 8192 * 8192 * 1
    assert c.flop[0] == 2 * 8192 * 8192  # the same math
    # a GEMV is memory-bound: its DRAM term is the bytes over 80% of 2,039 GB/s (int8 half of fp16's, int4 a
    # quarter), plus the two launches (7.6 us) and the split-K pass
    for w in (2, 1, 0.5):
        c = gemm_coeffs(1, 8192, 8192, dev, "fp16", weight_bytes=w)
        dram = ((8192 + 8192) * 2 + 8192 * 8192 * w) / (0.8 * 2.039e12)
        assert float(c.seconds(dev)[0]) == pytest.approx(dram + 7.6e-6 + float(c.a_extra[0]) / 2.039e12, rel=1e-9)
    # a large GEMM is compute-bound: narrower weights change nothing
    big16, big8 = (float(gemm_coeffs(8192, 8192, 8192, dev, "fp16", weight_bytes=w).seconds(dev)[0]) for w in (2, 1))
    assert big8 == pytest.approx(big16, rel=0.02)


def test_weight_only_quantization():
    llama = {"hf_config": "llama-2-7b"}
    base = infer(sc(llama, prompt_len=2048, decode_len=64))
    q8 = infer(sc(llama, prompt_len=2048, decode_len=64, weight_dtype="int8"))
    q4 = infer(sc(llama, prompt_len=2048, decode_len=64, weight_dtype="int4"))
    # the weights of the blocks' linear layers: 32 x (4 x 4096^2 + 3 x 4096 x 11008); embeddings and the output
    # layer stay in fp16
    block = 32 * (4 * 4096 * 4096 + 3 * 4096 * 11008)
    assert base.memory["model_state_bytes"] - q8.memory["model_state_bytes"] == block
    assert base.memory["model_state_bytes"] - q4.memory["model_state_bytes"] == 1.5 * block
    # batch 1: a decode step reads the weights, so it shrinks with them (the KV cache and the fp16 output layer
    # do not); the 2048-token prefill is compute-bound and hardly moves
    assert 0.5 < q8.decode_s_per_token / base.decode_s_per_token < 0.75
    assert q4.decode_s_per_token < q8.decode_s_per_token
    assert q8.prefill_s == pytest.approx(base.prefill_s, rel=0.02)
    assert q8.inference["weight_dtype"] == "int8" and base.inference["weight_dtype"] == "fp16"
    # weight_dtype equal to dtype is the unquantized model
    same = infer(sc(llama, prompt_len=2048, decode_len=64, weight_dtype="fp16"))
    assert (same.prefill_s, same.decode_s_per_token, same.memory_bytes_per_device) == \
        (base.prefill_s, base.decode_s_per_token, base.memory_bytes_per_device)
    with pytest.raises(ValueError, match=r"^inference.weight_dtype: unknown 'int3'"):
        infer(sc(llama, weight_dtype="int3"))
    with pytest.raises(ValueError, match=r"^inference.weight_dtype: unknown \[\]"):  # not a TypeError
        infer(sc(llama, weight_dtype=[]))


def test_host_overhead_bounds_a_pass_from_below():
    # with a host that issues one kernel per h seconds, a pass lasts max(GPU seconds, h x its kernels)
    base = infer(sc("gpt2", prompt_len=128, decode_len=32))
    slow = infer(sc("gpt2", prompt_len=128, decode_len=32, host_overhead_s=1e-3))  # host-bound everywhere
    k_pre, k_dec = slow.prefill_s / 1e-3, slow.decode_s_per_token / 1e-3
    assert k_pre == pytest.approx(round(k_pre)) and k_dec == pytest.approx(round(k_dec))
    # gpt2: 12 blocks; a decode step issues every forward kernel but the attention cores, plus one KV attention
    # kernel per block
    assert round(k_dec) > 12 * 8
    for h in (1e-6, 20e-6, 60e-6):
        r = infer(sc("gpt2", prompt_len=128, decode_len=32, host_overhead_s=h))
        assert r.prefill_s == pytest.approx(max(base.prefill_s, h * round(k_pre)))
        assert r.decode_s_per_token == pytest.approx(max(base.decode_s_per_token, h * round(k_dec)))
        assert r.breakdown["decode_host_wait_s"] == pytest.approx(max(0.0, h * round(k_dec) - base.decode_s_per_token))
    with pytest.raises(ValueError, match=r"^inference.host_overhead_s: must be a number >= 0"):
        infer(sc("gpt2", host_overhead_s=-1e-6))


def test_repr_is_one_line_of_the_headline_figures():
    r = infer(sc("gpt2", batch=4, prompt_len=64, decode_len=8))
    assert repr(r) == (f"Inference(batch 4: first token {r.prefill_s * 1e3:,.4g} ms, {r.decode_s_per_token * 1e3:,.4g} "
                       f"ms per token, {r.tokens_per_s:,.4g} tokens/s; tensor 1 x pipeline 1; "
                       f"{r.memory_bytes_per_device / 1e9:,.3g} GB per device)")
