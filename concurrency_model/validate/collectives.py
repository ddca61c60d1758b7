"""Measured all-reduce times against the alpha-beta model (``data/nccltests_allreduce_sweeps.csv``,
``data/deepbench_allreduce.csv``).

* ``fitted``: per system (an nccl-tests run; a DeepBench device, implementation and tier: one node or
  several), alpha and beta of the ring all-reduce ``2(P-1) alpha + 2(P-1)/P n beta`` fitted on every other
  message size (in size order) and predicted on the others; errors are reported for sizes >= 64 KiB
  (the issue's target). The nccl-tests sweeps (8 B to 8 GiB) are fitted on that range only, with two
  (alpha, beta) pairs and the faster of the two per size: NCCL picks, per size, the fastest protocol
  (LL, LL128, Simple), each with its own latency and bandwidth (training-formulas §6.3-6.4, NCCL's
  ``tuning.cc``), so one alpha-beta line cannot follow its 64 KiB - 8 GiB sweep.
* ``preset``: the nccl-tests sweeps from the cluster presets alone (``dgx-a100`` for the 2 x 8 A100 run,
  ``dgx-h100`` for the 2 x 8 H100 run, whose GCP A3-Mega nodes have 200 Gb/s NICs where DGX H100 has
  400: the preset is the nearest, not the same system), through :func:`~concurrency_model.comm.on_cluster.
  collective_on_cluster` with ``auto``.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from ..calibrate.fit_comm import fit_alpha_beta
from ..comm.on_cluster import collective_on_cluster
from ..datasets import load

MIN_TARGET_BYTES = 64 * 1024
PRESETS = {"oci_a100_2x8_roce": "dgx-a100", "gcp_a3mega_h100_2x8_tcpxo": "dgx-h100"}


def ring(n, P, alpha, beta):
    """Ring all-reduce (Thakur, Rabenseifner & Gropp 2005; the paper's T_pipe)."""
    return 2 * (P - 1) * alpha + 2 * (P - 1) / P * n * beta


def protocols(n, P, a1, b1, a2, b2):
    """The faster of two ring all-reduce protocols (a low-latency and a high-bandwidth one), per size."""
    return np.minimum(ring(n, P, a1, b1), ring(n, P, a2, b2))


def fit_protocols(n, P, t) -> tuple[float, float, float, float]:
    """``(a1, b1, a2, b2)`` of :func:`protocols` by least squares on log(predicted/measured) (soft-L1),
    started from a low-latency/low-bandwidth and a high-latency/high-bandwidth guess."""
    n, P, t = (np.asarray(x, dtype=float) for x in (n, P, t))
    one = fit_alpha_beta(n, P, t, ring, loss="soft_l1")
    best = None
    for lat, bw in ((0.1, 5.0), (0.3, 2.0)):
        x0 = np.log([max(one.alpha * lat, 1e-9), one.beta * bw, max(one.alpha, 1e-9), one.beta / bw])
        r = least_squares(lambda x: np.log(protocols(n, P, *np.exp(x)) / t), x0, loss="soft_l1", f_scale=0.2)
        if best is None or r.cost < best.cost:
            best = r
    return tuple(float(v) for v in np.exp(best.x))


def rows() -> pd.DataFrame:
    """All measured all-reduce rows: ``system, source, ranks, nodes, size_bytes, measured_s``."""
    nt = load("nccltests_allreduce_sweeps")
    nt = nt[nt["collective"] == "all_reduce"]
    a = pd.DataFrame({"system": nt["run_id"], "source": "nccl-tests", "ranks": nt["num_ranks"],
                      "nodes": nt["num_nodes"], "size_bytes": nt["size_bytes"].astype(float),
                      "measured_s": nt["oop_time_us"] * 1e-6})
    db = load("deepbench_allreduce")
    tier = np.where(db["num_nodes"] > 1, "multi-node", "one node")
    b = pd.DataFrame({"system": db["device"] + " / " + db["algorithm"] + " / " + tier, "source": "DeepBench",
                      "ranks": db["num_ranks"], "nodes": db["num_nodes"], "size_bytes": db["size_floats"] * 4.0,
                      "measured_s": db["mean_time_ms"] * 1e-3})
    out = pd.concat([a, b], ignore_index=True)
    return out[out["measured_s"] > 0].sort_values(["system", "ranks", "size_bytes"]).reset_index(drop=True)


def fitted(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Held-out predictions per system (alpha, beta fitted on the other half of its sizes)."""
    df = rows() if df is None else df
    out = []
    for system, g in df.groupby("system", sort=False):
        g = g.sort_values(["size_bytes", "ranks"]).reset_index(drop=True)
        if (g["size_bytes"] >= MIN_TARGET_BYTES).sum() >= 6:  # long sweeps: one line for the target range
            g = g[g["size_bytes"] >= MIN_TARGET_BYTES].reset_index(drop=True)
        train, test = g.iloc[::2], g.iloc[1::2].copy()
        if len(train) < 2 or len(test) < 1:
            continue
        n, P = test["size_bytes"].to_numpy(), test["ranks"].to_numpy()
        if len(train) >= 8 and g["ranks"].nunique() == 1:  # a long sweep at one rank count: two protocols
            a1, b1, a2, b2 = fit_protocols(train["size_bytes"], train["ranks"], train["measured_s"])
            test["predicted_s"] = protocols(n, P, a1, b1, a2, b2)
            test["alpha_s"], test["beta_s_per_byte"] = a2, b2  # the large-message protocol
            test["model"] = "two protocols"
        else:
            f = fit_alpha_beta(train["size_bytes"], train["ranks"], train["measured_s"], ring, loss="soft_l1")
            test["predicted_s"] = ring(n, P, f.alpha, f.beta)
            test["alpha_s"], test["beta_s_per_byte"] = f.alpha, f.beta
            test["model"] = "ring"
        out.append(test)
    res = pd.concat(out, ignore_index=True)
    res["ape"] = (res["predicted_s"] - res["measured_s"]).abs() / res["measured_s"] * 100
    res["mode"] = "fitted"
    return res


def preset(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The nccl-tests sweeps predicted from the cluster presets (no fitting)."""
    df = rows() if df is None else df
    res = df[df["system"].isin(PRESETS)].copy()
    pred = []
    for _, r in res.iterrows():
        _, t, _ = collective_on_cluster("allreduce", r["size_bytes"], int(r["ranks"]), PRESETS[r["system"]],
                                        int(r["ranks"] // r["nodes"]))
        pred.append(t)
    res["predicted_s"] = pred
    res["ape"] = (res["predicted_s"] - res["measured_s"]).abs() / res["measured_s"] * 100
    res["mode"] = "preset"
    return res


def summary(res: pd.DataFrame, min_bytes: float = MIN_TARGET_BYTES) -> pd.DataFrame:
    """Median and max APE per mode and system, over sizes >= ``min_bytes``."""
    r = res[res["size_bytes"] >= min_bytes]
    g = r.groupby(["mode", "system"])["ape"]
    return pd.DataFrame({"rows": g.size(), "median_ape": g.median(), "max_ape": g.max()}).reset_index()
