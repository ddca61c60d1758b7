"""Fit of Hopper's 8-bit GEMM rate in a training step over its 16-bit one (``timing.graph.EIGHT_BIT_RATE[9.0]``) on
ONE set: llm-foundry's H100 80GB fp8 runs (``data/llmfoundry_mpt_train_throughput.csv``, ``amp_fp8`` on
``h100_80gb``: MPT 1B and 3B under PyTorch FSDP with Transformer Engine's fp8 linears), each paired with the bf16 run
of the same model, sequence and GPU count.

What a pair's two runs share (attention, element-wise kernels, FSDP's collectives, the host) cancels in the ratio of
their errors, ``(predicted / measured fp8) / (predicted / measured bf16) - 1``: what is left is the error of the
fp8 run's own parts, its GEMMs at the fp8 rate and its casts. The rate is the grid value with the least median
absolute ratio error. NeMo, Megatron-Bridge and torchtitan are held out (``benchmarks/accuracy.py``).
Prints JSON: the pairs, the median absolute ratio error per grid value and the best value. About 1 minute.

    python benchmarks/fit_fp8_rate.py
"""
from __future__ import annotations

import json
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from concurrency_model.timing import graph
from concurrency_model.validate import modern

GRID = tuple(round(0.80 + 0.02 * i, 2) for i in range(11))  # 0.80-1.00
HOPPER = 9.0


def pairs() -> tuple[pd.DataFrame, pd.DataFrame]:
    """The fp8 rows of llm-foundry's H100 runs that have a bf16 run of the same model, sequence and GPUs, and those
    bf16 rows, in the same order."""
    df = modern.rows("llmfoundry")
    df = df[(df["cluster"] == "dgx-h100") & (df["unmappable"] == "")]
    key = ["model", "seq", "gpus"]
    bf16 = df[df["dtype"] == "bf16"].drop_duplicates(key).set_index(key)
    f8 = df[df["dtype"] == "fp8"]
    f8 = f8[f8.set_index(key).index.isin(bf16.index)]
    return f8, bf16.loc[f8.set_index(key).index].reset_index()


def _set_rate(rate: float) -> None:
    graph.EIGHT_BIT_RATE[HOPPER] = rate


def predicted(frame: pd.DataFrame) -> np.ndarray:
    """Predicted over measured tokens/s of each row (NaN where not predicted)."""
    res = modern.evaluate(frame)
    return np.where(res["status"] == "ok", res["predicted_tps"] / res["measured_tps"], np.nan)


def at_rate(rate: float, frame: pd.DataFrame) -> np.ndarray:
    """:func:`predicted` in a fresh process with Hopper's 8-bit rate at ``rate`` (the workloads are cached per
    process)."""
    with ProcessPoolExecutor(1, initializer=_set_rate, initargs=(rate,)) as ex:
        return ex.submit(predicted, frame).result()


def main() -> None:
    f8, b16 = pairs()
    base = at_rate(1.0, b16)
    grid = {rate: at_rate(rate, f8) / base - 1 for rate in GRID}
    med = {r: float(np.nanmedian(np.abs(e))) for r, e in grid.items()}
    best = min(med, key=med.get)
    print(json.dumps({"pairs": f8["label"].tolist(), "bf16_predicted_over_measured": np.round(base, 4).tolist(),
                      "ratio_error_at_1": np.round(grid[1.0], 4).tolist(),
                      "ratio_error_at_best": np.round(grid[best], 4).tolist(),
                      "median_abs_ratio_error": {str(r): round(v, 4) for r, v in med.items()}, "best": best},
                     indent=1))


if __name__ == "__main__":
    main()
