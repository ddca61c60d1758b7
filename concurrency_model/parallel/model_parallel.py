"""Model parallelism of one layer over ``P`` devices: compute per device and the communication it needs.

Each function returns a :class:`Split`: FLOP per pass (``forward``, ``grad_input``, ``grad_weight``) of
the busiest device and summed over the devices, compute seconds per device (with a device and numeric
shapes the device-time model of :mod:`concurrency_model.timing` on the device's shape, else ``flop /
(peak * efficiency.compute)``, the symbol ``F`` without device) and the collectives (bytes, seconds: with
``cluster`` :func:`~concurrency_model.comm.on_cluster.collective_on_cluster`; else alpha-beta, the cheapest
algorithm for numbers, for symbols ring allreduce / allgather / reduce_scatter, tree reduce, pairwise
all-to-all). Symbolic where the inputs are symbols; communication and compute are added (no overlap).

Sources. The paper (Ben-Nun & Hoefler 2019, §6.2) describes model parallelism in words: neurons or
channels are partitioned, FC layers then need all-to-all communication [S1], convolutions neighbour
(halo) exchange [S2, M]. It gives no per-scheme formula: the byte counts are derivations ([D],
reference/paper-models.md §4.2), except expert parallelism (Switch Transformer §2.2 Eq. 3, §5.4;
DeepSpeed ``sharded_moe.py``; training-formulas §5.3 [P]) and heads (Shoeybi et al. 2019 §3).

Parameters shared by the split functions
----------------------------------------
P : devices, an integer >= 1 or a positive integer symbol; must divide what is split
device : a preset name or :class:`~concurrency_model.hardware.devices.Device`; None: seconds in the symbol ``F``
dtype : value type of the layer and its messages
cluster, ranks_per_node : a cluster (preset name or object) for the collectives, numbers only
alpha, beta : latency (s), inverse bandwidth (s/byte) without ``cluster`` (default: the symbols)
needs_grad_input : False for the first layer (no ∇x, so no backward activation traffic)
"""
from __future__ import annotations

from collections import namedtuple
from dataclasses import dataclass, field

import sympy as sp

from ..comm.checks import check_ranks
from ..comm.collectives import collective_time
from ..comm.on_cluster import collective_on_cluster
from ..comm.select import auto
from ..cost import to_python
from ..ops import checks as op_checks
from ..ops.attention import multi_head_attention
from ..ops.conv import conv2d, out_size
from ..ops.dense import linear
from ..symbols import alpha as ALPHA, beta as BETA, peak_flops as F_SYM
from ..timing import attention_time, conv_coeffs, device as as_device, gemm_coeffs
from ..units import dtype_bytes

PASSES = ("forward", "grad_input", "grad_weight")
ALGORITHM = {"allreduce": "ring", "allgather": "ring", "reduce_scatter": "ring", "reduce": "tree",
             "alltoall": "pairwise", "p2p": "direct"}
REDUCTIONS = ("allreduce", "reduce", "reduce_scatter", None)
SRC_MP = "paper §6.2 (neurons/channels partitioned; FC needs all-to-all) [S1]; byte counts [D] (paper-models §4.2)"

Comm = namedtuple("Comm", "phase op what bytes seconds algorithm")  # bytes: the n of comm.collectives


def _sum(xs):
    return to_python(sum((sp.sympify(x) for x in xs), sp.Integer(0)))


@dataclass(frozen=True)
class Split:
    """A layer split over ``P`` devices (module doc); ``time_s = compute_s + comm_s``."""

    scheme: str
    P: object
    flop: dict
    flop_sum: dict
    layer_flop: dict
    compute_s: object
    comm: tuple
    info: dict = field(default_factory=dict)
    source: str = SRC_MP
    comm_bytes = property(lambda self: _sum(c.bytes for c in self.comm))
    comm_s = property(lambda self: _sum(c.seconds for c in self.comm))
    time_s = property(lambda self: _sum((self.compute_s, self.comm_s)))

    def as_dict(self) -> dict:
        return {"scheme": self.scheme, "P": to_python(self.P), "compute_s": to_python(self.compute_s),
                "comm_s": self.comm_s, "comm_bytes": self.comm_bytes, "time_s": self.time_s,
                "flop": {k: to_python(v) for k, v in self.flop.items()}, **self.info}


