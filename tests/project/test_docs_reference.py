"""The example figures of docs/reference.md and docs/calibration.md are what the toolkit computes today: each
figure computed through the Python API the page names (or the obvious one), rounded as the page rounds it and
compared with a literal, and the literal found in the page (the pattern of ``test_docs_pages``). Not here: the
sweep's configurations a second (a timing of the machine, ``benchmarks/sweep_speed.py``), device_run.sh's minutes
(a GPU run) and docs/accuracy.md's tables (``benchmarks/accuracy.py``, minutes)."""

import pytest

from concurrency_model import get_model
from concurrency_model.serving.decoder import predict
from concurrency_model.symbols import N
from concurrency_model.validate import registry

from docs_text import in_page, page


# docs/reference.md

def test_resnet50_with_a_symbolic_batch():
    g = get_model("resnet50", batch=N)
    assert str(g.forward_flop()) == "8273001448*N + 53120"
    assert g.params == 25557032
    in_page("reference.md", "g.forward_flop()                             # 8273001448*N + 53120",
            "g.params                                     # 25557032 (torchvision: 25,557,032)")


# the page's "Checked figures" table: parameters and forward GMACs (ours), batch 1
CHECKED = {"resnet50": ("25,557,032", "4.089"), "vgg16": ("138,357,544", "15.470"),
           "alexnet": ("61,100,840", "0.714"), "googlenet": ("6,624,904", "1.498"),
           "densenet121": ("7,978,856", "2.834"), "mobilenet_v2": ("3,504,872", "0.301"),
           "resnet152": ("60,192,808", "11.514"), "resnext50_32x4d": ("25,028,904", "4.230"),
           "vit_b_16": ("86,567,656", "17.564"), "inception_v3": ("23,834,568", "5.713")}


@pytest.mark.parametrize("name", sorted(CHECKED))
def test_checked_figures_of_the_zoo(name):
    g = get_model(name)
    params, gmacs = CHECKED[name]
    assert (f"{int(g.params):,}", f"{float(g.forward_macs()) / 1e9:.3f}") == (params, gmacs)
    row = f"| {name} | {params} | {gmacs} |" if name != "inception_v3" else f"| {params} | {gmacs} |"
    in_page("reference.md", row)


def test_parameters_of_the_sequence_models_and_se_resnext():
    counts = {name: f"{int(get_model(name).params):,}" for name in ("gpt3-175b", "gpt2", "bert-base",
                                                                    "se_resnext101_32x4d")}
    counts["bert-large pretraining"] = f"{int(get_model('bert-large', head='pretraining').params):,}"
    assert counts == {"gpt3-175b": "174,604,259,328", "gpt2": "124,439,808", "bert-base": "109,482,240",
                      "se_resnext101_32x4d": "48,955,416", "bert-large pretraining": "336,226,108"}
    in_page("reference.md", "gpt3-175b has 174,604,259,328 parameters", "gpt2 124,439,808", "bert-base\n109,482,240",
            "bert-large with the pre-training heads 336,226,108",
            "se_resnext101_32x4d, not in torchvision: 48,955,416")


def test_lenet5_work_and_depth():
    g = get_model("lenet5")
    assert (f"{int(g.forward_flop()):,}", int(g.depth())) == ("853,946", 61)
    in_page("reference.md", "ours is W = 853,946, D = 61\nat batch 1")


def test_mixtral_served_by_tensor_or_expert_parallelism():
    """Notebook 07's layouts: Mixtral 8x7B on one DGX H100, 1,024 + 128 tokens in bf16."""
    def run(batch, **parallel):
        return predict({"hf_config": "mixtral-8x7b"}, "dgx-h100", batch=batch, prompt_len=1024, decode_len=128,
                       dtype="bf16", **parallel)
    expert, tensor = dict(data=8, expert=8), dict(tensor=8)
    assert (round(run(256, **expert).tokens_per_s), round(run(256, **tensor).tokens_per_s)) == (11287, 7807)
    small = (round(1e3 * run(8, **tensor).decode_s_per_token, 1), round(1e3 * run(8, **expert).decode_s_per_token, 1))
    assert small == (7.8, 8.4)
    in_page("reference.md", "11,287 tokens/s at batch 256 with the experts over 8 replicas against 7,807 with tensor "
                            "8, which answers a batch of 8 in 7.8 against 8.4 ms a token")


# docs/calibration.md: the CPU runs in data/measured/, predicted on torch's own profile (``calibrated``)

def pct(x: float) -> int:
    return round(100 * x)


def measured(kind: str, host: str, mode: str = "calibrated"):
    v = registry.validate(f"measured-{kind}-{host}-20261204", all_modes=mode != "calibrated")
    v = v[(v["mode"] == mode) & (v["status"] == "ok")]
    assert len(v)
    return v


def too_fast(rows) -> list[int]:
    """Per cent too fast (1 - predicted / measured) of the rows, in the steps file's order."""
    return [pct(1 - p / m) for p, m in zip(rows["predicted"], rows["measured"])]


def test_kernels_on_the_xeon_and_the_epyc():
    xeon = measured("kernels", "cpu-host")
    by_kind = xeon.groupby(xeon["group"].str.split().str[0])["ape"].median()
    assert (pct(xeon["ape"].median()), pct(by_kind["gemm"]), pct(by_kind["conv"]), pct(by_kind["rnn"])) == (
        31, 29, 52, 22)
    assert pct(measured("kernels", "cpu-epyc")["ape"].median()) == 40
    in_page("calibration.md", "kernels 31% median (GEMM 29%, conv 52%, RNN 22%)", "kernels 40%, prompt passes")


def test_steps_on_the_xeon():
    s = measured("steps", "cpu-host")
    kind = s["group"].str.split().str[0]
    assert sorted(pct(a) for a in s[kind == "prefill"]["ape"]) == [1, 4]
    decode = s[kind == "decode"]
    batch1 = decode[~decode["label"].str.contains(" b8 ")]
    assert sorted(pct(a) for a in batch1["ape"]) == [7, 18]
    assert too_fast(decode[decode["label"].str.contains(" b8 ")]) == [53]
    train = too_fast(s[kind == "train"])
    assert (min(train), max(train)) == (33, 55)
    preset = measured("steps", "cpu-host", "preset")
    slow = [p / m for p, m in zip(preset["predicted"], preset["measured"])]
    slow = [round(x) for x, k in zip(slow, preset["group"].str.split().str[0]) if k == "decode"]
    assert (min(slow), max(slow)) == (2, 5)
    in_page("calibration.md", "prompt\npasses 1% and 4%, decode steps 7% and 18% at batch 1 (53% too fast at batch 8), "
                              "training steps 33-55% too fast",
            "the Xeon's decode steps are 2-5 x too slow")


def test_steps_on_the_epyc():
    s = measured("steps", "cpu-epyc")
    kind = s["group"].str.split().str[0]
    assert sorted(pct(a) for a in s[kind == "prefill"]["ape"]) == [9, 15]
    decode, train = too_fast(s[kind == "decode"]), too_fast(s[kind == "train"])
    assert ((min(decode), max(decode)), (min(train), max(train))) == ((43, 64), (27, 58))
    in_page("calibration.md", "prompt passes 9% and 15%, decode steps 43-64% and training\nsteps 27-58% too fast")
