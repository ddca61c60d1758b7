"""Memory footprint per device: model state, activations, and whether they fit.

Sources (tags as in ``shared/reference/training-formulas.md``):

* Model state: Rajbhandari et al. 2020, "ZeRO" §3.1 (mixed-precision Adam, 2 + 2 + K bytes per
  parameter, K = 12) and §5.1-§5.3 / Figure 1 (stages 1-3 shard optimizer state, gradients, weights over
  the data-parallel degree N_d) [P]; model parallelism divides the parameters first (ZeRO §1: the
  reduction is at most N_d x N_m). PyTorch FSDP ``FULL_SHARD`` = ZeRO-3, ``SHARD_GRAD_OP`` = ZeRO-2,
  ``NO_SHARD`` = DDP (``torch/distributed/fsdp/api.py``) [P]. Megatron's distributed optimizer is ZeRO-1;
  its bf16 case keeps fp32 main gradients (18 bytes/param, ``6 + 12/d`` distributed;
  ``grad_dtype="fp32"``) [P].
* Transformer activations: Korthikanti et al. 2022, §4.1 Eq. 1 and Table 2 (bytes per layer, 16-bit
  activations, 1-byte dropout masks) [S, confirmed against Megatron-LM ``theoretical_memory_usage.py``].
* Pipeline in-flight microbatches: Korthikanti §4.2.3 (first stage of 1F1B holds p microbatches, so L layers' worth;
  interleaved multiplies by ``1 + (p-1)/(p v)``; the same count as Megatron-Core's schedule: NVIDIA/Megatron-LM @
  2a75ac12 ``megatron/core/pipeline_parallel/schedules.py`` runs ``2 (p - 1) + (v - 1) g`` warm-up chunks on the
  first stage, ``g`` = ``microbatch_group_size_per_vp_stage``, p by default, then one more in the steady state: ``p
  (v + 1) - 1`` chunks of ``L / (p v)`` layers = ``L (1 + (p-1)/(p v))``), Narayanan et al. 2021 §2.2.1 (GPipe
  stashes all m microbatches, 1F1B p or fewer), PipeDream weight stashing (one version per in-flight input; Narayanan
  et al. ICML 2021 §2, §3).
* torchtitan's selective activation checkpointing (``selective_ac_option = 'op'``, the default of its Llama 3
  configs): pytorch/torchtitan @ 9dec370 ``torchtitan/parallelisms/parallelize_llama.py``
  ``_apply_ac_to_transformer_block``: per transformer block, the outputs of the ops in ``_save_list`` are saved
  (``aten.mm``, the flash / efficient SDPA kernels, ``reduce_scatter_tensor``, ``abs``, ``max``), "except every
  second mm", everything else recomputed in the backward pass; the block's matrix products run in
  ``torchtitan/models/llama/model.py``'s order ``wq, wk, wv`` (attention) ``wo``, ``w1, w3, w2``
  (:func:`.recompute.block_products`, :func:`per_op_sac_bytes`). ``abs`` outputs (float8's amax) are left out: torchao's
  float8 of the time takes the amax in one fused reduction under ``torch.compile`` [D].
* Mixture-of-experts transformer layers as Megatron-Core stores them (:func:`moe_layer_values`; NVIDIA/Megatron-LM @
  2a75ac12, the commit Megatron-Bridge @ 067f987d pins: ``megatron/core/transformer/moe/moe_layer.py`` routes the
  normed hidden states, ``token_dispatcher.py`` permutes one copy a routed (token, expert) pair, ``experts.py``
  ``TEGroupedMLP`` runs fc1, the GLU activation and fc2 on those copies; Transformer Engine's linears keep their
  inputs for the weight gradients, the activation its input): Korthikanti's terms with the model's own widths [D].
* Dense transformer layers of other widths (grouped key/value heads, an MLP of its own width, a gated MLP) and
  without dropout (:func:`dense_layer_values`): Korthikanti's terms, each at the layer's own width [D]; no mask and
  no kernel at p = 0 (pytorch/pytorch ``aten/src/ATen/native/Dropout.cpp``: ``dropout`` takes the fused kernel only
  for ``0 < p < 1`` and ``_dropout`` returns its input when ``p == 0``).
* Generic graphs, full recompute: Chen et al. 2016, "Training Deep Nets with Sublinear Memory Cost",
  §4.1: checkpoint every ~sqrt(n) layers, memory ``O(n/k) + O(k)``, minimised at ``k = sqrt(n)``, for the
  price of one extra forward pass.

All byte counts are exact sympy arithmetic; results are returned as Python numbers when numeric and as
sympy expressions when an input is a (positive integer) symbol.
"""
from __future__ import annotations

import math
import numbers
from functools import lru_cache

import sympy as sp

from ..checks import number
from ..cost import to_python
from ..hardware.devices import Device
from ..models.channel_split import gathers_input, replicated
from ..ops import checks as op_checks
from ..symbols import nsimplified
from ..units import GB, dtype_bytes
from . import pipeline
from .pipeline import in_flight_microbatches

# fp32 state tensors per parameter (the velocity, the squared-gradient sum or average, Adam's m and v)
OPTIMIZER_STATES = {"sgd": 0, "momentum": 1, "nesterov": 1, "adagrad": 1, "rmsprop": 1, "adam": 2, "adamw": 2,
                    "lamb": 2}
TRAIN_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp64")
RECOMPUTE = ("none", "selective", "full")
SCHEDULES = pipeline.SCHEDULES
FSDP_ZERO_STAGE = {"NO_SHARD": 0, "SHARD_GRAD_OP": 2, "FULL_SHARD": 3,
                   "HYBRID_SHARD": 3, "_HYBRID_SHARD_ZERO2": 2}  # hybrid: data = ranks per node


def _choice(field: str, value, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{field}: unknown {value!r}; allowed: {', '.join(allowed)}")
    return value


def _dtype(field: str, value) -> int:
    _choice(field, value, TRAIN_DTYPES)
    return dtype_bytes(value)


def _nonneg(field: str, value) -> sp.Expr:
    if isinstance(value, sp.Basic) and not value.is_number:
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, sp.Basic)) or not float(value) >= 0:
        raise ValueError(f"{field}: must be a number >= 0, got {value!r}")
    if isinstance(value, sp.Basic):
        return value
    # a float's exact value (nsimplify's search for a simple fraction costs milliseconds a number)
    return sp.Integer(int(value)) if float(value).is_integer() else sp.Rational(float(value))


