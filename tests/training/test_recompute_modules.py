"""Megatron-Core's modules of a selective recompute (``training.recompute_modules``, :mod:`concurrency_model.parallel.
recompute`): which layers run again, what each keeps in memory (hand counts of :func:`~concurrency_model.parallel.memory.
moe_layer_values`' terms), the sweep agreeing with estimate, and the bad inputs."""
import copy
import json
from pathlib import Path

import pytest

from concurrency_model import estimate
from concurrency_model.models import get_model
from concurrency_model.parallel.memory import moe_layer_values
from concurrency_model.parallel.recompute import module_rows
from concurrency_model.sweep import sweep

CFG = json.loads((Path(__file__).parents[2] / "concurrency_model/presets/hf/mixtral-8x7b.json").read_text())
CFG.update(hidden_size=1024, intermediate_size=2816, num_hidden_layers=4, num_attention_heads=16,
           num_key_value_heads=4)  # a small Mixtral: 8 experts, top 2, 4 layers, hidden 1,024, kv 4 x 64
MOE = {"model": {"hf_config": CFG, "seq_len": 1024, "fused_attention": True}, "cluster": "dgx-a100",
       "parallel": {"data": 8, "expert": 2, "microbatch_size": 1, "global_batch": 8},
       "training": {"recompute": "selective", "framework": "ideal"}}


def run(modules=None, **training):
    sc = copy.deepcopy(MOE)
    sc["training"].update(training)
    if modules is not None:
        sc["training"]["recompute_modules"] = modules
    return estimate(sc)


def test_the_modules_pick_their_layers():
    mixtral = get_model({"hf_config": CFG, "seq_len": 128}, 1).layers()
    one = sorted(n for n in module_rows(mixtral, ("moe_act", "layernorm", "core_attn")) if n.startswith("layers.1."))
    assert one == ["layers.1.attention", "layers.1.input_norm", "layers.1.mlp.experts.swiglu", "layers.1.mlp.silu",
                   "layers.1.post_attention_norm"]
    moe = {n for n in module_rows(mixtral, ("moe",)) if n.startswith("layers.1.")}
    assert {"layers.1.mlp.router", "layers.1.mlp.dispatch", "layers.1.mlp.experts.w2", "layers.1.mlp.combine"} <= moe
    ds = get_model({"hf_config": "deepseek-v3", "seq_len": 128}, 1).layers()
    assert sorted(n for n in module_rows(ds, ("mla_up_proj",)) if n.startswith("layers.3.")) == [
        "layers.3.kv_b_proj", "layers.3.q_b_proj", "layers.3.rotary"]
    # DeepSeek-V3's first three layers are dense: mlp is theirs, shared_experts the routed layers'
    assert {n.split(".")[1] for n in module_rows(ds, ("mlp",))} == {"0", "1", "2"}
    assert all(".shared_experts." in n for n in module_rows(ds, ("shared_experts",)))


def test_each_module_runs_its_layers_forward_again():
    # core_attn (Megatron-Core's default) against moe_act: the recompute seconds are the forward seconds of the
    # layers each names, per microbatch (1 here), nothing else
    for modules, kinds in (("core_attn", {"attention"}), ("moe_act", {"silu", "mul"})):
        e = run(modules)
        lay = e.layers()
        again = lay[lay["recompute_s"] > 0]
        assert set(again["kind"]) == kinds
        assert again["recompute_s"].sum() == pytest.approx(again["forward_s"].sum(), rel=1e-9)
    assert run().breakdown["recompute_s"] == pytest.approx(run("core_attn").breakdown["recompute_s"], rel=1e-12)


def test_the_moe_module_sends_its_all_to_alls_again():
    # the whole layer again: its layers' forward, and the dispatch's forward all-to-alls (dispatch and combine) a third
    # time beside the forward's and the backward's (the same bytes each way: 1.5 x moe_act's)
    whole, act = run("moe").layers(), run("moe_act").layers()
    moe = whole[whole["layer"].str.contains(".mlp.")]
    assert (moe["recompute_s"] == moe["forward_s"]).all() and len(moe) == 4 * 9  # router, its softmax, dispatch, w1, silu, w3, swiglu, w2, combine
    ep_whole = whole.loc[whole["kind"] == "moe_dispatch", "expert_comm_s"].to_numpy()
    ep_act = act.loc[act["kind"] == "moe_dispatch", "expert_comm_s"].to_numpy()
    assert (ep_act > 0).all()
    assert ep_whole == pytest.approx(1.5 * ep_act, rel=1e-12)


