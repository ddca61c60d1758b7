"""parallel.stage_split: Megatron-Core's even split of the decoder layers against the balanced partition."""
import pytest

from concurrency_model.training.estimate import estimate
from concurrency_model.parallel.partition import layer_split
from concurrency_model.sweep import sweep
from concurrency_model.validate.modern import rows, scenario_for

GPT2 = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 1, "pipeline": 4, "microbatch_size": 4,
                                                             "global_batch": 64}}


def _blocks(e) -> list[int]:
    """The decoder layers (``h.N.``) of the slowest stage of estimate ``e``."""
    names = e.layers()["layer"]
    return sorted({int(n.split(".")[1]) for n in names if n.startswith("h.")})


def test_layer_split_by_hand():
    # embedding, 6 layers of 2 units each, final norm and output layer: 3 stages of 2 layers
    units = [None, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, None, None]
    assert layer_split(units, 3) == [(0, 5), (5, 9), (9, 15)]
    assert layer_split(units, 1) == [(0, 15)]
    assert layer_split(units, 6) == [(0, 3), (3, 5), (5, 7), (7, 9), (9, 11), (11, 15)]


def test_layer_split_refuses_uneven():
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: .*4 stages do not divide 6 layers"):
        layer_split([None, 0, 1, 2, 3, 4, 5, None], 4)
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: .*do not divide 0 layers"):
        layer_split([None, None], 2)


def test_megatron_split_puts_the_output_layer_on_top_of_three_layers():
    # gpt2's 12 layers over 4 stages: Megatron-Core builds 3 a stage; the last adds the final norm and lm_head
    bal = estimate(GPT2)
    lay = estimate({**GPT2, "parallel": {**GPT2["parallel"], "stage_split": "layers"}})
    t = lay.layers()
    assert _blocks(lay) == [9, 10, 11] and t["layer"].iloc[-1] == "lm_head"
    assert t.attrs["stage"] == 3
    # the balanced partition relieves the stage with the output layer (fewer decoder layers beside it)
    assert len(_blocks(bal)) < 3 and bal.layers()["layer"].iloc[-1] == "lm_head"
    assert lay.step_time_s > bal.step_time_s
    # identical decoder layers cost the same; the balanced stage holds at most one of them beside the head, the even
    # split three: its microbatch is at least two layers' seconds longer
    t["block"] = [n.split(".")[1] if n.startswith("h.") else "head" for n in t["layer"]]
    per_block = t.groupby("block")["total_s"].sum()
    block = per_block["9"]
    assert per_block["10"] == pytest.approx(block, rel=1e-12) and per_block["11"] == pytest.approx(block, rel=1e-12)
    assert t.attrs["microbatch_s"] - bal.layers().attrs["microbatch_s"] >= 2 * block * (1 - 1e-12)


def test_even_split_without_pipeline_is_the_balanced_one():
    one = {**GPT2, "parallel": {**GPT2["parallel"], "pipeline": 1, "data": 4}}
    a = estimate(one)
    b = estimate({**one, "parallel": {**one["parallel"], "stage_split": "layers"}})
    assert a.step_time_s == b.step_time_s


def test_bad_stage_split():
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: unknown 'layer'; did you mean 'layers'"):
        estimate({**GPT2, "parallel": {**GPT2["parallel"], "stage_split": "layer"}})
    five = {**GPT2, "parallel": {**GPT2["parallel"], "pipeline": 6, "stage_split": "layers"}}
    estimate(five)  # 6 divides 12
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: .*8 stages do not divide 12 layers"):
        estimate({**GPT2, "parallel": {**GPT2["parallel"], "pipeline": 8, "global_batch": 64,
                                       "stage_split": "layers"}})


def test_megatron_bridge_recipes_stage_split():
    df = rows("megatron_bridge_moe")
    oss = df[df["label"] == "26.04.01 GPT OSS 120B on 64 DGX-H100"].iloc[0]
    assert scenario_for(oss)["parallel"]["stage_split"] == "layers"   # PP 4, no layout, no account_for
    oss_b300 = df[df["label"] == "26.04.01 GPT OSS 120B on 64 DGX-B300"].iloc[0]
    assert "stage_split" not in scenario_for(oss_b300)["parallel"]    # PP 1: nothing to cut
    dsv3 = df[df["label"] == "26.04.01 DeepSeekV3 on 256 DGX-B300"].iloc[0]
    assert "stage_split" not in scenario_for(dsv3)["parallel"]        # the recipe's explicit layout


def test_sweep_with_the_even_split_equals_estimate():
    spec = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64, "stage_split": "layers"},
            "training": {"dtype": "fp16"}}
    r = sweep(spec, [8])
    piped = r.frame.iloc[:r.feasible]
    piped = piped[piped["pipeline"] > 1].head(10)
    assert len(piped)
    for _, row in piped.iterrows():
        sc = r.scenario(row)
        assert sc["parallel"]["stage_split"] == "layers"
        assert estimate(sc).step_time_s == row["step_time_s"]


def test_sweep_rejects_stages_that_do_not_divide_the_layers():
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "fp16"},
            "parallel": {"global_batch": 60, "pipeline": 5, "stage_split": "layers"}}
    with pytest.raises(ValueError, match=r"rejected: stage_split: layers needs the pipeline stages to divide"):
        sweep(spec, [10])


def test_a_warm_sweep_cache_never_serves_another_stage_split():
    # the sweep keeps its stage tables and partitions across processes (compiled.arrays); a scenario differing only
    # in a field that changes them must not read the other's: the balanced sweep first, then the even split, whose
    # rows must still be estimate's
    spec = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}, "training": {"dtype": "fp16"}}
    sweep(spec, [8])
    split = {**spec, "parallel": {"global_batch": 64, "stage_split": "layers"}}
    r = sweep(split, [8])
    piped = r.frame.iloc[:r.feasible]
    piped = piped[piped["pipeline"] > 1].head(5)
    assert len(piped)
    for _, row in piped.iterrows():
        assert estimate(r.scenario(row)).step_time_s == row["step_time_s"]
