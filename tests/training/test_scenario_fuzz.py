"""Bad input, fuzzed: a valid scenario with one field set to a hostile value either estimates finite, non-negative
numbers or raises a ``ValueError`` (CLI exit 2, one line), never another exception (a defect's signature: this
search found a ``TypeError`` for ``training.lora_base_dtype: []``, an ``OverflowError`` for a vocabulary of 10^30,
and ``model.image_size: 0`` silently taken as 224)."""
import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from concurrency_model.serving.decoder import infer
from concurrency_model.training.estimate import estimate
from concurrency_model.scenario import PARALLEL, TRAINING

GPT = {"kind": "gpt", "layers": 2, "hidden": 64, "heads": 4, "seq_len": 64, "vocab": 500}
TRAIN = {"model": GPT, "cluster": "dgx-a100",
         "parallel": {"data": 2, "tensor": 2, "pipeline": 2, "microbatch_size": 1, "global_batch": 8},
         "training": {"recompute": "selective", "zero_stage": 1}}
INFER = {"model": GPT, "cluster": "dgx-a100", "parallel": {"tensor": 2},
         "inference": {"batch": 4, "prompt_len": 32, "decode_len": 16, "batching": "continuous", "load_rps": 5,
                       "output_lengths": "geometric", "prefix_len": 8}}
HOSTILE = st.sampled_from([0, -1, 1.5, 3, 64, "x", "", None, [], {}, True, float("nan"), float("inf"), -0.5, 10**30,
                           "fp8", "ring", "interleaved"])
FIELDS = ([("parallel", k) for k in PARALLEL] + [("training", k) for k in TRAINING]
          + [("model", k) for k in GPT] + [("inference", k) for k in INFER["inference"]])


def _run(field, value):
    section, key = field
    sc = INFER if section == "inference" else TRAIN
    sc = {**sc, section: {**sc.get(section, {}), key: value}}
    return (infer if "inference" in sc else estimate)(sc), "prefill_s" if "inference" in sc else "step_time_s"


@settings(max_examples=300, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(FIELDS), HOSTILE)
def test_one_bad_field_is_a_value_error_or_a_finite_estimate(field, value):
    try:
        result, key = _run(field, value)
    except ValueError as e:
        assert str(e) and "\n" not in str(e)
        return
    out = result.to_dict()
    assert math.isfinite(out[key]) and out[key] >= 0
    assert all(math.isfinite(v) for v in out.values() if isinstance(v, float))


def test_one_value_where_a_list_is_asked_for_and_absurd_loads():
    """Found by the same search over the sweeps' own arguments (each was a TypeError, the load a loop that never
    ended: past 2**53 replicas, r and r + 1 are the same float)."""
    import pytest

    from concurrency_model.serving.capacity import serving_sweep
    from concurrency_model.serving.disaggregated import plan
    from concurrency_model.serving.queueing import replicas_for
    from concurrency_model.sweep import sweep
    serve = {**INFER, "inference": {k: v for k, v in INFER["inference"].items() if k != "load_rps"}}
    with pytest.raises(ValueError, match=r"^weights: expected a list, got 'int8'"):
        serving_sweep(serve, weights="int8")
    with pytest.raises(ValueError, match=r"^pipelines: expected a list, got 2"):
        serving_sweep(serve, pipelines=2)
    with pytest.raises(ValueError, match=r"^pipelines: expected a list, got 2"):
        plan({**serve, "inference": {"prompt_len": 32, "decode_len": 16}}, 5.0, pipelines=2)
    with pytest.raises(ValueError, match=r"^hardware: expected an object of scales"):
        sweep(TRAIN, 8, hardware=2)
    with pytest.raises(ValueError, match=r"^load_rps: 1e\+30 requests a second would take 2.5e\+29 replicas"):
        replicas_for(1e30, 4, 1.0, 0.0)
