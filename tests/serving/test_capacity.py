"""The largest batch a serving scenario holds (concurrency_model.serving.capacity, infer --max-batch)."""
from __future__ import annotations

import json

import numpy as np
import pytest

from concurrency_model.serving.capacity import max_batch
from concurrency_model.cli import main
from concurrency_model.serving.decoder import infer
from concurrency_model.serving.queueing import mean_wait

LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100",
         "inference": {"prompt_len": 1024, "decode_len": 128}}


def test_max_batch_by_hand():
    # memory per H100 = 13,476,831,232 B of weights + 771,751,936 B a sequence (KV cache of 1,152 positions,
    # 603,979,776 B, and the prefill's largest workspace, 167,772,160 B): (80e9 - 13,476,831,232) / 771,751,936
    # = 86.2 -> 86 sequences
    b, r = max_batch(LLAMA)
    assert b == 86 and r.inference["batch"] == 86
    assert r.memory["total_bytes"] == 13_476_831_232 + 86 * 771_751_936 <= 80e9
    with pytest.raises(ValueError, match="^memory: .* exceeds"):
        infer({**LLAMA, "inference": {**LLAMA["inference"], "batch": 87}})


def test_max_batch_grows_with_devices_and_shrinks_with_context():
    b1, _ = max_batch(LLAMA)
    b2, r2 = max_batch({**LLAMA, "parallel": {"tensor": 2}})
    assert b2 > 2 * b1  # half the weights and half the KV heads per device
    longer, _ = max_batch({**LLAMA, "inference": {"prompt_len": 2048, "decode_len": 128}})
    assert longer < b1
    assert r2.memory["total_bytes"] <= r2.memory["usable_bytes"]


