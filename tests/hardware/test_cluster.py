"""Cluster presets, the loader and rank placement of :mod:`concurrency_model.hardware.clusters`."""
from __future__ import annotations

import copy
import dataclasses
import json
from importlib import resources

import pytest

from concurrency_model.hardware.clusters import (TIER_KINDS, Cluster, Placement, Tier, cluster_names, load_cluster,
                                       place)

PRESET_DIR = resources.files("concurrency_model") / "presets" / "clusters"
PRESET_FILES = sorted(p.name for p in PRESET_DIR.iterdir() if p.name.endswith(".json"))
CLUSTER_NUMERIC = ("device", "gpus_per_node", "nics_per_node")
TIER_NUMERIC = ("kind", "bw_Bps", "latency_s", "efficiency")


def _raw(name: str) -> dict:
    return json.loads((PRESET_DIR / f"{name}.json").read_text())


# -- presets ------------------------------------------------------------------------------------------

def test_expected_presets_exist():
    assert {"dgx1-v100", "dgx-a100", "dgx-h100", "gcp-a3-mega", "grand-teton-h100", "cpu-host"} <= set(cluster_names())


@pytest.mark.parametrize("filename", PRESET_FILES)
def test_preset_loads_by_name_and_path_and_dict(filename):
    stem = filename[:-5]
    c = load_cluster(stem)
    assert isinstance(c, Cluster) and c.name == stem
    with resources.as_file(PRESET_DIR / filename) as path:
        assert load_cluster(path) == c
        assert load_cluster(str(path)) == c
    assert load_cluster(_raw(stem)) == c
    assert load_cluster(c.to_dict()) == c  # round trip
    assert load_cluster(c) is c


@pytest.mark.parametrize("filename", PRESET_FILES)
def test_preset_sources_cover_every_field(filename):
    raw = _raw(filename[:-5])
    for k in CLUSTER_NUMERIC:
        assert raw["sources"].get(k), f"{filename}: no source for {k}"
    for tier in ("intra", "inter"):
        for k in TIER_NUMERIC:
            assert raw[tier]["sources"].get(k), f"{filename}: no source for {tier}.{k}"


@pytest.mark.parametrize("name, device, nics, intra, inter", [
    ("dgx1-v100", "v100-sxm2-32gb", 4, ("nvlink", 150e9, 0.8), ("infiniband", 12.5e9, 0.9)),
    ("dgx-a100", "a100-sxm4-80gb", 8, ("nvswitch", 300e9, 0.767), ("infiniband", 25e9, 0.9)),
    ("dgx-h100", "h100-sxm5-80gb", 8, ("nvswitch", 450e9, 0.822), ("infiniband", 50e9, 0.9)),
    ("gcp-a3-mega", "h100-sxm5-80gb", 8, ("nvswitch", 450e9, 0.822), ("ethernet", 25e9, 0.9)),
    ("grand-teton-h100", "h100-sxm-96gb-hbm2e", 8, ("nvswitch", 450e9, 0.822), ("roce", 50e9, 0.9)),
])
def test_dgx_values(name, device, nics, intra, inter):
    c = load_cluster(name)
    assert c.device.name == device
    assert (c.gpus_per_node, c.nodes, c.nics_per_node, c.total_gpus) == (8, 1, nics, 8)
    assert (c.intra.kind, c.intra.bw, c.intra.efficiency) == intra
    assert (c.inter.kind, c.inter.bw, c.inter.efficiency) == inter
    assert c.intra.latency == 2e-6 and c.inter.latency == 5e-6
    # latencies and NIC efficiency are not in hardware.md: their sources must say so
    for tier in (c.intra, c.inter):
        assert "estimate" in tier.sources["latency_s"]
    assert "estimate" in c.inter.sources["efficiency"]


def test_efficiencies_match_measured_plateaus():
    # hardware.md 3C: ~230 GB/s busbw on 8 x A100, ~370 GB/s ring busbw on 8 x H100
    assert load_cluster("dgx-a100").intra.effective_bw == pytest.approx(230e9, rel=1e-3)
    assert load_cluster("dgx-h100").intra.effective_bw == pytest.approx(370e9, rel=1e-3)


def test_loopback_preset_is_marked_placeholder():
    c = load_cluster("cpu-host")
    assert c.device.name == "cpu-host" and c.gpus_per_node == 4
    assert c.intra.kind == c.inter.kind == "loopback"
    for tier in (c.intra, c.inter):
        for k in ("bw_Bps", "latency_s"):
            assert "placeholder" in tier.sources[k] and "calibrate network" in tier.sources[k]


def test_alpha_beta():
    c = load_cluster("dgx-a100")
    assert c.alpha_beta("intra") == (2e-6, 1 / (300e9 * 0.767))
    assert c.alpha_beta("inter") == (5e-6, 1 / (25e9 * 0.9))
    assert c.alpha_beta(c.inter) == c.alpha_beta("inter")
    a, b = load_cluster("dgx1-v100").alpha_beta("intra")
    assert b == pytest.approx(1 / 120e9)  # 150 GB/s x 0.8
    a, b = load_cluster("dgx-h100").alpha_beta("inter")
    assert b == pytest.approx(1 / 45e9)  # 50 GB/s x 0.9
    with pytest.raises(ValueError, match="tier"):
        c.alpha_beta("between")


