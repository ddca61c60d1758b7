"""Fit candidate collective cost models and keep the one that predicts best: ``select``.

Three kinds of candidate, each over a linear :class:`~.allreduce_forms.Form` ``t = X(n, P, N) @ x``:

* :class:`Single` — one set of constants ``x >= 0``;
* :class:`Protocols` — ``c`` sets and the fastest per row, ``min_j X @ x_j``: NCCL picks, per size, the
  fastest of its protocols LL / LL128 / Simple, each with its own latency and bandwidth
  (training-formulas §6.3-6.4 [P], NCCL ``src/graph/tuning.cc``);
* :class:`Switch` — one set below a message size and another above it: MPI libraries change algorithm at
  fixed size thresholds whether or not the next one is faster (MPICH: Thakur, Rabenseifner & Gropp 2005
  §4.6; the threshold is fitted among the midpoints of the training sizes, by in-sample residual);
* :class:`GroupSearch` — a :class:`Single` or :class:`Switch` of :func:`~.allreduce_forms.two_level`, the
  switch-group size ``G`` (nodes, a power of two) fitted by in-sample residual among those the rows
  identify: how many nodes share a leaf switch is seldom published, and its effect (slower per-byte
  cost once a job spans groups) shows in the rows only as a change with the node count.

Every fit is least squares on ``log(predicted / measured)`` with a soft-L1 loss (``f_scale`` 0.2), as
:func:`~.fit_comm.fit_alpha_beta`, so each size weighs by its relative error. ``select`` scores every
candidate by leave-one-out cross-validation on the rows it is given (the mean ``|log(pred/meas)|`` of
each row predicted from the others; Stone 1974, "Cross-validatory choice and assessment of statistical
predictions", JRSS B 36(2)) and refits the best on all rows; a candidate with more constants than
``rows - 1`` is not scored. Ties go to the earlier candidate (list the simpler first).

>>> import numpy as np
>>> from concurrency_model.calibrate.allreduce_forms import flat
>>> n = np.repeat([2.0**k for k in range(16, 26)], 3); P = np.tile([2.0, 4.0, 8.0], 10)
>>> t = flat("rabenseifner").design(n, P, P) @ [10e-6, 1 / 8e9]
>>> best, scores = select([Single(flat(a)) for a in ("ring", "rabenseifner")], n, P, P, t)
>>> best.name, round(float(best.params[0][0]) * 1e6, 6), round(1 / float(best.params[0][1]) / 1e9, 6)
('rabenseifner', 10.0, 8.0)
"""
from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, nnls

from .allreduce_forms import Form, identifiable, two_level

LOSS, F_SCALE = "soft_l1", 0.2


#: Solutions of :func:`fit_linear` by the exact bytes of their inputs (the least recently used dropped first): a
#: switch's leave-one-out folds fit the same side again whenever the row left out is on the other side, and two group
#: sizes ``G`` can give one design; a fit is a deterministic function of its inputs, so a repeat returns the same
#: numbers.
_SOLVED: OrderedDict = OrderedDict()
_SOLVED_MAX = 4096


def fit_linear(X: np.ndarray, t: np.ndarray, loss: str = LOSS) -> np.ndarray:
    """``x >= 0`` minimising the (soft-L1) sum of ``log(X @ x / t)^2``, started from the non-negative
    linear least-squares solution of the relative residuals ``X @ x / t - 1`` (exact when the data fit).
    A repeat of the same ``X`` (values and memory layout), ``t`` and ``loss`` in one process returns a copy of
    the first solution instead of solving again.

    >>> X = np.column_stack([np.ones(4), [1.0, 2.0, 4.0, 8.0]])
    >>> x = fit_linear(X, X @ [2e-6, 1e-9]); [round(float(v) * 1e6, 6) for v in x]
    [2.0, 0.001]
    >>> bool(np.array_equal(fit_linear(X, X @ [2e-6, 1e-9]), x))
    True
    """
    X, t = np.asarray(X, dtype=float), np.asarray(t, dtype=float)
    if len(t) < X.shape[1]:
        raise ValueError(f"rows: {len(t)} measurements cannot fit {X.shape[1]} constants")
    key = (loss, X.shape, X.strides, t.strides, X.tobytes(), t.tobytes())
    if key in _SOLVED:
        _SOLVED.move_to_end(key)
        return _SOLVED[key].copy()
    x = _solve_linear(X, t, loss)
    _SOLVED[key] = x.copy()
    if len(_SOLVED) > _SOLVED_MAX:
        _SOLVED.popitem(last=False)
    return x


