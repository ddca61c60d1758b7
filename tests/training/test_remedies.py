"""A refusal for memory says what would fit, and what it says is true: each suggested setting, applied, gives a
configuration that fits with the bytes quoted (training: :mod:`concurrency_model.training.remedies`; serving:
:func:`concurrency_model.serving.overheads.fits_with`). Fused attention stores no scores (FlashAttention)."""
import re

import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.serving.decoder import infer
from concurrency_model.parallel.memory import transformer_activation_bytes
from concurrency_model.scenario import with_settings

# the analysis' bytes alone (training.framework "ideal"), so that the figures below are the hand-checked ones; a
# runtime's buffers and the allocator's band are tested in tests/training/test_allocator.py
IDEAL = {"framework": "ideal"}
GPT3 = {"model": "gpt3-175b", "cluster": "dgx-a100",
        "parallel": {"data": 16, "tensor": 8, "pipeline": 8, "global_batch": 512}, "training": IDEAL}


def refusal(fn, scenario) -> str:
    with pytest.raises(ValueError, match=r"^memory: ") as err:
        fn(scenario)
    message = str(err.value)
    assert "\n" not in message
    return message


def suggestions(message: str) -> list[tuple[str, float]]:
    """``(setting, GB)`` of each ``KEY=VALUE (x GB)`` after "fits with"."""
    return [(k, float(gb)) for k, gb in re.findall(r"((?:[\w.]+=\w+ )*[\w.]+=\w+) \(([\d.]+) GB\)",
                                                  message.split("fits with")[1])]


def test_each_single_change_named_fits_with_the_bytes_quoted():
    message = refusal(estimate, GPT3)  # 99.2 GB a device
    found = suggestions(message)
    # one change of each kind: a fused attention kernel (GPT-3's attention writes its scores), sequence parallelism,
    # the lowest ZeRO stage and the lightest recompute that fit, and the same 1,024 GPUs as twice the stages and half
    # the replicas (twice the tensor degree would leave the node)
    assert [k for k, _ in found] == ["model.fused_attention=true", "parallel.sequence_parallel=true",
                                     "training.zero_stage=1", "training.recompute=selective",
                                     "parallel.pipeline=16 parallel.data=8"]
    for setting, gb in found:
        e = estimate(with_settings(GPT3, setting.split()))
        assert e.memory_bytes_per_device / 1e9 == pytest.approx(gb, abs=0.05)
        assert e.memory_bytes_per_device <= 80e9


def test_the_fewest_changes_that_fit_together_when_no_single_one_does():
    sc = with_settings(GPT3, ["parallel.data=128", "parallel.tensor=1", "parallel.microbatch_size=2"])
    # DeepSpeed (the runtime ZeRO-2 and -3 imply) does not run them with pipeline stages: not suggested
    ds = refusal(estimate, with_settings(sc, ["training.framework=deepspeed"]))
    assert "zero_stage=2" not in ds and "zero_stage=3" not in ds
    message = refusal(estimate, sc)  # the analysis alone (GPT3 pins framework ideal) runs them with pipelines
    together = re.search(r"no single change fits, together (.+) do \(([\d.]+) GB\)$", message)
    settings_ = together.group(1).split(" and ")
    assert settings_ == ["training.zero_stage=2", "training.recompute=full"]
    assert estimate(with_settings(sc, settings_)).memory_bytes_per_device / 1e9 == pytest.approx(
        float(together.group(2)), abs=0.05)
    for dropped in settings_:  # each of them is needed
        refusal(estimate, with_settings(sc, [x for x in settings_ if x != dropped]))
    refusal(estimate, with_settings(sc, ["training.zero_stage=1", "training.recompute=full"]))  # and as strong


def test_more_devices_when_nothing_fits():
    sc = with_settings(GPT3, ["parallel.data=1", "parallel.pipeline=1", "parallel.global_batch=8"])  # 175B on 8
    message = refusal(estimate, sc)
    assert message.endswith("(with parallel.sequence_parallel=true training.recompute=full: 349.9 GB): split the "
                            "model over more devices (parallel.tensor or parallel.pipeline)")
    assert "zero_stage" not in message  # one replica: nothing to shard over


def test_no_zero_where_the_scenario_does_not_model_it():
    """Compressed gradients are modelled with ZeRO 0 (load_scenario refuses the pair): not suggested."""
    message = refusal(estimate, with_settings(GPT3, ["training.compression=\"int8\""]))
    assert "zero_stage" not in message and "training.recompute=selective" in message


@settings(max_examples=40, deadline=None)
@given(s=st.sampled_from([512, 2048, 8192]), b=st.integers(1, 8), heads=st.sampled_from([8, 32, 96]),
       t=st.sampled_from([1, 2, 8]), sp=st.booleans())
