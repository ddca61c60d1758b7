"""Expert parallelism as a degree of estimate (parallel.expert): all-to-all dispatch and combine per MoE layer,
the experts' state divided, their gradients reduced over data / expert replicas."""
from __future__ import annotations

import copy
import json
import subprocess
import sys
from math import comb
from pathlib import Path

import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel.expert import dedup_bytes, dedup_nvlink_rates, overlap_exposed
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.parallel.triples import collective_triple
from concurrency_model.ops.routing import targets_reached
from concurrency_model.sweep import sweep

CFG = json.loads((Path(__file__).parents[2] / "concurrency_model/presets/hf/mixtral-8x7b.json").read_text())
CFG.update(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
           num_key_value_heads=4)  # a small Mixtral: 8 experts, top 2, 4 layers
EXPERT_PARAMS = 4 * 8 * 3 * 1024 * 2816  # layers x experts x (w1, w2, w3) x hidden x ffn
BASE = {"model": {"hf_config": CFG, "seq_len": 1024}, "cluster": "dgx-a100",
        "parallel": {"data": 2, "microbatch_size": 4, "global_batch": 8}, "training": {}}


def run(**parallel):
    sc = copy.deepcopy(BASE)
    sc["parallel"].update(parallel)
    return estimate(sc)


def test_two_experts_groups_inside_a_node():
    one, two = run(), run(expert=2)
    assert one.breakdown["expert_parallel_comm_s"] == 0.0
    # per MoE layer: dispatch and combine forward, their gradients backward, each a pairwise all-to-all of
    # n = b s top_k h bf16 bytes per GPU between 2 GPUs on NVLink: alpha + (n / 2) beta
    intra = load_cluster("dgx-a100").intra
    n = 4 * 1024 * 2 * 1024 * 2
    a2a = intra.latency + n / 2 / (intra.bw * intra.efficiency)
    assert two.breakdown["expert_parallel_comm_s"] == pytest.approx(4 * 4 * a2a, rel=1e-9)  # 1 microbatch
    # the experts' work per device does not change; their state halves: 16 bytes per parameter (bf16 Adam)
    assert two.breakdown["forward_s"] == one.breakdown["forward_s"]
    assert one.memory["model_state_bytes"] - two.memory["model_state_bytes"] == pytest.approx(
        16 * EXPERT_PARAMS / 2, rel=1e-12)
    # data 2 = expert 2: each expert lives on one replica, only the dense gradients are all-reduced
    assert two.breakdown["data_parallel_comm_s"] < 0.3 * one.breakdown["data_parallel_comm_s"]
    # the step saves at most that all-reduce and the compute its overlap slowed (the tier's overlap_slowdown)
    saved = one.breakdown["data_parallel_comm_s"] + one.breakdown["overlap_interference_s"]
    assert two.step_time_s > one.step_time_s - saved


def test_distributed_optimizer_shards_expert_state_over_the_expert_data_ranks():
    # ZeRO 1 (Megatron-Core's distributed optimizer): the dense parameters' 12 bytes of Adam state are split over
    # d = 2 ranks, the experts' over d / e = 1 rank (each expert lives on one replica). Per device, from ZeRO 0 at
    # e = 2: 12 (dense + experts / 2) - [12 dense / 2 + 12 (experts / 2) / 1] = 6 dense bytes saved
    z1 = copy.deepcopy(BASE)
    z1["parallel"]["expert"] = 2
    z1["training"]["zero_stage"] = 1
    one, zero0, zero1 = run(), run(expert=2), estimate(z1)
    dense = one.memory["model_state_bytes"] / 16 - EXPERT_PARAMS  # bf16 Adam: 16 bytes a parameter
    assert zero0.memory["model_state_bytes"] - zero1.memory["model_state_bytes"] == pytest.approx(6 * dense, rel=1e-9)
    # so the optimizer state is the whole model's 12 bytes over d, whatever e: as ZeRO 1 without experts
    z1e1 = copy.deepcopy(z1)
    z1e1["parallel"]["expert"] = 1
    assert zero1.memory["optimizer_bytes"] == pytest.approx(estimate(z1e1).memory["optimizer_bytes"], rel=1e-9)
    assert zero1.memory["optimizer_bytes"] == pytest.approx(12 * (dense + EXPERT_PARAMS) / 2, rel=1e-9)


