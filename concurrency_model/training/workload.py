"""The numbers a training step is composed from, per configuration, with the expensive parts cached.

A :class:`Workload` is one model on one cluster in one dtype. It builds the model once per microbatch
size, times every layer once per (microbatch, tensor degree, sequence parallelism) as kernel
:class:`~concurrency_model.timing.parts.Parts`, partitions the layers into pipeline stages, and prices the
collectives; :meth:`Workload.features` then gives the inputs of :mod:`.compose` for one layout at any
hardware scales (numpy arrays broadcast). :func:`~.estimate.estimate` and :mod:`concurrency_model.sweep`
both go through here, so one configuration gets the same seconds from both.

Communication is kept as *triples* (:mod:`.triples`), whose links a sweep can rescale.

Context parallelism: :mod:`.context` (its methods are mixed into :class:`Workload`).

The runtime's kernels (:func:`.runtime.kernel_policies`) are fixed per workload: what a ``selective`` recompute runs
again (:mod:`.recompute`), the casts of 8-bit training (:func:`~concurrency_model.timing.graph.cast_parts`; torchao's
tensorwise float8 also gathers the tensor-parallel activations in 8 bits), and ``parallel.tp_overlap``
(:func:`overlap_exposed`). A device's ``efficiency.sustained`` (:class:`~concurrency_model.hardware.devices.Efficiency`) scales
the arithmetic of every kernel of a training step.
"""
from __future__ import annotations

import re
import weakref
from functools import cached_property, lru_cache

import numpy as np

from ..choices import FULL_ITERATION
from ..hardware.clusters import place
from ..models import get_model
from ..models.channel_split import check_channel_split, gathers_input, is_channel_split, replicated
from ..models.transformer import check_tensor_split, is_lm_head
from ..timing import roofline_coeffs
from ..timing.graph import eight_bit_rate, expert_gemms, layer_parts
from ..timing.loss import cross_entropy_parts
from ..timing.parts import Parts, total
from ..units import EIGHT_BIT_VALUES, dtype_bytes, value_dtype
from ..parallel import memory, pipeline
from ..parallel.context import NO_PARTS, ContextMixin, context_exposed  # noqa: F401 (re-exported)
from ..parallel.data_parallel import BUCKET_BYTES, GRAD_BYTES, DataParallelMixin  # noqa: F401 (BUCKET_BYTES re-exported)
from ..parallel.expert import ExpertMixin
from ..parallel.host import HOST_S_PER_KERNEL, graphed_rows, issue_sequence, softmax_fallback_kernels
from ..parallel.layerwise import LayerwiseMixin
from ..parallel.lora import LoraMixin, training_flop
from ..parallel.partition import layer_split
from ..parallel.recompute import full_recompute_rows, recompute_shares
from ..parallel.runtime import cuda_graph_scopes
from ..parallel.spatial import SpatialMixin, spatial_rows
from ..parallel.triples import ZERO_TRIPLE, add_triples, collective_triple, triple_seconds  # noqa: F401 (re-exported)
from .keys import model_key

# a transformer block's nodes, as the builders name them: ``layers.N.`` and ``h.N.`` (decoders), ``layer.N.`` (BERT),
# ``encoder.layers.N.`` (ViT)
LAYER_NAME = re.compile(r"(?:^|\.)(?:layers?|h)\.(\d+)\.")


# the entries of :func:`transformer_shape` that the memory model takes (:func:`.compose.memory_fn`), in its order
MEMORY_SHAPE = ("s", "h", "a", "layers", "vocab", "fused", "moe")


def transformer_shape(graph):
    """``s, h, a, layers, vocab, kv`` (key/value heads x head size), ``fused`` (a fused attention kernel), ``moe``
    (:func:`_moe_of`), ``dense`` (:func:`_dense_of`) and ``dropout`` (dropout nodes in a block) of a transformer graph
    (from its attention, embedding and first block's nodes), else None; found once a graph (and again if
    nodes were added since)."""
    known = _SHAPES.get(graph)
    if known is None or known[0] != len(graph.nodes):
        known = _SHAPES[graph] = (len(graph.nodes), _shape_of(graph))
    return None if known[1] is None else dict(known[1])


_SHAPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> (its node count, its shape)
# graph -> (its node count, {(device id, dtype, tensor, sp, expert, imbalance, fp8 recipe, eager): (device, rows)}):
# :meth:`Workload._kernel_rows`, layer tables kept as long as their graph (models.get_model's cache holds it)
_KERNEL_ROWS: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FLOP: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> (node count, {LoRA rank: training FLOP})


def _shape_of(graph):
    att = [n for n in graph.layers() if n.kind == "attention"]
    if not att:
        return None
    a = att[0].attrs
    emb = [n for n in graph.layers() if n.kind == "embedding"]
    vocab = int(emb[0].cost.params) // (a["heads"] * a["head_dim"]) if emb else None
    kv = a.get("kv_heads", a["heads"]) * a["head_dim"]
    moe = _moe_of(graph, kv)
    if moe is not None:  # the embedding is vocabulary x hidden, the hidden size not the attention's width
        vocab = int(emb[0].cost.params) // moe[0] if emb else None
    block = _block_of(graph, att[0])
    return {"s": a["seq"], "h": a["heads"] * a["head_dim"], "a": a["heads"], "layers": len(att), "vocab": vocab,
            "kv": kv, "fused": bool(a.get("fused", False)), "moe": moe,
            "dense": None if moe is not None else _dense_of(block, kv),
            "dropout": any(n.kind == "dropout" for n in block or graph.layers())}  # no scoped block: the graph's


def _block_of(graph, attention) -> list:
    """The nodes of the transformer block an ``attention`` node is in (those of its scope: ``h.0.``, ``layers.0.``)."""
    scope = attention.name.rsplit(".", 1)[0] + "."
    return [n for n in graph.layers() if n.name.startswith(scope)]


def _dense_of(block: list, kv: int) -> tuple | None:
    """``(hidden, kv, ffn, gated)`` of a dense transformer ``block`` for
    :func:`~concurrency_model.parallel.memory.dense_layer_values`: the hidden size and the MLP's width from its down
    projection (the block's last row-split linear, ``ffn x hidden``), whether the MLP is gated (a product node:
    SwiGLU); None without such a projection."""
    down = [n for n in block if n.kind == "linear" and n.attrs.get("split") == "row"]
    if len(down) < 2:  # the attention's output projection and the MLP's down projection
        return None
    d = down[-1].attrs
    return int(d["c_out"]), int(kv), int(d["c_in"]), any(n.kind == "mul" for n in block)


