"""Fused attention kernels (FlashAttention) at their published speeds, by sequence length, head size and mask.

A fused attention kernel is not a GEMM at the GEMMs' efficiency: its softmax, masking and on-chip
rescaling between the two products keep it well below a large GEMM's rate, the more so at short sequences
(few key blocks per query block) and with a causal mask (the blocks on the diagonal do the work of a full
block for half the pairs). FlashAttention-2's benchmark (Dao 2023, arXiv 2307.08691; figures in the
Dao-AILab/flash-attention README, ``assets/flash2_a100_fwd_bwd_benchmark.png`` and
``assets/flash2_h100_fwd_bwd_benchmark.png``, added at commit 4f285b35) prints the forward + backward
TFLOP/s of FlashAttention (v1, CUDA) and FlashAttention-2 on an A100 80GB SXM4 and an H100 80GB SXM5 at
sequence 512-16k, head size 64 and 128, with and without a causal mask, fp16, batch x sequence = 16k tokens,
hidden 2048. FlashAttention-3's README figure (``assets/flash3_fp16_fwd.png``, commit 7ef24848; Shah et al. 2024, arXiv
2407.08608) prints the forward alone on the H100 (FlashAttention-2 among others). Values here are the printed
bar labels; ``None`` where the figure's legend covers the label (the neighbouring lengths are used).

The benchmark counts FLOP as ``benchmarks/benchmark_flash_attention.py`` (flash-attention @ 60499abc):
forward ``4 b h s^2 d``, halved with the causal mask; backward 2.5 x forward (five matrix products against
two); forward + backward 3.5 x forward. Time is that count over the published rate; where the forward alone
is published the backward takes the rest of the forward + backward time (``2.5 / R_bwd = 3.5 / R_fb -
1 / R_fwd``), else both passes run at the forward + backward rate. Between the printed lengths the rate is
interpolated linearly in log2(sequence), and in head size between 64 and 128; outside it is held at the
nearest printed value (the 8k and 16k rates differ by 0-5%). The rate is kept as a fraction of the board's
fp16 dense peak, so a what-if peak moves it. Kernels: ``flash1`` (FlashAttention v1; also the speed of
its Triton port, whose docstring says its forward + backward is slightly slower than the CUDA one:
HazyResearch flash-attention @ eff9fe6b ``flash_attn/flash_attn_triton.py``), ``flash2`` (FlashAttention-2,
also PyTorch's scaled_dot_product_attention flash backend), ``cudnn`` (cuDNN's fused attention, the kernel
Transformer Engine's ``DotProductAttention`` runs as its ``FusedAttention`` backend, so Megatron-Core, NeMo and
Megatron-Bridge). FlashAttention-3 has only forward figures in these sources: not modelled.

cuDNN's figures: NVIDIA/cudnn-frontend @ cb560b92 (v1.13.0, 2025-07) ``benchmark/sdpa_benchmark_training/
artifacts/sdpa_bf16_benchmark_results_NVIDIA_B200.csv``, the ``pyt_cudnn`` rows (PyTorch's SDPA on its cuDNN
backend, cuDNN 9.10.2, ``sample_b200_bf16_run.txt``): a B200, bf16, causal, batch 1, 128 query heads over 8
key/value heads of 128, sequence 512-128k, forward and backward apart, in the same count as FlashAttention's
(``benchmark_bf16_sdpa.py`` ``flops``: forward ``4 b s^2 h d``, halved causal; backward 2.5 x); the same file of a
GB300 at bb37575d (v1.15, cuDNN 9.13.0) stands for Blackwell Ultra (the B300 takes it as a fraction of the GB300's
2.5 PFLOP/s bf16 peak, as the H200 takes the H100's). Only the causal
head-128 series is published: it stands for every head size and, as a lower bound, for the non-causal kernel.
On a board without cuDNN figures (the A100 and H100 here) ``cudnn`` takes ``flash2``'s, times
:data:`CUDNN_OVER_FLASH2` on Hopper. Transformer Engine's documentation (NVIDIA/TransformerEngine @ 43569381
``docs/examples/attention/attention.ipynb``, 2024-06): "As of Transformer Engine 1.7, cuDNN 9.0 and flash-attn
2.4.2 ... flash-attention outperforms cuDNN attention on Ampere architectures, and cuDNN attention has 20-50%
advantages on Hopper architectures" (its H100 PCIe table, forward + backward in bf16: 1.35 at 512 tokens, head 64,
no mask; 1.38 at 2k, head 128, causal; 1.59 at 8k causal with 32 heads over 4 groups; that run printed cuDNN 9.2.0
and Transformer Engine 1.8.0.dev0). The lower end, 1.2, is taken on Hopper: it is the least advantage documented,
and the NeMo runs checked here are older than that documentation's software (NeMo's own image when its 24.03
release was built, NVIDIA/NeMo @ cb3f2bc7 ``Dockerfile`` of 2024-03-13: ``pytorch:24.01-py3``, whose cuDNN is 8.9.7
as recalled, with Transformer Engine at da30634a, "Transformer Engine 1.2.0"). With the doc's 1.38 instead, NeMo's
median error is 17.7% (its H100 long-sequence rows 13-23% fast) and Megatron-Bridge's 4.9%: the rate depends on the
cuDNN release, which the presets do not carry. Transformer Engine runs cuDNN's kernel only on Hopper: "Select
FusedAttention on sm90 and FlashAttention on others for performance" (TransformerEngine @ da30634a and v1.4 =
0fbc76af ``transformer_engine/pytorch/attention.py``, ``DotProductAttention.forward``), so on the A100 the
``cudnn`` kernel of a Megatron-Core stack is FlashAttention-2 itself (factor 1). The later cuDNN of the FlashAttention-3
paper's figure (flash-attention @ 7ef24848 ``assets/flash3_fp16_fwd.png``: forward, causal, head 128, 539 TFLOP/s at
16k against FlashAttention-2's 335) is not taken: it is a later release than the runs checked here.
"""
from __future__ import annotations

