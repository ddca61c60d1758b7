"""Error bands: the spread of the fitted constants, propagated through the lambdified step expression.

Every prediction scales the device's peak FLOP/s, memory bandwidth and launch overhead, and the links'
bandwidth, by efficiencies that are fitted (or defaults) and off by a device- or system-level factor. The
log of that factor is taken as normal with the spread of the calibration residuals
(``presets/uncertainty.json``, made by :func:`concurrency_model.validate.spreads.derive_spreads`):

* ``flops``, ``mem_bw``, ``launch``: the standard deviation across DeepBench devices of each device's median
  log(predicted/measured) kernel time (GEMM and convolution, default constants): the systematic part, which
  does not average out over the thousands of kernels of a step;
* ``intra_bw``, ``inter_bw``: the standard deviation of log(predicted/measured) of the cluster presets'
  all-reduce times at >= 64 KiB against nccl-tests;
* ``model``: the model-form spread of the whole step, the standard deviation of log(predicted/measured)
  of the one constant fitted on training steps (``HOST_S_PER_KERNEL``, on the even rows of vTrain single
  node): what the hardware scales leave unexplained.

:func:`band` samples the five hardware scales together (independent log-normals, one draw per sample for
the whole step), evaluates the step on the whole sample at once, multiplies it by the model factor
``exp(N(0, sigma_model))`` and returns the 10th and 90th percentiles. Whether the bands are honest is
checked in ``benchmarks/accuracy.py``: the share of measured values inside the 80% band on every dataset,
each with spreads derived without it (:func:`lognormal_band`, :func:`coverage`).
"""
from __future__ import annotations

import json
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # annotations only
    import pandas as pd

SCALES = ("flops", "mem_bw", "launch", "intra_bw", "inter_bw")  # the hardware scales a step function takes
MODEL = "model"  # the model-form factor on the whole step
FILE = Path(__file__).parent / "presets" / "uncertainty.json"
SAMPLES = 400
QUANTILES = (0.1, 0.9)
Z90 = 1.2815515655446004  # standard normal 90th percentile: an 80% band is exp(-+Z90 sigma) of a log-normal


@lru_cache(maxsize=None)
def spreads() -> dict:
    """``{scale: sigma of log}`` from ``presets/uncertainty.json``: the five hardware scales and ``model``."""
    d = json.loads(FILE.read_text())
    return {k: float(d["sigma"][k]) for k in (*SCALES, MODEL)}


def sample_scales(n: int = SAMPLES, seed: int = 0, sigma: dict | None = None, rng=None) -> dict:
    """``n`` draws of each hardware scale: rates (FLOP/s, bandwidths) multiplied by ``exp(N(0, sigma))``, the
    launch overhead too (a time: the same law); from ``rng`` when given, else a generator seeded ``seed``."""
    sigma = spreads() if sigma is None else sigma
    rng = np.random.default_rng(seed) if rng is None else rng
    return {k: np.exp(rng.normal(0.0, sigma[k], n)) for k in SCALES}


def bands(fn, n: int = SAMPLES, seed: int = 0) -> list[tuple[float, float]]:
    """The 80% band of each output of ``fn`` (a function of arrays of the five hardware scales returning a
    sequence of arrays, one per quantity), all on the same draws: each output times the model factor
    ``exp(N(0, sigma_model))``, drawn after the scales from the same generator; its 10th and 90th percentile."""
    return [band_of(t, n, seed) for t in fn(**draws(n, seed))]


def draws(n: int = SAMPLES, seed: int = 0) -> dict:
    """The draws of the five hardware scales that :func:`bands` evaluates a step on (read-only arrays, the same
    objects at every call while :func:`spreads` is unchanged): a caller that keeps a step's inputs on them
    (:func:`concurrency_model.training.estimate.prepared`) evaluates them with :func:`band_of`.

    >>> d = draws(4)
    >>> sorted(d), d["flops"].shape
    (['flops', 'inter_bw', 'intra_bw', 'launch', 'mem_bw'], (4,))
    """
    return _draws(n, seed, tuple(spreads().items()))[0]


def band_of(values, n: int = SAMPLES, seed: int = 0) -> tuple[float, float]:
    """10th and 90th percentile of ``values`` (a step on :func:`draws` ``(n, seed)``, one value a draw) times the
    model factor ``exp(N(0, sigma_model))`` of the same draws: :func:`band` of a step already evaluated.

    >>> lo, hi = band_of(2.0 / draws()["flops"])
    >>> (lo, hi) == band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 2.0 / flops)
    True
    """
    factor = _draws(n, seed, tuple(spreads().items()))[1]
    lo, hi = np.quantile(np.asarray(values, dtype=float) * factor, QUANTILES)
    return float(lo), float(hi)


