"""Host (CPU) overhead of an eager framework: the seconds to issue a stage's kernels.

A pass of a pipeline stage lasts at least its kernels times the host seconds per kernel
(:mod:`.compose`: pass = max(GPU seconds, host seconds)).
"""
from __future__ import annotations

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


def host_seconds(stage: dict, dev, host: float | None = None) -> tuple[float, float]:
    """The host's seconds to issue a stage's forward and its backward (with recompute) pass per
    microbatch: its kernels (:meth:`~concurrency_model.timing.parts.Parts.kernels`) times
    :func:`host_per_kernel`."""
    h, la = host_per_kernel(dev, host), float(dev.launch_overhead)
    return h * stage["f"].kernels(la), h * (stage["b"].kernels(la) + stage["r"].kernels(la))
