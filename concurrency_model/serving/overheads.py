"""What serving a model costs besides its kernels, shared by :mod:`concurrency_model.serving.decoder` (decoders with
a KV cache) and :mod:`concurrency_model.serving.forward_pass` (one forward pass): whether a model is a causal decoder,
its shape and the checks of a request it serves (:func:`served`), the graph for a batch and a sequence length, the
KV cache's bytes, the weights at their stored size (weight-only quantization, 2:4 pruning),
the largest operator's workspace, and the tensor-, expert- and pipeline-parallel communication of a pass on a
cluster."""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

from ..checks import count, did_you_mean
from ..comm.on_cluster import collective_on_cluster
from ..hardware.clusters import place
from ..models import SEQUENCE_MODELS, get_model
from ..models.transformer import is_lm_head
from ..ops.routing import dispatch_imbalance
from ..ops.sparse import INDEX_BYTES, METADATA_BITS, STRUCTURED, nnz_of
from ..parallel.data_parallel import group_placement
from ..timing.graph import matrix_copies, quantizable
from ..timing.sparse import sparse_core
from ..scenario import WEIGHT_DTYPES, parse_weight_sparsity
from ..units import WEIGHT_BYTES as STORED_BYTES, dtype_bytes
from .memo import memoized
from .output_lengths import lengths

WEIGHT_BYTES = {k: STORED_BYTES[k] for k in WEIGHT_DTYPES}  # inference.weight_dtype -> bytes a weight
FREE = ("dropout",)  # the identity at inference


def model_graph(model, batch: int, seq: int | None, vb: int):
    """``model`` built for ``batch`` samples of ``vb``-byte values (and ``seq`` tokens, when given)."""
    if seq is None:
        return get_model(model, batch=batch, value_bytes=vb)
    if isinstance(model, dict):
        return get_model({**model, "seq_len": seq}, batch=batch, value_bytes=vb)
    return get_model(model, batch=batch, value_bytes=vb, seq_len=seq)


def is_causal_decoder(model) -> bool:
    """Whether ``model`` (a zoo name or spec) has causal attention: served with a KV cache."""
    att = [n for n in get_model(model).layers() if n.kind == "attention"]
    return bool(att) and all(n.attrs.get("causal") for n in att)


def served(model, dev, dtype: str, prompt_len: int, decode_len: int, output_lengths: str = "fixed",
           prompt_lengths: str = "fixed", prefix_len: int = 0, kv_dtype: str | None = None):
    """``(graph at batch 1, its model_shape, the output lengths' law, the prompts' new tokens' law)`` of a causal
    decoder serving requests of ``prompt_len + decode_len`` positions on average in ``dtype`` on ``dev`` (a prompt:
    ``prefix_len`` cached tokens and new ones of mean ``prompt_len - prefix_len`` under ``prompt_lengths``; the
    longest prompt leaves room for ``decode_len`` tokens and bounds the outputs' law): ``ValueError`` naming the
    field for an image model, a request longer than the context, or a dtype the device has no math in. The shape
    also carries ``kv_bytes``: bytes a cached value, stored as ``kv_dtype`` (default ``dtype``; vLLM's
    ``kv_cache_dtype``: a storage format, dequantized inside the attention kernel, so any device takes it)."""
    vb = dtype_bytes(dtype)
    if isinstance(model, str) and model not in SEQUENCE_MODELS:
        get_model(model)  # unknown names: the zoo's error
        raise ValueError(f"model: inference with a KV cache needs a causal decoder; {model!r} is an image model")
    graph = model_graph(model, 1, None, vb)
    shape = {**model_shape(graph), "kv_bytes": dtype_bytes(kv_dtype or dtype)}
    if prompt_len + decode_len > shape["context"]:
        raise ValueError(f"inference.decode_len: prompt_len + decode_len = {prompt_len + decode_len} exceeds the "
                         f"model's context of {shape['context']} positions (set the model's seq_len)")
    prompts = lengths(prompt_lengths, prompt_len - prefix_len, shape["context"] - prefix_len - decode_len,
                      "prompt_lengths", "prompt_len")
    dist = lengths(output_lengths, decode_len, shape["context"] - prefix_len - prompts.longest)
    try:
        dev.peak(dtype)
    except ValueError as e:
        raise ValueError(f"inference.{e}") from None
    return graph, shape, dist, prompts


