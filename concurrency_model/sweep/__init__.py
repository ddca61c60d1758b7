"""What-if sweeps over layouts and hardware (:mod:`.engine`, :mod:`.space`, :mod:`.result`) and sensitivities."""
from __future__ import annotations

from ..scenario import read_scenario
from ..training.step_parts import STEP_PARTS
from ..training.estimate import estimate
from .engine import sweep
from .result import SCALES, SweepResult

__all__ = ["SCALES", "SweepResult", "runner_up", "sweep"]

#: the layout fields ``runner_up`` searches (the scenario's others stay as given)
LAYOUT_FIELDS = ("data", "tensor", "pipeline", "context", "expert", "interleave", "schedule", "microbatch_size",
                 "sequence_parallel")


def runner_up(scenario) -> dict | None:
    """The fastest configuration of another layout (degrees or ZeRO stage) on the scenario's GPUs, the scenario's
    other fields kept, and what separates it from the scenario's own: ``{"runner_up": row, "separates": [...],
    "faster": bool}`` (``separates``: the step's parts, runner-up minus the scenario's, largest first); ``None``
    when no other layout fits.

    >>> r = runner_up({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> r["runner_up"]["gpus"], (r["runner_up"]["parallel"]["data"], r["runner_up"]["training"]["zero_stage"]) != (8, 0)
    (8, True)
    """
    raw = read_scenario(scenario)
    mine = estimate(raw)
    par = {k: v for k, v in (raw.get("parallel") or {}).items() if k not in LAYOUT_FIELDS}
    par["global_batch"] = mine.scenario.parallel.global_batch
    tr = {k: v for k, v in (raw.get("training") or {}).items() if k != "zero_stage"}
    res = sweep({**raw, "parallel": par, "training": tr}, mine.scenario.gpus)
    other = res.against({"gpus": mine.scenario.gpus, **mine.scenario.parallel.to_dict(),
                         "zero_stage": mine.scenario.training.zero_stage})
    if other is None:
        return None
    e = other.pop("estimate")
    diff = sorted(((k, e.breakdown[k] - mine.breakdown[k]) for k in STEP_PARTS), key=lambda kv: -abs(kv[1]))
    return {"runner_up": other, "faster": e.step_time_s < mine.step_time_s,
            "separates": [{"part": k, "runner_up_minus_best_s": v} for k, v in diff if abs(v) > 1e-12]}
