"""Transformer inference with a KV cache: prefill and decode latency, throughput and memory per device,
under tensor and pipeline parallelism (``concurrency-model infer --scenario FILE``).

One request batch of ``batch`` sequences: a *prefill* pass over the ``prompt_len`` prompt tokens, then
``decode_len`` *decode* steps, each feeding one new token per sequence. Step ``i`` (1..decode_len)
attends over ``prompt_len + i`` positions, so the KV cache holds ``prompt_len + decode_len`` positions at
the end. The FasterTransformer numbers in ``data/`` follow the same count (total = prefill + 10 x the
per-step latency for 10 generated tokens).

* **Prefill**: one forward pass of the model's graph built for ``seq = prompt_len``
  (:func:`~concurrency_model.timing.graph.layer_parts`: each layer's kernels on the device, with one
  device's share under Megatron tensor parallelism, Shoeybi et al. 2019 §3). Dropout is the identity at
  inference (eval mode) and costs nothing; the output layer computes the logits of the last prompt
  position only, the only ones sampling needs (Pope et al. 2022, "Efficiently Scaling Transformer
  Inference", §2: prefill processes the prompt in parallel, generation one token at a time).
* **Decode step**: the graph built for ``seq = 1`` (every GEMM on ``batch`` rows: GEMV-like and bound by
  reading the weights, which the GEMM model's memory term captures; Pope et al. §2, Chen 2022
  "Transformer Inference Arithmetic": a step takes at least ``2 P / memory bandwidth`` in 16-bit; a mixture
  of experts reads the experts the batch reaches, :func:`~concurrency_model.timing.graph.expert_gemms`), with
  each attention core replaced by one query against the cache of ``L`` positions: the work of
  :func:`~concurrency_model.ops.attention.attention` with ``seq_q = 1, seq_kv = L`` and traffic
  ``batch * bytes * head_dim * (2 heads + 2 kv_heads (L + 1))`` (Q read, O written, K and V of ``L``
  positions read, the new K and V written). It runs on the non-tensor units (a GEMV per head, as
  FasterTransformer's masked multi-head attention kernel), as a roofline ``max(flop / (F e_c),
  bytes / (B e_m)) + launch`` (Williams et al. 2009): the maximum of two affine functions of ``L``.
  The mean over the decode steps is that sum over ``L = prompt_len + 1 .. prompt_len + decode_len``,
  in closed form (:func:`sum_max_affine`), not sampled.
* **Tensor parallelism** ``t`` (communication on the critical path, Shoeybi et al. §3): an allreduce of
  each row-split GEMM's output (two per block) and of the vocabulary-parallel embedding's output per
  forward pass, and an allgather of the last position's logits, each priced by
  :func:`~concurrency_model.comm.on_cluster.collective_on_cluster` (``auto``) with the tensor group
  inside a node when it fits. Decode messages are small: latency-bound.
* **Pipeline parallelism** ``p``: one batch, no microbatches, so the stages run one after another: the
  latency is the sum over all layers plus ``p - 1`` point-to-point sends of the boundary activation
  (``batch x seq x hidden`` values; Narayanan et al. 2021 §3.2 for the send). Pipelining divides weights
  and KV cache over devices; it does not shorten one batch's latency, and without microbatches (or
  several batches in flight) it does not raise the throughput either; continuous batching keeps one group of
  slots on each stage (:mod:`concurrency_model.serving.continuous_batching`).
* **Replicas** (``parallel.data`` = d): ``batch / d`` sequences each, serving their own requests (tokens/s and
  GPUs times d).
* **Expert parallelism** for a mixture of experts (``parallel.data`` = d replicas sharing their experts in groups
  of ``parallel.expert`` = e, e dividing d and the experts, as in training, :mod:`concurrency_model.parallel.
  expert`; DeepSpeed-MoE's inference system, Rajbhandari et al. 2022, as recalled, serves the same way: the dense
  layers replicated, the experts split, all-to-all between them): ``batch / d`` sequences a replica; a device holds
  the dense weights and ``1/e`` of the experts, runs its replica's rows through the experts it holds that the
  group's tokens reach (:func:`~concurrency_model.timing.graph.expert_gemms`, balanced routing [D], or the busiest
  device's rows with ``parallel.expert_imbalance``, :mod:`concurrency_model.ops.routing`), and sends and
  returns the routed rows in two all-to-alls a layer (:meth:`~concurrency_model.serving.overheads.Comm.expert`). The
  replicas of a group step together, so a static batch decodes until the longest of all ``batch`` requests ends.
  With pipeline stages each replica's stage ``k`` exchanges with the group's other stages ``k`` (replicas of
  ``t x p`` devices in order, so a group crosses nodes once its replicas fill one) [D].
* **KV cache** (Pope et al. §2; Chen 2022: ``2 * 2 * n_layers * n_heads * d_head`` bytes per token in
  16-bit): ``2 * layers * batch * (prompt_len + decode_len) * kv_heads * head_dim * bytes`` in all;
  per device ``ceil(layers / p)`` layers and ``ceil(kv_heads / t)`` heads (grouped-query KV heads are
  replicated when ``t`` exceeds them).
* **Memory per device**: weights ``params * bytes / (t p)`` (even split assumed) + KV cache +
  activation workspace (the largest inputs + output of one operator of the prefill pass, with the
  ``s x s`` scores and probabilities of unfused attention). Over the device's capacity: ``ValueError``
  with the reason (:func:`~concurrency_model.parallel.memory.memory_per_device`).
* ``tokens_per_s = batch * decode_len / (prefill_s + decode_len * decode_s_per_token)``: generated tokens
  per second of the whole request (time to first token = ``prefill_s``).
* **Weight-only quantization** (``weight_dtype`` = ``int8``, ``fp8`` or ``int4``; default: ``dtype``): the
  weights of the transformer blocks' fully connected layers are stored at 1 or 0.5 bytes and dequantized
  inside the GEMM's main loop, the math and the activations, embeddings, output layer and KV cache staying in
  ``dtype`` (W8A16 / W4A16: FasterTransformer's weight-only int8 kernels; GPTQ, Frantar et al. 2023, and
  AWQ, Lin et al. 2024, quantize the linear layers of the blocks and keep the embeddings and the output layer
  in 16 bits, as recalled). Those GEMMs read ``k n`` weights at the narrower size (:mod:`.timing.gemm`), so a
  memory-bound decode step shrinks with the weight bytes while a compute-bound prefill hardly moves; the
  weights' memory is counted at the same sizes. Per-channel or per-group scales (a 16-bit value per output
  channel, or per group of 128 weights: 1.6% of int4's bytes) and the dequantization arithmetic are left out [D].
* **A quantized KV cache** (``kv_dtype``, default ``dtype``; :func:`~concurrency_model.serving.overheads.served`): for memory
  and the attention that reads it every step; queries, outputs and math in ``dtype`` (scales left out [D]).
* **Pruned weights** (``weight_sparsity``; not with ``weight_dtype``), the same layers, counted in memory as
  stored: ``"2:4"`` (on devices with a 2:4 rate, ``sparse_flops``) runs their forward GEMMs on the sparse tensor
  cores (:mod:`.timing.sparse`: twice the dense math rate, the weights read at ``(bytes + 2 bits) / 2`` a
  weight); a fraction of zeros stores them in CSR (4-byte indices) and runs CSR products that stream the
  weights once per token of the pass (DeepBench's cuSPARSE, :mod:`.timing.sparse`): a batch-1 decode step
  gains at high sparsity, a prefill loses (kernels that tile B's columns and reuse A, e.g. Sputnik, are not
  modelled).
* **Continuous batching** (``batching`` = ``"continuous"``): ``batch`` slots in steady state, each iteration one
  token per slot and the new prompts' share in the same pass (:mod:`concurrency_model.serving.continuous_batching`); under a load
  (``load_rps``) the first token also waits for a free slot (:mod:`concurrency_model.serving.queueing`: Erlang C with the
  Allen-Cunneen correction for the spread of the output lengths).
* **Unequal output lengths** (``output_lengths`` = ``uniform`` or ``geometric``, mean ``decode_len``;
  :mod:`concurrency_model.serving.output_lengths`): a static batch decodes until its longest request ends (the expected maximum
  of ``batch`` lengths) and holds the cache of the longest possible one, while its tokens are ``batch`` x the
  mean; continuous batching refills the slots and follows the mean.
* **A cached prefix** (``prefix_len`` = S, default 0): the first S tokens of every prompt are the same (a system
  prompt) and their K and V stay in each replica's cache, in blocks the sequences share (vLLM's automatic prefix
  caching on PagedAttention blocks, Kwon et al. 2023; SGLang's RadixAttention, Zheng et al. 2024, as recalled;
  every request a hit, the steady state of one shared prompt [D]). A prompt pass then runs its layers on the
  ``P - S`` new tokens, whose attention reads the keys of all P positions (:func:`~concurrency_model.serving.kernels.
  prompt_attention`); the KV cache holds ``batch (P + O - S) + S`` positions a replica; decode steps read every
  sequence's whole context as before (PagedAttention reads shared blocks per sequence). ``S < P``: the last
  prompt position always runs, for the first token's logits.
* **Unequal prompt lengths** (``prompt_lengths`` = ``uniform`` or ``geometric``: the law of a prompt's tokens after
  the cached prefix, mean ``prompt_len - prefix_len``, :mod:`concurrency_model.serving.output_lengths`): a static batch pads its
  prompts to the longest of them (the expected maximum: ``padded_prompt_len``; its passes and decode contexts at that
  length) and allocates the cache of the longest possible one; continuous slots follow the mean prompt, the prompts'
  attention scaled by their spread (:func:`~concurrency_model.serving.output_lengths.spread_factor`) [D].
* **Speculative decoding** (``speculative`` = ``{"draft", "tokens", "acceptance"}``): a draft model's steps and one
  verification step of the target per iteration, over the tokens an iteration yields
  (:mod:`concurrency_model.serving.speculative`, Leviathan et al. 2023); the decode breakdown is then per generated token.
  With continuous batching the iteration verifies every slot's drafts beside the prompt chunk
  (:class:`concurrency_model.serving.continuous_batching.SpecIteration`; one pipeline stage).
* **Host** (``host_overhead_s``, seconds the host takes to issue one kernel; default 0, a compiled runtime
  such as FasterTransformer, TensorRT or CUDA graphs): a pass lasts at least its kernels times that, as a
  training pass does (:mod:`concurrency_model.parallel.host`; an eager framework's is about 62 us, the
  value fitted there on Megatron-DeepSpeed); ``host_wait_s`` in the breakdown is the excess over the GPU.
  A small model's decode step at a small batch is then bound by the host, not by reading the weights.
"""
from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache

