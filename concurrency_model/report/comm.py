"""Collective algorithms against measured all-reduce sweeps: crossovers and the algorithm ``auto`` picks.

Data: the nccl-tests ``all_reduce_perf`` sweeps of ``data/nccltests_allreduce_sweeps.csv`` (16 ranks on
2 nodes, via :func:`concurrency_model.validate.collectives.rows`); model: :mod:`concurrency_model.comm`
(``collective_time``, ``auto``, ``crossover``, ``lower_bound``; on a cluster preset
:func:`~concurrency_model.comm.on_cluster.collective_on_cluster`).
"""
from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from ..calibrate.fit_comm import fit_alpha_beta
from ..comm import ALGORITHMS, auto, collective_time, crossover, lower_bound
from ..comm.on_cluster import collective_on_cluster
from ..uncertainty import lognormal_band, spreads
from ..validate.collectives import PRESETS, ring, rows, run_settings
from ._plot import bytes_axis, fmt_bytes, legend_outside, new_axes

SYSTEMS = {"oci_a100_2x8_roce": "OCI A100 2 x 8 (RoCE)", "gcp_a3mega_h100_2x8_tcpxo": "GCP A3-Mega H100 2 x 8"}
COLORS = {"recursive_doubling": "tab:blue", "tree": "tab:orange", "ring": "tab:green", "rabenseifner": "tab:red",
          "pipelined_chain": "tab:purple", "double_binary_tree": "tab:brown"}
SHORT = {"recursive_doubling": "rec. doubling", "rabenseifner": "Rabenseifner", "tree": "tree", "ring": "ring",
         "pipelined_chain": "pipelined chain", "double_binary_tree": "double binary tree"}
FIT_MIN_BYTES = 64 * 2**10