def test_max_batch_refuses_what_never_fits_and_cli(tmp_path, capsys):
    with pytest.raises(ValueError, match="^memory: .* exceeds 80.0 GB of a100"):  # 175B x 2 bytes on one GPU
        max_batch({"model": "gpt3-175b", "cluster": "dgx-a100", "inference": {"prompt_len": 128, "decode_len": 8}})
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(LLAMA))
    assert main(["infer", "--scenario", str(f), "--max-batch", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["max_batch"] == out["inference"]["batch"] == 86 and out["tokens_per_s"] > 0
    assert main(["infer", "--scenario", str(f), "--max-batch"]) == 0
    assert capsys.readouterr().out.startswith("largest batch that fits: 86")


def test_serving_sweep_front_and_target():
    from concurrency_model.serving.capacity import serving_sweep
    df = serving_sweep(LLAMA, max_decode_s=0.02)
    assert sorted(df["tensor"].unique()) == [1, 2, 4, 8]  # powers of two inside an 8-GPU node
    assert df.groupby("tensor")["batch"].max().to_dict()[1] == 86  # the largest batch of each degree is swept
    assert (df["memory_bytes_per_device"] <= 80e9).all()
    lat, thr = df["decode_s_per_token"], df["tokens_per_s_per_gpu"]
    for i, r in df.iterrows():  # the front: rows that no other row beats on both latency and tokens/s per GPU
        dominated = ((lat <= r["decode_s_per_token"]) & (thr >= r["tokens_per_s_per_gpu"])
                     & ((lat < r["decode_s_per_token"]) | (thr > r["tokens_per_s_per_gpu"]))).any()
        assert r["pareto"] == (not dominated)
    ok = df[df["meets_target"]]
    assert (ok["decode_s_per_token"] <= 0.02).all() and not df.loc[~df["meets_target"], "pareto"].all()
    assert thr.is_monotonic_decreasing  # sorted, the best first


def test_serving_sweep_bad_input(tmp_path):
    from concurrency_model.serving.capacity import serving_sweep
    with pytest.raises(ValueError, match="^inference.decode_len: prompt_len"):  # the scenario's error, not a split's
        serving_sweep({"model": "gpt2", "cluster": "dgx-a100", "inference": {"prompt_len": 1000, "decode_len": 100}})
    with pytest.raises(ValueError, match="^memory: .* exceeds 32.0 GB"):  # not even on a whole node
        serving_sweep({"model": "gpt3-175b", "cluster": "dgx1-v100", "inference": {"prompt_len": 128,
                                                                                   "decode_len": 8}})
    with pytest.raises(ValueError, match="^model: the serving sweep is for causal decoders"):
        serving_sweep({"model": "resnet50", "cluster": "dgx-a100", "inference": {"batch": 8}})
    f = tmp_path / "cap.json"
    f.write_text(json.dumps(LLAMA))
    assert main(["infer", "--scenario", str(f), "--max-decode-ms", "20"]) == 2  # only with --sweep
    assert main(["infer", "--scenario", str(f), "--sweep", "--max-decode-ms", "inf"]) == 2  # not a target


def test_serving_sweep_compares_weight_formats():
    from concurrency_model.serving.capacity import serving_sweep
    df = serving_sweep(LLAMA, weights=("fp16", "int8", "2:4"))
    assert set(df["weights"]) == {"fp16", "int8", "2:4"}
    largest = df.groupby(["weights", "tensor"])["batch"].max()
    assert largest["int8", 1] > largest["fp16", 1] == 86  # smaller weights leave room for more sequences
    one = df[(df["tensor"] == 1) & (df["batch"] == 1)].set_index("weights")["decode_s_per_token"]
    assert one["int8"] < one["2:4"] < one["fp16"]  # batch 1 reads the weights: 1 < 1.125 < 2 bytes a weight
    with pytest.raises(ValueError, match="^weights: unknown format 'int3'"):
        serving_sweep(LLAMA, weights=("int3",))


def test_serving_sweep_sizes_a_fleet_for_a_load(capsys, tmp_path):
    from concurrency_model.serving.capacity import serving_sweep
    df = serving_sweep(LLAMA, max_decode_s=0.020, load_rps=100.0)
    rps = df["tokens_per_s"] / 128  # one replica's requests a second: its tokens over the 128 each request gets
    assert df["requests_per_s"].to_numpy() == pytest.approx(rps.to_numpy(), rel=1e-12)
    assert (df["replicas"] == np.ceil(100.0 / rps)).all() and (df["gpus_for_load"] == df["replicas"] * df["tensor"]).all()
    assert ((df["replicas"] - 1) * df["requests_per_s"] < 100.0).all()  # no replica more than needed
    f = tmp_path / "load.json"
    f.write_text(json.dumps(LLAMA))
    assert main(["infer", "--scenario", str(f), "--sweep", "--max-decode-ms", "20", "--load", "100", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"]
    ok = df[df["meets_target"]]
    assert best["gpus_for_load"] == ok["gpus_for_load"].min() and best["decode_s_per_token"] <= 0.020
    with pytest.raises(ValueError, match="^load_rps: must be a positive number"):
        serving_sweep(LLAMA, load_rps=-1)
    assert main(["infer", "--scenario", str(f), "--load", "100"]) == 2  # only with --sweep
    # the largest batch under a load: memory probed without it, the answer at it (109 slots, 12 requests/s)
    b, r = max_batch({**LLAMA, "inference": {**LLAMA["inference"], "batching": "continuous", "load_rps": 12}})
    assert b == 109 and r.inference["load_rps"] == 12 and r.inference["slots_run"] < b
    with pytest.raises(ValueError, match="^inference.load_rps: not in a serving sweep"):  # one replica's load
        serving_sweep({**LLAMA, "inference": {**LLAMA["inference"], "batching": "continuous", "load_rps": 5}})


def test_a_first_token_target_favours_continuous_batching():
    from concurrency_model.serving.capacity import serving_sweep
    static = serving_sweep(LLAMA, max_decode_s=0.020, max_first_token_s=0.5)
    assert (static["meets_target"] == ((static["decode_s_per_token"] <= 0.020) & (static["prefill_s"] <= 0.5))).all()
    cont = serving_sweep({**LLAMA, "inference": {**LLAMA["inference"], "batching": "continuous"}},
                         max_decode_s=0.020, max_first_token_s=0.5, load_rps=100.0)
    best = [f[f["meets_target"]]["tokens_per_s_per_gpu"].max() for f in (static, cont)]
    # a static batch's first token waits for its whole prefill: within 0.5 s it keeps to small batches
    assert best[1] > 1.2 * best[0]
    # under 100 requests a second every continuous replica's queue is stable, and where the first token is on
    # target its mean wait for a slot fits beside it (concurrency_model.serving.queueing), with no replica more than that
    service = 128 * cont["decode_s_per_token"]
    assert (100.0 / cont["replicas"] * service < cont["batch"]).all()
    fits = cont["prefill_s"] <= 0.5
    assert fits.any() and (cont["prefill_s"] + cont["queue_wait_s"] <= 0.5)[fits].all()
    for row in cont[fits & (cont["replicas"] > 1)].to_dict("records"):
        fewer = 100.0 / (row["replicas"] - 1) * 128 * row["decode_s_per_token"]
        service = 128 * row["decode_s_per_token"]
        assert fewer >= row["batch"] or row["prefill_s"] + mean_wait(row["batch"], fewer, service, 0.0) > 0.5
    with pytest.raises(ValueError, match="^max_first_token_s: must be a positive number"):
        serving_sweep(LLAMA, max_first_token_s=0)


def test_serving_sweep_searches_pipeline_degrees(tmp_path, capsys):
    """GPT-3 175B fits one DGX A100 only split 8 ways; with pipeline degrees searched, tensor 4 x pipeline 2 serves
    it on the same 8 GPUs and tensor 8 x pipeline 2 over two nodes holds the most slots; each row is infer's
    prediction of its layout."""
    from concurrency_model.serving.capacity import serving_sweep
    sc = {"model": "gpt3-175b", "cluster": "dgx-a100",
          "inference": {"batch": 8, "prompt_len": 1024, "decode_len": 256, "dtype": "fp16", "batching": "continuous"}}
    plain = serving_sweep(sc)
    assert "pipeline" not in plain and set(plain["tensor"]) == {8}  # 350 GB of weights: only tensor 8 fits
    df = serving_sweep(sc, pipelines=(1, 2))
    assert set(df["pipeline"]) == {1, 2} and set(zip(df["tensor"], df["pipeline"])) == {(8, 1), (4, 2), (8, 2)}
    assert (df["gpus"] == df["tensor"] * df["pipeline"]).all()
    assert (df[df["pipeline"] == 2]["batch"] % 2 == 0).all()  # continuous slots in a group on each stage
    most = df.groupby(["tensor", "pipeline"])["batch"].max()
    assert most[8, 2] > 2 * max(most[4, 2], most[8, 1])  # twice the devices: the cache has the second node's memory
    assert most[4, 2] == most[8, 1] - 1  # the same 8 GPUs (47 slots), an even number over two stages
    r = df[(df["tensor"] == 4) & (df["pipeline"] == 2)].iloc[0]
    got = infer({**sc, "parallel": {"tensor": 4, "pipeline": 2}, "inference": {**sc["inference"],
                                                                               "batch": int(r["batch"])}})
    assert r["decode_s_per_token"] == pytest.approx(got.decode_s_per_token, rel=1e-12)
    assert r["memory_bytes_per_device"] == pytest.approx(got.memory_bytes_per_device, rel=1e-12)
    with pytest.raises(ValueError, match="^pipelines: must be a positive integer, got 0"):
        serving_sweep(sc, pipelines=(0, 2))
    f = tmp_path / "g.json"
    f.write_text(json.dumps(sc))
    assert main(["infer", "--scenario", str(f), "--sweep", "--pipelines", "1,2", "--max-decode-ms", "100"]) == 0
    out = capsys.readouterr().out
    assert "tensor pipeline  batch" in out and "x pipeline 2" in out.splitlines()[-1]
    assert main(["infer", "--scenario", str(f), "--pipelines", "2"]) == 2  # only with --sweep
    assert main(["infer", "--scenario", str(f), "--sweep", "--pipelines", "two"]) == 2
    assert "--pipelines: comma-separated positive integers" in capsys.readouterr().err