def test_with_nodes():
    c = load_cluster("dgx-h100")
    c4 = c.with_nodes(4)
    assert (c4.nodes, c4.total_gpus, c.nodes) == (4, 32, 1)
    assert c4.intra == c.intra and c4.device == c.device
    with pytest.raises(dataclasses.FrozenInstanceError):
        c.nodes = 2  # type: ignore[misc]
    for bad in (0, -1, 2.5, True):
        with pytest.raises(ValueError, match="nodes"):
            c.with_nodes(bad)


def test_hashable():
    assert len({load_cluster("dgx-a100"), load_cluster("dgx-a100"), load_cluster("dgx-h100")}) == 2


# -- loader errors ------------------------------------------------------------------------------------

def _mutated(path: tuple, value=None, delete=False) -> dict:
    d = copy.deepcopy(_raw("dgx-a100"))
    target = d
    for key in path[:-1]:
        target = target[key]
    if delete:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return d


@pytest.mark.parametrize("path, value, delete, field", [
    (("gpus_per_node",), None, True, "gpus_per_node"),
    (("intra",), None, True, "intra"),
    (("inter", "bw_Bps"), None, True, "inter.bw_Bps"),
    (("gpus_per_node",), -8, False, "gpus_per_node"),
    (("nics_per_node",), 0, False, "nics_per_node"),
    (("nodes",), 1.5, False, "nodes"),
    (("intra", "bw_Bps"), -1.0, False, "intra.bw_Bps"),
    (("inter", "latency_s"), -1e-6, False, "inter.latency_s"),
    (("intra", "efficiency"), 1.2, False, "intra.efficiency"),
    (("intra", "efficiency"), 0, False, "intra.efficiency"),
    (("intra", "bw_Bps"), "fast", False, "intra.bw_Bps"),
    (("colour",), "green", False, "colour"),
    (("inter", "speed"), 1, False, "inter.speed"),
    (("intra", "kind"), "carrier-pigeon", False, "intra.kind"),
    (("device",), "no-such-gpu", False, "device"),
    (("device",), 42, False, "device"),
])
def test_errors_name_the_field(path, value, delete, field):
    with pytest.raises(ValueError, match=f"cluster.{field}"):
        load_cluster(_mutated(path, value, delete))


def test_unknown_kind_lists_allowed():
    with pytest.raises(ValueError) as e:
        load_cluster(_mutated(("inter", "kind"), "smoke-signals"))
    assert all(k in str(e.value) for k in TIER_KINDS)


def test_unknown_preset_and_bad_file(tmp_path):
    with pytest.raises(ValueError, match="unknown preset"):
        load_cluster("dgx-9000")
    with pytest.raises(ValueError, match="no such file"):
        load_cluster(str(tmp_path / "missing.json"))
    bad = tmp_path / "bad.json"
    bad.write_text("{not json")
    with pytest.raises(ValueError, match="not valid JSON"):
        load_cluster(bad)
    with pytest.raises(ValueError, match="cluster"):
        load_cluster(3)


def test_dict_input_scenario_style():
    d = {"name": "my-pod", "device": "h100-sxm5-80gb", "gpus_per_node": 4, "nodes": 16, "nics_per_node": 2,
         "intra": {"name": "nvl", "kind": "nvlink", "bw_Bps": 450e9, "latency_s": 1e-6},
         "inter": {"name": "roce", "kind": "roce", "bw_Bps": 50e9, "latency_s": 8e-6, "efficiency": 0.85}}
    c = load_cluster(d)
    assert (c.name, c.total_gpus, c.intra.efficiency, c.inter.kind) == ("my-pod", 64, 1.0, "roce")
    assert c.alpha_beta("inter") == (8e-6, 1 / (50e9 * 0.85))
    # a device object (as calibrate writes) works too
    d["device"] = load_cluster("cpu-host").device.to_dict()
    assert load_cluster(d).device.name == "cpu-host"


def test_tier_checks_on_construction():
    with pytest.raises(ValueError, match="kind"):
        Tier("x", "wifi", 1e9, 1e-6)
    with pytest.raises(ValueError, match="efficiency"):
        Tier("x", "pcie", 1e9, 1e-6, efficiency=2)


# -- placement ----------------------------------------------------------------------------------------

def test_place_8_on_dgx_a100_is_intra():
    p = place("dgx-a100", 8)
    assert isinstance(p, Placement)
    assert (p.kind, p.nodes, p.ranks_per_node) == ("intra", 1, 8)
    assert p.intra == (2e-6, 1 / (300e9 * 0.767))
    assert place("dgx-a100", 3).kind == "intra"
    assert place("dgx-a100", 1).kind == "intra"


