"""SI constants and data-type sizes.

Everything inside the toolkit is SI: seconds, bytes, FLOP, FLOP/s, bytes/s.  Units appear in names only
at the boundary (``time_s``, ``size_bytes``, ``bw_Bps``).
"""
from __future__ import annotations

KB, MB, GB, TB = 10**3, 10**6, 10**9, 10**12
KiB, MiB, GiB, TiB = 2**10, 2**20, 2**30, 2**40
GFLOP, TFLOP, PFLOP = 10**9, 10**12, 10**15
US, MS = 1e-6, 1e-3
GBIT_PER_S = 10**9 / 8  # bytes per second in one Gb/s

DTYPE_BYTES = {
    "fp64": 8,
    "fp32": 4,
    "tf32": 4,  # stored as fp32, multiplied at reduced precision
    "fp16": 2,
    "bf16": 2,
    "fp8": 1,
    "int8": 1,
    # block-scaled formats: the element bits plus their share of the block's scale. MXFP8 (OCP Microscaling
    # Formats (MX) Specification v1.0, 2023-09, §5: blocks of k = 32 elements sharing one 8-bit E8M0 scale):
    # 1 + 1/32 bytes; NVFP4 (NVIDIA, "Introducing NVFP4 for Efficient and Accurate Low-Precision Inference",
    # developer blog 2025-06, and Transformer Engine's NVFP4 recipe: E2M1 values in blocks of 16 with one FP8
    # E4M3 scale, plus one FP32 scale per tensor, negligible here): 0.5 + 1/16 bytes
    "mxfp8": 1 + 1 / 32,
    "nvfp4": 0.5 + 1 / 16,
}


# bytes a stored weight takes: the dtypes above, and 4-bit formats (int4; nf4, QLoRA's 4-bit NormalFloat)
WEIGHT_BYTES = {"fp32": 4, "fp16": 2, "bf16": 2, "fp8": 1, "int8": 1, "int4": 0.5, "nf4": 0.5}


# 8-bit (and block-scaled 8- and 4-bit) math runs the matrix layers only; activations, element-wise kernels, attention and communication stay in
# 16 bits: Transformer Engine's fp8 recipe (fp8 GEMM inputs, bf16 elsewhere; Micikevicius et al. 2022, "FP8 Formats
# for Deep Learning", §4, as recalled: not in shared/reference) and int8 W8A8 inference (SmoothQuant, Xiao et al. 2023)
# MXFP8 and NVFP4 training keep the same split: TE's MXFP8BlockScaling and NVFP4BlockScaling recipes quantize the
# GEMM inputs only, activations and communication stay bf16 (NVIDIA Transformer Engine user guide, "Using FP8
# and FP4 with Transformer Engine", recipes MXFP8BlockScaling / NVFP4BlockScaling, TE 2.x, as recalled)
EIGHT_BIT_VALUES = {"fp8": "bf16", "int8": "fp16", "mxfp8": "bf16", "nvfp4": "bf16"}


KV_DTYPES = ("fp32", "fp16", "bf16", "fp8", "int8")  # inference.kv_dtype: how a KV cache may be stored


def value_dtype(dtype: str) -> str:
    """The dtype of activations, element-wise kernels and communication when matrix layers run in ``dtype``.

    >>> value_dtype("fp8"), value_dtype("fp16")
    ('bf16', 'fp16')
    """
    return EIGHT_BIT_VALUES.get(dtype, dtype)


def dtype_bytes(dtype: str) -> float:
    """Bytes per value of ``dtype`` (block-scaled formats with their share of the block scale).

    >>> dtype_bytes("bf16"), dtype_bytes("mxfp8"), dtype_bytes("nvfp4")
    (2, 1.03125, 0.5625)
    """
    try:
        return DTYPE_BYTES[dtype]
    except KeyError:
        raise ValueError(f"dtype: unknown {dtype!r}; allowed: {', '.join(DTYPE_BYTES)}") from None


def state_dtype(dtype: str) -> str:
    """The dtype the model state is kept in (fp8 training keeps bf16 weights)."""
    return dtype if dtype in ("fp32", "tf32", "fp16", "bf16", "fp64") else "bf16"
