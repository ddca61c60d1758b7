"""Gradient compression (paper §7.3): bytes on the wire and the work to encode and decode them.

The paper surveys quantization (§7.3.1: fp16, fixed point, 1-bit SGD with error feedback, QSGD, TernGrad)
and sparsification (§7.3.2: thresholds, top-k, Deep Gradient Compression, SparCML) and low-rank messages
[S1/M]; it gives **no size or time formulas**. The sizes below are the methods' own encodings, the
encode/decode costs memory-bound kernels on the device (:func:`concurrency_model.timing.roofline`; GEMMs
for PowerSGD), both **derived [D]** (paper-models.md §5.3 lists the same size models, tagged [D]).

An uncompressed gradient of ``m`` values of ``value_bytes`` (fp32: 4) is ``m * value_bytes`` bytes.
Per scheme (``message_bytes`` = what one worker sends, capped at the dense size: a sender never sends more
than the raw gradient; SparCML switches to dense the same way, Renggli et al., SC 2019):

====================  ===========================================  ===========================  ==================
scheme                bits per value (+ per bucket of ``d``)       aggregation                  source
====================  ===========================================  ===========================  ==================
fp32                  32                                           allreduce                    -
fp16, bf16            16                                           allreduce (sums in 16 bit)   Micikevicius 2018
int8                  8 (+ 32: fp32 scale)                         compressed allreduce         Dettmers 2016
1bit                  1 (+ 64: two fp32 reconstruction values);    compressed allreduce         Seide et al. 2014
                      error feedback
terngrad              2 (+ 32: scale)                              compressed allreduce         Wen et al. 2017
qsgd (``levels`` s)   min(ceil(log2(2s+1)), Elias bound) (+ 32)    compressed allreduce         Alistarh et al. 2017
threshold             ``ratio`` (one index word each, sign in it);  allgather                    Strom 2015
                      error feedback
topk                  ``ratio`` (value + index bytes)              allgather or sparse          Aji & Heafield 2017
                                                                   allreduce
dgc                   as topk; momentum correction, local accum.   as topk                      Lin et al. 2018
powersgd (rank r)     r (a + b) values per a x b matrix            two allreduces               Vogels et al. 2019
sfb                   r (c_in + c_out) per chosen FC layer of r    allgather of factors +       Xie et al. 2016,
                      rows; the rest dense                         allreduce of the rest        Zhang et al. 2017
====================  ===========================================  ===========================  ==================

Quantized messages carry per-worker scales, so they cannot be summed on the way: ``compressed_allreduce``
is the two-phase exchange of compressed chunks (an alltoall of ``message`` bytes, decode and sum one chunk,
re-encode it, an allgather of ``message`` bytes; DeepSpeed's compressed allreduce for 1-bit Adam, Tang et
al. 2021) [D]; ``collective="allgather"`` gathers all P messages and decodes P of them. Sparse messages have
different supports on each worker, so top-k is gathered (P messages, P decodes; Renggli et al. 2019), or
summed by SparCML's sparse allreduce (``collective="sparse_allreduce"``: recursive doubling whose partial
sums fill in until they go dense; :mod:`.sparse_comm`). Strom's static threshold (the paper's first
sparsification method, §7.3.2 [S1]: "up to 54x speedup for 80 nodes") sends the values above a threshold
``tau`` as ``+-tau``, so one word per value carries its index and sign (``index_bytes``; the encoding as
recalled from Strom 2015, unverified), and keeps the rest as a residual (error feedback); ``ratio`` is the
fraction above the threshold (the paper's 846-2871x compression of non-convolutional DNNs [S1] is a ratio of
1/846 to 1/2871 at one 4-byte word a value of an fp32 gradient). Sufficient-factor broadcasting (``sfb``,
:mod:`.sparse_comm`) gathers the factors of the fully connected layers it pays off for and all-reduces the
rest.
PowerSGD allreduces ``P = M Q`` (a x r) and ``Q = M^T P`` (b x r) per matrix, vectors uncompressed in the
first (Vogels, Karimireddy & Jaggi, NeurIPS 2019, Alg. 1).

Encode / decode costs and the time of a synchronisation: :mod:`.compressed_sync`.

QSGD's Elias bound, as recalled from Alistarh et al. 2017 Thm. 3.2 (**unverified** against the text):
``(3 + 1.5 log2(2(s^2 + d) / (s(s + sqrt d)))) s(s + sqrt d) + 32`` bits per bucket of ``d``; the coding
used is the cheaper of that and fixed-length ``ceil(log2(2s+1))`` bits per value.

>>> c = compress("1bit", 10**6)
>>> c.message_bytes, c.collective
(140632.0, 'compressed_allreduce')
"""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ..comm.checks import as_value, check_n, check_name, check_ranks, check_rate, is_num
from ..timing.graph import matrix_copies
from .sparse_comm import sparse_allreduce_rounds, sparse_allreduce_time, sufficient_factors

