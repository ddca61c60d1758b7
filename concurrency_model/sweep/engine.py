"""Vectorised sweeps: every layout of a scenario on one or more GPU counts, over a grid of hardware scales.

What is computed once (the "compilation"): the model for each microbatch size, its layers' kernels for
each tensor degree, the pipeline partitions, the collectives, and the lambdified step and memory
expressions of :mod:`concurrency_model.training.compose`, one per structural variant (schedule, ZeRO
stage, overlap; for memory also recompute and sequence parallelism). What is evaluated on numpy arrays:
those expressions for every (layout, hardware point), in chunks. A configuration gets the same step time
here as from :func:`~concurrency_model.training.estimate.estimate` (same features, same expressions).

Memory: ``memory_bytes_per_device`` is the central figure (model state, activations and what the runtime
``training.framework`` adds, :mod:`~concurrency_model.parallel.allocator`), ``memory_p90_bytes_per_device`` the
band's upper end (the caching allocator's reserved headroom and the spread of measured peaks,
:func:`~concurrency_model.parallel.allocator.band_excess_bytes`). A layout whose central figure exceeds the device is
rejected; one whose upper end alone does not fit is kept as feasible and flagged ``memory_at_risk`` (it runs, with
allocation retries or an out-of-memory error likely): ranking it out would hide layouts that do run, and the flag
lets a user filter them (``frame[~frame.memory_at_risk]``).

Hardware scales multiply the preset's numbers: ``flops`` (peak FLOP/s), ``mem_bw`` (memory bandwidth),
``launch`` (kernel launch overhead), ``intra_bw`` and ``inter_bw`` (link bandwidth inside a node and
between nodes). Kernels, algorithms and partitions are the ones chosen on the preset (DESIGN.md: discrete
decisions are made numerically for the numbers at hand).
"""
from __future__ import annotations

import hashlib
import json
import time
from collections import Counter
from dataclasses import replace
from itertools import product

import numpy as np
import pandas as pd

from .. import compiled
from ..checks import number
from ..ops.routing import check_applies
from ..parallel import allocator
from ..parallel.lora import check_lora
from ..parallel.pipeline import p2p_blocking, p2p_scatter_gather
from ..parallel.recompute import check_modules
from ..parallel.runtime import default_framework, overlaps, runtime_of
from ..parallel.stage_layout import check_stage_layout
from ..progress import Progress
from ..scenario import load_scenario, read_scenario
from ..training import compose
from ..training.keys import scenario_key, stable_model
from ..training.prepare import (assemble, consistency_of, gpipe_activation_bytes, host_per_kernel, host_seconds,
                                policies_of, runtime_name, sync_of, unsharded_optimizer_bytes)
from ..training.step import step_fn
from ..training.workload import ZERO_TRIPLE, context_exposed, transformer_shape, workload
from ..units import state_dtype
from .result import SCALES, SweepResult
from .space import layouts

LAYOUT_COLUMNS = ("gpus", "data", "tensor", "pipeline", "context", "context_algorithm", "expert", "microbatch_size",
                  "microbatches", "schedule", "interleave", "sequence_parallel", "recompute", "zero_stage")
CHUNK = 1 << 21  # configurations per evaluation chunk
MAX_GPUS = 1 << 24  # a GPU count above it is refused (a typo, not a machine)


def _positive_list(name: str, values) -> list:
    vals = list(values) if isinstance(values, (list, tuple, np.ndarray)) else [values]
    if not vals:
        raise ValueError(f"{name}: empty range")
    return [number(name, x) for x in vals]


