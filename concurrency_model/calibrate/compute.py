"""``calibrate compute``: microbenchmarks on this machine, and a device profile fitted to them.

Times are seconds, the median of repetitions after warm-up (``time.perf_counter``; on a GPU, CUDA events):

* GEMMs ``C (m x n) = A (m x k) B (k x n)``: ``numpy.matmul`` into a preallocated output (numpy's BLAS) and,
  with the torch extra, ``torch.matmul``, ``conv2d`` and ``scaled_dot_product_attention`` (stored, not
  fitted here); with CUDA the same on the GPU.
* memory bandwidth: a STREAM copy (McCalpin, "Memory Bandwidth and Machine Balance in Current High
  Performance Computers", IEEE TCCA Newsletter 1995) of 256 MiB, beyond the caches, counting 2 x the
  array's bytes (one read, one write; the write-allocate read is not counted, as in STREAM).
* launch overhead: the median time of a tiny operation (``numpy.add`` on 4 values; on a GPU back-to-back
  ``add_`` on one value): the fixed cost of a library call.

Small operations run in batches so that one sample lasts at least ``MIN_SAMPLE_S`` (as
``timeit.Timer.autorange`` does); the samples of a set of shapes are interleaved (:func:`bench`). The
profile (:func:`profile`) has the preset-file format of :mod:`concurrency_model.hardware.devices`; its
efficiencies are fitted to the GEMM rows by :func:`concurrency_model.calibrate.fit.fit_efficiency`
(least squares on log time ratios: every row weighs by its relative error).
"""
from __future__ import annotations

import json
import os
import platform
import socket
import sys
import time
from dataclasses import replace
from datetime import datetime, timezone
from importlib import metadata, util
from pathlib import Path

import numpy as np
import pandas as pd

from ..hardware.devices import Device, Efficiency, device_from_dict
from ..progress import Progress
from ..timing import gemm_coeffs
from .files import atomic_write, check_targets, discard, stage_dir, swap_in
from .fit import as_dict, fit_efficiency

# (m, n, k): small, skinny, square and large products, 16..2048 (quick); more of each (full)
QUICK_SHAPES = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512), (1024, 1024, 1024),
                (2048, 2048, 2048), (1024, 1024, 256), (256, 1024, 1024), (2048, 512, 512), (512, 2048, 128),
                (128, 128, 2048), (16, 1024, 1024), (1024, 64, 1024), (2048, 32, 512), (64, 2048, 512),
                (2048, 2048, 64), (256, 64, 1024), (384, 768, 384), (1536, 1024, 768), (128, 512, 256)]
FULL_SHAPES = QUICK_SHAPES + [(32, 32, 32), (96, 96, 96), (192, 192, 192), (768, 768, 768), (1536, 1536, 1536),
                              (3072, 3072, 3072), (4096, 4096, 1024), (1024, 4096, 4096), (4096, 128, 4096),
                              (8, 2048, 2048), (2048, 8, 2048), (64, 64, 4096), (4096, 4096, 32),
                              (640, 480, 320), (1000, 1000, 1000), (3000, 500, 200), (200, 3000, 1000)]
FP64_QUICK = [(256, 256, 256), (1024, 1024, 1024), (2048, 2048, 1024)]
FP64_FULL = FP64_QUICK + [(512, 512, 512), (2048, 2048, 2048), (128, 1024, 1024), (1024, 64, 1024)]
GPU_EXTRA = [(4096, 4096, 4096), (8192, 8192, 8192)]
# products that stream a 256 MB fp32 k x n operand from memory (past a CPU's last-level cache and a GPU's L2), as a
# decode step's layers do at batch 1-8: the torch and CUDA profiles' memory efficiency is fitted on them
STREAM_SHAPES = [(1, 8192, 8192), (8, 8192, 8192), (1, 16384, 4096)]
# (batch, c_in, c_out, h, w, kh, stride, pad): ResNet-50 layers (He et al. 2016) at batch 4
CONV_SHAPES = [(4, 3, 64, 224, 224, 7, 2, 3), (4, 64, 64, 56, 56, 3, 1, 1), (4, 256, 64, 56, 56, 1, 1, 0),
               (4, 128, 128, 28, 28, 3, 1, 1), (4, 256, 256, 14, 14, 3, 1, 1)]
