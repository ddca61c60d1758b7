"""Element-wise operators: activations, dropout, residual add, concat, scaling (paper Table 4 "activation").

Table 4: an activation costs O(NCHW) work and O(1) depth, forward and ∇x; it has no ∇w.
Exact counts need an operation count per element for each function; the toolkit's convention
(elementary operations of the usual formula, transcendental functions counted as one) is below.
FLOP counters such as fvcore count these as 0 and ``torch.utils.flop_counter`` ignores them.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks

# (forward ops per element, forward depth, backward ops per element, backward depth)
# relu: max(x,0) | mask * ∇y.  sigmoid: 1/(1+exp(-x)) = neg, exp, add, div | ∇y*y*(1-y): sub, mul, mul.
# tanh: one op | ∇y*(1-y²): mul, sub, mul.  gelu (tanh form, Hendrycks & Gimpel 2016):
# 0.5x(1+tanh(√(2/π)(x+0.044715x³))) = cube(2), mul, add, mul, tanh, add, mul, mul -> 9, depth 8.
# silu: x*sigmoid(x) = 5 | 7.  Counts are the toolkit's convention [D].
ACTIVATIONS = {
    "relu": (1, 1, 1, 1),
    "relu6": (2, 2, 2, 1),
    "sigmoid": (4, 4, 3, 2),
    "tanh": (1, 1, 3, 3),  # y², 1 - y², times ∇y: a chain of three
    "gelu": (9, 8, 14, 9),
    "silu": (5, 5, 7, 4),
    "identity": (0, 0, 0, 0),
}


def activation(kind: str, elements, value_bytes=4) -> OpCost:
    """An element-wise activation over ``elements`` values.

    >>> a = activation("relu", 10)
    >>> a.forward.flop, a.forward.depth, a.grad_input.flop, a.grad_weight.flop
    (10, 1, 10, 0)
    """
    kind = checks.choice("activation", kind, ACTIVATIONS)
    n = checks.size("elements", elements)
    vb = checks.value_bytes(value_bytes)
    fo, fd, bo, bd = ACTIVATIONS[kind]
    # relu's backward needs only the sign (1 byte per element would do; frameworks keep the output)
    fwd = Cost(flop=fo * n, depth=fd, bytes=2 * vb * n, act_bytes=vb * n)
    gin = Cost(flop=bo * n, depth=bd, bytes=3 * vb * n)
    return OpCost(kind, fwd, gin, source="paper Table 4 (activation: O(NCHW) work, O(1) depth)")


def dropout(elements, value_bytes=4) -> OpCost:
    """Dropout (Srivastava et al. 2014): draw, compare, scale; keeps a 1-byte mask for backward."""
    n = checks.size("elements", elements)
    vb = checks.value_bytes(value_bytes)
    fwd = Cost(flop=3 * n, depth=3, bytes=vb * 2 * n + n, act_bytes=n)
    gin = Cost(flop=n, depth=1, bytes=2 * vb * n + n)
    return OpCost("dropout", fwd, gin, source="element-wise: mask * x / (1 - p)")


def add(elements, inputs: int = 2, value_bytes=4) -> OpCost:
    """Residual add of ``inputs`` tensors: ``(inputs - 1)`` adds per element as a tree; its gradient
    passes ∇y unchanged to every input (no work)."""
    n = checks.size("elements", elements)
    k = int(checks.size("inputs", inputs, 2))
    vb = checks.value_bytes(value_bytes)
    fwd = Cost(flop=(k - 1) * n, depth=clog2(k), bytes=vb * (k + 1) * n)
    return OpCost("add", fwd, Cost(bytes=0), source="element-wise sum (He et al. 2016 residual)")


def scale(elements, value_bytes=4) -> OpCost:
    """Multiply by a constant (e.g. attention's 1/sqrt(d)); its gradient is a multiply too."""
    n = checks.size("elements", elements)
    vb = checks.value_bytes(value_bytes)
    return OpCost("scale", Cost(flop=n, depth=1, bytes=2 * vb * n), Cost(flop=n, depth=1, bytes=2 * vb * n),
                  source="element-wise")


def channel_scale(maps, spatial, value_bytes=4) -> OpCost:
    """``y = x * s`` with one factor per feature map (``maps`` = batch x channels maps of ``spatial`` values
    each), the gating of squeeze-and-excitation (Hu et al. 2018, Eq. 4). Its gradient has two inputs:
    ``∇x = ∇y * s`` (one multiply a value) and ``∇s = sum over the map of ∇y * x`` (a multiply a value and a
    tree of ``spatial - 1`` adds per map: depth 1 + ceil(log2 spatial)), both from one read of ∇y, x, s.

    >>> c = channel_scale(2 * 64, 49)
    >>> c.forward.flop, c.grad_input.flop, c.grad_input.depth
    (6272, 18688, 7)
    """
    m = checks.size("maps", maps)
    hw = checks.size("spatial", spatial)
    vb = checks.value_bytes(value_bytes)
    n = m * hw
    fwd = Cost(flop=n, depth=1, bytes=vb * (2 * n + m))
    back = Cost(flop=2 * n + m * (hw - 1), depth=1 + clog2(hw), bytes=vb * (3 * n + 2 * m))
    return OpCost("channel_scale", fwd, back, source="squeeze-and-excitation gating (Hu et al. 2018)")


def concat(elements, value_bytes=4) -> OpCost:
    """Concatenation: a copy (no arithmetic, depth 0); its gradient is a split (views, no copy)."""
    n = checks.size("elements", elements)
    vb = checks.value_bytes(value_bytes)
    return OpCost("concat", Cost(bytes=2 * vb * n), source="data movement only")
