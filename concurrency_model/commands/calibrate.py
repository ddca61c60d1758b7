"""``concurrency-model calibrate compute``: microbenchmarks on this machine and a fitted device profile.

``calibrate compute [--quick] --out DIR [--force] [--json]`` times numpy GEMMs (with the torch extra also
torch GEMMs, conv2d and attention, and the same on a CUDA GPU), a memory copy and a tiny operation, and
writes ``DIR/measurements.csv`` and ``DIR/profile.json`` (a device file ``--hardware`` accepts) with the
efficiencies of the timing model fitted to the GEMMs (:mod:`concurrency_model.calibrate.compute`).
Existing files are kept unless ``--force``. Progress goes to stderr; ``--json`` prints
``{out, rows, fitted, files, elapsed_s}``.

``calibrate network [--quick] [--ranks P] [--backend gloo|nccl] --out DIR [--force] [--json]`` times
collectives on ``torch.distributed`` (P local processes, or the ranks ``torchrun`` started) and writes
``DIR/measurements.csv`` (nccl-tests columns) and ``DIR/profile.json`` (a cluster file ``--cluster``
accepts) with alpha and beta fitted per collective (:mod:`concurrency_model.calibrate.network`); sizes
that failed are listed on stderr and in ``missing``.

``calibrate kernels [--quick] [--ops gemm,conv,rnn] [--dtypes fp32,fp16,bf16,tf32] [--budget-s S] --out DIR``
times DeepBench's training shapes with torch (on the GPU where one is) and writes
``DIR/deepbench_{op}.csv`` in DeepBench's columns (:mod:`concurrency_model.calibrate.kernels`), the rows that
``concurrency-model validate`` predicts when the files are under ``data/measured/kernels-*``.

``calibrate steps [--quick] [--budget-s S] --out DIR`` times GPT training steps, prompt passes and decode
steps of the toolkit's GPT graph in plain torch (:mod:`concurrency_model.calibrate.steps`) and writes
``DIR/gpt_steps.csv``, predicted by ``validate`` under ``data/measured/steps-*``.
"""
from __future__ import annotations

import argparse
import sys
from importlib import util

from . import add_json, positive_int


def run_compute(args) -> dict:
    from ..calibrate import compute  # scipy and pandas only when calibrating

    return compute.calibrate(args.out, quick=args.quick, force=args.force, stream=sys.stderr)


def show_compute(out: dict) -> None:
    f = out["fitted"]
    peaks = ", ".join(f"{dt} {v / 1e9:,.1f} GFLOP/s" for dt, v in f["peak_flops"].items())
    print(f"calibrated in {out['elapsed_s']:.1f} s: {out['rows']} measurements -> {out['out']}")
    print(f"  peak {peaks}; memory {f['mem_bw_Bps'] / 1e9:,.1f} GB/s; launch {f['launch_overhead_s'] * 1e6:.2f} us")
    print(f"  efficiency: compute {f['compute']:.3f}, memory {f['memory']:.3f}, k_startup {f['k_startup']:.1f}, "
          f"l2_factor {f['l2_factor']:.2f}, sigma {f['sigma']:.3f} (log spread of the fit)")
    for path in out["files"]:
        print(f"  wrote {path}")


def run_network(args) -> dict:
    from ..calibrate import network  # torch only when calibrating

    return network.calibrate(args.out, quick=args.quick, ranks=args.ranks, backend=args.backend, force=args.force,
                             stream=sys.stderr)


def show_network(out: dict) -> None:
    if out.get("rank"):  # torchrun: every rank measures, rank 0 reports
        return
    print(f"calibrated in {out['elapsed_s']:.1f} s: {out['rows']} measurements ({out['backend']}, {out['ranks']} ranks)"
          f" -> {out['out']}")
    for coll, f in out["fitted"].items():
        at_least = ">=" if f.get("bw_lower_bound") else ""
        print(f"  {coll:<15} alpha {f['alpha_s'] * 1e6:9.2f} us, bw {at_least}{f['bw_Bps'] / 1e9:8.3f} GB/s "
              f"(median APE {f['median_ape_pct']:.1f} %; {f['model']})")
    for coll, why in out["skipped"].items():
        print(f"  {coll:<15} skipped: {why}")
    if out["missing"]:
        some = ", ".join(f"{m['collective']} {m['size_bytes']} B" for m in out["missing"][:6])
        print(f"  missing: {len(out['missing'])} sizes ({some}{', ...' if len(out['missing']) > 6 else ''})")
    for path in out["files"]:
        print(f"  wrote {path}")


