"""Serving at full load (concurrency_model.serving.capacity.max_throughput, infer --max-load) and its check against
TensorRT-LLM's Hopper table (concurrency_model.validate.trtllm)."""
from __future__ import annotations

import json
import math

import pandas as pd
import pytest

from concurrency_model.serving.capacity import engine_limits, engine_requests, max_throughput
from concurrency_model.cli import main
from concurrency_model.hardware.devices import load_device
from concurrency_model.serving.decoder import infer
from concurrency_model.validate import trtllm

LLAMA8 = {"model": {"hf_config": "llama-3.1-8b", "fused_attention": True}, "cluster": "dgx-h100",
          "inference": {"prompt_len": 1000, "decode_len": 1000, "dtype": "fp8", "kv_dtype": "fp8"}}
WEIGHTS = 8_030_261_248  # Llama 3.1 8B's parameters at one byte (fp8)
KV_TOKEN = 2 * 32 * 8 * 128 * 1  # K and V x 32 layers x 8 KV heads x 128 x 1 byte = 65,536 B a position


def _with(**inf) -> dict:
    return {**LLAMA8, "inference": {**LLAMA8["inference"], **inf}}


@pytest.fixture(scope="module")
def base():
    return max_throughput(LLAMA8)


def test_engine_limits_by_hand():
    # tuning.py finetune_setting: 521.6 requests -> batch rounded up to 128s (256 <= b < 1024): 640; tokens
    # 521.6 x (1 + 1000/1000) = 1,043 -> at least 2048; no chunked prefill: at least 1000 + 640 = 1,640
    assert engine_limits(521.6, 1000, 1000) == (640, 2048)
    # 10,000 requests capped at 4096 (to 256s); tokens 4096 x 2 = 8192 (to 1024s)
    assert engine_limits(10_000, 128, 128) == (4096, 8192)
    # two pipeline stages halve the batch: 2048 (to 256s), tokens 2048 x 2 = 4096 (to 512s)
    assert engine_limits(4096, 128, 128, pipeline=2) == (2048, 4096)
    # 51 requests -> at least 64; tokens 51 x 11 = 561 -> 2048, raised to 20,000 + 64 without chunking
    assert engine_limits(51, 20000, 2000) == (64, 20064)
    assert engine_limits(51, 20000, 2000, chunked=True) == (64, 2048)
    # 100 requests x (1 + 16) = 1,700 -> 256s: 2048 (the floor); 300 x 17 = 5,100 -> 512s: 5,120; tokens capped at
    # 32,768 (3000 x 17 = 51,000)
    assert engine_limits(100, 2048, 128, chunked=True) == (128, 2048)
    assert engine_limits(300, 2048, 128, chunked=True) == (384, 5120)
    assert engine_limits(3000, 2048, 128, chunked=True) == (3072, 32768)


def test_engine_requests_by_hand():
    # Llama 3.3 70B (= 3.1 70B) in fp8 on two H100s, 1000/1000: (2 x 80e9 - 70,553,706,496) x 0.95 over
    # 2 x 80 layers x 8 heads x 128 x 1 B x 2000 positions = 327,680,000 B a request
    got = engine_requests(80e9, 2, 70_553_706_496, 1, 80, 8, 2, 128, 1, 2000)
    assert got == pytest.approx((160e9 - 70_553_706_496) * 0.95 / 327_680_000)
    assert round(got, 1) == 259.3
    # a tensor rank holds at least one KV head: tensor 16 over 8 KV heads counts 16
    assert engine_requests(80e9, 16, 1e9, 1, 10, 8, 16, 128, 1, 100) == \
        pytest.approx((16 * 80e9 - 1e9) * 0.95 / (2 * 10 * 16 * 128 * 100))


