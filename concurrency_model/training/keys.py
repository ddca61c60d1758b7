"""What identifies a scenario's numbers, in a process and across processes (the keys of
:func:`.estimate.prepared`'s records, of :func:`.workload.workload`'s cache and of the sweep's plans): sympy-free, so
that a cached estimate computes its keys without building anything (issue 41).
"""
from __future__ import annotations

import json

from ..frontends.presets import preset_names
from ..scenario import Scenario


def model_key(model) -> str:
    """A hashable key for a model spec (zoo name, dict, or a graph object such as ``from_torch`` returns).

    >>> model_key("gpt2"), model_key({"layers": 2, "kind": "gpt"})
    ('gpt2', '{"kind": "gpt", "layers": 2}')
    """
    if isinstance(model, str):
        return model
    if isinstance(model, dict):
        return json.dumps(model, sort_keys=True, default=str)
    return f"object:{id(model)}"


def stable_model(model) -> bool:
    """Whether a model spec names the same model in every process, so that numbers built from it may be cached across
    processes (:mod:`concurrency_model.compiled`): a zoo name, or a spec (a family member, a shipped Hugging Face
    preset) without a file whose contents could change and without a built graph.

    >>> stable_model("gpt2"), stable_model({"hf_config": "/tmp/config.json"}), stable_model(object())
    (True, False, False)
    """
    if isinstance(model, str):
        return True
    if not isinstance(model, dict) or "onnx" in model:
        return False
    source = model.get("hf_config")
    if source is None:
        return True
    return isinstance(source, str) and source in preset_names()


def scenario_key(sc: Scenario) -> tuple:
    """What :func:`.prepare.prepare` and the step's inputs depend on: the model (:func:`model_key`), the cluster and
    every parallel and training field (all of them, not a list of those known to matter, so that a field added
    later can never read another scenario's numbers).

    >>> from concurrency_model.scenario import load_scenario
    >>> a, b = (scenario_key(load_scenario({"model": "gpt2", "training": {"straggler_cv": cv}})) for cv in (0.0, 0.1))
    >>> a[0], len(a), a == b
    ('gpt2', 4, False)
    """
    return (model_key(sc.model), repr(sc.cluster), repr(sorted(sc.parallel.to_dict().items())),
            repr(sorted(sc.training.to_dict().items())))


__all__ = ["model_key", "stable_model", "scenario_key"]
