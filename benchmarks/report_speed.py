"""How long ``concurrency-model report`` takes on the default data: process (CPU) seconds and wall seconds, in all
and per part, with the figures' widths.

Runs the command as a user would (a child process writing into a new temporary folder) and reads the CPU seconds
of it and all its workers from ``getrusage(RUSAGE_CHILDREN)`` (user + system, every waited-for descendant), the
wall time around it, and the per-part figures the command's ``--json`` gives (``timings_s``: wall, ``cpu_s``: the
part's own process seconds, in whichever worker built it). The target of issue 38 is 60 CPU seconds on two cores.
On a shared machine the wall time depends on the load; the CPU seconds much less.

A run on an empty cache (``--empty-cache``: a new temporary ``$CONCURRENCY_MODEL_CACHE_DIR``, as a fresh clone
has) also builds the compiled functions and cached arrays (:mod:`concurrency_model.compiled`), the figures' PNGs
among them (``report._plot.png_bytes``); without it the user's cache serves them when the package's sources have not
changed since they were written (run it twice for a warm figure). Measure a frozen copy of the tree
(``git archive``): editing the sources while it runs changes the cache keys of the processes started later.

A pair on one cache: ``--cache-dir DIR`` with a new DIR (empty: the first run's figure), then the same again (warm).

    python benchmarks/report_speed.py [--full] [--workers N] [--keep DIR] [--empty-cache | --cache-dir DIR]
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import struct
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_CPU_S = 60.0  # issue 38: the report on the default data in at most 60 s of CPU on two cores


def cpu_children() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def png_width(path: str) -> int:
    with open(path, "rb") as f:
        return struct.unpack(">II", f.read(24)[16:24])[0]  # the IHDR chunk's width


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--full", action="store_true", help="the report's full validation (report --full)")
    ap.add_argument("--workers", type=int, default=None, help="report --workers (default: the command's own)")
    ap.add_argument("--keep", default=None, help="write the report here instead of a temporary folder")
    ap.add_argument("--empty-cache", action="store_true",
                    help="a new, empty cache of compiled functions and arrays for the run (a fresh clone's first run)")
    ap.add_argument("--cache-dir", default=None,
                    help="this directory as the cache (kept: a new one, then the same again, gives an empty-cache "
                         "and a warm figure on the same cache)")
    a = ap.parse_args(argv)
    if a.empty_cache and a.cache_dir:
        ap.error("--empty-cache and --cache-dir: one or the other")
    with tempfile.TemporaryDirectory() as tmp:
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        if a.empty_cache:
            env["CONCURRENCY_MODEL_CACHE_DIR"] = str(Path(tmp) / "cache")
        elif a.cache_dir:
            fresh = not Path(a.cache_dir).exists() or not any(Path(a.cache_dir).iterdir())
            env["CONCURRENCY_MODEL_CACHE_DIR"] = str(Path(a.cache_dir).resolve())
        out = Path(a.keep) if a.keep else Path(tmp) / "report"
        cmd = [sys.executable, "-m", "concurrency_model", "report", "--out", str(out), "--json"]
        cmd += ["--full"] if a.full else []
        cmd += ["--workers", str(a.workers)] if a.workers else []
        c0, t0 = cpu_children(), time.perf_counter()
        p = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall, cpu = time.perf_counter() - t0, cpu_children() - c0
        if p.returncode not in (0, 1):
            print(p.stderr, file=sys.stderr)
            return p.returncode
        res = json.loads(p.stdout)
        widths = [png_width(f) for f in res["figures"]]
        page = Path(res["html"]).stat().st_size
    print(f"report: {cpu:.1f} s of CPU (target {TARGET_CPU_S:.0f} s: {'met' if cpu <= TARGET_CPU_S else 'missed'}), "
          f"{wall:.1f} s wall, {os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, "
          f"{'empty' if a.empty_cache or (a.cache_dir and fresh) else 'existing'} cache")
    print(f"{'part':<16}{'wall s':>9}{'CPU s':>9}")
    for name, w in sorted(res["timings_s"].items(), key=lambda kv: -res["cpu_s"].get(kv[0], 0)):
        print(f"{name:<16}{w:>9.1f}{res['cpu_s'].get(name, float('nan')):>9.1f}")
    rest = res["cpu_s"]["all"] - sum(v for k, v in res["cpu_s"].items() if k != "all")
    print(f"{'(the rest)':<16}{'':>9}{rest:>9.1f}  the page, the pool, the validation's own workers")
    print(f"{len(widths)} figures, {min(widths)}-{max(widths)} px wide; page {page / 1e6:.1f} MB; "
          f"failed parts: {len(res['errors'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
