"""Model consistency (paper §7.1, Figs. 20 and 23): synchronous with stragglers, stale-synchronous,
asynchronous, local SGD.

The paper defines the spectrum (synchronous: every worker sees the latest weights; stale-synchronous
parallelism, SSP: "the gradient staleness is enforced to be bounded"; asynchronous: no locks, bounded
staleness assumed by the proofs; model averaging at the far end, §7.4) [S1] but gives **no timing
formulas**. The times below come from order statistics and are **not the paper's**: each docstring names
its source or marks the model derived [D].

Compute time per step of a worker is a random variable ``X``, i.i.d. over workers and steps, given by
``dist`` and its mean (seconds): ``"deterministic"`` (``X = mean``), ``"exponential"`` (mean ``mean``),
``"shifted_exponential"`` (``X = shift + Exp(mean - shift)``, the straggler model of Lee et al.,
"Speeding up distributed machine learning using codes", IEEE Trans. Inf. Theory 64(3), 2018) and
``"gaussian"`` (``N(mean, std**2)``). ``mean`` is always ``E[X]``.

>>> round(expected_max(8, "exponential", 1.0), 4)      # H_8
2.7179
"""
from __future__ import annotations

import math
import numbers

import numpy as np
import sympy as sp

from ..choices import CONSISTENCY
from ..checks import count
from ..comm.checks import as_value, check_name, check_ranks, is_num

__all__ = ["DISTRIBUTIONS", "expected_order_statistic", "expected_max", "expected_max_monte_carlo",
           "sync_step_time", "ssp_step_time", "ssp_simulate", "async_throughput", "staleness_pmf",
           "mean_staleness", "local_sgd_step_time", "sample_times", "CONSISTENCY", "step_factors"]

DISTRIBUTIONS = ("deterministic", "exponential", "shifted_exponential", "gaussian")
GAUSSIAN_METHODS = ("blom", "gumbel", "exact")
BLOM_ALPHA = sp.Rational(3, 8)  # Blom 1958


def _real(field: str, v, *, positive: bool = False):
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, sp.Basic)):
        raise ValueError(f"{field}: must be a real number or a sympy expression, got {v!r}")
    x = sp.sympify(v)
    if is_num(x) and (not x.is_finite or x < 0 or (positive and not x > 0)):
        raise ValueError(f"{field}: must be {'> 0' if positive else '>= 0'} and finite, got {v!r}")
    return x


def _params(dist, mean, std, shift):
    """Checked ``(dist, mean, std, shift)``; ``std`` and ``shift`` set to what ``dist`` implies."""
    check_name("dist", dist, DISTRIBUTIONS)
    mean = _real("mean", mean)
    if dist == "gaussian":
        if std is None:
            raise ValueError("std: required for dist='gaussian'")
        return dist, mean, _real("std", std), sp.Integer(0)
    if dist == "shifted_exponential":
        shift = _real("shift", shift)
        if is_num(shift) and is_num(mean) and shift > mean:
            raise ValueError(f"shift: must be <= mean = {mean} (X = shift + Exp(mean - shift)), got {shift}")
        return dist, mean, mean - shift, shift
    return dist, mean, (mean if dist == "exponential" else sp.Integer(0)), sp.Integer(0)


def _norm_ppf(q):
    """Standard normal quantile ``sqrt(2) erfinv(2q - 1)`` (symbolic, or a float via scipy)."""
    if is_num(q):
        from scipy.special import ndtri
        return sp.Float(float(ndtri(float(q))))
    return sp.sqrt(2) * sp.erfinv(2 * q - 1)


def _harmonic(k):
    """``H_k`` (``sympy.harmonic`` for symbols; ``digamma(k + 1) + Euler's gamma`` for numbers)."""
    if not is_num(k):
        return sp.harmonic(k)
    if k < 64:
        return sp.Float(math.fsum(1 / i for i in range(1, int(k) + 1)))
    from scipy.special import digamma
    return sp.Float(float(digamma(int(k) + 1)) + 0.5772156649015329)


def _gaussian_exact(r: int, P: int) -> float:
    """E of the r-th smallest of P standard normals by quadrature of the order-statistic density."""
    from scipy import integrate, special, stats

    logc = special.gammaln(P + 1) - special.gammaln(r) - special.gammaln(P - r + 1)

    def f(x):
        return x * math.exp(logc + (r - 1) * stats.norm.logcdf(x) + (P - r) * stats.norm.logsf(x)
                            + stats.norm.logpdf(x))
    return integrate.quad(f, -12, 12, limit=200, points=[0.0])[0]


