"""The report's validation runs in the CPUs but one (the report's other worker keeps one busy)."""
from __future__ import annotations

import pytest

from concurrency_model.report import accuracy


@pytest.mark.parametrize("cpus, want", [(1, 1), (2, 1), (4, 3), (None, 1)])
def test_validation_rows_leaves_a_cpu_to_the_other_worker(monkeypatch, cpus, want):
    seen = {}
    monkeypatch.setattr(accuracy.os, "cpu_count", lambda: cpus)
    monkeypatch.setattr(accuracy, "validate", lambda name, quick, progress, workers: seen.update(workers=workers))
    accuracy.validation_rows(True)
    assert seen["workers"] == want
    accuracy.validation_rows(True, workers=3)
    assert seen["workers"] == 3
