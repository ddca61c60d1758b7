"""Pipeline p2p as Megatron and DeepSpeed's pipeline engine run it: scatter/gather (Narayanan et al. 2021 §4.1: each
tensor rank sends 1 / t of the boundary activation, the receiving stage all-gathers the pieces over its tensor group;
DeepSpeed's ``pipe_partitioned``) and blocking exchanges (Megatron-DeepSpeed @ 2255b617 ``_communicate``; DeepSpeed @
38327e0 ``pipe/p2p.py``: every microbatch's transfers on the critical path), checked against an event simulation of
each runtime's order of operations."""
import numpy as np
import pytest

from concurrency_model.hardware.clusters import load_cluster, place
from concurrency_model.parallel import pipeline
from concurrency_model.parallel.pipeline import (BATCHED, BLOCKING_P2P_RUNTIMES, SCATTER_GATHER_P2P_RUNTIMES, SERIAL,
                                                 blocking_p2p_factor, blocking_p2p_transfers, p2p_blocking,
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
    assert SCATTER_GATHER_P2P_RUNTIMES == ("megatron", "deepspeed")
    assert BLOCKING_P2P_RUNTIMES == {"megatron": BATCHED, "deepspeed": SERIAL, "deepspeed-0.3": SERIAL}
    assert not p2p_scatter_gather("deepspeed-0.3")  # v0.3.13 sends its gradients whole
    assert p2p_scatter_gather("megatron") and p2p_scatter_gather("deepspeed")
    assert (p2p_blocking("megatron"), p2p_blocking("deepspeed"), p2p_blocking("megatron", "gpipe")) == (1, 2, 0)
    assert not any(f(x) for f in (p2p_scatter_gather, p2p_blocking) for x in ("ideal", "fsdp2"))


# -- an event simulation of the two runtimes' 1F1B, every exchange a rendezvous of two stages --------------------
def _simulate(programs, t_p2p):
    """Step seconds of per-stage programs of ``("C", seconds)`` (compute) and ``("X", peer)`` (a blocking exchange
    with ``peer``, matched to the peer's exchange of the same rank in order, holding both for ``t_p2p``)."""
    n = len(programs)
    pc, clock, done, waiting = [0] * n, [0.0] * n, {}, {}
    while any(pc[s] < len(programs[s]) for s in range(n)):
        moved = False
        for s in range(n):
            while pc[s] < len(programs[s]):
                kind, x = programs[s][pc[s]]
                if kind == "C":
                    clock[s] += x
                    pc[s] += 1
                    moved = True
                    continue
                k = done.get((s, x), 0)
                if (x, s, k) not in waiting:
                    waiting[(s, x, k)] = clock[s]
                    break
                end = max(waiting.pop((x, s, k)), clock[s]) + t_p2p
                for a, b in ((s, x), (x, s)):
                    done[(a, b)] = k + 1
                    pc[a] += 1
                    clock[a] = end
                moved = True
        if not moved:
            raise RuntimeError("deadlock")
    return max(clock)


def _megatron(p, m, t_f, t_b):
    """Megatron-LM's ``forward_backward_pipelining_without_interleaving``: warm-up (recv_forward, forward,
    send_forward), steady state (forward, send_forward_recv_backward, backward, send_backward_recv_forward), cool-down
    (recv_backward, backward, send_backward); an exchange with a stage that does not exist is skipped."""
    progs = []
    for s in range(p):
        ops, warm = [], min(p - s - 1, m)

        def x(peer):
            if 0 <= peer < p:
                ops.append(("X", peer))
        for _ in range(warm):
            x(s - 1), ops.append(("C", t_f)), x(s + 1)
        if m > warm:
            x(s - 1)
        for _ in range(m - warm):
            ops.append(("C", t_f)), x(s + 1), ops.append(("C", t_b)), x(s - 1)
        for _ in range(warm):
            x(s + 1), ops.append(("C", t_b)), x(s - 1)
        progs.append(ops)
    return progs


def _deepspeed(p, m, t_f, t_b):
    """DeepSpeed's ``TrainSchedule.steps`` (``_step_to_micro_batch``: even stages run forwards on even steps): a
    forward step sends the previous step's gradient to and receives the activation from the previous stage, a
    backward step receives the gradient from and sends the previous step's activation to the next stage."""
    progs = []
    for s in range(p):
        ops, prev = [], -1
        for step in range(2 * (m + p - 1)):
            if step % 2 == s % 2:
                mb, fwd = (step - s % 2) // 2 - s // 2, True
            elif step % 2 == 0:
                mb, fwd = step // 2 - p + (s + 1) // 2, False
            else:
                mb, fwd = (step - 1) // 2 - p + 1 + s // 2, False
            peer = s - 1 if fwd else s + 1
            if 0 <= peer < p:
                ops += [("X", peer) for b in ((prev, mb) if fwd else (mb, prev)) if 0 <= b < m]
            if 0 <= mb < m:
                ops.append(("C", t_f if fwd else t_b))
            prev = mb
        progs.append(ops)
    return progs


@pytest.mark.parametrize("runtime, kind", [(_megatron, BATCHED), (_deepspeed, SERIAL)])
@pytest.mark.parametrize("p, m", [(2, 1), (2, 5), (3, 1), (3, 2), (3, 7), (4, 4), (5, 16), (8, 3), (8, 25)])
def test_blocking_transfers_are_the_event_simulations(runtime, kind, p, m):
    t_f, t_b, tau = 1.0, 2.5, 1e-3
    compute = _simulate(runtime(p, m, t_f, t_b), 0.0)
    assert compute == pytest.approx((m + p - 1) * (t_f + t_b))  # neither order is a lock step
    assert (_simulate(runtime(p, m, t_f, t_b), tau) - compute) / tau == pytest.approx(blocking_p2p_transfers(p, m, kind))


def test_blocking_factor_by_hand():
    # 1F1B, p = 4, m = 8: Megatron 2(m + p) - 5 = 19 transfers, DeepSpeed 4m + 2p - 8 = 32, the ideal 2(p - 1) = 6
    assert blocking_p2p_factor(4, 8) == pytest.approx(19 / 6)
    assert blocking_p2p_factor(4, 8, 1, SERIAL) == pytest.approx(32 / 6)
    # two stages: one exchange a microbatch (Megatron), two (DeepSpeed)
    assert blocking_p2p_transfers(2, 8) == 9 and blocking_p2p_transfers(2, 8, SERIAL) == 16
    # interleaved: Megatron-LM overlaps the transfers by default; one stage: nothing to send
    assert blocking_p2p_factor(4, 8, 2) == 1 and blocking_p2p_factor(1, 8) == 1
    a = blocking_p2p_factor(np.array([4.0, 1.0, 4.0, 4.0, 2.0]), np.array([8.0, 8.0, 8.0, 8.0, 8.0]),
                            np.array([1.0, 1.0, 2.0, 1.0, 1.0]), np.array([1, 1, 1, 2, 2]))
    # the sweep's arrays give the estimate's numbers
    assert list(a) == pytest.approx([blocking_p2p_factor(4, 8), 1.0, 1.0, blocking_p2p_factor(4, 8, 1, SERIAL),
                                     blocking_p2p_factor(2, 8, 1, SERIAL)])


def test_estimate_pays_every_microbatchs_exchange():
    sc = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "megatron"},
          "parallel": {"data": 1, "tensor": 2, "pipeline": 2, "global_batch": 8, "microbatch_size": 1,
                       "sequence_parallel": False}}
    e = estimate(sc)
    one = triple_seconds(W.p2p(1, 2, False, "none", 2, 1, scatter_gather=True))
    assert e.breakdown["pipeline_p2p_s"] == pytest.approx((8 + 1) * one)  # two stages: m + 1 exchanges
    ideal = estimate({**sc, "training": {"dtype": "bf16", "framework": "ideal"}})
    assert ideal.breakdown["pipeline_p2p_s"] == pytest.approx(2 * (2 - 1) * triple_seconds(
        W.p2p(1, 2, False, "none", 2, 1)))


