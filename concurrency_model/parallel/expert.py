"""Expert parallelism in ``estimate``: the experts of every mixture-of-experts layer split over ``e`` devices.

Degree ``e`` (``parallel.expert``; GShard, Lepikhin et al. 2021 §2.2-2.3; Switch Transformer, Fedus et al.
2022 §2.2 and §5.4; DeepSpeed-MoE, Rajbhandari et al. 2022 §4): an expert group is ``e`` of the ``d``
data-parallel replicas (it sits inside the data-parallel group, consecutive ranks, so inside a node when it
fits), each device holding ``E / e`` of the ``E`` experts of every MoE layer. Per MoE layer and microbatch,
derived [D] with balanced routing (dropless, or with the fixed-capacity buffers of a model built with a
``capacity_factor``, whose padded rows the dispatch node carries), or without buffers at the busiest device's
rows, ``parallel.expert_imbalance`` times the mean (:mod:`concurrency_model.ops.routing`; dropped tokens under a
capacity are in :func:`.model_parallel.expert_parallel`):

* an all-to-all dispatches every routed token (``top_k`` copies of each of the device's ``b s`` tokens, ``h``
  values each) to the device that holds its expert, and one returns the experts' outputs (combine): two
  all-to-alls of ``b s top_k h`` values per device forward, their gradients backward, two more in a
  recomputed forward; with tensor parallelism ``t`` each tensor rank sends ``1/t`` of them (the ``t``
  groups share the node's links). They are on the critical path (the experts wait for their tokens);
  an expert group over several nodes moves each peer's ``1/e`` share on its own tier, the node's other ranks'
  over NVLink and the other nodes' over the network, the two at once (:func:`alltoall_bytes`; NCCL's all-to-all is
  one ``ncclSend`` / ``ncclRecv`` pair a peer fused in a group, whose calls "can be seen as progressing
  independently": NCCL user guide, docs.nvidia.com/deeplearning/nccl/user-guide/docs/usage/p2p.html, "All-to-all";
  Megatron-Core's dispatcher calls ``torch.distributed.all_to_all_single``, NVIDIA/Megatron-LM @ 2a75ac12
  ``megatron/core/tensor_parallel/mappings.py`` ``_AllToAll``), not the whole message at the network's rate: on 2
  DGX nodes 8 of 16 shares cross the network, not 15;
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

Dispatchers (``parallel.moe_dispatcher``, :data:`DISPATCHERS`; Megatron-Core's token dispatchers, NVIDIA/Megatron-LM
@ 2a75ac12, the commit Megatron-Bridge @ 067f987d pins as ``3rdparty/Megatron-LM``,
``megatron/core/transformer/moe/README.md``, "Token dispatcher" table; the default, ``alltoall``, is what this module
modelled before the field):

* ``alltoall`` (``--moe-token-dispatcher-type alltoall``, "NCCL-based All-to-All communication for token
  exchange"): the tokens permuted by expert, one copy a routed (token, expert) pair, an NCCL all-to-all over the
  expert group (above);
* ``deepep`` and ``hybridep`` (``--moe-token-dispatcher-type flex`` with ``--moe-flex-dispatcher-backend deepep`` /
  ``hybridep``; the README: DeepEP "removes redundant tokens during cross-node communication, fuses intra/inter-node
  communication into single kernel"; HybridEP is NVIDIA's kernel of the same scheme, deepseek-ai/DeepEP branch
  ``hybrid-ep``): a token crosses the network once to every other node that holds one of its experts, to the GPU of
  its own local index there, which forwards it over NVLink to each GPU of that node holding one of them; on its own
  node it goes over NVLink once to each such GPU (deepseek-ai/DeepEP @ dd758caf ``docs/legacy.md``, "Normal kernels
  with NVLink and RDMA forwarding"). Per device and all-to-all, with ``n = f b s`` tokens of ``h v / t`` bytes, the
  group's ``N`` nodes of ``G`` ranks and :func:`~concurrency_model.ops.routing.targets_reached` ``R(g)`` [D]::

      network bytes  = n (h v / t) (N - 1) (1 - C(E - E/N, k) / C(E, k))     distinct other nodes
      NVLink bytes   = n (h v / t) R(e) (1 - 1/G)                              distinct ranks, less the forwarder's own

  each at its tier's bandwidth per rank (:func:`~concurrency_model.hardware.clusters.place`), the two tiers working at once
  (one fused kernel): ``latency + max(NVLink, network)``, the latency the NCCL all-to-all's of the same group (as a
  stand-in: DeepEP publishes bandwidths, not a latency model). DeepEP's normal kernels reach 43-58 GB/s over a
  400 Gb/s CX7 NIC (~50 GB/s) and 153-158 GB/s over H800's ~160 GB/s NVLink (``docs/legacy.md`` table), so the
  tiers' rates stand unchanged. The combine is the reverse (reduced on the forwarding GPU before it crosses the
  network), the same bytes. With capacity buffers the tokens, not the padded rows, cross (the padding is the
  receiver's); the dispatch kernels' SMs are not taken from the compute. Qwen3-30B-A3B at EP 16 over 2 DGX nodes
  sends 0.997 copies of a token over the network against 4 with ``alltoall`` (:mod:`concurrency_model.ops.routing`).

Overlap (``parallel.expert_overlap``; Megatron-Core's ``--overlap-moe-expert-parallel-comm``, the same README, "EP
A2A Overlap": "Overlaps All-to-All with computation by merging FWD-BWD passes of adjacent microbatches"): the
all-to-alls of one microbatch's layer run while another microbatch's layer computes, so a MoE layer exposes only
``max(0, a2a - compute)`` of its forward plus backward all-to-alls, ``compute`` the forward plus backward seconds of
one MoE layer's block (the model's compute over its MoE layers) [D]. The warm-up and cool-down microbatches, which
have no partner, are not counted (one of ``m`` microbatches a stage). The hidden part still costs the compute beside
it the SMs the dispatcher's kernels hold (:data:`DISPATCH_SMS`, :func:`overlap_exposed`).
"""
from __future__ import annotations

