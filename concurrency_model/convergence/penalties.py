"""Step penalties of stale, compressed and local-SGD updates on the steps to a target: **model only**.

No measured data set of steps to a target under staleness, gradient compression or local SGD has been found
(``data/SOURCES.md``; issue 40), so nothing here is validated: every output that uses it says "model only".

All three start from McCandlish et al. 2018 (arXiv 1812.06162, eq. 2.11 and App. D): the steps to a target are a
deterministic term plus a noise term, ``S(B) = S_min + S_min B_noise / B``, where ``B_noise = tr(Sigma) / |G|^2``
is the ratio of the per-sample gradient variance to the squared gradient. A penalty scales one of the two terms:

* ``staleness`` ``tau`` (steps between the weights a gradient was computed on and the weights it updates: SSP's
  bound, or asynchronous SGD's mean staleness, :func:`concurrency_model.parallel.consistency.mean_staleness`):
  ``S = S_min (1 + tau) + S_min B_noise / B``. A delay slows only the deterministic term, by a factor of about
  ``tau``, and leaves the noise term as it is: Arjevani, Shamir & Srebro, "A tight convergence analysis for
  stochastic gradient descent with delayed updates", ALT 2020 (abstract: without noise the error "can be as bad as
  non-delayed gradient descent ran on only 1/tau of the gradients", while stochastic noise makes the delay's effect
  negligible); Koloskova, Stich & Jaggi, "Sharper convergence guarantees for asynchronous SGD", NeurIPS 2022
  (arXiv 2206.08307, abstract: ``O(sigma^2 eps^-2 + tau_max eps^-1)`` iterations, the delay in the ``eps^-1``
  term only). The constant is ours: ``1 + tau``, so that ``tau = 0`` is synchronous SGD.
* ``error_feedback`` with a ``delta``-contractive compressor (``|C(x) - x|^2 <= (1 - delta) |x|^2``):
  ``S = S_min / delta + S_min B_noise / B``. Beznosikov, Horvath, Richtarik & Safaryan, "On biased compression for
  distributed learning" (arXiv 2002.12410, abstract): distributed compressed SGD with error feedback converges at
  ``O(delta' L exp(-mu K / (delta' L)) + (C + delta' D) / (K mu))``, ``delta' >= 1`` their compression parameter
  (``1 / delta`` here), ``C`` the stochastic noise, ``D`` the gradients' variance at the optimum (0 for the
  over-parameterised models trained here): the compression stretches the deterministic term by ``1 / delta`` and
  leaves the noise term as it is; Karimireddy et al., "Error feedback fixes SignSGD", ICML 2019 (abstract: error
  feedback with any compressor reaches SGD's rate). Top-k of ``d`` keeps at least ``k / d`` of the squared norm, so
  ``delta = k / d`` [D] (derived here: the ``k`` largest squares average at least the mean square;
  ``tests/convergence`` checks it on random vectors).
* ``unbiased`` compression without error feedback, variance factor ``omega`` (``E|C(x) - x|^2 <= omega |x|^2``).
  QSGD's quantizer (Alistarh et al., NeurIPS 2017, section 3.1: each ``|x_i| / |x|`` rounded at random to one of the
  ``s + 1`` levels ``0, 1/s, ..., 1`` around it, so that the result is unbiased) has, on ``d`` values,
  ``omega = min(d / s^2, sqrt(d) / s)`` [D] (derived here: rounding ``a_i s`` up with probability ``p_i`` adds
  ``p_i (1 - p_i) / s^2`` of ``|x|^2``; ``p_i (1 - p_i) <= 1`` gives ``d / s^2`` and ``p_i (1 - p_i) <= a_i s`` with
  ``sum a_i <= sqrt(d)`` gives ``sqrt(d) / s``; the paper states the same bound as its Lemma 3.1, and
  ``tests/convergence`` compares it with the exact variance). Each of ``P`` workers compresses its own gradient,
  so the averaged update's variance is ``((1 + omega) tr(Sigma) / B + omega |G|^2 / P)``; in McCandlish's terms [D]
  ``S = S_min (1 + omega / P) + (1 + omega) S_min B_noise / B``.

A scenario's ``training.compression`` maps to these (:func:`compression_penalty`), with the options its step is
timed with (the defaults of :func:`concurrency_model.parallel.compression.compress`: ``bucket_size`` 512, ``levels``
7, ``ratio`` 0.001):

* ``qsgd``: ``unbiased``, ``omega = min(d / s^2, sqrt(d) / s)`` on a bucket of ``d`` values with ``s`` levels,
  over the data-parallel ``workers``;
* ``topk`` and ``dgc``: ``error_feedback`` with ``delta = ratio`` (the fraction kept); Stich, Cordonnier & Jaggi,
  "Sparsified SGD with memory", NeurIPS 2018 (abstract: top-k and random-k with the error kept in memory converge at
  vanilla SGD's rate). DGC keeps the residual locally (Lin et al. 2018), which is error feedback. ``delta`` is the
  worst case over gradients, so ``S_min / delta`` is an upper bound (1,000 x the deterministic term at DGC's 99.9%
  sparsity), not a prediction;
* ``none``, ``fp16``, ``bf16``: no penalty (the same values, rounded);
* ``int8``, ``1bit``, ``terngrad``, ``threshold``, ``powersgd``, ``sfb``: no model: their ``delta`` or ``omega``
  depends on the gradient itself (scaled sign's ``delta = |g|_1^2 / (d |g|_2^2)``, PowerSGD's on the spectrum, a
  fixed threshold's on how many values pass it), which the curves do not give.

Local SGD's period has no model here. Searched (2026-12-06, the pages and docs corpora): Stich, "Local SGD converges
fast and communicates little", ICLR 2019 (arXiv 1805.09767; its abstract: on convex problems local SGD converges at
mini-batch SGD's rate in gradients evaluated, with up to ``T^(1/2)`` fewer communication rounds) and Haddadpour et
al., NeurIPS 2019 (``O((pT)^(1/3))`` rounds suffice under Polyak-Lojasiewicz) give asymptotic rates whose constants
(the gradients' variance, the curvature in the model's own units) the MLPerf curves do not give; Woodworth et al.,
"Is local SGD better than minibatch SGD?", ICML 2020, likewise; the one measurement at scale found, Ortiz et al.,
"Trade-offs of local SGD at scale: an empirical study" (arXiv 2110.08133), reports a lower final accuracy (a target
not reached) rather than more steps to a target. A guessed interpolation would be a number without a source.

The abstracts above were found with the project's search tools on 2026-12-06 (pages corpus); the two bounds marked
[D] are derived here and checked by tests rather than taken from the papers' text.

>>> float(steps_with("staleness", 100.0, 1000.0, 1000, tau=1))   # S_min (1 + 1) + S_min = 3 S_min
300.0
"""
from __future__ import annotations

