"""The cost algebra of the work-depth model (paper §2.5).

A :class:`Cost` is a frozen record of sympy expressions:

* ``flop``   work W, operations (a multiply-add is 2 FLOP, DESIGN.md conventions);
* ``depth``  depth D, the number of operations on the longest dependency chain;
* ``bytes``  minimum memory traffic: every input read once, every output written once;
* ``params`` trainable parameters;
* ``act_bytes`` activation bytes that must be stored for the backward pass;
* ``macs``   multiply-accumulates of matrix products and convolutions only (the figure torchvision and
  fvcore call FLOPs).

Sequential composition (``a + b`` or :meth:`Cost.then`) adds everything; parallel composition
(``a | b`` or :meth:`Cost.alongside`) adds everything except depth, which takes the maximum.
"""
from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Mapping

import sympy as sp

Expr = sp.Expr


def _sym(x) -> sp.Expr:
    if type(x) is int:  # what sympify makes of an int, without its dispatch
        return sp.Integer(x)
    return x if isinstance(x, sp.Basic) else sp.sympify(x)


_ZERO = sp.S.Zero  # sp.Integer(0) is this singleton


def _plus(a: sp.Expr, b: sp.Expr) -> sp.Expr:
    """``a + b`` of two sympy values, skipping sympy's addition where one is zero (a model adds hundreds of
    thousands of zero fields): ``x + 0`` is ``x`` in sympy, except a float zero, which becomes the integer 0
    (``Float._new`` of a zero, sympy 1.14 ``sympy/core/numbers.py``), so that one is added as sympy adds it."""
    if b is _ZERO and not (a.is_Float and a.is_zero):
        return a
    if a is _ZERO and not (b.is_Float and b.is_zero):
        return b
    return a + b


def to_python(e):
    """A Python int or float when ``e`` is a number, else the sympy expression unchanged."""
    e = _sym(e)
    if not e.is_number:
        return e
    return int(e) if e.is_Integer else float(e)


def to_json(e):
    """A JSON-ready value: a Python number, or the expression's text when it has symbols."""
    v = to_python(e)
    return str(v) if isinstance(v, sp.Basic) else v


class CeilLog2(sp.Function):
    """``ceil(log2 n)`` as a sympy function that stays exact: substituting an integer gives the integer
    (``bit_length``), not a floating-point ``ceiling(log(n)/log(2))`` that rounds wrongly near large
    powers of two; ``lambdify`` turns it into ``numpy.ceil(numpy.log2(n))``."""

    is_integer = True
    is_nonnegative = True

    @classmethod
    def eval(cls, n):
        if n.is_Integer:
            if n < 1:
                raise ValueError(f"n: ceil(log2 n) needs n >= 1, got {n}")
            return sp.Integer(int(n - 1).bit_length())
        if n.is_Number:
            if n < 1:
                raise ValueError(f"n: ceil(log2 n) needs n >= 1, got {n}")
            return CeilLog2(sp.ceiling(n))
        if n.is_Pow and n.base == 2 and n.exp.is_integer and n.exp.is_nonnegative:
            return n.exp  # ceil(log2 2^k) = k
        return None

    def _numpycode(self, printer):
        return f"numpy.ceil(numpy.log2({printer._print(self.args[0])}))"

    _lambdacode = _numpycode

    def _latex(self, printer):
        return rf"\left\lceil \log_2 {printer._print(self.args[0])} \right\rceil"


def clog2(n) -> sp.Expr:
    """``ceil(log2 n)``: exact for numbers, :class:`CeilLog2` for symbols.

    >>> clog2(8), clog2(9), clog2(1)
    (3, 4, 0)
    >>> from concurrency_model.symbols import N
    >>> clog2(N).subs(N, 2**39 + 1)
    40
    """
    return CeilLog2(_sym(n))


