"""NVIDIA DeepLearningExamples training tables (``data/nvidia_dle_training_perf_long.csv``) as validation
rows for :mod:`.scaling`: the CNN tables that give a batch per GPU (ResNet-50 v1.5, ResNeXt-101 32x4d,
SE-ResNeXt-101 32x4d) and
the BERT-large pre-training tables of four frameworks, each mapped by one rule per table
(:data:`.scaling_data.ASSUMPTIONS`)."""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from .scaling_data import DLE_CNNS, read_set

PRECISION = {"fp32": "fp32", "tf32": "tf32", "fp16": "fp16", "mixed precision": "fp16"}  # the tables' names


def _dle_system(heading) -> str | None:
    h = str(heading)
    if "DGX-2H" in h:
        return None  # V100 at 450 W: no preset
    if "DGX A100" in h:
        return "dgx-a100-40gb" if "40GB" in h else "dgx-a100"
    return "dgx1-v100" if "DGX-1" in h else "dgx-2" if "DGX-2" in h else None


def _dle_batch(cell, dtype: str) -> int | None:
    """``256`` or ``128 (FP32) / 256 (AMP)`` -> the batch per GPU of ``dtype`` (``(TF)``: TF32, in the
    tables whose throughput columns say TF32)."""
    if not isinstance(cell, str):
        return None
    per = dict((k.replace("TF32", "TF"), int(v)) for v, k in re.findall(r"(\d+)\s*\((FP32|TF32|TF|AMP)\)", cell))
    if per:
        return per.get({"fp16": "AMP", "fp32": "FP32", "tf32": "TF"}[dtype])
    return int(cell) if cell.strip().isdigit() else None



def dle_rows(dataset: str = "dle_resnet50") -> pd.DataFrame:
    """NVIDIA DeepLearningExamples training tables of a CNN (:data:`.scaling_data.DLE_CNNS`: ResNet-50 v1.5,
    ResNeXt-101 32x4d, SE-ResNeXt-101 32x4d): one row per images/s cell (``source_row`` is the cell's line
    in the long file); cells without a batch per GPU in their table kept with ``reason``.

    >>> df = dle_rows()
    >>> len(df), int((df["reason"] == "").sum())
    (56, 12)
    >>> df = dle_rows("dle_resnext101")
    >>> len(df), int((df["reason"] == "").sum())
    (24, 12)
    >>> df = dle_rows("dle_se_resnext101")
    >>> len(df), int((df["reason"] == "").sum())
    (24, 12)
    """
    dirs, model, zoo = DLE_CNNS[dataset]
    df = read_set(dataset)
    df = df[df["model_dir"].str.split("/").str[-1].isin(dirs)]
    rows = []
    for (readme, _, _), g in df.groupby(["readme", "table_index", "row_index"], sort=False):
        cells = dict(zip(g["column"], g["value_as_published"]))
        system = _dle_system(g["section_heading"].iloc[0])
        gpus = pd.to_numeric(cells.get("GPUs"), errors="coerce")
        for i, r in g[g["column"].str.startswith("Throughput - ")].iterrows():
            prec = r["column"][len("Throughput - "):]
            dtype = next(iter(_precisions(prec)), None)
            value = re.match(r"\s*([\d.]+)", str(r["value_as_published"]))
            batch = _dle_batch(cells.get("Batch Size / GPU"), dtype) if dtype else None
            why = ("not mappable: sparsity (ASP) is not modelled" if "ASP" in prec else
                   f"not mappable: precision {prec!r}" if dtype is None else
                   "not mappable: no images/s published" if value is None else
                   f"not mappable: no system for {g['section_heading'].iloc[0]!r}" if system is None else
                   "not mappable: no GPU count" if pd.isna(gpus) else
                   "not mappable: the table gives no batch per GPU" if batch is None else "")
            rows.append({"dataset": dataset, "source_row": i + 2, "model": model,
                         "zoo_model": zoo, "system": system, "gpus": 0 if pd.isna(gpus) else int(gpus),
                         "batch_per_gpu": batch, "dtype": dtype, "sync": "allreduce",
                         "measured": float(value.group(1)) if value else np.nan,
                         "label": f"{readme.split('/')[0]} {r['column']}, {cells.get('GPUs')} GPUs",
                         "group": f"{readme.split('/')[0]} {system}", "reason": why})
    return pd.DataFrame(rows)


BERT_DIR = "LanguageModeling/BERT"
BERT_GPUS_PER_NODE = {"dgx-a100": 8, "dgx-a100-40gb": 8, "dgx1-v100": 8, "dgx-2": 16}


