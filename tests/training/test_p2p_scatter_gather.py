"""Pipeline p2p as Megatron runs it: scatter/gather (Narayanan et al. 2021 §4.1: each tensor rank sends 1 / t of the
boundary activation, the receiving stage all-gathers the pieces over its tensor group) and blocking exchanges
(Megatron-DeepSpeed @ 2255b617 ``_communicate``: every microbatch's transfers on the critical path)."""
import numpy as np
import pytest

from concurrency_model.hardware.clusters import load_cluster, place
from concurrency_model.parallel import pipeline
from concurrency_model.parallel.pipeline import (MEGATRON_P2P_RUNTIMES, blocking_p2p_factor, p2p_blocking,
                                                 p2p_scatter_gather)
from concurrency_model.parallel.triples import collective_triple, triple_seconds
from concurrency_model.sweep import sweep
from concurrency_model.training.estimate import estimate
from concurrency_model.training.prepare import runtime_name
from concurrency_model.training.workload import workload

CL = load_cluster("dgx-a100")
W = workload("gpt2", CL, "bf16")
FULL = 1 * 1024 * 768 * 2  # b x s x h x 2 bytes: GPT-2's boundary activation, one microbatch of 1


def test_boundary_bytes_are_gpt2s_activation():
    assert W.stage(1, 2, False, "none", 2)["boundary_numel"] * W.vb == FULL


def test_in_node_split_sends_half_and_gathers_the_whole():
    alpha, beta = place(CL, 2, 2).intra
    lat, intra, inter = W.p2p(1, 2, False, "none", 2, 1, scatter_gather=True)
    g = collective_triple("allgather", FULL, 2, CL, 2)
    assert lat == pytest.approx(alpha + g[0])
    assert intra == pytest.approx(FULL / 2 * beta + g[1])
    assert inter == 0.0
    assert W.p2p(1, 2, False, "none", 2, 1) == pytest.approx((alpha, FULL * beta, 0.0))


def test_across_nodes_each_rank_sends_an_eighth():
    alpha, beta = place(CL, 2, 1).inter  # tensor 8 fills the DGX: the next stage is across the network
    off = W.p2p(1, 8, False, "none", 2, 1)
    on = W.p2p(1, 8, False, "none", 2, 1, scatter_gather=True)
    assert off == pytest.approx((alpha, 0.0, FULL * beta))
    assert on[2] == pytest.approx(FULL / 8 * beta)
    assert on[1] == pytest.approx(collective_triple("allgather", FULL, 8, CL, 8)[1])


@pytest.mark.parametrize("t", [1, 2, 4])
def test_nothing_to_split(t):
    # sequence parallelism already sends 1 / t; one tensor rank has nothing to gather
    assert W.p2p(1, t, True, "none", 2, 1, scatter_gather=True) == W.p2p(1, t, True, "none", 2, 1)
    assert W.p2p(1, 1, False, "none", 2, 1, scatter_gather=True) == W.p2p(1, 1, False, "none", 2, 1)
    assert W.p2p(1, t, False, "none", 1, 1, scatter_gather=True) == (0.0, 0.0, 0.0)


def test_runtime_name_and_which_runtimes():
    assert runtime_name(("allreduce", 0, "none"), 3) == "ideal"
    assert runtime_name(("allreduce", 0, "none", "ring", (None,)), 3) == "deepspeed"
    assert runtime_name(("allreduce", 0, "none", "ring", ("fsdp",)), 0) == "fsdp"
    assert MEGATRON_P2P_RUNTIMES == ("megatron",)
    assert p2p_scatter_gather("megatron") and p2p_blocking("megatron")
    assert not any(f(x) for f in (p2p_scatter_gather, p2p_blocking) for x in ("ideal", "deepspeed", "fsdp2"))


def test_blocking_factor_by_hand():
    # 1F1B, p = 4, m = 8: 2(m + p - 1) = 22 transfers against the ideal 2(p - 1) = 6
    assert blocking_p2p_factor(4, 8) == pytest.approx(22 / 6)
    # interleaved: Megatron-LM overlaps the transfers by default; one stage: nothing to send
    assert blocking_p2p_factor(4, 8, 2) == 1 and blocking_p2p_factor(1, 8) == 1
    a = blocking_p2p_factor(np.array([4.0, 1.0, 4.0]), np.array([8.0, 8.0, 8.0]), np.array([1.0, 1.0, 2.0]))
    assert a[0] == blocking_p2p_factor(4, 8) and a[2] == 1.0  # the sweep's arrays give the estimate's numbers


def test_estimate_pays_every_microbatchs_exchange():
    sc = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "megatron"},
          "parallel": {"data": 1, "tensor": 2, "pipeline": 2, "global_batch": 8, "microbatch_size": 1,
                       "sequence_parallel": False}}
    e = estimate(sc)
    one = triple_seconds(W.p2p(1, 2, False, "none", 2, 1, scatter_gather=True))
    assert e.breakdown["pipeline_p2p_s"] == pytest.approx(2 * (8 + 2 - 1) * one)
    ideal = estimate({**sc, "training": {"dtype": "bf16", "framework": "ideal"}})
    assert ideal.breakdown["pipeline_p2p_s"] == pytest.approx(2 * (2 - 1) * triple_seconds(
        W.p2p(1, 2, False, "none", 2, 1)))


def test_sweep_and_estimate_agree_with_megatrons_p2p_on_and_off(monkeypatch, tmp_path):
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "megatron"},
            "parallel": {"global_batch": 16, "tensor": 2, "pipeline": 2, "sequence_parallel": False}}
    monkeypatch.setenv("CONCURRENCY_MODEL_CACHE_DIR", str(tmp_path))  # sweep features cached apart from the default
    on = sweep(spec, [8])
    rows = on.frame.iloc[:on.feasible].head(6)
    assert len(rows) > 0
    for _, row in rows.iterrows():
        assert estimate(on.scenario(row)).step_time_s == row["step_time_s"]  # bit-equal
    monkeypatch.setattr(pipeline, "MEGATRON_P2P_RUNTIMES", ())
    monkeypatch.setenv("CONCURRENCY_MODEL_CACHE_DIR", str(tmp_path / "off"))
    off = sweep(spec, [8])
    for i, row in rows.iterrows():
        same = off.frame.loc[i]
        assert (same["tensor"], same["pipeline"], same["microbatch_size"]) == \
            (row["tensor"], row["pipeline"], row["microbatch_size"])
        # in one node the split sends half over NVLink, then pays the all-gather's latency, and every exchange blocks
        assert row["step_time_s"] > same["step_time_s"]
