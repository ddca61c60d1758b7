"""``--set KEY=VALUE`` on estimate, sweep and infer (:func:`concurrency_model.scenario.with_settings`)."""
import json

import pytest

from concurrency_model import estimate
from concurrency_model.cli import main
from concurrency_model.scenario import with_settings

GPT = {"kind": "gpt", "layers": 4, "hidden": 512, "heads": 8, "seq_len": 512, "vocab": 32000}
BASE = {"model": GPT, "cluster": "dgx-a100", "parallel": {"data": 4, "global_batch": 16}}


def test_values_are_json_or_else_strings():
    raw = {"model": {"hf_config": "gpt2"}, "parallel": None}
    out = with_settings(raw, ["parallel.sequence_parallel=true", "training.host_overhead_s=null", "cluster=dgx-h100",
                              'model={"hf_config": "llama-2-7b"}', "model.seq_len=2048", "name=a b=c"])
    assert out == {"model": {"hf_config": "llama-2-7b", "seq_len": 2048}, "cluster": "dgx-h100", "name": "a b=c",
                   "parallel": {"sequence_parallel": True}, "training": {"host_overhead_s": None}}
    assert raw == {"model": {"hf_config": "gpt2"}, "parallel": None}  # the scenario read is not changed
    assert with_settings(raw, []) == raw and with_settings(raw, []) is not raw


@pytest.mark.parametrize("setting, message", [
    ("parallel.tensor", "--set: expected KEY=VALUE"),
    ("=4", "--set: expected KEY=VALUE"),
    ("parallel..tensor=4", "--set: expected KEY=VALUE"),
    ("tensor=4", "--set tensor: unknown field 'tensor'; allowed: model, cluster"),
    ("cluster.nodes=2", "--set cluster.nodes: cluster is 'dgx-a100', not an object"),
])
def test_malformed_settings_name_the_setting(setting, message):
    with pytest.raises(ValueError, match="^" + message.replace(".", r"\.").replace("'", "'")):
        with_settings(BASE, [setting])


