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
    # vTrain ground truth (VIA-Research/vTrain @ f8dda84, data/): no source columns in the files; see SOURCES.md
    "vtrain_ground_truth_single": (("# GPUs", "global batch", "micro batch", "hidden size", "attention heads",
                                    "# layers", "sequence length", "tensor parallelism", "data parallelism",
                                    "pipeline parallelism", "iteration time (ms)"), ()),
    "vtrain_ground_truth_multi": (("Parameters (billion)", "# GPUs", "global batch", "micro batch", "hidden size",
                                   "attention heads", "# layers", "sequence length", "tensor parallelism",
                                   "data parallelism", "pipeline parallelism", "iteration time (ms)"), ()),
    "megatron_readme_scaling": (("params_billion", "num_layers", "model_parallel_size", "data_parallel",
                                 "num_gpus"),
                                ("table_id", "hardware", "model_label", "hidden_size", "attention_heads", "seq_len",
                                 "vocab_size", "tensor_mp", "pipeline_mp", "global_batch_size",
                                 "iteration_time_ms", "achieved_tflops_per_gpu", "source_repo", "source_path",
                                 "source_commit")),
    "narayanan2021_table2_ptd_vs_zero3": (("params_billion", "model_parallel_size", "global_batch_size", "num_gpus",
                                           "micro_batch_size", "achieved_tflops_per_gpu", "seq_len"),
                                          ("scheme", "tp_pp_split_per_llm_analysis_scripts", "hardware", "source",
                                           "source_repo", "source_path", "source_commit")),
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
