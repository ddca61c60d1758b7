"""Sparse matrix products: counts (ops.sparse), time (timing.sparse), DeepBench's sparse sheet, the CLI."""
from __future__ import annotations

import json
from dataclasses import replace

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.cli import main
from concurrency_model.hardware.devices import device_from_dict, load_device, symbolic
from concurrency_model.ops.dense import gemm
from concurrency_model.ops.sparse import nnz_of, sparse_gemm, structured_gemm
from concurrency_model.timing.sparse import parse_sparsity, sparse_gemm_time
from concurrency_model.validate import sparse as deepbench_sparse

GP102 = load_device("gtx-1080-ti")
A100 = load_device("a100-sxm4-80gb")


# --- counts -------------------------------------------------------------------------------------------------
def test_csr_counts_by_hand():
    # 7680 x 2560 at 95% zeros: 983,040 nonzeros; n = 3: W = 2 * 983,040 * 3; A's CSR 983,040 * (4 + 4) +
    # 7,681 * 4 bytes, B and C (2,560 + 7,680) * 3 * 4 bytes; a row holds 128 nonzeros: depth 1 + 7
    c = sparse_gemm(7680, 3, 2560, nnz_of(7680, 2560, 0.95))
    assert c.forward.flop == 5_898_240
    assert c.forward.bytes == 983_040 * 8 + 7_681 * 4 + 10_240 * 3 * 4
    assert c.forward.depth == 8 and c.params == 983_040
    assert c.grad_input.depth == 1 + 9  # a column of A holds 384 nonzeros
    assert c.grad_weight.depth == 1 + 2  # a dot product over n = 3


@settings(max_examples=40, deadline=None)
@given(m=st.integers(1, 300), n=st.integers(1, 300), k=st.integers(1, 300), frac=st.floats(0, 1))
def test_csr_work_is_the_dense_work_times_the_density(m, n, k, frac):
    nnz = int(frac * m * k)
    c = sparse_gemm(m, n, k, nnz)
    assert c.forward.flop == c.grad_input.flop == c.grad_weight.flop == 2 * nnz * n
    if nnz == m * k:  # a dense matrix in CSR: the dense work, and more bytes (indices and offsets)
        d = gemm(m, n, k)
        assert c.forward.flop == d.forward.flop and c.forward.bytes > d.forward.bytes


def test_structured_counts_half_the_products():
    c, d = structured_gemm(64, 32, 128), gemm(64, 32, 128, value_bytes=2)
    assert c.forward.flop == d.forward.flop / 2
    # A: 64 * 128 / 2 kept fp16 values with 2 bits each; B and C dense fp16
    assert c.forward.bytes == 4096 * (2 + sp.Rational(1, 4)) + (128 * 32 + 64 * 32) * 2


def test_bad_counts_name_the_field():
    with pytest.raises(ValueError, match="^nnz:"):
        sparse_gemm(4, 4, 4, 17)
    with pytest.raises(ValueError, match="^sparsity:"):
        nnz_of(4, 4, 1.0)


# --- time ---------------------------------------------------------------------------------------------------
def test_csr_time_by_hand_dram():
    # CSR 7,895,044 bytes > the 2.8 MB L2: one pass over it from DRAM per column of B, at 0.8 x 484 GB/s;
    # B and C once; one launch (3.8 us). n = 1: 7,936,004 B / 387.2 GB/s + 3.8 us = 24.296 us
    t = sparse_gemm_time(7680, 1, 2560, GP102, "fp32", 0.95)
    assert t.time_s == pytest.approx(7_936_004 / (484e9 * 0.8) + 3.8e-6, rel=1e-12)
    assert t.bound == "memory" and t.detail["format"] == "csr" and t.detail["csr_in_l2"] is False
    t1500 = sparse_gemm_time(7680, 1500, 2560, GP102, "fp32", 0.95)
    assert t1500.time_s == pytest.approx((1500 * 7_895_044 + 10_240 * 1500 * 4) / (484e9 * 0.8) + 3.8e-6, rel=1e-12)


def test_csr_time_by_hand_l2():
    # 1024 x 1024 at 90% zeros: 104,858 nonzeros, CSR 842,964 B < L2: from DRAM once, then 7 times from the
    # L2 at 3 x the DRAM bandwidth
    t = sparse_gemm_time(1024, 8, 1024, GP102, "fp32", 0.9)
    csr, dense, bw = 104_858 * 8 + 1025 * 4, 2048 * 8 * 4, 484e9
    assert t.detail["csr_in_l2"] is True
    assert t.time_s == pytest.approx((csr + dense) / (bw * 0.8) + 7 * csr / (bw * 3.0) + 3.8e-6, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(64, 8192), n=st.integers(1, 4096), k=st.integers(64, 8192), s=st.floats(0.5, 0.99))
def test_csr_time_grows_with_columns_and_density(m, n, k, s):
    t = sparse_gemm_time(m, n, k, GP102, "fp32", s).time_s
    assert sparse_gemm_time(m, n + 1, k, GP102, "fp32", s).time_s > t
    assert sparse_gemm_time(m, n, k, GP102, "fp32", min(0.999, s + 0.005)).time_s <= t


