"""What makes a training scenario that is over its device's memory fit: the changes of one field that cost no
devices, tried in the order a practitioner reaches for them, each priced by the same memory model
(:func:`.prepare.memory_at`). A change "fits" when the upper end of its memory band fits (:mod:`.allocator`: the
caching allocator's reserved headroom above the central figure and the spread of measured peaks about it), and the
bytes named are that upper end; the same
clause follows a refusal and an "at risk" estimate (central figure in, upper end out).

* ``parallel.sequence_parallel = true`` (tensor > 1, transformer blocks): the activations that tensor
  parallelism leaves replicated are split too (Korthikanti et al. 2022 §4.2.2);
* ``training.zero_stage`` 1, 2, 3 (synchronous all-reduce, no expert or layer-wise hybrid): the optimizer
  state, then the gradients, then the weights sharded over the data-parallel ranks (Rajbhandari et al. 2020);
* ``training.recompute`` ``selective``, then ``full`` (Korthikanti et al. 2022 §5; Chen et al. 2016);
* ``parallel.microbatch_size``: the largest divisor of the current one that fits (more microbatches a step);
* ``model.fused_attention = true`` (a transformer whose attention writes its scores): one FlashAttention-style
  kernel stores no scores, their softmax or its mask (Dao et al. 2022 §3.1; Korthikanti et al. 2022 §4.1's
  ``5 a s / h`` term), and costs no time (named first; every current runtime runs one: Megatron-Core through Transformer
  Engine, torchtitan and Hugging Face through PyTorch's SDPA). Named where the workload can be rebuilt for it;
* the same devices split otherwise: 2, 4, ... times the tensor degree (inside a node, dividing the split
  dimensions) or the pipeline stages, with as many times fewer data-parallel replicas (Narayanan et al. 2021 §3:
  model parallelism divides the model state, data parallelism does not).

When no single change fits, the fewest changes of the first four kinds that fit together are named; when even all
of them do not fit, the model needs more devices to split over (``parallel.tensor`` or ``parallel.pipeline``). Each
change is priced for memory only; what it costs in time is ``estimate --compare``'s to say.
"""
from __future__ import annotations

from dataclasses import replace
from itertools import product

from ..scenario import load_scenario
from .workload import transformer_shape

RECOMPUTE = ("none", "selective", "full")


def _modelled(sc, training: dict) -> bool:
    """Whether ``sc`` with these ``training`` fields passes :func:`~concurrency_model.scenario.load_scenario`'s
    checks, where the rules of what is modelled together live (ZeRO with a synchronous uncompressed all-reduce,
    no experts, no layer-wise hybrid)."""
    try:
        load_scenario({"model": sc.model, "cluster": sc.cluster, "parallel": sc.parallel.to_dict(),
                       "training": {**sc.training.to_dict(), **training}})
    except ValueError:
        return False
    return True


def candidates(sc, transformer: bool) -> list[list[tuple[str, dict, dict]]]:
    """The single changes that may save memory, one list a field, the cheapest in time first: each
    ``(setting, parallel changes, training changes)``."""
    par, tr = sc.parallel, sc.training
    out = []
    if transformer and par.tensor > 1 and not par.sequence_parallel:
        out.append([("parallel.sequence_parallel=true", {"sequence_parallel": True}, {})])
    if par.data * par.context > 1:  # ZeRO shards over the replicas, where the scenario's runtime runs it
        out.append([(f"training.zero_stage={z}", {}, {"zero_stage": z}) for z in range(tr.zero_stage + 1, 4)
                    if _modelled(sc, {"zero_stage": z})])
    lighter = RECOMPUTE[RECOMPUTE.index(tr.recompute) + 1:]  # outside attention selective is none (.memory)
    # a full recompute leaves no modules to name (training.recompute_modules goes with selective only)
    modules = tr.recompute_modules is not None
    full = ("training.recompute=full" + (" training.recompute_modules=null" if modules else ""), {},
            {"recompute": "full", **({"recompute_modules": None} if modules else {})})
    out.append([full if r == "full" else (f"training.recompute={r}", {}, {"recompute": r})
                for r in lighter if transformer or r == "full"])
    unit = par.tensor if par.tensor_layers == "fc" else 1
    b = par.microbatch_size
    out.append([(f"parallel.microbatch_size={x}", {"microbatch_size": x}, {})
                for x in range(b - 1, 0, -1) if b % x == 0 and x % unit == 0])
    return [group for group in out if group]


