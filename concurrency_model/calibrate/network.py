"""``calibrate network``: collective microbenchmarks on ``torch.distributed`` and a fitted cluster file.

``P`` local processes (``torch.multiprocessing``, spawn; ``MASTER_ADDR=127.0.0.1`` and a free port) run
the collectives over gloo (CPU tensors, loopback) or NCCL (one GPU each), unless ``RANK`` and
``WORLD_SIZE`` say that this process was started by ``torchrun`` (a multi-node cluster): then every rank
measures in place and rank 0 writes. Collectives on float32 buffers of powers of two from 1 KiB to
64 MiB: ``all_reduce`` (sum), ``all_gather`` (``all_gather_single``, else ``all_gather_into_tensor``,
else the list form), ``reduce_scatter`` (likewise; skipped, and said so, where the backend has none),
``broadcast`` (root 0) and ``alltoall`` (``all_to_all_single``). Sizes follow nccl-tests (``S`` in
``algbw = S / t``; shared/reference/training-formulas.md §6.1): the whole buffer of all-reduce and
broadcast, the gathered (all-gather) or scattered (reduce-scatter) array, and the per-rank send buffer
of all-to-all. ``busbw = algbw x`` 2(P-1)/P (all-reduce), (P-1)/P (all-gather, reduce-scatter,
all-to-all) or 1 (broadcast).

Per size: warm-up calls, then repetitions, each after a barrier, timed on every rank with
``time.perf_counter`` (after ``torch.cuda.synchronize`` on GPUs); a repetition's time is the maximum over
the ranks (an all-reduce with MAX) and a row holds the median of the repetitions. The count of
repetitions shrinks for large sizes to a time budget, never below a minimum. A failing size (an error
or the process group's timeout) is recorded as missing and the run goes on; if a rank dies, the rows
already measured are kept and the sizes not measured are reported (stderr and ``missing``).

Alpha-beta models (Thakur, Rabenseifner & Gropp, IJHPCA 19(1), 2005), ``n`` bytes as above, fitted per
collective by :func:`concurrency_model.calibrate.fit_comm.fit_alpha_beta`: ring all-reduce ``2(P-1) a
+ 2(P-1)/P n b``; ring all-gather and reduce-scatter, pairwise all-to-all ``(P-1) a + (P-1)/P n b``;
broadcast as a binomial tree (MPICH's short-message broadcast, ibid.) ``ceil(log2 P) (a + n b)``. The
cluster file's link (``bw_Bps = 1/b``: the ring's per-link bandwidth, comparable with busbw;
``latency_s = a``) is the all-reduce fit at the largest rank count.
"""
from __future__ import annotations

import contextlib
import json
import os
import platform
import queue
import socket
import sys
import time
import warnings
from datetime import datetime, timedelta, timezone
from importlib import util
from pathlib import Path

import numpy as np
import pandas as pd

from ..hardware.devices import device_names
from ..progress import Progress
from .files import atomic_write, check_targets
from .fit_comm import LOSS, MODEL_TEXT, fits, six_digits

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "broadcast", "alltoall")
SIZES = tuple(2**k for k in range(10, 27))  # 1 KiB .. 64 MiB
QUICK_SIZES = tuple(2**k for k in range(10, 27, 2))  # 1, 4, 16, 64, 256 KiB, 1, 4, 16, 64 MiB
# warm-up calls, most and fewest repetitions, time budget of the repetitions of one size (seconds)
FULL = {"warmup": 3, "reps": 60, "min_reps": 5, "budget_s": 1.5}  # 2 ranks ~35 s, 4 ranks ~70 s on 2 cores
QUICK = {"warmup": 1, "reps": 7, "min_reps": 3, "budget_s": 0.15}
TIMEOUT_S = 120.0  # one collective (process-group timeout); the parent gives up after this without news
BUSBW = {"all_reduce": lambda p: 2 * (p - 1) / p, "all_gather": lambda p: (p - 1) / p,
         "reduce_scatter": lambda p: (p - 1) / p, "alltoall": lambda p: (p - 1) / p, "broadcast": lambda p: 1.0}


COLUMNS = ["collective", "num_ranks", "num_nodes", "size_bytes", "count_elements", "dtype", "redop", "time_us",
           "algbw_GBps", "busbw_GBps", "repetitions", "torch_op", "backend", "host", "torch_version",
           "python_version", "date"]
FILES = ("measurements.csv", "profile.json")


