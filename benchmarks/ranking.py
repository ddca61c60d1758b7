"""Ranking of layouts: for every shared set with several layouts of one model on one system, the Spearman rank
correlation between predicted and measured throughput and whether the predicted best layout is the measured best
(``concurrency_model.validate.ranking``: the groups, one rule per set), and the speed-up of the measured A/B pairs
(one setting changed). Issue 35's target: Spearman >= 0.8 on every multi-layout set. A report, not a test: missed
targets leave the exit status 0.

About 4 minutes on 2 cores (``--quick``: about 3, one vTrain single-node group in 8 and at most 6 layouts of each
llm-foundry group).

    python benchmarks/ranking.py [--quick] [--dataset NAME ...] [--workers N]
"""
from __future__ import annotations

import argparse
import sys
import time

import pandas as pd

from concurrency_model.validate import ranking


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="sample the big groups")
    ap.add_argument("--dataset", nargs="*", default=list(ranking.SETS), choices=ranking.SETS)
    ap.add_argument("--workers", type=int, default=2)
    a = ap.parse_args(argv)
    t0 = time.perf_counter()
    table = ranking.rank_groups(ranking.frames(a.dataset, quick=a.quick, workers=a.workers))
    summary = ranking.summarize(table)
    with pd.option_context("display.width", 200, "display.max_colwidth", 60, "display.max_rows", 500):
        print(table.drop(columns=["measured_best", "predicted_best"]).to_string(
            index=False, formatters={"spearman": "{:.2f}".format}))
        print()
        print(summary.to_string(index=False, formatters={"mean_spearman": "{:.2f}".format,
                                                         "min_spearman": "{:.2f}".format,
                                                         "best_match": "{:.0%}".format}))
        pairs = ranking.ab_pairs(workers=a.workers)
        print("\nA/B pairs (one setting changed; speed-up over the pair's first case):")
        print(pairs.to_string(index=False, formatters={"measured_speedup": "{:.3f}".format,
                                                       "predicted_speedup": "{:.3f}".format,
                                                       "error": "{:+.1%}".format}))
    shared = summary[summary["dataset"].isin(ranking.SHARED_SETS)]
    met = shared["meets"].dropna()
    outside = summary[summary["dataset"].isin(ranking.OUTSIDE_SETS)].dropna(subset=["meets"])
    print(f"\n{len(table)} groups in {time.perf_counter() - t0:.0f} s{' (quick)' if a.quick else ''}; "
          f"Spearman >= {ranking.TARGET} met on {int(met.sum())} of {len(met)} shared sets with groups of "
          f">= {ranking.MIN_LAYOUTS} layouts" + "".join(f"; {r.dataset} (not shared) {r.mean_spearman:.2f}"
                                                      for r in outside.itertuples()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
