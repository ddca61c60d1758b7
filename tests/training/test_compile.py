"""training.compile false: eager PyTorch's RMS norm and rotary kernels (timing.graph.eager_kernels), by hand."""
from __future__ import annotations

import subprocess
import sys

import numpy as np
from hypothesis import given, settings, strategies as st
import pytest

from concurrency_model.hardware.devices import load_device
from concurrency_model.models import get_model
from concurrency_model.sweep import sweep
from concurrency_model.timing.graph import eager_kernels, layer_parts
from concurrency_model.training.estimate import estimate
from concurrency_model.validate import modern

H100 = load_device("h100-sxm5-80gb")
B, S = 2, 256
LLAMA = {"hf_config": "llama-3.1-8b", "seq_len": S}  # hidden 4096, 32 heads of 128, 8 KV heads


def _bytes_s(n, kernels):  # memory-bound: the preset's memory efficiency 0.8, plus a launch a kernel
    return n / (0.8 * H100.mem_bw) + kernels * H100.launch_overhead


def _rows(eager: bool) -> dict:
    g = get_model(LLAMA, batch=B, value_bytes=2)
    return {r["name"]: r for r in layer_parts(g, H100, "bf16", eager=eager)}


def test_eager_rms_norm_by_hand():
    # torchtitan's RMSNorm in bf16, per value of its input: forward upcast 2+4, pow 4+4, mean 4, product 4+4,
    # downcast 4+2, weight 2+2 = 36 bytes in 8 kernels; the fused kernel reads and writes once: 4 bytes, 1 kernel
    n = B * S * 4096
    eager, fused = _rows(True)["layers.0.input_norm"], _rows(False)["layers.0.input_norm"]
    assert eager["forward"].total() == pytest.approx(_bytes_s(36 * n, 8), rel=1e-6)
    assert eager["grad_input"].total() == pytest.approx(_bytes_s(84 * n, 14), rel=1e-6)
    assert eager["grad_weight"].total() == pytest.approx(_bytes_s(8 * n, 2), rel=1e-6)
    assert fused["forward"].total() == pytest.approx(_bytes_s(4 * n + 2 * 4096, 1), rel=1e-6)


def test_eager_rotary_by_hand():
    # queries (32 x 128) and keys (8 x 128) of every token: upcast 2+4, complex product 4+4, downcast 4+2 = 20 bytes
    # a value in 3 kernels each, forward and backward
    n = B * S * (32 + 8) * 128
    eager = _rows(True)["layers.0.rotary"]
    assert eager["forward"].total() == pytest.approx(_bytes_s(20 * n, 6), rel=1e-6)
    assert eager["grad_input"].total() == pytest.approx(_bytes_s(20 * n, 6), rel=1e-6)


def test_only_norms_and_rotary_change():
    eager, fused = _rows(True), _rows(False)
    for name, r in eager.items():
        same = r["op"] not in ("rms_norm", "rotary")
        for p in ("forward", "grad_input", "grad_weight"):
            assert (r[p].total() == fused[name][p].total()) == (same or r[p].total() == 0.0), (name, p)


def test_fp32_casts_are_no_ops():
    assert eager_kernels("rms_norm", 4) == {"forward": (28.0, 6), "grad_input": (76.0, 12), "grad_weight": (16.0, 2)}
    with pytest.raises(ValueError, match="layer_norm"):
        eager_kernels("layer_norm", 2)


def _sc(compile_, **tr):
    return {"model": LLAMA | {"seq_len": 2048}, "cluster": "dgx-h100",
            "parallel": {"data": 8, "microbatch_size": 1, "global_batch": 8},
            "training": {"dtype": "bf16", "recompute": "selective", "zero_stage": 3, "framework": "fsdp2",
                         "compile": compile_, **tr}}


def test_eager_step_is_slower_by_the_eager_kernels_alone():
    on, off = estimate(_sc(True)), estimate(_sc(False))
    assert off.step_time_s > on.step_time_s
    assert off.breakdown["optimizer_s"] == on.breakdown["optimizer_s"]
    # eager PyTorch keeps the gated MLP's SiLU output too (parallel.memory.dense_layer_values): one layer's, rebuilt
    # by the per-op recompute, 2 bytes x ffn 14,336 x 2,048 tokens; every other part the same
    grown = {k: off.to_dict()["memory"][k] - v for k, v in on.to_dict()["memory"].items() if k.endswith("_bytes")}
    assert grown["recompute_buffer_bytes"] == 2 * 14336 * 2048
    assert all(v == 0 for k, v in grown.items() if k.split("_")[0] in ("activations", "model", "loss", "gathered"))
    # a model without RMS norms or rotary embeddings (GPT: layer norm, learned positions) runs the same
    gpt = {"kind": "gpt", "layers": 2, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 1024}
    a, b = (estimate({**_sc(c), "model": gpt}).step_time_s for c in (True, False))
    assert a == b


def test_sweep_agrees_with_estimate_without_compile():
    r = sweep(_sc(False), 8)
    assert r.feasible > 0
    for _, row in r.frame.iloc[:min(6, r.feasible)].iterrows():
        sc = r.scenario(row)
        assert sc["training"]["compile"] is False
        assert estimate(sc).step_time_s == row["step_time_s"]


@pytest.mark.parametrize("value", ["yes", 1, None])
def test_bad_compile_names_the_field(value):
    with pytest.raises(ValueError, match=r"^training\.compile: must be true or false"):
        estimate(_sc(value))


def test_cli_bad_compile_exit_2_one_line(tmp_path):
    import json
    f = tmp_path / "s.json"
    f.write_text(json.dumps(_sc("no")))
    out = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", str(f)],
                         capture_output=True, text=True)
    assert out.returncode == 2 and len(out.stderr.strip().splitlines()) == 1
    assert "training.compile" in out.stderr


def test_torchtitan_rows_without_compile_map_to_eager():
    rows = modern.rows("torchtitan")
    eager = rows[[modern.scenario_for(r)["training"].get("compile") is False if not r["unmappable"] else False
                  for _, r in rows.iterrows()]]
    assert list(eager["label"]) == ["Table 1: FSDP", "Table 3: FSDP"]
    assert np.all(rows.loc[rows["label"] == "Table 1: FSDP + torch.compile", "compile"])


@settings(max_examples=15, deadline=None)
@given(heads=st.sampled_from([4, 8, 16]), group=st.sampled_from([1, 2, 4]), seq=st.sampled_from([64, 512, 4096]),
       batch=st.integers(1, 4), tensor=st.sampled_from([1, 2, 4]), dtype=st.sampled_from(["bf16", "fp16", "fp8"]))
def test_eager_never_faster_than_compiled(heads, group, seq, batch, tensor, dtype):
    cfg = {"model_type": "llama", "hidden_size": 64 * heads, "num_attention_heads": heads,
           "num_key_value_heads": heads // group, "intermediate_size": 176 * heads, "num_hidden_layers": 1,
           "vocab_size": 1024, "max_position_embeddings": 8192}
    g = get_model({"hf_config": cfg, "seq_len": seq}, batch=batch, value_bytes=2)
    eager, fused = (layer_parts(g, H100, dtype, tensor=min(tensor, heads // group), eager=e) for e in (True, False))
    for a, b in zip(eager, fused):
        for p in ("forward", "grad_input", "grad_weight"):
            assert a[p].total() >= b[p].total(), (a["name"], p)
