"""Disaggregated serving: prompts on prefill instances, generation on decode instances, sized for a load [D].

DistServe (Zhong et al., OSDI 2024) and Splitwise (Patel et al., ISCA 2024) run a request's prefill and its decode
steps on different GPUs, so that neither phase slows the other (a colocated iteration carries prompt chunks beside
the decode tokens, :mod:`concurrency_model.serving.continuous_batching`) and each pool takes its own tensor degree; the request's
KV cache moves from one to the other. For ``load_rps`` requests a second with prompts of P tokens and O generated
tokens (their mean under ``output_lengths``), this module prices (derived from those designs, not their code):

* **Prefill pool**: ``r_p`` replicas of tensor ``t_p``, each a server running one prompt a pass (batch 1, batched
  prompts below: :func:`~concurrency_model.serving.kernels.prefill_pass`, service ``S_p``); the wait for a free one is the
  G/G/c queue of :mod:`concurrency_model.serving.queueing` with ``c = r_p`` and the prompts' spread (``c_s^2``: 0 for equal
  prompts, the squared coefficient of variation of their new tokens under ``prompt_lengths``, a pass taken as linear
  in them; ``S_p`` the pass of the mean prompt). Time to first token: that wait + ``S_p``.
* **KV transfer**: the request's cache, ``2 layers P kv_heads head_dim`` values, from the prefill replica's GPUs to
  the decode replica's over the inter-node tier (the pools on different nodes), each of the ``min(t_p, t_d)`` ranks
  sending its share over its own NIC: ``alpha + bytes / min(t_p, t_d) x beta`` (:func:`~concurrency_model.hardware.clusters.
  place`).
* **Decode pool**: ``r_d`` replicas of tensor ``t_d`` with ``n`` slots each; an iteration is a decode step of the
  ``n`` sequences at contexts ``P + 1 .. P + O`` (:func:`~concurrency_model.serving.kernels.decode_step`, no prompt tokens
  beside them), a request holds a slot for O iterations; the wait for a slot is the queue of ``c = n`` slots per
  replica carrying ``load / r_d``.
* **Time per output token** as serving benchmarks measure it, everything after the first token over the O - 1
  others: ``(transfer + decode wait + (O - 1) iteration) / (O - 1)``.

A cached prefix of S tokens (``prefix_len``) is kept by every replica of both pools: a prompt pass runs the ``P - S``
new tokens against P keys, the transfer carries their ``P - S`` positions, and a decode replica holds the shared S
once beside its slots' ``P + O - S``.

**Pipeline stages** (``pipelines``: the degrees to search; 1 by default) for a model too large for one node's
memory, or to shorten the queue: a prefill replica of ``p_p`` stages runs a prompt through them in turn (its
pass ``S_p`` with the ``p_p - 1`` sends) and takes a new one every stage time ``S_p / p_p`` (stages balanced), so
its queue is that of a server of service ``S_p / p_p`` and the first token waits for it and then ``S_p``
(DistServe §3.1's inter-operator case, as recalled); a decode replica of ``p_d`` stages keeps its ``n`` slots in
``p_d`` groups, a group's iteration of ``n / p_d`` sequences passing every stage (as continuous batching over
stages, :mod:`concurrency_model.serving.continuous_batching`); each stage holds its layers' weights and cache. The KV cache moves
between the ``t p`` GPUs of each side over ``min(t_p p_p, t_d p_d)`` NICs [D].

A plan is a ``(t_p, e_p, p_p, b, t_d, e_d, p_d, n)`` (expert groups and batched prompts below): the fewest prefill
replicas whose mean first token is within ``max_first_token_s`` (or whose queue is stable, without a target) and the
fewest decode replicas whose mean time per output token is within ``max_decode_s`` (likewise). Iterations at full
slots (a lighter load runs them faster: conservative).

**Batched prompts** (DistServe batches prompts up to a token budget): a prefill replica may run ``b`` prompts a pass
(column ``prefill_batch``), every power of two from 1 while the ``b`` prompts' caches and the pass's workspace fit
and each doubling saves at least ``BATCH_GAIN`` (10%) of a prompt's time (past that the device is busy with one
batch, and larger ones only lengthen every first token), at most ``MAX_PREFILL_BATCH``. Its queue is one of ``b``
seats of service ``S_p(b)`` (over ``p_p`` stages, a stage time), and a prompt waits half a stage time more for
the batch in flight to move on: the wait at full utilization, conservative at light loads [D].

**Expert groups** (a mixture of experts): each pool's replicas also share their experts in groups of ``e`` (every
power of two that divides the experts, ``t e`` GPUs inside a node: :func:`~concurrency_model.serving.capacity.layouts`, as
infer serves them; with pipeline stages each stage's all-to-alls within its group, replicas of ``t p`` GPUs in
order), a device holding the dense weights and ``1/e`` of the experts of its stage, a pass's all-to-alls over the
group (:class:`~concurrency_model.serving.overheads.Comm`, with ``parallel.expert_imbalance``). The
group's replicas step together, so a group of prefill replicas is a server of ``e b`` prompts of service ``S_p(b)``
and a group of decode replicas of ``n`` slots each one of ``e n`` slots; the replica counts are multiples of ``e``
[D].
A decode replica's memory: weights, ``n`` caches of ``P + O`` positions and the step's
workspace; a prefill replica's: weights, its ``b`` prompts' caches and its pass's workspace (each a stage's share).
"""
from __future__ import annotations