def _ops(dist, torch, coll: str, count: int, p: int, dev):
    """``[(torch function name, callable), ...]`` that run ``coll`` on ``count`` float32 elements (the
    nccl-tests ``S``), best first; ``count`` is a multiple of ``p`` except for all-reduce and broadcast."""
    z = lambda k: torch.zeros(k, dtype=torch.float32, device=dev)  # zeros: sums never overflow
    if coll in ("all_reduce", "broadcast"):
        x = z(count)
        return [("all_reduce", lambda: dist.all_reduce(x))] if coll == "all_reduce" else \
            [("broadcast", lambda: dist.broadcast(x, 0))]
    whole, part = z(count), z(count // p)
    if coll == "alltoall":
        out = z(count)
        return [("all_to_all_single", lambda: dist.all_to_all_single(out, whole)),
                ("all_to_all", lambda: dist.all_to_all(list(out.chunk(p)), list(whole.chunk(p))))]
    names = ("all_gather_single", "all_gather_into_tensor") if coll == "all_gather" else \
        ("reduce_scatter_single", "reduce_scatter_tensor")
    args = (whole, part) if coll == "all_gather" else (part, whole)  # (output, input)
    ops = [(nm, lambda f=getattr(dist, nm): f(*args)) for nm in names if hasattr(dist, nm)]
    if coll == "all_gather":
        return ops + [("all_gather", lambda: dist.all_gather(list(whole.chunk(p)), part))]
    return ops + [("reduce_scatter", lambda: dist.reduce_scatter(part, list(whole.chunk(p))))]


def _measure(rank: int, p: int, backend: str, plan: dict, emit, hooks: dict) -> None:
    """Run the plan on this rank (process group initialised); rank 0 ``emit(kind, payload)``s
    ``row``, ``missing``, ``skip`` and ``done`` messages."""
    import torch
    import torch.distributed as dist
    dev = torch.device("cuda", torch.cuda.current_device()) if backend == "nccl" else torch.device("cpu")
    sync = torch.cuda.synchronize if backend == "nccl" else (lambda: None)
    nodes = max(1, p // int(os.environ.get("LOCAL_WORLD_SIZE", p) or p))
    say, perf = (emit if rank == 0 else (lambda *a: None)), time.perf_counter
    barrier = (lambda: dist.barrier(device_ids=[dev.index])) if backend == "nccl" else dist.barrier
    for coll in plan["collectives"]:
        pick = None
        for i, size in enumerate(plan["sizes"]):
            try:
                if (coll, size) in hooks.get("fail", ()):
                    raise RuntimeError("injected failure (test hook)")
                if (coll, size) in hooks.get("crash", ()) and rank == p - 1:
                    os._exit(3)
                count = size // 4 if coll in ("all_reduce", "broadcast") else max(1, size // (4 * p)) * p
                ops = _ops(dist, torch, coll, count, p, dev)
                if pick is None:  # the first function this backend runs; every rank takes the same
                    pick, why = len(ops), ""
                    for j, (_, fn) in enumerate(ops):
                        try:
                            fn()
                            pick = j
                            break
                        except (RuntimeError, NotImplementedError, ValueError) as e:
                            why = f"{type(e).__name__}: {e}".splitlines()[0][:200]
                    agree = torch.tensor([pick], dtype=torch.int64, device=dev)
                    dist.all_reduce(agree, op=dist.ReduceOp.MAX)
                    pick = int(agree.item())
                    if pick >= len(ops):
                        say("skip", (coll, len(plan["sizes"]) - i, f"not supported by {backend}: {why}"))
                        break
                name, fn = ops[pick]
                for _ in range(plan["warmup"]):
                    fn()
                sync(), barrier()
                t = perf()
                fn(), sync()
                est = torch.tensor([perf() - t], dtype=torch.float64, device=dev)
                dist.all_reduce(est, op=dist.ReduceOp.MAX)
                reps = int(min(plan["reps"], max(plan["min_reps"], plan["budget_s"] // max(est.item(), 1e-9))))
                times = []
                for _ in range(reps):
                    barrier(), sync()
                    t = perf()
                    fn(), sync()
                    times.append(perf() - t)
                worst = torch.tensor(times, dtype=torch.float64, device=dev)
                dist.all_reduce(worst, op=dist.ReduceOp.MAX)  # a repetition lasts until its slowest rank ends
                sec = float(np.median(worst.cpu().numpy()))
                algbw = count * 4 / sec / 1e9
                say("row", (coll, size, {
                    "collective": coll, "num_ranks": p, "num_nodes": nodes, "size_bytes": count * 4,
                    "count_elements": count, "dtype": "float",
                    "redop": "sum" if coll in ("all_reduce", "reduce_scatter") else "none",
                    "time_us": round(sec * 1e6, 3), "algbw_GBps": six_digits(algbw), "busbw_GBps": six_digits(algbw * BUSBW[coll](p)),
                    "repetitions": reps, "torch_op": name}))
            except Exception as e:  # noqa: BLE001 - any failure of one size is recorded, the run goes on
                say("missing", (coll, size, f"{type(e).__name__}: {e}".splitlines()[0][:200]))
    say("done", None)


def _run_rank(backend: str, plan: dict, emit, hooks: dict, timeout_s: float) -> None:
    import torch
    import torch.distributed as dist
    warnings.filterwarnings("ignore", category=FutureWarning)  # all_gather_into_tensor & co. in new torch
    rank, p = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    if backend == "nccl":
        torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group(backend, rank=rank, world_size=p, timeout=timedelta(seconds=timeout_s))
    try:
        _measure(rank, p, backend, plan, emit, hooks)
    finally:
        dist.destroy_process_group()


def _worker(rank: int, p: int, port: int, backend: str, plan: dict, q, hooks: dict, timeout_s: float) -> None:
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), RANK=str(rank), WORLD_SIZE=str(p),
                      LOCAL_RANK=str(rank), LOCAL_WORLD_SIZE=str(p))
    if backend == "gloo" and Path("/sys/class/net/lo").exists():
        os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    import torch
    torch.set_num_threads(1)  # P processes share the cores, as under torchrun (OMP_NUM_THREADS=1)
    _run_rank(backend, plan, lambda kind, payload: q.put((kind, payload)), hooks, timeout_s)


def _free_port() -> int:
    with socket.socket() as s:
        return s.bind(("127.0.0.1", 0)) or s.getsockname()[1]


def _spawn(p: int, backend: str, plan: dict, hooks: dict, timeout_s: float, on_msg) -> str:
    """Run ``p`` local ranks, passing rank 0's messages to ``on_msg``; ``""`` or why the run stopped."""
    import torch.multiprocessing as tmp
    q = tmp.get_context("spawn").Queue()
    ctx = tmp.start_processes(_worker, args=(p, _free_port(), backend, plan, q, hooks, timeout_s), nprocs=p,
                              join=False, start_method="spawn")
    last, error = time.monotonic(), ""
    try:
        while True:
            try:
                while True:
                    on_msg(*q.get(timeout=0.05))
                    last = time.monotonic()
            except queue.Empty:
                pass
            try:
                if ctx.join(timeout=0.05):
                    break
            except Exception as e:  # noqa: BLE001 - a rank raised or died: keep what rank 0 sent
                error = str(e).strip().splitlines()[-1] if str(e).strip() else type(e).__name__
                break
            if time.monotonic() - last > timeout_s + 30:
                error = f"no result for {timeout_s + 30:.0f} s; stopped the ranks"
                break
    finally:
        for proc in ctx.processes:
            if proc.is_alive():
                proc.terminate()
            proc.join(5)
    with contextlib.suppress(queue.Empty, EOFError, OSError):
        while True:
            on_msg(*q.get(timeout=0.2))
    return error


def _device_name(backend: str) -> str:
    """``cpu-host``, or the device preset of the first GPU (``NVIDIA H200`` -> ``h200-sxm-141gb``)."""
    if backend != "nccl":
        return "cpu-host"
    words = "".join(c if c.isalnum() else " " for c in __import__("torch").cuda.get_device_name(0).lower()).split()
    return next((d for w in words if w not in ("nvidia", "amd", "tesla") for d in device_names()
                 if d.split("-")[0] == w), "-".join(words))


def profile(rows: pd.DataFrame, device: str | None = None) -> dict:
    """A cluster file (the shape :mod:`concurrency_model.hardware.clusters` loads) for the rows' host: its link is
    the all-reduce fit at the largest rank count (``bw_Bps = 1/beta``, ``latency_s = alpha``); the
    inter-node tier, not measured, copies it (``nodes`` 1: as many nodes as the ranks need)."""
    ranks = int(rows["num_ranks"].max())
    f = fits(rows, ranks)
    if not f:
        raise ValueError(f"rows: no collective has 2 sizes measured on {ranks} >= 2 ranks; cannot fit a link")
    coll = "all_reduce" if "all_reduce" in f else next(iter(f))
    link, r0 = f[coll], rows[rows["num_ranks"] == ranks].iloc[0]
    backend = str(r0["backend"])
    device = device or _device_name(backend)
    local = "loopback" if backend == "gloo" else "nvlink"  # nccl: assumed; the fitted numbers are what count
    by = (f"measured by concurrency-model calibrate network on {r0['host']}, {r0['date']}, torch "
          f"{r0['torch_version']}, python {r0['python_version']}, {backend}")
    how = (f"{coll} {MODEL_TEXT[coll]} fitted to {link['rows']} sizes on {ranks} ranks (least squares on log "
           f"time ratios, {LOSS} loss)")
    bw_how = (f"a lower bound, the {how} leaving less than 1% of the largest message's time to beta: the "
              "bandwidth that moves it in its whole time") if link["bw_lower_bound"] else f"1/beta of the {how}"
    tier = {"name": local, "kind": local, "bw_Bps": link["bw_Bps"], "latency_s": link["alpha_s"], "efficiency": 1.0,
            "sources": {"kind": f"{backend} ranks as processes on one host" if backend == "gloo" else
                        "assumed: NCCL between the GPUs of a node",
                        "bw_Bps": f"estimate: {bw_how}; {by}",
                        "latency_s": f"estimate: alpha of the {how}; {by}",
                        "efficiency": "1.0: bw_Bps is the achieved, fitted bandwidth"}}
    inter = {**tier, "sources": {k: "not measured (one node): a copy of intra" for k in tier["sources"]},
             "notes": "not measured: a copy of intra"}
    others = "; ".join(f"{c} alpha {v['alpha_s'] * 1e6:.2f} us, bw {v['bw_Bps'] / 1e9:.3g} GB/s (median APE "
                       f"{v['median_ape_pct']:.1f} %)" for c, v in f.items())
    other = [f"{p} ranks: {coll} alpha {v[coll]['alpha_s'] * 1e6:.2f} us, bw {v[coll]['bw_Bps'] / 1e9:.3g} GB/s"
             for p in sorted(set(int(x) for x in rows["num_ranks"]) - {ranks}) if coll in (v := fits(rows, p))]
    return {"name": f"{device}-{backend}", "device": device, "gpus_per_node": ranks, "nodes": 1, "nics_per_node": 1,
            "intra": tier, "inter": inter,
            "sources": {"device": f"the {device} device preset", "gpus_per_node": f"the {ranks} ranks measured",
                        "nodes": "1 = as many nodes as the ranks need", "nics_per_node": "not measured: 1"},
            "notes": f"{by}. Alpha-beta fits per collective on {ranks} ranks: {others}."
                     + (f" Other rank counts (rows in measurements.csv, not in this file): {'; '.join(other)}."
                        if other else "")}


def _frame(rows: list, info: dict) -> pd.DataFrame:
    return pd.DataFrame(rows).assign(**info).reindex(columns=COLUMNS)


def write(out_dir, rows: pd.DataFrame, prof: dict | None, force: bool = False) -> list:
    """Write ``measurements.csv`` and (if any) ``profile.json`` atomically; never over existing files
    unless ``force``. Returns the paths written."""
    texts = {"measurements.csv": rows.to_csv(index=False)}
    if prof is not None:
        texts["profile.json"] = json.dumps(prof, indent=2) + "\n"
    out = check_targets(out_dir, force, FILES)
    out.mkdir(parents=True, exist_ok=True)
    for name, text in texts.items():
        atomic_write(out / name, text)
    return [str(out / name) for name in texts]


def _kib(n: int) -> str:
    return f"{n // 2**20} MiB" if n >= 2**20 else f"{n // 2**10} KiB" if n >= 2**10 else f"{n} B"


def calibrate(out_dir, quick: bool = False, ranks: int | None = None, backend: str | None = None,
              force: bool = False, sizes=None, collectives=None, timeout_s: float = TIMEOUT_S, stream=None,
              hooks: dict | None = None, **settings) -> dict:
    """Measure, fit and write; returns ``{out, rows, fitted, missing, skipped, stopped, files, ranks,
    backend, elapsed_s}`` (other ranks than 0 under torchrun: ``{out, rows: 0, fitted, missing, rank}``).
    ``sizes``/``collectives`` override the plan; ``settings`` override ``warmup, reps, min_reps,
    budget_s``; ``hooks`` (tests): ``{"fail": {(collective, size)}, "crash": {(collective, size)}}`` make
    a size raise on every rank, or the last rank exit."""
    t0, stream, hooks = time.perf_counter(), stream or sys.stderr, hooks or {}
    if util.find_spec("torch") is None:
        raise ValueError("calibrate network needs torch: pip install torch==2.13.0, then the torch extra")
    import torch
    import torch.distributed as dist
    torchrun = "RANK" in os.environ and "WORLD_SIZE" in os.environ
    rank = int(os.environ["RANK"]) if torchrun else 0
    if rank == 0:
        check_targets(out_dir, force, FILES)  # before starting ranks, so that a refusal is immediate
    cuda = torch.cuda.is_available() and dist.is_available() and dist.is_nccl_available()
    backend = backend or ("nccl" if cuda else "gloo")
    if backend not in ("gloo", "nccl") or not dist.is_available():
        raise ValueError(f"backend: {backend!r}; this torch offers " + ", ".join(
            b for b in ("gloo", "nccl") if dist.is_available() and getattr(dist, f"is_{b}_available")()))
    if backend == "nccl" and not cuda:
        raise ValueError("backend: nccl needs CUDA GPUs and a torch built with NCCL; use --backend gloo")
    if torchrun:
        if ranks is not None and ranks != int(os.environ["WORLD_SIZE"]):
            raise ValueError(f"ranks: {ranks}, but torchrun started WORLD_SIZE={os.environ['WORLD_SIZE']}")
        ranks = int(os.environ["WORLD_SIZE"])
    ranks = ranks or (torch.cuda.device_count() if backend == "nccl" else 2)
    if backend == "nccl" and not torchrun and ranks > torch.cuda.device_count():
        raise ValueError(f"ranks: {ranks} NCCL ranks need {ranks} GPUs; this host has {torch.cuda.device_count()}")
    plan = {**(QUICK if quick else FULL), **settings,
            "sizes": [int(s) for s in (sizes or (QUICK_SIZES if quick else SIZES))],
            "collectives": [c for c in (collectives or COLLECTIVES)]}
    if bad := [c for c in plan["collectives"] if c not in COLLECTIVES]:
        raise ValueError(f"collectives: {bad[0]!r}; known: {', '.join(COLLECTIVES)}")
    info = {"backend": backend, "host": socket.gethostname(), "torch_version": torch.__version__,
            "python_version": platform.python_version(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds")}
    got, done, errors, skipped = [], set(), {}, {}
    with Progress(len(plan["sizes"]) * len(plan["collectives"]), f"calibrate network ({backend}, {ranks} ranks)",
                  stream, enabled=rank == 0) as bar:
        def on_msg(kind, payload):
            if kind in ("row", "missing"):
                coll, size, body = payload
                if kind == "row":
                    got.append(body)
                    done.add((coll, size))
                else:
                    errors[(coll, size)] = body
                bar.update(1, f"{coll} {_kib(size)}")
            elif kind == "skip":
                coll, left, why = payload
                skipped[coll] = why
                bar.update(left, f"{coll} skipped")
        stopped = "" if torchrun else _spawn(ranks, backend, plan, hooks, timeout_s, on_msg)
        if torchrun:
            _run_rank(backend, plan, on_msg, hooks, timeout_s)
    if rank != 0:  # torchrun: rank 0 reports and writes
        return {"out": str(Path(out_dir)), "rows": 0, "fitted": {}, "missing": [], "rank": rank}
    missing = [{"collective": c, "size_bytes": s, "error": errors.get((c, s)) or stopped or "not measured"}
               for c in plan["collectives"] if c not in skipped for s in plan["sizes"] if (c, s) not in done]
    for c in {m["collective"]: 0 for m in missing}:
        mine = [m for m in missing if m["collective"] == c]
        print(f"calibrate network: missing {c} at {', '.join(_kib(m['size_bytes']) for m in mine)} "
              f"({mine[0]['error']})", file=stream)
    for c, why in skipped.items():
        print(f"calibrate network: skipped {c}: {why}", file=stream)
    if stopped:
        print(f"calibrate network: the run stopped early: {stopped}", file=stream)
    rows = _frame(got, info)
    if rows.empty:
        raise ValueError(f"no collective could be measured ({stopped or (missing and missing[0]['error'])})")
    try:
        prof = profile(rows)
    except ValueError as e:
        prof = None
        print(f"calibrate network: profile.json not written: {e}", file=stream)
    files = write(out_dir, rows, prof, force)
    return {"out": str(Path(out_dir)), "rows": int(len(rows)), "fitted": fits(rows), "missing": missing,
            "skipped": skipped, "stopped": stopped, "files": files, "ranks": ranks, "backend": backend,
            "elapsed_s": round(time.perf_counter() - t0, 2)}
