"""Loaders for the measurement files in ``data/``, with schema checks that name the file, row and column.

The data directory is the repository's ``data/`` (next to the package) or ``$CONCURRENCY_MODEL_DATA``.
Every error is one ``ValueError`` line ``FILE: row R, column C: ...``; rows count file lines (the header
is row 1, so the first data row is row 2), as an editor shows them.
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
    "deepbench_sparse": (("m", "n", "k", "sparsity", "sparse_time_ms", "dense_time_ms"),
                         ("benchmark", "device", "precision") + SOURCE_COLUMNS),
    "deepbench_allreduce": (("size_floats", "num_ranks", "num_nodes", "mean_time_ms"),
                            ("device", "algorithm") + SOURCE_COLUMNS),
    "nccltests_allreduce_sweeps": (("num_ranks", "num_nodes", "size_bytes", "oop_time_us"),
                                   ("run_id", "collective", "gpu_model", "system", "source_repo", "source_path",
                                    "source_commit")),
    # an all_gather_perf sweep on two GCP A3-Mega nodes (MG-Cafe/TCPXO-Enabled-A3-Mega-H100-Benchmarks; SOURCES.md)
    "nccltests_allgather_a3mega": (("num_ranks", "num_nodes", "size_bytes", "oop_time_us"),
                                   ("run_id", "collective", "gpu_model", "system", "software", "source_repo",
                                    "source_path", "source_commit")),
    # vTrain's A100 all-reduce tables (nccl-tests output, trace/a100/AR_GPU*_1M_1024M_LUT), one row per line
    "vtrain_allreduce_lut_a100": (("num_gpus", "size_bytes", "count_elements", "oop_time_ns", "oop_busbw_GBps",
                                   "ip_time_ns", "ip_busbw_GBps"),
                                  ("gpu", "dtype", "source_repo", "source_commit", "source_path")),
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
    # modern training stacks (data/SOURCES.md): cells with thousands separators, brackets or footnotes stay text,
    # parsed by concurrency_model.validate.modern.number
    "torchtitan_llama3_train_tps_memory": (("num_gpus", "seq_len", "local_batch_size", "fsdp", "tp", "pp", "cp"),
                                           ("table", "config_label", "model", "gpu", "pp_schedule",
                                            "activation_checkpointing", "torch_compile", "precision", "async_tp",
                                            "tps_per_gpu", "peak_memory", "memory_unit", "source_repo",
                                            "source_commit", "source_path", "source_line")),
    "llmfoundry_mpt_train_throughput": (("seq_len", "num_gpus", "micro_batch_size", "grad_accum",
                                         "global_batch_size_seqs", "throughput_tok_per_s_per_gpu",
                                         "model_tflops_per_gpu", "num_params"),
                                        ("model", "gpu", "precision", "fsdp_sharding_strategy",
                                         "activation_checkpointing", "source_repo", "source_commit", "source_path",
                                         "source_line")),
    "megatron_bridge_train_throughput": (("num_gpus", "gbs", "mbs", "seq_len", "tp", "pp", "cp"),
                                         ("container", "task", "model", "system", "precision", "fsdp", "vp",
                                          "tokens_per_s_per_gpu", "model_tflops_per_gpu",
                                          "values_have_parenthesized_alternative", "source_repo", "source_commit",
                                          "source_path", "source_line")),
    # Megatron-Bridge's A/B step times: one setting changed between the cases of a pair (validate.ranking.ab_pairs)
    "megatron_bridge_ab_step_time": (("num_gpus", "seq_len", "tp", "pp", "cp", "ep", "mbs", "gbs", "step_time_s",
                                      "source_line"),
                                     ("pair", "case", "model", "system", "precision", "dispatcher", "cuda_graph",
                                      "ep_overlap", "window", "source_repo", "source_commit", "source_path", "note")),
    # Megatron-LM's DeepSeek-V3 on GB200 optimization history as A/B pairs (validate.ranking.ab_pairs)
    "megatron_dsv3_gb200_ablation": (("num_gpus", "seq_len", "tp", "pp", "vpp", "cp", "ep", "mbs", "gbs", "mtp_layers",
                                      "tflops_per_gpu", "source_line"),
                                     ("pair", "case", "model", "system", "precision", "dispatcher", "recompute_modules",
                                      "cuda_graph", "ep_overlap", "source_repo", "source_commit", "source_path",
                                      "note")),
    # BigScience's layout search of February 2022 (fp16 ZeRO-1, bf16 under DeepSpeed's pipeline engine; Jean Zay's A100)
    "bigscience_tr11_layout_search": (("nodes", "hidden", "layers", "heads", "zero_stage", "dp", "tp", "pp", "mbs",
                                       "gbs", "seq_len", "vocab", "source_line"),
                                      ("section", "date_2022", "size", "layers_source", "heads_source", "dtype",
                                       "pp_partition", "outcome", "source_repo", "source_commit", "source_path")),
    # NeMo 24.07 and long-sequence tables: sequence lengths like "8K" and TFLOP/s cells with separators stay text
    "nemo_2407_and_longseq_train_throughput": (("num_gpus", "gbs", "tp", "pp"),
                                               ("table", "model", "task", "system", "container", "precision",
                                                "seq_len", "model_tflops_per_gpu",
                                                "tflops_per_gpu_without_cp_best_config", "speedup_cp",
                                                "source_repo", "source_commit", "source_path", "source_line")),
}
# columns that may be blank (not measured, not published) but, where given, must be non-negative numbers
OPTIONAL_NUMERIC = {
    "torchtitan_llama3_train_tps_memory": ("global_batch_size", "peak_memory"),
    "bigscience_tr11_layout_search": ("mem_gb", "sec_per_it", "tflops"),  # blank where the run went out of memory
    "megatron_bridge_train_throughput": ("vp", "ep"),
    "nemo_2407_and_longseq_train_throughput": ("mbs", "cp", "vp", "dp", "tokens_per_s_per_gpu"),
    "deepbench_conv": ("fwd_time_ms", "bwd_data_time_ms", "bwd_filter_time_ms"),
    "deepbench_rnn": ("fwd_time_ms", "bwd_time_ms"),
    "megatron_readme_scaling": ("attention_heads", "hidden_size", "seq_len", "vocab_size", "tensor_mp", "pipeline_mp",
                                "global_batch_size", "iteration_time_ms", "achieved_tflops_per_gpu"),
}
# the toolkit's own measurements, data/measured/KIND-...: KIND -> {file: (numeric, other, optional)}
MEASURED_SCHEMAS = {
    "compute": {"measurements.csv": (("median_s",), ("op", "dtype"), ("m", "n", "k"))},
    "network": {"measurements.csv": (("num_ranks", "size_bytes", "time_us"), ("collective",), ())},
    # calibrate kernels: DeepBench's columns (its optional times are blank where a shape failed)
    "kernels": {f"deepbench_{op}.csv": (*SCHEMAS[f"deepbench_{op}"], OPTIONAL_NUMERIC.get(f"deepbench_{op}", ()))
                for op in ("gemm", "conv", "rnn")},
    # calibrate steps: GPT training steps, prompt passes and decode steps
    "steps": {"gpt_steps.csv": (("batch", "seq", "layers", "hidden", "heads", "vocab"),
                                ("kind", "model", "attention", "device", "date"),
                                ("median_ms", "peak_allocated_bytes"))},
}


def data_dir() -> Path:
    env = os.environ.get("CONCURRENCY_MODEL_DATA")
    return Path(env) if env else Path(__file__).resolve().parent.parent / "data"


def load(name: str) -> pd.DataFrame:
    """Read ``data/NAME.csv`` and check its schema (``ValueError`` naming file, row and column).

    >>> len(load("deepbench_gemm")) > 0
    True
    """
    if name not in SCHEMAS:
        raise ValueError(f"dataset: unknown {name!r}; allowed: {', '.join(SCHEMAS)}")
    numeric, other = SCHEMAS[name]
    return read_checked(data_dir() / f"{name}.csv", numeric, other, OPTIONAL_NUMERIC.get(name, ()))


def measured_runs() -> list[Path]:
    """Folders of the toolkit's own measurements (``data/measured/KIND-...`` for the kinds of
    ``MEASURED_SCHEMAS``: ``compute``, ``network``, ``kernels``, ``steps``) holding at least one of their
    kind's files, sorted by name."""
    root = data_dir() / "measured"
    return sorted(p for p in root.glob("*-*") if p.is_dir() and p.name.split("-")[0] in MEASURED_SCHEMAS
                  and any((p / f).is_file() for f in MEASURED_SCHEMAS[p.name.split("-")[0]]))


