"""Modern training stacks against :func:`~concurrency_model.parallel.estimate.estimate`: torchtitan, llm-foundry and
Megatron-Bridge (``data/``; origins and caveats in ``data/SOURCES.md``).

* ``torchtitan``: pytorch/torchtitan @ b5bcd76c ``benchmarks/*.md`` and ``torchtitan/components/quantization/
  mxfp8.md``, Llama 3.1 8B / 70B / 405B under FSDP2, TP, PP, CP and float8 on 8-512 H100 (96 GB HBM2e at a 500 W
  limit, Meta Grand Teton hosts), 32-64 H200 and 8 B200. Compared on tokens/s per GPU (torchtitan's ``tps``:
  the tokens of a rank's batch over the step time and ``cp x tp x pp``, ``train.py`` at 9dec370, i.e. global
  tokens / (step x GPUs)) and on peak memory (``max_reserved`` of the CUDA caching allocator, in GiB = 2^30
  bytes: ``torchtitan/metrics.py`` at 9dec370 ``_to_gib``), against ``memory_bytes_per_device``.
* ``llmfoundry``: mosaicml/llm-foundry @ 8c8dd48f ``scripts/train/benchmarking/README.md``, MPT 125M-70B under
  pure FSDP on A100 80GB and H100 80GB. Compared on tokens/s per GPU.
* ``megatron_bridge``: NVIDIA-NeMo/Megatron-Bridge @ 067f987d ``docs/performance-summary*.md``. Compared on
  tokens/s per GPU (the tables' own column; model TFLOP/s per GPU is kept as ``measured_tflops``).

Each row maps to a scenario by one rule per set (:func:`scenario_for`); what the files do not say is assumed the
same for every row of a set (:data:`ASSUMPTIONS`). Rows that cannot be expressed today (no preset for the system,
no model for a mixture of experts or a hybrid Mamba model, a LoRA run whose rank is not published) are kept with
``status`` ``unmappable`` and the reason; rows the estimate refuses (memory) with ``refused`` and its reason.

>>> number("37556 (36108)"), number("5,762"), number("475[^note]"), alternative("37556 (36108)")
(37556.0, 5762.0, 475.0, 36108.0)
"""
from __future__ import annotations

import os
import re
from concurrent.futures import ProcessPoolExecutor

import numpy as np
import pandas as pd

from ..datasets import load

DATASETS = ("torchtitan", "llmfoundry", "megatron_bridge")
GIB = 2 ** 30  # torchtitan prints memory in GiB (metrics.py _to_gib at 9dec370: 1024^3 bytes)
# MPT shapes of mosaicml/llm-foundry @ 8c8dd48f scripts/train/yamls/pretrain/mpt-*.yaml: n_layers, d_model, n_heads
# (expansion_ratio 4, vocab_size 50368, attn_impl flash). Those yamls keep llm-foundry's MPTConfig defaults
# (llmfoundry/models/mpt/configuration_mpt.py: learned_pos_emb True, no_bias False, alibi False in
# models/utils/config_defaults.py), so the benchmarked models have learned positions and biases: the zoo's GPT
# with tied embeddings reproduces every row's published num_params exactly (tests/test_validate_modern.py).
MPT_SHAPES = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12), "1b": (24, 2048, 16),
              "3b": (32, 2560, 20), "7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56),
              "70b": (80, 8192, 64)}
MPT_VOCAB = 50368
# Hugging Face config presets (concurrency_model/presets/hf) of the dense Llama models the sets name
LLAMA = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.1 70B": "llama-3.1-70b", "Llama 3.1 405B": "llama-3.1-405b",
         "LLAMA3_8B": "llama-3-8b", "LLAMA3_70B": "llama-3-70b", "LLAMA3.1_405B": "llama-3.1-405b"}