import pandas as pd

from ..checks import count, items, number
from ..hardware.clusters import load_cluster, place
from ..models.transformer import check_tensor_split
from ..ops.routing import check_applies, check_imbalance
from ..parallel.memory import memory_per_device
from ..progress import Progress
from ..scenario import read_scenario
from ..units import dtype_bytes
from .capacity import largest, layouts
from .decoder import inference_section, served
from .kernels import decode_step, prefill_pass
from .overheads import (Comm, cache_bytes, check_weight_sparsity, expert_count, model_graph, weights_bytes,
                        workspace_bytes)
from .queueing import replicas_for

MAX_PREFILL_BATCH = 64  # prompts a prefill pass, at most
BATCH_GAIN = 0.1  # doubling the prompts a pass stops once it saves less than this share of a prompt's time


def plan(scenario, load_rps: float, max_first_token_s: float | None = None, max_decode_s: float | None = None,
         progress: bool = False, pipelines: tuple | None = None) -> pd.DataFrame:
    """Every ``(prefill_tensor, decode_tensor, slots)`` inside a node (powers of two; slots up to the most a decode
    replica holds), at every pipeline degree of ``pipelines`` on each side (default 1) and, for a mixture of
    experts, every expert group (columns ``prefill_expert, decode_expert``), of a causal decoder's
    scenario under ``load_rps``, one row each: ``prefill_pipeline, prefill_batch, decode_pipeline, prefill_replicas,
    decode_replicas, gpus, first_token_s, decode_s_per_token, iteration_s, prefill_s, prefill_wait_s,
    kv_transfer_s, decode_wait_s, tokens_per_s_per_gpu, meets_target``; sorted by GPUs, then time per output
    token (module docstring).

    >>> df = plan({"model": "gpt2", "cluster": "dgx-a100", "inference": {"prompt_len": 512, "decode_len": 64}},
    ...           200.0, max_first_token_s=0.1, max_decode_s=0.02)
    >>> best = df.iloc[0]
    >>> bool(best["meets_target"]), int(best["gpus"] - best["prefill_replicas"] * best["prefill_tensor"]
    ...                                 - best["decode_replicas"] * best["decode_tensor"])
    (True, 0)
    """
    raw = read_scenario(scenario)
    inf = inference_section(raw)
    if load_rps is None:
        raise ValueError("load_rps: missing; a plan is sized for requests a second")
    for name, v in (("load_rps", load_rps), ("max_first_token_s", max_first_token_s), ("max_decode_s", max_decode_s)):
        number(name, v, none_ok=True)
    for k in ("speculative", "load_rps", "max_batched_tokens"):
        if getattr(inf, k) is not None:
            raise ValueError(f"inference.{k}: not in a disaggregated plan"
                             + (" (the load is the plan's own argument)" if k == "load_rps" else ""))
    par = raw.get("parallel") or {}
    if any(par.get(k, 1) != 1 for k in ("data", "pipeline", "context", "expert")):
        raise ValueError("parallel: a disaggregated plan chooses each pool's tensor and expert degrees (and pipeline "
                         "degree, --pipelines); give no parallelism")
    imb = check_imbalance("parallel.expert_imbalance", par.get("expert_imbalance", 1.0))
    cl = load_cluster(raw.get("cluster", "dgx-a100"))
    dev, dtype, vb = cl.device, inf.dtype, dtype_bytes(inf.dtype)
    P, O, S, host = inf.prompt_len, inf.decode_len, inf.prefix_len, inf.host_overhead_s
    model = raw.get("model")
    _, shape, dist, prompts = served(model, dev, dtype, P, O, inf.output_lengths, inf.prompt_lengths, S,
                                     inf.kv_dtype)
    sparsity = check_weight_sparsity(dev, dtype, inf.weight_sparsity, inf.weight_dtype)
    P = S + max(1, round(prompts.mean))  # the mean prompt; a prefill replica holds the longest one's cache
    g_pre = model_graph(model, 1, P, vb)
    experts = expert_count(g_pre)
    check_applies(imb, experts)
    per_token = cache_bytes(shape, 1, 1)
    stages = [count("pipelines", p) for p in dict.fromkeys(items("pipelines", pipelines or ()))] or [1]
    if max(stages) > shape["layers"]:
        raise ValueError(f"pipelines: {max(stages)} stages for {shape['layers']} layers")
    # (tensor, expert group, stages): t x e GPUs of a stage inside a node (capacity.layouts)
    sides = [(t, e or 1, p) for t, e in layouts(cl.gpus_per_node, experts) if _splits(g_pre, t) for p in stages]
    weights = {e: weights_bytes(g_pre, vb, inf.weight_dtype, sparsity, e) for e in {e for _, e, _ in sides}}
    quantized = next(iter(weights.values()))[1]  # bytes a quantized weight: the same in every expert group

    prefill = {}  # (tensor, expert, stages, prompts a pass) -> seconds of the pass, for replicas that hold them
    for t, e, p in sides:
        b = 1
        while b <= MAX_PREFILL_BATCH:
            g_b, g_new_b = model_graph(model, b, P, vb), model_graph(model, b, P - S, vb)
            kv = cache_bytes(shape, b, S + prompts.longest, t)
            if not memory_per_device(weights[e][0] / (t * p), workspace_bytes(g_pre, t, b, vb), dev,
                                     extra={"kv_cache": kv / p})["fits"]:
                break
            s = prefill_pass(g_new_b, shape["hidden"], dev, dtype, t, b, Comm(cl, t, p, e, imb), P, host, quantized,
                             sparsity, S, g_b)
            prefill[t, e, p, b] = sum(s.breakdown.values())
            if b > 1 and prefill[t, e, p, b] / b > (1 - BATCH_GAIN) * prefill[t, e, p, b // 2] / (b // 2):
                break  # the device is busy with one batch: larger ones only lengthen the pass
            b *= 2
    decode = {(t, e, p): _slots(model, shape, dev, vb, t, P + O, weights[e][0] / t, S, p) for t, e, p in sides}
    decode = {k: s for k, s in decode.items() if s}
    if not prefill or not decode:
        raise ValueError(f"memory: the model does not fit a {'prefill' if not prefill else 'decode'} replica on up to "
                         f"{cl.gpus_per_node} GPUs of {dev.name} x {max(stages)} pipeline stages")
    inter = place(cl, 2, 1).inter  # the pools on different nodes
    rows = []
    with Progress(sum(len(s) for s in decode.values()), "disaggregated plan", enabled=progress) as bar:
        for (td, ed, pd_), slots in decode.items():
            for n in slots:  # a group of n / p_d slots passes every stage in an iteration
                step = decode_step(model_graph(model, n // pd_, 1, vb), shape, dev, dtype, td, n // pd_,
                                   Comm(cl, td, pd_, ed, imb), P + 1, P + O, host, quantized, sparsity).seconds
                for prefill_side, s_p in prefill.items():
                    rows.append(_row(load_rps, prefill_side, s_p, (td, ed, pd_), n, step, dist, (P - S) * per_token,
                                     inter, max_first_token_s, max_decode_s, prompts.cv2))
                bar.update()
    df = pd.DataFrame(rows)
    if not experts:
        df = df.drop(columns=["prefill_expert", "decode_expert"])
    return df.sort_values(["meets_target", "gpus", "decode_s_per_token"], ascending=[False, True, True],
                          kind="stable").reset_index(drop=True)


def _splits(graph, t: int) -> bool:
    try:
        check_tensor_split(graph.layers(), t)
    except ValueError:
        return False
    return True


def _slots(model, shape, dev, vb: int, t: int, context: int, weights: float, shared: int = 0, p: int = 1) -> list[int]:
    """Slot counts of a decode replica of tensor ``t`` and ``p`` stages (multiples of ``p``: powers of two and the
    most that fit): a stage's share of the ``weights`` (a tensor rank's) and of ``n`` caches of ``context`` positions
    (every slot at its longest, as :mod:`concurrency_model.serving.continuous_batching` holds them; the first ``shared``, a cached
    prefix, held once) and the workspace of a group's step (:func:`~concurrency_model.serving.capacity.largest`)."""
    def need(groups):
        n = groups * p
        kv = cache_bytes(shape, n, context, t, shared=shared)
        # a node's shape is per sample: the workspace of ``groups`` rows off the graph of one
        return (weights + kv) / p + workspace_bytes(model_graph(model, 1, 1, vb), t, groups, vb)

    cap = float(dev.mem_capacity)
    if need(1) > cap:
        return []
    top = largest(need, cap)
    return sorted(p * g for g in {2 ** i for i in range(top.bit_length()) if 2 ** i <= top} | {top})


def _row(load, prefill: tuple, s_p, decode: tuple, n, step, dist, kv_bytes, inter, max_first, max_decode,
         cv2_prompt: float = 0.0) -> dict:
    """One plan (module docstring): ``prefill`` the prefill pool's ``(tensor, expert group, stages, prompts a
    pass)``, ``decode`` the decode pool's ``(tensor, expert group, stages)``, ``n`` the slots of a decode replica;
    ``cv2_prompt``: the spread of the prompts' passes (of their new tokens'). A pool's replicas come in expert groups,
    each group's ``e`` replicas a server of ``e b`` prompts (or ``e n`` slots)."""
    (tp, ep, pp, bp), (td, ed, pd_) = prefill, decode
    alpha, beta = inter
    transfer = alpha + kv_bytes / min(tp * pp, td * pd_) * beta
    stage = s_p / pp  # a new batch every stage time
    boundary = stage / 2 if bp > 1 else 0.0  # a batched prompt waits for the pass in flight to end (module doc)
    room_first = None if max_first is None else max_first - s_p - boundary
    g_p, w_p = replicas_for(load, ep * bp, stage, cv2_prompt, room_first)
    w_p += boundary
    others = max(1.0, dist.mean - 1)  # the tokens after the first
    room_decode = None if max_decode is None else (max_decode - step) * others - transfer
    g_d, w_d = replicas_for(load, ed * n, dist.mean * step, dist.cv2, room_decode)
    r_p, r_d = g_p * ep, g_d * ed
    first, tpot = w_p + s_p, (transfer + w_d) / others + step
    gpus = r_p * tp * pp + r_d * td * pd_
    ok = (max_first is None or first <= max_first) and (max_decode is None or tpot <= max_decode)
    return {"prefill_tensor": tp, "prefill_expert": ep, "prefill_pipeline": pp, "prefill_batch": bp,
            "prefill_replicas": r_p,
            "decode_tensor": td, "decode_expert": ed, "decode_pipeline": pd_, "decode_replicas": r_d, "slots": n,
            "gpus": gpus, "first_token_s": first, "decode_s_per_token": tpot, "iteration_s": step,
            "prefill_s": s_p, "prefill_wait_s": w_p, "kv_transfer_s": transfer, "decode_wait_s": w_d,
            "tokens_per_s_per_gpu": load * dist.mean / gpus, "meets_target": bool(ok)}


__all__ = ["plan"]