def fsdp_zero_stage(strategy: str) -> int:
    """ZeRO stage equivalent to a PyTorch FSDP ``ShardingStrategy`` (training-formulas.md §3.5).

    The hybrid strategies shard within a node only: pass the ranks per node as ``data``.

    >>> fsdp_zero_stage("FULL_SHARD")
    3
    """
    return FSDP_ZERO_STAGE[_choice("strategy", strategy, tuple(FSDP_ZERO_STAGE))]


def model_state_bytes(params, optimizer: str = "adam", dtype: str = "bf16", master_fp32: bool = True,
                      tensor=1, pipeline=1, data=1, zero_stage: int = 0,
                      grad_dtype: str | None = None, optimizer_dtype: str = "fp32") -> dict:
    """Weights, gradients and optimizer state per device, in bytes (ZeRO §3.1, §5; Figure 1).

    Per parameter: weights and gradients in ``dtype`` (gradients in ``grad_dtype`` if given); optimizer
    state K = fp32 master copy (4, only when ``master_fp32`` and ``dtype`` is 16-bit) plus the optimizer's
    state tensors (:data:`OPTIMIZER_STATES`: adam/adamw/lamb m and v, momentum/nesterov/adagrad/rmsprop one
    buffer, sgd none), fp32 when ``master_fp32`` else in ``dtype``. Mixed-precision Adam: 2 + 2 + 12 = 16 bytes
    (ZeRO §3.1); fp32 Adam: 4 + 4 + 8. ``optimizer_dtype``: the dtype the master copy and the state tensors are kept
    in (``fp32``, as above; ``bf16``: Apex's ``DistributedFusedAdam`` at ``dtype=torch.bfloat16``, which keeps its
    parameter copy and both moments in 16 bits, 2 + 2 + 6 = 10 bytes, as NeMo's fine-tuning configuration sets it:
    NVIDIA/NeMo-Framework-Launcher @ 0da9ad9c ``launcher_scripts/conf/peft/llama/sft.yaml`` ``optim``
    ``distributed_fused_adam``, ``dtype: bf16``).

    The parameters are divided by ``tensor * pipeline`` (model-parallel shards, even split assumed), then
    ZeRO stage 1 divides the optimizer state, stage 2 also the gradients, stage 3 also the weights by
    ``data`` (ZeRO §5.1-§5.3: ``2Ψ + 2Ψ + KΨ/N_d``, ``2Ψ + (2 + K)Ψ/N_d``, ``(2 + 2 + K)Ψ/N_d``).
    FSDP: see :func:`fsdp_zero_stage`.

    Examples
    --------
    >>> model_state_bytes(1e9)["total"] / 1e9
    16.0
    >>> model_state_bytes(1e9, data=8, zero_stage=1)["total"] / 1e9
    5.5
    >>> model_state_bytes(1e9, optimizer_dtype="bf16")["total"] / 1e9
    10.0
    """
    psi = op_checks.size("params", params, 0)
    opt = _choice("optimizer", optimizer, tuple(OPTIMIZER_STATES))
    wb = _dtype("dtype", dtype)
    gb = _dtype("grad_dtype", grad_dtype) if grad_dtype is not None else wb
    t = op_checks.size("tensor", tensor)
    p = op_checks.size("pipeline", pipeline)
    d = op_checks.size("data", data)
    if isinstance(zero_stage, bool) or zero_stage not in (0, 1, 2, 3):
        raise ValueError(f"zero_stage: must be one of 0, 1, 2, 3, got {zero_stage!r}")
    if not isinstance(master_fp32, bool):
        raise ValueError(f"master_fp32: must be True or False, got {master_fp32!r}")
    ob = _dtype("optimizer_dtype", optimizer_dtype)
    low = wb < 4
    state_b = ob if (master_fp32 or not low) else wb
    k = (ob if (master_fp32 and low) else 0) + OPTIMIZER_STATES[opt] * state_b
    local = psi / (t * p)
    weights = wb * local / (d if zero_stage >= 3 else 1)
    grads = gb * local / (d if zero_stage >= 2 else 1)
    state = k * local / (d if zero_stage >= 1 else 1)
    return {"weights": to_python(weights), "gradients": to_python(grads), "optimizer": to_python(state),
            "total": to_python(weights + grads + state)}


# the ffn-wide 16-bit tensors a dense layer's MLP keeps for its backward pass (:func:`dense_layer_values`)
MLP_TENSORS = {"plain": 2, "gated": 3, "gated_eager": 4}
# bytes a score an unfused attention keeps (:func:`scores_bytes`): Korthikanti's softmax output, its dropout's mask and
# output; without dropout Megatron's fused scale-mask-softmax output alone, or eager PyTorch's fp32 softmax and the
# 16-bit copy the product with V reads
SCORE_BYTES = {"dropout": 5, "fused_softmax": 2, "upcast_softmax": 6}
FUSED_SOFTMAX_FRAMEWORKS = ("ideal", "megatron")  # runtimes whose unfused attention runs Megatron's softmax


def scores_bytes(dropout: bool, framework: str = "ideal") -> int:
    """Bytes a score (one of ``a s^2`` a sequence) an unfused attention keeps for its backward pass
    (:data:`SCORE_BYTES`): Korthikanti et al. 2022 §4.1's 5 with dropout (the softmax's 16-bit output, the dropout's
    1-byte mask and 16-bit output) [S]; without dropout (p = 0 returns its input, module docstring) Megatron's fused
    scale-mask-softmax keeps its output, which the product with V reads too (2) [D], and eager PyTorch as Hugging
    Face's attention runs it keeps the fp32 softmax output and the 16-bit copy the product reads (6:
    huggingface/transformers ``models/llama/modeling_llama.py`` ``eager_attention_forward``, ``softmax(...,
    dtype=torch.float32).to(query.dtype)``) [D] under the other runtimes.

    >>> scores_bytes(True, "fsdp"), scores_bytes(False, "megatron"), scores_bytes(False, "fsdp2")
    (5, 2, 6)
    """
    if dropout:
        return SCORE_BYTES["dropout"]
    return SCORE_BYTES["fused_softmax" if framework in FUSED_SOFTMAX_FRAMEWORKS else "upcast_softmax"]


