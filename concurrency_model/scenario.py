"""Scenario files (DESIGN.md "A scenario file"): model + cluster + parallel + training (+ run, inference), JSON or
TOML; every field in docs/scenario.md.

Fields left out take these defaults; the number of devices is ``data * tensor * pipeline * context``
(``context``: context-parallel degree, the sequence of every sample split over that many devices, by
``context_algorithm`` ``ring`` (ring attention) or ``ulysses`` (all-to-all of heads), or a CNN's feature maps
split by rows; see :mod:`concurrency_model.training.workload`; ``tensor_layers``: ``all`` or ``fc``,
Krizhevsky's hybrid, :mod:`concurrency_model.parallel.layerwise`). Every check raises ``ValueError`` naming
the field (``parallel.tensor: ...``). Every check of a field's own value, or of fields of one section (or of
``parallel`` and ``training`` together), is made here, when the file is loaded, before a model is built; the
checks that need the model, the device or the cluster (``parallel.context`` dividing its sequence length, a
dtype the device lacks) are made when the scenario is estimated (docs/scenario.md, "Checks made later").

A loaded :class:`Scenario` holds its sections typed (issue 37): frozen dataclasses :class:`Parallel`,
:class:`Training`, :class:`Inference` and :class:`Run`, one field each with its default, parsed and checked by their
``from_dict`` (one section) and :func:`check_layout` (parallel and training together); modules read them by
attribute (``sc.parallel.tensor``), copy them with ``dataclasses.replace`` and write them with ``to_dict()``.
"""
from __future__ import annotations

import copy
import json
import tomllib
from dataclasses import dataclass, fields
from pathlib import Path

from .checks import count, currency, did_you_mean, file_text, json_object, number
from .choices import (BATCH_NORM, CONSISTENCY, CONTEXT_ALGORITHMS, DISPATCHERS, LORA_BASES, LOSSES, OPTIMIZERS,
                      SCHEDULES, STAGE_SPLITS, TENSOR_LAYERS, TOPOLOGIES, check_lora_base, parse_sparsity)
from .hardware.clusters import Cluster, load_cluster
from .ops.routing import check_imbalance
from .parallel.batch_size import DEFAULT_CEILING
from .parallel.recompute import recompute_modules
from .parallel.runtime import (FP8_RECIPES, FRAMEWORKS, REDUCE_DTYPES, cuda_graph_scopes, default_framework,
                               has_zero_stage, kernel_policies, overlaps, runs_schedule, runs_with,
                               runtime_of)
from .parallel.stage_layout import check_stage_layout
from .units import DTYPE_BYTES, KV_DTYPES, WEIGHT_BYTES


@dataclass(frozen=True, slots=True)
class Parallel:
    """The scenario's ``parallel`` section (DESIGN.md "A scenario file"), each field with its default; parse a
    file's object with :meth:`from_dict` (every check of one section), copy with ``dataclasses.replace``.

    >>> p = Parallel.from_dict({"data": 8, "tensor": 2})
    >>> p.tensor, p.global_batch, Parallel().schedule
    (2, 8, '1f1b')
    """
    data: int = 1
    tensor: int = 1
    pipeline: int = 1
    interleave: int = 1
    sequence_parallel: bool = False
    microbatch_size: int = 1
    global_batch: int | None = None  # null: data x microbatch_size (one microbatch a replica)
    schedule: str = "1f1b"
    context: int = 1
    context_algorithm: str = "ring"
    expert: int = 1
    tensor_layers: str = "all"
    expert_imbalance: float | str = 1.0
    tp_overlap: bool = False  # async tensor parallelism (training.workload.overlap_exposed)
    moe_dispatcher: str = "alltoall"
    expert_overlap: bool = False
    # how pipeline stages are cut (parallel.partition): balanced, layers, counted, or a tuple of decoder layers per
    # virtual stage (parallel.stage_layout)
    stage_split: str | tuple = "balanced"

    def __post_init__(self):
        if self.global_batch is None:  # as a file that leaves it out (Python callers giving a bare Parallel)
            object.__setattr__(self, "global_batch", self.data * self.microbatch_size)

    @classmethod
    def from_dict(cls, given) -> Parallel:
        """The section from a file's object (``None``: every default), checked field by field and as a whole
        (``ValueError`` naming the field, with "did you mean" for a misspelt name or choice)."""
        layout = given.get("stage_split") if isinstance(given, dict) else None
        layout = None if isinstance(layout, str) else layout  # a name is one of CHOICES
        if layout is not None:  # a layout (parallel.stage_layout), checked once the degrees are known
            given = {k: v for k, v in given.items() if k != "stage_split"}
        par = _section(given, "parallel", PARALLEL)
        if layout is not None:
            par["stage_split"] = check_stage_layout(layout, par["pipeline"], par["interleave"])
        if par["global_batch"] is None:
            par["global_batch"] = par["data"] * par["microbatch_size"]
        if par["global_batch"] % (par["data"] * par["microbatch_size"]):
            raise ValueError(f"parallel.global_batch: {par['global_batch']} is not divisible by data x "
                             f"microbatch_size = {par['data'] * par['microbatch_size']}")
        if par["interleave"] > 1 and par["schedule"] != "interleaved":
            raise ValueError(f"parallel.interleave: {par['interleave']} chunks need schedule \"interleaved\"")
        check_interleaved(par["schedule"], par["global_batch"] // (par["data"] * par["microbatch_size"]),
                          par["pipeline"])
        par["expert_imbalance"] = check_imbalance("parallel.expert_imbalance", par["expert_imbalance"])
        out = cls(**par)
        _check_expert_overlap(out)
        if out.tp_overlap and out.tensor > 1 and not out.sequence_parallel:
            raise ValueError("parallel.tp_overlap: async tensor parallelism micro-pipelines the sequence-parallel "
                             "all-gathers and reduce-scatters with their GEMMs; set parallel.sequence_parallel true")
        return out

    def to_dict(self) -> dict:
        """The fields as a JSON object, in the order of the scenario file's documentation."""
        return {k: getattr(self, k) for k in PARALLEL}


