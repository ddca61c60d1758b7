"""Fine-tuning with low-rank adapters (``training.lora_rank`` = r > 0): the base model frozen, an adapter beside
every linear layer of the transformer blocks [D].

LoRA (Hu et al., ICLR 2022, §4) freezes the pretrained weights ``W`` (``c_out x c_in``) and trains ``B A`` beside
each, ``A`` of ``r x c_in`` and ``B`` of ``c_out x r``: ``y = W x + B (A x)``. Hu et al. adapt the attention
projections; adapting every linear layer of a block, as QLoRA does (Dettmers et al. 2023), is the default of
today's fine-tuning recipes and what this module prices (the embeddings, the output layer and the norms stay
frozen). A step then

* runs, beside every adapted layer, two GEMMs forward (``rows x r x c_in``, ``rows x c_out x r``) and four
  backward (the input gradients of both and their weight gradients);
* computes no weight gradient of a frozen layer (its input gradient still flows back), so a linear layer's
  backward is about as long as its forward instead of twice it (attention, which has no weights, keeps its);
* keeps the frozen weights once in the training dtype and weights, gradients and optimizer state of the adapters
  only, ``r (c_in + c_out)`` parameters a layer (:func:`adapter_params`); the gradients the data-parallel
  replicas all-reduce and the optimizer's pass are the adapters' alone.

**A mixture of experts**: every expert's linear layers get their own adapters (PEFT's target modules name the
experts' projections; the router stays frozen), ``E r (c_in + c_out)`` parameters a layer of ``E`` experts; the
adapters run on the rows routed to their expert, one pair of GEMMs per expert a device's batch reaches
(:func:`~concurrency_model.timing.graph.expert_gemms`, with the routing imbalance of expert parallelism); under
expert parallelism ``e`` a device holds ``1/e`` of the experts' adapters and frozen weights, and the experts'
adapter gradients are all-reduced over the ``d / e`` replicas holding the same experts, as full training's [D].

Under Megatron tensor parallelism ``t`` the adapter follows its layer's split (``B`` cut like a column-split ``W``,
``A`` like a row-split one; the row-split adapter's partial outputs summed by the layer's own all-reduce), so a
rank's GEMMs are those of its share; its parameters are counted as ``1/t`` of the adapters' [D]. The scale of
``B A x`` and the sum with ``W x`` (element-wise, fused in practice) and dropout on the adapter's input are left
out.

**A quantized base** (``training.lora_base_dtype`` = ``nf4`` / ``int4``, ``int8`` or ``fp8``; QLoRA, Dettmers et al.
2023): the adapted layers' frozen weights are stored at 0.5 or 1 byte (their blockwise scales left out, as in
:mod:`concurrency_model.serving.decoder`) and dequantized to the training dtype before each use, the forward GEMM and
the input-gradient GEMM each running in the training dtype on the copy (bitsandbytes' training path, as
recalled): a memory-bound kernel reading the stored weights and writing the copy beside every such GEMM [D]. The
memory shrinks, the step grows.
"""
from __future__ import annotations

from functools import cached_property

from ..choices import LORA_BASES, check_lora_base
from ..models.transformer import is_lm_head
from ..timing import gemm_coeffs, roofline_coeffs
from ..timing.graph import expert_gemms
from ..timing.parts import Parts, total
from ..units import WEIGHT_BYTES, dtype_bytes, state_dtype

BASE_BYTES = {k: WEIGHT_BYTES[k] for k in LORA_BASES}  # lora_base_dtype -> bytes a stored weight


def base_bytes(dtype: str) -> float:
    """Bytes a frozen weight is stored in: a quantized base's (:data:`BASE_BYTES`) or a training dtype's."""
    return BASE_BYTES.get(dtype) or dtype_bytes(dtype)