def layouts(sc, w) -> list[list[tuple[str, dict, dict]]]:
    """The same devices as more tensor ranks (inside a node) or more pipeline stages and fewer replicas, the
    smallest change first (a layout without context, expert or layer-wise splits)."""
    par = sc.parallel
    d, t, p = par.data, par.tensor, par.pipeline
    if par.context > 1 or par.expert > 1 or par.tensor_layers != "all":
        return []
    tensor, pipeline = [], []
    f = 2
    while d % f == 0:
        fewer = {"data": d // f}
        if t * f <= sc.cluster.gpus_per_node:
            try:
                w.check_tensor(t * f)
                tensor.append((f"parallel.tensor={t * f} parallel.data={d // f}", {"tensor": t * f, **fewer}, {}))
            except ValueError:
                pass
        m = par.global_batch // (d // f * par.microbatch_size)
        if p * f <= w.layer_count and (par.schedule != "interleaved" or m % (p * f) == 0):
            pipeline.append((f"parallel.pipeline={p * f} parallel.data={d // f}", {"pipeline": p * f, **fewer}, {}))
        f *= 2
    return [group for group in (tensor, pipeline) if group]


def fused_model(model, graph):
    """``model`` (a scenario's model spec: a zoo name or an object) with a fused attention kernel, or ``None`` where
    ``graph`` has no attention that writes its scores or the spec takes no such option (an ONNX or PyTorch import).

    >>> from concurrency_model.models import get_model
    >>> fused_model("gpt2", get_model("gpt2", 1))
    {'name': 'gpt2', 'fused_attention': True}
    >>> fused_model({"name": "gpt2", "fused_attention": True}, get_model({"name": "gpt2", "fused_attention": True}, 1))
    """
    if not any(n.kind == "attention" and n.attrs.get("fused") is False for n in graph.layers()):
        return None
    if isinstance(model, str):
        return {"name": model, "fused_attention": True}
    if isinstance(model, dict) and not {"onnx", "torch"} & set(model):
        return {**model, "fused_attention": True}
    return None


def _bytes(sc, w, memory_at, par: dict, tr: dict) -> tuple[bool, float]:
    changed = replace(sc, parallel=replace(sc.parallel, **par), training=replace(sc.training, **tr))
    mem = memory_at(changed, w, changed.parallel.microbatch_size, changed.microbatches)[1]
    return bool(mem["fits"]), float(mem.get("upper_bytes", mem["total_bytes"]))


def fits_with(sc, w, memory_at, rebuild=None) -> str:
    """The clause to add to a refusal for memory: of each field, and of each other split of the same devices, the
    first change that fits (with the bytes a device then holds); else the fewest changes of :func:`candidates` that
    fit together, each as light as it can be; else that the model must be split over more devices.

    >>> from concurrency_model.training.prepare import memory_at
    >>> from concurrency_model.training.workload import workload
    >>> from concurrency_model.scenario import load_scenario
    >>> sc = load_scenario({"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"data": 16, "tensor": 8,
    ...     "pipeline": 8, "global_batch": 512}})  # 101.1 GB a device under Megatron-LM (the default runtime;
    >>> # ZeRO-2 would fit, but DeepSpeed, which runs it, refuses it with pipeline stages)
    >>> for clause in fits_with(sc, workload(sc.model, sc.cluster, "bf16"), memory_at).split(", "):
    ...     print(clause)
    ; fits with training.recompute=full (64.0 GB)
    parallel.pipeline=64 parallel.data=2 (77.4 GB)
    """
    groups = candidates(sc, transformer_shape(w.graph(sc.parallel.microbatch_size)) is not None)
    found = []
    fused = fused_model(sc.model, w.graph(1)) if rebuild is not None else None
    if fused is not None:  # ``rebuild``: the workload of another model spec, everything else as ``w``'s
        changed = replace(sc, model=fused)
        mem = memory_at(changed, rebuild(fused), changed.parallel.microbatch_size, changed.microbatches)[1]
        if mem["fits"]:
            upper = float(mem.get("upper_bytes", mem["total_bytes"]))
            found.append(f"model.fused_attention=true ({upper / 1e9:.1f} GB)")
    for group in groups + layouts(sc, w):
        for setting, par, tr in group:
            fits, total = _bytes(sc, w, memory_at, par, tr)
            if fits:
                found.append(f"{setting} ({total / 1e9:.1f} GB)")
                break
    if found:
        return "; fits with " + ", ".join(found)
    # none alone: every combination of at most one change a field, the fewest changes first, then the lightest;
    # the last is every field's strongest change
    combos = sorted(product(*([None, *range(len(g))] for g in groups)),
                    key=lambda c: (sum(i is not None for i in c), sum(i or 0 for i in c)))
    for combo in combos[1:]:
        chosen = [g[i] for g, i in zip(groups, combo) if i is not None]
        fits, total = _bytes(sc, w, memory_at, {k: v for _, par, _ in chosen for k, v in par.items()},
                             {k: v for _, _, tr in chosen for k, v in tr.items()})
        if fits:
            return f"; no single change fits, together {' and '.join(c[0] for c in chosen)} do ({total / 1e9:.1f} GB)"
    tail = f" (with {' '.join(g[-1][0] for g in groups)}: {total / 1e9:.1f} GB)" if groups else ""
    return f"; no change of recompute, ZeRO stage or microbatch size fits{tail}: split the model over more " \
           "devices (parallel.tensor or parallel.pipeline)"
