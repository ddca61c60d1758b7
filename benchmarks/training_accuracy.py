"""Training-step accuracy: published iteration times and TFLOP/s against ``estimate``.

Datasets (``concurrency_model.validate.training``): vTrain single node (Megatron-DeepSpeed, 2-8 A100;
its 720 odd rows are held out, the even rows fit ``HOST_S_PER_KERNEL``; every 2nd odd row by default,
``--all`` for all 720), vTrain multi-node (109 rows,
64-512 A100), the Megatron-LM README (2020 iteration times; 2021 TFLOP/s per GPU) and Narayanan et al.
2021 Table 2 (PTD vs ZeRO-3, TFLOP/s per GPU). TFLOP/s are compared as Eq. (3) of Narayanan et al. over
the predicted time, like the published numbers. Rows the estimate refuses are counted with the reason.

Targets (issue): Megatron/Narayanan median APE <= 10%; vTrain MAPE <= 8% single node, <= 12% multi-node
(vTrain's own simulator: 8.37% / 14.73%). Runs in about 2 minutes on 2 cores.

Data-parallel scaling and pipeline speedups (``concurrency_model.validate.scaling``, issue 5; a few
seconds, ``--scaling`` runs only these): tf_cnn_benchmarks 2017 images/s (DGX-1 P100, GCE/EC2 K80, up to
64 K80s), median APE <= 15%; torchgpipe ResNet-101 speedups on P40s, each within 15%; Horovod's 512-GPU
efficiencies, each within 10 points. Also printed: the weak-scaling efficiency against each source's own
1-GPU row (the scaling alone, without the one-GPU error) and a what-if of the K80 at its 562 MHz base
clock (not the prediction: the preset keeps the boost-clock datasheet peak). ``met`` / ``missed`` lines go
to stderr, the JSON to stdout.

    python benchmarks/training_accuracy.py [--all] [--workers N] [--scaling]

The same training rows through a peer tool (llm-analysis), side by side: ``benchmarks/peer_tools.py``.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import time

import pandas as pd

from concurrency_model.validate import scaling as vs
from concurrency_model.validate import training as vt

SINGLE_EVERY = 2
WORST_COLUMNS = ["dataset", "source_row", "label", "gpus", "tensor", "pipeline", "data", "microbatch",
                 "global_batch", "hidden", "layers", "measured_time_s", "predicted_time_s", "measured_tflops",
                 "predicted_tflops", "signed_error_pct"]


def _by(res: pd.DataFrame, key: str) -> dict:
    ok = res[res["status"] == "ok"]
    g = ok.groupby(key)["signed_error_pct"]
    return {str(k): {"rows": int(len(v)), "median_signed_error_pct": round(float(v.median()), 1)} for k, v in g}


def _round(v):
    if isinstance(v, float):
        return round(v, 2)
    if isinstance(v, dict):
        return {k: _round(x) for k, x in v.items()}
    return v


K80_BASE_FP32 = 5.6e12 / 2  # hardware.md Table 1 [R17]: 5.6 TFLOP/s per board at the 562 MHz base clock


def k80_base_clock(res: pd.DataFrame) -> dict:
    """What-if, not the prediction: the K80 rows with the peak at the 562 MHz base clock instead of the
    875 MHz boost (the datasheet defaults otherwise), to size the clock's part of their error."""
    k80 = res[(res["status"] == "ok") & res["system"].isin(["gce-k80x8", "ec2-p2.8xlarge"])]
    if not len(k80):
        return {}
    ape = []
    for _, r in k80.iterrows():
        cl = vs.systems()[r["system"]]
        dev = dataclasses.replace(cl.device, peak_flops={**cl.device.peak_flops, "fp32": K80_BASE_FP32},
                                  vector_flops={**cl.device.vector_flops, "fp32": K80_BASE_FP32})
        base = dataclasses.replace(cl, device=dev)
        if r["sync"].startswith("parameter_server"):
            thr = vs.ps_throughput(r["zoo_model"], base, r["gpus"], r["batch_per_gpu"], r["sync"].rsplit("_", 1)[1])[0]
        else:
            thr = vs.throughput(r["zoo_model"], base, r["gpus"], r["batch_per_gpu"])[0]
        ape.append(abs(thr / r["measured"] - 1) * 100)
    ape = pd.Series(ape)
    return {"rows": len(ape), "median_ape_at_boost": round(float(k80["ape"].median()), 1),
            "median_ape_at_base_clock": round(float(ape.median()), 1)}


