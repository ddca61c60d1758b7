"""``calibrate kernels``: DeepBench's training kernels timed on this machine with torch.

The shapes are those of DeepBench's training sheets (Baidu DeepBench @ da81ba7, ``data/deepbench_*.csv``):
GEMMs ``C = op(A) op(B)`` with its transposes, convolutions (forward, gradient of the input, gradient of
the weights, through ``torch.ops.aten.convolution_backward``; ``cudnn.benchmark`` picks the fastest
algorithm, as DeepBench does) and single-layer RNN / LSTM / GRU cells (forward and the whole backward,
``autograd.grad`` over the input and the weights). Times are the median of interleaved samples
(:func:`concurrency_model.calibrate.compute.bench`; CUDA events on a GPU).

Two differences from DeepBench, recorded in the rows: torch's recurrent layers always project their input
(``input_size`` = the hidden size; DeepBench's cuDNN calls skip it, input 0), and its vanilla RNN is the
ReLU cell. ``tf32`` rows keep fp32 storage and let the matrix units round to TF32; ``fp32`` rows forbid it.

The files are written in DeepBench's columns (``deepbench_gemm.csv``, ``deepbench_conv.csv``,
``deepbench_rnn.csv``) with the host, library versions and date in the source columns. What is measured is
saved after every chunk of shapes (temporary file and rename), so that work stopped half-way keeps what was
measured: in the file itself when it is new, else (``--force`` over an earlier file) in ``deepbench_{op}.csv.partial``,
the earlier file replaced once, whole, when its op is done, never left half-replaced.
"""
from __future__ import annotations

import platform
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pandas as pd

from ..datasets import load
from ..progress import Progress
from .compute import cpu_clock, cuda_clock, host_info, bench
from .files import atomic_write, check_targets, partial_path

OPS = ("gemm", "conv", "rnn")
# dtype -> DeepBench's precision label (``fp32``, ``fp16``) or this toolkit's (``tf32``, ``bf16``);
# concurrency_model.validate.kernels.PRECISIONS reads them back
PRECISIONS = {"fp32": "Float", "fp16": "16 bit inputs, 16 bit multiplication, 32 bit addition",
              "bf16": "bf16 inputs, bf16 multiplication, 32 bit addition",
              "tf32": "fp32 inputs, tf32 multiplication, 32 bit addition"}
SHAPE_COLUMNS = {"gemm": ["m", "n", "k", "a_transpose", "b_transpose"],
                 "conv": ["w", "h", "c", "n", "k", "filter_w", "filter_h", "pad_w", "pad_h", "stride_w", "stride_h"],
                 "rnn": ["cell", "hidden_units", "n", "timesteps"]}
PASSES = {"gemm": ["time_ms"], "conv": ["fwd_time_ms", "bwd_data_time_ms", "bwd_filter_time_ms"],
          "rnn": ["fwd_time_ms", "bwd_time_ms"]}
CHUNK = 8  # shapes whose tensors live (and whose samples interleave) at once


def shapes(op: str, limit: int | None = None) -> pd.DataFrame:
    """The distinct shapes of DeepBench's training sheets for ``op``, in file order (the first ``limit``)."""
    if op not in OPS:
        raise ValueError(f"ops: unknown {op!r}; allowed: {', '.join(OPS)}")
    df = load(f"deepbench_{op}")
    out = df[df["benchmark"] == "train"][SHAPE_COLUMNS[op]].drop_duplicates().reset_index(drop=True)
    return out if limit is None else out.head(limit)


def _gemm(torch, dev, tdt, r):
    a = torch.randn(*((r.k, r.m) if r.a_transpose == "T" else (r.m, r.k)), dtype=tdt, device=dev)
    b = torch.randn(*((r.n, r.k) if r.b_transpose == "T" else (r.k, r.n)), dtype=tdt, device=dev)
    a, b = (a.t() if r.a_transpose == "T" else a), (b.t() if r.b_transpose == "T" else b)
    c = torch.empty(r.m, r.n, dtype=tdt, device=dev)
    return [lambda: torch.matmul(a, b, out=c)]


def _conv(torch, dev, tdt, r):
    x = torch.randn(r.n, r.c, r.h, r.w, dtype=tdt, device=dev)
    wt = torch.randn(r.k, r.c, r.filter_h, r.filter_w, dtype=tdt, device=dev)
    stride, pad = [int(r.stride_h), int(r.stride_w)], [int(r.pad_h), int(r.pad_w)]
    y = torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad)
    g = torch.randn_like(y)

    def back(mask):
        return lambda: torch.ops.aten.convolution_backward(g, x, wt, None, stride, pad, [1, 1], False, [0, 0], 1,
                                                           mask)
    return [lambda: torch.nn.functional.conv2d(x, wt, stride=stride, padding=pad),
            back([True, False, False]), back([False, True, False])]


