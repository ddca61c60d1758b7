"""Inference in the report: the FasterTransformer GPT 13B latencies against the model, and what batch size
and weight-only quantization do to a decode step (:mod:`concurrency_model.serving.decoder`).

The FasterTransformer rows are the ones of ``concurrency-model validate --dataset fastertransformer-13b``
(:mod:`concurrency_model.validate.inference`); the quantization panel is model only (``data/`` has no
quantized-serving measurements): Llama-2-7B from its Hugging Face config on one H100 (``dgx-h100``), 1,024-token
prompts and 128 generated tokens, at 16-bit, int8 and int4 weights, and 16-bit weights pruned 2:4 (sparse tensor
cores, :mod:`concurrency_model.timing.sparse`); the serving front is the same model on H100s under
:func:`concurrency_model.serving.capacity.serving_sweep` (every tensor degree in a node and batch that fits).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

from ..serving.capacity import replicas_for_load, serving_sweep
from ..serving.decoder import infer, predict
from ..serving.disaggregated import plan
from ..serving.output_lengths import lengths
from ..validate import inference as vi
from ._plot import group_lines, legend_outside, new_axes

QUANT_MODEL = {"hf_config": "llama-2-7b"}
QUANT_CLUSTER = "dgx-h100"
WEIGHTS = ("fp16", "int8", "int4", "2:4")  # weight_dtype, or "2:4": fp16 weights pruned 2:4
BATCHES = (1, 2, 4, 8, 16, 32, 64)
PROMPT, DECODE = 1024, 128
LOAD_RPS = 100.0  # requests a second the serving front is sized for


def ft_frame() -> pd.DataFrame:
    """``label, what, measured_s, predicted_s, p10_s, p90_s`` per FasterTransformer row and latency
    (prefill, decode per token, total)."""

    res = vi.evaluate()
    rows = []
    for _, r in res.iterrows():
        for what in ("prefill_s", "decode_s_per_token", "total_s"):
            rows.append({"label": r["label"], "what": what, "measured_s": r[f"measured_{what}"],
                         "predicted_s": r[f"predicted_{what}"], "p10_s": r[f"p10_{what}"],
                         "p90_s": r[f"p90_{what}"]})
    return pd.DataFrame(rows)


def quant_frame(batches=BATCHES, weights=WEIGHTS) -> pd.DataFrame:
    """``weights, batch, prefill_s, decode_s_per_token, tokens_per_s, memory_bytes`` of :data:`QUANT_MODEL`.

    >>> f = quant_frame((1,), ("fp16", "int8")).set_index("weights")
    >>> bool(f.loc["int8", "decode_s_per_token"] < f.loc["fp16", "decode_s_per_token"])
    True
    """

    rows = []
    for w in weights:
        for b in batches:
            fmt = {"weight_sparsity": w} if w == "2:4" else {"weight_dtype": w}
            r = predict(QUANT_MODEL, QUANT_CLUSTER, b, PROMPT, DECODE, "fp16", **fmt)
            rows.append({"weights": w, "batch": b, "prefill_s": r.prefill_s, "decode_s_per_token": r.decode_s_per_token,
                         "tokens_per_s": r.tokens_per_s, "memory_bytes": r.memory_bytes_per_device})
    return pd.DataFrame(rows)


FRONT_TARGET_S = 0.020  # an illustrative decode target per token for the serving front


def front_frame() -> pd.DataFrame:
    """:func:`~concurrency_model.serving.capacity.serving_sweep` of :data:`QUANT_MODEL` on :data:`QUANT_CLUSTER`, with
    the GPUs each configuration needs for :data:`LOAD_RPS` requests a second."""

    return serving_sweep({"model": QUANT_MODEL, "cluster": QUANT_CLUSTER,
                          "inference": {"prompt_len": PROMPT, "decode_len": DECODE}}, FRONT_TARGET_S,
                         load_rps=LOAD_RPS)


def batching_frame(batch: int = 32) -> pd.DataFrame:
    """``batching, output_lengths, first_token_s, decode_s_per_token, tokens_per_s`` of :data:`QUANT_MODEL` on
    one GPU at ``batch`` sequences: static and continuous batching, equal lengths and lengths uniform around
    :data:`DECODE` (:mod:`concurrency_model.serving.continuous_batching`, :mod:`concurrency_model.serving.output_lengths`)."""

    rows = []
    for kind in ("fixed", "uniform"):
        for batching in ("static", "continuous"):
            r = infer({"model": QUANT_MODEL, "cluster": QUANT_CLUSTER,
                       "inference": {"batch": batch, "prompt_len": PROMPT, "decode_len": DECODE,
                                     "batching": batching, "output_lengths": kind}})
            rows.append({"batching": batching, "output_lengths": kind, "first_token_s": r.prefill_s,
                         "decode_s_per_token": r.decode_s_per_token, "tokens_per_s": r.tokens_per_s})
    return pd.DataFrame(rows)


LOADS = (1, 2, 4, 6, 8, 10, 12, 14, 15, 16)  # requests a second under continuous batching
SLOTS = 109  # the most Llama-2-7B sequences of 1,024 + 128 positions one H100 holds with continuous batching
BUDGETS = (256, 384, 512, 768, 1024, 1536, 2048, 4096)  # tokens an iteration (inference.max_batched_tokens)
BUDGET_LOAD = 6.0  # requests a second of the token-budget figure


def load_frame(loads=LOADS, slots: int = SLOTS) -> pd.DataFrame:
    """``load_rps, slots_in_use, first_token_s, queue_wait_s, decode_s_per_token`` of :data:`QUANT_MODEL` on one GPU
    with ``slots`` continuous-batching slots under each load (Little's law, :mod:`concurrency_model.serving.continuous_batching`; the
    wait for a slot, :mod:`concurrency_model.serving.queueing`), and the capacity (``load_rps`` NaN: every slot busy) as the
    last row."""

    rows = []
    for load in (*loads, None):
        try:
            r = infer({"model": QUANT_MODEL, "cluster": QUANT_CLUSTER,
                       "inference": {"batch": slots, "prompt_len": PROMPT, "decode_len": DECODE,
                                     "batching": "continuous", "load_rps": load}})
        except ValueError:  # over the capacity
            continue
        rows.append({"load_rps": np.nan if load is None else load,
                     "slots_in_use": r.inference.get("slots_in_use", slots), "first_token_s": r.prefill_s,
                     "queue_wait_s": r.inference.get("queue_wait_s", np.nan),
                     "decode_s_per_token": r.decode_s_per_token, "requests_per_s": r.inference["requests_per_s"]})
    return pd.DataFrame(rows)


def budget_frame(budgets=BUDGETS, load: float = BUDGET_LOAD) -> pd.DataFrame:
    """``budget`` (NaN: whole prompts), ``first_token_s``, ``longest_iteration_s``, ``decode_s_per_token`` and
    ``prefill_chunks`` of :data:`QUANT_MODEL` on one GPU, :data:`SLOTS` continuous-batching slots under ``load``
    requests a second, with the prompts scheduled whole and in chunks under each token budget
    (:class:`~concurrency_model.serving.continuous_batching.Chunked`); budgets that cannot carry the load are left out."""

    rows = []
    for budget in (None, *budgets):
        try:
            r = infer({"model": QUANT_MODEL, "cluster": QUANT_CLUSTER,
                       "inference": {"batch": SLOTS, "prompt_len": PROMPT, "decode_len": DECODE, "load_rps": load,
                                     "batching": "continuous", "max_batched_tokens": budget}})
        except ValueError:  # the budget keeps too few slots decoding for the load
            continue
        rows.append({"budget": np.nan if budget is None else budget, "first_token_s": r.prefill_s,
                     "longest_iteration_s": r.inference["longest_iteration_s"],
                     "decode_s_per_token": r.decode_s_per_token,
                     "prefill_chunks": r.inference.get("prefill_chunks", 1)})
    return pd.DataFrame(rows)


def budget_plot(frame: pd.DataFrame | None = None, ax=None):
    """The first token and the longest iteration against the token budget, the whole-prompt values as lines."""
    frame = budget_frame() if frame is None else frame
    ax = new_axes(ax)
    whole, chunked = frame[frame["budget"].isna()].iloc[0], frame[frame["budget"].notna()]
    for col, label, style in (("first_token_s", "time to first token", "s-"),
                              ("longest_iteration_s", "longest iteration (the other slots' stall)", "o-"),
                              ("decode_s_per_token", "mean iteration (time per output token)", "^-")):
        line, = ax.plot(chunked["budget"], 1e3 * chunked[col], style, label=label)
        ax.axhline(1e3 * whole[col], color=line.get_color(), ls=":", lw=1)
    ax.set(xscale="log", xlabel="tokens an iteration at most (inference.max_batched_tokens)", ylabel="ms",
           title=f"prompts in chunks, {BUDGET_LOAD:g} requests/s (dotted: whole prompts)")
    ax.set_xticks(list(chunked["budget"]), [f"{b:,.0f}" for b in chunked["budget"]])
    ax.minorticks_off()
    ax.grid(alpha=0.3)
    legend_outside(ax, "below", ncol=2)
    return ax


def load_plot(frame: pd.DataFrame | None = None, ax=None):
    """Time per output token and to the first token against the load, with the capacity of the slots."""
    frame = load_frame() if frame is None else frame
    ax = new_axes(ax)
    under = frame[frame["load_rps"].notna()]
    capacity = float(frame.loc[frame["load_rps"].isna(), "requests_per_s"].iloc[0])
    ax.plot(under["load_rps"], 1e3 * under["decode_s_per_token"], "o-", label="time per output token")
    ax.plot(under["load_rps"], 1e3 * under["first_token_s"], "s-", label="time to first token")
    ax.axvline(capacity, color="gray", ls="--", lw=0.8, label=f"capacity of {SLOTS} slots: {capacity:.1f} requests/s")
    ax.set(xlabel="load (requests a second)", ylabel="ms", yscale="log",
           title="Llama-2-7B on one H100, continuous batching under a load")
    ax.grid(alpha=0.3)
    legend_outside(ax, "below", ncol=2)
    return ax


MOE_MODEL = {"hf_config": "mixtral-8x7b"}
MOE_LAYOUTS = {"tensor 8": {"tensor": 8}, "tensor 2 x expert 4": {"tensor": 2, "data": 4, "expert": 4},
               "expert 8": {"data": 8, "expert": 8}}  # the 8 GPUs of a DGX H100
MOE_BATCHES = (8, 16, 32, 64, 128, 256)


def moe_frame(batches=MOE_BATCHES, layouts=MOE_LAYOUTS) -> pd.DataFrame:
    """``layout, batch, first_token_s, decode_s_per_token, tokens_per_s, comm_s`` (a decode step's tensor and
    expert communication), ``memory_bytes`` of Mixtral 8x7B on one DGX H100 in bf16, 1,024-token prompts and
    128 generated tokens, under each layout (:mod:`concurrency_model.serving.decoder`: expert parallelism)."""

    rows = []
    for name, par in layouts.items():
        for b in batches:
            r = infer({"model": MOE_MODEL, "cluster": QUANT_CLUSTER, "parallel": par,
                       "inference": {"batch": b, "prompt_len": PROMPT, "decode_len": DECODE, "dtype": "bf16"}})
            rows.append({"layout": name, "batch": b, "first_token_s": r.prefill_s,
                         "decode_s_per_token": r.decode_s_per_token, "tokens_per_s": r.tokens_per_s,
                         "comm_s": sum(v for k, v in r.breakdown.items() if k.startswith("decode_")
                                       and k.endswith("comm_s")),
                         "memory_bytes": r.memory_bytes_per_device})
    return pd.DataFrame(rows)


def moe_plot(frame: pd.DataFrame | None = None, ax=None):
    """Tokens/s per GPU against decode ms per token of each layout, batch by batch."""
    frame = moe_frame() if frame is None else frame
    ax = new_axes(ax)
    for name, g in frame.groupby("layout", sort=False):
        ax.plot(1e3 * g["decode_s_per_token"], g["tokens_per_s"] / 8, "o-", label=name)
        last = g.iloc[-1]
        ax.annotate(f"batch {last['batch']}", (1e3 * last["decode_s_per_token"], last["tokens_per_s"] / 8),
                    fontsize=7, xytext=(4, -4), textcoords="offset points")
    ax.set(xlabel="decode ms per token", ylabel="tokens/s per GPU",
           title="Mixtral 8x7B on 8 H100s: tensor against expert parallelism")
    ax.grid(alpha=0.3)
    legend_outside(ax, "below", ncol=2)
    return ax


DIS_LOADS = (25, 50, 100, 200, 400)  # requests a second
DIS_FIRST_S, DIS_TOKEN_S = 0.1, 0.015  # the targets of the disaggregation figure


def disaggregation_frame(loads=DIS_LOADS, first_s: float = DIS_FIRST_S, token_s: float = DIS_TOKEN_S) -> pd.DataFrame:
    """``load_rps, colocated_gpus, disaggregated_gpus`` of :data:`QUANT_MODEL` on H100s within ``first_s`` to the
    first token and ``token_s`` a token: the fewest GPUs of a colocated continuous-batching fleet (every
    configuration of :func:`~concurrency_model.serving.capacity.serving_sweep`, its replicas for each load) and of
    disaggregated prefill and decode pools (:func:`concurrency_model.serving.disaggregated.plan`); None where none meets
    the targets."""

    sc = {"model": QUANT_MODEL, "cluster": QUANT_CLUSTER, "inference": {"prompt_len": PROMPT, "decode_len": DECODE}}
    colo = serving_sweep({**sc, "inference": {**sc["inference"], "batching": "continuous"}}, token_s,
                         max_first_token_s=first_s)
    fits = colo[colo["meets_target"]].to_dict("records")
    dist = lengths("fixed", DECODE, PROMPT + DECODE)
    rows = []
    for load in loads:
        best = plan(sc, load, first_s, token_s).iloc[0]
        rows.append({"load_rps": load, "max_first_token_s": first_s, "max_decode_s": token_s,
                     "colocated_gpus": min((replicas_for_load(load, r, dist, first_s)[0] * r["gpus"] for r in fits),
                                           default=None),
                     "disaggregated_gpus": int(best["gpus"]) if best["meets_target"] else None})
    return pd.DataFrame(rows)


def disaggregation_plot(frame: pd.DataFrame | None = None, ax=None):
    """GPUs against the load, colocated and disaggregated, within the frame's targets."""
    frame = disaggregation_frame() if frame is None else frame
    ax = new_axes(ax)
    ax.plot(frame["load_rps"], frame["colocated_gpus"], "o-", label="colocated continuous batching")
    ax.plot(frame["load_rps"], frame["disaggregated_gpus"], "s-", label="prefill and decode pools apart")
    ax.set_xscale("log")
    ax.set_xticks(frame["load_rps"], [f"{x:g}" for x in frame["load_rps"]])
    ax.set_xticks([], minor=True)
    ax.set_ylim(0, None)
    first, token = 1e3 * frame["max_first_token_s"].iloc[0], 1e3 * frame["max_decode_s"].iloc[0]
    ax.set(xlabel="load (requests a second)", ylabel="H100s",
           title=f"Llama-2-7B within {first:g} ms to the first token and {token:g} ms a token")
    ax.grid(alpha=0.3, which="both")
    legend_outside(ax, "below", ncol=2)
    return ax


