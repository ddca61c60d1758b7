"""The configuration space of a sweep: every layout of a scenario's model on N devices, with the reason
each rejected one cannot run.

A layout is ``data, tensor, pipeline, microbatch_size, schedule, interleave, sequence_parallel,
recompute, zero_stage``; the fields the scenario gives are fixed, the others are searched (DESIGN.md:
"in ``sweep``, the fields left out are the ones searched over"). Candidate values:

* tensor: powers of two up to the node's GPUs (Megatron keeps tensor groups inside a node, Narayanan et
  al. 2021 §3.2), dividing N; pipeline: divisors of N / tensor that divide a transformer's blocks
  (Megatron-LM's condition) or, for other models, up to 64 and the blocks the model can be cut into;
  data: what is left;
* microbatch size: powers of two up to 64 that divide global_batch / data;
* schedule: 1f1b, gpipe, interleaved (with 2 or 4 chunks, layers divisible by pipeline x chunks and
  microbatches a multiple of pipeline, Megatron-LM's conditions); one stage: 1f1b only (all equal);
* sequence parallelism with tensor > 1; recompute none / selective / full; ZeRO 0-3 with data > 1.
"""
from __future__ import annotations

from collections import Counter
from itertools import product

from ..parallel.features import Workload, transformer_shape

SEARCHED = ("tensor", "pipeline", "microbatch_size", "schedule", "interleave", "sequence_parallel", "recompute",
            "zero_stage")
MICROBATCHES = (1, 2, 4, 8, 16, 32, 64)
CHUNKS = (2, 4)


def _divisors(n: int) -> list[int]:
    return [k for k in range(1, n + 1) if n % k == 0]


def layouts(w: Workload, gpus: int, global_batch: int, fixed: dict) -> tuple[list[dict], Counter]:
    """Valid layouts (dicts) of ``w`` on ``gpus`` devices and the count of each rejection reason.

    ``fixed``: the scenario's given ``parallel`` / ``training`` fields (their values are the only candidates).
    """
    shape = transformer_shape(w.graph(1))
    depth = shape["layers"] if shape else w.layer_count
    gpn = w.cluster.gpus_per_node

    def given(name, default):
        return (fixed[name],) if name in fixed else tuple(default)

    rejected: Counter = Counter()
    out: list[dict] = []
    tensors = given("tensor", [t for t in (1, 2, 4, 8, 16, 32) if t <= gpn])
    for t in tensors:
        if gpus % t:
            rejected["tensor: does not divide the GPU count"] += 1
            continue
        try:
            w.check_tensor(t)
        except ValueError:
            rejected["tensor: does not divide the model's heads or hidden size"] += 1
            continue
        # transformers: whole blocks per stage, as Megatron-LM requires (layers divisible by pipeline)
        stages = [p for p in _divisors(gpus // t) if (depth % p == 0 if shape else p <= min(w.layer_count, 64))]
        for p in given("pipeline", stages):
            if (gpus // t) % p:
                rejected["pipeline: tensor x pipeline does not divide the GPU count"] += 1
                continue
            if p > w.layer_count:
                rejected["pipeline: more stages than the blocks the model can be cut into"] += 1
                continue
            d = gpus // (t * p)
            if "data" in fixed and fixed["data"] != d:
                rejected["data: fixed data x tensor x pipeline differs from the GPU count"] += 1
                continue
            for b in given("microbatch_size", MICROBATCHES):
                if global_batch % (d * b):
                    rejected["global_batch: not divisible by data x microbatch_size"] += 1
                    continue
                m = global_batch // (d * b)
                schedules = given("schedule", ("1f1b", "gpipe", "interleaved") if p > 1 else ("1f1b",))
                for schedule in schedules:
                    chunks = given("interleave", CHUNKS if schedule == "interleaved" else (1,))
                    for v in chunks:
                        if schedule == "interleaved" and (m % p or depth % (p * v)):
                            rejected["interleave: microbatches or layers not divisible by the chunks"] += 1
                            continue
                        if schedule != "interleaved" and v != 1:
                            rejected["interleave: needs the interleaved schedule"] += 1
                            continue
                        for sp, rec, zero in product(given("sequence_parallel", (False, True) if t > 1 else (False,)),
                                                     given("recompute", ("none", "selective", "full")),
                                                     given("zero_stage", (0, 1, 2, 3) if d > 1 else (0,))):
                            out.append({"data": d, "tensor": t, "pipeline": p, "microbatch_size": b, "microbatches": m,
                                        "schedule": schedule, "interleave": v, "sequence_parallel": sp,
                                        "recompute": rec, "zero_stage": zero})
    return out, rejected