def adapted(node) -> bool:
    """Whether LoRA puts an adapter beside ``node``: a linear layer of a transformer block (one Megatron splits)."""
    return node.kind == "linear" and node.attrs.get("split") in ("column", "row") and not is_lm_head(node)


def copies(node) -> int:
    """Adapters beside ``node``: one, or one per expert of a mixture-of-experts layer."""
    return max(1, node.attrs.get("experts", 1))


def adapter_params(graph, rank: int, experts_only: bool = False) -> int:
    """Trainable parameters of rank-``rank`` adapters on every adapted layer of ``graph``: ``r (c_in + c_out)`` each,
    each expert's own in a mixture of experts (those alone with ``experts_only``).

    >>> from concurrency_model.models import get_model
    >>> adapter_params(get_model("gpt2"), 8)  # 12 blocks: qkv 768 -> 2304, proj 768 -> 768, fc 768 -> 3072 -> 768
    1179648
    """
    return sum(copies(n) * rank * (n.attrs["c_in"] + n.attrs["c_out"]) for n in graph.layers()
               if adapted(n) and (copies(n) > 1 or not experts_only))


def adapter_matrices(graph, rank: int, tensor: int = 1) -> list[tuple[int, int]]:
    """The trained matrices, ``A`` (``r x c_in``) and ``B`` (``c_out x r``) of every adapted layer, one tensor rank's
    share (the split dimension over ``tensor``, as :func:`adapter_parts`): what PowerSGD compresses under LoRA.

    >>> from concurrency_model.models import get_model
    >>> adapter_matrices(get_model("gpt2"), 8, 2)[:4]  # qkv column-split, proj row-split
    [(8, 768), (1152, 8), (8, 384), (768, 8)]
    """
    out = []
    for n in graph.layers():
        if adapted(n):
            c_in, c_out, col = n.attrs["c_in"], n.attrs["c_out"], n.attrs["split"] == "column"
            out += [(rank, c_in if col else -(-c_in // tensor)), (-(-c_out // tensor) if col else c_out, rank)] \
                * copies(n)
    return out


def adapter_parts(node, rows: int, rank: int, tensor: int, dev, dtype: str,
                  base_dtype: str | None = None, expert: int = 1, imbalance=1.0) -> tuple[Parts, Parts]:
    """``(forward, backward)`` kernels of one adapter beside ``node`` on ``rows`` token rows of one tensor rank,
    and with a quantized base (``base_dtype``) the dequantization of the rank's weights before each pass's GEMM; in
    a mixture-of-experts layer those of each expert the rows reach (``expert``: the expert-parallel degree,
    ``imbalance`` its routing, :func:`~concurrency_model.timing.graph.expert_gemms`)."""
    g, rows = expert_gemms(node.attrs, rows, expert, imbalance)
    c_in, c_out = node.attrs["c_in"], node.attrs["c_out"]
    if tensor > 1:
        c_in, c_out = (c_in, -(-c_out // tensor)) if node.attrs["split"] == "column" else (-(-c_in // tensor), c_out)
    r = rank

    def gemms(*shapes):
        return total(Parts.from_coeffs(gemm_coeffs(m, n, k, dev, dtype), dev) for m, n, k in shapes)
    forward = gemms((rows, r, c_in), (rows, c_out, r))  # h = A x, then B h
    # dh = dy B, dx = dh A (input gradients); dB = dy^T h, dA = dh^T x (weight gradients)
    backward = gemms((rows, r, c_out), (rows, c_in, r), (c_out, r, rows), (r, c_in, rows))
    if base_dtype is not None:  # read the stored weights, write the training-dtype copy (a multiply a weight)
        n = c_in * c_out
        dequant = Parts.from_coeffs(roofline_coeffs(n, n * (BASE_BYTES[base_dtype] + dtype_bytes(dtype)), dev, dtype),
                                    dev)
        forward, backward = forward + dequant, backward + dequant
    return forward.times(g), backward.times(g)


def training_flop(graph, rank: int) -> float:
    """Forward plus backward FLOP of one LoRA step over ``graph``: the frozen layers' weight gradients left out,
    the adapters' two products forward and four backward added (``2 rows r (c_in + c_out)`` each pair).

    >>> from concurrency_model.models import get_model
    >>> g = get_model("gpt2")
    >>> full = float(g.forward().flop + g.backward().flop)
    >>> 0.6 < training_flop(g, 8) / full < 0.75  # about forward + input gradients: two thirds
    True
    """
    frozen = sum(float(n.cost.grad_weight.flop) for n in graph.layers() if n.cost is not None)
    adapters = sum(3 * 2 * int(graph.batch) * n.attrs["rows_per_sample"] * rank * (n.attrs["c_in"] + n.attrs["c_out"])
                   for n in graph.layers() if adapted(n))
    return float(graph.forward().flop + graph.backward().flop) - frozen + float(adapters)


class LoraMixin:
    """What LoRA changes in a :class:`~.features.Workload` (which sets ``lora_rank`` and ``lora_base_dtype``)."""

    @cached_property
    def trainable_params(self) -> float:
        """Parameters that take gradients and optimizer state: all, or with LoRA the adapters'."""
        return float(adapter_params(self.graph(1), self.lora_rank)) if self.lora_rank else self.params

    @cached_property
    def expert_trainable_params(self) -> float:
        """Trained parameters of the mixture-of-experts layers' experts (the ones expert parallelism divides): the
        experts' own, or with LoRA their adapters."""
        return float(adapter_params(self.graph(1), self.lora_rank, True)) if self.lora_rank else self.expert_params

    def frozen_weight_bytes(self, e: int = 1) -> float:
        """Bytes of the weights held without gradients (LoRA's base model) on a device of an expert group of ``e``
        (``1/e`` of the experts'): in the state's dtype, the adapted layers' at ``lora_base_dtype`` when given
        (QLoRA)."""
        if not self.lora_rank:
            return 0.0
        whole, stored = dtype_bytes(state_dtype(self.dtype)), base_bytes(self.lora_base_dtype or self.dtype)
        total_bytes = 0.0
        for n in self.graph(1).layers():
            if n.cost is None:
                continue
            share = 1 / e if copies(n) > 1 else 1.0
            total_bytes += float(n.cost.params) * share * (stored if self.lora_base_dtype and adapted(n) else whole)
        return total_bytes

    def _passes(self, node, r: dict, b: int, t: int, e: int = 1) -> tuple:
        """``(forward, backward, their seconds)`` of a layer: both gradients; with LoRA the input gradient only,
        and beside an adapted layer its adapter's kernels (``e``: the expert-parallel degree)."""
        f, bw = r["forward"], r["grad_input"] + (Parts.empty() if self.lora_rank else r["grad_weight"])
        if self.lora_rank and adapted(node):
            af, ab = adapter_parts(node, b * node.attrs["rows_per_sample"], self.lora_rank, t, self.dev, self.dtype,
                                   self.lora_base_dtype, e, self.expert_imbalance)
            f, bw = f + af, bw + ab
        return f, bw, f.total(), bw.total()


def check_lora(rank: int, base_dtype: str | None, graph) -> None:
    """``ValueError`` naming ``training.lora_rank`` for a model it does not apply to, or ``training.lora_base_dtype``
    for an unknown format or one without adapters (:func:`check_lora_base`)."""
    check_lora_base(rank, base_dtype)
    if not rank:
        return
    nodes = graph.layers()
    if not any(adapted(n) for n in nodes):
        raise ValueError("training.lora_rank: adapters go beside the linear layers of transformer blocks; this "
                         "model has none")


__all__ = ["BASE_BYTES", "LoraMixin", "adapted", "adapter_matrices", "adapter_params", "adapter_parts", "base_bytes",
           "check_lora", "copies", "training_flop"]
