"""LoRA fine-tuning (training.lora_rank): the frozen base's kernels, the adapters', memory and gradients."""
from __future__ import annotations

import json

import pytest

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.models import get_model
from concurrency_model.parallel import memory
from concurrency_model.training.workload import workload
from concurrency_model.parallel.lora import (adapted, adapter_matrices, adapter_params, adapter_parts,
                                             training_flop as lora_flop)
from concurrency_model.timing import gemm_coeffs
from concurrency_model.timing.graph import layer_parts

GPT2 = {"model": "gpt2", "cluster": "dgx-a100",
        "parallel": {"data": 8, "microbatch_size": 4, "global_batch": 64}, "training": {"dtype": "bf16"}}


def lora(r=8, **training):
    return {**GPT2, "training": {**GPT2["training"], "lora_rank": r, **training}}


def test_adapter_params_and_kernels_by_hand():
    g = get_model("gpt2")
    assert adapter_params(g, 8) == 12 * 8 * ((768 + 2304) + (768 + 768) + (768 + 3072) + (3072 + 768))
    dev = load_cluster("dgx-a100").device
    qkv = next(n for n in g.layers() if n.name == "h.0.qkv")  # column-split: 768 -> 2304, B cut by the tensor ranks
    f, b = adapter_parts(qkv, 1024, 8, 2, dev, "bf16")

    def t(m, n, k):
        return gemm_coeffs(m, n, k, dev, "bf16").assemble(dev).time_s
    assert f.total() == pytest.approx(t(1024, 8, 768) + t(1024, 1152, 8), rel=1e-12)
    assert b.total() == pytest.approx(t(1024, 8, 1152) + t(1024, 768, 8) + t(1152, 8, 1024) + t(8, 768, 1024),
                                      rel=1e-12)


def test_frozen_layers_compute_no_weight_gradient():
    cl = load_cluster("dgx-a100")
    full, tuned = workload("gpt2", cl, "bf16"), workload("gpt2", cl, "bf16", lora_rank=8)
    g = full.graph(4)
    kinds = {"adapted": 0, "layer_norm": 0, "lm_head": 0}
    for n, r, a, b in zip(g.layers(), layer_parts(g, cl.device, "bf16"), full.layers(4, 1, False),
                          tuned.layers(4, 1, False)):
        if adapted(n):
            extra_f, extra_b = adapter_parts(n, 4 * n.attrs["rows_per_sample"], 8, 1, cl.device, "bf16")
            assert b["f_s"] == pytest.approx(a["f_s"] + extra_f.total(), rel=1e-12)
            assert b["b_s"] == pytest.approx(r["grad_input"].total() + extra_b.total(), rel=1e-12)
            kinds["adapted"] += 1
        elif n.kind == "layer_norm":  # frozen: its input gradient only
            assert r["grad_weight"].total() > 0 and b["b_s"] == pytest.approx(r["grad_input"].total(), rel=1e-12)
            kinds["layer_norm"] += 1
        elif n.kind == "linear":  # the output layer: its loss, then the input gradient only
            assert b["b_s"] < a["b_s"] and b["f_s"] == a["f_s"]
            kinds["lm_head"] += 1
    assert kinds == {"adapted": 48, "layer_norm": 25, "lm_head": 1}


def test_memory_gradients_and_optimizer_are_the_adapters():
    full, tuned = estimate(GPT2), estimate(lora(8))
    trained, frozen = adapter_params(get_model("gpt2"), 8), float(get_model("gpt2").params)
    # frozen weights in bf16 and the adapters' mixed-precision Adam state (16 bytes a parameter)
    state = frozen * 2 + memory.model_state_bytes(trained, "adam", "bf16")["total"]
    assert tuned.memory["model_state_bytes"] == pytest.approx(state, rel=1e-9)
    sharded = estimate(lora(8, zero_stage=3))  # ZeRO-3 shards the frozen weights too
    assert sharded.memory["model_state_bytes"] == pytest.approx(
        frozen * 2 / 8 + memory.model_state_bytes(trained, "adam", "bf16", data=8, zero_stage=3)["total"], rel=1e-9)
    w = workload("gpt2", load_cluster("dgx-a100"), "bf16", lora_rank=8)
    assert tuned.breakdown["optimizer_s"] == pytest.approx(
        float(w.optimizer_seconds(memory.model_state_bytes(trained, "adam", "bf16")["total"])), rel=1e-9)
    # the adapters' gradients are ~1,000x smaller, but their all-reduces pay NCCL's per-call latency (comm.nccl)
    assert tuned.breakdown["data_parallel_comm_s"] < full.breakdown["data_parallel_comm_s"] / 25
    assert tuned.memory_bytes_per_device < full.memory_bytes_per_device
    assert json.loads(json.dumps(tuned.to_dict()))["training"]["lora_rank"] == 8  # plain numbers for --json
    g = get_model("gpt2", batch=4)  # the step's FLOP: no frozen weight gradients, the adapters' products added
    assert tuned.flop_per_step == pytest.approx(lora_flop(g, 8) * 64 / 4, rel=1e-12)
    assert tuned.flop_per_step < 0.75 * full.flop_per_step
    # gpt2 at 4 sequences a GPU: the adapters add six kernels a layer, which the host must issue (it now waits on
    # the host), while the frozen layers' weight gradients go (less backward work); a 7B model is bound by its GEMMs
    assert tuned.breakdown["host_wait_s"] > full.breakdown["host_wait_s"]
    assert tuned.breakdown["backward_s"] < full.breakdown["backward_s"]
    big = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-a100",
           "parallel": {"data": 8, "global_batch": 64}, "training": {"dtype": "bf16", "zero_stage": 3, "recompute": "full"}}
    a, b = estimate(big), estimate({**big, "training": {**big["training"], "lora_rank": 16}})
    assert b.step_time_s < 0.95 * a.step_time_s and b.breakdown["backward_s"] < 0.8 * a.breakdown["backward_s"]


