"""BigScience's layout search of February 2022 (``data/bigscience_tr11_layout_search.csv``): the rows as mapped."""
from __future__ import annotations

import pytest

from concurrency_model.validate import modern
from concurrency_model.validate.registry import summarize, validate


@pytest.fixture(scope="module")
def rows():
    return modern.rows("bigscience")


def test_rows_and_their_units(rows):
    """59 measurements, 48 with memory; tokens/s per GPU from the seconds an iteration; the page's GB as GiB."""
    assert len(rows) == 59 and int(rows["measured_memory_bytes"].notna().sum()) == 48
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
    zero0 = rows[rows["zero_stage"] == 0]
    assert len(zero0) == 1 and modern.scenario_for(zero0.iloc[0].to_dict())["training"]["zero_stage"] == 0


def test_both_datasets_validate():
    for name, unit in (("bigscience-tr11", "tokens/s per GPU"), ("bigscience-tr11-memory", "B")):
        s = summarize(validate(name))[0]
        assert s["rows"] > 0 and s["unit"] == unit and 0 < s["median_ape"] < 1, name
