"""BigScience's layout search of February 2022 (``data/bigscience_tr11_layout_search.csv``): the rows as mapped."""
from __future__ import annotations

import pandas as pd
import pytest

from concurrency_model.validate import modern
from concurrency_model.validate.registry import summarize, validate


@pytest.fixture(scope="module")
def rows():
    return modern.rows("bigscience")


def test_rows_and_their_units(rows):
    """129 runs: 123 timed, 88 with memory, 6 that went out of memory (neither); tokens/s per GPU from the seconds an
    iteration; the page's GB as GiB."""
    assert len(rows) == 129 and int(rows["measured_memory_bytes"].notna().sum()) == 88
    oom = rows[rows["went_oom"]]
    assert len(oom) == 6 and oom["measured_tps"].isna().all() and oom["measured_memory_bytes"].isna().all()
    assert rows.loc[~rows["went_oom"], "measured_tps"].notna().all()
    first = rows.iloc[3]  # 02-20, "Choosing the fastest 3D topology": 48 nodes, data 12 x tensor 8 x pipeline 4
    assert (first["data"], first["tensor"], first["pipeline"], first["microbatch"]) == (12, 8, 4, 1)
    assert first["global_batch"] == 2040 and first["gpus"] == 384
    assert first["measured_tps"] == pytest.approx(2040 * 2048 / 384 / 189.06, rel=1e-12)
    assert first["measured_memory_bytes"] == 47 * 2 ** 30
    # data 5 at the table's 2,045 sequences: whole microbatches of every replica, 2,045
    five = rows[rows["label"].str.contains(" d5 t8 p9 ")].iloc[0]
    assert five["global_batch"] == 2045 and five["layers"] == 81 and five["note"].startswith("the size and PP")


def test_scenario_is_deepspeed_zero1_on_jean_zay(rows):
    sc = modern.scenario_for(rows.iloc[3].to_dict())
    assert sc["training"]["framework"] == "deepspeed" and sc["training"]["zero_stage"] == 1
    assert sc["training"]["dtype"] == "fp16" and sc["training"]["recompute"] == "full"
    assert sc["model"] == {"kind": "gpt", "layers": 80, "hidden": 14400, "heads": 64, "seq_len": 2048,
                           "vocab": 250_880}
    c = sc["cluster"]
    assert c["nics_per_node"] * c["inter"]["bw_Bps"] == 4 * 100e9 / 8  # 4 Omni-Path 100 Gb/s ports a node
    zero0 = rows[(rows["zero_stage"] == 0) & (rows["dtype"] == "fp16")]  # the fp16 ZeRO 0 twin of 02-21
    assert len(zero0) == 1 and modern.scenario_for(zero0.iloc[0].to_dict())["training"]["zero_stage"] == 0


def test_both_datasets_validate():
    for name, unit in (("bigscience-tr11", "tokens/s per GPU"), ("bigscience-tr11-memory", "B")):
        s = summarize(validate(name))[0]
        assert s["rows"] > 0 and s["unit"] == unit and 0 < s["median_ape"] < 1, name


def test_later_tables_map_as_the_page_ran_them(rows):
    """From 02-27 the stages are cut with the two embeddings counted as layers (DeepSpeed's ``type:transformer|
    embedding``: 106 + 2 over 12 stages, 9 a stage, the first and last 8 decoder layers), before it by the decoder
    layers alone, 78 over 12 as 7 on each stage but the last, which has 1 (the page's words); from 02-28 the runs are
    bf16 under ZeRO 0, DeepSpeed's BF16_Optimizer; every row is read by nvidia-smi, with the stack's measured
    context."""
    bf16 = rows[rows["label"].str.contains("02-28 Rebalancing layers.*12288/106.*a64", regex=True)].iloc[0]
    sc = modern.scenario_for(bf16.to_dict())
    assert sc["parallel"]["stage_split"] == "counted" and bf16["dtype"] == "bf16" and bf16["zero_stage"] == 0
    assert sc["training"]["cuda_context_bytes"] == 1573 * 2 ** 20
    uneven = rows[rows["label"].str.contains("13824/78: 182B h13824 l78 a64 d8 t4 p12 mb2")].iloc[0]
    assert modern.scenario_for(uneven.to_dict())["parallel"]["stage_split"] == [7] * 11 + [1]  # the page's cut
    assert (rows["memory_reading"] == "nvidia-smi").all()


def test_the_peak_as_nvidia_smi_reads_it():
    """nvidia-smi's used memory holds the allocator's reserved bytes and what sits outside it (the CUDA context,
    NCCL's buffers), so the compared figure is their sum for these rows, the reserved figure alone for torchtitan's
    (``max_reserved``); a run the estimate refuses on memory gets the verdict "does not fit"."""
    both = pd.concat([modern.rows("bigscience").iloc[[0, 3]], modern.rows("torchtitan").iloc[[0]]], ignore_index=True)
    r = modern.evaluate(both)
    outside = r["predicted_peak_bytes"] - r["predicted_reserved_bytes"]
    assert outside.iloc[0] > 1573 * 2 ** 20 and outside.iloc[1] > 1573 * 2 ** 20 and outside.iloc[2] == 0
    assert set(r["memory_verdict"]) <= set(modern.VERDICTS)
    oom = modern.rows("bigscience")
    oom = oom[oom["went_oom"] & oom["label"].str.contains(" d48 t8 p1 ")]  # 181B at data 48: 104 GB of state alone
    got = modern.evaluate(oom)
    assert got["memory_verdict"].tolist() == ["does not fit"] and got["status"].tolist() == ["refused"]


def test_one_plan_predicts_a_modern_set_and_a_measured_run():
    """A plan of BigScience's timed rows beside one of the toolkit's own runs predicts both: the modern sets drop the
    runs without the compared figure (the 6 that went out of memory) before sampling, and the measured runs keep
    their own rows."""
    steps = "measured-steps-cpu-host-20261204"
    s = {x["name"]: x for x in summarize(validate(["bigscience-tr11", steps], workers=1))}
    assert s["bigscience-tr11"]["rows_total"] == 123 and s["bigscience-tr11"]["rows"] == 41  # 1 in 3, quick
    assert s[steps]["rows"] == 9 and s[steps]["error"] is None