from functools import cached_property

import numpy as np

from ..choices import DISPATCHERS
from ..checks import did_you_mean
from ..hardware.clusters import place
from ..ops.routing import dispatch_imbalance, targets_reached
from .data_parallel import group_placement
from .memory import model_state_bytes
from .triples import ZERO_TRIPLE, add_triples

DEDUPLICATING = ("deepep", "hybridep")
# SMs the deduplicating dispatchers' kernels hold: HybridEP 32, as NVIDIA-NeMo/Megatron-Bridge @ 067f987d
# src/megatron/bridge/perf_recipes/_common.py _benchmark_common sets moe_hybridep_num_sms for every hybridep recipe;
# DeepEP 20, Megatron-Core's historical default (NVIDIA/Megatron-LM @ 2a75ac12
# megatron/core/transformer/transformer_config.py, moe_deepep_num_sms: "historical default 20"). NCCL's all-to-all
# kernels are not counted.
DISPATCH_SMS = {"deepep": 20, "hybridep": 32}
# The rates the deduplicating dispatchers' kernels reach over NVLink 5, measured through their torch API (which
# Megatron-Core calls), as algorithm bandwidth: the tokens a rank receives, its own included, x hidden x 2 bytes
# (BF16: Megatron-Core's HybridEP dispatches in BF16, ``fused_a2a.py`` init_hybrid_ep_buffer) over the call's time
# (deepseek-ai/DeepEP @ 17cfb81, branch hybrid-ep, tests/test_hybrid_ep.py; 4,096 tokens of hidden 7,168, top-8 of
# 8 local experts a rank, uniform routing). ``(ranks in the NVLink domain, dispatch B/s, combine B/s)``, from
# ``docs/README_Hybrid-EP.md`` at that commit: HybridEP, the "GB200 Platform" table at 32 SMs (the recipes'
# ``moe_hybridep_num_sms``); its "B200 Platform" 8-rank row at 16 SMs, 535.94 / 530.86 GB/s, agrees with GB200's at
# 16 SMs (550.10 / 538.44) within 3%. DeepEP, the "B200 Platform" table at 8 ranks: 20 SMs (:data:`DISPATCH_SMS`)
# as the mean of its 16- and 24-SM rows (348 / 302 and 494 / 420 GB/s) [D]. Against the tier's rate (900 GB/s x
# 0.822 a direction) the dispatch runs at 0.65 of it (HybridEP, 8 ranks); Hopper's tiers stand (DeepEP's 153-158 GB/s
# over H800's ~160 GB/s NVLink, module doc), as does every network rate (HybridEP's H100 table: 28-62 GB/s over a
# 400 Gb/s NIC).
DEDUP_NVLINK_ALGBW = {
    ("hybridep", "nvlink5-nvswitch"): ((8, 545.71e9, 568.94e9), (16, 523.48e9, 521.55e9), (24, 507.32e9, 483.76e9),
                                       (32, 484.22e9, 464.54e9), (36, 479.02e9, 447.89e9)),
    ("deepep", "nvlink5-nvswitch"): ((8, 421e9, 361e9),),
}


