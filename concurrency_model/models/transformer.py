"""Transformers of the zoo: ViT-B/16 (torchvision), BERT (Devlin et al. 2019), GPT-2/GPT-3 (Radford et al.
2019; Brown et al. 2020) and a configurable GPT/BERT family.

Blocks follow the originals: packed QKV projection with bias, attention, output projection, MLP with a
4x hidden GELU layer; GPT and ViT are pre-LN, BERT is post-LN. GPT's output layer is tied to the token
embedding (its parameters are counted once).
"""
from __future__ import annotations

from .builder import Builder


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


def gpt(b: Builder, layers=12, hidden=768, heads=12, seq_len=1024, vocab=50257, ffn=None,
        fused_attention=False, max_positions=None) -> str:
    """A GPT-2-style decoder (Radford et al. 2019): learned positions, pre-LN, causal attention, tied output.

    ``gpt2`` = 12 x 768, 12 heads, 1024 positions, vocab 50257: 124,439,808 parameters.
    ``gpt3-175b`` = 96 x 12288, 96 heads, 2048 context (Brown et al. 2020, Table 2.1): about 174.6e9.
    """
    for k, v in (("layers", layers), ("hidden", hidden), ("heads", heads), ("seq_len", seq_len), ("vocab", vocab)):
        if not isinstance(v, int) or isinstance(v, bool) or v < 1:
            raise ValueError(f"{k}: must be a positive integer, got {v!r}")
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
    return b.linear(x, vocab, bias=False, tied=True, split="column", name="lm_head")


def bert(b: Builder, layers=12, hidden=768, heads=12, seq_len=512, vocab=30522, ffn=None,
         fused_attention=False, max_positions=512, type_vocab=2) -> str:
    """BERT encoder with pooler (Devlin et al. 2019; Hugging Face ``BertModel``): bert-base 109,482,240
    parameters, bert-large 335,141,888 (vocab 30522, 512 positions, 2 token types)."""
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
    return b.act(b.linear(cls, hidden, name="pooler"), "tanh")


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
