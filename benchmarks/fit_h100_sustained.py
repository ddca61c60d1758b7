"""Fit of the GH100's sustained math rate (``efficiency.sustained`` of the H100 / H200 device presets) on ONE set:
llm-foundry's H100 80GB bf16 runs (``data/llmfoundry_mpt_train_throughput.csv``, precision ``amp_bf16`` / ``bf16``
on ``h100_80gb``; MPT 125M-70B under PyTorch FSDP, 8-512 GPUs).

The kernel model (80% of the datasheet peak for a large GEMM, within 5% of the best measured H100 GEMM) predicts every
H100 training set fast (llm-foundry H100 bf16, torchtitan, NeMo's H100 rows): a long training step sustains less
math than a short microbenchmark (the board's power limit lowers its clocks under sustained load). ``sustained`` scales
the arithmetic of every kernel of a training step (not single-kernel timings). The constant is one number for every
GH100 board (H100 SXM5, H200, torchtitan's H100 96 GB), fitted here once: the grid value with the least median APE
of tokens/s over every ``--every``-th row of the fit set. Every other set is held out (torchtitan, Megatron-Bridge,
NeMo: ``benchmarks/accuracy.py``; inference is not scaled).
Prints JSON: median APE per grid value and the best value. About 4 minutes on 2 cores with ``--every 3``.

``--kappa`` fits, jointly with ``sustained`` on the same rows, the GH100 nodes' overlap interference: the
``overlap_slowdown`` of both tiers of the GH100 cluster presets (seconds of compute lost per second of data-parallel
communication that overlaps it: NCCL's kernels take SMs and memory bandwidth from the kernels beside them; Rashidi et
al., ISCA 2021), issue 35 item 4 ("fitted overlap interference ... fit a constant only on some shared datasets, and
report it on the others"). The grid point with the least median APE wins; torchtitan, Megatron-Bridge and NeMo stay
held out. About 12 minutes on 2 cores with ``--every 3``.

    python benchmarks/fit_h100_sustained.py [--every K] [--workers N] [--kappa]
"""
from __future__ import annotations

import argparse
import json
import os
from concurrent.futures import ProcessPoolExecutor
from importlib import resources

import numpy as np

from concurrency_model.training.estimate import estimate
from concurrency_model.validate import modern

GRID = (0.65, 0.70, 0.75, 0.80, 0.85, 0.90, 1.0)
JOINT = tuple((s, k) for s in (0.80, 0.85, 0.90, 0.95) for k in (0.0, 0.2, 0.4, 0.6, 0.8, 1.0))  # (sustained, kappa)


def fit_rows():
    """The fit set: llm-foundry's H100 bf16 rows that map to a scenario."""
    df = modern.rows("llmfoundry")
    return df[(df["unmappable"] == "") & modern.in_sustained_fit(df)].reset_index(drop=True)


def _cluster(sustained: float, kappa: float | None = None) -> dict:
    """``dgx-h100`` with its device's ``efficiency.sustained`` set to ``sustained`` (and both tiers'
    ``overlap_slowdown`` to ``kappa`` where given)."""
    presets = resources.files("concurrency_model") / "presets"
    cl = json.loads((presets / "clusters" / "dgx-h100.json").read_text())
    dev = json.loads((presets / "devices" / f"{cl['device']}.json").read_text())
    dev["efficiency"] = {**dev.get("efficiency", {}), "sustained": sustained}
    if kappa is not None:
        cl = {**cl, **{t: {**cl[t], "overlap_slowdown": kappa} for t in ("intra", "inter")}}
    return {**cl, "name": f"dgx-h100-sustained-{sustained}-{kappa}", "device": dev}


def _row(r: dict, grid=GRID) -> list[float]:
    sc = modern.scenario_for(r)
    tokens = r["global_batch"] * r["seq"] / r["gpus"]
    out = []
    for x in grid:
        try:
            out.append(tokens / estimate({**sc, "cluster": _cluster(*x) if isinstance(x, tuple) else _cluster(x)})
                       .step_time_s)
        except ValueError:
            out.append(np.nan)
    return out


def _joint_row(r: dict) -> list[float]:
    return _row(r, JOINT)


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--every", type=int, default=3, help="every K-th row of the fit set (default 3)")
    ap.add_argument("--workers", type=int, default=min(2, os.cpu_count() or 1))
    ap.add_argument("--kappa", action="store_true", help="fit sustained and the tiers' overlap_slowdown jointly")
    a = ap.parse_args(argv)
    if a.every < 1:
        raise SystemExit("--every: must be >= 1")
    rows = fit_rows().iloc[::a.every]
    grid = JOINT if a.kappa else GRID
    with ProcessPoolExecutor(a.workers) as ex:
        pred = np.array(list(ex.map(_joint_row if a.kappa else _row, rows.to_dict("records"))))
    ape = np.abs(pred / rows["measured_tps"].to_numpy()[:, None] - 1) * 100
    ok = np.isfinite(ape).all(axis=1)
    med = np.median(ape[ok], axis=0)
    out = {"grid": list(grid), "rows": int(ok.sum()), "median_ape": [round(float(x), 2) for x in med],
           "mean_signed_pct": [round(float(x), 2) for x in
                               ((pred[ok] / rows["measured_tps"].to_numpy()[ok, None] - 1) * 100).mean(axis=0)]}
    out["best"] = grid[int(np.argmin(med))]
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
