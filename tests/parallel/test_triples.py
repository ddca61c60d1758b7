"""A collective's triple (latency, intra busy, inter busy) adds up to the time NCCL's call takes: a tree / Simple
call's chunk-pipeline fill (comm.nccl.tree_fill_s) is part of its fixed cost, not dropped."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.comm.on_cluster import nccl_on
from concurrency_model.hardware.clusters import load_cluster, place
from concurrency_model.parallel.triples import collective_triple


@settings(max_examples=30, deadline=None)
@given(nodes=st.sampled_from([2, 8, 64]), nbytes=st.floats(1e4, 1e9), op=st.sampled_from(["allreduce", "allgather"]))
def test_the_triple_adds_up_to_the_calls_wall_time(nodes, nbytes, op):
    cl = load_cluster("dgx-a100")
    ranks = 8 * nodes
    c = nccl_on(op, nbytes, place(cl, ranks))
    assert sum(collective_triple(op, nbytes, ranks, cl, 8)) == pytest.approx(c.time_s, rel=1e-12)


def test_a_tree_calls_fill_is_in_its_fixed_cost():
    # 2 x 8 A100, 1 GiB all-reduce: NCCL runs tree / Simple, whose first chunk crosses the chain before the
    # pipeline runs (tree_fill_s > 0); the triple's fixed part is the latency plus that fill
    cl = load_cluster("dgx-a100")
    c = nccl_on("allreduce", 2.0**30, place(cl, 16))
    lat, intra, inter = collective_triple("allreduce", 2.0**30, 16, cl, 8)
    assert c.name == "nccl:tree/Simple"
    assert lat > c.latency_s and lat == pytest.approx(c.time_s - 2.0**30 / c.bw_Bps, rel=1e-12)
