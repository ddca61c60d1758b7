"""Modern training stacks against :func:`~concurrency_model.training.estimate.estimate`: torchtitan, llm-foundry and
Megatron-Bridge (``data/``; origins and caveats in ``data/SOURCES.md``).

* ``torchtitan``: pytorch/torchtitan @ b5bcd76c ``benchmarks/*.md`` and ``torchtitan/components/quantization/
  mxfp8.md``, Llama 3.1 8B / 70B / 405B under FSDP2, TP, PP, CP and float8 on 8-512 H100 (96 GB HBM2e at a 500 W
  limit, Meta Grand Teton hosts), 32-64 H200 and 8 B200. Compared on tokens/s per GPU (torchtitan's ``tps``:
  the tokens of a rank's batch over the step time and ``cp x tp x pp``, ``train.py`` at 9dec370, i.e. global
  tokens / (step x GPUs)) and on peak memory (``max_reserved`` of the CUDA caching allocator, in GiB = 2^30
  bytes: ``torchtitan/metrics.py`` at 9dec370 ``_to_gib``), against the estimate's reserved figure
  (``predicted_reserved_bytes``: the allocated peak less what sits outside the allocator, plus its cached headroom,
  :func:`~concurrency_model.parallel.allocator.reserved_bytes`), the quantity torchtitan logs; the central
  ``memory_bytes_per_device`` (every byte on the device) is kept as ``predicted_memory_bytes``.
* ``llmfoundry``: mosaicml/llm-foundry @ 8c8dd48f ``scripts/train/benchmarking/README.md``, MPT 125M-70B under
  pure FSDP on A100 80GB and H100 80GB. Compared on tokens/s per GPU.
* ``megatron_bridge``: NVIDIA-NeMo/Megatron-Bridge @ 067f987d ``docs/performance-summary*.md``. Compared on
  tokens/s per GPU (the tables' own column; model TFLOP/s per GPU is kept as ``measured_tflops``).
* ``nemo``: NVIDIA/NeMo @ 8e3d65dc ``docs/source/performance/performance_summary.md`` (NeMo 24.07, DGX-H100, fp8)
  and @ 19fadb67 ``performance_long_sequence.md`` (context parallelism from 4K to 1M tokens: Llama 2 7B on
  DGX-H100, Llama 3 8B on DGX-B200). Compared on tokens/s per GPU: the 24.07 tables' column, and for the
  long-sequence tables (TFLOP/s per GPU only) the published TFLOP/s over NeMo's own model FLOPs per token
  (:func:`nemo_flops_per_token`), so the error is the TFLOP/s error. :func:`nemo_cp_speedups` compares the
  tables' speed-up of context parallelism over the best layout without it.

  What NeMo runs for context parallelism: Megatron-Core leaves ``cp_comm_type`` at None (NVIDIA/Megatron-LM
  ``megatron/core/transformer/transformer_config.py``), i.e. Transformer Engine's default ``"p2p"``: "Exchange
  KV chunks with P2P communications in ring topology. P2P is async and can be overlapped with attention
  compute" (NVIDIA/TransformerEngine ``transformer_engine/pytorch/attention.py``, ``DotProductAttention``), on
  load-balanced chunks: the toolkit's ``ring`` (:mod:`concurrency_model.parallel.context`), the default.

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
from ..frontends.hf import load_hf_config
from ..parallel.allocator import OUTSIDE
from ..training.estimate import estimate
from .training import dgx_a100_spec

DATASETS = ("torchtitan", "llmfoundry", "megatron_bridge", "megatron_bridge_moe", "nemo", "bigscience")
GIB = 2 ** 30  # torchtitan prints memory in GiB (metrics.py _to_gib at 9dec370: 1024^3 bytes)
# MPT shapes of mosaicml/llm-foundry @ 8c8dd48f scripts/train/yamls/pretrain/mpt-*.yaml: n_layers, d_model, n_heads
# (expansion_ratio 4, vocab_size 50368, attn_impl flash). Those yamls keep llm-foundry's MPTConfig defaults
# (llmfoundry/models/mpt/configuration_mpt.py: learned_pos_emb True, no_bias False, alibi False in
# models/utils/config_defaults.py), so the benchmarked models have learned positions and biases: the zoo's GPT
# with tied embeddings reproduces every row's published num_params exactly (tests/validate/test_validate_modern.py).
MPT_SHAPES = {"125m": (12, 768, 12), "350m": (24, 1024, 16), "760m": (24, 1536, 12), "1b": (24, 2048, 16),
              "3b": (32, 2560, 20), "7b": (32, 4096, 32), "13b": (40, 5120, 40), "30b": (48, 7168, 56),
              "70b": (80, 8192, 64)}
MPT_VOCAB = 50368
# Hugging Face config presets (concurrency_model/presets/hf) of the dense Llama models the sets name
LLAMA = {"Llama 3.1 8B": "llama-3.1-8b", "Llama 3.1 70B": "llama-3.1-70b", "Llama 3.1 405B": "llama-3.1-405b",
         "LLAMA3_8B": "llama-3-8b", "LLAMA3_70B": "llama-3-70b", "LLAMA3.1_405B": "llama-3.1-405b",
         "LLAMA2-7B": "llama-2-7b", "LLAMA2-13B": "llama-2-13b", "LLAMA2-70B": "llama-2-70b", "LLAMA3-8B": "llama-3-8b",
         "LLAMA3-70B": "llama-3-70b"}
# NeMo's GPT-3 sizes (NVIDIA/NeMo @ 8cfedd72 nemo/collections/llm/gpt/model/base.py GPTConfig5B / 20B / 175B: layers,
# hidden, heads; ffn 4 x hidden; sequence 2048) and the vocabularies of NeMo's FLOP formulas (@ 19fadb67
# nemo/collections/common/parts/perf_metrics_utils.py LLM_VOCAB_SIZE_MAP)
NEMO_GPT3 = {"GPT3-5B": (24, 4096, 32), "GPT3-20B": (44, 6144, 48), "GPT3-175B": (96, 12288, 96)}
NEMO_VOCAB = {"gpt3": 51200, "llama2": 32000, "llama3": 128256}
# The pipeline split of NeMo's runs: Megatron-Core's even split (parallel.stage_split "layers"), the only one of the
# Megatron-Core of its 24.07 container (NVIDIA/Megatron-LM core_r0.8.0 megatron/core/transformer/transformer_block.py
# get_num_layers_to_build: num_layers // pipeline size, then // virtual stages); the long-sequence runs are taken the
# same (their pages state no uneven split)
NEMO_STAGE_SPLIT = "layers"
# The dtype llm-foundry's FSDP reduced gradients in, by table: Composer's ``mixed_precision: DEFAULT`` (every row but
# the two PURE ones) reduces in fp32 from Composer v0.16.4 on (mosaicml/composer d745fcb1 "patch default", 2023-10-10:
# ``reduce_dtype = torch.float32`` under DEFAULT in composer/trainer/mosaic_fsdp_utils.py; before it DEFAULT set no
# reduce_dtype, and PyTorch's FSDP then reduces in the parameters' dtype, bf16: torch.distributed.fsdp.MixedPrecision's
# docstring, "If this is None but param_dtype is not None, then this takes on the param_dtype value", as recalled for
# torch 2.0). The H100 tables came with llm-foundry @ b2a43a147 (2023-10-19, setup.py mosaicml>=0.16.4,<0.17) and
# @ 5e85bd62d (2024-01-06, >=0.17.2): fp32; the A100 table with @ ef350d9e6 (2023-07-05, setup.py
# composer>=0.15.0,<0.16): bf16, FSDP's default. PURE: Composer's param, reduce and buffer dtypes all the precision's.
LLMFOUNDRY_FP32_REDUCE_SECTIONS = ("H100 80GB BF16", "H100 80GB FP8", "H100 80GB BF16 (Large Scale, >= 128 GPUs)")
# torchtitan commits of the rows that compile the loss function under ``training.compile``: each descends from
# pytorch/torchtitan @ bbb1b616e (2025-04-02, "refactor train_spec.loss_fn to build_loss_fn"), whose
# ``torchtitan/components/loss.py`` ``build_cross_entropy_loss`` wraps the loss in ``torch.compile`` (checked with
# ``git merge-base --is-ancestor`` on a fetched copy); 9dec370 (2024-12), Tables 1-6, leaves
# ``loss_fn = torch.compile(loss_fn)`` commented out in ``train.py``. A compiled loss is mapped to ``training.loss``
# ``fused`` [D]: Inductor fuses the upcast, the log-softmax and the NLL, so that, as recalled of AOTAutograd's min-cut
# partitioner, the backward keeps the 16-bit logits and a log-sum-exp a row and writes the 16-bit gradient (4 bytes a
# logit, :data:`concurrency_model.parallel.allocator.LOSSES`), not three fp32 tensors.
TORCHTITAN_COMPILED_LOSS = ("e7c0cae", "820504e", "6fc499f6")
RECOMPUTE_ORDER = ("none", "selective", "full")  # recompute "auto": the least of these that fits in memory
BIGSCIENCE_VOCAB = 250_880  # --pad-vocab-size-to 250880 (bigscience @ 9e64ede train/tr11-176B-ml/tr11-176B-ml.slurm)
OPA_PORT_BPS = 100e9 / 8  # Intel Omni-Path Architecture 100 Series: 100 Gb/s a port
# what BigScience's stack (PyTorch 1.11, CUDA 11.5, every module loaded at start-up) held on an A100 before any
# tensor: "40GB A100 takes 1573MiB for cuda kernels", torch.ones(1).cuda() read with nvidia-smi (bigscience @ 9e64ede
# train/tr11-176B-ml/chronicles-prequel.md, line 144); the 80 GB board's taken as the same, as the page does
BIGSCIENCE_CUDA_CONTEXT_BYTES = 1573 * 2 ** 20
# how a set's peak memory was read: the caching allocator's reserved peak (torch.cuda.memory_stats, torchtitan's
# max_reserved), or nvidia-smi's used memory, which also holds what sits outside the allocator (the CUDA context,
# NCCL's buffers: parallel.allocator.OUTSIDE)
MEMORY_READINGS = ("reserved", "nvidia-smi")


def jean_zay_cluster() -> dict:
    """Jean Zay's A100 partition as BigScience ran it in 2022 (bigscience-workshop/bigscience @ 9e64ede
    ``jz/hpc-specs.md`` "JZ3": 8 A100 80 GB a node, "4 OmniPath links", a dedicated NCCL subnet): the ``dgx-a100``
    preset's node with 4 Omni-Path ports of 100 Gb/s in the place of its 8 HDR ports (the node's NVLink fabric taken
    as the preset's; the page says "NVLink 4 inter-gpu connects" only).

    >>> c = jean_zay_cluster(); c["nics_per_node"] * c["inter"]["bw_Bps"] * 8 / 1e9   # Gb/s a node
    400.0
    """
    spec = dgx_a100_spec()
    spec["nics_per_node"] = 4
    spec["inter"] = {**spec["inter"], "name": "omni-path-100", "kind": "omnipath", "bw_Bps": OPA_PORT_BPS,
                     "sources": {**spec["inter"]["sources"],
                                 "kind": "bigscience @ 9e64ede jz/hpc-specs.md JZ3: 4 OmniPath links a node",
                                 "bw_Bps": "Intel Omni-Path Architecture 100 Series: 100 Gb/s a port"}}
    return {"name": "jean-zay-a100 (JZ3: 4 x Omni-Path 100 a node)", **spec}


ASSUMPTIONS = {
    "torchtitan": "cluster grand-teton-h100 for the H100 rows (96 GB HBM2e at 2.4 TB/s, the SXM5 tensor peaks at "
                  "the clock of the 500 W cap, torchao's achievable fractions on this board, the GH100's sustained "
                  "rate fitted on llm-foundry), dgx-h200 for the Trainy/WhiteFiber H200 rows (8 per host "
                  "on NVLink, 400 Gb/s ConnectX-7 per GPU, as DGX H200); framework fsdp2, ZeRO 3 over the FSDP "
                  "degree (data = fsdp); global batch = local batch x fsdp; without PP microbatch = local batch, "
                  "with PP torchtitan's default of as many microbatches as stages (9dec370 pipelining_utils.py), "
                  "interleaved 1F1B with 2 stages a rank (generate_split_points), the layers cut as "
                  "generate_split_points cuts them (torchtitan_layout, parallel.stage_split); TP with sequence "
                  "parallelism "
                  "(parallelize_llama.py: SequenceParallel norms); async TP -> parallel.tp_overlap; float8 -> fp8 with "
                  "torchao's casts (fsdp2), float8 rowwise -> training.fp8_recipe rowwise; "
                  "selective AC -> selective (fsdp2: torchtitan's per-op policy), full -> full; torch.compile no -> "
                  "training.compile false (eager PyTorch's RMSNorm and rotary kernels, timing.graph.eager_kernels); "
                  "torch.compile yes under torchtitan from bbb1b616e on (e7c0cae, 820504e, 6fc499f6: the Trainy, "
                  "async-TP and MXFP8 rows) also compiles the loss -> training.loss fused (TORCHTITAN_COMPILED_LOSS); "
                  "CP -> parallel.context_algorithm allgather (torchtitan's default rotate method at 9dec370, "
                  "config_manager.py context_parallel_rotate_method); "
                  "fused (flash) attention; "
                  "AdamW; sequence 8192 "
                  "where the table does not state it (seq_len_note)",
    "llmfoundry": "cluster dgx-h100 for h100_80gb (the MosaicML platform's H100 network is not stated) and dgx-a100 "
                  "for a100_80gb (the A100 section's 1,600 Gb/s node-to-node RoCE = 8 x 200 Gb/s, the preset's "
                  "NIC rate); framework fsdp; FULL_SHARD -> ZeRO 3, SHARD_GRAD_OP -> ZeRO 2; data = GPUs "
                  "(tp = pp = 1); activation checkpointing -> full recompute; amp_bf16 / bf16 -> bf16, amp_fp8 -> "
                  "fp8; mixed_precision DEFAULT -> training.reduce_dtype fp32 on the H100 tables (Composer >= 0.16.4 "
                  "pinned), FSDP's default (bf16) on the A100 table and for PURE (LLMFOUNDRY_FP32_REDUCE_SECTIONS); "
                  "FlashAttention-1-class attention (fused_attention \"flash1\": the benchmark script's "
                  "--attn_impl defaulted to 'triton', llm-foundry's copy of HazyResearch's Triton FlashAttention, "
                  "until 7f0fdae66 (2024-03), after both tables: submit_benchmarks.py at b2a43a147); the MPT "
                  "yamls' shapes with learned positions of "
                  "the row's sequence length, without dropout (model dropout 0: MPTConfig's resid_pdrop, emb_pdrop "
                  "and attn_pdrop default to 0.0, llmfoundry/models/mpt/configuration_mpt.py, which the yamls keep); "
                  "AdamW (the yamls' decoupled_adamw); loss fused (MPT's default "
                  "loss_fn 'fused_crossentropy', flash-attention's xentropy kernel: modeling_mpt.py @ 8c8dd48f; "
                  "the GPU yamls do not override it)",
    "megatron_bridge": "the dense Llama rows (the mixtures of experts are the set megatron_bridge_moe) on DGX-H100 "
                       "(cluster dgx-h100); framework megatron; distributed optimizer -> ZeRO 1, the FSDP column's "
                       "Megatron-FSDP -> ZeRO 3 over the data-parallel degree; sequence parallelism with TP, no "
                       "recompute and overlapped gradient reduction (Megatron-Bridge @ 067f987d "
                       "recipes/llama/h100/llama3.py: recompute_granularity None, use_distributed_optimizer True, "
                       "overlap_grad_reduce True; the 8B FP8 perf recipe recomputes 5 of 32 layers, not expressible: "
                       "none); VP > 1 -> interleaved; FP8 / FP8-CS -> fp8, BF16 -> bf16; the 25.09 rows (no precision "
                       "column) fp8, as the 25.11 table gives FP8-CS for the same layouts; SFT rows as pre-training of "
                       "the same sequence; the first value of a cell with a bracketed alternative; fused attention; "
                       "Adam. The dense Llama rows on DGX-B200 (cluster dgx-b200, datasheet presets, nothing fitted) "
                       "are mapped by the same rule; Transformer Engine's userbuffers TP overlap "
                       "(comm_overlap.tp_comm_overlap) -> parallel.tp_overlap where the row's recipe sets it "
                       "(RECIPE_TP_OVERLAP: the 70B pretrain and SFT and 405B recipes on H100, the 405B ones on B200), "
                       "priced as the micro-pipelined TP of training.workload.overlap_exposed (TE's ring exchange cuts "
                       "a gather into TP chunks the same way; its fp8 all-gather buffers and bulk backward overlaps "
                       "are not modelled); not expressible, left out: the SFT recipes' defer_embedding_wgrad_compute, "
                       "Megatron-Core's overlap_param_gather and overlap_param_gather_with_optimizer_step (the "
                       "composition exposes ZeRO 1's parameter gather whole); CUDA graphs not mapped (the B200 8B "
                       "recipes' full_iteration, which training.cuda_graph expresses, was not read per container)",
    "megatron_bridge_moe": "as megatron_bridge, with: the models' Hugging Face configs (presets deepseek-v3 with its "
                           "one MTP module, as the recipes' mtp_num_layers = 1, qwen3-30b-a3b, qwen3-235b-a22b, "
                           "gpt-oss-120b); the EP column as parallel.expert over the data replicas, and where EP "
                           "exceeds DP (Megatron-Core's MoE parallel folding with expert TP 1: the expert group spans "
                           "the tensor ranks) EP / TP, whose devices hold and run the same share of the experts; "
                           "routing balanced (the runs force it: moe_router_force_load_balancing), dropless, or with "
                           "'(tokendrop)' capacity buffers of factor 1.0 with the alltoall dispatcher "
                           "(apply_moe_token_drop asserts it); ZeRO 1 (the distributed optimizer: the experts' "
                           "state sharded over the expert-data-parallel ranks, the rest over the data-parallel "
                           "ones); the token dispatcher (parallel.moe_dispatcher: alltoall, or hybridep / deepep, "
                           "which send a token once to each node and rank) and the EP all-to-all overlap "
                           "(parallel.expert_overlap) as the recipes at 067f987d set them (MOE_RUNTIME), the overlap "
                           "off for a row with pipeline stages and no virtual ones (Megatron-Core refuses it there); "
                           "the pipeline stages cut as the recipes cut them "
                           "(MOE_STAGE_SPLIT: Megatron-Core's even split of the layers, the output layer on top of the "
                           "last stage's, for GPT-OSS and Qwen3-30B-A3B; DeepSeek-V3's explicit layouts as decoder "
                           "layers per virtual stage, the perf configs' Et|(tt|)*30mL on H100 and in 25.09 "
                           "(DSV3_PERF_CONFIG_LAYOUT, its length setting the virtual stages) and else the recipe's "
                           "map, DSV3_LAYOUTS, for the row's pipeline and virtual stages; Qwen3-235B's split with "
                           "the embedding and the loss counted as layers, counted; balanced for the others); "
                           "recompute the recipe's modules "
                           "(training.recompute_modules, MOE_RECOMPUTE: DeepSeek-V3's mla_up_proj, with mlp on H100 "
                           "and at EP 32 on B200; GPT-OSS's layernorm and moe_act on B200 and H100), or full where they "
                           "do not fit; for the recipes without recompute the least of none / selective / full "
                           "that fits; MXFP8 / FP8-MX -> mxfp8, FP8 / FP8-CS -> fp8, BF16 -> bf16, the 25.09 rows "
                           "(no precision column) mxfp8 on B200 and fp8 on H100 as the 25.11 table gives for the same "
                           "models; GPT-OSS's sliding-window layers as full causal attention; Nemotron 3 (hybrid "
                           "Mamba-Transformer MoE) not mapped; training.overlap off for DeepSeek-V3 on H100, whose "
                           "recipes set overlap_grad_reduce False (RECIPE_NO_GRAD_OVERLAP); no TP overlap (the TP 2 "
                           "recipes, Qwen3-235B and DeepSeek-V3 on H100, set tp_comm_overlap False); the recipes' "
                           "CUDA graphs as training.cuda_graph (MOE_CUDA_GRAPH at 067f987d) and, where a recipe's "
                           "settings changed between containers and were read (MOE_RECIPE_HISTORY: Megatron-Bridge's "
                           "legacy scripts/performance/configs), each container's dispatcher, EP overlap and graphs; "
                           "Transformer Engine's per-expert GEMM launches as the megatron runtime prices them "
                           "(parallel.runtime TE_EXPERT_GEMM_LAUNCH_S)",
    "bigscience": "cluster jean_zay_cluster (the dgx-a100 node with 4 Omni-Path 100 Gb/s ports, BigScience's JZ3); "
                  "Megatron-DeepSpeed's GPT under DeepSpeed's pipeline engine (framework deepspeed, 1f1b, the stages "
                  "cut as the row's partition method: transformer layers, from 02-27 with the two embeddings "
                  "counted), fp16 ZeRO-1 (the page: the tables before its BF16 optimizer section ran fp16; ZeRO 0 "
                  "where the ZS column says so) and, from 02-28, bf16 at ZeRO 0, i.e. DeepSpeed's BF16_Optimizer "
                  "(the page's 'testing is happening with BF16 optimizer'; the tr11 slurm file's ZERO_STAGE=0 "
                  "'bf16 must use z0'); a run that went out of memory is checked on the estimate's verdict "
                  "(memory_verdicts), not compared; full recompute "
                  "(--checkpoint-activations), vocabulary 250,880, sequence 2,048, the table's global batch rounded "
                  "down to whole microbatches; heads 64 where the table has no NHEADS column (the page: 'all "
                  "NHEADS=64 (above too)'), the 02-17 rows' 32 and 96 as stated; the layer count as stated, else "
                  "the multiple of PP the stated size implies (80 at PP 4, 5, 8, 10; 78 at 6; 77 at 7 and 11; 81 "
                  "at 9; 72 at 12); memory in GiB as nvidia-smi read it, against the reserved figure and what sits "
                  "outside the allocator, the CUDA context as the page measured it for this stack (1,573 MiB); "
                  "iteration 2, as the page timed it",
    "nemo": "clusters dgx-h100 and dgx-b200; framework megatron with the distributed optimizer (ZeRO 1), sequence "
            "parallelism with TP, overlapped gradient reduction, VP > 1 -> interleaved, the pipeline stages cut as "
            "Megatron-Core's even split of the layers (NEMO_STAGE_SPLIT), FP8 -> fp8 (Transformer "
            "Engine's recipe, attention in bf16 on cuDNN's fused attention: timing.attention 'cudnn'); recompute: "
            "the least of none / selective / full whose expected peak (the caching allocator's reserved figure) "
            "fits (the "
            "tables do not say; NeMo's long-sequence page mentions full recompute for the runs without CP), and for "
            "the best layout without CP of a long-sequence row never less than that of the table's next shorter "
            "sequence (nemo_cp_speedups); SFT "
            "rows as pre-training of the same sequence with the fine-tuning configuration's optimizer (Apex's "
            "distributed_fused_adam with its state in bf16: training.optimizer_dtype bf16, "
            "NEMO_SFT_OPTIMIZER_DTYPE) and "
            "the virtual stages of the launcher's examples of the same layouts (NEMO_SFT_VP), "
            "LoRA and Nemotron rows not mapped (rank not published; "
            "squared-ReLU Nemotron not modelled); GPT-3 5B / 20B / 175B as NeMo's GPTConfig shapes with vocabulary "
            "51200; long-sequence rows: microbatch 1 (not published), context parallelism as ring (Transformer "
            "Engine's p2p default), the layout TP x PP x DP x CP as published (the B200 table's '# of GPUs' is 4 x "
            "that product in every row; the page's previous version, NVIDIA/NeMo @ 14d427f5, printed the product "
            "itself: 2, 4, ..., 256; per-GPU throughput is compared, so the layout is taken), sequence nK = n x "
            "1024 tokens",
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
            "note": "", "expert": 1, "capacity_factor": np.nan, "loss": None, "tp_overlap": False,
            "fp8_recipe": None, "compile": True, "cuda_graph": "none", "context_algorithm": "ring",
            "memory_reading": "reserved", "cuda_context_bytes": np.nan}


def torchtitan_layout(layers: int, stages: int) -> tuple[int, ...]:
    """torchtitan's default pipeline split when no split points are given (pytorch/torchtitan @ 9dec370, the commit
    its December 2024 benchmark ran, ``torchtitan/parallelisms/pipelining_utils.py`` ``generate_split_points``, taken
    by ``pipeline_llama.py`` when ``pipeline_parallel_split_points`` is empty, as in ``train_configs/llama3_405b.toml``):
    ``layers // stages`` on the first stage, one more on each of the next ``layers % stages``, the rest on the last;
    ``stages`` is the pipeline degree, twice it for a looped (interleaved) schedule. As decoder layers per virtual
    stage (``parallel.stage_split``).

    >>> torchtitan_layout(126, 8), torchtitan_layout(126, 16)[:3], torchtitan_layout(126, 16)[-2:]
    ((15, 16, 16, 16, 16, 16, 16, 15), (7, 8, 8), (8, 7))
    """
    base, extra = divmod(layers, stages)
    out = [base] + [base + 1 if i < extra else base for i in range(stages - 2)]
    return tuple(out + [layers - sum(out)])


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
        compiled = str(r["torch_compile"]).strip().lower() != "no"
        b.update(model=LLAMA.get(r["model"], ""), seq=int(r["seq_len"]), gpus=int(r["num_gpus"]), data=fsdp,
                 tensor=tp, pipeline=pp, context=cp, interleave=2 if interleaved else 1,
                 schedule="interleaved" if interleaved else "1f1b", sequence_parallel=tp > 1,
                 microbatch=local / pp if pp > 1 else local, global_batch=local * fsdp,
                 dtype="fp8" if "float8" in str(r["precision"]).lower() else "bf16",
                 recompute="full" if str(r["activation_checkpointing"]).startswith("full") else "selective",
                 zero_stage=3, framework="fsdp2", measured_tps=number(r["tps_per_gpu"]),
                 tp_overlap=r["async_tp"] == "yes" and tp > 1,
                 fp8_recipe="rowwise" if "rowwise" in str(r["precision"]).lower() else None,
                 compile=compiled,
                 loss="fused" if compiled and any(f"torchtitan {c}" in str(r["software"])
                                                  for c in TORCHTITAN_COMPILED_LOSS) else None,
                 context_algorithm="allgather" if cp > 1 else "ring",
                 note="; ".join(x for x in ("torch.compile" if r["torch_compile"] == "yes" else "",
                                            "async TP" if r["async_tp"] == "yes" else "") if x))
        unit = str(r["memory_unit"])
        if unit.startswith("GiB"):
            b["measured_memory_bytes"] = number(r["peak_memory"]) * GIB
        if pp > 1 and b["model"]:  # torchtitan's default split of the layers (torchtitan_layout)
            b["stage_split"] = torchtitan_layout(int(load_hf_config(b["model"])[0]["num_hidden_layers"]),
                                                 pp * b["interleave"])
        cluster = {"H100": "grand-teton-h100", "H200": "dgx-h200"}.get(system)
        b["cluster"] = cluster or ""
        if cluster is None:
            b["unmappable"] = f"not mappable: no preset for {system}" + ("" if b["model"] else
                                                                         " (and the model is not stated)")
        elif not b["model"]:
            b["unmappable"] = f"not mappable: model {r['model']!r} has no preset"
        rows.append(b)
    return pd.DataFrame(rows)


def deepspeed_type_partition(layers: int, stages: int, embeddings: bool = False) -> tuple[int, ...] | str:
    """Decoder layers a pipeline stage as DeepSpeed's ``partition_method="type:..."`` cuts them (microsoft/DeepSpeed
    @ v0.6.2 ``deepspeed/runtime/pipe/module.py`` ``_partition_layers``, ``runtime/utils.py`` ``partition_balanced``):
    a weight of 1 for each layer the pattern matches, 0 for the rest; the least bottleneck is ``ceil(n / stages)``
    matched layers, and ``_lprobe`` fills the stages from the first with that many, the rest on the last
    (BigScience's page of 78 layers over 12 stages: "the last stage has 1 block, while the rest have 7").
    ``embeddings``: the pattern also matches the two embedding layers (``type:transformer|embedding``), the first
    before the decoder layers and the tied copy after them. An even cut is named as ``parallel.stage_split`` does
    (``layers``, ``counted``); a stage left without a decoder layer raises ``ValueError``.

    >>> deepspeed_type_partition(78, 12)
    (7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 7, 1)
    >>> deepspeed_type_partition(72, 12), deepspeed_type_partition(70, 12, embeddings=True)
    ('layers', 'counted')
    >>> deepspeed_type_partition(75, 6, embeddings=True)   # 77 items, 13 a stage: the embedding and 12, ..., 12 and one
    (12, 13, 13, 13, 13, 11)
    """
    items = layers + (2 if embeddings else 0)
    if items % stages == 0:
        return "counted" if embeddings else "layers"
    top = -(-items // stages)
    per = [min(top, items - top * k) for k in range(stages)]
    if embeddings:  # the first and the last matched items are the embeddings, not decoder layers
        per[0] -= 1
        last = max(k for k, n in enumerate(per) if n > 0)
        per[last] -= 1
    if min(per) < 1:
        raise ValueError(f"not mappable: DeepSpeed's type partition leaves a stage without a decoder layer ({per})")
    return tuple(per)


def bigscience_rows() -> pd.DataFrame:
    """BigScience's layout search of February 2022 (``data/bigscience_tr11_layout_search.csv``), one row per
    measured configuration, in the common row shape: tokens/s per GPU from the seconds an iteration at the table's
    global batch of 2,048-token sequences, memory in GiB (the page's "GB": DeepSpeed's and Megatron's memory reports
    divide by 1024^3) as nvidia-smi reads it (``memory_reading``, :data:`MEMORY_READINGS`). A run that went out of memory (``outcome`` ``oom``) has neither and ``went_oom`` set, for
    the check of the estimate's verdict (:func:`memory_verdicts`). The pipeline stages are cut as DeepSpeed's
    ``partition_method`` did: ``type:transformer`` balances the count of transformer layers (an even split where the
    stages divide them, :func:`~concurrency_model.parallel.partition.layer_split` ``layers``), and
    ``type:transformer|embedding`` counts the two embedding layers too (``counted``); an uneven count is cut as
    DeepSpeed cut it, the stages filled from the first (:func:`deepspeed_type_partition`)."""
    df = load("bigscience_tr11_layout_search")
    cluster = jean_zay_cluster()
    rows = []
    for i, r in df.iterrows():
        dp, tp, pp, mbs = (int(r[k]) for k in ("dp", "tp", "pp", "mbs"))
        layers, hidden, heads = int(r["layers"]), int(r["hidden"]), int(r["heads"])
        oom = r["outcome"] == "oom"
        b = _base("bigscience", i, f"{r['date_2022']} {r['section']}: {r['size']} h{hidden} l{layers} a{heads} "
                  f"d{dp} t{tp} p{pp} mb{mbs}" + (f" ZeRO {int(r['zero_stage'])}" if r["zero_stage"] != 1 else "")
                  + (f" {r['dtype']}" if r["dtype"] != "fp16" else "") + (" (OOM)" if oom else ""),
                  f"hidden {hidden}, {layers} layers, {heads} heads" + (f", {r['dtype']}" if r["dtype"] != "fp16"
                                                                         else ""))
        gbs = int(r["gbs"]) // (dp * mbs) * dp * mbs  # 2,040-2,046 at data 5-12: the steps' whole microbatches
        split = deepspeed_type_partition(layers, pp, r["pp_partition"] == "type:transformer|embedding")
        b.update(model="bigscience-gpt", layers=layers, hidden=hidden, heads=heads, seq=int(r["seq_len"]),
                 cluster=cluster, gpus=dp * tp * pp, data=dp, tensor=tp, pipeline=pp, microbatch=mbs,
                 global_batch=gbs, dtype=str(r["dtype"]), recompute="full", zero_stage=int(r["zero_stage"]),
                 framework="deepspeed", overlap=False, compile=False, stage_split=split, went_oom=oom,
                 memory_reading="nvidia-smi", cuda_context_bytes=BIGSCIENCE_CUDA_CONTEXT_BYTES,
                 measured_tps=np.nan if oom else gbs * int(r["seq_len"]) / (dp * tp * pp) / r["sec_per_it"],
                 measured_memory_bytes=r["mem_gb"] * GIB, note=str(r["layers_source"]))
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
                 zero_stage={"FULL_SHARD": 3, "SHARD_GRAD_OP": 2}.get(strategy, 0), framework="fsdp", loss="fused",
                 measured_tps=float(r["throughput_tok_per_s_per_gpu"]),
                 measured_tflops=float(r["model_tflops_per_gpu"]),
                 cluster={"h100_80gb": "dgx-h100", "a100_80gb": "dgx-a100"}.get(gpu, ""),
                 reduce_dtype="fp32" if str(r["mp_mode"]) == "DEFAULT" and str(r["table_section"]).strip()
                 in LLMFOUNDRY_FP32_REDUCE_SECTIONS else None)
        if str(r["model"]) not in MPT_SHAPES:
            b["unmappable"] = f"not mappable: no shape for MPT-{r['model']}"
        elif not b["cluster"]:
            b["unmappable"] = f"not mappable: no preset for {gpu}"
        elif strategy not in ("FULL_SHARD", "SHARD_GRAD_OP"):
            b["unmappable"] = f"not mappable: FSDP sharding strategy {strategy}"
        rows.append(b)
    return pd.DataFrame(rows)


MOE = ("DeepSeekV3", "Qwen3_30B_a3B", "Qwen3_235B_a22B", "GPT OSS 120B")
# Hugging Face config presets of the mixtures of experts the Megatron-Bridge tables name (Megatron-Bridge @ 067f987d
# builds them from these checkpoints' configs: recipes/deepseek/h100/deepseek_v3.py AutoBridge.from_hf_pretrained
# ("deepseek-ai/DeepSeek-V3"); the Qwen3 and GPT-OSS bridges models/qwen/qwen3_moe_bridge.py, models/gpt_oss/)
MOE_PRESETS = {"DeepSeekV3": "deepseek-v3", "Qwen3_30B_a3B": "qwen3-30b-a3b", "Qwen3_235B_a22B": "qwen3-235b-a22b",
               "GPT OSS 120B": "gpt-oss-120b"}
# Megatron-Bridge @ 067f987d src/megatron/bridge/training/utils/moe_token_drop.py apply_moe_token_drop: the
# "(tokendrop)" runs' expert capacity factor (buffers padded to it, moe_pad_expert_input_to_capacity True); it
# asserts moe_token_dispatcher_type "alltoall" ("moe_expert_capacity_factor only works with alltoall token
# dispatcher"), so those runs used the alltoall dispatcher whatever their model's recipe sets
TOKENDROP_CAPACITY = 1.0
MOE_SYSTEMS = {"DGX-H100": "fp8", "DGX-B200": "mxfp8", "DGX-B300": "mxfp8"}  # 25.09 MoE rows (no precision column)
# The token dispatcher and EP all-to-all overlap of the perf recipes (parallel.moe_dispatcher, parallel.expert_overlap;
# Megatron-Bridge @ 067f987d, src/megatron/bridge/): (model, system) -> (dispatcher, overlap), (model, system, GPUs)
# where a system's recipes differ by size. "hybridep"/"deepep": moe_token_dispatcher_type "flex" with that
# moe_flex_dispatcher_backend; overlap: comm_overlap.overlap_moe_expert_parallel_comm. The one snapshot stands for
# every container's rows (the tables do not publish the flags).
MOE_RUNTIME = {
    # perf_recipes/qwen/h100/qwen3_moe.py fp8cs: flex + hybridep, moe_a2a_overlap False, no EP overlap
    ("Qwen3_30B_a3B", "DGX-H100"): ("hybridep", False),
    # perf_recipes/qwen/b200/qwen3_moe.py fp8mx: flex + hybridep, overlap_moe_expert_parallel_comm True
    ("Qwen3_30B_a3B", "DGX-B200"): ("hybridep", True),
    # perf_recipes/qwen/b300/qwen3_moe.py fp8mx: flex + hybridep, _enable_hybridep_full_iteration_mxfp8 (qwen/common.py:
    # overlap_moe_expert_parallel_comm True)
    ("Qwen3_30B_a3B", "DGX-B300"): ("hybridep", True),
    # perf_recipes/qwen/h100/qwen3_moe.py 256gpu fp8cs: alltoall, moe_a2a_overlap and overlap_moe_expert_parallel_comm
    ("Qwen3_235B_a22B", "DGX-H100"): ("alltoall", True),
    # perf_recipes/qwen/b200/qwen3_moe.py: 256gpu fp8mx flex + hybridep with the full-iteration helper (overlap);
    # 64gpu fp8mx alltoall, moe_a2a_overlap False
    ("Qwen3_235B_a22B", "DGX-B200"): ("hybridep", True), ("Qwen3_235B_a22B", "DGX-B200", 64): ("alltoall", False),
    # perf_recipes/qwen/b300/qwen3_moe.py 256gpu fp8mx: flex + hybridep, the full-iteration helper (overlap)
    ("Qwen3_235B_a22B", "DGX-B300"): ("hybridep", True),
    # recipes/deepseek/h100/deepseek_v3.py (the base recipe of every DeepSeek-V3 perf recipe): hybridep through
    # apply_flex_dispatcher_backend, overlap_moe_expert_parallel_comm False
    ("DeepSeekV3", "DGX-H100"): ("hybridep", False), ("DeepSeekV3", "DGX-B200"): ("hybridep", False),
    # perf_recipes/deepseek/b300/deepseek_v3.py fp8mx: _enable_deepseek_full_iteration_mxfp8 (deepseek/common.py:
    # flex + hybridep, overlap_moe_expert_parallel_comm True)
    ("DeepSeekV3", "DGX-B300"): ("hybridep", True),
    # recipes/gpt_oss/h100/gpt_oss.py: moe_token_dispatcher_type "alltoall" (the flex backend unused without "flex");
    # the B200 perf recipes keep it
    ("GPT OSS 120B", "DGX-H100"): ("alltoall", False), ("GPT OSS 120B", "DGX-B200"): ("alltoall", False),
    # perf_recipes/gpt_oss/b300/gpt_oss.py bf16 and fp8mx: flex + hybridep, no EP overlap
    ("GPT OSS 120B", "DGX-B300"): ("hybridep", False),
}
# perf_recipes/deepseek/b200/deepseek_v3.py 256gpu fp8mx, EP 32: flex + deepep, overlap_moe_expert_parallel_comm True
MOE_RUNTIME_BY_EP = {("DeepSeekV3", "DGX-B200", 32): ("deepep", True)}
# The modules the recipes recompute (training.recompute_modules under recompute "selective": Megatron-Core's
# recompute_modules), (table model, system[, EP]) -> modules, as Megatron-Bridge @ 067f987d
# src/megatron/bridge/perf_recipes/deepseek/{b200,b300,h100}/deepseek_v3.py and perf_recipes/gpt_oss/{b200,h100}/
# gpt_oss.py set them, the same in the legacy scripts/performance/configs/*/*_workload_base_configs.py the older
# containers ran (read at c3e43e6aa, 5f3b336f9 and 55443cbfb: DEEPSEEK_V3_PRETRAIN_CONFIG_{B300,B200,H100}_V1 / _V2,
# GPT_OSS_120B_PRETRAIN_CONFIG_{B200,H100}_BF16_V1 / _V2); the Qwen3 recipes and GPT-OSS on B300 recompute nothing
# (recompute_granularity None)
MOE_RECOMPUTE = {("DeepSeekV3", "DGX-B300"): "mla_up_proj", ("DeepSeekV3", "DGX-B200"): "mla_up_proj",
                 ("DeepSeekV3", "DGX-B200", 32): "mla_up_proj,mlp", ("DeepSeekV3", "DGX-H100"): "mla_up_proj,mlp",
                 ("GPT OSS 120B", "DGX-B200"): "layernorm,moe_act", ("GPT OSS 120B", "DGX-H100"): "layernorm,moe_act"}
# The CUDA graphs the recipes capture (training.cuda_graph: Megatron-Core's cuda_graph_impl and cuda_graph_scope), as
# Megatron-Bridge @ 067f987d src/megatron/bridge/ sets them: (table model, system, dtype[, GPUs]) -> scopes; "none"
# where the recipe keeps the base recipe's cuda_graph_impl "none" (recipes/qwen/h100/qwen3_moe.py for Qwen3-235B,
# recipes/deepseek/h100/deepseek_v3.py, recipes/gpt_oss/h100/gpt_oss.py)
MOE_ROUTER_GRAPH, MOE_ATTN_GRAPH = "moe_router,moe_preprocess", "attn,moe_router,moe_preprocess"
MOE_CUDA_GRAPH = {
    # recipes/qwen/h100/qwen3_moe.py bf16 (moe_router, moe_preprocess); perf_recipes/qwen/h100/qwen3_moe.py fp8cs
    # adds attn
    ("Qwen3_30B_a3B", "DGX-H100", "bf16"): MOE_ROUTER_GRAPH, ("Qwen3_30B_a3B", "DGX-H100", "fp8"): MOE_ATTN_GRAPH,
    # perf_recipes/qwen/b200/qwen3_moe.py, every precision
    ("Qwen3_30B_a3B", "DGX-B200", "bf16"): MOE_ATTN_GRAPH, ("Qwen3_30B_a3B", "DGX-B200", "fp8"): MOE_ATTN_GRAPH,
    ("Qwen3_30B_a3B", "DGX-B200", "mxfp8"): MOE_ATTN_GRAPH,
    # perf_recipes/qwen/b300/qwen3_moe.py bf16 and fp8cs; fp8mx: the full-iteration helper (qwen/common.py)
    ("Qwen3_30B_a3B", "DGX-B300", "bf16"): MOE_ROUTER_GRAPH, ("Qwen3_30B_a3B", "DGX-B300", "fp8"): MOE_ROUTER_GRAPH,
    ("Qwen3_30B_a3B", "DGX-B300", "mxfp8"): "full_iteration",
    # the 256-GPU fp8mx recipes on B200 and B300 (the full-iteration helper); the others none
    ("Qwen3_235B_a22B", "DGX-B200", "mxfp8", 256): "full_iteration",
    ("Qwen3_235B_a22B", "DGX-B300", "mxfp8", 256): "full_iteration",
    # perf_recipes/deepseek/common.py: attn, moe_router, moe_preprocess for B200 fp8mx and B300 bf16 / fp8cs; B300
    # fp8mx the full-iteration helper
    ("DeepSeekV3", "DGX-B200", "mxfp8"): MOE_ATTN_GRAPH, ("DeepSeekV3", "DGX-B300", "bf16"): MOE_ATTN_GRAPH,
    ("DeepSeekV3", "DGX-B300", "fp8"): MOE_ATTN_GRAPH, ("DeepSeekV3", "DGX-B300", "mxfp8"): "full_iteration",
    # perf_recipes/gpt_oss/b300/gpt_oss.py, both 120B recipes
    ("GPT OSS 120B", "DGX-B300", "bf16"): MOE_ATTN_GRAPH, ("GPT OSS 120B", "DGX-B300", "mxfp8"): MOE_ATTN_GRAPH,
}
# Where a recipe's settings changed between the containers the tables ran (the snapshot above, whose perf_recipes date
# from 2026-06-25, aad7d9ce2, cannot see it): (table model, system, dtype[, pipeline stages]) -> [(the first container
# read to run a state, the first past it, the state: dispatcher, EP overlap, CUDA graph)]; a row of another container
# (or a "(tokendrop)" variant, a recipe of its own) takes the snapshot's. Read in Megatron-Bridge's
# scripts/performance/configs/ (removed in c8327cfc2, 2026-07-08), whose layouts match the rows': 0ec1df783 (2026-02-27,
# first in 26.02.01) moved the B200 Qwen3-30B recipe from the alltoall dispatcher with router graphs (at c3e43e6aa) to
# HybridEP with attention graphs; the H100 Qwen3-30B fp8cs runs to 26.02.01 took 2 stages (VP 12) with DeepEP and EP
# overlap and no graphs (at 4a6450755^), from 26.04 EP 16 with HybridEP, no overlap and no graphs (at 4a6450755 ..
# 5f3b336f9); every full-iteration recipe arrived in June 2026 (8af195c0a, afb5dd47c, 55443cbfb, ac4ad89ff: first in
# 26.06), and before them (at 8af195c0a^) the B300 Qwen3-30B fp8mx runs took the fp8cs recipe's HybridEP with router
# graphs and no EP overlap, the 256-GPU Qwen3-235B fp8mx runs the fp8cs settings (B300: HybridEP, B200: alltoall; no
# graphs, no EP overlap), DeepSeek-V3 HybridEP without EP overlap, no graphs at 16 stages (V1, B200 and B300) and
# attention graphs at 8 on B300 (V2). A key with the pipeline degree comes first. The 25.09 "(tokendrop)" B200 Qwen3-30B
# run enabled Megatron-Core's own graphs (at cac49dcd7 scripts/performance/run_script.py, enable_cuda_graph), of a scope
# not read: none is mapped.
MOE_RECIPE_HISTORY = {
    ("Qwen3_30B_a3B", "DGX-B200", "mxfp8"): [("25.11", "26.02.01", ("alltoall", False, MOE_ROUTER_GRAPH))],
    ("Qwen3_30B_a3B", "DGX-H100", "fp8"): [("26.02", "26.04", ("deepep", True, "none")),
                                          ("26.04", "26.06", ("hybridep", False, "none"))],
    ("Qwen3_30B_a3B", "DGX-B300", "mxfp8"): [("26.02", "26.06", ("hybridep", False, MOE_ROUTER_GRAPH))],
    ("Qwen3_235B_a22B", "DGX-B300", "mxfp8"): [("26.02", "26.06", ("hybridep", False, "none"))],
    ("Qwen3_235B_a22B", "DGX-B200", "mxfp8"): [("26.02", "26.06", ("alltoall", False, "none"))],
    ("DeepSeekV3", "DGX-B300", "mxfp8", 16): [("26.02", "26.06", ("hybridep", False, "none"))],
    ("DeepSeekV3", "DGX-B200", "mxfp8", 16): [("26.02", "26.06", ("hybridep", False, "none"))],
    ("DeepSeekV3", "DGX-B300", "mxfp8", 8): [("26.02", "26.06", ("hybridep", False, MOE_ATTN_GRAPH))],
    # 25.09 on H100 (f37f883a8 scripts/performance/run_script.py, "enable_deepep" and "A2A_1F1B" for h100): DeepEP,
    # overlap_moe_expert_parallel_comm with delay_wgrad_compute, no graphs
    ("DeepSeekV3", "DGX-H100", "fp8", 8): [("25.09", "25.11", ("deepep", True, "none"))],
}
CONTAINERS = ("25.09", "25.11", "26.02", "26.02.01", "26.04", "26.04.01", "26.06")  # the tables' order in time
# How the recipes cut the pipeline stages (parallel.stage_split; Megatron-Bridge @ 067f987d src/megatron/bridge/):
# "layers", Megatron-Core's default even split with the output layer and loss on top of the last stage's layers,
# where a recipe sets no pipeline_model_parallel_layout and no account_for_embedding/loss_in_pipeline_split:
# recipes/gpt_oss/h100/gpt_oss.py gpt_oss_120b_pretrain_64gpu_h100_bf16_config (layout None, both account_for False)
# and recipes/qwen/h100/qwen3_moe.py qwen3_30b_a3b_pretrain_8gpu_h100_bf16_config (PP 2, layout None, no account_for).
# "counted", the same with the embedding and the loss counted as a layer each: Qwen3-235B's (recipes/qwen/h100/
# qwen3_moe.py qwen3_235b_a22b_pretrain_256gpu_h100_bf16_config, account_for_embedding/loss_in_pipeline_split True,
# the base of every Qwen3-235B perf recipe: recipes/qwen/qwen3_moe.py names it qwen3_235b_a22b_pretrain_config).
# DeepSeek-V3's recipes give explicit layouts (DSV3_LAYOUTS below); the others stay "balanced"
MOE_STAGE_SPLIT = {"GPT OSS 120B": "layers", "Qwen3_30B_a3B": "layers", "Qwen3_235B_a22B": "counted"}
# The dense Llama recipes the same way: Llama 3.1 405B's base (recipes/llama/h100/llama3.py
# llama31_405b_pretrain_256gpu_h100_bf16_config, and its SFT config) sets both account_for_* (126 + 2 layers over 8 x 8
# virtual stages); Llama 3 70B's set neither and no layout (the explicit layout of its H100 FP8-CS perf recipe came on
# 2026-08-07, Megatron-Bridge 56ae11dff, after the tables' containers)
DENSE_STAGE_SPLIT = {"LLAMA3.1_405B": "counted", "LLAMA3_70B": "layers"}
# DeepSeek-V3's layouts (parallel.stage_split as decoder layers per virtual stage, parallel.partition): the B200 and
# B300 perf recipes call set_deepseek_v3_pipeline_model_parallel_layout (Megatron-Bridge @ 067f987d
# src/megatron/bridge/perf_recipes/deepseek/b200/deepseek_v3.py), which takes the layout of
# src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py _get_deepseek_v3_pipeline_layout for (pipeline, virtual
# stages): the embedding with the first stage's layers, the MTP module and the loss after the last's; a pair it does
# not list keeps Megatron-Core's own split (balanced here). Read at 067f987d and taken for the earlier containers too.
DSV3_LAYOUTS = {(4, 1): (16, 16, 16, 13), (8, 1): (8,) * 7 + (5,), (4, 2): (8,) * 7 + (5,),
                (16, 1): (4,) * 15 + (1,), (8, 2): (4,) * 15 + (1,), (4, 4): (4,) * 15 + (1,)}
# Megatron-LM's DeepSeek-V3 on GB200 runs (NVIDIA/Megatron-LM @ eb0783b6 docs/discussions/deepseek-v3-gb200-
# optimization/deepseek-v3-gb200-optimization.md, line 42): PP 8, VPP 4, --pipeline-model-parallel-layout Et|(tt|)*30L
DSV3_GB200_LAYOUT = (1,) + (2,) * 30 + (0,)
# "Et|(tt|)*30mL" (the same decoder layers, the MTP module on the last stage with the loss): the 25.09 perf config set it
# for every system (Megatron-Bridge @ f37f883a8 scripts/performance/configs/deepseek/deepseek_v3_llm_pretrain.yaml,
# model.pipeline_model_parallel_layout), and the H100 perf configs after it (v0.1.0rc4 scripts/performance/
# run_script.py; v0.2.0 configs/deepseek/deepseek_llm_pretrain.py deepseek_v3_h100_config; v0.3.0
# deepseek_workload_base_configs.py DEEPSEEK_V3_PRETRAIN_CONFIG_H100_V1 pp_layout). Megatron-Core takes the virtual
# stages from a layout's length over the pipeline stages (NVIDIA/Megatron-LM @ 2a75ac12 megatron/core/transformer/
# transformer_config.py, "detected_vpp_size"): 2 on the 25.09 B200 runs' 16 stages, whose table leaves VP empty.
DSV3_PERF_CONFIG_LAYOUT = DSV3_GB200_LAYOUT
# Transformer Engine's userbuffers tensor-parallel overlap as the perf recipes set it (Megatron-Bridge @ 067f987d
# src/megatron/bridge/, comm_overlap.tp_comm_overlap): (table model, system, task) -> on. It is on in the base recipes
# the Llama perf recipes start from (recipes/llama/h100/llama3.py llama3_70b_pretrain_32gpu_h100_bf16_config and
# llama31_405b_pretrain_256gpu_h100_bf16_config: CommOverlapConfig(tp_comm_overlap=True, tp_comm_overlap_cfg=
# userbuffers_...)), which the perf recipes keep and give their own userbuffers_{bf16,fp8}_{h100,b200}_... layer
# configs; training/comm_overlap.py _get_model_comm_overlap_cfgs turns it off below TP 2 or without sequence
# parallelism. Rows whose recipe is not listed run without it (parallel.tp_overlap: the scenario's micro-pipelined
# TP, :func:`~concurrency_model.training.workload.overlap_exposed`; ASSUMPTIONS megatron_bridge).
# How TE's overlap differs from that model (NVIDIA/TransformerEngine @ d0067d0d): the ring exchange of the forward
# gathers and the backward gathers of proj / fc2 (common/comm_gemm_overlap/comm_gemm_overlap.cpp
# CommOverlapP2PBase::split_overlap_ag) cuts the gather into tp_size chunks, each chunk's GEMM beside the next
# chunk's send: the same exposure; it hides more in two places the model does not take: under an FP8 recipe the
# all-gather buffers are 8-bit (pytorch/module/base.py initialize_ub: fp8_buf for layers_all_gather_overlap), and
# the qkv / fc1 backward runs "bulk" (CommOverlapBase::bulk_overlap): the input's re-gather beside the whole dgrad
# GEMM and the dgrad's reduce-scatter beside the whole wgrad GEMM, on num_sm SMs taken beside the GEMM (2-32 in the
# recipes' userbuffers configs, Megatron-Bridge training/comm_overlap.py), which hides less.
RECIPE_TP_OVERLAP = {
    # perf_recipes/llama/h100/llama3.py llama3_70b_pretrain_64gpu_h100_{bf16,fp8cs}_config: the base recipe's overlap,
    # tp_comm_overlap_cfg userbuffers_{bf16,fp8}_h100_h8192_tp4_mbs1_seqlen8192
    ("LLAMA3_70B", "DGX-H100", "pretrain"): True,
    # llama3_70b_sft_32gpu_h100_{bf16,fp8cs}_config: tp_comm_overlap True (with defer_embedding_wgrad_compute)
    ("LLAMA3_70B", "DGX-H100", "sft"): True,
    # perf_recipes/llama/h100/llama31.py llama31_405b_pretrain_1024gpu_h100_{bf16,fp8cs}_config:
    # userbuffers_{bf16,fp8}_h100_h16384_tp8_cp2_mbs1_seqlen8192
    ("LLAMA3.1_405B", "DGX-H100", "pretrain"): True,
    # perf_recipes/llama/b200/llama31.py llama31_405b_pretrain_128gpu_b200_{bf16,fp8cs,fp8mx}_config:
    # userbuffers_{bf16,fp8}_b200_h16384_tp4_cp2_mbs1_seqlen8192 (off only in the nvfp4 recipe)
    ("LLAMA3.1_405B", "DGX-B200", "pretrain"): True,
    # perf_recipes/llama/{h100,b200}/llama3.py llama3_8b_*: CommOverlapConfig(tp_comm_overlap=False) (and TP 1)
    ("LLAMA3_8B", "DGX-H100", "pretrain"): False, ("LLAMA3_8B", "DGX-B200", "pretrain"): False,
    # the mixtures of experts with TP 2: off (perf_recipes/qwen/h100/qwen3_moe.py
    # qwen3_235b_a22b_pretrain_256gpu_h100_*: tp_comm_overlap=False; recipes/deepseek/h100/deepseek_v3.py:
    # CommOverlapConfig(tp_comm_overlap=False), kept by perf_recipes/deepseek/h100/deepseek_v3.py)
    ("Qwen3_235B_a22B", "DGX-H100", "pretrain"): False, ("DeepSeekV3", "DGX-H100", "pretrain"): False,
}
# Recipes that turn Megatron-Core's overlapped gradient reduction off (training.overlap False): perf_recipes/deepseek/
# h100/deepseek_v3.py, every DeepSeek-V3 H100 recipe: cfg.ddp.overlap_grad_reduce = False and
# cfg.comm_overlap.overlap_grad_reduce = False (the B200 / B300 recipes set it True)
RECIPE_NO_GRAD_OVERLAP = {("DeepSeekV3", "DGX-H100")}


def recipe_tp_overlap(model: str, system: str, task: str, tp: int, sp: bool) -> bool:
    """Whether a Megatron-Bridge row ran with Transformer Engine's tensor-parallel overlap (:data:`RECIPE_TP_OVERLAP`,
    a table's model with its bracketed variant dropped): on where its recipe sets it, with TP >= 2 and sequence
    parallelism (Megatron-Bridge @ 067f987d training/comm_overlap.py turns it off otherwise).

    >>> recipe_tp_overlap("LLAMA3_70B", "DGX-H100", "Pre-Training Performance", 4, True)
    True
    >>> recipe_tp_overlap("LLAMA3_70B", "DGX-H100", "SFT Performance", 4, False)    # no sequence parallelism
    False
    >>> recipe_tp_overlap("Qwen3_235B_a22B (tokendrop)", "DGX-H100", "Pre-Training Performance", 2, True)
    False
    """
    kind = "sft" if task.startswith("SFT") else "lora" if task.startswith("LoRA") else "pretrain"
    return tp >= 2 and sp and RECIPE_TP_OVERLAP.get((model.split(" (")[0], system, kind), False)


def is_moe_row(model: str) -> bool:
    """Whether a Megatron-Bridge table's model is a mixture of experts (Nemotron 3 is a hybrid Mamba-Transformer MoE).

    >>> is_moe_row("DeepSeekV3 (tokendrop)"), is_moe_row("Nemotron_3_Nano"), is_moe_row("LLAMA3_8B")
    (True, True, False)
    """
    return model.startswith(MOE) or model.startswith("Nemotron")


def _moe_fields(b: dict, model: str, system: str, precision: str, ep: float, tp: int, container: str) -> None:
    """The mixture-of-experts parts of a Megatron-Bridge row (:data:`ASSUMPTIONS` ``megatron_bridge_moe``)."""
    base = model.split(" (")[0]
    b["model"] = MOE_PRESETS.get(base, "")
    b["capacity_factor"] = TOKENDROP_CAPACITY if "(tokendrop)" in model else np.nan
    d = int(b["data"])
    e = int(ep) if np.isfinite(ep) else 1
    if e > d and e % tp == 0 and d % (e // tp) == 0:  # the expert group spans the tensor ranks (parallel folding)
        b["note"] = "; ".join(x for x in (b["note"], f"EP {e} over TP {tp} x DP {d}: expert degree {e // tp} over the "
                                          f"data replicas, the experts' GEMMs split over TP") if x)
        e //= tp
    b["expert"] = e
    if precision.startswith("not stated"):
        b["dtype"] = MOE_SYSTEMS.get(system, "fp8")
    elif "MX" in precision.upper():
        b["dtype"] = "mxfp8"
    key = (base, system, b["dtype"])
    b["moe_dispatcher"], b["expert_overlap"] = MOE_RUNTIME_BY_EP.get(
        (base, system, int(ep) if np.isfinite(ep) else 1),
        MOE_RUNTIME.get((base, system, int(b["gpus"])), MOE_RUNTIME.get((base, system), ("alltoall", False))))
    b["cuda_graph"] = MOE_CUDA_GRAPH.get((*key, int(b["gpus"])), MOE_CUDA_GRAPH.get(key, "none"))
    at = CONTAINERS.index(container) if container in CONTAINERS and "(tokendrop)" not in model else -1
    for since, until, state in MOE_RECIPE_HISTORY.get((*key, int(b["pipeline"])), MOE_RECIPE_HISTORY.get(key, [])):
        if CONTAINERS.index(since) <= at < CONTAINERS.index(until):
            b["moe_dispatcher"], b["expert_overlap"], b["cuda_graph"] = state
    if "(tokendrop)" in model:  # apply_moe_token_drop takes the alltoall dispatcher only (TOKENDROP_CAPACITY)
        b["moe_dispatcher"] = "alltoall"
        b["cuda_graph"] = "none"
    # Megatron-Core's EP overlap needs virtual stages with pipelining (scenario.py): a row without them ran without it
    b["expert_overlap"] = b["expert_overlap"] and (b["pipeline"] == 1 or b["interleave"] > 1)
    b["zero_stage"], b["recompute"] = 1, "auto"  # the distributed optimizer (parallel.expert: ZeRO 1 with experts)
    b["recompute_modules"] = MOE_RECOMPUTE.get((base, system, int(ep) if np.isfinite(ep) else 1),
                                               MOE_RECOMPUTE.get((base, system), np.nan))
    b["stage_split"] = MOE_STAGE_SPLIT.get(base, "balanced")
    if base == "DeepSeekV3":  # its layouts: the perf configs' string, else the recipe's map (DSV3_LAYOUTS)
        p = int(b["pipeline"])
        layout = (DSV3_PERF_CONFIG_LAYOUT if container == "25.09" or system == "DGX-H100" else
                  DSV3_LAYOUTS.get((p, int(b["interleave"]))))
        if layout is not None and len(layout) % p == 0:
            b["stage_split"], b["interleave"] = layout, len(layout) // p
            b["schedule"] = "interleaved" if b["interleave"] > 1 else "1f1b"


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
                 cluster={"DGX-H100": "dgx-h100", "DGX-B200": "dgx-b200", "DGX-B300": "dgx-b300"}.get(system, ""),
                 note="bracketed alternative not compared" if bool(r["values_have_parenthesized_alternative"]) else "")
        b["moe"] = is_moe_row(model)
        b["stage_split"] = DENSE_STAGE_SPLIT.get(model, "balanced")
        b["tp_overlap"] = recipe_tp_overlap(model, system, task, tp, tp > 1)
        b["overlap"] = (model.split(" (")[0], system) not in RECIPE_NO_GRAD_OVERLAP
        if model.startswith(MOE):
            _moe_fields(b, model, system, precision, number(r["ep"]), tp, str(r["container"]))
        if model.startswith("Nemotron"):
            b["unmappable"] = f"not mappable: {model} is a hybrid Mamba-Transformer MoE, not modelled"
        elif not b["cluster"]:
            b["unmappable"] = f"not mappable: no preset for {system}"
        elif short == "LoRA ":
            b["unmappable"] = "not mappable: LoRA rank and target modules are not published"
        elif not b["model"]:
            b["unmappable"] = f"not mappable: model {model!r} has no preset"
        rows.append(b)
    return pd.DataFrame(rows)


def nemo_flops_per_token(model: str, seq: int) -> float:
    """NeMo's model FLOPs per token of a training step (forward and backward), the count behind its TFLOP/s per
    GPU: NVIDIA/NeMo @ 19fadb67 ``nemo/utils/flops_formulas.py`` ``gpt3`` and ``llama2`` / ``llama3`` (at batch 1,
    over the sequence): ``L h^2 (12 + 12 g / a + 18 f / h + 12 s / h + 6 V / (L h))`` for Llama (query groups
    ``g``, heads ``a``, MLP width ``f``; attention counted without the causal half), ``(72 L h^2 + 12 L s h + 6 h
    V)`` for GPT-3. ``model``: a NeMo table's name (``LLAMA3-8B``, ``GPT3-175B``).

    >>> round(nemo_flops_per_token("LLAMA2-7B", 4096) / 1e9, 2)   # 24.07: 780 TFLOP/s at 16,934 tokens/s = 46.06
    46.08
    """
    if model in NEMO_GPT3:
        L, h, _ = NEMO_GPT3[model]
        return 72 * L * h * h + 12 * L * seq * h + 6 * h * NEMO_VOCAB["gpt3"]
    c, _ = load_hf_config(LLAMA[model])
    L, h, a = c["num_hidden_layers"], c["hidden_size"], c["num_attention_heads"]
    g, f = c.get("num_key_value_heads", a), c["intermediate_size"]
    V = NEMO_VOCAB["llama3" if model.startswith("LLAMA3") else "llama2"]
    return L * h * h * (12 + 12 * g / a + 18 * f / h + 12 * seq / h + 6 * V / (L * h))


def _tokens(cell) -> int:
    """A sequence length as published: ``4096`` or ``8K`` (K = 1024 tokens, as the long-sequence page's 1024K
    = 1M).

    >>> _tokens("8K"), _tokens(4096), _tokens("1024K")
    (8192, 4096, 1048576)
    """
    text = str(cell).strip()
    return int(text[:-1]) * 1024 if text.upper().endswith("K") else int(float(text))


# NeMo 24.07's fine-tuning (SFT) runs: NeMo-Framework-Launcher's SFT configuration keeps the optimizer's parameter
# copy and moments in bf16 (NVIDIA/NeMo-Framework-Launcher @ 0da9ad9c launcher_scripts/conf/peft/llama/sft.yaml:
# optim name distributed_fused_adam, dtype bf16, grad_sync_dtype bf16; its H100 example for the 70B on 2 nodes,
# examples/peft/llama/h100/70b_2node.sh @ 1ee3eb3e, runs TP 4 x PP 4, FP8, packed 4,096-token sequences, as the
# table's row). Its fp8_params (FP8 weights) is not modelled: the weights stay 16-bit.
NEMO_SFT_OPTIMIZER_DTYPE = "bf16"
# the virtual stages of the SFT runs, which the table does not publish: the launcher's H100 examples of the table's
# layouts (13b_1node.sh @ 7d6e2df9: TP 1 x PP 4, VP 10, GBS 32, packed 4,096; 70b_2node.sh @ 1ee3eb3e: TP 4 x PP 4,
# VP 20, GBS 32, packed 4,096), as the pre-training rows of the same models
NEMO_SFT_VP = {"LLAMA2-13B": 10, "LLAMA2-70B": 20}


def nemo_rows() -> pd.DataFrame:
    """NeMo's 24.07 performance summary and long-sequence tables, one row per published run, in the common row
    shape (``flops_per_token``, ``without_cp_tflops`` and ``measured_speedup`` added)."""
    df = load("nemo_2407_and_longseq_train_throughput")
    rows = []
    for i, r in df.iterrows():
        model, system, task, table = str(r["model"]), str(r["system"]), str(r["task"]), str(r["table"])
        longseq = table.startswith("long-seq")
        seq = _tokens(r["seq_len"])
        tp, pp = int(r["tp"]), int(r["pp"])
        cp = int(number(r["cp"])) if np.isfinite(number(r["cp"])) else 1
        short = "SFT " if task == "SFT" else "LoRA " if task == "LoRA" else ""
        vp = number(r["vp"]) if short != "SFT " else NEMO_SFT_VP.get(model, 1)
        label = f"{table}: {short}{model} seq {r['seq_len']} on {r['num_gpus']} {system}"
        group = f"{model} {'CP' if longseq else '24.07'} on {system}"
        b = _base("nemo", i, label, group)
        gpus, note = int(r["num_gpus"]), ""
        if longseq:
            gpus = tp * pp * cp * int(number(r["dp"]))
            if gpus != int(r["num_gpus"]):
                note = f"published # of GPUs {r['num_gpus']} != TP x PP x DP x CP = {gpus}: the layout is taken"
        mbs = number(r["mbs"])
        b.update(model=LLAMA.get(model, model.lower() if model in NEMO_GPT3 else ""), seq=seq, gpus=gpus,
                 data=gpus // (tp * pp * cp), tensor=tp, pipeline=pp, context=cp, interleave=int(vp) if vp > 1 else 1,
                 schedule="interleaved" if vp > 1 else "1f1b", sequence_parallel=tp > 1,
                 microbatch=int(mbs) if np.isfinite(mbs) else 1, global_batch=int(r["gbs"]),
                 dtype="fp8" if str(r["precision"]).upper().startswith("FP8") else "bf16", recompute="auto",
                 zero_stage=1, framework="megatron", measured_tflops=number(r["model_tflops_per_gpu"]),
                 cluster={"DGX-H100": "dgx-h100", "DGX-B200": "dgx-b200"}.get(system, ""), note=note)
        known = model in LLAMA or model in NEMO_GPT3
        b["stage_split"] = NEMO_STAGE_SPLIT
        if short == "SFT ":  # the fine-tuning configuration's optimizer: its state in bf16 (NEMO_SFT_OPTIMIZER_DTYPE)
            b["optimizer_dtype"] = NEMO_SFT_OPTIMIZER_DTYPE
        b["flops_per_token"] = nemo_flops_per_token(model, seq) if known else np.nan
        tps = number(r["tokens_per_s_per_gpu"])
        b["measured_tps"] = tps if np.isfinite(tps) else b["measured_tflops"] * 1e12 / b["flops_per_token"]
        b["without_cp_tflops"] = number(r["tflops_per_gpu_without_cp_best_config"])
        b["measured_speedup"] = number(r["speedup_cp"])
        if model.startswith("Nemotron"):
            b["unmappable"] = f"not mappable: {model} (squared-ReLU Nemotron) has no model preset"
        elif short == "LoRA ":
            b["unmappable"] = "not mappable: LoRA rank and target modules are not published"
        elif not known:
            b["unmappable"] = f"not mappable: model {model!r} has no preset"
        elif not b["cluster"]:
            b["unmappable"] = f"not mappable: no preset for {system}"
        rows.append(b)
    return pd.DataFrame(rows)


def megatron_bridge_dense_rows() -> pd.DataFrame:
    """The dense models' rows of :func:`megatron_bridge_rows` (Llama 3 / 3.1), file order kept in the index."""
    df = megatron_bridge_rows()
    return df[~df["moe"]]


def megatron_bridge_moe_rows() -> pd.DataFrame:
    """The mixtures of experts' rows of :func:`megatron_bridge_rows` (DeepSeek-V3, Qwen3 30B-A3B / 235B-A22B,
    GPT-OSS 120B, and the hybrid Nemotron 3, not modelled), reported apart from the dense ones."""
    df = megatron_bridge_rows()
    return df[df["moe"]]


AB_CLUSTERS = {"DGX-H100": "dgx-h100", "DGX-B200": "dgx-b200", "DGX-B300": "dgx-b300", "GB200 NVL72": "gb200-nvl72"}
AB_DTYPES = {"BF16": "bf16", "FP8": "fp8", "MXFP8": "mxfp8"}


def _ab_row(dataset: str, i: int, r) -> dict:
    """One case of an A/B pair in the common row shape, with the case's own layout, dispatcher, EP overlap and graphs
    (not a recipe's), ZeRO 1 under Megatron-Core; ``interleave`` from a ``vpp`` column where the file has one."""
    tp, pp, cp, gpus = int(r["tp"]), int(r["pp"]), int(r["cp"]), int(r["num_gpus"])
    vpp = int(r.get("vpp", 1))
    b = _base(dataset, i, f"{r['pair']}: {r['case']}", str(r["pair"]))
    b.update(model=MOE_PRESETS.get(str(r["model"]), ""), seq=int(r["seq_len"]), gpus=gpus,
             data=gpus // (tp * pp * cp), tensor=tp, pipeline=pp, context=cp, interleave=vpp,
             schedule="interleaved" if vpp > 1 else "1f1b", sequence_parallel=tp > 1, microbatch=int(r["mbs"]),
             global_batch=int(r["gbs"]), dtype=AB_DTYPES.get(str(r["precision"]), "bf16"), zero_stage=1,
             framework="megatron", expert=int(r["ep"]), moe=True, moe_dispatcher=str(r["dispatcher"]),
             expert_overlap=str(r["ep_overlap"]) == "True", cuda_graph=str(r["cuda_graph"]),
             cluster=AB_CLUSTERS.get(str(r["system"]), ""), note=str(r["note"]))
    return b


def megatron_bridge_ab_rows() -> pd.DataFrame:
    """Megatron-Bridge's A/B step times (``megatron_bridge_ab_step_time``: the cases of a pair differ in one setting,
    the EP overlap or the CUDA graphs), one row per case (:func:`_ab_row`), mapped as :data:`ASSUMPTIONS`
    ``megatron_bridge_moe`` maps a row; throughput = global batch x sequence / step time / GPUs."""
    rows = []
    for i, r in load("megatron_bridge_ab_step_time").iterrows():
        b = _ab_row("megatron_bridge_ab", i, r)
        b.update(recompute="none", stage_split=MOE_STAGE_SPLIT.get(str(r["model"]), "balanced"),
                 measured_tps=int(r["gbs"]) * int(r["seq_len"]) / float(r["step_time_s"]) / b["gpus"])
        rows.append(b)
    return pd.DataFrame(rows)


def megatron_dsv3_ab_rows() -> pd.DataFrame:
    """Megatron-LM's DeepSeek-V3 on 256 GB200 optimization history (``megatron_dsv3_gb200_ablation``: TFLOP/s per GPU
    of successive settings; a pair's cases differ in the dispatcher, the recompute modules or the CUDA graphs), one
    row per case (:func:`_ab_row`): the GB200 NVL72 preset, the interleaved schedule over the virtual stages and the
    stated layout (:data:`DSV3_GB200_LAYOUT`), the stated recompute modules, no MTP. Its measure is TFLOP/s
    (``measured_tflops``; Megatron-LM's model FLOPs, the same in every case of a pair), so only speed-ups within a
    pair are compared (``validate.ranking.ab_pairs``): ``measured_tps`` is NaN."""
    rows = []
    for i, r in load("megatron_dsv3_gb200_ablation").iterrows():
        b = _ab_row("megatron_dsv3_ab", i, r)
        b.update(recompute="selective", recompute_modules=str(r["recompute_modules"]),
                 mtp_layers=int(r["mtp_layers"]), stage_split=DSV3_GB200_LAYOUT, measured_tps=np.nan,
                 measured_tflops=float(r["tflops_per_gpu"]))
        rows.append(b)
    return pd.DataFrame(rows)


ROWS = {"torchtitan": torchtitan_rows, "llmfoundry": llmfoundry_rows, "megatron_bridge": megatron_bridge_dense_rows,
        "megatron_bridge_moe": megatron_bridge_moe_rows, "nemo": nemo_rows, "bigscience": bigscience_rows,
        "megatron_bridge_ab": megatron_bridge_ab_rows, "megatron_dsv3_ab": megatron_dsv3_ab_rows}


def rows(dataset: str) -> pd.DataFrame:
    """The rows of one set (:data:`DATASETS`) in the common row shape."""
    if dataset not in ROWS:
        raise ValueError(f"dataset: unknown {dataset!r}; allowed: {', '.join(ROWS)}")
    return ROWS[dataset]()


def model_spec(r) -> dict:
    """The scenario's ``model`` of a row: an MPT as the zoo's GPT family, a Llama as its Hugging Face preset."""
    if r["model"] == "bigscience-gpt":  # Megatron-DeepSpeed's GPT of 2022: unfused attention, Megatron's softmax
        return {"kind": "gpt", "layers": int(r["layers"]), "hidden": int(r["hidden"]), "heads": int(r["heads"]),
                "seq_len": int(r["seq"]), "vocab": BIGSCIENCE_VOCAB}
    if str(r["model"]).startswith("mpt-"):
        layers, hidden, heads = MPT_SHAPES[r["model"][4:]]
        # llm-foundry's benchmarks ran its Triton FlashAttention (ASSUMPTIONS["llmfoundry"]): FlashAttention-1's class
        return {"kind": "gpt", "layers": layers, "hidden": hidden, "heads": heads, "seq_len": int(r["seq"]),
                "vocab": MPT_VOCAB, "fused_attention": "flash1", "dropout": 0}
    # Megatron-Core's attention is Transformer Engine's DotProductAttention, whose FusedAttention backend is cuDNN's
    # fused attention (timing.attention "cudnn"); the other stacks run FlashAttention-2 / PyTorch SDPA (True)
    fused = "cudnn" if r.get("framework") == "megatron" else True
    if str(r["model"]).upper() in NEMO_GPT3:
        layers, hidden, heads = NEMO_GPT3[str(r["model"]).upper()]
        return {"kind": "gpt", "layers": layers, "hidden": hidden, "heads": heads, "seq_len": int(r["seq"]),
                "vocab": NEMO_VOCAB["gpt3"], "fused_attention": fused}
    spec = {"hf_config": r["model"], "seq_len": int(r["seq"]), "fused_attention": fused}
    mtp = r.get("mtp_layers", np.nan)
    if mtp is not None and np.isfinite(mtp):  # a run without the config's multi-token prediction modules
        spec["mtp_layers"] = int(mtp)
    cf = r.get("capacity_factor", np.nan)
    return {**spec, "capacity_factor": float(cf)} if cf is not None and np.isfinite(cf) else spec


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
    if r.get("context_algorithm", "ring") != "ring" and par["context"] > 1:
        par["context_algorithm"] = r["context_algorithm"]
    if bool(r.get("tp_overlap", False)):
        par["tp_overlap"] = True
    if int(r.get("expert", 1) or 1) > 1:
        par["expert"] = int(r["expert"])
    if isinstance(r.get("moe_dispatcher"), str) and r["moe_dispatcher"] != "alltoall":
        par["moe_dispatcher"] = r["moe_dispatcher"]
    if isinstance(r.get("expert_overlap"), (bool, np.bool_)) and r["expert_overlap"]:
        par["expert_overlap"] = True
    split = r.get("stage_split")
    if (split in ("layers", "counted") or isinstance(split, tuple)) and par["pipeline"] > 1:
        par["stage_split"] = list(split) if isinstance(split, tuple) else split
    if par["data"] * par["tensor"] * par["pipeline"] * par["context"] != r["gpus"]:
        raise ValueError(f"not mappable: data x tensor x pipeline x context != {int(r['gpus'])} GPUs")
    training = {"dtype": r["dtype"], "recompute": r["recompute"], "optimizer": "adam",
                "zero_stage": int(r["zero_stage"]), "overlap": bool(r["overlap"]), "framework": r["framework"],
                "loss": r["loss"] if isinstance(r.get("loss"), str) else None}
    if isinstance(r.get("fp8_recipe"), str):
        training["fp8_recipe"] = r["fp8_recipe"]
    if isinstance(r.get("reduce_dtype"), str):
        training["reduce_dtype"] = r["reduce_dtype"]
    if isinstance(r.get("optimizer_dtype"), str):
        training["optimizer_dtype"] = r["optimizer_dtype"]
    if r.get("compile") is False or r.get("compile") is np.False_:  # torchtitan's rows run without torch.compile
        training["compile"] = False
    if isinstance(r.get("cuda_graph"), str) and r["cuda_graph"] != "none":
        training["cuda_graph"] = r["cuda_graph"]
    if np.isfinite(r.get("cuda_context_bytes", np.nan)):
        training["cuda_context_bytes"] = float(r["cuda_context_bytes"])
    if isinstance(r.get("recompute_modules"), str) and r["recompute"] in ("selective", "auto"):
        training["recompute_modules"] = r["recompute_modules"]  # with "auto": the ladder's first rung (_predict)
    return {"model": model_spec(r), "cluster": r["cluster"], "parallel": par, "training": training}


def _predict(r: dict) -> dict:
    try:
        sc = scenario_for(r)
    except ValueError as e:
        return {"status": "unmappable", "reason": str(e)}
    tries = RECOMPUTE_ORDER if r["recompute"] == "auto" else (r["recompute"],)
    modules = r.get("recompute_modules")
    if r["recompute"] == "auto" and isinstance(modules, str):  # the recipe's modules, then heavier (ASSUMPTIONS)
        tries = ("selective", "full")
    # "auto" (nemo, megatron_bridge_moe: ASSUMPTIONS): the least recompute whose expected peak (the allocator's
    # reserved figure, over_expected) fits; one that fits only without the allocator's headroom is taken when no mode
    # fits whole
    e, risky, err = None, None, None
    for mode in tries:
        training = {**sc["training"], "recompute": mode}
        if mode != "selective":
            training.pop("recompute_modules", None)
        try:
            got = estimate({**sc, "training": training})
        except ValueError as x:
            err = x
            continue
        if not over_expected(got) or len(tries) == 1:
            e = got
            break
        risky = risky or (mode, got)
    if e is None and risky is not None:
        mode, e = risky
    if e is None:
        reason = " ".join(str(err).split())
        return {"status": "refused", "reason": reason,
                **({"memory_verdict": "does not fit"} if reason.startswith("memory:") else {})}
    tokens = r["global_batch"] * r["seq"] / r["gpus"]
    reserved = e.memory.get("reserved_bytes", e.memory_bytes_per_device)
    outside = sum(e.memory.get(f"{k}_bytes", 0.0) for k in OUTSIDE)
    out = {"status": "ok", "reason": "", "predicted_time_s": e.step_time_s,
           "predicted_tps": tokens / e.step_time_s, "predicted_tps_p10": tokens / e.step_time_p90_s,
           "predicted_tps_p90": tokens / e.step_time_p10_s, "predicted_memory_bytes": e.memory_bytes_per_device,
           # what the caching allocator reserves at its peak, the figure torchtitan logs (module docstring), and
           # the peak as the row's measurement read it (MEMORY_READINGS)
           "predicted_reserved_bytes": reserved,
           "predicted_peak_bytes": reserved + (outside if r.get("memory_reading") == "nvidia-smi" else 0.0),
           "recompute_used": f"{mode} ({modules})" if mode == "selective" and isinstance(modules, str) else mode,
           "memory_verdict": "at risk" if e.memory_at_risk else "fits"}
    if np.isfinite(r.get("flops_per_token", np.nan)):
        out["predicted_tflops"] = out["predicted_tps"] * r["flops_per_token"] / 1e12
    return out


PREDICTED = ("predicted_time_s", "predicted_tps", "predicted_tps_p10", "predicted_tps_p90", "predicted_memory_bytes",
             "predicted_reserved_bytes", "predicted_peak_bytes", "recompute_used", "predicted_tflops", "memory_verdict")
VERDICTS = ("fits", "at risk", "does not fit")  # the estimate's word on memory: the band's upper end fits; the
# central figure fits and the upper end does not; the central figure does not (the estimate refuses the layout)


SUSTAINED_FIT_SET = "llmfoundry"  # the set whose H100 bf16 rows fitted efficiency.sustained (:func:`in_sustained_fit`)


def in_sustained_fit(df: pd.DataFrame) -> np.ndarray:
    """The rows ``efficiency.sustained`` of the GH100 presets was fitted on (``benchmarks/fit_h100_sustained.py``):
    llm-foundry's H100 bf16 runs. Validation reports them as ``in-sample``, every other row of every set as held out.

    >>> df = pd.DataFrame({"dataset": ["llmfoundry", "llmfoundry", "torchtitan"], "cluster": ["dgx-h100", "dgx-a100",
    ...                    "dgx-h100"], "dtype": ["bf16", "bf16", "bf16"]})
    >>> in_sustained_fit(df).tolist()
    [True, False, False]
    """
    return ((df["dataset"] == SUSTAINED_FIT_SET) & (df["cluster"] == "dgx-h100") & (df["dtype"] == "bf16")).to_numpy()


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
    res["ape_memory"] = (res["predicted_peak_bytes"] - res["measured_memory_bytes"]).abs() / \
        res["measured_memory_bytes"]
    return res


def memory_verdicts(res: pd.DataFrame) -> pd.DataFrame:
    """The estimate's word on memory (:data:`VERDICTS`) against what the runs did, from a frame :func:`evaluate`
    returned: rows ``ran`` and ``went out of memory`` (``went_oom``; a set without it ran every row), columns the
    verdicts, counts. "fits" of a run that went out of memory is the miss that misleads a user; "does not fit" of one
    that ran is a false refusal; "at risk" of either is a warning, right about the first.

    >>> res = pd.DataFrame({"went_oom": [True, True, False, False, False],
    ...                     "memory_verdict": ["does not fit", "fits", "fits", "at risk", np.nan]})
    >>> v = memory_verdicts(res)
    >>> v.loc["ran"].to_dict(), v.loc["went out of memory"].to_dict()
    ({'fits': 1, 'at risk': 1, 'does not fit': 0}, {'fits': 1, 'at risk': 0, 'does not fit': 1})
    """
    oom = _went_oom(res)
    out = {}
    for name, rows in (("ran", res[~oom]), ("went out of memory", res[oom])):
        got = rows["memory_verdict"].value_counts()
        out[name] = {v: int(got.get(v, 0)) for v in VERDICTS}
    return pd.DataFrame.from_dict(out, orient="index")


# the sets whose runs the memory verdict is checked on: BigScience's (some went out of memory) and the dense shared sets
# (every run ran); the mixtures of experts' recompute is taken as the least that fits, so their verdict says nothing
def _went_oom(res: pd.DataFrame) -> pd.Series:
    """Which rows of an :func:`evaluate` frame went out of memory (``went_oom``; a set without it ran every row)."""
    return res["went_oom"].eq(True) if "went_oom" in res else pd.Series(False, index=res.index)


VERDICT_SETS = ("bigscience", "torchtitan", "llmfoundry", "megatron_bridge", "nemo")


def verdicts_by_set(names=VERDICT_SETS, workers: int = 1) -> tuple[pd.DataFrame, pd.DataFrame]:
    """``(counts, misses)``: :func:`memory_verdicts` of each set's mapped rows, a row ``"<set>: <outcome>"`` for each
    outcome the set has runs of, and the rows the verdict got wrong (``"does not fit"`` of a run that ran, ``"fits"``
    of one that went out of memory: ``dataset``, ``label``, ``went_oom``, ``memory_verdict``, ``reason``,
    ``predicted_peak_bytes``)."""
    counts, misses = [], []
    for name in names:
        res = evaluate(rows(name).query("unmappable == ''"), workers=workers)
        v = memory_verdicts(res)
        v = v[v.sum(axis=1) > 0]
        counts.append(v.set_axis([f"{name}: {o}" for o in v.index]))
        oom = _went_oom(res)
        wrong = (oom & res["memory_verdict"].eq("fits")) | (~oom & res["memory_verdict"].eq("does not fit"))
        misses.append(res.loc[wrong, ["dataset", "label", "memory_verdict", "reason", "predicted_peak_bytes"]]
                      .assign(went_oom=oom[wrong]))
    return pd.concat(counts), pd.concat(misses, ignore_index=True)


def fp8_tensor_ok(cfg: dict, t: int) -> bool:
    """Whether Transformer Engine can run a model's GEMMs in FP8 at tensor-parallel degree ``t``: FP8 execution needs
    every GEMM operand's last dimension divisible by 16 and the product of the others by 8 (NVIDIA/TransformerEngine
    @ v1.4 = 0fbc76af ``transformer_engine/pytorch/utils.py`` ``check_dim_for_fp8_exec``, asserted on the input and
    the weight in ``module/linear.py``). A tensor rank holds the widths ``heads x head_dim / t`` (attention output
    projection's input), ``intermediate / t`` (the MLP's down projection's input) and ``(q + 2 kv) head_dim / t``
    (the QKV projection's output). ``cfg``: a Hugging Face config.

    >>> cfg = {"hidden_size": 4096, "num_attention_heads": 32, "intermediate_size": 11008}   # Llama 2 7B
    >>> [t for t in (1, 2, 4, 8, 16, 32) if fp8_tensor_ok(cfg, t)]          # 11008 / 32 = 344 = 21.5 x 16
    [1, 2, 4, 8, 16]
    """
    h, a = cfg["hidden_size"], cfg["num_attention_heads"]
    d = cfg.get("head_dim") or h // a
    kv = cfg.get("num_key_value_heads") or a
    widths16 = (a * d, cfg["intermediate_size"])
    widths8 = ((a + 2 * kv) * d, 2 * cfg["intermediate_size"])
    return all(w % (16 * t) == 0 for w in widths16) and all(w % (8 * t) == 0 for w in widths8)


def _without_cp(r: dict) -> list[dict]:
    """The layouts without context parallelism a long-sequence row's "without CP" value may have come from: the
    same GPUs and batch; TP a power of 2 up to the query groups (NeMo's footnote: "the maximum TP size is limited by
    the number of query groups", so past a node where the groups allow) whose GEMMs Transformer Engine can run in
    FP8 (:func:`fp8_tensor_ok`: 16 for Llama 2 7B, whose 11,008-wide MLP does not split into 32 widths of 16) x PP a
    power of 2 dividing the layers; the rest data parallel; recompute the least whose expected peak fits
    (:func:`over_expected`; the footnote: "even with full activation recomputation it is impossible to run ...
    without CP")."""
    cfg = load_hf_config(r["model"])[0]
    groups = cfg.get("num_key_value_heads") or cfg["num_attention_heads"]
    layers = cfg["num_hidden_layers"]
    out = []
    for t in (1, 2, 4, 8, 16, 32, 64):
        if t > groups or (r["dtype"] == "fp8" and not fp8_tensor_ok(cfg, t)):
            continue
        for p in (1, 2, 4, 8, 16, 32):
            if layers % p or r["gpus"] % (t * p) or r["global_batch"] % (r["gpus"] // (t * p)):
                continue
            out.append({**r, "tensor": t, "pipeline": p, "context": 1, "data": r["gpus"] // (t * p),
                        "sequence_parallel": t > 1, "recompute": "auto"})
    return out


def over_expected(e) -> bool:
    """Whether an estimate's expected peak, the allocator's reserved figure and what sits outside it, exceeds the
    device: what a run that ran cannot have done. ``"auto"`` recompute takes the least mode that passes this, not the
    band's upper end, which also holds the spread of measured peaks about the expected one
    (:func:`~concurrency_model.parallel.allocator.band_excess_bytes`) and so says "at risk" of some runs that fit."""
    m = e.memory  # the reserved figure before its cap at the device (allocator.reserved_bytes), and the outside
    return m["total_bytes"] + m["fragmentation_bytes"] > m["capacity_bytes"]


def _outcome(job: tuple) -> tuple:
    """``(status, predicted tokens/s per GPU, over the expected peak)`` of one row of :func:`rows` under one
    recompute mode (``job`` = ``(row, mode)``): what :func:`_predict`'s ``"auto"`` weighs, kept for every mode."""
    r, mode = job
    try:
        sc = scenario_for(r)
        e = estimate({**sc, "training": {**sc["training"], "recompute": mode}})
    except ValueError:
        return "refused", np.nan, True
    return "ok", r["global_batch"] * r["seq"] / r["gpus"] / e.step_time_s, over_expected(e)


def least_recompute(outcomes: dict, floor: str = "none") -> str | None:
    """The recompute mode :func:`_predict`'s ``"auto"`` takes from ``outcomes`` (``{mode: (status, tokens/s, over
    the expected peak)}``, :func:`_outcome`, :func:`over_expected`), starting at ``floor``: the least of
    :data:`RECOMPUTE_ORDER` whose expected peak fits, else the least that fits at the central figure, else None (every
    mode refused).

    >>> ok, risky, no = ("ok", 1.0, False), ("ok", 2.0, True), ("refused", float("nan"), True)
    >>> least_recompute({"none": risky, "selective": risky, "full": ok}), least_recompute({"none": ok, "full": ok})
    ('full', 'none')
    >>> least_recompute({"none": ok, "selective": ok, "full": risky}, floor="full"), least_recompute({"none": no})
    ('full', None)
    """
    if floor not in RECOMPUTE_ORDER:
        raise ValueError(f"floor: unknown {floor!r}; allowed: {', '.join(RECOMPUTE_ORDER)}")
    modes = [m for m in RECOMPUTE_ORDER[RECOMPUTE_ORDER.index(floor):] if outcomes.get(m, ("refused",))[0] == "ok"]
    whole = [m for m in modes if not outcomes[m][2]]
    return whole[0] if whole else modes[0] if modes else None


def nemo_cp_speedups(workers: int | None = None) -> pd.DataFrame:
    """The long-sequence rows with context parallelism (CP > 1) and a published "without CP" value: the published
    speed-up of CP over the best layout without it (``measured_speedup``) against the predicted one, the row's
    prediction over the best prediction of :func:`_without_cp` (``predicted_speedup``), and their ratio less one
    (``error``). NeMo does not publish its layouts without CP; the best of those the estimate lets fit is taken,
    each with the least recompute that fits (:func:`least_recompute`) but never less than the best layout of the
    next shorter sequence of the same table used (``baseline_recompute``): NeMo's page says its runs without CP
    took "the most performant model- and data-parallel configurations without CP given the memory capacity
    constraint" and that at the longest length "even with full activation recomputation it is impossible to run
    ... without CP" (NVIDIA/NeMo @ 19fadb67 ``docs/source/performance/performance_long_sequence.md``, the text and
    footnote 1): its search without CP raised the recompute as the sequence grew and kept it there. The published
    column bears this out on the H100 table (the measured column alone, before any speed-up is formed): from 256K
    to 512K tokens its TFLOP/s without CP fall 3.77x, the best layouts with full recompute at both lengths predict
    3.76x, the least recompute that fits at each length alone (full at 256K, none at 512K: TP 16 x PP 4 fits
    without it, 44.7 GB) 2.92x; from 512K to 1M 3.92x against 3.89x and 3.90x (no difference there). Where no
    shorter row of a table needed a recompute, nothing changes."""
    df = rows("nemo")
    df = df[df["label"].str.startswith("long-seq")]
    df = df[(df["context"] > 1) & np.isfinite(df["without_cp_tflops"]) & (df["unmappable"] == "")]
    recs = df.to_dict("records")
    variants = [(i, v) for i, r in enumerate(recs) for v in _without_cp(r)]
    jobs = [(v, mode) for _, v in variants for mode in RECOMPUTE_ORDER]
    if (workers or 1) > 1:
        with ProcessPoolExecutor(min(workers, os.cpu_count() or 1)) as ex:
            out = list(ex.map(_predict, recs))
            got = list(ex.map(_outcome, jobs, chunksize=max(1, len(jobs) // (4 * workers))))
    else:
        out = [_predict(x) for x in recs]
        got = [_outcome(j) for j in jobs]
    n = len(RECOMPUTE_ORDER)
    modes = [dict(zip(RECOMPUTE_ORDER, got[k:k + n])) for k in range(0, len(got), n)]
    floor: dict = {}  # a table's (model, system) recompute so far, the rows taken in order of sequence length
    res = {}
    for i in sorted(range(len(recs)), key=lambda k: (recs[k]["group"], recs[k]["seq"])):
        r, mine = recs[i], out[i]
        alts = []
        for (j, v), o in zip(variants, modes):
            mode = least_recompute(o, floor.get(r["group"], "none")) if j == i else None
            if mode is not None:
                alts.append((o[mode][1], v, mode))
        best_tps, best, used = max(alts, key=lambda x: x[0]) if alts else (np.nan, None, "")
        if used:
            floor[r["group"]] = used
        pred = mine.get("predicted_tps", np.nan) / best_tps if mine["status"] == "ok" else np.nan
        res[i] = {"label": r["label"], "seq": r["seq"], "layout_cp": f"TP{r['tensor']} PP{r['pipeline']} "
                  f"DP{r['data']} CP{r['context']}", "measured_tflops": r["measured_tflops"],
                  "predicted_tflops": mine.get("predicted_tflops", np.nan),
                  "without_cp_tflops": r["without_cp_tflops"],
                  "predicted_without_cp_tflops": best_tps * r["flops_per_token"] / 1e12,
                  "best_without_cp": "" if best is None else f"TP{best['tensor']} PP{best['pipeline']}",
                  "baseline_recompute": used,
                  "measured_speedup": r["measured_tflops"] / r["without_cp_tflops"],
                  "predicted_speedup": pred}
    frame = pd.DataFrame([res[i] for i in range(len(recs))])
    frame["error"] = frame["predicted_speedup"] / frame["measured_speedup"] - 1
    return frame