def expected_order_statistic(r, P, dist: str = "gaussian", mean=1.0, std=None, shift=0, method: str = "blom"):
    """Expected ``r``-th smallest of ``P`` i.i.d. step times, ``E[X_(r:P)]`` (seconds).

    * exponential: ``mean (H_P - H_{P-r})``, exact (Renyi's representation of exponential order
      statistics, Renyi 1953; David & Nagaraja, *Order Statistics*, 3rd ed., 2003); shifted: ``shift +`` that with
      ``mean - shift``;
    * gaussian, ``method="blom"``: ``mean + std Phi^-1((r - 3/8) / (P + 1/4))`` (Blom, *Statistical
      Estimates and Transformed Beta-Variables*, 1958); exact at ``P = 1`` and within 0.03 ``std`` of the
      quadrature below for the maximum up to P = 4096 (see the tests);
      ``"gumbel"`` (``r = P`` only): ``mean + std (a_P + 0.5772 b_P)`` with ``b_P = 1/sqrt(2 ln P)``,
      ``a_P = sqrt(2 ln P) - (ln ln P + ln 4 pi) b_P / 2`` (the extreme-value (Gumbel) limit of the normal
      maximum; David & Nagaraja 2003): asymptotic, poor for small P (+0.18 ``std`` at P = 2, +0.02 at 4096);
      ``"exact"``: numerical quadrature (numbers only).

    >>> round(expected_order_statistic(2, 4, "exponential", 1), 6)  # 1/4 + 1/3
    0.583333
    >>> from concurrency_model.symbols import P
    >>> expected_order_statistic(P, P, "exponential", 2)
    2*harmonic(P)
    """
    dist, mean, scale, shift = _params(dist, mean, std, shift)
    P = check_ranks(P, "P")
    r = check_ranks(r, "r")
    if is_num(P) and is_num(r) and r > P:
        raise ValueError(f"r: must be <= P = {P}, got {r}")
    check_name("method", method, GAUSSIAN_METHODS)
    if dist == "deterministic":
        return as_value(mean)
    if dist in ("exponential", "shifted_exponential"):
        return as_value(shift + scale * (_harmonic(P) - _harmonic(P - r)))
    if method == "blom":
        return as_value(mean + scale * _norm_ppf((r - BLOM_ALPHA) / (P + sp.Rational(1, 4))))
    if method == "gumbel":
        if not (is_num(r - P) and r == P):
            raise ValueError("r: method='gumbel' gives the maximum only (r = P)")
        if is_num(P) and P == 1:
            return as_value(mean)
        L = sp.sqrt(2 * sp.log(P))
        a = L - (sp.log(sp.log(P)) + sp.log(4 * sp.pi)) / (2 * L)
        return as_value(mean + scale * (a + sp.EulerGamma / L))
    if not (is_num(P) and is_num(r)):
        raise ValueError("method: 'exact' needs numbers for P and r")
    return as_value(mean + scale * _gaussian_exact(int(r), int(P)))


def expected_max(P, dist: str = "gaussian", mean=1.0, std=None, shift=0, method: str = "blom"):
    """Expected maximum of ``P`` i.i.d. step times: a synchronous step waits for the slowest worker.

    ``expected_order_statistic(P, P, ...)``; equals ``mean`` at ``P = 1`` and grows with ``P``
    (exponential: ``mean H_P ~ mean ln P``; gaussian: ``~ mean + std sqrt(2 ln P)``).

    >>> round(expected_max(16, "gaussian", 1.0, 0.1), 4)
    1.1769
    """
    return expected_order_statistic(P, P, dist, mean, std, shift, method)


def sample_times(rng: np.random.Generator, size, dist: str = "gaussian", mean=1.0, std=None, shift=0) -> np.ndarray:
    """Random step times of ``dist`` (numbers only), for Monte-Carlo checks and :func:`ssp_simulate`."""
    dist, mean, scale, shift = _params(dist, mean, std, shift)
    mean, scale, shift = float(mean), float(scale), float(shift)
    if dist == "deterministic":
        return np.full(size, mean)
    if dist == "gaussian":
        return rng.normal(mean, scale, size)
    return shift + rng.exponential(scale, size)