def load_measured(folder, file: str | None = None) -> pd.DataFrame:
    """Read a file of the toolkit's own measurements in ``folder`` (named ``KIND-...``; ``file`` defaults to
    the kind's first, ``measurements.csv`` for ``compute`` and ``network``) and check its schema.

    >>> [len(load_measured(p)) > 0 for p in measured_runs()][:1]
    [True]
    """
    folder = Path(folder)
    kind = folder.name.split("-")[0]
    if kind not in MEASURED_SCHEMAS:
        raise ValueError(f"measured: {folder.name!r} is not a {'-*, '.join(MEASURED_SCHEMAS)}-* folder")
    files = MEASURED_SCHEMAS[kind]
    file = file or next(iter(files))
    if file not in files:
        raise ValueError(f"measured: {file!r} is not a file of {kind}-* folders; allowed: {', '.join(files)}")
    return read_checked(folder / file, *files[file])


def _shown(path: Path) -> str:
    """``path`` relative to the data directory where it lies inside it, else as given."""
    try:
        return str(path.resolve().relative_to(data_dir().resolve()))
    except ValueError:
        return str(path)


def read_checked(path, numeric=(), other=(), optional=()) -> pd.DataFrame:
    """Read a CSV and check it: every column of ``numeric``, ``other`` and ``optional`` present; ``numeric``
    columns non-negative numbers in every row; ``optional`` ones blank or non-negative numbers. A
    ``ValueError`` names the file, the row (file line, header = 1) and the column."""
    path = Path(path)
    shown = _shown(path)
    if not path.is_file():
        raise ValueError(f"dataset: {path} not found (set CONCURRENCY_MODEL_DATA to the data directory)")
    try:
        df = pd.read_csv(path)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as e:
        raise ValueError(f"{shown}: cannot be read as CSV: {' '.join(str(e).split())}") from None
    for col in dict.fromkeys((*numeric, *other, *optional)):
        if col not in df.columns:
            raise ValueError(f"{shown}: row 1 (header), column {col!r}: missing")
    for col in dict.fromkeys((*numeric, *optional)):
        values = pd.to_numeric(df[col], errors="coerce")
        given = df[col].notna() if col in optional and col not in numeric else True
        bad = (values.isna() & given) | (values < 0)
        if bad.any():
            row = int(bad.to_numpy().argmax())
            raise ValueError(f"{shown}: row {row + 2}, column {col!r}: {df[col].iloc[row]!r} is not a "
                             "non-negative number")
    return df