def test_expert_groups_across_nodes_pay_the_network():
    sc = {"data": 16, "tensor": 4, "global_batch": 64}
    inside, across = run(**sc, expert=2), run(**sc, expert=4)  # 2 replicas of 4 GPUs per 8-GPU node
    per_a2a = [e.breakdown["expert_parallel_comm_s"] for e in (inside, across)]
    assert per_a2a[1] > 3 * per_a2a[0]


def test_the_step_expression_agrees():
    sc = copy.deepcopy(BASE)
    sc["parallel"]["expert"] = 2
    T, at = step_expression(sc)
    assert float(T.subs(at)) == pytest.approx(estimate(sc).step_time_s, rel=1e-12)


@pytest.mark.parametrize("parallel, training, message", [
    ({"expert": 3}, {}, r"^parallel.expert: 3 does not divide the 8 experts"),
    ({"expert": 4}, {}, r"^parallel.expert: 4 does not divide parallel.data = 2"),
    ({"expert": 2}, {"zero_stage": 2}, r"^parallel.expert: expert parallelism is modelled with ZeRO 0 or 1"),
    ({"expert": 0}, {}, r"^parallel.expert: must be a positive integer"),
])
def test_bad_input_names_the_field(parallel, training, message):
    sc = copy.deepcopy(BASE)
    sc["parallel"].update(parallel)
    sc["training"].update(training)
    with pytest.raises(ValueError, match=message):
        estimate(sc)


def test_a_dense_model_has_no_experts_to_split():
    with pytest.raises(ValueError, match=r"^parallel.expert: 2 needs a model with mixture-of-experts layers"):
        estimate({"model": "gpt2", "parallel": {"data": 2, "expert": 2, "global_batch": 2}})


def test_sweep_searches_it_and_agrees_with_estimate():
    r = sweep({**BASE, "parallel": {"global_batch": 64}}, [8, 16])
    lay = r.layouts
    assert set(lay["expert"]) == {1, 2, 4, 8} and (lay["data"] % lay["expert"] == 0).all()
    # ZeRO 0 or 1 (Megatron-Core's distributed optimizer) with experts, as estimate models them
    assert set(lay.loc[lay["expert"] > 1, "zero_stage"]) == {0, 1}
    assert r.rejected["expert: modelled with ZeRO 0 or 1"] > 0
    flat = r.frame
    for e in (2, 8):
        for zero in (0, 1):
            row = flat[(flat["expert"] == e) & (flat["zero_stage"] == zero)].sort_values("step_time_s").iloc[0]
            got = estimate(r.scenario(row))
            assert got.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
            # ZeRO 1's experts' optimizer state over d / e ranks (.parallel.expert): the same bytes in both
            assert got.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)
            assert got.memory["optimizer_bytes"] == pytest.approx(row["optimizer_bytes"], rel=1e-9)
    dense = sweep({"model": "gpt2", "parallel": {"global_batch": 16}}, 4)
    assert set(dense.layouts["expert"]) == {1}  # no experts to split


def test_capacity_factor_pads_the_expert_buffers():
    # fixed-capacity buffers (GShard §2.2, Switch Eq. 3): each expert runs capacity_factor x its balanced
    # share of rows, so the experts' GEMM work and the all-to-all volume scale by it; None is dropless
    from concurrency_model import get_model
    spec = {"hf_config": CFG, "seq_len": 1024}
    g1, g125, g05 = (get_model({**spec, "capacity_factor": c}) for c in (1.0, 1.25, 0.5))
    dropless = get_model(spec)
    expert_flop = [sum(float(n.cost.forward.flop) for n in g.layers() if "experts" in n.attrs)
                   for g in (g1, g125, g05)]
    # per layer: 3 expert GEMMs of (s top_k c) x hidden x ffn, 2 FLOP each multiply-add, bias-free
    assert expert_flop[0] == 4 * 3 * 2 * (1024 * 2) * 1024 * 2816
    assert expert_flop[1] == pytest.approx(1.25 * expert_flop[0], rel=1e-12)
    assert expert_flop[2] == pytest.approx(0.5 * expert_flop[0], rel=1e-12)
    assert float(dropless.forward().flop) == float(g1.forward().flop) and g125.params == g1.params
    sc = copy.deepcopy(BASE)
    sc["parallel"]["expert"] = 2
    sc["model"]["capacity_factor"] = 1.25
    padded = estimate(sc)
    intra = load_cluster("dgx-a100").intra
    n = 4 * 1024 * 2 * 1.25 * 1024 * 2  # b s top_k c h bf16 bytes
    assert padded.breakdown["expert_parallel_comm_s"] == pytest.approx(
        4 * 4 * (intra.latency + n / 2 / (intra.bw * intra.efficiency)), rel=1e-9)
    assert padded.step_time_s > run(expert=2).step_time_s


