"""Data parallelism in a step: the gradient synchronisation of ``d`` replicas and where its group sits.

The collectives of one step (:meth:`DataParallelMixin.data_parallel`) as communication triples (latency,
intra-node busy, inter-node busy seconds; :mod:`.features`): the gradient all-reduce (or, with ZeRO, its
reduce-scatter and the parameter all-gather), the last DDP bucket that never hides (Li et al. 2020 §4.2),
or the paper's §7 alternatives (parameter servers, gossip, gradient compression; :mod:`.distribution`,
:mod:`.compression`), and with expert parallelism the experts' own all-reduce (:mod:`.expert`); and the
all-reduces of synchronous batch normalization inside the passes (:meth:`DataParallelMixin.batch_norm_sync`).
"""
from __future__ import annotations

import math
from collections import Counter
from functools import lru_cache

from ..units import state_dtype
from .allocator import bf16_optimizer
from .runtime import HOST_COPY_S, HOST_GATHER_COPY_S, HOST_VIEW_S, Runtime, default_framework, runtime_of, units
from .triples import ZERO_TRIPLE, add_triples

GRAD_BYTES = {"fp32": 4, "tf32": 4}  # gradients in the training dtype otherwise (2 bytes for fp16/bf16)
BUCKET_BYTES = 25 * 2**20  # PyTorch DDP bucket_cap_mb = 25 (training-formulas §7)
STAT_BYTES = 4  # batch-norm statistics are reduced in fp32 [D]
#: device bytes a parameter of DeepSpeed's ``BF16_Optimizer`` folding a microbatch's bf16 gradient into its fp32 buffer
#: (``update_hp_grads``: ``hp_grad.add_(lp.grad.to(hp_grad.dtype))``): the cast reads 2 and writes 4, the add reads 4 + 4
#: and writes 4
FP32_ACCUMULATE_BYTES = 2 + 4 + 3 * 4


