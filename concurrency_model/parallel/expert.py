"""Expert parallelism in ``estimate``: the experts of every mixture-of-experts layer split over ``e`` devices.

Degree ``e`` (``parallel.expert``; GShard, Lepikhin et al. 2021 §2.2-2.3; Switch Transformer, Fedus et al.
2022 §2.2 and §5.4; DeepSpeed-MoE, Rajbhandari et al. 2022 §4): an expert group is ``e`` of the ``d``
data-parallel replicas (it sits inside the data-parallel group, consecutive ranks, so inside a node when it
fits), each device holding ``E / e`` of the ``E`` experts of every MoE layer. Per MoE layer and microbatch,
derived [D] with balanced routing (dropless, or with the fixed-capacity buffers of a model built with a
``capacity_factor``, whose padded rows the dispatch node carries), or without buffers at the busiest device's
rows, ``parallel.expert_imbalance`` times the mean (:mod:`concurrency_model.routing`; dropped tokens under a
capacity are in :func:`.model_parallel.expert_parallel`):

* an all-to-all dispatches every routed token (``top_k`` copies of each of the device's ``b s`` tokens, ``h``
  values each) to the device that holds its expert, and one returns the experts' outputs (combine): two
  all-to-alls of ``b s top_k h`` values per device forward, their gradients backward, two more in a
  recomputed forward; with tensor parallelism ``t`` each tensor rank sends ``1/t`` of them (the ``t``
  groups share the node's links). They are on the critical path (the experts wait for their tokens);
* the experts' work per device is unchanged: each device still runs ``b s top_k`` routed rows;
* the experts' weights, gradients and optimizer state are divided by ``e`` (:meth:`ExpertMixin.state_params`);
* the non-expert gradients are all-reduced over the ``d`` replicas, the expert gradients over the ``d / e``
  replicas that hold the same experts (every ``e``-th one).

With ZeRO 1 (Megatron-Core's distributed optimizer, ``use_distributed_optimizer``) the optimizer state is sharded
over the group that holds the same weights: the non-expert parameters' over the ``d`` data-parallel ranks, the
experts' over the ``d / e`` expert-data-parallel ranks (NVIDIA/Megatron-LM @ core_v0.12.0
``megatron/core/distributed/distributed_data_parallel.py``: the expert parameters' buffers are built over
``expert_data_parallel_group``, the others over the data-parallel group; the distributed optimizer shards each
buffer over its own group). A device so keeps ``K (P_dense + P_experts / e) / d_dense-shards`` less than ZeRO 0:
``K P_dense / d + K (P_experts / e) / (d / e) = K (P_dense + P_experts) / d`` per model-parallel shard [D]
(:meth:`ExpertMixin.expert_optimizer_extra` adds the experts' part that the plain ZeRO-1 count, ``K (P_dense +
P_experts / e) / d``, leaves out). The gradients are reduce-scattered and the updated weights all-gathered over
the same two groups (:meth:`ExpertMixin.expert_sharded_sync`).
"""
from __future__ import annotations

from functools import cached_property

from ..routing import dispatch_imbalance
from .data_parallel import group_placement
from .memory import model_state_bytes
from .triples import ZERO_TRIPLE, _add