ASSUMPTIONS = {
    "torchtitan": "cluster grand-teton-h100 for the H100 rows (96 GB HBM2e at 2.4 TB/s, SXM5 peaks as the upper "
                  "bound: the 500 W cap is not modelled), dgx-h200 for the Trainy/WhiteFiber H200 rows (8 per host "
                  "on NVLink, 400 Gb/s ConnectX-7 per GPU, as DGX H200); framework fsdp2, ZeRO 3 over the FSDP "
                  "degree (data = fsdp); global batch = local batch x fsdp; without PP microbatch = local batch, "
                  "with PP torchtitan's default of as many microbatches as stages (9dec370 pipelining_utils.py), "
                  "interleaved 1F1B with 2 stages a rank (generate_split_points); TP with sequence parallelism "
                  "(parallelize_llama.py: SequenceParallel norms); async TP mapped as TP; float8 (tensorwise or "
                  "rowwise) -> fp8; selective AC -> selective, full -> full; torch.compile not modelled (the rows "
                  "with and without it get the same prediction); fused (flash) attention; AdamW; sequence 8192 "
                  "where the table does not state it (seq_len_note)",
    "llmfoundry": "cluster dgx-h100 for h100_80gb (the MosaicML platform's H100 network is not stated) and dgx-a100 "
                  "for a100_80gb (the A100 section's 1,600 Gb/s node-to-node RoCE = 8 x 200 Gb/s, the preset's "
                  "NIC rate); framework fsdp; FULL_SHARD -> ZeRO 3, SHARD_GRAD_OP -> ZeRO 2; data = GPUs "
                  "(tp = pp = 1); activation checkpointing -> full recompute; amp_bf16 / bf16 -> bf16, amp_fp8 -> "
                  "fp8; flash attention (the yamls' attn_impl); the MPT yamls' shapes with learned positions of "
                  "the row's sequence length; AdamW (the yamls' decoupled_adamw)",
    "megatron_bridge": "dense Llama rows on DGX-H100 only (cluster dgx-h100): MoE models (DeepSeek-V3, Qwen3 MoE, "
                       "GPT-OSS), the hybrid Nemotron 3 and the DGX-B200 / B300 systems have no model or preset "
                       "yet; framework megatron; distributed optimizer -> ZeRO 1, the FSDP column's Megatron-FSDP "
                       "-> ZeRO 3 over the data-parallel degree; sequence parallelism with TP, no recompute and "
                       "overlapped gradient reduction (Megatron-Bridge @ 067f987d recipes/llama/h100/llama3.py: "
                       "recompute_granularity None, use_distributed_optimizer True, overlap_grad_reduce True; the 8B "
                       "FP8 perf recipe recomputes 5 of 32 layers, not expressible: none); VP > 1 -> interleaved; "
                       "FP8 / FP8-CS -> fp8, BF16 -> bf16; the 25.09 rows (no precision column) fp8, as the 25.11 "
                       "table gives FP8-CS for the same layouts; SFT rows as pre-training of the same sequence; "
                       "the first value of a cell with a bracketed alternative; fused attention; Adam",
}
_FOOTNOTE = re.compile(r"\[\^[^\]]*\]")


def number(cell) -> float:
    """The value of a published cell: thousands separators dropped, a trailing ``(alternative)`` and Markdown
    footnote markers ignored, ``n/a`` or blank -> NaN.

    >>> number("1,071"), number(" 829 "), number("n/a"), number(12)
    (1071.0, 829.0, nan, 12.0)
    """
    if cell is None or (isinstance(cell, float) and np.isnan(cell)):
        return float("nan")
    if isinstance(cell, (int, float, np.integer, np.floating)):
        return float(cell)
    text = _FOOTNOTE.sub("", str(cell)).split("(")[0].replace(",", "").strip()
    try:
        return float(text)
    except ValueError:
        return float("nan")


def alternative(cell) -> float:
    """The bracketed second value of a cell like ``"37556 (36108)"`` (Megatron-Bridge: another configuration,
    ``values_have_parenthesized_alternative``), else NaN.

    >>> alternative("661 (624)"), alternative("1297")
    (624.0, nan)
    """
    m = re.search(r"\(([\d.,]+)\)", str(cell))
    return float(m.group(1).replace(",", "")) if m else float("nan")


