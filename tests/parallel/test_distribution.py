"""Training distribution (paper §7): parameter servers, allreduce, gossip (distribution.py), consistency
models with stragglers (consistency.py), gradient compression (compression.py)."""
from __future__ import annotations

import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import get_model
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.comm import collective_time
from concurrency_model.comm.on_cluster import collective_on_cluster
from concurrency_model.parallel import compressed_sync as CS
from concurrency_model.parallel import compression as C
from concurrency_model.parallel import consistency as K
from concurrency_model.parallel import distribution as D
from concurrency_model.symbols import P, alpha, beta, gamma_red, n_bytes as n
from concurrency_model.timing import roofline

a, b, g = alpha, beta, gamma_red
DGX1 = load_cluster("dgx1-v100")


def same(x, y) -> bool:
    return sp.simplify(sp.sympify(x) - sp.sympify(y)) == 0


# -- parameter servers, allreduce, gossip: hand-derived values -------------------------------------------

def test_single_ps_hand():
    # P workers push n bytes into one server link and pull n back: 2 P n beta + 2 alpha (latencies overlap)
    assert same(D.ps_time(n, 8, a, b), 2 * a + 16 * n * b)
    assert same(D.ps_time(n, 8, a, b, gamma=g), 2 * a + 16 * n * b + 7 * n * g)
    assert same(D.ps_time(n, 8, a, b, latency="serial"), 16 * (a + n * b))  # paper-models §5.2's 2P(alpha + n beta)
    assert D.ps_time(1e6, 4, 1e-6, 1e-9) == pytest.approx(2e-6 + 8e-3)
    assert same(D.ps_time(n, P, a, b), sp.Min(P - 1, 1) * (2 * a + 2 * P * n * b))


def test_sharded_ps_hand():
    # S servers: the server link carries P n / S, the worker link n; the busier binds
    assert same(D.ps_time(n, 8, a, b, servers=2), 2 * a + 8 * n * b)
    assert same(D.ps_time(n, 8, a, b, servers=8), 2 * a + 2 * n * b)
    assert same(D.ps_time(n, 8, a, b, servers=16), 2 * a + 2 * n * b)  # the worker link binds
    assert same(D.ps_time(n, 8, a, b, servers=2, latency="serial"), 2 * sp.Max(2 * a + n * b, 8 * a + 4 * n * b))
    assert same(D.ps_time(n, 8, a, b, servers=4, gamma=g), 2 * a + 4 * n * b + sp.Rational(7, 4) * n * g)


def test_hierarchical_ps_hand():
    # one worker per node: a plain PS among the nodes; one node: reduce + broadcast inside it
    assert same(D.ps_hierarchical_time(n, 1, 8, a / 2, b / 2, a, b), D.ps_time(n, 8, a, b))
    red = collective_time("reduce", "rabenseifner", n, 8, a, b)
    bc = collective_time("broadcast", "scatter_allgather", n, 8, a, b)
    assert same(D.ps_hierarchical_time(n, 8, 1, a, b, 3 * a, 3 * b), red + bc)
    # 8 per node, 4 nodes: the server sees 4 pushes, not 32
    t = D.ps_hierarchical_time(n, 8, 4, 0, 0, a, b)
    assert same(t, 2 * a + 8 * n * b)


def test_allreduce_is_comm():
    assert same(D.allreduce_time(n, 8, a, b), collective_time("allreduce", "ring", n, 8, a, b))
    assert D.allreduce_time(1e6, 8, 1e-6, 1e-9, "auto") <= D.allreduce_time(1e6, 8, 1e-6, 1e-9, "tree")


def test_gossip_hand():
    assert [D.gossip_degree(t, 16) for t in D.TOPOLOGIES] == [2, 4, 15]
    assert [D.gossip_degree(t, 1) for t in D.TOPOLOGIES] == [0, 0, 0]
    assert D.gossip_degree("ring", 2) == 1 and D.gossip_degree("exponential", 5) == 3
    assert D.gossip_offsets("exponential", 6) == [1, 2, 4]
    assert same(D.gossip_round_time(n, 2, a, b), a + 2 * n * b)
    assert same(D.gossip_round_time(n, 3, a, b, "serial"), 3 * a + 3 * n * b)
    assert same(D.gossip_time(n, 1024, a, b, "exponential", rounds=2), 2 * a + 20 * n * b)
    assert D.gossip_time(1e6, 1, 1e-6, 1e-9) == 0.0
    assert same(D.gossip_degree("exponential", P).subs(P, 16), 4)


