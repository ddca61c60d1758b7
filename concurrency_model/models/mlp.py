"""Fully connected networks (multilayer perceptrons): the paper's fully connected layers (§4.1) as a whole
network, the form of the speech acoustic models that the first distributed-training systems scaled (the
context-dependent DNN of Seide, Li & Yu 2011: 429 inputs, 7 sigmoid hidden layers of 2048 units, 9304
outputs, as recalled) and that sufficient-factor broadcasting targets. The output layer gives logits, as the
CNNs of the zoo do; tensor parallelism splits every layer by its outputs (the paper's §6.2 fully connected
model parallelism).

``{"kind": "mlp", "inputs": 429, "hidden": 2048, "layers": 7, "outputs": 9304}``; ``hidden`` may be a list
of widths (then ``layers`` is its length).
"""
from __future__ import annotations

from ..checks import count
from .builder import MAX_LAYERS, Builder


def mlp(b: Builder, inputs: int, outputs: int, hidden=2048, layers: int = 7, activation: str = "sigmoid") -> str:
    for name, v in (("inputs", inputs), ("outputs", outputs), ("layers", layers)):
        count(f"model.{name}", v, low=0 if name == "layers" else 1, high=MAX_LAYERS if name == "layers" else None)
    widths = list(hidden) if isinstance(hidden, (list, tuple)) else [hidden] * layers
    for i, w in enumerate(widths):
        count(f"model.hidden[{i}]" if isinstance(hidden, (list, tuple)) else "model.hidden", w)
    x = b.input((inputs,))
    for i, w in enumerate(widths):
        x = b.act(b.linear(x, w, name=f"fc{i + 1}"), activation)
    return b.linear(x, outputs, name="output")  # logits, as the CNNs of the zoo (the loss is not a layer)