def _rnn(torch, dev, tdt, r):
    h, cls = int(r.hidden_units), {"lstm": "LSTM", "gru": "GRU"}.get(r.cell, "RNN")
    kw = {"nonlinearity": "relu"} if cls == "RNN" else {}
    layer = getattr(torch.nn, cls)(h, h, **kw).to(device=dev, dtype=tdt)
    layer.flatten_parameters()  # one weight buffer, as cuDNN wants
    x = torch.randn(int(r.timesteps), int(r.n), h, dtype=tdt, device=dev, requires_grad=True)
    y = layer(x)[0]
    g, inputs = torch.randn_like(y), [x, *layer.parameters()]
    return [lambda: layer(x), lambda: torch.autograd.grad(y, inputs, g, retain_graph=True)]


BUILD = {"gemm": _gemm, "conv": _conv, "rnn": _rnn}


def _flags(torch, dtype: str) -> None:
    torch.backends.cuda.matmul.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.allow_tf32 = dtype == "tf32"
    torch.backends.cudnn.benchmark = True


def _commit() -> str:
    """The checkout's git commit, else the package's version."""
    import subprocess
    from importlib.metadata import PackageNotFoundError, version
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=Path(__file__).parent, text=True,
                              capture_output=True, timeout=5, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        try:
            return f"concurrency_model {version('concurrency_model')}"
        except PackageNotFoundError:
            return "concurrency_model (not installed)"


def device_label(torch, cuda: bool) -> tuple[str, str]:
    """``(device, software)`` of a torch run: the GPU's name as torch gives it, or ``CPU ARCH`` (the names
    :func:`concurrency_model.validate.kernels.preset_of` maps to presets), and the torch / CUDA / cuDNN versions."""
    if not cuda:
        return f"CPU {platform.processor() or platform.machine()}", f"torch {torch.__version__}"
    return torch.cuda.get_device_name(0), (f"torch {torch.__version__}; CUDA {torch.version.cuda}; "
                                           f"cuDNN {torch.backends.cudnn.version()}")


