"""Serving a mixture of experts with expert parallelism (parallel.data replicas sharing their experts in groups of
parallel.expert): the experts' weights divided, the dispatch and combine all-to-alls in every pass."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from concurrency_model.serving.capacity import layouts, max_batch, serving_sweep
from concurrency_model.cli import main
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.serving.decoder import infer, kv_cache_bytes, predict
from concurrency_model.serving.overheads import model_graph

MIXTRAL = {"hf_config": "mixtral-8x7b"}  # 32 layers, 8 experts, top 2, hidden 4096, 8 KV heads of 128
P, O = 1024, 128


def sc(batch, **par):
    return {"model": MIXTRAL, "cluster": "dgx-h100", "parallel": par,
            "inference": {"batch": batch, "prompt_len": P, "decode_len": O, "dtype": "bf16"}}


def expert_params():
    g = model_graph(MIXTRAL, 1, 1, 2)
    return float(g.params), sum(float(n.cost.params) for n in g.layers() if n.attrs.get("experts", 0) > 1)


def test_weights_kv_cache_and_devices_of_an_expert_group():
    r = infer(sc(64, data=8, expert=8))
    params, experts = expert_params()
    assert experts / params == pytest.approx(0.965, abs=0.005)  # the experts are most of Mixtral's 46.7B
    # each device: the dense weights and 1 of the 8 experts of every layer, in bf16
    assert r.memory["model_state_bytes"] == pytest.approx((params - experts * 7 / 8) * 2, rel=1e-12)
    # its replica's 64 / 8 sequences of 1,024 + 128 positions; all 64 in the total
    assert r.kv_cache_bytes == kv_cache_bytes(32, 8, P + O, 8, 128, 2)
    assert r.kv_cache_bytes_total == 8 * r.kv_cache_bytes
    d = r.to_dict()
    assert d["gpus"] == 8 and d["parallel"] == {"tensor": 1, "pipeline": 1, "data": 8, "expert": 8}
    assert r.tokens_per_s == pytest.approx(64 * O / r.total_s, rel=1e-12)  # every replica's tokens


def test_decode_all_to_alls_by_hand():
    r = infer(sc(64, data=8, expert=8))
    # per layer a dispatch and a combine of the device's 8 sequences x top 2 rows of 4,096 bf16 values over the 8
    # GPUs of the node: Bruck (lg 8 = 3 steps of alpha + n / 2 beta) or pairwise (7 alpha + 7/8 n beta)
    nv = load_cluster("dgx-h100").intra
    n, beta = 8 * 2 * 4096 * 2, 1 / (nv.bw * nv.efficiency)
    one = min(3 * (nv.latency + n / 2 * beta), 7 * nv.latency + 7 / 8 * n * beta)
    assert r.breakdown["decode_expert_comm_s"] == pytest.approx(32 * 2 * one, rel=1e-9)
    assert r.breakdown["decode_tensor_comm_s"] == 0.0
    assert "decode_expert_comm_s" not in infer(sc(64, tensor=8)).breakdown  # no key without expert parallelism


def test_fewer_experts_a_device_read_fewer_weights_a_step():
    # 8 replicas, the experts over groups of 2, 4 and 8: at 16 sequences a replica every local expert is reached,
    # so a decode step reads 4, 2, 1 experts' weights a layer on each device
    steps = [infer(sc(128, data=8, expert=e)).breakdown["decode_compute_s"] for e in (2, 4, 8)]
    assert steps[0] > steps[1] > steps[2]
    mems = [infer(sc(128, data=8, expert=e)).memory["model_state_bytes"] for e in (2, 4, 8)]
    params, experts = expert_params()
    assert mems[0] - mems[1] == pytest.approx(experts * (1 / 2 - 1 / 4) * 2, rel=1e-9)


def test_expert_parallel_beats_tensor_parallel_on_throughput_at_a_large_batch():
    # the all-to-alls carry one row per routed token; tensor parallelism all-reduces every block's output twice
    ep, tp = infer(sc(256, data=8, expert=8)), infer(sc(256, tensor=8))
    assert ep.tokens_per_s > 1.2 * tp.tokens_per_s
    assert ep.breakdown["prefill_expert_comm_s"] < 0.2 * tp.breakdown["prefill_tensor_comm_s"]


def test_continuous_batching_under_a_load_splits_it_over_the_replicas():
    base = sc(256, data=8, expert=8)
    base["inference"].update(batching="continuous", load_rps=20)
    r = infer(base)
    i = r.inference
    assert i["slots_run"] % 8 == 0 and i["slots_run"] <= 256
    assert r.tokens_per_s == pytest.approx(20 * O, rel=1e-9)  # the load's tokens, carried by all replicas
    assert i["prompt_tokens_per_iteration"] == 8 * round(i["slots_run"] / 8 * P / O)
    assert "iteration_expert_comm_s" in r.breakdown


def test_largest_batch_in_steps_of_the_replicas():
    b, r = max_batch(sc(8, data=8, expert=8))
    assert b % 8 == 0 and r.memory["fits"]
    with pytest.raises(ValueError, match="memory"):
        infer(sc(b + 8, data=8, expert=8))


def test_expert_groups_over_pipeline_stages():
    """Each replica over 2 stages: half the weights and cache a device, the same kernels and the stage's all-to-alls
    (inside a node while an expert group's replicas fit one), plus the sends between stages; a group of replicas
    of 8 GPUs each exchanges over the network."""
    one, two = (infer(sc(16, data=2, expert=2, tensor=2, pipeline=p)) for p in (1, 2))
    assert two.memory["model_state_bytes"] == pytest.approx(one.memory["model_state_bytes"] / 2, rel=1e-12)
    assert two.kv_cache_bytes == pytest.approx(one.kv_cache_bytes / 2, rel=1e-12)
    b1, b2 = one.breakdown, two.breakdown
    assert b2["decode_expert_comm_s"] == pytest.approx(b1["decode_expert_comm_s"], rel=1e-12)
    assert b2["decode_pipeline_p2p_s"] > 0 == b1["decode_pipeline_p2p_s"]
    assert two.decode_s_per_token == pytest.approx(one.decode_s_per_token + b2["decode_pipeline_p2p_s"], rel=1e-9)
    inside, across = (infer(sc(16, data=2, expert=2, tensor=4, pipeline=p)).breakdown["decode_expert_comm_s"]
                      for p in (1, 2))
    assert across > 2 * inside  # replicas of 4 x 2 GPUs: the group's two halves on two nodes
    r = infer({**sc(16, data=2, expert=2, tensor=2, pipeline=2), "inference": {
        **sc(16)["inference"], "batching": "continuous"}})
    assert r.to_dict()["gpus"] == 8 and r.breakdown["iteration_pipeline_p2p_s"] > 0


@pytest.mark.parametrize("par, inf, field", [
    ({"data": 3}, {}, "inference.batch"),
    ({"data": 8, "expert": 3}, {}, "parallel.expert"),
    ({"data": 4, "expert": 8}, {}, "parallel.expert"),
    ({"data": 8, "expert": 8}, {"batch": 12}, "inference.batch"),
    ({"data": 2, "expert": 2}, {"speculative": {"draft": "gpt2", "tokens": 4, "acceptance": 0.7}},
     "inference.speculative"),
])
def test_bad_layouts_name_the_field(par, inf, field):
    s = sc(8, **par)
    s["inference"].update(inf)
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        infer(s)


def test_a_dense_model_has_no_experts_to_split():
    with pytest.raises(ValueError, match=r"parallel\.expert: 2 needs a model with mixture-of-experts"):
        predict("gpt2", "dgx-a100", 2, 128, 16, data=2, expert=2)


def test_cli_says_the_layout(tmp_path, capsys):
    f = tmp_path / "moe.json"
    f.write_text(json.dumps(sc(64, data=8, expert=8)))
    assert main(["infer", "--scenario", str(f)]) == 0
    assert "8 replicas of tensor 1, the experts split over groups of 8" in capsys.readouterr().out
    assert main(["infer", "--scenario", str(f), "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["gpus"] == 8 and out["breakdown"]["decode_expert_comm_s"] > 0


def test_serving_sweep_compares_expert_groups_with_tensor_degrees():
    cfg = json.loads((Path(__file__).parents[2] / "concurrency_model/presets/hf/mixtral-8x7b.json").read_text())
    cfg.update(num_hidden_layers=2, hidden_size=1024, intermediate_size=2816, num_attention_heads=16,
               num_key_value_heads=4)  # a small Mixtral: 8 experts, top 2
    df = serving_sweep({"model": {"hf_config": cfg}, "cluster": "dgx-h100",
                        "inference": {"prompt_len": 256, "decode_len": 32, "dtype": "bf16"}})
    assert set(zip(df["tensor"], df["expert"])) == set(layouts(8, 8))
    assert (df["gpus"] == df["tensor"] * df["expert"]).all()
    assert (df["batch"] % df["expert"] == 0).all()
    ep = df[(df["tensor"] == 1) & (df["expert"] == 8)].set_index("batch")
    one = infer({"model": {"hf_config": cfg}, "cluster": "dgx-h100", "parallel": {"data": 8, "expert": 8},
                 "inference": {"batch": 64, "prompt_len": 256, "decode_len": 32, "dtype": "bf16"}})
    assert ep.loc[64, "tokens_per_s"] == one.tokens_per_s
    assert "expert" not in serving_sweep({"model": "gpt2", "cluster": "dgx-a100",
                                          "inference": {"prompt_len": 128, "decode_len": 16}}).columns


def test_independent_replicas_multiply_the_throughput():
    # a dense model on 4 replicas of tensor 2: each serves a quarter of the sequences, as one replica would alone
    one = predict("gpt2", "dgx-a100", 8, 256, 64, tensor=2, output_lengths="uniform")
    four = predict("gpt2", "dgx-a100", 32, 256, 64, tensor=2, data=4, output_lengths="uniform")
    assert four.prefill_s == one.prefill_s and four.decode_s_per_token == one.decode_s_per_token
    assert four.total_s == one.total_s  # each replica waits for its own longest request, not the others'
    assert four.tokens_per_s == pytest.approx(4 * one.tokens_per_s, rel=1e-12)
    assert four.memory_bytes_per_device == one.memory_bytes_per_device
    d = four.to_dict()
    assert d["gpus"] == 8 and d["parallel"] == {"tensor": 2, "pipeline": 1, "data": 4}
    assert d["gpu_hours_per_million_tokens"] == pytest.approx(one.to_dict()["gpu_hours_per_million_tokens"], rel=1e-12)
    # continuous batching: the load shared by the replicas, the capacity theirs together
    cap = predict("gpt2", "dgx-a100", 8, 256, 64, batching="continuous").inference["requests_per_s"]
    with pytest.raises(ValueError, match=rf"^inference\.load_rps: 500 requests a second exceed the capacity of 4 "
                                         rf"replicas of 8 slots, {4 * cap:,.2f} "):
        predict("gpt2", "dgx-a100", 32, 256, 64, data=4, batching="continuous", load_rps=500.0)


def test_a_fleet_in_words():
    from concurrency_model.commands.infer import fleet
    assert fleet({"replicas": 1, "expert": 4, "tensor": 1}) == "1 group of 4 replicas of tensor 1 sharing their experts"
    assert fleet({"replicas": 3, "expert": None, "tensor": 2}, "int8 weights, ") == "3 replicas of int8 weights, tensor 2"
    assert fleet({"replicas": 1, "tensor": 8}) == "1 replica of tensor 8"