def _precisions(text: str) -> list[str]:
    """The precisions ``text`` names, in order (FP32 -> fp32, TF32 -> tf32, FP16 / mixed precision -> fp16):
    ``Batch size / GPU (TF32 and FP16)`` -> ``["tf32", "fp16"]``, ``Throughput - mixed precision + XLA`` ->
    ``["fp16"]``."""
    return [PRECISION[m] for m in re.findall(r"mixed precision|fp32|tf32|fp16", text.lower())]


def _pair(cells: dict, prefix: str, dtype: str) -> float | None:
    """The value for ``dtype`` of the paired cell whose column starts with ``prefix`` (``"128 and 256"``,
    ``"60 , 32"``)."""
    col = next((c for c in cells if c.startswith(prefix)), None)
    if col is None:
        return None
    values = re.findall(r"\d+", str(cells[col]))
    order = _precisions(col)
    return float(values[order.index(dtype)]) if dtype in order and len(values) == len(order) else None


def dle_bert_rows() -> pd.DataFrame:
    """NVIDIA DeepLearningExamples BERT-large pre-training tables (PyTorch, TensorFlow, TensorFlow 2,
    PaddlePaddle; DGX-1, DGX-2, DGX A100; 1 GPU to 32 nodes): one row per sequences/s cell.

    >>> df = dle_bert_rows()
    >>> len(df), int((df["reason"] == "").sum())
    (212, 179)
    """
    df = read_set("dle_bert")
    df = df[(df["model_dir"] == BERT_DIR) & df["section_heading"].str.contains("Pre-training", case=False)]
    rows = []
    for (readme, table, _), g in df.groupby(["readme", "table_index", "row_index"], sort=False):
        cells = dict(zip(g["column"], g["value_as_published"]))
        heading = g["section_heading"].iloc[0]
        framework = readme.split("/")[0]
        system = _dle_system(heading)
        nodes = pd.to_numeric(cells.get("Nodes", cells.get("Num Nodes", 1)), errors="coerce")
        per_node = pd.to_numeric(cells.get("GPUs / node", np.nan), errors="coerce")
        if pd.isna(per_node) and ("Nodes" in cells or "Num Nodes" in cells):
            per_node = BERT_GPUS_PER_NODE.get(system, np.nan)
        gpus = nodes * per_node if not pd.isna(per_node) else pd.to_numeric(cells.get("GPUs"), errors="coerce")
        seq = int(next(v for c, v in cells.items() if c.lower() == "sequence length"))
        global_batch = any(c.startswith("Global Batch") for c in cells)
        for i, r in g[g["column"].str.contains("Throughput") & ~g["column"].str.contains("speedup")].iterrows():
            dtype = next(iter(_precisions(r["column"])), None)
            value = re.match(r"\s*([\d.]+)", str(r["value_as_published"]))
            batch = _pair(cells, "Batch size / GPU", dtype) if dtype else None
            steps = _pair(cells, "Accumulation steps", dtype) or _pair(cells, "Gradient Accumulation", dtype)
            accumulated = _pair(cells, "Accumulated Batch size / GPU", dtype) if dtype else None
            # the accumulated batch and the steps are the run's settings (the PyTorch and Paddle tables
            # print 126 for 8192 / 64 = 128); with a global batch the per-GPU one is the micro-batch; with
            # neither, 'Batch size / GPU' is the accumulated batch (4096 sequences at once would not fit)
            micro = (accumulated / steps if accumulated and steps else batch if global_batch or not (batch and steps)
                     else batch / steps)
            why = (f"not mappable: no precision in {r['column']!r}" if dtype is None else
                   "not mappable: no sequences/s published" if value is None else
                   f"not mappable: no preset for {heading!r}" if system is None else
                   "not mappable: no GPU count" if pd.isna(gpus) else
                   "not mappable: no batch per GPU or accumulation steps" if not (batch and steps) else
                   "not mappable: accumulated batch / accumulation steps not a whole number (as published)"
                   if micro != int(micro) else "")
            rows.append({"dataset": "dle_bert", "source_row": i + 2, "model": "BERT-large", "zoo_model": "bert-large",
                         "system": system, "gpus": 0 if pd.isna(gpus) else int(gpus),
                         "batch_per_gpu": int(micro) if not why else None, "microbatches": int(steps or 0),
                         "seq_len": seq, "dtype": dtype, "sync": "allreduce",
                         "measured": float(value.group(1)) if value else np.nan,
                         "label": f"{framework} {dtype} seq {seq}, {'' if pd.isna(gpus) else int(gpus)} GPUs",
                         "group": f"{framework} {system} table {table} seq {seq}", "reason": why})
    return pd.DataFrame(rows)