def test_place_16_with_8_per_node_is_mixed():
    p = place("dgx-a100", 16, ranks_per_node=8)
    assert (p.kind, p.nodes, p.ranks_per_node) == ("mixed", 2, 8)
    assert p == place("dgx-a100", 16)  # ranks fill nodes by default
    # 8 NICs / 8 ranks = 1 HDR NIC per rank: 25 GB/s x 0.9
    assert p.nic_share == 1.0
    assert p.inter == (5e-6, 1 / (25e9 * 0.9))
    assert p.inter_bw == pytest.approx(22.5e9)


def test_place_4_with_1_per_node_is_inter():
    p = place("dgx-a100", 4, ranks_per_node=1)
    assert (p.kind, p.nodes, p.ranks_per_node) == ("inter", 4, 1)
    # 8 NICs for one rank, capped at one NIC per rank (the GPU's PCIe x16 link)
    assert p.nic_share == 1.0 and p.inter_bw == pytest.approx(22.5e9)


def test_per_rank_nic_shares_hand_derived():
    # DGX-1: 4 EDR NICs (12.5 GB/s, eff 0.9 -> 11.25 GB/s each)
    assert place("dgx1-v100", 16, ranks_per_node=8).inter_bw == pytest.approx(11.25e9 * 4 / 8)
    assert place("dgx1-v100", 16, ranks_per_node=4).inter_bw == pytest.approx(11.25e9)
    assert place("dgx1-v100", 8, ranks_per_node=2).nic_share == 1.0  # 4/2 = 2, capped at 1
    # DGX H100: 8 NDR NICs, 50 GB/s x 0.9 = 45 GB/s
    assert place("dgx-h100", 32).inter_bw == pytest.approx(45e9)
    # tensor-parallel 8 within nodes, data-parallel across: 8 DP groups of 1 rank per node share 8 NICs
    p = place("dgx-h100", 4, ranks_per_node=1, groups_sharing=8)
    assert p.nic_share == 1.0 and p.inter_bw == pytest.approx(45e9)
    p = place("dgx1-v100", 4, ranks_per_node=1, groups_sharing=8)
    assert p.nic_share == 0.5 and p.inter_bw == pytest.approx(5.625e9)


def test_groups_sharing_halves_the_share():
    one = place("dgx1-v100", 16, ranks_per_node=4)
    two = place("dgx1-v100", 16, ranks_per_node=4, groups_sharing=2)
    assert two.inter_bw == pytest.approx(one.inter_bw / 2)
    assert two.inter[1] == pytest.approx(2 * one.inter[1])
    assert two.intra == one.intra  # per-GPU NVLink is not divided among groups on other GPUs


def test_nodes_grow_unless_cluster_sets_them():
    assert place("dgx-a100", 64).nodes == 8  # nodes = 1 means as many as needed
    c = load_cluster("dgx-a100").with_nodes(4)
    assert place(c, 32).nodes == 4
    with pytest.raises(ValueError, match="ranks"):
        place(c, 40)


@pytest.mark.parametrize("kwargs, field", [
    ({"ranks": 16, "ranks_per_node": 16}, "ranks_per_node"),
    ({"ranks": 12, "ranks_per_node": 8}, "ranks"),
    ({"ranks": 10}, "ranks"),
    ({"ranks": 0}, "ranks"),
    ({"ranks": 4, "ranks_per_node": 8}, "ranks_per_node"),
    ({"ranks": 8, "ranks_per_node": 0}, "ranks_per_node"),
    ({"ranks": 16, "ranks_per_node": 8, "groups_sharing": 2}, "groups_sharing"),
    ({"ranks": 16, "groups_sharing": 0}, "groups_sharing"),
])
def test_place_errors_name_the_field(kwargs, field):
    with pytest.raises(ValueError, match=f"^{field}:"):
        place("dgx-a100", **kwargs)


def test_placement_to_dict_and_frozen():
    p = place("dgx-h100", 16)
    d = p.to_dict()
    assert d["cluster"] == "dgx-h100" and d["kind"] == "mixed" and d["inter_bw_Bps"] == p.inter_bw
    json.dumps(d)
    with pytest.raises(dataclasses.FrozenInstanceError):
        p.nodes = 3  # type: ignore[misc]


def test_oci_bm_gpu4_8_preset_is_its_topology_file():
    # oracle-quickstart/oci-hpc-oke manifests/topology/BM.GPU4.8.xml: 8 A100 (sm 80), 16 RDMA ports of
    # 100000 Mb/s, AMD hosts; NVSwitch board as dgx-a100
    c = load_cluster("oci-bm-gpu4-8")
    assert (c.device.name, c.gpus_per_node, c.nics_per_node, c.host_cpu) == ("a100-sxm4-40gb", 8, 16, "amd")
    assert (c.inter.kind, c.inter.bw, c.intra.bw) == ("roce", 12.5e9, load_cluster("dgx-a100").intra.bw)
    assert c.nics_per_node * c.inter.bw == load_cluster("dgx-a100").nics_per_node * load_cluster("dgx-a100").inter.bw
