"""A spatially split chain of convolutions with redundant computation: compute more, communicate less.

The paper (§6.2, paper-models §4.2 [S2]) names redundant computation as a way to cut model parallelism's
communication: each processor holds more than its share of the neurons, with overlap, and computes the
overlap twice. For a spatial (domain) split (:func:`.model_parallel.spatial_split`: each of ``P`` devices
owns ``ceil(H / P)`` output rows, and every convolution exchanges :func:`~.model_parallel.halo_rows` rows
with its neighbours), the overlap is a deeper halo [D]: the chain is cut into groups of ``depth``
consecutive convolutions; a device receives, once per group, the halo of the whole group (the sum of its
layers' halos, stride 1) and computes, at each layer of the group, its own rows plus the rows the later
layers of the group need from it. Forward: one exchange per group instead of one per layer, with as many
rows as the group's layers would have sent one by one, and more work. Backward, gradients are linear in
``∇y``: each device propagates the contributions of its own rows through the whole group, over the same
widened rows (partial ``∇x`` and partial ``∇w``), and sends the partial ``∇x`` of the group's input halo
once to the neighbours that own those rows, where they are added (as the per-layer split sends its partial
``∇x`` halo); the weights' gradients are all-reduced per layer as in the per-layer split. ``depth = 1`` is
the per-layer split exactly; larger groups trade latency (fewer messages) for redundant FLOP, which pays on
high-latency networks and small feature maps.

Scope: stride-1 convolutions (any kernel, padding, dilation), one group, numbers (not symbols); the
busiest device is the one with the most rows (an interior device for ``P >= 3``).
"""
from __future__ import annotations

import sympy as sp

from ..checks import count
from ..ops.conv import conv2d, out_size
from ..units import dtype_bytes
from .model_parallel import PASSES, Split, row_comms, rows_compute_s, op_flops, rows_timer, halo_rows, network

SRC_REDUNDANT = ("paper §6.2: redundant computation (each processor holds overlapping neurons, computing more "
                 "but communicating less) [S2]; the deep-halo byte and FLOP counts [D]")


def _chain(n, h, w, layers, dtype):
    """Per layer: its conv2d cost, output height, halo (top, bottom) and input height (checked)."""
    if not layers:
        raise ValueError("layers: give at least one convolution")
    out, c_prev, h_prev = [], None, h
    for i, spec in enumerate(layers):
        where = f"layers[{i}]"
        if not isinstance(spec, dict) or not {"c_in", "c_out", "kh"} <= set(spec):
            raise ValueError(f"{where}: expected an object with c_in, c_out, kh (and kw, pad, dilation)")
        unknown = sorted(set(spec) - {"c_in", "c_out", "kh", "kw", "pad", "dilation", "stride"})
        if unknown:
            raise ValueError(f"{where}.{unknown[0]}: unknown field; allowed: c_in, c_out, kh, kw, pad, dilation")
        if spec.get("stride", 1) != 1:
            raise ValueError(f"{where}.stride: redundant computation is modelled for stride-1 convolutions")
        if c_prev is not None and spec["c_in"] != c_prev:
            raise ValueError(f"{where}.c_in: {spec['c_in']} does not match the previous layer's c_out {c_prev}")
        kh, pad, dil = spec["kh"], spec.get("pad", 0), spec.get("dilation", 1)
        kw = spec.get("kw", kh)
        cost = conv2d(n, spec["c_in"], spec["c_out"], h_prev, w, kh, kw, 1, pad, dil, value_bytes=dtype_bytes(dtype))
        ho = out_size(h_prev, kh, 1, pad, dil)
        out.append({"cost": cost, "h_in": h_prev, "h_out": ho, "halo": halo_rows(kh, 1, pad, dil),
                    "kh": kh, "kw": kw, "pad": pad, "dilation": dil, **spec})
        c_prev, h_prev = spec["c_out"], ho
    return out


