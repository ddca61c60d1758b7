"""Transformers of the zoo: ViT-B/16 (torchvision), BERT (Devlin et al. 2019), GPT-2/GPT-3 (Radford et al.
2019; Brown et al. 2020) and a configurable GPT/BERT family.

Blocks follow the originals: packed QKV projection with bias, attention, output projection, MLP with a
4x hidden GELU layer; GPT and ViT are pre-LN, BERT is post-LN. GPT's output layer is tied to the token
embedding (its parameters are counted once).

:func:`decoder` covers the later decoders (GPT-NeoX, LLaMA, Mistral, Mixtral, Qwen3 MoE, GPT-OSS, DeepSeek-V3;
read from Hugging Face config files by :mod:`concurrency_model.frontends.hf`): RMS or layer norm, rotary positions,
grouped-query attention (with Qwen3's per-head query/key norms and GPT-OSS's attention sinks), multi-head latent
attention (DeepSeek-V2/V3), SwiGLU, parallel residual, mixture of experts (with shared experts, dense first layers
and biases on the router and experts) and DeepSeek-V3's multi-token prediction module.
"""
from __future__ import annotations

import math

from ..checks import count, number
from ..cost import Cost, OpCost, clog2
from ..ops import attention as att
from ..ops import dense, norm
from ..ops import embedding as emb
from .builder import MAX_LAYERS, Builder


LM_HEAD = "lm_head"  # the name of the output projection onto the vocabulary in every zoo language model


def is_lm_head(node) -> bool:
    """Whether graph ``node`` is a language model's output projection onto the vocabulary (the layer the
    training loss reads and tensor parallelism splits by vocabulary, without a collective)."""
    return node.kind == "linear" and node.name.split(".")[-1] == LM_HEAD


