"""Transformers of the zoo: ViT-B/16 (torchvision), BERT (Devlin et al. 2019), GPT-2/GPT-3 (Radford et al.
2019; Brown et al. 2020) and a configurable GPT/BERT family.

Blocks follow the originals: packed QKV projection with bias, attention, output projection, MLP with a
4x hidden GELU layer; GPT and ViT are pre-LN, BERT is post-LN. GPT's output layer is tied to the token
embedding (its parameters are counted once).

:func:`decoder` covers the later decoders (GPT-NeoX, LLaMA, Mistral, Mixtral; read from Hugging Face
config files by :mod:`concurrency_model.frontends.hf`): RMS or layer norm, rotary positions, grouped-query
attention, SwiGLU, parallel residual, mixture of experts.
"""
from __future__ import annotations

import math

from ..checks import count, number
from ..cost import Cost, OpCost, clog2
from ..ops import attention as att
from ..ops import dense
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


def _attention_block(b: Builder, x, heads, causal, fused):
    h = b.shape(x)[-1]
    qkv = b.linear(x, 3 * h, split="column", name="qkv")
    a = b.attention(qkv, heads, fused=fused, causal=causal)
    return b.dropout(b.linear(a, h, split="row", name="proj"))


def _mlp(b: Builder, x, ffn, act="gelu"):
    h = b.shape(x)[-1]
    y = b.act(b.linear(x, ffn, split="column", name="fc1"), act)
    return b.dropout(b.linear(y, h, split="row", name="fc2"))


def pre_ln_block(b: Builder, x, heads, ffn, causal=False, fused=False):
    x = b.add(x, _attention_block(b, b.layer_norm(x, name="ln1"), heads, causal, fused), name="add1")
    return b.add(x, _mlp(b, b.layer_norm(x, name="ln2"), ffn), name="add2")


def post_ln_block(b: Builder, x, heads, ffn, fused=False):
    x = b.layer_norm(b.add(x, _attention_block(b, x, heads, False, fused), name="add1"), name="ln1")
    return b.layer_norm(b.add(x, _mlp(b, x, ffn), name="add2"), name="ln2")


def _check_sizes(**sizes) -> None:
    """Each size a positive integer (``ValueError`` naming it; ``layers`` at most ``MAX_LAYERS``)."""
    for k, v in sizes.items():
        count(k, v, high=MAX_LAYERS if k == "layers" else None)


def gpt(b: Builder, layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257, ffn=None,
        fused_attention=False, max_positions=None) -> str:
    """A GPT-2-style decoder (Radford et al. 2019): learned positions, pre-LN, causal attention, tied output.

    ``gpt2`` = 12 x 768, 12 heads, 1024 positions, vocab 50257: 124,439,808 parameters.
    ``gpt3-175b`` = 96 x 12288, 96 heads, 2048 context (Brown et al. 2020, Table 2.1): about 174.6e9.
    """
    _check_sizes(layers=layers, hidden=hidden, heads=heads, seq_len=seq_len, vocab=vocab)
    if hidden % heads:
        raise ValueError(f"heads: hidden={hidden} must be divisible by heads={heads}")
    positions = max_positions or seq_len
    x = b.input((seq_len,), name="tokens")
    x = b.embedding(x, vocab, hidden, name="wte")
    x = b.dropout(b.learned(x, "position_embedding", positions * hidden, name="wpe"))
    for i in range(layers):
        with b.scope(f"h.{i}"):
            x = pre_ln_block(b, x, heads, ffn or 4 * hidden, causal=True, fused=fused_attention)
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
        raise ValueError(f"heads: hidden={hidden} must be divisible by heads={heads}")
    if seq_len > max_positions:
        raise ValueError(f"seq_len: {seq_len} exceeds the {max_positions} learned positions")
    x = b.input((seq_len,), name="tokens")
    x = b.embedding(x, vocab, hidden, name="word_embeddings")
    x = b.learned(x, "position_embedding", max_positions * hidden, name="position_embeddings")
    x = b.learned(x, "token_type_embedding", type_vocab * hidden, name="token_type_embeddings")
    x = b.dropout(b.layer_norm(x, name="embeddings.ln"))
    for i in range(layers):
        with b.scope(f"layer.{i}"):
            x = post_ln_block(b, x, heads, ffn or 4 * hidden, fused=fused_attention)
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
    for i in range(layers):
        with b.scope(f"encoder.layers.{i}"):
            x = pre_ln_block(b, x, heads, ffn, fused=fused_attention)
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