def test_slots_by_hand(base):
    # a sequence holds 2000 positions x 65,536 B = 131,072,000 B; the free memory is 80e9 less the weights and the
    # workspace (the iteration's largest operator, 0.09-0.23 GB at ~500 slots); 95% of it over a sequence:
    # 0.95 x (80e9 - 8,030,261,248 - workspace) / 131,072,000 = 520.x -> 520
    work = base.result.memory["activations_bytes"]
    assert base.result.memory["model_state_bytes"] == WEIGHTS
    assert 0.0876e9 < work < 0.2255e9  # the workspaces between which the answer is 520
    free = 80e9 - WEIGHTS - work
    assert base.free_bytes == pytest.approx(free)
    per_seq = 2000 * KV_TOKEN
    assert base.kv_slots == base.slots == math.floor(0.95 * free / per_seq) == 520
    assert base.result.kv_cache_bytes == 520 * per_seq <= 0.95 * free < 521 * per_seq
    assert base.limited_by == "kv_cache" and (base.max_batch_size, base.max_num_tokens) == (640, 2048)


def test_throughput_is_the_saturated_iteration(base):
    # output tokens/s = slots / iteration, the continuous-batching steady state at those slots and the engine's token
    # budget; and at most what reading the weights and every slot's cache once an iteration allows: the mean context
    # is 1000 + 1001 / 2 positions, read at the H100's 3.35e12 B/s
    it = base.result.decode_s_per_token
    assert base.output_tokens_per_s == pytest.approx(520 / it)
    same = infer(_with(batch=520, batching="continuous", max_batched_tokens=2048))
    assert same.tokens_per_s == pytest.approx(base.output_tokens_per_s)
    bw = float(load_device("h100-sxm5-80gb").mem_bw)
    assert it >= (WEIGHTS + 520 * (1000 + 1001 / 2) * KV_TOKEN) / bw
    assert base.output_tokens_per_s_per_gpu == base.output_tokens_per_s  # one GPU


def test_replicas_double_the_system_and_tensor_ranks_share_it(base):
    two = max_throughput({**LLAMA8, "parallel": {"data": 2}})
    assert two.slots == 2 * base.slots and two.gpus == 2
    assert two.output_tokens_per_s == pytest.approx(2 * base.output_tokens_per_s)
    assert two.output_tokens_per_s_per_gpu == pytest.approx(base.output_tokens_per_s)


def test_longer_inputs_never_raise_the_output_rate():
    # more positions a sequence: fewer slots, and each iteration carries more prompt tokens and longer contexts
    rates, slots = [], []
    for p in (128, 1000, 4000):
        m = max_throughput(_with(prompt_len=p, decode_len=500))
        rates.append(m.output_tokens_per_s)
        slots.append(m.slots)
    assert rates[0] > rates[1] > rates[2] and slots[0] > slots[1] > slots[2]


def test_longer_outputs_never_add_slots(base):
    # the cache holds whole requests (GUARANTEED_NO_EVICT): more output positions, fewer of them
    longer = max_throughput(_with(decode_len=2000))
    assert longer.kv_slots < base.kv_slots
    assert longer.result.kv_cache_bytes <= 0.95 * longer.free_bytes


def test_engine_limits_bind_when_given():
    few = max_throughput(LLAMA8, max_batch_size=100)
    assert (few.slots, few.limited_by, few.kv_slots) == (100, "max_batch_size", 520)
    # 600 tokens an iteration, 2 a slot (its decode token and its prompt's steady share, 1000 / 1000):
    # g + g x 1000 / 1000 < 600 -> 299 slots decode
    tight = max_throughput(LLAMA8, max_num_tokens=600)
    assert (tight.slots, tight.limited_by) == (299, "max_num_tokens")
    assert tight.output_tokens_per_s < max_throughput(LLAMA8).output_tokens_per_s