def test_tensor_and_pipeline_splits():
    e = estimate(lora(16, recompute="selective") | {"parallel": {"data": 2, "tensor": 2, "pipeline": 2,
                                                                 "microbatch_size": 4, "global_batch": 64}})
    assert e.step_time_s > 0 and e.memory["fits"]


@pytest.mark.parametrize("spec, message", [
    ({**lora(8), "model": "resnet50"}, "^training.lora_rank: adapters go beside the linear layers of transformer"),
    (lora(-1), "^training.lora_rank: must be an integer >= 0, got -1$"),
])
def test_bad_input_names_the_field(spec, message):
    with pytest.raises(ValueError, match=message):
        estimate(spec)


def test_a_quantized_base():
    from concurrency_model.timing import roofline_coeffs
    g = get_model("gpt2")
    plain, q = estimate(lora(8)), estimate(lora(8, lora_base_dtype="nf4"))
    linear = sum(float(n.cost.params) for n in g.layers() if adapted(n))  # the blocks' linears: stored at 4 bits
    assert q.memory["model_state_bytes"] == pytest.approx(plain.memory["model_state_bytes"] - linear * 1.5, rel=1e-9)
    # beside each adapted layer's forward and input-gradient GEMMs a dequantization: read 0.5 B, write 2 B a weight
    dev = load_cluster("dgx-a100").device
    qkv = next(n for n in g.layers() if n.name == "h.0.qkv")
    f0, b0 = adapter_parts(qkv, 4096, 8, 1, dev, "bf16")
    f1, b1 = adapter_parts(qkv, 4096, 8, 1, dev, "bf16", "nf4")
    n = 768 * 2304
    dq = roofline_coeffs(n, n * 2.5, dev, "bf16").assemble(dev).time_s
    assert f1.total() - f0.total() == pytest.approx(dq, rel=1e-12) and b1.total() - b0.total() == pytest.approx(dq)
    assert q.step_time_s > plain.step_time_s


@pytest.mark.parametrize("training, message", [
    ({"lora_rank": 8, "lora_base_dtype": "int2"}, "^training.lora_base_dtype: unknown 'int2'; did you mean 'int[48]'\\?; allowed: nf4, int4"),
    ({"lora_base_dtype": "nf4"}, "^training.lora_base_dtype: a quantized frozen base goes with adapters"),
    ({"lora_rank": 8, "lora_base_dtype": []}, r"^training.lora_base_dtype: unknown \[\]"),  # was a TypeError
])
def test_bad_base(training, message):
    with pytest.raises(ValueError, match=message):
        estimate({**GPT2, "training": {**GPT2["training"], **training}})


def test_the_report_frame():
    from concurrency_model.report.finetune import finetune_frame
    df = finetune_frame().set_index("case")
    assert df.loc["full, 1 GPU", "note"].startswith("memory: ") and df["step_s"].isna().sum() == 1
    assert df.loc["LoRA r=16", "step_s"] < df.loc["full, ZeRO-1", "step_s"] < df.loc["QLoRA r=16, 1 GPU", "step_s"]
    assert df.loc["QLoRA r=16 (nf4)", "state_gb"] < df.loc["LoRA r=16", "state_gb"] < df.loc["full, ZeRO-1", "state_gb"]