def test_structured_is_twice_as_fast_when_compute_bound_and_narrower_when_memory_bound():
    big = sparse_gemm_time(8192, 8192, 8192, A100, "fp16", "2:4")
    assert big.bound == "compute" and big.detail["speedup_vs_dense"] == pytest.approx(2.0, rel=0.01)
    # a memory-bound GEMV: at most the bytes ratio of A, 2 / ((2 + 1/4) / 2) = 1.78
    gemv = sparse_gemm_time(12288, 1, 12288, A100, "fp16", "2:4")
    assert 1.3 < gemv.detail["speedup_vs_dense"] <= 2 / 1.125 + 1e-9


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 16384), n=st.integers(1, 16384), k=st.integers(1, 16384))
def test_structured_is_never_slower_than_dense(m, n, k):
    t = sparse_gemm_time(m, n, k, A100, "bf16", "2:4")
    assert t.detail["speedup_vs_dense"] >= 1 - 1e-12
    assert t.flop == m * n * k  # half the dense 2 m n k


def test_structured_on_a_symbolic_device_evaluates_to_the_number():
    sym, values = symbolic(A100, "fp16")
    sym = replace(sym, sparse_flops=A100.sparse_flops)
    for sparsity in ("2:4", 0.9):
        num = sparse_gemm_time(4096, 64, 4096, A100, "fp16", sparsity).time_s
        expr = sparse_gemm_time(4096, 64, 4096, sym, "fp16", sparsity).time_s
        assert isinstance(expr, sp.Basic) and expr.free_symbols
        assert float(expr.subs(values)) == pytest.approx(num, rel=1e-9)


def test_bad_sparsity_names_the_field():
    for bad in (1.0, -0.1, "abc", "1:4", True, None):
        with pytest.raises(ValueError, match="^sparsity:"):
            parse_sparsity(bad)
    with pytest.raises(ValueError, match="^sparsity: 2:4 needs sparse tensor cores"):
        sparse_gemm_time(64, 64, 64, "v100-sxm2-32gb", "fp16", "2:4")
    with pytest.raises(ValueError, match="^sparsity: 2:4 .* fp32"):
        sparse_gemm_time(64, 64, 64, A100, "fp32", "2:4")  # tf32 has a sparse rate, fp32 does not


def test_sparse_flops_field_is_checked():
    spec = {**load_device("a100-sxm4-80gb").to_dict(), "sparse_flops": {"fp16": -1}}
    with pytest.raises(ValueError, match=r"sparse_flops\.fp16: must be a positive number"):
        device_from_dict(spec)
    spec["sparse_flops"] = {"fp12": 1e12}
    with pytest.raises(ValueError, match=r"sparse_flops\.fp12: unknown dtype"):
        device_from_dict(spec)


# --- DeepBench's sparse sheet (preset mode: nothing fitted) ------------------------------------------------
def test_deepbench_sparse_rows_are_predicted_within_tolerance():
    res = deepbench_sparse.evaluate()
    s = deepbench_sparse.summary(res)
    # measured on this data (2026-12-04): CSR 16.7%, dense 14.4% median APE over 72 rows each
    assert s["csr_median_ape"] < 0.20 and s["dense_median_ape"] < 0.20
    # sparse faster than dense at n <= 4 (1.7-7x) and 5-10x slower at n >= 1,500: the model agrees on every row
    assert s["faster_agrees"] == "72 of 72"
    big = res[(res["status"] == "ok") & (res["kind"] == "csr") & (res["label"].str.contains("n=6000"))]
    assert ((big["predicted"] / big["measured"]).between(0.85, 1.35)).all()


