"""Fused attention at its published speeds (concurrency_model.timing.attention) and the GEMM on H100."""
from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import timing
from concurrency_model.hardware.devices import load_device
from concurrency_model.timing import attention as fa

A100 = load_device("a100-sxm4-80gb")
B200 = load_device("b200-sxm-180gb")
H100 = load_device("h100-sxm5-80gb")
V100 = load_device("v100-sxm2-32gb")


def _fwd_bwd(dev, b, h, s, d, causal, fused=True, dtype="bf16"):
    f = timing.attention_time(b, h, s, d, dev, dtype, fused=fused, causal=causal)
    g = timing.attention_time(b, h, s, d, dev, dtype, fused=fused, causal=causal, pass_="backward")
    return f, g


def test_h100_flash2_forward_backward_against_the_figure():
    # FlashAttention-2 on H100 80GB SXM5, causal, head 128, sequence 4k (flash2_h100_fwd_bwd_benchmark.png (d)):
    # 294 TFLOP/s forward + backward; forward alone 319 (flash3_fp16_fwd.png (d)). The benchmark's shape:
    # batch 4 x 4k = 16k tokens, 16 heads of 128 (hidden 2048). Its count: forward 4 b h s^2 d / 2 (causal)
    fwd_flop = 4 * 4 * 16 * 4096 ** 2 * 128 / 2                    # 2.749e11
    f, g = _fwd_bwd(H100, 4, 16, 4096, 128, causal=True)
    launch = H100.launch_overhead
    assert f.time_s - launch == pytest.approx(fwd_flop / 319e12, rel=1e-9)          # 0.862 ms
    assert f.time_s + g.time_s - 2 * launch == pytest.approx(3.5 * fwd_flop / 294e12, rel=1e-9)  # 3.273 ms
    assert f.bound == g.bound == "compute"


def test_a100_flash2_both_passes_at_the_forward_backward_rate():
    # A100 80GB SXM4, causal, head 64, sequence 2k: 140 TFLOP/s forward + backward (flash2_a100 (c)); no forward
    # figure: both passes at 140. Batch 8 x 2k, 32 heads of 64.
    fwd_flop = 4 * 8 * 32 * 2048 ** 2 * 64 / 2                     # 1.374e11
    f, g = _fwd_bwd(A100, 8, 32, 2048, 64, causal=True)
    assert f.time_s - A100.launch_overhead == pytest.approx(fwd_flop / 140e12, rel=1e-9)
    assert g.time_s - A100.launch_overhead == pytest.approx(2.5 * fwd_flop / 140e12, rel=1e-9)


def test_flash1_and_interpolation_between_printed_lengths():
    # FlashAttention v1 on H100, non-causal, head 128: 128 at 2k, 131 at 4k; 2896 = 2^11.5 lies halfway in log2
    rate = fa.efficiency("h100-sxm5-80gb", "flash1", "forward", False, 128, 2896.309375740099) * 989.4e12
    assert rate == pytest.approx(129.5e12, rel=1e-9)
    # head 96 halfway between 64 and 128 (A100 flash1 causal at 16k: 97 and 83), held beyond 16k and below 512
    assert fa.efficiency("a100-sxm4-80gb", "flash1", "backward", True, 96, 65536) * 312e12 == pytest.approx(90e12)
    assert fa.efficiency("a100-sxm4-80gb", "flash1", "forward", True, 128, 128) * 312e12 == pytest.approx(55e12)


def test_flash1_slower_than_flash2_and_named_kernel():
    f1 = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused="flash1", causal=True)
    f2 = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused="flash2", causal=True)
    default = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused=True, causal=True)
    assert default.time_s == f2.time_s
    assert f1.time_s / f2.time_s == pytest.approx((333 / 135), rel=0.01)  # forward 333 vs fwd+bwd 135 (v1)


def test_unknown_kernel_names_the_field():
    with pytest.raises(ValueError, match="fused_attention: unknown kernel 'flsh2'.*flash2"):
        timing.attention_time(2, 16, 1024, 128, H100, "bf16", fused="flsh2")


def test_devices_without_figures_keep_the_gemm_efficiency_roofline():
    # V100 has no published FlashAttention figure: the kernel runs at the GEMMs' efficiency (0.8 of peak)
    t = timing.attention_time(8, 16, 2048, 64, V100, "fp16", fused=True, causal=True)
    assert t.compute_s == pytest.approx(t.flop / (0.8 * V100.peak("fp16")), rel=1e-9)
    # and fp32 math on an A100 is outside the (16-bit) figures
    t = timing.attention_time(8, 16, 2048, 64, A100, "fp32", fused=True, causal=True)
    assert t.compute_s == pytest.approx(t.flop / (0.8 * A100.peak("fp32")), rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(["a100-sxm4-80gb", "h100-sxm5-80gb"]), st.sampled_from(fa.KERNELS),
       st.sampled_from(["forward", "backward"]), st.booleans(), st.sampled_from([64, 80, 96, 128]),
       st.integers(min_value=256, max_value=60000), st.integers(min_value=1, max_value=4000))