@pytest.mark.parametrize("model, message", [
    ({"hf_config": CFG, "capacity_factor": 0}, "capacity_factor: must be a positive number"),
    ({"hf_config": CFG, "capacity_factor": "1.25"}, "capacity_factor: must be a positive number"),
    ({"hf_config": "llama-2-7b", "capacity_factor": 1.25}, "capacity_factor: a llama model has no mixture"),
])
def test_bad_capacity_factor(model, message):
    from concurrency_model import get_model
    with pytest.raises(ValueError, match=message):
        get_model({**model, "seq_len": 64})


def test_expert_layers_read_the_experts_a_batch_reaches():
    """A decode step of a top-2 mixture reads two experts' weights at batch 1 and all of them at batch 16
    (timing.graph.expert_gemms); weight-only quantization and memory count every expert."""
    import json
    from importlib import resources

    from concurrency_model.serving.decoder import predict
    from concurrency_model.timing.graph import expert_gemms

    assert expert_gemms({"experts": 8, "top_k": 2}, 2) == (2, 1)          # one token, two experts
    assert expert_gemms({"experts": 8, "top_k": 2}, 32) == (8, 4)         # 16 tokens: 8 (1 - 0.75^16) = 7.92
    assert expert_gemms({"experts": 8, "top_k": 2, "fixed_capacity": True}, 2) == (8, 1)
    assert expert_gemms({"experts": 8, "top_k": 2}, 4096, expert=4) == (2, 2048)  # a device holds 2 experts
    assert expert_gemms({}, 100) == (1, 100)
    cfg = json.loads((resources.files("concurrency_model") / "presets/hf/mixtral-8x7b.json").read_text())
    one, sixteen = (predict({"hf_config": cfg}, "dgx-h100", b, 512, 64, "bf16", tensor=2) for b in (1, 16))
    # 32 layers x 8 experts x 3 x 4096 x 14336 bf16 weights = 90.2 GB, 45.1 GB per GPU at tensor 2: a step reading
    # all of them takes at least 45.1 GB / (3.35 TB/s x 0.8) = 16.8 ms; at batch 1 a quarter of that
    experts_per_gpu = 32 * 8 * 3 * 4096 * 14336 * 2 / 2
    assert sixteen.decode_s_per_token > experts_per_gpu / (3.35e12 * 0.8)
    assert one.decode_s_per_token < 0.5 * sixteen.decode_s_per_token
    q = predict({"hf_config": cfg}, "dgx-h100", 1, 512, 64, "bf16", tensor=2, weight_dtype="int8")
    saved = one.memory["model_state_bytes"] - q.memory["model_state_bytes"]
    # every expert's (and attention's) matrices at 1 byte instead of 2: at least the experts' half
    assert saved >= experts_per_gpu / 2


def test_every_expert_matrix_is_a_matrix_for_compression():
    """PowerSGD reshapes and sufficient factors count one c_out x c_in matrix per expert, not one per layer."""
    import json
    from importlib import resources

    from concurrency_model import get_model
    from concurrency_model.parallel.compression import weight_matrices
    from concurrency_model.parallel.sparse_comm import sufficient_factors

    cfg = json.loads((resources.files("concurrency_model") / "presets/hf/mixtral-8x7b.json").read_text())
    cfg.update(num_hidden_layers=1, hidden_size=256, intermediate_size=512, num_attention_heads=4,
               num_key_value_heads=4, vocab_size=1000)
    g = get_model({"hf_config": cfg, "seq_len": 16}, batch=1)
    mats, vec = weight_matrices(g)
    assert mats.count((512, 256)) == 16 and mats.count((256, 512)) == 8  # w1 and w3, w2 of 8 experts
    assert sum(a * b for a, b in mats) + vec == g.params and vec == 2 * 256 + 256  # two norms and the final one
    _, _, rest = sufficient_factors(g, workers=2)
    # every fully connected matrix goes as factors, the experts' included; left dense: the embedding (256,000), the
    # router (8 x 256: its factors would be larger) and the norms
    assert rest == 1000 * 256 + 8 * 256 + 768


