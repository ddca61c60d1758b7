"""The scenario's names (:mod:`concurrency_model.choices`): one list each, the same as the modules that model each
choice hold, read without sympy or numpy (issue 41)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from concurrency_model import choices, scenario
from concurrency_model.ops import optimizer, sparse
from concurrency_model.parallel import allocator, consistency, context, expert, gossip, lora, pipeline, runtime

ROOT = Path(__file__).resolve().parents[2]


def test_the_modelling_modules_hold_the_same_names():
    assert tuple(optimizer.RULES) == choices.OPTIMIZERS  # the update rules, in the same order
    assert tuple(allocator.LOSSES) == choices.LOSSES
    assert tuple(lora.BASE_BYTES) == choices.LORA_BASES
    assert allocator.PARTS == runtime.MEMORY_PARTS
    assert pipeline.SCHEDULES is choices.SCHEDULES and consistency.CONSISTENCY is choices.CONSISTENCY
    assert context.CONTEXT_ALGORITHMS is choices.CONTEXT_ALGORITHMS and expert.DISPATCHERS is choices.DISPATCHERS
    assert gossip.TOPOLOGIES is choices.TOPOLOGIES and sparse.STRUCTURED == choices.STRUCTURED == "2:4"


def test_the_scenario_checks_a_field_against_its_list():
    for field, names in (("optimizer", choices.OPTIMIZERS), ("loss", choices.LOSSES),
                         ("lora_base_dtype", choices.LORA_BASES), ("batch_norm", choices.BATCH_NORM)):
        assert scenario.CHOICES[field] == names
    with pytest.raises(ValueError, match=r"^training\.optimizer: unknown 'adamm'; did you mean 'adam'"):
        scenario.Training.from_dict({"optimizer": "adamm"})
    with pytest.raises(ValueError, match=r"^training\.lora_base_dtype: unknown 'nf5'; allowed: nf4, int4, int8, fp8$"):
        choices.check_lora_base(8, "nf5")
    assert choices.check_lora_base(8, "nf4") is None


@pytest.mark.parametrize("bad", ["2:8", 1.0, -0.1, True, "x", None])
def test_a_sparsity_other_than_two_of_four_or_a_fraction_is_refused(bad):
    with pytest.raises(ValueError, match=r"^sparsity: '2:4' or a fraction of zeros in \[0, 1\)"):
        choices.parse_sparsity(bad)


def test_loading_a_scenario_imports_neither_sympy_nor_numpy():
    code = ("import json, sys\nfrom concurrency_model.scenario import load_scenario\n"
            "sc = load_scenario('gpt3-175b-3d')\n"
            "print(json.dumps([sc.gpus, [m for m in ('sympy', 'numpy', 'pandas', 'scipy') if m in sys.modules]]))")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT,
                       env={"PYTHONPATH": str(ROOT), "PATH": ""})
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout) == [1024, []]
