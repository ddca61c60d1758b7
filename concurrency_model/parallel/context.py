"""Context parallelism: every sequence split over ``c`` devices (ring attention, Ulysses).

Context parallelism (degree ``c``, :meth:`Workload.check_context`): every sequence of ``s`` tokens is split
over ``c`` devices, so each device builds the model for ``s / c`` tokens (GEMMs, element-wise work,
tensor-parallel collectives and the pipeline boundary all shrink by ``c``; the parameters stay the
model's) and only the attention core changes:

* ``ring`` (Liu et al. 2023, "Ring Attention with Blockwise Transformers", §3 and Algorithm 1): the local
  queries meet ``c`` key/value blocks of ``s / c`` tokens, one per step, while the next block travels
  around the ring: ``c`` blocks of attention at ``s / c`` per layer and pass. With a causal mask the
  load-balanced ("zigzag") split used by Megatron-LM / Transformer Engine and ring-flash-attention
  gives each device two chunks of ``s / (2c)`` tokens, ``i`` and ``2c - 1 - i``; its step on its own
  block is exactly the causal block at ``s / c`` (``(s/c)^2 / 2 + s / (2c)`` score entries per head), every
  other step half a full block (``(s/c)^2 / 2``) [D, hand-checked: the total over the ``c`` devices is
  ``s (s + 1) / 2``]. The diagonal step is charged as the causal kernel at ``s / c``; each of the ``c - 1``
  others as a kernel without mask, which is what Transformer Engine runs there (NVIDIA/TransformerEngine v1.4
  = 0fbc76af ``transformer_engine/pytorch/attention.py`` ``AttnFuncWithCP.forward``: ``attn_mask_type=
  "no_mask"`` on all ``s / c`` queries against the first half of an earlier rank's K/V, or on the second half of
  the queries against a later rank's whole K/V; the backward mirrors it), timed as the square kernel of as many
  pairs, side ``s / (c sqrt 2)`` (:meth:`ContextMixin._ring_off_diagonal`): exactly ``s^2 / (2c) + s / (2c)``
  pairs per device. Transformer Engine's is the ring NeMo and Megatron-Core run: up to v1.9 it is the only
  one; ``cp_comm_type`` came later with ``"all_gather"`` (#1060, 2024-08, not modelled), ``"a2a"`` (#1160,
  2024-09: Ulysses below) and ``"a2a+p2p"`` (#1209, 2024-10, not modelled), its default staying ``"p2p"``.
  The communication and its overlap: :func:`context_exposed`;
* ``allgather``: PyTorch's ``context_parallel`` with its default rotate method, which torchtitan runs
  (pytorch/torchtitan @ 9dec370 ``torchtitan/config_manager.py``: ``--experimental.context_parallel_rotate_method``
  default ``"allgather"``, "all-gather all kv shards on ranks after the first sub-SDPA computation"; pytorch/pytorch
  ``torch/distributed/tensor/experimental/_attention.py`` read as stored at 0123248a: ``_AllGatherRotater``,
  ``_ContextParallelOptions.rotate_method = ALL_GATHER``). The same load-balanced blocks as the ring (its
  ``_is_causal_behavior`` and round-robin chunks: the causal block on the diagonal, ``c - 1`` blocks without mask of
  half the pairs), but the key/value blocks arrive in one all-gather over the ``c`` ranks, issued before the first
  (diagonal) block and waited for before the second: it hides behind one block, not ``c - 1``. The backward gathers
  K and V again the same way and sends the fp32 dK, dV (``convert_to_f32``) to the next rank after every block,
  point to point (``dkv_rotater`` with ``_RotateMethod.ALL_TO_ALL``: ``permute_tensor``, an all-to-all with one
  non-empty split), each hop waited for after the next block and the last after the loop (exposed whole).
  torchtitan repeats K and V to the query heads before the attention (``repeat_kv`` in
  ``torchtitan/models/llama/model.py`` @ 9dec370), so under its kernel policy (torchao's) the blocks gathered and sent
  are of every query head, as are the ring's. The merge and copy kernels are PyTorch's (:func:`pytorch_ring_bytes`).
  Memory: the ring's key/value buffers (the ``c`` gathered blocks are not counted apart);
* ``ulysses`` (Jacobs et al. 2023, "DeepSpeed Ulysses", §3.1): an all-to-all of Q, K and V turns ``s / c``
  tokens of all (``a / t``) heads into all ``s`` tokens of ``a / (t c)`` heads, attention runs on the
  whole sequence for those heads, and an all-to-all of the output turns it back: 4 all-to-alls forward
  and 4 backward (dO in, dQ, dK, dV out) over the ``c`` devices, each of ``b (s / c) (heads / t) d_head``
  values per device, not overlapped (the attention waits for them).

The context group sits next to the tensor group (Megatron-LM's rank order tensor, context, data,
pipeline): inside a node when ``tensor x context`` fits in one, else across nodes; data-parallel
gradients are reduced over ``data x context`` ranks (the context ranks hold the same weights).

PyTorch's ring (``context_parallel``, which torchtitan runs: the runtime whose float8 casts are torchao's) merges and
accumulates in fp32 with separate kernels (pytorch/pytorch ``torch/distributed/tensor/experimental/_attention.py``,
read as stored at 0123248a; the benchmark's torch, 1963fc8, not read): ``_ContextParallelOptions.convert_to_f32``
True; each step after the first casts the block's output to fp32 and merges it into the running output with
``out - sigmoid(lse_block - lse) (out - out_block)`` (``_SDPAMerger``, element-wise kernels over the fp32 output, and a
``torch.cat`` copy of it where only half the queries took part); the K and V to send are copied into one buffer
(``torch.cat``) at every step but the last; the backward zero-fills fp32 gradients of Q, K and V, adds each step's
gradients into them, copies the K and V gradients into one fp32 buffer for the next rank at every step, and casts all
three back at the end. Those passes are charged here (:func:`pytorch_ring_bytes`), on Q, K and V of every head:
torchtitan repeats K and V to the query heads before the attention (``repeat_kv`` in
``torchtitan/models/llama/model.py`` @ 9dec370).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ..choices import CONTEXT_ALGORITHMS
from ..checks import did_you_mean
from ..hardware.clusters import place
from ..ops.attention import attention
from ..timing import roofline_coeffs
from ..timing.graph import node_parts
from ..timing.layers import attention_kernels
from ..timing.parts import Parts, total
from ..units import dtype_bytes, value_dtype
from .triples import ZERO_TRIPLE, add_triples

NO_PARTS = Parts.empty()
RINGS = ("ring", "allgather")  # the load-balanced blocks of a ring (module doc), their K/V passed round or gathered
FP32_BYTES = 4  # PyTorch's context parallelism accumulates dK, dV in fp32 (``convert_to_f32``)


def _pos(x):
    """``max(0, x)`` of numbers, numpy arrays or sympy expressions (:mod:`.sensitivity` passes symbolic
    seconds)."""
    return sp.Max(0, x) if isinstance(x, sp.Basic) else np.maximum(0.0, x)


def context_exposed(c, layers, rec_layers, blk_f, blk_b, kv, a2a, gathered=0.0):
    """Exposed context-parallel seconds ``(forward, backward)`` of one microbatch on one pipeline stage.

    ``c``: context degree; ``layers``: attention layers of the stage; ``rec_layers``: those whose forward
    is run again in the backward pass (recompute ``full`` or ``selective``: the attention core with its
    communication); ``blk_f`` / ``blk_b``: seconds of one ring step's attention block, forward / backward;
    ``kv``: seconds of sending one block's K and V to the next device; ``a2a``: seconds of one layer's four
    Ulysses all-to-alls (0 for the ring; ``kv`` is 0 for Ulysses). Arguments may be numpy arrays (the
    sweep) or sympy expressions (:mod:`.sensitivity`).

    Ring (Liu et al. 2023 §3: each step's send/receive of the next key/value block overlaps the current
    block's attention), per layer:

    * forward, ``c - 1`` sends each behind one block: ``(c - 1) max(0, kv - blk_f)``;
    * backward, as ring-flash-attention (``ring_flash_attn_backward``) runs it: dK and dV accumulate while
      travelling with their K and V and must come back to the owner, so ``c - 1`` K/V sends and ``c``
      dK/dV sends; block 0 hides a K/V send, blocks 1 to c-2 a K/V plus a dK/dV send, block c-1 a dK/dV
      send, and the last dK/dV hop follows the last block and is exposed:
      ``2 max(0, kv - blk_b) + (c - 2) max(0, 2 kv - blk_b) + kv`` [D from that schedule].

    Ulysses (Jacobs et al. 2023 §3.1): the all-to-alls are on the critical path, ``a2a`` forward and
    ``a2a`` backward per layer.

    All-gather (``gathered`` 1: PyTorch's ``_AllGatherRotater``, module doc), with ``kv`` the seconds of the all-gather
    of the ``c`` key/value blocks and ``a2a`` those of one fp32 dK/dV hop to the next device, per layer:

    * forward, the gather behind the diagonal block: ``max(0, kv - blk_f)``;
    * backward, the gather again behind the first block, hops 1 to ``c - 1`` each behind the next block, the last
      after the loop: ``max(0, kv - blk_b) + (c - 1) max(0, a2a - blk_b) + a2a`` [D from that loop].

    ``gathered`` may be an array of 0 and 1 (a sweep's layouts).

    >>> [float(x) for x in context_exposed(4, 2, 0, 3.0, 6.0, 1.0, 0.0)]  # ring, compute-bound: the last hop
    [0.0, 2.0]
    >>> [float(x) for x in context_exposed(2, 1, 1, 1.0, 2.0, 3.0, 0.0)]  # ring, comm-bound, with recompute
    [2.0, 7.0]
    >>> [float(x) for x in context_exposed(4, 1, 1, 1.0, 2.0, 3.0, 0.5, gathered=1)]  # all-gather: 2 + (1 + 0.5) + 2
    [2.0, 3.5]
    """
    ring_f = (c - 1) * _pos(kv - blk_f) + a2a
    ring_b = 2 * _pos(kv - blk_b) + (c - 2) * _pos(2 * kv - blk_b) + kv + a2a
    gather_f = _pos(kv - blk_f)
    gather_b = _pos(kv - blk_b) + (c - 1) * _pos(a2a - blk_b) + a2a
    fwd = gathered * gather_f + (1 - gathered) * ring_f
    bwd = gathered * gather_b + (1 - gathered) * ring_b
    return layers * fwd, layers * bwd + rec_layers * fwd


def pytorch_ring_bytes(c: int, values: float) -> tuple:
    """Bytes moved by the merge, copy and accumulation kernels of PyTorch's ring attention (module doc) in one layer,
    ``(forward, backward)``, for ``c`` context ranks and ``values`` = batch x local tokens x heads x head dim (one of
    Q, O, K or V, K and V repeated to the query heads), 16-bit activations.

    Forward: at each of the ``c - 1`` steps after the first, the K and V send buffer (read and write 2 bytes a value
    of K and V: 8) and the merge: the block's output to fp32 (read 2, write 4), ``out - out_block`` (read 8, write 4),
    the product with the sigmoid (read 4, write 4), ``out -`` it (read 8, write 4) and, on half the steps, the
    ``torch.cat`` of the fp32 output (read 4, write 4: 4 on average), 42; the first block's output to fp32 and the
    result back to 16 bits (6 + 6). Backward: the fp32 zeros of dQ, dK, dV (12), the K and V send buffer at
    ``c - 1`` steps (8), at each of the ``c`` steps the three gradient additions (read 4 + 2, write 4: 30) and the
    fp32 dK, dV send buffer (read 4, write 4 a value of each: 16), and the three casts back (18).

    >>> pytorch_ring_bytes(1, 1.0), pytorch_ring_bytes(8, 1.0)
    ((12.0, 76.0), (362.0, 454.0))
    """
    forward = (c - 1) * (8.0 + 42.0) + 12.0
    backward = 12.0 + (c - 1) * 8.0 + c * (30.0 + 16.0) + 18.0
    return forward * values, backward * values


class ContextMixin:
    """The context-parallel parts of :class:`~.features.Workload` (which provides ``graph``, ``cluster``,
    ``dev``, ``dtype``, ``vb`` and ``_coll``)."""

    def check_context(self, c: int, t: int = 1, algorithm: str = "ring") -> None:
        """``ValueError`` naming ``parallel.context`` (or ``parallel.context_algorithm``) unless ``c`` devices
        can share every sequence: a transformer whose attention layers are alike, its sequence length
        divisible by ``c`` (by ``2 c`` for ring attention with a causal mask: the load-balanced split into
        ``2 c`` chunks, Megatron-LM ``get_batch_on_this_cp_rank``), and for Ulysses its heads divisible by
        ``tensor x context`` (Jacobs et al. 2023 §3.1: each device attends whole heads)."""
        if algorithm not in CONTEXT_ALGORITHMS:
            hint = did_you_mean(algorithm, CONTEXT_ALGORITHMS)
            raise ValueError(f"parallel.context_algorithm: unknown {algorithm!r}{hint}; allowed: "
                             f"{', '.join(CONTEXT_ALGORITHMS)}")
        if c == 1:
            return
        att = [n for n in self.graph(1).layers() if n.kind == "attention"]
        if not att:  # a CNN: its feature maps split by rows (:mod:`.spatial`)
            self.check_spatial(c, t, algorithm)
            return
        keys = {repr(sorted((k, v) for k, v in n.attrs.items() if k != "name")) for n in att}
        if len(keys) > 1:
            raise ValueError(f"parallel.context: {c} > 1 is modelled for models whose attention layers are alike")
        a = att[0].attrs
        s = a["seq"]
        chunks = 2 * c if algorithm in RINGS and a.get("causal") else c
        if s % chunks:
            why = "" if chunks == c else f" ({algorithm} attention with a causal mask splits it into 2 x {c} chunks)"
            raise ValueError(f"parallel.context: {c} does not divide the model's sequence length {s}{why}")
        if algorithm == "ulysses" and a["heads"] % (t * c):
            raise ValueError(f"parallel.context: Ulysses needs the {a['heads']} attention heads divisible by "
                             f"tensor x context = {t * c}")
        self._context_options(c)

    def _context_attention(self, node, row, b: int, t: int, c: int, algorithm: str) -> tuple:
        """Forward and backward parts of one attention layer under context parallelism, and its ``blk_f``,
        ``blk_b``, ``kv``, ``a2a`` (see :meth:`layers` and the module doc)."""
        a = node.attrs
        f, bw = row["forward"], row["grad_input"] + row["grad_weight"]
        sq, d = a["seq"], a["head_dim"]  # s / c tokens on this device
        heads, kv_heads = max(1, a["heads"] // t), max(1, a.get("kv_heads", a["heads"]) // t)
        if algorithm in RINGS:
            # one block's K and V per send; causal: the diagonal step's causal block and c - 1 off-diagonal
            # non-causal steps (module doc), each of which hides a send; no mask: c blocks of (s/c) x (s/c)
            pytorch = str(getattr(self, "fp8_recipe", "")).startswith("torchao") or algorithm == "allgather"
            width = heads if str(getattr(self, "fp8_recipe", "")).startswith("torchao") else kv_heads  # repeat_kv
            nbytes = 2 * b * sq * width * d * self.vb
            if algorithm == "allgather":  # the c blocks in one all-gather; the fp32 dK, dV hop (module doc)
                rpn, sharing = self._context_group(t, c)
                steps = {"kv": self._coll("allgather", c * nbytes, c, rpn, sharing),
                         "a2a": self._ring_triple(2 * b * sq * width * d * FP32_BYTES, t, c)}
            else:
                steps = {"kv": self._ring_triple(nbytes, t, c), "a2a": ZERO_TRIPLE}
            if not a.get("causal"):
                fc, bc, blocks = f.times(c), bw.times(c), {"blk_f": f, "blk_b": bw}
            else:
                off = self._ring_off_diagonal(node, b, t, c, len(row["grad_input"].count) > 0)
                fc, bc = f + off["forward"].times(c - 1), bw + off["backward"].times(c - 1)
                blocks = {"blk_f": off["forward"], "blk_b": off["backward"]}
            if pytorch:  # torchtitan, or PyTorch's all-gather method: PyTorch's merge and copy kernels (module doc)
                fwd, bwd = pytorch_ring_bytes(c, b * sq * heads * d)
                fc = fc + Parts.from_coeffs(roofline_coeffs(0.0, fwd, self.dev, "bf16", kernels=7 * c), self.dev)
                bc = bc + Parts.from_coeffs(roofline_coeffs(0.0, bwd, self.dev, "bf16", kernels=6 * c), self.dev)
            return fc, bc, {**blocks, **steps}
        # Ulysses: attention on the whole sequence for heads / c; Q, K, V and O all-to-all over c devices
        parts = self._ulysses_parts(node, b, t, c, len(row["grad_input"].count) > 0)
        rpn, sharing = self._context_group(t, c)
        q = self._coll("alltoall", b * sq * heads * d * self.vb, c, rpn, sharing)
        kv = self._coll("alltoall", b * sq * kv_heads * d * self.vb, c, rpn, sharing)
        return parts["forward"], parts["grad_input"] + parts["grad_weight"], \
            {"blk_f": NO_PARTS, "blk_b": NO_PARTS, "kv": ZERO_TRIPLE,
             "a2a": add_triples(add_triples(q, q), add_triples(kv, kv))}

    def _ring_off_diagonal(self, node, b: int, t: int, c: int, needs_grad: bool) -> dict:
        """``forward`` and ``backward`` Parts of one off-diagonal step of the load-balanced causal ring (module doc):
        a kernel without mask of ``s / c`` queries against ``s / (2 c)`` keys, or of ``s / (2 c)`` against ``s / c``
        (Transformer Engine v1.4 ``AttnFuncWithCP``: ``attn_mask_type="no_mask"`` off the diagonal), timed as the
        square kernel without mask of as many query-key pairs, side ``s / (c sqrt 2)`` [D] (the published rates are
        of square kernels; a rectangle's lies between those of its two sides). At the training step's sustained rate
        (``efficiency.sustained``, as :meth:`layers` scales every kernel)."""
        a = node.attrs
        key = (repr(sorted(a.items())), b, t, c, needs_grad)
        memo = self.__dict__.setdefault("_ring_memo", {})
        if key not in memo:
            heads, d = max(1, a["heads"] // t), a["head_dim"]
            side = max(1, round(a["seq"] / 2 ** 0.5))
            vdt = value_dtype(self.dtype)
            op = attention(b, heads, side, d, fused=a["fused"], causal=False, value_bytes=dtype_bytes(vdt))
            out = {"forward": NO_PARTS, "backward": NO_PARTS}
            for p, cost in (("forward", op.forward), ("backward", op.backward)):
                if p == "forward" or needs_grad:
                    kernels = attention_kernels(cost, b, heads, side, d, self.dev, vdt, a["fused"], False, p)
                    out[p] = total(Parts.from_coeffs(k, self.dev, n) for k, n in kernels).with_math_rate(
                        self.dev.efficiency.sustained)
            memo[key] = out
        return memo[key]

    def _ulysses_parts(self, node, b: int, t: int, c: int, needs_grad: bool) -> dict:
        """Kernels of the attention core on the whole sequence for ``heads / c`` heads, per pass (timed once
        per kind of attention layer), at the training step's sustained rate (``efficiency.sustained``, as
        :meth:`layers` scales every kernel)."""
        a = node.attrs
        key = (repr(sorted(a.items())), b, t, c, needs_grad)
        memo = self.__dict__.setdefault("_ulysses_memo", {})
        if key not in memo:
            whole = _Node("attention", {**a, "heads": a["heads"] // c, "seq": a["seq"] * c})
            parts = node_parts(whole, self.dev, self.dtype, b, 1.0, needs_grad, t)[0]
            memo[key] = {p: x.with_math_rate(self.dev.efficiency.sustained) for p, x in parts.items()}
        return memo[key]

    def _context_group(self, t: int, c: int) -> tuple:
        """Ranks of one context group per node and the groups sharing a node's NICs: the group sits next to
        the tensor group (Megatron-LM's order), inside a node when ``t c`` fits."""
        gpn = self.cluster.domain_gpus  # GPUs on one NVLink fabric (cluster.py: the NVL72 rack, else the node)
        cap = max(1, gpn // min(t, gpn))
        rpn = max(k for k in range(1, min(c, cap) + 1) if c % k == 0)
        return rpn, max(1, min(t, gpn // rpn))

    def _ring_triple(self, nbytes: float, t: int, c: int) -> tuple:
        """Triple of one ring step's send to the next device (every device sends at once; Hockney
        ``alpha + n beta``): on the node's links when the group fits in a node, else the step waits for
        the hops that cross nodes, one per node and context group, ``t`` groups sharing the node's NICs."""
        cl = self.cluster
        if t * c <= cl.domain_gpus:
            alpha, beta = place(cl, 2, 2).intra
            return (alpha, nbytes * beta, 0.0)
        alpha, beta = place(cl, 2, 1, min(t, cl.domain_gpus)).inter
        return (alpha, 0.0, nbytes * beta)



class _Node:
    """The fields of a graph node that :func:`~concurrency_model.timing.graph.node_parts` reads for an
    attention core (Ulysses times it on the whole sequence for a share of the heads)."""

    def __init__(self, kind: str, attrs: dict):
        self.kind, self.attrs = kind, attrs
