"""The configuration space of a sweep: every layout of a scenario's model on N devices, with the reason
each rejected one cannot run.

A layout is ``data, tensor, pipeline, context, context_algorithm, expert, microbatch_size, schedule, interleave,
sequence_parallel, recompute, zero_stage``; the fields the scenario gives are fixed, the others are
searched (DESIGN.md: "in ``sweep``, the fields left out are the ones searched over"). Candidate values:

* tensor: powers of two up to the node's GPUs (Megatron keeps tensor groups inside a node, Narayanan et
  al. 2021 §3.2), dividing N;
* context: 1, 2, 4, 8 for a CNN (its spatial split, :mod:`~concurrency_model.parallel.spatial`, where every
  feature map has that many rows) and for a transformer whose sequence they divide, leaving at least
  :data:`MIN_CONTEXT_TOKENS` tokens per device, with both algorithms (``ulysses`` where ``tensor x
  context`` divides the heads). Shorter blocks are not searched: a ring step hides the send of its keys
  and values only when its attention, which grows with the square of the block, is long enough:
  ``2 b (s/c)^2 h / t`` FLOP of a causal block against ``4 b (s/c) h / t`` bytes of 16-bit K and V, so
  ``s / c >= 2 F / B``, about 2,200 tokens on an A100 (0.8 x 312 TFLOP/s over 230 GB/s of NVSwitch) and
  more on an H100 [D]; Megatron-LM advises context parallelism for long sequences. A scenario that gives
  ``context`` is swept at that degree whatever its length;
* pipeline: divisors of N / (tensor x context) that divide a transformer's blocks (Megatron-LM's
  condition) or, for other models, up to 64 and the blocks the model can be cut into; data: what is left;
  with ``parallel.stage_split`` ``counted`` those that divide the blocks + 2 (Megatron-Core's condition); with a
  layout (``parallel.stage_split`` a list,
  :func:`~concurrency_model.parallel.stage_layout.check_stage_layout`) the pipeline and interleave degrees whose
  product is its length and whose ranks each hold a decoder layer;
* microbatch size: powers of two up to 64 that divide global_batch / data;
* schedule: 1f1b, gpipe, interleaved (with 2 or 4 chunks, layers divisible by pipeline x chunks and
  microbatches a multiple of pipeline, Megatron-LM's conditions); one stage: 1f1b only (all equal);
* sequence parallelism with tensor > 1; recompute none / selective / full; ZeRO 0-3 with data x context > 1;
* expert (a mixture-of-experts model only): divisors of data that divide the experts of a layer, with ZeRO 0
  (the only stage :mod:`~concurrency_model.parallel.expert` models) when > 1.
"""
from __future__ import annotations

from collections import Counter
from itertools import product
from math import isqrt

from ..parallel.runtime import has_zero_stage, runs_schedule, runs_with
from ..training.workload import Workload, transformer_shape

SEARCHED = ("tensor", "pipeline", "context", "context_algorithm", "expert", "microbatch_size", "schedule",
            "interleave", "sequence_parallel", "recompute", "zero_stage")
MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)
CHUNKS = (2, 4)
CONTEXTS = (1, 2, 4, 8)
MIN_CONTEXT_TOKENS = 2048  # tokens per device below which context parallelism is not searched (module doc)