def dense_layer_values(h, dense: tuple, fused_attention: bool = False, a=1, s=1, modules: tuple = (),
                       dropout: bool = True, score_bytes: int | None = None) -> tuple:
    """Bytes per token that one dense transformer layer stores for its backward pass, as ``(replicated, split)``
    (as :func:`moe_layer_values`: what every tensor rank keeps whole without sequence parallelism, and what is split
    over the ``t`` ranks). ``h``: the attention width (heads x head size); ``dense`` = ``(hidden, kv, ffn,
    mlp_tensors)``: the model's hidden size ``H``, the key/value width ``K`` (key/value heads x head size), the MLP's
    width ``F`` and how many ``F``-wide 16-bit tensors the MLP keeps (:data:`MLP_TENSORS`). Korthikanti et al. 2022
    §4.1's terms, each at the layer's own width [S at GPT's widths, ``H = h = K``, ``F = 4H``, a plain MLP, dropout;
    D otherwise]:

    * replicated: the two norms' inputs ``2 x 2H``, the attention's and the MLP's normed inputs ``2 x 2H`` and, with
      ``dropout``, the masks of the two dropouts after the blocks, ``2 x H`` (Korthikanti's ``10 s b h``);
    * split: the queries ``2h``, the keys and values ``2 x 2K``, the output projection's input ``2h``; the MLP's
      ``mlp_tensors x 2F``; without a fused attention kernel ``score_bytes x a s`` (``a`` heads, ``s`` tokens;
      :func:`scores_bytes`, None: Korthikanti's 5 with dropout, Megatron's 2 without).

    ``mlp_tensors``: 2 for a plain MLP (fc1's and the activation's outputs: Korthikanti's ``8h + 8h`` at ``F = 4h``);
    3 for a gated MLP whose activation and product run as one kernel (the gate's and the up projection's outputs, the
    kernel's input, and its product, the down projection's input: Megatron-Core's fused SwiGLU, NVIDIA/Megatron-LM @
    2a75ac12 ``megatron/core/fusions/fused_bias_swiglu.py`` saves its input; a compiled one likewise [D]); 4 for one
    run op by op in eager PyTorch (autograd keeps the SiLU's input, both operands of the product and the down
    projection's input: the gate's output, the SiLU's, the up projection's and the product).

    Without ``dropout`` (the Llama family's and the mixtures of experts' configs, which Megatron-Bridge runs at
    ``hidden_dropout = 0.0``: NVIDIA-NeMo/Megatron-Bridge @ 067f987d
    ``src/megatron/bridge/models/llama/llama_bridge.py``, ``qwen/qwen3_moe_bridge.py``, ``gpt_oss/gpt_oss_bridge.py``,
    ``deepseek/deepseek_v3_bridge.py``; MPT's ``resid_pdrop`` 0) nothing is kept for it: PyTorch's dropout at p = 0
    returns its input (module docstring). ``modules``: Megatron-Core's selective recompute
    (:func:`moe_layer_values`): ``core_attn`` drops the scores, ``mlp`` the MLP's ``F``-wide tensors (its input, the
    normed one, stays), ``layernorm`` nothing (Transformer Engine fuses the norms into the linears that follow).

    >>> dense_layer_values(4096, (4096, 4096, 16384, 2), True) == (10 * 4096, 24 * 4096)   # GPT: Korthikanti's 10, 24
    True
    >>> dense_layer_values(4096, (4096, 1024, 14336, 3), fused_attention=True, dropout=False)   # Llama 3 8B: 8H, 26H
    (32768, 106496)
    >>> dense_layer_values(4096, (4096, 4096, 16384, 2), a=32, s=2048, dropout=False)[1] - 24 * 4096   # 2 a s
    131072
    """
    H, K, F, n = dense
    replicated = 8 * H + (2 * H if dropout else 0)
    split = 2 * h + 4 * K + 2 * h + 2 * n * F
    if not fused_attention and "core_attn" not in modules:
        split += _score(dropout, score_bytes) * a * s
    if "mlp" in modules:
        split -= 2 * n * F
    return replicated, split


def hidden_width(h, moe: tuple | None = None, dense: tuple | None = None):
    """The model's hidden size (a layer's input and output width) from a transformer's memory shape: a mixture of
    experts' ``moe[0]`` (:func:`moe_layer_values`), a dense layer's ``dense[0]`` (:func:`dense_layer_values`), else
    the attention width ``h`` (GPT's widths).

    >>> hidden_width(8192, dense=(2880, 512, 2880, 3)), hidden_width(4096)
    (2880, 4096)
    """
    return moe[0] if moe is not None else dense[0] if dense is not None else h


def _score(dropout: bool, score_bytes: int | None) -> int:
    """The bytes a score of :func:`scores_bytes` given, or by ``dropout`` alone (Megatron's softmax without)."""
    return scores_bytes(dropout) if score_bytes is None else score_bytes