def _solve_linear(X: np.ndarray, t: np.ndarray, loss: str) -> np.ndarray:
    x0, _ = nnls(X / t[:, None], np.ones_like(t))
    scale = np.array([np.median(t[c > 0] / c[c > 0]) if np.any(c > 0) else 1.0 for c in X.T])  # rows it acts on
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    tiny = 1e-12 * float(np.min(t))

    Xs = X * scale

    def resid(z):
        return np.log(np.maximum(Xs @ z, tiny) / t)

    def jac(z):  # d log(Xs z) / dz
        return Xs / np.maximum(Xs @ z, tiny)[:, None]

    start = np.maximum(x0 / scale, 1e-9)
    sol = least_squares(resid, start, jac=jac, bounds=(0.0, np.inf), x_scale="jac", loss=loss, f_scale=F_SCALE,
                        xtol=1e-12, ftol=1e-12, gtol=1e-12)
    z = sol.x if np.sum(resid(sol.x) ** 2) <= np.sum(resid(start) ** 2) else start
    return z * scale


def _rows(n, P, N, t):
    """``n, P, N, t`` as float arrays of one length (``P``, ``N`` may be one number each)."""
    n = np.atleast_1d(np.asarray(n, dtype=float))
    t = np.atleast_1d(np.asarray(t, dtype=float))
    if n.ndim != 1 or t.shape != n.shape:
        raise ValueError(f"times: {t.size} values for {n.size} sizes")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(n > 0)):
        raise ValueError("rows: sizes and times must be positive and finite")
    P, N = (np.array(np.broadcast_to(np.asarray(v, dtype=float), n.shape)) for v in (P, N))
    return n, P, N, t


@dataclass(frozen=True)
class Fitted:
    """A fitted candidate: ``params`` (one constant vector per protocol or size regime), the size
    ``threshold`` of a :class:`Switch` (bytes; regime 0 at or below it), ``predict(n, P, N)`` seconds."""

    name: str
    form: Form
    kind: str
    params: tuple[np.ndarray, ...]
    threshold: float | None = None

    def predict(self, n, P, N) -> np.ndarray:
        n = np.atleast_1d(np.asarray(n, dtype=float))
        P, N = (np.broadcast_to(np.asarray(v, dtype=float), n.shape) for v in (P, N))
        X = self.form.design(n, P, N)
        if self.kind == "switch":
            return np.where(n <= self.threshold, X @ self.params[0], X @ self.params[1])
        return np.min(np.column_stack([X @ x for x in self.params]), axis=1)


@dataclass(frozen=True)
class Single:
    """One set of constants of ``form``."""

    form: Form

    @property
    def name(self) -> str:
        return self.form.name

    @property
    def n_params(self) -> int:
        return self.form.k

    def fit(self, n, P, N, t) -> Fitted:
        n, P, N, t = _rows(n, P, N, t)
        return Fitted(self.name, self.form, "single", (fit_linear(self.form.design(n, P, N), t),))


#: Starting points of the protocol fit: (factor on the latency constants, factor on the inverse-bandwidth
#: constants) of the one-line fit, per protocol: a low-latency / low-bandwidth one first (LL), a
#: high-latency / high-bandwidth one last (Simple).
_STARTS = {2: (((0.1, 5.0), (1.0, 0.2)), ((0.3, 2.0), (1.0, 0.5))),
           3: (((0.1, 5.0), (1.0, 1.0), (10.0, 0.5)), ((0.3, 2.0), (1.0, 1.0), (3.0, 0.7)),
               ((0.1, 3.0), (0.5, 1.5), (4.0, 0.8)))}


