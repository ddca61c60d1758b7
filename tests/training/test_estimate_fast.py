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
from concurrency_model.training import prepare as prep

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
    monkeypatch.setattr(prep, "prepare", refuse)
    again = est.estimate(GPT2)
    assert (again.step_time_s, again.step_time_p10_s, again.step_time_p90_s) == \
        (e.step_time_s, e.step_time_p10_s, e.step_time_p90_s)
    assert again.breakdown == e.breakdown and again.memory == e.memory
    again.memory["total_bytes"] = -1.0  # an estimate's dicts are its own: the next one is not changed
    assert est.estimate(GPT2).memory["total_bytes"] == e.memory["total_bytes"]


# the libraries and modules a cached estimate does without (issue 41): the model builders and sympy come with prepare
HEAVY = ("sympy", "pandas", "scipy", "networkx", "matplotlib", "concurrency_model.training.prepare",
         "concurrency_model.training.compose", "concurrency_model.cost")


def test_a_fresh_process_with_a_warm_cache_builds_nothing(fresh):
    code = ("import json, sys\nfrom concurrency_model.training import estimate as est\n"
            "from concurrency_model import compiled\n"
            "d = est.estimate(json.loads(sys.argv[1])).to_dict()\n"
            "heavy = [m for m in json.loads(sys.argv[2]) if m in sys.modules]\n"
            "print(json.dumps({'out': d, 'builds': compiled.STATS['builds'], 'heavy': heavy}))")
    env = {**os.environ, compiled.ENV: str(fresh), "PYTHONPATH": str(ROOT)}
    runs = [subprocess.run([sys.executable, "-c", code, json.dumps(GPT2), json.dumps(HEAVY)], env=env,
                           capture_output=True, text=True, timeout=300, cwd=ROOT) for _ in ("cold", "warm")]
    assert all(r.returncode == 0 for r in runs), runs[-1].stderr
    cold, warm = (json.loads(r.stdout) for r in runs)
    assert cold["builds"] > 0 and "sympy" in cold["heavy"] and "concurrency_model.training.prepare" in cold["heavy"]
    assert warm["builds"] == 0 and warm["heavy"] == []  # nothing built, and nothing that builds imported
    assert json.dumps(cold["out"]) == json.dumps(warm["out"])


def test_a_warm_cli_estimate_imports_no_sympy_and_a_miss_gives_the_same_answer(fresh, tmp_path):
    """The command as a user runs it: a cache miss (the model built, sympy loaded) and then a fresh process with the
    cache warm, which imports neither sympy nor the model builders, print the same text and the same JSON."""
    path = tmp_path / "scenario.json"
    path.write_text(json.dumps(GPT2))
    code = ("import json, sys\nfrom concurrency_model.cli import main\n"
            "code = main(sys.argv[2:])\n"
            "print(json.dumps([m for m in json.loads(sys.argv[1]) if m in sys.modules]), file=sys.stderr)\n"
            "sys.exit(code)")

    def run(*flags):  # each output its own cache directory: the first run of each is a miss
        env = {**os.environ, compiled.ENV: str(fresh / "-".join(("cli",) + flags)), "PYTHONPATH": str(ROOT)}
        r = subprocess.run([sys.executable, "-c", code, json.dumps(HEAVY), "estimate", "--scenario", str(path), *flags],
                           env=env, capture_output=True, text=True, timeout=300, cwd=ROOT)
        assert r.returncode == 0, r.stderr
        return r.stdout, json.loads(r.stderr.strip().splitlines()[-1])
    (cold_text, cold_heavy), (warm_text, warm_heavy) = run(), run()
    (cold_json, cold_json_heavy), (warm_json, warm_json_heavy) = run("--json"), run("--json")
    assert "sympy" in cold_heavy and "sympy" in cold_json_heavy and warm_heavy == [] == warm_json_heavy
    assert warm_text == cold_text and warm_json == cold_json
    assert cold_text.startswith("step ") and json.loads(cold_json)["step_time_s"] > 0


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
