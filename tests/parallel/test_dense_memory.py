"""A dense transformer layer's stored activations at its own widths and without dropout
(:func:`concurrency_model.parallel.memory.dense_layer_values`)."""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.cli import main as cli
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.parallel.memory import MLP_TENSORS, dense_layer_values, transformer_activation_bytes
from concurrency_model.training.estimate import estimate
from concurrency_model.training.workload import transformer_shape, workload

SIZES = st.sampled_from([64, 128, 256, 1024, 4096])


@settings(max_examples=40, deadline=None)
@given(h=SIZES, heads=st.sampled_from([1, 4, 16]), s=st.sampled_from([128, 2048]), t=st.sampled_from([1, 2, 8]),
       sp=st.booleans(), recompute=st.sampled_from(["none", "selective", "full"]), fused=st.booleans())
def test_gpt_widths_are_korthikanti_and_no_dropout_never_stores_more(h, heads, s, t, sp, recompute, fused):
    gpt = transformer_activation_bytes(s, 2, h, heads, t, sp, recompute, 3, fused)
    assert transformer_activation_bytes(s, 2, h, heads, t, sp, recompute, 3, fused,
                                        dense=(h, h, 4 * h, MLP_TENSORS["plain"])) == gpt
    without = transformer_activation_bytes(s, 2, h, heads, t, sp, recompute, 3, fused, dropout=False)
    if recompute == "full":  # the layer's input alone
        assert without == gpt
    else:  # two 1-byte masks a value, and the attention dropout's mask and output where the scores are kept
        scores = 0 if fused or recompute == "selective" else 3 * heads * s
        assert gpt - without == 3 * 2 * s * ((2 * h + scores) / (t if sp else 1) if sp else 2 * h + scores / t)


def test_llama3_8b_layer_by_hand():
    # H = 4096, 8 KV heads of 128 (K = 1024), SwiGLU of F = 14,336, no dropout, a fused attention kernel
    H, K, F = 4096, 1024, 14336
    rep = 2 * 2 * H + 2 * 2 * H  # the two norms' inputs, the attention's and the MLP's normed inputs
    split = 2 * H + 2 * 2 * K + 2 * H  # queries, keys and values, the output projection's input
    assert dense_layer_values(H, (H, K, F, 3), True, dropout=False) == (rep, split + 3 * 2 * F)  # fused SwiGLU
    assert dense_layer_values(H, (H, K, F, 4), True, dropout=False) == (rep, split + 4 * 2 * F)  # eager PyTorch
    # Megatron-Core's "mlp" module recompute keeps the MLP's input only
    assert dense_layer_values(H, (H, K, F, 3), True, modules=("mlp",), dropout=False) == (rep, split)
    # unfused: the softmax's output alone without dropout (2 a s), Korthikanti's 5 a s with it
    assert dense_layer_values(H, (H, K, F, 3), False, 32, 8192, dropout=False)[1] == split + 6 * F + 2 * 32 * 8192
    assert dense_layer_values(H, (H, K, F, 3), False, 32, 8192)[1] == split + 6 * F + 5 * 32 * 8192


@pytest.mark.parametrize("model, compile_, dense, dropout", [
    ({"hf_config": "llama-3-8b", "seq_len": 1024}, True, (4096, 1024, 14336, 3), False),
    ({"hf_config": "llama-3-8b", "seq_len": 1024}, False, (4096, 1024, 14336, 4), False),
    ({"hf_config": "gpt-neox-20b", "seq_len": 1024}, True, (6144, 6144, 24576, 2), False),
    ("gpt2", True, (768, 768, 3072, 2), True),
    ({"kind": "gpt", "dropout": 0}, True, (768, 768, 3072, 2), False),
])
def test_the_graph_gives_the_layer_widths_and_dropout(model, compile_, dense, dropout):
    w = workload(model, load_cluster("dgx-h100"), "bf16", compile=compile_)
    shape = transformer_shape(w.graph(1))
    assert w.memory_shape(shape)[10:12] == (dense, dropout)
    # an unfused attention's bytes a score: Korthikanti's 5 with dropout; without, Megatron's softmax output (2) or
    # eager PyTorch's fp32 softmax and its 16-bit copy (6)
    assert [w.memory_shape(shape, fw)[12] for fw in ("megatron", "fsdp2")] == ([5, 5] if dropout else [2, 6])


def test_an_eager_upcast_softmax_keeps_three_times_the_scores():
    # Llama-2-7B's shape without dropout, an unfused attention: 6 bytes a score against Megatron's 2
    s, b, h, a, L = 4096, 1, 4096, 32, 2
    dense = (h, h, 11008, MLP_TENSORS["gated"])
    megatron, eager = (transformer_activation_bytes(s, b, h, a, 1, False, "none", L, False, dense=dense,
                                                    dropout=False, score_bytes=k) for k in (2, 6))
    assert eager - megatron == L * 4 * a * s * s * b


def test_a_model_without_dropout_keeps_no_masks():
    """GPT-2's shape with and without dropout on one GPU, no recompute: the estimate's activations differ by the
    masks alone, two of 1 byte a value a layer and the embedding's, and the attention dropout's mask and output of
    the unfused scores, 3 bytes a score."""
    L, H, a, s, b = 4, 256, 4, 128, 2
    spec = {"kind": "gpt", "layers": L, "hidden": H, "heads": a, "seq_len": s, "vocab": 1000}
    sc = {"cluster": "dgx-a100", "parallel": {"data": 1, "microbatch_size": b, "global_batch": b},
          "training": {"framework": "ideal"}}
    with_, without = (estimate({**sc, "model": {**spec, "dropout": p}}).memory["activations_bytes"] for p in (0.1, 0))
    assert with_ - without == L * (2 * s * b * H + 3 * a * s * s * b) + s * b * H


@pytest.mark.parametrize("value", [1.0, -0.1, "none"])
def test_bad_dropout_names_the_field(value, tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps({"model": {"kind": "gpt", "dropout": value}, "cluster": "dgx-a100"}))
    assert cli(["estimate", "--scenario", str(f)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "model.dropout: must be a number in [0, 1)" in err
