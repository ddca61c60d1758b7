"""What a ``selective`` recompute runs again in the backward pass, by policy: the share of each layer's forward.

* ``attention`` (Korthikanti et al. 2022 §5, Megatron-LM's ``--recompute-granularity selective``): the attention
  core of every transformer block, nothing else.
* ``op``: torchtitan's per-op selective activation checkpointing (``activation_checkpoint.mode = "selective"``,
  ``selective_ac_option = "op"``, the default of its Llama 3 8B config: pytorch/torchtitan @ 9dec370
  ``train_configs/llama3_8b.toml``; the policy in ``torchtitan/parallelisms/parallelize_llama.py``
  ``_apply_ac_to_transformer_block``, ``_save_list``, unchanged at 820504e and e7c0cae in
  ``torchtitan/models/llama3/parallelize_llama.py``). Each transformer block is checkpointed with a policy that
  saves the outputs of the ops in ``_save_list`` and recomputes every other op: saved are the matrix products
  (``aten.mm``) except every second one of the block ("Saves output of all compute ops, except every second mm":
  the block's counter of ``mm`` calls, even counts recomputed), the fused attention (``_scaled_dot_product_flash
  _attention`` / ``_efficient_attention``), ``reduce_scatter_tensor`` (a sequence-parallel reduce-scatter's
  output) and ``max`` (float8's amax). Recomputed: the other products, every norm, rotary embedding,
  activation, product and residual add of the block, and the collectives whose outputs are not saved (the
  sequence-parallel all-gathers, or without sequence parallelism the all-reduces). A Llama block calls ``wq, wk,
  wv`` (attention), ``wo``, then ``w1, w3, w2`` (``w2(silu(w1(x)) * w3(x))``, torchtitan ``models/llama/model.py``):
  ``wk``, ``wo`` and ``w3`` are recomputed. The toolkit's graphs fuse the three projections into one ``qkv`` layer
  (output ``(heads + 2 kv_heads) x head_dim``): it counts as three products, of which the key's share is
  recomputed. Layers outside the blocks (embedding, final norm, output layer, loss) are not checkpointed.

* a tuple of Megatron-Core's modules (``training.recompute_modules``, ``--recompute-modules``; NVIDIA/Megatron-LM @
  2a75ac12 ``megatron/core/transformer/transformer_config.py``, ``recompute_modules``: default ``["core_attn"]``, the
  ``attention`` policy above), each layer of the module run again (:func:`module_rows`): ``core_attn`` the attention
  core; ``layernorm`` the block's two norms (``input_layernorm``, ``pre_mlp_layernorm``); ``moe_act`` the routed
  experts' activation; ``mla_up_proj`` multi-latent attention's up projections and its rotary embedding; ``mlp``
  a dense MLP; ``moe`` the whole mixture-of-experts layer, router, dispatch and combine with their all-to-alls
  included; ``shared_experts`` the shared experts. What each keeps in memory is :func:`.memory.moe_layer_values`'.

A layer belongs to a block when its name starts with ``<name>.<index>.`` (``layers.3.``, ``h.3.``: the builders'
block prefixes, :mod:`concurrency_model.models`).
"""
from __future__ import annotations

import re

from ..checks import did_you_mean
from ..choices import RECOMPUTE_MODULES

POLICIES = ("attention", "op")
_BLOCK = re.compile(r"^([A-Za-z_]+\.\d+)\.")


def block_of(name: str) -> str | None:
    """The transformer block a layer name belongs to, or None.

    >>> block_of("layers.3.mlp.up_proj"), block_of("h.0.qkv"), block_of("lm_head")
    ('layers.3', 'h.0', None)
    """
    m = _BLOCK.match(name)
    return m.group(1) if m else None


def product_widths(node, heads: dict) -> list[int]:
    """The output widths of the matrix products a linear layer stands for: ``q, k, v`` for a fused q/k/v projection
    of its block's attention (``heads``: the attention's ``heads, kv_heads, head_dim``), else its one output.

    >>> from concurrency_model.models import get_model
    >>> g = get_model("gpt2", batch=1)
    >>> att = next(n for n in g.layers() if n.kind == "attention").attrs
    >>> product_widths(next(n for n in g.layers() if n.name.endswith("qkv")), att)
    [768, 768, 768]
    """
    a = node.attrs
    if heads:
        q, kv = heads["heads"] * heads["head_dim"], heads.get("kv_heads", heads["heads"]) * heads["head_dim"]
        if a.get("c_out") == q + 2 * kv:
            return [q, kv, kv]
    return [int(a["c_out"])] if "c_out" in a else [1]