import math

import numpy as np

from ..checks import did_you_mean

KERNELS = ("flash1", "flash2", "cudnn")
DEFAULT_KERNEL = "flash2"  # ``fused_attention: true``: the flash-attn package and PyTorch SDPA's flash backend
SEQ = (512, 1024, 2048, 4096, 8192, 16384)
HEAD_DIMS = (64, 128)
HALF_PRECISION = ("fp16", "bf16")  # the benchmark runs fp16; README: "FP16/BF16"

# published TFLOP/s, [kernel][board][pass][(causal, head size)] at SEQ; pass "fwd_bwd" or "forward"
_FA2_A100 = "flash-attention README, assets/flash2_a100_fwd_bwd_benchmark.png (A100 80GB SXM4, fwd + bwd)"
_FA2_H100 = "flash-attention README, assets/flash2_h100_fwd_bwd_benchmark.png (H100 80GB SXM5, fwd + bwd)"
_FA3_H100 = "flash-attention README, assets/flash3_fp16_fwd.png (H100 80GB SXM5, forward)"
FIGURES = {
    "flash1": {
        "a100-sxm4-80gb": {"fwd_bwd": {(False, 64): (91, 92, 104, 108, 110, 110),
                                       (False, 128): (76, 72, 76, 80, 82, 83),
                                       (True, 64): (58, 70, 77, 87, 92, 97),
                                       (True, 128): (55, 62, 69, 76, 80, 83)}},
        "h100-sxm5-80gb": {"fwd_bwd": {(False, 64): (157, 159, 161, 161, 166, 168),
                                       (False, 128): (127, 127, 128, 131, 137, 139),
                                       (True, 64): (104, 123, 136, 138, 149, 156),
                                       (True, 128): (98, 109, 108, 126, 135, 137)}},
    },
    "flash2": {
        "a100-sxm4-80gb": {"fwd_bwd": {(False, 64): (132, None, 162, 171, 175, 176),
                                       (False, 128): (None, None, 187, 196, 201, 203),
                                       (True, 64): (88, 119, 140, 156, 165, 171),
                                       (True, 128): (99, 133, 155, 173, 182, 189)}},
        "h100-sxm5-80gb": {"fwd_bwd": {(False, 64): (215, 254, 274, 288, 294, 296),
                                       (False, 128): (248, 294, 320, 326, 335, 338),
                                       (True, 64): (141, 192, 232, 257, 273, 284),
                                       (True, 128): (163, 221, 265, 294, 308, 328)},
                           "forward": {(False, 64): (282, 306, 318, 321, 322, 324),
                                       (False, 128): (309, 350, 362, 368, 370, 370),
                                       (True, 64): (180, 229, 262, 284, 295, 299),
                                       (True, 128): (191, 260, 298, 319, 333, 335)}},
    },
}
# cuDNN 9.10.2 on a B200 (module doc): forward and backward TFLOP/s at CUDNN_SEQ, causal, head 128
CUDNN_SEQ = (512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072)
FIGURES["cudnn"] = {
    "b200-sxm-180gb": {"seq": CUDNN_SEQ,
                       "forward": {(True, 128): (54.727, 189.172, 485.444, 874.116, 1197.391, 1349.763, 1429.616,
                                                 1448.032, 1330.234)},
                       "backward": {(True, 128): (38.041, 150.773, 367.518, 694.726, 939.954, 1072.799, 1124.432,
                                                  1058.154, 1023.503)}},
    # Blackwell Ultra: NVIDIA/cudnn-frontend @ bb37575d (v1.15) ...NVIDIA_GB300.csv, pyt_cudnn, cuDNN 9.13.0 on a GB300
    "gb300-288gb": {"seq": CUDNN_SEQ,
                    "forward": {(True, 128): (54.923, 224.233, 593.514, 1144.867, 1495.674, 1702.463, 1795.879,
                                              1770.478, 1720.854)},
                    "backward": {(True, 128): (95.339, 277.209, 487.345, 892.572, 1130.076, 1267.827, 1319.161,
                                               1301.700, 1280.022)}},
}
_CUDNN_B200 = ("NVIDIA/cudnn-frontend @ cb560b92 benchmark/sdpa_benchmark_training/artifacts/"
               "sdpa_bf16_benchmark_results_NVIDIA_B200.csv (pyt_cudnn, cuDNN 9.10.2; forward and backward)")
