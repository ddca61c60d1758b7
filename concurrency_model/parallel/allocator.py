"""Memory as the allocator sees it: what a training runtime holds on a device beyond the model's own bytes
(:mod:`.memory`), and the caching allocator's headroom above its allocated peak.

:mod:`.memory` counts the analysis' bytes (model state, activations, in-flight microbatches). A real runtime
(``training.framework``, the names of :mod:`.runtime`) adds, per device:

Outside PyTorch's caching allocator (``torch.cuda.memory_stats`` never counts them):

* the CUDA context: 287,047,680 bytes measured with lazy module loading, 666,632,192 without (PyTorch PR
  #86509, "Sets CUDA_MODULE_LOADING to LAZY when not set by the user", the numbers in its description; lazy is
  PyTorch's default since 1.13 and CUDA's since 12.2, CUDA programming guide "Lazy Loading");
* NCCL's connection buffers: per channel and per peer one receive buffer of each protocol, Simple
  ``DEFAULT_BUFFSIZE = 1 << 22`` (4 MiB), LL ``NCCL_LL_LINES_PER_THREAD (8) * NCCL_LL_MAX_NTHREADS (512) *
  NCCL_STEPS (8) * 16`` bytes (512 KiB) and LL128 ``NCCL_LL128_ELEMS_PER_THREAD (120) * NCCL_LL128_MAX_NTHREADS
  (640) * NCCL_STEPS * 8`` bytes (NVIDIA/nccl ``src/init.cc`` ``computeBuffSizes`` and
  ``src/include/device.h``); a ring connects one peer per channel. The channel count a communicator opens is
  decided by NCCL's topology search at run time: 16 per communicator for the central figure and 32 (the
  ``MAXCHANNELS`` of NCCL 2.x before 2.12) for the upper end, both as recalled, not from a source. One
  communicator per parallel group of more than one rank (data x context, tensor, pipeline, context).

Inside the caching allocator (counted in ``reserved_bytes``):

* the cuBLAS workspace, allocated through the caching allocator per handle and stream: ``4096 * 8 KiB`` =
  32 MiB on Hopper (sm90), else ``4096 KiB * 2 + 16 KiB * 8`` (PyTorch ``aten/src/ATen/cuda/CublasHandlePool.cpp``
  ``parseChosenWorkspaceSize``), plus cuBLASLt's 1 MiB (``CUBLASLT_WORKSPACE_SIZE`` default 1024 KiB,
  ``aten/src/ATen/cuda/CUDABlas.cpp``, PyTorch issue #73328); one compute stream;
* gathered parameters (ZeRO-3): PyTorch FSDP (``fsdp``) all-gathers one wrapped unit's flat parameter ahead of
  use, at most the current and the prefetched unit (``BackwardPrefetch.BACKWARD_PRE``, ``limit_all_gathers``;
  ``torch/distributed/fsdp/fully_sharded_data_parallel.py``); FSDP2 (``fsdp2``) the same per unit with per-parameter
  all-gather outputs (``torch/distributed/fsdp/_fully_shard/_fsdp_param_group.py``), except under pipeline
  parallelism, where torchtitan keeps every unit of the stage gathered between the forward and the backward
  (``reshard_after_forward = not pp_enabled``, ``torchtitan/.../parallelize.py`` ``apply_fsdp``); DeepSpeed
  ZeRO-3 (``deepspeed``) the unit in use plus ``stage3_prefetch_bucket_size`` = 5e7 elements fetched ahead, at most
  ``stage3_max_live_parameters`` = 1e9 (``deepspeed/runtime/zero/config.py``); a unit is one transformer block;
* gradient buffers: Megatron-Core's contiguous ``main_grad`` buffer of every local parameter
  (``megatron/core/distributed/param_and_grad_buffer.py``) is in the parameters' dtype, the ``w``-byte gradient
  :mod:`.memory` already counts: ``DistributedDataParallelConfig.grad_reduce_in_fp32`` defaults to False
  (NVIDIA/Megatron-LM @ 2a75ac12, the submodule of NVIDIA-NeMo/Megatron-Bridge @ 067f987d,
  ``megatron/core/distributed/distributed_data_parallel_config.py``) and Megatron-Bridge's performance recipes set it
  False (``src/megatron/bridge/perf_recipes/_common.py`` ``_benchmark_common`` and ``_perf_precision``), as the
  reduction's time already assumes (:data:`.data_parallel.GRAD_BYTES`). Its optimizer makes fp32 gradients only
  in the step, after the backward pass has freed the activations (``megatron/core/optimizer/optimizer.py``
  ``_copy_model_grads_to_main_grads``: ``main_param.grad = model_param.main_grad.float()`` a parameter, the
  ``main_grad`` buffer kept; the distributed optimizer the same of its shard, ``distrib_optimizer.py``:
  ``shard_main_param.grad = shard_model_grad.float()``; NVIDIA/Megatron-LM @ d98e8a64): 4 bytes a parameter (over
  ``d`` under ZeRO-1), counted where they exceed the freed bytes (:func:`step_gradient_bytes`).
  (Megatron-LM's own ``pretrain_gpt.py`` promotes bf16 runs to fp32 accumulation unless ``--grad-reduce-in-bf16``,
  ``megatron/training/arguments.py``: ``grad_reduce_in_fp32=True`` there costs ``4 - w`` more bytes a parameter; not
  modelled: the toolkit follows Megatron-Core's default.) FSDP and FSDP2 (ZeRO-2/3) hold one unit's unsharded
  gradients (``w`` bytes) and their fp32 reduce-scatter input (torchtitan's ``mixed_precision_reduce = "float32"``);
  FSDP2 under pipeline parallelism skips the reduce-scatter until the last microbatch and accumulates every unsharded
  gradient of the stage in the reduce dtype, fp32 (``_fsdp_param_group.py`` ``post_backward``: "May have an
  accumulated gradient of the reduce dtype if the previous backward did not reduce-scatter";
  ``torch/distributed/pipelining/stage.py`` ``backward_maybe_with_nosync``); DeepSpeed ZeRO-2/3 one
  ``reduce_bucket_size`` = 5e8-element bucket (``deepspeed/runtime/zero/config.py``), and ZeRO-1 the bucket and its
  partition's flat gradient buffer (``grads_in_partition``, ``w / d`` bytes a parameter of the stage): contiguous
  gradients default to true and apply at stage 1 since v0.13.0 (microsoft/DeepSpeed af033831, 2024-01-05; from
  6ae756c0, 2021-07-26, the engine turned them off at stage 1: ZeRO-1 runs of DeepSpeed 0.4.4-0.12 hold neither);
* the optimizer step's gradient copies (``deepspeed``, ZeRO-1 and -2): DeepSpeed's ZeRO optimizer
  (microsoft/DeepSpeed ``deepspeed/runtime/zero/stage_1_and_2.py``, ``step``, the same at v0.6.2 = 32d97976 and at
  38327e0) first frees the gradients of the parameters outside the rank's partition, then builds the partition's
  gradient as ``self.flatten(self.averaged_gradients[i]).to(fp32)``: a flat copy in the gradients' dtype (``w`` bytes
  a parameter of the partition; ``averaged_gradients`` are views of the parameters' gradients, ``get_flat_partition``)
  and its fp32 copy (4 bytes; none when the gradients are fp32 already), both held while the optimizer runs, after the
  backward pass has freed the activations, the loss, the recompute buffers and the reduce bucket (the partition's
  gradients now sit in ``grads_in_partition``). Without ZeRO, DeepSpeed runs 16-bit training through its
  ``FP16_Optimizer`` (``deepspeed/runtime/fp16/fused_optimizer.py`` ``step``, the same at v0.6.2 = 32d97976 and at
  38327e0), which casts every gradient to fp32 (``p.grad.to(data_type)``, one tensor a parameter) and flattens the
  list into one fp32 tensor a parameter group before it frees the 16-bit gradients: 8 bytes a parameter of the
  stage held at once, the flat 4 for the rest of the step. What that exceeds the backward pass' peak by
  (:func:`step_gradient_bytes`; 0 where the freed bytes cover it) is counted here [D]. Two copies of one ZeRO-1
  partition of ``d`` ranks: ``(w + 4) / d`` bytes a parameter; at ``d = 1`` (nothing outside the partition) 6 bytes
  a 16-bit parameter on top of the 16 of mixed-precision Adam. The copies are single tensors of the partition's
  size, which no block the step frees can hold: the caching allocator takes a cached block only if it is at least
  the request (best fit, ``get_free_block``'s ``lower_bound``) and merges a freed block only with free neighbours of
  its own segment, and the freed gradients and activations are blocks of their own tensors' sizes. So the copies
  take new segments while the freed bytes stay cached, and the reserved peak lies ``min(copies, freed)`` above the
  allocated one (:func:`step_cached_bytes`, in the band's headroom). BigScience's measurement of it: a 20B GPT
  (8 layers, hidden 14,400, vocabulary 250k) on one DGX A100 at tensor 8, ZeRO-1, data 1 used 67 GB (fp16) and
  68 GB (bf16) a GPU by ``nvidia-smi``, against 16 bytes a parameter's 47 GB (bigscience-workshop/bigscience @
  9e64ede, ``train/tr11-176B-ml/chronicles-prequel.md``, "Best TFLOPs"; DeepSpeed of 2022, without
  ``grads_in_partition`` at ZeRO-1); not a validation set: the runs' layouts beyond that table are not given whole;
* DeepSpeed's ``BF16_Optimizer`` (``deepspeed`` without ZeRO in bf16, :func:`bf16_optimizer`): DeepSpeed runs bf16
  without ZeRO through it (microsoft/DeepSpeed @ 56c52238, the "bf16+pipeline parallelism" commit of 2022-04 that
  first ships ``deepspeed/runtime/bf16_optimizer.py``, ``engine.py`` ``_configure_optimizer``; @ 38327e0 the
  same through ``_do_optimizer_sanity_check``, whose default gradient accumulation dtype without ZeRO in bf16 is
  fp32). It shards the fp32 master weights and the optimizer state over the data-parallel ranks itself, as ZeRO-1
  does (``fp32_groups_flat_partition``: the model state is counted as ZeRO-1's, :func:`state_zero_stage`), and keeps
  the 16-bit gradients beside one fp32 gradient accumulation buffer of every local parameter
  (``fp32_groups_gradients_flat = torch.zeros_like(bf16_groups_flat, dtype=grad_acc_dtype)``, not partitioned):
  4 bytes a parameter of the stage, held from the start (counted in ``gradient_buffers``). BigScience ran BLOOM this
  way ("bf16 must use z0! it implements its own zero stage 1 equivalent", bigscience-workshop/bigscience @ 9e64ede
  ``train/tr11-176B-ml/tr11-176B-ml.slurm``);
* the loss: :mod:`.memory` counts fp32 logits, 4 bytes a logit. PyTorch's ``cross_entropy`` on upcast logits
  keeps at the backward's start the saved ``log_softmax`` output (``derivatives.yaml``: its backward uses the
  result), the incoming gradient of that output and the gradient of the logits, three fp32 tensors: 12 bytes a
  logit (``training.loss = "upcast"``, the default of fsdp, fsdp2, deepspeed: the Hugging Face and torchtitan
  losses); Megatron's fused vocab-parallel cross entropy works in place on one fp32 copy beside the 16-bit logits: 6
  bytes (``"vocab_parallel"``, megatron's default; ``megatron/core/tensor_parallel/cross_entropy.py``); a fused
  kernel on the 16-bit logits (``"fused"``: Dao-AILab/flash-attention v1.0.3 ``flash_attn/losses/cross_entropy.py``
  and ``csrc/xentropy/xentropy_kernel.cu``: the forward saves the logits and a fp32 log-sum-exp a row, the backward
  writes the gradient into ``empty_like(logits)``; llm-foundry's MPT default ``loss_fn='fused_crossentropy'``,
  mosaicml/llm-foundry @ 8c8dd48f ``llmfoundry/models/mpt/modeling_mpt.py``) keeps the 16-bit logits and their
  16-bit gradient: 4 bytes;
* the recompute buffer: what a recomputing backward rebuilds for one layer
  (:func:`.memory.activation_bytes_per_device`'s ``recompute_buffer``; under ``fsdp2``, whose ``selective`` is
  torchtitan's per-op policy, what one layer's activations exceed the outputs that policy saves,
  :func:`.memory.per_op_sac_bytes`).

The band's upper end is the reserved figure :data:`RESERVED_P90_EXCESS` higher (:func:`band_excess_bytes`), and
NCCL's buffers at their larger channel count: the reserved figure is a central estimate, and measured peaks spread
about it (torchtitan's rows from -6 to +14%; the excess is their 90th percentile outside the rows
:data:`FRAGMENTATION` is fitted on; held out, BigScience's DeepSpeed layout search, ``bigscience-tr11-memory``,
where the model is lower still: docs/residuals.md). The reserved
figure adds the caching allocator's headroom: freed blocks it keeps cached in segments still
partly in use (``c10/cuda/CUDACachingAllocator.cpp``: best-fit splitting of cached blocks, 512-byte rounding,
1 MiB-or-smaller requests packed in 2 MiB segments, 1-10 MiB requests in 20 MiB segments, larger ones rounded to
2 MiB, blocks cached per stream; with ``expandable_segments`` a segment grows by pages instead). It reserves a
fraction :data:`FRAGMENTATION` of the bytes a step allocates and frees (activations, gathered parameters,
gradient buckets, the loss) above the allocated peak. That fraction has no closed form: it is fitted on torchtitan's
Llama 3.1 8B FSDP + CP rows with full activation checkpointing (Table 2, four rows, which imply 0.111;
``benchmarks/memory_accuracy.py --fit``) and reported on the others.
When ``cudaMalloc`` fails the allocator frees its cached blocks and retries (``CUDACachingAllocator.cpp``), so
the reserved figure never exceeds the device less the bytes outside the allocator (:func:`reserved_bytes`); a
configuration whose upper end does not fit is "at risk" (allocation retries, then out of memory), not refused.

``ideal`` (the analysis alone) adds nothing: every part is 0 and the band is one point.
"""
from __future__ import annotations