@dataclass(frozen=True, slots=True)
class Training:
    """The scenario's ``training`` section, each field with its default (:meth:`from_dict` checks a file's).

    >>> Training.from_dict({"zero_stage": 1}).zero_stage, Training().dtype
    (1, 'bf16')
    """
    dtype: str = "bf16"
    recompute: str = "none"
    optimizer: str = "adam"
    # the dtype of the optimizer's master copy and state tensors (parallel.memory.model_state_bytes)
    optimizer_dtype: str = "fp32"
    zero_stage: int = 0
    overlap: bool | None = None  # null: the runtime's own (parallel.runtime.overlaps)
    sync: str = "allreduce"
    ps_servers: int = 0
    compression: str = "none"
    host_overhead_s: float | None = None
    consistency: str = "synchronous"
    staleness: int = 0
    local_steps: int = 1
    straggler_cv: float = 0.0
    gossip_topology: str = "ring"
    batch_norm: str = "local"
    max_global_batch: int = DEFAULT_CEILING
    lora_rank: int = 0
    lora_base_dtype: str | None = None
    framework: str | None = None
    bucket_bytes: float | None = None
    prefetch: int | None = None
    loss: str | None = None
    fp8_recipe: str | None = None
    target: object = None  # a quality target (:mod:`concurrency_model.convergence.target`)
    reduce_dtype: str | None = None  # the gradients' dtype on the wire; null: the runtime's (parallel.runtime)
    compile: bool = True  # false: eager PyTorch's norm and rotary kernels (timing.graph.eager_kernels)
    cuda_graph: str = "none"  # the parts a CUDA graph replays (parallel.host.cuda_graph_scopes)
    # Megatron-Core's modules of a selective recompute (parallel.recompute.recompute_modules); null: its default,
    # the attention core
    recompute_modules: object = None
    # the CUDA context and the modules it loads, outside the caching allocator; null: PyTorch's lazy loading
    # (parallel.allocator.CUDA_CONTEXT_BYTES); a stack that loads every module at start-up holds more
    cuda_context_bytes: float | None = None

    @classmethod
    def from_dict(cls, given) -> Training:
        """The section from a file's object (``None``: every default), checked field by field and as a whole;
        the checks that need the parallel section are :func:`check_layout`'s."""
        if isinstance(given, dict) and isinstance(given.get("framework"), (list, tuple)):
            raise ValueError(f"training.framework: one runtime here, got {list(given['framework'])!r} (a list of "
                             "runtimes is searched by sweep)")
        tr = cls(**_section(given, "training", TRAINING))
        if tr.overlap is not None and not isinstance(tr.overlap, bool):
            raise ValueError(f"training.overlap: must be true, false or null (the runtime's own), got {tr.overlap!r}")
        if tr.zero_stage > 3:
            raise ValueError(f"training.zero_stage: must be 0, 1, 2 or 3, got {tr.zero_stage}")
        if not has_zero_stage(tr.framework, tr.zero_stage) and tr.framework in FRAMEWORKS:
            raise ValueError(f"training.zero_stage: {tr.framework} has no ZeRO-{tr.zero_stage} mode (its sharding "
                             "strategies: NO_SHARD = 0, SHARD_GRAD_OP = 2, FULL_SHARD = 3); use 0, 2 or 3, or "
                             "training.framework megatron / deepspeed")
        check_lora_base(tr.lora_rank, tr.lora_base_dtype)  # a quantized frozen base needs adapters
        # null: the runtime the ZeRO stage implies, resolved per layout (a sweep searches the stage)
        runtime_of(tr.framework or default_framework(tr.zero_stage), tr.bucket_bytes, tr.prefetch,
                   reduce_dtype=tr.reduce_dtype)
        if (tr.sync != "allreduce" or tr.compression != "none" or tr.consistency != "synchronous") and tr.zero_stage:
            raise ValueError("training.zero_stage: parameter servers, gossip, gradient compression and consistency "
                             f"models other than synchronous are modelled with ZeRO 0, got {tr.zero_stage}")
        if tr.gossip_topology != "ring" and tr.sync != "gossip":
            raise ValueError(f"training.gossip_topology: only used with sync 'gossip', got sync {tr.sync!r}")
        _check_consistency(tr)
        if tr.batch_norm == "sync" and (tr.consistency != "synchronous" or tr.sync == "gossip"):
            raise ValueError("training.batch_norm: \"sync\" all-reduces every layer's statistics over all replicas "
                             "in every step, which needs synchronous consistency and no gossip, got consistency "
                             f"{tr.consistency!r} and sync {tr.sync!r}")
        if tr.fp8_recipe is not None and not kernel_policies(tr.framework, tr.zero_stage)[1].startswith("torchao"):
            raise ValueError(f"training.fp8_recipe: torchao's {tr.fp8_recipe} scaling runs under framework fsdp2 "
                             f"(torchtitan); framework {tr.framework or default_framework(tr.zero_stage)!r} casts "
                             "as Transformer Engine does")
        if tr.compression == "sfb" and tr.sync != "allreduce":
            raise ValueError(f"training.compression: sfb broadcasts the factors from worker to worker and "
                             f"all-reduces the rest, which needs sync \"allreduce\", got {tr.sync!r}")
        if tr.compression == "sfb" and tr.lora_rank:
            raise ValueError("training.compression: sfb sends the factors of whole fully connected layers' "
                             "gradients; with LoRA (training.lora_rank) only the adapters have gradients")
        in_range("training.host_overhead_s", tr.host_overhead_s, none_ok=True)  # host s a kernel
        in_range("training.cuda_context_bytes", tr.cuda_context_bytes, none_ok=True)
        cuda_graph_scopes(tr.cuda_graph)
        if tr.recompute_modules is not None:
            recompute_modules(tr.recompute_modules)
            if tr.recompute != "selective":
                raise ValueError("training.recompute_modules: the modules of a selective recompute; needs "
                                 f"training.recompute \"selective\", got {tr.recompute!r}")
            if kernel_policies(tr.framework, tr.zero_stage)[0] != "attention":
                raise ValueError("training.recompute_modules: Megatron-Core's modules; framework "
                                 f"{tr.framework!r} recomputes by its own per-op policy")
        if tr.target is not None:  # a quality target: its curve fitted and its unit checked now (issue 40)
            from .convergence.target import curve_of
            curve_of(tr.target, "training.target", steps=True)
        return tr

    def to_dict(self) -> dict:
        """The fields as a JSON object, in the order of the scenario file's documentation."""
        return {k: getattr(self, k) for k in TRAINING}