def expected_max_monte_carlo(P: int, dist: str = "gaussian", mean=1.0, std=None, shift=0, samples: int = 20000,
                             seed: int = 0, r: int | None = None) -> float:
    """Monte-Carlo estimate of ``E[X_(r:P)]`` (default the maximum) from ``samples`` seeded draws.

    >>> abs(expected_max_monte_carlo(8, "exponential", 1.0) - expected_max(8, "exponential", 1.0)) < 0.03
    True
    """
    P = int(check_ranks(P, "P"))
    r = P if r is None else int(check_ranks(r, "r"))
    x = np.sort(sample_times(np.random.default_rng(seed), (int(samples), P), dist, mean, std, shift), axis=1)
    return float(x[:, r - 1].mean())


def sync_step_time(P, dist: str = "gaussian", mean=1.0, std=None, shift=0, comm_s=0, backup: int = 0,
                   method: str = "blom"):
    """Synchronous step: wait for the slowest of ``P`` workers, then synchronise (``comm_s``).

    ``E[X_(P-b:P)] + comm_s``; with ``backup = b`` backup workers the step uses the first ``P - b`` gradients
    and drops the stragglers (Chen, Pan, Monga, Bengio & Jozefowicz, "Revisiting Distributed Synchronous
    SGD", arXiv:1604.00981, 2016). The barrier is the paper's synchronous model (§7.1); the order-statistic
    time is [D].

    >>> sync_step_time(4, "exponential", 1.0, comm_s=0.5)      # H_4 + 0.5
    2.5833333333333335
    >>> round(sync_step_time(4, "exponential", 1.0, backup=1), 4)  # H_4 - H_1
    1.0833
    """
    P = check_ranks(P, "P")
    count("backup", backup, low=0)
    if is_num(P) and backup >= P:
        raise ValueError(f"backup: must be < P = {P}, got {backup}")
    t = expected_order_statistic(P - backup, P, dist, mean, std, shift, method)
    return as_value(t + _real("comm_s", comm_s))


def _staleness(s):
    if s is math.inf or s == sp.oo:
        return math.inf
    if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
        raise ValueError(f"staleness: must be an integer >= 0 or math.inf, got {s!r}")
    return int(s)


def ssp_step_time(P, staleness, dist: str = "gaussian", mean=1.0, std=None, shift=0, comm_s=0,
                  method: str = "blom"):
    """Mean seconds per step of a worker under stale-synchronous parallelism with bound ``staleness = s``.

    Model [D] (a window bound, not the paper's): SSP lets a worker run at most ``s`` steps ahead of the
    slowest (Ho et al., "More effective distributed ML via a stale synchronous parallel parameter server",
    NIPS 2013; the paper's Fig. 20d). A barrier every ``s + 1`` steps obeys that bound, and SSP is the
    least constrained schedule that obeys it, so SSP is at least as fast as

        T(s) = E[ max_i sum_{t=1..s+1} (X_it + comm_s) ] / (s + 1)

    which is **exact at s = 0** (synchronous: ``E[max X] + comm_s``) and tends to the asynchronous
    ``mean + comm_s`` as ``s -> inf`` (law of large numbers); :func:`ssp_simulate` gives the exact SSP
    time of the same random model, and the tests check it lies between the two. Closed forms: gaussian
    ``mean + std z_P / sqrt(s + 1)`` (``z_P`` the expected maximum of P standard normals, Blom);
    exponential / shifted: quadrature of the maximum of P Gamma(s + 1) sums (numbers only for s >= 1).
    Throughput of the cluster: ``P / T(s)`` steps per second.

    >>> round(ssp_step_time(8, 0, "exponential", 1.0), 4), round(ssp_step_time(8, 3, "exponential", 1.0), 4)
    (2.7179, 1.8079)
    >>> ssp_step_time(8, float("inf"), "exponential", 1.0)
    1.0
    """
    s = _staleness(staleness)
    dist, mean, scale, shift = _params(dist, mean, std, shift)
    P = check_ranks(P, "P")
    comm = _real("comm_s", comm_s)
    if s == math.inf:
        return as_value(mean + comm)
    if s == 0 or dist == "deterministic" or (is_num(scale) and not scale > 0):
        return sync_step_time(P, dist, mean, scale if dist == "gaussian" else None, shift, comm, method=method)
    if dist == "gaussian":
        z = expected_max(P, "gaussian", 0, 1, method=method)
        return as_value(mean + comm + scale * z / sp.sqrt(s + 1))
    if not (is_num(P) and is_num(scale)):
        raise ValueError("P: the exponential window model with staleness >= 1 needs numbers for P and mean")
    from scipy import integrate, stats

    k, th, Pn = s + 1, float(scale), int(P)
    g = stats.gamma(k, scale=th)
    hi = g.ppf(1 - 1e-14 / Pn)
    emax = integrate.quad(lambda x: -math.expm1(Pn * g.logcdf(x)), 0, hi, limit=200)[0]
    return as_value(shift + comm + sp.Float(emax) / k)


