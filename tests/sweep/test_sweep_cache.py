"""A sweep's layouts and their memory kept across processes (issue 41): a warm cache enumerates nothing and builds
no model, and gives the same rows and step times to the last bit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

from concurrency_model import compiled
from concurrency_model.sweep import engine, sweep

ROOT = Path(__file__).resolve().parents[2]
GPT2 = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}, "training": {"dtype": "fp16"}}


def frame(r) -> dict:
    return {"layouts": r.layouts.to_json(orient="split", double_precision=15), "dtypes": r.layouts.dtypes.to_string(),
            "step": r.step_time_s.tobytes().hex(), "rejected": sorted(r.rejected.items()), "evaluated": r.evaluated,
            "seq_len": r.base["seq_len"]}


def test_a_warm_cache_gives_the_same_sweep_without_enumerating_layouts(cache, monkeypatch):
    cold = frame(sweep(GPT2, [8, 16], hardware={"inter_bw": [1, 2]}))
    assert {"sweep_plan", "sweep_memory", "sweep_features"} <= {p.name.split("-")[0] for p in compiled.entries(cache)}

    def refuse(*a, **k):
        raise AssertionError("layouts enumerated again")
    monkeypatch.setattr(engine, "layouts", refuse)
    monkeypatch.setattr(engine, "_memory", refuse)
    warm = frame(sweep(GPT2, [8, 16], hardware={"inter_bw": [1, 2]}))
    assert warm == cold and cold["seq_len"] == 1024


def test_another_scenario_is_another_plan(cache):
    base = sweep(GPT2, 8)
    fixed = sweep({**GPT2, "training": {**GPT2["training"], "recompute": "full"}}, 8)
    assert set(fixed.layouts["recompute"]) == {"full"} and len(fixed.layouts) < len(base.layouts)
    bigger = sweep({**GPT2, "parallel": {"global_batch": 128}}, 8)
    assert bigger.layouts["microbatches"].max() > base.layouts["microbatches"].max()


def test_a_fresh_process_with_a_warm_cache_builds_nothing(cache):
    code = ("import json, sys\nfrom concurrency_model.sweep import sweep\nfrom concurrency_model import compiled\n"
            "r = sweep(json.loads(sys.argv[1]), 8)\n"
            "print(json.dumps({'best': float(r.step_time_s.min()), 'n': int(r.step_time_s.size), "
            "'builds': compiled.STATS['builds']}))")
    env = {**os.environ, compiled.ENV: str(cache), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", code, json.dumps(GPT2)], env=env, capture_output=True, text=True,
                           timeout=300, cwd=ROOT) for _ in range(2)]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    cold, warm = (json.loads(r.stdout) for r in runs)
    assert cold["builds"] > 0 and warm["builds"] == 0
    assert (warm["best"], warm["n"]) == (cold["best"], cold["n"])


def test_a_model_object_is_not_cached_across_processes(cache):
    from concurrency_model import get_model
    r = sweep({**GPT2, "model": get_model("gpt2", batch=1)}, 8)
    assert r.feasible > 0 and np.isfinite(r.step_time_s).all()
    assert not any(p.name.startswith(("sweep_plan", "sweep_memory")) for p in compiled.entries(cache))
