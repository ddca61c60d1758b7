"""Host (CPU) overhead of an eager framework: the seconds to issue a stage's kernels.

A pass of a pipeline stage lasts at least its kernels times the host seconds per kernel
(:mod:`.compose`: pass = max(GPU seconds, host seconds)).
"""
from __future__ import annotations

import numpy as np

# Host (CPU) seconds to issue one modelled kernel in an eager framework step: Python, the dispatcher, autograd
# and cudaLaunchKernel (5-20 us for the launch call alone, hardware.md 3D [R31]), for the modelled kernel and
# the host-only and small ops around it (views, RNG-state forks, copies) that the graph does not list. A pass
# of a stage lasts at least its kernels times this (parallel.compose: pass = max(GPU, host); the host runs
# ahead of the GPU within a pass, so the two overlap: no wait when the GPU is the slower). Fitted once on a
# 5 us grid (0-160 us): least mean APE over every 4th even row of vtrain_single (Megatron-DeepSpeed on 2-8
# A100, hosts of 2 x AMD EPYC 7742, full recompute; benchmarks/fit_host_overhead.py: 7.9% at 60 us), held
# out on the odd rows and every other set (benchmarks/training_accuracy.py).
HOST_S_PER_KERNEL = 60e-6


def host_per_kernel(dev, host: float | None = None) -> float:
    """The host's seconds to issue one kernel: ``host``, or (``None``) :data:`HOST_S_PER_KERNEL`
    on a GPU and 0 on a CPU device (whose per-operator dispatch is its launch overhead, on the same cores)."""
    if host is not None:
        return float(host)
    return HOST_S_PER_KERNEL if dev.kind == "gpu" else 0.0


def issued(parts, launch_s: float) -> float:
    """The kernels the host issues for ``parts`` (:class:`~concurrency_model.timing.parts.Parts`), each at
    :func:`host_per_kernel`: every launch of a row, except that a row with ``extra`` seconds is one library call
    whose further launches the library makes inside that call (split-K's reduction over the partial sums, cuBLAS;
    im2col, Winograd and FFT transforms, cuDNN: :mod:`concurrency_model.timing.gemm`, :mod:`~concurrency_model.
    timing.conv`), issued once. Their launches stay in the GPU's time (``launch``). So a choice of kernel by GPU
    time (split-K at a batch of 1, none at 2) never adds a framework call of host time: with a host-bound decode,
    a batch of 1 took 12 calls of 63 us more than a batch of 2 (gpt2 on an H200, issue 39).

    >>> from concurrency_model.timing.parts import Parts
    >>> rows = Parts(*(np.array(x) for x in ([1e-6, 1e-6], [0, 0], [2e-7, 0], [8e-6, 4e-6], [3, 3])))
    >>> rows.kernels(4e-6), issued(rows, 4e-6)   # a split-K GEMM (2 launches) and a kernel, 3 times each
    (9.0, 6.0)
    """
    k = parts.kernel_counts(launch_s)
    return float(np.where(parts.extra > 0, parts.count, k).sum())


def host_seconds(stage: dict, dev, host: float | None = None) -> tuple[float, float]:
    """The host's seconds to issue a stage's forward and its backward (with recompute) pass per
    microbatch: the kernels it issues (:func:`issued`) times :func:`host_per_kernel`."""
    h, la = host_per_kernel(dev, host), float(dev.launch_overhead)
    return h * issued(stage["f"], la), h * (issued(stage["b"], la) + issued(stage["r"], la))
