"""An oversubscribed network core (the inter tier's ``oversubscription``): bisection-bound algorithms slow
down across nodes, neighbour patterns do not (comm.on_cluster)."""
from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources

import pytest

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster, place, tier_from_dict
from concurrency_model.comm import collective_time
from concurrency_model.comm.on_cluster import CORE_BOUND, collective_on_cluster

A100 = load_cluster("dgx-a100")


def oversubscribed(r: float):
    return replace(A100, inter=replace(A100.inter, oversubscription=r))


def test_bisection_bound_algorithms_pay_the_ratio_across_nodes():
    n = 2**28
    p = place(A100, 16)  # 2 nodes x 8
    for op, alg in sorted(CORE_BOUND):
        t1 = collective_on_cluster(op, n, 16, A100, algorithm=alg)[1]
        t2 = collective_on_cluster(op, n, 16, oversubscribed(2.0), algorithm=alg)[1]
        # by hand: the flat algorithm on the slower tier, the inter tier's seconds per byte doubled
        alpha = max(p.intra[0], p.inter[0])
        expected = float(collective_time(op, alg, n, 16, alpha, max(p.intra[1], 2 * p.inter[1])))
        assert t2 == pytest.approx(expected, rel=1e-12) and t2 > 1.5 * t1, (op, alg)
    # one node: nothing crosses the core
    assert collective_on_cluster("alltoall", n, 8, oversubscribed(4.0), algorithm="pairwise")[1] == \
        collective_on_cluster("alltoall", n, 8, A100, algorithm="pairwise")[1]


def test_neighbour_patterns_keep_the_nic_rate():
    for op, alg in (("allreduce", "ring"), ("allreduce", "hierarchical"), ("allgather", "ring"),
                    ("allreduce", "tree"), ("p2p", "direct")):
        assert collective_on_cluster(op, 2**28, 16, oversubscribed(3.0), algorithm=alg)[1] == \
            collective_on_cluster(op, 2**28, 16, A100, algorithm=alg)[1], (op, alg)
    # so auto leaves the bisection-bound ones
    assert collective_on_cluster("allreduce", 2**20, 64, oversubscribed(8.0))[0] not in \
        {alg for op, alg in CORE_BOUND if op == "allreduce"}


def test_expert_all_to_all_across_nodes_slows_dense_allreduce_does_not():
    cfg = json.loads((resources.files("concurrency_model") / "presets/hf/mixtral-8x7b.json").read_text())
    cfg.update(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
               num_key_value_heads=4)  # a small Mixtral: 8 experts, top 2, 4 layers
    moe = {"model": {"hf_config": cfg, "seq_len": 1024},
           "parallel": {"data": 16, "tensor": 4, "expert": 4, "microbatch_size": 4, "global_batch": 64}}
    flat, over = (estimate({**moe, "cluster": c}) for c in (A100, oversubscribed(4.0)))
    assert over.breakdown["expert_parallel_comm_s"] > 2 * flat.breakdown["expert_parallel_comm_s"]
    dense = {"model": "gpt2", "parallel": {"data": 16, "global_batch": 16}}
    assert estimate({**dense, "cluster": oversubscribed(4.0)}).step_time_s == \
        estimate({**dense, "cluster": A100}).step_time_s  # the hierarchical ring all-reduce


def test_file_field_checks():
    base = A100.inter.to_dict()
    assert tier_from_dict({**base, "oversubscription": 2}).oversubscription == 2.0
    assert tier_from_dict({k: v for k, v in base.items() if k != "oversubscription"}).oversubscription == 1.0
    for bad in (0.5, True, "2"):
        with pytest.raises(ValueError, match=r"^tier.oversubscription: must be a number >= 1"):
            tier_from_dict({**base, "oversubscription": bad})
    e = estimate({"model": "gpt2", "cluster": {**_cluster_dict(), "inter": {**base, "oversubscription": 2.0}},
                  "parallel": {"data": 16, "global_batch": 16}, "training": {}})
    assert e.step_time_s > 0


def _cluster_dict():
    return json.loads((resources.files("concurrency_model") / "presets/clusters/dgx-a100.json").read_text())


