"""Context parallelism (ring attention, Ulysses): hand-derived times, memory, GPU count, bad input, sweep."""
from __future__ import annotations

import json
import subprocess
import sys
from importlib import resources

import numpy as np
import pytest

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.models import get_model
from concurrency_model.ops.attention import attention
from concurrency_model.training.estimate import estimate
from concurrency_model.training.workload import context_exposed
from concurrency_model.training.sensitivity import step_expression
from concurrency_model.scenario import load_scenario
from concurrency_model.sweep import sweep
from concurrency_model.timing.graph import layer_times

S, H, A, L = 16384, 1024, 16, 2  # sequence, hidden, heads, layers; head size 64
GPT = {"kind": "gpt", "layers": L, "hidden": H, "heads": A, "seq_len": S, "vocab": 1024, "fused_attention": True}
CL = load_cluster("dgx-a100")
DEV = CL.device
VB = 2  # bf16


def sc(model=GPT, training=None, **par):
    return {"model": model, "cluster": "dgx-a100", "parallel": par, "training": {"dtype": "bf16", **(training or {})}}


def block_seconds(seq: int, heads: int) -> tuple[float, float]:
    """One ring step's fused causal attention block, forward and backward, by hand: FlashAttention-2 at its
    published A100 speed (Dao-AILab/flash-attention @ 4f285b35 README, flash2_a100_fwd_bwd_benchmark.png (c),
    causal, head 64: 140 / 156 / 165 TFLOP/s forward + backward at 2k / 4k / 8k), in the benchmark's count
    (forward ``4 h s^2 d / 2``, backward 2.5 x), or the operator's bytes at 0.8 x 2,039 GB/s, + 3.8 us."""
    op = attention(1, heads, seq, H // A, fused=True, causal=True, value_bytes=VB)
    rate = {2048: 140e12, 4096: 156e12, 8192: 165e12}[seq]
    fwd = 4 * heads * seq ** 2 * (H // A) / 2
    out = []
    for cost, flop in ((op.forward, fwd), (op.backward, 2.5 * fwd)):
        byt = float(cost.bytes)
        out.append(max(flop / rate, byt / (2.039e12 * 0.8)) + 3.8e-6)
        assert flop / rate > byt / (2.039e12 * 0.8)  # compute-bound kernels
    return out[0], out[1]


def off_block_seconds(seq: int, heads: int) -> tuple[float, float]:
    """One off-diagonal step of the load-balanced causal ring (``seq`` queries against ``seq / 2`` keys, no mask),
    forward and backward, by hand: the square kernel of as many pairs, side ``round(seq / sqrt 2)``, without mask,
    at FlashAttention-2's A100 speed (same figure, (a): no mask, head 64: 132 / - / 162 / 171 / 175 TFLOP/s forward +
    backward at 512 / 1k / 2k / 4k / 8k; the 1k label is hidden, so 512 and 2k bound it), linear in log2(side), in
    the benchmark's count (forward ``4 h side^2 d``, backward 2.5 x), + 3.8 us."""
    side = round(seq / 2 ** 0.5)                                  # 1448, 2896, 5793
    lo, hi, r_lo, r_hi = {1448: (512, 2048, 132e12, 162e12), 2896: (2048, 4096, 162e12, 171e12),
                          5793: (4096, 8192, 171e12, 175e12)}[side]
    rate = r_lo + (r_hi - r_lo) * (np.log2(side) - np.log2(lo)) / (np.log2(hi) - np.log2(lo))
    op = attention(1, heads, side, H // A, fused=True, causal=False, value_bytes=VB)
    fwd = 4 * heads * side ** 2 * (H // A)
    out = []
    for cost, flop in ((op.forward, fwd), (op.backward, 2.5 * fwd)):
        assert flop / rate > float(cost.bytes) / (2.039e12 * 0.8)  # compute-bound kernels
        out.append(flop / rate + 3.8e-6)
    return out[0], out[1]


def kv_send_seconds(seq: int, heads: int, across_nodes: bool) -> float:
    """One ring step's send of K and V (``2 x seq x heads x 64`` bf16 values), Hockney ``alpha + n / bw``:
    NVSwitch 300 GB/s x 0.767, 2 us; HDR InfiniBand 25 GB/s x 0.9 per NIC (one NIC per GPU), 5 us."""
    n = 2 * seq * heads * (H // A) * VB
    return 5e-6 + n / (25e9 * 0.9) if across_nodes else 2e-6 + n / (300e9 * 0.767)


def test_the_preset_numbers_used_by_hand():
    assert (DEV.peak("bf16"), DEV.mem_bw, DEV.launch_overhead) == (312e12, 2.039e12, 3.8e-6)
    assert (DEV.efficiency.compute, DEV.efficiency.memory) == (0.8, 0.8)
    assert (CL.intra.effective_bw, CL.intra.latency) == pytest.approx((300e9 * 0.767, 2e-6))
    assert (CL.inter.effective_bw, CL.inter.latency, CL.nics_per_node) == pytest.approx((25e9 * 0.9, 5e-6, 8))


@pytest.mark.parametrize("t,c,across,hidden_f,hidden_b", [
    (1, 2, False, True, True),    # 8192-token blocks on NVSwitch: every send hidden but the last dK/dV hop
    (1, 8, False, True, True),    # 2048-token blocks on NVSwitch: hidden (38.5 us of K/V, 59.4 us of step)
    (8, 2, True, False, True),    # 2 heads per device across nodes: comm-bound forward (191 us of K/V, 103 us of
                                  # step), hidden backward (252 us)
    (4, 4, True, False, False),   # 4096-token blocks across nodes: comm-bound both ways, (c - 2) term too
])
def test_ring_attention_time_against_hand_values(t, c, across, hidden_f, hidden_b, loss_seconds):
    e = estimate(sc(tensor=t, context=c))
    assert e.scenario.gpus == t * c
    blk_f, blk_b = off_block_seconds(S // c, A // t)  # the sends hide behind the off-diagonal steps
    diag_f, diag_b = block_seconds(S // c, A // t)
    assert blk_f < diag_f and blk_b < diag_b  # as many pairs without the mask: FlashAttention-2's faster no-mask rate
    kv = kv_send_seconds(S // c, A // t, across)
    assert (kv <= blk_f) == hidden_f and (kv <= blk_b) == hidden_b
    # Liu et al. 2023: c - 1 sends forward, each behind one block; backward (ring-flash-attention): block 0
    # hides K/V, blocks 1..c-2 K/V + dK/dV, block c-1 dK/dV, the last dK/dV hop is exposed
    fwd = (c - 1) * max(0.0, kv - blk_f)
    bwd = 2 * max(0.0, kv - blk_b) + (c - 2) * max(0.0, 2 * kv - blk_b) + kv
    assert e.breakdown["context_parallel_comm_s"] == pytest.approx(L * (fwd + bwd), rel=1e-9)
    assert [float(x) for x in context_exposed(c, L, 0, blk_f, blk_b, kv, 0.0)] == pytest.approx([L * fwd, L * bwd])
    # compute: the device's share (s / c tokens, whose causal attention is the diagonal step) plus c - 1
    # off-diagonal steps per layer and pass, and the loss on its s / c tokens' logits (its vocabulary share 1024 / t)
    share = layer_times(get_model({**GPT, "seq_len": S // c, "max_positions": S}, batch=1, value_bytes=VB), DEV,
                        "bf16", tensor=t)
    loss_f, loss_b = loss_seconds(S // c, 1024 // t)
    assert e.breakdown["forward_s"] == pytest.approx(share["forward_s"].sum() + (c - 1) * L * blk_f + loss_f, rel=1e-9)
    assert e.breakdown["backward_s"] == pytest.approx(
        (share["grad_input_s"] + share["grad_weight_s"]).sum() + (c - 1) * L * blk_b + loss_b, rel=1e-9)
    assert e.step_time_s == pytest.approx(sum(e.breakdown[k] for k in (
        "compute_s", "tensor_parallel_comm_s", "context_parallel_comm_s", "pipeline_p2p_s", "bubble_s",
        "data_parallel_exposed_s", "overlap_interference_s", "optimizer_s", "host_wait_s")), rel=1e-12)


def test_ring_recompute_runs_the_forward_ring_again():
    base = estimate(sc(tensor=4, context=4)).breakdown["context_parallel_comm_s"]
    again = estimate(sc(tensor=4, context=4, training={"recompute": "selective"})).breakdown
    blk_f, _ = off_block_seconds(S // 4, A // 4)
    kv = kv_send_seconds(S // 4, A // 4, True)
    assert again["context_parallel_comm_s"] == pytest.approx(base + L * 3 * (kv - blk_f), rel=1e-9)


def test_ulysses_all_to_all_bytes_by_hand():
    c = 2
    e = estimate(sc(context=c, context_algorithm="ulysses"))
    # per layer and pass 4 all-to-alls (Q, K, V, O; backward dO, dQ, dK, dV), each of b (s / c) h values per
    # device; 2 ranks in one node: pairwise = Bruck = alpha + (n / 2) beta (Thakur et al. 2005 §4.3)
    n = 1 * (S // c) * H * VB
    assert n == 16 * 2**20
    one = 2e-6 + n / 2 / (300e9 * 0.767)
    assert e.breakdown["context_parallel_comm_s"] == pytest.approx(L * 2 * 4 * one, rel=1e-9)
    # attention on the whole sequence for heads / c: the same FLOP as the unsplit layer over c devices
    whole = attention(1, A // c, S, H // A, fused=True, causal=True, value_bytes=VB)
    half = attention(1, A, S, H // A, fused=True, causal=True, value_bytes=VB)
    assert float(whole.forward.flop) * c == pytest.approx(float(half.forward.flop))
    ring = estimate(sc(context=c))
    # (Ulysses' kernel runs the whole 16k sequence, FlashAttention-2 at 171 TFLOP/s on A100, the ring's 8k blocks
    # at 165: Ulysses' forward is about 2% shorter)
    assert e.breakdown["forward_s"] == pytest.approx(ring.breakdown["forward_s"], rel=0.03)
    assert e.breakdown["forward_s"] < ring.breakdown["forward_s"]
    # heads must split over tensor x context
    with pytest.raises(ValueError, match=r"^parallel.context: Ulysses needs the 16 attention heads divisible by "
                                         r"tensor x context = 32"):
        estimate(sc(tensor=4, context=8, context_algorithm="ulysses"))


def test_context_kernels_run_at_the_sustained_rate_as_every_other_kernel():
    # the H100 preset's efficiency.sustained (0.90) scales the arithmetic of every kernel of a training step: the
    # ring's off-diagonal steps and Ulysses' whole-sequence kernels too, so with the attention layers compute-bound
    # the step's compute at 0.90 is that at 1.0 over 0.90 (less the memory-bound kernels, which it leaves alone)
    sustained = load_cluster("dgx-h100").device.efficiency.sustained
    assert sustained < 1
    for alg in ("ring", "ulysses"):
        par = {"context": 4, "context_algorithm": alg}
        slow = estimate({**sc(**par), "cluster": "dgx-h100"})
        att = slow.layer_kinds()
        att = att[att.kind == "attention"].iloc[0]
        fast = estimate({**sc(**par), "cluster": _sustained_one("dgx-h100")})
        fatt = fast.layer_kinds()
        fatt = fatt[fatt.kind == "attention"].iloc[0]
        for p in ("forward_s", "backward_s"):
            assert att[p] == pytest.approx(fatt[p] / sustained, rel=0.02), (alg, p)  # launches and traffic: < 2%


def _sustained_one(name: str) -> dict:
    """A cluster preset's dict with its device's ``efficiency.sustained`` set to 1."""
    presets = resources.files("concurrency_model") / "presets"
    cl = json.loads((presets / "clusters" / f"{name}.json").read_text())
    dev = json.loads((presets / "devices" / f"{cl['device']}.json").read_text())
    dev["efficiency"] = {**dev.get("efficiency", {}), "sustained": 1.0}
    return {**cl, "name": f"{name}-sustained-1", "device": dev}


def test_context_one_is_the_estimate_without_context_parallelism():
    plain = estimate(sc(data=2, tensor=2, pipeline=2, global_batch=8))
    one = estimate(sc(data=2, tensor=2, pipeline=2, global_batch=8, context=1, context_algorithm="ulysses"))
    assert one.step_time_s == plain.step_time_s and one.breakdown == plain.breakdown
    assert one.memory_bytes_per_device == plain.memory_bytes_per_device
    assert plain.breakdown["context_parallel_comm_s"] == 0.0


@pytest.mark.parametrize("alg", ["ring", "ulysses"])
def test_memory_per_device_decreases_with_context(alg):
    mem = {c: estimate(sc(context=c, context_algorithm=alg, training={"zero_stage": 1})).memory for c in (1, 2, 4, 8)}
    total = [mem[c]["total_bytes"] for c in (1, 2, 4, 8)]
    assert all(np.diff(total) < 0)
    for c in (2, 4, 8):
        # Korthikanti's activations at s over c; ring attention's K/V (+ dK/dV) receive buffers, 4 x 2 b (s/c) h
        buffers = 4 * 2 * (S // c) * H * VB if alg == "ring" else 0
        assert mem[c]["activations_bytes"] == pytest.approx(mem[1]["activations_bytes"] / c + buffers, rel=1e-12)
        # ZeRO-1 shards the optimizer state over data x context ranks
        assert mem[c]["model_state_bytes"] < mem[1]["model_state_bytes"]


def test_gpu_count_is_data_tensor_pipeline_context():
    s = sc(data=2, tensor=2, pipeline=2, context=4, global_batch=4)
    assert load_scenario(s).gpus == 32
    e = estimate(s)
    assert e.to_dict()["gpus"] == 32 and e.to_dict()["parallel"]["context"] == 4
    assert e.achieved_flops_per_device == pytest.approx(e.flop_per_step / e.step_time_s / 32)
    # data-parallel gradients are reduced over data x context = 8 ranks
    assert e.breakdown["data_parallel_comm_s"] > estimate({**s, "parallel": {**s["parallel"], "context": 1}}) \
        .breakdown["data_parallel_comm_s"]


@pytest.mark.parametrize("model,par,field", [
    ({**GPT, "seq_len": 1000}, {"context": 3}, "parallel.context"),
    ({**GPT, "seq_len": 1000}, {"context": 16, "context_algorithm": "ulysses"}, "parallel.context"),
    ({**GPT, "seq_len": 1002}, {"context": 2}, "parallel.context"),  # causal ring: 2 x 2 chunks
    (GPT, {"context": 0}, "parallel.context"),
    (GPT, {"context": 2, "context_algorithm": "zigzag"}, "parallel.context_algorithm"),
    ("lstm-lm", {"context": 2}, "parallel.context"),  # neither sequences in attention nor feature maps
    ("resnet50", {"context": 8}, "parallel.context"),  # its last maps have 7 rows
])
def test_bad_input_names_the_field(model, par, field):
    with pytest.raises(ValueError, match=rf"^{field}: "):
        estimate(sc(model, **par))


def test_cli_sequence_not_divisible_exit_2_one_line():
    bad = json.dumps(sc({**GPT, "seq_len": 1000}, context=3))
    out = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "/dev/stdin", "--json"],
                         input=bad, capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "parallel.context: 3 does not divide the model's sequence length 1000" in out.stderr


def test_sweep_searches_context_and_matches_estimate():
    spec = {"model": {**GPT, "layers": 4}, "cluster": "dgx-a100", "parallel": {"global_batch": 4},
            "training": {"dtype": "bf16", "recompute": "none"}}
    r = sweep(spec, 16, hardware={"inter_bw": [1.0, 0.25]})
    lay = r.layouts
    assert (lay["data"] * lay["tensor"] * lay["pipeline"] * lay["context"] == lay["gpus"]).all()
    assert set(zip(lay["context"], lay["context_algorithm"])) == {(1, "ring"), *((c, a) for c in (2, 4, 8)
                                                                                 for a in ("ring", "ulysses"))}
    assert not ((lay["context_algorithm"] == "ulysses") & (16 % (lay["tensor"] * lay["context"]) != 0)).any()
    rng = np.random.default_rng(3)
    rows = r.frame.iloc[rng.choice(r.feasible, size=20, replace=False)]
    rows = rows[rows["inter_bw"] == 1.0]
    for _, row in rows.iterrows():
        e = estimate(r.scenario(row))
        assert abs(e.step_time_s - row["step_time_s"]) <= 1e-9 * e.step_time_s
        assert e.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-12)
    # the ring's exposure is recomputed per hardware point: slower links expose more across nodes
    cross = ((lay["tensor"] * lay["context"] > 8) & (lay["context_algorithm"] == "ring")).to_numpy()
    fast, slow = (r.step_time_s[:, j] for j in (r.hardware.index[r.hardware.inter_bw == x][0] for x in (1.0, 0.25)))
    assert (slow[cross] > fast[cross]).all()
    # short sequences are not searched (under 2,048 tokens per device), a given degree is
    short = sweep({**spec, "model": {**GPT, "seq_len": 2048}}, 8)
    assert set(short.layouts["context"]) == {1}
    given = sweep({**spec, "model": {**GPT, "seq_len": 2048}, "parallel": {"global_batch": 4, "context": 2}}, 8)
    assert set(given.layouts["context"]) == {2}


def test_sensitivity_expression_reproduces_a_context_parallel_estimate():
    for par in ({"tensor": 4, "context": 4}, {"tensor": 2, "context": 4, "context_algorithm": "ulysses"}):
        expr, at = step_expression(sc(**par, training={"recompute": "full"}))
        assert float(expr.subs(at)) == pytest.approx(estimate(sc(**par, training={"recompute": "full"})).step_time_s,
                                                     rel=1e-12)


def test_128k_tokens_fit_on_80gb_only_with_context_parallelism():
    model = {"kind": "gpt", "layers": 32, "hidden": 4096, "heads": 32, "seq_len": 131072, "vocab": 51200,
             "fused_attention": True}
    par = {"tensor": 8, "sequence_parallel": True, "microbatch_size": 1, "global_batch": 1}
    ideal = {"recompute": "selective", "framework": "ideal"}  # the analysis' bytes, without a runtime's buffers
    with pytest.raises(ValueError, match=r"^memory: 91\.1 GB per device exceeds 80\.0 GB of a100-sxm4-80gb"):
        estimate(sc(model, training=ideal, **par))
    for c, gb in ((8, 24.1), (16, 19.2)):
        e = estimate(sc(model, training=ideal, context=c, **par))
        assert e.scenario.gpus == 8 * c and e.memory_bytes_per_device / 1e9 == pytest.approx(gb, abs=0.05)
        assert e.breakdown["context_parallel_comm_s"] > 0