def moe_layer_values(h, moe: tuple, fused_attention: bool = True, a=1, s=1, eight_bit: bool = False,
                     modules: tuple = (), mla: bool = False, dropout: bool = True,
                     score_bytes: int | None = None) -> tuple:
    """Bytes per token that one mixture-of-experts transformer layer stores for its backward pass, as ``(replicated,
    split)``: what every tensor rank keeps whole without sequence parallelism and what is split over the ``t`` ranks
    (with sequence parallelism both are). ``h``: the attention width (heads x head size, the ``h`` of
    :func:`transformer_activation_bytes`); ``moe`` = ``(hidden, kv, experts, top_k, ffn, shared_ffn, head_norms)``:
    the model's hidden size, the key/value width (key/value heads x head size), the routed experts, the experts a
    token goes to, one expert's MLP width, the shared experts' width (0: none) and whether the queries and keys are
    normed head by head (Qwen3's QK-norm). Korthikanti et al. 2022 §4.1's terms in 16-bit values (``H``: ``hidden``,
    ``A``: ``h``, ``K``: ``kv``, ``k``: ``top_k``, ``F``: ``ffn``, ``E``: ``experts``) [D]:

    * replicated: the two norms' inputs ``2 x 2H``, the attention and MLP blocks' normed inputs ``2 x 2H`` and, with
      ``dropout``, the two dropout masks ``2 x H`` (Korthikanti's ``10 s b h``; none at p = 0:
      :func:`dense_layer_values`), and the router's fp32 logits ``4E``;
    * split: the queries, keys and values the attention keeps ``2A + 2 x 2K`` (with ``head_norms`` their inputs before
      the norms too, ``2A + 2K``), the output projection's input ``2A``; the ``k`` copies of the token the dispatcher
      permutes to its experts, each kept as fc1's input ``2H``, fc1's gate and up outputs ``4F`` (the GLU's input)
      and the GLU's output ``2F`` (fc2's input); the shared experts' ``6 x shared_ffn`` likewise (their input is the
      normed token already counted). Without a fused attention kernel the scores, their softmax and its mask add
      Korthikanti's ``5 a s`` (``a`` heads, ``s`` tokens).

    With ``hidden = h = kv`` the replicated part and the attention's split part are Korthikanti's ``10 h`` and ``8 h``
    (Eq. 2's ``10 + 24 / t`` less the MLP's ``16 / t``).

    ``eight_bit``: the linears keep their inputs in 8 bits (an 8-bit recipe under Transformer Engine, whose linears
    keep the quantized input for the
    weight gradient, columnwise, and drop the 16-bit one: NVIDIA/TransformerEngine @ e7c550c5
    ``transformer_engine/pytorch/module/grouped_linear.py``, ``update_usage(rowwise_usage=False,
    columnwise_usage=True)`` unless ``save_original_input``, which Megatron-Core sets on the experts only with the
    ``moe_act`` recompute or offloading and on ``linear_proj``, whose input the fused attention keeps anyway:
    NVIDIA/Megatron-LM @ 2a75ac12 ``megatron/core/transformer/moe/experts.py``, ``attention.py``): one byte a value
    for the attention's normed input (``linear_qkv``, a ``LayerNormLinear``), each copy's fc1 input and its fc2 input
    (the GLU's output) and the shared experts' fc2 input; the block scales (1 byte in 32 under MXFP8) are left out.
    The GLU's input stays in 16 bits (Megatron-Core's activation kernel keeps it), as do the router's input and the
    queries, keys and values.

    ``modules``: Megatron-Core's modules of a selective recompute (:mod:`.recompute`), whose outputs are dropped and
    rebuilt in the backward pass (NVIDIA/Megatron-LM @ 2a75ac12 ``transformer_config.py`` ``recompute_modules``;
    ``moe_act``, ``layernorm`` and ``mla_up_proj`` discard their outputs, ``moe`` and ``shared_experts`` checkpoint
    the module and keep its input) [D]:

    * ``layernorm``: the MoE block's normed input ``2H`` (the router's and dispatcher's input, a separate norm); the
      attention's ``2H`` too under ``mla`` in 16 bits (multi-latent attention's two down projections share a separate
      norm; in 8 bits they keep their own quantized copies, which stay); a grouped-query attention's norm is fused into
      its QKV projection (Transformer Engine's ``LayerNormLinear``: Megatron-Core's TE layer spec,
      ``megatron/core/models/gpt/gpt_layer_specs.py``, has no separate ``input_layernorm``), which keeps its input;
    * ``moe_act``: each copy's GLU output, fc2's input (``2F``, ``F`` in 8 bits);
    * ``mla_up_proj`` (``mla``): the queries, keys and values the up projections make, ``2A + 4K``;
    * ``shared_experts``: the shared experts' ``6 x shared_ffn`` (``5 x`` in 8 bits);
    * ``moe``: every routed copy's values, the shared experts' and the router's logits;
    * ``core_attn``: the scores of an unfused attention (``5 a s``; a fused kernel stores none either way).

    >>> moe_layer_values(8192, (4096, 512, 128, 8, 1536, 0, True))   # Qwen3-235B-A22B, fused attention
    (41472, 191488)
    >>> moe_layer_values(8192, (4096, 512, 128, 8, 1536, 0, True), eight_bit=True)   # the same under an 8-bit recipe
    (37376, 146432)
    >>> moe_layer_values(8192, (4096, 512, 128, 8, 1536, 0, True), modules=("layernorm", "moe_act"))  # 2H, 8 x 2F
    (33280, 166912)
    """
    H, K, E, k, F, Fs, norms = moe
    q8 = eight_bit
    routed = (H if q8 else 2 * H) + (5 if q8 else 6) * F  # one routed copy: fc1's input, the GLU's input and output
    shared = (5 if q8 else 6) * Fs
    replicated = 8 * H + (2 * H if dropout else 0) + 4 * E - (H if q8 else 0)
    split = 2 * h + 4 * K + 2 * h + k * routed + shared + ((2 * h + 2 * K) if norms else 0)
    if not fused_attention and "core_attn" not in modules:
        split += _score(dropout, score_bytes) * a * s
    if "layernorm" in modules:
        replicated -= 2 * H + (2 * H if mla and not q8 else 0)
    if "moe" in modules:  # the whole layer: every routed copy, the shared experts, the router's logits
        replicated -= 4 * E
        split -= k * routed + shared
    else:
        split -= k * (F if q8 else 2 * F) if "moe_act" in modules else 0
        split -= shared if "shared_experts" in modules else 0
    if "mla_up_proj" in modules and mla:
        split -= 2 * h + 4 * K
    return replicated, split


