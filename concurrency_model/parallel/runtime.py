"""The training runtime whose behaviour a step is priced with (``training.framework``).

The composition in :mod:`.compose` is the ideal runtime of the paper's analysis: each data-parallel
collective of a step is one call at its alpha-beta cost, hidden behind the compute it can overlap. Real
runtimes differ in what separates the alternatives a user compares: how they cut those collectives (per
parameter tensor, per module, per wrapped block, per bucket), how far ahead they gather, the dtype they
reduce in, and what blocks the device between calls. Each call then pays its own latency (the collective's
fixed cost, :mod:`concurrency_model.comm`), so a runtime that issues thousands of calls over a large group
is latency-bound where the ideal model sees bandwidth only.

``ideal`` keeps the analysis alone; the others are read from the runtimes' sources (facts only):

* ``megatron``: Megatron-Core's ``DistributedDataParallel``: gradients in buckets of
  ``max(40,000,000, 1,000,000 x d)`` parameters when the reduction overlaps the backward pass, one bucket
  (the whole buffer) when it does not (NVIDIA/Megatron-LM ``megatron/core/distributed/
  distributed_data_parallel_config.py``, ``bucket_size``; ``distributed_data_parallel.py``); its distributed
  optimizer (ZeRO-1) gathers the updated parameters per bucket.
* ``deepspeed``: DeepSpeed's ZeRO engine as released since 2022 (microsoft/DeepSpeed @ 38327e0,
  ``deepspeed/runtime/zero/config.py``, ``partitioned_param_coordinator.py``, ``partition_parameters.py``):
  stage 3 fetches each module's parameters in one coalesced all-gather (``all_gather_coalesced``) and
  prefetches the next modules up to ``stage3_prefetch_bucket_size`` = 5e7 elements ahead; parameters under
  ``stage3_param_persistence_threshold`` = 1e5 elements stay gathered; gradients are reduced in buckets of
  ``reduce_bucket_size`` = 5e8 elements (stages 1-2 gather parameters in ``allgather_bucket_size`` = 5e8);
  with activation checkpointing the recomputed forward fetches the parameters again.
* ``deepspeed-0.3``: DeepSpeed v0.3.13 (12a53b4, March 2021: the ZeRO-3 release of the time of Narayanan et
  al. 2021's Table 2), ``deepspeed/runtime/zero/partition_parameters.py`` and ``stage3.py``, configured as DeepSpeed
  published Megatron's GPT under ZeRO-3 then (microsoft/DeepSpeedExamples @ 2cd968f, 2021-03-08,
  ``Megatron-LM-v1.1.5-ZeRO3/examples/ds_zero_stage_3_config.json`` and ``ds_pretrain_gpt2-zero3.sh``:
  ``contiguous_gradients`` and ``reduce_scatter`` on, ``reduce_bucket_size`` 5e7, ``stage3_max_reuse_distance`` 1e8;
  its persistence key is misspelt, ``stage3_param_persitance_threshold``, so the default 1e5 holds): one all-gather
  per parameter tensor (``_allgather_param``, preceded by ``torch.cuda.synchronize()``) and one reduce-scatter per
  gradient tensor (``_reduce_scatter_gradient``); every module fetch ends in ``_synchronize_communication``
  (``torch.cuda.synchronize()``), so no gather or reduction overlaps the compute queued before it; with a reuse
  distance of 1e8 elements no gathered layer is kept for the backward pass. Both collectives use PyTorch's list
  form (``torch.distributed.all_gather`` / ``reduce_scatter`` with a list of ``d`` tensors); PyTorch's
  ``ProcessGroupNCCL`` of that time (1.8, ``torch/lib/c10d/ProcessGroupNCCL.cpp``) copies each of the ``d`` outputs
  out of (inputs into) a flat buffer: ``d`` copies a call, each a ``copy_`` (:data:`HOST_COPY_S`) and a kernel launch
  (the device's ``launch_overhead_s``); and DeepSpeed builds the ``d`` tensors of each call in a Python loop of
  ``Tensor.narrow`` views (``for i in range(world_size)`` in ``_allgather_param`` and ``_reduce_scatter_gradient``),
  :data:`HOST_VIEW_S` each. Both are host work on the critical path, since the device is synchronised before each
  call. On the device each gather also zeroes its flat tensor (``torch.zeros``) and PyTorch copies the flat output
  into the views: 3 bytes read or written a byte gathered; each reduction divides the gradient by ``d``
  (``average_tensor``, ``div_``) and PyTorch flattens the views into its input: 4 bytes a byte, and 2 more for a
  gradient of at most ``reduce_bucket_size`` elements, first copied into the contiguous bucket
  (``reduce_independent_p_g_buckets_and_remove_grads``; a larger one is reduced in place). The ``backward`` ends in
  ``_partition_all_parameters``, which releases the persistent parameters too, and ``_post_step`` gathers them back
  in one coalesced ``_allgather_params``, whose copy-out loops over parameters and ranks in Python
  (:data:`HOST_GATHER_COPY_S` a copy).
* ``fsdp``: PyTorch FSDP (FullyShardedDataParallel, ``torch/distributed/fsdp``): one flat parameter per wrapped
  module (wrapped per transformer block by the usual auto-wrap policies), its all-gather issued one unit
  ahead (``BackwardPrefetch.BACKWARD_PRE`` by default; in the forward the host runs ahead of the device),
  one reduce-scatter per unit in the backward, the reduce in ``MixedPrecision.reduce_dtype`` (default: the
  parameters' dtype); the checkpointed forward runs inside the unit's backward, with its parameters gathered.
* ``fsdp2``: PyTorch ``fully_shard`` (``torch/distributed/fsdp/_fully_shard``): the same unit-wise all-gather
  and reduce-scatter with one unit prefetched, per-parameter sharding (no flat parameter), reducing in fp32 as
  torchtitan configures it (``mixed_precision_reduce = "float32"``, torchtitan's job config). As torchtitan runs
  it, ``recompute = "selective"`` is torchtitan's per-op policy (:mod:`.recompute` ``op``) and ``fp8`` is
  torchao's float8 training with dynamic tensorwise scaling (:func:`concurrency_model.timing.graph.cast_parts`
  ``torchao``: pytorch/torchtitan @ 9dec370 ``torchtitan/float8.py`` converts the ``nn.Linear`` layers with
  torchao's ``convert_to_float8_training``). torchtitan's Llama runs ``wq``, ``wk``, ``wv`` as three linears
  (:func:`concurrency_model.timing.graph.projection_widths`) and its context parallelism is PyTorch's ring
  (:func:`concurrency_model.parallel.context.pytorch_ring_bytes`): both follow from the torchao kernel policy.
  Without a flat parameter, FSDP2 copies around every call on the compute stream: after each all-gather,
  ``foreach_all_gather_copy_out`` waits for it on the current stream and copies the gathered buffer out into each
  parameter's unsharded tensor (``torch.split_with_sizes_copy``: every gathered byte read and written once); before
  each reduce-scatter, ``foreach_reduce`` copies the unsharded gradients into the reduce-scatter input in the reduce
  dtype (``foreach_reduce_scatter_copy_in``: ``torch.cat`` / ``_chunk_cat``, the gradient read, the fp32 value
  written) and only then frees them. Read in pytorch/pytorch ``torch/distributed/_composable/fsdp/
  _fsdp_collectives.py`` as stored at 01d66d21 (mid-2024: the copy-in on the reduce-scatter stream, which the
  current stream waits for, ``current_stream.wait_event(copy_in_event)``) and ``torch/distributed/fsdp/_fully_shard/
  _fsdp_collectives.py`` at 010ae4a8 (the copy-in on the current stream itself); the benchmark's torch, 1963fc8, lies
  between them and was not read. Both copies are serial with the compute in either version (``inline_gather_bytes``,
  ``inline_reduce_copy``). FSDP (``fsdp``) gathers into and reduces from its flat parameter's own padded storage
  (``FlatParamHandle``): no such copies. The gradient pre- and post-division (``_div_if_needed``, run on the
  reduce-scatter stream beside the compute, and dropped for ``ReduceOp.AVG`` in later versions) are not charged.

Kernels the runtime decides (``selective``, ``float8``): what a ``selective`` recompute runs again (``attention``:
Korthikanti et al.'s attention core; ``op``: torchtitan's per-op policy) and whose casts an 8-bit training dtype
pays (``te``: Transformer Engine's fused casts; ``torchao``: torchao's amax and cast kernels).

The host's wait in a dropless mixture of experts (``moe_sync``, Megatron-Core): the token dispatcher needs each
expert's token count on the host (the all-to-all's split sizes, the grouped GEMM's ``m_splits``), so every MoE
layer's forward blocks the host until the device has routed its tokens, and the queue of kernels the host had
issued ahead drains (:func:`.host.issue_queue_seconds` ``sync``). NVIDIA/Megatron-LM @ 2a75ac12
``megatron/core/transformer/moe/token_dispatcher.py``: the ``alltoall`` dispatcher copies the counts to the host and
waits on the copy's event before the expert-parallel all-to-all (``_maybe_dtoh_and_synchronize``); the ``flex``
dispatcher with the HybridEP backend calls ``cudaStreamSynchronize`` in its metadata preprocessing when no token count
is given (``megatron/core/transformer/moe/fused_a2a.py``, "causes a D2H synchronization"; deepseek-ai/DeepEP @ 34152ae2
``csrc/hybrid_ep/executor/executor.cu``); DeepEP's normal dispatch spins the host on the received-token counter
(``csrc/deep_ep.cpp``). The backward pass reuses the counts (no wait); a recomputed forward waits again. With
fixed-capacity padded buffers (``moe_pad_expert_input_to_capacity``) the counts are known on the host and nothing
waits. The other runtimes' MoE layers are not modelled as waiting.

The host's launches of a mixture of experts' grouped linears (``expert_launch_s``, Megatron-Core with Transformer
Engine): the recipes run each expert layer's fc1 (the gated projections fused) and fc2 as Transformer Engine's
``GroupedLinear`` (``TEGroupedMLP``, NVIDIA/Megatron-LM @ 2a75ac12 ``megatron/core/transformer/moe/experts.py``), whose
GEMMs are one cuBLASLt launch per local expert issued in a C++ loop over 4 streams, with an event record and wait per
stream (NVIDIA/TransformerEngine @ e7c550c5 ``transformer_engine/common/gemm/cublaslt_gemm.cu``
``multi_stream_cublas_gemm``; the one-launch grouped GEMM needs ``NVTE_GROUPED_LINEAR_USE_FUSED_GROUPED_GEMM=1``,
``pytorch/module/grouped_linear.py``, which no Megatron-Bridge recipe at 067f987d sets): a forward GEMM per expert
and grouped linear, a data-gradient and a weight-gradient GEMM backward. Each launch costs the host
:data:`TE_EXPERT_GEMM_LAUNCH_S` on top of the module's framework call, which the kernel count already has. The
per-expert quantize kernels of an 8-bit recipe (``split_quantize``, ``pytorch/csrc/extensions/cast.cpp``) are
launched in the same loop; no source prices them, and they are left out (the model stays on the fast side there).

The kernels of a mixture of experts' router and of its token dispatcher's preprocessing (``router_kernels``,
Megatron-Core): NVIDIA's optimization history of DeepSeek-V3 on GB200 (NVIDIA/Megatron-LM @ eb0783b6
``docs/discussions/deepseek-v3-gb200-optimization/deepseek-v3-gb200-optimization.md`` §2.1.4 and §2.2.1) counts the
forward kernels of "the router part": 72, and 31 with ``--moe-router-fusion`` (Transformer Engine pull request 1883),
which every Megatron-Bridge perf recipe of the mixtures of experts sets (NVIDIA-NeMo/Megatron-Bridge @ 067f987d
``perf_recipes/*/*``); and 17 for "the router and preprocess parts" with the ``flex`` dispatcher (DeepEP, whose
preprocessing is one fused kernel; HybridEP taken as the same [D]). With the ``alltoall`` dispatcher the 31 of the
router alone stand for both parts (its preprocessing, the token counts and splits of
``megatron/core/transformer/moe/token_dispatcher.py`` @ 2a75ac12 ``preprocess``, adds a few more: a lower bound). Each
is a framework call at the host's price of a kernel (:data:`.host.HOST_S_PER_KERNEL`); the layer graph lists 2 (the
router's linear and its softmax), and the rest are host kernels of the router's row, forward (and in a forward run
again). The counts are DeepSeek-V3's router (sigmoid scores, grouped top-k, a sequence auxiliary loss), taken for every
router [D]; the backward pass's router kernels are not counted (no source gives them: the model stays on the fast
side). A CUDA graph of ``moe_router`` replays them (:func:`.host.graphed_rows`).

Whether the data-parallel collectives overlap the compute at all (``training.overlap``; null: the runtime's own,
:func:`overlaps`): DeepSpeed's ZeRO engine reduces gradients on the compute stream unless ``overlap_comm`` is set,
which defaults to true at stage 3 only (microsoft/DeepSpeed @ 38327e0 ``deepspeed/runtime/zero/config.py``
``overlap_comm_valid``; v0.3.13 @ 12a53b4 ``zero/constants.py``: ``ZERO_OPTIMIZATION_OVERLAP_COMM_DEFAULT`` false,
``ZERO3_OPTIMIZATION_OVERLAP_COMM_DEFAULT`` true; ``stage_1_and_2.py`` ``average_tensor``: the current stream
without it). DeepSpeed's pipeline engine runs one schedule, ``TrainSchedule`` (1F1B: ``deepspeed/runtime/pipe/
schedule.py``), and reduces the gradients only after its last backward pass (the ``ReduceTiedGrads``,
``ReduceGrads`` and ``OptimizerStep`` instructions of the schedule's last step; ``pipe/engine.py``
``_exec_reduce_grads``), so with pipeline stages nothing overlaps, whatever ``overlap_comm`` says. Megatron-Core
overlaps as Megatron-LM's examples and Megatron-Bridge's recipes run it (``--overlap-grad-reduce``: NVIDIA/Megatron-LM
@ d98e8a64 ``examples/llama``, ``examples/mixtral``; off in ``distributed_data_parallel_config.py``'s own default),
FSDP and FSDP2 on their reduce-scatter stream.

The first unit of each pass cannot be prefetched (nothing runs before it), so a prefetching runtime exposes
its gather once a pass [D]. ``training.bucket_bytes`` and ``training.prefetch`` override a runtime's bucket
size (bytes) and prefetch depth (units; 0: every gather waits for the compute before it).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, replace

from ..checks import count, did_you_mean, number
from ..choices import CUDA_GRAPH_SCOPES, FULL_ITERATION

# Host seconds of DeepSpeed 0.3's per-rank Python and dispatcher work (``benchmarks/host_view_cost.py``, CPU seconds
# of the process, the median of three runs of 7 x 10 x 1,536, on this project's 2-core AMD EPYC VM with torch 2.13,
# 2026-12-06; CPU time rather than wall time, since the VM's cores are shared: the wall figures ran 2-3x higher under
# load). A GPU adds the copy kernel's launch (the device's ``launch_overhead_s``) to each copy.
#: one ``Tensor.narrow`` view built from Python and appended to a list (1.71-2.40 us)
HOST_VIEW_S = 1.95e-6
#: one small ``Tensor.copy_`` dispatched (the dispatcher and TensorIterator around the copy kernel): PyTorch 1.8's
#: list-form collectives copy each of the ``d`` outputs (inputs) with ``copy_`` from C++ (1.36-1.48 us; Python's call
#: included, an upper bound of the C++ loop's)
HOST_COPY_S = 1.41e-6
#: one parameter's copy-out from one rank's part of a coalesced gather (``_allgather_params``: a view of the rank's
#: part, the parameter's flat view, a view of its slice, ``copy_``; 6.17-6.86 us)
HOST_GATHER_COPY_S = 6.78e-6
#: host seconds of one further expert's GEMM in Transformer Engine's multi-stream grouped GEMM (module doc) [D]:
#: NVIDIA/TransformerEngine pull request 3134 (2026-06-17) times, on SM100 (a B200-class host), the forward GEMMs of
#: 8 experts of 128 tokens at N = K = 2048 (NVFP4, operands prepared, "times only the GEMM") at 0.267 ms on the
#: multi-stream cuBLASLt path and 0.069 ms as one CUTLASS launch from the same call; the difference over the 7 further
#: launches, 28.3 us each (the GEMMs themselves are a few microseconds of GPU time: the path is host-bound)
TE_EXPERT_GEMM_LAUNCH_S = (0.267e-3 - 0.069e-3) / 7
#: forward kernels of Megatron-Core's fused router and its dispatcher's preprocessing a MoE layer, by
#: ``parallel.moe_dispatcher`` (module doc: 31 for the router part with router fusion, 17 for both parts with DeepEP)
MCORE_ROUTER_KERNELS = (("alltoall", 31), ("deepep", 17), ("hybridep", 17))
FRAMEWORKS = ("ideal", "megatron", "deepspeed", "deepspeed-0.3", "fsdp", "fsdp2")
# the device memory a runtime adds beside the model's state and activations, each priced (with its source) by
# :func:`.allocator.framework_parts`; named here, without sympy, for the printer of a cached estimate (issue 41)
MEMORY_PARTS = ("cuda_context", "nccl_buffers", "workspaces", "gathered_parameters", "gradient_buffers", "loss_buffers",
                "recompute_buffer")


@dataclass(frozen=True)
class Runtime:
    """How a runtime cuts and schedules the data-parallel collectives of a step (module doc).

    ``gather`` / ``reduce``: the unit of one all-gather / gradient reduction call (``pass``: the whole stage
    at once, the ideal model; ``tensor``: each parameter tensor; ``module``: each layer's tensors coalesced;
    ``block``: each wrapped block; ``bucket``: ``bucket_elements`` parameters a call, at least the
    ``bucket_floor_per_rank`` x ranks of Megatron's default; gathers in ``gather_bucket_elements`` where
    given); ``prefetch``: units gathered ahead of the
    compute (``None``: unlimited, the ideal model; 0: serialised); ``regather_recompute``: the recomputed
    forward gathers its parameters again; ``list_copies``: ``d`` copy kernels and ``d`` views a call (list-form
    collectives); ``persist_elements``: parameters under this many elements stay gathered;
    ``zero_stages``: the ZeRO stages it has a mode for; ``max_zero_with_pipeline``: the highest ZeRO stage it runs
    with pipeline stages; ``schedules``: the pipeline
    schedules its engine runs (empty: every one); ``overlap_from_zero``: the lowest ZeRO stage at which its gradient
    reduction overlaps the backward pass by default; ``pipeline_overlap``: whether anything overlaps with pipeline
    stages (:func:`overlaps`); ``reduce_bytes``: bytes a
    gradient value on the wire (``None``: the training dtype's gradients); ``copy_bytes``: the bytes a call reads and
    writes in the device's memory besides the collective's own, per byte of the call, for a gather and for a
    reduction (buffers zeroed, flattened, divided), and ``bucket_copy_bytes`` more for a gradient of at most
    ``bucket_elements`` copied into a contiguous bucket first; ``regather_persistent``: the persistent parameters are
    released after every backward pass and gathered back once a microbatch in one coalesced call, copied out per
    parameter and rank from Python; ``inline_gather_bytes``: bytes read and written on the compute stream per byte
    gathered (FSDP2's copy-out); ``inline_reduce_copy``: the gradients copied into the reduction's input, in its
    dtype, on the compute stream (FSDP2's copy-in); ``moe_sync``: a dropless mixture-of-experts layer's token
    dispatcher blocks the host once a forward pass until the routing counts are on the host; ``expert_launch_s``: the
    host seconds of each expert's GEMM launch in a grouped linear beyond the first (0: one launch for all experts;
    module doc); ``router_kernels``: ``(dispatcher, kernels)`` pairs, the forward kernels of a MoE layer's router and
    its dispatcher's preprocessing (empty: the layer graph's own; module doc)."""

    name: str
    gather: str = "pass"
    reduce: str = "pass"
    bucket_elements: float = 0.0
    bucket_floor_per_rank: float = 0.0
    gather_bucket_elements: float = 0.0
    prefetch: int | None = None
    regather_recompute: bool = False
    list_copies: bool = False
    persist_elements: float = 0.0
    zero_stages: tuple = (0, 1, 2, 3)
    max_zero_with_pipeline: int = 3
    schedules: tuple = ()
    overlap_from_zero: int = 0
    pipeline_overlap: bool = True
    reduce_bytes: int | None = None
    copy_bytes: tuple = (0.0, 0.0)
    bucket_copy_bytes: float = 0.0
    regather_persistent: bool = False
    inline_gather_bytes: float = 0.0
    inline_reduce_copy: bool = False
    selective: str = "attention"
    float8: str = "te"
    moe_sync: bool = False
    expert_launch_s: float = 0.0
    router_kernels: tuple = ()

    def bucket(self, ranks: int) -> float:
        """Parameters in one reduction bucket over ``ranks`` data-parallel ranks.

        >>> PROFILES["megatron"].bucket(8), PROFILES["megatron"].bucket(64)
        (40000000.0, 64000000.0)
        """
        return max(self.bucket_elements, self.bucket_floor_per_rank * ranks)

    @property
    def serial(self) -> bool:
        """Whether every gather and reduction waits for the compute queued before it."""
        return self.prefetch == 0


PROFILES = {
    "ideal": Runtime("ideal"),
    # Megatron-Core DDP: bucket_size = max(40e6, 1e6 x dp) parameters (distributed_data_parallel_config.py)
    # float8 "te-mcore": Transformer Engine's casts as Megatron-Core's layers fuse them (timing.graph.cast_fusion)
    "megatron": Runtime("megatron", gather="bucket", reduce="bucket", bucket_elements=40e6,
                        bucket_floor_per_rank=1e6, float8="te-mcore", moe_sync=True,
                        expert_launch_s=TE_EXPERT_GEMM_LAUNCH_S, router_kernels=MCORE_ROUTER_KERNELS),
    # DeepSpeed config.py defaults: reduce_bucket_size 5e8, allgather_bucket_size 5e8, prefetch 5e7 (elements),
    # param_persistence_threshold 1e5
    # DeepSpeed's pipeline engine refuses ZeRO-2 and -3 ("incompatible with pipeline parallelism",
    # deepspeed/runtime/pipe/engine.py), runs TrainSchedule (1F1B) only and reduces after the last backward;
    # overlap_comm defaults to true at ZeRO-3 only (module doc)
    "deepspeed": Runtime("deepspeed", gather="module", reduce="bucket", bucket_elements=5e8,
                         gather_bucket_elements=5e8, prefetch=1, regather_recompute=True, persist_elements=1e5,
                         max_zero_with_pipeline=1, schedules=("1f1b",), overlap_from_zero=3,
                         pipeline_overlap=False),
    # DeepSpeed v0.3.13 ZeRO-3 as DeepSpeedExamples @ 2cd968f ran Megatron's GPT (module doc): reduce_bucket_size 5e7
    "deepspeed-0.3": Runtime("deepspeed-0.3", gather="tensor", reduce="tensor", bucket_elements=5e7,
                             gather_bucket_elements=5e8, prefetch=0, regather_recompute=True, list_copies=True,
                             persist_elements=1e5, max_zero_with_pipeline=1, copy_bytes=(3.0, 4.0),
                             bucket_copy_bytes=2.0, regather_persistent=True, schedules=("1f1b",),
                             overlap_from_zero=3, pipeline_overlap=False),
    # PyTorch FSDP's sharding strategies (torch/distributed/fsdp/api.py ShardingStrategy): NO_SHARD (replicated, as
    # DDP: ZeRO 0), SHARD_GRAD_OP (parameters kept gathered from the forward to the backward: ZeRO 2), FULL_SHARD
    # (ZeRO 3); none shards the optimizer state alone (ZeRO 1). FSDP2's fully_shard the same: reshard_after_forward
    # False (2) or True (3), replicate (0)
    "fsdp": Runtime("fsdp", gather="block", reduce="block", prefetch=1, zero_stages=(0, 2, 3)),
    # torchtitan's FSDP2 reduces in fp32 (job config mixed_precision_reduce = "float32", pytorch/torchtitan)
    # torchtitan: per-op selective checkpointing (parallelize_llama.py _save_list), torchao float8 (float8.py)
    # FSDP2's copy-out after each gather and copy-in before each reduce-scatter, on the compute stream (module doc)
    "fsdp2": Runtime("fsdp2", gather="block", reduce="block", prefetch=1, reduce_bytes=4, selective="op",
                     float8="torchao", inline_gather_bytes=2.0, inline_reduce_copy=True, zero_stages=(0, 2, 3)),
}


# training.reduce_dtype: the dtype a runtime reduces gradients in, overriding its own (null): FSDP's and FSDP2's
# ``MixedPrecision(reduce_dtype=...)``, e.g. Composer's ``mixed_precision: DEFAULT`` (fp32) or torchtitan's
# ``mixed_precision_reduce``
REDUCE_DTYPES = {"fp32": 4, "bf16": 2, "fp16": 2}
FP8_RECIPES = ("tensorwise", "rowwise")  # training.fp8_recipe: torchao's scalings (torchtitan float8.recipe_name)


def kernel_policies(framework: str | None, zero_stage: int = 0,
                    fp8_recipe: str | None = None) -> tuple[str, str, bool, float, tuple]:
    """``(selective, float8, moe_sync, expert_launch_s, router_kernels)`` of a runtime (``None``: the one the ZeRO
    stage implies): the policy of a ``selective`` recompute (:mod:`.recompute`) and the casts of 8-bit training
    (:func:`concurrency_model.timing.graph.cast_parts`); ``fp8_recipe`` ``rowwise`` (``training.fp8_recipe``) turns
    torchao's tensorwise casts into its rowwise ones; then the MoE host work (``moe_sync``, ``expert_launch_s``,
    ``router_kernels``: :class:`Runtime`). An unknown name gets the ideal runtime's (the scenario check names it).

    >>> kernel_policies("fsdp2"), kernel_policies(None, 3), kernel_policies("fsdp2", fp8_recipe="rowwise")
    (('op', 'torchao', False, 0.0, ()), ('attention', 'te', False, 0.0, ()), ('op', 'torchao-rowwise', False, 0.0, ()))
    >>> kernel_policies("megatron")[:3], round(kernel_policies("megatron")[3] * 1e6, 1), kernel_policies("megatron")[4]
    (('attention', 'te-mcore', True), 28.3, (('alltoall', 31), ('deepep', 17), ('hybridep', 17)))
    """
    rt = _profile(framework, zero_stage) or PROFILES["ideal"]
    casts = rt.float8 + "-rowwise" if rt.float8 == "torchao" and fp8_recipe == "rowwise" else rt.float8
    return rt.selective, casts, rt.moe_sync, rt.expert_launch_s, rt.router_kernels


def _profile(framework: str | None, zero_stage: int) -> Runtime | None:
    """The :class:`Runtime` of ``framework`` (``None``: the one ZeRO stage ``zero_stage`` implies); ``None`` for an
    unknown name (the scenario check names it)."""
    return PROFILES.get(framework or default_framework(zero_stage))


def default_framework(zero_stage: int) -> str:
    """The runtime a scenario's other fields imply when ``training.framework`` is left out: ZeRO stages 2 and
    3 are DeepSpeed's (Rajbhandari et al. 2020 name them); stages 0 and 1 are Megatron's DDP and its
    distributed optimizer (the ZeRO-1 sharding of Megatron-LM's ``--use-distributed-optimizer``).

    >>> default_framework(3), default_framework(1)
    ('deepspeed', 'megatron')
    """
    return "deepspeed" if zero_stage >= 2 else "megatron"


def runs_with(framework: str | None, zero_stage: int, pipeline: int) -> bool:
    """Whether the runtime (``None``: the one the ZeRO stage implies) runs ZeRO stage ``zero_stage`` with
    ``pipeline`` stages.

    >>> runs_with(None, 3, 2), runs_with("fsdp2", 3, 2), runs_with("deepspeed", 1, 8)
    (False, True, True)
    """
    rt = _profile(framework, zero_stage)
    return rt is None or pipeline == 1 or zero_stage <= rt.max_zero_with_pipeline


def has_zero_stage(framework: str | None, zero_stage: int) -> bool:
    """Whether the runtime (``None``: the one the ZeRO stage implies) has a mode for ZeRO stage ``zero_stage``
    (FSDP and FSDP2 shard the optimizer state only with the gradients: no stage 1).

    >>> has_zero_stage("fsdp2", 1), has_zero_stage("fsdp2", 2), has_zero_stage("megatron", 1), has_zero_stage(None, 1)
    (False, True, True, True)
    """
    rt = _profile(framework, zero_stage)
    return rt is None or zero_stage in rt.zero_stages


def runs_schedule(framework: str | None, zero_stage: int, pipeline: int, schedule: str) -> bool:
    """Whether the runtime (``None``: the one the ZeRO stage implies) runs pipeline schedule ``schedule`` over
    ``pipeline`` stages (module doc: DeepSpeed's engine runs 1F1B only).

    >>> runs_schedule("deepspeed", 1, 4, "interleaved"), runs_schedule(None, 1, 4, "interleaved")
    (False, True)
    >>> runs_schedule("deepspeed", 1, 1, "gpipe"), runs_schedule("deepspeed", 1, 4, "1f1b")
    (True, True)
    """
    rt = _profile(framework, zero_stage)
    return rt is None or pipeline == 1 or not rt.schedules or schedule in rt.schedules


def overlaps(framework: str | None, zero_stage: int, pipeline: int, overlap: bool | None = None) -> bool:
    """Whether a step's data-parallel collectives overlap its compute: ``overlap`` (``training.overlap``) where
    given, else the runtime's default (module doc): DeepSpeed's ``overlap_comm`` (ZeRO-3 only), never under its
    pipeline engine; every other runtime overlaps. ``framework`` ``None``: the one the ZeRO stage implies.

    >>> overlaps("deepspeed", 1, 1), overlaps("deepspeed", 3, 1), overlaps(None, 2, 1), overlaps(None, 1, 8)
    (False, True, False, True)
    >>> overlaps("deepspeed", 1, 4, None), overlaps("fsdp", 1, 1), overlaps("fsdp", 1, 1, False)
    (False, True, False)
    """
    if overlap is not None:
        return bool(overlap)
    rt = _profile(framework, zero_stage)
    if rt is None:
        return True
    return (pipeline == 1 or rt.pipeline_overlap) and zero_stage >= rt.overlap_from_zero


def runtime_of(framework: str, bucket_bytes=None, prefetch=None, grad_bytes: int = 2,
               overlap: bool | None = True, reduce_dtype: str | None = None) -> Runtime:
    """The :class:`Runtime` of ``training.framework`` with the scenario's ``training.bucket_bytes`` (a reduction
    bucket in bytes of ``grad_bytes``-byte gradients), ``training.prefetch`` (units) and ``training.reduce_dtype``
    (the gradients' dtype on the wire, :data:`REDUCE_DTYPES`) applied; ``ValueError`` naming the field for a bad
    value. Megatron-Core reduces the whole gradient buffer in one call when the reduction does not overlap the
    backward pass (``overlap=False``: ``bucket_size = None``; ``None``: the runtime's default, :func:`overlaps`,
    which for Megatron-Core is to overlap).

    >>> runtime_of("fsdp", prefetch=2).prefetch
    2
    >>> runtime_of("fsdp").reduce_bytes, runtime_of("fsdp", reduce_dtype="fp32").reduce_bytes
    (None, 4)
    >>> runtime_of("deepspeed", bucket_bytes=2**20).bucket_elements
    524288.0
    >>> runtime_of("fdsp")
    Traceback (most recent call last):
    ...
    ValueError: training.framework: unknown 'fdsp'; did you mean 'fsdp'?; allowed: ideal, megatron, deepspeed, \
deepspeed-0.3, fsdp, fsdp2
    """
    if framework not in PROFILES:
        raise ValueError(f"training.framework: unknown {framework!r}{did_you_mean(framework, FRAMEWORKS)}; allowed: "
                         f"{', '.join(FRAMEWORKS)}")
    rt = PROFILES[framework]
    if framework == "megatron" and overlap is False:
        rt = replace(rt, gather="pass", reduce="pass")
    if bucket_bytes is not None:
        b = number("training.bucket_bytes", bucket_bytes, high=2.0**53)
        elements = float(max(1, math.floor(b / grad_bytes)))
        rt = replace(rt, bucket_elements=elements, bucket_floor_per_rank=0.0, gather_bucket_elements=elements)
    if prefetch is not None:
        rt = replace(rt, prefetch=count("training.prefetch", prefetch, low=0, high=1024))
    if reduce_dtype is not None:
        if reduce_dtype not in REDUCE_DTYPES:
            raise ValueError(f"training.reduce_dtype: unknown {reduce_dtype!r}"
                             f"{did_you_mean(str(reduce_dtype), REDUCE_DTYPES)}; allowed: {', '.join(REDUCE_DTYPES)}")
        rt = replace(rt, reduce_bytes=REDUCE_DTYPES[reduce_dtype])
    return rt


def units(tensors: list, runtime: Runtime, kind: str, ranks: int) -> list:
    """Parameters of each call of one pass's all-gathers (``kind="gather"``) or gradient reductions
    (``"reduce"``) under ``runtime``, from ``tensors``: one ``(block, module, elements)`` row per parameter
    tensor, in graph order. Gathers skip the persistent tensors (under ``persist_elements``).

    >>> rows = [(0, "a", 10), (0, "a", 2), (1, "b", 10), (1, "c", 10)]
    >>> units(rows, PROFILES["fsdp"], "gather", 8), units(rows, PROFILES["deepspeed-0.3"], "reduce", 8)
    ([12.0, 20.0], [10.0, 2.0, 10.0, 10.0])
    >>> units(rows, Runtime("x", gather="bucket", gather_bucket_elements=15), "gather", 8)
    [15.0, 15.0, 2.0]
    """
    unit = runtime.gather if kind == "gather" else runtime.reduce
    rows = [r for r in tensors if kind != "gather" or r[2] >= runtime.persist_elements]
    total = float(sum(r[2] for r in rows))
    if unit == "pass" or not rows:
        return [total] if total else []
    if unit == "tensor":
        return [float(r[2]) for r in rows]
    if unit == "bucket":
        size = (kind == "gather" and runtime.gather_bucket_elements) or runtime.bucket(ranks)
        full, rest = divmod(total, size)
        return [float(size)] * int(full) + ([float(rest)] if rest else [])
    key = 0 if unit == "block" else 1
    out: dict = {}
    for r in rows:
        out[r[key]] = out.get(r[key], 0.0) + float(r[2])
    return list(out.values())


def cuda_graph_scopes(spec) -> tuple:
    """The scopes of ``training.cuda_graph`` (:mod:`concurrency_model.parallel.host`), sorted: ``()`` for ``"none"``,
    ``("full_iteration",)``, or the comma-separated per-layer scopes of :data:`CUDA_GRAPH_SCOPES`; ``ValueError``
    naming the field otherwise.

    >>> cuda_graph_scopes("none"), cuda_graph_scopes("moe_router, attn"), cuda_graph_scopes("full_iteration")
    ((), ('attn', 'moe_router'), ('full_iteration',))
    >>> try:
    ...     cuda_graph_scopes("atn")
    ... except ValueError as e:
    ...     print(str(e).split("?")[0])
    training.cuda_graph: unknown scope 'atn'; did you mean 'attn'

    """
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"training.cuda_graph: a string, got {spec!r}")
    names = [x.strip() for x in spec.split(",")]
    if names == ["none"]:
        return ()
    if names == [FULL_ITERATION]:
        return (FULL_ITERATION,)
    allowed = ("none", FULL_ITERATION, *CUDA_GRAPH_SCOPES)
    for x in names:
        if x not in CUDA_GRAPH_SCOPES:
            why = f"{x!r} stands alone" if x in allowed else f"unknown scope {x!r}{did_you_mean(x, allowed)}"
            raise ValueError(f"training.cuda_graph: {why}; allowed: \"none\", \"full_iteration\" or a comma-separated "
                             f"list of {', '.join(CUDA_GRAPH_SCOPES)}")
    return tuple(sorted(set(names)))