COMPRESSIONS = ("none", "fp16", "bf16", "int8", "1bit", "terngrad", "qsgd", "threshold", "topk", "dgc", "powersgd",
                "sfb")
OPTIMIZER_DTYPES = ("fp32", "bf16")  # training.optimizer_dtype (:func:`.parallel.memory.model_state_bytes`)
BATCHING = ("static", "continuous")  # inference.batching (:mod:`concurrency_model.serving.continuous_batching`)
# inference.output_lengths and prompt_lengths: the laws of :mod:`concurrency_model.serving.output_lengths`
LENGTH_LAWS = ("fixed", "uniform", "geometric")
# inference.weight_dtype: the stored formats a served weight may take (:mod:`concurrency_model.serving.overheads`);
# nf4, QLoRA's NormalFloat, is a frozen training base's (training.lora_base_dtype)
WEIGHT_DTYPES = tuple(k for k in WEIGHT_BYTES if k != "nf4")
SPECULATIVE_KEYS = ("draft", "tokens", "acceptance")  # inference.speculative (serving.speculative)
CHOICES = {"schedule": SCHEDULES, "context_algorithm": CONTEXT_ALGORITHMS, "tensor_layers": TENSOR_LAYERS,
           "recompute": ("none", "selective", "full"),
           "optimizer": OPTIMIZERS, "optimizer_dtype": OPTIMIZER_DTYPES, "dtype": tuple(DTYPE_BYTES),
           "sync": ("allreduce", "parameter_server", "gossip"), "compression": COMPRESSIONS,
           "gossip_topology": TOPOLOGIES, "consistency": CONSISTENCY, "batch_norm": BATCH_NORM,
           "lora_base_dtype": LORA_BASES, "batching": BATCHING, "weight_dtype": WEIGHT_DTYPES,
           "output_lengths": LENGTH_LAWS, "prompt_lengths": LENGTH_LAWS,
           "kv_dtype": KV_DTYPES, "framework": FRAMEWORKS,
           "loss": LOSSES, "fp8_recipe": FP8_RECIPES, "reduce_dtype": tuple(REDUCE_DTYPES),
           "moe_dispatcher": DISPATCHERS, "stage_split": STAGE_SPLITS}  # a field whose default is null may stay null
PARALLEL = {f.name: f.default for f in fields(Parallel)}  # each field's default, in the documentation's order
TRAINING = {f.name: f.default for f in fields(Training)}
TOP = ("model", "cluster", "parallel", "training", "run", "inference", "name", "notes")

# Plausible ranges of the numeric fields, (low, high, why): far enough past every real model, machine and run that
# no real scenario meets them, near enough that a typo (1e12 for 1e2) is refused before it hangs a search or
# overflows a float. Integers past 2**53 are refused everywhere (checks.EXACT). [D] The yardsticks, as recalled: GPU
# clusters of about 10^5 GPUs (xAI Colossus, 2024); batches of 65,536 images (Ying et al. 2018, "Image classification
# at supercomputer scale"); context windows of 10^7 tokens (Llama 4 Scout, 2025).
_DEVICES = "devices; 2^20 is ten times the largest GPU clusters built"
_TOKENS = "tokens; 2^24 = 16.8M is past the longest context windows"
COUNTS = {"data": (1, 2**20, _DEVICES), "tensor": (1, 2**20, _DEVICES), "pipeline": (1, 2**20, _DEVICES),
          "context": (1, 2**20, _DEVICES), "expert": (1, 2**20, _DEVICES),
          "interleave": (1, 2**10, "model chunks a pipeline stage holds, each at least one layer"),
          "microbatch_size": (1, 2**20, "samples a replica runs at once"),
          "global_batch": (1, 2**24, "samples a step; published batches reach about 2^16"),
          "max_global_batch": (1, 2**24, "samples a step; published batches reach about 2^16"),
          "zero_stage": (0, None, ""),  # 0-3, checked in load_scenario
          "ps_servers": (0, 2**20, "parameter-server processes; 0: one per replica"),
          "staleness": (0, 10**4, "steps a replica may run ahead of the slowest"),
          "local_steps": (1, 10**6, "steps a replica takes between averagings"),
          "lora_rank": (0, 2**16, "the rank of a LoRA adapter, below the layer's width"),
          "batch": (1, 2**20, "sequences decoded together"),
          "prompt_len": (1, 2**24, _TOKENS), "decode_len": (1, 2**24, _TOKENS), "prefix_len": (0, 2**24, _TOKENS),
          "max_batched_tokens": (1, 2**30, "tokens an iteration runs")}