def ssp_simulate(P: int, staleness, dist: str = "gaussian", mean=1.0, std=None, shift=0, comm_s=0.0,
                 steps: int = 2000, seed: int = 0) -> float:
    """Mean seconds per step of SSP with bound ``staleness``, simulated (numbers only).

    Worker ``i`` may start its step ``t`` when it has finished step ``t - 1`` and every worker has finished
    step ``t - s - 1`` (no worker more than ``s`` steps ahead of the slowest); step times are
    ``X_it + comm_s`` i.i.d. Returns the time all workers need for ``steps`` steps, divided by ``steps``.

    >>> ssp_simulate(4, 0, "deterministic", 1.0, steps=10)
    1.0
    """
    s = _staleness(staleness)
    P, steps = int(check_ranks(P, "P")), int(check_ranks(steps, "steps"))
    x = sample_times(np.random.default_rng(seed), (steps, P), dist, mean, std, shift) + float(comm_s)
    if s == math.inf or s >= steps:
        return float(x.sum(axis=0).max() / steps)
    end = np.zeros((steps, P))
    prev = np.zeros(P)
    for t in range(steps):
        gate = end[t - s - 1].max() if t - s - 1 >= 0 else 0.0
        prev = np.maximum(prev, gate) + x[t]
        end[t] = prev
    return float(end[-1].max() / steps)


def async_throughput(mean_times, P=None, server_s=0):
    """Asynchronous updates per second: ``min(sum_i 1/E[T_i], 1/server_s)`` [D].

    No worker waits (HOGWILD / Downpour, the paper's §7.1), so the rates add; ``mean_times`` are the
    workers' mean seconds per iteration (compute plus their own push/pull): a list, or one number for
    ``P`` identical workers. A parameter server that spends ``server_s`` seconds of its link per update
    caps the total (the "subject to server contention" of paper-models.md §5.2; queueing delays below the
    cap are ignored).

    >>> async_throughput([1.0, 2.0, 2.0])
    2.0
    >>> async_throughput(1.0, P=8, server_s=0.25)
    4.0
    """
    if P is not None:
        rate = check_ranks(P, "P") / _real("mean_times", mean_times, positive=True)
    else:
        if isinstance(mean_times, (numbers.Real, sp.Basic)):
            raise ValueError("P: required when mean_times is one number")
        ts = [_real(f"mean_times[{i}]", t, positive=True) for i, t in enumerate(mean_times)]
        if not ts:
            raise ValueError("mean_times: at least one worker")
        rate = sum(1 / t for t in ts)
    server_s = _real("server_s", server_s)
    if is_num(server_s) and not server_s > 0:
        return as_value(rate)
    return as_value(sp.Min(rate, 1 / server_s))


def mean_staleness(P):
    """Mean staleness of an asynchronous update: ``P - 1`` [D].

    Between a worker's read of the weights and its write, each of the other ``P - 1`` workers (same rate)
    writes once on average. Holds for any i.i.d. step-time law in steady state; for exponential times the
    whole distribution is :func:`staleness_pmf`.

    >>> mean_staleness(8)
    7.0
    """
    return as_value(check_ranks(P, "P") - 1)


def staleness_pmf(P, k):
    """``Pr[staleness = k] = (1/P) (1 - 1/P)**k``: geometric, mean ``P - 1`` [D].

    With exponential step times the next write is the reading worker's own with probability ``1/P`` (a race
    of ``P`` equal Poisson clocks), so the number of foreign writes before it is geometric; the geometric
    staleness model is the one of Mitliagkas, Zhang, Hadjis & Re, "Asynchrony begets momentum", Allerton 2016.

    >>> staleness_pmf(2, 0), staleness_pmf(2, 1)
    (0.5, 0.25)
    """
    P = check_ranks(P, "P")
    if isinstance(k, bool) or not isinstance(k, (numbers.Integral, sp.Basic)) or (is_num(k) and k < 0):
        raise ValueError(f"k: must be an integer >= 0, got {k!r}")
    return as_value((1 - 1 / P) ** k / P)


