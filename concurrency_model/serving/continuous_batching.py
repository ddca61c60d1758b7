"""Continuous batching of a causal decoder in steady state (``inference.batching = "continuous"``).

Static batching (:mod:`concurrency_model.serving.decoder`) serves a batch of requests from prefill to their last
token, then the next batch. Continuous batching schedules per iteration (Orca, Yu et al., OSDI 2022:
"iteration-level scheduling"): a request that finishes leaves its slot and a waiting one takes it at the next
iteration, whose prompt is processed in the same pass as the other slots' decode tokens (Orca's selective
batching; Sarathi-Serve, Agrawal et al., OSDI 2024, splits prompts into chunks so that each iteration carries
a steady share). The steady state this module prices [D], for ``slots`` sequences decoding, prompts of
``prompt_len`` = P tokens and ``decode_len`` = O generated tokens a request:

* **An iteration** adds one token to each of the ``slots`` sequences. A sequence lives O iterations, so
  ``slots / O`` requests finish and as many start per iteration, and their prompts add
  ``C = slots P / O`` prompt tokens (chunked: the same share every iteration). The linear layers run once on
  ``slots + C`` token rows (their weights read once for both kinds of token: the fusion that makes a mixed
  iteration cheaper than a decode step plus a prefill); the output layer on the ``slots`` rows that sample
  a token. Attention: each decoding slot's query against its cache, at contexts spread evenly over
  ``P + 1 .. P + O`` (:func:`~concurrency_model.serving.kernels.kv_attention`, the mean in closed form), plus
  ``slots / O`` prompts' causal attention (the prompt pass's attention cores, at batch 1). Tensor-parallel
  collectives on ``slots + C`` rows; the host issues every kernel (``host_overhead_s``).
* **Time per output token** (TPOT) = the iteration; **tokens/s** = ``slots / iteration``;
  **requests/s** = ``slots / (O iteration)``: the capacity at which the slots stay full.
* **Time to first token**: a new request waits half an iteration on average for the next one to start; that
  iteration carries its whole prompt (vLLM's default, Kwon et al. 2023: a waiting prompt is scheduled whole)
  and so lasts the mean iteration plus the part of the prompt beyond an iteration's share: ``1.5``
  iterations ``+ max(0, 1 - C / P)`` of a batch-1 prompt pass [D]. Queueing for a free slot under a load
  above the capacity is not modelled.
* **Under a load** (``load_rps`` requests a second, below the capacity): Little's law (Little 1961) gives the
  slots in use, ``n = load x O x iteration(n)`` (a request holds its slot for its O iterations); the engine
  runs the fewest whole slots ``n`` that carry the load, with iterations of ``n`` slots, and its tokens/s are
  ``load x O``. A load at or above the capacity of all the slots is refused: its queue grows without bound.
* **KV cache**: every slot at ``P + O`` positions (what a planner must hold at the peak; paged allocation,
  Kwon et al. 2023, holds ``P + O / 2`` on average). **Workspace**: the larger of an iteration's operator on
  ``slots + C`` rows and one prompt's pass (its attention scores when unfused), not a whole batch's prompts.

A cached prefix of S tokens (``prefix_len``, :mod:`concurrency_model.serving.decoder`) leaves ``P - S`` new tokens a
prompt: ``C = slots (P - S) / O`` and the prompts' attention is of their ``P - S`` queries against P keys; a slot
holds ``P + O - S`` positions of its own and the replica the shared S once. Equal prompt lengths; unequal output
lengths (:mod:`concurrency_model.serving.output_lengths`) enter through their mean, O above.

**A token budget** (``max_batched_tokens`` = B; vLLM's ``max_num_batched_tokens``, Sarathi-Serve's chunked prefills,
Agrawal et al. 2024) [D]: an iteration carries at most B tokens, the decode tokens first, so that at most ``g`` slots
decode at once, the most with ``g + g P / O < B`` (their prompts' steady share must leave room); the rest of an
iteration, the prefill lane of ``L = B - g`` tokens, runs the waiting prompts first come, first served, ``L`` tokens
of one at a time. The mean iteration (time per output token, tokens/s) is the steady one above; a prompt's first
token comes after half a mean iteration, its wait for the lane (M/D/1: prompts arrive at random, ``g / O`` an
iteration, each holding the lane ``P / L`` iterations, utilisation ``rho = C / L``: ``rho (P / L) / (2 (1 - rho))``
iterations) and ``ceil(P / L)`` iterations, each of the ``g`` decode tokens and a chunk (:class:`Chunked`). Without
a budget a waiting prompt is scheduled whole (above).

**Speculative decoding** (``speculative``, :mod:`concurrency_model.serving.speculative`; as vLLM runs it with continuous
batching, recalled) [D]: an iteration is ``tokens`` = gamma draft steps over the slots, the draft's share of the
prompts, and one target pass over ``slots (gamma + 1)`` verified positions (logits on all of them, attention of
``gamma + 1`` queries against each cache) with the prompt chunk; it yields ``E`` tokens a slot (Leviathan et al.
2023, Eq. 1), so a request holds its slot ``O / E`` iterations and ``C = slots P E / O``. The time per output token
is the iteration over ``E``; the first token waits 1.5 iterations and the part of both models' prompt passes
beyond an iteration's share. One pipeline stage only (:class:`SpecIteration`).

**Pipeline stages** (``parallel.pipeline`` = p): the slots split into p groups, a group on each stage at a time,
as engines keep p micro-batches in flight so that no stage idles (vLLM's pipeline-parallel scheduling keeps one
scheduler a stage, as recalled) [D]: a group's iteration passes every stage in turn, so the time per output token
is the iteration of ``slots / p`` sequences over the whole model plus its ``p - 1`` sends of the group's rows
(stages assumed balanced: while one group is on a stage the others fill the rest, and the p groups yield a token
for every slot per iteration); a stage holds its layers' cache for all slots. The slots must divide by p.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np

from ..parallel.host import issued
from ..timing.parts import Parts
from ..units import dtype_bytes, value_dtype
from .kernels import (Pass, comm_s, decode_step, kv_attention, pass_kinds, pass_parts, pass_rows, prefill_pass,
                      prompt_attention, sum_max_affine, with_experts)
from .overheads import model_graph, workspace_bytes


@dataclass
class Iteration:
    """One steady-state iteration: its kernels, the decode attention ``(a_c, c_c, a_m, c_m, launch)`` at
    contexts ``lo..hi``, the prompts' attention ``prompt_att`` (whole, per iteration), ``breakdown`` seconds."""

    parts: Parts
    attention: tuple
    prompt_att: Parts
    layers: int
    lo: int
    hi: int
    host_s: float
    breakdown: dict
    prompt: Pass  # one prompt's pass at batch 1
    beyond_share: float  # the part of a prompt beyond an iteration's share, max(0, 1 - C / P)
    rows_of: object = None  # () -> (kind, Parts) of the kernels in ``compute_s`` (:func:`~.decode.pass_rows`)

    def kinds(self) -> list[dict]:
        """The iteration by kind of layer (:func:`~concurrency_model.serving.kernels.pass_kinds`)."""
        return pass_kinds(self.rows_of(), self.breakdown)

    @property
    def seconds(self) -> float:
        return sum(self.breakdown.values())

    @property
    def first_token_s(self) -> float:
        """Seconds from a request's arrival to its first token (module docstring)."""
        return 1.5 * self.seconds + self.beyond_share * sum(self.prompt.breakdown.values())

    @property
    def longest_s(self) -> float:
        """The iteration that carries a whole new prompt: the mean one and the part of the prompt beyond an
        iteration's share (the stall the other slots' next token waits for)."""
        return self.seconds + self.beyond_share * sum(self.prompt.breakdown.values())

    def scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        """Seconds on arrays of hardware scales (:mod:`concurrency_model.uncertainty`), as
        :meth:`~concurrency_model.serving.kernels.Step.scaled`."""
        a_c, c_c, a_m, c_m, att_launch = self.attention
        n = self.hi - self.lo + 1
        att = np.array([sum_max_affine(a_c / f, c_c / f, a_m / m, c_m / m, self.lo, self.hi)
                        for f, m in zip(flops, mem_bw)]) / n + att_launch * launch
        gpu = self.parts.seconds(flops, mem_bw, launch) + self.layers * att + \
            self.prompt_att.seconds(flops, mem_bw, launch)
        return np.maximum(gpu, self.host_s) + comm_s(self.breakdown) / net

    def first_token_scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        return 1.5 * self.scaled(flops, mem_bw, launch, net) + \
            self.beyond_share * self.prompt.scaled(flops, mem_bw, launch, net)