import sympy as sp

from ..checks import did_you_mean
from ..cost import to_python, unevaluated
from ..symbols import nsimplified
from ..units import KiB, MiB
from .runtime import FRAMEWORKS, MEMORY_PARTS

CUDA_CONTEXT_BYTES = 287_047_680  # PyTorch PR #86509, lazy module loading
NCCL_STEPS = 8
NCCL_SIMPLE_BYTES = 1 << 22  # DEFAULT_BUFFSIZE
NCCL_LL_BYTES = 8 * 512 * NCCL_STEPS * 16  # lines/thread x threads x steps x sizeof(ncclLLFifoLine)
NCCL_LL128_BYTES = 120 * 640 * NCCL_STEPS * 8  # elements/thread x threads x steps x sizeof(uint64_t)
NCCL_CHANNEL_PEER_BYTES = NCCL_SIMPLE_BYTES + NCCL_LL_BYTES + NCCL_LL128_BYTES
NCCL_CHANNELS = 16  # central; as recalled (topology search decides at run time)
NCCL_MAX_CHANNELS = 32  # upper end; MAXCHANNELS before NCCL 2.12, as recalled
CUBLAS_WORKSPACE_SM90 = 4096 * KiB * 8
CUBLAS_WORKSPACE_OTHER = 4096 * KiB * 2 + 16 * KiB * 8
CUBLASLT_WORKSPACE = 1024 * KiB
DS_PREFETCH_BUCKET = 50_000_000  # stage3_prefetch_bucket_size (elements)
DS_MAX_LIVE = 1_000_000_000  # stage3_max_live_parameters
DS_REDUCE_BUCKET = 500_000_000  # reduce_bucket_size (elements)
LOSSES = {"upcast": 12, "vocab_parallel": 6, "fused": 4}  # training.loss: bytes a logit at the loss' peak
FRAMEWORK_LOSS = {"megatron": "vocab_parallel", "deepspeed": "upcast", "deepspeed-0.3": "upcast", "fsdp": "upcast",
                  "fsdp2": "upcast"}  # each runtime's loss when training.loss is null