def test_memory_drops_what_each_module_rebuilds():
    # per layer and token, 16-bit (moe_layer_values): H = 1,024 hidden, k = 2 copies of F = 2,816; 4 layers,
    # 1,024 tokens, one microbatch in flight (no pipeline)
    H, k, F = 1024, 2, 2816
    core = run("core_attn").memory["activations_bytes"]
    per_tokens = 4 * 1024
    assert core - run("moe_act").memory["activations_bytes"] == pytest.approx(per_tokens * k * 2 * F, rel=1e-9)
    assert core - run("layernorm").memory["activations_bytes"] == pytest.approx(per_tokens * 2 * H, rel=1e-9)
    both = run("layernorm,moe_act").memory["activations_bytes"]
    assert core - both == pytest.approx(per_tokens * (2 * H + k * 2 * F), rel=1e-9)
    # the whole layer: every routed copy (fc1's input 2H and the GLU's 6F) and the router's fp32 logits (4 x 8)
    assert core - run("moe").memory["activations_bytes"] == pytest.approx(
        per_tokens * (k * (2 * H + 6 * F) + 4 * 8), rel=1e-9)
    # multi-latent attention's queries, keys and values (2A + 4K), under 8-bit inputs too
    base = moe_layer_values(20480, (7168, 20480, 256, 8, 2048, 2048, False), eight_bit=True)
    up = moe_layer_values(20480, (7168, 20480, 256, 8, 2048, 2048, False), eight_bit=True, modules=("mla_up_proj",),
                          mla=True)
    assert base[1] - up[1] == 2 * 20480 + 4 * 20480 and base[0] == up[0]


def test_the_sweep_agrees_with_estimate():
    sc = copy.deepcopy(MOE)
    sc["training"]["recompute_modules"] = "moe_act,layernorm"
    sc["parallel"] = {"global_batch": 16, "microbatch_size": 1}
    r = sweep(sc, [8])
    flat = r.frame
    row = flat[flat["expert"] == 2].sort_values("step_time_s").iloc[0]
    got = estimate(r.scenario(row))
    assert got.scenario.training.recompute_modules == "moe_act,layernorm"
    assert got.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    assert got.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)


@pytest.mark.parametrize("training, message", [
    ({"recompute_modules": "moe_actt"}, "training.recompute_modules: unknown module 'moe_actt'; did you mean 'moe_act'"),
    ({"recompute_modules": "moe_act", "recompute": "full"}, "training.recompute_modules: the modules of a selective"),
    ({"recompute_modules": "moe_act", "framework": "fsdp2"}, "training.recompute_modules: Megatron-Core's modules"),
    ({"recompute_modules": "mla_up_proj"}, "training.recompute_modules: 'mla_up_proj' recomputes no layer of this "
                                           "model (it has no multi-latent attention)"),
    ({"recompute_modules": 3}, "training.recompute_modules: a comma-separated string or a list"),
])
def test_bad_input_names_the_field(training, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        run(**training)


def test_a_refusal_names_a_full_recompute_that_applies():
    # the modules go with selective only: the remedy drops them with the full recompute, and applying it fits
    from concurrency_model.scenario import with_settings
    sc = copy.deepcopy(MOE)
    sc["parallel"].update(microbatch_size=16, global_batch=128)
    sc["model"]["seq_len"] = 32768
    sc["training"]["recompute_modules"] = "moe_act"
    with pytest.raises(ValueError) as err:
        estimate(sc)
    fix = "training.recompute=full training.recompute_modules=null"
    assert fix in str(err.value)
    assert estimate(with_settings(sc, fix.split())).memory_bytes_per_device <= 80e9
