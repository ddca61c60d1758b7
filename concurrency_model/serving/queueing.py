"""Waiting for a free slot: the queue in front of a continuous-batching engine under a load [D].

Requests arrive at random (Poisson, rate ``lambda``) and each holds one of the engine's ``c`` slots for its
service time ``S`` (its generated tokens times an iteration, :mod:`concurrency_model.serving.continuous_batching`); the offered
load ``a = lambda E[S]`` is the mean number of busy slots (Little's law). That is a G/G/c queue:

* **Erlang C** (Erlang 1917; Kleinrock, *Queueing Systems* vol. 1, 1975, ch. 3, M/M/m): the probability that an
  arrival finds every slot busy, ``C(c, a) = c B / (c - a (1 - B))`` with Erlang's loss probability ``B(c, a)``
  from the recursion ``B(0) = 1, B(k) = a B(k - 1) / (k + a B(k - 1))`` (numerically stable for hundreds of
  slots). The mean wait of M/M/c is ``C(c, a) E[S] / (c - a)``.
* **Allen-Cunneen** (Allen, *Probability, Statistics, and Queueing Theory*, 2nd ed., 1990): for general
  service times the M/M/c wait times ``(c_a^2 + c_s^2) / 2``, the squared coefficients of variation of the
  inter-arrival times (1 for Poisson arrivals) and of the service times. A request's service time is its length
  times an iteration, so ``c_s^2`` is that of the output lengths (:mod:`concurrency_model.serving.output_lengths`): 0 for fixed
  lengths, which halves the exponential case's wait.

* **Percentiles**: in M/M/c a waiting request's wait is exponential with mean ``E[S] / (c - a)``, so
  ``P(W > t) = C(c, a) exp(-t (c - a) / E[S])`` (Kleinrock, ch. 3); for general service times the same
  exponential tail with the Allen-Cunneen mean (the heavy-traffic approximation, Kingman 1962: near saturation
  the wait of a G/G queue is exponential) gives the ``q``-quantile ``max(0, W_c ln(C / (1 - q)))``, ``W_c`` the
  mean wait of those who wait [D].

The iteration's time is taken at the mean occupancy (a fuller engine's iterations are slower: the spread of
occupancy around its mean is not priced). At ``a >= c`` the queue grows without bound.
"""
from __future__ import annotations

import math

from ..checks import EXACT, number


def erlang_c(c: int, a: float) -> float:
    """Probability that an arrival waits in an M/M/c queue with offered load ``a`` (< c) in ``c`` servers.

    >>> erlang_c(1, 0.5)            # M/M/1: the utilisation
    0.5
    >>> round(erlang_c(2, 1.0), 12)  # two servers at half load: 1/3
    0.333333333333
    """
    if not 0 <= a < c:
        raise ValueError(f"load: an offered load of {a:g} does not fit {c} servers (the queue grows without bound)")
    b = 1.0
    for k in range(1, c + 1):
        b = a * b / (k + a * b)
        if b == 0.0:  # underflowed (far more servers than load): it stays 0, and so does the answer
            return 0.0
    return c * b / (c - a * (1 - b))


def mean_wait(c: int, a: float, service_s: float, cs2: float, ca2: float = 1.0) -> float:
    """Mean seconds a request waits for a slot (Allen-Cunneen, module docstring): ``C(c, a) E[S] / (c - a)`` times
    ``(ca2 + cs2) / 2``.

    >>> mean_wait(1, 0.5, 2.0, 1.0)  # M/M/1: rho S / (1 - rho) = 0.5 x 2 / 0.5
    2.0
    >>> mean_wait(1, 0.5, 2.0, 0.0)  # M/D/1 (Pollaczek-Khinchine): half of it
    1.0
    """
    return erlang_c(c, a) * service_s / (c - a) * (ca2 + cs2) / 2


def wait_quantile(c: int, a: float, service_s: float, cs2: float, q: float, ca2: float = 1.0) -> float:
    """Seconds within which a fraction ``q`` of the requests get a slot (module docstring: 0 when fewer than
    ``1 - q`` wait at all).

    >>> round(wait_quantile(1, 0.5, 2.0, 1.0, 0.99), 4)  # M/M/1: P(W > t) = 0.5 exp(-t / 4)
    15.6481
    >>> wait_quantile(4, 1.0, 1.0, 0.0, 0.9)  # 2% wait at all: the 90th percentile waits not
    0.0
    """
    number("q", q, high=1)  # a quantile
    p = erlang_c(c, a)
    if p <= 1 - q:
        return 0.0
    return mean_wait(c, a, service_s, cs2, ca2) / p * math.log(p / (1 - q))


def replicas_for(load_rps: float, slots: int, service_s: float, cs2: float,
                 max_wait_s: float | None = None) -> tuple[int, float]:
    """``(replicas, mean wait)``: the fewest replicas of ``slots`` slots each, a request holding one for
    ``service_s``, that carry ``load_rps`` (split evenly) with a stable queue, ``load / replicas x service_s < slots``,
    and a mean wait within ``max_wait_s`` when given (``<= 0``: none can, the fewest stable ones are returned).

    10 requests a second holding a slot for 1 s keep 10 slots busy: 3 replicas of 4 slots carry them (3.3 busy in
    each), a request waiting 0.49 s on average; a mean wait within 10 ms takes 8.

    >>> r, w = replicas_for(10.0, 4, 1.0, 0.0)
    >>> r, round(w, 2)
    (3, 0.49)
    >>> replicas_for(10.0, 4, 1.0, 0.0, max_wait_s=0.01)[0]
    8
    """
    def wait(r):
        return mean_wait(slots, load_rps / r * service_s, service_s, cs2)

    def stable(r):
        return load_rps / r * service_s < slots

    if not load_rps * service_s / slots < EXACT:  # past it, r and r + 1 replicas are the same float
        raise ValueError(f"load_rps: {load_rps:g} requests a second would take {load_rps * service_s / slots:.3g} "
                         "replicas, past 2**53")
    lo = int(load_rps * service_s // slots) + 1  # the fewest with a stable queue, up to rounding: settled below
    while lo > 1 and stable(lo - 1):
        lo -= 1
    while not stable(lo):
        lo += 1
    if max_wait_s is None or max_wait_s <= 0 or wait(lo) <= max_wait_s:
        return lo, wait(lo)
    hi = 2 * lo
    while wait(hi) > max_wait_s:  # the wait falls as replicas are added: double, then bisect
        lo, hi = hi, 2 * hi
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if wait(mid) <= max_wait_s else (mid, hi)
    return hi, wait(hi)
