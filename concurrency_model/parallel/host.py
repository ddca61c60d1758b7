"""Host (CPU) overhead of an eager framework: the seconds to issue a stage's kernels.

A pass of a pipeline stage lasts at least its kernels times the host seconds per kernel
(:mod:`.compose`: pass = max(GPU seconds, host seconds)), and at least what the stream's queue makes of the two
(:func:`issue_queue_seconds`): the host issues the kernels one after another, the GPU runs each once it is issued
and the one before it has finished (CUDA stream order), so a GPU-heavy stretch (a large GEMM, a tensor-parallel
all-reduce) that the host's later kernels cannot hide, and the last kernel, add to the larger of the two totals.
That is the kernel-level dependency graph Daydream simulates (Zhu et al., "Daydream: Accurately Estimating the
Efficacy of Optimizations for DNN Training", USENIX ATC 2020: CPU launch tasks before their GPU tasks, GPU tasks in
stream order, from CUPTI traces) with one host cost per kernel; a stage carries its passes' kernels in issue order
(``queue``, :func:`issue_sequence`) for it.

CUDA graphs (``training.cuda_graph``, :func:`.runtime.cuda_graph_scopes`, :func:`graphed_rows`): a captured region's
kernels are replayed by one graph launch, so the host issues one call where it issued each kernel. Megatron-Core's
scopes (NVIDIA/Megatron-LM @ 2a75ac12 ``megatron/core/transformer/transformer_config.py`` ``cuda_graph_impl`` and
``cuda_graph_scope``; ``megatron/core/transformer/transformer_layer.py``): ``transformer_engine`` captures, per
transformer layer, a forward and a backward graph (Transformer Engine's ``make_graphed_callables``) of the chosen parts:
``attn`` (the input norm, attention and its residual add), ``mlp`` (a dense layer's pre-MLP norm, MLP and residual add),
``moe_router`` (a mixture of experts' pre-MLP norm and router), ``moe_preprocess`` (the dispatcher's preprocessing,
which the layer rows here do not list apart from the dispatch: it changes nothing), ``moe`` (the whole mixture of
experts, which Megatron-Core allows only with padded capacity buffers); the parts after a partial capture run eagerly.
``full_iteration`` (``megatron/core/full_cuda_graph.py``) captures every microbatch's forward and backward passes in one
graph: nothing a layer issues costs the host, and no layer may block the host (the recipes that use it run the sync-free
dispatch). The optimizer step stays eager. A graph's memory pool is not modelled.
"""
from __future__ import annotations

import numpy as np

from ..choices import FULL_ITERATION

# Host (CPU) seconds to issue one modelled kernel in an eager framework step: Python, the dispatcher, autograd
# and cudaLaunchKernel (5-20 us for the launch call alone, hardware.md 3D [R31]), for the modelled kernel and
# the host-only and small ops around it (views, RNG-state forks, copies) that the graph does not list. A pass
# of a stage lasts at least its kernels times this (training.compose: pass = max(GPU, host); the host runs
# ahead of the GPU within a pass, so the two overlap: no wait when the GPU is the slower). Fitted once on a
# 5 us grid (0-160 us): least mean APE over every 4th even row of vtrain_single (Megatron-DeepSpeed on 2-8
# A100, hosts of 2 x AMD EPYC 7742, full recompute; benchmarks/fit_host_overhead.py: 7.9% at 60 us), held
# out on the odd rows and every other set (benchmarks/training_accuracy.py). Refitted with the stream's queue
# (issue_queue_seconds) on 50-70 us: 60 us again. Refitted on 50-66 us (1 us steps near the least; 2026-12-06, the
# code at 7f99961): 62 us, 6.60% on the fit rows (7.05 / 6.71 / 6.69 / 7.01% at 60 / 61 / 63 / 64 us), 7.36% on every
# 4th odd row (7.42% at 60 us). Refitted with the runs' even split of the layers over the pipeline stages (59-65 us,
# 2026-12-07): 62 us again, 8.28% on the fit rows (8.65 / 8.36 / 8.38 / 8.68% at 60 / 61 / 63 / 64 us), 7.98% on
# every 4th odd row. A tensor-parallel collective (a torch.distributed call) issues no host kernel here:
# counted as one framework op, the refit is worse (docs/residuals.md, "The host cost of a tensor-parallel collective").
HOST_S_PER_KERNEL = 62e-6

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