def scaling_report() -> tuple[dict, list]:
    """The scaling datasets: summary, targets (met / missed), efficiencies, worst rows, what-if."""
    res = vs.evaluate()
    summ = vs.summary(res)
    lines = []
    for name, s in summ.items():
        if name not in vs.TARGETS:
            lines.append(f"{name}: median APE {s['median_ape']:.1f}% ({s['predicted']} of {s['rows_total']} rows "
                         "predicted; no target set)")
            continue
        stat, limit = vs.TARGETS[name]
        value = s.get(stat)
        unit = " points" if stat.endswith("points") else "%"
        shown = "n/a" if value is None else f"{value:.1f}{unit}"
        lines.append(f"{name}: {stat} {shown} (target <= {limit:g}{unit}, {s['predicted']} of {s['rows_total']} "
                     f"rows predicted): {'met' if s['meets_target'] else 'missed'}")
    ok = res[res["status"] == "ok"]
    worst = ok.loc[ok["ape"].sort_values(ascending=False).index].groupby("dataset").head(3)
    eff = ok[(ok["gpus"] > 1) & ok["measured_efficiency"].notna()]
    out = {
        "datasets": _round(summ),
        "targets": lines,
        "tf_efficiency_by_group": {f"{g} {m} {d}": {"rows": int(len(x)),
                                                     "measured_pct": x["measured_efficiency"].round(1).tolist(),
                                                     "predicted_pct": x["predicted_efficiency"].round(1).tolist()}
                                   for (g, m, d), x in eff.groupby(["group", "model", "data"])},
        "k80_what_if_base_clock": k80_base_clock(res),
        "worst_rows": worst[["dataset", "source_row", "label", "group", "measured", "predicted", "signed_error_pct",
                             "note"]].round(3).to_dict("records"),
        "assumptions": vs.ASSUMPTIONS,
    }
    return out, lines


def main(argv=None) -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--all", action="store_true", help="every vTrain single-node row (about 4x slower)")
    ap.add_argument("--workers", type=int, default=None)
    ap.add_argument("--scaling", action="store_true", help="only the data-parallel and pipeline sets (seconds)")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    scaling, lines = scaling_report()
    if args.scaling:
        print(json.dumps({"elapsed_s": round(time.perf_counter() - t0, 1), "scaling": scaling}, indent=1,
                         default=str))
        print("\n".join(lines), file=sys.stderr)
        return
    single = vt.vtrain_held_out_rows()  # the even rows fit HOST_S_PER_KERNEL (benchmarks/fit_host_overhead.py)
    every = 1 if args.all else SINGLE_EVERY
    df = pd.concat([vt.sample(single, every), vt.vtrain_rows("multi"), vt.megatron_rows(), vt.narayanan_rows()],
                   ignore_index=True)
    res = vt.evaluate(df, workers=args.workers)
    res["tensor_x_microbatch"] = [f"{int(t)} x {int(b)}" for t, b in zip(res["tensor"], res["microbatch"])]
    summ = vt.summary(res)
    summ["vtrain_single"]["sampled"] = (f"every {every}th of the {len(single)} odd rows in file order" if every > 1
                                        else f"the {len(single)} odd rows") \
        + " (held out: the even rows fit the host seconds per kernel)"
    # the issue states one target for the Megatron README tables and Narayanan's Table 2 together: pooled
    # here, next to each table's own figure (narayanan_table2 alone misses it)
    pool = res[res["dataset"].isin(["megatron_2020", "megatron_2021", "narayanan_table2"]) & (res["status"] == "ok")]
    pooled = {"rows": int(len(pool)), "median_ape": round(float(pool["ape"].median()), 2),
              "mean_ape": round(float(pool["ape"].mean()), 2), "target": "median_ape <= 10.0",
              "meets_target": bool(pool["ape"].median() <= 10.0)}
    lines.append(f"megatron_2020 + megatron_2021 + narayanan_table2 pooled: median APE {pooled['median_ape']:.1f}% "
                 f"({pooled['rows']} rows; target <= 10%): {'met' if pooled['meets_target'] else 'missed'}")
    for name in ("megatron_2021", "narayanan_table2"):
        s = summ[name]
        lines.append(f"{name}: median APE {s['median_ape']:.1f}% (target <= 10%): "
                     f"{'met' if s['meets_target'] else 'missed'}")
    nar = res[res["dataset"] == "narayanan_table2"].copy()
    nar["scheme"] = nar["label"].str.split(" ").str[0]
    ok = res[res["status"] == "ok"]
    worst = ok.loc[ok["ape"].sort_values(ascending=False).index].groupby("dataset").head(3)
    out = {
        "elapsed_s": round(time.perf_counter() - t0, 1),
        "datasets": {k: {kk: (round(vv, 2) if isinstance(vv, float) else vv) for kk, vv in v.items()}
                     for k, v in summ.items()},
        "megatron_narayanan_pooled": pooled,
        "narayanan_by_scheme": {k: {"rows": int(len(g)), "median_ape": round(float(g["ape"].median()), 2)}
                                for k, g in nar.groupby("scheme")},
        "vtrain_single_by": {k: _by(res[res["dataset"] == "vtrain_single"], k)
                             for k in ("gpus", "tensor", "pipeline", "data", "microbatch", "hidden", "layers",
                                       "tensor_x_microbatch")},
        "vtrain_multi_by": {k: _by(res[res["dataset"] == "vtrain_multi"], k) for k in ("gpus", "tensor", "pipeline",
                                                                                     "data", "microbatch", "hidden")},
        "worst_rows": worst[WORST_COLUMNS].round(3).to_dict("records"),
        "assumptions": vt.ASSUMPTIONS,
        "scaling": scaling,
    }
    print(json.dumps(out, indent=1, default=str))
    print("\n".join(lines), file=sys.stderr)


if __name__ == "__main__":
    main()