@pytest.mark.parametrize("Pn", [3, 4, 5, 8, 13, 16, 40])
def test_ring_spectral_gap_closed_form(Pn):
    lam = [(1 + 2 * math.cos(2 * math.pi * j / Pn)) / 3 for j in range(1, Pn)]
    assert D.spectral_gap("ring", Pn) == pytest.approx(1 - max(abs(x) for x in lam))
    if Pn >= 5:  # the second-largest eigenvalue binds
        assert D.spectral_gap("ring", Pn) == pytest.approx(2 * (1 - math.cos(2 * math.pi / Pn)) / 3)


@pytest.mark.parametrize("k", range(1, 11))
def test_exponential_graph_gap_ying(k):
    # Ying et al. 2021: rho = 1 - 2 / (1 + log2 P) for P a power of two
    assert D.spectral_gap("exponential", 2**k) == pytest.approx(2 / (1 + k), abs=1e-9)


@pytest.mark.parametrize("topo, Pn", [("ring", 16), ("exponential", 16), ("exponential", 12), ("ring", 7)])
def test_consensus_rounds_by_simulation(topo, Pn):
    eps = 1e-3
    W = D.mixing_matrix(topo, Pn)
    assert np.allclose(W.sum(0), 1) and np.allclose(W.sum(1), 1)
    t = D.consensus_rounds(D.spectral_gap(topo, Pn), eps)
    rng = np.random.default_rng(1)
    for x0 in [rng.normal(size=Pn), np.cos(2 * np.pi * np.arange(Pn) / Pn)]:  # random, and the slowest mode
        dev0 = np.linalg.norm(x0 - x0.mean())
        x = x0.copy()
        for _ in range(t):
            x = W @ x
        assert np.linalg.norm(x - x0.mean()) <= eps * dev0 * (1 + 1e-9)
    # the bound is tight for the slowest Fourier mode: one round fewer is not enough
    lam = np.fft.fft(W[0])
    j = int(np.argmax(np.abs(lam[1:]))) + 1
    v = np.exp(2j * np.pi * j * np.arange(Pn) / Pn)
    x = v.copy()
    for _ in range(t - 1):
        x = W @ x
    assert np.linalg.norm(x) > eps * np.linalg.norm(v)


def test_consensus_rounds_values():
    assert D.consensus_rounds(1.0) == 1
    assert D.consensus_rounds(0.5, 0.25) == 2
    assert D.consensus_rounds(0.1, 1e-3) <= math.ceil(math.log(1e3) / 0.1)
    sym = D.consensus_rounds(sp.Symbol("delta", positive=True))
    assert isinstance(sym, sp.Expr)


# -- on a cluster ---------------------------------------------------------------------------------------

def test_ps_on_cluster_hand():
    bw, lat = DGX1.inter.effective_bw, DGX1.inter.latency
    # 16 workers (2 nodes), one server machine with 1 NIC: the server NIC binds, P n / bw each way
    t = D.ps_on_cluster(1e8, 16, DGX1, servers=1, server_nics=1)
    assert t == pytest.approx(2 * (lat + 16e8 / bw))
    # default: the server has the node's 4 NICs
    assert D.ps_on_cluster(1e8, 16, DGX1) == pytest.approx(2 * (lat + 16e8 / (4 * bw)))
    # colocated inside one node: the server GPU receives 7 n over NVLink
    t = D.ps_on_cluster(1e8, 8, DGX1, servers=1, server_placement="colocated")
    assert t == pytest.approx(2 * (DGX1.intra.latency + 7e8 / DGX1.intra.effective_bw))
    assert D.ps_on_cluster(1e8, 1, DGX1) == 0.0