def prompt_tokens(slots: int, prompt_len: int, decode_len: int) -> int:
    """Prompt tokens an iteration carries in steady state: ``slots P / O``, rounded.

    >>> prompt_tokens(64, 1024, 128)
    512
    """
    return round(slots * prompt_len / decode_len)


def iteration(graph_of, shape: dict, dev, dtype: str, t: int, slots: int, prompt_len: int, decode_len: int, comm,
              host_overhead_s: float = 0.0, weight_bytes=None, weight_sparsity=None, cached: int = 0,
              spread: float = 1.0, queries: int = 1, lifetime: float | None = None,
              chunk: int | None = None) -> Iteration:
    """The steady-state iteration (module docstring); ``graph_of(batch, seq)`` builds the model; ``cached``: the
    prefix of every prompt already in the cache (its new tokens and their attention are what an iteration adds);
    ``spread``: the prompts' mean attention over the mean prompt's (unequal prompts, :func:`~concurrency_model.
    lengths.spread_factor`). ``queries``: positions each slot runs (a speculative verification's ``tokens + 1``,
    logits on all of them); ``lifetime``: iterations a request holds its slot (default ``decode_len``; fewer when
    an iteration yields more than one token), which set the prompts an iteration takes in. ``chunk``: the prompt
    tokens of this iteration instead of the steady share, as ``chunk`` tokens of one prompt (:class:`Chunked`)."""
    vb = dtype_bytes(value_dtype(dtype))  # activations on the wire (8-bit math: 16-bit messages)
    new = prompt_len - cached
    lifetime = decode_len if lifetime is None else lifetime
    share = slots / lifetime if chunk is None else chunk / new  # prompts (or parts of one) an iteration carries
    chunk = prompt_tokens(slots, new, lifetime) if chunk is None else chunk
    rows = slots * queries + chunk
    g_mix = graph_of(rows, 1)
    parts = pass_parts(g_mix, dev, dtype, t, rows, True, weight_bytes, weight_sparsity, head_rows=slots * queries,
                       expert=comm.e, imbalance=comm.imbalance)
    att = kv_attention(slots, shape["heads"], shape["kv_heads"], shape["head_dim"], dev, dtype, t, queries,
                       shape.get("kv_bytes"))
    g_prompt = graph_of(1, prompt_len)
    prompt_att = prompt_attention(g_prompt, dev, dtype, t, cached).with_work(spread).times(share)
    lo, hi = prompt_len + 1, prompt_len + decode_len
    la = float(dev.launch_overhead)
    host = host_overhead_s * (issued(parts, la) + shape["layers"] + issued(prompt_att, la))
    b = {"compute_s": parts.total(),
         "kv_attention_s": shape["layers"] * (sum_max_affine(*att[:4], lo, hi) / (hi - lo + 1) + att[4]),
         "prompt_attention_s": prompt_att.total(),
         "tensor_comm_s": comm.tensor(g_mix, rows, vb, last_only=True, head_batch=slots * queries)}
    if comm.p > 1:  # a group's rows sent from stage to stage
        b["pipeline_p2p_s"] = comm.pipeline(rows * shape["hidden"] * vb)
    b = with_experts(b, comm, g_mix, rows, vb)
    b["host_wait_s"] = max(0.0, host - b["compute_s"] - b["kv_attention_s"] - b["prompt_attention_s"])
    prompt = prefill_pass(graph_of(1, new), shape["hidden"], dev, dtype, t, 1, comm, prompt_len, host_overhead_s,
                          weight_bytes, weight_sparsity, cached, g_prompt)
    return Iteration(parts, att, prompt_att, shape["layers"], lo, hi, host, b, prompt, max(0.0, 1 - chunk / new),
                     partial(pass_rows, g_mix, dev, dtype, t, rows, True, weight_bytes, weight_sparsity,
                             head_rows=slots * queries, expert=comm.e, imbalance=comm.imbalance))


