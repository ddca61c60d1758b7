"""The paper's model parallelism for networks without transformer blocks: every layer's neurons or
filters split over the ``t`` devices of a tensor group (Ben-Nun & Hoefler §6.2, Fig. 15b; the cost model
is paper-models §4.2 [D]).

* A convolution (``groups = 1``) or fully connected layer computes ``c_out / t`` filters or neurons from
  its whole input: an allgather of the input forward, unless the input is replicated (the image, or
  anything computed before the first weighted layer), and a reduce-scatter of the partial ∇x backward
  (each device keeps its own channels' share). The gathered input is stored for ∇w.
* A grouped convolution whose ``groups`` the degree divides runs ``groups / t`` whole groups on the
  channels the device already holds: no communication (MobileNet's depthwise layers).
* Every other layer of a CNN is channel-local (activations, batch norm's per-channel statistics,
  pooling, dropout, residual adds, channel concatenation, flatten) and works on the device's ``1 / t``
  of the channels.

Layers that mix channels in another way (layer or RMS norm, softmax, recurrent cells, attention,
embeddings, reshapes) are refused: their split is not this one. Transformer blocks keep Megatron's
column / row split (:func:`.transformer.check_tensor_split`).
"""
from __future__ import annotations

from ..ops.elementwise import ACTIVATIONS

CHANNEL_LOCAL = frozenset({"batch_norm", "dropout", "add", "concat", "maxpool", "avgpool", "flatten"}) | \
    frozenset(ACTIVATIONS)


def is_channel_split(layers) -> bool:
    """Whether ``parallel.tensor`` splits these layers by channels (no layer carries Megatron's split)."""
    return not any(n.attrs.get("split") for n in layers)


def grouped(node) -> bool:
    """A convolution with more than one group (split by whole groups, no communication)."""
    return node.kind == "conv2d" and node.attrs["groups"] > 1


def gathers_input(node) -> bool:
    """A layer whose every output channel reads every input channel (a dense convolution, a fully
    connected layer): its input is gathered forward and its ∇x reduce-scattered backward."""
    return node.kind == "linear" or (node.kind == "conv2d" and not grouped(node))


def check_channel_split(layers, t: int) -> None:
    """``ValueError`` naming ``parallel.tensor`` unless every layer is channel-local or splits by
    channels and ``t`` divides every split layer's outputs (and a grouped convolution's groups)."""
    for n in layers:
        if n.kind == "conv2d" or n.kind == "linear":
            c_out = n.attrs["c_out"]
            if c_out % t:
                raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {c_out} output channels")
            if grouped(n) and n.attrs["groups"] % t:
                raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {n.attrs['groups']} groups")
        elif n.kind not in CHANNEL_LOCAL:
            raise ValueError(f"parallel.tensor: {t} > 1 splits convolutions and fully connected layers by channels; "
                             f"{n.name} ({n.kind}) mixes channels and has no such split")


def replicated(graph) -> set[str]:
    """Nodes whose output every device of a tensor group holds whole: graph inputs and what is computed
    from them before the first weighted layer (the outputs of weighted layers and after are split)."""
    req = graph._requires_grad()
    return {name for name, r in req.items() if not r}
