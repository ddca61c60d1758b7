"""The compiled memory functions are one a structure (``training.compose.framework_memory_fn``): models that differ in
their numbers only share one compiled function, each with its own figures, counted by hand."""
from __future__ import annotations

import pytest

from concurrency_model import compiled
from concurrency_model.training import compose

MiB = 2 ** 20
NCCL_ONE_GROUP = 16 * (4 * MiB + 8 * 512 * 8 * 16 + 120 * 640 * 8 * 8)  # 16 channels, one ring peer, every protocol


@pytest.fixture
def fresh(cache):
    """An empty cache directory and no compiled memory function kept in this process (other tests build some)."""
    for kept in (compose._framework_memory_compiled, compose._state_parts_compiled, compose._activation_compiled,
                 compose._context_compiled, compose.framework_memory_fn, compose.state_parts_fn):
        kept.cache_clear()
    return cache


def _megatron(shape, params=1e9):
    """Megatron, bf16, ZeRO-0, 1F1B on one stage, no recompute, an A100 (not sm90)."""
    return compose.framework_memory_fn("megatron", params, "bf16", 0, "1f1b", "none", False, shape, True, False)


@pytest.mark.parametrize("s, vocab, d", [(2048, 50_257, 8), (4096, 128_256, 2)])
def test_figures_by_hand(s, vocab, d):
    """One data-parallel group of ``d`` ranks; the loss' extra is Megatron's vocab-parallel 6 bytes a logit less the
    4 the activations count; the step's fp32 copies of the 1e9 bf16 gradients (``main_grad.float()``) where they
    exceed what the backward pass frees (act and the loss); fragmentation 0.11 of the transient bytes; the band's
    upper end adds 16 more channels."""
    act, b = 1e9, 2
    out = _megatron((s, 1024, 16, 24, vocab, True, None))(b, 1, 1, 4, 1, d, act)
    loss = (6 - 4) * s * b * vocab
    hand = {"cuda_context": 287_047_680, "nccl_buffers": NCCL_ONE_GROUP,
            "workspaces": 4096 * 1024 * 2 + 16 * 1024 * 8 + 1024 * 1024, "gathered_parameters": 0,
            "gradient_buffers": 4 * 1e9 - act - loss, "loss_buffers": loss, "recompute_buffer": 0,
            "fragmentation": 0.11 * (act + loss), "headroom": 0.11 * (act + loss) + NCCL_ONE_GROUP}
    assert set(out) == set(hand)
    for k, v in hand.items():
        assert float(out[k]) == pytest.approx(v, rel=1e-12), k


def test_models_of_one_structure_share_one_compiled_function(fresh):
    """A second model of the same structure (other sizes, another parameter count) builds nothing and reads nothing:
    the compiled function is the first's; a structural change (sequence parallelism) builds another."""
    small = (1024, 768, 12, 12, 50_257, True, None)
    big = (4096, 8192, 64, 80, 128_256, True, None)
    builds = compiled.STATS["builds"]
    _megatron(small, 1.2e8)
    assert compiled.STATS["builds"] == builds + 1
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
    n_dense, s_dense = compose.model_numbers(dense, None)
    n_moe, s_moe = compose.model_numbers(moe, None)
    assert n_dense == (2048.0, 4096.0, 32.0, 32.0, 32_000.0) and len(n_moe) == 11
    assert s_dense != s_moe != compose.model_numbers(moe[:6] + (moe[6][:6] + (True,),), None)[1]
    assert s_dense != compose.model_numbers(dense[:5] + (False, None), None)[1]  # fused or not
    assert s_dense != compose.model_numbers(dense + (True,), None)[1]  # 8-bit saved inputs or not
    assert s_dense == compose.model_numbers(dense + (False,), None)[1]
    assert compose.model_numbers(dense, None)[1] == compose.model_numbers((1, 2, 3, 4, 5, True, None), None)[1]


def test_state_parts_and_activations_of_one_structure_share_their_functions(fresh):
    """The model state of two parameter counts (one with replicated parameters and frozen weights) from one compiled
    function, each by hand (ZeRO §3.1: 2 + 2 + 12 bytes a parameter in mixed precision; ZeRO-1 shards the 12 over the
    data-parallel ranks); the activations of two sequence lengths from one function (Korthikanti Eq. 1 without
    recompute, t = 1, one stage: ``s b h (34 + 5 a s / h)`` a layer)."""
    builds = compiled.STATS["builds"]
    compose.state_parts_fn(1e9, "adam", "bf16", 1, True)
    assert compiled.STATS["builds"] == builds + 1
    builds = compiled.STATS["builds"]
    f = compose.state_parts_fn(7e9, "adam", "bf16", 1, True, replicated=1e9, frozen_weight_bytes=4e9)
    got = {k: float(v) for k, v in f(2, 1, 4).items()}
    assert compiled.STATS["builds"] == builds
    # 6e9 split over t = 2, 1e9 replicated; the frozen 4e9 bytes split over t
    assert got == pytest.approx({"weights": 2 * (3e9 + 1e9) + 2e9, "gradients": 2 * 4e9, "optimizer": 12 * 4e9 / 4},
                                rel=1e-12)
    compose.memory_fn(1e9, "adam", "bf16", 0, "1f1b", "none", False, (512, 768, 12, 12, 50_257, False, None), True,
                      context_algorithm="ulysses")
    builds = compiled.STATS["builds"]
    for s in (1024, 2048):
        fn = compose.memory_fn(1e9, "adam", "bf16", 0, "1f1b", "none", False, (s, 768, 12, 12, 50_257, False, None),
                               True, context_algorithm="ulysses")
        act = float(fn(2, 1, 1, 1, 1, 1)[1])
        layers = 12 * s * 2 * 768 * (34 + 5 * 12 * s / 768)
        embed_and_logits = s * 2 * 768 + 4 * s * 2 * 768 + 4 * s * 2 * 50_257  # Korthikanti §4.3, one stage
        assert act == pytest.approx(layers + embed_and_logits, rel=1e-12)
    assert compiled.STATS["builds"] == builds
