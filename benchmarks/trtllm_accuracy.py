"""Serving at full load against TensorRT-LLM's Hopper table: ``capacity.max_throughput`` (``infer --max-load``) on
the rows of ``data/trtllm_perf_overview_hopper.csv`` (trtllm-bench throughput, FP8, H100 and H200).

One rule maps every row (``validate.trtllm.scenario_for``; assumptions: ``validate.trtllm.ASSUMPTIONS``); the
presets and default efficiency constants, nothing fitted on these rows. Prints per row the measured and predicted
output tokens/s of the system, the APE, the slots and what limits them, then the median / mean / max APE over the
mappable rows, overall and per GPU and model, and the issue's target (median <= 20%, ``benchmarks/accuracy.py``).
About two minutes on 2 cores.

    python benchmarks/trtllm_accuracy.py [--json] [--workers N]
"""
from __future__ import annotations

import argparse
import json
import time

from concurrency_model.validate import trtllm

TARGET = 0.20  # issue 36, item 4: TensorRT-LLM Hopper median APE <= 20%


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    ap.add_argument("--workers", type=int, default=2)
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res = trtllm.evaluate(workers=args.workers)
    ok = res[res["status"] == "ok"]
    groups = {g: trtllm.summary(x) for g, x in res.groupby("group", sort=False) if (x["status"] == "ok").any()}
    out = {"elapsed_s": round(time.perf_counter() - t0, 1), "assumptions": trtllm.ASSUMPTIONS,
           "summary": trtllm.summary(res), "groups": groups, "target_median_ape": TARGET,
           "rows": ok[["source_line", "label", "measured", "predicted", "ape", "slots", "limited_by",
                       "max_batch_size", "max_num_tokens"]].to_dict("records"),
           "unmappable": sorted(set(res.loc[res["status"] != "ok", "reason"]))}
    out["met"] = bool(out["summary"]["median_ape"] <= TARGET)
    if args.json:
        print(json.dumps(out, default=float))
        return out
    print("| line | row | measured tok/s | predicted tok/s | APE % | slots | limited by |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for r in out["rows"]:
        print(f"| {r['source_line']} | {r['label']} | {r['measured']:,.0f} | {r['predicted']:,.0f} | "
              f"{100 * r['ape']:.1f} | {int(r['slots'])} | {r['limited_by']} |")
    print("\n| group | rows | median APE % | mean APE % | max APE % |")
    print("| --- | --- | --- | --- | --- |")
    for g, s in [*groups.items(), ("all", out["summary"])]:
        print(f"| {g} | {s['rows']} | {100 * s['median_ape']:.1f} | {100 * s['mean_ape']:.1f} | "
              f"{100 * s['max_ape']:.1f} |")
    s = out["summary"]
    print(f"\n{s['rows']} of {s['rows_total']} rows predicted; median APE {100 * s['median_ape']:.1f}% (target "
          f"<= {100 * TARGET:.0f}%: {'met' if out['met'] else 'missed'}); not mapped: {'; '.join(out['unmappable'])}")
    print(f"({out['elapsed_s']} s)")
    return out


if __name__ == "__main__":
    main()
