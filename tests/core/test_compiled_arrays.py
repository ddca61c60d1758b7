"""The persistent cache of numbers (:func:`concurrency_model.compiled.arrays`) and the sweep's stage tables kept in
it: a hit gives the arrays bit for bit without building them; stale entries are rebuilt, corrupt ones with one
warning line; nothing is unpickled; two processes filling it at once leave it consistent; a sweep answers the same
with no cache, a cold one and a warm one."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest

from concurrency_model import compiled
from concurrency_model.sweep import sweep

ROOT = Path(__file__).resolve().parents[2]


def counted(values: dict):
    calls = []

    def build():
        calls.append(1)
        return values
    return build, calls


VALUES = {"a": np.array([0.1, 1e-300, np.inf, -0.0, np.nan]), "tables/f": np.arange(12.0).reshape(3, 4) / 7,
          "at": np.array([2, 0, 1])}


def same(a: dict, b: dict) -> bool:
    return a.keys() == b.keys() and all(a[k].dtype == b[k].dtype and a[k].shape == b[k].shape and
                                        a[k].tobytes() == np.asarray(b[k]).tobytes() for k in a)


def test_a_hit_gives_the_arrays_bit_for_bit_without_building(cache):
    build, calls = counted(VALUES)
    first = compiled.arrays("t.arr", (1,), build)
    again = compiled.arrays("t.arr", (1,), build)
    assert len(calls) == 1 and same(first, VALUES) and same(again, VALUES)
    assert [p.suffix for p in compiled.entries()] == [compiled.ARRAYS_SUFFIX]
    compiled.arrays("t.arr", (2,), build)  # another token: another entry
    assert len(calls) == 2 and len(compiled.entries()) == 2


def test_a_stale_entry_is_rebuilt_without_a_warning(cache):
    build, calls = counted(VALUES)
    compiled.arrays("t.stale", (), build)
    [path] = compiled.entries()
    blob = path.read_bytes()
    head, _, payload = blob.partition(b"\n")
    path.write_bytes(head.replace(f" {compiled.__version__} ".encode(), b" 0.0.1 ") + b"\n" + payload)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(compiled.arrays("t.stale", (), build), VALUES)
    assert len(calls) == 2 and path.read_bytes() == blob  # rewritten for this version


@pytest.mark.parametrize("damage", [
    lambda b: b[: len(b) // 2],  # cut short
    lambda b: b[:-10] + b"0123456789",  # the payload changed without its checksum
    lambda b: b"\0\x01garbage",
    lambda b: b.replace(b"concurrency_model arrays", b"concurrency_model arraxs"),
])
def test_a_corrupt_entry_is_ignored_with_one_warning_line_and_rebuilt(cache, damage):
    build, calls = counted(VALUES)
    compiled.arrays("t.corrupt", (), build)
    [path] = compiled.entries()
    path.write_bytes(damage(path.read_bytes()))
    with pytest.warns(compiled.CacheWarning, match=r"ignored .*t\.corrupt-.*; rebuilt") as got:
        assert same(compiled.arrays("t.corrupt", (), build), VALUES)
    assert len(got) == 1 and "\n" not in str(got[0].message) and len(calls) == 2
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert same(compiled.arrays("t.corrupt", (), build), VALUES)
    assert len(calls) == 2


def test_a_pickle_inside_a_valid_checksum_is_never_loaded(cache):
    import hashlib
    import io

    build, calls = counted(VALUES)
    compiled.arrays("t.pickle", (), build)
    [path] = compiled.entries()
    head = path.read_bytes().partition(b"\n")[0].split(b" ")
    buf = io.BytesIO()
    np.savez(buf, a=np.array([{"x": 1}], dtype=object))  # what an attacker's pickle would travel in
    payload = buf.getvalue()
    head[-1] = hashlib.sha256(payload).hexdigest().encode()
    path.write_bytes(b" ".join(head) + b"\n" + payload)
    with pytest.warns(compiled.CacheWarning, match="pickle"):
        assert same(compiled.arrays("t.pickle", (), build), VALUES)
    assert len(calls) == 2


def test_object_arrays_are_refused_when_built(cache):
    with pytest.raises(ValueError, match="object array"):
        compiled.arrays("t.obj", (), lambda: {"a": np.array([None, 1], dtype=object)})


def test_two_processes_filling_the_cache_at_once_leave_it_consistent(tmp_path):
    env = {**os.environ, compiled.ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent("""
        import numpy as np
        from concurrency_model import compiled
        for i in range(30):
            a = compiled.arrays("t.race", (i,), lambda: {"x": np.arange(2000.0) * i})["x"]
            assert (a == np.arange(2000.0) * i).all()
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert all(not err.strip() for _, err in outs)  # no warning: nobody read a half-written file
    files = sorted(tmp_path.iterdir())
    assert len(files) == 30 and all(f.suffix == compiled.ARRAYS_SUFFIX for f in files)