def _rows_of(d: int, P: int, H: int, top: int, bottom: int) -> int:
    """Output rows device ``d`` computes: its own ``ceil(H / P)`` slab widened by ``top`` / ``bottom`` rows,
    within the map."""
    slab = -(-H // P)
    lo, hi = min(H, d * slab), min(H, (d + 1) * slab)
    if lo >= hi:
        return 0
    return min(H, hi + bottom) - max(0, lo - top)


def redundant_spatial(n, h, w, layers, P: int, depth: int = 1, needs_grad_input: bool = False, device=None,
                      dtype: str = "fp32", cluster=None, alpha=None, beta=None, ranks_per_node=None) -> Split:
    """A chain of stride-1 convolutions (``layers``: dicts ``c_in, c_out, kh`` and optionally ``kw, pad,
    dilation``; ``n`` samples of ``h x w``) split by rows over ``P`` devices, exchanging halos once every
    ``depth`` layers (the module docstring). ``needs_grad_input``: whether the chain's input needs its ∇x
    (False: the image, so the first group sends no backward halo). Other parameters as
    :func:`.model_parallel.spatial_split`.

    ``flop``: the busiest device's FLOP per pass; ``flop_sum``: over all devices (more than the chain's
    ``layer_flop`` when ``depth > 1``: the redundant rows); ``info``: ``depth``, ``groups``, ``rows``
    (the busiest device's output rows per layer).

    >>> same = [{"c_in": 64, "c_out": 64, "kh": 3, "pad": 1}] * 4
    >>> one = redundant_spatial(8, 56, 56, same, P=4, depth=1, alpha=1e-5, beta=1e-10)
    >>> four = redundant_spatial(8, 56, 56, same, P=4, depth=4, alpha=1e-5, beta=1e-10)
    >>> len(one.comm), len(four.comm), one.info["rows"], four.info["rows"]
    (18, 6, [14, 14, 14, 14], [20, 18, 16, 14])
    """
    for name, v in (("P", P), ("depth", depth), ("n", n), ("h", h), ("w", w)):
        count(name, v)
    chain = _chain(n, h, w, layers, dtype)
    if depth > len(chain):
        raise ValueError(f"depth: {depth} exceeds the {len(chain)} layers of the chain")
    too_few = [i for i, c in enumerate(chain) if c["h_out"] < P]
    if too_few:
        raise ValueError(f"P: {P} devices exceed the {chain[too_few[0]]['h_out']} output rows of layers[{too_few[0]}]")
    vb = dtype_bytes(dtype)
    net = network(cluster, alpha, beta, ranks_per_node)
    flop = {p: sp.Integer(0) for p in PASSES}
    flop_sum, layer_flop = dict(flop), dict(flop)
    rows_busiest, comm_rows, compute = [], [], sp.Integer(0)
    groups = [chain[i:i + depth] for i in range(0, len(chain), depth)]
    for g, group in enumerate(groups):
        first = group[0]
        for j, c in enumerate(group):
            top = sum(later["halo"][0] for later in group[j + 1:])
            bottom = sum(later["halo"][1] for later in group[j + 1:])
            rows = [_rows_of(d, P, c["h_out"], top, bottom) for d in range(P)]
            r = max(rows)
            rows_busiest.append(r)
            needs = needs_grad_input or g > 0 or j > 0
            per_layer = op_flops(c["cost"], needs)
            mine = {p: f * sp.Rational(r, c["h_out"]) for p, f in per_layer.items()}  # the busiest device's share
            for p in PASSES:
                layer_flop[p] += per_layer[p]
                flop[p] += mine[p]
                flop_sum[p] += per_layer[p] * sp.Rational(sum(rows), c["h_out"])
            passes = PASSES if needs else PASSES[::2]
            timer = rows_timer(n, c["c_in"], c["c_out"], c["h_in"], c["h_out"], r, w, c["kh"], c["kw"], 1, c["pad"],
                                c["dilation"], passes, dtype)
            compute += rows_compute_s(mine, timer, device, dtype, True)
            comm_rows.append(("backward", "allreduce", f"∇w of layer {c['c_in']}->{c['c_out']}",
                              c["cost"].params * vb))
        top, bottom = sum(c["halo"][0] for c in group), sum(c["halo"][1] for c in group)
        row = n * first["c_in"] * w * vb
        sides = [("the neighbour", max(top, bottom))] if P == 2 else [("upper neighbour", top),
                                                                       ("lower neighbour", bottom)]
        comm_rows += [("forward", "p2p", f"group {g} halo from {who}", row * k) for who, k in sides if k]
        if needs_grad_input or g > 0:
            comm_rows += [("backward", "p2p", f"group {g} ∇x halo to {who}", row * k) for who, k in sides if k]
    return Split("spatial_redundant", sp.Integer(P), flop, flop_sum, layer_flop, compute,
                 row_comms(comm_rows, sp.Integer(P), net),
                 {"depth": depth, "groups": len(groups), "rows": rows_busiest}, SRC_REDUNDANT)


def best_depth(n, h, w, layers, P: int, **kwargs) -> tuple[int, dict]:
    """The group depth with the least ``time_s`` (compute + communication, numbers needed: ``device`` and a
    network), and every depth's :class:`~.model_parallel.Split`."""
    splits = {d: redundant_spatial(n, h, w, layers, P, d, **kwargs) for d in range(1, len(layers) + 1)}
    times = {d: float(s.time_s) for d, s in splits.items()}
    return min(times, key=times.get), splits
