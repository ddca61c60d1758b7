"""Memory footprint per device: ZeRO model state, Korthikanti activations, pipeline stash, fit check."""
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.hardware.devices import load_device
from concurrency_model.models import get_model
from concurrency_model.parallel.memory import (_in_flight, activation_bytes_per_device, fsdp_zero_stage,
                                               graph_activation_bytes, memory_per_device,
                                               model_state_bytes, transformer_activation_bytes,
                                               weight_stash_bytes)

GB = 1e9
# GPT-3 175B (Korthikanti et al. 2022 Table 3 configuration): s, b, h, a, L, t
S, B, H, A, L, T = 2048, 1, 12288, 96, 96, 8
SBH = S * B * H


# -- model state (ZeRO §3.1, §5, Figure 1) ------------------------------------------------------------
def test_mixed_precision_adam_is_16_bytes_per_param():
    m = model_state_bytes(1e9)
    assert (m["weights"], m["gradients"], m["optimizer"], m["total"]) == (2e9, 2e9, 12e9, 16e9)


@pytest.mark.parametrize("stage, total_gb", [(0, 16.0), (1, 2 + 2 + 12 / 8), (2, 2 + 14 / 8), (3, 2.0)])
def test_zero_stages_hand_derived(stage, total_gb):
    assert model_state_bytes(1e9, data=8, zero_stage=stage)["total"] == pytest.approx(total_gb * GB)


def test_zero_figure1_check_values():
    # ZeRO Figure 1: Psi = 7.5B, N_d = 64, K = 12 -> 120, 31.4, 16.6, 1.9 GB
    got = [model_state_bytes(7.5e9, data=64, zero_stage=z)["total"] / GB for z in range(4)]
    assert got == pytest.approx([120, 31.4, 16.6, 1.9], abs=0.05)


def test_tensor_and_pipeline_shard_first():
    base = model_state_bytes(1e9, data=8, zero_stage=1)
    half = model_state_bytes(1e9, tensor=2, data=8, zero_stage=1)
    assert all(half[k] == pytest.approx(base[k] / 2) for k in base)
    assert model_state_bytes(1e9, tensor=2, pipeline=4)["total"] == pytest.approx(2e9)


def test_optimizer_and_dtype_variants():
    assert model_state_bytes(1e9, dtype="fp32")["total"] == 16e9           # 4 + 4 + 8
    assert model_state_bytes(1e9, dtype="fp32")["optimizer"] == 8e9
    assert model_state_bytes(1e9, optimizer="sgd")["total"] == 8e9          # 2 + 2 + 4 (master)
    assert model_state_bytes(1e9, optimizer="momentum")["total"] == 12e9    # 2 + 2 + 4 + 4
    assert model_state_bytes(1e9, optimizer="sgd", dtype="fp32")["total"] == 8e9
    assert model_state_bytes(1e9, master_fp32=False)["total"] == 8e9       # 2 + 2 + 2 * 2 (bf16 m, v)
    # Megatron-LM bf16 with fp32 main grads: 18 bytes, distributed optimizer 6 + 12/d (§3.4)
    assert model_state_bytes(1e9, grad_dtype="fp32")["total"] == 18e9
    assert model_state_bytes(1e9, grad_dtype="fp32", data=4, zero_stage=1)["total"] == pytest.approx(9e9)


def test_fsdp_strategies_map_to_zero():
    assert [fsdp_zero_stage(s) for s in ("NO_SHARD", "SHARD_GRAD_OP", "FULL_SHARD")] == [0, 2, 3]
    with pytest.raises(ValueError, match="strategy"):
        fsdp_zero_stage("SOMETIMES")


def test_model_state_symbolic():
    d = sp.Symbol("d", positive=True, integer=True)
    e = model_state_bytes(10**9, data=d, zero_stage=1)["total"]
    assert sp.simplify(e - (4 * 10**9 + 12 * 10**9 / d)) == 0


@settings(max_examples=60, deadline=None)
@given(psi=st.integers(0, 10**12), d=st.integers(1, 1024), t=st.integers(1, 16), p=st.integers(1, 16),
       opt=st.sampled_from(["sgd", "momentum", "adam", "adamw"]), dtype=st.sampled_from(["bf16", "fp32"]))
def test_more_sharding_never_increases(psi, d, t, p, opt, dtype):
    totals = [model_state_bytes(psi, opt, dtype, tensor=t, pipeline=p, data=d, zero_stage=z)["total"]
              for z in range(4)]
    assert all(x >= y for x, y in zip(totals, totals[1:]))
    for z in range(4):
        more = model_state_bytes(psi, opt, dtype, tensor=t, pipeline=p, data=d + 1, zero_stage=z)["total"]
        assert more <= totals[z]
        wider = model_state_bytes(psi, opt, dtype, tensor=t + 1, pipeline=p, data=d, zero_stage=z)["total"]
        assert wider <= totals[z]


