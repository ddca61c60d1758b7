"""Fit the closed forms of :mod:`.forms` to convergence points, keep the one with the smaller held-out error, and
band the prediction by the spread between runs.

* Each form is fitted by least squares on the logarithm of the value (relative errors; scipy's
  ``least_squares``, trust-region reflective, with its parameters in logs and bounded to a few decades around the
  batches seen, from several starts).
* Held-out error of a form: leave one batch out, fit on the rest, predict it; the median absolute percentage
  error over the batches. ``mccandlish`` (2 parameters) needs 3 batches for it, ``three_regime`` (3) needs 4;
  with fewer, the form has no held-out error and is fitted only where it has at least as many points as
  parameters. The form kept is the one with the smaller held-out error (``mccandlish``, the simpler, on a tie or
  where only it has one).
* Band: the runs at each batch divided by that batch's value, pooled over the batches (the spread between runs;
  MLPerf's reference runs of one entry differ by seed), combined with the kept form's held-out residuals (the
  curve's own error) as independent factors (:func:`band`); its 10th and 90th percentiles (numpy's linear
  interpolation) times the curve give ``p10`` and ``p90`` [D].
* Cache: the fits (each form's parameters and held-out residuals: hundreds of ``least_squares`` calls, seconds of
  CPU) depend only on the points' batches and values; :func:`fit` keeps them through
  :func:`concurrency_model.compiled.arrays`, keyed by those numbers (``repr``, exact) and the package's sources, so
  a later process reads them back bit for bit instead of fitting again (the report's "Time to train" part).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
import sympy as sp
from scipy.optimize import least_squares

from .. import compiled
from ..checks import number
from .forms import FORMS, PARAMS, SYMBOLS, B, samples, steps
from .points import Points

MIN_POINTS = {form: len(PARAMS[form]) for form in FORMS}  # to fit; one more for a held-out error
SPAN = 10.0  # natural-log decades the batch parameters may leave the batches seen by (e^10 ~ 2e4 x)
QUANTILES = (0.10, 0.90)


@lru_cache(maxsize=None)
def _f(form: str):
    """:func:`.forms.lambdified` of ``form`` with numpy's ``select`` (how lambdify prints a ``Piecewise``) done by
    :func:`_select`: the same numbers, in a third of the time (26 against 76 us; the fits call it ~40,000 times)."""
    return sp.lambdify((B, *(SYMBOLS[k] for k in PARAMS[form])), samples(form), modules=[{"select": _select}, "numpy"])


def _select(condlist, choicelist, default=np.nan):
    """``numpy.select`` (the first true condition's choice, else ``default``) by nested ``numpy.where``, each element
    the same number as ``numpy.select``'s.

    >>> x = np.array([1.0, 2.0, 3.0])
    >>> _select([x < 2, x < 3, True], [0.0, x, -x]).tolist(), np.select([x < 2, x < 3], [0.0, x], -x).tolist()
    ([0.0, 2.0, -3.0], [0.0, 2.0, -3.0])
    """
    out = default
    for cond, choice in zip(reversed(condlist), reversed(choicelist)):
        out = choice if cond is True else np.where(cond, choice, out)
    return np.asarray(out, dtype=np.result_type(*choicelist, default))


def _starts(form: str, lb: np.ndarray, lv: np.ndarray) -> list:
    e0 = float(lv.min())
    grid = np.linspace(lb.min() - 1.0, lb.max() + 1.0, 5)
    if form == "mccandlish":
        return [[e0, g] for g in grid]
    return [[e0, g, math.log(w)] for g in grid for w in (0.3, 1.0, 3.0)]


_REL_STEP = np.finfo(np.float64).eps ** 0.5  # scipy's relative step of a 2-point difference (_numdiff.py)


def forward_difference(resid, resid_rows, lb: np.ndarray, ub: np.ndarray):
    """``(fun, jac)`` for ``least_squares(fun, x0, jac=jac, bounds=(lb, ub))``: ``fun`` is ``resid`` (remembering its
    last point), ``jac`` the Jacobian ``least_squares(resid, x0, jac="2-point", bounds=(lb, ub))`` estimates, bit for
    bit, with the perturbed points evaluated in one call of ``resid_rows`` (rows of parameters) instead of one
    ``resid`` call each.

    It follows scipy 1.17.1 ``optimize/_numdiff.py`` (``_compute_absolute_step``, ``_adjust_scheme_to_bounds`` with a
    1-sided scheme and one step, ``_dense_difference``'s ``2-point``): step ``h = sqrt(eps) sign(x) max(1, |x|)``
    (sign +1 at 0), turned back where ``x + h`` leaves the bounds and ``|h|`` fits on the other side, else the
    whole distance to the farther bound; column ``i`` is ``(resid(x + h_i e_i) - resid(x)) / ((x_i + h_i) - x_i)``,
    returned as the transpose of a row-per-parameter array, as scipy does (the steps in Python floats: the same IEEE
    operations, so the same numbers for any finite ``x``). ``resid(x)`` is ``fun``'s last value where
    it was computed at ``x`` (``least_squares`` asks for the Jacobian where it last evaluated the residuals).

    >>> g = lambda x: np.array([x[0] ** 2 * x[1] - 1.0, np.sin(x[0]) - x[1], x[0] * x[1] - 0.5])
    >>> rows = lambda xs: np.array([g(x) for x in xs])
    >>> lb, ub = np.array([0.0, -1.0]), np.array([1.0, 1.0])
    >>> a = least_squares(g, [0.9, 0.3], bounds=(lb, ub), method="trf")
    >>> fun, jac = forward_difference(g, rows, lb, ub)
    >>> b = least_squares(fun, [0.9, 0.3], jac=jac, bounds=(lb, ub), method="trf")
    >>> bool(np.array_equal(a.x, b.x)), a.nfev == b.nfev
    (True, True)
    """
    last = {}
    lb_list, ub_list = np.asarray(lb, float).tolist(), np.asarray(ub, float).tolist()

    def f_at(x):
        out = resid(x)
        last["x"], last["f"] = np.asarray(x, float).tobytes(), out
        return out

    def jac(x):
        x = np.asarray(x, float)
        f0 = last["f"] if last.get("x") == x.tobytes() else resid(x)
        points, dx = np.repeat(x[None, :], len(x), axis=0), []
        for i, (xi, lo, hi) in enumerate(zip(x.tolist(), lb_list, ub_list)):  # Python floats: the same IEEE operations
            h = _REL_STEP * (1.0 if xi >= 0 else -1.0) * max(1.0, abs(xi))   # as scipy's arrays, for finite x
            lower_dist, upper_dist = xi - lo, hi - xi
            fitting = abs(h) <= max(lower_dist, upper_dist)
            if not fitting:
                h = upper_dist if upper_dist >= lower_dist else -lower_dist
            elif xi + h < lo or xi + h > hi:
                h = -h
            points[i, i] = xi + h
            dx.append((xi + h) - xi)
        # each row less f0 over its step at once: the same subtraction and division of each element
        return ((resid_rows(points) - f0) / np.array(dx)[:, None]).T

    return f_at, jac


def fit_form(form: str, batch, value) -> dict:
    """The parameters of ``form`` (by name) fitted to ``value`` at ``batch`` (log least squares).

    >>> b = np.array([32.0, 64, 128, 256, 512])
    >>> p = fit_form("mccandlish", b, 1000 * (1 + b / 128))
    >>> round(p["E_min"]), round(p["B_noise"])
    (1000, 128)
    """
    if form not in FORMS:
        raise ValueError(f"form: unknown {form!r}; allowed: {', '.join(FORMS)}")
    batch, value = np.asarray(batch, float), np.asarray(value, float)
    if len(batch) < MIN_POINTS[form]:
        raise ValueError(f"points: {form} needs at least {MIN_POINTS[form]} batch sizes to fit, got {len(batch)}")
    lb, lv = np.log(batch), np.log(value)
    f = _f(form)
    lo_b, hi_b = lb.min() - SPAN, lb.max() + SPAN
    if form == "mccandlish":
        lower, upper = [lv.min() - SPAN, lo_b], [lv.max() + SPAN, hi_b]
    else:
        lower, upper = [lv.min() - SPAN, lo_b, math.log(1e-2)], [lv.max() + SPAN, hi_b, math.log(30.0)]

    def unpack(theta):
        return [math.exp(x) for x in theta]

    rows_of_batch = batch[None, :]

    def resid_rows(thetas):  # the residuals at each row of parameters, in one broadcast call
        # (math.exp of Python floats, as of numpy's: the same numbers; the errstate is fit_form's, around the fits)
        e = np.array([unpack(t) for t in np.asarray(thetas, float).tolist()])
        r = np.log(f(rows_of_batch, *(e[:, j:j + 1] for j in range(e.shape[1])))) - lv
        finite = np.isfinite(r)
        return r if finite.all() else np.where(finite, r, 1e3)

    def resid(theta):
        return resid_rows([theta])[0]

    lo_arr, hi_arr = np.asarray(lower, float), np.asarray(upper, float)
    best = None
    # numpy's floating-point warnings off once around the fits rather than in each of their thousands of residual
    # calls (an overflow or a log of 0 is a residual of 1e3 there); the numbers are the same
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for x0 in _starts(form, lb, lv):
            x0 = np.clip(x0, np.array(lower) + 1e-9, np.array(upper) - 1e-9)
            fun, jac = forward_difference(resid, resid_rows, lo_arr, hi_arr)
            res = least_squares(fun, x0, jac=jac, bounds=(lower, upper), method="trf")
            if best is None or res.cost < best.cost:
                best = res
    return dict(zip(PARAMS[form], unpack(best.x)))


def evaluate(form: str, params: dict, batch) -> np.ndarray:
    """``E(B)`` of ``form`` with ``params`` at ``batch`` (numbers or an array).

    >>> evaluate("mccandlish", {"E_min": 100.0, "B_noise": 64.0}, [64, 128]).tolist()
    [200.0, 300.0]
    """
    with np.errstate(over="ignore", invalid="ignore"):
        return np.asarray(_f(form)(np.asarray(batch, float), *(params[k] for k in PARAMS[form])), float)


def held_out_residuals(form: str, points: Points) -> np.ndarray:
    """Leave-one-batch-out residuals ``ln(predicted / value)`` of ``form`` on ``points`` (empty when the form
    cannot be fitted on all but one batch, or has no degree of freedom left to test).

    >>> b = np.array([32.0, 64, 128])
    >>> pts = Points("x", "samples", "samples", b, 10 * (1 + b / 64), ((),) * 3, 1.0, "")
    >>> r = held_out_residuals("mccandlish", pts)
    >>> bool(np.abs(r).max() < 1e-6), held_out_residuals("three_regime", Points("x", "", "", b, b, ((),) * 3, 1.0, ""))
    (True, array([], dtype=float64))
    """
    n = len(points.batch)
    if n - 1 < MIN_POINTS[form] or (form == "mccandlish" and n < 3):
        return np.array([])
    out = []
    for i in range(n):
        rest = points.without(i)
        pred = evaluate(form, fit_form(form, rest.batch, rest.value), points.batch[i])
        out.append(math.log(float(pred) / points.value[i]))
    return np.array(out)


def held_out_errors(form: str, points: Points) -> np.ndarray:
    """Leave-one-batch-out absolute percentage errors of ``form`` on ``points`` (fractions).

    >>> b = np.array([32.0, 64, 128, 256])
    >>> bool(held_out_errors("mccandlish", Points("x", "samples", "samples", b, 1000 * (1 + b / 128), ((),) * 4, 1.0,
    ...                                            "")).max() < 1e-6)
    True
    """
    return np.abs(np.exp(held_out_residuals(form, points)) - 1)


def run_ratios(points: Points) -> np.ndarray:
    """Every run's value over its batch's value, pooled (the spread between runs).

    >>> run_ratios(Points("x", "samples", "samples", np.array([1.0, 2]), np.array([10.0, 20]),
    ...                   (np.array([9.0, 11]), np.array([20.0])), 1.0, "")).tolist()
    [0.9, 1.1, 1.0]
    """
    parts = [np.asarray(r, float) / v for r, v in zip(points.runs, points.value) if len(r)]
    return np.concatenate(parts) if parts else np.array([1.0])


@dataclass(frozen=True)
class Curve:
    """A fitted curve of one workload: ``form`` (the one kept), ``params`` of each fitted form, ``held_out``
    (median leave-one-batch-out APE of each form, ``None`` where it has none) and the ``band`` (run over curve
    at the 10th and 90th percentiles)."""

    points: Points
    form: str
    params: dict
    held_out: dict
    band: tuple = field(default=(1.0, 1.0))

    def samples(self) -> sp.Expr:
        """``E(B)`` of the kept form with the fitted numbers, symbolic in ``B``."""
        return samples(self.form, self.params[self.form])

    def steps(self) -> sp.Expr:
        """``S(B)``, symbolic in ``B`` (``ValueError`` where the samples per unit are unknown)."""
        return steps(self.form, self.params[self.form], self._per_unit())

    def _per_unit(self) -> float:
        if self.points.samples_per_unit is None:
            raise ValueError(f"target: {self.points.name}'s unit {self.points.unit!r} ({self.points.unit_source}) "
                             "has no known samples per unit, so its steps cannot be derived")
        return self.points.samples_per_unit

    def predict(self, batch, field: str = "batch") -> dict:
        """``value_to_target`` (in ``unit``), its ``p10`` / ``p90``, and ``steps_to_target`` (``None`` where the
        samples per unit are unknown) at global batch ``batch``.

        >>> from concurrency_model.convergence.points import mlperf
        >>> c = fit(mlperf("bert"))
        >>> out = c.predict(4096)
        >>> out["unit"], out["value_to_target_p10"] < out["value_to_target"] < out["value_to_target_p90"]
        ('samples', True)
        """
        b = number(field, batch)
        v = float(evaluate(self.form, self.params[self.form], b))
        k = self.points.samples_per_unit
        return {"value_to_target": v, "unit": self.points.unit, "steps_to_target": None if k is None else v * k / b,
                "value_to_target_p10": v * self.band[0], "value_to_target_p90": v * self.band[1],
                "form": self.form}


def fit(points: Points) -> Curve:
    """Fit every form that ``points`` allow, keep the one with the smaller held-out error, band by the runs.

    >>> from concurrency_model.convergence.points import mlperf
    >>> c = fit(mlperf("resnet"))
    >>> c.form in FORMS, sorted(c.held_out)
    (True, ['mccandlish', 'three_regime'])
    """
    if len(points.batch) < 2:
        raise ValueError(f"points: at least two batch sizes are needed to fit, got {len(points.batch)}")
    fitted = [f for f in FORMS if len(points.batch) >= MIN_POINTS[f]]
    batch, value = np.asarray(points.batch, float), np.asarray(points.value, float)

    def build() -> dict:
        out = {}
        for form in fitted:
            p = fit_form(form, batch, value)
            out[f"params/{form}"] = np.array([p[k] for k in PARAMS[form]], float)
            out[f"resid/{form}"] = np.asarray(held_out_residuals(form, points), float)
        return out
    cached = compiled.arrays("convergence_fit", (tuple(batch.tolist()), tuple(value.tolist()), tuple(fitted)), build)
    params, held, resid = {}, {}, {}
    for form in fitted:
        params[form] = dict(zip(PARAMS[form], (float(x) for x in cached[f"params/{form}"])))
        resid[form] = cached[f"resid/{form}"]
        held[form] = float(np.median(np.abs(np.exp(resid[form]) - 1))) if len(resid[form]) else None
    scored = [f for f in FORMS if held.get(f) is not None]
    form = min(scored, key=lambda f: (held[f], FORMS.index(f))) if scored else "mccandlish"
    return Curve(points, form, params, held, band(run_ratios(points), resid.get(form, np.array([]))))


def band(ratios, residuals) -> tuple:
    """``(p10, p90)`` of one run over the curve: the run-to-run ``ratios`` (run over its batch's value) combined
    with the curve's own held-out ``residuals`` (``ln(predicted / value)``), as independent errors: every run
    ratio divided by every ``exp(residual)`` (the curve is off by the residual, the run by its ratio), or the run
    ratios alone where there are no residuals.

    >>> band([0.9, 1.0, 1.1], [])
    (0.92, 1.08)
    >>> lo, hi = band([0.9, 1.0, 1.1], [-0.1, 0.1]); lo < 0.92 and hi > 1.08
    True
    """
    ratios, residuals = np.asarray(ratios, float), np.asarray(residuals, float)
    both = (ratios[:, None] / np.exp(residuals)[None, :]).ravel() if len(residuals) else ratios
    return tuple(float(q) for q in np.quantile(both, QUANTILES))


__all__ = ["fit", "fit_form", "forward_difference", "evaluate", "held_out_errors", "held_out_residuals", "band",
           "run_ratios", "Curve", "MIN_POINTS", "QUANTILES"]