def model_shape(graph) -> dict:
    """``layers, heads, kv_heads, head_dim, hidden, vocab, context, fused, params`` of a causal decoder
    graph (``ValueError`` naming ``model`` for anything else). Read once a graph (:mod:`.memo`: every serving
    prediction reads the shape of its model's graph at batch 1, the same object from the graph cache); a copy is
    returned.

    >>> s = model_shape(get_model("gpt2"))
    >>> s["layers"], s["heads"], s["head_dim"], s["context"], model_shape(get_model("gpt2")) == s
    (12, 12, 64, 1024, True)
    """
    return dict(memoized(graph, ("model_shape",), lambda: _shape(graph)))


def _shape(graph) -> dict:
    nodes = graph.layers()
    att = [n for n in nodes if n.kind == "attention"]
    if not att or not all(n.attrs.get("causal") for n in att):
        raise ValueError(f"model: inference with a KV cache needs a causal decoder (gpt2, gpt3-175b, a gpt spec, "
                         f"an hf_config decoder); {graph.name!r} has {'no causal' if att else 'no'} attention")
    a = att[0].attrs
    emb = [n for n in nodes if n.kind == "embedding"]
    head = nodes[-1]
    return {"layers": len(att), "heads": a["heads"], "kv_heads": a.get("kv_heads", a["heads"]),
            "head_dim": a["head_dim"], "hidden": emb[0].shape[-1] if emb else a["heads"] * a["head_dim"],
            "vocab": head.attrs.get("c_out") if head.kind == "linear" else None, "context": a["seq"],
            "fused": bool(a.get("fused")), "params": int(graph.params)}