def test_deepspeed_pays_its_serial_exchanges_of_partitioned_tensors():
    sc = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "deepspeed"},
          "parallel": {"data": 1, "tensor": 2, "pipeline": 2, "global_batch": 8, "microbatch_size": 1,
                       "sequence_parallel": False}}
    one = triple_seconds(W.p2p(1, 2, False, "none", 2, 1, scatter_gather=True))  # pipe_partitioned: 1 / t, gathered
    assert estimate(sc).breakdown["pipeline_p2p_s"] == pytest.approx(2 * 8 * one)  # two stages: 2m transfers


def test_sweep_and_estimate_agree_with_megatrons_p2p_on_and_off(monkeypatch, tmp_path):
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "megatron"},
            "parallel": {"global_batch": 16, "tensor": 2, "pipeline": 2, "sequence_parallel": False}}
    monkeypatch.setenv("CONCURRENCY_MODEL_CACHE_DIR", str(tmp_path))  # sweep features cached apart from the default
    on = sweep(spec, [8])
    rows = on.frame.iloc[:on.feasible].head(6)
    assert len(rows) > 0
    for _, row in rows.iterrows():
        assert estimate(on.scenario(row)).step_time_s == row["step_time_s"]  # bit-equal
    monkeypatch.setattr(pipeline, "SCATTER_GATHER_P2P_RUNTIMES", ())
    monkeypatch.setattr(pipeline, "BLOCKING_P2P_RUNTIMES", {})
    monkeypatch.setenv("CONCURRENCY_MODEL_CACHE_DIR", str(tmp_path / "off"))
    off = sweep(spec, [8])
    for i, row in rows.iterrows():
        same = off.frame.loc[i]
        assert (same["tensor"], same["pipeline"], same["microbatch_size"]) == \
            (row["tensor"], row["pipeline"], row["microbatch_size"])
        # in one node the split sends half over NVLink, then pays the all-gather's latency, and every exchange blocks
        assert row["step_time_s"] > same["step_time_s"]