def transformer_activation_bytes(s, b, h, a, t=1, sequence_parallel: bool = False,
                                 recompute: str = "none", layers=1, fused_attention: bool = False,
                                 moe: tuple | None = None, eight_bit: bool = False, modules: tuple = (),
                                 mla: bool = False, dense: tuple | None = None, dropout: bool = True,
                                 score_bytes: int | None = None):
    """Stored activation bytes of ``layers`` transformer layers for one microbatch on one device.

    Korthikanti et al. 2022, Eq. 1 / Table 2, 16-bit activations and 1-byte dropout masks [S]:

    ============================ ========================================
    none, TP (Eq. 2; t=1: Eq. 1)  ``s b h (10 + 24/t + 5 a s / (h t))``
    none, TP + SP (Eq. 4)         ``s b h / t (34 + 5 a s / h)``
    selective, TP                 ``s b h (10 + 24/t)``
    selective, TP + SP            ``34 s b h / t``
    full                          ``2 s b h`` (the layer input only); ``/ t`` with SP [D: the input is
                                  sequence-sharded under SP, as Megatron-LM's ``theoretical_memory_usage``
                                  divides everything by t in its SP branch]
    ============================ ========================================

    ``fused_attention``: a fused attention kernel (FlashAttention, Dao et al. 2022 §3.1) stores neither the
    scores, their softmax nor its dropout mask, only the output and the softmax statistics, so the
    ``5 a s / h`` term (Korthikanti §4.1: ``2 a s^2 b`` + ``2 a s^2 b`` + ``a s^2 b``) is gone and ``none``
    stores what ``selective`` does; the statistics' ``4 a s b`` bytes are left out (0.1% of ``34 s b h`` at a
    head size of 128).

    ``moe``: a mixture-of-experts layer (:func:`moe_layer_values`, whose tuple it is): ``none`` (and ``selective``,
    which recomputes only the attention core) stores :func:`moe_layer_values`' bytes a token, ``full`` the layer's
    input of ``hidden`` values, ``2 s b hidden`` (``/ t`` with sequence parallelism).

    ``eight_bit``: a mixture-of-experts layer's linears keep their inputs in 8 bits (:func:`moe_layer_values`); a dense
    layer's count stays Korthikanti's 16-bit one (docs/residuals.md, "8-bit saved inputs": not adopted for dense
    layers).

    ``dense``: a dense layer's own widths (:func:`dense_layer_values`, whose tuple it is; None: GPT's, ``h, h, 4h``
    and a plain MLP, where its count is the table's); ``dropout``: whether the layers have dropout (the table's masks;
    not in the Llama family or MPT); ``score_bytes``: the bytes a score an unfused attention keeps
    (:func:`scores_bytes`; None: 5 with dropout, as the table, 2 without).

    ``modules`` (with ``selective``): Megatron-Core's modules of the recompute (:func:`moe_layer_values` for a
    mixture-of-experts layer); in a dense layer ``core_attn`` drops the scores (Korthikanti's selective), ``mlp`` the
    MLP's intermediate tensors (GPT's two, ``16 s b h / t``; its input, the fused norm's, stays), and ``layernorm``
    nothing (Transformer Engine fuses both norms into the linears that follow: :func:`dense_layer_values`) [D].

    >>> transformer_activation_bytes(2048, 1, 12288, 96) / (2048 * 12288)  # 34 + 5as/h = 34 + 80
    114.0
    >>> transformer_activation_bytes(2048, 1, 12288, 96, recompute="selective", modules=("mlp",)) / (2048 * 12288)
    98.0
    >>> transformer_activation_bytes(2048, 1, 12288, 96, fused_attention=True) / (2048 * 12288)
    34.0
    """
    s, b, h, a = (op_checks.size(n, v) for n, v in (("s", s), ("b", b), ("h", h), ("a", a)))
    t = op_checks.size("t", t)
    n_layers = op_checks.size("layers", layers, 0)
    _choice("recompute", recompute, RECOMPUTE)
    for name, flag in (("sequence_parallel", sequence_parallel), ("fused_attention", fused_attention)):
        if not isinstance(flag, bool):
            raise ValueError(f"{name}: must be True or False, got {flag!r}")
    mods = tuple(modules) if recompute == "selective" else ()
    if recompute == "full":  # the layer's input of the model's hidden size
        width = hidden_width(h, moe, dense)
        return to_python(2 * s * b * width / (t if sequence_parallel else 1) * n_layers)
    # the layer's count; without modules Megatron's selective reruns the attention core only (its scores)
    fused = fused_attention or (recompute == "selective" and not mods)
    if moe is not None:
        rep, split = moe_layer_values(h, moe, fused, a, s, eight_bit, mods, mla, dropout, score_bytes)
    else:
        rep, split = dense_layer_values(h, dense or (h, h, 4 * h, MLP_TENSORS["plain"]), fused, a, s, mods, dropout,
                                        score_bytes)
    rep, split = sp.sympify(rep), sp.sympify(split)
    per = s * b * ((rep + split) / t if sequence_parallel else rep + split / t)
    return to_python(per * n_layers)


def per_op_sac_bytes(s, b, h, a, t=1, sequence_parallel: bool = False, outputs: tuple = (), value_bytes: int = 2):
    """Stored bytes of one transformer block for one microbatch under torchtitan's per-op selective activation
    checkpointing (module docstring): the block's input (sequence-sharded under sequence parallelism), the
    attention kernel's output and its fp32 log-sum-exp (``a`` values a token), and the outputs of the 1st, 3rd, 5th
    ... matrix product of ``outputs`` (:func:`.recompute.block_products`): a column-parallel product's output is split
    over the ``t`` ranks, a row-parallel one's is the full partial sum before its reduction; with sequence
    parallelism (``t > 1``) each row-parallel product's reduce-scatter output (``h / t``) is saved too.

    >>> per_op_sac_bytes(8192, 2, 4096, 32, outputs=((4096, "column"), (1024, "column"), (1024, "column"),
    ...     (4096, "row"), (14336, "column"), (14336, "column"), (4096, "row"))) / (8192 * 2)   # Llama 3 8B
    63616.0
    """
    s, b, h, a, t = (op_checks.size(n, v) for n, v in (("s", s), ("b", b), ("h", h), ("a", a), ("t", t)))
    values = h / (t if sequence_parallel else 1) + h / t
    for i, (width, split) in enumerate(outputs):
        if split not in ("column", "row"):
            raise ValueError(f"outputs: split must be 'column' or 'row', got {split!r}")
        if i % 2 == 0:  # the 1st, 3rd, ... product (torchtitan counts from 1 and recomputes the even ones)
            values += sp.sympify(width) / (t if split == "column" else 1)
        if split == "row" and sequence_parallel:
            values += h / t
    return to_python(value_bytes * s * b * values + 4 * a * s * b / t)


