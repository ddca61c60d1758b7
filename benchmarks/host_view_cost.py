"""Host seconds of the per-rank Python and dispatcher work of DeepSpeed 0.3's ZeRO-3 collectives
(:data:`concurrency_model.parallel.runtime.HOST_VIEW_S`, ``HOST_COPY_S`` and ``HOST_GATHER_COPY_S``), each the median
of 7 repeats of ``d = 1536`` ranks; needs torch (``pip install torch==2.13.0``). Measured on CPU tensors: the host's
share only (a GPU adds the copy kernel's launch, the device's ``launch_overhead_s``).

* a ``Tensor.narrow`` view appended to a list: how DeepSpeed builds the ``d`` tensors of a list-form all-gather
  (``partition_parameters.py`` ``_allgather_param``, ``for i in range(self.world_size)``);
* a small ``Tensor.copy_`` (1,000 fp16 values): PyTorch 1.8's list-form collectives copy each of the ``d`` outputs
  out of their flat buffer with ``copy_`` (``ProcessGroupNCCL.cpp``);
* the copy-out of a coalesced gather per parameter and rank (``_allgather_params``: a view of the rank's part, the
  flat view of the parameter, a view of its slice, ``copy_``).

    python benchmarks/host_view_cost.py
"""
import statistics
import time

import torch

RANKS, REPEATS, PART = 1536, 7, 1000


def _median(body) -> float:
    runs = []
    for _ in range(REPEATS):
        t = time.process_time()
        for _ in range(10):
            body()
        runs.append((time.process_time() - t) / (10 * RANKS))
    return statistics.median(runs)


def per_view_s() -> float:
    flat = torch.zeros(RANKS * PART)

    def body():
        parts = []
        for i in range(RANKS):
            parts.append(flat.narrow(0, PART * i, PART))
    return _median(body)


def per_copy_s() -> float:
    src, dst = torch.zeros(RANKS * PART, dtype=torch.float16), torch.zeros(RANKS * PART, dtype=torch.float16)
    pairs = [(dst.narrow(0, PART * i, PART), src.narrow(0, PART * i, PART)) for i in range(RANKS)]

    def body():
        for a, b in pairs:
            a.copy_(b, non_blocking=True)
    return _median(body)


def per_gather_copy_s() -> float:
    flat = torch.zeros(RANKS * PART, dtype=torch.float16)
    parts = [flat.narrow(0, PART * i, PART) for i in range(RANKS)]
    full = torch.empty(RANKS * 8, dtype=torch.float16).view(RANKS, 8)  # one small parameter, 8 values a rank

    def body():
        for i in range(RANKS):
            piece = parts[i].narrow(0, 0, 8)
            full.view(-1).narrow(0, 8 * i, 8).copy_(piece)
    return _median(body)


if __name__ == "__main__":
    v = torch.__version__
    print(f"Tensor.narrow + list append from Python: {per_view_s() * 1e6:.2f} us a view (torch {v})")
    print(f"Tensor.copy_ of {PART} fp16 values from Python: {per_copy_s() * 1e6:.2f} us a copy (torch {v})")
    print(f"coalesced gather's copy-out, per parameter and rank: {per_gather_copy_s() * 1e6:.2f} us (torch {v})")
