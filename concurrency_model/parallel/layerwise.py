"""Krizhevsky's per-layer hybrid inside a scenario: ``parallel.tensor_layers = "fc"``.

"One weird trick" (Krizhevsky 2014, §3; the paper's §6.4, :mod:`.hybrid`): the convolutions run
data-parallel over all ``data x tensor`` devices, the fully connected layers model-parallel over each
tensor group. A tensor group's microbatch of ``b`` samples is shared by its ``t`` devices: each runs the
convolutions on its own ``b / t`` samples; the last convolutional activations are all-gathered in the
group, so that each device computes ``1 / t`` of every fully connected layer's neurons for all ``b``
samples (:mod:`~concurrency_model.models.channel_split`), and the gradient of the gathered activations is
reduce-scattered back (each device gets its own samples' gradient, summed over the neuron split). The
convolutions' weight gradients are all-reduced over all ``data x tensor`` devices, the fully connected
layers' ``1 / t`` over the ``data`` replicas of their group [D, the composition of :mod:`.hybrid`].
"""
from __future__ import annotations

from functools import cached_property

from ..models.channel_split import check_channel_split, gathers_input
from .data_parallel import BUCKET_BYTES, group_placement
from .hybrid import first_fc
from .memory import graph_activation_bytes, rematerialised_stage_bytes
from .triples import add_triples



class LayerwiseMixin:
    """The per-layer hybrid's parts of :class:`~.features.Workload` (which provides ``graph``, ``cluster``,
    ``grad_bytes``, ``_coll`` and ``tensor_layers``)."""

    @property
    def fc_only(self) -> bool:
        """Whether ``parallel.tensor`` splits the fully connected layers only (module doc)."""
        return self.tensor_layers == "fc"

    @cached_property
    def fc_boundary(self) -> int:
        """Index of the first fully connected layer: the layers before it are the convolutional part."""
        try:
            return first_fc(self.graph(1).layers())
        except ValueError:
            raise ValueError("parallel.tensor_layers: \"fc\" needs convolutional layers followed by fully connected "
                             "(and element-wise) layers only") from None

    def check_layerwise(self, t: int) -> None:
        """``ValueError`` naming ``parallel.tensor`` unless ``t`` divides every fully connected layer."""
        check_channel_split(self.graph(1).layers()[self.fc_boundary:], t)

    @cached_property
    def conv_params(self) -> float:
        """Parameters of the convolutional part (replicated on every device under the hybrid)."""
        return float(sum(n.cost.params for n in self.graph(1).layers()[:self.fc_boundary]))

    @property
    def replicated_params(self) -> float:
        """Parameters every device of a tensor group holds whole, the rest being split by the tensor degree
        (the hybrid's convolutions; at tensor 1 either way gives the same state)."""
        return self.conv_params if self.fc_only else 0.0

    def layerwise_gradients(self, t: int, d: int) -> tuple:
        """Triples ``(all-reduce, last bucket)`` of the hybrid's gradient synchronisation: the
        convolutions' over ``d t`` devices (their last 25 MiB bucket never hides), the fully connected
        layers' ``1 / t`` over ``d`` replicas."""
        gpn = self.cluster.gpus_per_node
        conv = self.conv_params * self.grad_bytes
        fc = (self.params - self.conv_params) / t * self.grad_bytes
        rpn, sharing = group_placement(gpn, 1, d * t)
        ar = self._coll("allreduce", conv, d * t, rpn, sharing)
        last = self._coll("allreduce", min(conv, BUCKET_BYTES), d * t, rpn, sharing)
        if d > 1:
            rpn, sharing = group_placement(gpn, t, d)
            ar = add_triples(ar, self._coll("allreduce", fc, d, rpn, sharing))
        return ar, last

    def activation_bytes(self, b: int, recompute: str, t: int) -> float:
        """Stored activation bytes of one microbatch of ``b`` samples on one device of a graph model (a
        CNN), split by channels over ``t`` devices (:func:`.memory.graph_activation_bytes`); under the
        hybrid, the convolutional part's for ``b / t`` samples and the fully connected part's for ``b``
        samples split by neurons (with ``full`` recompute the latter are kept, a few MB)."""
        if not (self.fc_only and t > 1):
            return float(graph_activation_bytes(self.graph(b), recompute, t))
        k = self.fc_boundary

        def fc_part(g, split):
            return sum(float(n.cost.forward.act_bytes) / (1 if gathers_input(n) else split) for n in g.layers()[k:])
        own = self.graph(b // t)
        return float(graph_activation_bytes(own, recompute)) - fc_part(own, 1) + fc_part(self.graph(b), t)

    def rematerialised_bytes(self, b: int, t: int, stages, m: int) -> float | None:
        """Stored activation bytes of the busiest of ``stages`` of a graph model under GPipe's re-materialisation
        (:func:`.memory.rematerialised_stage_bytes`: each stage's input for the ``m`` microbatches of ``b`` samples,
        and one microbatch's activations of the stage); None under Krizhevsky's hybrid (``t`` > 1 splitting only
        the fully connected layers), whose two parts hold their microbatches differently."""
        if self.fc_only and t > 1:
            return None
        return float(rematerialised_stage_bytes(self.graph(b), stages, m, t))