def batching_plot(frame: pd.DataFrame | None = None, ax=None):
    """Tokens/s of static and continuous batching, with equal and uniform output lengths; the time to the
    first token over each bar."""
    frame = batching_frame() if frame is None else frame
    ax = new_axes(ax)
    x = np.arange(2)
    for i, (batching, color) in enumerate((("static", "tab:orange"), ("continuous", "tab:blue"))):
        g = frame[frame["batching"] == batching].set_index("output_lengths").loc[["fixed", "uniform"]]
        bars = ax.bar(x + (i - 0.5) * 0.38, g["tokens_per_s"], 0.38, color=color, label=f"{batching} batching")
        for b, ttft in zip(bars, g["first_token_s"]):
            ax.annotate(f"first token\n{1e3 * ttft:,.0f} ms", (b.get_x() + b.get_width() / 2, b.get_height()),
                        ha="center", va="bottom", fontsize=7)
    ax.set_xticks(x, [f"equal lengths ({DECODE})", f"uniform lengths (mean {DECODE})"])
    ax.set_ylim(0, frame["tokens_per_s"].max() * 1.3)
    ax.set(ylabel="tokens/s", title="32 sequences on one H100: static against continuous batching")
    ax.grid(alpha=0.3, axis="y")
    legend_outside(ax, "below", ncol=2)
    return ax