def kv_cache_bytes(layers, batch, context, kv_heads, head_dim, value_bytes=2, tensor: int = 1, pipeline: int = 1,
                   shared: int = 0):
    """Bytes of the KV cache on one device: ``2 * ceil(layers / pipeline) * batch * context *
    ceil(kv_heads / tensor) * head_dim * value_bytes`` (K and V of every position, layer and KV head;
    Pope et al. 2022 §2; Chen 2022, "Transformer Inference Arithmetic"). ``batch`` and ``context`` may be
    sympy symbols. ``shared``: the first positions of every sequence that are the same tokens (a cached prompt
    prefix), held once for the batch in blocks the sequences share (vLLM's paged blocks, Kwon et al. 2023): the
    positions are ``batch (context - shared) + shared``.

    Examples
    --------
    LLaMA-2-7B (32 layers, 32 KV heads of 128) in fp16: 2 * 32 * 32 * 128 * 2 = 524,288 bytes per token.

    >>> kv_cache_bytes(32, 1, 4096, 32, 128, 2)
    2147483648
    >>> from concurrency_model.symbols import N
    >>> kv_cache_bytes(32, N, 4096, 32, 128, 2, tensor=2)
    1073741824*N
    >>> kv_cache_bytes(32, 4, 4096, 32, 128, 2, shared=1024) == 524288 * (4 * 3072 + 1024)
    True
    """
    for name, v in (("layers", layers), ("kv_heads", kv_heads), ("head_dim", head_dim), ("tensor", tensor),
                    ("pipeline", pipeline)):
        count(name, v)
    per_dev_layers = -(-layers // pipeline)
    per_dev_heads = -(-kv_heads // tensor)
    positions = sp.sympify(batch) * (sp.sympify(context) - shared) + shared
    out = 2 * per_dev_layers * positions * per_dev_heads * head_dim * value_bytes
    return int(out) if out.is_number else out


def cache_bytes(shape: dict, batch, context, tensor: int = 1, pipeline: int = 1, shared: int = 0):
    """:func:`kv_cache_bytes` of a served model's ``shape`` (:func:`served`: layers, KV heads, head size and the
    cache's ``kv_bytes`` a value)."""
    return kv_cache_bytes(shape["layers"], batch, context, shape["kv_heads"], shape["head_dim"], shape["kv_bytes"],
                          tensor, pipeline, shared)


def weights_bytes(graph, vb: int, weight_dtype: str | None, weight_sparsity=None,
                  expert: int = 1) -> tuple[float, float | None]:
    """``(bytes of the weights, bytes a quantized weight or None)``: every parameter at ``vb`` bytes, the
    :func:`~concurrency_model.timing.graph.quantizable` layers' matrices at ``weight_dtype``'s, or pruned
    (``weight_sparsity``, :mod:`.ops.sparse`): ``"2:4"`` keeps half of them with a 2-bit index each; a fraction
    of zeros stores the rest in CSR (a 4-byte column index a value, a row offset per output). With expert
    parallelism ``expert``, the bytes of one device of an expert group: ``1/expert`` of every mixture-of-experts
    layer's experts (:mod:`concurrency_model.parallel.expert`). Computed once a graph and set of arguments
    (:mod:`.memo`)."""
    if weight_dtype is not None and (not isinstance(weight_dtype, str) or weight_dtype not in WEIGHT_BYTES):
        raise ValueError(f"inference.weight_dtype: unknown {weight_dtype!r}{did_you_mean(weight_dtype, WEIGHT_BYTES)}; "
                         f"allowed: {', '.join(WEIGHT_BYTES)}")
    return memoized(graph, ("weights_bytes", vb, weight_dtype, weight_sparsity, expert),
                    lambda: _weights_bytes(graph, vb, weight_dtype, weight_sparsity, expert))


def _weights_bytes(graph, vb: int, weight_dtype: str | None, weight_sparsity,
                   expert: int) -> tuple[float, float | None]:
    wb = vb if weight_dtype is None else WEIGHT_BYTES[weight_dtype]
    total = float(graph.params) * vb
    for n in graph.layers():
        delta = 0.0  # the node's stored bytes less its parameters at ``vb``
        if quantizable(n):
            ci, co, copies = n.attrs["c_in"], n.attrs["c_out"], matrix_copies(n)
            if weight_sparsity == STRUCTURED:
                stored = ci * co * (wb + METADATA_BITS / 8) / 2
            elif weight_sparsity is not None:
                stored = nnz_of(co, ci, weight_sparsity) * (wb + INDEX_BYTES) + (co + 1) * INDEX_BYTES
            else:
                stored = ci * co * wb
            delta = copies * (stored - ci * co * vb)
        total += delta
        if n.attrs.get("experts", 0) > 1:  # the other devices of the expert group hold the rest
            total -= (float(n.cost.params) * vb + delta) * (1 - 1 / expert)
    return total, None if wb == vb else wb


def fits_with(mem: dict, graph, vb: int, weight_dtype: str | None, weight_sparsity, expert: int, split: int,
              batch: int, other_weights: float = 0.0, kv_bytes: float = 2) -> str:
    """The clause a refusal for memory (``mem``, :func:`~concurrency_model.parallel.memory.memory_per_device`)
    adds: the first smaller weight format that fits (the weights of ``graph`` re-stored as :func:`weights_bytes`
    has them, ``other_weights`` such as a draft model's unchanged, over ``split`` = tensor x pipeline devices;
    the KV cache and workspace stay as they are, so the total is exact), the KV caches (``mem``'s
    ``kv_cache_bytes`` and ``draft_kv_cache_bytes``, of ``kv_bytes`` a value) in fp8 if that fits, a smaller
    batch when the weights alone leave room, else more devices.

    >>> g = model_graph("gpt2", 1, 1024, 2)  # 249 MB of fp16 weights, 164 MB with int8 linear layers
    >>> mem = {"usable_bytes": 220e6, "total_bytes": 300e6, "model_state_bytes": 249e6}
    >>> fits_with(mem, g, 2, None, None, 1, 1, 1)
    '; fits with inference.weight_dtype=int8 (0.2 GB)'
    """
    now = float(mem["model_state_bytes"])
    rest = float(mem["total_bytes"]) - now
    current = vb if weight_dtype is None else WEIGHT_BYTES[weight_dtype]
    found = []
    for smaller in ("int8", "int4"):
        if WEIGHT_BYTES[smaller] < current:
            total = rest + (weights_bytes(graph, vb, smaller, weight_sparsity, expert)[0] + other_weights) / split
            if total <= float(mem["usable_bytes"]):
                found.append(f"inference.weight_dtype={smaller} ({total / 1e9:.1f} GB)")
                break
    kv = float(mem.get("kv_cache_bytes", 0.0)) + float(mem.get("draft_kv_cache_bytes", 0.0))
    with_fp8 = float(mem["total_bytes"]) - kv * (1 - 1 / kv_bytes)  # the caches at 1 byte a value
    if kv and kv_bytes > 1 and with_fp8 <= float(mem["usable_bytes"]):
        found.append(f"inference.kv_dtype=fp8 ({with_fp8 / 1e9:.1f} GB)")
    if batch > 1 and now < float(mem["usable_bytes"]):
        found.append("a smaller inference.batch (infer --max-batch gives the largest that fits)")
    if found:
        return "; fits with " + " or ".join(found)
    return "; split the weights over more devices (parallel.tensor or parallel.pipeline)"


def check_weight_sparsity(dev, dtype: str, weight_sparsity, weight_dtype):
    """``inference.weight_sparsity`` checked and parsed: ``None``, ``"2:4"`` (the blocks' linear weights pruned
    2:4, their forward GEMMs on the sparse tensor cores: a device with a 2:4 rate for ``dtype``) or a fraction
    of zeros in [0, 1) (CSR products); not with weight-only quantization (the two are not modelled together).
    ``ValueError`` naming the field (the format and the pairing: :func:`concurrency_model.scenario.
    parse_weight_sparsity`, also made on load; the device's 2:4 math here)."""
    s = parse_weight_sparsity(weight_sparsity, weight_dtype, dtype)
    if s == STRUCTURED:
        try:
            sparse_core(dev, dtype)
        except ValueError as e:
            raise ValueError(f"inference.weight_{e}") from None
    return s


def expert_count(graph) -> int:
    """Experts of the model's mixture-of-experts layers (the most of any layer; 0: none)."""
    return max((n.attrs["experts"] for n in graph.layers() if n.attrs.get("experts", 0) > 1), default=0)


def check_layout(graph, batch: int, data: int, expert: int, pipeline: int, speculative=None) -> None:
    """The layout of a served model: ``data`` replicas that split the ``batch`` sequences evenly, each serving its
    own (``expert`` = 1), or for a mixture of experts sharing their experts in groups of ``expert`` (``expert``
    divides ``data`` and the experts of a layer, as in training, :mod:`concurrency_model.parallel.expert`; no
    speculative decoding with it). ``ValueError`` naming the field."""
    if batch % data:
        raise ValueError(f"inference.batch: {batch} sequences do not split evenly over parallel.data = {data} "
                         "replicas")
    if expert == 1:
        return
    experts = expert_count(graph)
    if not experts:
        raise ValueError(f"parallel.expert: {expert} needs a model with mixture-of-experts layers; this one has none")
    if experts % expert:
        raise ValueError(f"parallel.expert: {expert} does not divide the {experts} experts of a layer")
    if data % expert:
        raise ValueError(f"parallel.expert: {expert} does not divide parallel.data = {data} (an expert group is "
                         f"{expert} of the replicas)")
    if speculative is not None:
        raise ValueError("inference.speculative: speculative decoding with expert parallelism is not modelled")


class Comm:
    """Collective and point-to-point seconds on a cluster, cached by size, for one model replica of ``t`` tensor
    ranks x ``p`` stages; with expert parallelism, in an expert group of ``e`` consecutive replicas routing with
    ``imbalance`` (``parallel.expert_imbalance``, :mod:`concurrency_model.ops.routing`)."""

    def __init__(self, cluster, t: int, p: int, e: int = 1, imbalance=1.0):
        self.cluster, self.t, self.p, self.e, self.imbalance = cluster, t, p, e, imbalance
        self.rpn = min(t, cluster.gpus_per_node)

    @lru_cache(maxsize=None)
    def collective(self, op: str, nbytes: float) -> float:
        if self.t == 1 or nbytes == 0:
            return 0.0
        return float(collective_on_cluster(op, nbytes, self.t, self.cluster, self.rpn)[1])

    def tensor(self, graph, batch: int, vb: int, last_only: bool, head_batch: int | None = None) -> float:
        """Tensor-parallel collectives of one forward pass (Shoeybi et al. §3); the logits gathered for
        ``head_batch`` samples when given (a mixed iteration's sampling rows), else for ``batch``; computed once a
        graph, cluster layout and set of arguments (:mod:`.memo`)."""
        return memoized(graph, ("tensor_comm", self.cluster, self.t, self.rpn, batch, vb, last_only, head_batch),
                        lambda: self._tensor(graph, batch, vb, last_only, head_batch))

    def _tensor(self, graph, batch: int, vb: int, last_only: bool, head_batch: int | None) -> float:
        s = 0.0
        for n in graph.layers():
            if is_lm_head(n):
                rows = 1 if last_only else n.attrs["rows_per_sample"]
                s += self.collective("allgather", (batch if head_batch is None else head_batch) * rows *
                                     n.attrs["c_out"] * vb)
            elif n.kind == "linear" and n.attrs.get("split") == "row":
                s += self.collective("allreduce", batch * n.attrs["rows_per_sample"] * n.attrs["c_out"] * vb)
            elif n.kind == "embedding":
                s += self.collective("allreduce", batch * n.numel * vb)
        return s

    @lru_cache(maxsize=None)
    def alltoall(self, nbytes: float) -> float:
        """One all-to-all of ``nbytes`` a device over the expert group: the same stage's ranks of ``e`` consecutive
        replicas of ``t x p`` devices (:func:`~concurrency_model.parallel.data_parallel.group_placement`), as in
        training; with pipeline stages each stage's mixture-of-experts layers exchange within its own group."""
        if self.e == 1 or nbytes == 0:
            return 0.0
        rpn, sharing = group_placement(self.cluster.gpus_per_node, self.t * self.p, self.e)
        return float(collective_on_cluster("alltoall", nbytes, self.e, self.cluster, rpn,
                                           groups_sharing=sharing)[1])

    def expert(self, graph, batch: int, vb: int) -> float:
        """Expert-parallel all-to-alls of one forward pass: per mixture-of-experts layer the dispatch of the
        device's routed rows (``batch`` x the dispatch node's rows and hidden values) to the devices holding their
        experts and the combine that returns them, each tensor rank sending ``1/t`` (GShard, Lepikhin et al.
        2021 §2.2; Switch Transformer, Fedus et al. 2022 §5.4: two all-to-alls a forward pass;
        :mod:`concurrency_model.parallel.expert`), at the busiest device's volume (:mod:`concurrency_model.ops.routing`)."""
        return sum(2 * self.alltoall(dispatch_imbalance(n, batch, self.e, self.imbalance) * batch * n.numel * vb
                                     / self.t) for n in graph.layers() if n.kind == "moe_dispatch")

    def pipeline(self, nbytes: float) -> float:
        """``p - 1`` sends of ``nbytes`` between consecutive stages of ``t`` ranks each; a send crosses
        the network when any rank's peer is on another node (stages fill GPUs in order)."""
        if self.p == 1:
            return 0.0
        cl, t = self.cluster, self.t
        g = cl.gpus_per_node
        intra = place(cl, 2, 2).intra if g >= 2 else None
        inter = place(cl, 2, 1, groups_sharing=min(t, g)).inter
        s = 0.0
        for i in range(self.p - 1):
            crosses = any((i * t + j) // g != ((i + 1) * t + j) // g for j in range(t))
            alpha, beta = inter if crosses or intra is None else intra
            s += alpha + nbytes * beta
        return s


def workspace_bytes(graph, t: int, batch: int, vb: int) -> float:
    """Bytes of the largest inputs + output of one operator of the prefill pass (one device's share); computed once
    a graph and tensor degree (:mod:`.memo`): a node's shape is per sample, so the values of the largest are the
    same at any batch (:class:`~concurrency_model.graph.Node`), times the batch and the bytes of a value."""
    return float(memoized(graph, ("workspace_values", t), lambda: _workspace_values(graph, t)) * batch * vb)


def _workspace_values(graph, t: int):
    """Values a sample of the largest inputs + output of one operator (:func:`workspace_bytes`)."""
    def share(n):
        split = n.attrs.get("split")
        return 1 / t if n.kind == "attention" or split == "column" else 1

    def size(n):
        return (n.numel // n.attrs["rows_per_sample"] if is_lm_head(n) else n.numel) * share(n)

    peak = 0.0
    for n in graph.layers():
        if n.kind in FREE:
            continue
        ins = sum(size(graph.nodes[i]) for i in n.inputs)
        if is_lm_head(n):
            ins /= n.attrs["rows_per_sample"]  # the last position only
        extra = 2 * (n.attrs["heads"] // t) * n.attrs["seq"] ** 2 \
            if n.kind == "attention" and not n.attrs.get("fused") else 0
        peak = max(peak, ins + size(n) + extra)
    return peak


__all__ = ["WEIGHT_BYTES", "FREE", "model_graph", "kv_cache_bytes", "cache_bytes", "weights_bytes", "expert_count",
           "check_layout", "Comm", "workspace_bytes", "is_causal_decoder", "served", "model_shape"]