def _base(dataset: str, i: int, label: str, group: str) -> dict:
    return {"dataset": dataset, "source_row": i + 2, "label": label, "group": group, "model": "", "seq": np.nan,
            "cluster": "", "gpus": np.nan, "data": np.nan, "tensor": 1, "pipeline": 1, "context": 1, "interleave": 1,
            "schedule": "1f1b", "sequence_parallel": False, "microbatch": np.nan, "global_batch": np.nan,
            "dtype": "bf16", "recompute": "none", "zero_stage": 0, "framework": "ideal", "overlap": True,
            "measured_tps": np.nan, "measured_memory_bytes": np.nan, "measured_tflops": np.nan, "unmappable": "",
            "note": ""}


def torchtitan_rows() -> pd.DataFrame:
    """torchtitan's tables, one row per published configuration, in the common row shape."""
    df = load("torchtitan_llama3_train_tps_memory")
    rows = []
    for i, r in df.iterrows():
        gpu = str(r["gpu"])
        system = "H100" if gpu.startswith("H100") else "H200" if gpu.startswith("H200") else gpu.split(" ")[0]
        b = _base("torchtitan", i, f"{r['table']}: {r['config_label']}", f"{r['model']} on {r['num_gpus']} {system}")
        fsdp, tp, pp, cp = (int(r[k]) for k in ("fsdp", "tp", "pp", "cp"))
        local = int(r["local_batch_size"])
        interleaved = "interleaved" in str(r["pp_schedule"]).lower()
        b.update(model=LLAMA.get(r["model"], ""), seq=int(r["seq_len"]), gpus=int(r["num_gpus"]), data=fsdp,
                 tensor=tp, pipeline=pp, context=cp, interleave=2 if interleaved else 1,
                 schedule="interleaved" if interleaved else "1f1b", sequence_parallel=tp > 1,
                 microbatch=local / pp if pp > 1 else local, global_batch=local * fsdp,
                 dtype="fp8" if "float8" in str(r["precision"]).lower() else "bf16",
                 recompute="full" if str(r["activation_checkpointing"]).startswith("full") else "selective",
                 zero_stage=3, framework="fsdp2", measured_tps=number(r["tps_per_gpu"]),
                 note="; ".join(x for x in ("torch.compile" if r["torch_compile"] == "yes" else "",
                                            "async TP (as TP)" if r["async_tp"] == "yes" else "") if x))
        unit = str(r["memory_unit"])
        if unit.startswith("GiB"):
            b["measured_memory_bytes"] = number(r["peak_memory"]) * GIB
        cluster = {"H100": "grand-teton-h100", "H200": "dgx-h200"}.get(system)
        b["cluster"] = cluster or ""
        if cluster is None:
            b["unmappable"] = f"not mappable: no preset for {system}" + ("" if b["model"] else
                                                                         " (and the model is not stated)")
        elif not b["model"]:
            b["unmappable"] = f"not mappable: model {r['model']!r} has no preset"
        rows.append(b)
    return pd.DataFrame(rows)


def llmfoundry_rows() -> pd.DataFrame:
    """llm-foundry's MPT benchmark tables, one row per published run, in the common row shape."""
    df = load("llmfoundry_mpt_train_throughput")
    rows = []
    for i, r in df.iterrows():
        gpu = str(r["gpu"])
        b = _base("llmfoundry", i, f"MPT-{r['model']} seq {r['seq_len']} on {r['num_gpus']} {gpu}",
                  f"MPT-{r['model']} on {gpu}")
        strategy = str(r["fsdp_sharding_strategy"])
        b.update(model=f"mpt-{r['model']}", seq=int(r["seq_len"]), gpus=int(r["num_gpus"]), data=int(r["num_gpus"]),
                 microbatch=int(r["micro_batch_size"]), global_batch=int(r["global_batch_size_seqs"]),
                 dtype="fp8" if "fp8" in str(r["precision"]) else "bf16",
                 recompute="full" if bool(r["activation_checkpointing"]) else "none",
                 zero_stage={"FULL_SHARD": 3, "SHARD_GRAD_OP": 2}.get(strategy, 0), framework="fsdp",
                 measured_tps=float(r["throughput_tok_per_s_per_gpu"]),
                 measured_tflops=float(r["model_tflops_per_gpu"]),
                 cluster={"h100_80gb": "dgx-h100", "a100_80gb": "dgx-a100"}.get(gpu, ""))
        if str(r["model"]) not in MPT_SHAPES:
            b["unmappable"] = f"not mappable: no shape for MPT-{r['model']}"
        elif not b["cluster"]:
            b["unmappable"] = f"not mappable: no preset for {gpu}"
        elif strategy not in ("FULL_SHARD", "SHARD_GRAD_OP"):
            b["unmappable"] = f"not mappable: FSDP sharding strategy {strategy}"
        rows.append(b)
    return pd.DataFrame(rows)