_HOST = "host seconds to issue one kernel; eager frameworks take 5-100 us (parallel.host)"
NUMBERS = {"training.straggler_cv": (0.0, 1.0, "standard deviation of a replica's compute time over its mean; at 1 "
                                               "the spread equals the mean"),
           "training.host_overhead_s": (0.0, 1.0, _HOST), "inference.host_overhead_s": (0.0, 1.0, _HOST),
           "training.cuda_context_bytes": (0.0, 64 * 2 ** 30, "bytes the CUDA context and its loaded modules hold "
                                                              "on a device, about 0.3-2 GB"),
           "inference.price_per_gpu_hour": (0.0, 1e4, "money a GPU-hour"),
           "inference.load_rps": (0.0, 1e9, "requests a second")}


def in_range(field: str, v, *, none_ok: bool = False):
    """``v`` checked against :data:`NUMBERS`' range of ``field`` (``ValueError`` naming the field, the range and
    its reason); ``load_rps`` must be above 0, the others may be 0.

    >>> in_range("training.straggler_cv", 0.1)
    0.1
    """
    low, high, why = NUMBERS[field]
    return number(field, v, low=low, low_ok=not field.endswith("load_rps"), high=high, high_ok=True,
                  none_ok=none_ok, why=why)


@dataclass(frozen=True, slots=True)
class Inference:
    """The scenario's ``inference`` section (:mod:`concurrency_model.serving.decoder`), each field with its
    default; :meth:`from_dict` checks a file's.

    >>> Inference.from_dict({"batch": 8}).batch, Inference().prompt_len
    (8, 512)
    """
    batch: int = 1
    prompt_len: int = 512
    decode_len: int = 128
    dtype: str = "fp16"
    weight_dtype: str | None = None
    weight_sparsity: object = None
    host_overhead_s: float = 0.0
    speculative: dict | None = None
    batching: str = "static"  # (:mod:`concurrency_model.serving.continuous_batching`)
    price_per_gpu_hour: float | None = None
    output_lengths: object = "fixed"
    load_rps: float | None = None
    prefix_len: int = 0
    prompt_lengths: object = "fixed"
    max_batched_tokens: int | None = None
    kv_dtype: str | None = None
    currency: str = "USD"

    @classmethod
    def from_dict(cls, given) -> Inference:
        """The section from a file's object (``None``: every default), checked (``ValueError`` naming the field)."""
        out = _section(given, "inference", INFERENCE)  # positive integers, the CHOICES' names
        parse_weight_sparsity(out["weight_sparsity"], out["weight_dtype"], out["dtype"])  # its format, not the device's
        if out["speculative"] is not None:
            out["speculative"] = check_speculative(out["speculative"])  # its object's shape, not its draft model
        check_lengths_alone(out["output_lengths"], out["prompt_lengths"], out["speculative"])
        in_range("inference.host_overhead_s", out["host_overhead_s"])  # host seconds per kernel
        in_range("inference.price_per_gpu_hour", out["price_per_gpu_hour"], none_ok=True)
        out["currency"] = currency("inference.currency", out["currency"])  # the label of the cost columns
        if in_range("inference.load_rps", out["load_rps"], none_ok=True) is not None \
                and out["batching"] != "continuous":
            raise ValueError("inference.load_rps: a load is modelled with batching \"continuous\" (a static batch "
                             "waits for its requests)")
        if out["prefix_len"] >= out["prompt_len"]:
            raise ValueError(f"inference.prefix_len: must be below prompt_len = {out['prompt_len']} (the last prompt "
                             f"position runs to give the first token), got {out['prefix_len']}")
        if out["prefix_len"] and out["speculative"] is not None:
            raise ValueError("inference.prefix_len: a cached prefix with speculative decoding is not modelled")
        if out["max_batched_tokens"] is not None:
            low, high, why = COUNTS["max_batched_tokens"]
            count("inference.max_batched_tokens", out["max_batched_tokens"], low=low, high=high, why=why)
            if out["batching"] != "continuous" or out["speculative"] is not None:
                raise ValueError("inference.max_batched_tokens: a token budget an iteration is modelled with "
                                 "batching \"continuous\" and without speculative decoding")
        return cls(**out)

    def to_dict(self) -> dict:
        """The fields as a JSON object, in the order of the scenario file's documentation."""
        return {k: getattr(self, k) for k in INFERENCE}


INFERENCE = {f.name: f.default for f in fields(Inference)}


@dataclass(frozen=True, slots=True)
class Run:
    """The scenario's ``run`` section, a whole training run (:mod:`concurrency_model.training.run`): ``None``
    is a field the file leaves out; :meth:`from_dict` checks a file's.

    >>> r = Run.from_dict({"tokens": 3e11, "price_per_gpu_hour": 2})
    >>> r.tokens, r.samples, r.to_dict()
    (300000000000.0, None, {'tokens': 300000000000.0, 'price_per_gpu_hour': 2})
    """
    tokens: float | None = None
    samples: float | None = None
    epochs: float | None = None
    price_per_gpu_hour: float | None = None
    currency: str | None = None  # null: CURRENCY
    board_power_w: float | None = None  # null: the device preset's
    gpu_mtbf_hours: float | None = None
    checkpoint_s: float | None = None
    restart_s: float | None = None  # null: 0
    checkpoint_interval_s: float | None = None  # null: Young's optimum

    @classmethod
    def from_dict(cls, run) -> Run:
        """The section from a file's object, checked (``ValueError`` naming ``run.FIELD``); a :class:`Run`
        is returned as it is."""
        return run if isinstance(run, Run) else cls(**_check_run(run))

    def to_dict(self) -> dict:
        """The fields the file gives, as a JSON object."""
        return {k: v for k in RUN_FIELDS if (v := getattr(self, k)) is not None}


