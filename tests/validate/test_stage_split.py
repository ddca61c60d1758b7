"""parallel.stage_split: Megatron-Core's even split of the decoder layers and its explicit layouts, against the
balanced partition."""
import pytest

from concurrency_model.cli import main as cli
from concurrency_model.training.estimate import estimate
from concurrency_model.parallel.partition import layer_split
from concurrency_model.sweep import sweep
from concurrency_model.validate.modern import DSV3_GB200_LAYOUT, megatron_dsv3_ab_rows, rows, scenario_for

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
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: 'layers' cuts a transformer's decoder layers; this "
                                         r"model has none"):
        layer_split([None, None], 2)
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: a layout cuts a transformer's decoder layers"):
        layer_split([None, None], 2, (1, 1))


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
    # DeepSeek-V3's explicit layouts (Megatron-Bridge's _get_deepseek_v3_pipeline_layout), decoder layers a stage:
    # PP 8 "E + 8 | 8 x 6 | 5 + mtp + loss"; PP 16 "E + 4 | 4 x 14 | 1 + mtp + loss"; PP 8 VPP 2 the PP 16 list
    dsv3 = df[df["label"] == "26.04.01 DeepSeekV3 on 256 DGX-B300"].iloc[0]
    assert scenario_for(dsv3)["parallel"]["stage_split"] == [8] * 7 + [5]
    for label in ("26.04 DeepSeekV3 on 256 DGX-B200", "26.04.01 DeepSeekV3 on 256 DGX-B200"):
        assert scenario_for(df[df["label"] == label].iloc[0])["parallel"]["stage_split"] == [4] * 15 + [1]
    # the perf configs' "Et|(tt|)*30mL" on H100 (PP 8 VPP 4) and in 25.09, whose 32 stages make 16 run VPP 2
    h100 = scenario_for(df[df["label"] == "25.09 DeepSeekV3 (dropless) on 1024 DGX-H100"].iloc[0])["parallel"]
    assert h100["stage_split"] == [1] + [2] * 30 + [0] and (h100["pipeline"], h100["interleave"]) == (8, 4)
    b200 = scenario_for(df[df["label"] == "25.09 DeepSeekV3 (tokendrop) on 256 DGX-B200"].iloc[0])["parallel"]
    assert b200["stage_split"] == [1] + [2] * 30 + [0] and (b200["pipeline"], b200["interleave"]) == (16, 2)
    assert b200["schedule"] == "interleaved"
    # Megatron-LM's GB200 runs: "Et|(tt|)*30L" on PP 8 VPP 4, the last virtual stage the loss alone
    gb200 = scenario_for(megatron_dsv3_ab_rows().iloc[0])["parallel"]
    assert gb200["stage_split"] == list(DSV3_GB200_LAYOUT) and sum(DSV3_GB200_LAYOUT) == 61
    assert len(DSV3_GB200_LAYOUT) == gb200["pipeline"] * gb200["interleave"] == 32


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


def test_layout_split_by_hand():
    units = [None, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, None, None]   # embedding, 6 layers, final norm, output layer
    assert layer_split(units, 3, [1, 2, 3]) == [(0, 3), (3, 7), (7, 15)]
    assert layer_split(units, 3, [2, 2, 2]) == layer_split(units, 3)
    # interleaved: entry i on rank i mod 2; rank 0 holds entries 0 and 2 (1 + 3 layers), rank 1 entries 1 and 3
    assert layer_split(units, 2, [1, 1, 3, 1]) == [(0, 9), (9, 15)]
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: the layout holds 5 decoder layers; the model has 6"):
        layer_split(units, 3, [1, 2, 2])
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: a layout of 3 virtual stages on 2 pipeline"):
        layer_split(units, 2, [2, 2, 2])


def _with(**par):
    return {**GPT2, "parallel": {**GPT2["parallel"], **par}}


def test_an_even_layout_is_the_even_split():
    assert estimate(_with(stage_split=[3, 3, 3, 3])).step_time_s == estimate(_with(stage_split="layers")).step_time_s
    inter = dict(pipeline=2, data=2, interleave=2, schedule="interleaved")
    assert (estimate(_with(**inter, stage_split=[3, 3, 3, 3])).step_time_s ==
            estimate(_with(**inter, stage_split="layers")).step_time_s)