__all__ = ["SCHEMES", "COLLECTIVES", "Compressed", "compress", "qsgd_bits", "weight_matrices"]

SCHEMES = ("fp32", "fp16", "bf16", "int8", "1bit", "terngrad", "qsgd", "threshold", "topk", "dgc", "powersgd", "sfb")
COLLECTIVES = ("allreduce", "allgather", "compressed_allreduce", "sparse_allreduce", "two_allreduces", "sfb")
_QUANT = ("int8", "1bit", "terngrad", "qsgd")
_SOURCE = {"fp32": "uncompressed", "fp16": "Micikevicius et al. 2018 (mixed precision)", "bf16": "bfloat16",
           "int8": "Dettmers 2016 (8-bit approximations)", "1bit": "Seide et al. 2014 (1-bit SGD, error feedback)",
           "terngrad": "Wen et al. 2017 (TernGrad)", "qsgd": "Alistarh et al. 2017 (QSGD)",
           "threshold": "Strom 2015 (static threshold, error feedback)",
           "topk": "Aji & Heafield 2017 (gradient dropping)", "dgc": "Lin et al. 2018 (Deep Gradient Compression)",
           "powersgd": "Vogels et al. 2019 (PowerSGD)",
           "sfb": "Xie et al. 2016, Zhang et al. 2017 (sufficient-factor broadcasting, Poseidon)"}


def _min(a, b):
    return min(a, b) if is_num(a) and is_num(b) else sp.Min(a, b)


def qsgd_bits(levels, d):
    """Bits for one bucket of ``d`` values quantized to ``levels`` = s levels (Alistarh et al. 2017).

    ``min(fixed, elias) + 32``: fixed-length ``d ceil(log2(2s + 1))``; Elias bound as in the module doc
    (recalled, unverified); 32 bits for the bucket's norm.

    >>> round(qsgd_bits(1, 512), 1), qsgd_bits(127, 512)     # Elias wins at s = 1, fixed 8 bits at 127
    (295.7, 4128.0)
    """
    s, d = check_ranks(levels, "levels"), check_ranks(d, "bucket_size")
    width = sp.Integer(int(2 * s).bit_length()) if is_num(s) else sp.ceiling(sp.log(2 * s + 1, 2))
    nnz = s * (s + sp.sqrt(d))
    elias = (3 + sp.Rational(3, 2) * sp.log(2 * (s**2 + d) / nnz, 2)) * nnz
    if is_num(s) and is_num(d):
        return as_value(min(float(d * width), float(elias)) + 32)
    return sp.Min(d * width, elias) + 32