def _divides(P: sp.Expr, total, name: str) -> None:
    if P.is_number and int(total) % int(P):
        raise ValueError(f"P: {P} does not divide {name} = {total}")


def _numeric(*xs) -> bool:
    return all(sp.sympify(x).is_number for x in xs)


def _geometry(kh, kw, *vals) -> tuple:  # kw; one stride, pad, dilation for both dimensions (as timing)
    for name, v in zip(("stride", "pad", "dilation"), vals):
        if isinstance(v, (tuple, list)) and (len(v) != 2 or v[0] != v[1]):
            raise ValueError(f"{name}: one value for both dimensions expected, got {v!r}")
    return (kh if kw is None else kw, *(int(v[0] if isinstance(v, (tuple, list)) else v) for v in vals))


def network(cluster=None, alpha=None, beta=None, ranks_per_node=None) -> tuple:
    """The network arguments for :func:`comm_time` (alpha and beta default to the symbols)."""
    return (cluster, ALPHA if alpha is None else alpha, BETA if beta is None else beta, ranks_per_node)


def comm_time(op: str, nbytes, P, net) -> tuple:
    """``(seconds, algorithm)`` of one collective on ``net`` (:func:`network`; module doc).

    >>> comm_time("allgather", 800, 4, network(alpha=1e-6, beta=1e-9))
    (2.60000000000000e-6, 'recursive_doubling')
    """
    cluster, a, b, rpn = net
    P, nbytes = sp.sympify(P), sp.sympify(nbytes)
    if P.is_number and P == 1 or nbytes == 0:
        return sp.Integer(0), "none"
    if cluster is not None:
        if not _numeric(P, nbytes):
            raise ValueError("cluster: needs numeric bytes and P; pass alpha and beta for symbolic costs")
        return collective_on_cluster(op, float(nbytes), int(P), cluster, rpn)[1::-1]
    if _numeric(P, nbytes, a, b):
        return auto(op, nbytes, P, a, b)[::-1]
    return collective_time(op, ALGORITHM[op], nbytes, P, a, b), ALGORITHM[op]


def row_comms(rows, P, net) -> tuple:
    timed = [(r, *comm_time(r[1], r[3], P, net)) for r in rows]
    return tuple(Comm(ph, op, w, to_python(n), to_python(t), a) for (ph, op, w, n), t, a in timed if a != "none")


def rows_compute_s(flop: dict, timer, dev, dtype: str, numeric: bool):
    total = sum(flop.values(), sp.Integer(0))
    if dev is None:
        return total / F_SYM
    dev = as_device(dev)
    if numeric and not dev.decide:
        return timer(dev)
    return total / (dev.peak(dtype) * dev.efficiency.compute)


def _conv_timer(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, passes, dtype, share=1.0):
    def timer(dev):
        return share * sum(float(conv_coeffs(int(n), int(c_in), int(c_out), h, w, kh, kw, stride, pad, dilation, 1,
                                             p, dev, dtype).seconds(dev)[0]) for p in passes)
    return timer


def rows_timer(n, c_in, c_out, h, ho, r, w, kh, kw, stride, pad, dilation, passes, dtype):
    """The timer of ``r`` of a convolution's ``ho`` output rows: the layer on an input height that gives ``r``
    rows, or (too few rows for that) the whole layer's time scaled by ``r / ho``."""
    h_in = (r - 1) * stride + dilation * (kh - 1) + 1 - 2 * pad  # an input height giving r output rows
    if h_in >= 1:
        return _conv_timer(n, c_in, c_out, h_in, w, kh, kw, stride, pad, dilation, passes, dtype)
    return _conv_timer(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, passes, dtype, r / ho)


def _gemm_timer(shapes, dtype, batch=1):
    def timer(dev):
        return sum(float(gemm_coeffs(int(m), int(n), int(k), dev, dtype, int(batch)).seconds(dev)[0])
                   for m, n, k in shapes)
    return timer


def op_flops(op, needs_grad_input: bool) -> dict:
    return {p: (getattr(op, p).flop if p != "grad_input" or needs_grad_input else sp.Integer(0)) for p in PASSES}