SOURCES = {("cudnn", "b200-sxm-180gb"): _CUDNN_B200,
           ("cudnn", "gb300-288gb"): "NVIDIA/cudnn-frontend @ bb37575d benchmark/sdpa_benchmark_training/artifacts/"
                                     "sdpa_bf16_benchmark_results_NVIDIA_GB300.csv (pyt_cudnn, cuDNN 9.13.0)",
           ("flash1", "a100-sxm4-80gb"): _FA2_A100, ("flash1", "h100-sxm5-80gb"): _FA2_H100,
           ("flash2", "a100-sxm4-80gb"): _FA2_A100, ("flash2", "h100-sxm5-80gb"): _FA2_H100 + "; " + _FA3_H100}
# fp16 dense peaks of the boards benchmarked (b200-sxm-180gb, gb300-288gb: their presets' datasheet figures)
BOARD_PEAK = {"a100-sxm4-80gb": 312e12, "h100-sxm5-80gb": 989.4e12, "b200-sxm-180gb": 2250e12,
              "gb300-288gb": 2500e12}
FWD, BWD = 1.0, 2.5  # the benchmark's FLOP of each pass, in units of the forward's
# cuDNN's attention over FlashAttention-2's on a board without cuDNN figures of its own: Hopper 1.2, the least of
# Transformer Engine's documented 20-50% (module doc); elsewhere 1 (Transformer Engine runs FlashAttention-2 there)
CUDNN_OVER_FLASH2 = {"h100-sxm5-80gb": 1.2}


def kernel_name(fused) -> str | None:
    """The kernel a graph's ``fused`` attribute names: ``None`` (unfused), :data:`DEFAULT_KERNEL` for ``True``,
    else one of :data:`KERNELS`.

    >>> kernel_name(True), kernel_name("flash1"), kernel_name(False)
    ('flash2', 'flash1', None)
    """
    if fused is False or fused is None:
        return None
    if fused is True:
        return DEFAULT_KERNEL
    if fused not in KERNELS:
        raise ValueError(f"fused_attention: unknown kernel {fused!r}{did_you_mean(str(fused), KERNELS)}; allowed: "
                         f"true, false, {', '.join(KERNELS)}")
    return fused


def _series(values, seq: float, lengths=SEQ) -> float:
    """A printed series at ``seq``: linear in log2(seq) between the printed (non-None) points, held outside."""
    xs = [math.log2(s) for s, v in zip(lengths, values) if v is not None]
    ys = [v for v in values if v is not None]
    return float(np.interp(math.log2(seq), xs, ys))