from ..hardware.clusters import load_cluster
from ..models.transformer import check_tensor_split
from ..ops.routing import check_applies
from ..parallel.memory import memory_per_device
from ..scenario import (INFERENCE, check_lengths_alone, check_speculative, inference_section, load_scenario,
                        read_scenario)
from ..uncertainty import bands
from ..units import dtype_bytes
from .continuous_batching import (at_load, budget_slots, check_continuous, chunked, iteration, prompt_tokens,
                                  speculative_maker, workspace)
from .economics import busy_seconds, per_million_tokens
from .kernels import decode_step, prefill_pass, sum_max_affine
from .output_lengths import lengths_summary, prompts_summary, spread_factor
from .overheads import (Comm, cache_bytes, check_layout, check_weight_sparsity, expert_count, fits_with,
                        is_causal_decoder, kv_cache_bytes, model_graph, model_shape, served, weights_bytes,
                        workspace_bytes)
from .queueing import erlang_c, mean_wait, wait_quantile
from .speculative import Speculation


@dataclass
class Inference:
    """The result of :func:`infer`: seconds, tokens per second and bytes (SI units)."""

    prefill_s: float
    decode_s_per_token: float
    tokens_per_s: float
    kv_cache_bytes: float
    memory_bytes_per_device: float
    total_s: float
    kv_cache_bytes_total: float
    breakdown: dict
    memory: dict
    parallel: dict
    inference: dict
    shape: dict = field(default_factory=dict)
    bands: dict = field(default_factory=dict)  # prefill_p10_s, ..., total_p90_s: 80% bands (uncertainty.band)
    economics: dict = field(default_factory=dict)  # GPU-hours, energy, cost per million tokens (economics)
    kinds_of: object = field(default=None, repr=False)  # () -> a decode step (or iteration) by kind of layer

    def decode_kinds(self) -> list[dict]:
        """A decode step (continuous batching: an iteration) by kind of layer, largest first: ``kind``, ``layers``,
        ``seconds``, ``share`` and ``bound`` (compute, memory or launch), the cache's attention and the
        communication as rows of their own (:func:`~concurrency_model.serving.kernels.pass_kinds`); ``ValueError`` with
        speculative decoding (a token is two models' steps)."""
        if self.kinds_of is None:
            raise ValueError("inference.speculative: a decode step by kind of layer is not given with speculative "
                             "decoding")
        return self.kinds_of()

    def to_dict(self) -> dict:
        return {"prefill_s": self.prefill_s, "decode_s_per_token": self.decode_s_per_token,
                "tokens_per_s": self.tokens_per_s, "kv_cache_bytes": self.kv_cache_bytes,
                "memory_bytes_per_device": self.memory_bytes_per_device, "time_to_first_token_s": self.prefill_s,
                "total_s": self.total_s, "kv_cache_bytes_total": self.kv_cache_bytes_total,
                "breakdown": self.breakdown, "memory": {k: v for k, v in self.memory.items() if k != "reason"},
                "gpus": self.parallel["tensor"] * self.parallel["pipeline"] * self.parallel.get("data", 1),
                "parallel": self.parallel,
                "inference": self.inference, "model_shape": self.shape,
                **self.bands, **self.economics}

    def __repr__(self) -> str:
        p = self.parallel
        what = "continuous, slots" if self.inference.get("batching") == "continuous" else "batch"
        return (f"Inference({what} {self.inference['batch']}: first token {self.prefill_s * 1e3:,.4g} ms, "
                f"{self.decode_s_per_token * 1e3:,.4g} ms per token, {self.tokens_per_s:,.4g} tokens/s; tensor "
                f"{p['tensor']} x pipeline {p['pipeline']}; {self.memory_bytes_per_device / 1e9:,.3g} GB per device)")


