"""``concurrency-model op gemm|conv|rnn|attention``: time of one operator on one device."""
from __future__ import annotations

from .. import timing
from ..hardware.devices import DTYPES, device_names, load_device
from ..timing.sparse import break_even_n, sparse_gemm_time
from . import add_json, nonnegative_int, positive_int


def _common(p, default_dtype="fp32"):
    p.add_argument("--hardware", required=True, help=f"device preset ({', '.join(device_names())}) or a JSON file")
    p.add_argument("--dtype", choices=DTYPES, default=default_dtype)
    add_json(p)


def run_gemm(a):
    if a.sparsity is not None:
        return sparse_gemm_time(a.m, a.n, a.k, load_device(a.hardware), a.dtype, a.sparsity, a.batch)
    return timing.gemm_time(a.m, a.n, a.k, load_device(a.hardware), a.dtype, a.batch)


def run_conv(a):
    stride = (a.stride, a.stride if a.stride_w is None else a.stride_w)
    pad = (a.pad, a.pad if a.pad_w is None else a.pad_w)
    return timing.conv_time(a.n, a.c_in, a.c_out, a.h, a.w, a.kh, a.kw or a.kh, stride, pad, a.dilation, a.groups,
                            device=load_device(a.hardware), dtype=a.dtype, pass_=a.pass_, algorithm=a.algorithm)


def run_rnn(a):
    return timing.rnn_time(a.cell, a.hidden, a.batch, a.timesteps, load_device(a.hardware), a.dtype, a.input_size,
                           a.pass_)


def run_attention(a):
    return timing.attention_time(a.batch, a.heads, a.seq, a.head_dim, load_device(a.hardware), a.dtype, a.fused,
                                 a.causal, a.pass_)


def run(args) -> dict:
    t = args.op_run(args)
    out = t.as_dict()
    if args.op == "gemm" and args.sparsity is not None:
        out["dense_faster_from_n"] = break_even_n(args.m, args.k, load_device(args.hardware), args.dtype,
                                                  args.sparsity, args.batch)
    out["op"] = args.op
    out["hardware"] = args.hardware
    out["dtype"] = args.dtype
    return out


def show(out: dict) -> None:
    print(f"{out['op']} on {out['hardware']} ({out['dtype']}): {out['time_s'] * 1e6:,.2f} us, {out['bound']}-bound")
    print(f"  work {out['flop']:,} FLOP, traffic {out['bytes']:,} bytes, "
          f"{out['flop'] / out['time_s'] / 1e12:,.2f} TFLOP/s achieved")
    extra = {k: v for k, v in out.items() if k not in ("op", "hardware", "dtype", "time_s", "flop", "bytes", "bound")}
    print("  " + ", ".join(f"{k}={v:.3g}" if isinstance(v, float) else f"{k}={v}" for k, v in extra.items()))


def register(sub) -> None:
    op = sub.add_parser("op", help="time of one operator on a device (roofline with kernel efficiencies)")
    ops = op.add_subparsers(dest="op", required=True)

    g = ops.add_parser("gemm", help="C = A(m x k) B(k x n)")
    for k in ("m", "n", "k"):
        g.add_argument(f"--{k}", type=positive_int, required=True)
    g.add_argument("--batch", type=positive_int, default=1, help="independent products (batched GEMM)")
    g.add_argument("--sparsity", default=None, metavar="S",
                   help="A pruned: a fraction of zeros in [0, 1) (CSR kernel) or 2:4 (sparse tensor cores); "
                        "adds dense_time_s, speedup_vs_dense and dense_faster_from_n (the n from which the dense "
                        "product is faster)")
    _common(g)
    g.set_defaults(op_run=run_gemm)

    c = ops.add_parser("conv", help="2-D convolution (NCHW)")
    for k, h in (("n", "batch"), ("c-in", "input channels"), ("c-out", "output channels"), ("h", "height"),
                 ("w", "width"), ("kh", "kernel height")):
        c.add_argument(f"--{k}", type=positive_int, required=True, help=h)
    c.add_argument("--kw", type=positive_int, default=None, help="kernel width (default: kh)")
    c.add_argument("--stride", type=positive_int, default=1, help="stride (of the height when --stride-w is given)")
    c.add_argument("--stride-w", type=positive_int, default=None, help="stride of the width (default: --stride)")
    c.add_argument("--pad", type=nonnegative_int, default=0, help="padding (of the height when --pad-w is given)")
    c.add_argument("--pad-w", type=nonnegative_int, default=None, help="padding of the width (default: --pad)")
    c.add_argument("--dilation", type=positive_int, default=1)
    c.add_argument("--groups", type=positive_int, default=1)
    c.add_argument("--algorithm", choices=("auto", "implicit_gemm", "winograd", "fft"), default="auto")
    c.add_argument("--pass", dest="pass_", choices=("forward", "grad_input", "grad_weight"), default="forward")
    _common(c)
    c.set_defaults(op_run=run_conv)

    r = ops.add_parser("rnn", help="one RNN/LSTM/GRU layer over a sequence")
    r.add_argument("--cell", choices=("rnn", "lstm", "gru"), default="lstm")
    r.add_argument("--hidden", type=positive_int, required=True)
    r.add_argument("--batch", type=positive_int, required=True)
    r.add_argument("--timesteps", type=positive_int, required=True)
    r.add_argument("--input-size", type=positive_int, default=None, help="default: hidden")
    r.add_argument("--pass", dest="pass_", choices=("forward", "grad_input", "grad_weight"), default="forward")
    _common(r)
    r.set_defaults(op_run=run_rnn)

    t = ops.add_parser("attention", help="scaled dot-product attention core")
    for k in ("batch", "heads", "seq", "head-dim"):
        t.add_argument(f"--{k}", type=positive_int, required=True)
    t.add_argument("--fused", action="store_true", help="FlashAttention-style fused kernel")
    t.add_argument("--causal", action="store_true")
    t.add_argument("--pass", dest="pass_", choices=("forward", "backward"), default="forward")
    _common(t, "fp16")
    t.set_defaults(op_run=run_attention)
    op.set_defaults(run=run, show=show)