@lru_cache(maxsize=8)
def _draws(n: int, seed: int, spread: tuple) -> tuple[dict, np.ndarray]:
    """The draws of :func:`bands` (the five scales, then the model factor, from one generator seeded ``seed``, with
    the ``spread`` items of :func:`spreads`): the same numbers at every call, so drawn once a process (an estimate's
    band draws 2,400 normals otherwise); read-only, so that no caller changes them for the next."""
    sigma = dict(spread)
    rng = np.random.default_rng(seed)
    scales = sample_scales(n, sigma=sigma, rng=rng)
    factor = np.exp(rng.normal(0.0, sigma[MODEL], n))
    for a in (*scales.values(), factor):
        a.flags.writeable = False
    return scales, factor


def band(step_fn, n: int = SAMPLES, seed: int = 0) -> tuple[float, float]:
    """10th and 90th percentile of ``step_fn(**scales) * exp(N(0, sigma_model))`` (``step_fn``: a function
    of arrays of the five hardware scales; :func:`bands` of one output).

    >>> lo, hi = band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 2.0 / flops)
    >>> round(lo, 2), round(hi, 2)   # about 2 s x exp(-+1.28 sqrt(sigma_flops^2 + sigma_model^2))
    (1.56, 2.6)
    """
    return bands(lambda **k: (step_fn(**k),), n, seed)[0]


def log_spread(predicted, measured) -> float:
    """Standard deviation (population) of ``log(predicted / measured)``: the spread of a fit's residuals.

    >>> round(log_spread([1.0, 2.0], [1.0, 1.0]), 4)   # logs 0 and ln 2: std = ln(2) / 2
    0.3466
    """
    return float(np.std(np.log(np.asarray(predicted, dtype=float) / np.asarray(measured, dtype=float))))


def lognormal_band(predicted, sigma) -> tuple[np.ndarray, np.ndarray]:
    """The 80% band ``predicted * exp(-+Z90 sigma)`` of a log-normal error of spread ``sigma``."""
    p, s = np.asarray(predicted, dtype=float), np.asarray(sigma, dtype=float)
    return p * np.exp(-Z90 * s), p * np.exp(Z90 * s)


def coverage(measured, lo, hi) -> float | None:
    """Share of ``measured`` values inside ``[lo, hi]``, over the rows that have a band (finite ``lo``);
    None when none has.

    >>> coverage([1.0, 2.0, 5.0, 1.0], [0.5, 2.5, 4.0, np.nan], [1.5, 3.0, 6.0, np.nan])
    0.6666666666666666
    """
    m, lo, hi = (np.asarray(x, dtype=float) for x in (measured, lo, hi))
    has = np.isfinite(lo) & np.isfinite(hi)
    return float(((m[has] >= lo[has]) & (m[has] <= hi[has])).mean()) if has.any() else None


def group_sigma(log_ratio, groups) -> float:
    """Spread of a new group's ``log(predicted/measured)`` judged from other groups' rows (``log_ratio``,
    ``groups`` one label per row): ``sqrt(systematic^2 + scatter^2)``, the systematic part the root mean
    square of the groups' median log ratios (about 0, not about their mean: the band is centred on the
    prediction, whose average bias is not corrected) and the scatter the root mean square of every row
    about its group's median. nan without rows.

    >>> round(group_sigma([0.1, 0.3, -0.2, -0.2], ["a", "a", "b", "b"]), 4)   # medians 0.2, -0.2; scatter 0.1/sqrt(2)
    0.2121
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    r = pd.Series(np.asarray(log_ratio, dtype=float))
    if not len(r):
        return float("nan")
    g = pd.Series(np.asarray(groups)).reset_index(drop=True)
    med = r.groupby(g).median()
    systematic2 = float(np.mean(med.to_numpy() ** 2))
    scatter2 = float(np.mean((r - g.map(med)).to_numpy() ** 2))
    return float(np.sqrt(systematic2 + scatter2))


def leave_one_out_sigma(log_ratio, groups, held) -> float:
    """:func:`group_sigma` of the rows of every group but ``held`` (the group the band is for)."""
    r, g = np.asarray(log_ratio, dtype=float), np.asarray(groups)
    keep = g != held
    return group_sigma(r[keep], g[keep])
