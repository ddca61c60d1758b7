"""Overlap interference (issue 9): fit each tier's ``overlap_slowdown`` on the data where gradient
all-reduces overlap the backward pass, and print what the fit says.

Data: NVIDIA DeepLearningExamples ResNet-50 on one DGX (1 vs 8 or 16 GPUs: the NVLink / NVSwitch tier) and
the Horovod documentation's 512-GPU efficiencies (the network tier), both with overlapped all-reduces
(Horovod's tensor fusion, PyTorch DDP / TF). Compared on weak-scaling efficiency (throughput on N GPUs over
N x one GPU, each from the same source), so that the single-GPU kernel error cancels. With kappa the step
grows by kappa x the overlapped all-reduce seconds (``concurrency_model.training.compose``); kappa is
searched on [0, 1] (1 = no overlap at all), minimising the mean |log(predicted / measured efficiency)|.

    python benchmarks/overlap_interference.py
"""
from __future__ import annotations

import json

import numpy as np

from concurrency_model.validate import scaling


def rows() -> list[dict]:
    """Multi-GPU rows with measured efficiency, predicted efficiency at kappa = 0 and the overlapped share."""
    out = []
    dle = scaling.dle_rows()
    dle = dle[dle["reason"].fillna("") == ""]
    for (system, dtype, b), g in dle.groupby(["system", "dtype", "batch_per_gpu"]):
        one = g[g["gpus"] == 1]
        if not len(one):
            continue
        cl = scaling._dle_cluster(system)
        t1 = scaling.throughput(g["zoo_model"].iloc[0], cl, 1, int(b), dtype)[0]
        for _, r in g[g["gpus"] > 1].iterrows():
            thr, bd, _ = scaling.throughput(r["zoo_model"], cl, int(r["gpus"]), int(b), dtype)
            step = r["gpus"] * b / thr
            out.append({"tier": "intra", "source": f"DLE {system} {dtype} x{int(r['gpus'])}",
                        "measured": r["measured"] / (r["gpus"] * float(one["measured"].iloc[0])),
                        "step": step, "ideal": r["gpus"] * b / (r["gpus"] * t1),
                        "overlapped": bd["data_parallel_overlapped_s"]})
    hv = scaling.horovod_rows()
    hv = hv[hv["reason"].fillna("") == ""]
    for _, r in hv.iterrows():
        cl = scaling.systems()[r["system"]]
        thr, bd, _ = scaling.throughput(r["zoo_model"], cl, int(r["gpus"]), int(r["batch_per_gpu"]))
        t1 = scaling.throughput(r["zoo_model"], cl, 1, int(r["batch_per_gpu"]))[0]
        out.append({"tier": "inter", "source": f"Horovod {r['zoo_model']} x{int(r['gpus'])}",
                    "measured": r["measured"] / 100, "step": r["gpus"] * r["batch_per_gpu"] / thr,
                    "ideal": r["batch_per_gpu"] / t1, "overlapped": bd["data_parallel_overlapped_s"]})
    return out


def fit(rs: list[dict]) -> dict:
    kappas = np.linspace(0.0, 1.0, 101)

    def loss(k):
        return float(np.mean([abs(np.log(r["ideal"] / (r["step"] + k * r["overlapped"]) / r["measured"]))
                              for r in rs]))
    losses = [loss(k) for k in kappas]
    best = float(kappas[int(np.argmin(losses))])
    return {"kappa": best, "loss_at_0": losses[0], "loss_at_best": min(losses), "at_bound": best in (0.0, 1.0),
            "rows": len(rs), "lost_share_measured": float(np.mean([1 - r["measured"] for r in rs])),
            "overlapped_share_of_step": float(np.mean([r["overlapped"] / r["step"] for r in rs]))}


def main() -> None:
    rs = rows()
    out = {tier: fit([r for r in rs if r["tier"] == tier]) for tier in ("intra", "inter")}
    out["rows"] = [{k: (round(v, 4) if isinstance(v, float) else v) for k, v in r.items()} for r in rs]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
