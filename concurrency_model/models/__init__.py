"""The model zoo: ``get_model(name_or_spec, batch=1)`` returns a :class:`~concurrency_model.graph.Graph`.

Names (DESIGN.md): lenet5, alexnet, vgg16, googlenet, inception_v3, resnet50, resnet101, resnet152, densenet121,
mobilenet_v2, vit_b_16, bert-base, bert-large, gpt2, gpt3-175b, lstm-lm. A spec object builds a family
member: ``{"kind": "gpt", "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 50257}``,
``{"kind": "bert", ...}``, a fully connected network ``{"kind": "mlp", "inputs": 429, "hidden": 2048,
"layers": 7, "outputs": 9304}`` or a CNN by name with its ``image_size``: ``{"name": "resnet50", "image_size": 128}``.
Models from elsewhere (:mod:`concurrency_model.frontends`): ``{"hf_config": path_or_dict_or_preset, "seq_len": ...}``,
``{"onnx": path, "input_shapes": {"input": [1, 3, 224, 224]}}``, or in Python a graph (from
``from_torch``, ``from_onnx``, ``from_hf_config`` or this function), rebuilt for the batch asked for.
"""
from __future__ import annotations

import copy
import json
from collections import OrderedDict
from functools import partial
from typing import Callable

import sympy as sp

from ..checks import count, did_you_mean
from ..graph import Graph
from . import cnn, mlp, rnn, transformer
from .builder import Builder

IMAGE_MODELS: dict[str, Callable] = {
    "lenet5": cnn.lenet5,
    "alexnet": cnn.alexnet,
    "vgg16": cnn.vgg16,
    "googlenet": cnn.googlenet,
    "inception_v3": cnn.inception_v3,
    "resnet50": partial(cnn.resnet, blocks=(3, 4, 6, 3)),
    "resnet101": partial(cnn.resnet, blocks=(3, 4, 23, 3)),
    "resnet152": partial(cnn.resnet, blocks=(3, 8, 36, 3)),
    "resnext50_32x4d": partial(cnn.resnet, blocks=(3, 4, 6, 3), groups=32, width_per_group=4),
    "resnext101_32x4d": partial(cnn.resnet, blocks=(3, 4, 23, 3), groups=32, width_per_group=4),
    "se_resnext101_32x4d": partial(cnn.resnet, blocks=(3, 4, 23, 3), groups=32, width_per_group=4, se_reduction=16),
    "densenet121": cnn.densenet121,
    "mobilenet_v2": cnn.mobilenet_v2,
    "vit_b_16": transformer.vit,
}
SEQUENCE_MODELS: dict[str, Callable] = {
    "bert-base": partial(transformer.bert, layers=12, hidden=768, heads=12),
    "bert-large": partial(transformer.bert, layers=24, hidden=1024, heads=16),
    "gpt2": partial(transformer.gpt, layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257),
    "gpt3-175b": partial(transformer.gpt, layers=96, hidden=12288, heads=96, seq_len=2048, vocab=50257),
    "lstm-lm": rnn.lstm_lm,
}
FAMILIES = {"gpt": transformer.gpt, "bert": transformer.bert, "mlp": mlp.mlp}
NAMES = (*IMAGE_MODELS, *SEQUENCE_MODELS)
DEFAULT_IMAGE_SIZE = {"lenet5": 32, "inception_v3": 299}


def get_model(model, batch=1, image_size: int | None = None, value_bytes=4, **options) -> Graph:
    """Build a zoo model or a family member as a graph for ``batch`` samples.

    ``batch`` may be a positive integer sympy symbol (``concurrency_model.symbols.N``) for what-if
    expressions. ``options`` go to the builder function (``seq_len``, ``fused_attention``, ...).

    >>> get_model("resnet50").params
    25557032
    >>> get_model({"hf_config": "mistral-7b", "seq_len": 2048}).params
    7241732096
    """
    if isinstance(model, Graph):
        return _reuse(model, batch, value_bytes, image_size, options)
    key = _cache_key(model, batch, image_size, value_bytes, options)
    if key in _BUILT:
        _BUILT.move_to_end(key)
        return _BUILT[key]
    g = _build(model, batch, image_size, value_bytes, options)
    # a copy: the graph may be handed to other callers, whose spec the first caller's later edits must not change
    g.rebuild = partial(_build, copy.deepcopy(model), image_size=image_size, options=dict(options))
    if key is not None:
        _BUILT[key] = g
        _NODES[0] += len(g.nodes)
        while len(_BUILT) > 1 and (len(_BUILT) > CACHE_SIZE or _NODES[0] > CACHE_NODES):  # the least recently used
            _NODES[0] -= len(_BUILT.popitem(last=False)[1].nodes)
    return g


