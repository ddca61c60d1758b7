"""Every scenario field fed a value of the wrong type is refused with one line that names the field (issue 37,
"Bad input"): the parallel, training, inference and run sections, field by field, with three wrong types each."""
from __future__ import annotations

import pytest

from concurrency_model.scenario import INFERENCE, PARALLEL, RUN_FIELDS, TRAINING, load_scenario
from concurrency_model.serving.decoder import infer

WRONG = ([3, 4], {"a": 1}, "not-a-value")   # a list, an object and a string that is no field's choice


def training_raw(section: str, field: str, value) -> dict:
    raw = {"model": "gpt2", "cluster": "dgx-a100",
           "parallel": {"data": 2, "global_batch": 8}, "training": {}}
    if section == "run":
        raw["run"] = {"tokens": 1e9, field: value} if field != "tokens" else {"tokens": value}
    else:
        raw[section][field] = value
    return raw


def refused(call, field: str) -> str:
    with pytest.raises(ValueError) as e:
        call()
    msg = str(e.value)
    assert "\n" not in msg, msg
    assert field in msg, f"{field!r} not named in: {msg}"
    return msg


@pytest.mark.parametrize("value", WRONG, ids=("list", "object", "string"))
@pytest.mark.parametrize("field", list(PARALLEL))
def test_every_parallel_field_of_the_wrong_type_is_named(field, value):
    if field == "expert_imbalance" and value == "not-a-value":
        value = "skewed"   # a string is allowed there ("uniform"); an unknown one is not
    refused(lambda: load_scenario(training_raw("parallel", field, value)), f"parallel.{field}")


@pytest.mark.parametrize("value", WRONG, ids=("list", "object", "string"))
@pytest.mark.parametrize("field", list(TRAINING))
def test_every_training_field_of_the_wrong_type_is_named(field, value):
    refused(lambda: load_scenario(training_raw("training", field, value)), f"training.{field}")


@pytest.mark.parametrize("value", WRONG, ids=("list", "object", "string"))
@pytest.mark.parametrize("field", [f for f in RUN_FIELDS if f not in ("samples", "epochs")])
def test_every_run_field_of_the_wrong_type_is_named(field, value):
    refused(lambda: load_scenario(training_raw("run", field, value)), f"run.{field}")


@pytest.mark.parametrize("value", WRONG, ids=("list", "object", "string"))
@pytest.mark.parametrize("field", list(INFERENCE))
def test_every_inference_field_of_the_wrong_type_is_named(field, value):
    raw = {"model": "gpt2", "cluster": "dgx-a100",
           "inference": {"batch": 1, "prompt_len": 64, "decode_len": 8, field: value}}
    refused(lambda: infer(raw), f"inference.{field}")
