"""Layout ranking (:mod:`concurrency_model.validate.ranking`) on small synthetic frames with hand-computed
Spearman correlations, and its grouping of a real set."""
from __future__ import annotations

import math

import pandas as pd
import pytest

from concurrency_model.validate import ranking


def _frame(measured, predicted, dataset="d", group="g"):
    return pd.DataFrame({"dataset": dataset, "group": group, "layout": [f"L{i}" for i in range(len(measured))],
                         "measured": measured, "predicted": predicted})


def test_spearman_by_hand():
    # measured ranks 1..5, predicted ranks 1,3,2,5,4: d = 0,-1,1,-1,1, sum d^2 = 4, rho = 1 - 6*4/(5*24) = 0.8
    t = ranking.rank_groups(_frame([10.0, 20, 30, 40, 50], [1.0, 3, 2, 5, 4]))
    assert len(t) == 1 and t.loc[0, "layouts"] == 5
    assert t.loc[0, "spearman"] == pytest.approx(0.8)
    # the measured best is L4 (50), the predicted best L3 (5)
    assert (t.loc[0, "measured_best"], t.loc[0, "predicted_best"], t.loc[0, "best_match"]) == ("L4", "L3", False)


def test_reversed_order_and_groups_apart():
    f = pd.concat([_frame([1.0, 2, 3], [3.0, 2, 1], group="a"), _frame([1.0, 2, 3], [10.0, 20, 30], group="b"),
                   _frame([5.0, 1], [1.0, 5], dataset="e")], ignore_index=True)
    t = ranking.rank_groups(f).set_index(["dataset", "group"])
    assert t.loc[("d", "a"), "spearman"] == pytest.approx(-1.0) and not t.loc[("d", "a"), "best_match"]
    assert t.loc[("d", "b"), "spearman"] == pytest.approx(1.0) and t.loc[("d", "b"), "best_match"]
    assert t.loc[("e", "g"), "spearman"] == pytest.approx(-1.0) and t.loc[("e", "g"), "layouts"] == 2


def test_repeated_layouts_take_medians_and_missing_predictions_drop():
    f = pd.DataFrame({"dataset": "d", "group": "g", "layout": ["a", "a", "a", "b", "c", "x"],
                      "measured": [1.0, 9.0, 2.0, 3.0, 4.0, 100.0],
                      "predicted": [1.0, 1.0, 1.0, 2.0, 3.0, float("nan")]})
    t = ranking.rank_groups(f)
    # a: median 2 < b 3 < c 4, as predicted: rho 1; x (no prediction) is not a layout
    assert t.loc[0, "layouts"] == 3 and t.loc[0, "spearman"] == pytest.approx(1.0)
    assert t.loc[0, "measured_best"] == "c"


def test_ties_in_the_prediction():
    t = ranking.rank_groups(_frame([1.0, 2, 3], [5.0, 5, 5]))  # the estimate cannot tell them apart
    assert math.isnan(t.loc[0, "spearman"]) and t.loc[0, "best_match"]  # the measured best holds the tied top
    # ties take average ranks: predicted ranks 1, 2.5, 2.5 against 1, 2, 3 -> rho = 0.866 (= sqrt(3) / 2)
    t = ranking.rank_groups(_frame([1.0, 2, 3], [1.0, 2, 2]))
    assert t.loc[0, "spearman"] == pytest.approx(math.sqrt(3) / 2)


def test_summary_counts_groups_of_three_or_more():
    t = ranking.rank_groups(pd.concat([_frame([10.0, 20, 30, 40, 50], [1.0, 3, 2, 5, 4], group="a"),
                                       _frame([1.0, 2, 3], [3.0, 2, 1], group="b"),
                                       _frame([1.0, 2], [2.0, 1], group="c")], ignore_index=True))
    s = ranking.summarize(t).iloc[0]
    assert (s["groups"], s["ranked"]) == (3, 2)
    assert s["mean_spearman"] == pytest.approx((0.8 - 1.0) / 2) and s["min_spearman"] == pytest.approx(-1.0)
    assert s["best_match"] == pytest.approx(0.0)  # a: L3 over L4; b: reversed; c: reversed
    assert s["meets"] is not None and not s["meets"]


def test_sample_groups_is_deterministic():
    df = pd.DataFrame({"k": [1] * 10 + [2] * 3 + [3] * 2, "x": range(15)})
    out = ranking.sample_groups(df, ["k"], every=2, cap=4)
    assert out["x"].tolist() == [0, 3, 6, 9, 13, 14]  # groups 1 and 3; group 1 spread over 4 rows


def test_unknown_set_refused():
    with pytest.raises(ValueError, match="dataset: unknown 'vtrain'"):
        ranking.frames(["vtrain"])


def test_megatron_bridge_groups_merge_containers():
    f = ranking.frames(["megatron_bridge"], workers=1)
    # Llama 3 70B on DGX-H100 pre-training: GBS 256 (26.02-26.04.01) and GBS 128 (25.09, 25.11): two layouts (the
    # containers merged), whether or not the estimate refuses them for memory
    assert f.loc[f["group"] == "LLAMA3_70B on DGX-H100", "layout"].nunique() == 2
    assert set(f["group"]) == {"LLAMA3.1_405B on DGX-H100", "SFT LLAMA3_70B on DGX-H100", "LLAMA3_70B on DGX-H100",
                               "LLAMA3_8B on DGX-H100", "LLAMA3.1_405B on DGX-B200", "LLAMA3_8B on DGX-B200"}
    t = ranking.rank_groups(f).set_index("group")
    assert t.loc["LLAMA3_8B on DGX-H100", "layouts"] == 1 and math.isnan(t.loc["LLAMA3_8B on DGX-H100", "spearman"])


def test_megatron_bridge_moe_layouts_carry_the_expert_degree():
    f = ranking.frames(["megatron_bridge_moe"], workers=1)
    qwen = f.loc[f["group"] == "Qwen3_30B_a3B on DGX-H100", "layout"].unique()
    # EP 16 on one pipeline stage against EP 8 over two interleaved stages (microbatch 1 and 2): three layouts
    assert len(qwen) == 3
    assert sorted(lay.split(" ep ")[1].split()[0] for lay in qwen) == ["16", "8", "8"]
    # a variant the table names apart is its own group, not a layout of the plain model's
    assert "Qwen3_30B_a3B (tokendrop) on DGX-H100" in set(f["group"])
