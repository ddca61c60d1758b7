"""docs/scenario.md against the code: every field of every scenario section, its default and its choices."""
import json
import re
from pathlib import Path

import pytest

from concurrency_model.hardware.clusters import cluster_names
from concurrency_model.serving.output_lengths import DISTRIBUTIONS
from concurrency_model.scenario import RUN_FIELDS
from concurrency_model.scenario import BATCHING, CHOICES, INFERENCE, PARALLEL, TOP, TRAINING, load_scenario
from concurrency_model.serving.overheads import WEIGHT_BYTES

DOC = (Path(__file__).parents[2] / "docs" / "scenario.md").read_text()
CODE = {"parallel": PARALLEL, "training": TRAINING, "inference": INFERENCE}
# choices the inference section checks outside the scenario's CHOICES
INFERENCE_CHOICES = {"batching": BATCHING, "output_lengths": DISTRIBUTIONS, "prompt_lengths": DISTRIBUTIONS,
                     "weight_dtype": tuple(WEIGHT_BYTES), "dtype": CHOICES["dtype"]}


def rows(section: str) -> dict:
    """The section's table: field -> (default cell, values cell)."""
    body = DOC.split(f"## `{section}`\n", 1)[1].split("\n## ", 1)[0]
    out = {}
    for line in body.splitlines():
        m = re.match(r"\| `(\w+)` \|([^|]*)\|([^|]*)\|", line)
        if m:
            out[m.group(1)] = (m.group(2).strip(), m.group(3).strip())
    return out


def ticked(cell: str) -> set:
    return set(re.findall(r"`([^`]+)`", cell))


@pytest.mark.parametrize("section", list(CODE))
def test_every_field_with_its_default(section):
    table = rows(section)
    assert list(table) == list(CODE[section])  # the code's order, none missing, none extra
    for field, (default, _) in table.items():
        assert json.loads(default.strip("`")) == CODE[section][field], field


@pytest.mark.parametrize("section, choices", [("parallel", CHOICES), ("training", CHOICES),
                                              ("inference", INFERENCE_CHOICES)])
def test_every_choice(section, choices):
    for field, (_, values) in rows(section).items():
        if field in choices:
            assert ticked(values) == set(choices[field]), field


def test_run_and_top_level_fields():
    assert list(rows("run")) == list(RUN_FIELDS)
    top = set(re.findall(r"^\| `(\w+)`", DOC.split("## Top level\n", 1)[1].split("\n## ", 1)[0], re.M))
    assert top | {"notes"} == set(TOP)  # `name`, `notes` share a row
    cluster_row = next(line for line in DOC.splitlines() if line.startswith("| `cluster` |"))
    assert set(cluster_names()) <= ticked(cluster_row)
    assert load_scenario({"model": "gpt2"}).cluster.name == "dgx-a100"  # the default the page gives


def test_example_loads():
    example = json.loads(DOC.split("```json\n", 1)[1].split("```", 1)[0])
    sc = load_scenario(example)
    assert sc.gpus == 8 * 8 * 16 and sc.microbatches == 1536 // 8 and sc.run.tokens == 300e9
