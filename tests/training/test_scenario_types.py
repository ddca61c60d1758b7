"""Every scenario field fed a value of the wrong type is refused with one line that names the field (issue 37,
"Bad input"): the parallel, training, inference and run sections, field by field, with three wrong types each."""
from __future__ import annotations

import sys
from dataclasses import replace

import pytest

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.scenario import (INFERENCE, PARALLEL, RUN_FIELDS, TRAINING, Inference, Parallel, Scenario,
                                        Training, load_scenario)
from concurrency_model.serving.decoder import infer, predict
from concurrency_model.training.estimate import estimate

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


# -- the checks of a field's own value (or of one section's fields) are made on load, before any model is built -------
SPEC = {"draft": "gpt2", "tokens": 4, "acceptance": 0.8}
# (section, the section's object, the one-line message the old call site raised, unchanged)
ON_LOAD = [
    ("parallel", {"pipeline": 4, "interleave": 2, "schedule": "interleaved", "global_batch": 6},
     "parallel.schedule: interleaved needs the 6 microbatches to be a multiple of pipeline=4"),
    ("training", {"lora_base_dtype": "nf4"},
     "training.lora_base_dtype: a quantized frozen base goes with adapters (training.lora_rank)"),
    ("inference", {"weight_dtype": "int3"},
     "inference.weight_dtype: unknown 'int3'; did you mean 'int8'?; allowed: fp32, fp16, bf16, fp8, int8, int4"),
    ("inference", {"weight_dtype": "nf4"},
     "inference.weight_dtype: unknown 'nf4'; allowed: fp32, fp16, bf16, fp8, int8, int4"),
    ("inference", {"weight_sparsity": "3:4"},
     "inference.weight_sparsity: '2:4' or a fraction of zeros in [0, 1), got '3:4'"),
    ("inference", {"weight_sparsity": 1.0},
     "inference.weight_sparsity: '2:4' or a fraction of zeros in [0, 1), got 1.0"),
    ("inference", {"weight_sparsity": 0.5, "weight_dtype": "int4"},
     "inference.weight_sparsity: pruning with weight_dtype 'int4' is not modelled; give one of the two"),
    ("inference", {"speculative": "fast"},
     "inference.speculative: expected an object with draft, tokens, acceptance"),
    ("inference", {"speculative": {"draft": "gpt2", "tokens": 4}},
     "inference.speculative.acceptance: missing; give draft, tokens, acceptance"),
    ("inference", {"speculative": {**SPEC, "temperature": 1}},
     "inference.speculative.temperature: unknown field; give draft, tokens, acceptance"),
    ("inference", {"speculative": {**SPEC, "tokens": 0}},
     "inference.speculative.tokens: must be a positive integer, got 0"),
    ("inference", {"speculative": {**SPEC, "acceptance": 1.5}},
     "inference.speculative.acceptance: must be a number in [0, 1], got 1.5"),
    ("inference", {"output_lengths": "unifrom"},
     "inference.output_lengths: unknown 'unifrom'; did you mean 'uniform'?; allowed: fixed, uniform, geometric"),
    ("inference", {"prompt_lengths": "poisson"},
     "inference.prompt_lengths: unknown 'poisson'; allowed: fixed, uniform, geometric"),
    ("inference", {"output_lengths": "geometric", "speculative": SPEC},
     "inference.output_lengths: unequal lengths with speculative decoding are not modelled"),
    ("inference", {"prompt_lengths": "uniform", "speculative": SPEC},
     "inference.prompt_lengths: unequal lengths with speculative decoding are not modelled"),
]


@pytest.fixture
def no_model(monkeypatch):
    """Every ``get_model`` the package's modules hold replaced by one that fails the test: a check that still
    needed the model would build it."""
    def built(*args, **kwargs):
        raise AssertionError("a model was built")
    for name, mod in list(sys.modules.items()):
        if name.startswith("concurrency_model") and callable(getattr(mod, "get_model", None)):
            monkeypatch.setattr(mod, "get_model", built)