def _in_flight(schedule: str, p, m, v=1, stage: int = 0):
    """Microbatches whose activations stage ``stage`` holds at its peak, in units of the stage's layers:
    :func:`concurrency_model.parallel.pipeline.in_flight_microbatches` (its docstring gives the sources),
    with ``m = None`` meaning m >= p (no cap) and interleaving with ``v = 1`` being 1F1B. Kept per arguments (and
    their types) for the process: the ``Min`` of symbols searches its arguments' order each time it is built (sympy's
    ``_find_localzeros``), and a memory expression asks for the same few (a tenth of a compiled memory function's
    build); an argument that cannot be a key (an array) is computed each time."""
    try:
        return _in_flight_kept(schedule, p, m, v, stage)
    except TypeError:  # unhashable: not kept
        return _in_flight_of(schedule, p, m, v, stage)


@lru_cache(maxsize=1024, typed=True)
def _in_flight_kept(schedule: str, p, m, v, stage):
    return _in_flight_of(schedule, p, m, v, stage)


def _in_flight_of(schedule: str, p, m, v, stage):
    _choice("schedule", schedule, SCHEDULES)
    if schedule == "interleaved" and v == 1:
        schedule = "1f1b"
    if m is None:  # enough microbatches that the cap never binds
        m = 2 * sp.sympify(p)
    return sp.sympify(in_flight_microbatches(schedule, p, m, v, stage))


def weight_stash_bytes(stage_weight_bytes, schedule: str, pipeline=1, stage: int = 0):
    """Extra weight versions kept by PipeDream's weight stashing (Narayanan et al., ICML 2021, §2).

    One version per in-flight input: ``p - stage`` versions on stage ``stage`` [D, §4.5], of which one is
    the live weights already counted in the model state, so the extra is ``(p - stage - 1)`` copies of the
    stage's weights. Flushing schedules (gpipe, 1f1b, interleaved) keep one version: 0 extra.

    >>> weight_stash_bytes(10, "async", pipeline=4)
    30
    """
    w = _nonneg("stage_weight_bytes", stage_weight_bytes)
    p = op_checks.size("pipeline", pipeline)
    st = op_checks.size("stage", stage, 0)
    if st.is_number and p.is_number and st >= p:
        raise ValueError(f"stage: must be < pipeline ({p}), got {st}")
    _choice("schedule", schedule, SCHEDULES)
    return to_python(w * (p - st - 1) if schedule == "async" else 0)


def activation_bytes_per_device(s, b, h, a, layers, t=1, sequence_parallel: bool = False,
                                recompute: str = "none", pipeline=1, schedule: str = "1f1b",
                                microbatches=None, interleave=1, stage: int = 0, vocab=None,
                                recompute_buffer: bool = False, fused_attention: bool = False,
                                sac: tuple | None = None, moe: tuple | None = None, eight_bit: bool = False,
                                modules: tuple = (), mla: bool = False, dense: tuple | None = None,
                                dropout: bool = True, score_bytes: int | None = None):
    """Peak activation bytes on one device of pipeline stage ``stage``.

    ``transformer_activation_bytes`` of the stage's ``layers / pipeline`` layers (b = microbatch size)
    times the in-flight microbatches :func:`_in_flight`; ``microbatches=None`` means m >= p (no cap;
    required for gpipe). For the first stage of 1F1B this is Korthikanti's
    Eq. 5 / Eq. 6 / ``2 s b h L`` (p microbatches of L/p layers).

    ``vocab`` adds the embedding and output terms of Korthikanti §4.3 [S]: input-embedding dropout
    ``s b h / t`` per in-flight microbatch on stage 0 (with ``dropout`` only); on the last stage the final layer norm,
    the output projection input and the fp32 logits, ``4 s b h / t + 4 s b v / t`` (the paper counts these only where
    p = 1, i.e. on the first stage; charging them to the last stage when p > 1 is [D]).

    ``recompute_buffer`` adds what a recomputing backward rebuilds for one layer and one microbatch (not
    in the paper's totals): for ``full`` one layer's ``none`` activations, for ``selective`` the dropped
    ``5 a s^2 b / t`` attention term (``score_bytes`` a score: :func:`scores_bytes`; nothing with
    ``fused_attention``, which never stores it: :func:`transformer_activation_bytes`).

    ``sac``: the block's matrix products (:func:`.recompute.block_products`), given for torchtitan's runtime (FSDP2 with
    DTensor tensor parallelism): ``selective`` is then its per-op policy (:func:`per_op_sac_bytes` a layer instead
    of Korthikanti's), and its recompute buffer what one layer's ``none`` activations exceed that by; and with
    sequence parallelism the attention and MLP inputs, all-gathered from their sequence shards before the
    column-parallel products (torchtitan @ 9dec370 ``parallelize_llama.py``: ``PrepareModuleInput`` from
    ``Shard(1)`` to ``Replicate()``), are saved whole by those products for their weight gradients (PyTorch autograd
    keeps a matrix product's inputs), ``2 x 2 s b h`` bytes where Korthikanti's Eq. 4 counts ``2 x 2 s b h / t``
    (Megatron-LM saves the shard and gathers again in the backward pass): ``4 s b h (1 - 1/t)`` more a layer without
    recompute and in the full recompute's buffer (the per-op policy recomputes the gathers: not saved).

    ``moe``: the layers are mixture-of-experts layers (:func:`moe_layer_values`): their own count a layer, and the
    embedding and output terms in the model's ``hidden`` size (``moe[0]``) instead of ``h``; ``dense``, ``dropout``:
    a dense layer's own widths (``dense[0]`` the hidden size), whether there is dropout and the bytes a score an
    unfused attention keeps (:func:`transformer_activation_bytes`). ``eight_bit``: the linears
    keep 8-bit inputs (:func:`transformer_activation_bytes`; torchtitan's per-op policy, ``sac``, keeps its own).
    ``modules``, ``mla``: Megatron-Core's modules of a ``selective`` recompute (:func:`transformer_activation_bytes`);
    its recompute buffer is what one layer's ``none`` activations exceed the modules' by (the rebuilt outputs of one
    layer while its backward runs) [D].

    >>> activation_bytes_per_device(2048, 1, 12288, 96, 96, t=8, sequence_parallel=True,
    ...     recompute="selective", pipeline=8) == 34 * 2048 * 12288 * 96 / 8   # Eq. 6
    True
    """
    p = op_checks.size("pipeline", pipeline)
    if microbatches is None and schedule == "gpipe":
        raise ValueError("microbatches: required for schedule 'gpipe' (it stashes all m)")
    m = None if microbatches is None else op_checks.size("microbatches", microbatches)
    v = op_checks.size("interleave", interleave)
    st = op_checks.size("stage", stage, 0)
    L = op_checks.size("layers", layers)
    if st.is_number and p.is_number and st >= p:
        raise ValueError(f"stage: must be < pipeline ({p}), got {st}")
    if not isinstance(recompute_buffer, bool):
        raise ValueError(f"recompute_buffer: must be True or False, got {recompute_buffer!r}")
    s_, b_, h_, a_, t_ = (sp.sympify(x) for x in (s, b, h, a, t))
    width = sp.sympify(hidden_width(h, moe, dense))
    # DTensor's sequence parallelism (torchtitan, ``sac`` given) saves the two gathered inputs of the column-parallel
    # layers whole, where Megatron keeps them sharded (docstring)
    gathered = 4 * s_ * b_ * width * (1 - 1 / t_) if sac is not None and sequence_parallel else sp.Integer(0)
    mods = tuple(modules) if recompute == "selective" and sac is None else ()
    per_mb = sp.sympify(transformer_activation_bytes(s, b, h, a, t, sequence_parallel, recompute, 1, fused_attention,
                                                     moe, eight_bit, mods, mla, dense, dropout, score_bytes))
    op_sac = sac is not None and recompute == "selective"
    if op_sac:
        per_mb = sp.sympify(per_op_sac_bytes(s, b, h, a, t, sequence_parallel, sac))
    elif recompute != "full":
        per_mb += gathered
    total = per_mb * L / p * _in_flight(schedule, p, m, v, st)
    none = sp.sympify(transformer_activation_bytes(s, b, h, a, t, sequence_parallel, "none", 1, fused_attention, moe,
                                                   eight_bit, dense=dense, dropout=dropout, score_bytes=score_bytes))
    if recompute_buffer and op_sac:
        total += sp.Max(0, none + gathered - per_mb)
    elif recompute_buffer and recompute == "full":
        total += none + gathered
    elif recompute_buffer and mods:
        total += sp.Max(0, none + gathered - per_mb)
    elif recompute_buffer and recompute == "selective" and not fused_attention:
        total += _score(dropout, score_bytes) * a_ * s_ ** 2 * b_ / t_
    if vocab is not None:
        V = op_checks.size("vocab", vocab)
        if st == 0 and dropout:
            total += s_ * b_ * width / t_ * _in_flight(schedule, p, m, v, st)
        if st == p - 1:
            total += 4 * s_ * b_ * width / t_ + 4 * s_ * b_ * V / t_
    return to_python(total)