# -- convolutions and fully connected layers ------------------------------------------------------------

def _by_channels(make, P, split, c_in, c_out, y_bytes, x_bytes, gather_output, grad_input, reduction, needs_gi):
    """FLOP, channels per device and collectives of a split by channels (``make(bias)``: the layer's cost)."""
    if split not in ("output", "input"):
        raise ValueError(f"split: unknown {split!r}; allowed: output, input")
    for name, op in (("grad_input", grad_input), ("reduction", reduction)):
        if op not in REDUCTIONS:
            raise ValueError(f"{name}: unknown {op!r}; allowed: allreduce, reduce, reduce_scatter, None")
    _divides(P, c_out if split == "output" else c_in, "c_out" if split == "output" else "c_in")
    layer = op_flops(make(True), needs_gi)
    if split == "output":  # the work is linear in c_out, bias and ∇b included
        rows = [("forward", "allgather", "outputs", y_bytes if gather_output else 0)]
        if needs_gi and grad_input:
            rows.append(("backward", grad_input, "partial ∇x", x_bytes))
        return layer, {p: f / P for p, f in layer.items()}, dict(layer), (c_in, c_out / P), rows
    nob = op_flops(make(False), needs_gi)  # linear in c_in without the bias, which one device adds
    flop = {p: nob[p] / P + (layer[p] - nob[p]) for p in PASSES}
    rows = [("forward", reduction or "allreduce", "partial outputs", y_bytes)]
    return layer, flop, {p: nob[p] + (layer[p] - nob[p]) for p in PASSES}, (c_in / P, c_out), rows


def channel_split(n, c_in, c_out, h, w, kh, P, kw=None, stride=1, pad=0, dilation=1, split="output",
                  gather_output=True, grad_input="allreduce", reduction="allreduce", needs_grad_input=True,
                  device=None, dtype="fp32", cluster=None, alpha=None, beta=None, ranks_per_node=None) -> Split:
    """A convolution (``groups = 1``) on ``n x c_in x h x w`` split by filters or by input channels.

    Parameters
    ----------
    n, c_in, c_out, h, w, kh, kw, stride, pad, dilation : the layer, as :func:`~concurrency_model.ops.conv.conv2d`
    split : ``"output"``: each device computes ``c_out/P`` filters from the whole input; forward allgather
        of the ``n c_out H' W'`` outputs (if ``gather_output``), backward ``grad_input`` (``allreduce``;
        ``reduce_scatter`` when the layer below is split alike; None) of the partial ∇x, ``n c_in H W``
        values; ∇w local [D]. ``"input"``: each device convolves its ``c_in/P`` channels with all filters;
        forward ``reduction`` of the ``n c_out H' W'`` partial outputs, nothing backward (∇y replicated,
        ∇x and ∇w local); one device adds the bias [D].

    Examples
    --------
    >>> s = channel_split(32, 64, 128, 28, 28, 3, P=4, pad=1, alpha=0, beta=1)
    >>> s.comm[0].bytes == 32 * 128 * 28 * 28 * 4, s.comm[1].bytes == 32 * 64 * 28 * 28 * 4
    (True, True)
    """
    P = check_ranks(P, "P")
    kw, stride, pad, dilation = _geometry(kh, kw, stride, pad, dilation)
    vb = dtype_bytes(dtype)
    ho, wo = out_size(h, kh, stride, pad, dilation), out_size(w, kw, stride, pad, dilation, "w")
    layer, flop, flop_sum, sub, rows = _by_channels(
        lambda bias: conv2d(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, bias=bias, value_bytes=vb),
        P, split, c_in, c_out, n * c_out * ho * wo * vb, n * c_in * h * w * vb, gather_output, grad_input,
        reduction, needs_grad_input)
    numeric, passes = _numeric(n, P), PASSES if needs_grad_input else PASSES[::2]
    timer = _conv_timer(n, *sub, h, w, kh, kw, stride, pad, dilation, passes, dtype)
    return Split(f"channel_{split}", P, flop, flop_sum, layer, rows_compute_s(flop, timer, device, dtype, numeric),
                 row_comms(rows, P, network(cluster, alpha, beta, ranks_per_node)), {"channels_per_device": sub})