def test_time_grows_with_sequence_and_rate_is_bounded(board, kernel, pass_, causal, head_dim, seq, more):
    # longer sequences never take less time (the rate per FLOP may rise, never by more than the work does) and
    # the published rate stays below the GEMMs' 80% of peak (A100 FlashAttention-2 tops out at 203 of 312)
    dev = load_device(board)
    a = timing.attention_time(1, 16, seq, head_dim, dev, "bf16", fused=kernel, causal=causal,
                              pass_=pass_ if pass_ == "forward" else "backward")
    b = timing.attention_time(1, 16, seq + more, head_dim, dev, "bf16", fused=kernel, causal=causal,
                              pass_=pass_ if pass_ == "forward" else "backward")
    assert b.time_s >= a.time_s
    assert 0 < fa.efficiency(board, kernel, pass_, causal, head_dim, seq) < dev.efficiency.compute


def test_h100_gemm_against_the_published_maximum():
    # ml-engineering (stas00) compute/accelerator/README.md, MAMF table: H100 SXM bf16 792.1 TFLOP/s at
    # 6144 x 17920 x 2816 (CUDA 12.1), the best shape of a search. The model (80% of the 989.4 peak, tiles and
    # waves) stays within 5% below it: 754 TFLOP/s, 26 waves of 256x128 tiles
    m, n, k = 6144, 17920, 2816
    t = timing.gemm_time(m, n, k, H100, "bf16")
    rate = 2 * m * n * k / t.time_s
    assert 0.95 * 792.1e12 < rate < 792.1e12


def test_b200_cudnn_forward_and_backward_against_the_published_rows():
    # cudnn-frontend @ cb560b92 sdpa_bf16_benchmark_results_NVIDIA_B200.csv, pyt_cudnn, 1 x 32768 tokens, 128 query
    # heads of 128, causal: forward 24.611 ms = 1429.616 TFLOP/s, backward 78.227 ms = 1124.432 in the count
    # 4 b s^2 h d / 2 (forward), 2.5 x (backward)
    fwd_flop = 4 * 32768 ** 2 * 128 * 128 / 2                      # 3.518e13
    f, g = _fwd_bwd(B200, 1, 128, 32768, 128, causal=True, fused="cudnn")
    launch = B200.launch_overhead
    assert f.time_s - launch == pytest.approx(fwd_flop / 1429.616e12, rel=1e-9)     # 24.61 ms, as printed
    assert g.time_s - launch == pytest.approx(2.5 * fwd_flop / 1124.432e12, rel=1e-9)  # 78.22 ms
    assert f.time_s - launch == pytest.approx(24.611e-3, rel=1e-3)
    # between 16k (1349.763) and 32k (1429.616) the rate is linear in log2(sequence): halfway at 2^14.5
    mid = fa.efficiency("b200-sxm-180gb", "cudnn", "forward", True, 128, 2 ** 14.5) * 2250e12
    assert mid == pytest.approx((1349.763e12 + 1429.616e12) / 2, rel=1e-9)
    # one published series (causal, head 128) stands for head 64 and for the non-causal kernel
    assert fa.efficiency("b200-sxm-180gb", "cudnn", "backward", False, 64, 32768) == \
        fa.efficiency("b200-sxm-180gb", "cudnn", "backward", True, 128, 32768)


def test_cudnn_takes_flash2_figures_where_the_board_has_none_and_flash2_stays_off_b200():
    # H100: no cuDNN figure; FlashAttention-2's x 1.2, the least of the 20-50% Transformer Engine documents on Hopper
    # (TransformerEngine @ 43569381 docs/examples/attention/attention.ipynb): FlashAttention-2's printed 333 TFLOP/s
    # forward at 8k, causal, head 128, is 399.6 for cuDNN; 2 x 16 heads: 4 x 2 x 16 x 8192^2 x 128 / 2 = 2.749e11 FLOP
    for pass_ in ("forward", "backward"):
        cu = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused="cudnn", causal=True, pass_=pass_)
        f2 = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused="flash2", causal=True, pass_=pass_)
        assert f2.compute_s == pytest.approx(1.2 * cu.compute_s, rel=1e-12)
    cu = timing.attention_time(2, 16, 8192, 128, H100, "bf16", fused="cudnn", causal=True)
    assert cu.compute_s == pytest.approx(4 * 2 * 16 * 8192 ** 2 * 128 / 2 / 399.6e12, rel=1e-9)
    # A100: Transformer Engine runs FlashAttention-2 off Hopper (TE v1.4 attention.py), so cudnn is flash2 exactly
    assert timing.attention_time(2, 16, 8192, 128, A100, "bf16", fused="cudnn", causal=True).time_s == \
        timing.attention_time(2, 16, 8192, 128, A100, "bf16", fused="flash2", causal=True).time_s
    t = timing.attention_time(1, 32, 8192, 128, B200, "bf16", fused="flash2", causal=True)
    assert t.compute_s == pytest.approx(t.flop / (0.8 * 2250e12), rel=1e-9)
    c = timing.attention_time(1, 32, 8192, 128, B200, "bf16", fused="cudnn", causal=True)
    assert c.time_s > t.time_s   # cuDNN's published 1,197 TFLOP/s at 8k (benchmark count) against 1,800 roofline