# graphs kept, the least recently used dropped first: a serving search prices the same model at a few hundred
# batches and sequence lengths, and comes back to most of them (a replica's prompt pass in every iteration, the
# answer after the memory's probes, the sweep's rows after its largest batches); at most CACHE_SIZE graphs and
# CACHE_NODES nodes in all (about 0.8 kB a node: Llama 3.1 405B's 1,642 nodes take 1.3 MB, measured with tracemalloc)
CACHE_SIZE = 256
CACHE_NODES = 150_000
_BUILT: OrderedDict = OrderedDict()
_NODES = [0]  # the nodes of the graphs in _BUILT


def _cache_key(model, batch, image_size, value_bytes, options) -> str | None:
    """The key of a built graph that cannot change between calls (graphs are never changed once built): a zoo
    name, a family spec or a shipped Hugging Face preset, at a numeric batch; ``None`` (built afresh) for files
    (an ONNX model or a config on disk may change), symbolic batches and anything not JSON."""
    if not isinstance(batch, int) or isinstance(batch, bool):
        return None
    if isinstance(model, dict):
        source = model.get("hf_config")
        if "onnx" in model or (isinstance(source, str) and not _hf_preset(source)):
            return None
    try:
        return json.dumps([model, batch, image_size, value_bytes, options], sort_keys=True, allow_nan=False)
    except (TypeError, ValueError):
        return None


def _hf_preset(name: str) -> bool:
    from ..frontends.hf import preset_names
    return name in preset_names()


def _reuse(g: Graph, batch, value_bytes, image_size, options) -> Graph:
    """A graph given as the model: itself when built for this batch and value size, else rebuilt."""
    given = [*options, *(["image_size"] if image_size is not None else [])]
    if given:
        raise ValueError(f"model: a built graph cannot take {', '.join(given)}; build the graph with them")
    if sp.sympify(batch) == g.batch and value_bytes == g.value_bytes:
        return g
    rebuild = getattr(g, "rebuild", None)
    if rebuild is None:
        raise ValueError(f"model: graph {g.name!r} was built for batch {g.batch} and {g.value_bytes}-byte values and "
                         "cannot be rebuilt; build it for the batch asked for")
    out = rebuild(batch=batch, value_bytes=value_bytes)
    out.rebuild = rebuild
    return out


def _frontend(spec: dict, batch, value_bytes, options) -> Graph:
    what = "hf_config" if "hf_config" in spec else "onnx"
    source = spec.pop(what)
    if what == "hf_config":
        from ..frontends.hf import from_hf_config as load
    else:
        from ..frontends.onnx_import import from_onnx as load
    try:
        return load(source, batch=batch, value_bytes=value_bytes, **{**spec, **options})
    except TypeError as e:
        raise ValueError(f"model: bad field for {what}: {e}") from None


def _build(model, batch=1, image_size=None, value_bytes=4, options=None) -> Graph:
    options = options or {}
    if isinstance(model, dict) and ("hf_config" in model or "onnx" in model):
        if image_size is not None:
            raise ValueError("image_size: give the input shape of an imported model in its spec")
        return _frontend(dict(model), batch, value_bytes, options)
    if isinstance(model, dict):
        spec = dict(model)
        kind = spec.pop("kind", None) or spec.pop("name", None)
        if kind in FAMILIES:
            b = Builder(kind, batch, value_bytes)
            try:
                FAMILIES[kind](b, **spec, **options)
            except TypeError as e:
                raise ValueError(f"model: bad field for kind {kind!r}: {e}") from None
            return b.graph
        if kind in NAMES:
            image_size = spec.pop("image_size", image_size)
            return _build(kind, batch, image_size, value_bytes, {**spec, **options})
        raise ValueError(f"model.kind: unknown {kind!r}{did_you_mean(kind, (*FAMILIES, *NAMES))}; allowed: "
                         f"{', '.join((*FAMILIES, *NAMES))}")
    if not isinstance(model, str) or model not in NAMES:
        from ..frontends.hf import preset_names
        hint = (f'; {model!r} is a Hugging Face config preset: {{"hf_config": "{model}"}}'
                if model in preset_names() else f"; or {{\"hf_config\": NAME}} with NAME one of {', '.join(preset_names())}")
        raise ValueError(f"model: unknown {model!r}{did_you_mean(model, NAMES)}; allowed: {', '.join(NAMES)}{hint}")
    b = Builder(model, batch, value_bytes)
    try:
        if model in IMAGE_MODELS:
            size = DEFAULT_IMAGE_SIZE.get(model, 224) if image_size is None else count("model.image_size", image_size)
            try:
                IMAGE_MODELS[model](b, image_size=size, **options)
            except ValueError as e:  # a layer's window over a feature map the input made too small
                why = str(e).removeprefix("image_size: ")
                raise ValueError(f"model.image_size: {model} cannot take {size}x{size} inputs ({why})") from None
        else:
            if image_size is not None:
                raise ValueError(f"image_size: {model} takes token sequences, not images")
            SEQUENCE_MODELS[model](b, **options)
    except TypeError as e:  # an option the model does not take
        raise ValueError(f"model: bad field for {model!r}: {e}") from None
    return b.graph


__all__ = ["get_model", "Builder", "NAMES", "FAMILIES"]