def _moe_of(graph, kv: int):
    """The ``moe`` tuple of :func:`~concurrency_model.parallel.memory.moe_layer_values` of a mixture-of-experts
    transformer (its first routed layer's experts: the hidden size and one expert's width from the down projection,
    ``hidden x ffn`` a expert; the shared experts' width from theirs; QK-norm from a ``q_norm`` node), else None. A
    model's dense layers (DeepSeek-V3's first three) are counted as its routed ones [D]."""
    down = next((n for n in graph.layers() if n.kind == "linear" and n.attrs.get("experts", 1) > 1
                 and n.attrs.get("split") == "row"), None)
    if down is None:
        return None
    block = down.name.split(".mlp.")[0] + "."
    nodes = [n for n in graph.layers() if n.name.startswith(block)]
    shared = sum(n.attrs["c_in"] for n in nodes if n.kind == "linear" and "shared_expert" in n.name
                 and n.attrs.get("split") == "row")
    norms = any(n.name.endswith(".q_norm") for n in nodes)
    d = down.attrs
    return (int(d["c_out"]), int(kv), int(d["experts"]), int(d["top_k"]), int(d["c_in"]), int(shared), norms)


def overlap_exposed(comm_s: float, gemm_s: float, t: int) -> float:
    """The share of a tensor-parallel collective of ``comm_s`` seconds left exposed when it is micro-pipelined with
    the GEMMs of ``gemm_s`` seconds it feeds or follows over ``t`` ranks: PyTorch's async tensor parallelism
    (``torch._inductor.config._micro_pipeline_tp``, torchtitan's ``enable_async_tensor_parallel``; pytorch/pytorch
    ``torch/distributed/_symmetric_memory/__init__.py`` ``_pipelined_all_gather_and_consume``,
    ``_pipelined_produce_and_all2all``): the gather is cut into ``t`` shards, the local shard's GEMM runs first and
    each of the other ``t - 1`` shards is copied (copy engine, the copies one after another) while another shard's
    GEMM runs; the reduce-scatter mirrors it. The step lasts ``gemm / t + max(gemm (t - 1) / t, comm)``, so
    ``max(0, comm - gemm (t - 1) / t)`` of the collective is exposed. What the fusion adds on the compute stream is
    counted with the row's kernels (:meth:`Workload.layers`): the local shard's copy into the symmetric buffer (read
    and write ``n / t`` of the gathered ``n`` bytes) and the reduction of the ``t`` partial sums a rank receives (read
    ``n``, write ``n / t``), ``n (1 + 3 / t)`` bytes at the memory bandwidth. A row's collectives are paired with its
    own GEMMs in that pass [D] (the all-gather feeds the neighbouring products of the block, of similar size).

    >>> round(overlap_exposed(1.0, 0.8, 8), 6), overlap_exposed(1.0, 2.0, 8), overlap_exposed(0.0, 1.0, 8)
    (0.3, 0.0, 0.0)
    """
    if comm_s <= 0:
        return 0.0
    return max(0.0, comm_s - gemm_s * (t - 1) / t) / comm_s


#: :meth:`Workload.layers` computes the row of a node once for the nodes alike (the same kernel parts by identity and
#: shape: a decoder's 80 identical blocks are one block's rows); False computes every row (the tests compare the two)
SHARE_ALIKE_ROWS = True


def _seconds(triple) -> float:
    """``float(triple_seconds(triple))`` (:func:`.triples.triple_seconds`), with the shared no-communication triple
    answered without numpy: ``0.0 + max(0.0, 0.0)`` is ``0.0`` (most rows of a layer table carry no collective).

    >>> _seconds(ZERO_TRIPLE), _seconds((1e-5, 2e-3, 1e-3)) == float(triple_seconds((1e-5, 2e-3, 1e-3)))
    (0.0, True)
    """
    return 0.0 if triple is ZERO_TRIPLE else float(triple_seconds(triple))


def _scaled(triple: tuple, k: float) -> tuple:
    return tuple(float(x) * k for x in triple)


def runs_again(row: dict, recompute: str) -> bool:
    """Whether a layer row's forward runs again in the backward pass: a full recompute's block layers
    (:func:`~concurrency_model.parallel.recompute.full_recompute_rows`), or a selective one's layers with a share
    (a Megatron-Core module's layers whole, :mod:`..parallel.recompute`).

    >>> runs_again({"full": True, "again": 0.0}, "full"), runs_again({"full": True, "again": 0.0}, "selective")
    (True, False)
    """
    return recompute == "full" and row.get("full", True) or recompute == "selective" and row["again"] > 0


def layer_seconds(row: dict, recompute: str) -> dict:
    """One layer's seconds a microbatch on its device (a row of :meth:`Workload.layers`), by part: its passes,
    what ``recompute`` runs again (``full``: the forward with its collectives; ``selective``: the row's ``again``
    share of its forward and its ``tp_again`` collectives, by the workload's policy, :mod:`.recompute`: an attention
    core's forward, Korthikanti et al. §5, or torchtitan's per-op policy), and its tensor-, expert- and
    context-parallel communication (a ring attention's or a spatial split's exchanges again with any recompute).
    The stage partition balances their sum."""
    full = recompute == "full" and row.get("full", True)  # the blocks' layers (:func:`.recompute.full_recompute_rows`)
    share = 1.0 if full else row.get("again", 0.0) if recompute == "selective" else 0.0
    tp_again = row.get("tp_again_s", 0.0) if recompute == "selective" else 0.0
    return {"forward_s": row["f_s"], "backward_s": row["b_s"], "recompute_s": row["f_s"] * share,
            "tensor_comm_s": row["tp_f_s"] * (1 + full) + row["tp_b_s"] + tp_again,
            "expert_comm_s": row["ep_f_s"] * (1 + (full or recompute == "selective" and row.get("ep_again", False)))
            + row["ep_b_s"],
            "context_comm_s": row.get("cp_f_s", 0.0) * (1 + (recompute != "none")) + row.get("cp_b_s", 0.0)}