# (batch, heads, seq, head_dim): BERT-base-like heads (Devlin et al. 2019)
ATTENTION_SHAPES = [(2, 12, 128, 64), (2, 12, 512, 64), (1, 8, 1024, 64)]

MIN_SAMPLE_S = 1e-3  # one timed sample lasts at least this long (batches of small calls)
MIN_REPS = 3
MAX_INNER = 20000
COPY_BYTES = 256 * 2**20  # per array; two arrays (512 MiB) exceed the last-level cache of most hosts
PEAK_HEADROOM = 0.9  # peak = best measured GEMM rate / this (see :func:`profile`)
NP_DTYPES = {"fp32": np.float32, "fp64": np.float64}
COLUMNS = ["op", "m", "n", "k", "batch", "c_in", "c_out", "h", "w", "kh", "kw", "stride", "pad", "heads", "seq",
           "head_dim", "dtype", "flop", "bytes", "median_s", "repetitions", "calls_per_repetition", "backend",
           "device", "host", "cpu_count", "busy_cpus", "numpy_version", "torch_version", "date"]
FILES = ("measurements.csv", "profile.json")


def busy_cpus(window_s: float = 0.25) -> float:
    """CPUs' worth of work other processes (and the hypervisor: steal time) do while this one sleeps for
    ``window_s``, from ``/proc/stat`` (Linux); elsewhere the 1-minute load average."""
    try:
        a = [int(x) for x in Path("/proc/stat").read_text().split()[1:9]]
        time.sleep(window_s)
        d = [y - x for x, y in zip(a, [int(x) for x in Path("/proc/stat").read_text().split()[1:9]])]
    except (OSError, ValueError):
        return round(os.getloadavg()[0], 2) if hasattr(os, "getloadavg") else float("nan")
    return round((os.cpu_count() or 1) * (1.0 - (d[3] + d[4]) / max(sum(d), 1)), 2)


def meta() -> dict:
    """Columns every row carries: where, when, with which libraries, and how busy the machine was as
    measuring started (:func:`busy_cpus`; other processes slow the timings, most on a small host)."""
    return {"host": socket.gethostname(), "cpu_count": os.cpu_count() or 1, "busy_cpus": busy_cpus(),
            "numpy_version": np.__version__, "torch_version": next(
                (d.version for d in metadata.distributions(name="torch")), ""),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}


def cpu_clock(fn, inner: int) -> float:
    t = time.perf_counter()
    for _ in range(inner):
        fn()
    return time.perf_counter() - t


def cuda_clock(torch):
    def clock(fn, inner: int) -> float:  # CUDA events time the stream, not the host's launches
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        cpu_clock(fn, inner)
        b.record()
        b.synchronize()
        return a.elapsed_time(b) * 1e-3
    return clock


