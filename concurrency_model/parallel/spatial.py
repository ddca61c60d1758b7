"""Spatial (domain) parallelism of a CNN: ``parallel.context`` on a network of feature maps.

The paper's spatial split (§6.2, paper-models §4.2 [D]; as :func:`.model_parallel.spatial_split` per
layer; Dryden et al. 2019, "Improving Strong-Scaling of CNN Training by Exploiting Finer-Grained
Parallelism", for whole networks): each of ``c`` devices holds ``ceil(H / c)`` rows of every feature map of
its samples, the weights whole. Per microbatch [D]:

* a convolution or pooling whose window reaches past the device's rows receives :func:`halo_rows` rows of
  its input from its neighbours before it runs, and sends the same rows of partial ∇x back after its
  backward pass (one exchange for ``c = 2``, one with the upper and one with the lower neighbour for
  ``c >= 3``, as :func:`.model_parallel.spatial_split`), every device at once;
* batch norm all-reduces its ``2 C`` statistics (fp32) over the group in both passes, so that each
  sample is normalized over its whole feature map, as on one device;
* where the rows end (a global pooling to one row, or a flatten before the fully connected layers) the
  pooled values are all-reduced, or the flattened map all-gathered, over the group; what follows runs whole
  on every device of the group (its ∇x needs no communication: each device keeps its rows);
* element-wise layers, residual adds and channel concatenation work on the device's rows.

With ``tensor`` > 1 as well (the channel split of :mod:`~concurrency_model.models.channel_split`; Dryden
et al. 2019, SC19, "Channel and Filter Parallelism for Large-Scale CNN Training", combine the two), every
exchange above carries the device's ``1 / t`` of the channels, and each convolution gathers its input's
channels for the device's rows only.

The image is read by rows (with its halo) from the input pipeline: no communication. The weights'
gradients are partial sums over rows and are all-reduced with the data-parallel ones over ``data x
context`` ranks (:mod:`.data_parallel`), as context parallelism does. All of it is on the critical path
(``context_parallel_comm_s``). Each device stores ``1 / c`` of the activations (those of the layers after
the rows end, a few MB of fully connected features, are counted as split too).
"""
from __future__ import annotations

import math
from functools import cached_property

from ..models.channel_split import CHANNEL_LOCAL
from .triples import ZERO_TRIPLE, add_triples
from .data_parallel import STAT_BYTES
from .model_parallel import halo_rows

WINDOWED = ("conv2d", "maxpool", "avgpool")


def spatial_rows(graph, c: int) -> tuple[dict, dict]:
    """``{node: rows per device}`` of the nodes split by rows over ``c`` devices, and ``{node: "reduce" |
    "gather"}`` where the rows end; ``ValueError`` naming ``parallel.context`` where a layer cannot be split
    this way or has fewer output rows than devices."""
    split, ends = {}, {}
    for name, n in graph.nodes.items():
        if n.cost is None:
            if len(n.shape) == 3 and n.shape[1] >= c:
                split[name] = -(-n.shape[1] // c)
            continue
        ins = [i in split for i in n.inputs]
        if not any(ins):
            continue
        if not all(ins):
            raise ValueError(f"parallel.context: {n.name} mixes a split feature map with a whole one")
        if n.kind == "flatten":
            ends[name] = "gather"
        elif n.kind in ("maxpool", "avgpool") and n.shape[1] == 1:
            ends[name] = "reduce"
        elif n.kind in WINDOWED or n.kind in CHANNEL_LOCAL:
            if n.shape[1] < c:
                raise ValueError(f"parallel.context: {c} devices exceed the {n.shape[1]} rows of {n.name}'s output")
            if n.kind in WINDOWED:
                _geometry(n)
            split[name] = -(-n.shape[1] // c)
        else:
            raise ValueError(f"parallel.context: {c} > 1 splits a CNN's feature maps by rows; {n.name} ({n.kind}) "
                             f"has no such split")
    if not split:
        raise ValueError(f"parallel.context: {c} > 1 splits a transformer's sequences or a CNN's feature maps; "
                         "this model has neither")
    return split, ends


def _geometry(n) -> tuple:
    """``(kh, stride, pad, dilation)`` of a windowed node's height."""
    a = n.attrs
    if "kh" not in a:
        raise ValueError(f"parallel.context: {n.name} ({n.kind}) does not record its window; its halo is unknown")
    return a["kh"], a["stride"][0], a["pad"][0], a.get("dilation", (1, 1))[0]


class SpatialMixin:
    """The spatial-parallel parts of :class:`~.features.Workload` (which provides ``graph``, ``cluster``,
    ``vb``, ``_coll`` and, from :class:`~.context.ContextMixin`, ``_ring_triple``)."""

    @cached_property
    def spatial(self) -> bool:
        """Whether ``parallel.context`` splits this model's feature maps (images in, no attention)."""
        g = self._graph(1, 1)
        return any(n.cost is None and len(n.shape) == 3 for n in g.nodes.values()) and \
            not any(n.kind == "attention" for n in g.layers())

    def check_spatial(self, c: int, t: int, algorithm: str) -> None:
        """``ValueError`` naming the field unless ``c`` devices can split every feature map by rows (a channel
        split over ``t`` may come on top; the scenario refuses Krizhevsky's hybrid with it)."""
        if algorithm != "ring":
            raise ValueError(f"parallel.context_algorithm: {algorithm!r} is for attention; a CNN's spatial split "
                             "exchanges halos (leave it at ring)")
        spatial_rows(self.graph(1), c)

    def spatial_comm(self, node, b: int, t: int, c: int, split: dict, ends: dict, needs_grad_input: bool) -> tuple:
        """Triples ``(forward, backward)`` of one layer's communication in a spatial split (module doc); with
        a channel split over ``t`` as well each device exchanges its ``1 / t`` of the channels."""
        rpn, sharing = self._context_group(t, c)
        if node.name in ends:
            src = node.inputs[0]
            nbytes = b * math.prod(self.graph(1).nodes[src].shape if ends[node.name] == "gather" else node.shape) \
                * self.vb / t
            op = "allgather" if ends[node.name] == "gather" else "allreduce"
            return self._coll(op, nbytes, c, rpn, sharing), ZERO_TRIPLE
        if node.name not in split:
            return ZERO_TRIPLE, ZERO_TRIPLE
        if node.kind == "batch_norm":
            one = self._coll("allreduce", float(2 * node.shape[0] * STAT_BYTES / t), c, rpn, sharing)
            return one, one
        if node.kind not in WINDOWED:
            return ZERO_TRIPLE, ZERO_TRIPLE
        src = self.graph(1).nodes[node.inputs[0]]
        if src.cost is None:  # the image: each device reads its rows and their halo from the input pipeline
            return ZERO_TRIPLE, ZERO_TRIPLE
        top, bottom = halo_rows(*_geometry(node))
        x = src.shape
        row = b * x[0] * x[2] * self.vb / t
        sends = [max(top, bottom)] if c == 2 else [top, bottom]
        fwd = ZERO_TRIPLE
        for rows in sends:
            if rows:
                fwd = add_triples(fwd, self._ring_triple(rows * row, t, c))
        return fwd, fwd if needs_grad_input else ZERO_TRIPLE