def group_placement(gpus_per_node: int, t: int, ranks: int) -> tuple[int, int]:
    """``(ranks per node, groups sharing a node's links)`` of a group of ``ranks`` consecutive
    data-parallel replicas of ``t`` tensor ranks each: the largest divisor of ``ranks`` that fits in a node
    beside the tensor ranks, and the other tensor ranks' groups beside it."""
    cap = max(1, gpus_per_node // min(t, gpus_per_node))
    rpn = max(k for k in range(1, min(ranks, cap) + 1) if ranks % k == 0)
    return rpn, max(1, min(t, gpus_per_node // rpn))


class DataParallelMixin:
    """The data-parallel parts of :class:`~.features.Workload` (which provides ``cluster``, ``dev``, ``vb``,
    ``grad_bytes``, ``params``, ``_coll`` and, from :class:`~.expert.ExpertMixin`, ``expert_gradient_sync``)."""

    @lru_cache(maxsize=None)
    def param_tensors(self) -> tuple:
        """``(block, module, elements)`` of every parameter tensor of the model, in graph order: a linear
        layer's weight and bias, a layer norm's scale and shift, an embedding's table (:mod:`.runtime` cuts
        the data-parallel collectives by them). ``block`` is the repeated block a layer belongs to, its name up to
        the first numbered part (``h.3``, ``layers.3``, ``layer1.0``), as FSDP's auto-wrap policies wrap each
        transformer or residual block; the layers outside any block share the root unit ``""`` (FSDP's root
        module holds the embeddings, the final norm and the output layer)."""
        out = []
        for n in self.graph(1).layers():
            params = int(n.cost.params) if n.cost is not None else 0
            if params <= 0:
                continue
            if n.kind == "linear" and "c_in" in n.attrs and params > n.attrs["c_in"] * n.attrs["c_out"]:
                weight = n.attrs["c_in"] * n.attrs["c_out"]
                parts = [weight, params - weight]
            elif n.kind == "layer_norm" and params % 2 == 0:
                parts = [params // 2, params // 2]
            else:
                parts = [params]
            name = n.name.split(".")
            numbered = next((i for i, x in enumerate(name[:-1]) if x.isdigit()), None)
            block = ".".join(name[:numbered + 1]) if numbered is not None else ""
            out += [(block, n.name, x) for x in parts]
        return tuple(out)

    def _units(self, runtime: Runtime, kind: str, d: int) -> list:
        """Elements of each call of one pass's gathers or reductions under ``runtime`` (whole model)."""
        if runtime.gather == "pass" and runtime.reduce == "pass" or self.lora_rank:
            return [float(self.trainable_params)]
        return units(list(self.param_tensors()), runtime, kind, d)

    @lru_cache(maxsize=None)
    def _unit_sizes(self, runtime: Runtime, kind: str, d: int) -> tuple:
        """``(((elements, calls), ...), calls, elements, elements in calls of at most a bucket)`` of :meth:`_units`:
        what :meth:`_calls` reads of them, once per runtime, kind and degree (a sweep asks for thousands of
        layouts)."""
        sizes = self._units(runtime, kind, d)
        return (tuple(Counter(sizes).items()), len(sizes), sum(sizes),
                sum(n for n in sizes if n <= runtime.bucket_elements))

    def _calls(self, op: str, runtime: Runtime, kind: str, value_bytes: float, t: int, p: int, d: int, rpn: int,
               sharing: int) -> tuple:
        """Triple of one pass's ``op`` calls on a stage (``1/p`` of the model's units, each split ``t`` ways):
        each call its own collective (its own latency), plus ``d`` copy kernels and ``d`` host views a call with
        list-form collectives (:mod:`.runtime`). Buckets of one size fewer than the stages (a bucket wider than a
        stage's share, as the one bucket of a small model, or a runtime's one call a pass) are a call of the stage's
        share on every stage, not a fraction of a call: each stage buckets its own parameters [D]; a module's unit
        stays on its stage (on average ``k / p`` calls a stage)."""
        out, (counted, n_calls, total, small) = ZERO_TRIPLE, self._unit_sizes(runtime, kind, d)
        bucketed = getattr(runtime, kind) in ("bucket", "pass")
        for n, k in counted:
            calls = k / p
            size, calls = (n * calls, 1.0) if bucketed and calls < 1 else (n, calls)
            one = self._coll(op, size / t * value_bytes, d, rpn, sharing)
            out = add_triples(out, tuple(x * calls for x in one))
        if runtime.list_copies:
            per_rank = float(self.dev.launch_overhead) + HOST_VIEW_S + HOST_COPY_S
            out = (out[0] + n_calls / p * d * per_rank, out[1], out[2])
        copied = runtime.copy_bytes[kind == "reduce"] * total
        if kind == "reduce":
            copied += runtime.bucket_copy_bytes * small
        if copied:  # the device's own copies around the calls, at its memory rate, serial with them
            seconds = copied / (t * p) * value_bytes / float(self.dev.efficiency.memory) / float(self.dev.mem_bw)
            out = (out[0] + seconds, out[1], out[2])
        return out

    def persistent_regather(self, runtime: Runtime, t: int, p: int, d: int, rpn: int, sharing: int) -> tuple:
        """Triple of gathering a stage's persistent parameters (under ``runtime.persist_elements``) back once, as
        DeepSpeed 0.3.13 does (``stage3.py``: ``backward`` ends in ``_partition_all_parameters``, which releases every
        parameter, the persistent ones too; ``_post_step`` gathers those back with ``all_gather`` on the list, which
        takes ``partition_parameters.py`` ``_allgather_params``): one list-form all-gather of their parts (``d`` views
        and ``d`` copies, :meth:`_calls`), then, per parameter, a copy from each rank whose part starts inside the
        parameter (parts of ``ceil(n / d)`` values), each a Python copy-out and a copy kernel. Once a microbatch [D]:
        with gradient accumulation the next microbatch's forward gathers them again per module instead, at a like
        cost.

        >>> from concurrency_model.hardware.clusters import load_cluster
        >>> from concurrency_model.training.workload import workload
        >>> from concurrency_model.parallel.runtime import PROFILES
        >>> w = workload("gpt2", load_cluster("dgx-a100"), "bf16")   # 98 tensors under 1e5 elements, 16 ranks
        >>> w.persistent_regather(PROFILES["ideal"], 1, 1, 16, 8, 1)
        (0.0, 0.0, 0.0)
        >>> # in ms: mostly 98 tensors x 16 ranks of copy-outs, 10.58 us each
        >>> round(w.persistent_regather(PROFILES["deepspeed-0.3"], 1, 1, 16, 8, 1)[0] * 1e3, 2)
        16.75
        """
        rows = [r for r in self.param_tensors() if r[2] < runtime.persist_elements]
        if not rows or not runtime.regather_persistent:
            return ZERO_TRIPLE
        parts = [math.ceil(r[2] / t / d) for r in rows]
        one = self._coll("allgather", sum(parts) * d * self.vb, d, rpn, sharing)
        copies = sum(math.ceil(r[2] / t / k) for r, k in zip(rows, parts))
        host = d * (float(self.dev.launch_overhead) + HOST_VIEW_S + HOST_COPY_S) \
            + copies * (float(self.dev.launch_overhead) + HOST_GATHER_COPY_S)
        return tuple(x / p for x in (one[0] + host, one[1], one[2]))

    def inline_copies(self, runtime: Runtime, t: int, p: int, d: int, gathers: int, wire: float) -> float:
        """Seconds a microbatch of the copies ``runtime`` makes on the compute stream around a stage's ZeRO-3
        collectives (FSDP2's, :mod:`.runtime`): ``gathers`` all-gathers of the stage's parameters (``1 / (t p)`` of the
        model's, in the parameters' ``vb`` bytes), each copied out at ``inline_gather_bytes`` per byte gathered, and one
        reduction of its gradients, each value read in the gradients' bytes and written in the ``wire`` bytes of the
        reduction, at the device's memory rate (the ``efficiency.memory`` fraction of ``mem_bw``) [D].

        >>> from concurrency_model.hardware.clusters import load_cluster
        >>> from concurrency_model.training.workload import workload
        >>> from concurrency_model.parallel.runtime import PROFILES
        >>> w = workload("gpt2", load_cluster("dgx-a100"), "bf16")
        >>> w.inline_copies(PROFILES["fsdp"], 1, 1, 8, 2, 4)
        0.0
        >>> n, bw = w.trainable_params, float(w.dev.efficiency.memory) * float(w.dev.mem_bw)
        >>> round(w.inline_copies(PROFILES["fsdp2"], 1, 1, 8, 2, 4) * bw / n, 9)  # 2 gathers x 2 x 2 bytes + 2 + 4
        14.0
        """
        if not runtime.inline_gather_bytes and not runtime.inline_reduce_copy:
            return 0.0
        gathered = sum(self._units(runtime, "gather", d)) / (t * p)
        reduced = sum(self._units(runtime, "reduce", d)) / (t * p)
        moved = gathers * gathered * runtime.inline_gather_bytes * self.vb
        if runtime.inline_reduce_copy:
            moved += reduced * (self.grad_bytes + wire)
        return moved / float(self.dev.efficiency.memory) / float(self.dev.mem_bw)

    def fp32_accumulation(self, runtime: Runtime, zero: int, t: int, p: int) -> float:
        """Seconds a microbatch DeepSpeed's ``BF16_Optimizer`` (``deepspeed`` at ZeRO 0 in bf16,
        :func:`.allocator.bf16_optimizer`) spends after each backward pass folding the stage's 16-bit gradients into
        its fp32 gradient buffer (microsoft/DeepSpeed @ 56c52238 ``deepspeed/runtime/bf16_optimizer.py``
        ``update_hp_grads``, which the pipeline engine calls after every backward step, ``pipe/engine.py``
        ``_exec_backward_pass``, and the engine's ``backward`` through the optimizer's; the same at 38327e0): a Python
        loop over the parameter tensors, for each a cast to fp32 and an ``add_`` (two kernels,
        :data:`FP32_ACCUMULATE_BYTES` a parameter at the device's memory rate), its host cost two small dispatches and
        a ``view`` (:data:`.runtime.HOST_COPY_S`, :data:`.runtime.HOST_VIEW_S`); the larger of the device's and the
        host's seconds [D]. 0 for every other runtime (Megatron-Core's fused weight-gradient GEMMs accumulate into
        the fp32 buffer themselves).

        >>> from concurrency_model.hardware.clusters import load_cluster
        >>> from concurrency_model.training.workload import workload
        >>> from concurrency_model.parallel.runtime import PROFILES
        >>> w = workload("gpt2", load_cluster("dgx-a100"), "bf16")
        >>> w.fp32_accumulation(PROFILES["deepspeed"], 1, 1, 1), w.fp32_accumulation(PROFILES["megatron"], 0, 1, 1)
        (0.0, 0.0)
        >>> bw = float(w.dev.efficiency.memory) * float(w.dev.mem_bw)   # 18 bytes a parameter, 148 tensors
        >>> round((w.fp32_accumulation(PROFILES["deepspeed"], 0, 1, 1) - 148 * 2 * float(w.dev.launch_overhead))
        ...       * bw / w.trainable_params, 6)
        18.0
        """
        if not bf16_optimizer(runtime.name, state_dtype(self.dtype), zero):
            return 0.0
        tensors = len(self.param_tensors()) / p
        device = self.trainable_params / (t * p) * FP32_ACCUMULATE_BYTES / float(self.dev.efficiency.memory) \
            / float(self.dev.mem_bw) + tensors * 2 * float(self.dev.launch_overhead)
        return max(device, tensors * (2 * HOST_COPY_S + HOST_VIEW_S))

    @lru_cache(maxsize=None)
    def data_parallel(self, t: int, p: int, d: int, sync: str = "allreduce", servers: int = 0,
                      compression: str = "none", topology: str = "ring", runtime: tuple = ("ideal",),
                      recompute: str = "none", e: int = 1, zero: int = 0) -> dict:
        """Triples of the data-parallel collectives over ``d`` ranks that share the node's NICs with the
        other tensor ranks: gradient allreduce ``ar``, reduce-scatter ``rs``, parameter allgather ``ag``
        and the last DDP bucket ``last_ar`` / ``last_rs`` (25 MiB, Li et al. 2020 §4.2), and ``kappa``, the
        overlap slowdown of the tier they cross (:class:`~concurrency_model.hardware.clusters.Tier`).

        ``runtime`` (the arguments of :func:`.runtime.runtime_of`, its framework null for the one ZeRO stage
        ``zero`` implies; :func:`.prepare.runtime_spec`) cuts them into its calls, each at its own cost: ``ag``
        is the forward pass's gathers, ``agb`` the backward pass's (twice with a runtime that gathers again for a
        ``full`` ``recompute``), ``x_dp`` the seconds a microbatch the runtime exposes outright (a serialised runtime:
        all of ZeRO-3's gathers and reductions, which then leave ``ag``, ``agb`` and ``rs``, and the persistent tensors'
        gathering back, :meth:`persistent_regather`; a prefetching one:
        the first unit's gather of each pass), with ZeRO stage ``zero`` 3 only; and with DeepSpeed's ``BF16_Optimizer``
        (ZeRO 0) its fp32 gradient accumulation, :meth:`fp32_accumulation`, whatever ``d``; ``emb``: a tied embedding's
        all-reduce between the first and last pipeline stages (:meth:`tied_sync`), whatever ``d``.

        ``sync="parameter_server"`` replaces the gradient allreduce by a push and pull through ``servers``
        shards (0: one per worker, on the workers' GPUs; :func:`.distribution.ps_on_cluster`);
        ``compression`` (:data:`.compression.SCHEMES`) replaces it by the scheme's collectives with its
        encode/decode seconds (:func:`.compressed_sync.codec_seconds`, counted as fixed seconds, not scaled
        with link bandwidth; ``("sfb", global_batch)``: sufficient-factor broadcasting of the fully connected
        layers for the ``global_batch / d`` samples of a replica, :mod:`.sparse_comm`); ``sync="gossip"`` by
        one gossip round on ``topology`` per step, each worker sending its (compressed, as CHOCO-SGD:
        Koloskova et al. 2019) model to its neighbours (D-PSGD: Lian et al. 2017;
        :func:`.distribution.gossip_on_cluster`). The last bucket is the same fraction of each.
        With expert parallelism ``e`` > 1 the expert gradients are all-reduced over ``d / e`` replicas
        (:meth:`~.expert.ExpertMixin.expert_gradient_sync`; with ZeRO 1 reduce-scattered and all-gathered:
        :meth:`~.expert.ExpertMixin.expert_sharded_sync`)."""
        runtime = runtime_of(runtime[0] or default_framework(zero), *runtime[1:])
        # DeepSpeed's BF16_Optimizer folds every microbatch's gradients into fp32, whatever d (:meth:`fp32_accumulation`)
        x_acc = (self.fp32_accumulation(runtime, zero, t, p), 0.0, 0.0)
        emb = self.tied_sync(runtime, t, p, d, zero)
        if d == 1 and not (self.fc_only and t > 1):
            return {**dict.fromkeys(("ar", "rs", "ag", "agb", "last_ar", "last_rs"), ZERO_TRIPLE), "x_dp": x_acc,
                    "emb": emb, "kappa": 0.0}
        # ranks of one data-parallel group per node: the largest divisor of d that fits beside the tensor ranks
        rpn, sharing = group_placement(self.cluster.domain_gpus, t, d)
        params_dev = self.trainable_params / (t * p)  # the gradients: of every parameter, or of LoRA's adapters
        grad = params_dev * self.grad_bytes
        bucket = min(grad, BUCKET_BYTES)
        ar, last_ar = self._coll("allreduce", grad, d, rpn, sharing), self._coll("allreduce", bucket, d, rpn, sharing)
        if sync != "allreduce" or compression != "none":
            ar = self._sync_triple(params_dev, d, rpn, sharing, sync, servers, compression, topology, t, p)
            last_ar = tuple(x * bucket / grad for x in ar)
        elif e > 1:
            ar = self.expert_gradient_sync(t, p, d, e, rpn, sharing)
        elif self.fc_only and t > 1:  # Krizhevsky's hybrid: the convolutions' gradients over d t devices
            ar, last_ar = self.layerwise_gradients(t, d)
        plain = sync == "allreduce" and compression == "none" and e == 1 and not (self.fc_only and t > 1)
        if plain and runtime.name != "ideal":
            wire = runtime.reduce_bytes or self.grad_bytes  # the gradients' bytes on the wire
            ar = self._calls("allreduce", runtime, "reduce", wire, t, p, d, rpn, sharing)
            rs = self._calls("reduce_scatter", runtime, "reduce", wire, t, p, d, rpn, sharing)
            ag = self._calls("allgather", runtime, "gather", self.vb, t, p, d, rpn, sharing)
        elif e > 1:  # the distributed optimizer's two groups (:meth:`~.expert.ExpertMixin.expert_sharded_sync`)
            rs, ag = self.expert_sharded_sync(t, p, d, e, rpn, sharing)
        else:
            rs = self._coll("reduce_scatter", grad, d, rpn, sharing)
            ag = self._coll("allgather", params_dev * self.vb, d, rpn, sharing)
        agb, x_dp = (add_triples(ag, ag) if runtime.regather_recompute and recompute == "full" else ag), x_acc
        if zero == 3 and runtime.serial:  # every ZeRO-3 collective waits for the compute before it: exposed
            x_dp, ag, agb, rs = add_triples(add_triples(ag, agb), rs), ZERO_TRIPLE, ZERO_TRIPLE, ZERO_TRIPLE
            if plain:
                x_dp = add_triples(x_dp, self.persistent_regather(runtime, t, p, d, rpn, sharing))
        elif zero == 3 and runtime.prefetch is not None and plain:  # the first unit of each pass: not prefetched
            first = next(iter(self._units(runtime, "gather", d)), 0.0)
            x_dp = tuple(2 * x for x in self._coll("allgather", first / t * self.vb, d, rpn, sharing))
            # the runtime's own copies on the compute stream around the gathers and the reduction (FSDP2's)
            gathers = 3 if runtime.regather_recompute and recompute == "full" else 2
            wire = runtime.reduce_bytes or self.grad_bytes
            x_dp = (x_dp[0] + self.inline_copies(runtime, t, p, d, gathers, wire), x_dp[1], x_dp[2])
        return {"ar": ar, "rs": rs, "ag": ag, "agb": agb, "x_dp": x_dp, "emb": emb, "last_ar": last_ar,
                "last_rs": self._coll("reduce_scatter", bucket, d, rpn, sharing),
                # the overlap interference of the tier the group's traffic crosses
                "kappa": (self.cluster.inter if d > rpn else self.cluster.intra).overlap_slowdown}

    def tied_sync(self, runtime: Runtime, t: int, p: int, d: int, zero: int = 0) -> tuple:
        """Triple of the all-reduce of a tied embedding's gradient between the first pipeline stage (the embedding) and
        the last (its copy as the output layer, :meth:`~.workload.Workload.tied_params`), once a step after the
        data-parallel reduction and before the optimizer step, outside the passes (exposed): Megatron-Core's
        ``_allreduce_word_embedding_grads`` over the embedding group of the two stages (NVIDIA/Megatron-LM @ d98e8a64
        ``megatron/core/distributed/finalize_model_grads.py``, after ``finish_grad_sync``) and DeepSpeed's pipeline
        engine's ``ReduceTiedGrads`` (microsoft/DeepSpeed @ 38327e0 ``deepspeed/runtime/pipe/engine.py``
        ``_exec_reduce_tied_grads``, ``pipe/module.py`` ``allreduce_tied_weight_gradients``; issued after the last
        backward pass, ``pipe/schedule.py``). Each tensor rank reduces its ``1 / t`` share in the runtime's gradient
        bytes (those of the data-parallel reduction; DeepSpeed's ``BF16_Optimizer`` reduces the fp32 copy,
        ``_hp_grad``, in the same ``_exec_reduce_tied_grads``). Each of the ``t x d`` first-stage ranks has its own
        partner; when the ``t x d x p`` ranks of a pipeline fill more than an NVLink domain the two stages sit on
        different nodes, the first stage's ranks of a node sharing its network [D]. Nothing without pipeline stages
        or a tied output layer."""
        if p == 1 or not self.tied_params:
            return ZERO_TRIPLE
        fp32 = bf16_optimizer(runtime.name, state_dtype(self.dtype), zero)
        wire = 4 if fp32 else runtime.reduce_bytes or self.grad_bytes
        nbytes = self.tied_params / t * wire
        domain = self.cluster.domain_gpus
        if t * d * p <= domain:
            return self._coll("allreduce", nbytes, 2, 2, 1)
        return self._coll("allreduce", nbytes, 2, 1, min(t * d, domain))

    def _sync_triple(self, elements: float, d: int, rpn: int, sharing: int, sync: str, servers: int,
                     compression: str, topology: str = "ring", t: int = 1, p: int = 1) -> tuple:
        """The gradient synchronisation of :meth:`data_parallel` by parameter server, gossip or compressed.
        PowerSGD compresses the device's matrices: its tensor rank's share of each (:func:`.compression.
        weight_matrices`) on the first of ``p`` stages, the first ``1/p`` of them in the graph's order (with the
        embedding: the stage whose synchronisation is the longest in a language model) [D]; with LoRA the
        adapters' (:func:`.lora.adapter_matrices`)."""
        from .compressed_sync import codec_seconds
        from .compression import compress, weight_matrices
        from .lora import adapter_matrices
        from .distribution import gossip_on_cluster, ps_on_cluster
        if isinstance(compression, tuple):  # ("sfb", global batch): the factors of a replica's samples
            c = compress("sfb", self.graph(compression[1] // d), value_bytes=self.grad_bytes, workers=d)
        elif compression == "powersgd":
            mats = adapter_matrices(self.graph(1), self.lora_rank, t) if self.lora_rank else \
                weight_matrices(self.graph(1), t)[0]
            mats = mats[:-(-len(mats) // p)]
            held = sum(a * b for a, b in mats)
            c = compress("powersgd", max(float(elements), held), shape=mats, value_bytes=self.grad_bytes)
        else:
            c = compress(compression if compression != "none" else "fp32", elements, value_bytes=self.grad_bytes)
        tier = 2 if d > rpn else 1  # the busy seconds go to the tier the group crosses
        if sync in ("parameter_server", "gossip"):  # the busiest link's seconds
            n = float(c.message_bytes)
            seconds = ps_on_cluster(n, d, self.cluster, servers or d, "dedicated" if servers else "colocated", rpn) \
                if sync == "parameter_server" else gossip_on_cluster(n, d, self.cluster, topology, rpn)
            busy = tuple(float(seconds) if i == tier else 0.0 for i in range(3))
        else:
            busy = ZERO_TRIPLE
            for op, n in c.collectives(d):
                busy = add_triples(busy, self._coll(op, float(n), d, rpn, sharing))
        enc, dec = codec_seconds(c, d, self.dev)
        return (busy[0] + float(enc) + float(dec), busy[1], busy[2])

    def check_batch_norm(self, mode: str) -> None:
        """``ValueError`` naming ``training.batch_norm`` when ``sync`` is asked of a model without batch norm."""
        if mode == "sync" and not any(n.kind == "batch_norm" for n in self.graph(1).layers()):
            raise ValueError("training.batch_norm: \"sync\" needs a model with batch-norm layers; this one has none")

    @lru_cache(maxsize=None)
    def batch_norm_sync(self, channels: tuple, t: int, d: int) -> tuple:
        """Triple of one pass's synchronous batch-norm all-reduces over the ``d`` data-parallel replicas.

        Local batch norm normalizes over a device's own samples (no communication); synchronous batch norm
        over the whole minibatch (the paper's §6.1 note: BN reduces over the minibatch and is the data
        parallelism's bottleneck). Per batch-norm layer of ``C`` channels an all-reduce of ``2 C`` fp32
        values forward (sum and sum of squares) and one of ``2 C`` backward (Σ∇y and Σ∇y·x̂, Ioffe & Szegedy
        2015 §3), as :func:`.hybrid.batch_norm_sync` [D]; the next layer waits for them, so they sit on the
        pass's critical path. ``channels``: the stage's batch-norm layers; the same triple serves both passes
        (the pipeline's stage partition is made without them)."""
        if self.fc_only and t > 1:  # the hybrid's convolutions are data-parallel over d t devices
            t, d = 1, d * t
        if d == 1 or not channels:
            return ZERO_TRIPLE
        rpn, sharing = group_placement(self.cluster.domain_gpus, t, d)
        out = ZERO_TRIPLE
        for c in channels:
            out = add_triples(out, self._coll("allreduce", float(2 * c * STAT_BYTES), d, rpn, sharing))
        return out