def test_parameter_servers_and_gossip_through_the_bisection():
    from concurrency_model.parallel.distribution import gossip_on_cluster, ps_on_cluster
    v100 = load_cluster("dgx1-v100")

    def over(r):
        return replace(v100, inter=replace(v100.inter, oversubscription=r))
    # 8 server machines for 64 workers (8 nodes): every push and pull crosses the cut between workers and servers
    lat = v100.inter.latency
    one, two = (ps_on_cluster(1e8, 64, over(r), 8) for r in (1, 2))
    assert two - 2 * lat == pytest.approx(2 * (one - 2 * lat), rel=1e-9)
    # one server: its own NICs are the bottleneck (incast), not the core
    assert ps_on_cluster(1e8, 64, over(4), 1) == ps_on_cluster(1e8, 64, v100, 1)
    # a ring of neighbours crosses the cut twice; the exponential graph's long edges load it
    assert gossip_on_cluster(1e8, 64, over(4), "ring") == gossip_on_cluster(1e8, 64, v100, "ring")
    assert gossip_on_cluster(1e8, 64, over(4), "exponential") > 1.9 * gossip_on_cluster(1e8, 64, v100, "exponential")


from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402

from concurrency_model.comm.on_cluster import algorithms  # noqa: E402

PAIRS = [(op, alg) for op in ("allreduce", "allgather", "reduce_scatter", "alltoall", "broadcast", "reduce")
         for alg in algorithms(op)]


@settings(max_examples=60, deadline=None)
@given(pair=st.sampled_from(PAIRS), n=st.floats(1.0, 2**32), nodes=st.integers(1, 32),
       r1=st.floats(1.0, 8.0), extra=st.floats(0.0, 8.0))
def test_a_worse_core_never_speeds_a_collective_up(pair, n, nodes, r1, extra):
    op, alg = pair
    t1 = collective_on_cluster(op, n, 8 * nodes, oversubscribed(r1), algorithm=alg)[1]
    t2 = collective_on_cluster(op, n, 8 * nodes, oversubscribed(r1 + extra), algorithm=alg)[1]
    assert t2 >= t1 * (1 - 1e-12)
    if nodes == 1 or (pair not in CORE_BOUND and alg != "auto"):  # inside a node, or a neighbour pattern
        assert t2 == t1


def pods(r: float, pod_nodes: int):
    return replace(A100, inter=replace(A100.inter, oversubscription=r, pod_nodes=pod_nodes))


def test_pods_spare_groups_inside_them():
    n = 2**28
    flat = collective_on_cluster("alltoall", n, 64, oversubscribed(2.0), algorithm="pairwise")[1]
    full = collective_on_cluster("alltoall", n, 64, A100, algorithm="pairwise")[1]
    inside = collective_on_cluster("alltoall", n, 64, pods(2.0, 8), algorithm="pairwise")[1]  # 8 nodes, one pod
    assert inside == full < flat
    # 32 nodes in pods of 8: a node's peers are 31/32 ... 24 of 31 outside its pod, r x 24/31 = 1.548
    p = place(A100, 256)
    t = collective_on_cluster("alltoall", n, 256, pods(2.0, 8), algorithm="pairwise")[1]
    beta = max(p.intra[1], 2.0 * 24 / 31 * p.inter[1])
    assert t == pytest.approx(float(collective_time("alltoall", "pairwise", n, 256, max(p.intra[0], p.inter[0]),
                                                    beta)), rel=1e-12)
    # two pods: about half of a node's peers (16 of 31) are outside, at half the bandwidth: nearly full speed
    assert pods(2.0, 16).inter.core_factor(32) == pytest.approx(2 * 16 / 31)
    assert pods(4.0, 16).inter.core_factor(32) == pytest.approx(4 * 16 / 31)
    assert pods(1.5, 16).inter.core_factor(32) == 1.0  # never faster than the NICs


def test_pods_in_parameter_server_and_gossip_loads():
    from concurrency_model.parallel.distribution import gossip_on_cluster
    v100 = load_cluster("dgx1-v100")

    def over(r, pod_nodes=0):
        return replace(v100, inter=replace(v100.inter, oversubscription=r, pod_nodes=pod_nodes))

    flat = gossip_on_cluster(1e8, 64, over(4), "exponential")
    one_pod = gossip_on_cluster(1e8, 64, over(4, 8), "exponential")  # 8 nodes of 8 GPUs: one pod
    assert one_pod == gossip_on_cluster(1e8, 64, v100, "exponential") < flat
    assert gossip_on_cluster(1e8, 64, over(4, 2), "exponential") > one_pod  # four pods: uplinks busy


def test_pod_nodes_field_checks():
    base = {"name": "ib", "kind": "infiniband", "bw_Bps": 25e9, "latency_s": 5e-6}
    assert tier_from_dict({**base, "pod_nodes": 16}).pod_nodes == 16
    assert tier_from_dict(base).pod_nodes == 0
    for bad in (-1, 2.5, True, "8"):
        with pytest.raises(ValueError, match=r"pod_nodes: must be an integer >= 0"):
            tier_from_dict({**base, "pod_nodes": bad})