# ---- dispatchers (parallel.moe_dispatcher) and the EP all-to-all overlap (parallel.expert_overlap) ----
CFG16 = {**CFG, "num_local_experts": 16, "num_experts_per_tok": 4}  # 16 experts, top 4: one expert a rank at EP 16
BASE16 = {"model": {"hf_config": CFG16, "seq_len": 1024}, "cluster": "dgx-a100",
          "parallel": {"data": 16, "expert": 16, "microbatch_size": 4, "global_batch": 64}, "training": {}}


def run16(**parallel):
    sc = copy.deepcopy(BASE16)
    sc["parallel"].update(parallel)
    return estimate(sc)


def test_hybridep_all_to_all_by_hand_two_nodes_of_eight():
    # EP 16 over 2 DGX-A100 nodes (8 GPUs each), 16 experts one a rank, top 4, n = b s = 4 x 1,024 tokens of
    # h = 1,024 bf16 values (2,048 bytes) a device. A token reaches another node unless all 4 of its experts are
    # on its own: 1 - C(8, 4) / C(16, 4) = 1 - 70 / 1,820 = 25 / 26 copies over the network; it reaches its
    # 4 ranks (one expert each), of which 1 / 8 on average is the receiving rank itself: 4 x 7 / 8 = 3.5 NVLink
    # copies. NIC: 25 GB/s x 0.9 (one NIC a GPU); NVLink: 300 GB/s x 0.767; both tiers at once, the time the slower
    c = load_cluster("dgx-a100")
    token = 1024 * 2
    net = 4 * 1024 * token * 25 / 26 / (c.inter.bw * c.inter.efficiency)
    nvl = 4 * 1024 * token * 3.5 / (c.intra.bw * c.intra.efficiency)
    assert net == pytest.approx(4096 * 2048 * 25 / 26 / 22.5e9) and net > nvl  # 350 us
    lat = collective_triple("alltoall", 4 * 1024 * 4 * token, 16, c, 8, 1)[0]  # the NCCL all-to-all's latency
    hyb, a2a = run16(moe_dispatcher="hybridep"), run16()
    # 4 MoE layers x (dispatch + combine forward, their gradients backward), 1 microbatch
    assert hyb.breakdown["expert_parallel_comm_s"] == pytest.approx(4 * 4 * (lat + net), rel=1e-9)
    assert run16(moe_dispatcher="deepep").breakdown["expert_parallel_comm_s"] == pytest.approx(
        hyb.breakdown["expert_parallel_comm_s"], rel=1e-12)  # the same scheme
    # alltoall sends all 4 copies, an equal share to each of the 16 ranks: 8 / 16 of them to the other node's 8
    # ranks over the network (2 copies, 2 / (25 / 26) = 2.08x HybridEP's), 7 / 16 over NVLink, the two at once
    net_a2a = 4 * 1024 * token * 4 * 8 / 16 / (c.inter.bw * c.inter.efficiency)
    assert net_a2a / net == pytest.approx(2 * 26 / 25)
    assert 4 * 1024 * token * 4 * 7 / 16 / (c.intra.bw * c.intra.efficiency) < net_a2a
    assert a2a.breakdown["expert_parallel_comm_s"] == pytest.approx(4 * 4 * (lat + net_a2a), rel=1e-9)
    assert hyb.breakdown["forward_s"] == a2a.breakdown["forward_s"]  # the experts' work is the same


def test_dedup_inside_one_node_counts_ranks_not_copies():
    # EP 8 in one node, 2 experts a rank, top 4: a token reaches 8 (1 - C(14, 4) / C(16, 4)) = 8 (1 - 1,001 /
    # 1,820) = 3.6 ranks, not 4 copies (two of its experts on one rank share one), 7 / 8 of them off the device
    nv, net = dedup_bytes(1.0, 1.0, 16, 4, 8, 8)
    assert net == 0.0
    assert nv == pytest.approx(8 * (1 - comb(14, 4) / comb(16, 4)) * 7 / 8, rel=1e-12)
    assert nv < 4 * 7 / 8  # fewer than the alltoall's 4 copies, 7 / 8 of them off the device