def test_ps_on_cluster_sharding_helps():
    ts = [D.ps_on_cluster(1e8, 64, DGX1, servers=s) for s in (1, 2, 4, 8, 16)]
    assert all(x >= y - 1e-12 for x, y in zip(ts, ts[1:]))
    # with many servers the workers' NIC share (8 GPUs on 4 NICs) binds
    assert ts[-1] == pytest.approx(2 * (DGX1.inter.latency + 1e8 / (DGX1.inter.effective_bw / 2)))


def test_hierarchical_and_gossip_on_cluster():
    a_i, bw_i = DGX1.intra.latency, DGX1.intra.effective_bw
    intra = D.ps_hierarchical_on_cluster(1e8, 8, DGX1)  # one node: reduce + broadcast only
    red = min(float(collective_time("reduce", x, 1e8, 8, a_i, 1 / bw_i))
              for x in ("tree", "rabenseifner", "pipelined_chain"))
    assert intra == pytest.approx(red + min(float(collective_time("broadcast", x, 1e8, 8, a_i, 1 / bw_i))
                                            for x in ("tree", "scatter_allgather", "pipelined_chain")))
    assert D.ps_hierarchical_on_cluster(1e8, 64, DGX1) < D.ps_on_cluster(1e8, 64, DGX1)
    # ring inside one node: 2 n over the GPU's NVLink port
    assert D.gossip_on_cluster(1e8, 8, DGX1, "ring") == pytest.approx(a_i + 2e8 / bw_i)
    # two nodes: the boundary workers send n through one NIC
    assert D.gossip_on_cluster(1e8, 16, DGX1, "ring") == pytest.approx(
        DGX1.inter.latency + 1e8 / DGX1.inter.effective_bw)


def test_compare_distribution():
    df = D.compare_distribution("resnet50", "dgx1-v100", [1, 8, 16], compressions=("fp16", "topk", "powersgd"))
    schemes = ["ps_single", "ps_sharded", "ps_hierarchical", "allreduce", "gossip_ring", "gossip_exponential",
               "allreduce+fp16", "allreduce+topk", "allreduce+powersgd"]
    assert list(df[df.P == 8].scheme) == schemes
    assert (df[df.P == 1].time_s == 0).all()
    n_grad = 25557032 * 4
    assert (df.query("scheme == 'allreduce'").message_bytes == n_grad).all()
    row = df.query("P == 16 and scheme == 'allreduce'").iloc[0]
    alg, t, _ = collective_on_cluster("allreduce", n_grad, 16, "dgx1-v100")
    assert (row.algorithm, row.time_s) == (alg, pytest.approx(t))
    assert (df.time_s >= df.comm_s).all()
    assert np.allclose(df.time_s, df.comm_s + df.encode_s + df.decode_s)
    big = df[df.P == 16].set_index("scheme")
    assert big.time_s["ps_single"] > big.time_s["allreduce"]
    assert big.message_bytes["allreduce+topk"] < big.message_bytes["allreduce+fp16"] < n_grad
    assert big.consensus_rounds["gossip_ring"] > big.consensus_rounds["gossip_exponential"]


# -- consistency: stragglers -----------------------------------------------------------------------------

def test_expected_max_closed_forms():
    assert K.expected_max(8, "exponential", 2.0) == pytest.approx(2 * sum(1 / i for i in range(1, 9)))
    assert K.expected_max(8, "shifted_exponential", 2.0, shift=1.5) == pytest.approx(
        1.5 + 0.5 * sum(1 / i for i in range(1, 9)))
    assert K.expected_max(8, "deterministic", 2.0) == 2.0
    assert same(K.expected_max(P, "exponential", 3), 3 * sp.harmonic(P))
    z = sp.Symbol("z")
    e = K.expected_max(P, "gaussian", z, 2)
    assert e.free_symbols == {P, z}
    assert float(e.subs({P: 16, z: 1})) == pytest.approx(K.expected_max(16, "gaussian", 1, 2))
    # Blom at P = 2: Phi^-1(1.625/2.25) against the exact 1/sqrt(pi)
    assert K.expected_max(2, "gaussian", 0, 1, method="exact") == pytest.approx(1 / math.sqrt(math.pi), rel=1e-9)