@dataclass(frozen=True)
class Scenario:
    """A parsed scenario: model, cluster and the typed sections. Plain dicts given for the sections (the
    Python API) are parsed and checked as a file's are (but for the device's math in ``training.dtype``, which
    :func:`load_scenario` checks).

    >>> sc = Scenario("gpt2", load_cluster("dgx-a100"), {"data": 8, "global_batch": 64}, {"zero_stage": 1})
    >>> sc.parallel.data, sc.training.zero_stage, sc.gpus, sc.microbatches
    (8, 1, 8, 8)
    """
    model: object  # zoo name or spec dict
    cluster: Cluster
    parallel: Parallel
    training: Training
    run: Run | None = None  # a whole training run (:mod:`concurrency_model.training.run`)

    def __post_init__(self):
        plain = not isinstance(self.parallel, Parallel) or not isinstance(self.training, Training)
        if not isinstance(self.parallel, Parallel):
            object.__setattr__(self, "parallel", Parallel.from_dict(self.parallel))
        if not isinstance(self.training, Training):
            object.__setattr__(self, "training", Training.from_dict(self.training))
        if plain:  # the typed sections were checked where they were made
            check_layout(self.parallel, self.training)
        if self.run is not None and not isinstance(self.run, Run):
            object.__setattr__(self, "run", Run.from_dict(self.run))

    @property
    def gpus(self) -> int:
        p = self.parallel
        return p.data * p.tensor * p.pipeline * p.context

    @property
    def microbatches(self) -> int:
        p = self.parallel
        return p.global_batch // (p.data * p.microbatch_size)

    @property
    def overlap(self) -> bool:
        """Whether the step's data-parallel collectives overlap its compute: ``training.overlap``, or (null) the
        runtime's own (:func:`.parallel.runtime.overlaps`)."""
        tr = self.training
        return overlaps(tr.framework, tr.zero_stage, self.parallel.pipeline, tr.overlap)


def _section(given, name: str, defaults: dict) -> dict:
    """A section's object with the defaults filled in, each field checked against its default's kind, its
    :data:`CHOICES` and :data:`COUNTS` (``ValueError`` naming the field)."""
    given = {} if given is None else given  # null: the defaults, as when left out
    if not isinstance(given, dict):
        raise ValueError(f"{name}: expected an object")
    unknown = sorted(set(given) - set(defaults))
    if unknown:
        raise ValueError(f"{name}.{unknown[0]}: unknown field{did_you_mean(unknown[0], defaults)}; allowed: "
                         f"{', '.join(defaults)}")
    out = {**defaults, **given}
    for k, v in out.items():
        default = defaults[k]
        where = f"{name}.{k}"
        if k in CHOICES and v not in CHOICES[k] and not (v is None is default):
            raise ValueError(f"{where}: unknown {v!r}{did_you_mean(v, CHOICES[k])}; allowed: {', '.join(CHOICES[k])}")
        if isinstance(default, bool):
            if not isinstance(v, bool):
                raise ValueError(f"{where}: must be true or false, got {v!r}")
        elif isinstance(default, int) or (k == "global_batch" and v is not None):
            low, high, why = COUNTS[k]
            count(where, v, low=low, high=high, why=why)
    return out


def _check_expert_overlap(par: Parallel) -> None:
    """``ValueError`` naming ``parallel.expert_overlap`` where Megatron-Core's merged schedule cannot run: with
    pipeline stages it needs virtual ones (NVIDIA/Megatron-LM @ 2a75ac12 ``megatron/core/transformer/
    transformer_config.py`` ``__post_init__``). Megatron-Core also refuses it with full recompute (same place); the
    toolkit models the pair (the recomputed forward's all-to-alls hidden as the forward's), as its three recompute
    modes stand for the module lists runtimes recompute (``recompute_modules``), which Megatron-Core allows."""
    if par.expert_overlap and par.pipeline > 1 and par.interleave == 1:
        raise ValueError(f"parallel.expert_overlap: with parallel.pipeline = {par.pipeline} it needs interleaved "
                         "stages (parallel.interleave > 1), as Megatron-Core requires")


def check_interleaved(schedule: str, microbatches: int, pipeline: int) -> None:
    """``ValueError`` naming ``parallel.schedule`` where the interleaved schedule cannot run: it needs the
    microbatches a multiple of the pipeline stages (Narayanan et al. 2021 §2.2.2, as
    :func:`concurrency_model.parallel.pipeline.step_time` states it).

    >>> check_interleaved("interleaved", 6, 4)
    Traceback (most recent call last):
    ...
    ValueError: parallel.schedule: interleaved needs the 6 microbatches to be a multiple of pipeline=4
    """
    if schedule == "interleaved" and microbatches % pipeline:
        raise ValueError(f"parallel.schedule: interleaved needs the {microbatches} microbatches to be a multiple of "
                         f"pipeline={pipeline}")