@pytest.mark.parametrize("change, field", [
    (dict(inference={**LLAMA8["inference"], "batching": "static"}), "inference.batching"),
    (dict(inference={**LLAMA8["inference"], "load_rps": 3.0}), "inference.load_rps"),
    (dict(model="resnet50"), "model"),
    (dict(model={"hf_config": "llama-3.1-405b"}), "memory"),  # 406 GB of fp8 weights on one H100
])
def test_bad_scenarios_name_the_field(change, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        max_throughput({**LLAMA8, **change})


@pytest.mark.parametrize("kwargs, field", [(dict(kv_fraction=0), "kv_fraction"), (dict(kv_fraction=1.2), "kv_fraction"),
                                           (dict(max_batch_size=0), "max_batch_size"),
                                           (dict(max_num_tokens=2.5), "max_num_tokens")])
def test_bad_arguments_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        max_throughput(LLAMA8, **kwargs)


def test_cli_max_load(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(LLAMA8))
    assert main(["infer", "--scenario", str(f), "--max-load", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_load"]["slots"] == out["inference"]["batch"] == 520
    assert out["output_tokens_per_s"] == pytest.approx(out["tokens_per_s"])
    assert main(["infer", "--scenario", str(f), "--max-load"]) == 0
    assert "output tokens/s" in capsys.readouterr().out
    assert main(["infer", "--scenario", str(f), "--kv-fraction", "0.9"]) == 2  # only with --max-load
    assert main(["infer", "--scenario", str(f), "--max-load", "--max-batch"]) == 2


def test_trtllm_rows_map_by_one_rule():
    df = trtllm.rows()
    assert len(df) == 112 and (df["unmappable"] == "").sum() == 60
    assert set(df.loc[df["unmappable"] != "", "model"]) == {"Llama 4 Scout", "Llama 4 Maverick", "Qwen3-235B-A22B"}
    r = df[(df["model"] == "Llama 3.3 70B") & (df["gpu"] == "H100") & (df["isl"] == 1000) & (df["osl"] == 1000)]
    r = r.iloc[0].to_dict()
    assert r["measured"] == 4205.0
    sc = trtllm.scenario_for(r)
    assert sc["model"]["hf_config"] == "llama-3.1-70b" and sc["cluster"] == "dgx-h100"
    assert sc["parallel"] == {"tensor": 2, "pipeline": 1}
    assert sc["inference"] == {"prompt_len": 1000, "decode_len": 1000, "dtype": "fp8", "kv_dtype": "fp8"}
    scout = df[df["model"] == "Llama 4 Scout"].iloc[0].to_dict()
    with pytest.raises(ValueError, match="no Llama 4 preset"):
        trtllm.scenario_for(scout)


def test_trtllm_evaluate_two_rows():
    df = trtllm.rows()
    llama = df[(df["model"] == "Llama 3.1 8B") & (df["gpu"] == "H100") & (df["isl"] == 1000) & (df["osl"] == 1000)]
    two = pd.concat([df[df["model"] == "Qwen3-235B-A22B"].head(1), llama])
    res = trtllm.evaluate(two)
    assert list(res["status"]) == ["unmappable", "ok"]
    ok = res[res["status"] == "ok"].iloc[0]
    assert ok["slots"] == 520 and ok["predicted"] > 0
    assert ok["ape"] == pytest.approx(abs(ok["predicted"] - 15220) / 15220)
    s = trtllm.summary(res)
    assert (s["rows"], s["rows_total"]) == (1, 2)


@pytest.mark.parametrize("par, inf", [
    ({"tensor": 2, "pipeline": 2, "data": 2}, {"dtype": "fp16", "weight_dtype": "int8", "kv_dtype": "fp8"}),
    ({"tensor": 4}, {"dtype": "fp8", "kv_dtype": "fp8"}),
])
def test_engine_requests_read_the_shape_and_layout_infer_reports(par, inf):
    # max_throughput reads the engine's shape, layout and dtypes off the scenario without pricing a first iteration;
    # they must be those of infer's own result: the requests recomputed from the result's shape, parallel and
    # inference are the same number (the weights' bytes: WEIGHT_BYTES of the result's weight_dtype, int8 = 1)
    m = max_throughput({**LLAMA8, "parallel": par, "inference": {**LLAMA8["inference"], **inf}})
    s, lay, i = m.result.shape, m.result.parallel, m.result.inference
    t, p = lay["tensor"], lay["pipeline"]
    wb = {"int8": 1, "fp8": 1, "fp16": 2}[i["weight_dtype"]]
    assert m.engine_requests == engine_requests(80e9, t * p, s["params"], wb, s["layers"], s["kv_heads"], t,
                                                s["head_dim"], s["kv_bytes"], i["prompt_len"] + i["decode_len"], 0.95)
    assert m.gpus == t * p * lay.get("data", 1) == math.prod(par.values())