@dataclass(frozen=True)
class Protocols:
    """``count`` (2 or 3) sets of constants of ``form``, the fastest per row (NCCL's per-size protocol
    choice, training-formulas §6.4)."""

    form: Form
    count: int = 2

    def __post_init__(self):
        if self.count not in _STARTS:
            raise ValueError(f"count: {self.count!r}; allowed: {', '.join(map(str, _STARTS))}")

    @property
    def name(self) -> str:
        return f"{self.form.name} x {self.count} protocols"

    @property
    def n_params(self) -> int:
        return self.form.k * self.count

    def fit(self, n, P, N, t) -> Fitted:
        n, P, N, t = _rows(n, P, N, t)
        X = self.form.design(n, P, N)
        if len(t) < self.n_params:
            raise ValueError(f"rows: {len(t)} measurements cannot fit {self.n_params} constants")
        one, _ = nnls(X / t[:, None], np.ones_like(t))  # one line through the relative residuals
        floor = np.array([1e-3 * np.median(t / c[c > 0]) if np.any(c > 0) else 1e-30 for c in X.T])
        one = np.maximum(one, floor)  # no constant exactly 0: the fit works on their logarithms
        latency = np.array([nm.startswith("alpha") for nm in self.form.names])

        rows = np.arange(len(t))

        def resid(z):
            e = np.exp(np.clip(z, -300.0, 50.0)).reshape(self.count, -1)
            return np.log(np.min(X @ e.T, axis=1) / t)

        def jac(z):  # only the fastest protocol of a row moves it: d log(X e_j) / d log e_j
            e = np.exp(np.clip(z, -300.0, 50.0)).reshape(self.count, -1)
            lines = X @ e.T
            j = np.argmin(lines, axis=1)
            out = np.zeros((len(t), self.count, X.shape[1]))
            out[rows, j, :] = X * e[j] / lines[rows, j][:, None]
            return out.reshape(len(t), -1)

        best = None
        for start in _STARTS[self.count]:
            x0 = np.concatenate([one * np.where(latency, fa, fb) for fa, fb in start])
            sol = least_squares(resid, np.log(x0), jac=jac, loss=LOSS, f_scale=F_SCALE)
            if best is None or sol.cost < best.cost:
                best = sol
        return Fitted(self.name, self.form, "protocols", tuple(np.exp(best.x).reshape(self.count, -1)))


@dataclass(frozen=True)
class Switch:
    """Separate constants of ``form`` below and above a fitted message size (MPICH-style algorithm switch
    by size, Thakur et al. 2005 §4.6); each side needs ``form.k + 1`` rows. The threshold (the geometric
    mean of two neighbouring training sizes) is the one whose two non-negative linear fits of the relative
    residuals leave the least squared log residual; the two sides are then fitted as :class:`Single`."""

    form: Form

    @property
    def name(self) -> str:
        return f"{self.form.name}, size switch"

    @property
    def n_params(self) -> int:
        return 2 * self.form.k + 1

    def fit(self, n, P, N, t) -> Fitted:
        n, P, N, t = _rows(n, P, N, t)
        sizes, X = np.unique(n), self.form.design(n, P, N)
        best, best_cost = None, np.inf
        for lo, hi in zip(sizes[:-1], sizes[1:]):  # the threshold by a quick non-negative linear fit
            below = n <= lo
            if below.sum() <= self.form.k or (~below).sum() <= self.form.k:
                continue
            pred = np.empty_like(t)
            for m in (below, ~below):
                x, _ = nnls(X[m] / t[m, None], np.ones(int(m.sum())))
                pred[m] = X[m] @ x
            cost = float(np.sum(np.log(np.maximum(pred, 1e-12 * t) / t) ** 2))
            if cost < best_cost:
                best, best_cost = (below, float(np.sqrt(lo * hi))), cost
        if best is None:
            raise ValueError(f"rows: too few sizes on each side of any switch for {self.form.k} constants")
        below, threshold = best
        parts = tuple(fit_linear(X[m], t[m]) for m in (below, ~below))
        return Fitted(self.name, self.form, "switch", parts, threshold)


