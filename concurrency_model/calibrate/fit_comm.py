"""Fit the latency ``alpha`` (s) and inverse bandwidth ``beta`` (s/byte) of a collective's cost model.

``model(n, P, alpha, beta) -> seconds`` is any vectorised alpha-beta formula (``n`` bytes, ``P`` ranks:
numpy arrays), e.g. a ring all-reduce ``2 (P-1) alpha + 2 (P-1)/P n beta`` (Thakur, Rabenseifner & Gropp,
"Optimization of Collective Communication Operations in MPICH", IJHPCA 19(1), 2005). The fit is least
squares on ``log(predicted / measured)`` (``scipy.optimize.least_squares``, bounds ``alpha, beta >= 0``):
every size weighs by its relative error, so a 20 us 1 KiB transfer counts as much as a 50 ms 64 MiB one.
It starts from a non-negative linear least-squares solution of the relative residuals, which is exact
when the model is linear in ``alpha`` and ``beta`` (as all alpha-beta formulas are).

>>> import numpy as np
>>> ring = lambda n, P, a, b: 2 * (P - 1) * a + 2 * (P - 1) / P * n * b
>>> n = np.array([2.0**k for k in range(10, 27)])
>>> f = fit_alpha_beta(n, 4, ring(n, 4, 20e-6, 1 / 5e9), ring)
>>> round(f.alpha * 1e6, 3), round(f.bw / 1e9, 3), f.median_ape < 1e-6
(20.0, 5.0, True)
"""
from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Callable

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, nnls

Model = Callable[[np.ndarray, np.ndarray, float, float], np.ndarray]


@dataclass(frozen=True)
class AlphaBeta:
    """``alpha`` seconds per message step, ``beta`` seconds per byte (``bw = 1 / beta`` bytes/s), the
    standard deviation ``sigma`` of the log residuals, the median and 90th-percentile absolute percentage
    errors of the fit on its own rows, and the number of rows ``n``."""

    alpha: float
    beta: float
    sigma: float
    median_ape: float
    p90_ape: float
    n: int

    @property
    def bw(self) -> float:
        return 1.0 / self.beta if self.beta > 0 else float("inf")

    def as_dict(self) -> dict:
        return {**asdict(self), "bw": self.bw}


def _arrays(sizes, ranks, times):
    n = np.atleast_1d(np.asarray(sizes, dtype=float))
    p = np.broadcast_to(np.asarray(ranks, dtype=float), n.shape).astype(float)
    t = np.atleast_1d(np.asarray(times, dtype=float))
    if not (n.shape == t.shape and n.ndim == 1):
        raise ValueError(f"times: {t.size} values for {n.size} sizes")
    if len(n) < 2:
        raise ValueError(f"rows: {len(n)} measurements cannot fit alpha and beta")
    if not (np.all(np.isfinite(t)) and np.all(t > 0) and np.all(n > 0)):
        raise ValueError("rows: sizes and times must be positive and finite")
    return n, p, t


def fit_alpha_beta(sizes, ranks, times, model: Model, loss: str = "linear") -> AlphaBeta:
    """``alpha, beta >= 0`` of ``model`` that minimise ``sum log(model(n, P, alpha, beta) / t)^2`` over
    the rows (``sizes`` in bytes, ``ranks`` one count or one per row, ``times`` in seconds).

    ``loss`` is passed to ``least_squares`` (``"soft_l1"`` limits the pull of outliers)."""
    n, p, t = _arrays(sizes, ranks, times)
    ca, cb = (np.asarray(model(n, p, a, b), dtype=float) * np.ones_like(n) for a, b in ((1.0, 0.0), (0.0, 1.0)))
    if not (np.any(ca > 0) or np.any(cb > 0)):
        raise ValueError("model: predicts zero time for every row (one rank?)")
    x0, _ = nnls(np.column_stack([ca / t, cb / t]), np.ones_like(t))  # relative linear residuals
    scale = np.array([np.median(t / np.maximum(ca, 1e-30)), np.median(t / np.maximum(cb, 1e-30))])
    scale = np.where(np.isfinite(scale) & (scale > 0), scale, 1.0)
    tiny = 1e-12 * float(np.min(t))

    def resid(x):
        pred = np.asarray(model(n, p, x[0] * scale[0], x[1] * scale[1]), dtype=float)
        return np.log(np.maximum(pred, tiny) / t)

    start = np.maximum(x0 / scale, 1e-6)
    sol = least_squares(resid, start, bounds=(0.0, np.inf), x_scale="jac", loss=loss, f_scale=0.2,
                        xtol=1e-12, ftol=1e-12, gtol=1e-12)
    x = sol.x if np.sum(resid(sol.x) ** 2) <= np.sum(resid(start) ** 2) else start
    r = resid(x)
    ape = 100.0 * np.abs(np.expm1(r))
    return AlphaBeta(alpha=float(x[0] * scale[0]), beta=float(x[1] * scale[1]), sigma=float(np.std(r)),
                     median_ape=float(np.median(ape)), p90_ape=float(np.percentile(ape, 90)), n=int(len(t)))


