"""Time of every layer of a DNN graph on one device, forward and backward (the compute part of a step).

Each node kind goes to its kernel model: convolutions to :func:`~.layers.conv_coeffs` (forward, ∇x, ∇w),
fully connected layers to three GEMMs (``y = x w``: rows x c_out x c_in; ``∇x = ∇y wᵀ``: rows x c_in x
c_out; ``∇w = xᵀ ∇y``: c_in x c_out x rows), attention to :func:`~.layers.attention_time`, recurrent
layers to :func:`~.recurrent.rnn_time` (one call per stacked layer), and everything else (element-wise,
normalization, pooling, embedding, softmax) to the roofline of its operator cost, one kernel per pass.
With an 8-bit math dtype (``fp8``, ``int8``) only the matrix layers run in it (a language model's output layer
aside), everything else in 16 bits (:func:`~concurrency_model.units.value_dtype`), and each fully connected
layer quantizes its input, and in training its output gradient (:func:`cast_parts`).
Views (flatten, reshape, select) cost nothing. The layers run one after another (one stream), so the
pass time is the sum over layers; the optimizer update is one element-wise kernel over the parameters.

One kernel a node is what a compiler or a runtime's hand-fused kernels run (torch.compile's inductor generates one
kernel for a norm's reduction and pointwise ops; Transformer Engine and Apex ship fused norms and rotary kernels).
Eager PyTorch (``training.compile`` false, ``eager``) runs a module written as ATen ops one kernel an op: the RMS
norm and the rotary embedding of torchtitan's Llama (:func:`eager_kernels`) are then charged per ATen kernel, with
their fp32 upcasts and autograd's backward kernels. Fusions a compiler makes across nodes (SwiGLU's two ops, a
residual add with the next norm) are not modelled: the graph's nodes stand for both.
"""
from __future__ import annotations

import math
import weakref
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from ..checks import did_you_mean
from ..models.channel_split import is_channel_split, replicated
from ..models.transformer import is_lm_head
from ..ops import routing
from ..ops.optimizer import RULES
from ..units import EIGHT_BIT_VALUES, dtype_bytes, value_dtype
from . import decided_float, device, gemm_coeffs, roofline, roofline_coeffs
from .layers import attention_kernels, conv_coeffs
from .parts import Parts, total
from .recurrent import rnn_parts
from .sparse import STRUCTURED, csr_coeffs, structured_coeffs

if TYPE_CHECKING:  # annotations only
    import pandas as pd

PASSES = ("forward", "grad_input", "grad_weight")
VIEWS = ("flatten", "reshape", "select")
UPDATE_BYTES_PER_PARAM = {k: rule[2] for k, rule in RULES.items()}  # tensors read + written per parameter


def owns_matrix(node) -> bool:
    """Whether ``node`` is a fully connected layer holding its own ``c_in x c_out`` weights (not a weight
    tied to an embedding)."""
    a = node.attrs
    return node.kind == "linear" and "c_out" in a and _num(node.cost.params) >= a["c_in"] * a["c_out"]


def matrix_copies(node) -> int:
    """The ``c_in x c_out`` weight matrices a fully connected node holds: one per expert of a mixture-of-experts
    layer, else one."""
    return max(1, node.attrs.get("experts", 1))


def quantizable(node) -> bool:
    """The layers weight-only quantization stores narrower: fully connected layers that own their weights,
    a language model's output layer aside (GPTQ and AWQ keep it in 16 bits)."""
    return owns_matrix(node) and not is_lm_head(node)


