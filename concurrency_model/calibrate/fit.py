"""Fit the efficiency constants of :mod:`concurrency_model.timing` to measured times.

Least squares on ``log(predicted / measured)``: every row weighs by its relative error, so a 10 us kernel
counts as much as a 10 ms one (``scipy.optimize.least_squares``, trust-region reflective, with bounds).
Only the constants the rows can identify are fitted (``conv`` needs convolutions, ``rnn`` recurrent rows).
"""
from __future__ import annotations

from dataclasses import fields, replace
from typing import Callable

import numpy as np
from scipy.optimize import least_squares

from ..hardware.devices import Efficiency

BOUNDS = {"compute": (0.05, 1.0), "memory": (0.05, 1.0), "k_startup": (0.0, 2048.0), "l2_factor": (0.5, 20.0),
          "conv": (0.3, 5.0), "conv_wgrad": (0.3, 5.0), "winograd": (0.3, 5.0), "rnn": (0.3, 5.0),
          "rnn_sync": (0.0, 30.0), "rnn_unfused": (0.0, 30.0)}


def fit_efficiency(predict: Callable[[Efficiency], np.ndarray], measured: np.ndarray, start: Efficiency,
                   params=("compute", "memory", "k_startup", "l2_factor"), label: str = "fit") -> Efficiency:
    """The :class:`Efficiency` that minimises the squared log-ratio of ``predict(eff)`` to ``measured``.

    ``sigma`` of the result is the standard deviation of the log residuals (the relative spread, used
    for error bands); ``fitted_on`` is ``label``.
    """
    measured = np.asarray(measured, dtype=float)
    if len(measured) < len(params):
        raise ValueError(f"rows: {len(measured)} measurements cannot fit {len(params)} constants")
    unknown = [p for p in params if p not in BOUNDS]
    if unknown:
        raise ValueError(f"params: cannot fit {unknown[0]!r}; allowed: {', '.join(BOUNDS)}")
    lo = np.array([BOUNDS[p][0] for p in params])
    hi = np.array([BOUNDS[p][1] for p in params])
    x0 = np.clip([getattr(start, p) for p in params], lo + 1e-9, hi - 1e-9)

    def eff_of(x):
        return replace(start, **{p: float(v) for p, v in zip(params, x)})

    def resid(x):
        return np.log(predict(eff_of(x)) / measured)

    sol = least_squares(resid, x0, bounds=(lo, hi), diff_step=1e-3, x_scale="jac", loss="soft_l1", f_scale=0.2)
    r = resid(sol.x)
    return replace(eff_of(sol.x), sigma=float(np.std(r)), fitted_on=label)


def as_dict(eff: Efficiency) -> dict:
    return {f.name: getattr(eff, f.name) for f in fields(Efficiency)}