def test_a_layout_moves_the_slowest_stage():
    even = estimate(_with(stage_split="layers"))
    front = estimate(_with(stage_split=[6, 2, 2, 2]))   # the first stage: the embedding and 6 layers
    back = estimate(_with(stage_split=[2, 2, 2, 6]))    # the last: 6 layers and the output layer
    assert _blocks(front) == list(range(6)) and front.layers()["layer"].iloc[0] == "wte"
    assert _blocks(back) == list(range(6, 12)) and back.layers()["layer"].iloc[-1] == "lm_head"
    # identical layers: the last stage's three more than the even split's (both with the output layer) cost at least
    # three layers' seconds more a microbatch, and the first stage's six at least six layers' seconds
    t = even.layers()
    block = t[t["layer"].str.startswith("h.9.")]["total_s"].sum()
    assert back.layers().attrs["microbatch_s"] - t.attrs["microbatch_s"] >= 3 * block * (1 - 1e-9)
    assert front.layers().attrs["microbatch_s"] >= 6 * block * (1 - 1e-9)
    assert back.step_time_s > even.step_time_s and back.step_time_s > front.step_time_s


@pytest.mark.parametrize("layout, message", [
    ([3, 3, 3], r"a layout of 3 virtual stages; pipeline x interleave = 4 x 1 = 4"),
    ([3, 3, -1, 7], r"^parallel\.stage_split\[2\]: must be an integer >= 0, got -1"),
    ([3, 3, 3.0, 3], r"^parallel\.stage_split\[2\]: must be an integer >= 0, got 3\.0"),
    ([6, 6, 0, 0], r"^parallel\.stage_split: pipeline rank 2 holds no decoder layer"),
    ([], r"^parallel\.stage_split: expected balanced, layers, counted or a list"),
    (3, r"^parallel\.stage_split: expected balanced, layers, counted or a list"),
    ([3, 3, 3, 4], r"^parallel\.stage_split: the layout holds 13 decoder layers; the model has 12"),
])
def test_bad_layouts(layout, message):
    with pytest.raises(ValueError, match=message):
        estimate(_with(stage_split=layout))


def test_a_bad_layout_on_the_command_line_is_one_line(capsys):
    assert cli(["estimate", "--scenario", "gpt3-175b-3d", "--set", "parallel.stage_split=[48,48]"]) == 2
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0 and "parallel.stage_split: a layout of 2 virtual stages" in err


def test_sweep_with_a_layout_searches_its_pipeline_and_interleave_only():
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "fp16"},
            "parallel": {"global_batch": 64, "stage_split": [4, 2, 2, 4]}}
    r = sweep(spec, [8])
    feasible = r.frame.iloc[:r.feasible]
    assert set(zip(feasible["pipeline"], feasible["interleave"])) <= {(4, 1), (2, 2)}
    assert (feasible["pipeline"] == 4).any() and (feasible["pipeline"] == 2).any()
    for _, row in feasible.groupby(["pipeline", "interleave"]).head(2).iterrows():
        sc = r.scenario(row)
        assert sc["parallel"]["stage_split"] == (4, 2, 2, 4)
        assert estimate(sc).step_time_s == row["step_time_s"]


def test_counted_split_by_hand():
    # Megatron-Core's account_for_embedding/loss_in_pipeline_split: (6 + 2) / 4 = 2 a rank, one fewer at each end
    units = [None, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, None, None]
    assert layer_split(units, 4, "counted") == [(0, 3), (3, 7), (7, 11), (11, 15)]
    assert layer_split(units, 2, "counted") == [(0, 7), (7, 15)]    # 4 a rank: 3, then 3 and the output layer
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: 'counted' .*3 stages do not divide 6 \+ 2"):
        layer_split(units, 3, "counted")


