"""Fixtures of the core tests."""
from __future__ import annotations

import pytest

from concurrency_model import compiled


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory of this test's own, and this process's cache state as a fresh process has it."""
    d = tmp_path / "cache"
    monkeypatch.setenv(compiled.ENV, str(d))
    compiled.reset()
    yield d
    compiled.reset()