@dataclass(frozen=True)
class Cost:
    """Work, depth and traffic of a computation; all fields are sympy expressions.

    Examples
    --------
    >>> a = Cost(flop=8, depth=3)
    >>> b = Cost(flop=4, depth=2)
    >>> (a + b).depth, (a | b).depth, (a | b).flop
    (5, 3, 12)
    """

    flop: Expr = sp.Integer(0)
    depth: Expr = sp.Integer(0)
    bytes: Expr = sp.Integer(0)
    params: Expr = sp.Integer(0)
    act_bytes: Expr = sp.Integer(0)
    macs: Expr = sp.Integer(0)

    def __post_init__(self):
        d = self.__dict__  # frozen: set the sympified values past the dataclass's __setattr__
        for name in FIELDS:
            v = d[name]
            if not isinstance(v, sp.Basic):
                d[name] = sp.sympify(v)

    @classmethod
    def _of(cls, values: dict) -> "Cost":
        """A Cost of ``values`` (every field, each already a sympy value) without the dataclass's ``__init__``:
        composition builds hundreds of thousands of them."""
        c = object.__new__(cls)
        c.__dict__.update(values)
        return c

    # -- composition -----------------------------------------------------------------------------
    def then(self, other: "Cost") -> "Cost":
        """Sequential composition: W, D and everything else add."""
        a, b = self.__dict__, other.__dict__
        return Cost._of({k: _plus(a[k], b[k]) for k in FIELDS})

    def alongside(self, other: "Cost") -> "Cost":
        """Parallel composition: W adds, D is the maximum of the two depths."""
        return par(self, other)

    __add__ = then
    __or__ = alongside

    def repeat(self, k, parallel: bool = False) -> "Cost":
        """``k`` copies, one after another (depth ``k*D``) or side by side (depth ``D``)."""
        k = _sym(k)
        out = {name: getattr(self, name) * k for name in FIELDS}
        if parallel:
            out["depth"] = self.depth
        return Cost(**out)

    def scale_work(self, k) -> "Cost":
        """Work, traffic and stored activations times ``k``, depth unchanged (``k`` independent copies)."""
        return self.repeat(k, parallel=True)

    # -- evaluation ------------------------------------------------------------------------------
    def subs(self, mapping: Mapping) -> "Cost":
        """Substitute symbols in every field."""
        return Cost(*(getattr(self, name).subs(mapping) for name in FIELDS))

    def evaluate(self, mapping: Mapping | None = None) -> dict[str, float]:
        """Every field as a float after substituting ``mapping``; ``ValueError`` if a symbol is left."""
        out = {}
        for name in FIELDS:
            e = getattr(self, name)
            if mapping:
                e = e.subs(mapping)
            if e.free_symbols:
                names = ", ".join(sorted(s.name for s in e.free_symbols))
                raise ValueError(f"{name}: unbound symbols {names}; pass values for them")
            out[name] = float(e)
        return out

    @property
    def free_symbols(self) -> set:
        return set().union(*(getattr(self, name).free_symbols for name in FIELDS))

    # -- derived quantities ----------------------------------------------------------------------
    @property
    def average_parallelism(self) -> Expr:
        """W / D, "often a good number of execution units to compute the graph" (paper §2.5)."""
        if self.depth == 0:
            raise ValueError("depth: average parallelism W/D needs a depth > 0")
        return self.flop / self.depth

    def brent_bounds(self, p) -> tuple[Expr, Expr]:
        """Bounds on the time with ``p`` processors, one operation per unit of time.

        ``max(W/p, D) <= T_p <= W/p + D`` (Brent 1974; greedy scheduling, Blumofe & Leiserson 1999).
        The paper (§2.5) prints ``min{W/p, D}`` on the left; ``max`` is the tight, correct form.
        """
        p = _sym(p)
        return sp.Max(self.flop / p, self.depth), self.flop / p + self.depth

    def with_(self, **changes) -> "Cost":
        unknown = [k for k in changes if k not in FIELDS]
        if unknown:
            raise TypeError(f"Cost has no field {unknown[0]!r}")
        return Cost._of({**self.__dict__, **{k: _sym(v) for k, v in changes.items()}})


FIELDS = tuple(f.name for f in fields(Cost))  # the fields in their order, without dataclasses.fields() each time
ZERO = Cost()


def max_of(*values) -> sp.Expr:
    """``sympy.Max`` of sympy values, without sympy's Max when every value is an integer (its argument collapsing is
    quadratic: the critical path of a zoo CNN's thousands of nodes cost seconds): the Max of integers is the largest
    of them, so the result is the same.

    >>> max_of(3, sp.Integer(7), 5), max_of(2, sp.Symbol("n"))
    (7, Max(2, n))
    """
    vals = [_sym(v) for v in values]
    if vals and all(isinstance(v, sp.Integer) for v in vals):
        return max(vals)
    return sp.Max(*vals)