def test_counted_split_relieves_the_ends():
    # gpt2's 12 layers + 2 over 2 stages: 6 and 6 beside the embedding and the output layer; the even split 6 and 6
    # too, so the step is the same; over 7 stages (12 + 2 = 14): 1 beside each end, 2 in the middle
    two = dict(pipeline=2, data=2)
    assert (estimate(_with(**two, stage_split="counted")).step_time_s ==
            estimate(_with(**two, stage_split=[6, 6])).step_time_s)
    seven = _with(pipeline=7, data=1, global_batch=14, microbatch_size=1, stage_split="counted")
    assert (estimate(seven).step_time_s ==
            estimate({**seven, "parallel": {**seven["parallel"], "stage_split": [1, 2, 2, 2, 2, 2, 1]}}).step_time_s)
    with pytest.raises(ValueError, match=r"^parallel\.stage_split: 'counted' .*5 stages do not divide 12 \+ 2"):
        estimate(_with(pipeline=5, data=1, global_batch=60, stage_split="counted"))


def test_qwen3_235b_rows_count_the_embedding_and_the_loss():
    df = rows("megatron_bridge_moe")
    qwen = df[df["label"] == "26.04.01 Qwen3_235B_a22B on 256 DGX-B300"].iloc[0]
    assert scenario_for(qwen)["parallel"]["stage_split"] == "counted"


def test_sweep_with_the_counted_split_keeps_the_stages_that_divide_the_layers_and_two():
    spec = {"model": "gpt2", "cluster": "dgx-a100", "training": {"dtype": "fp16"},
            "parallel": {"global_batch": 64, "stage_split": "counted"}}
    r = sweep(spec, [8])
    feasible = r.frame.iloc[:r.feasible]
    assert set(feasible["pipeline"]) == {1, 2}   # 12 + 2 layers: 4 and 8 stages do not divide them
    row = feasible[feasible["pipeline"] == 2].iloc[0]
    assert estimate(r.scenario(row)).step_time_s == row["step_time_s"]


def test_torchtitan_pipeline_rows_carry_its_default_split():
    # generate_split_points at 9dec370: 126 layers over 8 stages 15, 16 x 6, 15; over 16 (interleaved) 7, 8 x 14, 7
    df = rows("torchtitan")
    one = scenario_for(df[df["label"] == "Table 5: 1F1B"].iloc[0])["parallel"]
    assert one["stage_split"] == [15] + [16] * 6 + [15]
    two = scenario_for(df[df["label"] == "Table 5: Interleaved 1F1B"].iloc[0])["parallel"]
    assert two["stage_split"] == [7] + [8] * 14 + [7] and two["interleave"] == 2


def test_dense_bridge_rows_cut_as_their_recipes():
    # Llama 3.1 405B's base recipe counts the embedding and the loss (126 + 2 over 8 stages); Llama 3 70B's cuts
    # its 80 layers evenly, the output layer on top of the last stage's 10
    df = rows("megatron_bridge")
    big = df[df["label"] == "26.04.01 LLAMA3.1_405B on 1024 DGX-H100"].iloc[0]
    assert scenario_for(big)["parallel"]["stage_split"] == "counted"
    seventy = df[df["label"] == "26.04.01 LLAMA3_70B on 64 DGX-H100"].iloc[0]
    assert scenario_for(seventy)["parallel"]["stage_split"] == "layers"
    small = df[df["label"] == "25.11 LLAMA3_8B on 8 DGX-H100"].iloc[0]
    assert "stage_split" not in scenario_for(small)["parallel"]        # one stage: nothing to cut


def test_nemo_rows_split_their_layers_evenly():
    df = rows("nemo")
    gpt3 = df[df["label"] == "24.07 Pretraining: GPT3-175B seq 2048 on 128 DGX-H100"].iloc[0]
    assert scenario_for(gpt3)["parallel"]["stage_split"] == "layers"   # 96 layers over 8 stages of 6 chunks


def test_deepseek_v3_on_h100_in_25_09_ran_deepep_with_the_ep_overlap():
    # Megatron-Bridge @ f37f883a8 scripts/performance/run_script.py: enable_deepep and A2A_1F1B for h100
    r = rows("megatron_bridge_moe")
    par = scenario_for(r[r["label"] == "25.09 DeepSeekV3 (dropless) on 1024 DGX-H100"].iloc[0])["parallel"]
    assert par["moe_dispatcher"] == "deepep" and par["expert_overlap"] is True
