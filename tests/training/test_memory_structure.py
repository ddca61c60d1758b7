"""The compiled memory functions are one a structure (``training.compose.framework_memory_fn``): models that differ in
their numbers only share one compiled function, each with its own figures, counted by hand."""
from __future__ import annotations

import pytest

from concurrency_model import compiled
from concurrency_model.training import compose

MiB = 2 ** 20
NCCL_ONE_GROUP = 16 * (4 * MiB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8)  # 16 channels, one ring peer, every protocol


def _megatron(shape, params=1e9):
    """Megatron, bf16, ZeRO-0, 1F1B on one stage, no recompute, an A100 (not sm90)."""
    return compose.framework_memory_fn("megatron", params, "bf16", 0, "1f1b", "none", False, shape, True, False)


@pytest.mark.parametrize("s, vocab, d", [(2048, 50_257, 8), (4096, 128_256, 2)])
def test_figures_by_hand(s, vocab, d):
    """One data-parallel group of ``d`` ranks; the loss' extra is Megatron's vocab-parallel 6 bytes a logit less the
    4 the activations count; fragmentation 0.11 of the transient bytes (act and the loss); the band's upper end adds
    16 more channels."""
    act, b = 1e9, 2
    out = _megatron((s, 1024, 16, 24, vocab, True, None))(b, 1, 1, 4, 1, d, act)
    loss = (6 - 4) * s * b * vocab
    hand = {"cuda_context": 287_047_680, "nccl_buffers": NCCL_ONE_GROUP,
            "workspaces": 4096 * 1024 * 2 + 16 * 1024 * 8 + 1024 * 1024, "gathered_parameters": 0,
            "gradient_buffers": 0, "loss_buffers": loss, "recompute_buffer": 0,
            "fragmentation": 0.11 * (act + loss), "headroom": 0.11 * (act + loss) + NCCL_ONE_GROUP}
    assert set(out) == set(hand)
    for k, v in hand.items():
        assert float(out[k]) == pytest.approx(v, rel=1e-12), k


def test_models_of_one_structure_share_one_compiled_function(cache):
    """A second model of the same structure (other sizes, another parameter count) builds nothing and reads nothing:
    the compiled function is the first's; a structural change (sequence parallelism) builds another."""
    small = (1024, 768, 12, 12, 50_257, True, None)
    big = (4096, 8192, 64, 80, 128_256, True, None)
    _megatron(small, 1.2e8)
    builds, hits = compiled.STATS["builds"], compiled.STATS["hits"]
    f_big = _megatron(big, 7e10)
    assert (compiled.STATS["builds"], compiled.STATS["hits"]) == (builds, hits)
    # and its own numbers: the loss buffers of the big model's vocabulary and sequence
    assert float(f_big(1, 1, 1, 1, 1, 8, 0.0)["loss_buffers"]) == 2 * 4096 * 128_256
    compose.framework_memory_fn("megatron", 7e10, "bf16", 0, "1f1b", "none", True, big, True, False)
    assert compiled.STATS["builds"] == builds + 1


def test_model_numbers_keeps_the_flags_in_the_structure():
    dense = (2048, 4096, 32, 32, 32_000, True, None)
    moe = (2048, 4096, 32, 32, 32_000, True, (4096, 1024, 8, 2, 14_336, 0, False))
    _, n_dense, s_dense = compose.model_numbers(dense, None)
    _, n_moe, s_moe = compose.model_numbers(moe, None)
    assert n_dense == (2048.0, 4096.0, 32.0, 32.0, 32_000.0) and len(n_moe) == 11
    assert s_dense != s_moe != compose.model_numbers(moe[:6] + (moe[6][:6] + (True,),), None)[2]
    assert s_dense != compose.model_numbers(dense[:5] + (False, None), None)[2]  # fused or not
    assert compose.model_numbers(dense, None)[2] == compose.model_numbers((1, 2, 3, 4, 5, True, None), None)[2]