LOSS_BYTES_PER_LOGIT = {"ideal": 4, **{fw: LOSSES[loss] for fw, loss in FRAMEWORK_LOSS.items()}}
# caching-allocator block sizes (c10/cuda/CUDACachingAllocator.cpp)
MIN_BLOCK, SMALL_SIZE, SMALL_BUFFER = 512, 1 * MiB, 2 * MiB
MIN_LARGE_ALLOC, LARGE_BUFFER, ROUND_LARGE = 10 * MiB, 20 * MiB, 2 * MiB
# reserved-but-unallocated share of the bytes a step allocates and frees; fitted (module docstring)
FRAGMENTATION = 0.11  # torchtitan Table 2 (4 rows) imply 0.111: benchmarks/memory_accuracy.py --fit
# the band's upper end: the reserved figure this much above the estimate's, the 90th percentile of measured over
# predicted reserved on torchtitan's 16 rows outside the FRAGMENTATION fit (1.108: memory_accuracy.py --fit)
RESERVED_P90_EXCESS = 0.11
# the parts of :func:`framework_parts`, and which of them sit outside the caching allocator
PARTS = MEMORY_PARTS  # named in :mod:`.runtime`, which a cached estimate's printer reads without sympy
OUTSIDE = ("cuda_context", "nccl_buffers")
TRANSIENT = ("gathered_parameters", "gradient_buffers", "loss_buffers", "recompute_buffer")


