"""Step penalties of stale, compressed and local-SGD updates on the steps to a target: **model only**.

No measured data set of steps to a target under staleness, gradient compression or local SGD has been found
(``data/SOURCES.md``; issue 40), so nothing here is validated: every output that uses it says "model only".

All three start from McCandlish et al. 2018 (arXiv 1812.06162, eq. 2.11 and App. D): the steps to a target are a
deterministic term plus a noise term, ``S(B) = S_min + S_min B_noise / B``, where ``B_noise = tr(Sigma) / |G|^2``
is the ratio of the per-sample gradient variance to the squared gradient. A penalty scales one of the two terms:

* ``staleness`` ``tau`` (steps between the weights a gradient was computed on and the weights it updates: SSP's
  bound, or asynchronous SGD's mean staleness, :func:`concurrency_model.parallel.consistency.mean_staleness`):
  ``S = S_min (1 + tau) + S_min B_noise / B``. Stich & Karimireddy, "The error-feedback framework: better rates for
  SGD with delayed gradients and compressed updates", JMLR 21 (2020), arXiv 1909.05350: a delay ``tau`` enters only
  the rate's deterministic term, multiplied by ``tau`` (as recalled; the constant here is ours, 1 + tau so that
  ``tau = 0`` is synchronous SGD).
* ``error_feedback`` with a ``delta``-contractive compressor (``|C(x) - x|^2 <= (1 - delta) |x|^2``; top-k of ``d``:
  ``delta = k / d``): ``S = S_min / delta + S_min B_noise / B``. The same paper: compressed SGD with error feedback
  behaves as SGD delayed by ``tau ~ 1 / delta`` (as recalled).
* ``unbiased`` compression without error feedback, variance factor ``omega`` (``E|C(x) - x|^2 <= omega |x|^2``;
  QSGD with ``s`` levels on ``d`` values: ``omega = min(d / s^2, sqrt(d) / s)``, Alistarh et al., "QSGD", NeurIPS
  2017, Lemma 3.1, as recalled): each of ``P`` workers compresses its own gradient, so the averaged update's
  variance is ``((1 + omega) tr(Sigma) / B + omega |G|^2 / P)``; in McCandlish's terms [D]
  ``S = S_min (1 + omega / P) + (1 + omega) S_min B_noise / B``.

Local SGD's period has no model here: in the i.i.d. setting its published analyses (Stich, "Local SGD converges
fast and communicates little", ICLR 2019; Woodworth et al., "Is local SGD better than minibatch SGD?", ICML 2020)
bound the extra steps by terms whose constants (the gradients' variance and the curvature in the model's own units)
the MLPerf curves do not give, and a guessed interpolation would be a number without a source.

>>> float(steps_with("staleness", 100.0, 1000.0, 1000, tau=1))   # S_min (1 + 1) + S_min = 3 S_min
300.0
"""
from __future__ import annotations

import sympy as sp

from ..checks import count, number
from ..symbols import B

KINDS = ("staleness", "error_feedback", "unbiased")
LABEL = "model only"  # no measurement of steps to a target under these has been found


def qsgd_omega(d, levels) -> float:
    """QSGD's variance factor ``min(d / s^2, sqrt(d) / s)`` (Alistarh et al. 2017, Lemma 3.1, as recalled).

    >>> qsgd_omega(10**6, 2**7 - 1)
    7.874015748031496
    """
    d = number("d", d)
    s = count("levels", levels)
    return min(d / s**2, d**0.5 / s)


def steps_with(kind: str, s_min, b_noise, batch=B, *, tau=0, delta=1.0, omega=0.0, workers=1):
    """Steps to the target with the penalty ``kind`` (:data:`KINDS`) on McCandlish's curve with ``s_min`` and
    ``b_noise``, at global batch ``batch`` (a number, or the symbol ``B``): **model only**.

    >>> float(steps_with("error_feedback", 100.0, 1000.0, 1000, delta=0.01))   # S_min / delta + S_min
    10100.0
    >>> float(steps_with("unbiased", 100.0, 1000.0, 1000, omega=1.0, workers=4))   # 100 (1 + 1/4) + 2 x 100
    325.0
    """
    if kind not in KINDS:
        raise ValueError(f"kind: unknown {kind!r}; allowed: {', '.join(KINDS)}")
    s_min = number("s_min", s_min, symbols_ok=True)
    b_noise = number("b_noise", b_noise, symbols_ok=True)
    b = number("batch", batch, symbols_ok=True)
    noise = s_min * b_noise / b
    if kind == "staleness":
        return sp.sympify(s_min * (1 + number("tau", tau, low_ok=True)) + noise)
    if kind == "error_feedback":
        return sp.sympify(s_min / number("delta", delta, high=1, high_ok=True) + noise)
    p = count("workers", workers)
    w = number("omega", omega, low_ok=True)
    return sp.sympify(s_min * (1 + w / p) + (1 + w) * noise)


__all__ = ["KINDS", "LABEL", "steps_with", "qsgd_omega"]