@pytest.mark.parametrize("Pn", [2, 3, 8, 64, 512, 4096])
def test_blom_and_gumbel_against_quadrature(Pn):
    exact = K.expected_max(Pn, "gaussian", 0, 1, method="exact")
    assert abs(K.expected_max(Pn, "gaussian", 0, 1) - exact) < 0.03
    if Pn >= 512:
        assert abs(K.expected_max(Pn, "gaussian", 0, 1, method="gumbel") - exact) < 0.05


@pytest.mark.parametrize("dist, kw", [("exponential", {}), ("shifted_exponential", {"shift": 0.7}),
                                      ("gaussian", {"std": 0.2})])
@pytest.mark.parametrize("Pn", [1, 4, 32])
def test_straggler_expectation_monte_carlo(dist, kw, Pn):
    mc = K.expected_max_monte_carlo(Pn, dist, 1.0, samples=40000, seed=7, **kw)
    assert K.expected_max(Pn, dist, 1.0, **kw) == pytest.approx(mc, rel=0.02)
    # backup workers: the (P-b)-th of P
    if Pn > 1:
        r = Pn - 1
        mc = K.expected_max_monte_carlo(Pn, dist, 1.0, samples=40000, seed=8, r=r, **kw)
        assert K.expected_order_statistic(r, Pn, dist, 1.0, **kw) == pytest.approx(mc, rel=0.02)


def test_sync_and_backup():
    H = lambda k: sum(1 / i for i in range(1, k + 1))  # noqa: E731
    assert K.sync_step_time(16, "exponential", 1.0, comm_s=0.1) == pytest.approx(H(16) + 0.1)
    assert K.sync_step_time(16, "exponential", 1.0, backup=2) == pytest.approx(H(16) - H(2))
    assert K.sync_step_time(16, "exponential", 1.0, backup=2) < K.sync_step_time(16, "exponential", 1.0)


@settings(max_examples=40, deadline=None)
@given(Pn=st.integers(1, 2000), mean=st.floats(1e-3, 10), cv=st.floats(0, 2), shift=st.floats(0, 1),
       dist=st.sampled_from(K.DISTRIBUTIONS))
def test_expected_max_monotone_and_mean_at_one(Pn, mean, cv, shift, dist):
    kw = {"std": cv * mean} if dist == "gaussian" else {"shift": shift * mean} if dist == "shifted_exponential" else {}
    assert K.expected_max(1, dist, mean, **kw) == pytest.approx(mean)
    e1, e2 = K.expected_max(Pn, dist, mean, **kw), K.expected_max(Pn + 1, dist, mean, **kw)
    assert e2 >= e1 - 1e-12 and e1 >= mean - 1e-12


# -- consistency: SSP, async, local SGD --------------------------------------------------------------------

@pytest.mark.parametrize("dist, kw", [("exponential", {}), ("gaussian", {"std": 0.3}),
                                      ("shifted_exponential", {"shift": 0.5})])
def test_ssp_limits_and_simulation(dist, kw):
    Pn = 16
    sync = K.sync_step_time(Pn, dist, 1.0, comm_s=0.05, **kw)
    assert K.ssp_step_time(Pn, 0, dist, 1.0, comm_s=0.05, **kw) == pytest.approx(sync)
    assert K.ssp_step_time(Pn, math.inf, dist, 1.0, comm_s=0.05, **kw) == pytest.approx(1.05)
    ts = [K.ssp_step_time(Pn, s, dist, 1.0, comm_s=0.05, **kw) for s in (0, 1, 2, 4, 8, 32, 256)]
    assert all(x >= y - 1e-9 for x, y in zip(ts, ts[1:])) and ts[-1] > 1.05
    # the simulated SSP lies between the async limit and the window bound; s = 0 is the synchronous step
    assert K.ssp_simulate(Pn, 0, dist, 1.0, comm_s=0.05, steps=3000, seed=3, **kw) == pytest.approx(sync, rel=0.02)
    for s in (1, 4):
        sim = K.ssp_simulate(Pn, s, dist, 1.0, comm_s=0.05, steps=3000, seed=3, **kw)
        assert 1.05 * 0.99 < sim <= K.ssp_step_time(Pn, s, dist, 1.0, comm_s=0.05, **kw) * 1.01
    assert K.ssp_simulate(Pn, math.inf, dist, 1.0, steps=20000, seed=3, **kw) == pytest.approx(1.0, rel=0.03)