def predict(model: Model, fit: AlphaBeta, sizes, ranks) -> np.ndarray:
    """Seconds that ``model`` with the fitted ``alpha, beta`` predicts for ``sizes`` bytes on ``ranks``."""
    n = np.atleast_1d(np.asarray(sizes, dtype=float))
    return np.asarray(model(n, np.broadcast_to(np.asarray(ranks, dtype=float), n.shape), fit.alpha, fit.beta),
                      dtype=float)


# the cost models ``calibrate network`` fits per torch.distributed collective (in its measuring order), and the fits
def _ring(n, p, a, b):
    return (p - 1) * a + (p - 1) / p * n * b


MODELS = {"all_reduce": lambda n, p, a, b: 2 * _ring(n, p, a, b), "all_gather": _ring, "reduce_scatter": _ring,
          "broadcast": lambda n, p, a, b: np.ceil(np.log2(p)) * (a + n * b), "alltoall": _ring}
_R = "(P-1) alpha + (P-1)/P n beta"
MODEL_TEXT = {"all_reduce": "ring: 2(P-1) alpha + 2(P-1)/P n beta", "all_gather": f"ring: {_R}",
              "reduce_scatter": f"ring: {_R}", "alltoall": f"pairwise: {_R}",
              "broadcast": "binomial tree: ceil(log2 P) (alpha + n beta)"}
LOSS = "soft_l1"  # of the fits: the odd slow size (a busy host) pulls less, as in compute's fits


def six_digits(x: float) -> float:  # six significant digits
    return float(f"{x:.6g}")


def fits(rows: pd.DataFrame, ranks: int | None = None) -> dict:
    """``{collective: {alpha_s, beta_s_per_byte, bw_Bps, bw_lower_bound, model, median_ape_pct, p90_ape_pct, rows}}``
    fitted to the rows of ``ranks`` (default: the largest rank count), collectives with >= 2 sizes. ``bw_Bps`` is
    ``1/beta``, unless beta carries under 1% of the largest message's time (a noisy run whose sizes resolve no time
    per byte: beta at or near its bound 0): then the bandwidth that moves that message in its whole time, a lower
    bound (``bw_lower_bound``)."""
    ranks, out = (int(rows["num_ranks"].max()) if len(rows) else 0) if ranks is None else ranks, {}
    for coll in [c for c in MODELS if c in set(rows["collective"])]:
        r = rows[(rows["collective"] == coll) & (rows["num_ranks"] == ranks)]
        if ranks < 2 or len(r) < 2:
            continue
        f = fit_alpha_beta(r["size_bytes"], ranks, r["time_us"] * 1e-6, MODELS[coll], loss=LOSS)
        big = r.loc[r["size_bytes"].idxmax()]
        per_byte, t_big = float(MODELS[coll](float(big["size_bytes"]), float(ranks), 0.0, 1.0)), big["time_us"] * 1e-6
        bound = per_byte * f.beta < 0.01 * t_big
        out[coll] = {"alpha_s": six_digits(f.alpha), "beta_s_per_byte": six_digits(f.beta),
                     "bw_Bps": six_digits(per_byte / t_big if bound else f.bw), "bw_lower_bound": bool(bound),
                     "model": MODEL_TEXT[coll], "median_ape_pct": round(f.median_ape, 2),
                     "p90_ape_pct": round(f.p90_ape, 2), "rows": f.n, "num_ranks": ranks}
    return out