@dataclass(frozen=True)
class GroupSearch:
    """``kind`` (:class:`Single` or :class:`Switch`) of ``two_level(algorithm, G)``, with the group size
    ``G`` in nodes (1, 2, 4, ... below the largest node count of the rows; 1 is the node itself) chosen by
    the least squared log residual of the fit on the rows, among the ``G`` whose design the rows identify
    (:func:`~.allreduce_forms.identifiable`: some rows inside one group and some across groups, or two
    different splits). Counts ``G`` as one more constant."""

    algorithm: str
    kind: type = Single

    def __post_init__(self):
        if self.kind not in (Single, Switch):
            raise ValueError(f"kind: {self.kind!r}; allowed: Single, Switch")
        two_level(self.algorithm, 1)  # checks the algorithm

    @property
    def name(self) -> str:
        return f"{self.algorithm}, two-level" + (", size switch" if self.kind is Switch else "")

    @property
    def n_params(self) -> int:
        return self.kind(two_level(self.algorithm, 1)).n_params + 1

    def fit(self, n, P, N, t) -> Fitted:
        n, P, N, t = _rows(n, P, N, t)
        best, best_cost, G = None, np.inf, 1
        while G < N.max():
            form = two_level(self.algorithm, G)
            try:
                f = self.kind(form).fit(n, P, N, t) if identifiable(form, n, P, N) else None
            except ValueError:  # node counts not in whole groups of G, or too few rows for a switch
                f = None
            if f is not None:
                cost = float(np.sum(np.log(f.predict(n, P, N) / t) ** 2))
                if cost < best_cost:
                    best, best_cost = f, cost
            G *= 2
        if best is None:
            raise ValueError("rows: no group size G below the largest node count is identified by the rows")
        return best


def loo_errors(candidate, n, P, N, t) -> np.ndarray:
    """``|log(predicted / measured)|`` of every row predicted by ``candidate`` fitted on the other rows
    (``inf`` everywhere when some fold cannot be fitted)."""
    n, P, N, t = _rows(n, P, N, t)
    errs = np.empty(len(t))
    for i in range(len(t)):
        keep = np.arange(len(t)) != i
        try:
            f = candidate.fit(n[keep], P[keep], N[keep], t[keep])
        except ValueError:
            return np.full(len(t), np.inf)
        errs[i] = abs(np.log(f.predict(n[i:i + 1], P[i:i + 1], N[i:i + 1])[0] / t[i]))
    return errs


def select(candidates, n, P, N, t) -> tuple[Fitted, pd.DataFrame]:
    """The first candidate whose leave-one-out error is within one standard error of the lowest (the
    "one-standard-error rule": Breiman et al. 1984, *Classification and Regression Trees* §3.4.3; Hastie,
    Tibshirani & Friedman, *Elements of Statistical Learning* §7.10), refitted on all rows, and a table of
    every candidate's ``name, n_params, loo_mean_abs_log, loo_se, loo_rms_log`` (``nan`` where it was not
    scored; ``loo_rms_log``: root mean square of the leave-one-out log errors, the spread of a new row's).

    List the candidates simplest first: a more complex one is kept only when the rows clearly favour it.
    With no candidate scorable (too few rows), the first one is fitted without selection."""
    n, P, N, t = _rows(n, P, N, t)
    if not candidates:
        raise ValueError("candidates: none given")
    rows = []
    for c in candidates:
        e = loo_errors(c, n, P, N, t) if len(n) - 1 >= c.n_params else np.full(len(n), np.nan)
        scored = bool(np.all(np.isfinite(e))) and len(e) > 1
        rows.append({"name": c.name, "n_params": c.n_params, "loo_mean_abs_log": float(np.mean(e)),
                     "loo_se": float(np.std(e, ddof=1) / np.sqrt(len(e))) if scored else float("nan"),
                     "loo_rms_log": float(np.sqrt(np.mean(e ** 2)))})
    table = pd.DataFrame(rows)
    ok = np.isfinite(table["loo_mean_abs_log"].to_numpy())
    if not ok.any():
        return candidates[0].fit(n, P, N, t), table
    i_min = int(table["loo_mean_abs_log"].where(ok, np.inf).idxmin())
    bar = table.at[i_min, "loo_mean_abs_log"] + table.at[i_min, "loo_se"]
    chosen = int(np.flatnonzero(ok & (table["loo_mean_abs_log"].to_numpy() <= bar))[0])
    table["chosen"] = np.arange(len(table)) == chosen
    return candidates[chosen].fit(n, P, N, t), table
