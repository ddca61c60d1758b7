"""Seconds of one ``Tensor.narrow`` view built from Python and appended to a list, as DeepSpeed 0.3's ZeRO-3 builds
the ``d`` tensors of every list-form all-gather and reduce-scatter (:data:`concurrency_model.parallel.runtime.
HOST_VIEW_S`). Prints the median of 7 repeats of ``d = 1536`` views; needs torch (``pip install torch==2.13.0``).

    python benchmarks/host_view_cost.py
"""
import statistics
import time

import torch

RANKS, REPEATS = 1536, 7


def per_view_s() -> float:
    flat = torch.zeros(RANKS * 1000)
    runs = []
    for _ in range(REPEATS):
        t = time.perf_counter()
        for _ in range(10):
            parts = []
            for i in range(RANKS):
                parts.append(flat.narrow(0, 1000 * i, 1000))
        runs.append((time.perf_counter() - t) / (10 * RANKS))
    return statistics.median(runs)


if __name__ == "__main__":
    print(f"Tensor.narrow + list append from Python: {per_view_s() * 1e6:.2f} us a view (torch {torch.__version__})")