def _published(table: dict, causal: bool, head_dim: int, seq: float, lengths=SEQ) -> float:
    """The rate (FLOP/s) of one pass's ``table`` at ``seq``; a mask or head size the table lacks takes the one it
    has (cuDNN's causal head-128 series, module doc)."""
    if not any(c == causal for c, _ in table):
        causal = not causal
    dims = sorted(d for c, d in table if c == causal)
    lo, hi = dims[0], dims[-1]
    a, b = _series(table[(causal, lo)], seq, lengths), _series(table[(causal, hi)], seq, lengths)
    w = min(1.0, max(0.0, (head_dim - lo) / (hi - lo))) if hi > lo else 0.0
    return (a + w * (b - a)) * 1e12


def figures(board: str, kernel: str) -> dict | None:
    """The published tables of ``kernel`` on ``board`` (``cudnn`` on a board without its own: ``flash2``'s, its
    lower bound), ``None`` where there are none.

    >>> sorted(figures("b200-sxm-180gb", "cudnn"))
    ['backward', 'forward', 'seq']
    >>> figures("h100-sxm5-80gb", "cudnn") is FIGURES["flash2"]["h100-sxm5-80gb"]
    True
    >>> figures("b200-sxm-180gb", "flash2") is None
    True
    """
    tables = FIGURES.get(kernel, {}).get(board)
    if tables is None and kernel == "cudnn":
        tables = FIGURES["flash2"].get(board)
    return tables


def efficiency(board: str, kernel: str, pass_: str, causal: bool, head_dim: int, seq: float) -> float | None:
    """Fraction of ``board``'s fp16 dense peak that ``kernel`` reaches in ``pass_`` (``forward`` or ``backward``),
    in the benchmark's FLOP count; ``None`` where no figure covers the board or kernel.

    >>> round(efficiency("h100-sxm5-80gb", "flash2", "forward", True, 128, 8192) * 989.4, 1)   # printed 333
    333.0
    >>> round(efficiency("a100-sxm4-80gb", "flash2", "backward", True, 128, 16384) * 312, 1)  # fwd + bwd 189
    189.0
    >>> round(efficiency("b200-sxm-180gb", "cudnn", "backward", True, 128, 32768) * 2250, 1)   # printed 1124.432
    1124.4
    >>> round(efficiency("h100-sxm5-80gb", "cudnn", "forward", True, 128, 8192) * 989.4, 1)    # 1.2 x 333
    399.6
    """
    tables = figures(board, kernel)
    if tables is None:
        return None
    if kernel == "cudnn" and tables is not FIGURES["cudnn"].get(board):  # FlashAttention-2's figures stand in
        return CUDNN_OVER_FLASH2.get(board, 1.0) * efficiency(board, "flash2", pass_, causal, head_dim, seq)
    lengths = tables.get("seq", SEQ)
    if "backward" in tables:  # both passes published apart
        rate = _published(tables[pass_], causal, head_dim, seq, lengths)
        return rate / BOARD_PEAK[board]
    fb = _published(tables["fwd_bwd"], causal, head_dim, seq)
    if "forward" not in tables:
        rate = fb
    elif pass_ == "forward":
        rate = _published(tables["forward"], causal, head_dim, seq)
    else:  # the rest of the forward + backward time
        f = _published(tables["forward"], causal, head_dim, seq)
        rate = BWD / ((FWD + BWD) / fb - FWD / f)
    return rate / BOARD_PEAK[board]


def benchmark_flop(batch: int, heads: int, seq_q: int, head_dim: int, seq_kv: int, pairs: float,
                   pass_: str) -> float:
    """FLOP of one pass as the benchmark counts them: ``4 b h s_q s_kv d`` x the fraction ``pairs`` of query-key
    pairs computed (1/2 causal over the whole sequence) for the forward, 2.5 x that for the backward.

    >>> benchmark_flop(2, 16, 8192, 128, 8192, 0.5, "backward") / 1e12   # 2.5 x 4 x 2 x 16 x 8192^2 x 128 / 2
    1.37438953472
    """
    f = 4.0 * batch * heads * seq_q * seq_kv * head_dim * pairs
    return f * (FWD if pass_ == "forward" else BWD)