import inspect

import sympy as sp

from ..checks import count, number
from ..parallel.compression import compress
from ..symbols import B

KINDS = ("staleness", "error_feedback", "unbiased")
LABEL = "model only"  # no measurement of steps to a target under these has been found
#: the options a scenario's compressed step is timed with (compress's defaults), so that the penalty matches them
OPTIONS = {k: v.default for k, v in inspect.signature(compress).parameters.items()
           if k in ("bucket_size", "levels", "ratio")}
NO_PENALTY = ("none", "fp32", "fp16", "bf16")  # the gradient's own values, rounded
NO_MODEL = ("int8", "1bit", "terngrad", "threshold", "powersgd", "sfb")  # delta or omega depends on the gradient


def compression_penalty(scheme: str, workers: int) -> dict | None:
    """The penalty (:func:`steps_with`'s ``kind`` and parameters) of a scenario's ``training.compression`` over
    ``workers`` data-parallel replicas, **model only**: ``None`` for a scheme with no penalty or no model (the module
    says which and why).

    >>> compression_penalty("qsgd", 8)       # omega = min(512 / 49, sqrt(512) / 7) = 3.23 on a bucket of 512
    {'kind': 'unbiased', 'omega': 3.2324881425670746, 'workers': 8}
    >>> compression_penalty("dgc", 8), compression_penalty("1bit", 8)
    ({'kind': 'error_feedback', 'delta': 0.001}, None)
    """
    if scheme in ("topk", "dgc"):
        return {"kind": "error_feedback", "delta": float(OPTIONS["ratio"])}
    if scheme == "qsgd":
        return {"kind": "unbiased", "omega": qsgd_omega(OPTIONS["bucket_size"], OPTIONS["levels"]),
                "workers": count("workers", workers)}
    if scheme in NO_PENALTY or scheme in NO_MODEL:
        return None
    raise ValueError(f"training.compression: unknown {scheme!r}; allowed: {', '.join(NO_PENALTY + NO_MODEL)}, "
                     "qsgd, topk, dgc")


def qsgd_omega(d, levels) -> float:
    """QSGD's variance factor ``min(d / s^2, sqrt(d) / s)`` on ``d`` values with ``s`` levels (Alistarh et al. 2017,
    Lemma 3.1; derived in the module docstring [D]).

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


__all__ = ["KINDS", "LABEL", "OPTIONS", "NO_PENALTY", "NO_MODEL", "steps_with", "qsgd_omega", "compression_penalty"]
