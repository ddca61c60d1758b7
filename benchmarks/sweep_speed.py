"""Speed of the vectorised sweep (issue 6): gpt3-175b on ``dgx-a100``, 1024 to 4096 GPUs, every layout the
scenario leaves open, times a grid of hardware scales (inter-node and intra-node bandwidth, peak FLOP/s,
memory bandwidth). Prints one JSON object.

Targets: >= 1e6 configurations per second on one core after compilation, >= 1e4 times the
per-configuration sympy-substitution path, compilation <= 5 s, peak memory <= 2 GB for 1e7 configurations.

    python benchmarks/sweep_speed.py [--big]     # --big: also the 1e7-configuration memory run
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")  # one core, as the target says

import numpy as np  # noqa: E402

from concurrency_model.parallel import compose  # noqa: E402
from concurrency_model.parallel.estimate import prepare, step_inputs  # noqa: E402
from concurrency_model.scenario import load_scenario  # noqa: E402
from concurrency_model.sweep import sweep  # noqa: E402

SCENARIO = {"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 1536},
            "training": {"dtype": "fp16"}}
GPUS = [1024, 1536, 2048, 3072, 4096]
GRID = {"inter_bw": [0.5, 1, 2, 4], "intra_bw": [1, 2], "flops": [1, 1.5, 2, 3], "mem_bw": [1, 1.5, 2]}
BIG_GRID = {**GRID, "flops": [1, 1.25, 1.5, 2, 2.5, 3, 4, 5, 6, 8], "launch": [0.5, 1]}


def substitution_seconds(result, samples: int = 20) -> float:
    """Seconds per configuration of the unvectorised path: build the inputs and substitute numbers into the
    sympy step expression, one configuration at a time."""
    rows = result.top(samples)
    t0 = time.perf_counter()
    for _, r in rows.iterrows():
        sc = load_scenario(result.scenario(r))
        w, stage, state, _, key = prepare(sc)
        inputs = step_inputs(w, stage, *key, state)
        e = compose.step_expressions(sc.parallel["schedule"], sc.training["zero_stage"], sc.training["overlap"])
        float(e["step"].xreplace({compose.SYMBOLS[k]: float(np.asarray(v)) for k, v in inputs.items()}))
    return (time.perf_counter() - t0) / len(rows)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--big", action="store_true", help="also sweep >= 1e7 configurations for the memory target")
    a = ap.parse_args()
    t0 = time.perf_counter()
    r = sweep(SCENARIO, GPUS, hardware=GRID)
    wall = time.perf_counter() - t0
    best = r.top(1).iloc[0]
    per_config = substitution_seconds(r)
    out = {"evaluated": r.evaluated, "feasible": r.feasible, "hardware_points": len(r.hardware),
           "compile_s": round(r.compile_s, 3), "eval_s": round(r.eval_s, 4), "wall_s": round(wall, 3),
           "configs_per_s": round(r.configs_per_s), "feasible_per_s": round(r.feasible / r.eval_s),
           "substitution_s_per_config": per_config,
           "speedup_vs_substitution": round(r.configs_per_s * per_config),
           "best": {k: (v.item() if hasattr(v, "item") else v) for k, v in best.items()},
           "rejected": r.rejected}
    if a.big:
        t1 = time.perf_counter()
        big = sweep(SCENARIO, GPUS, hardware=BIG_GRID)
        out["big"] = {"evaluated": big.evaluated, "feasible": big.feasible, "wall_s": round(time.perf_counter() - t1, 2),
                      "configs_per_s": round(big.configs_per_s)}
    out["peak_rss_bytes"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    out["targets"] = {"configs_per_s >= 1e6": out["configs_per_s"] >= 1e6,
                      "speedup >= 1e4": out["speedup_vs_substitution"] >= 1e4, "compile_s <= 5": r.compile_s <= 5,
                      **({"peak_rss <= 2 GB at >= 1e7": out["peak_rss_bytes"] <= 2 * 2**30 and
                          out["big"]["evaluated"] >= 1e7} if a.big else {})}
    print(json.dumps(out, indent=1, default=str))


if __name__ == "__main__":
    main()
