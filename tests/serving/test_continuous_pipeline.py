"""Continuous batching over pipeline stages: a group of slots a stage, each group's iteration through every stage."""
from __future__ import annotations

import pytest

from concurrency_model.serving.capacity import max_batch
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving.continuous_batching import iteration, prompt_tokens
from concurrency_model.serving.decoder import infer, model_shape
from concurrency_model.serving.overheads import Comm, kv_cache_bytes, model_graph

LLAMA = {"hf_config": "llama-2-7b"}
P, O = 1024, 128


def sc(batch, **par):
    return {"model": LLAMA, "cluster": "dgx-h100", "parallel": par,
            "inference": {"batch": batch, "prompt_len": P, "decode_len": O, "batching": "continuous"}}


def test_a_group_a_stage_by_hand():
    r = infer(sc(64, tensor=2, pipeline=2))
    cl = load_cluster("dgx-h100")
    shape = model_shape(model_graph(LLAMA, 1, None, 2))
    # each of the 2 groups of 32 slots passes both stages in turn: the iteration of 32 slots over the whole model,
    # with the sends of its rows (32 tokens + their 256 prompt tokens) from stage to stage
    it = iteration(lambda b, s: model_graph(LLAMA, b, s, 2), shape, cl.device, "fp16", 2, 32, P, O, Comm(cl, 2, 2))
    assert r.decode_s_per_token == pytest.approx(it.seconds, rel=1e-12)
    rows = 32 + prompt_tokens(32, P, O)
    send = Comm(cl, 2, 2).pipeline(rows * 4096 * 2)
    assert send > 0 and r.breakdown["iteration_pipeline_p2p_s"] == pytest.approx(send, rel=1e-12)
    assert r.tokens_per_s == pytest.approx(64 / it.seconds, rel=1e-12)  # every slot a token an iteration
    assert r.inference["prompt_tokens_per_iteration"] == prompt_tokens(64, P, O) == 512
    # a stage holds its half of the layers' cache for all 64 slots
    assert r.kv_cache_bytes == kv_cache_bytes(32, 64, P + O, 32, 128, 2, 2, 2) == \
        infer(sc(64, tensor=2)).kv_cache_bytes // 2
    assert r.to_dict()["gpus"] == 4


def test_one_stage_has_no_sends():
    assert "iteration_pipeline_p2p_s" not in infer(sc(32)).breakdown


def test_stages_hold_more_slots():
    one, two = max_batch(sc(1))[0], max_batch(sc(1, pipeline=2))[0]
    assert two % 2 == 0 and two > 2 * one  # half the weights and half the layers' cache a device


def test_a_load_runs_whole_groups():
    r = infer({**sc(64, pipeline=4), "inference": {**sc(64)["inference"], "load_rps": 20.0}})
    i = r.inference
    assert i["slots_run"] % 4 == 0 and i["slots_in_use"] <= i["slots_run"] <= 64
    assert i["slots_in_use"] == pytest.approx(20.0 * O * r.decode_s_per_token, rel=1e-12)  # Little's law


def test_a_model_over_one_node():
    # GPT-3 175B in fp16 on DGX A100s: 64 slots of 1,280 positions do not fit one node's 8 GPUs, two stages of 8 do
    gpt3 = {"model": "gpt3-175b", "cluster": "dgx-a100",
            "inference": {"batch": 64, "prompt_len": 1024, "decode_len": 256, "batching": "continuous"}}
    with pytest.raises(ValueError, match="^memory: "):
        infer({**gpt3, "parallel": {"tensor": 8}})
    r = infer({**gpt3, "parallel": {"tensor": 8, "pipeline": 2}})
    assert r.memory_bytes_per_device < 80e9 and r.to_dict()["gpus"] == 16


def test_the_sweep_keeps_the_stages():
    from concurrency_model.serving.capacity import serving_sweep
    df = serving_sweep({**sc(1, pipeline=2), "cluster": "dgx-a100"})
    assert (df["pipeline"] == 2).all() and (df["batch"] % 2 == 0).all()
    assert (df["gpus"] == 2 * df["tensor"]).all()
    assert "pipeline" not in serving_sweep({**sc(1), "cluster": "dgx-a100"}).columns