@pytest.mark.parametrize("section, given, message", ON_LOAD, ids=[m.split(":")[0] + f"-{i}"
                                                                    for i, (_, _, m) in enumerate(ON_LOAD)])
def test_a_field_checked_on_load_before_any_model(section, given, message, no_model):
    raw = {"model": "gpt2", "cluster": "dgx-a100", section: given}
    with pytest.raises(ValueError) as e:
        load_scenario(raw)
    assert str(e.value) == message
    with pytest.raises(ValueError) as e:   # the section's class alone
        {"parallel": Parallel, "training": Training, "inference": Inference}[section].from_dict(given)
    assert str(e.value) == message
    if section == "inference":   # infer refuses it before it reads the model too
        with pytest.raises(ValueError) as e:
            infer(raw)
    else:   # the Python API: a Scenario made from dicts
        dicts = {"parallel": {}, "training": {}, section: given}
        with pytest.raises(ValueError) as e:
            Scenario("gpt2", load_cluster("dgx-a100"), dicts["parallel"], dicts["training"])
    assert str(e.value) == message


def test_the_moved_checks_pass_their_good_values(no_model):
    """The values next to the refused ones load: the checks refuse only what they name."""
    sc = load_scenario({"model": "gpt2", "parallel": {"pipeline": 4, "interleave": 2, "schedule": "interleaved",
                                                      "global_batch": 8},
                        "training": {"lora_rank": 8, "lora_base_dtype": "nf4"},
                        "inference": {"weight_sparsity": "2:4", "weight_dtype": "fp16", "speculative": SPEC}})
    assert (sc.microbatches, sc.training.lora_base_dtype) == (8, "nf4")
    inf = Inference.from_dict({"weight_dtype": "int4", "output_lengths": "geometric", "prompt_lengths": "uniform",
                               "weight_sparsity": None})
    assert (inf.weight_dtype, inf.output_lengths, inf.prompt_lengths) == ("int4", "geometric", "uniform")


@pytest.mark.parametrize("value", WRONG, ids=("list", "object", "string"))
@pytest.mark.parametrize("field", list(INFERENCE))
def test_every_inference_field_of_the_wrong_type_is_refused_by_its_class(field, value, no_model):
    """The inference section's class alone names every field fed the wrong type (before: weight_dtype,
    weight_sparsity, speculative, output_lengths and prompt_lengths waited for the model)."""
    refused(lambda: Inference.from_dict({field: value}), f"inference.{field}")


@pytest.mark.parametrize("kwargs, message", [
    ({"weight_dtype": "int3"}, ON_LOAD[2][2]),
    ({"weight_sparsity": "3:4"}, ON_LOAD[4][2]),
    ({"weight_sparsity": 0.5, "weight_dtype": "int4"}, ON_LOAD[6][2]),
    ({"speculative": {"draft": "gpt2", "tokens": 4}}, ON_LOAD[8][2]),
    ({"output_lengths": "geometric", "speculative": SPEC}, ON_LOAD[14][2]),
], ids=("weight_dtype", "sparsity", "sparsity-pairing", "speculative", "lengths"))
def test_the_python_api_below_the_file_refuses_with_the_same_message(kwargs, message):
    """predict, which takes the fields as arguments (no file, no class), still makes the moved checks."""
    with pytest.raises(ValueError) as e:
        predict("gpt2", "dgx-a100", 1, 64, 8, "fp16", **kwargs)
    assert str(e.value) == message


def test_a_parallel_built_in_code_meets_the_interleaved_check_when_estimated():
    sc = load_scenario({"model": "gpt2", "parallel": {"pipeline": 4, "global_batch": 8}})
    bad = replace(sc, parallel=replace(sc.parallel, schedule="interleaved", interleave=2, global_batch=6))
    with pytest.raises(ValueError) as e:
        estimate(bad)
    assert str(e.value) == ON_LOAD[0][2]
