"""Loaders for the measurement files in ``data/``, with schema checks that name the file, row and column.

The data directory is the repository's ``data/`` (next to the package) or ``$CONCURRENCY_MODEL_DATA``.
"""
from __future__ import annotations

import os
from pathlib import Path

import pandas as pd

SOURCE_COLUMNS = ("source_repo", "source_commit", "source_file")
SCHEMAS = {  # file stem -> (numeric columns that must be present, other required columns)
    "deepbench_gemm": (("m", "n", "k", "time_ms"), ("benchmark", "device", "precision") + SOURCE_COLUMNS),
    "deepbench_conv": (("w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "stride_w", "stride_h"),
                       ("benchmark", "device", "precision", "fwd_time_ms", "bwd_data_time_ms",
                        "bwd_filter_time_ms") + SOURCE_COLUMNS),
    "deepbench_rnn": (("hidden_units", "n", "timesteps"), ("benchmark", "device", "precision", "cell",
                                                             "fwd_time_ms", "bwd_time_ms") + SOURCE_COLUMNS),
    "deepbench_allreduce": (("size_floats", "num_ranks", "num_nodes", "mean_time_ms"),
                            ("device", "algorithm") + SOURCE_COLUMNS),
    "nccltests_allreduce_sweeps": (("num_ranks", "num_nodes", "size_bytes", "oop_time_us"),
                                   ("run_id", "collective", "gpu_model", "system", "source_repo", "source_path",
                                    "source_commit")),
}


def data_dir() -> Path:
    env = os.environ.get("CONCURRENCY_MODEL_DATA")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


def load(name: str) -> pd.DataFrame:
    """Read ``data/NAME.csv`` and check its schema.

    >>> len(load("deepbench_gemm")) > 0
    True
    """
    if name not in SCHEMAS:
        raise ValueError(f"dataset: unknown {name!r}; allowed: {', '.join(SCHEMAS)}")
    path = data_dir() / f"{name}.csv"
    if not path.is_file():
        raise ValueError(f"dataset: {path} not found (set CONCURRENCY_MODEL_DATA to the data directory)")
    df = pd.read_csv(path)
    numeric, other = SCHEMAS[name]
    for col in (*numeric, *other):
        if col not in df.columns:
            raise ValueError(f"{path.name}: missing column {col!r}")
    for col in numeric:
        values = pd.to_numeric(df[col], errors="coerce")
        bad = values.isna() | (values < 0)
        if bad.any():
            row = int(bad.idxmax())
            raise ValueError(f"{path.name}: row {row + 2}, column {col!r}: {df[col].iloc[row]!r} is not a "
                             "non-negative number")
    return df
