"""Host (CPU) overhead of an eager framework: the seconds to issue a stage's kernels.

A pass of a pipeline stage lasts at least its kernels times the host seconds per kernel
(:mod:`.compose`: pass = max(GPU seconds, host seconds)).
"""
from __future__ import annotations

import numpy as np

# Host (CPU) seconds to issue one modelled kernel in an eager framework step: Python, the dispatcher, autograd
# and cudaLaunchKernel (5-20 us for the launch call alone, hardware.md 3D [R31]), for the modelled kernel and
# the host-only and small ops around it (views, RNG-state forks, copies) that the graph does not list. A pass
# of a stage lasts at least its kernels times this (training.compose: pass = max(GPU, host); the host runs
# ahead of the GPU within a pass, so the two overlap: no wait when the GPU is the slower). Fitted once on a
# 5 us grid (0-160 us): least mean APE over every 4th even row of vtrain_single (Megatron-DeepSpeed on 2-8
# A100, hosts of 2 x AMD EPYC 7742, full recompute; benchmarks/fit_host_overhead.py: 7.9% at 60 us), held
# out on the odd rows and every other set (benchmarks/training_accuracy.py).
HOST_S_PER_KERNEL = 60e-6

# Megatron's fused scale-mask-softmax (``FusedScaleMaskSoftmax``, NVIDIA Megatron-LM ``megatron/model/fused_softmax.py``
# as copied by vTrain, VIA-Research/vTrain @ f8dda847 ``src/model/fused_softmax.py``, the Megatron-DeepSpeed model its
# ground truth ran): the scaled, causally masked softmax of a half-precision attention is one CUDA kernel forward and
# one backward when ``16 < s_k <= 2048``, ``s_q % 4 == 0`` and ``(b x heads per device) % 4 == 0``; otherwise PyTorch
# runs it eagerly in fp32 (``softmax_in_fp32``, with the query-key layer scaling's ``scale``): ``float()``, ``* scale``,
# ``masked_fill_``, ``Softmax``, ``half()``, five kernels a pass and five autograd kernels back. The unfused attention
# of the graph stands for the fused path (the host constant above was fitted on vTrain's rows, nearly all of which
# meet the conditions); a layer that misses them issues these many kernels more, forward and backward.
SOFTMAX_FALLBACK_KERNELS = (5 - 1, 5 - 1)
SOFTMAX_FUSED_MAX_SEQ = 2048


def host_per_kernel(dev, host: float | None = None) -> float:
    """The host's seconds to issue one kernel: ``host``, or (``None``) :data:`HOST_S_PER_KERNEL`
    on a GPU and 0 on a CPU device (whose per-operator dispatch is its launch overhead, on the same cores)."""
    if host is not None:
        return float(host)
    return HOST_S_PER_KERNEL if dev.kind == "gpu" else 0.0


def softmax_fused(batch: int, heads: int, seq_q: int, seq_kv: int) -> bool:
    """Whether Megatron's fused scale-mask-softmax kernel runs a causal attention of ``heads`` heads per device on
    ``batch`` sequences of ``seq_q`` queries and ``seq_kv`` keys (:data:`SOFTMAX_FALLBACK_KERNELS`): ``16 < seq_kv <=
    2048``, ``seq_q`` a multiple of 4 and ``batch x heads`` a multiple of 4 (the kernel's batches per block at these
    lengths: 128 threads a block, one warp of 32 a row).

    >>> softmax_fused(1, 2, 1024, 1024), softmax_fused(2, 2, 1024, 1024), softmax_fused(1, 16, 4096, 4096)
    (False, True, False)
    """
    return 16 < seq_kv <= SOFTMAX_FUSED_MAX_SEQ and seq_q % 4 == 0 and (batch * heads) % 4 == 0


def softmax_fallback_kernels(batch: int, heads: int, seq: int, fused, dtype: str, recompute: bool) -> tuple:
    """Kernels one attention layer issues beyond the graph's count, forward and backward (with ``recompute``: the
    forward's again) per microbatch: :data:`SOFTMAX_FALLBACK_KERNELS` for an unfused half-precision attention that
    Megatron's fused softmax cannot run (:func:`softmax_fused`), else none (a fused attention kernel, FlashAttention,
    has no softmax of its own; in fp32 the eager path is the graph's).

    >>> [softmax_fallback_kernels(b, 2, 1024, False, "fp16", True) for b in (1, 2)]   # 2 heads a device, 1024 keys
    [(4, 8), (0, 0)]
    """
    if fused or dtype not in ("fp16", "bf16") or softmax_fused(batch, heads, seq, seq):
        return 0, 0
    f, b = SOFTMAX_FALLBACK_KERNELS
    return f, b + (f if recompute else 0)


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
    microbatch: the kernels it issues (:func:`issued`, and the stage's ``host_extra`` kernels the graph does not list)
    times :func:`host_per_kernel`."""
    h, la = host_per_kernel(dev, host), float(dev.launch_overhead)
    xf, xb = stage.get("host_extra", (0, 0))  # kernels the graph does not list (:func:`softmax_fallback_kernels`)
    return h * (issued(stage["f"], la) + xf), h * (issued(stage["b"], la) + issued(stage["r"], la) + xb)