def check_dispatcher(value) -> str:
    """``value`` if it names a dispatcher of :data:`DISPATCHERS`, else a ``ValueError`` naming
    ``parallel.moe_dispatcher`` (with "did you mean").

    >>> check_dispatcher("hybridep")
    'hybridep'
    >>> check_dispatcher("deeppe")
    Traceback (most recent call last):
    ...
    ValueError: parallel.moe_dispatcher: unknown 'deeppe'; did you mean 'deepep'?; allowed: alltoall, deepep, hybridep
    """
    if value not in DISPATCHERS:
        raise ValueError(f"parallel.moe_dispatcher: unknown {value!r}{did_you_mean(str(value), DISPATCHERS)}; "
                         f"allowed: {', '.join(DISPATCHERS)}")
    return value


def dedup_bytes(tokens: float, token_bytes: float, experts: int, top_k: int, e: int, ranks_per_node: int) -> tuple:
    """``(NVLink bytes, network bytes)`` one device sends in one all-to-all of a deduplicating dispatcher
    (``deepep``, ``hybridep``; module doc): ``tokens`` tokens of ``token_bytes`` each, routed uniformly to ``top_k``
    of ``experts`` experts held by ``e`` ranks, ``ranks_per_node`` of them a node.

    >>> nv, net = dedup_bytes(4096, 2048, 128, 8, 16, 8)   # Qwen3-30B-A3B, EP 16 over 2 nodes, 2 bytes x 1,024
    >>> round(net / (4096 * 2048), 4), round(nv / (4096 * 2048), 4)   # copies a token over each tier
    (0.9969, 5.7719)
    """
    nodes = e // ranks_per_node
    net = tokens * token_bytes * (nodes - 1) * targets_reached(experts, top_k, nodes) / nodes  # the other nodes
    nv = tokens * token_bytes * targets_reached(experts, top_k, e) * (1.0 - 1.0 / ranks_per_node)
    return nv, net


def dedup_nvlink_rates(dispatcher: str, tier: str, ranks: int, tier_bw: float) -> tuple[float, float]:
    """``(dispatch, combine)`` bytes a second a rank's NVLink bytes of a deduplicating dispatcher (:func:`dedup_bytes`)
    move at, with ``ranks`` ranks of the group in one NVLink domain of tier ``tier`` whose rate a rank is
    ``tier_bw``: the measured algorithm bandwidth (:data:`DEDUP_NVLINK_ALGBW`, linear in the ranks between its rows,
    the end rows beyond) less the rank's own share it counts, ``x (1 - 1/ranks)`` [D], never above ``tier_bw``; the
    tier's rate where nothing is measured.

    >>> d, c = dedup_nvlink_rates("hybridep", "nvlink5-nvswitch", 8, 900e9 * 0.822)
    >>> round(d / 1e9, 1), round(c / 1e9, 1)      # 545.71 and 568.94 GB/s x 7/8
    (477.5, 497.8)
    >>> dedup_nvlink_rates("hybridep", "nvlink4-nvswitch", 8, 370e9)   # not measured there: the tier's
    (370000000000.0, 370000000000.0)
    """
    rows = DEDUP_NVLINK_ALGBW.get((dispatcher, tier))
    if not rows or ranks < 2:
        return tier_bw, tier_bw
    r = [x[0] for x in rows]
    own = 1.0 - 1.0 / ranks
    return tuple(min(tier_bw, float(np.interp(ranks, r, [x[k] for x in rows])) * own) for k in (1, 2))