def test_ssp_gaussian_closed_form():
    z = K.expected_max(8, "gaussian", 0, 1)
    assert K.ssp_step_time(8, 3, "gaussian", 1.0, std=0.2) == pytest.approx(1 + 0.2 * z / 2)


def test_async_and_staleness():
    assert K.async_throughput([1.0, 1.0, 0.5]) == 4.0
    assert K.async_throughput(1.0, P=16) == 16.0
    assert K.async_throughput(1.0, P=16, server_s=0.1) == 10.0
    assert K.mean_staleness(1) == 0.0 and K.mean_staleness(8) == 7.0
    assert sum(K.staleness_pmf(8, k) for k in range(400)) == pytest.approx(1.0)
    # simulate P asynchronous workers with exponential step times: staleness = writes by others between
    # a worker's read (start of its step) and its write (end)
    Pn, steps = 6, 4000
    rng = np.random.default_rng(11)
    ends = np.cumsum(rng.exponential(1.0, (steps, Pn)), axis=0)
    starts = ends - np.diff(np.vstack([np.zeros(Pn), ends]), axis=0)
    all_ends = np.sort(ends.ravel())
    stale = (np.searchsorted(all_ends, ends.ravel()) - np.searchsorted(all_ends, starts.ravel(), side="right"))
    assert stale.mean() == pytest.approx(Pn - 1, rel=0.03)
    assert (stale == 0).mean() == pytest.approx(K.staleness_pmf(Pn, 0), abs=0.01)


def test_local_sgd():
    assert K.local_sgd_step_time(8, 1, "exponential", 1.0, comm_s=0.2) == pytest.approx(
        K.sync_step_time(8, "exponential", 1.0, comm_s=0.2))
    assert K.local_sgd_step_time(8, 4, "deterministic", 1.0, comm_s=0.2) == pytest.approx(1.05)
    ts = [K.local_sgd_step_time(8, tau, "gaussian", 1.0, std=0.1, comm_s=0.2) for tau in (1, 2, 4, 8, 16)]
    assert all(x > y for x, y in zip(ts, ts[1:]))


# -- compression ---------------------------------------------------------------------------------------------

def test_compression_sizes_hand():
    m = 10**6
    assert C.compress("fp32", m).message_bytes == 4e6
    assert C.compress("fp16", m).message_bytes == 2e6 == C.compress("bf16", m).message_bytes
    assert C.compress("int8", m).message_bytes == m + 4 * math.ceil(m / 512)
    assert C.compress("1bit", m).message_bytes == m / 8 + 8 * math.ceil(m / 512)
    assert C.compress("terngrad", m, bucket_size=1024).message_bytes == m / 4 + 4 * math.ceil(m / 1024)
    assert C.compress("topk", m, ratio=0.01).message_bytes == 10**4 * 8
    assert C.compress("dgc", m, ratio=0.01, index_bytes=2).message_bytes == 10**4 * 6
    assert C.compress("topk", m, ratio=0.9).collective == "allreduce"  # denser than dense: send dense
    q = C.compress("qsgd", m, levels=127)
    assert q.message_bytes == pytest.approx(m + 4 * math.ceil(m / 512), rel=1e-3)  # 8 bits fixed-length
    assert C.compress("qsgd", m, levels=1).bits_per_element < 1.0  # s = 1: Elias coding of a sparse vector
    p = C.compress("powersgd", 512 * 256, shape=(512, 256), rank=4)
    assert p.messages == (4 * 4 * 512, 4 * 4 * 256) and p.collective == "two_allreduces"
    assert p.gemms_encode == ((512, 4, 256), (256, 4, 512)) and p.gemms_decode == ((512, 256, 4),)
    assert C.compress("powersgd", 64, shape=(8, 8), rank=4).message_bytes == 256  # r(a+b) >= ab: uncompressed