def needs_torch(what: str) -> None:
    """``ValueError`` saying how to install torch, before a calibration that times torch starts."""
    if util.find_spec("torch") is None:
        raise ValueError(f"calibrate {what} needs torch: pip install torch==2.13.0, then the torch extra")


def run_kernels(args) -> dict:
    needs_torch("kernels")
    from ..calibrate import kernels  # torch only when calibrating

    return kernels.calibrate(args.out, ops=args.ops, dtypes=args.dtypes, quick=args.quick, force=args.force,
                             budget_s=args.budget_s, stream=sys.stderr)


def show_kernels(out: dict) -> None:
    print(f"timed {out['rows']} kernel rows ({', '.join(out['dtypes'])}) on {out['device']} in {out['elapsed_s']:.1f} s"
          f" -> {out['out']}")
    if out["missing"]:
        print(f"  missing: {len(out['missing'])} shapes (first: {out['missing'][0]['reason']})")
    for path in out["files"]:
        print(f"  wrote {path}")


def run_steps(args) -> dict:
    needs_torch("steps")
    from ..calibrate import steps  # torch only when calibrating

    return steps.calibrate(args.out, quick=args.quick, force=args.force, budget_s=args.budget_s, stream=sys.stderr)


def show_steps(out: dict) -> None:
    print(f"timed {out['rows']} GPT runs on {out['device']} in {out['elapsed_s']:.1f} s -> {out['out']}")
    for f in out["failed"]:
        print(f"  not timed: {f['run']}: {f['reason']}")
    for path in out["files"]:
        print(f"  wrote {path}")


def _names(text: str) -> list:
    """A comma-separated list (checked by the calibration, which names the field)."""
    return [x.strip() for x in text.split(",") if x.strip()]


def _seconds(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        v = float("nan")
    if not v > 0:
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return v


def _writes(p, files: str) -> None:
    """The output options every calibration has: ``--out``, ``--force``, ``--json``."""
    p.add_argument("--out", required=True, help=f"directory for {files}")
    p.add_argument("--force", action="store_true", help=f"overwrite existing {files} in --out")
    add_json(p)


def register(sub) -> None:
    cal = sub.add_parser("calibrate", help="microbenchmarks on this machine; fitted device profiles")
    kinds = cal.add_subparsers(dest="calibrate", required=True)
    c = kinds.add_parser("compute", help="GEMM (and with torch: conv, attention) timings and a fitted profile")
    c.add_argument("--quick", action="store_true", help="a small shape set (under 30 s on 2 cores)")
    _writes(c, "measurements.csv and profile.json")
    c.set_defaults(run=run_compute, show=show_compute)
    n = kinds.add_parser("network", help="collective timings on torch.distributed and a fitted cluster file")
    n.add_argument("--quick", action="store_true", help="fewer sizes and repetitions (under 60 s on 2 cores)")
    n.add_argument("--ranks", type=positive_int, help="local processes (default: 2 with gloo, the GPUs with nccl;"
                                                      " under torchrun: its WORLD_SIZE)")
    n.add_argument("--backend", choices=("gloo", "nccl"), help="default: nccl where CUDA is, else gloo")
    _writes(n, "measurements.csv and profile.json")
    n.set_defaults(run=run_network, show=show_network)
    k = kinds.add_parser("kernels", help="DeepBench's training GEMMs, convolutions and RNNs timed with torch")
    k.add_argument("--quick", action="store_true", help="the first 8 shapes of each op")
    k.add_argument("--ops", type=_names, default=["gemm", "conv", "rnn"],
                   help="comma-separated, of gemm, conv, rnn (default: all)")
    k.add_argument("--dtypes", type=_names, default=["fp32", "fp16"],
                   help="comma-separated, of fp32, fp16, bf16, tf32 (default: fp32,fp16; a CPU times fp32)")
    k.add_argument("--budget-s", type=_seconds, help="start no new shapes after this many seconds")
    _writes(k, "deepbench_{op}.csv")
    k.set_defaults(run=run_kernels, show=show_kernels)
    st = kinds.add_parser("steps", help="GPT training steps, prompt passes and decode steps timed with torch")
    st.add_argument("--quick", action="store_true", help="three runs on a GPU (tiny models on a CPU)")
    st.add_argument("--budget-s", type=_seconds, help="start no new run after this many seconds")
    _writes(st, "gpt_steps.csv")
    st.set_defaults(run=run_steps, show=show_steps)
