"""The time of a compressed gradient synchronisation: encode and decode kernels on a device and the
collectives the scheme uses (:mod:`.compression` sizes the messages; paper §7.3, derived [D]).

Codec work [D], for ``m`` values of ``vb`` bytes and a message of ``c`` bytes: fp16/bf16 read the gradient
and write ``c`` (decode: the reverse); the quantizers make two passes (scale, quantize) and write ``c``,
1-bit also reads and writes its error-feedback residual; a decode reads ``c`` and accumulates into the fp32
sum (``c + 2 vb m``); top-k makes two passes (threshold, select) and zeroes the dense result, DGC also
updates its momentum and accumulation buffers (``4 vb m``); PowerSGD's error feedback moves ``3 vb ab``
before and after its GEMMs (:func:`concurrency_model.timing.gemm_coeffs`). Random numbers and Elias
decoding count a few FLOP per value only.
"""
from __future__ import annotations

import sympy as sp

from ..comm.checks import active, as_value, check_ranks, is_num
from ..comm.collectives import ALGORITHMS, collective_time
from ..comm.on_cluster import algorithms, collective_on_cluster, inter_beta
from ..hardware.clusters import load_cluster, place
from ..symbols import mem_bw, peak_flops
from ..timing import gemm_coeffs
from .compression import Compressed, compress
from .sparse_comm import sparse_allreduce_time

__all__ = ["codec_seconds", "compressed_sync_time", "compressed_sync_on_cluster"]


def _gemm_seconds(shapes, device) -> object:
    if not shapes:
        return 0
    if device is None:
        return sum(2 * a * b * c for a, b, c in shapes) / peak_flops
    import numpy as np

    m, n, k = (np.array([int(s[i]) for s in shapes]) for i in range(3))
    return float(gemm_coeffs(m, n, k, device, "fp32").seconds(device).sum())


def codec_seconds(c: Compressed, P, device=None) -> tuple:
    """``(encode_s, decode_s)`` per synchronisation on ``P`` workers.

    Memory-bound kernels: ``timing.roofline(flop, bytes, device, "fp32", kernels)``; with ``device=None``
    the plain roofline ``Max(flop / F, bytes / B_mem)`` in the symbols of :mod:`concurrency_model.symbols`.
    Encodes and decodes per synchronisation come from :meth:`Compressed.codec_counts`.

    >>> e, d = codec_seconds(compress("fp16", 10**6), 8)
    >>> e
    Max(6000000/B_mem, 1000000/F)
    """
    P = check_ranks(P, "P")
    n_enc, n_dec = c.codec_counts(P)
    if not c.kernels or (is_num(P) and P == 1):
        return 0.0, 0.0
    n_enc, n_dec = active(P) * n_enc, active(P) * n_dec  # one worker: nothing to synchronise
    if device is None:
        enc = sp.Max(c.encode_flop / peak_flops, c.encode_bytes / mem_bw)
        dec = sp.Max(c.decode_flop / peak_flops, c.decode_bytes / mem_bw)
    else:
        from ..timing import device as load_device
        from ..timing import roofline

        device = load_device(device)
        enc = roofline(float(c.encode_flop), float(c.encode_bytes), device, "fp32", c.kernels).time_s
        dec = roofline(float(c.decode_flop), float(c.decode_bytes), device, "fp32", 1).time_s
    enc = enc + _gemm_seconds(c.gemms_encode, device)
    dec = dec + _gemm_seconds(c.gemms_decode, device)
    return as_value(n_enc * enc), as_value(n_dec * dec)


_DEFAULT_ALG = {"allreduce": "ring", "allgather": "ring", "alltoall": "pairwise"}