def check_framework(framework: str) -> str:
    """``framework`` if it is one of :data:`.runtime.FRAMEWORKS`, else ``ValueError`` naming the field.

    >>> check_framework("fsdp2")
    'fsdp2'
    """
    if framework not in FRAMEWORKS:
        raise ValueError(f"training.framework: unknown {framework!r}; allowed: {', '.join(FRAMEWORKS)}")
    return framework


def segment_bytes(request: int) -> int:
    """Bytes the caching allocator ``cudaMalloc``s for a request that no cached block serves: 2 MiB for a request
    up to 1 MiB, 20 MiB for one under 10 MiB, else the request rounded up to 2 MiB (``CUDACachingAllocator.cpp``
    ``get_allocation_size``; requests are first rounded to 512 bytes).

    >>> [segment_bytes(n) // MiB for n in (100, 3 * MiB, 11 * MiB + 1)]
    [2, 20, 12]
    """
    if isinstance(request, bool) or not isinstance(request, int) or request < 0:
        raise ValueError(f"request: must be a whole number of bytes >= 0, got {request!r}")
    size = max(MIN_BLOCK, -(-request // MIN_BLOCK) * MIN_BLOCK)
    if size <= SMALL_SIZE:
        return SMALL_BUFFER
    if size < MIN_LARGE_ALLOC:
        return LARGE_BUFFER
    return -(-size // ROUND_LARGE) * ROUND_LARGE


def nccl_bytes(groups, channels: int = NCCL_CHANNELS) -> int:
    """NCCL's receive buffers on one device: one ring peer per channel, every protocol, for each parallel group of
    more than one rank (``groups``: their sizes; numbers or sympy expressions).

    >>> nccl_bytes([8, 1]) / MiB   # one communicator: 16 channels x (4 MiB + 512 KiB + 4.6875 MiB)
    147.0
    """
    per = channels * NCCL_CHANNEL_PEER_BYTES
    return to_python(sum((sp.Piecewise((per, sp.sympify(g) > 1), (0, True)) for g in groups), sp.Integer(0)))


def workspace_bytes(hopper: bool) -> int:
    """cuBLAS plus cuBLASLt workspace of one compute stream (module docstring).

    >>> workspace_bytes(True) / MiB, workspace_bytes(False) / MiB
    (33.0, 9.125)
    """
    return (CUBLAS_WORKSPACE_SM90 if hopper else CUBLAS_WORKSPACE_OTHER) + CUBLASLT_WORKSPACE


def gathered_parameter_bytes(framework: str, zero_stage: int, stage_params, unit_params, weight_bytes: int,
                             pipelined: bool):
    """Unsharded parameters a ZeRO-3 runtime holds beside the shards of :mod:`.memory` (module docstring):
    ``stage_params`` and ``unit_params`` are one device's parameters of its pipeline stage and of one unit
    (already divided by the tensor degree), ``pipelined``: more than one stage.

    >>> gathered_parameter_bytes("fsdp", 3, 1e9, 1e8, 2, False) / 1e6    # current and prefetched unit
    400.0
    >>> gathered_parameter_bytes("fsdp2", 3, 1e9, 1e8, 2, True) / 1e6    # the whole stage stays gathered
    2000.0
    """
    check_framework(framework)
    if zero_stage < 3 or framework in ("ideal", "megatron"):
        return 0
    if framework == "fsdp2" and pipelined:
        return to_python(sp.sympify(stage_params) * weight_bytes)
    if framework.startswith("deepspeed"):  # v0.3.13 has the same prefetch and live-parameter defaults
        return to_python(sp.Min(DS_MAX_LIVE, unit_params + sp.Min(DS_PREFETCH_BUCKET, unit_params)) * weight_bytes)
    return to_python(2 * sp.sympify(unit_params) * weight_bytes)


def gradient_buffer_bytes(framework: str, zero_stage: int, stage_params, unit_params, weight_bytes: int,
                          data=1, accumulating: bool = False, fp32_accumulation: bool = False):
    """Gradient bytes a runtime holds beyond the ``weight_bytes``-byte gradients of :mod:`.memory` (module
    docstring); ``data``: the ZeRO ranks, ``accumulating``: FSDP2 under pipeline parallelism with more than one
    microbatch (unsharded fp32 gradients accumulated over the microbatches); ``fp32_accumulation``: DeepSpeed's
    ``BF16_Optimizer`` (:func:`bf16_optimizer`), an fp32 buffer of the stage's gradients.

    >>> gradient_buffer_bytes("megatron", 1, 1e9, 1e8, 2, data=8)   # main_grad in bf16: counted by .memory
    0
    >>> gradient_buffer_bytes("fsdp2", 3, 1e9, 1e8, 2) / 1e6             # one unit: bf16 + fp32 reduce input
    600.0
    >>> gradient_buffer_bytes("deepspeed", 1, 1e9, 1e8, 2, data=8) / 1e6  # a 5e8-element bucket + the partition's
    1250.0
    """
    check_framework(framework)
    stage, unit = sp.sympify(stage_params), sp.sympify(unit_params)
    if fp32_accumulation:  # DeepSpeed's BF16_Optimizer (its flag, :func:`bf16_optimizer`)
        return to_python(4 * stage)
    if framework == "deepspeed" and zero_stage == 1:  # contiguous gradients at ZeRO-1 (since v0.13.0)
        return to_python(sp.Min(DS_REDUCE_BUCKET, stage) * weight_bytes + weight_bytes * stage / sp.sympify(data))
    if framework in ("ideal", "megatron") or zero_stage < 2:
        return 0
    if framework.startswith("deepspeed"):  # v0.3.13 has the same prefetch and live-parameter defaults
        return to_python(sp.Min(DS_REDUCE_BUCKET, stage) * weight_bytes)
    if framework == "fsdp2" and accumulating:
        return to_python(4 * stage + weight_bytes * unit)
    return to_python((weight_bytes + 4) * unit)


def bf16_optimizer(framework: str, dtype: str, zero_stage: int) -> bool:
    """Whether the runtime is DeepSpeed's ``BF16_Optimizer`` (module docstring): ``deepspeed`` without ZeRO on
    bf16 weights (``dtype``: the weights' dtype, :func:`concurrency_model.units.state_dtype`).

    >>> bf16_optimizer("deepspeed", "bf16", 0), bf16_optimizer("deepspeed", "fp16", 0)
    (True, False)
    >>> bf16_optimizer("deepspeed", "bf16", 1), bf16_optimizer("megatron", "bf16", 0)
    (False, False)
    """
    return framework == "deepspeed" and zero_stage == 0 and dtype == "bf16"


def state_zero_stage(framework: str, dtype: str, zero_stage: int) -> int:
    """The ZeRO stage the model state is sharded as: 1 under DeepSpeed's ``BF16_Optimizer`` (:func:`bf16_optimizer`),
    which shards the fp32 master weights and the optimizer state over the data-parallel ranks itself; else
    ``zero_stage``.

    >>> state_zero_stage("deepspeed", "bf16", 0), state_zero_stage("megatron", "bf16", 0)
    (1, 0)
    """
    return 1 if bf16_optimizer(framework, dtype, zero_stage) else zero_stage


def step_gradient_bytes(framework: str, zero_stage: int, stage_params, weight_bytes, data, freed,
                        fp32_accumulation: bool = False):
    """What the optimizer step's gradient copies exceed the backward pass' allocated peak by (module docstring):
    DeepSpeed's ZeRO-1/2 ``(w + 4) / d`` bytes a parameter of the stage (``w`` for fp32 gradients), less the gradients
    it frees first (ZeRO-1: those outside the partition, ``w (d - 1) / d``; ZeRO-2 holds only the partition's);
    DeepSpeed's ``FP16_Optimizer`` (ZeRO 0 with 16-bit gradients, not the ``BF16_Optimizer`` of
    ``fp32_accumulation``) 8: an fp32 copy of each gradient and their flat concatenation, both held at once;
    Megatron's 4 bytes a parameter (ZeRO-1: over ``d``; none for fp32 gradients); all less the ``freed`` bytes
    (activations, loss and recompute buffers, and the gradient buffers of :func:`gradient_buffer_bytes`), never below
    0; 0 for every other runtime and stage. ``weight_bytes`` and ``data`` may be sympy expressions.

    >>> step_gradient_bytes("deepspeed", 1, 1e9, 2, 1, 1e9) / 1e9    # data 1: 6 bytes a parameter, less 1 GB freed
    5.0
    >>> step_gradient_bytes("deepspeed", 1, 1e9, 2, 8, 0) / 1e9      # 0.75 GB built, 1.75 GB of gradients freed
    0.0
    >>> step_gradient_bytes("deepspeed", 2, 8e9, 2, 8, 1e9) / 1e9, step_gradient_bytes("fsdp2", 3, 1e9, 2, 1, 0)
    (5.0, 0)
    >>> step_gradient_bytes("megatron", 0, 1e9, 2, 8, 1e9) / 1e9, step_gradient_bytes("megatron", 1, 1e9, 2, 8, 0) / 1e9
    (3.0, 0.5)
    >>> step_gradient_bytes("deepspeed", 0, 1e9, 2, 8, 1e9) / 1e9    # FP16_Optimizer: 8 bytes a parameter, less 1 GB
    7.0
    >>> step_gradient_bytes("deepspeed", 0, 1e9, 2, 8, 1e9, fp32_accumulation=True)   # BF16_Optimizer: no copies
    0
    """
    flat, each, credit = _step_copies(framework, zero_stage, stage_params, weight_bytes, data, freed, fp32_accumulation)
    return to_python(_bounded(sp.Max, 0, flat + each - credit))


def step_cached_bytes(framework: str, zero_stage: int, stage_params, weight_bytes, data, freed,
                      fp32_accumulation: bool = False):
    """What the caching allocator reserves at DeepSpeed's step beyond its allocated peak (module docstring): the freed
    bytes the flat copies cannot reuse, ``min(flat copies, freed bytes left after the per-parameter copies)``. The
    gradients and activations the step frees sit in blocks of their own tensors' sizes, and a request is served from
    one cached block at least its size or from a new segment (``CUDACachingAllocator.cpp``: ``get_free_block``, blocks
    merged only with free neighbours of their own segment), so a flat copy of a whole partition or parameter group
    takes new segments while those blocks stay cached; per-parameter copies (Megatron's, ``FP16_Optimizer``'s first)
    are taken to fit freed blocks; 0 for every other runtime and stage.

    >>> step_cached_bytes("deepspeed", 1, 1e9, 2, 1, 1e9) / 1e9      # data 1: the 1 GB freed is not reused
    1.0
    >>> step_cached_bytes("deepspeed", 1, 1e9, 2, 8, 0) / 1e9        # the 0.75 GB of copies in new segments
    0.75
    >>> step_cached_bytes("deepspeed", 0, 1e9, 2, 1, 6e9) / 1e9      # FP16_Optimizer: 4 GB reused, 2 GB stay cached
    2.0
    """
    flat, each, credit = _step_copies(framework, zero_stage, stage_params, weight_bytes, data, freed, fp32_accumulation)
    return to_python(_bounded(sp.Min, flat, _bounded(sp.Max, 0, credit - each)))


def _bounded(kind, *args):
    """``kind(*args)`` (``sympy.Max`` or ``Min``), evaluated for numbers and left unevaluated over symbols: the compiled
    memory functions' expressions are large, and sympy's search for redundant arguments costs them seconds."""
    args = [sp.sympify(a) for a in args]
    return kind(*args) if all(a.is_number for a in args) else unevaluated(kind, *args)


def _step_copies(framework, zero_stage, stage_params, weight_bytes, data, freed, fp32_accumulation=False):
    """``(bytes of the step's flat gradient copies, of its per-parameter ones, bytes freed before them)``
    (:func:`step_gradient_bytes`)."""
    check_framework(framework)
    w, d, stage = sp.sympify(weight_bytes), sp.sympify(data), sp.sympify(stage_params)
    fp32 = sp.Piecewise((4, w < 4), (0, True))  # an fp32 copy of 16-bit gradients; none of fp32 ones
    zero = sp.Integer(0)
    if framework == "megatron" and zero_stage in (0, 1):  # main_grad.float(), of the shard under ZeRO-1
        return zero, fp32 * stage / (d if zero_stage == 1 else 1), sp.sympify(freed)
    if framework == "deepspeed" and zero_stage == 0 and not fp32_accumulation:  # FP16_Optimizer.step
        return fp32 * stage, fp32 * stage, sp.sympify(freed)
    if framework != "deepspeed" or zero_stage not in (1, 2):
        return zero, zero, zero
    released = w * stage * (d - 1) / d if zero_stage == 1 else 0
    return (w + fp32) * stage / d, zero, released + sp.sympify(freed)


def check_loss(loss: str | None) -> str | None:
    """``loss`` if it is None (the runtime's own, :data:`FRAMEWORK_LOSS`) or one of :data:`LOSSES`, else ``ValueError``
    naming the field.

    >>> check_loss("fused"), check_loss(None)
    ('fused', None)
    """
    if loss is not None and loss not in LOSSES:
        raise ValueError(f"training.loss: unknown {loss!r}{did_you_mean(loss, LOSSES)}; allowed: {', '.join(LOSSES)}")
    return loss


def loss_buffer_bytes(framework: str, logits, loss: str | None = None):
    """The loss' bytes beyond the 4-byte fp32 logits :mod:`.memory` counts: ``LOSSES[loss] - 4`` per logit of the
    last stage (``logits`` = tokens x vocabulary on one device), ``loss`` None: the runtime's own
    (:data:`FRAMEWORK_LOSS`); 0 for ``ideal``.

    >>> loss_buffer_bytes("fsdp2", 1000), loss_buffer_bytes("megatron", 1000), loss_buffer_bytes("ideal", 1000)
    (8000, 2000, 0)
    >>> loss_buffer_bytes("fsdp", 1000, "fused")   # 16-bit logits and gradient: what .memory counts already
    0
    """
    check_framework(framework)
    check_loss(loss)
    per = 4 if framework == "ideal" else LOSSES[loss or FRAMEWORK_LOSS[framework]]
    return to_python((per - 4) * sp.sympify(logits))


def framework_parts(framework: str, zero_stage: int, stage_params, unit_params, weight_bytes: int, data, groups,
                    logits, recompute_buffer, hopper: bool, pipelined: bool, accumulating: bool,
                    loss: str | None = None, fp32_accumulation: bool = False) -> dict:
    """Every part of :data:`PARTS` for one device (numbers or sympy expressions), 0 for ``ideal``; ``loss``:
    ``training.loss`` (:func:`loss_buffer_bytes`); ``fp32_accumulation``: DeepSpeed's ``BF16_Optimizer``
    (:func:`gradient_buffer_bytes`).

    >>> p = framework_parts("fsdp2", 3, 1e9, 1e8, 2, 8, [8], 1000, 0, True, False, False)
    >>> p["gathered_parameters"] / 1e6, p["loss_buffers"], p["cuda_context"]
    (400.0, 8000, 287047680)
    """
    check_framework(framework)
    if framework == "ideal":
        return dict.fromkeys(PARTS, 0)
    return {"cuda_context": CUDA_CONTEXT_BYTES, "nccl_buffers": nccl_bytes(groups),
            "workspaces": workspace_bytes(hopper),
            "gathered_parameters": gathered_parameter_bytes(framework, zero_stage, stage_params, unit_params,
                                                            weight_bytes, pipelined),
            "gradient_buffers": gradient_buffer_bytes(framework, zero_stage, stage_params, unit_params, weight_bytes,
                                                      data, accumulating, fp32_accumulation),
            "loss_buffers": loss_buffer_bytes(framework, logits, loss),
            "recompute_buffer": to_python(sp.sympify(recompute_buffer))}


def fragmentation_bytes(framework: str, transient):
    """The caching allocator's cached headroom above its allocated peak: :data:`FRAGMENTATION` of the ``transient``
    bytes (those a step allocates and frees); 0 for ``ideal``.

    >>> round(fragmentation_bytes("fsdp", 10e9) / 1e9, 12)
    1.1
    """
    check_framework(framework)
    return 0 if framework == "ideal" else to_python(nsimplified(FRAGMENTATION) * sp.sympify(transient))


def headroom_bytes(framework: str, transient, groups):
    """The band's upper end less its central figure: :func:`fragmentation_bytes` plus NCCL's buffers at
    :data:`NCCL_MAX_CHANNELS` instead of :data:`NCCL_CHANNELS` channels; 0 for ``ideal``.

    >>> round((headroom_bytes("fsdp", 10e9, [8]) - 1.1e9) / MiB, 6)   # and 16 more channels of one communicator
    147.0
    """
    if check_framework(framework) == "ideal":
        return 0
    extra = sp.sympify(nccl_bytes(groups, NCCL_MAX_CHANNELS)) - sp.sympify(nccl_bytes(groups))
    return to_python(sp.sympify(fragmentation_bytes(framework, transient)) + extra)


def band_excess_bytes(framework: str, allocated, fragmentation):
    """What the band's upper end adds for the residual spread of the reserved figure (module docstring):
    :data:`RESERVED_P90_EXCESS` of the reserved bytes, ``allocated`` (the allocator's peak, without what sits
    outside it) plus ``fragmentation`` (:func:`fragmentation_bytes`); 0 for ``ideal``. Numbers or numpy arrays.

    >>> round(band_excess_bytes("fsdp2", 60e9, 5e9) / 1e9, 12), band_excess_bytes("ideal", 60e9, 0)
    (7.15, 0)
    """
    check_framework(framework)
    return 0 if framework == "ideal" else RESERVED_P90_EXCESS * (allocated + fragmentation)


def upper_headroom_bytes(framework: str, total, runtime: dict):
    """The band's upper end less the central figure ``total`` (allocated and outside bytes): the runtime's
    ``headroom`` (:func:`headroom_bytes`, with its ``fragmentation``) plus :func:`band_excess_bytes` of the reserved
    figure; ``runtime``: the arrays or numbers of :func:`..training.compose.framework_memory_fn`.

    >>> rt = {"cuda_context": 1e9, "nccl_buffers": 0.0, "fragmentation": 2e9, "headroom": 3e9}
    >>> round(upper_headroom_bytes("fsdp2", 61e9, rt) / 1e9, 12)    # 3 + 0.11 x (60 + 2)
    9.82
    """
    outside = sum(runtime[k] for k in OUTSIDE)
    return runtime["headroom"] + band_excess_bytes(framework, total - outside, runtime["fragmentation"])


def is_hopper(device_name: str) -> bool:
    """Whether a device preset is an sm90 part (H100, H200, H800, H20, GH200), which gets cuBLAS's larger workspace.

    >>> is_hopper("h100-sxm5-80gb"), is_hopper("a100-sxm4-80gb")
    (True, False)
    """
    return str(device_name).lower().startswith(("h100", "h200", "h800", "h20", "gh200"))


def reserved_bytes(allocated, headroom, outside, capacity) -> float:
    """What ``torch.cuda.memory_stats()["reserved_bytes.all.peak"]`` reads: the allocator's ``allocated`` peak plus
    its cached ``headroom`` (the NCCL part of :func:`headroom_bytes` is outside it: pass the fragmentation only),
    never more than the ``capacity`` less the ``outside`` bytes, since a failed ``cudaMalloc`` makes it free its
    cache and retry.

    >>> reserved_bytes(70e9, 12e9, 1e9, 80e9) / 1e9, reserved_bytes(70e9, 5e9, 1e9, 80e9) / 1e9
    (79.0, 75.0)
    """
    return min(float(allocated) + float(headroom), float(capacity) - float(outside))


__all__ = ["framework_parts", "headroom_bytes", "reserved_bytes", "segment_bytes", "nccl_bytes", "workspace_bytes",
           "gathered_parameter_bytes", "gradient_buffer_bytes", "step_gradient_bytes", "step_cached_bytes",
           "loss_buffer_bytes", "check_framework", "PARTS", "fragmentation_bytes", "band_excess_bytes",
           "upper_headroom_bytes", "is_hopper",
           "check_loss", "LOSSES", "FRAMEWORK_LOSS", "OUTSIDE", "TRANSIENT", "FRAGMENTATION", "RESERVED_P90_EXCESS"]