def alltoall_bytes(nbytes: float, e: int, ranks_per_node: int) -> tuple:
    """``(NVLink bytes, network bytes)`` one device sends in an NCCL all-to-all of ``nbytes`` over ``e`` ranks,
    ``ranks_per_node`` of them a node (module doc): an equal ``nbytes / e`` to every rank, its own share kept, the
    ``ranks_per_node - 1`` others of its node over NVLink, the ``e - ranks_per_node`` of the other nodes over the
    network.

    >>> nv, net = alltoall_bytes(16.0, 16, 8)   # EP 16 over 2 DGX nodes: 7 shares over NVLink, 8 over the network
    >>> nv, net
    (7.0, 8.0)
    """
    return nbytes * (ranks_per_node - 1) / e, nbytes * (e - ranks_per_node) / e


def overlap_exposed(a2a_f: float, a2a_b: float, attn_f: float, attn_b: float, mlp_f: float,
                    mlp_b: float, sm_share: float = 0.0) -> tuple[float, float]:
    """``(forward, backward)`` shares of a MoE layer's all-to-all seconds that stay exposed when a microbatch's
    forward runs merged with another's backward (``parallel.expert_overlap``). ``a2a_f``, ``a2a_b``: the layer's
    dispatch plus combine seconds forward and backward (two equal all-to-alls each); ``attn_*``, ``mlp_*``: the
    seconds of its attention chunk (before the dispatch) and expert chunk, forward and backward.

    Megatron-Core's merged layer (NVIDIA/Megatron-LM @ 2a75ac12
    ``megatron/core/models/common/model_chunk_schedule_plan.py``, ``TransformerLayerSchedulePlan.run``) runs on
    two streams: ``comm: combine_bwd | dispatch_fwd -> dispatch_bwd | combine_fwd`` beside ``comp:
    pre_dispatch_fwd | mlp_bwd -> mlp_bwd_dw -> mlp_fwd | pre_dispatch_bwd``, so each all-to-all hides behind one
    chunk: the backward combine behind the forward attention, the forward dispatch behind the backward experts,
    the backward dispatch behind the forward experts, the forward combine behind the backward attention [D]::

        exposed_f = max(0, a2a_f/2 - mlp_b) + max(0, a2a_f/2 - attn_b)
        exposed_b = max(0, a2a_b/2 - attn_f) + max(0, a2a_b/2 - mlp_f)

    The hidden rest is not free where the dispatcher's kernels hold SMs (``sm_share``: their SMs over the device's,
    :data:`DISPATCH_SMS`): the chunk beside it runs on the other SMs, ``sm_share`` of the hidden seconds longer [D].

    >>> overlap_exposed(4.0, 4.0, 1.0, 2.0, 1.5, 3.0)   # (2 - 3 -> 0, 2 - 2 -> 0) / 4; (2 - 1, 2 - 1.5) / 4
    (0.0, 0.375)
    >>> overlap_exposed(4.0, 4.0, 1.0, 2.0, 1.5, 3.0, 0.25)   # + 0.25 of the hidden 4 and 2.5 seconds
    (0.25, 0.53125)
    """
    def share(total, x, y):
        half = total / 2
        exposed = max(0.0, half - x) + max(0.0, half - y)
        return (exposed + sm_share * (total - exposed)) / total if total > 0 else 0.0
    return share(a2a_f, mlp_b, attn_b), share(a2a_b, attn_f, mlp_f)


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
        if (self.moe_dispatcher != "alltoall" or self.expert_overlap) and not self.expert_count:
            field = "moe_dispatcher" if self.moe_dispatcher != "alltoall" else "expert_overlap"
            raise ValueError(f"parallel.{field}: needs a model with mixture-of-experts layers; this one has none")
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
        :func:`~concurrency_model.ops.routing.dispatch_imbalance`); 1 without expert parallelism."""
        node = next((n for n in self.graph(b).layers() if n.kind == "moe_dispatch"), None)
        return 1.0 if node is None else dispatch_imbalance(node, b, e, self.expert_imbalance)

    def expert_triples(self, node, b: int, t: int, e: int) -> tuple:
        """``(forward, backward)`` triples of the dispatch and combine all-to-alls of one MoE layer (on its
        ``moe_dispatch`` node; zero elsewhere and for ``e = 1``), at the busiest device's volume
        (``parallel.expert_imbalance``, :mod:`concurrency_model.ops.routing`)."""
        if e == 1 or node.kind != "moe_dispatch":
            return ZERO_TRIPLE, ZERO_TRIPLE
        rpn, sharing = group_placement(self.cluster.domain_gpus, t, e)  # within an NVLink domain
        f = dispatch_imbalance(node, b, e, self.expert_imbalance)  # the busiest device receives f x the mean
        nbytes = f * b * node.numel * self.vb / t
        one = self._coll("alltoall", nbytes, e, rpn, sharing)
        pl = place(self.cluster, e, rpn, sharing)
        # the network's rate through an oversubscribed core: every network byte of an all-to-all crosses it
        # (comm.on_cluster.CORE_BOUND), unless the group's nodes share a pod (Tier.core_factor)
        net_bw = pl.inter_bw / self.cluster.inter.core_factor(pl.nodes)
        if self.moe_dispatcher in DEDUPLICATING and "route_tokens" in node.attrs:
            nv, net = dedup_bytes(f * b * node.attrs["route_tokens"], node.shape[1] * self.vb / t,
                                  node.attrs["route_experts"], node.attrs["route_top_k"], e, pl.ranks_per_node)
            rate_d, rate_c = dedup_nvlink_rates(self.moe_dispatcher, self.cluster.intra.name, pl.ranks_per_node,
                                                pl.intra_bw)
            # the NCCL all-to-all's latency (module doc); the combine moves the same bytes back
            both = add_triples((one[0], nv / rate_d, net / net_bw), (one[0], nv / rate_c, net / net_bw))
            return both, both
        elif pl.nodes > 1:  # NCCL's all-to-all over nodes: each peer's share on its own tier (module doc)
            nv, net = alltoall_bytes(nbytes, e, pl.ranks_per_node)
            one = (one[0], nv / pl.intra_bw, net / net_bw)
        both = add_triples(one, one)  # dispatch and combine (forward); their gradients (backward)
        return both, both

    @property
    def dispatch_sm_share(self) -> float:
        """The device's SMs the dispatcher's kernels hold (:data:`DISPATCH_SMS`; 0 for ``alltoall``)."""
        sms = DISPATCH_SMS.get(self.moe_dispatcher, 0)
        return min(1.0, sms / self.dev.multiprocessors) if sms and self.dev.multiprocessors else 0.0

    def expert_exposed(self, rows: tuple) -> tuple:
        """``rows`` (:meth:`~.features.Workload.layers`) with the all-to-all triples of every dispatch row scaled to
        what stays exposed under ``parallel.expert_overlap`` (module doc, :func:`overlap_exposed`); ``rows``
        unchanged without overlap. A layer's expert chunk is its rows between its dispatch and its combine, its
        attention chunk the layer's other rows (norms, attention, router, residual adds)."""
        if not self.expert_overlap:
            return rows
        out = list(rows)
        for i, r in enumerate(rows):
            if r["kind"] != "moe_dispatch" or r["ep_f_s"] + r["ep_b_s"] <= 0:
                continue
            layer = r["name"].rsplit(".", 2)[0] + "."  # "layers.3.mlp.dispatch" -> "layers.3."
            mine = [k for k, x in enumerate(rows) if x["name"].startswith(layer)]
            end = next((k for k in mine if k > i and rows[k]["kind"] == "moe_combine"), i)
            experts = [rows[k] for k in mine if i < k < end]
            attention = [rows[k] for k in mine if not i < k < end]
            kf, kb = overlap_exposed(r["ep_f_s"], r["ep_b_s"], sum(x["f_s"] for x in attention),
                                     sum(x["b_s"] for x in attention), sum(x["f_s"] for x in experts),
                                     sum(x["b_s"] for x in experts), self.dispatch_sm_share)
            out[i] = {**r, "ep_f": tuple(kf * x for x in r["ep_f"]), "ep_b": tuple(kb * x for x in r["ep_b"]),
                      "ep_f_s": kf * r["ep_f_s"], "ep_b_s": kb * r["ep_b_s"]}
        return tuple(out)

    def expert_gradient_sync(self, t: int, p: int, d: int, e: int, rpn: int, sharing: int) -> tuple:
        """The gradient all-reduces of one step with expert parallelism: the non-expert gradients over the
        ``d`` replicas (``rpn`` per node) and this device's ``1/e`` of the expert gradients over ``d / e``."""
        per_param = self.grad_bytes / (t * p)  # gradient bytes per parameter on one device of the replica
        dense = self._coll("allreduce", (self.trainable_params - self.expert_trainable_params) * per_param, d, rpn,
                           sharing)
        rpn_x = rpn // e if rpn % e == 0 else 1  # every e-th replica: rpn / e of them per node
        experts = self._coll("allreduce", self.expert_trainable_params / e * per_param, d // e, rpn_x, sharing)
        return add_triples(dense, experts)

    def expert_sharded_sync(self, t: int, p: int, d: int, e: int, rpn: int, sharing: int) -> tuple:
        """``(reduce_scatter, allgather)`` triples of the distributed optimizer (ZeRO 1) with expert parallelism:
        the non-expert gradients reduce-scattered and their weights all-gathered over the ``d`` replicas, this
        device's ``1/e`` of the experts' over the ``d / e`` replicas that hold them (module doc)."""
        dense_params = (self.trainable_params - self.expert_trainable_params) / (t * p)
        expert_params = self.expert_trainable_params / e / (t * p)
        rpn_x = rpn // e if rpn % e == 0 else 1  # every e-th replica: rpn / e of them per node
        rs = add_triples(self._coll("reduce_scatter", dense_params * self.grad_bytes, d, rpn, sharing),
                  self._coll("reduce_scatter", expert_params * self.grad_bytes, d // e, rpn_x, sharing))
        ag = add_triples(self._coll("allgather", dense_params * self.vb, d, rpn, sharing),
                  self._coll("allgather", expert_params * self.vb, d // e, rpn_x, sharing))
        return rs, ag

    def expert_optimizer_extra(self, e: int, zero_stage: int, optimizer: str, dtype: str, t: int, p: int,
                               d: int, optimizer_dtype: str = "fp32") -> float:
        """Optimizer-state bytes of the experts that ZeRO 1's count over :meth:`state_params` leaves out: their
        state is sharded over ``d / e`` expert-data-parallel ranks, not ``d`` (module doc), so a device holds
        ``K P_experts (1 - 1/e) / (t p d)`` more; 0 without expert parallelism or ZeRO.

        ``d``: the ranks the dense state is sharded over (data x context); ``dtype``: the state's dtype;
        ``optimizer_dtype``: the optimizer state's (:func:`.memory.model_state_bytes`)."""
        if e == 1 or zero_stage < 1:
            return 0.0
        extra = self.expert_trainable_params * (1 - 1 / e)
        return float(model_state_bytes(extra, optimizer, dtype, tensor=t, pipeline=p, data=d, zero_stage=1,
                                       optimizer_dtype=optimizer_dtype)["optimizer"])