def bench(fns, repeats: int = 7, warmup: int = 1, budget_s: float = 0.3, clock=cpu_clock, bar=None,
          notes=None) -> list:
    """``[(median seconds per call, timed samples, calls per sample), ...]`` of the callables ``fns``.

    The samples are interleaved: each pass times every callable once, so a burst of interference from
    other processes (two cores leave the BLAS threads no slack) spoils one sample of many shapes, which
    the median ignores, rather than all samples of one shape. Passes stop after ``repeats``, or once
    ``budget_s`` per callable is spent, but never before ``MIN_REPS``. ``bar`` advances once per sample."""
    inner = []
    for fn in fns:
        cpu_clock(fn, warmup)
        inner.append(int(min(MAX_INNER, max(1, MIN_SAMPLE_S // max(clock(fn, 1), 1e-9)))))
    samples, deadline = [[] for _ in fns], time.perf_counter() + budget_s * len(fns)
    for p in range(max(repeats, 1)):
        if p >= MIN_REPS and time.perf_counter() > deadline:
            break
        for i, fn in enumerate(fns):
            samples[i].append(clock(fn, inner[i]) / inner[i])
            if bar:
                bar.update(1, notes[i] if notes else "")
    if bar and fns and len(samples[0]) < repeats:
        bar.update((repeats - len(samples[0])) * len(fns))
    return [(float(np.median(s)), len(s), n) for s, n in zip(samples, inner)]


def _row(op, dtype, timed, backend, device, flop=0.0, bytes_=0.0, **shape) -> dict:
    return {"op": op, **shape, "dtype": dtype, "flop": float(flop), "bytes": float(bytes_), "median_s": timed[0],
            "repetitions": timed[1], "calls_per_repetition": timed[2], "backend": backend, "device": device}


def _frame(rows: list, info: dict | None = None) -> pd.DataFrame:
    df = pd.DataFrame(rows).reindex(columns=COLUMNS).assign(**(info or meta()))
    df[COLUMNS[1:16]] = df[COLUMNS[1:16]].astype("Int64")  # shape columns: integers, empty where not used
    return df


def _torch(backend: str):
    """``(torch, device string, clock, device name)`` for ``torch`` (CPU) or ``cuda``."""
    import torch
    if backend == "cuda":
        return torch, "cuda", cuda_clock(torch), torch.cuda.get_device_name(0)
    return torch, "cpu", cpu_clock, "cpu"


def measure(shapes, dtype: str = "fp32", backend: str = "numpy", repeats: int = 7, warmup: int = 1,
            budget_s: float = 0.3, bar: Progress | None = None, info: dict | None = None) -> pd.DataFrame:
    """Median time of GEMMs of ``shapes`` ``[(m, n, k), ...]`` in ``dtype`` with ``backend`` (``numpy``,
    ``torch`` on the CPU or ``cuda``: torch on the first GPU, timed with CUDA events); one row each.
    ``budget_s`` is the time budget per shape; ``bar`` advances once per sample (``repeats`` per shape)."""
    shapes = [tuple(int(x) for x in s) for s in shapes]
    if backend == "numpy" and dtype not in NP_DTYPES:
        raise ValueError(f"dtype: numpy GEMMs run in {', '.join(NP_DTYPES)}, not {dtype!r}")
    rng, fns, clock, device = np.random.default_rng(0), [], cpu_clock, "cpu"
    if backend != "numpy":
        torch, dev, clock, device = _torch(backend)
        tdt = {"fp32": torch.float32, "fp64": torch.float64, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    for m, n, k in shapes:
        if backend == "numpy":
            a, b = (rng.standard_normal(s, dtype=NP_DTYPES[dtype]) for s in ((m, k), (k, n)))
            c = np.empty((m, n), dtype=NP_DTYPES[dtype])
            fns.append(lambda a=a, b=b, c=c: np.matmul(a, b, out=c))
        else:
            a, b, c = (torch.randn(*s, dtype=tdt, device=dev) for s in ((m, k), (k, n), (m, n)))
            fns.append(lambda a=a, b=b, c=c: torch.matmul(a, b, out=c))
    notes = [f"{backend} gemm {m}x{n}x{k} {dtype}" for m, n, k in shapes]
    vb = 8 if dtype == "fp64" else 4 if dtype == "fp32" else 2
    return _frame([_row("gemm", dtype, t, backend, device, 2.0 * m * n * k, (m * k + k * n + m * n) * vb, m=m, n=n,
                        k=k, batch=1) for (m, n, k), t in zip(shapes, bench(fns, repeats, warmup, budget_s, clock,
                                                                             bar, notes))], info)


def measure_memory(backend: str = "numpy", nbytes: int = COPY_BYTES, repeats: int = 7, bar=None,
                   info: dict | None = None) -> pd.DataFrame:
    """Two rows: ``copy`` (STREAM copy of ``nbytes``; bandwidth = ``bytes / median_s``) and ``launch``
    (a tiny operation; its median time is the launch overhead)."""
    count = max(int(nbytes) // 8, 1)
    if backend == "numpy":
        x, y, z, w = np.ones(count), np.empty(count), np.ones(4), np.empty(4)
        copy, tiny, clock, device = (lambda: np.copyto(y, x)), (lambda: np.add(z, z, out=w)), cpu_clock, "cpu"
    else:
        torch, dev, clock, device = _torch(backend)
        x, y, z = (torch.ones(count, dtype=torch.float64, device=dev), torch.empty(count, dtype=torch.float64,
                   device=dev), torch.zeros(1, device=dev))
        copy, tiny = (lambda: y.copy_(x)), (lambda: z.add_(1.0))
    t_copy, t_tiny = bench([copy, tiny], repeats, 2, 0.5, clock, bar, ["memory copy", "launch"])
    return _frame([_row("copy", "fp64", t_copy, backend, device, 0.0, 2.0 * count * 8),
                   _row("launch", "fp64" if backend == "numpy" else "fp32", t_tiny, backend, device)], info)


def measure_torch_layers(backend: str = "torch", repeats: int = 5, budget_s: float = 0.3, bar=None,
                         info: dict | None = None, conv=CONV_SHAPES, attention=ATTENTION_SHAPES) -> pd.DataFrame:
    """Forward ``torch.nn.functional.conv2d`` and ``scaled_dot_product_attention`` rows (fp32 on the CPU,
    fp16 on a GPU). FLOP: 2 per multiply-add; attention counts Q K^T and P V (4 b h s^2 d). Bytes: the
    tensors read and written once (conv: input, weights, output; attention: Q, K, V, output)."""
    torch, dev, clock, device = _torch(backend)
    dtype, tdt, vb = ("fp16", torch.float16, 2) if dev == "cuda" else ("fp32", torch.float32, 4)
    fns, rows, notes = [], [], []
    for b, ci, co, h, w, kh, s, p in conv:
        x, wt = torch.randn(b, ci, h, w, dtype=tdt, device=dev), torch.randn(co, ci, kh, kh, dtype=tdt, device=dev)
        fns.append(lambda x=x, wt=wt, s=s, p=p: torch.nn.functional.conv2d(x, wt, stride=s, padding=p))
        ho, wo = (h + 2 * p - kh) // s + 1, (w + 2 * p - kh) // s + 1
        io = (b * ci * h * w + co * ci * kh * kh + b * co * ho * wo) * vb
        rows.append(("conv", 2.0 * b * co * ho * wo * ci * kh * kh, io,
                     dict(batch=b, c_in=ci, c_out=co, h=h, w=w, kh=kh, kw=kh, stride=s, pad=p)))
        notes.append(f"{backend} conv {ci}->{co} {h}x{w} k{kh}")
    for b, nh, sq, d in attention:
        q, k, v = (torch.randn(b, nh, sq, d, dtype=tdt, device=dev) for _ in range(3))
        fns.append(lambda q=q, k=k, v=v: torch.nn.functional.scaled_dot_product_attention(q, k, v))
        rows.append(("attention", 4.0 * b * nh * sq * sq * d, 4 * b * nh * sq * d * vb,
                     dict(batch=b, heads=nh, seq=sq, head_dim=d)))
        notes.append(f"{backend} attention {b}x{nh}x{sq}x{d}")
    with torch.inference_mode():
        timed = bench(fns, repeats, 1, budget_s, clock, bar, notes)
    return _frame([_row(op, dtype, t, backend, device, flop, byt, **shape) for (op, flop, byt, shape), t
                   in zip(rows, timed)], info)


def _predictor(dev: Device, m, n, k, dtypes):
    m, n, k, dtypes = (np.asarray(x) for x in (m, n, k, dtypes))

    def predict(eff: Efficiency) -> np.ndarray:
        d, out = replace(dev, efficiency=eff), np.empty(len(m))
        for dt in np.unique(dtypes):
            sel = dtypes == dt
            out[sel] = gemm_coeffs(m[sel], n[sel], k[sel], d, str(dt)).seconds(d)
        return out
    return predict


def fit_gemm(dev: Device, m, n, k, dtypes, measured, label: str = "fit") -> Efficiency:
    """``compute, memory, k_startup, l2_factor`` of ``dev`` fitted to measured GEMM times (seconds).

    The kernel choice makes the model piecewise, so the fit starts from three points (the defaults, and a
    low and a high corner) and keeps the one with the smallest squared log error."""
    predict, measured = _predictor(dev, m, n, k, dtypes), np.asarray(measured, dtype=float)
    fits = [fit_efficiency(predict, measured, s, ("compute", "memory", "k_startup", "l2_factor"), label) for s in
            (Efficiency(), Efficiency(compute=0.5, memory=0.5, k_startup=16.0, l2_factor=8.0),
             Efficiency(compute=0.95, memory=0.95, k_startup=256.0, l2_factor=1.5))]
    return min(fits, key=lambda e: float(np.sum(np.log(predict(e) / measured) ** 2)))


def ape(predicted, measured) -> np.ndarray:
    """Absolute percentage errors, ``100 |p - m| / m``."""
    return 100.0 * np.abs(np.asarray(predicted, float) / np.asarray(measured, float) - 1.0)


def host_info(cuda: bool) -> dict:
    """Name, vendor, kind, capacity, multiprocessors, L2, model (and how each was read) of the host or GPU."""
    if cuda:
        import torch
        p, how = torch.cuda.get_device_properties(0), "torch.cuda.get_device_properties"
        return {"name": "-".join("".join(c if c.isalnum() else " " for c in p.name.lower()).split()),
                "vendor": "NVIDIA", "kind": "gpu", "cap": float(p.total_memory), "mp": p.multi_processor_count,
                "l2": float(getattr(p, "L2_cache_size", 0) or 0), "model": p.name, "how_cap": f"{how} total_memory",
                "how_mp": f"{how} multi_processor_count",
                "how_launch": "median time of back-to-back tiny add_ kernels, CUDA events"}
    text = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").is_file() else ""
    info = dict(reversed([(a.strip(), b.strip()) for a, _, b in (x.partition(":") for x in text.splitlines())]))
    vendor = info.get("vendor_id", "")
    return {"name": "cpu-host", "vendor": {"GenuineIntel": "Intel", "AuthenticAMD": "AMD"}.get(vendor, vendor),
            "kind": "cpu", "cap": float(os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")),
            "mp": os.cpu_count() or 1, "l2": 0.0,
            "model": info.get("model name") or platform.processor() or platform.machine() or "CPU",
            "how_cap": "os.sysconf SC_PAGE_SIZE x SC_PHYS_PAGES (physical memory)",
            "how_mp": "os.cpu_count() (logical CPUs the BLAS threads run on)",
            "how_launch": "median time of numpy.add on 4 values (fixed cost of one library call)"}


def profile(rows: pd.DataFrame, bandwidth: float | None = None, launch: float | None = None,
            backend: str = "numpy", name: str | None = None) -> dict:
    """A device file (preset format) for the machine the ``backend`` rows were measured on (``numpy``:
    the CPU host, named ``cpu-host``; ``cuda``: the first GPU).

    The peak of each dtype is the best measured GEMM rate divided by ``PEAK_HEADROOM`` = 0.9: the
    datasheet peak of a CPU depends on clocks a program cannot read reliably (turbo, AVX-512 frequency
    offsets, a virtual machine's host), while large BLAS GEMMs reach about 90 % of it (Goto & van de
    Geijn, "Anatomy of High-Performance Matrix Multiplication", ACM TOMS 34(3), 2008). The headroom keeps
    the fitted ``compute`` efficiency off its bound of 1, so the fit can trade it against ``k_startup``.
    ``bandwidth`` (bytes/s) and ``launch`` (s) default to the ``copy`` and ``launch`` rows.
    """
    rows = rows[rows["backend"] == backend]
    g = rows[rows["op"] == "gemm"]
    if len(g) < 4:
        raise ValueError(f"rows: {len(g)} {backend} GEMM rows; a profile needs at least 4")
    rate = (g["flop"] / g["median_s"]).groupby(g["dtype"]).max()
    c, t = rows[rows["op"] == "copy"], rows[rows["op"] == "launch"]
    if bandwidth is None and c.empty:
        raise ValueError("rows: no copy row to take the memory bandwidth from; pass bandwidth")
    bandwidth = float((c["bytes"] / c["median_s"]).max()) if bandwidth is None else bandwidth
    launch = (float(t["median_s"].min()) if len(t) else 0.0) if launch is None else launch
    r0, h, lib = rows.iloc[0], host_info(backend == "cuda"), "numpy.matmul" if backend == "numpy" else "torch.matmul"
    if backend == "torch":  # torch's CPU kernels: the host's memory and cores, torch's calls
        h["how_launch"] = "median time of back-to-back tiny add_ on one value (torch, CPU)"
    by = (f"measured by concurrency-model calibrate compute on {r0['host']}, {r0['date']}, numpy "
          f"{r0['numpy_version']}" + (f", torch {r0['torch_version']}" if backend != "numpy" else ""))
    d = {"name": name or h["name"], "vendor": h["vendor"], "kind": h["kind"],
         "peak_flops": {dt: float(f"{r / PEAK_HEADROOM:.4g}") for dt, r in rate.items()},
         "mem_bw_Bps": float(f"{bandwidth:.4g}"), "mem_capacity_bytes": h["cap"],
         "launch_overhead_s": float(f"{launch:.4g}"), "multiprocessors": int(h["mp"])}
    sources = {"peak_flops": f"estimate: best measured {lib} GEMM rate / {PEAK_HEADROOM} per dtype ("
                             + ", ".join(f"{dt} {r / 1e9:.1f} GFLOP/s" for dt, r in rate.items()) + f"); {by}",
               "mem_bw_Bps": f"estimate: STREAM-style copy, 2 x array bytes / median time; {by}",
               "mem_capacity_bytes": f"estimate: {h['how_cap']}; {by}",
               "launch_overhead_s": f"estimate: {h['how_launch']}; {by}",
               "multiprocessors": f"estimate: {h['how_mp']}; {by}"}
    if h["l2"]:
        d["l2_bytes"], sources["l2_bytes"] = h["l2"], f"estimate: torch L2_cache_size; {by}"
    dev = device_from_dict(d, origin="profile")
    shape = [g[col].to_numpy(int) for col in ("m", "n", "k")] + [g["dtype"].to_numpy(str)]
    eff = fit_gemm(dev, *shape, g["median_s"].to_numpy(float), f"{len(g)} {lib} GEMMs, {by}")
    err = ape(_predictor(dev, *shape)(eff), g["median_s"])
    return {**d, "efficiency": {k: (round(v, 6) if isinstance(v, float) else v) for k, v in as_dict(eff).items()},
            "sources": sources, "notes": f"{h['model']}; {by}; other work kept {r0['busy_cpus']} of "
                                         f"{r0['cpu_count']} CPUs busy. Efficiencies fitted to {len(g)} GEMMs "
                                         f"(median APE {np.median(err):.1f} %, max {np.max(err):.1f} %)."}


def write(out_dir, rows: pd.DataFrame, profile: dict, force: bool = False, extra: dict | None = None,
          stage: Path | None = None) -> list:
    """Write ``measurements.csv`` and ``profile.json`` (and ``extra``: file name -> profile dict) into
    ``out_dir`` (created if needed) together: all into a directory beside it (``stage``, from
    :func:`~.files.stage_dir`, else made here), swapped in with one rename (:func:`~.files.swap_in`), so that a run
    stopped at any point leaves the old set whole or the new one, never a profile beside other measurements.
    Existing files are kept unless ``force``; all targets are checked before anything is written. Returns the paths
    written."""
    texts = {"measurements.csv": rows.to_csv(index=False), "profile.json": json.dumps(profile, indent=2) + "\n"}
    texts.update({k: json.dumps(v, indent=2) + "\n" for k, v in (extra or {}).items()})
    out = check_targets(out_dir, force, tuple(texts))
    stage = stage_dir(out_dir) if stage is None else stage
    try:
        for name, text in texts.items():
            atomic_write(stage / name, text)
        swap_in(stage, out, tuple(texts))
    finally:
        discard(stage)  # after the swap: the old directory, if its removal was cut short
    return [str(out / name) for name in texts]


def gemm_sets(quick: bool, shapes=None) -> tuple[list, list, list]:
    """``(numpy fp32, torch CPU fp32, [(dtype, CUDA shapes)])`` GEMM shapes of a run: the quick or full set (or
    ``shapes``); torch takes the first 8 of the quick set, and the default sets add :data:`STREAM_SHAPES` to
    torch's and CUDA's (numpy's profile is the frozen ``cpu-host`` preset's kind of fit)."""
    streams = STREAM_SHAPES if shapes is None else []
    shapes = list(shapes if shapes is not None else (QUICK_SHAPES if quick else FULL_SHAPES))
    return (shapes, (shapes[:8] if quick else shapes) + streams,
            [("fp32", shapes + GPU_EXTRA + streams), ("fp16", GPU_EXTRA + streams)])


def calibrate(out_dir, quick: bool = False, force: bool = False, shapes=None, fp64_shapes=None,
              use_torch: bool | None = None, copy_bytes: int | None = None, stream=None) -> dict:
    """Measure, fit and write; returns ``{out, rows, fitted, files, elapsed_s}``. ``shapes`` /
    ``fp64_shapes`` override the GEMM sets (``fp64_shapes=[]`` skips fp64; given ``shapes``, torch and CUDA time
    them alone, without :data:`STREAM_SHAPES`); ``use_torch`` defaults to
    whether torch is importable; with torch a second profile, ``profile-torch.json``, describes torch's CPU kernels
    (another BLAS than numpy's: a torch program on the CPU is predicted with it), with CUDA a third,
    ``profile-cuda.json``, the GPU."""
    t0, torch_on = time.perf_counter(), util.find_spec("torch") is not None if use_torch is None else bool(use_torch)
    check_targets(out_dir, force, FILES)  # before importing torch, so that a refusal is immediate
    cuda = torch_on and __import__("torch").cuda.is_available()
    check_targets(out_dir, force, ("profile-torch.json",) * torch_on + ("profile-cuda.json",) * cuda)
    stage = stage_dir(out_dir)  # a directory that cannot be written is refused now, not after the measurements
    try:
        return _calibrate(out_dir, quick, force, shapes, fp64_shapes, torch_on, cuda, copy_bytes, stream, t0, stage)
    finally:
        discard(stage)  # swapped in (then gone) or not needed


def _calibrate(out_dir, quick, force, shapes, fp64_shapes, torch_on, cuda, copy_bytes, stream, t0, stage) -> dict:
    f64 = list(fp64_shapes if fp64_shapes is not None else (FP64_QUICK if quick else FP64_FULL))
    reps, budget = (7, 0.25) if quick else (11, 1.0)
    shapes, tshapes, gpu = gemm_sets(quick, shapes)
    layers = len(CONV_SHAPES) + len(ATTENTION_SHAPES)
    total = reps * (len(shapes) + len(f64) + 2 + (len(tshapes) + 2 + layers) * torch_on
                    + (sum(len(s) for _, s in gpu) + 2 + layers) * cuda)
    info, parts = meta(), []
    if info["busy_cpus"] > 0.25 * info["cpu_count"]:  # other processes will slow the timings
        print(f"calibrate compute: warning: other work keeps {info['busy_cpus']} CPUs busy", file=stream or sys.stderr)
    with Progress(total, "calibrate compute", stream) as bar:
        np.matmul(np.ones((512, 512)), np.ones((512, 512)))  # start the BLAS threads
        parts.append(measure(shapes, "fp32", "numpy", reps, 1, budget, bar, info))
        parts.append(measure(f64, "fp64", "numpy", reps, 1, budget, bar, info))
        parts.append(measure_memory("numpy", copy_bytes or COPY_BYTES, reps, bar, info))
        if torch_on:
            parts.append(measure(tshapes, "fp32", "torch", reps, 1, budget, bar, info))
            parts.append(measure_memory("torch", copy_bytes or COPY_BYTES, reps, bar, info))
            parts.append(measure_torch_layers("torch", reps, budget, bar, info))
        if cuda:
            parts += [measure(sh, dt, "cuda", reps, 2, budget, bar, info) for dt, sh in gpu]
            parts.append(measure_memory("cuda", 4 * (copy_bytes or COPY_BYTES), reps, bar, info))
            parts.append(measure_torch_layers("cuda", reps, budget, bar, info))
    rows = pd.concat([p for p in parts if len(p)], ignore_index=True)
    prof = profile(rows, backend="numpy")
    extra = {"profile-torch.json": profile(rows, backend="torch", name="cpu-host-torch")} if torch_on else {}
    if cuda:
        extra["profile-cuda.json"] = profile(rows, backend="cuda")
    files = write(out_dir, rows, prof, force, extra, stage)
    fitted = {**prof["efficiency"], **{k: prof[k] for k in ("peak_flops", "mem_bw_Bps", "launch_overhead_s")}}
    return {"out": str(Path(out_dir)), "rows": int(len(rows)), "fitted": fitted, "files": files,
            "elapsed_s": round(time.perf_counter() - t0, 2)}