# --- CLI ----------------------------------------------------------------------------------------------------
def test_op_gemm_sparsity_json(capsys):
    assert main(["op", "gemm", "--m", "7680", "--n", "1500", "--k", "2560", "--sparsity", "0.9",
                 "--hardware", "titan-xp", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"time_s", "flop", "bytes", "bound", "dense_time_s", "speedup_vs_dense"} <= set(out)
    assert out["flop"] == 2 * nnz_of(7680, 2560, 0.9) * 1500 and out["format"] == "csr"
    assert out["speedup_vs_dense"] < 0.2  # DeepBench measured 0.106 on this board
    assert 4 < out["dense_faster_from_n"] < 1500  # measured: sparse 2.0x faster at n = 4, 9x slower at 1,500
    assert main(["op", "gemm", "--m", "64", "--n", "64", "--k", "64", "--sparsity", "2:4", "--dtype", "fp16",
                 "--hardware", "t4"]) == 2
    assert "sparsity: 2:4 needs sparse tensor cores" in capsys.readouterr().err


# --- serving with 2:4-pruned weights ------------------------------------------------------------------------
LLAMA = {"hf_config": "llama-2-7b"}


def test_pruned_weights_in_memory_and_decode():
    from concurrency_model.serving.decoder import predict
    dense = predict(LLAMA, "dgx-h100", 1, 1024, 128, "fp16")
    pruned = predict(LLAMA, "dgx-h100", 1, 1024, 128, "fp16", weight_sparsity="2:4")
    # the blocks' linear weights, 32 x (4 x 4096^2 + 3 x 4096 x 11008) = 6,476,005,376, kept at half with
    # 2 bits each: (2 + 1/4) / 2 = 1.125 bytes a weight instead of 2; embeddings, norms and the output layer stay
    blocks = 32 * (4 * 4096 ** 2 + 3 * 4096 * 11008)
    saved = dense.memory["model_state_bytes"] - pruned.memory["model_state_bytes"]
    assert saved == pytest.approx(blocks * (2 - 1.125), rel=1e-12)
    # a batch-1 decode step reads the weights: faster, by less than the bytes ratio of the whole step
    speedup = dense.decode_s_per_token / pruned.decode_s_per_token
    total = dense.memory["model_state_bytes"] / pruned.memory["model_state_bytes"]
    assert 1.2 < speedup <= total + 1e-9
    assert pruned.prefill_s < dense.prefill_s and pruned.inference["weight_sparsity"] == "2:4"


def test_pruned_encoder_forward_and_bad_input():
    from concurrency_model.serving.forward_pass import predict_forward
    from concurrency_model.serving.decoder import infer
    dense = predict_forward("bert-large", "dgx-a100", 64, "fp16", seq_len=128)
    pruned = predict_forward("bert-large", "dgx-a100", 64, "fp16", seq_len=128, weight_sparsity="2:4")
    assert 1.0 < dense.latency_s / pruned.latency_s < 2.0
    base = {"model": LLAMA, "cluster": "dgx-h100", "inference": {"batch": 1, "prompt_len": 64, "decode_len": 8}}
    for extra, msg in (({"weight_sparsity": "1:4"}, "'2:4' or a fraction of zeros"), ({"weight_sparsity": 1}, "got 1"),
                       ({"weight_sparsity": "2:4", "weight_dtype": "int8"}, "not modelled"),
                       ({"weight_sparsity": "2:4", "dtype": "fp32"}, "fp32 rate")):
        with pytest.raises(ValueError, match=f"^inference.weight_sparsity: .*{msg}"):
            infer({**base, "inference": {**base["inference"], **extra}})
    with pytest.raises(ValueError, match="^inference.weight_sparsity: 2:4 needs sparse tensor cores"):
        infer({**base, "cluster": "dgx1-v100", "inference": {**base["inference"], "weight_sparsity": "2:4"}})


def test_unstructured_pruning_in_serving():
    from concurrency_model.serving.decoder import predict
    dense = predict(LLAMA, "dgx-a100", 1, 512, 64, "fp16")
    kept = {s: predict(LLAMA, "dgx-a100", 1, 512, 64, "fp16", weight_sparsity=s) for s in (0.5, 0.9)}
    # CSR of each block matrix (c_out x c_in): nnz (2 + 4) bytes + (c_out + 1) 4 bytes of row offsets
    shapes = [(12288, 4096), (4096, 4096)] + [(11008, 4096)] * 2 + [(4096, 11008)]  # qkv (one layer), o, gate, up, down
    csr = 32 * sum(nnz_of(co, ci, 0.9) * 6 + (co + 1) * 4 for co, ci in shapes)
    dense_blocks = 32 * sum(co * ci * 2 for co, ci in shapes)
    assert kept[0.9].memory["model_state_bytes"] == pytest.approx(
        dense.memory["model_state_bytes"] - dense_blocks + csr, rel=1e-12)
    # half the weights with 4-byte indices take more bytes than the dense fp16 matrix: slower, larger
    assert kept[0.5].memory["model_state_bytes"] > dense.memory["model_state_bytes"]
    assert kept[0.5].decode_s_per_token > dense.decode_s_per_token
    # 90%: a batch-1 decode step reads 0.6 bytes a weight instead of 2; the prefill streams A once per token
    assert kept[0.9].decode_s_per_token < dense.decode_s_per_token / 2
    assert kept[0.9].prefill_s > 5 * dense.prefill_s


def test_break_even_n():
    from concurrency_model.timing.sparse import break_even_n
    # the first n at which the dense product wins is where the speed-up crosses 1
    n = break_even_n(10752, 3584, GP102, "fp32", 0.9)
    assert sparse_gemm_time(10752, n, 3584, GP102, "fp32", 0.9).detail["speedup_vs_dense"] < 1
    assert all(sparse_gemm_time(10752, j, 3584, GP102, "fp32", 0.9).detail["speedup_vs_dense"] >= 1
               for j in range(1, n))
    assert break_even_n(4096, 4096, A100, "fp16", "2:4") is None  # 2:4 is never slower
    assert break_even_n(7680, 2560, GP102, "fp32", 0.95) > break_even_n(7680, 2560, GP102, "fp32", 0.9)
    assert break_even_n(7680, 2560, GP102, "fp32", 0.99) is None  # its CSR (1.6 MB) is re-read from the L2
