"""CUDA graphs (training.cuda_graph: parallel.host.graphed_rows), the per-expert GEMM launches of Transformer
Engine's grouped linear (parallel.runtime, expert_launch_s) and Megatron-Core's router and dispatcher preprocessing
kernels (parallel.runtime, router_kernels): what the host issues for a stage."""
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel import host
from concurrency_model.parallel.runtime import (MCORE_ROUTER_KERNELS, TE_EXPERT_GEMM_LAUNCH_S, cuda_graph_scopes,
                                                kernel_policies)
from concurrency_model.timing.parts import Parts
from concurrency_model.training.workload import workload

CFG = json.loads((Path(__file__).parents[2] / "concurrency_model/presets/hf/mixtral-8x7b.json").read_text())
CFG.update(hidden_size=256, intermediate_size=512, num_hidden_layers=2, num_attention_heads=8, num_key_value_heads=8,
           vocab_size=1024)  # a small Mixtral: 8 experts, top 2, 2 layers
MOE = {"hf_config": CFG, "seq_len": 128}
TINY = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 8, "seq_len": 128, "vocab": 1024}
SCENARIO = {"model": TINY, "cluster": "dgx-h100", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 1},
            "training": {"framework": "megatron"}}


def test_scopes_parse_and_bad_input_names_the_field():
    assert cuda_graph_scopes(" attn , mlp ") == ("attn", "mlp")
    assert cuda_graph_scopes("mlp,attn,mlp") == ("attn", "mlp")
    for bad, why in (("atn", "did you mean 'attn'"), ("none,attn", "'none' stands alone"),
                     ("attn,full_iteration", "'full_iteration' stands alone"), ("", "a string"), (3, "a string")):
        with pytest.raises(ValueError, match=why) as e:
            cuda_graph_scopes(bad)
        assert str(e.value).startswith("training.cuda_graph:")
    with pytest.raises(ValueError, match="training.cuda_graph"):  # through the scenario file's checks
        estimate({**SCENARIO, "training": {"framework": "megatron", "cuda_graph": "layers"}})


def test_rows_each_scope_captures():
    # a dense block and a MoE block: the attention part up to its residual add, then the MLP or the router and experts
    kinds = ["embedding",
             "rms_norm", "linear", "attention", "linear", "add", "rms_norm", "linear", "silu", "linear", "add",
             "rms_norm", "linear", "attention", "linear", "add", "rms_norm", "linear", "softmax", "moe_dispatch",
             "linear", "moe_combine", "add", "linear"]
    ids = [None] + [0] * 10 + [1] * 12 + [None]
    cap = [False] * len(kinds)
    g, s = host.graphed_rows(kinds, ids, ("attn",), cap)
    assert g.nonzero()[0].tolist() == [1, 2, 3, 4, 5, 11, 12, 13, 14, 15] and s.nonzero()[0].tolist() == [1, 11]
    g, s = host.graphed_rows(kinds, ids, ("mlp", "moe_router"), cap)
    assert g.nonzero()[0].tolist() == [6, 7, 8, 9, 10, 16, 17, 18] and s.nonzero()[0].tolist() == [6, 16]
    g, s = host.graphed_rows(kinds, ids, ("attn", "mlp"), cap)  # one graph a layer, not one across both
    assert s.nonzero()[0].tolist() == [1, 11]
    g, s = host.graphed_rows(kinds, ids, ("full_iteration",), cap)
    assert g.all() and s.nonzero()[0].tolist() == [0]
    assert not host.graphed_rows(kinds, ids, (), cap)[0].any()
    with pytest.raises(ValueError, match="padded capacity buffers"):  # Megatron-Core: a dropless MoE varies in shape
        host.graphed_rows(kinds, ids, ("moe",), cap)
    g, _ = host.graphed_rows(kinds, ids, ("moe",), [k == "moe_dispatch" for k in kinds])
    assert g.nonzero()[0].tolist() == [19, 20, 21, 22]