def collective_frame(system: str = "oci_a100_2x8_roce", points_per_octave: int = 4) -> dict:
    """Model curves and measurements for one nccl-tests sweep.

    Returns a dict: ``measured`` (``size_bytes, measured_s``), ``alpha``, ``beta`` (a ring all-reduce
    fitted to the measured sizes >= 64 KiB), ``ranks``, ``curves`` (a frame: ``size_bytes``, one column of
    seconds per algorithm of ``ALGORITHMS["allreduce"]`` with that alpha and beta, ``lower_bound``,
    ``auto`` (the name ``auto`` picks) and ``preset`` (``collective_on_cluster`` on the preset nearest the
    system, ``auto``)), ``crossovers`` (a list of ``(alg_a, alg_b, size_bytes)`` where ``auto`` switches)
    and ``preset`` (its name).

    >>> f = collective_frame(points_per_octave=1)
    >>> f["ranks"], sorted(f["curves"].columns)[:2]
    (16, ['auto', 'double_binary_tree'])
    """

    if system not in SYSTEMS:
        raise ValueError(f"system: unknown {system!r}; allowed: {', '.join(SYSTEMS)}")
    m = rows()
    m = m[m["system"] == system].sort_values("size_bytes").reset_index(drop=True)
    ranks, nodes = int(m["ranks"].iloc[0]), int(m["nodes"].iloc[0])
    big = m[m["size_bytes"] >= FIT_MIN_BYTES]
    fit = fit_alpha_beta(big["size_bytes"], ranks, big["measured_s"], ring, loss="soft_l1")
    a, b = fit.alpha, fit.beta
    sizes = 2.0 ** np.arange(3, np.log2(m["size_bytes"].max()) + 1e-9, 1 / points_per_octave)
    algs = ALGORITHMS["allreduce"]
    cur = {"size_bytes": sizes}
    for alg in algs:
        cur[alg] = [float(collective_time("allreduce", alg, x, ranks, a, b)) for x in sizes]
    cur["lower_bound"] = [float(lower_bound("allreduce", x, ranks, a, b)) for x in sizes]
    cur["auto"] = [auto("allreduce", x, ranks, a, b)[0] for x in sizes]
    run = run_settings(system)  # the run's NCCL version and environment, as validate's preset mode
    cur["preset"] = [collective_on_cluster("allreduce", x, ranks, PRESETS[system], ranks // nodes, **run)[1]
                     for x in sizes]
    curves = pd.DataFrame(cur)
    cross = []
    for (x0, a0), (x1, a1) in itertools.pairwise(zip(curves["size_bytes"], curves["auto"])):
        if a0 != a1:
            x = crossover("allreduce", a0, a1, ranks, a, b)
            cross.append((a0, a1, float(x) if x is not None else float(np.sqrt(x0 * x1))))
    return {"system": system, "measured": m[["size_bytes", "measured_s"]], "alpha": a, "beta": b, "ranks": ranks,
            "nodes": nodes, "curves": curves, "crossovers": cross, "preset": PRESETS[system]}


def collective_crossovers(frame: dict | None = None, ax=None):
    """All-reduce time per algorithm in the alpha-beta model (alpha, beta fitted to the measured sweep as a
    ring), the lower bound, ``auto``'s choice as bands along the top with its crossovers, the preset
    cluster model, and the measured nccl-tests points (log-log).

    >>> ax = collective_crossovers(collective_frame(points_per_octave=1))
    >>> ax.get_yscale()
    'log'
    """
    f = collective_frame() if frame is None else frame
    ax = new_axes(ax)
    c, m = f["curves"], f["measured"]
    x = c["size_bytes"].to_numpy()
    for alg in COLORS:
        if alg in c:
            ax.plot(x, c[alg], color=COLORS[alg], lw=1.6, label=SHORT[alg])
    ax.plot(x, c["lower_bound"], color="k", ls="--", lw=1.0, label="lower bound (Chan et al. 2007)")
    ax.plot(x, c["preset"], color="0.4", ls="-.", lw=1.6, label=f"preset {f['preset']}, auto (hierarchical)")
    lo_b, hi_b = lognormal_band(c["preset"].to_numpy(float), spreads()["inter_bw"])  # uncertainty.py: the
    ax.fill_between(x, lo_b, hi_b, color="0.4", alpha=0.12, lw=0,  # presets' spread on nccl-tests
                    label="preset's 80% band")
    ax.scatter(m["size_bytes"], m["measured_s"], s=18, color="k", zorder=5, label="measured (nccl-tests)")
    runs = [(k, [i for i, _ in g]) for k, g in itertools.groupby(enumerate(c["auto"]), key=lambda t: t[1])]
    for k, idx in runs:
        lo = x[idx[0]] if idx[0] == 0 else np.sqrt(x[idx[0] - 1] * x[idx[0]])
        hi = x[idx[-1]] if idx[-1] == len(x) - 1 else np.sqrt(x[idx[-1]] * x[idx[-1] + 1])
        ax.axvspan(lo, hi, ymin=0.93, ymax=1.0, color=COLORS.get(k, "0.5"), alpha=0.3, lw=0)
        ax.text(np.sqrt(lo * hi), 0.965, f"auto: {SHORT.get(k, k)}", transform=ax.get_xaxis_transform(),
                ha="center", va="center", fontsize=8)
    for a0, a1, xc in f["crossovers"]:
        ax.axvline(xc, color="0.3", ls=":", lw=1)
        ax.annotate(f"{SHORT[a0]} = {SHORT[a1]}\nat {fmt_bytes(xc)}", (xc, 0.80), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", fontsize=7.5, va="center")
    bytes_axis(ax, 0, 36, 4)
    ax.set_xlim(x[0], x[-1])
    ax.set_yscale("log")
    ax.set_ylim(max(min(c["lower_bound"].min(), m["measured_s"].min()) / 3, 1e-7), c.drop(
        columns=["size_bytes", "auto"]).to_numpy(float).max() * 8)
    ax.set_xlabel("message size per rank n (bytes)")
    ax.set_ylabel("all-reduce time (s)")
    ax.set_title(f"{SYSTEMS.get(f['system'], f['system'])}: all-reduce on P = {f['ranks']} ranks, "
                 f"alpha = {f['alpha'] * 1e6:.1f} µs, 1/beta = {1 / f['beta'] / 1e9:.0f} GB/s (fitted)", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax, "right")
    return ax


__all__ = ["collective_frame", "collective_crossovers", "SYSTEMS"]