def test_sweep_and_estimate_agree_on_deepspeeds_serial_exchanges(monkeypatch, tmp_path):
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "bf16", "framework": "deepspeed"},
            "parallel": {"global_batch": 16, "tensor": 2, "pipeline": 4, "sequence_parallel": False}}
    monkeypatch.setenv("CONCURRENCY_MODEL_CACHE_DIR", str(tmp_path))
    r = sweep(spec, [8])
    rows = r.frame.iloc[:r.feasible].head(4)
    assert len(rows) > 0
    for _, row in rows.iterrows():
        e = estimate(r.scenario(row))
        assert e.step_time_s == row["step_time_s"]  # bit-equal: the sweep's arrays carry the kind per layout
        m = 16 // int(row["microbatch_size"])
        one = triple_seconds(W.p2p(int(row["microbatch_size"]), 2, False, row["recompute"], 4, 1, scatter_gather=True))
        assert e.breakdown["pipeline_p2p_s"] == pytest.approx(max(4 * m + 2 * 4 - 8, 6) * one)


@pytest.mark.parametrize("framework", ["megatron", "deepspeed"])
@pytest.mark.parametrize("p", [2, 3, 4])
def test_the_step_expression_counts_the_blocking_transfers_in_m(framework, p):
    """The symbolic step (``Estimate.expression``, ``m`` a symbol) carries the transfer count as a sympy ``Max`` in m
    and equals the estimate at the scenario's m."""
    e = estimate({"model": "gpt2", "cluster": "dgx-a100", "training": {"framework": framework},
                  "parallel": {"data": 2, "tensor": 1, "pipeline": p, "global_batch": 24, "microbatch_size": 1,
                               "schedule": "1f1b"}})
    assert float(e.expression.subs(e.expression_values)) == pytest.approx(e.step_time_s, rel=1e-12)