def _meta(torch, dev: str) -> dict:
    name, soft = device_label(torch, dev == "cuda")
    return {"device": name, "host_cpu": host_info(False)["model"], "software": soft,
            "source_repo": "concurrency_model calibrate kernels",
            "source_commit": _commit(), "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "host": platform.node()}


def measure(op: str, dtype: str, table: pd.DataFrame, backend: str = "cuda", repeats: int = 7,
            budget_s: float = 0.05, bar=None, deadline: float | None = None, done=None) -> tuple[pd.DataFrame, list]:
    """Rows of ``table`` (shapes of ``op``) with their passes' median times in ms, and the shapes that
    failed or were left when ``deadline`` (``time.perf_counter()``) passed, as ``[(index, reason)]``.
    ``done(rows)``: called with the rows so far after every ``CHUNK`` shapes (to write them)."""
    import torch
    if dtype not in PRECISIONS:
        raise ValueError(f"dtypes: unknown {dtype!r}; allowed: {', '.join(PRECISIONS)}")
    dev = "cuda" if backend == "cuda" else "cpu"
    clock = cuda_clock(torch) if dev == "cuda" else cpu_clock
    tdt = {"fp32": torch.float32, "tf32": torch.float32, "fp16": torch.float16, "bf16": torch.bfloat16}[dtype]
    _flags(torch, dtype)
    out, missing = table.copy(), []
    for col in PASSES[op]:
        out[col] = np.nan
    for start in range(0, len(table), CHUNK):
        idx = list(range(start, min(start + CHUNK, len(table))))
        if deadline is not None and time.perf_counter() > deadline:
            missing += [(i, "time budget spent") for i in idx]
            continue
        fns, owner = [], []
        for i in idx:
            try:
                made = BUILD[op](torch, dev, tdt, table.iloc[i])
                for f in made:
                    f()  # runs once here: a shape the library refuses fails now, not inside the interleaved samples
            except (RuntimeError, ValueError) as e:  # out of memory, no kernel for this dtype, ...
                missing.append((i, str(e).splitlines()[0][:120]))
                continue
            fns += made
            owner += [(i, col) for col in PASSES[op]]
        if fns:
            with torch.inference_mode(op != "rnn"):
                timed = bench(fns, repeats, 1, budget_s, clock, bar, [f"{op} {dtype} #{i}" for i, _ in owner])
            for (i, col), t in zip(owner, timed):
                out.loc[i, col] = t[0] * 1e3
            if done is not None:
                done(out)
        del fns
        if dev == "cuda":
            torch.cuda.empty_cache()
    return out, missing


def _finish(op: str, dtype: str, rows: pd.DataFrame, info: dict, path: Path, repeats: int) -> pd.DataFrame:
    rows = rows.assign(benchmark="train", precision=PRECISIONS[dtype], dtype=dtype, repetitions=repeats,
                       **info, source_file=str(path.name))
    if op == "conv":
        rows["total_time_ms"] = rows[PASSES["conv"]].sum(axis=1, min_count=3)
    if op == "rnn":
        rows["input_size"] = rows["hidden_units"]
    return rows.dropna(subset=PASSES[op], how="all")


def calibrate(out_dir, ops=OPS, dtypes=("fp32", "fp16"), quick: bool = False, force: bool = False,
              backend: str | None = None, budget_s: float | None = None, stream=None, limit: int | None = None) -> dict:
    """Time DeepBench's training shapes for ``ops`` x ``dtypes`` and write ``DIR/deepbench_{op}.csv``.

    ``quick``: the first 8 shapes of each op; ``limit``: the first ``limit``. ``budget_s``: stop starting new
    shapes after this many seconds (the rest listed in ``missing``). ``backend``: ``cuda`` where a GPU is,
    else ``torch`` (the CPU, which times fp32 only). Returns ``{out, rows, files, missing, device, dtypes,
    elapsed_s}``."""
    import torch
    t0 = time.perf_counter()
    ops, dtypes = list(ops), list(dtypes)
    if not ops or not dtypes:
        raise ValueError(f"{'ops' if not ops else 'dtypes'}: empty; name at least one")
    for op in ops:
        if op not in OPS:
            raise ValueError(f"ops: unknown {op!r}; allowed: {', '.join(OPS)}")
    for dt in dtypes:
        if dt not in PRECISIONS:
            raise ValueError(f"dtypes: unknown {dt!r}; allowed: {', '.join(PRECISIONS)}")
    backend = backend or ("cuda" if torch.cuda.is_available() else "torch")
    if backend != "cuda":
        dtypes = ["fp32"]  # a CPU's half-precision kernels are not what a GPU's dtypes ask about (see ``dtypes``)
    out = check_targets(out_dir, force, tuple(f"deepbench_{op}.csv" for op in ops))
    out.mkdir(parents=True, exist_ok=True)
    limit = 8 if quick and limit is None else limit
    tables = {op: shapes(op, limit) for op in ops}
    repeats = 5 if quick else 7
    info, files, missing, count = _meta(torch, "cuda" if backend == "cuda" else "cpu"), [], [], 0
    deadline = None if budget_s is None else t0 + float(budget_s)
    total = repeats * sum(len(t) * len(PASSES[op]) for op, t in tables.items()) * len(dtypes)
    with Progress(total, "calibrate kernels", stream) as bar:
        for op in ops:
            path, parts = out / f"deepbench_{op}.csv", []
            progress = partial_path(path) if path.exists() else path  # a whole old file is replaced once, at the end
            for dt in dtypes:
                def write(rows, dt=dt):  # every chunk: a run stopped from outside keeps what it timed
                    atomic_write(progress, pd.concat([*parts, _finish(op, dt, rows, info, path, repeats)],
                                                     ignore_index=True).to_csv(index=False))
                rows, miss = measure(op, dt, tables[op], backend, repeats, 0.02 if quick else 0.05, bar, deadline,
                                     write)
                missing += [{"op": op, "dtype": dt, **tables[op].iloc[i].to_dict(), "reason": why} for i, why in miss]
                parts.append(_finish(op, dt, rows, info, path, repeats))
                frame = pd.concat(parts, ignore_index=True)
                atomic_write(progress, frame.to_csv(index=False))
            atomic_write(path, frame.to_csv(index=False))  # the whole op, replacing an old file once
            if progress != path:
                progress.unlink(missing_ok=True)
            count += len(frame)
            files.append(str(path))
    return {"out": str(out), "rows": count, "files": files, "missing": missing, "device": info["device"],
            "dtypes": dtypes, "elapsed_s": round(time.perf_counter() - t0, 2)}
