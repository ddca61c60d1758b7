"""The training runtime whose behaviour a step is priced with (``training.framework``).

The composition in :mod:`.compose` is the ideal runtime of the paper's analysis: every collective of a
step at its alpha-beta cost, with no engine of its own. Real runtimes differ in what separates the
alternatives a user compares (issue "Rank the alternatives right"): how they cut the data-parallel
collectives (per bucket or per module unit), how far ahead they prefetch, the dtype they reduce in, and the
fixed seconds their engine adds per collective, per microbatch and per step. ``ideal`` keeps the analysis
alone; the others name a runtime:

* ``megatron``: Megatron-LM / Megatron-Core (its DDP and distributed optimizer);
* ``deepspeed``: DeepSpeed's ZeRO engine;
* ``fsdp``: PyTorch FullyShardedDataParallel (FSDP1, flat parameters per wrapped module);
* ``fsdp2``: PyTorch ``fully_shard`` (per-parameter DTensor sharding, torchtitan).
"""
from __future__ import annotations

FRAMEWORKS = ("ideal", "megatron", "deepspeed", "fsdp", "fsdp2")


def default_framework(zero_stage: int) -> str:
    """The runtime a scenario's other fields imply when ``training.framework`` is left out: ZeRO stages 2 and
    3 are DeepSpeed's (Rajbhandari et al. 2020 name them); stages 0 and 1 are Megatron's DDP and its
    distributed optimizer (the ZeRO-1 sharding of Megatron-LM's ``--use-distributed-optimizer``).

    >>> default_framework(3), default_framework(1)
    ('deepspeed', 'megatron')
    """
    return "deepspeed" if zero_stage >= 2 else "megatron"