def test_powersgd_on_a_graph():
    gr = get_model("resnet50")
    mats, vec = C.weight_matrices(gr)
    assert sum(a_ * b_ for a_, b_ in mats) + vec == gr.params
    c = C.compress("powersgd", gr, rank=2)
    assert c.messages[0] + c.messages[1] < gr.params * 4 / 50  # ResNet-50 at rank 2: well over 50x
    gpt = get_model("gpt2")
    mats, vec = C.weight_matrices(gpt)
    assert (50257, 768) in mats and sum(a_ * b_ for a_, b_ in mats) + vec == gpt.params


def test_powersgd_of_a_tensor_rank_and_of_a_list_of_matrices():
    gpt = get_model("gpt2")
    whole, vec = C.weight_matrices(gpt)
    half, vec2 = C.weight_matrices(gpt, tensor=2)
    assert vec2 == vec and len(half) == len(whole)
    # per block: qkv (2304 x 768) and fc1 (3072 x 768) column-split, proj (768 x 768) and fc2 (768 x 3072) row-split
    assert (1152, 768) in half and (1536, 768) in half and (768, 384) in half and (768, 1536) in half
    assert sum(a * b for a, b in whole) - sum(a * b for a, b in half) == 12 * (2304 + 3072 + 768 + 3072) * 768 // 2
    c = C.compress("powersgd", 10 + 6 * 4 + 8 * 2, shape=[(6, 4), (8, 2)], rank=1, value_bytes=2)
    assert c.messages == (2 * (6 + 8 + 10), 2 * (4 + 2))  # P: r rows + the vectors; Q: r columns
    with pytest.raises(ValueError, match="^shape: the matrices hold 40 values, more than the gradient's 39"):
        C.compress("powersgd", 39, shape=[(6, 4), (8, 2)])


def test_powersgd_in_a_scenario():
    from concurrency_model import estimate
    sc = {"model": "bert-large", "cluster": "dgx1-v100",
          "parallel": {"data": 16, "tensor": 2, "pipeline": 2, "microbatch_size": 4, "global_batch": 1024},
          "training": {"dtype": "fp16", "compression": "powersgd"}}
    e = estimate(sc)  # it was refused with the API's "pass a graph or shape" message
    assert e.breakdown["data_parallel_comm_s"] > 0 and e.step_time_s > 0


def test_compressed_sync_time():
    m, Pn, al, be = 10**6, 8, 1e-6, 1e-9
    assert CS.compressed_sync_time("fp32", m, Pn, al, be) == pytest.approx(
        float(collective_time("allreduce", "ring", 4e6, Pn, al, be)))
    c = C.compress("topk", m)  # device=None: the codec in the symbols F and B_mem
    codec = sum(CS.codec_seconds(c, Pn))
    assert same(CS.compressed_sync_time(c, None, Pn, al, be) - codec,
                collective_time("allgather", "ring", Pn * c.messages[0], Pn, al, be))
    c = C.compress("1bit", m)
    comm = collective_time("alltoall", "pairwise", c.messages[0], Pn, al, be) + \
        collective_time("allgather", "ring", c.messages[0], Pn, al, be)
    assert same(CS.compressed_sync_time(c, None, Pn, al, be) - sum(CS.codec_seconds(c, Pn)), comm)
    enc, dec = CS.codec_seconds(c, Pn, "v100-sxm2-32gb")
    one = roofline(c.encode_flop, float(c.encode_bytes), "v100-sxm2-32gb", "fp32", c.kernels).time_s
    assert enc == pytest.approx((1 + 1 / Pn) * one)
    assert CS.compressed_sync_time(c, None, Pn, al, be, device="v100-sxm2-32gb") == pytest.approx(
        float(comm) + enc + dec)
    # fp16 over a slow link beats fp32 once the codec is paid
    assert CS.compressed_sync_time("fp16", 10**8, 64, 5e-6, 1e-10, device="v100-sxm2-32gb") < \
        CS.compressed_sync_time("fp32", 10**8, 64, 5e-6, 1e-10)
    e = CS.compressed_sync_time("fp16", n, P, a, b)
    assert {s.name for s in e.free_symbols} == {"n", "P", "alpha", "beta", "F", "B_mem"}


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 10**9), scheme=st.sampled_from([s for s in C.SCHEMES if s not in ("powersgd", "sfb")]),
       bucket=st.integers(1, 4096), levels=st.integers(1, 255), ratio=st.floats(1e-5, 1.0))