def local_sgd_step_time(P, tau, dist: str = "gaussian", mean=1.0, std=None, shift=0, comm_s=0,
                        method: str = "blom"):
    """Mean seconds per step of local SGD / model averaging every ``tau`` steps [D].

    Workers take ``tau`` local steps, then average their models (one allreduce, ``comm_s``): the
    synchronisation is amortised over ``tau`` (paper-models.md §5.4: ``T_comm / tau`` [D]; local SGD: Stich,
    "Local SGD converges fast and communicates little", ICLR 2019; Lin et al., "Don't use large mini-batches,
    use local SGD", ICLR 2020; federated averaging, McMahan et al. 2017). The averaging is a barrier every
    ``tau`` steps, so stragglers are paid as in the SSP window with ``s = tau - 1``:
    ``T = E[max_i sum_tau X_it] / tau + comm_s / tau``; ``tau = 1`` is synchronous SGD.

    Synchronous EASGD (Zhang, Choromanska & LeCun 2015; paper §7.4, paper-models §5.4 [M]) has the same
    time: every ``tau`` steps each worker meets the centre variable with its whole model (the centre's
    update needs the workers' mean: one all-reduce, or a push and pull of the model through parameter
    servers, ``training.sync``); its elastic force changes convergence, not the step. Use ``local_sgd``.

    >>> local_sgd_step_time(4, 4, "deterministic", 1.0, comm_s=0.4)
    1.1
    """
    count("tau", tau)
    t = ssp_step_time(P, tau - 1, dist, mean, std, shift, 0, method)
    return as_value(t + _real("comm_s", comm_s) / tau)


def step_factors(replicas, consistency: str = "synchronous", straggler_cv=0.0, staleness: int = 0,
                 local_steps: int = 1) -> tuple:
    """``(straggle, sync_frac)`` of a training step under ``consistency``, numpy-vectorised over ``replicas``
    (the data-parallel replicas that meet at the synchronisation); what :mod:`.compose` multiplies in [D].

    A replica's compute per step (everything but its data-parallel synchronisation) is gaussian with mean
    ``C`` and standard deviation ``straggler_cv x C``; the step becomes ``C (1 + straggle) + sync_frac x
    (exposed synchronisation)``, the gaussian forms of this module with ``z_P`` by Blom's approximation
    (:func:`expected_order_statistic`):

    * ``synchronous``: ``straggle = cv z_P`` (:func:`sync_step_time`), ``sync_frac = 1``;
    * ``ssp`` with bound ``s``: ``cv z_P / sqrt(s + 1)`` (:func:`ssp_step_time`, its window model);
    * ``local_sgd`` every ``tau`` steps: ``cv z_P / sqrt(tau)`` and ``sync_frac = 1 / tau``
      (:func:`local_sgd_step_time`; the averaging is not overlapped);
    * ``asynchronous``: nobody waits (:func:`async_throughput`): ``straggle = 0``, ``sync_frac = 1``.

    >>> s, f = step_factors(8, "synchronous", 0.1)
    >>> round(s, 4), f
    (0.1434, 1.0)
    >>> s, f = step_factors([1, 8], "local_sgd", 0.1, local_steps=4)
    >>> s.round(4).tolist(), f.tolist()
    ([0.0, 0.0717], [0.25, 0.25])
    """
    check_name("consistency", consistency, CONSISTENCY)
    P = np.asarray(replicas, dtype=float)
    window = {"synchronous": 1, "ssp": staleness + 1, "local_sgd": local_steps, "asynchronous": math.inf}[consistency]
    if window == math.inf or not straggler_cv:  # nobody waits: 0 (z_P is finite and >= 0), without importing scipy
        straggle = np.zeros_like(P)
    else:
        from scipy.special import ndtri
        z = ndtri((P - 0.375) / (P + 0.25))  # Blom 1958: z_1 = 0
        straggle = float(straggler_cv) * z / math.sqrt(window)
    sync_frac = 1.0 / local_steps if consistency == "local_sgd" else 1.0
    if np.ndim(P) == 0:  # one number in, floats out
        return float(straggle), sync_frac
    return straggle, np.full_like(P, sync_frac)