def test_hybridep_on_nvlink5_runs_at_its_measured_algorithm_bandwidth():
    # The HybridEP README's own case (deepseek-ai/DeepEP @ 17cfb81 docs/README_Hybrid-EP.md, GB200 8 ranks, 32 SMs):
    # 4,096 tokens of hidden 7,168 in BF16, top 8 of 64 experts over 8 ranks. Its bandwidth is the bytes a rank
    # receives, its own tokens included: 4,096 x 14,336 x R, R = 8 (1 - C(56, 8) / C(64, 8)) ranks a token reaches;
    # at 545.71 GB/s that is the dispatch's time, at 568.94 the combine's
    c = load_cluster("dgx-b200")
    nv, net = dedup_bytes(4096, 7168 * 2, 64, 8, 8, 8)
    reached = 8 * (1 - comb(56, 8) / comb(64, 8))
    rate_d, rate_c = dedup_nvlink_rates("hybridep", c.intra.name, 8, c.intra.bw * c.intra.efficiency)
    assert net == 0.0
    assert nv / rate_d == pytest.approx(4096 * 14336 * reached / 545.71e9, rel=1e-12)  # 603 us
    assert nv / rate_c == pytest.approx(4096 * 14336 * reached / 568.94e9, rel=1e-12)
    # between its rows the rate is linear in the ranks: 20 ranks, halfway between 16 (523.48) and 24 (507.32)
    assert dedup_nvlink_rates("hybridep", c.intra.name, 20, 1e15)[0] == pytest.approx(515.40e9 * 19 / 20)


@given(st.sampled_from(["hybridep", "deepep", "alltoall"]), st.sampled_from(["nvlink5-nvswitch", "nvlink4-nvswitch"]),
       st.integers(1, 72), st.floats(1e9, 2e12))
def test_a_measured_dispatch_rate_is_never_above_the_tier(dispatcher, tier, ranks, tier_bw):
    rates = dedup_nvlink_rates(dispatcher, tier, ranks, tier_bw)
    assert all(0 < r <= tier_bw for r in rates)
    if tier != "nvlink5-nvswitch" or dispatcher == "alltoall" or ranks < 2:
        assert rates == (tier_bw, tier_bw)  # nothing measured: the tier's rate


def test_hybridep_on_a_b200_node_runs_its_all_to_alls_at_the_measured_rate():
    # the small Mixtral (8 experts, top 2, 4 layers) at EP 8 on one DGX-B200, 1 microbatch of 1 x 1,024 tokens of
    # 2,048 bytes; against the same node with its NVLink tier renamed (no measurement applies: the tier's rate), each
    # layer's dispatch and its gradient take nv / rate_d, the combine and its gradient nv / rate_c instead of nv / tier
    b200 = load_cluster("dgx-b200").to_dict()
    renamed = {**b200, "name": "b200-like", "intra": {**b200["intra"], "name": "nvlink5-unmeasured"}}

    def ep(cluster):
        sc = copy.deepcopy(BASE)
        sc.update(cluster=cluster)
        sc["parallel"].update(data=8, expert=8, microbatch_size=1, global_batch=8, moe_dispatcher="hybridep")
        return estimate(sc)

    measured, tier_rate = ep("dgx-b200"), ep(renamed)
    c = load_cluster("dgx-b200")
    tier = c.intra.bw * c.intra.efficiency
    rate_d, rate_c = dedup_nvlink_rates("hybridep", c.intra.name, 8, tier)
    nv, _ = dedup_bytes(1024, 2048, 8, 2, 8, 8)  # 8 (1 - C(7, 2) / C(8, 2)) = 2 ranks reached, 7 / 8 of them off
    assert nv == pytest.approx(1024 * 2048 * 2 * 7 / 8, rel=1e-12)
    extra = 4 * 2 * nv * (1 / rate_d + 1 / rate_c - 2 / tier)
    assert measured.breakdown["expert_parallel_comm_s"] - tier_rate.breakdown["expert_parallel_comm_s"] == \
        pytest.approx(extra, rel=1e-9)
    assert measured.breakdown["forward_s"] == tier_rate.breakdown["forward_s"]  # only the all-to-alls change


@given(st.integers(1, 6), st.integers(1, 8), st.integers(1, 4))
def test_targets_reached_between_one_and_the_fewer_of_groups_and_top_k(log_groups, per_group, k):
    groups = 2 ** log_groups
    experts = groups * per_group
    k = min(k, experts)
    got = targets_reached(experts, k, groups)
    assert 1.0 - 1e-12 <= got <= min(groups, k) + 1e-12
    assert targets_reached(experts, k, experts) == pytest.approx(k, rel=1e-12)  # one expert a group: k groups