def test_compression_never_increases_bytes(m, scheme, bucket, levels, ratio):
    c = C.compress(scheme, m, bucket_size=bucket, levels=levels, ratio=ratio)
    assert c.message_bytes <= 4 * m and sum(float(x) for x in c.messages) <= 4 * m


@settings(max_examples=40, deadline=None)
@given(rows=st.integers(1, 5000), cols=st.integers(1, 5000), rank=st.integers(1, 64))
def test_powersgd_never_increases_bytes(rows, cols, rank):
    c = C.compress("powersgd", rows * cols, shape=(rows, cols), rank=rank)
    assert c.message_bytes <= 4 * rows * cols


# -- properties of the centralisation models ------------------------------------------------------------------

sizes = st.floats(0, 1e10)
rates = st.floats(0, 1e-3)


@settings(max_examples=60, deadline=None)
@given(nb=sizes, al=rates, be=rates, S=st.integers(1, 64), lat=st.sampled_from(D.LATENCY))
def test_one_worker_costs_nothing(nb, al, be, S, lat):
    assert D.ps_time(nb, 1, al, be, servers=S, latency=lat) == 0
    assert D.ps_hierarchical_time(nb, 1, 1, al, be, al, be, servers=S) == 0
    assert D.allreduce_time(nb, 1, al, be) == 0
    for topo in D.TOPOLOGIES:
        assert D.gossip_time(nb, 1, al, be, topo) == 0
    assert CS.compressed_sync_time("1bit", int(nb), 1, al, be, device="v100-sxm2-32gb") == 0


@settings(max_examples=80, deadline=None)
@given(nb=sizes, Pn=st.integers(1, 4096), al=rates, be=rates, S1=st.integers(1, 512), S2=st.integers(1, 512),
       lat=st.sampled_from(D.LATENCY))
def test_sharding_properties(nb, Pn, al, be, S1, S2, lat):
    assert D.ps_time(nb, Pn, al, be, servers=1, latency=lat) == D.ps_time(nb, Pn, al, be, latency=lat)
    lo, hi = sorted((S1, S2))
    if lat == "overlap" or hi <= Pn:  # serial latency: more servers than workers adds per-message alpha
        assert D.ps_time(nb, Pn, al, be, servers=hi, latency=lat) <= D.ps_time(nb, Pn, al, be, servers=lo,
                                                                               latency=lat) * (1 + 1e-12)


def test_symbolic_matches_numeric():
    S = sp.Symbol("S", integer=True, positive=True)
    vals = {n: 3e6, P: 12, a: 2e-6, b: 1e-9, S: 3, g: 1e-11}
    e = D.ps_time(n, P, a, b, servers=S, gamma=g)
    assert float(e.subs(vals)) == pytest.approx(D.ps_time(3e6, 12, 2e-6, 1e-9, servers=3, gamma=1e-11))
    e = D.ps_time(n, P, a, b, servers=S, latency="serial")
    assert float(e.subs(vals)) == pytest.approx(D.ps_time(3e6, 12, 2e-6, 1e-9, servers=3, latency="serial"))
    assert float(D.ps_time(n, P, a, b).subs({P: 1, n: 5, a: 1, b: 1})) == 0
    f = sp.lambdify([n, P, a, b], D.ps_time(n, P, a, b, servers=4), "numpy")
    assert np.allclose(f(np.array([1e6, 2e6]), 8, 1e-6, 1e-9),
                       [D.ps_time(x, 8, 1e-6, 1e-9, servers=4) for x in (1e6, 2e6)])