@dataclass
class Chunked:
    """Continuous batching under a token budget (``inference.max_batched_tokens``, module docstring): the steady
    ``mean`` iteration, one whose prefill lane is full (``full``: the decode tokens and ``lane`` prompt tokens) and
    the one carrying a prompt's ``last`` chunk; a prompt takes ``chunks`` iterations after ``lane_wait`` iterations
    in the lane's queue."""

    mean: Iteration
    full: Iteration
    last: Iteration
    chunks: int
    lane_wait: float
    utilization: float  # of the prefill lane: the steady prompt tokens an iteration over the lane's

    @property
    def seconds(self) -> float:
        return self.mean.seconds

    @property
    def breakdown(self) -> dict:
        return self.mean.breakdown

    def kinds(self) -> list[dict]:
        return self.mean.kinds()

    def summary(self) -> dict:
        """``prefill_chunks``, ``prefill_lane_utilization`` and ``prefill_lane_wait_s`` (``infer``'s output)."""
        return {"prefill_chunks": self.chunks, "prefill_lane_utilization": self.utilization,
                "prefill_lane_wait_s": self.lane_wait * self.full.seconds}

    @property
    def first_token_s(self) -> float:
        return 0.5 * self.mean.seconds + (self.lane_wait + self.chunks - 1) * self.full.seconds + self.last.seconds

    @property
    def longest_s(self) -> float:
        """An iteration whose prefill lane is full: no iteration carries more than the budget."""
        return max(self.mean.seconds, self.full.seconds)

    def scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        return self.mean.scaled(flops, mem_bw, launch, net)

    def first_token_scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        return 0.5 * self.mean.scaled(flops, mem_bw, launch, net) + (self.lane_wait + self.chunks - 1) * \
            self.full.scaled(flops, mem_bw, launch, net) + self.last.scaled(flops, mem_bw, launch, net)