def test_hand_derived_graphed_queue():
    # two rows of one kernel each (6 us of GPU), the first replayed by a graph: it issues nothing, the graph's launch is
    # the row's one extra kernel; the second is issued as before
    one = Parts(*(np.array([x]) for x in (2e-6, 1e-6, 0.0, 4e-6, 1.0)))
    z = (0.0, 0.0, 0.0)
    rows = [{"name": f"h.{i}.a", "f": one, "b": one.times(2), "tp_f": z, "tp_b": z, "tp_again": z, "again": 0.0}
            for i in range(2)]
    q = host.issue_sequence(rows, [(1, 1), (0, 0)], "none", 4e-6, None, [True, False])
    assert q["f"][0].tolist() == [0.0, 1.0, 1.0]
    assert q["b"][0].tolist() == [2.0, 1.0, 0.0]  # backward from the last layer: its 2 kernels, then the graph's launch
    # host 10 us a call: the launch at 10 us, the eager kernel issued at 20 us, its 6 us run after it: 26 us
    assert host.issue_queue_seconds(*q["f"][:2], 10e-6) == pytest.approx(26e-6)


@pytest.mark.parametrize("graph", ["attn", "attn,mlp", "full_iteration"])
def test_graphs_take_host_calls_away_and_leave_the_gpu(graph):
    cl = load_cluster("dgx-h100")
    eager, graphed = (workload(TINY, cl, "bf16", cuda_graph=g).stage(2, 1, False, "none", 1) for g in ("none", graph))
    h = host.HOST_S_PER_KERNEL
    f0, b0 = host.host_seconds(eager, cl.device, h)
    f1, b1 = host.host_seconds(graphed, cl.device, h)
    assert f1 < f0 and b1 < b0
    assert graphed["f"].total() == eager["f"].total() and graphed["b"].total() == eager["b"].total()
    if graph == "full_iteration":  # the host issues one launch a pass and nothing else
        la = float(cl.device.launch_overhead)
        assert graphed["host_extra"][0] + host.issued(graphed["f"], la) == pytest.approx(1.0)
        assert graphed["host_extra"][1] + host.issued(graphed["b"], la) + host.issued(graphed["r"], la) == \
            pytest.approx(1.0)
        assert graphed["queue"]["f"][0].sum() == graphed["queue"]["b"][0].sum() == 1.0


@settings(max_examples=25, deadline=None)
@given(scopes=st.sets(st.sampled_from(["attn", "mlp", "moe_router", "moe_preprocess"]), min_size=1),
       micro=st.sampled_from([1, 2, 4]))
def test_a_graph_never_slows_a_step(scopes, micro):
    # a replayed region costs the host one call where it cost one a kernel: the step never gets slower
    def step(graph):
        sc = {**SCENARIO, "parallel": {**SCENARIO["parallel"], "microbatch_size": micro},
              "training": {"framework": "megatron", "cuda_graph": graph}}
        return estimate(sc).step_time_s
    assert step(",".join(sorted(scopes))) <= step("none") * (1 + 1e-12)
    assert step("full_iteration") <= step("none") * (1 + 1e-12)