def infer(scenario, memory_only: bool = False) -> Inference | dict:
    """Prefill, decode, throughput and memory of a scenario with an ``inference`` object (a dict or a
    JSON/TOML path): ``model``, ``cluster``, ``parallel.tensor`` / ``parallel.pipeline``. ``memory_only``: the
    result's ``memory`` alone (:func:`predict`), as a search over batches reads it.

    >>> sc = {"model": "gpt2", "cluster": "dgx-a100",
    ...       "inference": {"batch": 1, "prompt_len": 128, "decode_len": 32, "dtype": "fp16"}}
    >>> r = infer(sc)
    >>> r.kv_cache_bytes == 2 * 12 * 1 * (128 + 32) * 12 * 64 * 2, 0 < r.prefill_s < 0.01
    (True, True)
    >>> infer(sc, memory_only=True) == r.memory
    True
    """
    raw = read_scenario(scenario)
    inf = inference_section(raw)
    try:
        sc = load_scenario({**raw, "training": raw.get("training") or {"dtype": inf.dtype}})
    except ValueError as e:  # the device checked in the inference dtype: name that field
        if raw.get("training") or not str(e).startswith("training.dtype:"):
            raise
        raise ValueError("inference.dtype:" + str(e).split(":", 1)[1]) from None
    par = sc.parallel
    if not is_causal_decoder(sc.model):
        if inf.prefix_len:
            raise ValueError("inference.prefix_len: a cached prefix needs a causal decoder's KV cache")
        from .forward_pass import infer_forward
        r = infer_forward(sc, raw["inference"], inf)
        return r.memory if memory_only else r
    if par.context != 1:
        raise ValueError(f"parallel.context: inference is modelled with tensor, pipeline and expert parallelism only, "
                         f"got {par.context}")
    return predict(sc.model, sc.cluster, inf.batch, inf.prompt_len, inf.decode_len, inf.dtype,
                   par.tensor, par.pipeline, inf.weight_dtype, inf.host_overhead_s, inf.weight_sparsity,
                   inf.speculative, inf.batching, inf.price_per_gpu_hour, inf.output_lengths,
                   inf.load_rps, par.data, par.expert, inf.prefix_len, inf.prompt_lengths,
                   par.expert_imbalance, inf.max_batched_tokens, inf.kv_dtype, memory_only=memory_only)


