"""A KV cache stored narrower than the math (inference.kv_dtype): memory, the attention that reads it, refusals."""
import pytest

from concurrency_model.serving.capacity import max_batch
from concurrency_model.serving.kernels import kv_attention
from concurrency_model.hardware.devices import load_device
from concurrency_model.serving.decoder import infer

H100 = load_device("h100-sxm5-80gb")
LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100", "parallel": {"tensor": 1}}


def run(kv=None, cluster="dgx-h100", **inference):
    return infer({**LLAMA, "cluster": cluster,
                  "inference": {"batch": 2, "prompt_len": 1000, "decode_len": 24, "dtype": "fp16", "kv_dtype": kv,
                                **inference}})


@pytest.mark.parametrize("kv, size", [(None, 2**30), ("fp16", 2**30), ("fp8", 2**29), ("int8", 2**29),
                                      ("fp32", 2**31)])
def test_cache_bytes_against_a_hand_count(kv, size):
    # K and V: 2 x 32 layers x 2 sequences x 1,024 positions x 32 heads x 128 x (bytes a value): 2^30 in fp16
    assert run(kv).kv_cache_bytes == size


def test_attention_reads_the_cache_at_its_size():
    b, hq, hk, d = 4, 32, 8, 128
    two, one = (kv_attention(b, hq, hk, d, H100, "fp16", 1, 1, kv) for kv in (2, 1))
    bw = H100.mem_bw * H100.efficiency.memory
    assert one[2] == pytest.approx(b * 1 * d * 2 * hk / bw) and two[2] == pytest.approx(2 * one[2])  # per position
    # each step: the query read and the output written in fp16, the new K and V written in the cache's format
    assert one[3] == pytest.approx(b * d * (2 * hq * 2 + 2 * hk * 1) / bw)
    assert one[:2] == two[:2]  # the math is the same


def test_fp8_cache_speeds_the_attention_not_the_layers():
    fp16, fp8 = (run(kv, prompt_len=3000, decode_len=1000) for kv in (None, "fp8"))
    assert fp8.breakdown["decode_compute_s"] == pytest.approx(fp16.breakdown["decode_compute_s"])
    # reading the cache dominates at 3,000-4,000 positions: about half the time (1.49 -> 0.81 ms a token; the
    # launches and the queries do not halve)
    assert fp8.breakdown["decode_kv_attention_s"] / fp16.breakdown["decode_kv_attention_s"] == pytest.approx(0.54,
                                                                                                               abs=0.01)
    assert fp8.inference["kv_dtype"] == "fp8" and fp16.inference["kv_dtype"] == "fp16"


def test_more_sequences_fit():
    sc = {**LLAMA, "inference": {"batch": 1, "prompt_len": 1024, "decode_len": 1024, "dtype": "fp16"}}
    b16, _ = max_batch(sc)
    b8, _ = max_batch({**sc, "inference": {**sc["inference"], "kv_dtype": "fp8"}})
    # 13.5 GB of weights, 1 GB of fp16 cache a sequence: 53 sequences; half the cache, a growing workspace: 94
    assert (b16, b8) == (53, 94)


def test_refusal_suggests_the_cache_format_and_the_suggestion_fits():
    big = {"batch": 64, "prompt_len": 1024, "decode_len": 1024, "batching": "continuous"}
    with pytest.raises(ValueError, match=r"or inference\.kv_dtype=fp8 \((\d+\.\d) GB\)") as e:
        run(**big)
    quoted = float(str(e.value).split("kv_dtype=fp8 (")[1].split(" GB")[0])
    assert run("fp8", **big).memory_bytes_per_device / 1e9 == pytest.approx(quoted, abs=0.05)


def test_any_device_stores_fp8_and_bad_formats_are_named():
    assert run("fp8", cluster="dgx-a100").kv_cache_bytes == 2**29  # storage only: A100 has no fp8 math
    with pytest.raises(ValueError, match="inference.kv_dtype: unknown 'fp4'"):
        run("fp4")
