"""Blackwell presets (devices, DGX and NVL72 clusters), the NVLink-domain tier of :mod:`concurrency_model.hardware.clusters`,
the block-scaled dtypes of :mod:`concurrency_model.units`, and their bad inputs."""
from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace

import pytest

from concurrency_model.hardware.clusters import check_domain, cluster_from_dict, load_cluster, place
from concurrency_model.hardware.devices import load_device
from concurrency_model.parallel.data_parallel import group_placement
from concurrency_model.parallel.triples import collective_triple
from concurrency_model.units import dtype_bytes, value_dtype

PF = 1e15


# -- device presets against their sources (per GPU, dense = the datasheet's sparse figure / 2) -------------------

def test_b200_from_the_hgx_table():
    d = load_device("b200-sxm-180gb")
    # HGX B200, 8 GPUs: FP8 72 PF, FP16/BF16 36 PF, TF32 18 PF with sparsity; FP4 72 PF dense; FP64 296 TF, FP32 600 TF
    assert d.peak("fp8") == 72 * PF / 8 / 2 == d.peak("mxfp8")
    assert d.peak("bf16") == 36 * PF / 8 / 2 == d.peak("fp16")
    assert d.peak("tf32") == 18 * PF / 8 / 2
    assert d.peak("nvfp4") == 72 * PF / 8
    assert d.peak("fp64") == 296e12 / 8 and d.peak("fp32") == 600e12 / 8
    # DGX B200: 1,440 GB and 64 TB/s for 8 GPUs; 1,000 W TGP (MLPerf system file)
    assert (d.mem_capacity, d.mem_bw, d.board_power_w, d.compute_capability) == (1440e9 / 8, 64e12 / 8, 1000, 10.0)
    assert all(d.sparse_flops[k] == 2 * d.peak_flops[k] for k in d.sparse_flops)


def test_blackwell_ultra_from_nvidia_blog_and_nvl72_pages():
    gb300 = load_device("gb300-288gb")
    assert gb300.peak("nvfp4") == 15 * PF  # "15 PetaFLOPS dense NVFP4"
    assert (gb300.multiprocessors, gb300.mem_capacity, gb300.mem_bw) == (160, 288e9, 8e12)
    gb200 = load_device("gb200-186gb")
    assert gb200.peak("fp8") == 720 * PF / 72 / 2  # GB200 NVL72: FP8 720 PF with sparsity over 72 GPUs
    assert gb200.mem_capacity == 186e9 and gb200.mem_bw == 576e12 / 72
    b300 = load_device("b300-sxm-270gb")
    assert b300.peak("fp64") == 10e12 / 8  # HGX B300: FP64 10 TF for 8 GPUs (Blackwell Ultra cut FP64)
    assert b300.peak("bf16") == load_device("b200-sxm-180gb").peak("bf16")


def test_hopper_has_no_block_scaled_math():
    h100 = load_device("h100-sxm5-80gb")
    with pytest.raises(ValueError, match=r"^dtype: h100-sxm5-80gb has no mxfp8 peak"):
        h100.peak("mxfp8")
    with pytest.raises(ValueError, match="dtype: .*no nvfp4 peak"):
        load_device("h200-sxm-141gb").peak("nvfp4")


def test_block_scaled_bytes_and_values():
    # OCP MX v1.0: 32 elements share one 8-bit scale; NVFP4: 16 E2M1 values share one E4M3 scale
    assert dtype_bytes("mxfp8") == (32 * 8 + 8) / 8 / 32
    assert dtype_bytes("nvfp4") == (16 * 4 + 8) / 8 / 16
    assert value_dtype("mxfp8") == value_dtype("nvfp4") == "bf16"


# -- the NVLink-domain tier ------------------------------------------------------------------------------------

def test_nvl72_tensor_and_expert_groups_beyond_a_tray_stay_on_nvlink():
    c = load_cluster("gb200-nvl72")
    assert (c.gpus_per_node, c.domain_gpus, c.domain_nics) == (4, 72, 72)
    t = e = 8
    tensor = place(c, t)  # 8 ranks: two trays, one domain
    assert (tensor.kind, tensor.nodes, tensor.intra_bw) == ("intra", 1, 900e9 * 0.822)
    rpn, sharing = group_placement(c.domain_gpus, t, e)  # expert groups beside the tensor groups (expert.py)
    assert (rpn, sharing) == (8, 8)  # the 8 x 8 = 64 GPUs of tensor x expert fit in the 72-GPU domain
    assert place(c, e, rpn, sharing).kind == "intra"
    lat, intra, inter = collective_triple("alltoall", 64e6, e, c, rpn, sharing)
    assert intra > 0 and inter == 0
    # the same layout on DGX B200 (the node is the domain): the expert group crosses the network
    b = load_cluster("dgx-b200")
    rpn_b, sharing_b = group_placement(b.domain_gpus, t, e)
    assert (rpn_b, sharing_b) == (1, 8) and place(b, e, rpn_b, sharing_b).kind == "inter"
    assert collective_triple("alltoall", 64e6, e, b, rpn_b, sharing_b)[2] > 0