@given(*[st.floats(0, 10) for _ in range(6)])
def test_overlap_exposes_at_most_all_and_less_with_more_compute(af, ab, attn_f, attn_b, mlp_f, mlp_b):
    kf, kb = overlap_exposed(af, ab, attn_f, attn_b, mlp_f, mlp_b)
    assert 0.0 <= kf <= 1.0 and 0.0 <= kb <= 1.0
    kf2, kb2 = overlap_exposed(af, ab, attn_f + 1, attn_b + 1, mlp_f + 1, mlp_b + 1)
    assert kf2 <= kf and kb2 <= kb


def test_overlap_hides_the_all_to_alls_behind_the_other_microbatch():
    # on 2 DGX-A100 nodes the alltoall of this small model hides whole behind the other microbatch's layers; over
    # DGX-1's 100 Gb/s network part stays exposed, never more than without the overlap
    off, on = run16(), run16(expert_overlap=True)
    assert on.breakdown["expert_parallel_comm_s"] == 0.0 < off.breakdown["expert_parallel_comm_s"]
    assert on.breakdown["forward_s"] == off.breakdown["forward_s"]
    v100 = {**BASE16, "cluster": "dgx1-v100", "training": {"dtype": "fp16"}}
    off = estimate(v100)
    on = estimate({**v100, "parallel": {**v100["parallel"], "expert_overlap": True}})
    assert 0.0 < on.breakdown["expert_parallel_comm_s"] < off.breakdown["expert_parallel_comm_s"]


@pytest.mark.parametrize("parallel, message", [
    ({"moe_dispatcher": "deeppe"}, r"^parallel.moe_dispatcher: unknown 'deeppe'; did you mean 'deepep'\?; "
                                   r"allowed: alltoall, deepep, hybridep$"),
    ({"expert_overlap": "yes"}, r"^parallel.expert_overlap: must be true or false"),
])
def test_bad_dispatcher_input_names_the_field(parallel, message):
    with pytest.raises(ValueError, match=message):
        run16(**parallel)


def test_a_dense_model_has_no_dispatcher():
    with pytest.raises(ValueError, match=r"^parallel.moe_dispatcher: needs a model with mixture-of-experts layers"):
        estimate({"model": "gpt2", "parallel": {"moe_dispatcher": "hybridep"}})


def test_cli_unknown_dispatcher_is_one_line_exit_2(tmp_path):
    path = tmp_path / "s.json"
    sc = copy.deepcopy(BASE16)
    sc["parallel"]["moe_dispatcher"] = "hybrid"
    path.write_text(json.dumps(sc))
    r = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", str(path)],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stdout == "" and r.stderr.count("\n") == 1
    assert "parallel.moe_dispatcher: unknown 'hybrid'; did you mean 'hybridep'?" in r.stderr


def test_sweep_carries_the_dispatcher_and_the_overlap():
    base = {**BASE16, "parallel": {"global_batch": 64, "moe_dispatcher": "hybridep", "expert_overlap": True}}
    r = sweep(base, [16])
    flat = r.frame
    row = flat[flat["expert"] == 16].sort_values("step_time_s").iloc[0]
    sc = r.scenario(row)
    assert sc["parallel"]["moe_dispatcher"] == "hybridep" and sc["parallel"]["expert_overlap"] is True
    assert estimate(sc).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


def test_overlap_needs_interleaved_stages_when_pipelined():
    sc = copy.deepcopy(BASE16)
    sc["parallel"].update(expert_overlap=True, pipeline=2, data=8, expert=8)
    with pytest.raises(ValueError, match=r"^parallel.expert_overlap: with parallel.pipeline = 2 it needs "
                                         r"interleaved stages"):
        estimate(sc)
    sc["parallel"].update(schedule="interleaved", interleave=2)
    assert estimate(sc).breakdown["expert_parallel_comm_s"] >= 0.0


def test_sweep_leaves_out_the_layouts_the_overlap_cannot_run():
    r = sweep({**BASE16, "parallel": {"global_batch": 64, "expert_overlap": True}}, [16])
    lay = r.layouts
    assert not ((lay["pipeline"] > 1) & (lay["interleave"] == 1)).any()
    assert ((lay["pipeline"] > 1) & (lay["interleave"] > 1)).any()
    assert r.rejected["expert_overlap: needs interleaved stages when pipelined"] > 0
