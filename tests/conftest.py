"""Shared test helpers."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pandas as pd
import pytest

from concurrency_model import compiled

DATA = Path(__file__).resolve().parents[1] / "data"

# the compiled-function cache of the test run: its own folder (inherited by the CLI subprocesses), never the user's
_CACHE = tempfile.TemporaryDirectory(prefix="concurrency-model-test-cache-")
os.environ.setdefault("CONCURRENCY_MODEL_CACHE_DIR", _CACHE.name)


@pytest.fixture
def cache(tmp_path, monkeypatch):
    """An empty cache directory of this test's own, and this process's cache state as a fresh process has it."""
    d = tmp_path / "cache"
    monkeypatch.setenv(compiled.ENV, str(d))
    compiled.reset()
    yield d
    compiled.reset()


@pytest.fixture
def broken_copy(tmp_path):
    """``copy(name, column, row=None, value="fast", drop=False)``: ``data/NAME`` copied to ``tmp_path`` with
    ``column`` of data row ``row`` (0-based) set to ``value``, or the column dropped; text kept as text."""
    def copy(name, column, row=None, value="fast", drop=False):
        df = pd.read_csv(DATA / name, dtype=str, keep_default_na=False)
        if drop:
            df = df.drop(columns=[column])
        else:
            df.loc[row, column] = value
        df.to_csv(tmp_path / name, index=False)
    return copy


@pytest.fixture
def loss_seconds():
    """``seconds(tokens, vocab, value_bytes=2)``: the fp32 cross-entropy on the logits by hand, forward and
    backward, on the A100 preset: one memory-bound kernel per step, ``bytes / (2,039 GB/s x 0.8) + 3.8 us``,
    reading and writing ``vb + 4`` (cast), 4 (max), 8 (subtract), 8 (exp), 4 (sum), 8 (divide) bytes per
    logit forward and 8 (scale), ``vb + 4`` (cast back) backward (``timing.loss.CE_FORWARD``)."""
    def seconds(tokens, vocab, value_bytes=2):
        n = tokens * vocab
        cast = [value_bytes + 4] if value_bytes < 4 else []
        one = lambda steps: sum(n * k / (2.039e12 * 0.8) + 3.8e-6 for k in steps)
        return one(cast + [4, 8, 8, 4, 8]), one([8] + cast)
    return seconds
