"""Work and depth of text generation (concurrency_model.serving.generation; paper §2.5 applied to inference)."""
from __future__ import annotations

import json

import pytest

from concurrency_model.cli import main
from concurrency_model.serving.generation import generation_cost
from concurrency_model.models import get_model

DRAFT = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 1024, "vocab": 50257}


def test_decode_work_is_kaplans_forward_count():
    # Kaplan et al. 2020 Table 1 (training-formulas.md): 2 FLOP per weight of QKV, projection, feed-forward and the
    # (tied) de-embedding, plus the "mask" row 2 n_layer n_ctx d for the scores; the weighted sum of V is as much
    # again. GPT-2 (12 layers, d = 768; its 124,439,808 parameters less the 786,432 position embeddings, which
    # cost no FLOP), contexts 513..640 (mean 576.5): 269 MFLOP a token, within 1% (norms, biases, activations)
    c = generation_cost("gpt2", 1, 512, 128)
    g = get_model("gpt2", batch=1)
    per_token = 2 * (float(g.params) - 1024 * 768) + 2 * (2 * 12 * 576.5 * 768)
    assert c["decode"]["work"] / 128 == pytest.approx(per_token, rel=0.01)
    assert c["work"] == c["prefill"]["work"] + c["decode"]["work"]
    assert c["depth"] == c["prefill"]["depth"] + c["decode"]["depth"]


def test_depth_grows_with_every_token_not_with_the_prompt():
    short, long_ = generation_cost("gpt2", 1, 64, 32), generation_cost("gpt2", 1, 512, 32)
    assert long_["prefill"]["depth"] < 1.1 * short["prefill"]["depth"]  # the prompt is processed in parallel
    more = generation_cost("gpt2", 1, 64, 64)
    step = short["decode"]["depth"] / 32
    assert more["decode"]["depth"] == pytest.approx(2 * short["decode"]["depth"], rel=0.01)
    assert step > 0.9 * short["prefill"]["depth"]  # one token's pass is about as deep as the whole prompt's
    assert short["average_parallelism"] < short["prefill"]["work"] / short["prefill"]["depth"]


def test_speculation_trades_work_for_depth():
    good = generation_cost("gpt2", 1, 512, 128, {"draft": DRAFT, "tokens": 4, "acceptance": 0.8})["speculative"]
    assert good["depth_reduction"] > 1.5 and good["work_increase"] > 1
    assert good["decode"]["iterations"] == pytest.approx(128 / 3.3616)
    bad = generation_cost("gpt2", 1, 512, 128, {"draft": DRAFT, "tokens": 4, "acceptance": 0.0})["speculative"]
    assert bad["depth_reduction"] < 1  # every draft token rejected: the draft's steps only add depth


def test_cli_and_bad_input(capsys):
    assert main(["workdepth", "--model", "gpt2", "--generate", "100", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["pass"] == "generate" and out["work"] == out["generation"]["work"]
    assert out["average_parallelism"] == pytest.approx(out["work"] / out["depth"])
    assert main(["workdepth", "--model", "resnet50", "--generate", "10", "10"]) == 2
    assert main(["workdepth", "--model", "gpt2", "--generate", "1000", "100"]) == 2
    assert "exceeds the model's context of 1024" in capsys.readouterr().err
    with pytest.raises(ValueError, match="^decode_len: must be a positive integer"):
        generation_cost("gpt2", 1, 10, 0)
