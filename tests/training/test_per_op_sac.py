"""torchtitan's per-op selective activation checkpointing (:func:`concurrency_model.parallel.memory.per_op_sac_bytes`):
hand counts of a Llama 3 8B block, the estimate's activations under ``fsdp2`` against them, the sweep agreeing with
the estimate, and the policy never storing more than Korthikanti's selective recompute."""
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.training import compose
from concurrency_model.parallel import memory, recompute
from concurrency_model.sweep import sweep

# Llama 3 8B: h 4096, 8 key/value heads of 128 (kv 1024), SwiGLU width 14,336, 32 heads
H, KV, F, HEADS = 4096, 1024, 14336, 32
LLAMA_BLOCK = ((H, "column"), (KV, "column"), (KV, "column"), (H, "row"), (F, "column"), (F, "column"), (H, "row"))


def test_llama_block_by_hand():
    """Saved a token (bf16): the block input, wq's output, wv's, the attention output, w1's, w2's (mm 1, 3, 5, 7 of
    wq wk wv wo w1 w3 w2), and the kernel's fp32 log-sum-exp, one value a head."""
    s, b = 8192, 2
    per_token = 2 * (H + H + H + KV + F + H) + 4 * HEADS
    assert per_token == 63_616
    assert memory.per_op_sac_bytes(s, b, H, HEADS, outputs=LLAMA_BLOCK) == s * b * per_token
    # tensor 2 with sequence parallelism: input, attention output, wq, wv, w1 split; w2's partial sums whole; the two
    # reduce-scatter outputs (wo's, w2's) h / 2 each; the log-sum-exp of 16 heads
    tp2 = 2 * (H / 2 + H / 2 + H / 2 + KV / 2 + F / 2 + H + 2 * H / 2) + 4 * HEADS / 2
    assert memory.per_op_sac_bytes(s, b, H, HEADS, 2, True, LLAMA_BLOCK) == pytest.approx(s * b * tp2, rel=1e-15)


def test_outputs_of_a_graph_split_the_fused_qkv():
    from concurrency_model.training.workload import workload
    from concurrency_model.scenario import load_scenario
    sc = load_scenario({"model": {"hf_config": "llama-3-8b", "seq_len": 8192, "fused_attention": True},
                        "cluster": "dgx-h100"})
    g = workload(sc.model, sc.cluster, "bf16").graph(1)
    assert recompute.block_products(g) == LLAMA_BLOCK
    assert compose.sac_of("fsdp2", g) == LLAMA_BLOCK and compose.sac_of("fsdp", g) is None


SPEC = {"model": {"hf_config": "llama-3-8b", "seq_len": 8192, "fused_attention": True}, "cluster": "dgx-h100",
        "parallel": {"data": 8, "microbatch_size": 1, "global_batch": 8},
        "training": {"zero_stage": 3, "recompute": "selective"}}


def test_estimate_counts_the_policy_under_fsdp2_only():
    """Same layout under fsdp (Korthikanti's selective: 34 s b h a layer with a fused attention kernel) and fsdp2
    (torchtitan's policy): the activations differ by 32 layers x (34 h - 63,616) bytes a token, exactly."""
    s = 8192
    fsdp = estimate({**SPEC, "training": {**SPEC["training"], "framework": "fsdp"}}).memory
    fsdp2 = estimate({**SPEC, "training": {**SPEC["training"], "framework": "fsdp2"}}).memory
    diff = fsdp["activations_bytes"] - fsdp2["activations_bytes"]
    assert diff == pytest.approx(32 * s * (34 * H - 63_616), rel=1e-12)
    # what the backward rebuilds for one layer: the layer's unrecomputed activations less what the policy saved
    assert fsdp2["recompute_buffer_bytes"] == pytest.approx(s * (34 * H - 63_616), rel=1e-12)


def test_sweep_agrees_with_estimate():
    r = sweep({**SPEC, "training": {**SPEC["training"], "framework": "fsdp2"},
               "parallel": {**SPEC["parallel"], "tensor": 1, "pipeline": 1}}, 8)
    row = r.frame.iloc[0]
    e = estimate(r.scenario(row))
    assert row["recompute"] == "selective" or e.scenario.training.recompute == row["recompute"]
    assert e.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-12)
    assert e.memory_p90_bytes_per_device == pytest.approx(row["memory_p90_bytes_per_device"], rel=1e-12)


@settings(max_examples=50, deadline=None)
@given(heads=st.sampled_from([8, 16, 32, 64]), head_dim=st.sampled_from([64, 128]), s=st.sampled_from([512, 4096]),
       b=st.integers(1, 8), t=st.sampled_from([1, 2, 4, 8]))
def test_never_more_than_korthikanti_selective(heads, head_dim, s, b, t):
    """A GPT block (q, k, v, proj, fc1 4h, fc2; the 1st, 3rd and 5th product saved: q, v, fc1) with sequence
    parallelism: the input, the attention output, q, v, fc1's output, split, and with t > 1 the two reduce-scatter
    outputs: at most Korthikanti's selective 34 s b h / t bytes."""
    h = heads * head_dim
    gpt = ((h, "column"), (h, "column"), (h, "column"), (h, "row"), (4 * h, "column"), (h, "row"))
    got = memory.per_op_sac_bytes(s, b, h, heads, t, t > 1, gpt)
    lse = 4 * heads * s * b / t
    assert got == pytest.approx(2 * s * b * (4 * h / t + 4 * h / t + (2 * h / t if t > 1 else 0)) + lse, rel=1e-12)
    assert got <= 34 * s * b * h / t + lse


def test_bad_split_is_refused():
    with pytest.raises(ValueError, match=r"^outputs: split must be 'column' or 'row'"):
        memory.per_op_sac_bytes(8, 1, 64, 1, outputs=((64, "diagonal"),))


@pytest.mark.parametrize("recompute", ["none", "full"])
def test_dtensor_sequence_parallel_saves_the_gathered_inputs(recompute):
    """Tensor 2 with sequence parallelism: torchtitan's column-parallel products save their all-gathered inputs whole
    (attention's and the MLP's, 2 x 2 s b h bytes) where Megatron keeps the shards (2 x 2 s b h / 2): 4 s b h / 2 more
    a layer stored without recompute, and in the buffer that full recompute rebuilds."""
    s = 8192
    spec = {**SPEC, "parallel": {"data": 4, "tensor": 2, "sequence_parallel": True, "microbatch_size": 1,
                                 "global_batch": 4}}
    m = {fw: estimate({**spec, "training": {**SPEC["training"], "framework": fw, "recompute": recompute}}).memory
         for fw in ("fsdp", "fsdp2")}
    extra = 4 * s * H * (1 - 1 / 2)
    if recompute == "none":
        assert m["fsdp2"]["activations_bytes"] - m["fsdp"]["activations_bytes"] == pytest.approx(32 * extra, rel=1e-12)
        assert m["fsdp2"]["recompute_buffer_bytes"] == m["fsdp"]["recompute_buffer_bytes"] == 0
    else:
        assert m["fsdp2"]["activations_bytes"] == pytest.approx(m["fsdp"]["activations_bytes"], rel=1e-12)
        assert m["fsdp2"]["recompute_buffer_bytes"] - m["fsdp"]["recompute_buffer_bytes"] == pytest.approx(extra,
                                                                                                           rel=1e-12)