def _tensor_bytes(graph, name: str):
    return graph.batch * graph.nodes[name].numel * graph.value_bytes


def graph_activation_bytes(graph, recompute: str = "none", tensor: int = 1):
    """Stored activation bytes of a generic graph (a CNN) for its batch, on one of ``tensor`` devices
    that split it by channels (:mod:`~concurrency_model.models.channel_split`: a layer that gathers its
    input stores it whole, every other split tensor is ``1 / tensor``).

    ``none`` (and ``selective``, which has no defined policy outside attention: treated as ``none``):
    the sum of the nodes' ``cost.forward.act_bytes``.

    ``full``: sqrt(n) checkpointing (Chen et al. 2016, §4.1). The n layers, in topological order, are cut
    into segments of ``k = ceil(sqrt(n))`` consecutive layers. Kept through the backward: each segment's
    input tensors (outputs of earlier nodes that the segment consumes, residual branches included, each
    tensor once), plus, while one segment is recomputed, that segment's stored activations (the largest
    segment bounds the peak): ``sum(checkpoints) + max(segment)``. Where that is not smaller than ``none``
    (tiny graphs), nothing is checkpointed and ``none`` is returned. Costs one extra forward pass.

    >>> from concurrency_model.models import get_model
    >>> g = get_model("resnet50", batch=1)
    >>> graph_activation_bytes(g, "full") < graph_activation_bytes(g) / 2
    True
    """
    _choice("recompute", recompute, RECOMPUTE)
    layers = graph.layers()
    whole, act = _stored_by(graph, tensor)
    stored = sum((act(n) for n in layers), sp.Integer(0))
    if recompute != "full" or len(layers) < 2:
        return to_python(stored)
    k = math.ceil(math.sqrt(len(layers)))
    checkpoints: set[str] = set()
    segment_bytes = []
    for i in range(0, len(layers), k):
        seg = layers[i:i + k]
        checkpoints |= _read_from_outside(seg)
        segment_bytes.append(sum((act(n) for n in seg), sp.Integer(0)))
    kept = _kept_bytes(graph, checkpoints, whole, tensor)
    return to_python(sp.Min(kept + sp.Max(*segment_bytes), stored))


def _stored_by(graph, tensor: int):
    """``(whole, act)``: the tensors one of ``tensor`` channel-split devices keeps whole, and ``act(node)``, the bytes
    it stores of a node (its share of the node's stored input: whole where the input is, or the node gathers it)."""
    whole = replicated(graph) if tensor > 1 else set(graph.nodes)

    def act(n):
        return n.cost.forward.act_bytes * (1 if n.inputs[0] in whole or gathers_input(n) else sp.Rational(1, tensor))
    return whole, act


def _read_from_outside(seg) -> set[str]:
    """The tensors the nodes ``seg`` read that none of them makes (a segment's or a stage's inputs)."""
    inside = {n.name for n in seg}
    return {src for n in seg for src in n.inputs if src not in inside}


def _kept_bytes(graph, names, whole, tensor: int):
    """Bytes of the tensors ``names`` on one of ``tensor`` channel-split devices (whole where in ``whole``)."""
    return sum((_tensor_bytes(graph, c) * (1 if c in whole else sp.Rational(1, tensor)) for c in sorted(names)),
               sp.Integer(0))