MOE = ("DeepSeekV3", "Qwen3_30B_a3B", "Qwen3_235B_a22B", "GPT OSS 120B")


def megatron_bridge_rows() -> pd.DataFrame:
    """Megatron-Bridge's performance tables, one row per published configuration, in the common row shape."""
    df = load("megatron_bridge_train_throughput")
    rows = []
    for i, r in df.iterrows():
        model, system, task = str(r["model"]), str(r["system"]), str(r["task"])
        short = "SFT " if task.startswith("SFT") else "LoRA " if task.startswith("LoRA") else ""
        b = _base("megatron_bridge", i, f"{r['container']} {short}{model} on {r['num_gpus']} {system}",
                  f"{short}{model} on {system}")
        tp, pp, cp, gpus = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["num_gpus"])
        vp = number(r["vp"])
        fsdp = number(r["fsdp"])
        precision = str(r["precision"])
        b.update(model=LLAMA.get(model, ""), seq=int(r["seq_len"]), gpus=gpus, data=gpus // (tp * pp * cp),
                 tensor=tp, pipeline=pp, context=cp, interleave=int(vp) if vp > 1 else 1,
                 schedule="interleaved" if vp > 1 else "1f1b", sequence_parallel=tp > 1,
                 microbatch=int(r["mbs"]), global_batch=int(r["gbs"]),
                 dtype="bf16" if precision.startswith("BF16") else "fp8",
                 zero_stage=3 if fsdp > 0 else 1, framework="megatron",
                 measured_tps=number(r["tokens_per_s_per_gpu"]), measured_tflops=number(r["model_tflops_per_gpu"]),
                 cluster="dgx-h100" if system == "DGX-H100" else "",
                 note="bracketed alternative not compared" if bool(r["values_have_parenthesized_alternative"]) else "")
        if model.startswith(MOE):
            b["unmappable"] = f"not mappable: mixture-of-experts model {model} has no model preset yet"
        elif model.startswith("Nemotron"):
            b["unmappable"] = f"not mappable: {model} is a hybrid Mamba-Transformer MoE, not modelled"
        elif system != "DGX-H100":
            b["unmappable"] = f"not mappable: no preset for {system}"
        elif short == "LoRA ":
            b["unmappable"] = "not mappable: LoRA rank and target modules are not published"
        elif not b["model"]:
            b["unmappable"] = f"not mappable: model {model!r} has no preset"
        rows.append(b)
    return pd.DataFrame(rows)


ROWS = {"torchtitan": torchtitan_rows, "llmfoundry": llmfoundry_rows, "megatron_bridge": megatron_bridge_rows}


def rows(dataset: str) -> pd.DataFrame:
    """The rows of one set (:data:`DATASETS`) in the common row shape."""
    if dataset not in ROWS:
        raise ValueError(f"dataset: unknown {dataset!r}; allowed: {', '.join(ROWS)}")
    return ROWS[dataset]()