def test_estimate_with_settings_is_the_edited_scenario(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(BASE))
    assert main(["estimate", "--scenario", str(f), "--set", "parallel.tensor=2", "--set", "training.zero_stage=1",
                 "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    edited = {**BASE, "parallel": {**BASE["parallel"], "tensor": 2}, "training": {"zero_stage": 1}}
    assert out["step_time_s"] == pytest.approx(estimate(edited).step_time_s, rel=1e-12)
    assert out["gpus"] == 8 and out["training"]["zero_stage"] == 1
    # a bad value is the scenario's own one-line error, naming the field
    assert main(["estimate", "--scenario", str(f), "--set", "parallel.tensor=0"]) == 2
    assert capsys.readouterr().err.startswith("concurrency-model estimate: error: parallel.tensor: ")
    assert main(["estimate", "--scenario", str(f), "--set", "parallel.tensor"]) == 2
    assert "--set: expected KEY=VALUE" in capsys.readouterr().err


def test_sweep_and_infer_take_settings(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(BASE))
    assert main(["sweep", "--scenario", str(f), "--gpus", "8", "--set", "parallel.tensor=2", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)["best"]
    assert rows and all(r["parallel"]["tensor"] == 2 for r in rows)
    f.write_text(json.dumps({"model": "gpt2", "inference": {"batch": 1, "prompt_len": 128, "decode_len": 16}}))
    assert main(["infer", "--scenario", str(f), "--set", "inference.batch=4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["inference"]["batch"] == 4 and out["kv_cache_bytes"] == 2 * 12 * 4 * (128 + 16) * 768 * 2


@pytest.mark.parametrize("section", ["parallel", "training"])
@pytest.mark.parametrize("value", ["[]", "0", '""', "false"])
def test_a_section_that_is_not_an_object_is_refused(section, value):
    """An empty list or a zero where a section's object belongs is an error, not the defaults (null is the
    defaults, as a section left out)."""
    with pytest.raises(ValueError, match=f"^{section}: expected an object"):
        estimate(with_settings(BASE, [f"{section}={value}"]))
    assert estimate(with_settings(BASE, [f"{section}=null"])).step_time_s > 0


def test_compare_shows_the_scenario_and_the_changed_one(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(BASE))
    assert main(["estimate", "--scenario", str(f), "--compare", "training.zero_stage=2", "--compare",
                 "parallel.data=8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["compare"] == ["training.zero_stage=2", "parallel.data=8"]
    assert out["base"]["step_time_s"] == pytest.approx(estimate(BASE).step_time_s, rel=1e-12)
    changed = estimate(with_settings(BASE, out["compare"]))
    assert out["changed"]["step_time_s"] == pytest.approx(changed.step_time_s, rel=1e-12)
    assert out["changed"]["gpus"] == 8 and out["changed"]["memory"]["optimizer_bytes"] < \
        out["base"]["memory"]["optimizer_bytes"]  # ZeRO-2 shards the optimizer state over 8 ranks, not 4 copies
    assert main(["estimate", "--scenario", str(f), "--compare", "training.zero_stage=2", "--compare",
                 "parallel.data=8"]) == 0
    text = capsys.readouterr().out
    b, c = out["base"]["step_time_s"], out["changed"]["step_time_s"]
    assert f"  {'step s':<28} {b:>12.4g} {c:>12.4g} {c / b - 1:>+9.1%}" in text
    assert "changed: 8 x a100-sxm4-80gb (data 8 x" in text and "[training.zero_stage=2 parallel.data=8]" in text
    # an infeasible or malformed change names --compare, one line, exit 2
    assert main(["estimate", "--scenario", str(f), "--compare", "parallel.tensor=3"]) == 2
    assert capsys.readouterr().err.startswith("concurrency-model estimate: error: --compare parallel.tensor=3: ")
    assert main(["estimate", "--scenario", str(f), "--compare", "tensor"]) == 2
    assert "--compare: expected KEY=VALUE" in capsys.readouterr().err
    assert main(["estimate", "--scenario", str(f), "--compare", "parallel.data=8", "--sensitivities"]) == 2


def test_infer_compare(capsys):
    assert main(["infer", "--scenario", "gpt2-generate", "--compare", "inference.batch=16", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    from concurrency_model.serving.decoder import infer
    from concurrency_model.scenario import read_scenario
    assert out["changed"]["tokens_per_s"] == pytest.approx(
        infer(with_settings(read_scenario("gpt2-generate"), ["inference.batch=16"])).tokens_per_s, rel=1e-12)
    assert out["changed"]["kv_cache_bytes"] == 2 * out["base"]["kv_cache_bytes"]  # batch 8 -> 16
    assert main(["infer", "--scenario", "gpt2-generate", "--compare", "inference.batch=16"]) == 0
    text = capsys.readouterr().out
    assert "  KV cache GB" in text and "+100.0%" in text and "decode_compute_s" in text
    assert main(["infer", "--scenario", "gpt2-generate", "--compare", "inference.batch=16", "--max-batch"]) == 2
    assert "--compare: of one scenario's figures" in capsys.readouterr().err


@pytest.mark.parametrize("setting, hint", [
    ("parallel.tensr=2", "parallel.tensr: unknown field; did you mean 'tensor'?"),
    ("parallel.schedule=1fb1", "parallel.schedule: unknown '1fb1'; did you mean '1f1b'?"),
    ("run.token=1", "run.token: unknown field; did you mean 'tokens'?"),
    ("cluster=dgx-a10", "cluster: unknown preset 'dgx-a10'; did you mean 'dgx-a100'?"),
    ("model=gtp2", "model: unknown 'gtp2'; did you mean 'gpt2'?"),
    ("trainng={}", "--set trainng: unknown field 'trainng'; did you mean 'training'?"),
])
def test_a_typo_gets_its_fix(setting, hint):
    raw = {**BASE, "run": {"tokens": 1e9}}
    with pytest.raises(ValueError) as e:
        estimate(with_settings(raw, [setting]))
    assert str(e.value).startswith(hint) and "; allowed: " in str(e.value)


@pytest.mark.parametrize("setting, hint", [
    ('model={"hf_config": "llama2-7b"}', "hf_config: no such file 'llama2-7b' and no preset of that name; did you mean "
                                         "'llama-2-7b'?"),
    ("inference.batching=continous", "inference.batching: unknown 'continous'; did you mean 'continuous'?"),
    ("inference.output_lengths=geometic", "inference.output_lengths: unknown 'geometic'; did you mean 'geometric'?"),
    ("inference.weight_dtype=int9", "inference.weight_dtype: unknown 'int9'; did you mean 'int8'?"),
])
def test_a_typo_in_an_inference_scenario_gets_its_fix(setting, hint):
    from concurrency_model.serving.decoder import infer
    from concurrency_model.scenario import read_scenario
    with pytest.raises(ValueError) as e:
        infer(with_settings(read_scenario("gpt2-generate"), [setting]))
    assert str(e.value).startswith(hint)
