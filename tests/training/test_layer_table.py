"""The layer table (``Estimate.layers()``, ``estimate --layers``): the slowest stage's layers add up to the step's
per-microbatch passes, recompute and tensor-parallel traffic; kinds, bounds and the CLI."""
import json

import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from concurrency_model import estimate
from concurrency_model.cli import main
from concurrency_model.timing.parts import BOUNDS, bound_of
from concurrency_model.timing.parts import Parts


@settings(max_examples=12, deadline=None)
@given(model=st.sampled_from(["gpt2", "resnet50", "bert-base"]), t=st.sampled_from([1, 2]),
       p=st.sampled_from([1, 2, 4]), recompute=st.sampled_from(["none", "selective", "full"]))
def test_layers_add_up_to_the_steps_microbatch(model, t, p, recompute):
    e = estimate({"model": model, "parallel": {"data": 2, "tensor": t, "pipeline": p, "global_batch": 16,
                                               "microbatch_size": 2}, "training": {"recompute": recompute}})
    table, b = e.layers(), e.breakdown
    per_step = b["forward_s"] + b["backward_s"] + b["recompute_s"] + b["tensor_parallel_comm_s"]
    assert table["total_s"].sum() * e.scenario.microbatches == pytest.approx(per_step, rel=1e-9)
    assert table["share"].sum() == pytest.approx(1.0, rel=1e-12)
    assert set(table["bound"]) <= set(BOUNDS)
    st_ = table.attrs
    assert st_["stages"] == p and (st_["first_layer"], st_["end_layer"]) == tuple(e.stages[st_["stage"]])
    assert len(table) == st_["end_layer"] - st_["first_layer"]
    if recompute == "none":
        assert (table["recompute_s"] == 0).all()
    if t == 1:
        assert (table["tensor_comm_s"] == 0).all()
    kinds = e.layer_kinds()
    assert kinds["layers"].sum() == len(table)
    assert kinds["total_s"].sum() == pytest.approx(table["total_s"].sum(), rel=1e-12)
    assert list(kinds["total_s"]) == sorted(kinds["total_s"], reverse=True)


def test_recompute_runs_the_forward_again():
    sc = {"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}}
    none, full, selective = (estimate({**sc, "training": {"recompute": r}}).layers()
                             for r in ("none", "full", "selective"))
    # a full recompute runs each transformer block's forward again, not the embedding, final norm, output layer and
    # loss around the blocks (Megatron's _checkpointed_forward loops over the transformer layers only)
    blocks = full["layer"].str.match(r"^h\.\d+\.")
    assert blocks.sum() == 12 * 12 and not blocks[full["layer"].isin(["wte", "wpe", "ln_f", "lm_head"])].any()
    assert np.allclose(full.loc[blocks, "recompute_s"], none.loc[blocks, "forward_s"])
    assert (full.loc[~blocks, "recompute_s"] == 0).all()
    assert full["recompute_s"].sum() == pytest.approx(none.loc[blocks, "forward_s"].sum(), rel=1e-12)
    attention = selective["kind"] == "attention"
    assert np.allclose(selective.loc[attention, "recompute_s"], none.loc[attention, "forward_s"])
    assert (selective.loc[~attention, "recompute_s"] == 0).all()


def test_what_bounds_a_layer():
    t = estimate({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}}).layers()
    bound = dict(zip(t["layer"], t["bound"]))
    # 8192 x 768 x 3072 in bf16: 570 FLOP a byte, over the A100's ridge of 156; layer norm streams its input
    assert bound["h.0.fc1"] == "compute" and bound["h.0.ln1"] == "memory" and bound["h.0.add1"] == "memory"
    tiny = estimate({"model": {"kind": "mlp", "inputs": 8, "outputs": 2, "hidden": 8, "layers": 2},
                     "parallel": {"data": 1, "global_batch": 1}}).layers()
    assert set(tiny["bound"]) == {"launch"}  # a few hundred FLOP a kernel: the launch is all there is
    one = Parts(*(np.array([x]) for x in (1e-6, 3e-6, 0.0, 1e-6, 1.0)))
    assert bound_of(one) == "memory" and bound_of(one, one.with_work(0.1).times(40)) == "launch"


def test_cli_layers_text_json_and_refusals(capsys):
    args = ["estimate", "--scenario", "gpt3-175b-3d", "--layers", "3"]
    assert main(args) == 0
    text = capsys.readouterr().out
    assert "one microbatch on the slowest stage (stage 16 of 16, layers 1083-1156): 102.4 ms" in text
    assert "the 3 slowest layers" in text and "  linear " in text
    assert main(args + ["--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["slowest_stage"] == {"stage": 15, "stages": 16, "first_layer": 1083, "end_layer": 1157,
                                    "microbatch_s": pytest.approx(0.1024, rel=1e-3)}
    assert [r["layer"] for r in out["layers"]][:1] == ["lm_head"] and len(out["layers"]) == 3
    assert out["layer_kinds"][0]["kind"] == "linear"
    with pytest.raises(SystemExit) as bad:
        main(["estimate", "--scenario", "gpt3-175b-3d", "--layers", "0"])
    assert bad.value.code == 2 and "argument --layers: must be an integer >= 1, got 0" in capsys.readouterr().err
    assert main(["estimate", "--scenario", "gpt3-175b-3d", "--layers", "--compare", "training.zero_stage=3"]) == 2
    assert capsys.readouterr().err.strip().endswith("--compare: not with --layers")
