"""A decode step (or a continuous-batching iteration) by kind of layer (``Inference.decode_kinds()``,
``infer --layers``): the kinds add up to the step, and what bounds them moves from memory to compute with the batch."""
import json

import pytest

from concurrency_model.cli import main
from concurrency_model.serving.decoder import infer

LLAMA = {"hf_config": "llama-2-7b"}


def sc(batch, batching="static", **par):
    return {"model": LLAMA, "cluster": "dgx-a100", "parallel": par,
            "inference": {"batch": batch, "prompt_len": 512, "decode_len": 64, "batching": batching}}


@pytest.mark.parametrize("scenario", [sc(8), sc(8, "continuous"), sc(16, tensor=2), sc(16, "continuous", pipeline=2),
                                      {**sc(8), "model": {"hf_config": "mixtral-8x7b"}, "cluster": "dgx-h100",
                                       "parallel": {"data": 2, "expert": 2, "tensor": 2}}])
def test_the_kinds_add_up_to_the_step(scenario):
    r = infer(scenario)
    kinds = r.decode_kinds()
    assert sum(k["seconds"] for k in kinds) == pytest.approx(r.decode_s_per_token, rel=1e-12)
    assert sum(k["share"] for k in kinds) == pytest.approx(1.0, rel=1e-12)
    assert [k["seconds"] for k in kinds] == sorted((k["seconds"] for k in kinds), reverse=True)
    layers = {k["kind"]: k["layers"] for k in kinds}
    assert layers["output_layer"] == 1 and "kv_attention" in layers
    if r.parallel["tensor"] > 1:
        assert "tensor_comm" in layers


def test_the_linear_layers_turn_compute_bound_with_the_batch():
    """Llama-2-7B's 4096 x 4096 .. 11008 weights on an A100: a GEMV at batch 1 streams them (memory), 384 rows
    reuse each weight 384 times, past the ridge of 156 FLOP a byte (compute); short contexts keep the cache small."""
    def linear(b):
        s = sc(b)
        s["inference"].update(prompt_len=64, decode_len=16)
        return {k["kind"]: k["bound"] for k in infer(s).decode_kinds()}["linear"]
    assert (linear(1), linear(384)) == ("memory", "compute")


def test_refusals_and_cli(capsys):
    spec = sc(4)
    spec["inference"]["speculative"] = {"draft": {"hf_config": "llama-2-7b"}, "tokens": 4, "acceptance": 0.7}
    with pytest.raises(ValueError, match=r"^inference.speculative: a decode step by kind of layer"):
        infer(spec).decode_kinds()
    assert main(["infer", "--scenario", "gpt2-generate", "--layers", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert sum(k["seconds"] for k in out["decode_kinds"]) == pytest.approx(out["decode_s_per_token"], rel=1e-9)
    assert main(["infer", "--scenario", "gpt2-generate", "--layers"]) == 0
    assert "a decode step by kind of layer" in capsys.readouterr().out
    for extra in (["--max-batch"], ["--compare", "inference.batch=16"]):
        assert main(["infer", "--scenario", "gpt2-generate", "--layers", *extra]) == 2
    assert main(["infer", "--scenario", "gpt2-generate", "--set", "model=resnet50", "--set",
                 'inference={"batch": 8}', "--layers"]) == 2
    assert "needs a causal decoder" in capsys.readouterr().err
