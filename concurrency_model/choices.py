"""The values a scenario's named fields may take (docs/scenario.md), one tuple of names a field, and the checks of
them that need no model: the one list that :mod:`concurrency_model.scenario` checks a file against and that the
module modelling each choice reads (each name's meaning and source is in that module, named beside it).

Kept free of sympy and numpy, so that loading and checking a scenario (the first step of every command, and all of a
cached estimate's work before the compiled step function, issue 41) imports neither.

>>> "zb-h1" in SCHEDULES, parse_sparsity("2:4"), parse_sparsity(0.5)
(True, '2:4', 0.5)
"""
from __future__ import annotations

# parallel.schedule: the pipeline schedules of :mod:`concurrency_model.parallel.pipeline`
SCHEDULES = ("gpipe", "1f1b", "interleaved", "async", "zb-h1")
# parallel.context_algorithm: :mod:`concurrency_model.parallel.context`
CONTEXT_ALGORITHMS = ("ring", "ulysses", "allgather")
# parallel.tensor_layers: :mod:`concurrency_model.parallel.layerwise` (Krizhevsky's hybrid splits the fc layers only)
TENSOR_LAYERS = ("all", "fc")
# parallel.moe_dispatcher: :mod:`concurrency_model.parallel.expert`
DISPATCHERS = ("alltoall", "deepep", "hybridep")
# parallel.stage_split: how pipeline stages are cut, :mod:`concurrency_model.parallel.partition`
STAGE_SPLITS = ("balanced", "layers", "counted")
# training.cuda_graph: Megatron-Core's per-layer capture scopes, or the whole forward-backward
# (:mod:`concurrency_model.parallel.host`)
CUDA_GRAPH_SCOPES = ("attn", "mlp", "moe", "moe_router", "moe_preprocess")
FULL_ITERATION = "full_iteration"
# training.recompute_modules: Megatron-Core's modules of a selective recompute
# (:mod:`concurrency_model.parallel.recompute`)
RECOMPUTE_MODULES = ("core_attn", "moe_act", "layernorm", "mla_up_proj", "mlp", "moe", "shared_experts")
# training.consistency: :mod:`concurrency_model.parallel.consistency`
CONSISTENCY = ("synchronous", "ssp", "asynchronous", "local_sgd")
# training.gossip_topology: :mod:`concurrency_model.parallel.gossip`
TOPOLOGIES = ("ring", "exponential", "complete")
# training.batch_norm: :mod:`concurrency_model.parallel.data_parallel`
BATCH_NORM = ("local", "sync")
# training.optimizer: the update rules of :data:`concurrency_model.ops.optimizer.RULES` (the same names, in order)
OPTIMIZERS = ("sgd", "momentum", "nesterov", "adagrad", "rmsprop", "adam", "adamw", "lamb")
# training.loss: the loss implementations of :data:`concurrency_model.parallel.allocator.LOSSES` (the same names)
LOSSES = ("upcast", "vocab_parallel", "fused")
# training.lora_base_dtype: the quantized formats a frozen LoRA base is stored in
# (:mod:`concurrency_model.parallel.lora`; bytes a weight: :data:`concurrency_model.units.WEIGHT_BYTES`)
LORA_BASES = ("nf4", "int4", "int8", "fp8")
# inference.weight_sparsity and the sparse operators (:mod:`concurrency_model.ops.sparse`): 2:4 structured sparsity,
# two nonzeros in every group of four (NVIDIA Ampere architecture, hardware.md [R1]), or a fraction of zeros
STRUCTURED = "2:4"


def parse_sparsity(value):
    """``"2:4"`` or a fraction of zeros in [0, 1) (a number or its text); ``ValueError`` naming ``sparsity``.

    >>> parse_sparsity("0.9"), parse_sparsity("2:4")
    (0.9, '2:4')
    """
    if value == STRUCTURED:
        return STRUCTURED
    try:
        s = float(value)
    except (TypeError, ValueError):
        s = None
    if isinstance(value, bool) or s is None or not 0 <= s < 1:
        raise ValueError(f"sparsity: {STRUCTURED!r} or a fraction of zeros in [0, 1), got {value!r}")
    return s


def check_lora_base(rank: int, base_dtype: str | None) -> None:
    """``ValueError`` naming ``training.lora_base_dtype`` for an unknown format or one without adapters (the checks
    that need no model, made when a scenario is loaded).

    >>> check_lora_base(0, "nf4")
    Traceback (most recent call last):
    ...
    ValueError: training.lora_base_dtype: a quantized frozen base goes with adapters (training.lora_rank)
    """
    if base_dtype is not None:
        if base_dtype not in LORA_BASES:
            raise ValueError(f"training.lora_base_dtype: unknown {base_dtype!r}; allowed: {', '.join(LORA_BASES)}")
        if not rank:
            raise ValueError("training.lora_base_dtype: a quantized frozen base goes with adapters "
                             "(training.lora_rank)")




__all__ = ["SCHEDULES", "CONTEXT_ALGORITHMS", "TENSOR_LAYERS", "DISPATCHERS", "STAGE_SPLITS", "CONSISTENCY",
           "TOPOLOGIES", "BATCH_NORM", "OPTIMIZERS", "LOSSES", "LORA_BASES", "STRUCTURED", "parse_sparsity",
           "check_lora_base", "CUDA_GRAPH_SCOPES", "FULL_ITERATION", "RECOMPUTE_MODULES"]
