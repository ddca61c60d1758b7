"""The example scenarios shipped with the package: each runs through its command, by name or by path."""
import json

import pytest

from concurrency_model.cli import main
from concurrency_model.scenario import EXAMPLES, example_names, read_scenario


@pytest.mark.parametrize("name", example_names())
def test_each_example_runs_by_name_and_describes_itself(name, capsys):
    raw = read_scenario(name)
    assert raw == json.loads((EXAMPLES / f"{name}.json").read_text())
    assert raw["name"] == name and len(raw["notes"]) > 80  # what it is and where its numbers come from
    command = "infer" if "inference" in raw else "estimate"
    assert main([command, "--scenario", name, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    if command == "estimate":
        assert 0 < out["step_time_s"] < 100 and out["memory"]["fits"]
        assert out["gpus"] == out["parallel"]["data"] * out["parallel"]["tensor"] * out["parallel"]["pipeline"]
    else:
        assert out["tokens_per_s"] > 0 and out["memory"]["fits"]


def test_examples_are_listed_and_a_wrong_name_lists_them(capsys):
    assert main(["presets", "scenarios", "--json"]) == 0
    listed = json.loads(capsys.readouterr().out)["scenarios"]
    assert [e["name"] for e in listed] == example_names() and len(listed) >= 6
    assert {e["command"] for e in listed} == {"estimate", "infer"}
    assert main(["estimate", "--scenario", "gpt3-175b"]) == 2  # a model's name, not an example's
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "no such file 'gpt3-175b'; did you mean 'gpt3-175b-3d'?; or an example: " in err and "gpt3-175b-3d" in err


def test_an_example_as_the_base_of_a_what_if(capsys):
    """The failure model of the GPT-3 example stretches its run; --set takes it out, and a sweep keeps the
    example's degrees with data decided by the GPU count."""
    assert main(["estimate", "--scenario", "gpt3-175b-3d", "--json"]) == 0
    failing = json.loads(capsys.readouterr().out)
    assert main(["estimate", "--scenario", "gpt3-175b-3d", "--set", 'run={"tokens": 300e9}', "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert failing["expected_failures"] > 1 and failing["run_days"] > plain["run_days"]
    assert plain["step_time_s"] == failing["step_time_s"]
    assert main(["sweep", "--scenario", "gpt3-175b-3d", "--gpus", "512", "--top", "1", "--json"]) == 0
    best = json.loads(capsys.readouterr().out)["best"][0]
    assert best["gpus"] == 512 and (best["parallel"]["tensor"], best["parallel"]["pipeline"]) == (8, 16)


def test_a_serving_sweep_takes_the_examples_load(capsys):
    """--sweep sizes fleets for a load: the scenario's inference.load_rps, unless --load gives another."""
    assert main(["infer", "--scenario", "llama-2-7b-serving", "--sweep", "--max-decode-ms", "20", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["load_rps"] == read_scenario("llama-2-7b-serving")["inference"]["load_rps"] == 20
    assert out["best"]["gpus_for_load"] >= 2


def test_the_reports_example_rows_are_the_commands_figures():
    from concurrency_model import estimate
    from concurrency_model.report.examples import example_rows
    rows = {r["name"]: r for r in example_rows()}
    assert list(rows) == example_names()
    e = estimate("gpt3-175b-3d")
    assert rows["gpt3-175b-3d"]["result"].startswith(f"{e.step_time_s:.3g} s a step (80% band ")
    assert rows["gpt3-175b-3d"]["command"] == "estimate" and rows["gpt2-generate"]["command"] == "infer"
    assert "on 1,024 GPUs" in rows["gpt3-175b-3d"]["result"] and "on 1 GPU," in rows["gpt2-generate"]["result"]