def weight_matrices(graph, tensor: int = 1) -> tuple[list[tuple[int, int]], int]:
    """``(matrices, vector_values)`` of a graph's parameters, as PowerSGD reshapes them.

    Convolution kernels are ``c_out x (c_in/groups kh kw)``, linear layers ``c_out x c_in`` (one per expert of a
    mixture-of-experts layer), embeddings
    ``rows x hidden``; biases, normalisation parameters and anything else are vectors (sent uncompressed).
    ``tensor`` > 1: one tensor rank's share, the Megatron-split linear layers cut along their split (``c_out / t``
    column-split, ``c_in / t`` row-split); every other matrix and vector whole [D].

    >>> from concurrency_model import get_model
    >>> mats, vec = weight_matrices(get_model("resnet50"))
    >>> len(mats), mats[-1], sum(a * b for a, b in mats) + vec
    (54, (1000, 2048), 25557032)
    """

    mats, vec = [], 0
    for n in graph.layers():
        params = n.cost.params
        if not is_num(sp.sympify(params)):
            raise ValueError(f"graph: layer {n.name!r} has symbolic parameters {params}")
        params, a = int(params), n.attrs
        rows = cols = 0
        if n.kind.startswith("conv") and "c_out" in a:
            rows, cols = a["c_out"], a["c_in"] // a.get("groups", 1) * a.get("kh", 1) * a.get("kw", 1)
        elif n.kind == "linear" and "c_out" in a:
            rows, cols = a["c_out"], a["c_in"]
            if tensor > 1 and a.get("split") in ("column", "row") and matrix_copies(n) * rows * cols <= params:
                params -= matrix_copies(n) * rows * cols  # the rank holds only its share of the matrix (a tied
                # output layer owns none)
                rows, cols = (-(-rows // tensor), cols) if a["split"] == "column" else (rows, -(-cols // tensor))
                params += matrix_copies(n) * rows * cols
        elif "embedding" in n.kind and n.shape and params % n.shape[-1] == 0:
            rows, cols = params // n.shape[-1], n.shape[-1]
        copies = matrix_copies(n) if n.kind == "linear" else 1  # one matrix per expert of an MoE layer
        if rows and cols and copies * rows * cols <= params and min(rows, cols) > 1:
            mats += [(int(rows), int(cols))] * copies
            params -= copies * rows * cols
        vec += params
    return mats, vec


@dataclass(frozen=True)
class Compressed:
    """One worker's compressed gradient: sizes (bytes), aggregation and codec work (FLOP, bytes moved).

    ``encode_*`` cover the whole gradient once; ``decode_*`` one received message (for PowerSGD, the
    reconstruction). ``messages`` are the payloads of the collectives (two for PowerSGD), exact sympy
    numbers or expressions; ``message_bytes`` their sum (a float for numbers).
    """

    scheme: str
    elements: object
    dense_bytes: object
    message_bytes: object
    collective: str
    messages: tuple
    encode_flop: object = 0
    encode_bytes: object = 0
    decode_flop: object = 0
    decode_bytes: object = 0
    kernels: int = 0
    gemms_encode: tuple = ()
    gemms_decode: tuple = ()
    source: str = field(default="", compare=False)

    @property
    def bits_per_element(self):
        return as_value(8 * self.message_bytes / self.elements)

    def collectives(self, P) -> list[tuple[str, object]]:
        """``[(op, n), ...]`` with ``n`` as :func:`~concurrency_model.comm.collective_time` counts it."""
        msg = self.messages[0]
        if self.collective == "allgather":
            return [("allgather", P * msg)]
        if self.collective == "compressed_allreduce":
            return [("alltoall", msg), ("allgather", msg)]
        if self.collective == "sparse_allreduce":  # one point-to-point exchange a round
            return [("p2p", n) for n in sparse_allreduce_rounds(msg, self.dense_bytes, P)]
        if self.collective == "sfb":  # the factors gathered, the rest all-reduced
            return [(op, n) for op, n in (("allgather", P * msg), ("allreduce", self.messages[1])) if n != 0]
        return [("allreduce", x) for x in self.messages]

    def sent_bytes(self, P):
        """Bytes one worker sends per synchronisation with bandwidth-optimal (ring-like) algorithms."""
        P = check_ranks(P, "P")
        if self.collective == "sparse_allreduce":
            return sparse_allreduce_time(self.messages[0], self.dense_bytes, P, 0, 1)
        if self.collective == "sfb":
            return as_value((P - 1) * self.messages[0] + 2 * (P - 1) / P * self.messages[1])
        k = (P - 1) if self.collective == "allgather" else 2 * (P - 1) / P
        return as_value(k * self.message_bytes)

    def codec_counts(self, P) -> tuple:
        """(encodes, decodes) of a full gradient per synchronisation; a sparse allreduce merges what it
        receives, counted in received messages' worth of bytes; sfb rebuilds the P - 1 remote gradients."""
        if self.collective == "allgather":
            return 1, P
        if self.collective == "compressed_allreduce":
            return 1 + 1 / sp.sympify(P), 2
        if self.collective == "sparse_allreduce":
            return 1, sparse_allreduce_time(self.messages[0], self.dense_bytes, P, 0, 1) / self.messages[0]
        if self.collective == "sfb":
            return 0, P - 1
        return (1, 1) if self.kernels else (0, 0)


def compress(scheme: str, gradient, *, value_bytes=4, bucket_size=512, levels=7, ratio=0.001, index_bytes=4,
             rank=4, collective: str | None = None, shape=None, batch=None, workers=None) -> Compressed:
    """Compress a gradient of ``gradient`` values (a number or symbol), or of a model's parameters (a graph,
    or a zoo name / model spec for :func:`concurrency_model.get_model`, built for ``batch`` samples).

    Options: ``bucket_size`` values per scale (int8, 1bit, terngrad, qsgd), ``levels`` (qsgd's s),
    ``ratio`` kept (threshold: the fraction above it; topk, dgc: DGC's 99.9% sparsity is 0.001),
    ``index_bytes`` per kept value, ``rank`` (powersgd; matrix shapes from the graph, or
    ``shape=(rows, cols)`` for a single matrix, or a list of such pairs, the rest of the gradient vectors),
    ``collective`` (quantized schemes: ``compressed_allreduce``
    or ``allgather``; topk, dgc: ``allgather`` or ``sparse_allreduce``); sfb: ``batch`` the samples one
    worker contributes to a step (the rows of its factors) and ``workers`` for Poseidon's per-layer choice
    (:mod:`.sparse_comm`).

    >>> compress("topk", 10**6).message_bytes     # 1000 values + 1000 int32 indices
    8000.0
    >>> from concurrency_model.symbols import n_bytes
    >>> compress("terngrad", n_bytes).message_bytes     # n values: 2 bits each + a 4-byte scale per 512
    Min(4*n, n/4 + 4*ceiling(n/512))
    """
    check_name("scheme", scheme, SCHEMES)
    vb = check_rate("value_bytes", value_bytes)
    mats = graph = None
    if batch is not None and scheme != "sfb":
        raise ValueError(f"batch: only sfb sends per-sample factors, not {scheme}")
    if isinstance(gradient, (str, dict)) or (batch is not None and hasattr(gradient, "layers")):
        from ..models import get_model
        gradient = get_model(gradient, check_ranks(batch, "batch") if batch is not None else 1)
    if hasattr(gradient, "layers"):
        graph = gradient
        mats, vec = weight_matrices(gradient)
        m = sp.Integer(gradient.params)
    else:
        m = check_n(gradient, "gradient")
    dense = vb * m
    kw = dict(scheme=scheme, elements=as_value(m), dense_bytes=as_value(dense), source=_SOURCE[scheme])
    if scheme == "fp32":
        return Compressed(message_bytes=as_value(dense), collective="allreduce", messages=(dense,), **kw)
    if scheme in ("fp16", "bf16"):
        c = _min(2 * m, dense)
        return Compressed(message_bytes=as_value(c), collective="allreduce", messages=(c,), encode_flop=m,
                          encode_bytes=vb * m + c, decode_flop=m, decode_bytes=c + vb * m, kernels=1, **kw)
    if scheme in _QUANT:
        d = check_ranks(bucket_size, "bucket_size")
        coll = "compressed_allreduce" if collective is None else collective
        if coll not in ("compressed_allreduce", "allgather"):
            raise ValueError(f"collective: {coll!r} does not apply to {scheme}; "
                             "allowed: compressed_allreduce, allgather")
        bits = {"int8": 8 * m + 32 * sp.ceiling(m / d), "1bit": m + 64 * sp.ceiling(m / d),
                "terngrad": 2 * m + 32 * sp.ceiling(m / d)}.get(scheme)
        if scheme == "qsgd":
            bits = (qsgd_bits(levels, d) - 32) * m / d + 32 * sp.ceiling(m / d)
        c = _min(bits / 8, dense)
        flop = {"int8": 3, "1bit": 5, "terngrad": 6, "qsgd": 8}[scheme] * m
        extra = 2 * vb * m if scheme == "1bit" else 0  # error feedback: read and write the residual
        return Compressed(message_bytes=as_value(c), collective=coll, messages=(c,), encode_flop=flop,
                          encode_bytes=2 * vb * m + extra + c, decode_flop=2 * m, decode_bytes=c + 2 * vb * m,
                          kernels=2, **kw)
    if scheme in ("threshold", "topk", "dgc"):
        if isinstance(ratio, bool) or not isinstance(ratio, (int, float, sp.Basic)) or \
                (is_num(sp.sympify(ratio)) and not 0 < ratio <= 1):
            raise ValueError(f"ratio: must be in (0, 1], got {ratio!r}")
        allowed = ("allgather",) if scheme == "threshold" else ("allgather", "sparse_allreduce")
        coll = collective or "allgather"
        if coll not in allowed:
            raise ValueError(f"collective: {coll!r} does not apply to {scheme}; allowed: {', '.join(allowed)}")
        k = sp.ceiling(ratio * m)
        ib = check_rate("index_bytes", index_bytes)
        if scheme == "threshold" and is_num(ib) and ib <= 0:
            raise ValueError(f"index_bytes: the threshold's word carries the index and the sign, must be > 0, got {ib}")
        sparse = k * (ib if scheme == "threshold" else vb + ib)
        if is_num(sparse) and sparse >= dense:  # denser than dense: send dense (SparCML)
            return Compressed(message_bytes=as_value(dense), collective="allreduce", messages=(dense,), **kw)
        # buffers beyond the gradient: DGC's momentum correction and local accumulation, the threshold's residual
        extra = {"dgc": 4 * vb * m, "threshold": 2 * vb * m}.get(scheme, 0)
        sparse = _min(sparse, dense)
        return Compressed(message_bytes=as_value(sparse), collective=coll, messages=(sparse,),
                          encode_flop=2 * m + (4 * m if scheme == "dgc" else 0),
                          encode_bytes=3 * vb * m + extra + sparse, decode_flop=k, decode_bytes=sparse + 2 * k * vb,
                          kernels=3 if scheme == "dgc" else 2, **kw)
    if scheme == "sfb":
        if mats is None:
            raise ValueError("gradient: sfb needs the model (a graph, zoo name or spec) to find its fully connected "
                             "layers")
        layers, factors, rest = sufficient_factors(graph, workers)
        sent, rest = vb * factors, vb * rest
        return Compressed(message_bytes=as_value(sent + rest), collective="sfb", messages=(sent, rest),
                          decode_bytes=sent, kernels=1 if layers else 0, gemms_decode=layers, **kw)
    # powersgd
    r = check_ranks(rank, "rank")
    if mats is None:
        if shape is None:
            raise ValueError("shape: powersgd needs matrix shapes: pass a graph or shape=(rows, cols)")
        if shape and all(isinstance(x, (tuple, list)) for x in shape):  # several matrices, the rest vectors
            mats = [tuple(check_ranks(x, "shape") for x in pair) for pair in shape]
            vec = m - sum(a * b for a, b in mats)
            if is_num(vec) and vec < 0:
                raise ValueError(f"shape: the matrices hold {m - vec} values, more than the gradient's {m}")
        else:
            a, b = (check_ranks(x, "shape") for x in shape)
            if is_num(m) and m != a * b:
                raise ValueError(f"shape: {a} x {b} != gradient = {m} values")
            mats, vec = [(a, b)], 0
    keep = [(a, b) for a, b in mats if not (is_num(r * (a + b) - a * b) and r * (a + b) >= a * b)]
    vec = vec + sum((a * b for a, b in mats), sp.Integer(0)) - sum((a * b for a, b in keep), sp.Integer(0))
    first = vb * (r * sum(a for a, _ in keep) + vec)
    second = vb * r * sum(b for _, b in keep)
    ab = sum(a * b for a, b in keep)
    orth = sum(2 * a * r * r for a, _ in keep)
    return Compressed(message_bytes=as_value(first + second), collective="two_allreduces",
                      messages=(first, second), encode_flop=2 * ab + orth, encode_bytes=3 * vb * ab,
                      decode_flop=ab, decode_bytes=3 * vb * ab, kernels=3,
                      gemms_encode=tuple((a, r, b) for a, b in keep) + tuple((b, r, a) for a, b in keep),
                      gemms_decode=tuple((a, b, r) for a, b in keep), **kw)