def test_compressed_adapter_gradients():
    mats = adapter_matrices(get_model("gpt2"), 8, 2)
    assert len(mats) == 96 and mats[:4] == [(8, 768), (1152, 8), (8, 384), (768, 8)]  # qkv column-, proj row-split
    assert sum(a * b for a, b in adapter_matrices(get_model("gpt2"), 8)) == adapter_params(get_model("gpt2"), 8)
    e = estimate(lora(8, compression="powersgd") | {"parallel": {"data": 8, "tensor": 2, "microbatch_size": 4,
                                                                 "global_batch": 64}})
    assert e.breakdown["data_parallel_comm_s"] > 0
    with pytest.raises(ValueError, match="^training.compression: sfb sends the factors of whole fully connected"):
        estimate(lora(8, compression="sfb"))


# -- a mixture of experts: every expert's projections adapted ------------------------------------------------

def moe(e=1, f=1.0, **training):
    """The small Mixtral with rank-8 adapters; no host seconds a kernel (every expert's adapters are kernels of their
    own, so an eager step of this small model is host-bound: at expert 1 the host adds 44.7 ms to 29.6 of GPU)."""
    from test_expert_parallel import BASE
    return {**BASE, "parallel": {**BASE["parallel"], "expert": e, "expert_imbalance": f},
            "training": {"lora_rank": 8, "host_overhead_s": 0.0, **training}}


def test_moe_adapters_per_expert_by_hand():
    from test_expert_parallel import BASE, EXPERT_PARAMS
    g = workload(BASE["model"], load_cluster("dgx-a100"), "bf16").graph(1)
    # 4 layers: qkv 1024 -> 1024 + 2 x 256 (4 KV heads of 64, one fused layer), o 1024 -> 1024; 8 experts' w1, w3
    # 1024 -> 2816 and w2 2816 -> 1024; the router (1024 -> 8) stays frozen
    attention = 8 * ((1024 + 1536) + (1024 + 1024))
    experts = 8 * 8 * 3 * (1024 + 2816)
    assert adapter_params(g, 8) == 4 * (attention + experts)
    assert adapter_params(g, 8, experts_only=True) == 4 * experts
    one, two = estimate(moe(1)), estimate(moe(2))
    # expert parallelism 2: half the experts' adapters (16 bytes each, bf16 Adam) and frozen weights (2 bytes) a GPU
    saved = 16 * 4 * experts / 2 + 2 * EXPERT_PARAMS / 2
    assert one.memory["model_state_bytes"] - two.memory["model_state_bytes"] == pytest.approx(saved, rel=1e-12)
    full = estimate({**moe(1), "training": {"host_overhead_s": 0.0}})
    assert one.step_time_s < full.step_time_s and one.memory["model_state_bytes"] < full.memory["model_state_bytes"]


def test_moe_adapters_run_on_each_reached_expert():
    from test_expert_parallel import BASE
    g = workload(BASE["model"], load_cluster("dgx-a100"), "bf16").graph(4)
    w1 = next(n for n in g.layers() if n.attrs.get("experts", 1) > 1)
    dev = load_cluster("dgx-a100").device
    rows = 4 * w1.attrs["rows_per_sample"]  # 4 x 1,024 tokens x top 2 routed rows: all 8 experts reached
    f, b = adapter_parts(w1, rows, 8, 1, dev, "bf16")

    def t(m, n, k):
        return gemm_coeffs(m, n, k, dev, "bf16").assemble(dev).time_s
    each = rows // 8
    assert f.total() == pytest.approx(8 * (t(each, 8, 1024) + t(each, 2816, 8)), rel=1e-12)
    # two experts a device at expert parallelism 4, the busiest with 1.5 x the rows
    f4, _ = adapter_parts(w1, rows, 8, 1, dev, "bf16", expert=4, imbalance=1.5)
    assert f4.total() == pytest.approx(2 * (t(3 * rows // 4, 8, 1024) + t(3 * rows // 4, 2816, 8)), rel=1e-12)
    assert estimate(moe(2, 1.5)).step_time_s > estimate(moe(2)).step_time_s


def test_moe_lora_sweep_agrees_with_estimate():
    from concurrency_model.sweep import sweep
    sc = moe()
    r = sweep({**sc, "parallel": {"global_batch": 32}}, 8)
    flat = r.frame
    assert set(flat["expert"]) >= {1, 2, 4}
    for e in (1, 4):
        row = flat[flat["expert"] == e].sort_values("step_time_s").iloc[0]
        got = estimate(r.scenario(row))
        assert got.step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
        assert got.memory_bytes_per_device == pytest.approx(row["memory_bytes_per_device"], rel=1e-9)