def rematerialised_stage_bytes(graph, stages, microbatches: int, tensor: int = 1):
    """Stored activation bytes of the busiest pipeline stage of a generic graph (a CNN) under GPipe's
    re-materialisation: each stage keeps its input for every one of the ``microbatches`` from the microbatch's forward
    pass to its backward pass, and, while one microbatch's backward pass runs, that microbatch's activations of the
    stage, rebuilt (Huang et al. 2019, GPipe §2.3: peak ``O(N + (L / K) (N / M))`` for a batch of N in M microbatches
    over K partitions of L layers; torchgpipe, Kim et al. 2020 §3.2, checkpoints every partition's forward pass the
    same way). ``graph``: built for one microbatch; ``stages``: ``[start, stop)`` ranges of its layers; ``tensor``: as
    :func:`graph_activation_bytes`.

    >>> from concurrency_model.models import get_model
    >>> g = get_model("resnet50", batch=4)
    >>> n = len(g.layers())
    >>> one = rematerialised_stage_bytes(g, [(0, n)], 1)   # the input, and every activation once
    >>> one == graph_activation_bytes(g) + 4 * 3 * 224 * 224 * 4
    True
    """
    layers = graph.layers()
    whole, act = _stored_by(graph, tensor)
    m = op_checks.size("microbatches", microbatches)
    busiest = sp.Integer(0)
    for lo, hi in stages:
        seg = layers[lo:hi]
        kept = _kept_bytes(graph, _read_from_outside(seg), whole, tensor)
        busiest = sp.Max(busiest, m * kept + sum((act(n) for n in seg), sp.Integer(0)))
    return to_python(busiest)


def _total(field: str, x):
    if isinstance(x, dict):
        if "total" not in x:
            raise ValueError(f"{field}: a dict needs a 'total' entry, got keys {sorted(x)}")
        x = x["total"]
    return _nonneg(field, x)


def _gb(x) -> str:
    return f"{float(x) / GB:.1f} GB"


def memory_per_device(model_state, activations, device_capacity_bytes, reserve_fraction: float = 0.0,
                      *, device_name: str | None = None, extra: dict | None = None, headroom=0) -> dict:
    """Add model state, activations and ``extra`` named bytes (e.g. a weight stash) and compare with the
    device's capacity less ``reserve_fraction`` of it (framework workspace, fragmentation).

    ``headroom``: the band's upper end less the sum (the caching allocator's reserved headroom,
    :func:`.allocator.headroom_bytes`, and the spread of measured peaks, :func:`.allocator.band_excess_bytes`):
    ``upper_bytes`` is the sum plus it. ``fits`` is True only when the upper end fits; ``at_risk`` when the sum fits
    and the upper end does not (then the reason says "at risk").

    ``model_state`` and ``activations`` are numbers or dicts with a ``total`` (as returned by
    :func:`model_state_bytes`); ``device_capacity_bytes`` is a number or a
    :class:`~concurrency_model.hardware.devices.Device` (its ``mem_capacity`` and ``name``). Never raises for a
    configuration that does not fit: ``fits`` is False and ``reason`` says by how much and what is largest.

    >>> r = memory_per_device(70e9, 22.3e9, 80e9, device_name="a100-sxm4-80gb")
    >>> r["fits"], r["reason"].split(" (")[0]
    (False, 'memory: 92.3 GB per device exceeds 80.0 GB of a100-sxm4-80gb')
    >>> r = memory_per_device(70e9, 5e9, 80e9, headroom=8e9)
    >>> r["fits"], r["at_risk"], r["reason"].split(" (")[0].split(", but ")[1]
    (False, True, 'its upper end 83.0 GB does not: at risk')
    """
    if isinstance(device_capacity_bytes, Device):
        device_name = device_name or device_capacity_bytes.name
        device_capacity_bytes = device_capacity_bytes.mem_capacity
    cap = _nonneg("device_capacity_bytes", device_capacity_bytes)
    number("reserve_fraction", reserve_fraction, low_ok=True, high=1)
    parts = {"model_state": _total("model_state", model_state),
             "activations": _total("activations", activations)}
    for name, value in (extra or {}).items():
        parts[str(name)] = _nonneg(f"extra.{name}", value)
    total = sum(parts.values(), sp.Integer(0))
    upper = total + _nonneg("headroom", headroom)
    # nothing reserved: the capacity itself (nsimplify's search costs an estimate a tenth of its time)
    usable = cap * (1 - nsimplified(reserve_fraction)) if reserve_fraction else cap
    out = {k + "_bytes": to_python(v) for k, v in parts.items()}
    out.update(total_bytes=to_python(total), upper_bytes=to_python(upper), capacity_bytes=to_python(cap), usable_bytes=to_python(usable))
    if not (upper.is_number and usable.is_number):
        out.update(fits=None, at_risk=None, reason="memory: symbolic; substitute numbers to decide")
        return out
    fits, central_fits = bool(upper <= usable), bool(total <= usable)
    dev = device_name or "the device"
    limit = _gb(cap) if reserve_fraction == 0 else \
        f"{_gb(usable)} usable ({_gb(cap)} less {reserve_fraction:.0%} reserve)"
    breakdown = ", ".join(f"{k.replace('_', ' ')} {_gb(v)}" for k, v in
                          sorted(parts.items(), key=lambda kv: -float(kv[1]))
                          if float(v) or k in ("model_state", "activations"))  # no empty extra part
    verb = "fits in" if central_fits else "exceeds"
    risk = f", but its upper end {_gb(upper)} does not: at risk" if central_fits and not fits else ""
    out.update(fits=fits, at_risk=central_fits and not fits, headroom_bytes=to_python(usable - total),
               reason=f"memory: {_gb(total)} per device {verb} {limit} of {dev}{risk} ({breakdown})")
    return out


__all__ = ["model_state_bytes", "transformer_activation_bytes", "activation_bytes_per_device", "per_op_sac_bytes",
           "weight_stash_bytes", "graph_activation_bytes", "memory_per_device", "fsdp_zero_stage"]