# -- transformer activations (Korthikanti et al. 2022, Table 2) ----------------------------------------
def test_gpt3_per_layer_values():
    assert 5 * A * S / H == 80                                               # §2.2 reference value
    assert transformer_activation_bytes(S, B, H, A) == SBH * 114             # Eq. 1: 34 + 80
    assert transformer_activation_bytes(S, B, H, A, t=T) == SBH * 23         # Eq. 2: 10 + 3 + 10
    assert transformer_activation_bytes(S, B, H, A, t=T, sequence_parallel=True) == SBH * 114 / 8  # Eq. 4
    assert transformer_activation_bytes(S, B, H, A, t=T, recompute="selective") == SBH * 13
    assert transformer_activation_bytes(S, B, H, A, t=T, sequence_parallel=True,
                                        recompute="selective") == SBH * 34 / 8
    assert transformer_activation_bytes(S, B, H, A, t=T, recompute="full") == 2 * SBH
    assert transformer_activation_bytes(S, B, H, A, t=T, sequence_parallel=True, recompute="full") \
        == 2 * SBH / 8
    assert transformer_activation_bytes(S, B, H, A, t=T, layers=L) == SBH * 23 * 96
    assert SBH * 23 == 578_813_952


def test_gpt3_first_stage_eq5_eq6_full():
    kw = dict(t=T, sequence_parallel=True, pipeline=8, schedule="1f1b")
    eq5 = SBH * L / T * (34 + 80)
    assert activation_bytes_per_device(S, B, H, A, L, **kw) == pytest.approx(eq5)       # 34.4 GB
    assert eq5 / GB == pytest.approx(34.4, abs=0.05)
    assert activation_bytes_per_device(S, B, H, A, L, recompute="selective", **kw) == 34 * SBH * L / T
    assert activation_bytes_per_device(S, B, H, A, L, t=T, recompute="full", pipeline=8) == 2 * SBH * L


@settings(max_examples=80, deadline=None)
@given(s=st.integers(1, 8192), b=st.integers(1, 64), h=st.integers(1, 16384), a=st.integers(1, 128),
       t=st.integers(1, 64), seqp=st.booleans())
def test_more_recompute_and_sp_never_increase(s, b, h, a, t, seqp):
    none, sel, full = (transformer_activation_bytes(s, b, h, a, t, seqp, r) for r in ("none", "selective",
                                                                                        "full"))
    assert none >= sel >= full > 0
    for r in ("none", "selective", "full"):
        assert transformer_activation_bytes(s, b, h, a, t, True, r) <= \
            transformer_activation_bytes(s, b, h, a, t, False, r) * (1 + 1e-12)


# -- pipelines ----------------------------------------------------------------------------------------
def test_in_flight_by_schedule():
    assert _in_flight("1f1b", 8, 64) == 8 and _in_flight("1f1b", 8, 4) == 4
    assert _in_flight("1f1b", 8, 64, stage=3) == 5
    assert _in_flight("gpipe", 8, 64) == 64
    assert _in_flight("async", 8, 2) == 8
    # Korthikanti §4.2.3: p (1 + (p-1)/(p v)); p = 4, v = 2 -> 5.5
    assert _in_flight("interleaved", 4, 64, v=2) == pytest.approx(4 * (1 + 3 / 8))
    assert _in_flight("interleaved", 4, 64, v=1) == 4
    per_stage = [_in_flight("interleaved", 8, 64, v=3, stage=r) for r in range(8)]
    assert all(x > y for x, y in zip(per_stage, per_stage[1:]))


def test_pipeline_first_stage_holds_L_layers_whatever_p():
    one = transformer_activation_bytes(S, B, H, A, t=T, sequence_parallel=True, layers=L)
    for p in (1, 2, 4, 8, 16):
        got = activation_bytes_per_device(S, B, H, A, L, t=T, sequence_parallel=True, pipeline=p)
        assert got == pytest.approx(one)
    gpipe = activation_bytes_per_device(S, B, H, A, L, t=T, pipeline=8, schedule="gpipe", microbatches=32)
    assert gpipe == pytest.approx(32 * transformer_activation_bytes(S, B, H, A, t=T, layers=L / 8))
    inter = activation_bytes_per_device(S, B, H, A, L, t=T, pipeline=8, schedule="interleaved",
                                        interleave=3, microbatches=64)
    assert inter == pytest.approx(transformer_activation_bytes(S, B, H, A, t=T, layers=L) * (1 + 7 / 24))
    last = activation_bytes_per_device(S, B, H, A, L, t=T, pipeline=8, stage=7)
    assert last == pytest.approx(transformer_activation_bytes(S, B, H, A, t=T, layers=L / 8))


def test_embedding_terms_and_recompute_buffer():
    base = activation_bytes_per_device(S, B, H, A, L, t=T, sequence_parallel=True)
    with_v = activation_bytes_per_device(S, B, H, A, L, t=T, sequence_parallel=True, vocab=51200)
    # §4.3 extra, p = 1: (s b h L / t)(p/L + (4/L)(1 + v/h))
    assert with_v - base == pytest.approx(SBH * L / T * (1 / L + 4 / L * (1 + 51200 / H)))
    full = activation_bytes_per_device(S, B, H, A, L, t=T, recompute="full")
    buf = activation_bytes_per_device(S, B, H, A, L, t=T, recompute="full", recompute_buffer=True)
    assert buf - full == pytest.approx(23 * SBH)


