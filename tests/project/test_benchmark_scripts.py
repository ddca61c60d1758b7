"""Benchmark scripts that take the validation adapters' rows: they run on every kind of row the adapters give."""
import importlib.util
from pathlib import Path

import pytest

from concurrency_model.validate.modern import evaluate, rows

ROOT = Path(__file__).parents[2]


def load(name: str):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_moe_breakdown_reestimates_the_adapter_s_recompute_with_its_modules():
    """A row whose recipe names recompute modules is labelled ``selective (modules)`` by the adapter; the breakdown
    re-estimates it at that mode and those modules, so its step is the adapter's and its parts add up to it."""
    bench = load("moe_breakdown")
    df = rows("megatron_bridge_moe")
    df = df[df["label"] == "26.04.01 GPT OSS 120B on 64 DGX-H100"]
    r = evaluate(df, workers=1).to_dict("records")[0]
    assert r["recompute_used"] == "selective (layernorm,moe_act)"
    got = bench.breakdown(r, r["recompute_used"])
    assert got["predicted_s"] == pytest.approx(r["predicted_time_s"], rel=1e-9)
    parts = sum(got[k] for k in bench.PARTS) + got["rest_s"]
    assert parts == pytest.approx(got["predicted_s"], rel=1e-9)
    assert got["missing_s"] == pytest.approx(got["measured_s"] - got["predicted_s"])