def budget_slots(budget: int, slots: int, new: int, lifetime: float) -> int:
    """The most of ``slots`` decode slots that an iteration of ``budget`` tokens keeps busy: their decode tokens
    and their prompts' steady share must leave the prefill lane room (else its queue grows without bound),
    ``g + g new / lifetime < budget``. ``ValueError`` naming ``inference.max_batched_tokens`` when not even one fits.

    >>> budget_slots(512, 64, 1024, 128), budget_slots(4096, 64, 1024, 128)  # 9 tokens a slot an iteration
    (56, 64)
    """
    per_slot = 1 + new / lifetime
    fits = min(slots, math.ceil(budget / per_slot) - 1)
    if fits < 1:
        raise ValueError(f"inference.max_batched_tokens: {budget:,} tokens an iteration do not carry even one slot's "
                         f"decode token and its prompt's steady share ({per_slot:,.1f} tokens); raise it")
    return fits


def chunked(build, slots: int, new: int, lifetime: float, budget: int) -> Chunked:
    """:class:`Chunked` of ``slots`` decode slots whose prompts have ``new`` tokens to run, each request holding its
    slot ``lifetime`` iterations, under ``budget`` tokens an iteration; ``build(chunk)`` makes the
    :class:`Iteration` carrying ``chunk`` prompt tokens (``None``: the steady share). The lane of ``budget - slots``
    tokens an iteration serves the prompts first come, first served, each for ``new / lane`` iterations, the
    prompts arriving at random (``slots / lifetime`` an iteration): its mean wait is M/D/1's,
    ``rho D / (2 (1 - rho))`` (Pollaczek-Khinchine with a deterministic service time ``D``; Kleinrock 1975 §5.6) [D].

    >>> class It:  # an iteration of 10 ms and 1 us a prompt token
    ...     def __init__(self, chunk): self.seconds = 0.01 + 1e-6 * (chunk or 64)
    >>> c = chunked(It, 32, 1000, 500, 512)  # 64 prompt tokens an iteration in a lane of 480: 3 chunks
    >>> # first token: half a mean iteration, the lane wait and two full iterations, then the last chunk of 40
    >>> c.chunks, round(c.utilization, 4), round(c.lane_wait, 4), round(c.first_token_s * 1e3, 3)
    (3, 0.1333, 0.1603, 37.711)
    """
    if budget_slots(budget, slots, new, lifetime) < slots:
        raise ValueError(f"inference.max_batched_tokens: {budget:,} tokens an iteration do not keep {slots} slots busy")
    lane = budget - slots
    chunks = -(-new // lane)
    rho = slots * new / lifetime / lane
    service = new / lane  # iterations of the lane a prompt takes
    return Chunked(build(None), build(min(lane, new)), build(new - (chunks - 1) * lane), chunks,
                   rho * service / (2 * (1 - rho)), rho)


def workspace(graph_of, t: int, slots: int, prompt_len: int, decode_len: int, vb: int, cached: int = 0) -> float:
    """Bytes of the largest operator's inputs and output: of an iteration's ``slots + C`` rows, or of the
    pass that carries one whole prompt (:func:`~concurrency_model.serving.overheads.workspace_bytes`; with a cached prefix
    still the whole prompt's pass, an upper bound on its new tokens'). A node's shape is per sample, so the
    iteration's rows are read off the graph of one row (:class:`~concurrency_model.graph.Node`): no graph is built
    for the rows of each iteration a search tries."""
    rows = slots + prompt_tokens(slots, prompt_len - cached, decode_len)
    return max(workspace_bytes(graph_of(1, 1), t, rows, vb), workspace_bytes(graph_of(1, prompt_len), t, 1, vb))


def check_continuous(slots: int, pipeline: int, speculative) -> None:
    """The slots split into a group a pipeline stage; speculative decoding on one stage (``ValueError`` naming the
    field)."""
    if slots % pipeline:
        raise ValueError(f"inference.batch: {slots} slots do not split into {pipeline} equal groups, one a pipeline "
                         f"stage (parallel.pipeline)")
    if speculative is not None and pipeline > 1:
        raise ValueError("inference.speculative: speculative decoding with continuous batching over pipeline stages "
                         "is not modelled")


def at_load(make, load_rps: float, mean_len: float, slots: int, replicas: int = 1,
            step: int = 1, why: str = "") -> tuple[int, Iteration, float]:
    """``(n, iteration of n slots, slots in use)`` of one of ``replicas`` replicas that share ``load_rps`` evenly:
    the fewest slots ``n <= slots``, a multiple of ``step`` (the pipeline's groups), with ``load x mean_len x
    iteration(n) <= n`` (Little's law, module docstring); ``make(n)`` builds the iteration of ``n`` slots.
    ``ValueError`` naming ``inference.load_rps`` when even ``slots`` cannot carry it (``why``: what limits the
    slots, added to the message).

    >>> class It:  # an iteration of 10 ms and 1 ms a slot
    ...     def __init__(self, n): self.seconds = 0.01 + 0.001 * n
    >>> n, it, used = at_load(It, 50.0, 10, 64)  # 50 x 10 x (0.01 + 0.001 n) <= n from n = 10
    >>> n, round(used, 2)
    (10, 10.0)
    """
    def used(it):
        return load_rps / replicas * mean_len * it.seconds

    top = make(slots)
    if used(top) >= slots:
        where = f"{slots} slots" if replicas == 1 else f"{replicas} replicas of {slots} slots"
        raise ValueError(f"inference.load_rps: {load_rps:g} requests a second exceed the capacity of {where}, "
                         f"{replicas * slots / (mean_len * top.seconds):,.2f} (the queue would grow without bound); "
                         f"add slots (inference.batch) or devices{why}")
    lo, hi, best = 1, slots // step, top
    while lo < hi:  # the iteration grows with its slots: the smallest n = g step that carries the load
        mid = (lo + hi) // 2
        it = make(mid * step)
        if used(it) <= mid * step:
            hi, best = mid, it
        else:
            lo = mid + 1
    return hi * step, best, used(best)


@dataclass
class SpecIteration:
    """A speculative iteration (module docstring): the target's ``verify`` pass (an :class:`Iteration` of ``gamma +
    1`` queries a slot), ``gamma`` steps of the ``draft`` (:class:`~concurrency_model.serving.kernels.Step`), and the share
    ``share`` of one draft prompt pass ``draft_prompt`` (:class:`~concurrency_model.serving.kernels.Pass`) an iteration
    carries; ``seconds`` and ``breakdown`` are per generated token (the iteration over ``tokens`` = E)."""

    verify: Iteration
    draft: object
    draft_prompt: object
    gamma: int
    share: float
    tokens: float

    @property
    def iteration_s(self) -> float:
        return self.verify.seconds + self.gamma * self.draft.seconds + \
            self.share * sum(self.draft_prompt.breakdown.values())

    @property
    def seconds(self) -> float:
        return self.iteration_s / self.tokens

    def summary(self, spec, plain) -> dict:
        """``inference.speculative`` of continuous batching: the :class:`~concurrency_model.serving.speculative.Speculation`
        ``spec``'s fields, a draft step's and the verification pass's seconds, the ``plain`` iteration's time per
        token and the speed-up over it."""
        return {**spec.summary(self.draft.seconds, self.verify.seconds, plain.seconds),
                "speedup": plain.seconds / self.seconds, "iteration_s": self.iteration_s}

    @property
    def breakdown(self) -> dict:
        b = {k: v / self.tokens for k, v in self.verify.breakdown.items()}
        b["draft_s"] = self.gamma * self.draft.seconds / self.tokens
        b["draft_prompt_s"] = self.share * sum(self.draft_prompt.breakdown.values()) / self.tokens
        return b

    @property
    def first_token_s(self) -> float:
        return 1.5 * self.iteration_s + self.verify.beyond_share * (
            sum(self.verify.prompt.breakdown.values()) + sum(self.draft_prompt.breakdown.values()))

    def _iteration_scaled(self, flops, mem_bw, launch, net):
        return self.verify.scaled(flops, mem_bw, launch, net) + self.gamma * self.draft.scaled(
            flops, mem_bw, launch, net) + self.share * self.draft_prompt.scaled(flops, mem_bw, launch, net)

    def scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        return self._iteration_scaled(flops, mem_bw, launch, net) / self.tokens

    def first_token_scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        return 1.5 * self._iteration_scaled(flops, mem_bw, launch, net) + self.verify.beyond_share * (
            self.verify.prompt.scaled(flops, mem_bw, launch, net) + self.draft_prompt.scaled(flops, mem_bw, launch,
                                                                                              net))


def speculative_maker(spec, graph_of, shape: dict, dev, dtype: str, t: int, prompt_len: int, decode_len: float, comm,
                      host_overhead_s: float = 0.0, weight_bytes=None, weight_sparsity=None, spread: float = 1.0):
    """``make(n)``: the :class:`SpecIteration` of ``n`` slots for a :class:`~concurrency_model.serving.speculative.
    Speculation` ``spec`` (module docstring); the draft's graphs built once per shape."""
    vb = dtype_bytes(dtype)
    draft_of = lru_cache(maxsize=None)(lambda b, s: model_graph(spec.draft, b, s, vb))
    draft_prompt = prefill_pass(draft_of(1, prompt_len), spec.shape["hidden"], dev, dtype, t, 1, comm, prompt_len,
                                host_overhead_s)
    life = decode_len / spec.tokens  # iterations a request holds its slot

    def make(n: int) -> SpecIteration:
        verify = iteration(graph_of, shape, dev, dtype, t, n, prompt_len, decode_len, comm, host_overhead_s,
                           weight_bytes, weight_sparsity, 0, spread, queries=spec.gamma + 1, lifetime=life)
        draft = decode_step(draft_of(n, 1), spec.shape, dev, dtype, t, n, comm, prompt_len + 1,
                            prompt_len + round(decode_len), host_overhead_s)
        return SpecIteration(verify, draft, draft_prompt, spec.gamma, n / life, spec.tokens)
    return make