def block_products(graph) -> tuple | None:
    """The matrix products of one transformer block of ``graph`` in execution order, as ``(width, split)`` pairs
    (``split``: ``column`` or ``row``, the tensor-parallel cut); a fused QKV projection counts as torchtitan's three
    products ``wq, wk, wv`` (module docstring). What :func:`.memory.per_op_sac_bytes` stores every other one of;
    None for a graph without attention, or whose first block has no linear layer.

    >>> from concurrency_model.models import get_model
    >>> block_products(get_model("gpt2", batch=1))   # q, k, v of the fused qkv, proj, fc1, fc2
    ((768, 'column'), (768, 'column'), (768, 'column'), (768, 'row'), (3072, 'column'), (768, 'row'))
    """
    nodes = graph.layers()
    att = [n for n in nodes if n.kind == "attention"]
    if not att:
        return None
    prefix = att[0].name.rsplit(".", 1)[0] + "."
    out = []
    for n in nodes:
        if n.kind == "linear" and n.name.startswith(prefix):
            split = str(n.attrs.get("split", "column"))
            out += [(w, split) for w in product_widths(n, att[0].attrs)]
    return tuple(out) or None


def full_recompute_rows(names) -> list[bool]:
    """Which layers a ``full`` recompute runs again, by name (a graph's layers in order): with transformer blocks,
    the blocks' layers only; without (a CNN, an MLP), every layer.

    Megatron's full recompute checkpoints the transformer layers and nothing outside them: with
    ``checkpoint_activations``, ``ParallelTransformer.forward`` runs ``_checkpointed_forward`` over its layers
    (chunks of ``--checkpoint-num-layers``) and then the final layer norm, outside the checkpoints; the embedding, the
    output layer and the loss belong to the language model around it (microsoft/Megatron-DeepSpeed @ 2255b617
    ``megatron/model/transformer.py``, ``megatron/model/gpt_model.py``; the same in Megatron-Core: with
    ``recompute_granularity == 'full'``, ``TransformerBlock.forward`` checkpoints its layers in
    ``_checkpointed_forward`` and applies ``final_layernorm`` after it, NVIDIA/Megatron-LM @ 0034bda6
    ``megatron/core/transformer/transformer_block.py``). torchtitan's full activation checkpointing
    wraps each ``TransformerBlock`` (pytorch/torchtitan @ 9dec370 ``torchtitan/parallelisms/parallelize_llama.py``
    ``apply_ac``). A graph without blocks keeps the whole-stage rule (torchgpipe's checkpointing recomputes every
    layer of a partition).

    >>> full_recompute_rows(["wte", "h.0.ln1", "h.0.qkv", "ln_f", "lm_head"])
    [False, True, True, False, False]
    >>> full_recompute_rows(["conv1", "fc"])
    [True, True]
    """
    blocks = [block_of(n) is not None for n in names]
    return blocks if any(blocks) else [True] * len(blocks)


def recompute_modules(spec) -> tuple:
    """The modules of ``training.recompute_modules`` (:data:`~concurrency_model.choices.RECOMPUTE_MODULES`), sorted
    and without repeats: a comma-separated string or a list of names; ``ValueError`` naming the field otherwise.

    >>> recompute_modules("moe_act, mla_up_proj"), recompute_modules(["layernorm"])
    (('mla_up_proj', 'moe_act'), ('layernorm',))
    >>> recompute_modules("mla_upproj")
    Traceback (most recent call last):
    ...
    ValueError: training.recompute_modules: unknown module 'mla_upproj'; did you mean 'mla_up_proj'?; allowed: \
core_attn, moe_act, layernorm, mla_up_proj, mlp, moe, shared_experts
    """
    names = spec.split(",") if isinstance(spec, str) else spec
    if not isinstance(names, (list, tuple)) or not names or not all(isinstance(x, str) for x in names):
        raise ValueError(f"training.recompute_modules: a comma-separated string or a list of module names, got "
                         f"{spec!r}")
    out = set()
    for x in (n.strip() for n in names):
        if x not in RECOMPUTE_MODULES:
            raise ValueError(f"training.recompute_modules: unknown module {x!r}{did_you_mean(x, RECOMPUTE_MODULES)}; "
                             f"allowed: {', '.join(RECOMPUTE_MODULES)}")
        out.add(x)
    return tuple(sorted(out))


_NORMS = ("input_norm", "post_attention_norm", "ln1", "ln2", "ln_1", "ln_2")  # a block's two norms, as built
_ACTIVATIONS = ("silu", "gelu", "relu", "mul")
# what a model lacks when a module recomputes none of its layers (:func:`check_modules`)
MODULE_PARTS = {"core_attn": "attention", "moe_act": "mixture-of-experts layer", "layernorm": "block norms",
                "mla_up_proj": "multi-latent attention", "mlp": "dense MLP", "moe": "mixture-of-experts layer",
                "shared_experts": "shared experts"}


