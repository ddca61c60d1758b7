"""``concurrency-model presets``: every name a scenario accepts, with figures from the preset files."""
import json

from concurrency_model.cli import main
from concurrency_model.hardware.clusters import cluster_names
from concurrency_model.hardware.devices import device_names
from concurrency_model.models import NAMES, get_model


def _json(capsys, *args):
    assert main(["presets", *args, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_devices_and_clusters_as_in_their_files(capsys):
    out = _json(capsys, "devices")
    assert set(out) == {"devices"}
    assert [d["name"] for d in out["devices"]] == device_names()
    h100 = next(d for d in out["devices"] if d["name"] == "h100-sxm5-80gb")
    assert h100["peak_flops"]["bf16"] == 989.4e12 and h100["mem_bw_Bps"] == 3.35e12
    assert h100["mem_capacity_bytes"] == 80e9 and h100["file"] == "presets/devices/h100-sxm5-80gb.json"
    out = _json(capsys, "clusters")
    assert [c["name"] for c in out["clusters"]] == cluster_names()
    a100 = next(c for c in out["clusters"] if c["name"] == "dgx-a100")
    assert (a100["device"], a100["gpus_per_node"], a100["nics_per_node"]) == ("a100-sxm4-80gb", 8, 8)
    assert a100["intra"]["bw_Bps"] == 300e9 and a100["inter"]["bw_Bps"] == 25e9


def test_models_with_their_sizes(capsys):
    out = _json(capsys, "models")["models"]
    zoo = {r["name"]: r for r in out["zoo"]}
    assert list(zoo) == list(NAMES)
    assert zoo["resnet50"]["params"] == 25_557_032 and zoo["resnet50"]["input"] == "224x224 image"
    assert zoo["inception_v3"]["input"] == "299x299 image" and zoo["gpt3-175b"]["input"] == "2048 tokens"
    hf = {r["name"]: r for r in out["hf_config"]}
    assert hf["llama-2-7b"]["params"] == 6_738_415_616 and hf["llama-2-7b"]["input"] == "4096 tokens"
    # GPT-2 small: 12 layers of 24 h^2 + 4 s h forward FLOP a token at h 768, s 1024, plus the 2 h V head
    h, s, v = 768, 1024, 50257
    assert abs(hf["gpt2"]["forward_flop"] / (s * (12 * (24 * h * h + 4 * s * h) + 2 * h * v)) - 1) < 0.02
    families = {f["kind"]: f for f in out["families"]}
    assert families["mlp"]["required"] == ["inputs", "outputs"]
    # a family spec with its listed defaults is the zoo's GPT-2 (the defaults shown are the ones used)
    gpt = {k: v for k, v in families["gpt"]["defaults"].items() if v is not None}
    assert get_model({"kind": "gpt", **gpt}).params == zoo["gpt2"]["params"]


def test_text_lists_every_name(capsys):
    assert main(["presets"]) == 0
    text = capsys.readouterr().out
    for name in (*device_names(), *cluster_names(), *NAMES, "mixtral-8x7b", '{"kind": "mlp", ...}'):
        assert name in text, name
    assert "989 T" in text and "3.35 TB/s" in text  # H100's bf16 peak and bandwidth, SI-scaled


def test_unknown_kind_exits_2(capsys):
    try:
        main(["presets", "gpus"])
    except SystemExit as e:
        assert e.code == 2
    else:
        raise AssertionError("no exit")
    assert "invalid choice" in capsys.readouterr().err