def check_speculative(spec) -> dict:
    """``inference.speculative``: ``{"draft": MODEL, "tokens": gamma >= 1, "acceptance": alpha in [0, 1]}``
    (:mod:`concurrency_model.serving.speculative`, Leviathan et al. 2023 §3), a copy; ``ValueError`` naming the
    field. The draft model itself is checked where it is built (``inference.speculative.draft``).

    >>> check_speculative({"draft": "gpt2", "tokens": 4, "acceptance": 0.8})["tokens"]
    4
    >>> check_speculative({"draft": "gpt2", "tokens": 4})
    Traceback (most recent call last):
    ...
    ValueError: inference.speculative.acceptance: missing; give draft, tokens, acceptance
    """
    where = "inference.speculative"
    if not isinstance(spec, dict):
        raise ValueError(f"{where}: expected an object with draft, tokens, acceptance")
    missing = [k for k in SPECULATIVE_KEYS if k not in spec]
    unknown = sorted(set(spec) - set(SPECULATIVE_KEYS))
    if missing or unknown:
        raise ValueError(f"{where}.{(missing or unknown)[0]}: {'missing' if missing else 'unknown field'}; "
                         f"give {', '.join(SPECULATIVE_KEYS)}")
    count(f"{where}.tokens", spec["tokens"])  # draft tokens an iteration
    number(f"{where}.acceptance", spec["acceptance"], low_ok=True, high=1, high_ok=True)  # a probability
    return dict(spec)


def parse_weight_sparsity(value, weight_dtype: str | None, dtype: str):
    """``inference.weight_sparsity`` parsed (:func:`concurrency_model.choices.parse_sparsity`: ``None``,
    ``"2:4"`` or a fraction of zeros in [0, 1)), refused with a ``weight_dtype`` other than ``dtype`` (pruning and
    weight-only quantization are not modelled together); whether the device has 2:4 sparse math is checked where
    the device is known (:func:`concurrency_model.serving.overheads.check_weight_sparsity`).

    >>> parse_weight_sparsity("2:4", None, "fp16"), parse_weight_sparsity(0.5, "fp16", "fp16")
    ('2:4', 0.5)
    >>> parse_weight_sparsity(0.5, "int4", "fp16")
    Traceback (most recent call last):
    ...
    ValueError: inference.weight_sparsity: pruning with weight_dtype 'int4' is not modelled; give one of the two
    """
    if value is None:
        return None
    try:
        s = parse_sparsity(value)
    except ValueError as e:
        raise ValueError(f"inference.weight_{e}") from None
    if weight_dtype is not None and weight_dtype != dtype:
        raise ValueError(f"inference.weight_sparsity: pruning with weight_dtype {weight_dtype!r} is not modelled; "
                         "give one of the two")
    return s


def check_lengths_alone(output_lengths, prompt_lengths, speculative) -> None:
    """``ValueError`` naming ``inference.output_lengths`` or ``inference.prompt_lengths`` when a law other than
    ``fixed`` goes with speculative decoding (not modelled, :mod:`concurrency_model.serving.decoder`).

    >>> check_lengths_alone("uniform", "fixed", None)
    >>> check_lengths_alone("fixed", "geometric", {"draft": "gpt2", "tokens": 2, "acceptance": 0.5})
    Traceback (most recent call last):
    ...
    ValueError: inference.prompt_lengths: unequal lengths with speculative decoding are not modelled
    """
    for k, law in (("output_lengths", output_lengths), ("prompt_lengths", prompt_lengths)):
        if law != "fixed" and speculative is not None:
            raise ValueError(f"inference.{k}: unequal lengths with speculative decoding are not modelled")


def inference_section(raw: dict) -> Inference:
    """The scenario's ``inference`` object parsed, defaults filled in (``ValueError`` naming the field).

    >>> inference_section({"inference": {"batch": 4}}).batch
    4
    """
    if raw.get("inference") is None:
        raise ValueError("inference: missing; give an object with batch, prompt_len, decode_len, dtype")
    return Inference.from_dict(raw["inference"])


def _check_consistency(tr: Training) -> None:
    """``training.consistency`` and its parameters (:func:`concurrency_model.parallel.consistency.step_factors`):
    a parameter of another mode is refused rather than ignored."""
    mode, cv = tr.consistency, tr.straggler_cv
    in_range("training.straggler_cv", cv)  # standard deviation / mean of a replica's compute time
    if tr.staleness and mode != "ssp":
        raise ValueError(f"training.staleness: only used with consistency \"ssp\", got consistency {mode!r}")
    if mode == "ssp" and not tr.staleness:
        raise ValueError("training.staleness: consistency \"ssp\" needs a staleness bound >= 1 (0 is synchronous)")
    if tr.local_steps != 1 and mode != "local_sgd":
        raise ValueError(f"training.local_steps: only used with consistency \"local_sgd\", got consistency {mode!r}")
    if mode == "asynchronous" and tr.sync != "parameter_server":
        raise ValueError("training.consistency: \"asynchronous\" updates go through parameter servers; set "
                         "training.sync to \"parameter_server\"")


EXAMPLES = Path(__file__).parent / "presets" / "scenarios"


def example_names() -> list[str]:
    """The example scenarios shipped with the package, which ``--scenario NAME`` also takes.

    >>> "gpt3-175b-3d" in example_names()
    True
    """
    return sorted(p.stem for p in EXAMPLES.glob("*.json"))


def read_scenario(spec) -> dict:
    """The raw object of a scenario (a JSON/TOML file path, the name of a shipped example, or a dict), before
    defaults are filled in."""
    if isinstance(spec, (str, Path)):
        path = Path(spec)
        if not path.exists() and isinstance(spec, str) and spec in example_names():
            path = EXAMPLES / f"{spec}.json"
        if not path.exists():  # pipes (e.g. <(...)) are not regular files but can be read
            raise ValueError(f"scenario: no such file {str(spec)!r}{did_you_mean(str(spec), example_names())}; or "
                             f"an example: {', '.join(example_names())}")
        text = file_text("scenario", path)  # names a directory, an unreadable or a non-UTF-8 file
        if path.suffix != ".toml":
            raw = json_object("scenario", text, path.name)
        else:
            try:
                raw = tomllib.loads(text)
            except tomllib.TOMLDecodeError as e:
                raise ValueError(f"scenario: {path.name} is not valid TOML ({e})") from None
            except RecursionError:
                raise ValueError(f"scenario: {path.name} nests too deeply to read") from None
    elif isinstance(spec, dict):
        raw = spec
    else:
        raise ValueError(f"scenario: expected a file path or an object, got {type(spec).__name__}")
    if not isinstance(raw, dict):
        raise ValueError(f"scenario: expected an object at the top, got {type(raw).__name__}")
    return raw