def _divisors(n: int) -> list[int]:
    small = [k for k in range(1, isqrt(n) + 1) if n % k == 0]
    return sorted({*small, *(n // k for k in small)})


def layouts(w: Workload, gpus: int, global_batch: int, fixed: dict) -> tuple[list[dict], Counter]:
    """Valid layouts (dicts) of ``w`` on ``gpus`` devices and the count of each rejection reason.

    ``fixed``: the scenario's given ``parallel`` / ``training`` fields (their values are the only candidates;
    ``framework`` rules out the ZeRO stages and the schedules its runtime does not run with pipeline stages,
    :func:`~concurrency_model.parallel.runtime.runs_with` and
    :func:`~concurrency_model.parallel.runtime.runs_schedule`).
    """
    shape = transformer_shape(w.graph(1))
    depth = shape["layers"] if shape else w.layer_count
    gpn = w.cluster.domain_gpus  # tensor groups stay on one NVLink fabric (a node, or an NVL72 rack)

    def given(name, default):
        return (fixed[name],) if name in fixed else tuple(default)

    rejected: Counter = Counter()
    out: list[dict] = []
    seq = shape["s"] if shape else None
    contexts = given("context", [c for c in CONTEXTS if c == 1 or w.spatial
                                 or (seq and seq % c == 0 and seq // c >= MIN_CONTEXT_TOKENS)])
    tensors = given("tensor", [t for t in (1, 2, 4, 8, 16, 32) if t <= gpn])
    for t in tensors:
        if gpus % t:
            rejected["tensor: does not divide the GPU count"] += 1
            continue
        try:
            w.check_tensor(t)
        except ValueError:
            rejected["tensor: does not divide the model's channels, or a layer has no channel split" if w.channel_split
                     else "tensor: does not divide the model's heads or hidden size"] += 1
            continue
        for c in contexts:
            if (gpus // t) % c:
                rejected["context: tensor x context does not divide the GPU count"] += 1
                continue
            algorithms = []
            for alg in given("context_algorithm", ("ring", "ulysses") if c > 1 and shape else ("ring",)):
                try:
                    w.check_context(c, t, alg)
                except ValueError as e:
                    rejected[_context_reason(str(e))] += 1
                    continue
                algorithms.append(alg)
            if algorithms:
                _pipelines(w, out, rejected, given, fixed, gpus, global_batch, t, c, algorithms, shape, depth)
    return out, rejected


def _context_reason(message: str) -> str:
    """A rejection reason (one per kind, without the numbers) from :meth:`Workload.check_context`'s message."""
    if "Ulysses" in message:
        return "context_algorithm: ulysses needs the heads divisible by tensor x context"
    if "does not divide the model's sequence length" in message:
        return "context: does not divide the sequence length"
    if "rows of" in message:
        return "context: more devices than a feature map has rows"
    return "context: " + message.split(": ", 1)[-1]


def _pipelines(w, out, rejected, given, fixed, gpus, global_batch, t, c, algorithms, shape, depth) -> None:
    """The layouts of tensor degree ``t`` and context degree ``c`` (appended to ``out``)."""
    n = gpus // (t * c)
    layout = w.stage_split if isinstance(w.stage_split, tuple) else None  # a layout fixes p x v (scenario.py)
    # transformers: whole blocks per stage, as Megatron-LM requires (layers divisible by pipeline, or a layout's)
    stages = [p for p in _divisors(n) if (len(layout) % p == 0 if layout else
                                          (depth + 2) % p == 0 or p == 1 if shape and w.stage_split == "counted" else
                                          depth % p == 0 if shape else p <= min(w.layer_count, 64))]
    for p in given("pipeline", stages):
        if n % p:
            rejected["pipeline: tensor x pipeline does not divide the GPU count"] += 1
            continue
        if p > w.layer_count:
            rejected["pipeline: more stages than the blocks the model can be cut into"] += 1
            continue
        if p > 1 and w.stage_split == "layers" and (not shape or depth % p):  # Megatron-Core's even split
            rejected["stage_split: layers needs the pipeline stages to divide the decoder layers"] += 1
            continue
        if p > 1 and w.stage_split == "counted" and (not shape or (depth + 2) % p or (depth + 2) // p < 2):
            rejected["stage_split: counted needs the pipeline stages to divide the decoder layers + 2"] += 1
            continue
        if layout and (not shape or sum(layout) != depth):
            rejected["stage_split: the layout's decoder layers are not the model's"] += 1
            continue
        if layout and min(sum(layout[r::p]) for r in range(p)) < 1:
            rejected["stage_split: a pipeline rank of the layout holds no decoder layer"] += 1
            continue
        d = n // p
        if "data" in fixed and fixed["data"] != d:
            rejected["data: fixed data x tensor x pipeline differs from the GPU count"] += 1
            continue
        experts = []
        for e in given("expert", [e for e in _divisors(d) if w.expert_count % e == 0] if w.expert_count else [1]):
            try:
                w.check_expert(e, d)
            except ValueError:
                rejected["expert: does not divide data or the experts"] += 1
                continue
            experts.append(e)
        for b in given("microbatch_size", MICROBATCHES):
            if global_batch % (d * b):
                rejected["global_batch: not divisible by data x microbatch_size"] += 1
                continue
            if w.fc_only and b % t:
                rejected["microbatch_size: not divisible by tensor (tensor_layers \"fc\")"] += 1
                continue
            m = global_batch // (d * b)
            schedules = given("schedule", ("1f1b", "gpipe", "interleaved") if p > 1 else ("1f1b",))
            for schedule in schedules:
                chunks = given("interleave", CHUNKS if schedule == "interleaved" else (1,))
                for v in chunks:
                    if layout and len(layout) != p * v:
                        rejected["stage_split: the layout's virtual stages are not pipeline x interleave"] += 1
                        continue
                    whole = ((depth + 2) // p) % v == 0 if w.stage_split == "counted" else depth % (p * v) == 0
                    if schedule == "interleaved" and (m % p or not (whole or layout)):
                        rejected["interleave: microbatches or layers not divisible by the chunks"] += 1
                        continue
                    if schedule != "interleaved" and v != 1:
                        rejected["interleave: needs the interleaved schedule"] += 1
                        continue
                    sps = (False, True) if t > 1 and shape else (False,)  # Megatron's, for transformer blocks
                    for alg, e, sp, rec, zero in product(
                            algorithms, experts, given("sequence_parallel", sps),
                            given("recompute", ("none", "selective", "full")),
                            given("zero_stage", (0, 1, 2, 3) if d > 1 or c > 1 else (0,))):
                        if e > 1 and zero > 1:  # scenario.py's check: Megatron-Core's distributed optimizer
                            rejected["expert: modelled with ZeRO 0 or 1"] += 1
                            continue
                        if w.expert_overlap and p > 1 and v == 1:  # scenario.py's check
                            rejected["expert_overlap: needs interleaved stages when pipelined"] += 1
                            continue
                        if not has_zero_stage(fixed.get("framework"), zero):
                            rejected["zero_stage: the runtime has no mode for this ZeRO stage"] += 1
                            continue
                        if not runs_with(fixed.get("framework"), zero, p):
                            rejected["zero_stage: the runtime runs ZeRO-2 and -3 without pipeline stages"] += 1
                            continue
                        if not runs_schedule(fixed.get("framework"), zero, p, schedule):
                            rejected["schedule: the runtime's pipeline engine runs 1f1b only"] += 1
                            continue
                        out.append({"data": d, "tensor": t, "pipeline": p, "context": c,
                                    "context_algorithm": alg, "expert": e, "microbatch_size": b, "microbatches": m,
                                    "schedule": schedule, "interleave": v, "sequence_parallel": sp,
                                    "recompute": rec, "zero_stage": zero})