def fc_split(rows, c_in, c_out, P, split="output", gather_output=True, grad_input="allreduce",
             reduction="allreduce", needs_grad_input=True, device=None, dtype="fp32", cluster=None, alpha=None,
             beta=None, ranks_per_node=None) -> Split:
    """A fully connected layer on ``rows`` samples or tokens split by output neurons or input features:
    the paper's model parallelism of FC layers, which needs "all-to-all" communication (§6.2 [S1]: every
    device's neurons feed every neuron of the next layer, an allgather of the activations).

    Parameters
    ----------
    rows, c_in, c_out : the layer, as :func:`~concurrency_model.ops.dense.linear`
    split, gather_output, grad_input, reduction : as :func:`channel_split` [D]; ``"output"``: forward
        allgather of ``rows c_out`` values, backward reduction of ``rows c_in``; ``"input"``: forward
        reduction of ``rows c_out`` values.

    Examples
    --------
    >>> s = fc_split(1024, 9216, 4096, 8, alpha=0, beta=1e-9)
    >>> s.comm[0].bytes, round(float(s.comm[0].seconds), 12)  # allgather of 1024 x 4096 fp32: 7/8 received
    (16777216, 0.014680064)
    """
    P = check_ranks(P, "P")
    vb = dtype_bytes(dtype)
    layer, flop, flop_sum, (ci, co), comm = _by_channels(
        lambda bias: linear(rows, c_in, c_out, bias=bias, value_bytes=vb), P, split, c_in, c_out,
        rows * c_out * vb, rows * c_in * vb, gather_output, grad_input, reduction, needs_grad_input)
    shapes = [(rows, co, ci), (rows, ci, co), (ci, co, rows)]
    timer = _gemm_timer(shapes if needs_grad_input else shapes[::2], dtype)
    return Split(f"fc_{split}", P, flop, flop_sum, layer, rows_compute_s(flop, timer, device, dtype, _numeric(rows, P)),
                 row_comms(comm, P, network(cluster, alpha, beta, ranks_per_node)), {"features_per_device": (ci, co)})


def halo_rows(kh: int, stride: int = 1, pad: int = 0, dilation: int = 1) -> tuple:
    """Input rows a slab of output rows needs from its upper and lower neighbour [D].

    Output rows ``[a, b)`` read input rows ``a s - p .. (b-1) s - p + d (K-1)``; the slab owns ``[a s, b s)``,
    so it needs ``d (K-1) + 1 - s`` rows more: ``p`` above (at most that many), the rest below. For a
    "same" convolution (stride 1, ``p = (K-1)/2``): ``(K-1)/2`` rows on each side.

    >>> halo_rows(3, pad=1), halo_rows(5, pad=2), halo_rows(11, 4, 2), halo_rows(1)
    ((1, 1), (2, 2), (2, 5), (0, 0))
    """
    total = max(0, dilation * (kh - 1) + 1 - stride)
    top = max(0, min(pad, total))
    return top, total - top


