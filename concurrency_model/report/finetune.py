"""The report's fine-tuning section: full fine-tuning against LoRA and QLoRA
(:mod:`concurrency_model.parallel.lora`)."""
from __future__ import annotations

import pandas as pd

from ..training.estimate import estimate
from ._plot import figure
from .html import Section
from .sections import add_figure

MODEL = {"hf_config": "llama-2-7b"}
CLUSTER = "dgx-a100"
BATCH = 64  # sequences of 4,096 tokens a step
CASES = (("full, ZeRO-1", 8, {"zero_stage": 1}), ("full, ZeRO-3", 8, {"zero_stage": 3}),
         ("LoRA r=16", 8, {"lora_rank": 16}), ("QLoRA r=16 (nf4)", 8, {"lora_rank": 16, "lora_base_dtype": "nf4"}),
         ("full, 1 GPU", 1, {}), ("QLoRA r=16, 1 GPU", 1, {"lora_rank": 16, "lora_base_dtype": "nf4"}))


def finetune_frame() -> pd.DataFrame:
    """One row a case: step seconds by part, model-state and activation GB a GPU (NaN where it does not fit)."""

    rows = []
    for label, gpus, extra in CASES:
        sc = {"model": MODEL, "cluster": CLUSTER, "parallel": {"data": gpus, "global_batch": BATCH},
              "training": {"dtype": "bf16", "recompute": "full", **extra}}
        try:
            e = estimate(sc)
        except ValueError as err:  # over the device's memory: shown as such
            rows.append({"case": label, "gpus": gpus, "note": str(err).split(" (")[0]})
            continue
        b = e.breakdown
        rows.append({"case": label, "gpus": gpus, "step_s": e.step_time_s, "forward_s": b["forward_s"],
                     "backward_s": b["backward_s"], "recompute_s": b["recompute_s"],
                     "other_s": e.step_time_s - b["forward_s"] - b["backward_s"] - b["recompute_s"],
                     "state_gb": e.memory["model_state_bytes"] / 1e9,
                     "activations_gb": e.memory["activations_bytes"] / 1e9,
                     "note": ""})
    return pd.DataFrame(rows)


def finetune_plot(df: pd.DataFrame, axes) -> None:
    """GPU-seconds a sequence (the step's parts times the GPUs over the sequences: comparable across GPU counts)
    and GB a GPU (state, activations) of each case."""
    y = range(len(df))
    left = [0.0] * len(df)
    for col, label in (("forward_s", "forward"), ("backward_s", "backward"), ("recompute_s", "recompute"),
                       ("other_s", "communication, optimizer")):
        v = (df[col] * df["gpus"] / BATCH).fillna(0).tolist()
        axes[0].barh(list(y), v, left=left, label=label)
        left = [a + b for a, b in zip(left, v)]
    axes[0].set(xlabel="GPU-seconds a sequence", yticks=list(y), yticklabels=df["case"])
    axes[0].invert_yaxis()
    axes[0].legend(fontsize=7, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.14))
    state, act = df["state_gb"].fillna(0).tolist(), df["activations_gb"].fillna(0).tolist()
    axes[1].barh(list(y), state, label="model state")
    axes[1].barh(list(y), act, left=state, label="activations")
    for i, note in zip(y, df["note"]):
        if note:
            for ax in axes:
                ax.text(0.01, i, "does not fit: " + note.replace("memory: ", ""), va="center", fontsize=7,
                        transform=ax.get_yaxis_transform())
    axes[1].set(xlabel="GB a GPU", yticks=list(y), yticklabels=[])
    axes[1].invert_yaxis()
    axes[1].legend(fontsize=7, ncol=2, loc="upper center", bbox_to_anchor=(0.5, -0.14))


def finetune_section(figs) -> list[Section]:
    df = finetune_frame()
    fig, ax = figure(11, 4.4, 1, 2)
    finetune_plot(df, ax[0])
    f = add_figure(figs, "finetuning", fig, "step seconds and GB a GPU of full, LoRA and QLoRA fine-tuning of "
                   "Llama-2-7B", f"Model only: {BATCH} sequences of 4,096 tokens a step, bf16, full recompute, "
                   "on A100 80GB GPUs of a DGX A100.")
    at = df.set_index("case")
    full, lora, q1 = at.loc["full, ZeRO-1"], at.loc["LoRA r=16"], at.loc["QLoRA r=16, 1 GPU"]
    intro = ("<p>LoRA (<code>training.lora_rank</code>) freezes the model and trains low-rank adapters beside the "
             "linear layers of its blocks: the frozen layers compute no weight gradients, hold their weights without "
             "gradients or optimizer state, and the replicas all-reduce the adapters' gradients only; QLoRA "
             "(<code>training.lora_base_dtype</code>) stores those weights at 4 bits and dequantizes them before "
             f"each use. On 8 GPUs the step falls from {full['step_s']:.1f} s to {lora['step_s']:.1f} s: the input "
             "gradients, the recomputed forward and the attention stay. The memory is where it tells: "
             f"{full['state_gb'] + full['activations_gb']:.1f} GB a GPU under ZeRO-1 against "
             f"{lora['state_gb'] + lora['activations_gb']:.1f}, and QLoRA fits one GPU "
             f"({q1['state_gb'] + q1['activations_gb']:.1f} GB, {q1['step_s']:.0f} s a step), which full fine-tuning "
             "does not. Model only: no measurements of these cases are in data/.</p>")
    return [Section("finetuning", "Fine-tuning: full, LoRA and QLoRA", intro, [f])]
