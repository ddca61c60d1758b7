"""Spatial split of a convolution chain with redundant computation (parallel.redundant, paper §6.2)."""
from __future__ import annotations

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.parallel.model_parallel import spatial_split
from concurrency_model.parallel.redundant import best_depth, redundant_spatial

SAME = [{"c_in": 64, "c_out": 64, "kh": 3, "pad": 1}] * 4
NET = {"device": "v100-sxm2-32gb", "dtype": "fp16", "alpha": 2e-5, "beta": 1 / 10e9}


def test_depth_one_is_the_per_layer_split():
    r = redundant_spatial(8, 56, 56, SAME, 4, 1, **NET)
    parts = [spatial_split(8, 64, 64, 56, 56, 3, 4, pad=1, needs_grad_input=i > 0, **NET) for i in range(4)]
    assert float(r.compute_s) == pytest.approx(sum(float(p.compute_s) for p in parts), rel=1e-12)
    assert float(r.comm_s) == pytest.approx(sum(float(p.comm_s) for p in parts), rel=1e-12)
    assert r.comm_bytes == sum(p.comm_bytes for p in parts)
    assert r.flop_sum == r.layer_flop  # no redundant work


def test_deep_halo_by_hand():
    # 4 "same" 3x3 layers in one group, 56 rows over 4 devices: an interior device owns 14 rows and, at layer
    # j, computes 14 + 2 (3 - j) of them (one more row a side for each later layer), so layer 0 reads 4 input
    # rows from each neighbour, received once: 4 x (8 x 64 x 56 x 2 bytes) = 229,376 bytes a side, the bytes of
    # the four per-layer exchanges in one message
    r = redundant_spatial(8, 56, 56, SAME, 4, 4, **NET)
    assert r.info["rows"] == [20, 18, 16, 14]
    halos = [c for c in r.comm if c.op == "p2p"]
    assert [c.bytes for c in halos] == [229_376, 229_376] and all(c.phase == "forward" for c in halos)
    layer = r.layer_flop["forward"] / 4
    assert r.flop["forward"] == layer * sp.Rational(20 + 18 + 16 + 14, 56)
    # over the 4 devices: the edge devices widen on one side only (rows 17, 16, 15, 14 each)
    assert r.flop_sum["forward"] == layer * sp.Rational(2 * (20 + 18 + 16 + 14) + 2 * (17 + 16 + 15 + 14), 56)


@settings(max_examples=25, deadline=None)
@given(P=st.integers(2, 8), depth=st.integers(1, 5), k=st.sampled_from([1, 3, 5]), h=st.integers(16, 64))
def test_work_and_forward_halo_volume(P, depth, k, h):
    layers = [{"c_in": 16, "c_out": 16, "kh": k, "pad": k // 2}] * 5
    r = redundant_spatial(2, h, 16, layers, P, depth, alpha=1e-6, beta=1e-9)
    one = redundant_spatial(2, h, 16, layers, P, 1, alpha=1e-6, beta=1e-9)
    for p in ("forward", "grad_input", "grad_weight"):
        assert r.flop_sum[p] >= r.layer_flop[p] == one.flop_sum[p]  # redundant work only adds
        assert r.flop[p] >= one.flop[p]
    fwd = lambda s: [c for c in s.comm if c.op == "p2p" and c.phase == "forward"]  # noqa: E731
    if P > 2:  # the rows a device receives over the chain do not depend on the grouping (same channels)
        assert sum(c.bytes for c in fwd(r)) == sum(c.bytes for c in fwd(one))
        assert len(fwd(r)) <= len(fwd(one))


def test_latency_decides_the_depth():
    layers = [{"c_in": 256, "c_out": 256, "kh": 3, "pad": 1}] * 8
    fast, _ = best_depth(32, 28, 28, layers, 4, device="v100-sxm2-32gb", dtype="fp16", alpha=5e-6, beta=1 / 150e9)
    slow, splits = best_depth(32, 28, 28, layers, 4, device="v100-sxm2-32gb", dtype="fp16", alpha=5e-5,
                              beta=1 / 10e9)
    assert fast == 1 and slow > 1  # NVLink-like: compute no more; a 50 us network: group the exchanges
    assert float(splits[slow].compute_s) > float(splits[1].compute_s)
    assert float(splits[slow].comm_s) < float(splits[1].comm_s)


@pytest.mark.parametrize("layers,P,depth,msg", [
    ([{"c_in": 8, "c_out": 8, "kh": 3, "pad": 1, "stride": 2}], 2, 1, r"^layers\[0\]\.stride"),
    ([{"c_in": 8, "c_out": 8, "kh": 3, "pad": 1}, {"c_in": 4, "c_out": 8, "kh": 3}], 2, 1, r"^layers\[1\]\.c_in"),
    ([{"c_in": 8, "c_out": 8, "kh": 3, "pad": 1, "groups": 2}], 2, 1, r"^layers\[0\]\.groups: unknown field"),
    (SAME, 2, 5, "^depth: 5 exceeds"),
    (SAME, 57, 1, "^P: 57 devices exceed"),
    ([], 2, 1, "^layers:"),
])
def test_bad_input_names_the_field(layers, P, depth, msg):
    with pytest.raises(ValueError, match=msg):
        redundant_spatial(2, 56, 56, layers, P, depth, alpha=1e-6, beta=1e-9)