def spatial_split(n, c_in, c_out, h, w, kh, P, kw=None, stride=1, pad=0, dilation=1, needs_grad_input=True,
                  device=None, dtype="fp32", cluster=None, alpha=None, beta=None, ranks_per_node=None) -> Split:
    """A convolution split spatially (domain decomposition): each device computes ``ceil(H'/P)`` (or
    fewer) output rows over the whole width; channels and weights are replicated.

    Parameters
    ----------
    n, c_in, c_out, h, w, kh, kw, stride, pad, dilation : the layer, as :func:`~concurrency_model.ops.conv.conv2d`

    Notes
    -----
    Communication [D] (the paper's neighbour-exchange remark, §6.2 / §5 [S2, M]): forward, a slab receives
    :func:`halo_rows` rows of ``n c_in W`` values from each neighbour (an interior device: from the upper,
    then the lower one, symbolic ``P`` >= 3 assumed; ``P = 2``: one exchange, the larger halo); backward,
    the same rows of partial ∇x go back, and the replicated weights' gradients are allreduced.

    Examples
    --------
    >>> s = spatial_split(32, 64, 64, 56, 56, 3, P=4, pad=1, alpha=0, beta=1)
    >>> [c.bytes for c in s.comm[:2]], 32 * 64 * 1 * 56 * 4
    ([458752, 458752], 458752)
    """
    P = check_ranks(P, "P")
    kw, stride, pad, dilation = _geometry(kh, kw, stride, pad, dilation)
    vb = dtype_bytes(dtype)
    full = conv2d(n, c_in, c_out, h, w, kh, kw, stride, pad, dilation, value_bytes=vb)
    ho = out_size(h, kh, stride, pad, dilation)
    if P.is_number and P > ho:
        raise ValueError(f"P: {P} devices exceed the {ho} output rows of the spatial split")
    slab = sp.ceiling(sp.Integer(ho) / P)
    layer = op_flops(full, needs_grad_input)
    flop = {p: f * slab / ho for p, f in layer.items()}  # the work is proportional to the output rows
    top, bottom = halo_rows(kh, stride, pad, dilation)
    row = n * c_in * w * vb
    sides = [("the neighbour", max(top, bottom))] if P.is_number and P == 2 else \
        [("upper neighbour", top), ("lower neighbour", bottom)]
    rows = [("forward", "p2p", f"halo from {who}", row * k) for who, k in sides]
    if needs_grad_input:
        rows += [("backward", "p2p", f"∇x halo to {who}", row * k) for who, k in sides]
    rows.append(("backward", "allreduce", "∇w of the replicated weights", full.params * vb))
    numeric, passes = _numeric(n, P), PASSES if needs_grad_input else PASSES[::2]
    r = int(slab) if numeric else 0
    timer = rows_timer(n, c_in, c_out, h, ho, r, w, kh, kw, stride, pad, dilation, passes, dtype)
    return Split("spatial", P, flop, dict(layer), layer, rows_compute_s(flop, timer, device, dtype, numeric),
                 row_comms(rows, P, network(cluster, alpha, beta, ranks_per_node)),
                 {"rows_per_device": to_python(slab), "halo_rows": (top, bottom)})


# -- mixture of experts and attention heads ---------------------------------------------------------------

def expert_parallel(tokens, hidden, ffn_hidden, experts, P, top_k=1, capacity_factor=1.0, routed=None,
                    device=None, dtype="bf16", cluster=None, alpha=None, beta=None, ranks_per_node=None) -> Split:
    """A mixture-of-experts FFN (``experts`` experts ``hidden -> ffn_hidden -> hidden``), ``experts/P``
    experts per device, each device routing its ``tokens`` tokens to ``top_k`` experts.

    Parameters
    ----------
    tokens, hidden, ffn_hidden, experts, top_k : tokens per device, the layer, experts per token
    capacity_factor : > 0: capacity ``C = ceil(top_k capacity_factor tokens / experts)`` per expert and
        device (Switch Transformer §2.2 Eq. 3; ``ceil``, ``k``: DeepSpeed, training-formulas §5.3 [P]); an
        expert takes ``P C`` tokens, the rest skip the layer (GShard §2.2): ``info["dropped"]``
    routed : (token, expert) assignments per expert, all devices; default uniform, ``top_k P tokens / experts``

    Notes
    -----
    Each device dispatches an ``[experts, C, hidden]`` buffer (Switch §5.4): an all-to-all of ``experts C
    hidden`` values (about ``tokens hidden top_k capacity_factor``), dispatch and combine forward, the same
    backward (4 per step [D]). Each expert computes its padded ``P C`` rows: ``4 hidden ffn_hidden`` FLOP
    per row forward (two GEMMs), ∇x and ∇w as much each.

    Examples
    --------
    >>> s = expert_parallel(1024, 512, 2048, 8, P=4, top_k=2, capacity_factor=1.25, alpha=0, beta=1)
    >>> s.comm[0].bytes, 1024 * 512 * 2 * 1.25 * 2, s.info["capacity"]
    (2621440, 2621440.0, 1280)
    """
    P, tokens = check_ranks(P, "P"), op_checks.size("tokens", tokens)
    experts, top_k = int(check_ranks(experts, "experts")), int(check_ranks(top_k, "top_k"))
    if top_k > experts:
        raise ValueError(f"top_k: {top_k} exceeds experts = {experts}")
    cf = sp.sympify(capacity_factor)
    if not cf.is_number or cf <= 0:
        raise ValueError(f"capacity_factor: must be a number > 0, got {capacity_factor!r}")
    _divides(P, experts, "experts")
    vb, local = dtype_bytes(dtype), experts / P
    cap = sp.ceiling(sp.nsimplify(top_k * cf) * tokens / experts)
    r, d, f = P * cap, hidden, ffn_hidden  # padded rows per expert
    flop = {p: local * r * 4 * d * f for p in PASSES}
    if routed is None:
        routed = [top_k * P * tokens / sp.Integer(experts)] * experts
    elif len(routed) != experts:
        raise ValueError(f"routed: {len(routed)} counts given for {experts} experts")
    dropped = sum((sp.Max(0, x - r) for x in routed), sp.Integer(0))
    info = {"capacity": to_python(r), "local_experts": to_python(local), "dropped": to_python(dropped),
            "drop_fraction": to_python(dropped / sum(routed))}
    n = experts * cap * d * vb
    comm = [(ph, "alltoall", w, n) for ph, w in (("forward", "dispatch"), ("forward", "combine"),
                                                 ("backward", "∇ combine"), ("backward", "∇ dispatch"))]
    timer = _gemm_timer([(r, f, d), (r, d, f), (r, d, f), (r, f, d), (d, f, r), (f, d, r)], dtype, local)
    total = {p: v * P for p, v in flop.items()}
    return Split("expert", P, flop, total, total, rows_compute_s(flop, timer, device, dtype, _numeric(tokens, P)),
                 row_comms(comm, P, network(cluster, alpha, beta, ranks_per_node)), info,
                 "Switch Transformer §2.2 Eq. 3, §5.4; DeepSpeed sharded_moe.py (training-formulas §5.3); [D]")


