"""Shared test helpers."""
from __future__ import annotations

from pathlib import Path

import pandas as pd
import pytest

DATA = Path(__file__).resolve().parents[1] / "data"


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