class Workload(ContextMixin, SpatialMixin, LayerwiseMixin, ExpertMixin, DataParallelMixin, LoraMixin):
    """One model on one cluster in one training dtype (and ``tensor_layers``, :mod:`.layerwise`);
    everything that does not change with the layout's continuous numbers is computed once and cached."""

    def __init__(self, model, cluster, dtype: str, tensor_layers: str = "all", lora_rank: int = 0,
                 lora_base_dtype: str | None = None, expert_imbalance=1.0, selective: str = "attention",
                 fp8_recipe: str = "te", moe_sync: bool = False, expert_launch_s: float = 0.0,
                 router_kernels: tuple = (), tp_overlap: bool = False, moe_dispatcher: str = "alltoall",
                 expert_overlap: bool = False, stage_split: str | tuple = "balanced", compile: bool = True,
                 cuda_graph: str = "none"):
        self.model, self.cluster, self.dtype, self.tensor_layers = model, cluster, dtype, tensor_layers
        # training.compile false: eager PyTorch's kernels of the norms and rotary embeddings
        # (:func:`~concurrency_model.timing.graph.eager_kernels`)
        self.eager = not compile
        # training.cuda_graph: the layer rows a CUDA graph replays (:func:`.host.graphed_rows`)
        self.graph_scopes = cuda_graph_scopes(cuda_graph)
        self.stage_split = stage_split  # parallel.stage_split: how pipeline stages are cut (:mod:`.partition`)
        # the runtime's kernels (:func:`.runtime.kernel_policies`): a selective recompute's policy, 8-bit casts
        self.selective, self.fp8_recipe = selective, fp8_recipe
        self.tp_overlap = tp_overlap  # parallel.tp_overlap: async TP (:func:`overlap_exposed`)
        # torchtitan's tensor parallelism with torchao's tensorwise float8 (Float8ColwiseParallel,
        # Float8RowwiseParallel, PrepareFloat8ModuleInput: pytorch/torchtitan @ 9dec370 and 820504e
        # parallelize_llama.py apply_tp; pytorch/ao @ eab345c torchao/float8/float8_tensor_parallel.py) casts a
        # sequence-parallel all-gather's input, and the output gradient gathered backward, to 8 bits before the
        # collective: 1 byte a value against the activations' 2; rowwise gathers in 16 bits ("For now, float8
        # all-gather with TP is only supported for tensorwise", 820504e)
        self.gather_share = 0.5 if fp8_recipe == "torchao" and dtype in EIGHT_BIT_VALUES else 1.0
        self.expert_imbalance = expert_imbalance  # parallel.expert_imbalance (:mod:`concurrency_model.ops.routing`)
        # parallel.moe_dispatcher, parallel.expert_overlap (:mod:`.expert`)
        self.moe_dispatcher, self.expert_overlap = moe_dispatcher, expert_overlap
        self.moe_sync = moe_sync  # a dropless MoE layer's forward waits for its token counts (.runtime, moe_sync)
        self.expert_launch_s = expert_launch_s  # the host's per-expert GEMM launches (.runtime, expert_launch_s)
        # the forward kernels of a MoE layer's router and its dispatcher's preprocessing (.runtime, router_kernels)
        self.router_kernels = dict(router_kernels).get(moe_dispatcher, 0)
        # lora_rank > 0: the base frozen (its block linears stored as lora_base_dtype when given), adapters trained
        self.lora_rank, self.lora_base_dtype = lora_rank, lora_base_dtype
        self.dev = cluster.device
        self.vb = dtype_bytes(value_dtype(dtype))  # activations and their communication (fp8: bf16)
        self.grad_bytes = GRAD_BYTES.get(dtype, 2)

    def graph(self, b: int, c: int = 1):
        """The model for a microbatch of ``b`` samples; with ``c`` > 1 one context-parallel device's share:
        every sequence cut to ``s / c`` tokens, the parameters unchanged (see :meth:`check_context`); a
        CNN's spatial split keeps the whole model (:mod:`.spatial`)."""
        return self._graph(b, 1 if c > 1 and self.spatial else c)

    @lru_cache(maxsize=None)
    def _graph(self, b: int, c: int):
        if c == 1:
            return get_model(self.model, batch=b, value_bytes=self.vb)
        return self._build(b, self._context_options(c))

    def _build(self, b: int, options: dict):
        m = self.model
        if isinstance(m, dict):
            return get_model({**m, **options}, batch=b, value_bytes=self.vb)
        return get_model(m, batch=b, value_bytes=self.vb, **options)

    @lru_cache(maxsize=None)
    def _context_options(self, c: int) -> dict:
        """Builder options that give the model with sequences of ``s / c`` tokens and the same parameters
        (a learned position table keeps its ``s`` rows: ``max_positions``)."""
        s = transformer_shape(self.graph(1))["s"]
        for options in ({"seq_len": s // c}, {"seq_len": s // c, "max_positions": s}):
            try:
                g = self._build(1, options)
            except (ValueError, TypeError):
                continue
            shape = transformer_shape(g)
            if shape is not None and shape["s"] == s // c and float(g.params) == self.params:
                return options
        raise ValueError(f"parallel.context: this model cannot be rebuilt with its sequence of {s} tokens split "
                         f"into {c} (a zoo transformer, a gpt/bert spec or an hf_config decoder can)")

    @lru_cache(maxsize=None)
    def training_flop(self, b: int) -> float:
        """Forward plus backward FLOP of one microbatch of ``b`` samples (with LoRA: :func:`.lora.training_flop`)."""
        g = self.graph(b)
        known = _FLOP.get(g)  # kept per graph: the workloads of one model on other clusters ask the same
        if known is None or known[0] != len(g.nodes):
            known = _FLOP[g] = (len(g.nodes), {})
        if self.lora_rank not in known[1]:
            known[1][self.lora_rank] = training_flop(g, self.lora_rank) if self.lora_rank else \
                float(g.forward(depth=False).flop + g.backward(depth=False).flop)  # W only: no critical path
        return known[1][self.lora_rank]

    def memory_shape(self, shape: dict | None, framework: str = "ideal") -> tuple | None:
        """The :data:`MEMORY_SHAPE` tuple of a :func:`transformer_shape` for the memory model
        (:func:`.compose.memory_fn`), whether a mixture of experts' linears keep their inputs in 8 bits (an 8-bit
        dtype under Transformer Engine's casts, :func:`~concurrency_model.parallel.memory.moe_layer_values`; torchao's
        float8 keeps the 16-bit inputs; a dense layer's count is 16-bit), the Megatron-Core modules of a selective
        recompute (``()`` for another policy), whether the attention is multi-latent, a dense layer's widths with the
        ``F``-wide tensors its MLP keeps (:func:`~concurrency_model.parallel.memory.dense_layer_values`: a gated MLP
        run op by op under ``training.compile`` false keeps four, one fused kernel's three), whether the layers have
        dropout and the bytes a score an unfused attention keeps under ``framework``
        (:func:`~concurrency_model.parallel.memory.scores_bytes`); None for a graph without one."""
        if shape is None:
            return None
        q8 = shape["moe"] is not None and self.dtype in EIGHT_BIT_VALUES and self.fp8_recipe.startswith("te")
        mods = self.selective if isinstance(self.selective, tuple) else ()  # Megatron-Core's modules (.recompute)
        dense = shape["dense"]
        if dense is not None:  # the MLP's kept tensors: a gated one's fused kernel, or eager PyTorch's ops
            gated = "gated_eager" if self.eager else "gated"
            dense = dense[:3] + (memory.MLP_TENSORS[gated if dense[3] else "plain"],)
        return tuple(shape[k] for k in MEMORY_SHAPE) + (q8, mods, self.mla, dense, shape["dropout"],
                                                        memory.scores_bytes(shape["dropout"], framework))

    @cached_property
    def mla(self) -> bool:
        """Whether the model's attention is multi-latent (DeepSeek's MLA: ``mla_up_proj`` applies)."""
        return any(n.kind == "attention" and n.attrs.get("mla") for n in self.graph(1).layers())

    @cached_property
    def params(self) -> float:
        """Parameters of the model (the graph's sum over its nodes, once per workload)."""
        return float(self.graph(1).params)

    @cached_property
    def embedding_params(self) -> float:
        """Trained parameters of the layers before the first transformer block (the token and position
        embeddings), which the first pipeline stage holds on top of its share of the blocks
        (:func:`.compose.state_parts`). Megatron-Core: NVIDIA/Megatron-LM @ 2a75ac12
        ``megatron/core/models/common/language_module/language_module.py`` ``setup_embeddings_and_output_layer``;
        torchtitan @ 9dec370 ``torchtitan/parallelisms/pipeline_llama.py`` ``pipeline_llama_manual_split``, which
        drops ``tok_embeddings`` from every stage but the first. 0 for a model without blocks (a stage split of a CNN
        spreads its parameters) and under LoRA, whose embedding is a frozen weight (:meth:`frozen_weight_bytes`)."""
        layers = self.unit_layers()
        if self.lora_rank or all(x is None for x in layers):
            return 0.0
        nodes = self.graph(1).layers()
        stop = self.units()[next(i for i, x in enumerate(layers) if x is not None)][0]
        return float(sum(n.cost.params for n in nodes[:stop]))

    @cached_property
    def tied_params(self) -> float:
        """Trained parameters of the output layers tied to an embedding (GPT's and BERT's decoder onto the
        vocabulary: :meth:`..models.builder.Builder.linear` ``tied``), 0 under LoRA (a frozen embedding). With pipeline
        stages the first holds the embedding and the last a copy of it as its output layer, and the runtime
        all-reduces the two copies' gradients once a step (:meth:`.DataParallelMixin.data_parallel` ``emb``)."""
        if self.lora_rank:
            return 0.0
        return float(sum(n.attrs["c_in"] * n.attrs["c_out"] for n in self.graph(1).layers()
                         if n.kind == "linear" and n.attrs.get("tied")))

    @property
    def layer_count(self) -> int:
        """Most pipeline stages the model can be cut into (see :meth:`units`)."""
        return len(self.units())

    @lru_cache(maxsize=None)
    def units(self) -> tuple:
        """``[start, stop)`` layer ranges a pipeline stage is made of: a stage may end only where one
        tensor crosses (between transformer or residual blocks, after any layer of a chain), as pipeline
        implementations cut models (Megatron-LM assigns whole transformer layers; GPipe and PipeDream
        send one activation per boundary)."""
        nodes = self.graph(1).layers()
        pos = {n.name: i for i, n in enumerate(nodes)}
        live = np.zeros(len(nodes) + 1, dtype=int)
        last = {}
        for i, n in enumerate(nodes):
            for x in n.inputs:
                if x in pos:
                    last[pos[x]] = max(last.get(pos[x], -1), i)
        for k, u in last.items():  # node k's output is alive across the cuts after k, ..., u - 1
            live[k] += 1
            live[u] -= 1
        crossing = np.cumsum(live)[:len(nodes)]
        ends = [i + 1 for i in range(len(nodes) - 1) if crossing[i] <= 1] + [len(nodes)]
        return tuple(zip([0] + ends[:-1], ends))

    @staticmethod
    def layer_of(name: str) -> int | None:
        """The transformer layer a node belongs to by its name (:data:`LAYER_NAME`), ``None`` outside the blocks.

        >>> Workload.layer_of("layers.3.mlp.router"), Workload.layer_of("lm_head")
        (3, None)
        """
        m = LAYER_NAME.search(name)
        return int(m.group(1)) if m else None

    @lru_cache(maxsize=None)
    def unit_layers(self) -> tuple:
        """The transformer layer of each of :meth:`units` (the number in a node name :data:`LAYER_NAME`, as the
        builders name transformer blocks), ``None`` for a unit outside them (:func:`.partition.layer_split`)."""
        nodes = self.graph(1).layers()
        return tuple(self.layer_of(nodes[a].name) for a, _ in self.units())

    @cached_property
    def channel_split(self) -> bool:
        """Whether ``parallel.tensor`` splits this model by channels (a network without transformer
        blocks, :mod:`~concurrency_model.models.channel_split`) rather than Megatron's way."""
        return is_channel_split(self.graph(1).layers())

    def check_tensor(self, t: int) -> None:
        """``ValueError`` naming ``parallel.tensor`` unless ``t`` divides every split dimension."""
        if t == 1:
            return
        if self.fc_only:
            self.check_layerwise(t)
            return
        why = self._tensor_refusal(t)
        if why:
            raise ValueError(why)

    @lru_cache(maxsize=None)
    def _tensor_refusal(self, t: int) -> str | None:
        """Why tensor degree ``t`` does not split the model's layers (None: it does), once per degree."""
        try:
            (check_channel_split if self.channel_split else check_tensor_split)(self.graph(1).layers(), t)
        except ValueError as e:
            return str(e)
        return None

    def layers(self, b: int, t: int, sp: bool, c: int = 1, algorithm: str = "ring", e: int = 1) -> tuple:
        """Per layer: kernel parts per pass and the tensor-parallel triples (forward, backward) of one
        microbatch (Shoeybi et al. §3: an allreduce of each row-split GEMM's output forward and of each
        column-split GEMM's input gradient backward; with sequence parallelism a reduce-scatter plus an
        allgather of the same volume, Korthikanti et al. 2022; a network without transformer blocks is split by
        channels, :mod:`~concurrency_model.models.channel_split`: an allgather of each dense convolution's or
        fully connected layer's input forward and a reduce-scatter of its ∇x backward). The tensor group sits
        inside a node when it fits. With context parallelism ``c`` > 1 (module doc) the layers are one device's
        share and an attention row also carries ``blk_f``, ``blk_b`` (one ring step's block), ``kv`` (the triple
        of one K/V send) and ``a2a`` (the triple of one layer's four Ulysses all-to-alls). With expert
        parallelism ``e`` > 1 a MoE layer's dispatch row carries its all-to-alls, ``ep_f`` and ``ep_b``
        (:mod:`.expert`). On a CNN ``c`` > 1 is the spatial split: every row is one device's rows of the layer
        and carries the triples ``halo_f``, ``halo_b`` of its exchanges (:mod:`.spatial`)."""
        return self._layers(b, t, sp, c, algorithm if c > 1 else "ring", e)

    @lru_cache(maxsize=None)
    def _layers(self, b: int, t: int, sp: bool, c: int, algorithm: str, e: int = 1) -> tuple:
        g = self.graph(b, c)
        slabs, ends = spatial_rows(g, c) if c > 1 and self.spatial else ({}, {})
        rows = self._kernel_rows(g, t, sp, slabs, e)
        nodes = g.layers()
        k = 0  # layers before index k: the hybrid's data-parallel convolutions, on b / t samples (:mod:`.layerwise`)
        if self.fc_only and t > 1:
            k = self.fc_boundary
            rows = layer_parts(self.graph(b // t), self.dev, self.dtype, fp8_recipe=self.fp8_recipe,
                               eager=self.eager)[:k] + rows[k:]
        rpn = min(t, self.cluster.domain_gpus)  # the tensor group fills an NVLink domain (cluster.py)
        op = "reduce_scatter" if sp else "allreduce"
        channels = t > 1 and self.channel_split
        whole = replicated(g) if channels else set()
        out = []
        passes = {}  # identical nodes share their Parts (layer_parts times each kind once): add them up once
        shares = recompute_shares(nodes, self.selective)  # what a selective recompute runs again (:mod:`.recompute`)
        full = full_recompute_rows([n.name for n in nodes])  # what a full one runs again: the blocks
        # rows of nodes with the same kernel parts (by identity: the same kind, attributes and costs, layer_parts) and
        # shape are the same but for the node's name and place: computed once, without a context or spatial split
        # or a channel split (whose rows read more of the graph)
        alike: dict | None = {} if SHARE_ALIKE_ROWS and c == 1 and not slabs and not channels else None

        def tp_again(n, split, again_tp):  # the collective a per-op recompute runs again: its output is not saved
            one = again_tp if self.selective == "op" and split == "row" and n.name in shares else ZERO_TRIPLE
            return one, _seconds(one)
        for i, (n, r) in enumerate(zip(nodes, rows)):
            split = n.attrs.get("split")
            by_channels = channels and i >= k
            # and what else a row reads of its node: kind, split and GEMM widths (the tensor-parallel collectives);
            # the LM head (the loss) and a MoE dispatch (its all-to-alls, from its routing attributes) never share
            sig = None if alike is None or n.kind == "moe_dispatch" or is_lm_head(n) else (
                id(r["forward"]), id(r["grad_input"]), id(r["grad_weight"]), n.shape, n.kind, split,
                n.attrs.get("rows_per_sample"), n.attrs.get("c_in"), n.attrs.get("c_out"))
            hit = None if sig is None else alike.get(sig)
            if hit is not None:  # the first alike node's row, this node's name, recompute shares and place
                first, again_tp = hit
                row = {**first, "name": n.name, "again": shares.get(n.name, 0.0), "full": full[i]}
                row["tp_again"], row["tp_again_s"] = tp_again(n, split, again_tp)
                out.append(row)
                continue
            tf = tb = again_tp = ZERO_TRIPLE
            fused_bytes = 0.0  # async TP's buffer copy and partial-sum reduction of this row's collectives
            if t > 1 and split in ("row", "column") and not is_lm_head(n):
                nbytes = b * n.attrs["rows_per_sample"] * (n.attrs["c_out"] if split == "row" else n.attrs["c_in"]) \
                    * self.vb
                one = self._coll(op, nbytes, t, rpn, 1)
                again_tp = one  # recomputed by the per-op policy: a collective whose output it does not save
                if sp:  # the reduce-scatter's output is saved; torchao's tensorwise float8 gathers in 8 bits
                    again_tp = self._coll("allgather", nbytes * self.gather_share, t, rpn, 1)
                    one = add_triples(one, again_tp)
                if split == "row":
                    tf = one
                else:
                    tb = one
                if sp and self.tp_overlap:  # async TP: each collective micro-pipelined with the row's GEMMs
                    tf = _scaled(tf, overlap_exposed(float(triple_seconds(tf)), r["forward"].total(), t))
                    g_b = r["grad_input"].total() + r["grad_weight"].total()
                    tb = _scaled(tb, overlap_exposed(float(triple_seconds(tb)), g_b, t))
                    fused_bytes = nbytes * (1 + 3 / t)
            elif by_channels and gathers_input(n) and n.inputs[0] not in whole:
                # the paper's model parallelism (§6.2): gather the input forward, reduce-scatter ∇x backward
                # (of the device's rows in a spatial split as well)
                x = g.nodes[n.inputs[0]]
                nbytes = b * x.numel * self.vb * (slabs[x.name] / x.shape[1] if x.name in slabs else 1)
                tf, tb = self._coll("allgather", nbytes, t, rpn, 1), self._coll("reduce_scatter", nbytes, t, rpn, 1)
            key = (id(r["forward"]), id(r["grad_input"]), id(r["grad_weight"]))
            if key not in passes:
                passes[key] = self._passes(n, r, b, t, e)
            f, bw, f_s, b_s = passes[key]
            if fused_bytes:  # on the compute stream, in the pass of the row's collective (:func:`overlap_exposed`)
                extra = Parts.from_coeffs(roofline_coeffs(0.0, fused_bytes, self.dev, value_dtype(self.dtype)),
                                          self.dev)
                if split == "row":
                    f, f_s = f + extra, f_s + extra.total()
                else:
                    bw, b_s = bw + extra, b_s + extra.total()
            if is_lm_head(n):  # the loss on its logits (training only)
                vocab = -(-n.attrs["c_out"] // t)
                ce_f, ce_b = cross_entropy_parts(b * n.attrs["rows_per_sample"], vocab, self.vb, self.dev)
                f, bw = f + ce_f, bw + ce_b
                f_s, b_s = f.total(), bw.total()
            cp = {}
            if c > 1 and n.kind == "attention":
                f, bw, cp = self._context_attention(n, r, b, t, c, algorithm)
                f_s, b_s = f.total(), bw.total()
            elif slabs:
                halo_f, halo_b = self.spatial_comm(n, b, t, c, slabs, ends, len(r["grad_input"].count) > 0)
                cp = {"halo_f": halo_f, "halo_b": halo_b}
            ef, eb = self.expert_triples(n, b, t, e)
            numel = n.numel * slabs[n.name] // n.shape[1] if n.name in slabs else n.numel
            w = NO_PARTS if self.lora_rank else r["grad_weight"]  # the part of bw zb-h1 defers (LoRA: not split)
            row = {"name": n.name, "kind": n.kind, "f": f, "b": bw, "w": w, "tp_f": tf, "tp_b": tb, "numel": numel,
                   "f_s": f_s, "b_s": b_s, "tp_f_s": _seconds(tf),
                   "tp_b_s": _seconds(tb), "ep_f": ef, "ep_b": eb,
                   "ep_f_s": _seconds(ef), "ep_b_s": _seconds(eb),
                   "bn_c": int(n.shape[0]) // (t if by_channels else 1) if n.kind == "batch_norm" else 0,
                   "again": shares.get(n.name, 0.0), "full": full[i], **cp,
                   # Megatron-Core's ``moe`` module recomputes the dispatch with its all-to-alls (.recompute)
                   "ep_again": isinstance(self.selective, tuple) and n.kind == "moe_dispatch" and n.name in shares}
            row["tp_again"], row["tp_again_s"] = tp_again(n, split, again_tp)
            if "halo_f" in cp:
                row["cp_f_s"], row["cp_b_s"] = float(triple_seconds(cp["halo_f"])), float(triple_seconds(cp["halo_b"]))
            elif cp:
                row["cp_f_s"], row["cp_b_s"] = (float(x) for x in context_exposed(
                    c, 1, 0, cp["blk_f"].total(), cp["blk_b"].total(), float(triple_seconds(cp["kv"])),
                    float(triple_seconds(cp["a2a"])), float(algorithm == "allgather")))
            if sig is not None and not cp:
                alike[sig] = (row, again_tp)
            out.append(row)
        return self.expert_exposed(tuple(out))

    def _kernel_rows(self, g, t: int, sp: bool, slabs: dict, e: int) -> list:
        """:func:`.graph.layer_parts` of graph ``g`` on this workload's device, at its sustained math rate
        (``hardware.Efficiency.sustained``), kept per graph (:data:`_KERNEL_ROWS`) for every workload that asks the
        same of it: the workloads of one model on clusters that differ in their node count or network only (a scaling
        curve's points) share the device and so the layer table's kernels.
        A spatial split's rows (``slabs``) are not kept."""
        def build():
            rows = layer_parts(g, self.dev, self.dtype, tensor=t, sequence_parallel=sp, spatial=slabs, expert=e,
                               imbalance=self.expert_imbalance, fp8_recipe=self.fp8_recipe,
                               rate_8bit=eight_bit_rate(self.dev), eager=self.eager)
            s = self.dev.efficiency.sustained  # a training step's sustained math rate (hardware.Efficiency)
            if s == 1.0:
                return rows
            slowed: dict = {}  # by identity, so that identical layers keep sharing their Parts

            def slow(x):  # each shared Parts slowed once
                got = slowed.get(id(x))
                if got is None:
                    got = slowed[id(x)] = x.with_math_rate(s)
                return got
            return [{**r, **{p: slow(r[p]) for p in ("forward", "grad_input", "grad_weight")}} for r in rows]
        if slabs:
            return build()
        known = _KERNEL_ROWS.get(g)
        if known is None or known[0] != len(g.nodes):
            known = _KERNEL_ROWS[g] = (len(g.nodes), {})
        # the device by identity (held in the entry, so that its id is not reused while the entry lives): two
        # Device objects equal by their compared fields may still differ in the fields they do not compare
        key = (id(self.dev), self.dtype, t, sp, e, repr(self.expert_imbalance), self.fp8_recipe, self.eager)
        hit = known[1].get(key)
        if hit is None:
            hit = known[1][key] = (self.dev, tuple(build()))
        return list(hit[1])

    @lru_cache(maxsize=None)
    def _coll(self, op, nbytes, ranks, rpn, sharing):
        return collective_triple(op, float(nbytes), ranks, self.cluster, rpn, sharing)

    @lru_cache(maxsize=None)
    def _columns(self, b: int, t: int, sp: bool, recompute: str, c: int = 1, algorithm: str = "ring",
                 e: int = 1) -> dict:
        """Every layer's kernels stacked (with row offsets per layer) and its nominal seconds, so that a
        stage is a slice."""
        rows = self.layers(b, t, sp, c, algorithm, e)

        def rec(r):  # (parts, tensor-parallel triple, expert-parallel triple) run again in the backward pass
            if recompute == "full" and r.get("full", True):  # the blocks' layers (.recompute.full_recompute_rows)
                return r["f"], r["tp_f"], r["ep_f"]
            if recompute == "selective" and r["again"] > 0:  # Megatron-Core's ``moe`` module: its all-to-alls again
                return r["f"].times(r["again"]), r["tp_again"], r["ep_f"] if r.get("ep_again") else ZERO_TRIPLE
            return NO_PARTS, ZERO_TRIPLE, ZERO_TRIPLE

        recs = [rec(r) for r in rows]
        out = {}
        for name, parts in (("f", [r["f"] for r in rows]), ("b", [r["b"] for r in rows]), ("r", [x[0] for x in recs]),
                            ("w", [r["w"] for r in rows])):
            out[name] = total(parts)
            out[name + "_off"] = np.concatenate([[0], np.cumsum([len(x.count) for x in parts])])
        out["tp_f"] = np.array([r["tp_f"] for r in rows])
        out["tp_b"] = np.array([r["tp_b"] for r in rows])
        out["tp_r"] = np.array([x[1] for x in recs])
        out["ep_f"] = np.array([r["ep_f"] for r in rows])
        out["ep_b"] = np.array([r["ep_b"] for r in rows])
        out["ep_r"] = np.array([x[2] for x in recs])
        la = float(self.dev.launch_overhead)
        # the calls each row's passes issue, as .host.issued counts them (a split-K GEMM is one library call)
        calls = {name: np.concatenate([[0.0], np.cumsum(np.where(out[name].extra > 0, out[name].count,
                                                                    out[name].kernel_counts(la)))])
                 for name in ("f", "b", "r")}
        own = np.stack([calls[x][out[x + "_off"][1:]] - calls[x][out[x + "_off"][:-1]] for x in ("f", "b", "r")], 1)
        # host-only kernels the graph does not list: Megatron's eager softmax where its fused kernel cannot run
        nodes = self.graph(b, c).layers()
        extra = np.array([softmax_fallback_kernels(b, n.attrs["heads"] // t, n.attrs["seq"], n.attrs.get("fused"),
                                                   self.dtype, recompute != "none") if n.kind == "attention" else (0, 0)
                          for n in nodes], dtype=float).reshape(-1, 2)
        # and the per-expert GEMM launches of a grouped linear (.runtime, expert_launch_s), in units of a kernel
        extra += self.expert_launches(nodes, rows, b, e, recompute) * self.expert_launch_s / HOST_S_PER_KERNEL
        extra += self.router_launches(nodes, rows, own[:, 0], recompute)
        # the host waits before a layer's forward (and its recompute): a dropless MoE layer's dispatch under a runtime
        # whose dispatcher needs the token counts on the host (.runtime, moe_sync); capacity buffers know them, and a
        # whole-iteration graph runs none
        out["host_waits"] = np.array([self.moe_sync and n.kind == "moe_dispatch" and not n.attrs.get("fixed_capacity")
                                      and self.graph_scopes != (FULL_ITERATION,) for n in nodes], dtype=bool)
        # rows a CUDA graph replays issue nothing but the graph's launch, a pass (and a full recompute's forward)
        graphed, starts = graphed_rows([n.kind for n in nodes], [self.layer_of(n.name) for n in nodes],
                                       self.graph_scopes, [bool(n.attrs.get("fixed_capacity")) for n in nodes])
        again = np.array([recompute == "full" and r.get("full", True) for r in rows], dtype=float)
        launches = np.stack([starts, starts * (1 + again)], axis=1).astype(float)
        g = graphed[:, None]
        out["graphed"] = graphed
        out["queue_extra"] = np.where(g, launches, extra)  # the host-only items of the stream's queue
        out["host_extra"] = np.where(g, launches - np.stack([own[:, 0], own[:, 1] + own[:, 2]], axis=1), extra)
        out["kernels"] = np.where(graphed, launches.sum(axis=1), own.sum(axis=1) + extra.sum(axis=1))
        # the exposed context-parallel communication weighs in the partition too
        out["per_layer"] = [sum(layer_seconds(r, recompute).values()) for r in rows]
        return out

    def expert_launches(self, nodes, rows, b: int, e: int, recompute: str) -> np.ndarray:
        """Per layer, the GEMM launches beyond one a grouped linear that a runtime issuing one GEMM per expert makes
        (:mod:`.runtime`, ``expert_launch_s``), forward and backward (and the forward's again where it runs again,
        :func:`runs_again`):
        each mixture-of-experts layer's expert linears on one input are one grouped linear (Megatron-Core's fc1 holds
        the gated projections), of ``g`` GEMMs forward and ``2 g`` backward (data and weight gradients) for the ``g``
        experts the device runs (:func:`~concurrency_model.timing.graph.expert_gemms`), of which the kernel count has
        one forward and two backward. Zeros where the runtime launches one GEMM for all experts.

        >>> from concurrency_model.hardware.clusters import load_cluster
        >>> w = workload({"hf_config": "qwen3-30b-a3b", "seq_len": 4096}, load_cluster("dgx-b200"), "bf16",
        ...              expert_launch_s=1e-6)
        >>> g = w.graph(1)
        >>> x = w.expert_launches(g.layers(), w.layers(1, 1, False, 1, "ring", 8), 1, 8, "none")
        >>> [(g.layers()[i].name, x[i].tolist()) for i in x.sum(axis=1).nonzero()[0][:2]]   # 16 experts a device
        [('layers.0.mlp.experts.w1', [15.0, 30.0]), ('layers.0.mlp.experts.w2', [15.0, 30.0])]
        """
        out = np.zeros((len(nodes), 2))
        if not self.expert_launch_s:
            return out
        seen: set = set()
        for i, (n, r) in enumerate(zip(nodes, rows)):
            if n.kind != "linear" or n.attrs.get("experts", 1) <= 1 or tuple(n.inputs) in seen:
                continue
            seen.add(tuple(n.inputs))
            g, _ = expert_gemms(n.attrs, b * n.attrs["rows_per_sample"], e, self.expert_imbalance)
            out[i] = g - 1, 2 * (g - 1) + (g - 1) * runs_again(r, recompute)
        return out

    def router_launches(self, nodes, rows, own, recompute: str) -> np.ndarray:
        """Per layer, forward and backward, the host kernels of a mixture of experts' router and its dispatcher's
        preprocessing beyond the ones the layer graph lists (:mod:`.runtime`, ``router_kernels``): on each router
        row, the runtime's count less the kernels ``own`` (forward, per row) of the router and its softmax; in the
        backward pass again where the router's forward runs again (:func:`runs_again`). Zeros where the runtime does
        not count them.

        >>> from concurrency_model.hardware.clusters import load_cluster
        >>> w = workload({"hf_config": "qwen3-30b-a3b", "seq_len": 4096}, load_cluster("dgx-b200"), "bf16",
        ...              router_kernels=(("alltoall", 31),))
        >>> g, rows = w.graph(1), w.layers(1, 1, False, 1, "ring", 8)
        >>> x = w.router_launches(g.layers(), rows, np.ones(len(rows)), "none")
        >>> [(g.layers()[i].name, x[i].tolist()) for i in x.sum(axis=1).nonzero()[0][:1]], int(x.sum())
        ([('layers.0.mlp.router', [29.0, 0.0])], 1392)
        """
        out = np.zeros((len(nodes), 2))
        if not self.router_kernels:
            return out
        index = {n.name: i for i, n in enumerate(nodes)}
        for i, (n, r) in enumerate(zip(nodes, rows)):
            if n.kind != "linear" or n.name.rsplit(".", 1)[-1] != "router":
                continue
            listed = own[i] + own[index[n.name + "_softmax"]] if n.name + "_softmax" in index else own[i]
            k = max(0.0, self.router_kernels - float(listed))
            out[i] = k, k * runs_again(r, recompute)
        return out

    def stage(self, b: int, t: int, sp: bool, recompute: str, p: int, c: int = 1, algorithm: str = "ring",
              e: int = 1, host: float = 0.0) -> dict:
        """The slowest of ``p`` pipeline stages as compacted
        kernel parts per microbatch: forward ``f``, backward ``b``, recompute ``r`` (``full``: every block layer's
        forward again, with its tensor-parallel collectives, :func:`.recompute.full_recompute_rows`; ``selective``: the
        attention core, Korthikanti et al. §5), and the tensor-parallel triples ``tp_f``, ``tp_b``, ``tp_r``; ``cp``:
        the context-parallel layout and what :func:`context_exposed` needs (``c``, ``algorithm``, the stage's attention
        ``layers`` and recomputed ``rec_layers``, one layer's ``blk_f``, ``blk_b``, ``kv``, ``a2a``; a CNN's spatial
        split: the stage's ``halo_f``, ``halo_b``, a full recompute's forward ones in the latter); ``ep_f``, ``ep_b``,
        ``ep_r``: the expert-parallel all-to-alls over ``e`` devices (:mod:`.expert`);
        ``bn_channels``: the channels of its batch-norm layers (:meth:`.DataParallelMixin.batch_norm_sync`).

        The stages are PipeDream's partition (:func:`.pipeline.partition`) of each layer's nominal seconds,
        or, with ``host`` seconds per kernel (:func:`.host.host_per_kernel`), of the larger of a layer's GPU
        and host seconds, as torchgpipe's ``balance_by_time`` measures each layer's wall time; with
        ``parallel.stage_split`` ``layers`` or ``counted``, Megatron-Core's even splits of the decoder layers, or a
        layout, its decoder layers per virtual stage (:func:`.partition.layer_split`); the slowest
        is the one whose GPU or host seconds are the largest (a pass lasts the longer of the two,
        :mod:`.compose`); ``fill``: the other stages' seconds (each the larger of the two) over ``p - 1`` times the
        slowest one's, the share of the schedule's fill and drain they run at their own speed (:mod:`.compose`)."""
        return self._stage(b, t, sp, recompute, p, c, algorithm if c > 1 else "ring", e, host if p > 1 else 0.0)

    @lru_cache(maxsize=None)
    def _stage(self, b: int, t: int, sp: bool, recompute: str, p: int, cp: int, algorithm: str, e: int = 1,
               host: float = 0.0) -> dict:
        c = self._columns(b, t, sp, recompute, cp, algorithm, e)
        per_layer, host_s = c["per_layer"], host * c["kernels"]
        units = self.units()
        if p > 1:
            per_unit = [sum(np.maximum(per_layer[a:z], host_s[a:z])) for a, z in units]
            cut = (pipeline.partition(per_unit, p) if self.stage_split == "balanced" else
                   layer_split(self.unit_layers(), p, self.stage_split))
            stages = [(units[a][0], units[z - 1][1]) for a, z in cut]
        else:
            stages = [(0, len(per_layer))]
        weights = [max(sum(per_layer[a:z]), host_s[a:z].sum()) for a, z in stages]
        slowest = int(np.argmax(weights))
        lo, hi = stages[slowest]
        # the other stages' share of the fill and drain (:mod:`.compose`): their seconds over the slowest one's
        fill = (sum(weights) - weights[slowest]) / ((len(stages) - 1) * weights[slowest]) \
            if len(stages) > 1 and weights[slowest] > 0 else 1.0

        def part(name):
            a, z = c[name + "_off"][lo], c[name + "_off"][hi]
            whole = c[name]
            return Parts(*(getattr(whole, f)[a:z] for f in ("compute", "memory", "extra", "launch", "count"))).compact()
        rows = self.layers(b, t, sp, cp, algorithm, e)
        att = [r for r in rows[lo:hi] if "blk_f" in r]
        one = att[0] if att else {"blk_f": NO_PARTS, "blk_b": NO_PARTS, "kv": ZERO_TRIPLE, "a2a": ZERO_TRIPLE}
        halo_f = halo_b = ZERO_TRIPLE  # a spatial split's exchanges (:mod:`.spatial`), a full recompute's again
        for r in rows[lo:hi]:
            halo_f = add_triples(halo_f, r.get("halo_f", ZERO_TRIPLE))
            halo_b = add_triples(halo_b, r.get("halo_b", ZERO_TRIPLE))
        if recompute == "full":
            halo_b = add_triples(halo_b, halo_f)
        context = {"c": cp, "algorithm": algorithm, "gathered": float(algorithm == "allgather"), "layers": len(att),
                   "rec_layers": len(att) if recompute != "none" else 0,
                   "blk_f": one["blk_f"].compact(), "blk_b": one["blk_b"].compact(), "kv": one["kv"], "a2a": one["a2a"],
                   "halo_f": halo_f, "halo_b": halo_b}
        return {**{k: part(k) for k in ("f", "b", "r", "w")}, "fill": float(fill),
                **{k: tuple(float(x) for x in c[k][lo:hi].sum(axis=0))
                   for k in ("tp_f", "tp_b", "tp_r", "ep_f", "ep_b", "ep_r")},
                "e": e, "stages": stages, "slowest": (lo, hi), "host_extra": tuple(float(x) for x in
                                                                           c["host_extra"][lo:hi].sum(axis=0)),
                # the passes' kernels in issue order: the stream's queue (:func:`.host.queue_wait`)
                "queue": issue_sequence(rows[lo:hi], c["queue_extra"][lo:hi], recompute,
                                        float(self.dev.launch_overhead), c["host_waits"][lo:hi], c["graphed"][lo:hi]),
                "boundary_numel": rows[stages[0][1] - 1]["numel"] if p > 1 else 0,
                "cp": context, "bn_channels": tuple(r["bn_c"] for r in rows[lo:hi] if r["bn_c"])}

    @lru_cache(maxsize=None)
    def p2p(self, b: int, t: int, sp: bool, recompute: str, p: int, d: int, c: int = 1, algorithm: str = "ring",
            host: float = 0.0, scatter_gather: bool = False):
        """Triple of the boundary activation sent point to point between stages per microbatch (Narayanan
        et al. 2021 §3.2; with context parallelism each device sends its ``s / c`` tokens, with sequence
        parallelism or a channel split its ``1 / t`` share); stages that fill whole nodes talk across the
        network. ``host``: as :meth:`stage` (the same partition). ``scatter_gather``: the runtime sends each
        tensor-parallel rank's ``1 / t`` of a replicated activation and the receiving stage all-gathers the pieces
        over its tensor group (:func:`.pipeline.p2p_scatter_gather`, Narayanan et al. 2021 §4.1), the all-gather
        priced as :func:`.triples.collective_triple` prices it and added after the send (its intra-node seconds
        then share the triple's max with a send across the network [D])."""
        if p == 1:
            return ZERO_TRIPLE
        numel = self.stage(b, t, sp, recompute, p, c, algorithm, host=host)["boundary_numel"]
        full = b * numel * self.vb
        split = sp or self.channel_split
        gather = scatter_gather and t > 1 and not split
        nbytes = full / (t if split or gather else 1)
        cl = self.cluster
        if t * d * c >= cl.domain_gpus:  # a stage fills NVLink domains: its neighbour is across the network
            alpha, beta = place(cl, 2, 1).inter
            send = (alpha, 0.0, nbytes * beta)
        else:
            alpha, beta = place(cl, 2, 2).intra
            send = (alpha, nbytes * beta, 0.0)
        if not gather:
            return send
        return add_triples(send, collective_triple("allgather", full, t, cl, min(t, cl.domain_gpus)))

    def optimizer_seconds(self, state_bytes, s_mem_bw=1.0, s_launch=1.0):
        """The optimizer step: one memory-bound pass reading and writing the device's model state
        (a roofline kernel with no arithmetic, :func:`~concurrency_model.timing.roofline`)."""
        dev = self.dev
        return 2 * np.asarray(state_bytes, dtype=float) / dev.efficiency.memory / float(dev.mem_bw) / s_mem_bw \
            + float(dev.launch_overhead) * s_launch


_CACHE: dict = {}


def workload(model, cluster, dtype: str, tensor_layers: str = "all", lora_rank: int = 0,
             lora_base_dtype: str | None = None, expert_imbalance=1.0, selective: str = "attention",
             fp8_recipe: str = "te", moe_sync: bool = False, expert_launch_s: float = 0.0,
             router_kernels: tuple = (), tp_overlap: bool = False, moe_dispatcher: str = "alltoall",
             expert_overlap: bool = False, stage_split: str | tuple = "balanced", compile: bool = True,
             cuda_graph: str = "none") -> Workload:
    """A cached :class:`Workload` (the last few are kept, so repeated estimates reuse layer timings);
    ``selective``, ``fp8_recipe``, ``moe_sync``, ``expert_launch_s``, ``router_kernels``: the runtime's kernels, host
    waits and launches (:func:`.runtime.kernel_policies`; ``selective`` a tuple of Megatron-Core's modules under
    ``training.recompute_modules``, :func:`.prepare.policies_of`); ``tp_overlap``:
    ``parallel.tp_overlap``; ``moe_dispatcher``, ``expert_overlap``: ``parallel.moe_dispatcher``,
    ``parallel.expert_overlap``; ``stage_split``: ``parallel.stage_split``; ``compile``: ``training.compile``;
    ``cuda_graph``: ``training.cuda_graph``."""
    key = (model_key(model), repr(cluster), dtype, tensor_layers, lora_rank, lora_base_dtype, expert_imbalance,
           selective, fp8_recipe, moe_sync, expert_launch_s, router_kernels, tp_overlap, moe_dispatcher,
           expert_overlap, stage_split, compile, cuda_graph)
    if key not in _CACHE:
        if len(_CACHE) >= 8:
            _CACHE.pop(next(iter(_CACHE)))
        _CACHE[key] = Workload(model, cluster, dtype, tensor_layers, lora_rank, lora_base_dtype, expert_imbalance,
                               selective, fp8_recipe, moe_sync, expert_launch_s, router_kernels, tp_overlap,
                               moe_dispatcher, expert_overlap, stage_split, compile, cuda_graph)
    return _CACHE[key]