def head_split(batch, seq, hidden, heads, P, device=None, dtype="bf16", cluster=None, alpha=None, beta=None,
               ranks_per_node=None) -> Split:
    """Self-attention split by heads (Megatron, Shoeybi et al. 2019 §3; training-formulas §5.1 [P]):
    column-parallel QKV, ``heads/P`` heads per device, row-parallel output projection; an allreduce of
    the ``batch seq hidden`` output values forward (``g``) and of the input gradient backward (``f``).

    Parameters: ``batch, seq, hidden, heads`` as :func:`~concurrency_model.ops.attention.multi_head_attention`.

    Examples
    --------
    >>> s = head_split(4, 128, 1024, 16, P=8, alpha=0, beta=1)
    >>> [c.op for c in s.comm], s.comm[0].bytes == 4 * 128 * 1024 * 2
    (['allreduce', 'allreduce'], True)
    """
    P = check_ranks(P, "P")
    _divides(P, heads, "heads")
    vb = dtype_bytes(dtype)
    layer = op_flops(multi_head_attention(batch, seq, hidden, heads, value_bytes=vb), True)
    flop = {p: f / P for p, f in layer.items()}
    n, t, hp = batch * seq * hidden * vb, batch * seq, hidden / P
    comm = [("forward", "allreduce", "attention output (g)", n), ("backward", "allreduce", "∇ input (f)", n)]

    def timer(dev):  # the projections (3 passes each) and the core of heads/P heads
        gemms = _gemm_timer([(t, 3 * hp, hidden), (t, hidden, 3 * hp), (hidden, 3 * hp, t), (t, hidden, hp),
                             (t, hp, hidden), (hp, hidden, t)], dtype)(dev)
        return gemms + sum(float(attention_time(int(batch), int(heads / P), seq, hidden // heads, dev, dtype,
                                                pass_=p).time_s) for p in ("forward", "backward"))
    return Split("heads", P, flop, dict(layer), layer, rows_compute_s(flop, timer, device, dtype, _numeric(batch, P)),
                 row_comms(comm, P, network(cluster, alpha, beta, ranks_per_node)), {"heads_per_device": heads / P},
                 "Shoeybi et al. 2019 §3 (training-formulas §5.1)")
