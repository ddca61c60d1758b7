"""torchtitan's kernels as the fsdp2 runtime runs them: the per-op selective recompute policy, torchao's float8 casts,
async tensor parallelism (parallel.tp_overlap). Hand-derived values and properties."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.models import get_model
from concurrency_model.training.estimate import estimate
from concurrency_model.parallel.context import pytorch_ring_bytes
from concurrency_model.training.workload import Workload, overlap_exposed
from concurrency_model.parallel.recompute import block_of, recompute_shares
from concurrency_model.parallel.runtime import kernel_policies
from concurrency_model.timing.graph import cast_parts, layer_parts, projection_widths

SMALL = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1000, "fused_attention": True}


def test_op_policy_on_llama_block():
    # torchtitan 9dec370 _save_list: every second mm of a block recomputed: wq, wk, wv (1-3: wk), wo (4), w1, w3, w2
    # (5-7: w3); the graph's fused qkv of Llama 3.1 8B is 4096 + 2 x 1024 columns: the key's 1/6 recomputed
    g = get_model({"hf_config": "llama-3.1-8b", "seq_len": 64}, batch=1)
    s = recompute_shares(g.layers(), "op")
    assert s["layers.5.qkv"] == pytest.approx(1024 / 6144)
    assert (s["layers.5.proj"], s["layers.5.mlp.gate_proj"], s["layers.5.mlp.up_proj"], s["layers.5.mlp.down_proj"]) \
        == (1.0, 0.0, 1.0, 0.0)
    assert s["layers.5.attention"] == 0.0  # the fused attention's output is saved
    assert all(s[f"layers.5.{k}"] == 1.0 for k in ("input_norm", "rotary", "post_attention_norm", "mlp.silu",
                                                   "mlp.swiglu", "add1", "add2"))
    assert not {"embed_tokens", "norm", "lm_head"} & set(s)  # outside the checkpointed blocks


def test_op_policy_on_gpt_block():
    # GPT: q, k, v of one width (k: 1/3 of the fused qkv), proj (mm 4) recomputed, fc1 (5) saved, fc2 (6) recomputed
    s = recompute_shares(get_model(SMALL, batch=1).layers(), "op")
    blk = [k for k in s if k.endswith(".qkv")][0].rsplit(".", 1)[0]
    assert s[f"{blk}.qkv"] == pytest.approx(1 / 3)
    assert (s[f"{blk}.proj"], s[f"{blk}.fc1"], s[f"{blk}.fc2"]) == (1.0, 0.0, 1.0)


def test_policy_names_and_blocks():
    assert recompute_shares(get_model(SMALL, batch=1).layers(), "attention") == \
        {n.name: 1.0 for n in get_model(SMALL, batch=1).layers() if n.kind == "attention"}
    with pytest.raises(ValueError, match="did you mean 'op'"):
        recompute_shares([], "opp")
    assert block_of("layers.10.mlp.w1") == "layers.10" and block_of("norm") is None
    assert kernel_policies("fsdp2") == ("op", "torchao", False, 0.0, ())
    assert kernel_policies("fsdp") == kernel_policies(None, 3) == ("attention", "te", False, 0.0, ())
    # TE's casts as Megatron-Core fuses them; its dropless MoE dispatchers wait for the token counts
    assert kernel_policies("megatron")[:3] == ("attention", "te-mcore", True)


def _stage(selective="attention", recipe="te", dtype="bf16", recompute="selective", overlap=False, t=1, sp=False):
    w = Workload(SMALL, load_cluster("dgx-h100"), dtype, selective=selective, fp8_recipe=recipe, tp_overlap=overlap)
    return w, w.stage(4, t, sp, recompute, 1)


def test_op_recompute_seconds_are_the_shares_of_the_forward():
    w, st_ = _stage("op")
    rows = w.layers(4, 1, False)
    expected = sum(r["f_s"] * r["again"] for r in rows)
    assert st_["r"].total() == pytest.approx(expected, rel=1e-9)
    full = _stage("op", recompute="full")[1]["r"].total()
    attention_only = _stage("attention")[1]["r"].total()
    assert attention_only < st_["r"].total() < full  # more than the attention core, less than the whole forward


def test_op_recompute_runs_the_unsaved_tensor_parallel_gathers():
    # with sequence parallelism the row-split layers' reduce-scatter outputs are saved, their all-gathers rerun
    w, st_ = _stage("op", t=2, sp=True)
    again = sum(np.asarray(r["tp_again"]) for r in w.layers(4, 2, True))
    assert np.allclose(st_["tp_r"], again) and sum(st_["tp_r"]) > 0
    assert sum(_stage("attention", t=2, sp=True)[1]["tp_r"]) == 0  # Korthikanti's selective: no collective again


def test_torchao_cast_bytes_hand_count():
    # roofline_utils tensorwise: input amax 2 + cast 2 -> 1 + 1 bytes a value; weight amax 2 + cast 3 (forward) and
    # 3 (∇x);
    # output gradient amax 2 + cast 4; fused_in / fused_out drop the amax read
    dev = load_cluster("dgx-h100").device
    bw = float(dev.mem_bw) * dev.efficiency.memory
    rows, ci, co = 512, 256, 1024
    x, w, dy = rows * ci, ci * co, rows * co

    def mem(parts):
        return float((parts.memory * parts.count).sum()) * bw
    c = cast_parts(rows, ci, co, dev, "fp8", recipe="torchao")
    assert mem(c["forward"]) == pytest.approx(6 * x + 5 * w)
    assert mem(c["grad_input"]) == pytest.approx(3 * w)
    assert mem(c["grad_weight"]) == pytest.approx(6 * dy)
    f = cast_parts(rows, ci, co, dev, "fp8", True, True, recipe="torchao")
    assert mem(f["forward"]) == pytest.approx(4 * x + 5 * w) and mem(f["grad_weight"]) == pytest.approx(4 * dy)
    with pytest.raises(ValueError, match="fp8 recipe"):
        cast_parts(rows, ci, co, dev, "fp8", recipe="torchoa")


def test_torchao_casts_cost_more_than_te_fused_ones():
    te, ao = _stage(dtype="fp8")[1], _stage(recipe="torchao", dtype="fp8")[1]
    assert ao["f"].total() > te["f"].total() and ao["b"].total() > te["b"].total()
    # bf16: no casts either way; torchao's runtime (torchtitan) runs q, k, v as three GEMMs, never faster than one
    assert _stage(recipe="torchao")[1]["f"].total() >= _stage()[1]["f"].total()


def test_torchao_rowwise_forward_gemm_rate_and_rescale_kernels():
    # the forward GEMM on CUTLASS's rowwise kernel at 0.95 of the tensorwise rate: 1/0.95 - 1 of its tensor time more;
    # ∇x: the weight's two cast kernels and the rescale
    dev = load_cluster("dgx-h100").device
    rows, ci, co = 512, 256, 1024
    c = cast_parts(rows, ci, co, dev, "fp8", recipe="torchao-rowwise")
    tensor_s = 2 * rows * ci * co / (float(dev.peak("fp8")) * dev.efficiency.compute)
    assert float(c["forward"].compute.sum()) == pytest.approx(tensor_s * (1 / 0.95 - 1))
    assert round(float(c["grad_input"].launch.sum() / float(dev.launch_overhead))) == 3


def test_input_cast_once_for_separate_projections():
    # the second and third of q, k, v read the input already cast: only the weight's casts remain in the forward
    dev = load_cluster("dgx-h100").device
    bw = float(dev.mem_bw) * dev.efficiency.memory
    rows, ci, co = 512, 256, 1024
    w = ci * co
    for recipe, weight_bytes in (("torchao", 5), ("torchao-rowwise", 3)):
        c = cast_parts(rows, ci, co, dev, "fp8", recipe=recipe, input_cast=False)
        assert float((c["forward"].memory * c["forward"].count).sum()) * bw == pytest.approx(weight_bytes * w)
        whole = cast_parts(rows, ci, co, dev, "fp8", recipe=recipe)
        assert c["grad_input"].total() == whole["grad_input"].total()
        assert c["grad_weight"].total() == whole["grad_weight"].total()


def test_separate_projections_keep_the_flop_and_add_two_gemms():
    # torchtitan's wq, wk, wv (4096, 1024, 1024 columns of Llama 3.1 8B) against the fused qkv of 6144: the same
    # multiply-adds, two more GEMM kernels a pass, and never less time
    g = get_model({"hf_config": "llama-3.1-8b", "seq_len": 256}, batch=1)
    dev = load_cluster("dgx-h100").device
    fused = {r["name"]: r for r in layer_parts(g, dev, "bf16")}["layers.0.qkv"]
    split = {r["name"]: r for r in layer_parts(g, dev, "bf16", fp8_recipe="torchao")}["layers.0.qkv"]
    for p in ("forward", "grad_input", "grad_weight"):
        assert len(split[p].compute) == len(fused[p].compute) + 2
        assert split[p].total() >= fused[p].total() * (1 - 1e-12)
    assert projection_widths(g)["layers.0.qkv"] == (4096, 1024, 1024)
    gpt = projection_widths(get_model(SMALL, batch=1))  # GPT: q, k, v of the hidden width each, one per block
    assert len(gpt) == 2 and set(gpt.values()) == {(256, 256, 256)}


@settings(max_examples=60, deadline=None)
@given(comm=st.floats(0, 10), gemm=st.floats(0, 10), more=st.floats(0, 5), t=st.integers(2, 64))
def test_overlap_exposed_share_bounds(comm, gemm, more, t):
    share = overlap_exposed(comm, gemm, t)
    assert 0.0 <= share <= 1.0
    assert overlap_exposed(comm, gemm + more, t) <= share + 1e-12  # more GEMM hides at least as much
    if comm > 0:
        assert share * comm == pytest.approx(max(0.0, comm - gemm * (t - 1) / t), abs=1e-9)


def test_async_tp_hides_tensor_parallel_collectives():
    sc = {"model": SMALL, "cluster": "dgx-h100",
          "parallel": {"tensor": 4, "sequence_parallel": True, "microbatch_size": 4, "global_batch": 8},
          "training": {"recompute": "full"}}
    plain = estimate(sc)
    fused = estimate({**sc, "parallel": {**sc["parallel"], "tp_overlap": True}})
    assert fused.breakdown["tensor_parallel_comm_s"] < plain.breakdown["tensor_parallel_comm_s"]
    # what the fusion adds on the compute stream: per row-split layer (forward) and column-split layer (backward) the
    # shard's copy and the partial sums' reduction, n (1 + 3 / t) bytes of the n = 4 x 128 x 256 x 2 gathered bytes
    cl = load_cluster("dgx-h100")
    w0, w1 = (Workload(SMALL, cl, "bf16", tp_overlap=x) for x in (False, True))
    s0, s1 = (w.stage(4, 4, True, "none", 1) for w in (w0, w1))
    dev = cl.device
    one = 4 * 128 * 256 * 2 * (1 + 3 / 4) / (float(dev.mem_bw) * dev.efficiency.memory) + float(dev.launch_overhead)
    assert s1["f"].total() - s0["f"].total() == pytest.approx(4 * one)  # proj, fc2 of 2 blocks
    assert s1["b"].total() - s0["b"].total() == pytest.approx(4 * one)  # qkv, fc1 of 2 blocks
    with pytest.raises(ValueError, match="parallel.tp_overlap"):
        estimate({**sc, "parallel": {**sc["parallel"], "tp_overlap": True, "sequence_parallel": False}})


def test_torchao_rowwise_cast_bytes_hand_count():
    # roofline_utils rowwise: input / output gradient 5 + 3 bytes a value in two kernels (3 + 3 with the first read
    # fused), weight 3 forward and 4 + 3 for ∇x; the backward GEMMs' manual rescale reads and writes their 16-bit
    # outputs (4 bytes a value of rows x c_in with ∇x, of c_in x c_out with ∇w: torchao float8_ops.py @ 6243040)
    dev = load_cluster("dgx-h100").device
    bw = float(dev.mem_bw) * dev.efficiency.memory
    rows, ci, co = 512, 256, 1024
    x, w, dy = rows * ci, ci * co, rows * co
    c = cast_parts(rows, ci, co, dev, "fp8", recipe="torchao-rowwise")
    got = {p: float((c[p].memory * c[p].count).sum()) * bw for p in c}
    assert got == pytest.approx({"forward": 8 * x + 3 * w, "grad_input": 7 * w + 4 * x, "grad_weight": 8 * dy + 4 * w})
    f = cast_parts(rows, ci, co, dev, "fp8", True, True, recipe="torchao-rowwise")
    assert float((f["forward"].memory * f["forward"].count).sum()) * bw == pytest.approx(6 * x + 3 * w)


def test_tensorwise_float8_gathers_in_eight_bits():
    # torchtitan's Float8ColwiseParallel / PrepareFloat8ModuleInput: the sequence-parallel all-gathers carry 1 byte a
    # value under torchao's tensorwise recipe, 2 under rowwise (and under Transformer Engine's recipe here)
    tw = Workload(SMALL, load_cluster("dgx-h100"), "fp8", fp8_recipe="torchao")
    rw = Workload(SMALL, load_cluster("dgx-h100"), "fp8", fp8_recipe="torchao-rowwise")
    bf = Workload(SMALL, load_cluster("dgx-h100"), "bf16", fp8_recipe="torchao")
    assert (tw.gather_share, rw.gather_share, bf.gather_share) == (0.5, 1.0, 1.0)
    tw_tp, rw_tp = (sum(w.stage(4, 4, True, "none", 1)["tp_f"]) for w in (tw, rw))
    assert tw_tp < rw_tp  # the reduce-scatters stay 16-bit, the gathers halve


def test_fp8_recipe_field():
    wide = {**SMALL, "hidden": 2048, "heads": 16, "seq_len": 1024}  # big enough for bytes, not launches, to count
    sc = {"model": wide, "cluster": "dgx-h100", "parallel": {"microbatch_size": 32, "global_batch": 32},
          "training": {"dtype": "fp8", "framework": "fsdp2", "zero_stage": 3}}
    tw = estimate(sc)
    rw = estimate({**sc, "training": {**sc["training"], "fp8_recipe": "rowwise"}})
    assert rw.step_time_s > tw.step_time_s  # more cast traffic (rowwise: fewer kernels, more bytes)
    with pytest.raises(ValueError, match="training.fp8_recipe"):
        estimate({**sc, "training": {**sc["training"], "framework": "megatron", "zero_stage": 1,
                                     "fp8_recipe": "rowwise"}})
    with pytest.raises(ValueError, match="did you mean 'rowwise'"):
        estimate({**sc, "training": {**sc["training"], "fp8_recipe": "rowise"}})


def test_sustained_rate_slows_a_training_step_not_a_kernel():
    from dataclasses import replace
    from concurrency_model.timing import gemm_time
    cl = load_cluster("dgx-h100")
    assert cl.device.efficiency.sustained == 0.90  # fitted on llm-foundry H100 bf16 (benchmarks/fit_h100_sustained.py)
    full = replace(cl, device=replace(cl.device, efficiency=replace(cl.device.efficiency, sustained=1.0)))
    slow, fast = Workload(SMALL, cl, "bf16"), Workload(SMALL, full, "bf16")
    a, b = slow.layers(4, 1, False), fast.layers(4, 1, False)
    for x, y in zip(a, b):  # arithmetic at 0.90 the rate, memory traffic as it was
        assert np.allclose(x["f"].compute * 0.90, y["f"].compute) and np.allclose(x["f"].memory, y["f"].memory)
    assert gemm_time(4096, 4096, 4096, cl.device, "bf16").time_s == gemm_time(4096, 4096, 4096, full.device,
                                                                               "bf16").time_s


def test_pytorch_ring_merge_and_accumulation_bytes_hand_count():
    # per value of Q (= O = K = V repeated): forward (c - 1)(8 + 42) + 12, backward 12 + 8 (c - 1) + 46 c + 18
    from concurrency_model.parallel.context import pytorch_ring_bytes
    assert pytorch_ring_bytes(4, 1000.0) == (3 * 50 * 1000.0 + 12000.0, (12 + 24 + 184 + 18) * 1000.0)
    f2, b2 = pytorch_ring_bytes(2, 1.0)
    f8, b8 = pytorch_ring_bytes(8, 1.0)
    assert f8 > f2 and b8 > b2  # every step more passes


def test_pytorch_ring_charged_to_torchtitan_attention_only():
    # torchtitan (torchao's recipes) runs PyTorch's ring: its attention rows carry the fp32 merge and accumulation
    # passes; Transformer Engine's ring (te) does not; nothing but the attention rows changes
    cl = load_cluster("dgx-h100")
    te, ao = Workload(SMALL, cl, "bf16"), Workload(SMALL, cl, "bf16", fp8_recipe="torchao")
    rows_te, rows_ao = te.layers(2, 1, False, c=2), ao.layers(2, 1, False, c=2)
    bw = float(cl.device.mem_bw) * cl.device.efficiency.memory
    values = 2 * (128 // 2) * 4 * (256 // 4)  # microbatch 2 x 64 local tokens x 4 heads x 64 wide
    fwd, bwd = pytorch_ring_bytes(2, values)

    def mem(parts):
        return float((parts.memory * parts.count).sum()) * bw
    seen = 0
    for x, y in zip(rows_te, rows_ao):
        if x["kind"] == "attention":
            seen += 1
            assert mem(y["f"]) - mem(x["f"]) == pytest.approx(fwd)
            assert mem(y["b"]) + mem(y["w"]) - mem(x["b"]) - mem(x["w"]) == pytest.approx(bwd)
        elif x["kind"] not in ("linear",):  # the linears differ by torchtitan's q, k, v split
            assert mem(y["f"]) == pytest.approx(mem(x["f"]))
    assert seen == 2