def compressed_sync_time(scheme, gradient, P, alpha, beta, *, algorithm: str = "ring", device=None, gamma=0,
                         **options):
    """Seconds to synchronise a compressed gradient over ``P`` workers: collectives + encode + decode.

    ``scheme`` is a name (with :func:`compress` ``options``) or a :class:`Compressed`. ``algorithm``
    applies to the allreduce / allgather it names (``"auto"``: the cheapest, numbers only); where it does
    not apply, the ring (alltoall: pairwise exchange) is used. ``device`` as in :func:`codec_seconds`.

    >>> from concurrency_model.symbols import P, alpha, beta
    >>> compressed_sync_time("fp16", 1000, P, alpha, beta)
    alpha*(2*P - 2) + 2*Max(6000/B_mem, 1000/F)*Min(1, P - 1) + 2000*beta*(2*P - 2)/P
    >>> compressed_sync_time("fp32", 1000, 4, 1e-6, 1e-9)   # ring: 6 alpha + 1.5 * 4000 beta
    1.2e-05
    """
    c = scheme if isinstance(scheme, Compressed) else compress(scheme, gradient, **options)
    P = check_ranks(P, "P")
    total = sp.Integer(0)
    if c.collective == "sparse_allreduce":  # its own rounds, in closed form (symbolic P too)
        total = sparse_allreduce_time(c.messages[0], c.dense_bytes, P, alpha, beta)
    else:
        for op, n in c.collectives(P):
            alg = algorithm if algorithm == "auto" or algorithm in ALGORITHMS[op] else _DEFAULT_ALG[op]
            if alg == "auto":
                from ..comm.select import auto
                total += auto(op, n, P, alpha, beta, gamma if op == "allreduce" else 0)[1]
            else:
                total += collective_time(op, alg, n, P, alpha, beta, gamma if op == "allreduce" else 0)
    enc, dec = codec_seconds(c, P, device)
    return as_value(total + enc + dec)


def compressed_sync_on_cluster(scheme, gradient, P: int, cluster, ranks_per_node: int | None = None,
                               algorithm: str = "auto", **options) -> dict:
    """The same on a cluster (:func:`concurrency_model.comm.on_cluster.collective_on_cluster` per
    collective, codec on the cluster's device): a dict of ``comm_s, encode_s, decode_s, time_s, algorithm,
    message_bytes, sent_bytes``.

    >>> r = compressed_sync_on_cluster("fp16", 25557032, 16, "dgx1-v100")
    >>> r["algorithm"], r["message_bytes"]
    ('nccl:tree/LL128', 51114064.0)
    """

    cl = load_cluster(cluster)
    c = scheme if isinstance(scheme, Compressed) else compress(scheme, gradient, **options)
    P = int(check_ranks(P, "P"))
    comm, names = 0.0, []
    if P > 1 and c.collective == "sparse_allreduce":
        # round i pairs ranks 2^i apart: inside a node while 2^i < rpn, else every rank of a node at once
        # through the node's NICs
        # (across nodes these are recursive doubling's exchanges: an oversubscribed core slows them)
        rpn = place(cl, P, ranks_per_node).ranks_per_node
        inside, across = place(cl, 2, 2) if rpn > 1 else None, place(cl, 2, 1, groups_sharing=rpn)
        for i, (_, n) in enumerate(c.collectives(P)):
            if 2 ** i < rpn:
                comm += inside.intra[0] + float(n) * inside.intra[1]
            else:
                comm += across.inter[0] + float(n) * inter_beta(across, "allreduce", "recursive_doubling")
        names = ["sparse_recursive_doubling"]
    elif P > 1:
        for op, n in c.collectives(P):
            alg = algorithm if algorithm in algorithms(op) else "auto"
            name, t, _ = collective_on_cluster(op, float(n), P, cl, ranks_per_node, alg)
            comm, names = comm + t, names + [name]
    enc, dec = codec_seconds(c, P, cl.device)
    return {"comm_s": comm, "encode_s": float(enc), "decode_s": float(dec), "time_s": comm + float(enc) + float(dec),
            "algorithm": "+".join(names) if names else "none", "message_bytes": float(c.message_bytes),
            "sent_bytes": float(c.sent_bytes(P))}

