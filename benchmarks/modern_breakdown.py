"""Predicted step breakdown against the measured throughput, row by row, for the modern training sets (issue 35):
torchtitan's full table and llm-foundry's groups (``concurrency_model.validate.modern``). A report to find the
mechanisms behind a set's error, not a test: it prints one line a row (measured and predicted tokens/s per GPU, the
signed error, the step) and the breakdown's non-zero parts in seconds.

About 10 s for torchtitan and 10 s for llm-foundry's H100 rows on 2 cores.

    python benchmarks/modern_breakdown.py [--dataset torchtitan|llmfoundry] [--match TEXT]
"""
from __future__ import annotations

import argparse

from concurrency_model.training.estimate import estimate
from concurrency_model.validate import modern


def lines(dataset: str, match: str = "") -> list[str]:
    """One line a row of ``dataset`` whose label or group contains ``match``, and one of its breakdown."""
    out = []
    for i, r in modern.rows(dataset).iterrows():
        if match and match not in r["group"] and match not in r["label"]:
            continue
        head = f"{i:3d} {r['label'][:58]:58s}"
        try:
            e = estimate(modern.scenario_for(r))
        except ValueError as x:
            out.append(f"{head} not predicted: {' '.join(str(x).split())[:90]}")
            continue
        tps = r["global_batch"] * r["seq"] / r["gpus"] / e.step_time_s
        err = tps / r["measured_tps"] - 1
        out.append(f"{head} measured {r['measured_tps']:9.1f} predicted {tps:9.1f} ({err:+.1%}) "
                   f"step {e.step_time_s:.3f} s")
        parts = ", ".join(f"{k[:-2]} {v:.3f}" for k, v in e.breakdown.items() if abs(v) >= 5e-4)
        out.append(f"      {parts}")
    return out


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dataset", choices=("torchtitan", "llmfoundry"), default="torchtitan")
    ap.add_argument("--match", default="", help="only rows whose label or group contains this text (e.g. h100)")
    a = ap.parse_args(argv)
    print("\n".join(lines(a.dataset, a.match)))


if __name__ == "__main__":
    main()
