"""DeepBench's sparse GEMMs against :func:`~concurrency_model.timing.sparse.sparse_gemm_time`.

``data/deepbench_sparse.csv`` (origin in ``data/SOURCES.md``): A (m x k, a recurrent layer's weights)
pruned to 90% or 95% zeros times a dense B (k x n, n = 1-6,000), and the same product dense, on the GTX
1080 Ti, TitanX Pascal and TitanXp (CUDA 8; "Sparse Ops: single precision" in the sheets' precision line,
so both columns are fp32: the dense times at n = 1,500 run at 11.6 TFLOP/s, above the boards' int8
GEMM times in ``deepbench_gemm.csv`` for the same shapes by 3.5x). The sparse layout is not recorded; the
model takes CSR. Every row is predicted with the preset and the default efficiency constants (mode
``preset``: nothing fitted on these rows); the phone and Raspberry Pi rows have no preset.

Compared: the sparse time (group ``PRESET csr``) and the dense time (``PRESET dense``) of each row, and, in
:func:`summary`, how often the model says what the measurement says about the one question the sheet asks:
is the sparse product faster than the dense one?

>>> res = evaluate()
>>> int(res["predicted"].notna().sum()), summary(res)["faster_agrees"]
(144, '72 of 72')
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..datasets import load
from ..hardware.devices import load_device
from ..timing.sparse import sparse_gemm_time
from .kernels import DEVICES

TIMES = {"csr": "sparse_time_ms", "dense": "dense_time_ms"}


def rows() -> pd.DataFrame:
    """The measured rows with their file line (``source_line``) and preset (blank where there is none)."""
    df = load("deepbench_sparse")
    return df.assign(source_line=df.index + 2, preset=df["device"].map(DEVICES))


def evaluate(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Per row and kind (``csr``, ``dense``): measured and predicted seconds, APE (a fraction), the row's
    measured and predicted speed-up of the sparse product over the dense one."""
    df = rows() if df is None else df
    out = []
    for r in df.to_dict("records"):
        label = f"{r['sparsity']:.0%} zeros m={r['m']} n={r['n']} k={r['k']}"
        pred = {"csr": np.nan, "dense": np.nan}
        status = "no preset for this device"
        if isinstance(r["preset"], str):
            t = sparse_gemm_time(r["m"], r["n"], r["k"], load_device(r["preset"]), "fp32", float(r["sparsity"]))
            pred = {"csr": t.time_s, "dense": t.detail["dense_time_s"]}
            status = "ok"
        measured_speedup = r["dense_time_ms"] / r["sparse_time_ms"]
        for kind, col in TIMES.items():
            out.append({"row": r["source_line"], "label": label, "device": r["device"], "preset": r["preset"],
                        "kind": kind, "measured": r[col] / 1e3, "predicted": pred[kind], "status": status,
                        "measured_speedup": measured_speedup, "predicted_speedup": pred["dense"] / pred["csr"]})
    res = pd.DataFrame(out)
    return res.assign(ape=(res["predicted"] - res["measured"]).abs() / res["measured"])


def summary(res: pd.DataFrame) -> dict:
    """Median APE per kind and the agreement on whether sparse is faster (one count per row)."""
    ok = res[res["status"] == "ok"]
    out = {f"{kind}_median_ape": float(g["ape"].median()) for kind, g in ok.groupby("kind")}
    one = ok[ok["kind"] == "csr"]
    agree = int(((one["measured_speedup"] > 1) == (one["predicted_speedup"] > 1)).sum())
    out["faster_agrees"] = f"{agree} of {len(one)}"
    return out