def predict(model, cluster, batch: int, prompt_len: int, decode_len: int, dtype: str = "fp16", tensor: int = 1,
            pipeline: int = 1, weight_dtype: str | None = None, host_overhead_s: float = 0.0,
            weight_sparsity: str | None = None, speculative: dict | None = None, batching: str = "static",
            price_per_gpu_hour: float | None = None, output_lengths: str = "fixed",
            load_rps: float | None = None, data: int = 1, expert: int = 1, prefix_len: int = 0,
            prompt_lengths: str = "fixed", expert_imbalance=1.0, max_batched_tokens: int | None = None,
            kv_dtype: str | None = None, memory_only: bool = False) -> Inference | dict:
    """:func:`infer` for a model spec and a cluster (preset name, file, dict or :class:`~concurrency_model.hardware.clusters.
    Cluster`) given directly. ``data`` > 1: replicas that split the ``batch`` sequences, serving their own requests,
    or with ``expert`` > 1 a mixture of experts whose experts are split over groups of ``expert`` replicas
    (:func:`~concurrency_model.serving.overheads.check_layout`). ``prefix_len``: the first tokens of every prompt, the same for
    all requests and kept in each replica's cache; ``prompt_lengths``: the law of the rest of a prompt, mean
    ``prompt_len - prefix_len``; ``expert_imbalance``: the routing of the expert group (:mod:`concurrency_model.
    routing`); ``max_batched_tokens``: a token budget an iteration of continuous batching (prompts in chunks,
    :class:`~concurrency_model.serving.continuous_batching.Chunked`); ``kv_dtype``: the KV cache's storage (module docstring).
    ``memory_only``: the memory per device alone (the result's ``memory``,
    :func:`~concurrency_model.parallel.memory.memory_per_device`), the same numbers without pricing a pass: what a
    search over batches (:mod:`concurrency_model.serving.capacity`) reads of most of the batches it tries.

    >>> r = predict("gpt2", "dgx-a100", 8, 256, 64, "fp16", tensor=2)
    >>> r.parallel, r.decode_s_per_token < r.prefill_s
    ({'tensor': 2, 'pipeline': 1}, True)
    >>> predict("gpt2", "dgx-a100", 8, 256, 64, "fp16", tensor=2, memory_only=True) == r.memory
    True
    """
    cl = load_cluster(cluster)
    dev = cl.device
    vb = dtype_bytes(dtype)
    one, shape, dist, prompts = served(model, dev, dtype, prompt_len, decode_len, output_lengths, prompt_lengths,
                                       prefix_len, kv_dtype)
    t, p = tensor, pipeline
    if p > shape["layers"]:
        raise ValueError(f"parallel.pipeline: {p} stages exceed the {shape['layers']} transformer blocks")
    check_lengths_alone(output_lengths, prompt_lengths, speculative)  # also made on load
    mean = dist.mean
    o = max(1, round(mean))  # a continuous slot's contexts and prompt share follow the mean length
    weight_sparsity = check_weight_sparsity(dev, dtype, weight_sparsity, weight_dtype)
    d, e = data, expert
    check_layout(one, batch, d, e, p, speculative)
    check_applies(expert_imbalance, expert_count(one))
    every, batch = batch, batch // d  # all replicas' sequences; one replica's
    if batching == "continuous":
        check_continuous(batch, p, speculative)
    S, asked = prefix_len, prompt_len  # S: held once a replica
    # the prompt a pass runs: a static batch pads its prompts to the longest of them and allocates for the longest
    # possible one; continuous slots follow the mean, the prompts' attention scaled to their spread (module doc)
    longest_prompt = S + prompts.longest if batching == "static" else None
    prompt_len = S + max(1, round(prompts.expected_max(batch) if batching == "static" else prompts.mean))
    # the layers' widths and parameters do not depend on the batch: the checks and the weights read the graph of one
    # prompt (which a continuous iteration prices anyway); the batch's own graphs are built where a pass is priced
    g_one = model_graph(model, 1, prompt_len, vb)
    check_tensor_split(g_one.layers(), t)
    comm = Comm(cl, t, p, e, expert_imbalance)

    # memory first: a configuration that does not fit is refused, not estimated
    spec = Speculation(check_speculative(speculative), shape, model_shape, vb, batch, prompt_len, decode_len, t, p) \
        if speculative is not None else None
    context = spec.context if spec else (longest_prompt + dist.longest if batching == "static"
                                         else prompt_len + decode_len)
    if spec and context > shape["context"]:
        raise ValueError(f"inference.speculative.tokens: prompt_len + decode_len + tokens = {context} exceeds the "
                         f"model's context of {shape['context']} positions")
    kv, kv_all = cache_bytes(shape, batch, context, t, p, S), d * cache_bytes(shape, batch, context, shared=S)
    weights, quantized = weights_bytes(g_one, vb, weight_dtype, weight_sparsity, e)
    extra = {"kv_cache": kv}
    if spec:  # the draft's weights and KV cache, split as the target's
        weights += spec.weights_bytes
        extra["draft_kv_cache"] = cache_bytes(spec.shape, batch, context, t, p)
    weights /= t * p
    graph_of = lru_cache(maxsize=None)(lambda b, s: model_graph(model, b, s, vb))  # built once per (batch, seq)
    q = spec.gamma + 1 if spec else 1  # positions a slot runs an iteration (slots q rows, the same prompts' share)
    # (a node's shape is per sample: the workspace of any batch is read off the graph of one, times the batch)
    work = workspace(graph_of, t, batch // p * q, prompt_len, o * q / (spec.tokens if spec else 1), vb, S) \
        if batching == "continuous" else workspace_bytes(g_one, t, batch, vb)
    mem = memory_per_device(weights, work, dev, extra=extra)
    if not mem["fits"]:
        raise ValueError(mem["reason"] + fits_with(mem, g_one, vb, weight_dtype, weight_sparsity, e, t * p, batch,
                                                   spec.weights_bytes if spec else 0.0, shape["kv_bytes"]))
    if memory_only:
        return mem

    layout = {"tensor": t, "pipeline": p, **({"data": d} if d > 1 else {}), **({"expert": e} if e > 1 else {})}
    span = t * p * e  # the devices a pass's collectives reach
    summary = {"batch": every, "prompt_len": asked, "decode_len": decode_len, "dtype": dtype,
               "weight_dtype": weight_dtype or dtype, "kv_dtype": kv_dtype or dtype, "weight_sparsity": weight_sparsity,
               "host_overhead_s": host_overhead_s, "batching": batching, "prefix_len": S,
               **prompts_summary(prompts, S, prompt_len if batching == "static" else None)}
    if batching == "continuous":
        spread = spread_factor(prompts, S)

        def make(n):  # n slots in p groups, one a stage: a group's iteration passes every stage in turn
            def build(chunk=None):
                return iteration(graph_of, shape, dev, dtype, t, n // p, prompt_len, o,
                                 comm, host_overhead_s, quantized, weight_sparsity, S, spread, chunk=chunk)
            return build() if budget is None else chunked(build, n // p, prompt_len - S, o, budget)
        budget = max_batched_tokens
        # a token budget keeps at most so many slots decoding (a group's iteration: its own budget)
        slots = batch if budget is None else p * budget_slots(budget, batch // p, prompt_len - S, o)
        plain = make
        if spec:  # draft steps and a verification of tokens + 1 positions an iteration (one stage)
            make = speculative_maker(spec, graph_of, shape, dev, dtype, t, prompt_len, o, comm, host_overhead_s,
                                     quantized, weight_sparsity, spread)
        why = "" if slots == batch else \
            f"; inference.max_batched_tokens = {budget:,} keeps at most {slots} of the {batch} slots decoding"
        n, it, active = (slots, make(slots), slots) if load_rps is None else \
            at_load(make, load_rps, mean, slots, d, step=p, why=why)
        step_s = it.seconds
        # under a load, a request first waits for one of its replica's ``batch`` slots (concurrency_model.serving.queueing)
        queue = {} if load_rps is None else {"queue_wait_s": mean_wait(slots, active, mean * step_s, dist.cv2),
                                             "queue_wait_p99_s": wait_quantile(slots, active, mean * step_s, dist.cv2,
                                                                               0.99),
                                             "wait_probability": erlang_c(slots, active)}
        first = it.first_token_s + queue.get("queue_wait_s", 0.0)
        n, active = n * d, active * d  # every replica's slots (each carries 1/d of the load)
        loaded = {} if load_rps is None else {"load_rps": load_rps, "slots_in_use": active, "slots_run": n, **queue}
        total_s = first + (mean - 1) * step_s  # one request: its first token, then one an iteration

        def per_iteration(flops, mem_bw, launch, intra_bw, inter_bw):
            net = intra_bw if span <= cl.gpus_per_node else inter_bw
            s = it.scaled(flops, mem_bw, launch, net)
            f = it.first_token_scaled(flops, mem_bw, launch, net) + queue.get("queue_wait_s", 0.0)
            return f, s, f + (mean - 1) * s
        return Inference(first, step_s, active / step_s, kv, float(mem["total_bytes"]), total_s, kv_all,
                         {f"iteration_{k}": v for k, v in it.breakdown.items()}, mem, layout,
                         {**summary, "speculative": it.summary(spec, plain(n // d)) if spec else None,
                          "requests_per_s": active / (mean * step_s), **lengths_summary(dist), **loaded,
                          "prompt_tokens_per_iteration": d * prompt_tokens(n // d, prompt_len - S,
                                                                           o / (spec.tokens if spec else 1)),
                          **({} if spec else {"longest_iteration_s": it.longest_s}),
                          **({} if budget is None else {"max_batched_tokens": budget, "slots_busy_at_most": slots * d,
                                                        **it.summary()})},
                         shape, _bands(per_iteration),
                         per_million_tokens(active / step_s, t * p * d,
                                            min(1.0, active / d) * busy_seconds(it.breakdown) / step_s,
                                            float(dev.board_power_w), price_per_gpu_hour),
                         None if spec else it.kinds)

    prompt = prefill_pass(graph_of(batch, prompt_len - S), shape["hidden"], dev, dtype, t, batch, comm, prompt_len,
                          host_overhead_s, quantized, weight_sparsity, S, graph_of(batch, prompt_len))
    pre = dict(prompt.breakdown)
    # a static batch decodes until its longest request ends (and holds the longest possible one's cache, above);
    # an expert group's replicas step together (their all-to-alls), so until the longest of all of them ends
    steps = dist.expected_max(every if e > 1 else batch)
    last = prompt_len + max(1, round(steps))  # the context of the batch's last step
    step = decode_step(graph_of(batch, 1), shape, dev, dtype, t, batch, comm, prompt_len + 1, last,
                       host_overhead_s, quantized, weight_sparsity)
    dec = step.breakdown
    if spec:
        draft_prompt = spec.prefill(dev, dtype, t, comm, host_overhead_s)
        pre["draft_s"] = sum(draft_prompt.breakdown.values())
        draft, verify = spec.steps(model, shape, dev, dtype, t, comm, prompt_len + 1, last,
                                   host_overhead_s, quantized, weight_sparsity)
        dec = {k: spec.per_token(draft.breakdown[k], verify.breakdown[k]) for k in dec}
    prefill_s, step_s = sum(pre.values()), sum(dec.values())
    total_s = prefill_s + steps * step_s
    breakdown = {**{f"prefill_{k}": v for k, v in pre.items()}, **{f"decode_{k}": v for k, v in dec.items()}}

    def latencies(flops, mem_bw, launch, intra_bw, inter_bw):
        """Prefill, decode step and total seconds on arrays of hardware scales (:mod:`concurrency_model.
        uncertainty`); communication scaled as a whole by its tier's bandwidth (its latency too: slightly wide)."""
        net = intra_bw if span <= cl.gpus_per_node else inter_bw
        pre_s = prompt.scaled(flops, mem_bw, launch, net)
        dec_s = step.scaled(flops, mem_bw, launch, net)
        if spec:
            pre_s = pre_s + draft_prompt.scaled(flops, mem_bw, launch, net)
            dec_s = spec.per_token(draft.scaled(flops, mem_bw, launch, net), verify.scaled(flops, mem_bw, launch, net))
        return pre_s, dec_s, pre_s + steps * dec_s

    return Inference(prefill_s, step_s, every * mean / total_s, kv, float(mem["total_bytes"]), total_s,
                     kv_all, breakdown, mem, layout,
                     {**summary, "speculative": spec.summary(draft.seconds, verify.seconds, step.seconds) if spec
                      else None, **lengths_summary(dist, steps)},
                     shape, _bands(latencies),
                     per_million_tokens(every * mean / total_s, t * p * d,
                                        (busy_seconds(pre) + steps * busy_seconds(dec)) / total_s,
                                        float(dev.board_power_w), price_per_gpu_hour),
                     None if spec else step.kinds)


BAND_KEYS = (("prefill_p10_s", "prefill_p90_s"), ("decode_s_per_token_p10", "decode_s_per_token_p90"),
             ("total_p10_s", "total_p90_s"))  # Inference.bands, in the order of the latencies


class Bands(Mapping):
    """The 80% bands (:func:`concurrency_model.uncertainty.bands`) of ``latencies(flops, mem_bw, launch, intra_bw,
    inter_bw) -> (first token, per token, total)`` seconds by their keys (:data:`BAND_KEYS`), computed when first
    read: a search over batches or slots reads only the memory and the mean times of most of the results it makes,
    and the bands' draws are the same numbers whenever they are computed (one seeded draw a process). Pickled as
    a plain dict.

    >>> import pickle
    >>> b = Bands(lambda flops, mem_bw, launch, intra_bw, inter_bw: (1.0 / flops, 2.0 / flops, 3.0 / flops))
    >>> len(b), b["decode_s_per_token_p10"] < 2.0 < b["decode_s_per_token_p90"], pickle.loads(pickle.dumps(b)) == b
    (6, True, True)
    """

    def __init__(self, latencies):
        self._latencies, self._values = latencies, None

    def _get(self) -> dict:
        if self._values is None:
            self._values = {k: v for ks, lohi in zip(BAND_KEYS, bands(self._latencies)) for k, v in zip(ks, lohi)}
            self._latencies = None
        return self._values

    def __getitem__(self, key):
        return self._get()[key]

    def __iter__(self):
        return iter(self._get())

    def __len__(self) -> int:
        return len(self._get())

    def __repr__(self) -> str:
        return repr(self._get())

    def __reduce__(self):
        return dict, (self._get(),)


def _bands(latencies) -> Bands:
    """:class:`Bands` of ``latencies``."""
    return Bands(latencies)


__all__ = ["infer", "predict", "Bands", "BAND_KEYS",
           "kv_cache_bytes", "sum_max_affine", "model_shape", "served", "inference_section",
           "Inference", "INFERENCE"]
