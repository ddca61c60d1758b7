"""Nothing lost (issue 39): files that are replaced are replaced whole, files that belong together are swapped in
together, a directory that cannot be written is refused before minutes of measuring, and two reports never write
into one directory at once. The interruptions are real: SIGINT sent to a subprocess in the middle of its writes."""
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from concurrency_model.calibrate import compute
from concurrency_model.calibrate.files import stage_dir, swap_in
from concurrency_model.cli import main
from concurrency_model.report import lock_path, report_lock

ROOT = Path(__file__).resolve().parents[2]
TINY = [(64, 64, 64), (128, 128, 128), (256, 256, 256), (512, 512, 512)]  # GEMMs of a calibration in ~1 s


# the child takes SIGINT as a user's Ctrl-C does, whatever the test process does with it: a process started from one
# that ignores SIGINT (or blocks it) inherits that, and Python then leaves it ignored (a test worker that had it
# ignored made these tests wait out the child's 60 s sleep)
SIGINT_AS_A_TERMINAL = ("import signal\nsignal.signal(signal.SIGINT, signal.default_int_handler)\n"
                        "signal.pthread_sigmask(signal.SIG_UNBLOCK, {signal.SIGINT})\n")


def _start(code: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", SIGINT_AS_A_TERMINAL + textwrap.dedent(code)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(ROOT)})


def _interrupt_after(p: subprocess.Popen, line: str, timeout: float = 120) -> int:
    """Wait for ``line`` on the child's stdout, send it SIGINT, return its exit code."""
    t = time.monotonic()
    while time.monotonic() - t < timeout:
        got = p.stdout.readline()
        if not got:
            break
        if got.strip() == line:
            p.send_signal(signal.SIGINT)
            try:
                return p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
                pytest.fail(f"the child did not stop within 60 s of SIGINT: {p.stderr.read()[-2000:]}")
    p.kill()
    pytest.fail(f"the child never said {line!r}: {p.stderr.read()[-2000:]}")


def _leftovers(folder: Path) -> list:
    return sorted(p.name for p in folder.iterdir() if ".new-" in p.name or ".old-" in p.name)


def test_compute_stopped_between_its_two_files_leaves_the_old_pair(tmp_path):
    """Stopped after measurements.csv is written and before profile.json: both old files are there, unchanged,
    and nothing half-done is left beside them (before: a new measurements.csv beside the old profile.json)."""
    out = tmp_path / "cal"
    out.mkdir()
    old = {"measurements.csv": "old measurements\n", "profile.json": '{"old": true}\n', "notes.txt": "mine\n"}
    for name, text in old.items():
        (out / name).write_text(text)
    p = _start(f"""
        import time
        from concurrency_model.calibrate import compute
        write = compute.atomic_write
        def slow(path, text):
            write(path, text)
            print("wrote", path.name, flush=True)
            time.sleep(60)  # the SIGINT arrives here, between the two files
        compute.atomic_write = slow
        compute.calibrate({str(out)!r}, force=True, shapes={TINY!r}, fp64_shapes=[], use_torch=False,
                          copy_bytes=2**20)
    """)
    code = _interrupt_after(p, "wrote measurements.csv")
    assert code != 0 and "KeyboardInterrupt" in p.stderr.read()
    assert {p.name: p.read_text() for p in out.iterdir()} == old
    assert _leftovers(tmp_path) == []


def test_compute_swaps_both_files_in_and_keeps_the_rest(tmp_path):
    out = tmp_path / "cal"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    (out / "measurements.csv").write_text("old\n")
    r = compute.calibrate(out, force=True, shapes=TINY, fp64_shapes=[], use_torch=False, copy_bytes=2**20,
                          stream=open(os.devnull, "w"))
    assert sorted(p.name for p in out.iterdir()) == ["measurements.csv", "notes.txt", "profile.json"]
    assert (out / "notes.txt").read_text() == "mine\n" and r["rows"] == len((out / "measurements.csv")
                                                                            .read_text().splitlines()) - 1
    assert json.loads((out / "profile.json").read_text())["kind"] == "cpu"
    assert _leftovers(tmp_path) == []


def test_compute_into_a_directory_it_cannot_write_is_refused_before_measuring(tmp_path, capsys, monkeypatch):
    measured = []
    monkeypatch.setattr(compute, "measure", lambda *a, **k: measured.append(a))
    (tmp_path / "file").write_text("x")
    assert main(["calibrate", "compute", "--quick", "--out", str(tmp_path / "file" / "out")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"concurrency-model calibrate: error: out: cannot write into {tmp_path / 'file' / 'out'} (a part "
                   "of the path is a file); nothing was done"]
    locked = tmp_path / "locked"
    locked.mkdir()
    monkeypatch.setattr(os, "access", lambda path, mode: Path(path) != locked)  # as for a user without write access
    assert main(["calibrate", "compute", "--quick", "--out", str(locked)]) == 2
    assert capsys.readouterr().err == (f"concurrency-model calibrate: error: out: cannot write into {locked} "
                                       "(Permission denied); nothing was done\n")
    assert measured == [] and list(locked.iterdir()) == [] and _leftovers(tmp_path) == []


def test_kernels_stopped_mid_run_leave_the_old_file_whole(tmp_path):
    """``--force`` over a whole deepbench_gemm.csv, stopped after the first chunk: the old file is untouched, what
    was timed is in deepbench_gemm.csv.partial (before: the old file replaced by the partial one)."""
    pytest.importorskip("torch")
    out = tmp_path / "kern"
    out.mkdir()
    old = b"benchmark,m,n,k\nold,1,2,3\n"
    (out / "deepbench_gemm.csv").write_bytes(old)
    p = _start(f"""
        import io
        from concurrency_model.calibrate import kernels
        write = kernels.atomic_write
        def told(path, text):
            write(path, text)
            print("wrote", path.name, flush=True)
        kernels.atomic_write, kernels.CHUNK = told, 1
        kernels.calibrate({str(out)!r}, ops=["gemm"], limit=60, force=True, stream=io.StringIO())
    """)
    code = _interrupt_after(p, "wrote deepbench_gemm.csv.partial", timeout=300)
    assert code != 0
    assert (out / "deepbench_gemm.csv").read_bytes() == old
    partial = (out / "deepbench_gemm.csv.partial").read_text().splitlines()
    assert partial[0].startswith("m,n,k,") and len(partial) >= 2  # a header and at least one timed shape


def test_swap_in_replaces_ours_and_keeps_the_rest(tmp_path):
    out = tmp_path / "r"
    (out / "figures").mkdir(parents=True)
    (out / "figures" / "gone.png").write_bytes(b"old")
    (out / "report.html").write_text("old")
    (out / "keep.txt").write_text("keep")
    stage = stage_dir(out)
    (stage / "figures").mkdir()
    (stage / "figures" / "new.png").write_bytes(b"new")
    (stage / "report.html").write_text("new")
    swap_in(stage, out, ("report.html", "figures"))
    assert sorted(str(p.relative_to(out)) for p in out.rglob("*")) == ["figures", "figures/new.png", "keep.txt",
                                                                       "report.html"]
    assert (out / "report.html").read_text() == "new" and not stage.exists()


def test_report_stopped_while_writing_leaves_the_old_report(tmp_path):
    """SIGINT while the new page's figures are being written: the old page and all its figures are there."""
    out = tmp_path / "rep"
    (out / "figures").mkdir(parents=True)
    old = {"report.html": "<img src='figures/a.png'>", "figures/a.png": "A", "figures/b.png": "B",
           ".concurrency-model-report": "{}"}
    for name, text in old.items():
        (out / name).write_text(text)
    p = _start(f"""
        import time
        from concurrency_model import report
        from concurrency_model.report import html
        def build(out, quick, bar, t0, into=None, **_):  # the sections, instantly; then the page's writes, slowly
            (into / "figures").mkdir()
            for name in ("a", "c"):
                html.write_atomic(into / "figures" / f"{{name}}.png", b"new")
                print("wrote", name, flush=True)
                time.sleep(60)
        report._build = build
        report.build_report({str(out)!r}, progress=False)
    """)
    assert _interrupt_after(p, "wrote a") != 0
    assert {str(f.relative_to(out)): f.read_text() for f in out.rglob("*") if f.is_file()} == old
    assert _leftovers(tmp_path) == [] and not lock_path(out).exists()


def test_a_second_report_into_the_same_directory_is_refused(tmp_path, capsys):
    out = tmp_path / "rep"
    with report_lock(out):  # a report in progress
        assert main(["report", "--out", str(out), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert err == [f"concurrency-model report: error: --out: another report (process {os.getpid()}) is writing "
                       f"into {out}; wait for it to finish (lock {lock_path(out)})"]
    assert not lock_path(out).exists()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock_path(out).write_text(dead.stdout)  # left by a report killed with SIGKILL
    assert main(["report", "--out", str(out), "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].endswith(f"remove it: rm {lock_path(out)}")
    assert "no longer running (process " + dead.stdout.strip() in err[0]