def with_settings(raw: dict, settings, flag: str = "--set") -> dict:
    """A copy of a raw scenario with ``KEY=VALUE`` settings applied (the CLI's ``--set``): ``KEY`` a dotted path
    (``parallel.tensor``, ``training.zero_stage``, ``model.seq_len``, ``cluster``), ``VALUE`` JSON (``4``,
    ``true``, ``null``, ``{"hf_config": "llama-2-7b"}``) or else a plain string (``dgx-h100``). The scenario's
    own checks then name a bad field or value; ``ValueError`` naming ``flag`` (``--set``) for a malformed setting.

    >>> with_settings({"model": "gpt2", "parallel": {"data": 8}}, ["parallel.tensor=2", "cluster=dgx-h100"])
    {'model': 'gpt2', 'parallel': {'data': 8, 'tensor': 2}, 'cluster': 'dgx-h100'}
    >>> with_settings({"model": "gpt2"}, ["model.fused_attention=true"])   # a zoo name becomes {"name": ...}
    {'model': {'name': 'gpt2', 'fused_attention': True}}
    """
    out = copy.deepcopy(raw)
    for setting in settings or ():
        key, sep, text = str(setting).partition("=")
        path = key.strip().split(".")
        if not sep or not all(path):
            raise ValueError(f"{flag}: expected KEY=VALUE such as parallel.tensor=4, got {setting!r}")
        if path[0] not in TOP:
            raise ValueError(f"{flag} {key}: unknown field {path[0]!r}{did_you_mean(path[0], TOP)}; allowed: "
                             f"{', '.join(TOP)}")
        try:
            value = json.loads(text)
        except json.JSONDecodeError:
            value = text  # a name: dgx-h100, gpt2, selective
        if path[0] == "model" and len(path) > 1 and isinstance(out.get("model"), str):
            out["model"] = {"name": out["model"]}  # a zoo name takes options as {"name": ..., option: value}
        node = out
        for i, part in enumerate(path[:-1]):
            if node.get(part) is None:
                node[part] = {}
            node = node[part]
            if not isinstance(node, dict):
                raise ValueError(f"{flag} {key}: {'.'.join(path[:i + 1])} is {node!r}, not an object")
        node[path[-1]] = value
    return out


def load_scenario(spec) -> Scenario:
    """A scenario from a JSON/TOML file path or a dict of the same shape, every section parsed and checked.

    >>> load_scenario("gpt3-175b-3d").parallel.tensor
    8
    """
    if isinstance(spec, Scenario):
        return spec
    raw = read_scenario(spec)
    unknown = sorted(set(raw) - set(TOP))
    if unknown:
        raise ValueError(f"scenario.{unknown[0]}: unknown field{did_you_mean(unknown[0], TOP)}; allowed: "
                         f"{', '.join(TOP)}")
    if "model" not in raw:
        raise ValueError("model: missing (a zoo name or an object such as {\"kind\": \"gpt\", ...})")
    par = Parallel.from_dict(raw.get("parallel"))
    tr = Training.from_dict(raw.get("training"))
    check_layout(par, tr)
    if raw.get("inference") is not None:  # checked on load too, before a model or a device is read (infer keeps it)
        Inference.from_dict(raw["inference"])
    cluster = load_cluster(raw.get("cluster", "dgx-a100"))
    try:
        cluster.device.peak(tr.dtype)  # the device must have math in this dtype
    except ValueError as e:
        raise ValueError(f"training.{e}") from None
    run = None
    if raw.get("run") is not None:
        run = check_run(raw["run"])
    return Scenario(raw["model"], cluster, par, tr, run)


def check_layout(par: Parallel, tr: Training) -> None:
    """The checks of a parallel and a training section together (``ValueError`` naming the field).

    >>> check_layout(Parallel(pipeline=2), Training(zero_stage=3, framework="deepspeed"))
    Traceback (most recent call last):
    ...
    ValueError: training.zero_stage: deepspeed runs ZeRO-3 without pipeline stages only (its pipeline engine \
refuses ZeRO-2 and -3); use zero_stage 1, pipeline 1, or training.framework megatron / fsdp2
    """
    framework = tr.framework or default_framework(tr.zero_stage)
    if not runs_with(tr.framework, tr.zero_stage, par.pipeline):
        raise ValueError(f"training.zero_stage: {framework} runs ZeRO-{tr.zero_stage} without pipeline stages only "
                         "(its pipeline engine refuses ZeRO-2 and -3); use zero_stage 1, pipeline 1, or "
                         "training.framework megatron / fsdp2")
    if not runs_schedule(tr.framework, tr.zero_stage, par.pipeline, par.schedule):
        raise ValueError(f"parallel.schedule: {framework}'s pipeline engine runs 1f1b only (its TrainSchedule), got "
                         f"{par.schedule!r}; use schedule 1f1b or training.framework megatron / fsdp2")
    if tr.overlap and par.pipeline > 1 and not overlaps(tr.framework, tr.zero_stage, par.pipeline):
        raise ValueError(f"training.overlap: {framework}'s pipeline engine reduces the gradients after the last "
                         "backward pass (ReduceGrads); leave overlap out or set it false")
    if par.expert > 1 and (tr.zero_stage > 1 or tr.sync != "allreduce" or tr.compression != "none"):
        raise ValueError("parallel.expert: expert parallelism is modelled with ZeRO 0 or 1 (Megatron-Core's "
                         "distributed optimizer) and an uncompressed all-reduce of the gradients")
    _check_tensor_layers(par, tr)
    if tr.compression == "sfb":
        _check_sfb(par)