def _gqa_attention(b: Builder, x, heads, kv_heads, head_dim, causal, fused, bias, rotary):
    """Grouped-query attention (Ainslie et al. 2023): ``heads`` query heads share ``kv_heads`` key/value
    heads. One packed projection to (heads + 2 kv_heads) head_dim (column split), the attention core of
    ``heads`` heads (each query head against its group's keys: the same work as multi-head attention),
    the output projection (row split)."""
    h = b.shape(x)[-1]
    qkv = b.linear(x, (heads + 2 * kv_heads) * head_dim, bias=bias, split="column", name="qkv")
    if rotary:
        qkv = _rotary(b, qkv, heads, kv_heads, head_dim, rotary)
    s = b.shape(qkv)[0]
    cost = att.attention(b.batch, heads, s, head_dim, fused=fused, causal=causal, value_bytes=b.vb)
    a = b.node("attention", qkv, (s, heads * head_dim), cost, "attention", heads=heads, kv_heads=kv_heads, seq=s,
               head_dim=head_dim, fused=fused, causal=causal)
    return b.linear(a, h, bias=bias, split="row", name="proj")


def _expert_linear(b: Builder, x, c_out, experts, split, name, top_k=1, fixed_capacity=False):
    """The same linear layer in each of ``experts`` experts, applied to the routed rows of ``x`` (every
    token appears once per chosen expert): the work of one layer on all routed rows, the parameters (and
    weight traffic) of all experts. ``top_k`` and ``fixed_capacity`` (capacity buffers: every expert gets its
    share of rows) tell the device-time model how many experts a batch reaches (:mod:`..timing.graph`)."""
    s = b.shape(x)
    rows = b.batch * math.prod(s[:-1])
    one = dense.linear(rows, s[-1], c_out, False, b.vb)
    w = s[-1] * c_out
    fwd = one.forward.with_(params=experts * w, bytes=one.forward.bytes + (experts - 1) * w * b.vb)
    cost = OpCost("linear", fwd, one.grad_input, one.grad_weight, one.source)
    return b.node("linear", x, (*s[:-1], c_out), cost, name, rows_per_sample=math.prod(s[:-1]), c_in=s[-1],
                  c_out=c_out, split=split, experts=experts, top_k=top_k, fixed_capacity=fixed_capacity)