def test_async_weight_stash_p_versions():
    w = model_state_bytes(175e9, tensor=8, pipeline=8)["weights"]
    assert weight_stash_bytes(w, "async", pipeline=8) == pytest.approx(7 * w)   # p versions in all
    assert weight_stash_bytes(w, "async", pipeline=8, stage=7) == 0
    assert weight_stash_bytes(w, "1f1b", pipeline=8) == 0


# -- generic graphs (sqrt checkpointing, Chen et al. 2016) ---------------------------------------------
@pytest.mark.parametrize("name", ["lenet5", "alexnet", "resnet50", "mobilenet_v2"])
def test_graph_full_recompute_saves(name):
    g = get_model(name, batch=2)
    none = graph_activation_bytes(g)
    assert none == sum(n.cost.forward.act_bytes for n in g.layers())
    assert graph_activation_bytes(g, "selective") == none
    assert 0 < graph_activation_bytes(g, "full") <= none
    if name == "resnet50":
        assert graph_activation_bytes(g, "full") < none / 2


def test_graph_symbolic_batch_is_linear():
    n = sp.Symbol("N", positive=True, integer=True)
    e = graph_activation_bytes(get_model("resnet50", batch=n), "full")
    assert sp.simplify(e.subs(n, 2) - graph_activation_bytes(get_model("resnet50", batch=2), "full")) == 0


# -- fit check and input errors -----------------------------------------------------------------------
def test_fits_and_does_not_fit():
    a100 = load_device("a100-sxm4-80gb")
    # GPT-3 175B, t = 8, p = 8: model state 16 * 175e9 / 64 = 43.75 GB; SP + selective (Eq. 6) 10.3 GB
    ms = model_state_bytes(175e9, tensor=8, pipeline=8)
    act = activation_bytes_per_device(S, B, H, A, L, t=T, sequence_parallel=True, recompute="selective",
                                      pipeline=8)
    ok = memory_per_device(ms, act, a100)
    assert ok["fits"] and ok["total_bytes"] == pytest.approx(43.75e9 + 34 * SBH * L / T)
    assert ok["reason"].startswith("memory: 54.0 GB per device fits in 80.0 GB of a100-sxm4-80gb")
    act_none = activation_bytes_per_device(S, B, H, A, L, t=T, pipeline=8)      # 23 sbh L = 55.6 GB
    bad = memory_per_device(ms, act_none, a100)
    assert not bad["fits"] and bad["headroom_bytes"] < 0
    assert bad["reason"].startswith("memory: 99.3 GB per device exceeds 80.0 GB of a100-sxm4-80gb")
    assert "activations 55.6 GB" in bad["reason"]
    r = memory_per_device(70e9, 22.3e9, 80e9, device_name="a100-sxm4-80gb")
    assert r["reason"].startswith("memory: 92.3 GB per device exceeds 80.0 GB of a100-sxm4-80gb")
    tight = memory_per_device(ms, act, a100, reserve_fraction=0.4)
    assert not tight["fits"] and "48.0 GB usable (80.0 GB less 40% reserve)" in tight["reason"]
    stash = memory_per_device(ms, act, a100, extra={"weight_stash": 7 * ms["weights"]})
    assert not stash["fits"] and "weight stash" in stash["reason"]


@pytest.mark.parametrize("call, field", [
    (lambda: model_state_bytes(-1), "params"),
    (lambda: model_state_bytes(1e9, optimizer="lion"), "optimizer"),
    (lambda: model_state_bytes(1e9, dtype="fp4"), "dtype"),
    (lambda: model_state_bytes(1e9, zero_stage=4), "zero_stage"),
    (lambda: model_state_bytes(1e9, data=0), "data"),
    (lambda: model_state_bytes(1e9, tensor=0), "tensor"),
    (lambda: transformer_activation_bytes(2048, 1, 1024, 16, recompute="some"), "recompute"),
    (lambda: transformer_activation_bytes(-2048, 1, 1024, 16), "s"),
    (lambda: activation_bytes_per_device(2048, 1, 1024, 16, 24, pipeline=4, schedule="zb"), "schedule"),
    (lambda: activation_bytes_per_device(2048, 1, 1024, 16, 24, pipeline=4, stage=4), "stage"),
    (lambda: activation_bytes_per_device(2048, 1, 1024, 16, 24, schedule="gpipe"), "microbatches"),
    (lambda: graph_activation_bytes(get_model("lenet5"), "half"), "recompute"),
    (lambda: memory_per_device(-1, 0, 80e9), "model_state"),
    (lambda: memory_per_device(1, 0, 80e9, reserve_fraction=1.5), "reserve_fraction"),
    (lambda: memory_per_device({"weights": 1}, 0, 80e9), "model_state"),
])
def test_bad_inputs_name_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        call()