def graphed_rows(kinds, layer_ids, scopes: tuple, fixed_capacity) -> tuple[np.ndarray, np.ndarray]:
    """Which of a model's layer rows a CUDA graph captures, and which of them starts a graph (one launch a pass), under
    ``scopes`` (:func:`.runtime.cuda_graph_scopes`; module doc). ``kinds``: each row's node kind; ``layer_ids``: its
    transformer layer (``None`` outside the blocks: embedding, final norm, output layer); ``fixed_capacity``: each row's
    padded capacity buffers (a ``moe_dispatch`` row's). Within a layer the rows up to its first residual ``add`` are
    ``attn``; a mixture of experts' rows before its ``moe_dispatch`` are ``moe_router``, from it on ``moe``; a dense
    layer's rows after ``attn`` are ``mlp``. A graph spans the captured rows of one layer that follow each other
    (``full_iteration``: all rows, one graph). ``ValueError`` for ``moe`` over dropless experts.

    >>> kinds = ["embedding", "rms_norm", "attention", "add", "rms_norm", "linear", "moe_dispatch", "linear", "add"]
    >>> ids = [None, 0, 0, 0, 0, 0, 0, 0, 0]
    >>> g, s = graphed_rows(kinds, ids, ("attn", "moe_router"), [False] * 9)
    >>> g.astype(int).tolist(), s.astype(int).tolist()
    ([0, 1, 1, 1, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0, 0, 0, 0])
    >>> graphed_rows(kinds, ids, ("full_iteration",), [False] * 9)[1].astype(int).tolist()
    [1, 0, 0, 0, 0, 0, 0, 0, 0]
    """
    n = len(kinds)
    if not scopes:
        return np.zeros(n, dtype=bool), np.zeros(n, dtype=bool)
    if scopes == (FULL_ITERATION,):
        g = np.ones(n, dtype=bool)
        return g, np.arange(n) == 0
    scope = [None] * n
    for lid in {x for x in layer_ids if x is not None}:
        idx = [i for i, x in enumerate(layer_ids) if x == lid]
        moe = any(kinds[i] == "moe_dispatch" for i in idx)
        part = "attn"
        for i in idx:
            if part != "attn" and kinds[i] == "moe_dispatch":
                part = "moe"
                if "moe" in scopes and not fixed_capacity[i]:
                    raise ValueError("training.cuda_graph: the 'moe' scope captures the whole mixture of experts, "
                                     "which Megatron-Core allows only with padded capacity buffers "
                                     "(parallel.capacity_factor); a dropless layer's token counts vary")
            scope[i] = part
            if part == "attn" and kinds[i] == "add":
                part = "moe_router" if moe else "mlp"
    g = np.array([x is not None and x in scopes for x in scope], dtype=bool)
    prev = np.r_[False, g[:-1]] & (np.array([None, *layer_ids[:-1]], dtype=object) == np.array(layer_ids, dtype=object))
    return g, g & ~prev


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
    times :func:`host_per_kernel`, plus the wait the stream's queue adds where the stage carries its kernels in order
    (``queue``: :func:`queue_wait`)."""
    h, la = host_per_kernel(dev, host), float(dev.launch_overhead)
    xf, xb = stage.get("host_extra", (0, 0))  # kernels the graph does not list (:func:`softmax_fallback_kernels`)
    q_f, q_b = queue_wait(stage, h)
    return h * (issued(stage["f"], la) + xf) + q_f, h * (issued(stage["b"], la) + issued(stage["r"], la) + xb) + q_b


def issue_queue_seconds(kernels, gpu_s, host: float, sync=None) -> float:
    """Seconds of a pass whose items the host issues in order, ``kernels[i]`` kernels at ``host`` seconds each, and
    the GPU runs in order, item ``i`` for ``gpu_s[i]`` seconds once it is issued and item ``i - 1`` has finished
    (module doc): ``F_i = max(F_{i-1}, H_i) + g_i`` with ``H_i = host x sum(kernels[:i+1])``, that is
    ``max(H_n, max_i(H_i + sum(g[i:])))``. It is never less than ``max(H_n, sum(g))`` and never more than their sum.

    ``sync[i]`` true: the host waits after issuing item ``i`` until the GPU has finished it (a device-to-host copy
    whose value the host needs, as a dropless MoE layer's token counts: :mod:`.runtime`, ``moe_sync``), so the
    items after it are issued from ``F_i`` on; the pass then lasts the sum of its segments' queues.

    >>> issue_queue_seconds([1, 1, 1], [1.0, 0.1, 0.1], 1.0)   # the GPU waits for each issue: 3 + the last 0.1
    3.1
    >>> issue_queue_seconds([1, 0, 1], [0.5, 3.0, 0.5], 1.0)   # a 3 s item after the first: 1 + 0.5 + 3 + 0.5
    5.0
    >>> issue_queue_seconds([1, 1, 1], [3.0, 0.0, 0.5], 1.0, [False, True, False])   # the host waits 2 s at item 1
    5.5
    """
    n = np.asarray(kernels, dtype=float)
    g = np.asarray(gpu_s, dtype=float)
    if n.size == 0:
        return 0.0
    ends = np.flatnonzero(np.asarray(sync, dtype=bool)) if sync is not None else np.array([], dtype=int)
    start, t0 = 0, 0.0
    for end in [*ends.tolist(), n.size - 1]:
        if end < start:
            continue
        issue = t0 + np.cumsum(n[start:end + 1]) * host
        tail = np.cumsum(g[start:end + 1][::-1])[::-1]
        done = float(np.max(issue + tail))  # the GPU is idle at t0: it finished every earlier item by then
        start, t0 = end + 1, done
    return max(t0, float(issue[-1]))


def issue_sequence(rows, extra, recompute: str, launch_s: float, waits=None, graphed=None) -> dict:
    """The items a stage's forward and backward passes issue, in order (:func:`issue_queue_seconds`), from its layer
    rows (:meth:`~concurrency_model.training.workload.Workload.layers`: ``f``, ``b`` parts, ``tp_f``, ``tp_b``,
    ``tp_again`` triples and ``again``) and their ``extra`` host-only kernels (forward, backward; per row).

    Each kernel row of a part is one item (its kernels as :func:`issued` counts them, its seconds on the GPU); a
    tensor-parallel collective is an item of no host kernel (it is not counted as one: :func:`host_seconds`) after
    its row. Forward: the rows in order. Backward, block by block from the last (a block: the rows whose names share
    all but the last dotted part, ``h.3.qkv`` .. ``h.3.fc2``, a transformer layer): a ``full`` recompute's forward of
    the block again (Megatron checkpoints each transformer layer and runs its forward just before its backward:
    microsoft/Megatron-DeepSpeed @ 2255b617 ``megatron/model/transformer.py`` ``_checkpointed_forward``, chunks of
    ``--checkpoint-num-layers`` layers, 1 by default in ``megatron/arguments.py``; only the rows whose ``full`` is
    true, :func:`~concurrency_model.parallel.recompute.full_recompute_rows`: not the embedding, final norm and output
    layer), a ``selective`` one's share of the rows that have one, then the block's rows backwards. ``waits``: per
    row, whether the host waits for the device before issuing the row's forward, and so before a full recompute's
    forward of it (an item of no kernel and no seconds flagged ``sync`` ahead of the row's items). ``graphed``: per
    row, whether a CUDA graph replays it (:func:`graphed_rows`): its kernels cost the host nothing (the graph's launch
    is an ``extra`` kernel of the row that starts the graph). Returns
    ``{"f": (kernels, seconds, sync), "b": (kernels, seconds, sync)}`` as arrays.

    >>> from concurrency_model.timing.parts import Parts
    >>> one = Parts(*(np.array([x]) for x in (2e-6, 1e-6, 0.0, 4e-6, 1.0)))   # 1 kernel of 6 us
    >>> z = (0.0, 0.0, 0.0)
    >>> rows = [{"name": "h.0.a", "f": one, "b": one.times(2), "tp_f": (1e-6, 9e-6, 0.0), "tp_b": z,
    ...          "tp_again": z, "again": 0.0}]
    >>> q = issue_sequence(rows, [(0, 0)], "full", 4e-6)
    >>> q["f"][0].tolist(), [round(float(x) * 1e6, 3) for x in q["f"][1]]
    ([1.0, 0.0], [6.0, 10.0])
    >>> q["b"][0].tolist(), [round(float(x) * 1e6, 3) for x in q["b"][1]]   # recompute, its all-reduce, backward
    ([1.0, 0.0, 2.0], [6.0, 10.0, 12.0])
    >>> issue_sequence(rows, [(0, 0)], "full", 4e-6, [True])["b"][2].tolist()   # the recompute waits first
    [True, False, False, False]
    """
    seen: dict = {}  # identical layers share their Parts and triples: their items once

    def items(parts, triple=None, more=0.0, wait=False, replayed=False):
        key = (id(parts), triple, more, wait, replayed)
        if key not in seen:
            seen[key] = (parts, _items(parts, triple, more, wait, replayed))  # the parts kept alive: their id stays
        return seen[key][1]

    def _items(parts, triple, more, wait, replayed):
        k = list(parts.kernel_counts(launch_s)) if len(parts.count) else []
        k = [0.0 if replayed else c if x <= 0 else n  # split-K: one call (:func:`issued`); a graph's: none
             for c, x, n in zip(k, parts.extra, parts.count)]
        g = list((np.maximum(parts.compute, parts.memory) + parts.extra + parts.launch) * parts.count)
        if more:
            k, g = k + [float(more)], g + [0.0]
        if triple is not None and (s := float(triple[0] + max(triple[1], triple[2]))) > 0:
            k, g = k + [0.0], g + [s]
        sync = [False] * len(k)
        if wait:
            k, g, sync = [0.0] + k, [0.0] + g, [True] + sync
        return k, g, sync

    fwd = ([], [], [])
    blocks: list = []
    for i, (r, (xf, xb)) in enumerate(zip(rows, extra)):
        wf = waits is not None and bool(waits[i])
        gr = graphed is not None and bool(graphed[i])
        f = items(r["f"], r["tp_f"], xf, wf, gr)
        for a, x in zip(fwd, f):
            a.extend(x)
        again = (items(r["f"], r["tp_f"], xf, wf, gr) if recompute == "full" and r.get("full", True) else
                 items(r["f"].times(r["again"]), r["tp_again"], 0.0, False, gr) if recompute == "selective" and
                 r["again"] > 0 else ([], [], []))
        b = items(r["b"], r["tp_b"], xb - (xf if recompute == "full" else 0.0), False, gr)
        block = r["name"].rsplit(".", 1)[0]
        if not blocks or blocks[-1][0] != block:
            blocks.append((block, []))
        blocks[-1][1].append((again, tuple(x[::-1] for x in b)))
    bwd = ([], [], [])
    for _, members in reversed(blocks):
        for part in [a for a, _ in members] + [b for _, b in reversed(members)]:
            for a, x in zip(bwd, part):
                a.extend(x)
    return {p: (np.array(k, dtype=float), np.array(g, dtype=float), np.array(s, dtype=bool))
            for p, (k, g, s) in (("f", fwd), ("b", bwd))}


def queue_wait(stage: dict, host: float) -> tuple[float, float]:
    """What the stream's queue adds to the larger of a pass's GPU and host seconds (:func:`issue_queue_seconds` less
    ``max(H_n, sum(g))``), forward and backward, for a stage that carries ``queue`` (:func:`issue_sequence`); 0, 0
    for one that does not, or at no host cost.

    >>> no = np.zeros(2, dtype=bool)
    >>> q = {"f": (np.array([1.0, 1.0]), np.array([0.5, 0.5]), no), "b": (np.array([1.0]), np.array([3.0]), no[:1])}
    >>> queue_wait({"queue": q}, 1.0)   # 2 issues of 1 s, the last item's 0.5 s after; one issue, then 3 s
    (0.5, 1.0)
    """
    q = stage.get("queue")
    if q is None or host <= 0:
        return 0.0, 0.0
    out = []
    for p in ("f", "b"):
        k, g, sync = q[p]
        out.append(issue_queue_seconds(k, g, host, sync) - max(float(k.sum()) * host, float(g.sum())))
    return out[0], out[1]
