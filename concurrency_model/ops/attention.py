"""Scaled dot-product and multi-head self-attention (Vaswani et al. 2017), plain and fused (FlashAttention).

Core per head: ``S = Q Kᵀ`` (s_q x d by d x s_kv), scale by 1/sqrt(d), ``P = softmax(S)``, ``O = P V``.
Both products are activation-activation GEMMs, so their two gradients are input gradients.

* plain: S and P are written to and read from memory, and P is stored for backward: traffic and stored
  activations grow with s_q * s_kv;
* fused (Dao et al. 2022, FlashAttention): S and P never leave on-chip memory; traffic is Q, K, V, O and
  one log-sum-exp per row; backward recomputes S and P (one more QKᵀ, scale and softmax). With
  ``causal``, blocks above the diagonal are skipped: the s_q*s_kv terms scale by (s+1)/(2s) (s_q = s_kv).
  Plain causal attention masks every score (one more element-wise pass) and skips nothing.
"""
from __future__ import annotations

import sympy as sp

from ..cost import Cost, OpCost, chain
from . import checks
from .dense import gemm, linear
from .elementwise import scale
from .softmax import softmax

SRC = "Vaswani et al. 2017; fused: Dao et al. 2022 (FlashAttention)"
LSE_BYTES = 4  # fp32 log-sum-exp per row


def _act_gemm(g: OpCost) -> OpCost:
    return OpCost(g.op, g.forward, g.backward, source=g.source)


def attention(batch, heads, seq_q, head_dim, seq_kv=None, fused: bool = False, causal: bool = False,
              value_bytes=4) -> OpCost:
    """Attention core of ``heads`` heads of size ``head_dim`` (no projections): ``seq_q`` queries against ``seq_kv``
    keys (default ``seq_q``). ``causal`` with ``seq_q < seq_kv``: the queries are the last ``seq_q`` positions (a
    prompt after a prefix already in the KV cache); the fused kernel computes their pairs on or below the diagonal,
    ``seq_q (seq_kv - seq_q) + seq_q (seq_q + 1) / 2`` of ``seq_q seq_kv`` [D].

    >>> a = attention(1, 1, 4, 2)
    >>> a.forward.macs, a.forward.flop, a.forward.depth
    (64, 216, 13)
    """
    args = (batch, heads, seq_q, head_dim, seq_kv, fused, causal, value_bytes)
    key = tuple((type(a), a) for a in args) if all(type(a) in _PLAIN for a in args) else None
    hit = MEMO.get(key) if key is not None else None
    if hit is None:
        hit = _attention(*args)
        if key is not None:
            if len(MEMO) >= MEMO_SIZE:
                MEMO.clear()
            MEMO[key] = hit
    return hit


# a model's layers ask for the same attention core again and again (every block of a decoder): the OpCost, frozen,
# is computed once per arguments of these plain types (with their types, so 2 and 2.0 are not confused)
_PLAIN = frozenset({int, float, bool, str, type(None), sp.Integer})
MEMO: dict = {}
MEMO_SIZE = 4096


def _attention(batch, heads, seq_q, head_dim, seq_kv, fused, causal, value_bytes) -> OpCost:
    batch, heads = checks.size("batch", batch), checks.size("heads", heads)
    sq, d = checks.size("seq_q", seq_q), checks.size("head_dim", head_dim)
    skv = sq if seq_kv is None else checks.size("seq_kv", seq_kv)
    if causal and (sq - skv).is_positive:  # causal queries are the last seq_q of the seq_kv positions [D]
        raise ValueError(f"causal: seq_q = {sq} queries exceed the seq_kv = {skv} positions they attend to")
    vb = checks.value_bytes(value_bytes)
    bh = batch * heads
    qk = _act_gemm(gemm(sq, skv, d, bh, vb))
    sc = scale(bh * sq * skv, vb)
    sm = softmax(bh * sq, skv, vb)
    pv = _act_gemm(gemm(sq, d, skv, bh, vb))
    steps = [qk, sc, sm, pv]
    if causal and not fused:  # the mask is applied to every score (an add of -inf), nothing is skipped
        steps.insert(2, OpCost("mask", sc.forward, source=SRC))
    plain = chain("attention", *steps, source=SRC)
    qkvo = vb * bh * (2 * sq * d + 2 * skv * d)  # Q, K, V read, O written
    if not fused:
        f = plain.forward.with_(act_bytes=vb * bh * (sq * d + 2 * skv * d + sq * skv))
        return OpCost("attention", f, plain.grad_input, plain.grad_weight, SRC)
    frac = sp.Rational(1)
    if causal:  # the pairs on or below the diagonal: a prompt after a cached prefix when seq_q < seq_kv
        frac = (sq * (skv - sq) + sq * (sq + 1) / 2) / (sq * skv)
    f = plain.forward
    lse = LSE_BYTES * bh * sq
    fwd = Cost(flop=f.flop * frac, depth=f.depth, bytes=qkvo + lse, act_bytes=qkvo + lse, macs=f.macs * frac)
    recompute = chain("recompute", qk, sc, sm).forward
    bwd = plain.backward
    gin = Cost(flop=(bwd.flop + recompute.flop) * frac, depth=recompute.depth + bwd.depth,
               bytes=2 * qkvo + lse, macs=(bwd.macs + recompute.macs) * frac)
    return OpCost("flash_attention", fwd, gin, source=SRC)


def multi_head_attention(batch, seq, hidden, heads, fused: bool = False, causal: bool = False,
                         bias: bool = True, value_bytes=4) -> OpCost:
    """Self-attention block: QKV projection (hidden -> 3 hidden), core, output projection.

    >>> mha = multi_head_attention(1, 4, 8, 2)
    >>> int(mha.params) == 4 * 8 * 8 + 4 * 8
    True
    """
    hidden, heads = checks.size("hidden", hidden), checks.size("heads", heads)
    if hidden % heads:
        raise ValueError(f"heads: hidden={hidden} must be divisible by heads={heads}")
    tokens = checks.size("batch", batch) * checks.size("seq", seq)
    qkv = linear(tokens, hidden, 3 * hidden, bias, value_bytes)
    core = attention(batch, heads, seq, hidden // heads, fused=fused, causal=causal, value_bytes=value_bytes)
    out = linear(tokens, hidden, hidden, bias, value_bytes)
    return chain("multi_head_attention", qkv, core, out, source=SRC)