def unevaluated(kind, *args) -> sp.Expr:
    """``kind(*args, evaluate=False)`` (``sympy.Max`` or ``Min``) with an argument of the same ``kind`` flattened into
    it, as the evaluated one's argument filter does (sympy 1.14 ``sympy/functions/elementary/miscellaneous.py``,
    ``MinMaxBase.__new__``), without its pairwise search of the arguments' order (``_find_localzeros``), which costs
    seconds on the large expressions the compiled step and memory functions are built from.

    >>> x, y = sp.symbols("x y")
    >>> unevaluated(sp.Max, 0, unevaluated(sp.Max, x, y))
    Max(0, x, y)
    """
    return kind(*(x for a in args for x in (a.args if isinstance(a, kind) else (_sym(a),))), evaluate=False)


def sum_work(costs) -> Cost:
    """Every field but depth summed over ``costs`` in their order, depth 0: what adding up ``c.with_(depth=0)`` of
    each gives (the same sympy additions in the same order), without a Cost for each partial sum (a model's pass
    adds thousands).

    >>> sum_work([Cost(flop=2, depth=5), Cost(flop=3, bytes=4, depth=7)])
    Cost(flop=5, depth=0, bytes=4, params=0, act_bytes=0, macs=0)
    """
    sums = dict(ZERO.__dict__)
    rest = [k for k in FIELDS if k != "depth"]
    cols: dict = {k: [] for k in rest}
    for c in costs:
        d = c.__dict__
        for k in rest:
            cols[k].append(d[k])
    for k, values in cols.items():
        if all(v.is_Integer for v in values):  # integers: Python's exact sum, the Integer sympy's additions give
            sums[k] = sp.Integer(sum(v.p for v in values))
        else:
            acc = sums[k]
            for v in values:
                acc = _plus(acc, v)
            sums[k] = acc
    return Cost._of(sums)


def seq(*costs: Cost) -> Cost:
    """Sequential composition of several costs."""
    out = ZERO
    for c in costs:
        out = out + c
    return out


def par(*costs: Cost) -> Cost:
    """Parallel composition of several costs (depth is the maximum)."""
    if not costs:
        return ZERO
    out = {name: sum((getattr(c, name) for c in costs), sp.Integer(0)) for name in FIELDS}
    depths = [c.depth for c in costs if c.depth != 0]  # depths are >= 0: a zero never decides the max
    if all(d.is_Number for d in depths):  # numbers: their largest, without sympy's Max (a model builds thousands)
        out["depth"] = max(depths, default=sp.Integer(0))
    else:
        out["depth"] = sp.Max(*depths)
    return Cost(**out)


@dataclass(frozen=True)
class OpCost:
    """The three evaluations of an operator (paper Table 4): ``y`` (forward), ``grad_input`` (∇x)
    and ``grad_weight`` (∇w), plus the formula's source."""

    op: str
    forward: Cost
    grad_input: Cost = ZERO
    grad_weight: Cost = ZERO
    source: str = ""

    @property
    def params(self) -> Expr:
        return self.forward.params

    @property
    def backward(self) -> Cost:
        """∇x and ∇w both need only ∇y and the stored forward values: they run side by side."""
        return self.grad_input | self.grad_weight

    @property
    def training(self) -> Cost:
        """Forward then backward."""
        return self.forward + self.backward

    def scaled(self, k) -> "OpCost":
        """``k`` independent copies (e.g. heads, groups)."""
        return OpCost(self.op, self.forward.scale_work(k), self.grad_input.scale_work(k),
                      self.grad_weight.scale_work(k), self.source)


def chain(op: str, *parts: OpCost, source: str = "") -> OpCost:
    """Operators applied one after another, as one composite operator (e.g. attention, an RNN step).

    Forward: the forwards in sequence. ∇x: the ∇x in reverse order. ∇w: all weight gradients; its depth
    is the backward critical path ``max_i (sum_{j>i} D(∇x_j) + D(∇w_i))``, so that
    ``backward = ∇x | ∇w`` has the exact depth of the backward DAG.
    """
    fwd = seq(*(q.forward for q in parts))
    gin = seq(*(q.grad_input for q in reversed(parts)))
    crit, after = [], sp.Integer(0)
    for q in reversed(parts):
        if q.grad_weight.flop != 0:
            crit.append(after + q.grad_weight.depth)
        after = after + q.grad_input.depth
    gw_total = seq(*(q.grad_weight for q in parts))
    gw = gw_total.with_(depth=sp.Max(*crit) if crit else 0)
    return OpCost(op, fwd, gin, gw, source or "; ".join(dict.fromkeys(q.source for q in parts if q.source)))
