"""The estimate's fast path (issue 41): the numbers of a scenario kept in the process and across processes, the
compiled step function evaluated on them; the same answers as a fresh build, to the last bit."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from concurrency_model import compiled, uncertainty
from concurrency_model.scenario import load_scenario
from concurrency_model.training import estimate as est

ROOT = Path(__file__).resolve().parents[2]
GPT2 = {"model": "gpt2", "cluster": "dgx-a100",
        "parallel": {"data": 2, "tensor": 2, "pipeline": 2, "global_batch": 32, "microbatch_size": 2},
        "training": {"recompute": "selective"}, "run": {"tokens": 1e9}}


@pytest.fixture
def fresh(cache, monkeypatch):
    """An empty cache directory (the shared ``cache`` fixture) and an empty memo, as a fresh process has them."""
    monkeypatch.setattr(est, "_MEMO", {})
    return cache


def built_without_any_cache(scenario, monkeypatch) -> dict:
    """``estimate(scenario).to_dict()`` with the cache of numbers off and nothing kept: the reference."""
    monkeypatch.setattr(est, "stable_model", lambda model: False)
    monkeypatch.setattr(est, "_MEMO", {})
    out = est.estimate(scenario).to_dict()
    monkeypatch.undo()
    return out


def test_a_kept_and_a_cached_record_give_exactly_the_built_answer(fresh, monkeypatch):
    ref = built_without_any_cache(GPT2, monkeypatch)
    monkeypatch.setenv(compiled.ENV, str(fresh))
    monkeypatch.setattr(est, "_MEMO", {})
    first = est.estimate(GPT2).to_dict()  # built, written
    names = sorted(p.name.split("-")[0] for p in compiled.entries(fresh))
    assert {"estimate", "estimate_band", "estimate_region"} <= set(names)
    again = est.estimate(GPT2).to_dict()  # the memo
    est._MEMO.clear()
    hits = compiled.STATS["hits"]
    cached = est.estimate(GPT2).to_dict()  # read from the cache
    assert compiled.STATS["hits"] >= hits + 3  # the record, the band's steps, the batch region
    assert json.dumps(ref) == json.dumps(first) == json.dumps(again) == json.dumps(cached)
    assert ref["step_time_s"] > 0 and ref["run_days"] > 0


def test_a_kept_record_is_not_prepared_again(fresh, monkeypatch):
    e = est.estimate(GPT2)

    def refuse(sc):
        raise AssertionError("prepare() ran again")
    monkeypatch.setattr(est, "prepare", refuse)
    again = est.estimate(GPT2)
    assert (again.step_time_s, again.step_time_p10_s, again.step_time_p90_s) == \
        (e.step_time_s, e.step_time_p10_s, e.step_time_p90_s)
    assert again.breakdown == e.breakdown and again.memory == e.memory
    again.memory["total_bytes"] = -1.0  # an estimate's dicts are its own: the next one is not changed
    assert est.estimate(GPT2).memory["total_bytes"] == e.memory["total_bytes"]


def test_a_fresh_process_with_a_warm_cache_builds_nothing(fresh):
    code = ("import json, sys\nfrom concurrency_model.training import estimate as est\n"
            "from concurrency_model import compiled\n"
            "if sys.argv[1] == 'warm':\n"
            "    def refuse(sc):\n        raise AssertionError('prepare() ran')\n"
            "    est.prepare = refuse\n"
            "d = est.estimate(json.loads(sys.argv[2])).to_dict()\n"
            "print(json.dumps({'out': d, 'builds': compiled.STATS['builds']}))")
    env = {**os.environ, compiled.ENV: str(fresh), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", code, what, json.dumps(GPT2)], env=env, capture_output=True,
                           text=True, timeout=300, cwd=ROOT) for what in ("cold", "warm")]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    cold, warm = (json.loads(r.stdout) for r in runs)
    assert cold["builds"] > 0 and warm["builds"] == 0
    assert json.dumps(cold["out"]) == json.dumps(warm["out"])


def test_another_field_value_is_another_record(fresh):
    base = est.estimate(GPT2)
    for section, field, value in (("parallel", "stage_split", "layers"), ("training", "straggler_cv", 0.2),
                                  ("training", "host_overhead_s", 1e-4)):
        other = {**GPT2, section: {**GPT2[section], field: value}}
        assert est.estimate(other).step_time_s != base.step_time_s, field
    assert len(est._MEMO) == 4


def test_the_band_follows_the_spread_of_the_constants(fresh, monkeypatch):
    e = est.estimate(GPT2)
    assert e.step_time_p10_s < e.step_time_s < e.step_time_p90_s
    zero = dict.fromkeys(uncertainty.spreads(), 0.0)
    monkeypatch.setattr(uncertainty, "spreads", lambda: zero)
    flat = est.estimate(GPT2)  # the same record, the step on the new draws
    assert flat.step_time_p10_s == pytest.approx(flat.step_time_s, rel=1e-12) == flat.step_time_p90_s


def test_a_refused_scenario_is_refused_every_time_and_not_kept(fresh):
    bad = {"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 8}}  # 175B on one GPU
    for _ in range(2):
        with pytest.raises(ValueError, match="memory"):
            est.estimate(bad)
    assert est._MEMO == {}
    assert not any(p.name.startswith("estimate") for p in compiled.entries(fresh))


def test_a_model_that_may_change_is_kept_in_the_process_only(fresh):
    from concurrency_model import get_model
    g = get_model("gpt2", batch=2)
    sc = {**GPT2, "model": g}
    e = est.estimate(sc)
    assert e.step_time_s > 0 and est.estimate(sc).step_time_s == e.step_time_s
    assert not any(p.name.startswith("estimate") for p in compiled.entries(fresh))
    assert est.prepared(load_scenario(sc))["model"] is g  # held: its id in the key is not reused while kept


def test_the_memo_keeps_at_most_its_size(fresh, monkeypatch):
    monkeypatch.setattr(est, "MEMO_SIZE", 2)
    for gb in (32, 64, 128):
        est.estimate({**GPT2, "parallel": {**GPT2["parallel"], "global_batch": gb}})
    assert len(est._MEMO) == 2
    newest = list(est._MEMO.values())
    assert newest[0]["objects"] is None and newest[1]["objects"] is not None  # prepare()'s objects: the newest only