class ExpertMixin:
    """The expert-parallel parts of :class:`~.features.Workload` (which provides ``graph``, ``cluster``,
    ``vb``, ``params`` and ``_coll``)."""

    @cached_property
    def expert_count(self) -> int:
        """Experts per mixture-of-experts layer (0: the model has none)."""
        counts = {int(n.attrs["experts"]) for n in self.graph(1).layers() if "experts" in n.attrs}
        return max(counts, default=0)

    @cached_property
    def expert_params(self) -> float:
        """Parameters of all experts of all MoE layers (those expert parallelism divides)."""
        return float(sum(float(n.cost.params) for n in self.graph(1).layers() if "experts" in n.attrs))

    def state_params(self, e: int = 1) -> float:
        """Parameters whose weights, gradients and optimizer state one replica's devices hold: the
        non-expert ones and ``1/e`` of the experts' (with LoRA: of the adapters, :mod:`.lora`)."""
        return self.trainable_params - self.expert_trainable_params * (1 - 1 / e)

    def check_expert(self, e: int, d: int) -> None:
        """``ValueError`` naming ``parallel.expert`` unless ``e`` divides the experts and the data-parallel
        degree ``d`` (the expert group is part of the data-parallel group)."""
        if e == 1:
            return
        if not self.expert_count:
            raise ValueError(f"parallel.expert: {e} needs a model with mixture-of-experts layers; this one has none")
        if self.expert_count % e:
            raise ValueError(f"parallel.expert: {e} does not divide the {self.expert_count} experts of a layer")
        if d % e:
            raise ValueError(f"parallel.expert: {e} does not divide parallel.data = {d} (the expert group is part "
                             "of the data-parallel group)")

    def routing_factor(self, b: int, e: int) -> float:
        """The busiest device's routed rows over the mean in a microbatch of ``b`` samples (the first MoE layer's,
        :func:`~concurrency_model.routing.dispatch_imbalance`); 1 without expert parallelism."""
        node = next((n for n in self.graph(b).layers() if n.kind == "moe_dispatch"), None)
        return 1.0 if node is None else dispatch_imbalance(node, b, e, self.expert_imbalance)

    def expert_triples(self, node, b: int, t: int, e: int) -> tuple:
        """``(forward, backward)`` triples of the dispatch and combine all-to-alls of one MoE layer (on its
        ``moe_dispatch`` node; zero elsewhere and for ``e = 1``), at the busiest device's volume
        (``parallel.expert_imbalance``, :mod:`concurrency_model.routing`)."""
        if e == 1 or node.kind != "moe_dispatch":
            return ZERO_TRIPLE, ZERO_TRIPLE
        rpn, sharing = group_placement(self.cluster.domain_gpus, t, e)  # within an NVLink domain
        f = dispatch_imbalance(node, b, e, self.expert_imbalance)  # the busiest device receives f x the mean
        one = self._coll("alltoall", f * b * node.numel * self.vb / t, e, rpn, sharing)
        both = _add(one, one)  # dispatch and combine (forward); their gradients (backward)
        return both, both

    def expert_gradient_sync(self, t: int, p: int, d: int, e: int, rpn: int, sharing: int) -> tuple:
        """The gradient all-reduces of one step with expert parallelism: the non-expert gradients over the
        ``d`` replicas (``rpn`` per node) and this device's ``1/e`` of the expert gradients over ``d / e``."""
        per_param = self.grad_bytes / (t * p)  # gradient bytes per parameter on one device of the replica
        dense = self._coll("allreduce", (self.trainable_params - self.expert_trainable_params) * per_param, d, rpn,
                           sharing)
        rpn_x = rpn // e if rpn % e == 0 else 1  # every e-th replica: rpn / e of them per node
        experts = self._coll("allreduce", self.expert_trainable_params / e * per_param, d // e, rpn_x, sharing)
        return _add(dense, experts)

    def expert_sharded_sync(self, t: int, p: int, d: int, e: int, rpn: int, sharing: int) -> tuple:
        """``(reduce_scatter, allgather)`` triples of the distributed optimizer (ZeRO 1) with expert parallelism:
        the non-expert gradients reduce-scattered and their weights all-gathered over the ``d`` replicas, this
        device's ``1/e`` of the experts' over the ``d / e`` replicas that hold them (module doc)."""
        dense_params = (self.trainable_params - self.expert_trainable_params) / (t * p)
        expert_params = self.expert_trainable_params / e / (t * p)
        rpn_x = rpn // e if rpn % e == 0 else 1  # every e-th replica: rpn / e of them per node
        rs = _add(self._coll("reduce_scatter", dense_params * self.grad_bytes, d, rpn, sharing),
                  self._coll("reduce_scatter", expert_params * self.grad_bytes, d // e, rpn_x, sharing))
        ag = _add(self._coll("allgather", dense_params * self.vb, d, rpn, sharing),
                  self._coll("allgather", expert_params * self.vb, d // e, rpn_x, sharing))
        return rs, ag

    def expert_optimizer_extra(self, e: int, zero_stage: int, optimizer: str, dtype: str, t: int, p: int,
                               d: int) -> float:
        """Optimizer-state bytes of the experts that ZeRO 1's count over :meth:`state_params` leaves out: their
        state is sharded over ``d / e`` expert-data-parallel ranks, not ``d`` (module doc), so a device holds
        ``K P_experts (1 - 1/e) / (t p d)`` more; 0 without expert parallelism or ZeRO.

        ``d``: the ranks the dense state is sharded over (data x context); ``dtype``: the state's dtype."""
        if e == 1 or zero_stage < 1:
            return 0.0
        extra = self.expert_trainable_params * (1 - 1 / e)
        return float(model_state_bytes(extra, optimizer, dtype, tensor=t, pipeline=p, data=d, zero_stage=1)
                     ["optimizer"])