def expert_gemms(attrs: dict, rows: int, expert: int = 1, imbalance=1.0) -> tuple[int, int]:
    """``(GEMMs, rows each)`` of a layer's ``rows`` rows: ``(1, rows)`` for a dense layer; for the experts of a
    mixture-of-experts layer (``attrs["experts"]`` E, ``top_k`` k) on a device holding ``E / expert`` of them,
    one GEMM per expert the batch reaches, each on an even share of the rows [D]: all of the device's experts
    with capacity buffers, else their expected number under uniform independent routing, ``E_d (1 - (1 -
    k / E)^T)`` for the ``T = rows * expert / k`` tokens of the expert group (a batch-1 decode step of a top-2
    model reads 2 experts' weights, a training microbatch all of them). Without capacity buffers the
    busiest device of the group runs :func:`~concurrency_model.ops.routing.imbalance` times the mean rows
    (``imbalance``: ``parallel.expert_imbalance``).

    >>> expert_gemms({"experts": 8, "top_k": 2}, 2), expert_gemms({"experts": 8, "top_k": 2}, 8)
    ((2, 1), (5, 2))
    >>> expert_gemms({"experts": 8, "top_k": 2}, 1024, 4, 1.5)  # 2 experts a device, 1.5 x 1,024 rows
    (2, 768)
    """
    E = attrs.get("experts", 0)
    if E <= 1:
        return 1, rows
    here = max(1, E // expert)
    k = attrs.get("top_k", 1)
    fixed = attrs.get("fixed_capacity")
    touched = here if fixed else here * (1 - (1 - k / E) ** (rows * expert / k))
    g = max(1, min(here, round(touched)))
    busiest = rows if fixed else math.ceil(rows * routing.imbalance(imbalance, rows * expert, expert) - 1e-9)
    return g, -(-busiest // g)


CAST_FUSED_BEFORE = ("layer_norm", "rms_norm", "gelu", "silu", "relu", "mul")  # write a GEMM's input in 8 bits
CAST_FUSED_AFTER = ("gelu", "silu", "relu", "mul")  # their backward writes the GEMM's output gradient in 8 bits
# Megatron-Core's Transformer Engine layer (NVIDIA/Megatron-LM @ 00611e6e megatron/core/models/gpt/gpt_layer_specs.py,
# get_gpt_layer_with_transformer_engine_submodules and get_mlp_module_spec_for_backend at their defaults
# use_te_op_fuser = use_te_activation_func = False): linear_qkv and linear_fc1 are TE's LayerNormLinear (the norm
# writes the 8-bit input), linear_proj and linear_fc2 TE's plain Linear behind Megatron's own attention output and
# its own activation kernel (MLP.forward's bias_swiglu / bias_gelu, 16-bit output): their inputs and every output
# gradient are cast by TE's own kernels
CAST_FUSED_BEFORE_MCORE = ("layer_norm", "rms_norm")
CAST_FUSED_AFTER_MCORE: tuple = ()


CAST_RECIPES = ("te", "te-mcore", "torchao", "torchao-rowwise")
# torchao rowwise: the forward GEMM's rate on PyTorch's CUTLASS rowwise kernel over the tensorwise cuBLAS kernel's,
# the middle of "most shapes are within 90-100% of tensor-wise efficiency" (pytorch/pytorch issue 147971, H100)
ROWWISE_FORWARD_RATE = 0.95


# The 8-bit GEMMs' math rate in a training step over the 16-bit GEMMs' (both under efficiency.sustained), by CUDA
# compute capability: Hopper's fitted on llm-foundry's H100 fp8 runs paired with its bf16 runs of the same model and
# sequence (benchmarks/fit_fp8_rate.py: the ratio of the two runs' errors, so that what both share cancels); NeMo,
# Megatron-Bridge and torchtitan held out. Elsewhere 1 (no paired data). Hopper 0.90: the least median |ratio error| of
# the 5 pairs over 0.80-1.00 in steps of 0.02 (0.0097 against 0.0379 at 1; 0.80 gives 0.0116: a shallow optimum).
# Held out at 0.90 against 1 (validate, quick / all rows): NeMo 11.5 -> 8.6 / 13.4 -> 9.7%, torchtitan 12.3 -> 9.8%,
# Megatron-Bridge dense 6.9 -> 11.8% (its H100 rows, already 1-10% slow, 5-16% slow), llm-foundry held-out 8.2 -> 8.2%.
EIGHT_BIT_RATE = {9.0: 0.90}


def eight_bit_rate(dev) -> float:
    """The math rate of 8-bit GEMMs in a training step over the 16-bit ones' on ``dev`` (:data:`EIGHT_BIT_RATE`).

    >>> eight_bit_rate(device("a100-sxm4-80gb"))
    1.0
    """
    return EIGHT_BIT_RATE.get(float(device(dev).compute_capability), 1.0)


def cast_parts(rows: int, c_in: int, c_out: int, dev, dtype: str, fused_in: bool = False,
               fused_out: bool = False, recipe: str = "te", input_cast: bool = True) -> dict:
    """The cast kernels of a fully connected layer whose GEMMs run in an 8-bit ``dtype``, by ``recipe``.

    ``te``: Transformer Engine's recipe ([D] as recalled): forward, its ``rows x c_in`` input read in 16 bits and
    written in 8 (3 bytes a value); with ∇w, the output gradient cast and transposed (Hopper's fp8 GEMMs take only
    the TN layout: read 2, write 1 + 1 bytes a value of ``rows x c_out``) and the input's transposed 8-bit copy (1
    byte a value, written with the forward cast in TE and counted here). ``fused_in``: the input comes from a kernel
    that writes it in 8 bits itself (TE's LayerNormLinear, LayerNormMLP: layer norm or activation with the cast,
    8-bit value and transposed copy in place of the 16-bit value: no kernel, no bytes more); ``fused_out``: the
    output gradient comes from an activation's backward that casts it (dgelu with cast and transpose). The fp8
    copies of the weights, cast once a step (TE caches them over the microbatches), are not counted.
    ``te-mcore``: the same kernels in Megatron-Core's layers, whose fusions :func:`cast_fusion` gives.

    ``torchao``: torchao's float8 training with dynamic tensorwise scaling, as its roofline model counts the
    kernels (pytorch/ao @ 6243040 ``torchao/testing/float8/roofline_utils.py``
    ``get_tensor_memory_traffic_ovhd_s``, ``float8_recipe_name == "tensorwise"``): the input and the output
    gradient each take an amax pass (read 2 bytes a value, then a second tiny reduction kernel) and one cast
    kernel that writes both layouts (read 2, write 1 + 1); the amax read is fused into the producer where it is an
    element-wise kernel (``fused_in`` / ``fused_out``, the roofline's ``fuse_with_prev``); the ``c_in x c_out``
    weight takes an amax pass and two casts (read 2, write 1), one for the forward and one for ∇x, in every
    microbatch (Float8Linear casts in its forward). Placed: the input's and the weight's forward cast with the
    forward, the weight's second cast with ∇x, the output gradient's with ∇w.

    ``input_cast`` False (torchao): the input arrives cast by another linear reading the same tensor (the second and
    third of torchtitan's separate q, k, v projections, :func:`projection_widths`): no input cast here.

    ``torchao-rowwise``: torchao's rowwise scaling, the same file's ``float8_recipe_name == "rowwise"``: the input and
    the output gradient each in two kernels, one reading 2 bytes a value and writing the 8-bit row-major copy (1) and
    a 16-bit transposed copy (2), one casting that copy (read 2, write 1); with ``fuse_with_prev`` the first read is
    fused into the producer; the weight in three (cast 2 + 1 for the forward; transpose 2 + 2 and cast 2 + 1 for ∇x).
    Its GEMMs: the forward runs with fast accumulation (torchao @ 6243040 ``torchao/float8/config.py``:
    ``gemm_config_output`` ``use_fast_accum=True``) on PyTorch's CUTLASS rowwise kernel, which reaches 90-100% of the
    tensorwise cuBLAS kernel's efficiency on most shapes (pytorch/pytorch issue 147971, 2025-02-26, H100, fast
    accumulation; a tail to 50% not modelled): :data:`ROWWISE_FORWARD_RATE`, the middle of that range. The two
    backward GEMMs run without fast accumulation, where torchao calls the tensorwise cuBLAS kernel with unit scales
    and multiplies the output by the outer product of the row and column scales afterwards
    (``torchao/float8/float8_ops.py`` ``addmm_float8_unwrapped`` at 6243040: "The rowwise CUTLASS-based kernel is so
    slow without fast-accum that we'd rather use the tensorwise cuBLAS-based kernel and do the scaling manually");
    under torch.compile that is one more kernel per GEMM (pytorch/ao issue 2184, 2025-05-08: "at least one extra
    triton kernel *per GEMM* ... just for the rescaling"): it reads and writes the 16-bit output (4 bytes a value of
    ``rows x c_in`` with ∇x, of ``c_in x c_out`` with ∇w).

    >>> f = cast_parts(2048, 4096, 4096, "h100-sxm5-80gb", "fp8")
    >>> round(float(f["forward"].memory.sum() * 0.8 * 3.35e12 / (2048 * 4096)), 6)  # 3 bytes a value, memory 0.8
    3.0
    >>> len(cast_parts(2048, 4096, 4096, "h100-sxm5-80gb", "fp8", True, True))  # both fused: no cast kernel
    0
    >>> t = cast_parts(4096, 4096, 4096, "h100-sxm5-80gb", "fp8", recipe="torchao")
    >>> round(float(t["forward"].memory.sum() * 0.8 * 3.35e12 / 4096 ** 2), 6)  # input 2 + 4, weight 2 + 3
    11.0
    >>> float(t["grad_weight"].count.sum()), round(float(t["forward"].launch.sum() / 3.8e-6), 9)  # 1 row; 6 kernels
    (1.0, 6.0)
    >>> r = cast_parts(4096, 4096, 4096, "h100-sxm5-80gb", "fp8", recipe="torchao-rowwise")
    >>> round(float(r["grad_input"].memory.sum() * 0.8 * 3.35e12 / 4096 ** 2), 6)  # weight 7, the output's rescale 4
    11.0
    >>> dev = device("h100-sxm5-80gb")   # the forward GEMM's 1/0.95 - 1 of its flop more on the tensor cores
    >>> round(float(r["forward"].compute.sum() * dev.peak("fp8") * dev.efficiency.compute / (2 * 4096 ** 3)), 6)
    0.052632
    """
    dev, vdt = device(dev), value_dtype(dtype)
    if recipe not in CAST_RECIPES:
        raise ValueError(f"fp8 recipe: unknown {recipe!r}{did_you_mean(recipe, CAST_RECIPES)}; allowed: "
                         f"{', '.join(CAST_RECIPES)}")
    out = {}
    x, w, dy = rows * c_in, c_in * c_out, rows * c_out
    if recipe == "torchao-rowwise":
        # the forward GEMM's lower rate on CUTLASS's rowwise kernel, as the tensor-core time it adds
        slower = Parts.from_coeffs(roofline_coeffs(
            (1.0 / ROWWISE_FORWARD_RATE - 1.0) * 2.0 * rows * c_in * c_out, 0.0, dev, dtype, kernels=0, vector=False),
            dev)
        xin = (6.0 if fused_in else 8.0) * x if input_cast else 0.0
        out["forward"] = Parts.from_coeffs(roofline_coeffs(0.0, xin + 3.0 * w, dev, vdt,
                                                           kernels=3 if input_cast else 1), dev) + slower
        out["grad_input"] = Parts.from_coeffs(roofline_coeffs(0.0, 7.0 * w + 4.0 * x, dev, vdt, kernels=3), dev)
        out["grad_weight"] = Parts.from_coeffs(roofline_coeffs(0.0, (6.0 if fused_out else 8.0) * dy + 4.0 * w, dev,
                                                               vdt, kernels=3), dev)
        return out
    if recipe == "torchao":
        xin = (0.0 if fused_in else 2.0 * x) + 4.0 * x if input_cast else 0.0
        out["forward"] = Parts.from_coeffs(roofline_coeffs(
            0.0, xin + 2.0 * w + 3.0 * w, dev, vdt, kernels=((2 if fused_in else 3) if input_cast else 0) + 3), dev)
        out["grad_input"] = Parts.from_coeffs(roofline_coeffs(0.0, 3.0 * w, dev, vdt, kernels=1), dev)
        out["grad_weight"] = Parts.from_coeffs(roofline_coeffs(
            0.0, (0.0 if fused_out else 2.0 * dy) + 4.0 * dy, dev, vdt, kernels=2 if fused_out else 3), dev)
        return out
    if not fused_in:
        out["forward"] = Parts.from_coeffs(roofline_coeffs(0.0, 3.0 * rows * c_in, dev, vdt), dev)
    if not (fused_in and fused_out):  # the transposed input goes with the forward cast's kernel in TE
        out["grad_weight"] = Parts.from_coeffs(roofline_coeffs(
            0.0, rows * (0.0 if fused_out else 4.0 * c_out) + (0.0 if fused_in else rows * c_in), dev, vdt,
            kernels=0 if fused_out else 1), dev)
    return out


def cast_fusion(graph, recipe: str = "te") -> dict:
    """``{linear node: (fused_in, fused_out)}`` for :func:`cast_parts`: whether its input's producer is one of
    :data:`CAST_FUSED_BEFORE`, and whether every consumer of its output is one of :data:`CAST_FUSED_AFTER`
    (``recipe`` ``te-mcore``, Megatron-Core's layers: :data:`CAST_FUSED_BEFORE_MCORE`, :data:`CAST_FUSED_AFTER_MCORE`).

    >>> from concurrency_model.frontends.hf import from_hf_config
    >>> g = from_hf_config("llama-2-7b")
    >>> [cast_fusion(g, r)["layers.0.mlp.down_proj"] for r in ("te", "te-mcore")]
    [(True, False), (False, False)]
    >>> [cast_fusion(g, r)["layers.0.mlp.up_proj"] for r in ("te", "te-mcore")]
    [(True, True), (True, False)]
    """
    before, after = (CAST_FUSED_BEFORE_MCORE, CAST_FUSED_AFTER_MCORE) if recipe == "te-mcore" else \
        (CAST_FUSED_BEFORE, CAST_FUSED_AFTER)
    nodes = graph.layers()
    kind = {n.name: n.kind for n in nodes}
    users: dict = {}
    for n in nodes:
        for i in n.inputs:
            users.setdefault(i, []).append(n.kind)
    return {n.name: (bool(n.inputs) and kind.get(n.inputs[0]) in before,
                     bool(users.get(n.name)) and all(k in after for k in users[n.name]))
            for n in nodes if n.kind == "linear"}


def projection_widths(graph) -> dict:
    """``{qkv linear: (q, k, v output widths)}`` of the attention blocks whose fused QKV projection a runtime runs as
    three linears on the same input: torchtitan's Llama has ``wq``, ``wk``, ``wv`` (pytorch/torchtitan @ 820504e
    ``torchtitan/models/llama3/model.py`` ``Attention``; @ 9dec370 ``torchtitan/models/llama/model.py``), each a
    ``Float8Linear`` under torchao, with its own GEMMs and casts; with tensor parallelism each is its own
    ``ColwiseParallel`` shard, so that a rank runs ``k`` and ``v`` GEMMs of ``kv_heads x head_dim / t`` columns
    (torchtitan issue 1207: under TP 8, float8 rowwise made ``wk`` and ``wv`` about 40% slower than bf16). The
    input is cast once (:func:`cast_parts` ``input_cast``): an input cast in float8 before the TP all-gather
    (torchtitan's float8 TP) or the same cast of the same tensor, merged by AOTAutograd's common-subexpression
    elimination under torch.compile (as recalled).

    >>> from concurrency_model.frontends.hf import from_hf_config
    >>> projection_widths(from_hf_config("llama-3.1-8b"))["layers.0.qkv"]    # 32 heads, 8 KV heads, 128 wide
    (4096, 1024, 1024)
    """
    nodes = {n.name: n for n in graph.layers()}
    out = {}
    for n in nodes.values():
        if n.kind != "attention":
            continue
        src = nodes.get(n.inputs[0]) if n.inputs else None
        while src is not None and src.kind != "linear" and src.inputs:
            src = nodes.get(src.inputs[0])
        if src is None or src.kind != "linear":
            continue
        q = n.attrs["heads"] * n.attrs["head_dim"]
        kv, rest = divmod(src.attrs["c_out"] - q, 2)
        if kv > 0 and not rest:
            out[src.name] = (q, kv, kv)
    return out


EAGER_KINDS = ("rms_norm", "rotary")  # the nodes eager PyTorch runs as several kernels (:func:`eager_kernels`)
FP32_BYTES = 4


def eager_kernels(kind: str, value_bytes: int) -> dict:
    """``{pass: (bytes a value, kernels)}`` of a node of ``kind`` run by eager PyTorch as torchtitan writes it, for
    activations of ``value_bytes`` (2: bf16 / fp16, 4: fp32); a value is one element of the norm's input, or one
    rotated element of the queries and keys (for ``rotary``, the kernels are of the queries and keys together).

    ``rms_norm`` (pytorch/torchtitan @ 9dec370 ``torchtitan/models/norms.py`` ``RMSNorm``, the Llama configs'
    ``norm_type = "rmsnorm"``): ``self._norm(x.float()).type_as(x) * self.weight`` with ``_norm`` =
    ``x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps)``. Forward, one kernel an op: the upcast (read 2, write
    4 bytes a value), ``pow`` (4 + 4), ``mean`` (4), ``+ eps`` and ``rsqrt`` on one value a row (no bytes counted),
    the product (4 + 4), the downcast (4 + 2), the weight's product (2 + 2): 36 bytes, 8 kernels. Backward, autograd's
    formulas (pytorch/pytorch ``tools/autograd/derivatives.yaml``: ``mul``: ``grad * other`` and ``grad * self``
    summed to a broadcast operand's shape; ``_to_copy``: the gradient cast back; ``mean``: the gradient expanded and
    divided; ``pow``: ``torch/csrc/autograd/FunctionsManual.cpp`` ``pow_backward``, ``grad * (exponent *
    self.pow(exponent - 1))``, whose ``pow(x, 1)`` is a copy, as recalled of ATen's ``pow_Tensor_Scalar_out``; a
    tensor used twice gets its gradients added): ∇x: ``grad * weight`` (2 + 2), cast up (2 + 4), ``grad * rstd``
    (4 + 4), ``grad * x`` and its row sum (8 + 4, 4), the three per-row kernels of ``rsqrt``'s and ``+ eps``'s
    backward, ``mean``'s (4), ``pow``'s copy, scale and product (8, 8, 8 + 4), the two gradients of ``x.float()``
    added (8 + 4), cast down (4 + 2): 84 bytes, 14 kernels; ∇weight: ``grad * y`` (4 + 2) and its sum over rows
    (2): 8 bytes, 2 kernels. In fp32 the casts are no-ops (``Tensor.to`` returns the tensor).

    ``rotary`` (same commit, ``torchtitan/models/llama/model.py`` ``apply_rotary_emb``): the queries and the keys each
    upcast (2 + 4), multiplied as complex numbers by the complex64 table (4 + 4; the table read once a position, not
    counted), cast back (4 + 2): 20 bytes, 3 kernels each; the backward mirrors it (the cast's gradient up, the
    product by the table's conjugate, down; the table is a buffer, without gradient): 20 bytes, 3 kernels each.

    The graph's own nodes (one kernel each) read and write each value once: 4, 6 and 4 bytes of a norm, 4 and 4 of
    the rotary embedding, in 16 bits.

    >>> eager_kernels("rms_norm", 2)
    {'forward': (36.0, 8), 'grad_input': (84.0, 14), 'grad_weight': (8.0, 2)}
    >>> eager_kernels("rotary", 2), eager_kernels("rotary", 4)["forward"]
    ({'forward': (20.0, 6), 'grad_input': (20.0, 6)}, (8.0, 2))
    """
    lo, hi = float(value_bytes), float(FP32_BYTES)
    cast = lo < hi  # ``x.float()`` / ``type_as`` run a kernel only when the dtype changes
    up = (lo + hi) if cast else 0.0
    if kind == "rms_norm":
        fwd = up + 2 * hi + hi + 2 * hi + up + 2 * lo
        gin = 2 * lo + up + 2 * hi + 3 * hi + hi + hi + 2 * hi + 2 * hi + 3 * hi + 3 * hi + up
        return {"forward": (fwd, 6 + 2 * cast), "grad_input": (gin, 12 + 2 * cast), "grad_weight": (4 * lo, 2)}
    if kind == "rotary":
        one = up + 2 * hi + up
        return {"forward": (one, 2 * (1 + 2 * cast)), "grad_input": (one, 2 * (1 + 2 * cast))}
    raise ValueError(f"eager kernels: no eager decomposition of {kind!r}; known: {', '.join(EAGER_KINDS)}")


def _eager_values(node, batch: int) -> float:
    """The values :func:`eager_kernels` counts of one node: a norm's input elements, the rotated elements of the
    queries and keys (the rotary node's forward work is 3 FLOP a rotated element, :mod:`~concurrency_model.models.
    transformer` ``_rotary``)."""
    if node.kind == "rotary":
        return _num(node.cost.forward.flop) / 3.0
    return float(batch * math.prod(node.shape))


def _num(e) -> float:
    e = sp.sympify(e)
    if e.free_symbols:
        raise ValueError("batch: layer times need a graph built for a number of samples, not a symbol")
    return float(e)


def node_parts(node, dev, dtype: str, batch: int, scale: float, needs_grad_input: bool, tensor: int = 1,
                shard: float = 1.0, channels: bool = False, rows: int | None = None,
                weight_bytes: float | None = None, weight_sparsity=None, expert: int = 1,
                imbalance=1.0, fusion: tuple = (False, False), fp8_recipe: str = "te",
                widths: tuple | None = None, rate_8bit: float = 1.0, eager: bool = False,
                passes: tuple = PASSES) -> tuple[dict, str]:
    """Kernels (:class:`~.parts.Parts`) of one node per pass, and the convolution algorithm; with tensor
    parallelism ``tensor`` the node's share of the work: column-split GEMMs cut their outputs, row-split
    GEMMs their inputs, attention its heads; with ``channels`` (the paper's split of a CNN,
    :mod:`~concurrency_model.models.channel_split`) convolutions and fully connected layers cut their
    outputs, grouped convolutions their groups; other ops are scaled by ``shard`` (the fraction of the
    tensor this device holds). ``rows``: a convolution's output rows on this device in a spatial split
    (:mod:`~concurrency_model.parallel.spatial`), computed from the input rows that give them.
    ``weight_bytes``: a fully connected layer's weights stored narrower (its forward GEMM reads them so);
    ``weight_sparsity``: its weights pruned, ``"2:4"`` (forward GEMM on the sparse tensor cores) or a fraction of
    zeros (forward as a CSR product, :mod:`.sparse`). The experts of a mixture-of-experts layer run as one GEMM
    per expert reached (:func:`expert_gemms`; ``expert``: the expert-parallel degree, ``imbalance`` its routing).
    ``fusion``: ``(fused_in, fused_out)`` of an 8-bit layer's casts and ``fp8_recipe`` their recipe
    (:func:`cast_parts`). ``widths``: a column-split fully connected layer run as separate linears of these output
    widths on the same input (:func:`projection_widths`), each with its GEMMs and casts, the input cast once.
    ``passes``: the passes timed (of :data:`PASSES`, the keys of the answer; serving times the forward one only),
    each pass's kernels the same whichever others are asked."""
    a = node.attrs
    out = {p: Parts.empty() for p in PASSES if p in passes}
    algorithm = ""
    vdt = value_dtype(dtype)  # everything but the matrix layers
    if node.kind == "conv2d" and a["dilation"][0] == a["dilation"][1]:
        shape = _conv_shape(a, batch, tensor, channels, rows)
        for p in out:
            kept, chosen = _kept(("conv", shape, p, dev, dtype, a["stride"][1], a["pad"][1]), lambda: _conv_parts(
                shape, p, dev, dtype, a["stride"][1], a["pad"][1]))
            # a new object on the kept arrays: Parts shared by identity stay those of nodes of one kind (the callers
            # add up a layer's passes once per identity)
            out[p] = Parts(kept.compute, kept.memory, kept.extra, kept.launch, kept.count)
            algorithm = algorithm or chosen
    elif node.kind == "linear":
        separate = bool(widths) and a.get("split") == "column" and not channels
        for i, width in enumerate(widths if separate else (a["c_out"],)):
            g, rows, ci, co = _linear_shape(a, width, batch, tensor, channels, expert, imbalance)
            mdt = vdt if is_lm_head(node) else dtype  # Megatron keeps the output layer out of fp8
            for p, shape in zip(PASSES, ((rows, co, ci), (rows, ci, co), (ci, co, rows))):
                if p not in out:
                    continue
                if p == "forward" and weight_sparsity == STRUCTURED:  # A = the weights' transpose (co x ci)
                    c = structured_coeffs(shape[1], shape[0], shape[2], dev, mdt, g, value_bytes=weight_bytes)
                elif p == "forward" and weight_sparsity is not None:
                    c = csr_coeffs(shape[1], shape[0], shape[2], weight_sparsity, dev, mdt, g)
                else:
                    wb = weight_bytes if p == "forward" else None
                    c = None  # the GEMM's parts kept per shape (:func:`_kept`)
                if c is None:
                    gemm = _kept(("gemm", shape, dev, mdt, g, wb), lambda: Parts.from_coeffs(
                        gemm_coeffs(*shape, dev, mdt, g, weight_bytes=wb), dev))
                else:
                    gemm = Parts.from_coeffs(c, dev)
                slow = mdt in EIGHT_BIT_VALUES and rate_8bit != 1.0
                out[p] = out[p] + (gemm.with_math_rate(rate_8bit) if slow else gemm)
            if mdt in EIGHT_BIT_VALUES:
                for p, casts in cast_parts(g * rows, ci, co, dev, mdt, *fusion, recipe=fp8_recipe,
                                           input_cast=i == 0).items():
                    if p in out:
                        out[p] = out[p] + casts
    elif node.kind == "attention":
        from ..ops.attention import attention
        heads = max(1, a["heads"] // tensor)
        op = attention(batch, heads, a["seq"], a["head_dim"], fused=a["fused"], causal=a["causal"],
                       value_bytes=dtype_bytes(vdt))
        for p, cost in (("forward", op.forward), ("grad_input", op.backward)):
            if p not in out:
                continue
            kernels = attention_kernels(cost, batch, heads, a["seq"], a["head_dim"], dev, vdt, a["fused"],
                                        a["causal"], "forward" if p == "forward" else "backward")
            out[p] = total(Parts.from_coeffs(c, dev, k) for c, k in kernels)
    elif node.kind in ("rnn", "lstm", "gru"):
        for layer in range(a["layers"]):
            i = a["input_size"] if layer == 0 else a["hidden"]
            for p in out:
                out[p] = out[p] + total(Parts.from_coeffs(c, dev, k, dev.efficiency.rnn) for c, k in
                                        rnn_parts(a["cell"], a["hidden"], batch, a["timesteps"], dev, vdt, i, p))
    elif eager and node.kind in EAGER_KINDS:
        values = _eager_values(node, batch) * shard
        for p, (per_value, kernels) in eager_kernels(node.kind, dtype_bytes(vdt)).items():
            if p not in out:
                continue
            flop = _num(getattr(node.cost, p).flop) * shard
            out[p] = Parts.from_coeffs(roofline_coeffs(flop, per_value * values, dev, vdt, kernels=kernels), dev)
    elif node.kind not in VIEWS:
        for p in out:
            cost = getattr(node.cost, p)
            flop, byt = _num(cost.flop) * shard, _num(cost.bytes) * scale * shard
            if flop or byt:
                out[p] = Parts.from_coeffs(roofline_coeffs(flop, byt, dev, vdt), dev)
    if not needs_grad_input and "grad_input" in out:
        out["grad_input"] = Parts.empty()
    return out, algorithm


KEPT_SIZE = 16384  # GEMM and convolution parts a process keeps (:func:`_kept`); all dropped when full
_KEPT: dict = {}


def _kept(key: tuple, make):
    """``make()``, a kernel's :class:`~.parts.Parts` (and its convolution algorithm), kept for the process by
    ``key``: every argument its kernel model reads (shape, pass, device, dtype). A model's layers repeat the same
    GEMMs and convolutions at every batch, tensor degree and schedule an estimate or a validation asks for, and the
    kernel models (tile and algorithm searches) cost tens of microseconds a call; the models depend on their
    arguments alone and :class:`~.parts.Parts` is never changed in place, so a kept one is what a new call gives.
    A key that cannot be hashed (an array argument) is not kept."""
    try:
        got = _KEPT.get(key)
    except TypeError:
        return make()
    if got is None:
        got = make()
        _keep(key, got)
    return got


def _conv_shape(a: dict, batch: int, tensor: int, channels: bool, rows: int | None) -> tuple:
    """The ``(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, groups)`` of a convolution node's (attributes
    ``a``) kernels on one device (:func:`node_parts`)."""
    ci, co, groups, h = a["c_in"], a["c_out"], a["groups"], a["h"]
    if rows is not None:  # the input rows (halo included) that give ``rows`` output rows
        h = max(1, (rows - 1) * a["stride"][0] + a["dilation"][0] * (a["kh"] - 1) + 1 - 2 * a["pad"][0])
    if channels and tensor > 1:
        ci, groups = (ci // tensor, groups // tensor) if groups > 1 else (ci, groups)
        co //= tensor
    return batch, ci, co, h, a["w"], a["kh"], a["kw"], a["stride"][0], a["pad"][0], a["dilation"][0], groups


def _linear_shape(a: dict, width: int, batch: int, tensor: int, channels: bool, expert: int, imbalance) -> tuple:
    """``(GEMMs, rows each, c_in, c_out)`` of a fully connected node's (attributes ``a``) projection of ``width``
    outputs on one device (:func:`node_parts`)."""
    rows, ci, co = batch * a["rows_per_sample"], a["c_in"], width
    if tensor > 1 and (a.get("split") == "column" or channels):
        co = -(-co // tensor)
    elif tensor > 1 and a.get("split") == "row":
        ci = -(-ci // tensor)
    g, rows = expert_gemms(a, rows, expert, imbalance)
    return g, rows, ci, co


def _prefetch(todo: list, dev, dtype: str, batch: int, tensor: int, channels: bool, expert: int, imbalance,
              passes: tuple) -> None:
    """Put the GEMM and convolution :class:`~.parts.Parts` that :func:`node_parts` will ask :func:`_kept` for on
    the nodes of ``todo`` (``(node, spatial rows, weight bytes, weight sparsity, widths)`` each) in :data:`_KEPT`
    at once: those not kept yet, each kind of kernel in one call of the vectorised kernel models
    (:func:`~.gemm_coeffs`, :func:`~.layers.conv_coeffs`, which compute every row on its own, element by element)
    instead of one call per shape (a model at a new batch has new shapes everywhere). The same numbers: a row of
    the vectorised call is the one-row call's."""
    gemms: dict = {}  # (math dtype, weight bytes) -> {key: (m, n, k, GEMMs)}
    convs: dict = {}  # pass -> {key: (shape, stride_w, pad_w)}
    vdt = value_dtype(dtype)
    for node, mine, node_wb, ws, widths in todo:
        a = node.attrs
        if node.kind == "conv2d" and a["dilation"][0] == a["dilation"][1]:
            shape = _conv_shape(a, batch, tensor, channels, mine)
            for p in PASSES:
                key = ("conv", shape, p, dev, dtype, a["stride"][1], a["pad"][1])
                if p in passes and key not in _KEPT:
                    convs.setdefault(p, {})[key] = (shape, a["stride"][1], a["pad"][1])
        elif node.kind == "linear":
            separate = bool(widths) and a.get("split") == "column" and not channels
            for width in widths if separate else (a["c_out"],):
                g, rows, ci, co = _linear_shape(a, width, batch, tensor, channels, expert, imbalance)
                mdt = vdt if is_lm_head(node) else dtype
                for p, shape in zip(PASSES, ((rows, co, ci), (rows, ci, co), (ci, co, rows))):
                    if p not in passes or (p == "forward" and ws is not None):  # a sparse GEMM is not kept
                        continue
                    wb = node_wb if p == "forward" else None
                    key = ("gemm", shape, dev, mdt, g, wb)
                    if key not in _KEPT:
                        gemms.setdefault((mdt, wb), {})[key] = (*shape, g)
    for (mdt, wb), want in gemms.items():
        if len(want) < 2:
            continue  # one shape: node_parts computes it as before
        m, n, k, g = (np.array(x) for x in zip(*want.values()))
        every = Parts.from_coeffs(gemm_coeffs(m, n, k, dev, mdt, g, weight_bytes=wb), dev)
        for i, key in enumerate(want):
            _keep(key, every.row(i))
    for p, want in convs.items():
        if len(want) < 2:
            continue
        shapes, sw, pw = zip(*want.values())
        c = conv_coeffs(*(np.array(x) for x in zip(*shapes)), p, dev, dtype, stride_w=np.array(sw),
                        pad_w=np.array(pw))
        every = Parts.from_coeffs(c, dev)
        for i, key in enumerate(want):
            _keep(key, (every.row(i), str(c.info["algorithm"][i])))


def _keep(key: tuple, value) -> None:
    """``value`` kept in :data:`_KEPT` by ``key`` (as :func:`_kept` keeps what it makes)."""
    if len(_KEPT) >= KEPT_SIZE:
        _KEPT.clear()
    _KEPT[key] = value


def _conv_parts(shape: tuple, pass_: str, dev, dtype: str, stride_w, pad_w) -> tuple:
    """:class:`~.parts.Parts` of the fastest convolution (:func:`~.layers.conv_coeffs`) of ``shape`` = ``(n, c_in,
    c_out, h, w, kh, kw, stride, pad, dilation, groups)`` and its algorithm."""
    c = conv_coeffs(*shape, pass_, dev, dtype, stride_w=stride_w, pad_w=pad_w)
    return Parts.from_coeffs(c, dev), str(c.info["algorithm"][0])


def _shards(graph, tensor: int, sequence_parallel: bool, channels: bool) -> dict:
    """Fraction of each node's tensor one of ``tensor`` devices holds (Megatron, Shoeybi et al. 2019 §3):
    outputs of column-split GEMMs and of attention are split, and so is what element-wise ops compute
    from them; row-split GEMM outputs are whole again after their allreduce, and the element-wise work
    on whole tensors (layer norm, dropout, residual) is replicated, or split with sequence parallelism
    (Korthikanti et al. 2022 §4.2.2); the vocabulary-parallel embedding is split. Split by ``channels``
    (:mod:`~concurrency_model.models.channel_split`), every output from the first weighted layer on."""
    if channels:
        whole = replicated(graph)
        return {n.name: 1.0 if n.name in whole else 1.0 / tensor for n in graph.layers()}
    whole = 1.0 / tensor if sequence_parallel else 1.0
    out = {}
    for n in graph.layers():
        split = n.attrs.get("split")
        if n.kind == "attention" or split == "column" or n.kind == "embedding":
            out[n.name] = 1.0 / tensor
        elif split == "row":
            out[n.name] = 1.0
        elif n.inputs and all(out.get(i) == 1.0 / tensor for i in n.inputs if i in out) and \
                any(i in out for i in n.inputs) and n.kind not in ("add", "layer_norm", "rms_norm"):
            out[n.name] = 1.0 / tensor
        else:
            out[n.name] = whole
    return out


def layer_parts(graph, dev, dtype: str = "fp32", tensor: int = 1, sequence_parallel: bool = False,
                spatial: dict | None = None, weight_bytes: float | None = None,
                weight_sparsity=None, expert: int = 1, imbalance=1.0, fp8_recipe: str = "te",
                rate_8bit: float = 1.0, eager: bool = False, passes: tuple = PASSES) -> list[dict]:
    """Per layer: ``name, op, algorithm`` and the :class:`~.parts.Parts` of its ``forward``, ``grad_input``
    and ``grad_weight`` passes (see :func:`layer_times`). Nodes with the same kind, attributes, work and
    tensor share are timed once (the 96 blocks of GPT-3 cost one block's kernel choices). ``spatial``:
    ``{node: output rows on this device}`` of a spatial split (:mod:`~concurrency_model.parallel.spatial`).
    ``weight_bytes``: bytes per weight of the :func:`quantizable` layers (weight-only quantization at
    inference, :mod:`concurrency_model.serving.decoder`); ``weight_sparsity``: the same layers pruned (``"2:4"`` or
    a fraction of zeros, see :func:`node_parts`); ``expert``, ``imbalance``: the expert-parallel degree and
    ``parallel.expert_imbalance`` (:func:`expert_gemms`); ``fp8_recipe``: the casts of an 8-bit ``dtype``
    (:func:`cast_parts`); the ``torchao`` recipes also run the fused QKV projection as separate q, k, v linears
    (:func:`projection_widths`); ``rate_8bit``: the math rate of the 8-bit GEMMs over their kernel model's (a training
    step's, :func:`eight_bit_rate`); ``eager``: without torch.compile (:func:`eager_kernels`); ``passes``: the passes
    timed (:func:`node_parts`; an inference's forward pass alone, the same kernels as in all three).

    >>> from concurrency_model import get_model
    >>> import numpy as np
    >>> g = get_model("gpt2", batch=4)
    >>> rows = layer_parts(g, "a100-sxm4-80gb", "bf16", passes=("forward",))
    >>> full = layer_parts(g, "a100-sxm4-80gb", "bf16")
    >>> same = [all(np.array_equal(getattr(r["forward"], k), getattr(f["forward"], k)) for k in ("compute", "memory",
    ...                                                                                  "extra", "launch", "count"))
    ...         for r, f in zip(rows, full)]
    >>> sorted(rows[1]), all(same)
    (['algorithm', 'forward', 'name', 'op'], True)
    """
    bad = [p for p in passes if p not in PASSES]
    if bad:
        raise ValueError(f"passes: unknown {bad[0]!r}; allowed: {', '.join(PASSES)}")
    dev = device(dev)
    batch = int(_num(graph.batch))
    scale = dtype_bytes(value_dtype(dtype)) / float(graph.value_bytes)
    req, kinds = _static(graph)
    channels = tensor > 1 and is_channel_split(graph.layers())
    shards = _shards(graph, tensor, sequence_parallel, channels) if tensor > 1 else {}
    fusion = cast_fusion(graph, fp8_recipe) if dtype in EIGHT_BIT_VALUES else {}
    # torchao's recipes are torchtitan's (runtime fsdp2), whose Llama runs q, k and v as three linears
    widths = projection_widths(graph) if fp8_recipe.startswith("torchao") else {}
    todo: dict = {}  # key -> the first node of it and what node_parts needs of it
    keys = []
    for node, kind in zip(graph.layers(), kinds):
        needs = any(req[i] for i in node.inputs)
        shard = shards.get(node.name, 1.0)
        mine = (spatial or {}).get(node.name)
        if mine is not None:
            shard *= mine / node.shape[1]
        key = (kind, needs, shard, mine, fusion.get(node.name), widths.get(node.name))
        keys.append(key)
        if key not in todo:
            wb, ws = (weight_bytes, weight_sparsity) if quantizable(node) else (None, None)
            todo[key] = (node, needs, shard, mine, wb, ws)
    # the kernels of every distinct node in a few vectorised calls, then each node's parts from them
    _prefetch([(n, mine, wb, ws, widths.get(n.name)) for n, _, _, mine, wb, ws in todo.values()], dev, dtype, batch,
              tensor, channels, expert, imbalance, passes)
    memo = {key: node_parts(n, dev, dtype, batch, scale, needs, tensor, shard, channels, mine, wb, ws, expert,
                            imbalance, fusion.get(n.name, (False, False)), fp8_recipe, widths.get(n.name), rate_8bit,
                            eager, passes)
            for key, (n, needs, shard, mine, wb, ws) in todo.items()}
    rows = []
    for node, key in zip(graph.layers(), keys):
        parts, algorithm = memo[key]
        rows.append({"name": node.name, "op": node.kind, "algorithm": algorithm, **parts})
    return rows


_STATIC: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> (its node count, _static's answer)


def _static(graph) -> tuple[dict, list[int]]:
    """What :func:`layer_parts` needs of a graph whatever it is asked: which nodes need an input gradient, and per
    layer the number of its kind, two layers having the same number when their kind, attributes, output-layer role
    and work and traffic in every pass (``flop``, ``bytes`` of each of :data:`PASSES`) are equal; once a graph (and
    again if nodes were added since), as a serving search times one graph at several degrees and batches."""
    known = _STATIC.get(graph)
    if known is None or known[0] != len(graph.nodes):
        ids: dict = {}
        kinds = []
        for node in graph.layers():
            f, gi, gw = node.cost.forward, node.cost.grad_input, node.cost.grad_weight  # PASSES, in order
            static = (node.kind, repr(sorted((k, v) for k, v in node.attrs.items() if k != "name")),
                      is_lm_head(node), f.flop, f.bytes, gi.flop, gi.bytes, gw.flop, gw.bytes)
            kinds.append(ids.setdefault(static, len(ids)))
        known = _STATIC[graph] = (len(graph.nodes), (graph._requires_grad(), kinds))
    return known[1]


def layer_times(graph, dev, dtype: str = "fp32", tensor: int = 1, sequence_parallel: bool = False) -> pd.DataFrame:
    """One row per layer: ``name, op, forward_s, grad_input_s, grad_weight_s, algorithm``; with
    ``tensor`` > 1, one device's share under Megatron tensor parallelism, or of a network without
    transformer blocks split by channels (communication not included).

    ∇x is left out where the layer's inputs depend on no parameters (the first layer), as in
    :meth:`~concurrency_model.graph.Graph.backward`.

    >>> from concurrency_model import get_model
    >>> t = layer_times(get_model("resnet50", batch=32), "v100-sxm2-32gb", "fp16")
    >>> bool(t.loc[t["op"] == "conv2d", "forward_s"].sum() > 0), float(t.loc[0, "grad_input_s"])  # no ∇x of the image
    (True, 0.0)
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    return pd.DataFrame([{"name": r["name"], "op": r["op"], **{f"{p}_s": r[p].total() for p in PASSES},
                          "algorithm": r["algorithm"]} for r in layer_parts(graph, dev, dtype, tensor, sequence_parallel)])


def step_time(graph, dev, dtype: str = "fp32", optimizer: str = "adam") -> dict:
    """Seconds of forward, backward and the optimizer update of one training step on one device."""
    dev = device(dev)
    t = layer_times(graph, dev, dtype)
    if optimizer not in UPDATE_BYTES_PER_PARAM:
        raise ValueError(f"optimizer: unknown {optimizer!r}; allowed: {', '.join(UPDATE_BYTES_PER_PARAM)}")
    params = float(graph.params)
    update = decided_float(roofline(0.0, UPDATE_BYTES_PER_PARAM[optimizer] * dtype_bytes(value_dtype(dtype)) * params, dev,
                            value_dtype(dtype)).time_s)
    fwd, bwd = float(t["forward_s"].sum()), float((t["grad_input_s"] + t["grad_weight_s"]).sum())
    return {"forward_s": fwd, "backward_s": bwd, "update_s": update, "step_s": fwd + bwd + update}