def model_spec(r) -> dict:
    """The scenario's ``model`` of a row: an MPT as the zoo's GPT family, a Llama as its Hugging Face preset."""
    if str(r["model"]).startswith("mpt-"):
        layers, hidden, heads = MPT_SHAPES[r["model"][4:]]
        return {"kind": "gpt", "layers": layers, "hidden": hidden, "heads": heads, "seq_len": int(r["seq"]),
                "vocab": MPT_VOCAB, "fused_attention": True}
    return {"hf_config": r["model"], "seq_len": int(r["seq"]), "fused_attention": True}


def scenario_for(r) -> dict:
    """The scenario dict of one row of :func:`rows` (``ValueError`` with the reason if it cannot be mapped).

    >>> sc = scenario_for(rows("torchtitan").iloc[12])    # Table 5: 405B, FSDP 8 x TP 8 x PP 8, 1F1B
    >>> sc["parallel"]["pipeline"], sc["parallel"]["microbatch_size"], sc["training"]["framework"]
    (8, 4, 'fsdp2')
    """
    if r["unmappable"]:
        raise ValueError(r["unmappable"])
    if r["microbatch"] != int(r["microbatch"]):
        raise ValueError("not mappable: microbatch not an integer")
    par = {"data": int(r["data"]), "tensor": int(r["tensor"]), "pipeline": int(r["pipeline"]),
           "context": int(r["context"]), "interleave": int(r["interleave"]), "schedule": r["schedule"],
           "sequence_parallel": bool(r["sequence_parallel"]), "microbatch_size": int(r["microbatch"]),
           "global_batch": int(r["global_batch"])}
    if par["data"] * par["tensor"] * par["pipeline"] * par["context"] != r["gpus"]:
        raise ValueError(f"not mappable: data x tensor x pipeline x context != {int(r['gpus'])} GPUs")
    return {"model": model_spec(r), "cluster": r["cluster"], "parallel": par,
            "training": {"dtype": r["dtype"], "recompute": r["recompute"], "optimizer": "adam",
                         "zero_stage": int(r["zero_stage"]), "overlap": bool(r["overlap"]),
                         "framework": r["framework"]}}


def _predict(r: dict) -> dict:
    from ..parallel.estimate import estimate
    try:
        sc = scenario_for(r)
    except ValueError as e:
        return {"status": "unmappable", "reason": str(e)}
    try:
        e = estimate(sc)
    except ValueError as e:
        return {"status": "refused", "reason": " ".join(str(e).split())}
    tokens = r["global_batch"] * r["seq"] / r["gpus"]
    return {"status": "ok", "reason": "", "predicted_time_s": e.step_time_s,
            "predicted_tps": tokens / e.step_time_s, "predicted_tps_p10": tokens / e.step_time_p90_s,
            "predicted_tps_p90": tokens / e.step_time_p10_s, "predicted_memory_bytes": e.memory_bytes_per_device}


PREDICTED = ("predicted_time_s", "predicted_tps", "predicted_tps_p10", "predicted_tps_p90", "predicted_memory_bytes")


def evaluate(df: pd.DataFrame, workers: int | None = None) -> pd.DataFrame:
    """Predict every row of ``df`` (from :func:`rows`): ``status``, ``reason``, the predictions of
    :data:`PREDICTED`, and ``ape_tps`` / ``ape_memory`` (fractions) where measured."""
    recs = df.to_dict("records")
    workers = workers or 1
    if workers > 1 and len(recs) > 4:
        with ProcessPoolExecutor(min(workers, os.cpu_count() or 1)) as ex:
            out = list(ex.map(_predict, recs, chunksize=max(1, len(recs) // (4 * workers))))
    else:
        out = [_predict(r) for r in recs]
    res = pd.concat([df.reset_index(drop=True), pd.DataFrame(out)], axis=1)
    for k in PREDICTED:
        if k not in res:
            res[k] = np.nan
    res["ape_tps"] = (res["predicted_tps"] - res["measured_tps"]).abs() / res["measured_tps"]
    res["ape_memory"] = (res["predicted_memory_bytes"] - res["measured_memory_bytes"]).abs() / \
        res["measured_memory_bytes"]
    return res