def test_expert_gemm_launches_hand_count():
    # the small Mixtral on 1 device: 8 experts reached, fc1 (w1 and w3 on one input) and fc2 are 2 grouped linears of
    # 8 GEMMs forward, 16 backward, of which the kernel count has 1 and 2: 7 and 14 launches more each, 28.3 us apiece
    cl = load_cluster("dgx-h100")
    s = kernel_policies("megatron")[3]
    assert s == TE_EXPERT_GEMM_LAUNCH_S == pytest.approx(28.29e-6, rel=1e-3)
    base, te = (workload(MOE, cl, "bf16", expert_launch_s=x).stage(4, 1, False, r, 1)
                for x, r in ((0.0, "none"), (s, "none")))
    layers = CFG["num_hidden_layers"]
    extra = np.subtract(te["host_extra"], base["host_extra"]) * host.HOST_S_PER_KERNEL
    assert extra == pytest.approx((layers * 2 * 7 * s, layers * 2 * 14 * s))
    full = workload(MOE, cl, "bf16", expert_launch_s=s).stage(4, 1, False, "full", 1)
    nofull = workload(MOE, cl, "bf16").stage(4, 1, False, "full", 1)
    assert (full["host_extra"][1] - nofull["host_extra"][1]) * host.HOST_S_PER_KERNEL == \
        pytest.approx(layers * 2 * (14 + 7) * s)  # a full recompute launches the forward's again
    moe, nomoe = (workload(MOE, cl, "bf16", selective=("moe",), expert_launch_s=x).stage(4, 1, False, "selective", 1)
                  for x in (s, 0.0))
    assert (moe["host_extra"][1] - nomoe["host_extra"][1]) * host.HOST_S_PER_KERNEL == \
        pytest.approx(layers * 2 * (14 + 7) * s)  # so does Megatron-Core's ``moe`` module
    # one launch for all experts (torchtitan's grouped_mm, the ideal runtime) adds nothing; dense layers have none
    assert kernel_policies("fsdp2")[3] == kernel_policies("ideal")[3] == 0.0
    dense = workload(TINY, cl, "bf16", expert_launch_s=s).stage(4, 1, False, "none", 1)
    assert dense["host_extra"] == workload(TINY, cl, "bf16").stage(4, 1, False, "none", 1)["host_extra"]


@pytest.mark.parametrize("dispatcher, kernels", [("alltoall", 31), ("deepep", 17), ("hybridep", 17)])
def test_router_kernels_hand_count(dispatcher, kernels):
    # the small Mixtral: each MoE layer's router row issues the runtime's count less the 2 the graph lists (the
    # router's linear and its softmax, one kernel each), forward; again in the backward pass only where the router's
    # forward runs again (a full recompute, Megatron-Core's ``moe`` module), never under the moe_router graph
    cl = load_cluster("dgx-h100")
    assert dict(kernel_policies("megatron")[4])[dispatcher] == kernels == dict(MCORE_ROUTER_KERNELS)[dispatcher]
    layers = CFG["num_hidden_layers"]

    def extra(rk, recompute="none", graph="none", sel="attention"):
        w = workload(MOE, cl, "bf16", selective=sel, router_kernels=rk, moe_dispatcher=dispatcher, cuda_graph=graph)
        return np.array(w.stage(4, 1, False, recompute, 1)["host_extra"])
    assert extra(MCORE_ROUTER_KERNELS) - extra(()) == pytest.approx((layers * (kernels - 2), 0))
    assert extra(MCORE_ROUTER_KERNELS, "full") - extra((), "full") == pytest.approx(
        (layers * (kernels - 2), layers * (kernels - 2)))
    moe = ("moe",)
    assert extra(MCORE_ROUTER_KERNELS, "selective", sel=moe) - extra((), "selective", sel=moe) == pytest.approx(
        (layers * (kernels - 2), layers * (kernels - 2)))
    assert extra(MCORE_ROUTER_KERNELS, "selective", sel=("moe_act",)) - extra((), "selective", sel=("moe_act",)) == \
        pytest.approx((layers * (kernels - 2), 0))
    assert extra(MCORE_ROUTER_KERNELS, graph="moe_router,moe_preprocess") == pytest.approx(
        extra((), graph="moe_router,moe_preprocess"))
    # a dense model has no router; the other runtimes count the graph's own kernels
    assert np.array(workload(TINY, cl, "bf16", router_kernels=MCORE_ROUTER_KERNELS).stage(4, 1, False, "none", 1)[
        "host_extra"]) == pytest.approx(workload(TINY, cl, "bf16").stage(4, 1, False, "none", 1)["host_extra"])
    assert kernel_policies("fsdp2")[4] == kernel_policies("deepspeed")[4] == kernel_policies("ideal")[4] == ()

