"""Closed forms of the work to a target quality against the global batch ``B``, symbolic in ``B``.

Both forms give ``E(B)``, the amount of training data consumed until the target is first met, in the unit of the
curve (samples, tokens or epochs: each a fixed multiple of samples); the steps are ``S(B) = E(B) k / B`` with ``k``
the samples per unit.

* ``mccandlish``: McCandlish, Kaplan, Amodei et al., "An empirical model of large-batch training", arXiv 1812.06162
  (2018), eq. 2.11 and §2.3: ``S = S_min (1 + B_noise / B)`` and ``E = E_min (1 + B / B_noise)`` with
  ``E_min = S_min B_noise`` (so ``S(B_noise) = 2 S_min`` and ``E(B_noise) = 2 E_min``). Parameters ``E_min``,
  ``B_noise``.
* ``three_regime``: the three regimes Shallue, Lee, Antognini et al. find in steps to a target against batch,
  "Measuring the effects of data parallelism on neural network training", arXiv 1811.03600 (2018), §4.1 and
  Fig. 1: perfect scaling (steps halve as the batch doubles: ``E`` constant), diminishing returns, and maximal
  data parallelism (steps no longer fall: ``E`` grows as ``B``). The paper gives no closed form; the one here is
  ours [D]: in log-log coordinates the slope of ``S`` against ``B`` is -1 below ``B_1``, 0 above
  ``B_2 = B_1 e^w``, and moves linearly in ``ln B`` between them, which gives

      ``E = E_min``                                                   for ``B <= B_1``
      ``E = E_min e^(-w/2) (B / B_1) exp(ln(B_2 / B)^2 / (2 w))``     for ``B_1 < B <= B_2``
      ``E = E_min e^(-w/2) B / B_1``                                  for ``B > B_2``

  continuous with a continuous slope; ``w -> 0`` is the two-regime hard knee. Parameters ``E_min``, ``B_1``, ``w``.

In both, ``E`` never falls and ``S`` never rises as ``B`` grows (the tests check it with hypothesis).

>>> float(samples("mccandlish", {"E_min": 100.0, "B_noise": 64.0}).subs(B, 64))
200.0
"""
from __future__ import annotations

import sympy as sp

from ..symbols import B

FORMS = ("mccandlish", "three_regime")
PARAMS = {"mccandlish": ("E_min", "B_noise"), "three_regime": ("E_min", "B_1", "w")}
SYMBOLS = {name: sp.Symbol(name, positive=True) for form in FORMS for name in PARAMS[form]}


def _check_form(form: str) -> None:
    if form not in FORMS:
        raise ValueError(f"form: unknown {form!r}; allowed: {', '.join(FORMS)}")


def samples(form: str, params: dict | None = None) -> sp.Expr:
    """``E(B)``, the data to the target in the curve's unit, of ``form``; its parameters are symbols, or the
    numbers of ``params`` (a dict by parameter name).

    >>> samples("mccandlish")
    E_min*(B/B_noise + 1)
    >>> e = samples("three_regime", {"E_min": 10.0, "B_1": 100.0, "w": 1.0})
    >>> [round(float(e.subs(B, b)), 3) for b in (50, 100, 1000)]
    [10.0, 10.0, 60.653]
    """
    _check_form(form)
    s = SYMBOLS
    if form == "mccandlish":
        e = s["E_min"] * (1 + B / s["B_noise"])
    else:
        e_min, b1, w = s["E_min"], s["B_1"], s["w"]
        b2 = b1 * sp.exp(w)
        e = sp.Piecewise((e_min, B <= b1),
                         (e_min * sp.exp(-w / 2) * (B / b1) * sp.exp(sp.log(b2 / B) ** 2 / (2 * w)), B <= b2),
                         (e_min * sp.exp(-w / 2) * B / b1, True))
    if params:
        e = e.subs({s[k]: sp.Float(v) for k, v in params.items()})
    return e


def steps(form: str, params: dict | None = None, samples_per_unit=1) -> sp.Expr:
    """``S(B) = E(B) k / B``, the optimizer steps to the target (``k``: samples per unit of ``E``).

    >>> steps("mccandlish")
    E_min*(B/B_noise + 1)/B
    >>> s = steps("mccandlish", {"E_min": 6400.0, "B_noise": 64.0})   # S_min = E_min / B_noise = 100
    >>> float(s.subs(B, 64)), float(s.subs(B, 10**9)) > 100
    (200.0, True)
    """
    return samples(form, params) * samples_per_unit / B


def lambdified(form: str):
    """A numpy function ``f(B, *params)`` of ``E(B)`` (parameters in :data:`PARAMS` order).

    >>> float(lambdified("mccandlish")(64.0, 100.0, 64.0))
    200.0
    """
    _check_form(form)
    return sp.lambdify((B, *(SYMBOLS[k] for k in PARAMS[form])), samples(form), modules="numpy")


__all__ = ["FORMS", "PARAMS", "SYMBOLS", "B", "samples", "steps", "lambdified"]