def _moe(b: Builder, x, ffn, experts, top_k, act, capacity_factor=None):
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
    per-device one, equal when the experts divide ``b s top_k c``)."""
    s, h = b.shape(x)
    vb = b.vb
    gate = b.softmax(b.linear(x, experts, bias=False, name="router"), name="router_softmax")
    # the ceiling forgives float noise: 100 x 1 x 1.1 is 110.00000000000001, not 111 slots
    slots = s * top_k if capacity_factor is None else math.ceil(s * top_k * capacity_factor - 1e-9)
    kept = min(slots, s * top_k)
    routed, padded = b.batch * kept * h, b.batch * slots * h
    fixed = capacity_factor is not None
    disp = b.node("moe_dispatch", (x, gate), (slots, h),
                  OpCost("moe_dispatch", Cost(bytes=vb * (routed + padded)), Cost(bytes=vb * (routed + padded)),
                         source="token permutation (data movement only)"), "dispatch", fixed_capacity=fixed)
    g = b.act(_expert_linear(b, disp, ffn, experts, "column", "experts.w1", top_k, fixed), act)
    y = _mul(b, g, _expert_linear(b, disp, ffn, experts, "column", "experts.w3", top_k, fixed), name="experts.swiglu")
    d = _expert_linear(b, y, h, experts, "row", "experts.w2", top_k, fixed)
    out = b.batch * s * h
    comb = OpCost("moe_combine", Cost(flop=routed + out * (top_k - 1), depth=1 + clog2(top_k),
                                      bytes=vb * (routed + out)),
                  Cost(flop=2 * routed, depth=1, bytes=vb * (2 * routed + out)), source="weighted sum of top-k outputs")
    return b.node("moe_combine", (d, gate), (s, h), comb, "combine")


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


def decoder(b: Builder, layers=32, hidden=4096, heads=32, seq_len=4096, vocab=32000, ffn=11008, kv_heads=None,
            head_dim=None, norm="rms", mlp="swiglu", act="silu", bias=False, rotary=1.0, tied=False,
            parallel_residual=False, experts=0, top_k=2, fused_attention=False, max_positions=None,
            mlp_bias=None, capacity_factor=None) -> str:
    """A pre-norm causal decoder in the LLaMA / GPT-NeoX family (no dropout: these configs use none).

    ``norm`` is ``rms`` (RMSNorm, no bias) or ``layer`` (LayerNorm with bias); ``mlp`` is ``swiglu``
    (three matrices) or ``plain`` (two, with ``act``); ``bias`` puts biases on the attention projections
    and, unless ``mlp_bias`` says otherwise, on the MLP's;
    ``rotary`` is the rotated fraction of each head (0: learned positions of ``max_positions``);
    ``kv_heads`` < ``heads`` is grouped-query attention; ``experts`` > 0 replaces the MLP by a sparse
    mixture of experts with ``top_k`` experts per token and an optional ``capacity_factor`` (see
    :func:`_moe`); ``parallel_residual`` is GPT-NeoX's
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
            raise ValueError(f"heads: hidden={hidden} must be divisible by heads={heads}")
        head_dim = hidden // heads
    if heads % kv_heads:
        raise ValueError(f"kv_heads: heads={heads} must be divisible by kv_heads={kv_heads}")
    if norm not in ("rms", "layer"):
        raise ValueError(f"norm: unknown {norm!r}; allowed: rms, layer")
    if mlp not in ("swiglu", "plain"):
        raise ValueError(f"mlp: unknown {mlp!r}; allowed: swiglu, plain")
    if experts and not 1 <= top_k <= experts:
        raise ValueError(f"top_k: must be between 1 and experts={experts}, got {top_k}")
    if capacity_factor is not None:
        if not experts:
            raise ValueError("capacity_factor: the model has no mixture-of-experts layers")
        number("capacity_factor", capacity_factor)
    if not rotary and (max_positions or seq_len) < seq_len:
        raise ValueError(f"seq_len: {seq_len} exceeds the {max_positions} learned positions")
    normalize = b.rms_norm if norm == "rms" else b.layer_norm
    x = b.input((seq_len,), name="tokens")
    x = b.embedding(x, vocab, hidden, name="embed_tokens")
    if not rotary:
        x = b.learned(x, "position_embedding", (max_positions or seq_len) * hidden, name="embed_positions")
    for i in range(layers):
        with b.scope(f"layers.{i}"):
            a = _gqa_attention(b, normalize(x, name="input_norm"), heads, kv_heads, head_dim, True,
                               fused_attention, bias, rotary)
            if not parallel_residual:
                x = b.add(x, a, name="add1")
            y = normalize(x, name="post_attention_norm")
            with b.scope("mlp"):
                if experts:
                    m = _moe(b, y, ffn, experts, top_k, act, capacity_factor)
                elif mlp == "swiglu":
                    m = _mlp_swiglu(b, y, ffn, act, bias if mlp_bias is None else mlp_bias)
                else:
                    m = _mlp_plain(b, y, ffn, act, bias if mlp_bias is None else mlp_bias)
            x = b.add(x, a, m, name="add") if parallel_residual else b.add(x, m, name="add2")
    x = normalize(x, name="norm")
    return b.linear(x, vocab, bias=False, tied=tied, split="column", name=LM_HEAD)
