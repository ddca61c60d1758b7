"""GPU-hours, cost and energy per million generated tokens of a serving configuration [D].

The same accounting as a training run (:mod:`concurrency_model.training.run`): GPU-hours are GPUs x wall
seconds; energy is GPUs x board power x the busy share of the time (the kernels' seconds, the collectives' and
sends' among them, not the host's waits, over the whole), a board at its power limit while it runs kernels and
idle otherwise (NCCL's collectives are CUDA kernels: :mod:`concurrency_model.training.run`);
cost is GPU-hours x ``price_per_gpu_hour``, which has no default. A request's prefill is part of the time its
generated tokens take.
"""
from __future__ import annotations

IDLE = ("host_wait",)  # breakdown keys of time the device's kernels do not fill (communication kernels do)


def busy_seconds(breakdown: dict) -> float:
    """Seconds of ``breakdown`` that the device's kernels fill.

    >>> busy_seconds({"compute_s": 2.0, "host_wait_s": 1.0, "tensor_comm_s": 0.5, "kv_attention_s": 1.0})
    3.5
    """
    return sum(v for k, v in breakdown.items() if not any(word in k for word in IDLE))


def per_million_tokens(tokens_per_s: float, gpus: int, busy_share: float, board_power_w: float,
                       price_per_gpu_hour: float | None = None) -> dict:
    """``gpu_hours_per_million_tokens``, ``energy_per_token_j`` (none without a board power) and
    ``cost_per_million_tokens`` (none without a price) at ``tokens_per_s`` generated tokens a second.

    >>> r = per_million_tokens(2000.0, 1, 0.9, 700.0, 2.5)
    >>> round(r["gpu_hours_per_million_tokens"], 4), round(r["energy_per_token_j"], 3), round(r["cost_per_million_tokens"], 3)
    (0.1389, 0.315, 0.347)
    """
    hours = gpus * 1e6 / tokens_per_s / 3600
    out = {"gpu_hours_per_million_tokens": hours}
    if board_power_w:
        out["energy_per_token_j"] = gpus * board_power_w * min(1.0, max(0.0, busy_share)) / tokens_per_s
    if price_per_gpu_hour is not None:
        out["cost_per_million_tokens"] = hours * price_per_gpu_hour
    return out