def module_rows(nodes, modules: tuple) -> set:
    """The names of the layers that Megatron-Core's ``modules`` (:func:`recompute_modules`) run again (module doc).

    >>> from concurrency_model.models import get_model
    >>> g = get_model({"hf_config": "qwen3-30b-a3b", "seq_len": 128}, batch=1)
    >>> sorted(n for n in module_rows(g.layers(), ("layernorm", "moe_act")) if n.startswith("layers.0."))
    ['layers.0.input_norm', 'layers.0.mlp.experts.swiglu', 'layers.0.mlp.silu', 'layers.0.post_attention_norm']
    """
    by_block: dict = {}
    for n in nodes:
        blk = block_of(n.name)
        if blk is not None:
            by_block.setdefault(blk, []).append(n)
    out = set()
    for blk, layers in by_block.items():
        kinds = [n.kind for n in layers]
        moe = "moe_dispatch" in kinds
        mla = any(n.kind == "attention" and n.attrs.get("mla") for n in layers)
        start = kinds.index("moe_dispatch") if moe else len(kinds)
        end = kinds.index("moe_combine") if "moe_combine" in kinds else len(kinds)
        for i, n in enumerate(layers):
            last = n.name.rsplit(".", 1)[-1]
            mlp = ".mlp." in n.name or last in ("fc1", "fc2", "gelu")
            if ("core_attn" in modules and n.kind == "attention"
                    or "layernorm" in modules and last in _NORMS
                    or "moe_act" in modules and moe and start < i < end and n.kind in _ACTIVATIONS
                    or "mla_up_proj" in modules and mla and last in ("q_b_proj", "kv_b_proj", "rotary")
                    or "mlp" in modules and not moe and mlp
                    or "moe" in modules and moe and mlp
                    or "shared_experts" in modules and ".shared_expert" in n.name):
                out.add(n.name)
    return out


def recompute_shares(nodes, policy) -> dict:
    """``{layer name: share of its forward run again}`` for a ``selective`` recompute under ``policy``
    (:data:`POLICIES`); layers left out are not recomputed. ``nodes``: a graph's layers in order.

    >>> from concurrency_model.models import get_model
    >>> g = get_model({"hf_config": "llama-3.1-8b", "seq_len": 128}, batch=1)
    >>> s = recompute_shares(g.layers(), "op")
    >>> s["layers.0.qkv"], s["layers.0.proj"], s["layers.0.mlp.gate_proj"], s["layers.0.mlp.up_proj"]
    (0.16666666666666666, 1.0, 0.0, 1.0)
    >>> s["layers.0.attention"], s["layers.0.input_norm"], "lm_head" in s
    (0.0, 1.0, False)
    >>> recompute_shares(g.layers(), "attention")["layers.0.attention"]
    1.0
    """
    if isinstance(policy, tuple):  # Megatron-Core's modules
        return {name: 1.0 for name in module_rows(nodes, policy)}
    if policy not in POLICIES:
        raise ValueError(f"recompute policy: unknown {policy!r}{did_you_mean(policy, POLICIES)}; allowed: "
                         f"{', '.join(POLICIES)}")
    if policy == "attention":
        return {n.name: 1.0 for n in nodes if n.kind == "attention"}
    heads = {block_of(n.name): n.attrs for n in nodes if n.kind == "attention" and block_of(n.name)}
    count: dict = {}
    out = {}
    for n in nodes:
        blk = block_of(n.name)
        if blk is None:
            continue
        if n.kind == "linear":
            again = 0.0
            widths = product_widths(n, heads.get(blk, {}))
            for share in (w / sum(widths) for w in widths):
                count[blk] = count.get(blk, 0) + 1
                again += share if count[blk] % 2 == 0 else 0.0  # every second mm of the block is recomputed
            out[n.name] = again
        else:
            out[n.name] = 0.0 if n.kind == "attention" else 1.0  # the fused attention is saved, the rest recomputed
    return out


def check_modules(nodes, modules) -> None:
    """``ValueError`` naming ``training.recompute_modules`` for a module of ``modules`` (a tuple of them, or a runtime's
    policy name, which passes) that runs none of ``nodes`` again: ``mla_up_proj`` without multi-latent attention,
    ``moe_act`` without experts (Megatron-Core refuses both: ``transformer_config.py`` ``__post_init__``), ``mlp`` in
    a model without a dense MLP, and so on."""
    if not isinstance(modules, tuple):
        return
    for m in modules:
        if not module_rows(nodes, (m,)):
            raise ValueError(f"training.recompute_modules: {m!r} recomputes no layer of this model (it has no "
                             f"{MODULE_PARTS[m]})")