def check_tensor_split(layers, t: int) -> None:
    """``ValueError`` naming ``parallel.tensor`` unless ``t`` divides the attention heads and every
    column- or row-split GEMM dimension of ``layers`` (Megatron tensor parallelism, Shoeybi et al. §3; the
    vocabulary-parallel LM head is padded instead)."""
    for n in layers:
        if n.kind == "attention" and n.attrs["heads"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide the {n.attrs['heads']} attention heads")
        split = n.attrs.get("split")
        if split == "column" and not is_lm_head(n) and n.attrs["c_out"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {n.attrs['c_out']} outputs")
        if split == "row" and n.attrs["c_in"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {n.attrs['c_in']} inputs")


def _dropped(b: Builder, x, dropout: bool = True):
    """``x`` through a dropout layer, or ``x`` itself for a model without dropout (p = 0: PyTorch launches no kernel
    and keeps no mask, :mod:`concurrency_model.parallel.memory`)."""
    return b.dropout(x) if dropout else x


def _attention_block(b: Builder, x, heads, causal, fused, dropout=True):
    h = b.shape(x)[-1]
    qkv = b.linear(x, 3 * h, split="column", name="qkv")
    a = b.attention(qkv, heads, fused=fused, causal=causal)
    return _dropped(b, b.linear(a, h, split="row", name="proj"), dropout)


def _mlp(b: Builder, x, ffn, act="gelu", dropout=True):
    h = b.shape(x)[-1]
    y = b.act(b.linear(x, ffn, split="column", name="fc1"), act)
    return _dropped(b, b.linear(y, h, split="row", name="fc2"), dropout)


def pre_ln_block(b: Builder, x, heads, ffn, causal=False, fused=False, dropout=True):
    x = b.add(x, _attention_block(b, b.layer_norm(x, name="ln1"), heads, causal, fused, dropout), name="add1")
    return b.add(x, _mlp(b, b.layer_norm(x, name="ln2"), ffn, dropout=dropout), name="add2")


def post_ln_block(b: Builder, x, heads, ffn, fused=False):
    x = b.layer_norm(b.add(x, _attention_block(b, x, heads, False, fused), name="add1"), name="ln1")
    return b.layer_norm(b.add(x, _mlp(b, x, ffn), name="add2"), name="ln2")


def _check_sizes(**sizes) -> None:
    """Each size a positive integer (``ValueError`` naming it, ``model.<size>``; ``layers`` at most ``MAX_LAYERS``)."""
    for k, v in sizes.items():
        count(f"model.{k}", v, high=MAX_LAYERS if k == "layers" else None)


def gpt(b: Builder, layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257, ffn=None,
        fused_attention=False, max_positions=None, dropout=0.1) -> str:
    """A GPT-2-style decoder (Radford et al. 2019): learned positions, pre-LN, causal attention, tied output.

    ``gpt2`` = 12 x 768, 12 heads, 1024 positions, vocab 50257: 124,439,808 parameters.
    ``gpt3-175b`` = 96 x 12288, 96 heads, 2048 context (Brown et al. 2020, Table 2.1): about 174.6e9.
    ``dropout``: the dropout probability after the embedding and each block's branches (GPT-2's ``resid_pdrop``
    0.1); 0 builds none (MPT's ``resid_pdrop`` 0: no dropout kernel runs and no mask is kept).
    """
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, vocab=vocab)
    drop = number("model.dropout", dropout, low_ok=True, high=1.0) > 0
    if hidden % heads:
        raise ValueError(f"model.heads: hidden={hidden} must be divisible by heads={heads}")
    positions = max_positions or seq_len
    x = b.input((seq_len,), name="tokens")
    x = b.embedding(x, vocab, hidden, name="wte")
    x = _dropped(b, b.learned(x, "position_embedding", positions * hidden, name="wpe"), drop)
    for i in range(layers):  # identical blocks: built once, added again (Builder.repeated)
        x = b.repeated(f"h.{i}", x, lambda y: pre_ln_block(b, y, heads, ffn or 4 * hidden, causal=True,
                                                            fused=fused_attention, dropout=drop), ("gpt", drop))
    x = b.layer_norm(x, name="ln_f")
    return b.linear(x, vocab, bias=False, tied=True, split="column", name=LM_HEAD)


BERT_HEADS = ("pooler", "pretraining")


def bert(b: Builder, layers=12, hidden=768, heads=12, seq_len=512, vocab=30522, ffn=None,
         fused_attention=False, max_positions=512, type_vocab=2, head: str = "pooler") -> str:
    """BERT encoder with pooler (Devlin et al. 2019; Hugging Face ``BertModel``): bert-base 109,482,240
    parameters, bert-large 335,141,888 (vocab 30522, 512 positions, 2 token types).

    ``head="pretraining"`` adds the pre-training heads of Devlin et al. §3.1 (Hugging Face
    ``BertForPreTraining``): the masked-LM transform (dense, GELU, layer norm), the decoder onto the
    vocabulary on every position (its weight tied to the token embedding, a bias of its own; named
    ``lm_head``, so the training loss is timed on its logits) and the next-sentence classifier on the
    pooled output (2 classes): bert-large 336,226,108 parameters. Implementations that decode only the
    masked positions do ~15% of that decoder's work."""
    if head not in BERT_HEADS:
        raise ValueError(f"model.head: unknown {head!r}; allowed: {', '.join(BERT_HEADS)}")
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, vocab=vocab, max_positions=max_positions,
                 type_vocab=type_vocab, **({} if ffn is None else {"ffn": ffn}))
    if hidden % heads:
        raise ValueError(f"model.heads: hidden={hidden} must be divisible by heads={heads}")
    if seq_len > max_positions:
        raise ValueError(f"model.seq_len: {seq_len} exceeds the {max_positions} learned positions")
    x = b.input((seq_len,), name="tokens")
    x = b.embedding(x, vocab, hidden, name="word_embeddings")
    x = b.learned(x, "position_embedding", max_positions * hidden, name="position_embeddings")
    x = b.learned(x, "token_type_embedding", type_vocab * hidden, name="token_type_embeddings")
    x = b.dropout(b.layer_norm(x, name="embeddings.ln"))
    for i in range(layers):  # identical blocks: built once, added again (Builder.repeated)
        x = b.repeated(f"layer.{i}", x, lambda y: post_ln_block(b, y, heads, ffn or 4 * hidden, fused=fused_attention),
                       "bert")
    cls = b.select(x, (1, hidden), name="cls")
    pooled = b.act(b.linear(cls, hidden, name="pooler"), "tanh")
    if head == "pooler":
        return pooled
    b.linear(pooled, 2, name="seq_relationship")
    y = b.layer_norm(b.act(b.linear(x, hidden, name="mlm.transform"), "gelu"), name="mlm.ln")
    return b.linear(y, vocab, tied=True, name=LM_HEAD)


def vit(b: Builder, image_size=224, patch=16, layers=12, hidden=768, heads=12, ffn=3072, classes=1000,
        fused_attention=False) -> str:
    """torchvision ViT (Dosovitskiy et al. 2021): patchify conv, class token, learned positions, pre-LN."""
    if image_size % patch:
        raise ValueError(f"image_size: {image_size} is not a multiple of the patch size {patch}")
    x = b.input((3, image_size, image_size))
    x = b.conv(x, hidden, patch, stride=patch, name="conv_proj")
    n = (image_size // patch) ** 2
    x = b.reshape(x, (n, hidden))
    x = b.learned(x, "class_token", hidden, shape=(n + 1, hidden), concat=True, name="class_token")
    x = b.dropout(b.learned(x, "position_embedding", (n + 1) * hidden, name="encoder.pos_embedding"))
    for i in range(layers):  # identical blocks: built once, added again (Builder.repeated)
        x = b.repeated(f"encoder.layers.{i}", x, lambda y: pre_ln_block(b, y, heads, ffn, fused=fused_attention), "vit")
    x = b.layer_norm(x, name="encoder.ln")
    return b.linear(b.select(x, (hidden,), name="cls"), classes, name="heads")


# -- later decoders (GPT-NeoX, LLaMA, Mistral, Mixtral) ------------------------------------------------
def _mul(b: Builder, x, y, name=None):
    """Element-wise product of two tensors of one shape (SwiGLU's gate): one multiply per element; its
    gradient is two multiplies (one per input)."""
    s = b.shape(x)
    n = b.batch * math.prod(s)
    cost = OpCost("mul", Cost(flop=n, depth=1, bytes=3 * b.vb * n, act_bytes=2 * b.vb * n),
                  Cost(flop=2 * n, depth=1, bytes=4 * b.vb * n), source="element-wise")
    return b.node("mul", (x, y), s, cost, name)


def _rotary(b: Builder, qkv, heads, kv_heads, head_dim, fraction):
    """Rotary position embedding (Su et al. 2021) on the first ``fraction`` of every query and key head:
    ``x cos + rotate_half(x) sin``, 2 multiplies and 1 add per element (cos/sin tables read once)."""
    s = b.shape(qkv)
    rot = int(head_dim * fraction)
    n = b.batch * s[0] * (heads + kv_heads) * rot
    cost = OpCost("rotary", Cost(flop=3 * n, depth=2, bytes=b.vb * (2 * n + 2 * s[0] * rot)),
                  Cost(flop=3 * n, depth=2, bytes=b.vb * 2 * n), source="Su et al. 2021 (RoFormer), element-wise")
    return b.node("rotary", qkv, s, cost, "rotary")


def _head_norms(b: Builder, qkv, heads, kv_heads, head_dim):
    """Qwen3's QK-norm: an RMSNorm of ``head_dim`` over every query head and one over every key head, before
    the rotary embedding (Qwen3 Technical Report, Yang et al. 2025, §2: "QK-Norm"; Hugging Face
    ``Qwen3MoeAttention.q_norm`` / ``k_norm``): ``2 head_dim`` parameters a layer."""
    s = b.shape(qkv)
    for name, n in (("q_norm", heads), ("k_norm", kv_heads)):
        qkv = b.node("rms_norm", qkv, s, norm.rms_norm(b.batch * s[0] * n, head_dim, b.vb), name)
    return qkv


def _gqa_attention(b: Builder, x, heads, kv_heads, head_dim, causal, fused, bias, rotary, qk_norm=False,
                   sinks=False):
    """Grouped-query attention (Ainslie et al. 2023): ``heads`` query heads share ``kv_heads`` key/value
    heads. One packed projection to (heads + 2 kv_heads) head_dim (column split), the attention core of
    ``heads`` heads (each query head against its group's keys: the same work as multi-head attention),
    the output projection (row split). ``qk_norm``: :func:`_head_norms`; ``sinks``: GPT-OSS's learned
    attention sink, one logit a head added to every softmax denominator (openai/gpt-oss @ 7b58334
    ``gpt_oss/torch/model.py`` ``AttentionBlock.sinks``: ``heads`` parameters a layer, its work negligible)."""
    h = b.shape(x)[-1]
    qkv = b.linear(x, (heads + 2 * kv_heads) * head_dim, bias=bias, split="column", name="qkv")
    if qk_norm:
        qkv = _head_norms(b, qkv, heads, kv_heads, head_dim)
    if rotary:
        qkv = _rotary(b, qkv, heads, kv_heads, head_dim, rotary)
    s = b.shape(qkv)[0]
    cost = att.attention(b.batch, heads, s, head_dim, fused=fused, causal=causal, value_bytes=b.vb)
    if sinks:
        cost = OpCost(cost.op, cost.forward.with_(params=heads), cost.grad_input, cost.grad_weight, cost.source)
    a = b.node("attention", qkv, (s, heads * head_dim), cost, "attention", heads=heads, kv_heads=kv_heads, seq=s,
               head_dim=head_dim, fused=fused, causal=causal)
    return b.linear(a, h, bias=bias, split="row", name="proj")


def _mla_attention(b: Builder, x, heads, mla: dict, causal, fused):
    """Multi-head latent attention (DeepSeek-V2, DeepSeek-AI 2024, §2.1.2-2.1.3; DeepSeek-V3 §2.1.1; layer
    shapes of deepseek-ai/DeepSeek-V3 @ 9b4e978 ``inference/model.py`` ``MLA``): queries through a low-rank
    down-projection ``q_lora_rank`` (RMS-normed, not split by tensor parallelism) and an up-projection to
    ``heads (qk_nope + qk_rope)`` (column split), or one projection when ``q_lora_rank`` is 0; keys and values
    through a shared down-projection to ``kv_lora_rank + qk_rope`` (the latent, RMS-normed, and one decoupled
    rotary key shared by all heads) and an up-projection to ``heads (qk_nope + v_head_dim)``; rotary on the
    ``qk_rope`` part of every query head and the shared key; the attention core of ``heads`` heads with query-key
    width ``qk_nope + qk_rope`` and value width ``v_head_dim``; the output projection from ``heads v_head_dim``
    (row split). The core's work ``s^2 heads (d_qk + d_v)`` is that of a core of head size ``(d_qk + d_v) / 2``,
    which the attention node carries [D]. Training runs the up-projections explicitly (the weight absorption of
    V2 §2.1.2 is an inference device)."""
    h = b.shape(x)[-1]
    s = b.shape(x)[0]
    nope, rope, vd = mla["qk_nope_head_dim"], mla["qk_rope_head_dim"], mla["v_head_dim"]
    ql, kl = mla.get("q_lora_rank") or 0, mla["kv_lora_rank"]
    qk = nope + rope
    if ql:
        q = b.rms_norm(b.linear(x, ql, bias=False, name="q_a_proj"), name="q_a_norm")
        q = b.linear(q, heads * qk, bias=False, split="column", name="q_b_proj")
    else:
        q = b.linear(x, heads * qk, bias=False, split="column", name="q_proj")
    kv = b.linear(x, kl + rope, bias=False, name="kv_a_proj")
    latent = b.rms_norm(b.select(kv, (s, kl), name="kv_latent"), name="kv_a_norm")
    kv = b.linear(latent, heads * (nope + vd), bias=False, split="column", name="kv_b_proj")
    n = b.batch * s * (heads + 1) * rope  # the rotated parts: every query head's and the shared key's
    rot = OpCost("rotary", Cost(flop=3 * n, depth=2, bytes=b.vb * (2 * n + 2 * s * rope)),
                 Cost(flop=3 * n, depth=2, bytes=b.vb * 2 * n), source="Su et al. 2021 (RoFormer), element-wise")
    q = b.node("rotary", q, b.shape(q), rot, "rotary")
    d = (qk + vd) // 2
    cost = att.attention(b.batch, heads, s, d, fused=fused, causal=causal, value_bytes=b.vb)
    a = b.node("attention", (q, kv), (s, heads * vd), cost, "attention", heads=heads, kv_heads=heads, seq=s,
               head_dim=d, fused=fused, causal=causal, mla=True)
    return b.linear(a, h, bias=False, split="row", name="proj")


def _expert_linear(b: Builder, x, c_out, experts, split, name, top_k=1, fixed_capacity=False, bias=False):
    """The same linear layer in each of ``experts`` experts, applied to the routed rows of ``x`` (every
    token appears once per chosen expert): the work of one layer on all routed rows, the parameters (and
    weight traffic) of all experts. ``top_k`` and ``fixed_capacity`` (capacity buffers: every expert gets its
    share of rows) tell the device-time model how many experts a batch reaches (:mod:`..timing.graph`);
    ``bias``: each expert's layer has a bias (GPT-OSS's experts)."""
    s = b.shape(x)
    rows = b.batch * math.prod(s[:-1])
    one = dense.linear(rows, s[-1], c_out, bias, b.vb)
    w = s[-1] * c_out + (c_out if bias else 0)
    fwd = one.forward.with_(params=experts * w, bytes=one.forward.bytes + (experts - 1) * w * b.vb)
    cost = OpCost("linear", fwd, one.grad_input, one.grad_weight, one.source)
    return b.node("linear", x, (*s[:-1], c_out), cost, name, rows_per_sample=math.prod(s[:-1]), c_in=s[-1],
                  c_out=c_out, split=split, experts=experts, top_k=top_k, fixed_capacity=fixed_capacity)


def _moe(b: Builder, x, ffn, experts, top_k, act, capacity_factor=None, router_bias=False, expert_bias=False,
         shared_ffn=0):
    """Sparse mixture-of-experts SwiGLU MLP (Shazeer et al. 2017; Mixtral, Jiang et al. 2024): a router
    (hidden -> experts, no bias), softmax and top-k, then every token through its ``top_k`` experts and a
    weighted sum. Parameters count all experts, work counts the top-k.

    ``capacity_factor`` None: dropless (each expert runs exactly the tokens routed to it, balanced). A
    number ``c``: fixed-capacity expert buffers (GShard, Lepikhin et al. 2021 §2.2; Switch Transformer,
    Fedus et al. 2022 §2.2 Eq. 3 and §5.4; DeepSpeed's ``ceil(k c tokens / E)``; training-formulas §5.3):
    each expert takes ``c`` times its balanced share, so the dispatch buffer (and with it the experts'
    GEMMs and the expert-parallel all-to-alls) has ``ceil(s top_k c)`` rows a sequence, the padding
    computed as the dense buffers are; ``c < 1`` drops the routed tokens beyond the capacity, which skip
    the layer. Balanced routing is assumed (derived [D]; the per-sequence ceiling stands for the
    per-device one, equal when the experts divide ``b s top_k c``).

    ``router_bias``: one bias a expert on the router (GPT-OSS's ``gate`` Linear; DeepSeek-V3's auxiliary-loss-free
    balancing bias ``e_score_correction_bias``, §2.1.2, of the same size); ``expert_bias``: biases on every
    expert's layers (GPT-OSS); ``shared_ffn`` > 0: a shared expert, a SwiGLU MLP of that width that every token
    runs besides its routed experts, added to their sum (DeepSeekMoE, Dai et al. 2024, §3.2; DeepSeek-V3 §2.1.2),
    split by tensor parallelism as a dense MLP (Megatron-Core's ``SharedExpertMLP``)."""
    s, h = b.shape(x)
    vb = b.vb
    gate = b.softmax(b.linear(x, experts, bias=router_bias, name="router"), name="router_softmax")
    # the ceiling forgives float noise: 100 x 1 x 1.1 is 110.00000000000001, not 111 slots
    slots = s * top_k if capacity_factor is None else math.ceil(s * top_k * capacity_factor - 1e-9)
    kept = min(slots, s * top_k)
    routed, padded = b.batch * kept * h, b.batch * slots * h
    fixed = capacity_factor is not None
    disp = b.node("moe_dispatch", (x, gate), (slots, h),
                  OpCost("moe_dispatch", Cost(bytes=vb * (routed + padded)), Cost(bytes=vb * (routed + padded)),
                         source="token permutation (data movement only)"), "dispatch", fixed_capacity=fixed,
                  route_tokens=s, route_experts=experts, route_top_k=top_k)  # for the dispatchers (.parallel.expert)
    eb = expert_bias
    g = b.act(_expert_linear(b, disp, ffn, experts, "column", "experts.w1", top_k, fixed, eb), act)
    y = _mul(b, g, _expert_linear(b, disp, ffn, experts, "column", "experts.w3", top_k, fixed, eb),
             name="experts.swiglu")
    d = _expert_linear(b, y, h, experts, "row", "experts.w2", top_k, fixed, eb)
    out = b.batch * s * h
    comb = OpCost("moe_combine", Cost(flop=routed + out * (top_k - 1), depth=1 + clog2(top_k),
                                      bytes=vb * (routed + out)),
                  Cost(flop=2 * routed, depth=1, bytes=vb * (2 * routed + out)), source="weighted sum of top-k outputs")
    out = b.node("moe_combine", (d, gate), (s, h), comb, "combine")
    if shared_ffn:
        with b.scope("shared_experts"):
            out = b.add(out, _mlp_swiglu(b, x, shared_ffn, act), name="add")
    return out


def _mlp_swiglu(b: Builder, x, ffn, act="silu", bias=False):
    """SwiGLU MLP (Shazeer 2020; LLaMA): ``down(act(gate x) * (up x))``, three matrices."""
    h = b.shape(x)[-1]
    g = b.act(b.linear(x, ffn, bias=bias, split="column", name="gate_proj"), act)
    y = _mul(b, g, b.linear(x, ffn, bias=bias, split="column", name="up_proj"), name="swiglu")
    return b.linear(y, h, bias=bias, split="row", name="down_proj")


def _mlp_plain(b: Builder, x, ffn, act="gelu", bias=True):
    h = b.shape(x)[-1]
    y = b.act(b.linear(x, ffn, bias=bias, split="column", name="fc1"), act)
    return b.linear(y, h, bias=bias, split="row", name="fc2")


MLA_KEYS = ("q_lora_rank", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim")


def _check_moe(experts, top_k, moe_ffn, shared_ffn, dense_layers, layers, capacity_factor, mtp_layers, mla) -> None:
    """``ValueError`` naming the field of a mixture-of-experts or MLA setting that cannot be built."""
    if experts and not 1 <= top_k <= experts:
        raise ValueError(f"top_k: must be between 1 and experts={experts}, got {top_k}")
    for k, v in (("moe_ffn", moe_ffn), ("shared_ffn", shared_ffn), ("dense_layers", dense_layers),
                 ("mtp_layers", mtp_layers)):
        if v is not None and (isinstance(v, bool) or not isinstance(v, int) or v < 0):
            raise ValueError(f"{k}: must be a whole number >= 0, got {v!r}")
    if not experts and (shared_ffn or dense_layers or moe_ffn):
        raise ValueError("experts: shared_ffn, dense_layers and moe_ffn need a mixture of experts (experts > 0)")
    if dense_layers and dense_layers >= layers:
        raise ValueError(f"dense_layers: {dense_layers} leaves none of the {layers} layers a mixture of experts")
    if capacity_factor is not None:
        if not experts:
            raise ValueError("capacity_factor: the model has no mixture-of-experts layers")
        number("capacity_factor", capacity_factor)
    if mla is not None:
        if not isinstance(mla, dict):
            raise ValueError(f"mla: must be a mapping of {', '.join(MLA_KEYS)}, got {type(mla).__name__}")
        for k in MLA_KEYS:
            if k == "q_lora_rank" and not mla.get(k):
                continue
            count(f"mla.{k}", mla.get(k))


def _block(b: Builder, x, normalize, attn: dict, mlp_kind: str, mlp_args: dict, parallel_residual: bool):
    """One pre-norm decoder block: attention (``attn["mla"]``: :func:`_mla_attention`, else
    :func:`_gqa_attention`) and an MLP (``mlp_kind``: ``moe``, ``swiglu`` or ``plain``)."""
    y = normalize(x, name="input_norm")
    if attn.get("mla"):
        a = _mla_attention(b, y, attn["heads"], attn["mla"], True, attn["fused"])
    else:
        a = _gqa_attention(b, y, attn["heads"], attn["kv_heads"], attn["head_dim"], True, attn["fused"],
                           attn["bias"], attn["rotary"], attn["qk_norm"], attn["sinks"])
    if not parallel_residual:
        x = b.add(x, a, name="add1")
    y = normalize(x, name="post_attention_norm")
    with b.scope("mlp"):
        if mlp_kind == "moe":
            m = _moe(b, y, **mlp_args)
        elif mlp_kind == "swiglu":
            m = _mlp_swiglu(b, y, **mlp_args)
        else:
            m = _mlp_plain(b, y, **mlp_args)
    return b.add(x, a, m, name="add") if parallel_residual else b.add(x, m, name="add2")


def _mtp_module(b: Builder, tokens, x, vocab, normalize, block):
    """One multi-token prediction module (DeepSeek-V3 §2.2, Figure 3; deepseek-ai/DeepSeek-V3 @ 9b4e978
    ``README_WEIGHTS.md``): the embedding of the next token (shared with the main model's: no parameters) and the
    main model's last hidden state, each RMS-normed (``enorm``, ``hnorm``), concatenated and projected from
    ``2h`` to ``h`` (``eh_proj``), one decoder block like the main model's last, and the output head (its norm,
    ``shared_head.norm``, and the main model's output matrix, shared: no parameters) with a loss of its own."""
    h = b.shape(x)[-1]
    c = emb.embedding(b.batch * b.shape(tokens)[0], vocab, h, b.vb)
    e = b.node("embedding", tokens, (b.shape(tokens)[0], h),
               OpCost(c.op, c.forward.with_(params=0), c.grad_input, c.grad_weight, c.source), "embed_tokens")
    y = b.concat([normalize(e, name="enorm"), normalize(x, name="hnorm")], axis=1, name="concat")
    y = block(b.linear(y, h, bias=False, name="eh_proj"))
    y = normalize(y, name="norm")
    return b.linear(y, vocab, bias=False, tied=True, split="column", name=LM_HEAD)


def decoder(b: Builder, layers=32, hidden=4096, heads=32, seq_len=4096, vocab=32000, ffn=11008, kv_heads=None,
            head_dim=None, norm="rms", mlp="swiglu", act="silu", bias=False, rotary=1.0, tied=False,
            parallel_residual=False, experts=0, top_k=2, fused_attention=False, max_positions=None,
            mlp_bias=None, capacity_factor=None, moe_ffn=None, shared_ffn=0, dense_layers=0, router_bias=False,
            expert_bias=False, qk_norm=False, sinks=False, mla=None, mtp_layers=0) -> str:
    """A pre-norm causal decoder in the LLaMA / GPT-NeoX family (no dropout: these configs use none).

    ``norm`` is ``rms`` (RMSNorm, no bias) or ``layer`` (LayerNorm with bias); ``mlp`` is ``swiglu``
    (three matrices) or ``plain`` (two, with ``act``); ``bias`` puts biases on the attention projections
    and, unless ``mlp_bias`` says otherwise, on the MLP's;
    ``rotary`` is the rotated fraction of each head (0: learned positions of ``max_positions``);
    ``kv_heads`` < ``heads`` is grouped-query attention; ``experts`` > 0 replaces the MLP by a sparse
    mixture of experts with ``top_k`` experts per token of width ``moe_ffn`` (default ``ffn``) and an optional
    ``capacity_factor`` (see :func:`_moe`), after ``dense_layers`` dense layers of width ``ffn`` (DeepSeek-V3's
    ``first_k_dense_replace``), with a shared expert of width ``shared_ffn`` and biases on the router
    (``router_bias``) and experts (``expert_bias``); ``qk_norm`` and ``sinks`` as :func:`_gqa_attention`;
    ``mla`` (a mapping of :data:`MLA_KEYS`) replaces grouped-query attention by :func:`_mla_attention`;
    ``mtp_layers`` appends that many :func:`_mtp_module` after the output layer; ``parallel_residual`` is GPT-NeoX's
    ``x + attn(ln1(x)) + mlp(ln2(x))``; ``tied`` shares the output layer with the token embedding.

    LLaMA-2-7B (32 x 4096, 32 heads, ffn 11008, vocab 32000, untied): 6,738,415,616 parameters.

    >>> from concurrency_model.models import Builder
    >>> b = Builder("llama-2-7b")
    >>> _ = decoder(b)
    >>> b.graph.params
    6738415616
    """
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, vocab=vocab, ffn=ffn)
    kv_heads = kv_heads or heads
    if head_dim is None:
        if hidden % heads:
            raise ValueError(f"model.heads: hidden={hidden} must be divisible by heads={heads}")
        head_dim = hidden // heads
    if heads % kv_heads:
        raise ValueError(f"kv_heads: heads={heads} must be divisible by kv_heads={kv_heads}")
    if norm not in ("rms", "layer"):
        raise ValueError(f"norm: unknown {norm!r}; allowed: rms, layer")
    if mlp not in ("swiglu", "plain"):
        raise ValueError(f"mlp: unknown {mlp!r}; allowed: swiglu, plain")
    _check_moe(experts, top_k, moe_ffn, shared_ffn, dense_layers, layers, capacity_factor, mtp_layers, mla)
    if not rotary and (max_positions or seq_len) < seq_len:
        raise ValueError(f"model.seq_len: {seq_len} exceeds the {max_positions} learned positions")
    normalize = b.rms_norm if norm == "rms" else b.layer_norm
    tokens = b.input((seq_len,), name="tokens")
    x = b.embedding(tokens, vocab, hidden, name="embed_tokens")
    if not rotary:
        x = b.learned(x, "position_embedding", (max_positions or seq_len) * hidden, name="embed_positions")
    attn = {"heads": heads, "kv_heads": kv_heads, "head_dim": head_dim, "fused": fused_attention, "bias": bias,
            "rotary": rotary, "qk_norm": qk_norm, "sinks": sinks, "mla": mla}
    mb = bias if mlp_bias is None else mlp_bias
    dense_args = {"ffn": ffn, "act": act, "bias": mb}
    moe_args = {"ffn": moe_ffn or ffn, "experts": experts, "top_k": top_k, "act": act,
                "capacity_factor": capacity_factor, "router_bias": router_bias, "expert_bias": expert_bias,
                "shared_ffn": shared_ffn}
    last = ("moe", moe_args) if experts else (mlp, dense_args)
    for i in range(layers):  # the blocks of one kind identical: built once, added again (Builder.repeated)
        kind, args = ("moe", moe_args) if experts and i >= dense_layers else (mlp, dense_args)
        x = b.repeated(f"layers.{i}", x, lambda y: _block(b, y, normalize, attn, kind, args, parallel_residual),
                       ("decoder", kind))
    out = b.linear(normalize(x, name="norm"), vocab, bias=False, tied=tied, split="column", name=LM_HEAD)
    for k in range(mtp_layers):  # each module's hidden state feeds the next (DeepSeek-V3 §2.2)
        with b.scope(f"mtp.{k}"):
            out = _mtp_module(b, tokens, x, vocab, normalize,
                              lambda y: _block(b, y, normalize, attn, *last, parallel_residual))
            x = b.graph.nodes[b.graph.nodes[b.graph.nodes[out].inputs[0]].inputs[0]].name
    return out