def front_plot(frame: pd.DataFrame | None = None, ax=None):
    """Tokens/s per GPU against decode ms per token, one colour per tensor degree, the Pareto front drawn."""
    frame = front_frame() if frame is None else frame
    ax = new_axes(ax)
    for t, g in frame.groupby("tensor"):
        ax.scatter(1e3 * g["decode_s_per_token"], g["tokens_per_s_per_gpu"], s=14, label=f"tensor {t}")
    p = frame[frame["pareto"]].sort_values("decode_s_per_token")
    ax.plot(1e3 * p["decode_s_per_token"], p["tokens_per_s_per_gpu"], "k-", lw=0.8, label="Pareto front")
    ax.axvline(1e3 * FRONT_TARGET_S, color="gray", ls="--", lw=0.8)
    ax.set_xscale("log")
    ax.set(xlabel="decode ms per token", ylabel="tokens/s per GPU", title="Llama-2-7B on H100s: serving front")
    ax.grid(alpha=0.3, which="both")
    legend_outside(ax, "below", ncol=2)
    return ax


def ft_plot(frame: pd.DataFrame | None = None, ax=None):
    """Predicted (with its 80% band) against measured latency of each FasterTransformer row."""
    frame = ft_frame() if frame is None else frame
    ax = new_axes(ax)
    names = {"prefill_s": "prefill", "decode_s_per_token": "decode / token", "total_s": "total"}
    x = np.arange(len(frame))
    ax.bar(x - 0.2, 1e3 * frame["measured_s"], 0.4, color="0.6", label="measured (FasterTransformer)")
    pred = 1e3 * frame["predicted_s"]
    err = [pred - 1e3 * frame["p10_s"], 1e3 * frame["p90_s"] - pred]
    ax.bar(x + 0.2, pred, 0.4, yerr=err, capsize=3, color="tab:blue", label="predicted (80% band)")
    ax.set_xticks(x, [f"{names[w]}\n{lab.split(' on ')[0].replace('13B ', '')}" for lab, w in
                      zip(frame["label"], frame["what"])], fontsize=7)
    ax.set_yscale("log")
    ax.set(ylabel="ms", title="GPT 13B on A100 40GB: FasterTransformer against the model")
    ax.grid(alpha=0.3, axis="y", which="both")
    legend_outside(ax, "below", ncol=2)
    return ax


def quant_plot(frame: pd.DataFrame | None = None, ax=None):
    """Decode seconds per token against the batch, one line per weight format."""
    frame = quant_frame() if frame is None else frame
    ax = new_axes(ax)
    group_lines(ax, frame, "weights", "batch", "decode_s_per_token", 1e3, "{} weights")
    ax.set_xscale("log", base=2)
    ax.set(xlabel="sequences in the batch", ylabel="decode ms per token",
           title="Llama-2-7B on one H100: quantized and 2:4-pruned weights")
    ax.grid(alpha=0.3, which="both")
    legend_outside(ax, "below", ncol=2)
    return ax