def test_an_unwritable_directory_turns_the_cache_off_with_one_line(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(compiled.ENV, str(blocker / "cache"))
    compiled.reset()
    try:
        build, calls = counted(VALUES)
        assert same(compiled.arrays("t.off", (), build), VALUES)
        assert same(compiled.arrays("t.off", (), build), VALUES)
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "cache off" in err and len(calls) == 2
    finally:
        compiled.reset()


SCENARIO = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}, "training": {"dtype": "fp16"}}


def test_a_sweep_is_the_same_without_a_cache_with_a_cold_and_with_a_warm_one(tmp_path, monkeypatch):
    def run():
        r = sweep(SCENARIO, [8, 16], hardware={"inter_bw": [1, 2], "flops": [1, 1.5]})
        return r.step_time_s, r.layouts
    monkeypatch.setenv(compiled.ENV, str(tmp_path / "file" / "x"))
    (tmp_path / "file").write_text("")
    compiled.reset()
    none = run()
    monkeypatch.setenv(compiled.ENV, str(tmp_path / "cache"))
    compiled.reset()
    cold = run()
    assert any(p.name.startswith("sweep_features-") for p in compiled.entries())
    before = compiled.STATS["hits"]
    warm = run()
    assert compiled.STATS["hits"] > before
    compiled.reset()
    for step, lay in (cold, warm):
        assert step.tobytes() == none[0].tobytes() and lay.equals(none[1])


def test_two_processes_asking_for_the_same_entry_build_it_once(tmp_path):
    env = {**os.environ, compiled.ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent("""
        import time
        import sympy as sp
        from concurrency_model import compiled
        x = sp.Symbol("x")
        def build():
            time.sleep(2.0)  # a slow build: the other process asks while it runs
            return [x], 3 * x
        assert compiled.lambdified("t.once", (), build)(2.0) == 6.0
        print(compiled.STATS["builds"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert sorted(int(o[0]) for o in outs) == [0, 1]  # one built it, the other waited and read it
    assert [f.suffix for f in tmp_path.iterdir()] == [compiled.SUFFIX]  # no lock left behind


def test_a_lock_left_by_a_stopped_process_does_not_block(cache, monkeypatch):
    build, calls = counted(VALUES)
    key = compiled.key_of("t.left", ())
    cache.mkdir(parents=True)
    lock = cache / f".tmp-lock-t.left-{key[:40]}{compiled.ARRAYS_SUFFIX}"
    lock.write_text("")
    monkeypatch.setattr(compiled, "LOCK_WAIT_S", 0.2)  # a fresh lock: waited for, then built without it
    assert same(compiled.arrays("t.left", (), build), VALUES) and len(calls) == 1
    assert lock.exists()  # not ours: left alone
    [entry] = [p for p in compiled.entries() if not p.name.startswith(".tmp-")]
    entry.unlink()
    os.utime(lock, (0, 0))  # an old lock: not waited for (a wait would outlast the test's timeout)
    monkeypatch.setattr(compiled, "LOCK_WAIT_S", 1e9)
    assert same(compiled.arrays("t.left", (), build), VALUES) and len(calls) == 2
    compiled.clear()
    assert not any(cache.iterdir())  # clear removes a lock left behind