def test_b300_takes_the_gb300_figures_as_a_fraction_of_the_peak():
    # cudnn-frontend @ bb37575d ...NVIDIA_GB300.csv, pyt_cudnn at 32k: forward 1795.879 TFLOP/s on the GB300 (2.5
    # PFLOP/s bf16 dense); a B300 (2.25 PFLOP/s) runs the same fraction: 1795.879 x 2.25 / 2.5 = 1616.3 TFLOP/s
    b300 = load_device("b300-sxm-270gb")
    assert b300.attention_board == load_device("gb300-288gb").attention_board == "gb300-288gb"
    eff = fa.efficiency("gb300-288gb", "cudnn", "forward", True, 128, 32768)
    assert eff * b300.peak("bf16") == pytest.approx(1795.879e12 * 2.25 / 2.5, rel=1e-9)
    fwd_flop = 4 * 32768 ** 2 * 128 * 128 / 2
    t = timing.attention_time(1, 128, 32768, 128, b300, "bf16", fused="cudnn", causal=True)
    assert t.time_s - b300.launch_overhead == pytest.approx(fwd_flop / 1616.2911e12, rel=1e-6)


@pytest.mark.parametrize("dtype", ["fp16", "bf16"])
@pytest.mark.parametrize("pass_", ["forward", "backward"])
def test_plain_attention_with_an_unaligned_head_runs_its_products_on_the_cuda_cores(dtype, pass_):
    """A 16-bit head dimension that is not a multiple of 8 (rows not 16-byte aligned) puts the plain attention's QKᵀ
    and PV on the CUDA cores in fp32: by hand, each product's math term is the tensor-core one times the peak over
    the fp32 vector rate (A100: 312 / 19.5 = 16); the softmax kernels and the traffic do not change. A multiple of 8
    and fp32 storage keep the tensor-core kernels."""
    b, h, s = 2, 32, 2048
    factor = A100.peak(dtype) / A100.vector_flops["fp32"]
    assert factor == 16.0
    for d in (108, 225, 150):
        cost = timing.layers.attention(b, h, s, d, fused=False, causal=True, value_bytes=2)
        cost = cost.forward if pass_ == "forward" else cost.backward
        got = timing.layers.attention_kernels(cost, b, h, s, d, A100, dtype, False, True, pass_)
        plain = [timing.gemm_coeffs(s, s, d, A100, dtype, b * h), timing.gemm_coeffs(s, d, s, A100, dtype, b * h)]
        assert got[0][0].a_math == pytest.approx(factor * plain[0].a_math, rel=1e-12)
        assert got[2][0].a_math == pytest.approx(factor * plain[1].a_math, rel=1e-12)
        assert got[0][0].a_mem == pytest.approx(plain[0].a_mem, rel=1e-12)
    for d, dt in ((112, dtype), (216, dtype), (108, "fp32")):
        cost = timing.layers.attention(b, h, s, d, fused=False, causal=True, value_bytes=2 if dt != "fp32" else 4)
        cost = cost.forward if pass_ == "forward" else cost.backward
        got = timing.layers.attention_kernels(cost, b, h, s, d, A100, dt, False, True, pass_)
        assert got[0][0].a_math == pytest.approx(timing.gemm_coeffs(s, s, d, A100, dt, b * h).a_math, rel=1e-12)
    slow = timing.attention_time(b, h, s, 108, A100, dtype, causal=True, pass_=pass_)
    fast = timing.attention_time(b, h, s, 112, A100, dtype, causal=True, pass_=pass_)
    assert slow.time_s > 3 * fast.time_s  # fewer FLOPs, yet several times slower


def test_the_estimate_says_why_an_unaligned_head_is_slow(tmp_path, capsys):
    # heads of 108 values in bf16 (216 bytes): the estimate names the head size and both ways out; an aligned head,
    # a fused kernel or fp32 storage say nothing
    import json
    from concurrency_model.cli import main as cli
    from concurrency_model.training.estimate import estimate
    model = {"kind": "gpt", "layers": 2, "hidden": 1728, "heads": 16, "seq_len": 512, "vocab": 1000}
    sc = {"model": model, "cluster": "dgx-a100", "parallel": {"data": 1, "microbatch_size": 1, "global_batch": 1},
          "training": {"dtype": "bf16"}}
    def said(scenario):  # the attention's note (a small global batch adds the batch region's)
        return [n for n in estimate(scenario).notes if n.startswith("attention:")]
    note, = said(sc)
    assert note.startswith("attention: heads of 108 values (216 bytes) are not a multiple of 16 bytes")
    assert "multiple of 8" in note and "model.fused_attention" in note
    for other in ({**sc, "model": {**model, "hidden": 1792}}, {**sc, "model": {**model, "fused_attention": True}},
                  {**sc, "training": {"dtype": "fp32"}}):
        assert said(other) == []
    f = tmp_path / "s.json"
    f.write_text(json.dumps(sc))
    assert cli(["estimate", "--scenario", str(f)]) == 0
    assert f"\nnote: {note}\n" in capsys.readouterr().out