# -- bad input --------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("call, field", [
    (lambda: D.ps_time(1e6, 0, 1e-6, 1e-9), "P"),
    (lambda: D.ps_time(-1, 4, 1e-6, 1e-9), "n"),
    (lambda: D.ps_time(1e6, 4, 1e-6, 1e-9, servers=0), "servers"),
    (lambda: D.ps_time(1e6, 4, -1e-6, 1e-9), "alpha"),
    (lambda: D.ps_time(1e6, 4, 1e-6, 1e-9, latency="fast"), "latency"),
    (lambda: D.gossip_degree("torus", 8), "topology"),
    (lambda: D.gossip_round_time(1e6, -1, 1e-6, 1e-9), "degree"),
    (lambda: D.consensus_rounds(0.0), "gap"),
    (lambda: D.consensus_rounds(0.5, 2), "eps"),
    (lambda: D.ps_on_cluster(-5, 8, "dgx1-v100"), "n"),
    (lambda: D.ps_on_cluster(1e6, 8, "dgx1-v100", server_placement="moon"), "server_placement"),
    (lambda: D.compare_distribution("lenet5", "dgx1-v100", 0), "P"),
    (lambda: D.ps_on_cluster(1e6, 16, "dgx1-v100", server_nics=0), "server_nics"),
    (lambda: D.ps_on_cluster(1e6, 12, "dgx1-v100"), "ranks"),
    (lambda: D.compare_distribution("lenet5", "dgx1-v100", 2, compressions=("zip",)), "compressions"),
    (lambda: K.expected_max(0, "exponential"), "P"),
    (lambda: K.expected_max(4, "weibull"), "dist"),
    (lambda: K.expected_max(4, "gaussian", 1.0), "std"),
    (lambda: K.expected_max(4, "gaussian", -1.0, 1.0), "mean"),
    (lambda: K.expected_max(4, "shifted_exponential", 1.0, shift=2.0), "shift"),
    (lambda: K.expected_max(4, "gaussian", 1.0, 0.1, method="magic"), "method"),
    (lambda: K.expected_order_statistic(5, 4, "exponential"), "r"),
    (lambda: K.sync_step_time(4, "exponential", backup=4), "backup"),
    (lambda: K.ssp_step_time(4, -1, "exponential"), "staleness"),
    (lambda: K.local_sgd_step_time(4, 0, "exponential"), "tau"),
    (lambda: K.async_throughput([]), "mean_times"),
    (lambda: K.async_throughput(1.0), "P"),
    (lambda: C.compress("zip", 100), "scheme"),
    (lambda: C.compress("fp16", -100), "gradient"),
    (lambda: C.compress("topk", 100, ratio=0), "ratio"),
    (lambda: C.compress("qsgd", 100, levels=0), "levels"),
    (lambda: C.compress("int8", 100, bucket_size=0), "bucket_size"),
    (lambda: C.compress("int8", 100, collective="ring"), "collective"),
    (lambda: C.compress("powersgd", 100), "shape"),
    (lambda: C.compress("powersgd", 100, shape=(10, 10), rank=0), "rank"),
    (lambda: CS.compressed_sync_time("fp16", 100, 0, 1e-6, 1e-9), "P"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=rf"^{field}\b"):
        call()


def test_symbolic_degree_and_codec_match_numeric():
    for topo in D.TOPOLOGIES:
        for Pn in (1, 2, 3, 8, 16, 100):
            assert int(D.gossip_degree(topo, P).subs(P, Pn)) == D.gossip_degree(topo, Pn)
    e = CS.compressed_sync_time("qsgd", 10**6, P, a, b, device="v100-sxm2-32gb")
    for Pn in (1, 2, 8):
        want = CS.compressed_sync_time("qsgd", 10**6, Pn, 1e-6, 1e-9, device="v100-sxm2-32gb")
        assert float(e.subs({P: Pn, a: 1e-6, b: 1e-9})) == pytest.approx(want)
    assert C.compress("fp16", "lenet5").elements == get_model("lenet5").params
