"""parallel.context_algorithm allgather (PyTorch's context_parallel as torchtitan runs it): exposure by hand, bytes,
sweep against estimate, bad input."""
from __future__ import annotations

import numpy as np
import pytest

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel.triples import collective_triple
from concurrency_model.sweep import sweep
from concurrency_model.training.estimate import estimate
from concurrency_model.training.workload import context_exposed, workload
from concurrency_model.validate import modern

CFG = {"model_type": "llama", "hidden_size": 2048, "num_attention_heads": 32, "num_key_value_heads": 8,
       "intermediate_size": 5632, "num_hidden_layers": 2, "vocab_size": 32000, "max_position_embeddings": 131072}
LLAMA = {"hf_config": CFG, "seq_len": 16384, "fused_attention": True}  # 32 heads of 64, 8 KV heads


def test_allgather_exposure_by_hand():
    # c = 4; forward: the gather (3 s) behind the diagonal block (1 s): 2; backward: the gather behind a block
    # (3 - 2 = 1), hops 1-3 of 2.5 s behind blocks of 2 s (3 x 0.5) and the last hop whole (2.5): 5; a recomputed
    # forward adds 2
    f, b = context_exposed(4, 1, 1, 1.0, 2.0, 3.0, 2.5, gathered=1.0)
    assert (f, b) == (2.0, 1.0 + 3 * 0.5 + 2.5 + 2.0)
    # compute-bound: only the last dK/dV hop shows, in each of 3 layers
    assert context_exposed(8, 3, 0, 10.0, 20.0, 3.0, 1.0, gathered=1.0) == (0.0, 3.0)


def test_gathered_flag_selects_per_layout():
    args = (np.array([4.0, 4.0]), 2, 1, np.array([1.0, 1.0]), np.array([2.0, 2.0]), np.array([3.0, 3.0]),
            np.array([0.5, 0.5]))
    f, b = context_exposed(*args, gathered=np.array([0.0, 1.0]))
    ring = context_exposed(*(x[0] if isinstance(x, np.ndarray) else x for x in args))
    gather = context_exposed(*(x[1] if isinstance(x, np.ndarray) else x for x in args), gathered=1.0)
    assert (f[0], b[0]) == ring and (f[1], b[1]) == gather


def _stage_cp(framework: str, algorithm: str, c: int = 2) -> dict:
    cl = load_cluster("dgx-h100")
    w = workload(LLAMA, cl, "bf16", selective="op" if framework == "fsdp2" else "attention",
                 fp8_recipe="torchao" if framework == "fsdp2" else "te")
    w.check_context(c, 8, algorithm)
    return w.stage(1, 8, True, "none", 1, c, algorithm)["cp"]


def test_allgather_bytes_by_hand():
    # TP 8 x CP 2 on DGX-H100: the context pair sits on two nodes. torchtitan repeats K and V to the 32 query heads
    # (4 on a TP rank): one block = 2 (K, V) x 8192 tokens x 4 heads x 64 x 2 bytes; the gather moves 2 blocks
    block = 2 * (16384 // 2) * 4 * 64 * 2
    cl = load_cluster("dgx-h100")
    cp = _stage_cp("fsdp2", "allgather")
    assert cp["gathered"] == 1.0
    assert cp["kv"] == pytest.approx(collective_triple("allgather", 2 * block, 2, cl, 1, 8), rel=1e-12)
    # the fp32 dK, dV hop crosses nodes: twice the 16-bit ring send of the same block, on the same link
    ring = _stage_cp("fsdp2", "ring")
    assert ring["gathered"] == 0.0
    assert cp["a2a"][2] == pytest.approx(2 * ring["kv"][2], rel=1e-12) and cp["a2a"][0] == ring["kv"][0]
    # without torchtitan's repeat_kv (Megatron's ring), the K/V block is of the 8 KV heads (1 on a TP rank): 1/4
    assert _stage_cp("megatron", "ring")["kv"][2] == pytest.approx(ring["kv"][2] / 4, rel=1e-12)


def _sc(**par):
    return {"model": LLAMA, "cluster": "dgx-h100",
            "parallel": {"tensor": 8, "context": 2, "data": 1, "sequence_parallel": True, "global_batch": 1,
                         "context_algorithm": "allgather", **par},
            "training": {"dtype": "bf16", "recompute": "full", "zero_stage": 3, "framework": "fsdp2"}}


def test_allgather_estimate_is_exposed_at_least_the_last_hop():
    e = estimate(_sc())
    cp = _stage_cp("fsdp2", "allgather")
    hop = cp["a2a"][0] + max(cp["a2a"][1], cp["a2a"][2])
    assert e.breakdown["context_parallel_comm_s"] >= 2 * hop * (1 - 1e-12)  # 2 layers, the last hop each


def test_sweep_agrees_with_estimate_for_allgather():
    spec = _sc()
    r = sweep({**spec, "parallel": {"context": 2, "context_algorithm": "allgather", "global_batch": 2,
                                    "sequence_parallel": True}}, 16)
    assert r.feasible > 0 and set(r.layouts["context_algorithm"]) == {"allgather"}
    for _, row in r.frame.iloc[:min(6, r.feasible)].iterrows():
        assert estimate(r.scenario(row)).step_time_s == row["step_time_s"]


def test_bad_algorithm_suggests_allgather():
    with pytest.raises(ValueError, match=r"^parallel\.context_algorithm: unknown 'allgathr'.*allgather"):
        estimate(_sc(context_algorithm="allgathr"))


def test_causal_allgather_needs_two_chunks_a_rank():
    with pytest.raises(ValueError, match=r"^parallel\.context: 3 does not divide"):
        estimate({**_sc(context=3), "model": {**LLAMA, "seq_len": 3 * 1001}})


def test_torchtitan_context_rows_run_allgather():
    rows = modern.rows("torchtitan")
    for _, r in rows[(rows["context"] > 1) & (rows["unmappable"] == "")].iterrows():
        assert modern.scenario_for(r)["parallel"]["context_algorithm"] == "allgather"
    one = rows[(rows["context"] == 1) & (rows["unmappable"] == "")].iloc[0]
    assert "context_algorithm" not in modern.scenario_for(one)["parallel"]