def test_fused_attention_stores_what_selective_recompute_keeps(s, b, heads, t, sp):
    h = 128 * heads
    fused = transformer_activation_bytes(s, b, h, heads, t, sp, "none", fused_attention=True)
    assert fused == transformer_activation_bytes(s, b, h, heads, t, sp, "selective")
    assert fused < transformer_activation_bytes(s, b, h, heads, t, sp, "none")  # the 5 a s / h term is gone
    assert transformer_activation_bytes(s, b, h, heads, t, sp, "full", fused_attention=True) == \
        transformer_activation_bytes(s, b, h, heads, t, sp, "full")


def test_a_fused_model_needs_no_selective_recompute_for_memory():
    sc = {"model": {"kind": "gpt", "layers": 24, "hidden": 2048, "heads": 16, "seq_len": 4096,
                    "fused_attention": True},
          "cluster": "dgx-a100", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 2}}
    none, selective = (estimate(with_settings(sc, [f"training.recompute={r}"])) for r in ("none", "selective"))
    assert none.memory["activations_bytes"] == pytest.approx(selective.memory["activations_bytes"], rel=1e-12)
    unfused = estimate(with_settings(sc, ["model.fused_attention=false", "training.recompute=selective"]))
    assert unfused.memory["activations_bytes"] == pytest.approx(selective.memory["activations_bytes"], rel=1e-12)


LLAMA = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-a100", "inference": {"batch": 512}}


def test_serving_kv_cache_over_memory_points_to_a_smaller_batch():
    message = refusal(infer, LLAMA)
    assert message.endswith("fits with a smaller inference.batch (infer --max-batch gives the largest that fits)")


def test_serving_weights_over_memory_name_the_weight_format_that_fits():
    sc = {"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"tensor": 2}, "inference": {"batch": 1}}
    message = refusal(infer, sc)
    (setting, gb), = suggestions(message)
    assert setting == "inference.weight_dtype=int4"  # 175 GB of fp16 weights a device: int8 is not enough
    assert infer(with_settings(sc, [setting])).memory_bytes_per_device / 1e9 == pytest.approx(gb, abs=0.05)
    assert refusal(infer, with_settings(sc, ["parallel.tensor=1"])).endswith(
        "split the weights over more devices (parallel.tensor or parallel.pipeline)")


def test_a_cnn_gets_the_largest_microbatch_that_fits_and_no_selective_recompute():
    sc = {"model": "resnet50", "cluster": "dgx-a100",
          "parallel": {"data": 8, "microbatch_size": 4096, "global_batch": 32768}, "training": IDEAL}
    message = refusal(estimate, sc)
    assert "selective" not in message  # outside attention selective recompute stores what none does
    (setting, gb), = suggestions(message)
    assert setting == "parallel.microbatch_size=1024"
    assert estimate(with_settings(sc, [setting])).memory_bytes_per_device / 1e9 == pytest.approx(gb, abs=0.05)
    refusal(estimate, with_settings(sc, ["parallel.microbatch_size=2048"]))


def test_the_same_devices_split_otherwise():
    """Llama-2-7B on 8 A100s, data-parallel, two sequences a microbatch: 108 GB of model state (16 bytes a parameter)
    and 104 GB of activations a GPU; neither ZeRO nor recompute alone fits, tensor parallelism over 4 of the 8 GPUs
    does."""
    sc = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-a100",
          "parallel": {"data": 8, "microbatch_size": 2, "global_batch": 64}, "training": IDEAL}
    (setting, gb), = suggestions(refusal(estimate, sc))
    assert setting == "parallel.tensor=4 parallel.data=2"
    e = estimate(with_settings(sc, setting.split()))
    assert e.scenario.gpus == 8 and e.memory_bytes_per_device / 1e9 == pytest.approx(gb, abs=0.05)
    refusal(estimate, with_settings(sc, ["parallel.tensor=2", "parallel.data=4"]))  # the smallest that fits


def test_a_fused_attention_is_named_only_where_the_attention_writes_its_scores():
    fused = with_settings(GPT3, ["model.fused_attention=true"])  # the zoo name becomes {"name": ..., ...}
    assert fused["model"] == {"name": "gpt3-175b", "fused_attention": True}
    big = ["parallel.data=128", "parallel.tensor=1", "parallel.microbatch_size=2"]
    assert "model.fused_attention" not in refusal(estimate, with_settings(fused, big))
    # unfused, the same layout names it exactly when the fused model's upper end fits
    message = refusal(estimate, with_settings(GPT3, big))
    named = dict(suggestions(message)) if "fits with" in message else {}
    try:
        e = estimate(with_settings(fused, big))
        fits = e.memory_bytes_per_device <= 80e9 and not e.memory_at_risk
    except ValueError:
        fits = False
    assert ("model.fused_attention=true" in named) == fits
