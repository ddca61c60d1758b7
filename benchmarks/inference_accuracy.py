"""Inference accuracy: FasterTransformer 13B latencies against ``concurrency-model infer``.

Data: ``data/fastertransformer_13b_inference_latency.csv`` (2 rows: tensor parallel 1 and 2 on A100 40GB,
batch 1, prompt 512, 10 generated tokens). Predicted with the device and cluster presets and the default
efficiency constants; nothing is fitted on these rows (assumptions: ``validate.inference.ASSUMPTIONS``).
Prints APE per row and metric (prefill, per-token decode, total) and the median / mean / max APE per
metric and over all. The issue's target is only "checked against": the numbers are reported as they are.
Runs in a few seconds.

    python benchmarks/inference_accuracy.py [--json]
"""
from __future__ import annotations

import argparse
import json
import time

from concurrency_model.validate import inference as vi


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", action="store_true", help="print one JSON object")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    res = vi.evaluate()
    summ = vi.summary(res)
    out = {"elapsed_s": round(time.perf_counter() - t0, 2), "assumptions": vi.ASSUMPTIONS,
           "rows": [{k: (round(v, 5) if isinstance(v, float) else v) for k, v in r.items()}
                    for r in res.to_dict("records")],
           "summary": {k: {kk: (round(100 * vv, 1) if kk != "rows" else vv) for kk, vv in v.items()}
                       for k, v in summ.items()}}
    if args.json:
        print(json.dumps(out))
        return out
    print("| row | tensor | metric | measured ms | predicted ms | APE % |")
    print("| --- | --- | --- | --- | --- | --- |")
    for r in res.to_dict("records"):
        for k in vi.METRICS:
            print(f"| {r['source_row']} | {r['tensor']} | {k} | {1e3 * r[f'measured_{k}']:.2f} | "
                  f"{1e3 * r[f'predicted_{k}']:.2f} | {100 * r[f'ape_{k}']:.1f} |")
    print()
    print("| metric | rows | median APE % | mean APE % | max APE % |")
    print("| --- | --- | --- | --- | --- |")
    for k, v in out["summary"].items():
        print(f"| {k} | {v['rows']} | {v['median_ape']} | {v['mean_ape']} | {v['max_ape']} |")
    print(f"\n{out['elapsed_s']} s; assumptions: {vi.ASSUMPTIONS}")
    return out


if __name__ == "__main__":
    main()