def sweep(scenario, gpus, top: int | None = None, hardware: dict | None = None, progress: bool = False) -> SweepResult:
    """Every valid configuration of ``scenario`` on ``gpus`` devices (a number or a list), optionally over
    a grid of ``hardware`` scales (``{"inter_bw": [0.5, 1, 2], ...}``, see the module).

    The ``parallel`` and ``training`` fields the scenario gives are fixed, the others searched
    (:mod:`.space`); ``global_batch`` is required. When data, tensor and pipeline are all given, the GPU
    count decides data (data = GPUs / (tensor x pipeline x context)), so one scenario can be swept over GPU
    counts.

    Raises ``ValueError`` naming the field for bad ranges, and with the count of every rejection reason
    when no configuration is feasible.

    >>> r = sweep({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64},
    ...            "training": {"dtype": "fp16"}}, 8, hardware={"inter_bw": [1, 2]})
    >>> r.feasible > 100, r.top(1)["gpus"].item()
    (True, 8)
    """
    t0 = time.perf_counter()
    raw = read_scenario(scenario)
    frameworks = (raw.get("training") or {}).get("framework")
    if isinstance(frameworks, (list, tuple)):  # which runtime: each searched, one table (SweepResult.of_runtimes)
        return _sweep_runtimes(raw, frameworks, gpus, top, hardware, progress)
    layout = raw["parallel"].get("stage_split") if isinstance(raw.get("parallel"), dict) else None
    if layout is None or isinstance(layout, str):
        sc = load_scenario(raw)
    else:  # a layout fixes pipeline x interleave, which the sweep searches: checked against them per layout (.space)
        raw = {**raw, "parallel": {k: v for k, v in raw["parallel"].items() if k != "stage_split"}}
        sc = load_scenario(raw)
        sc = replace(sc, parallel=replace(sc.parallel, stage_split=check_stage_layout(layout, None)))
    given_par = dict(raw.get("parallel") or {})
    given_tr = dict(raw.get("training") or {})
    global_batch = given_par.pop("global_batch", None)
    if global_batch is None:
        raise ValueError("parallel.global_batch: a sweep needs the global batch (the work of one step)")
    fixed = {k: v for k, v in {**given_par, **given_tr}.items() if k in
             ("data", "tensor", "pipeline", "context", "context_algorithm", "expert", "microbatch_size", "schedule",
              "interleave", "sequence_parallel", "recompute", "zero_stage", "framework")}
    # as load_scenario requires: parameter servers, gossip, compression and consistency models other than
    # synchronous with ZeRO 0; expert parallelism with an uncompressed all-reduce
    plain = sc.training.sync == "allreduce" and sc.training.compression == "none"
    if not (plain and sc.training.consistency == "synchronous"):
        fixed.setdefault("zero_stage", 0)
    if not plain:
        fixed.setdefault("expert", 1)
    if {"data", "tensor", "pipeline"} <= set(fixed):
        fixed.pop("data")  # every degree given: the GPU count decides data (data = GPUs / (tensor x pipeline))
    if sc.parallel.tensor_layers == "fc":  # as load_scenario requires of Krizhevsky's hybrid
        for k, v in {"pipeline": 1, "context": 1, "expert": 1, "zero_stage": 0}.items():
            fixed.setdefault(k, v)
    if sc.training.compression == "sfb":  # as load_scenario requires: whole layers' factors
        for k in ("tensor", "pipeline", "context", "expert"):
            fixed.setdefault(k, 1)
    gpu_counts = [int(x) for x in _positive_list("gpus", gpus)]
    if any(g != x for g, x in zip(gpu_counts, _positive_list("gpus", gpus))):
        raise ValueError(f"gpus: must be whole numbers, got {gpus!r}")
    if max(gpu_counts) > MAX_GPUS:
        raise ValueError(f"gpus: at most {MAX_GPUS:,} (2^24, more than any machine built), got {max(gpu_counts):,}")
    if hardware is not None and not isinstance(hardware, dict):
        raise ValueError(f"hardware: expected an object of scales such as {{\"inter_bw\": [1, 2]}}, got {hardware!r}")
    hardware = dict(hardware or {})
    unknown = sorted(set(hardware) - set(SCALES))
    if unknown:
        raise ValueError(f"hardware.{unknown[0]}: unknown scale; allowed: {', '.join(SCALES)}")
    grid = {k: _positive_list(f"hardware.{k}", hardware.get(k, [1.0])) for k in SCALES}
    hw = pd.DataFrame(list(product(*grid.values())), columns=list(SCALES))
    H = len(hw)
    tr = sc.training
    w = workload(sc.model, sc.cluster, tr.dtype, sc.parallel.tensor_layers, tr.lora_rank,
                 tr.lora_base_dtype, sc.parallel.expert_imbalance,
                 *policies_of(tr, 0), sc.parallel.tp_overlap,
                 sc.parallel.moe_dispatcher, sc.parallel.expert_overlap,
                 sc.parallel.stage_split, tr.compile, tr.cuda_graph)
    # the scenario's identity: every parallel and training field, not a list of those known to matter
    token = scenario_key(sc) + (repr(sorted(fixed.items())), global_batch, tuple(gpu_counts))
    plan = _cached_plan(sc, w, token, gpu_counts, global_batch, fixed)
    rows, rejected = plan["rows"], Counter(plan["rejected"])
    evaluated = (len(rows) + sum(rejected.values())) * H
    rejected = Counter({k: v * H for k, v in rejected.items()})
    if not rows:
        raise ValueError("sweep: no valid configuration; rejected: " +
                         "; ".join(f"{k} ({v})" for k, v in rejected.most_common()))
    lay = pd.DataFrame(rows, columns=list(LAYOUT_COLUMNS))
    mems = _cached_memory(sc, w, lay, token)
    state, model_state, mem, act, upper = (mems[k] for k in ("state", "model_state", "mem", "act", "upper"))
    split = {k: mems[f"split/{k}"] for k in compose.STATE_PARTS}
    # feasible when the central figure fits; "at risk" (kept, flagged) when the band's upper end does not
    capacity = float(sc.cluster.device.mem_capacity)
    fits = mem <= capacity
    if (~fits).any():
        rejected["memory: over the device's capacity"] += int((~fits).sum()) * H
    lay, state = lay[fits].reset_index(drop=True), state[fits]
    lay["memory_bytes_per_device"] = mem[fits]
    lay["memory_p90_bytes_per_device"], lay["memory_at_risk"] = upper[fits], upper[fits] > capacity
    lay["model_state_bytes"], lay["activations_bytes"] = model_state[fits], act[fits]
    for k in compose.STATE_PARTS:
        lay[f"{k}_bytes"] = split[k][fits]
    if lay.empty:
        raise ValueError("sweep: no valid configuration; rejected: " +
                         "; ".join(f"{k} ({v})" for k, v in rejected.most_common()))

    # features per layout: stage kernels on the hardware grid (one table per stage), communication triples
    sc_ = {k: hw[k].to_numpy() for k in SCALES}
    step = np.empty((len(lay), H))
    busy = np.empty((len(lay), H)) if sc.run else None
    bar = Progress(len(lay) * H, "sweep", enabled=progress)
    feats = _cached_features(sc, w, lay, state, sc_)
    feats["consistency"] = consistency_of(tr, (lay["data"] * lay["context"]).to_numpy(dtype=float))
    # every compile counts in compile_s: the step function of each (schedule, ZeRO stage, overlap) group too
    # with a run, the step's waits too: the busy share prices its energy (:func:`..parallel.run.busy_share`)
    outs = ("step", "bubble", "host_wait", "straggler_wait") if busy is not None else ("step",)
    # the overlap is the runtime's where training.overlap is null (DeepSpeed's differs by ZeRO stage and pipeline)
    zp = list(zip(lay["zero_stage"].astype(int), lay["pipeline"].astype(int)))
    known = {k: overlaps(tr.framework, *k, tr.overlap) for k in set(zp)}  # once a (stage, pipeline) pair
    overlap = [known[k] for k in zp]
    groups = [(step_fn(schedule, int(zero), bool(ov), outs), int(zero), idx)
              for (schedule, zero, ov), idx in lay.assign(_overlap=overlap)
              .groupby(["schedule", "zero_stage", "_overlap"]).indices.items()]
    compile_s, eval_s = time.perf_counter() - t0, 0.0
    for fn, zero, idx in groups:
        c1 = time.perf_counter()
        per = max(1, CHUNK // H)
        for lo in range(0, len(idx), per):
            i = idx[lo:lo + per]
            inputs = _inputs(feats, i, zero, sc_)
            out = fn(**inputs)
            step[i] = out["step"]
            if busy is not None:  # the seconds in kernels: the step less its waits (host wait as breakdown's)
                busy[i] = out["step"] - out["bubble"] - np.maximum(0.0, out["host_wait"]) - out["straggler_wait"]
            bar.update(len(i) * H)
        eval_s += time.perf_counter() - c1
    bar.close()
    return SweepResult(lay, hw, step, evaluated, dict(rejected), compile_s, eval_s,
                       {"model": sc.model, "cluster": raw.get("cluster", "dgx-a100"), "training": tr,
                        "parallel": sc.parallel,
                        "run": sc.run, "board_power_w": float(sc.cluster.device.board_power_w),
                        "seq_len": plan["seq_len"]}, busy)


def _sweep_runtimes(raw: dict, frameworks, gpus, top, hardware, progress) -> SweepResult:
    """:func:`sweep` of ``raw`` under each runtime of ``frameworks`` (``training.framework`` given as a list), in one
    result whose layouts carry their ``framework``. ``ValueError`` naming ``training.framework`` for an empty list,
    a repeated or unknown name; a runtime under which nothing is feasible adds its reasons to the others' (each
    prefixed with the runtime), as does one that refuses the scenario (a schedule its engine does not run); when
    nothing is feasible under any, the sweep says why under each (one runtime's refusal, or the same refusal of all,
    as it is)."""
    names = list(frameworks)
    if not names:
        raise ValueError("training.framework: an empty list; give one runtime, or several to search")
    for name in names:
        if not isinstance(name, str):
            raise ValueError(f"training.framework: each entry names a runtime, got {name!r}")
        runtime_of(name)  # an unknown name: ValueError naming training.framework, with "did you mean"
    if len(set(names)) < len(names):
        raise ValueError(f"training.framework: {sorted({n for n in names if names.count(n) > 1})[0]!r} given twice")
    results, refused = {}, {}
    for name in names:
        one = {**raw, "training": {**raw["training"], "framework": name}}
        try:
            results[name] = sweep(one, gpus, top, hardware, progress)
        except ValueError as e:
            refused[name] = str(e)
    if not results:
        if len(set(refused.values())) == 1:  # the scenario's own refusal, whatever the runtime
            raise ValueError(next(iter(refused.values())))
        raise ValueError("sweep: no valid configuration under any runtime; " +
                         "; ".join(f"{k}: {v}" for k, v in refused.items()))
    out = SweepResult.of_runtimes(results)
    for name, why in refused.items():
        out.rejected[f"training.framework {name}: {why}"] = 0
    return out


def _json_array(obj) -> np.ndarray:
    """``obj`` as JSON text in an array of bytes (:func:`compiled.arrays` holds arrays only; JSON is exact for
    floats, ints, strings and booleans)."""
    return np.frombuffer(json.dumps(obj, default=lambda x: x.item()).encode(), dtype=np.uint8)


def _from_json_array(a: np.ndarray):
    return json.loads(a.tobytes().decode())


def _cached_plan(sc, w, token: tuple, gpu_counts: list, global_batch: int, fixed: dict) -> dict:
    """The checks of the scenario's model, then ``rows`` (its valid layouts on each GPU count, :func:`.space.layouts`),
    ``rejected`` (each reason's count) and ``seq_len`` (a transformer's sequence, else None): through the persistent
    cache of :mod:`concurrency_model.compiled` for a model that is the same in every process
    (:func:`~concurrency_model.training.workload.stable_model`), so that a later process sweeping the same scenario
    neither builds the model nor enumerates its layouts again. A scenario the checks refuse is refused every time
    (nothing is written)."""
    def build() -> dict:
        tr = sc.training
        check_lora(tr.lora_rank, tr.lora_base_dtype, w.graph(1))
        check_applies(w.expert_imbalance, w.expert_count)
        w.check_batch_norm(tr.batch_norm)
        check_modules(w.graph(1).layers(), w.selective)
        rows, rejected = [], Counter()
        for n in gpu_counts:
            lay, rej = layouts(w, n, global_batch, fixed)
            rows += [{"gpus": n, **x} for x in lay]
            rejected.update(rej)
        shape = transformer_shape(w.graph(1))
        return {"json": _json_array({"rows": [[r[c] for c in LAYOUT_COLUMNS] for r in rows],
                                     "rejected": dict(rejected), "seq_len": shape["s"] if shape else None})}
    got = _from_json_array((compiled.arrays("sweep_plan", token, build) if stable_model(sc.model) else build())["json"])
    return {**got, "rows": [dict(zip(LAYOUT_COLUMNS, r)) for r in got["rows"]]}


def _cached_memory(sc, w, lay: pd.DataFrame, token: tuple) -> dict:
    """:func:`_memory` through the persistent cache of numbers (keyed by the scenario and the layouts), for a model
    that is the same in every process."""
    if not stable_model(sc.model):
        return _memory(sc, w, lay)
    h = hashlib.sha256()
    for c in LAYOUT_COLUMNS:
        h.update(c.encode() + b"\0" + "\0".join(map(repr, lay[c].tolist())).encode() + b"\0")
    return compiled.arrays("sweep_memory", (token, h.hexdigest()), lambda: _memory(sc, w, lay))


def _memory(sc, w, lay: pd.DataFrame) -> dict:
    """Per layout (hardware-independent), one lambdified expression per structural variant: ``state`` (the trained
    model state the optimizer streams), ``model_state``, ``act`` (activations), ``mem`` (the central figure, with
    what the runtime adds), ``upper`` (the band's upper end) and ``split/<part>`` (weights, gradients, optimizer
    state) bytes a device."""
    tr = sc.training
    shape = transformer_shape(w.graph(1))
    state, model_state, mem, act = np.zeros(len(lay)), np.zeros(len(lay)), np.zeros(len(lay)), np.zeros(len(lay))
    upper = np.zeros(len(lay))  # the band's upper end (:mod:`concurrency_model.parallel.allocator`)
    hopper = allocator.is_hopper(sc.cluster.device.name)
    split = {k: np.zeros(len(lay)) for k in compose.STATE_PARTS}  # the model state's weights, gradients, optimizer
    mem_schedule = np.where((lay["schedule"] == "interleaved") & (lay["interleave"] == 1), "1f1b", lay["schedule"])
    keys = pd.DataFrame({"s": mem_schedule, "r": lay["recompute"], "q": lay["sequence_parallel"],
                         "z": lay["zero_stage"], "one": lay["pipeline"] == 1, "a": lay["context_algorithm"],
                         "e": lay["expert"]})
    act_graph = np.zeros(len(lay))
    if shape is None:
        keyed = list(zip(lay["microbatch_size"], lay["recompute"], lay["tensor"]))
        per_b = {(b, r, t): w.activation_bytes(int(b), r, int(t)) for b, r, t in set(keyed)}
        act_graph = np.array([per_b[k] for k in keyed])
    for (s_, r_, q_, z_, one, a_, e_), idx in keys.groupby(["s", "r", "q", "z", "one", "a", "e"]).indices.items():
        frozen_bytes = w.frozen_weight_bytes(int(e_))
        fw = tr.framework or default_framework(int(z_))  # null: the runtime each layout's ZeRO stage implies
        sac = compose.sac_of(fw, w.graph(1))  # torchtitan's per-op selective checkpointing under fsdp2
        sharded = allocator.state_zero_stage(fw, state_dtype(tr.dtype), int(z_))  # as the model state is sharded
        shape_t = w.memory_shape(shape, fw)
        f = compose.memory_fn(w.state_params(int(e_)), tr.optimizer, tr.dtype, sharded, s_, r_, bool(q_),
                              shape_t, bool(one), a_, shape["kv"] if shape else None, w.replicated_params,
                              frozen_bytes, sac, w.embedding_params, tr.optimizer_dtype)
        L = lay.iloc[idx]
        st, ac = f(*(L[c].to_numpy(dtype=float) for c in ("microbatch_size", "tensor", "pipeline", "microbatches",
                                                         "interleave", "data")), act_graph[idx],
                   L["context"].to_numpy(dtype=float))
        if shape is None and s_ == "gpipe" and r_ == "full":  # GPipe's re-materialisation of a CNN, per layout
            ac = np.array([gpipe_activation_bytes(w, shape, s_, r_, int(x.microbatch_size), int(x.tensor),
                                                  bool(x.sequence_parallel), int(x.pipeline), int(x.microbatches),
                                                  int(x.context), x.context_algorithm, int(x.expert),
                                                  tr.host_overhead_s) or a for x, a in zip(L.itertuples(), ac)])
        frozen = compose.frozen_bytes(frozen_bytes, int(z_), bool(one), L["tensor"].to_numpy(float),
                                      L["pipeline"].to_numpy(float), (L["data"] * L["context"]).to_numpy(float))
        runtime = compose.framework_memory_fn(fw, w.state_params(int(e_)), tr.dtype, int(z_), s_, r_,
                                              bool(q_), shape_t, bool(one), hopper, w.replicated_params, sac,
                                              tr.loss, w.embedding_params, tr.cuda_context_bytes)(
            *(L[c].to_numpy(dtype=float) for c in ("microbatch_size", "tensor", "pipeline", "microbatches",
                                                   "interleave", "data")), ac, L["context"].to_numpy(dtype=float))
        extra = sum(runtime[k] for k in allocator.PARTS)  # what the runtime adds (0 for "ideal")
        # ZeRO 1 with expert parallelism: the experts' optimizer state over d / e ranks (.training.prepare's x_opt,
        # linear in 1 / (t p d))
        x_opt = w.expert_optimizer_extra(int(e_), sharded, tr.optimizer, state_dtype(tr.dtype), 1, 1, 1,
                                         tr.optimizer_dtype) / (
            (L["tensor"] * L["pipeline"] * L["data"] * L["context"]).to_numpy(float))
        st = st + x_opt
        state[idx], mem[idx] = st - frozen, st + ac + extra  # the optimizer streams the trained state (:mod:`.lora`)
        if sharded != int(z_):  # DeepSpeed's BF16_Optimizer: its memory sharded, its step's time stage 0's
            state[idx] += unsharded_optimizer_bytes(w, tr, int(z_), sharded, int(e_), bool(one), frozen_bytes,
                                                    L["tensor"].to_numpy(float), L["pipeline"].to_numpy(float),
                                                    (L["data"] * L["context"]).to_numpy(float))
        model_state[idx], act[idx] = st, ac
        upper[idx] = st + ac + extra + allocator.upper_headroom_bytes(fw, st + ac + extra, runtime)
        parts = compose.state_parts_fn(w.state_params(int(e_)), tr.optimizer, tr.dtype, sharded, bool(one),
                                       w.replicated_params, frozen_bytes, w.embedding_params, tr.optimizer_dtype)(
            L["tensor"].to_numpy(float), L["pipeline"].to_numpy(float), (L["data"] * L["context"]).to_numpy(float))
        for k in compose.STATE_PARTS:
            split[k][idx] = parts[k] + (x_opt if k == "optimizer" else 0.0)
    return {"state": state, "model_state": model_state, "mem": mem, "act": act, "upper": upper,
            **{f"split/{k}": v for k, v in split.items()}}


# the layout columns :func:`_features` reads
FEATURE_COLUMNS = ("microbatch_size", "tensor", "sequence_parallel", "recompute", "pipeline", "context",
                   "context_algorithm", "expert", "data", "zero_stage", "microbatches", "interleave")


def _cached_features(sc, w, lay: pd.DataFrame, state: np.ndarray, scales: dict) -> dict:
    """:func:`_features` through the persistent cache of :mod:`concurrency_model.compiled` (its arrays, keyed by
    the workload's identity, the layouts, their model-state bytes and the hardware scales, with the package's
    sources): a later process sweeping the same scenario reads the stage tables, partitions and communication
    triples instead of timing every layer and partitioning every layout again. A model that is not the same in
    every process (a graph object, a file) is not cached."""
    tr = sc.training
    args = (w, lay, state, scales, sync_of(sc), tr.host_overhead_s, tr.batch_norm)
    if not stable_model(sc.model):
        return _features(*args)
    h = hashlib.sha256()
    for c in FEATURE_COLUMNS:
        h.update(c.encode() + b"\0" + "\0".join(map(repr, lay[c].tolist())).encode() + b"\0")
    for name, a in (("state", state), *sorted(scales.items())):
        a = np.ascontiguousarray(a, dtype=float)
        h.update(name.encode() + b"\0" + repr(a.shape).encode() + a.tobytes())
    # every parallel and training field is in the key, not a list of those known to matter: a field added later
    # (a runtime's behaviour, a stage split) can then never read another scenario's tables
    token = scenario_key(sc) + (args[4:], policies_of(tr, 0), h.hexdigest())

    def build() -> dict:
        f = _features(*args)
        return {f"{k}/{n}" if isinstance(v, dict) else k: a for k, v in f.items() if k != "opt_w"
                for n, a in (v.items() if isinstance(v, dict) else [(None, v)])}
    flat = compiled.arrays("sweep_features", token, build)
    out: dict = {"opt_w": w}
    for name, a in flat.items():
        k, _, n = name.partition("/")
        if n:
            out.setdefault(k, {})[n] = a
        else:
            out[k] = a
    return out


def _features(w, lay: pd.DataFrame, state: np.ndarray, scales: dict,
              sync: tuple = ("allreduce", 0, "none", "ring", ("ideal",)),
              host_s: float | None = None, batch_norm: str = "local") -> dict:
    """Per layout: indices into per-stage tables of compute seconds on the grid and host issue seconds
    (``host_s`` per kernel, :func:`~concurrency_model.training.estimate.host_seconds`), communication triples
    (with ``batch_norm`` ``sync``, the stage's batch-norm all-reduces over the layout's data replicas)."""
    keys = list(zip(lay["microbatch_size"].astype(int), lay["tensor"].astype(int), lay["sequence_parallel"].astype(bool),
                    lay["recompute"], lay["pipeline"].astype(int), lay["context"].astype(int),
                    lay["context_algorithm"], lay["expert"].astype(int)))
    uniq = {k: n for n, k in enumerate(dict.fromkeys(keys))}
    hw = (scales["flops"], scales["mem_bw"], scales["launch"])
    tables = {c: np.empty((len(uniq), len(scales["flops"]))) for c in ("f", "b", "r", "w", "blk_f", "blk_b", "h_f",
                                                                       "h_b")}
    tp = {c: np.empty((len(uniq), 3)) for c in ("tp_f", "tp_b", "tp_r", "ep_f", "ep_b", "ep_r", "kv", "a2a",
                                                 "halo_f", "halo_b")}
    cp = {c: np.empty(len(uniq)) for c in ("c", "layers", "rec_layers", "gathered")}
    fill = np.empty(len(uniq))
    bn_channels = [()] * len(uniq)
    host = host_per_kernel(w.dev, host_s)  # the stage partition weighs each layer's host seconds too
    for k, n in uniq.items():
        st = w.stage(*k, host)
        bn_channels[n], fill[n] = st["bn_channels"], st["fill"]  # the fill share: a ratio at the nominal device
        tables["h_f"][n], tables["h_b"][n] = host_seconds(st, w.dev, host_s)  # not scaled by the hardware
        for c in ("f", "b", "r", "w"):
            tables[c][n] = st[c].seconds(*hw)
        for c in ("blk_f", "blk_b"):
            tables[c][n] = st["cp"][c].seconds(*hw)
        for c in ("tp_f", "tp_b", "tp_r", "ep_f", "ep_b", "ep_r"):
            tp[c][n] = st[c]
        for c in ("kv", "a2a", "halo_f", "halo_b"):
            tp[c][n] = st["cp"][c]
        for c in cp:
            cp[c][n] = st["cp"][c]
    at = np.array([uniq[k] for k in keys])
    ds = lay["data"].astype(int).to_numpy()
    zs = lay["zero_stage"].astype(int).to_numpy()
    # the layout's own recompute and ZeRO stage (a runtime that gathers again for the recomputed forward)
    dp = [w.data_parallel(k[1], k[4], d * k[5], *sync[:5], k[3], e=k[7], zero=z) for k, d, z in zip(keys, ds, zs)]
    out = {"at": at, "tables": tables, "tp": tp, "cp": cp, "state": state, "fill": fill,
           "p2p": np.array([w.p2p(*k[:5], d, *k[5:7], host, p2p_scatter_gather(runtime_name(sync, z)))
                            for k, d, z in zip(keys, ds, zs)]).reshape(-1, 3),
           "p": lay["pipeline"].to_numpy(dtype=float), "m": lay["microbatches"].to_numpy(dtype=float),
           "v": lay["interleave"].to_numpy(dtype=float), "opt_w": w,
           "p2p_blocks": np.array([float(p2p_blocking(runtime_name(sync, z), s))
                                   for z, s in zip(zs, lay["schedule"])])}
    for c in ("ar", "rs", "ag", "agb", "x_dp", "emb", "last_ar", "last_rs"):
        out[c] = np.array([x[c] for x in dp]).reshape(-1, 3)
    bn = np.array([w.batch_norm_sync(bn_channels[n], k[1], d) if batch_norm == "sync" else ZERO_TRIPLE
                   for k, n, d in zip(keys, at, ds)], dtype=float).reshape(-1, 3)
    full = (lay["recompute"] == "full").to_numpy()[:, None]
    out["bn_f"] = out["bn_b"] = bn
    out["bn_r"] = np.where(full, bn, 0.0)
    out["kappa"] = np.array([x["kappa"] for x in dp], dtype=float)
    return out


def _inputs(f: dict, i: np.ndarray, zero: int, scales: dict) -> dict:
    """Inputs of the lambdified step for layouts ``i`` (rows) on every hardware point (columns); the
    context-parallel exposure by :func:`~concurrency_model.training.workload.context_exposed`, as
    :func:`~concurrency_model.training.prepare.step_inputs` computes it."""
    s_in, s_out = scales["intra_bw"][None, :], scales["inter_bw"][None, :]

    def comm(tr):
        tr = tr[i]
        return tr[:, :1] + np.maximum(tr[:, 1:2] / s_in, tr[:, 2:3] / s_out)
    at = f["at"][i]
    cp = {k: v[at][:, None] for k, v in f["cp"].items()}
    c_cf = c_cb = 0.0  # as step_inputs: no context parallelism, exactly 0
    if (cp["c"] > 1).any():
        c_cf, c_cb = context_exposed(cp["c"], cp["layers"], cp["rec_layers"], f["tables"]["blk_f"][at],
                                     f["tables"]["blk_b"][at], comm(f["tp"]["kv"][f["at"]]),
                                     comm(f["tp"]["a2a"][f["at"]]), cp["gathered"])
        c_cf, c_cb = c_cf + comm(f["tp"]["halo_f"][f["at"]]), c_cb + comm(f["tp"]["halo_b"][f["at"]])
        one = cp["c"] == 1
        c_cf, c_cb = np.where(one, 0.0, c_cf), np.where(one, 0.0, c_cb)
    triples = {**{k: f["tp"][k][f["at"]] for k in ("tp_f", "tp_b", "tp_r", "ep_f", "ep_b", "ep_r")}, "p2p": f["p2p"],
               **{k: f[k] for k in ("ar", "rs", "ag", "agb", "x_dp", "emb", "last_ar", "last_rs", "bn_f", "bn_b",
                                    "bn_r")}}
    opt = f["opt_w"].optimizer_seconds(f["state"][i, None], scales["mem_bw"][None, :], scales["launch"][None, :])
    cons = f["consistency"]
    return assemble(f["tables"]["f"][at], f["tables"]["b"][at], f["tables"]["r"][at], triples, comm, zero,
                    f["p"][i, None], f["m"][i, None], f["v"][i, None], opt, f["kappa"][i, None], c_cf, c_cb,
                    f["tables"]["h_f"][at], f["tables"]["h_b"][at], cons["straggle"][i, None],
                    cons["sync_frac"][i, None], cons["exposed"], f["tables"]["w"][at], f["p2p_blocks"][i, None],
                    f["fill"][at][:, None])