def test_nvl72_data_parallel_across_domains_uses_the_network():
    c = load_cluster("gb200-nvl72")
    p = place(c, 144)  # two racks filled: two domains of 72
    assert (p.kind, p.nodes, p.ranks_per_node) == ("mixed", 2, 72)
    # 16 replicas of tensor 8 span 128 GPUs: each rank on its own NIC (one per GPU), at the NIC's rate
    rpn, sharing = group_placement(c.gpus_per_node, 8, 16)
    dp = place(c, 16, rpn, sharing)
    assert dp.kind == "inter" and dp.nic_share == 1.0 and dp.inter_bw == pytest.approx(50e9 * 0.9)


def test_the_domain_is_the_node_for_every_other_cluster():
    for name in ("dgx-a100", "dgx-h100", "dgx-h200", "grand-teton-h100", "dgx-b200", "dgx-b300"):
        c = load_cluster(name)
        assert c.nvlink_domain == 0 and c.domain_gpus == c.gpus_per_node
        p = place(c, 16)
        assert (p.kind, p.nodes, p.ranks_per_node, p.nic_share) == ("mixed", 2, 8, 1.0)
    # a cluster with the domain spelt out as the node places exactly as without it
    h = load_cluster("dgx-h100")
    assert place(replace(h, nvlink_domain=8), 32, 4, 2).to_dict() == place(h, 32, 4, 2).to_dict()


def test_nvl72_round_trips_through_its_dict():
    c = load_cluster("gb300-nvl72")
    again = cluster_from_dict(c.to_dict())
    assert again.domain_gpus == 72 and again.inter.bw == 100e9 and again.device.name == "gb300-288gb"


# -- bad input -------------------------------------------------------------------------------------------------

def test_domain_not_whole_trays_is_refused():
    with pytest.raises(ValueError, match=r"^nvlink_domain: 70 is not a multiple of gpus_per_node = 4"):
        check_domain("nvlink_domain", 70, 4)
    spec = load_cluster("gb200-nvl72").to_dict()
    spec["nvlink_domain"] = 70
    with pytest.raises(ValueError, match=r"^cluster\.nvlink_domain: 70 is not a multiple"):
        load_cluster(spec)
    with pytest.raises(ValueError, match=r"^nvlink_domain: 6 is not a multiple of gpus_per_node = 4"):
        replace(load_cluster("gb200-nvl72"), nvlink_domain=6)


def _cli_estimate(tmp_path, scenario: dict):
    path = tmp_path / "sc.json"
    path.write_text(json.dumps(scenario))
    return subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", str(path), "--json"],
                          capture_output=True, text=True, timeout=300)


SCENARIO = {"model": {"kind": "gpt", "layers": 2, "hidden": 512, "heads": 8, "seq_len": 256, "vocab": 1000},
            "parallel": {"data": 1, "tensor": 8, "pipeline": 1, "microbatch_size": 1, "global_batch": 8},
            "training": {"optimizer": "adam"}}


def test_cli_refuses_block_scaled_math_on_hopper(tmp_path):
    r = _cli_estimate(tmp_path, {**SCENARIO, "cluster": "dgx-h100",
                                 "training": {**SCENARIO["training"], "dtype": "nvfp4"}})
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.count("\n") == 1 and "training.dtype: h100-sxm5-80gb has no nvfp4 peak" in r.stderr


def test_cli_refuses_a_domain_of_part_trays(tmp_path):
    spec = load_cluster("gb200-nvl72").to_dict()
    spec["nvlink_domain"] = 18
    r = _cli_estimate(tmp_path, {**SCENARIO, "cluster": spec})
    assert r.returncode == 2 and r.stderr.count("\n") == 1
    assert "cluster.nvlink_domain: 18 is not a multiple of gpus_per_node = 4" in r.stderr


def test_mxfp8_estimate_runs_on_nvl72_tensor_16():
    from concurrency_model.training.estimate import estimate
    sc = {**SCENARIO, "cluster": "gb200-nvl72", "model": {**SCENARIO["model"], "heads": 16},
          "parallel": {**SCENARIO["parallel"], "tensor": 16},
          "training": {**SCENARIO["training"], "dtype": "mxfp8"}}
    e = estimate(sc)
    bf = estimate({**sc, "training": {**sc["training"], "dtype": "bf16"}})
    assert 0 < e.step_time_s and e.breakdown["tensor_parallel_comm_s"] > 0
    # 16 tensor ranks over 4 trays: on NVLink, so no slower than the same run in bf16 on the same links
    assert e.breakdown["tensor_parallel_comm_s"] == pytest.approx(bf.breakdown["tensor_parallel_comm_s"])