# -- the run section (DESIGN.md "A scenario file"; its figures in :mod:`.parallel.run`) --------------------------------
RUN_FIELDS = ("tokens", "samples", "epochs", "price_per_gpu_hour", "currency", "board_power_w", "gpu_mtbf_hours",
              "checkpoint_s", "restart_s", "checkpoint_interval_s")
CURRENCY = "USD"  # run.currency's default: the label of cost, the currency price_per_gpu_hour is given in
RUN_ZERO_OK = ("restart_s",)
# Plausible ranges, (high, why): past every real run, so that a typo is refused naming its field [D]; the yardsticks,
# as recalled: 1.5e13 tokens (Llama 3, Dubey et al. 2024), a GPU board's 700-1,000 W (H100 / B200 datasheets), GPU
# MTBFs of 10^4-10^5 hours (Kokolis et al. 2024, "Revisiting reliability in large-scale ML research clusters").
RUN_RANGES = {"tokens": (1e18, "tokens of a run, 10^4 times the largest published"),
          "samples": (1e18, "samples of a run"), "epochs": (1e6, "passes over the samples"),
          "price_per_gpu_hour": (1e4, "money a GPU-hour"), "board_power_w": (1e5, "watts a GPU board draws"),
          "gpu_mtbf_hours": (1e9, "hours between failures of one GPU"),
          "checkpoint_s": (1e6, "seconds a checkpoint stalls training; 10^6 s is 11.6 days"),
          "restart_s": (1e6, "seconds to restart after a failure; 10^6 s is 11.6 days"),
          "checkpoint_interval_s": (1e9, "seconds of work between checkpoints")}


def check_run(run) -> Run:
    """The ``run`` object with its numbers checked (``ValueError`` naming ``run.FIELD``); a :class:`Run` as it is.

    >>> check_run({"samples": 1e6, "epochs": 3}).epochs
    3
    """
    return Run.from_dict(run)


def _check_run(run: dict) -> dict:
    if not isinstance(run, dict):
        raise ValueError("run: expected an object with tokens or samples")
    unknown = sorted(set(run) - set(RUN_FIELDS))
    if unknown:
        raise ValueError(f"run.{unknown[0]}: unknown field{did_you_mean(unknown[0], RUN_FIELDS)}; allowed: "
                         f"{', '.join(RUN_FIELDS)}")
    if ("tokens" in run) == ("samples" in run):
        raise ValueError("run: give exactly one of tokens or samples")
    run = dict(run)
    if "currency" in run:
        run["currency"] = currency("run.currency", run["currency"])
    for k, v in run.items():
        if k == "currency":
            continue
        high, why = RUN_RANGES[k]
        number(f"run.{k}", v, low_ok=k in RUN_ZERO_OK, high=high, high_ok=True, why=why)
    if "epochs" in run and "samples" not in run:
        raise ValueError("run.epochs: goes with samples, not tokens")
    failing = [k for k in ("restart_s", "checkpoint_interval_s", "checkpoint_s") if k in run]
    if failing and "gpu_mtbf_hours" not in run:
        raise ValueError(f"run.{failing[0]}: checkpoints and restarts go with failures; give run.gpu_mtbf_hours")
    if "gpu_mtbf_hours" in run and "checkpoint_s" not in run:
        raise ValueError("run.gpu_mtbf_hours: give run.checkpoint_s too, the seconds a checkpoint stalls training")
    return run


def _check_sfb(par: Parallel) -> None:
    """Sufficient-factor broadcasting (:mod:`.parallel.sparse_comm`): whole fully connected layers' factors,
    from worker to worker (its need of sync ``allreduce`` is :meth:`Training.from_dict`'s check)."""
    bad = [k for k in ("tensor", "pipeline", "context", "expert") if getattr(par, k) != 1]
    if bad:
        raise ValueError(f"training.compression: sfb sends the factors of whole fully connected layers, modelled with "
                         f"tensor, pipeline, context and expert 1; parallel.{bad[0]} = {getattr(par, bad[0])}")


def _check_tensor_layers(par: Parallel, tr: Training) -> None:
    """Krizhevsky's hybrid (``tensor_layers = "fc"``, :mod:`.parallel.layerwise`): each tensor rank runs the
    convolutions on its share of the group's microbatch; one stage, no context or expert split, ZeRO 0 and
    an uncompressed all-reduce."""
    if par.tensor_layers != "fc" or par.tensor == 1:
        return
    if par.microbatch_size % par.tensor:
        raise ValueError(f"parallel.microbatch_size: {par.microbatch_size} is not divisible by tensor = "
                         f"{par.tensor} (tensor_layers \"fc\" shares each microbatch's convolutions out)")
    others = {"pipeline": par.pipeline != 1, "context": par.context != 1, "expert": par.expert != 1,
              "training.zero_stage": tr.zero_stage != 0, "training.sync": tr.sync != "allreduce",
              "training.compression": tr.compression != "none"}
    bad = [k for k, v in others.items() if v]
    if bad:
        raise ValueError(f"parallel.tensor_layers: \"fc\" is modelled with pipeline, context and expert 1, ZeRO 0 "
                         f"and an uncompressed all-reduce; {bad[0]} differs")
