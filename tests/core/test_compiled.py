"""The persistent cache of compiled functions (:mod:`concurrency_model.compiled`): a hit runs exactly the cached
code; stale and corrupt entries are rebuilt (corrupt ones with one warning line); two processes filling the cache
at once leave it consistent; an unwritable directory turns it off with one line on stderr and the same answers."""
from __future__ import annotations

import hashlib
import json
import os
import subprocess
import sys
import textwrap
import time
import warnings
from pathlib import Path

import numpy as np
import pytest
import sympy as sp

from concurrency_model import compiled
from concurrency_model.cli import main

X, Y = sp.symbols("x y", positive=True)
ROOT = Path(__file__).resolve().parents[2]


def counted(exprs):
    """A build function for :func:`compiled.lambdified` that counts its calls."""
    calls = []

    def build():
        calls.append(1)
        return [X, Y], exprs
    return build, calls


def reseal(path: Path, edit) -> None:
    """Apply ``edit`` to a cached file's text above its checksum line and write a valid checksum for it."""
    body = path.read_text().rstrip("\n").rpartition("\n")[0] + "\n"
    body = edit(body)
    path.write_text(body + f"# sha256 {hashlib.sha256(body.encode()).hexdigest()}\n")


def bits(a) -> np.ndarray:
    return np.asarray(a, dtype=np.float64).view(np.int64)


def test_a_hit_runs_exactly_the_cached_code(cache):
    exprs = [sp.sqrt(X**2 + Y**2) / 3 + sp.Max(X, 2 * Y), sp.Piecewise((X / Y, X > Y), (Y - X, True))]
    build, calls = counted(exprs)
    f = compiled.lambdified("t.hit", (1,), build, cse=True)
    [path] = compiled.entries()
    rng = np.random.default_rng(1)
    x, y = rng.uniform(0.1, 10, 1000), rng.uniform(0.1, 10, 1000)
    before = dict(compiled.STATS)
    g = compiled.lambdified("t.hit", (1,), build, cse=True)
    assert len(calls) == 1 and compiled.STATS["hits"] == before["hits"] + 1  # neither built nor lambdified again
    for a, b in zip(f(x, y), g(x, y)):
        assert (bits(a) == bits(b)).all()
    # the same as lambdify's own function, to the last bit
    ref = sp.lambdify([X, Y], exprs, "numpy", cse=True)(x, y)
    for a, b in zip(g(x, y), ref):
        assert (bits(a) == bits(b)).all()
    # what runs is the file: a valid entry saying 42 gives 42
    reseal(path, lambda body: body.replace("def _lambdifygenerated(x, y):", "def _lambdifygenerated(x, y):\n"
                                                                               "    return [42.0, 42.0]\n"
                                                                               "def unused(x, y):"))
    assert compiled.lambdified("t.hit", (1,), build, cse=True)(1.0, 2.0) == [42.0, 42.0]
    assert len(calls) == 1


def test_the_key_follows_the_token_the_version_and_the_sources(cache, monkeypatch):
    build, calls = counted([X + Y])
    compiled.lambdified("t.key", ("a", 1.5), build)
    compiled.lambdified("t.key", ("a", 1.5), build)
    compiled.lambdified("t.key", ("a", 1.5000000000000002), build)  # repr is exact: another float, another entry
    assert len(calls) == 2 and len(compiled.entries()) == 2
    monkeypatch.setattr(compiled, "__version__", "99.0.0")  # another package version: another key, rebuilt
    compiled.lambdified("t.key", ("a", 1.5), build)
    assert len(calls) == 3 and len(compiled.entries()) == 3
    monkeypatch.setitem(compiled._state, "sources", "0" * 64)  # anyone's change to the package's code: rebuilt
    compiled.lambdified("t.key", ("a", 1.5), build)
    assert len(calls) == 4


def test_a_stale_entry_is_rebuilt_without_a_warning(cache):
    build, calls = counted(X * Y)
    compiled.lambdified("t.stale", (), build)
    [path] = compiled.entries()
    reseal(path, lambda body: body.replace(f"# version {compiled.__version__}\n", "# version 0.0.1\n"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        f = compiled.lambdified("t.stale", (), build)
    assert len(calls) == 2 and f(3.0, 4.0) == 12.0
    assert f"# version {compiled.__version__}\n" in path.read_text()  # rewritten for this version
    compiled.lambdified("t.stale", (), build)
    assert len(calls) == 2


@pytest.mark.parametrize("damage", [
    lambda t: t[: len(t) // 2],  # cut short (a full disk, a killed writer)
    lambda t: t.replace("x*y", "x*y + 1"),  # edited without its checksum
    lambda t: "\0\x01garbage",
    lambda t: t.encode().replace(b"# key", b"# k\xff\xfe").decode("latin-1"),
])
def test_a_corrupt_entry_is_ignored_with_one_warning_line_and_rebuilt(cache, damage, capfd):
    build, calls = counted(X * Y)
    compiled.lambdified("t.corrupt", (), build)
    [path] = compiled.entries()
    path.write_bytes(damage(path.read_text()).encode("latin-1"))
    with pytest.warns(compiled.CacheWarning, match=r"ignored .*t\.corrupt-.*; rebuilt") as got:
        f = compiled.lambdified("t.corrupt", (), build)
    assert len(got) == 1 and "\n" not in str(got[0].message)
    assert len(calls) == 2 and f(3.0, 4.0) == 12.0
    with warnings.catch_warnings():  # rebuilt and rewritten: a hit again
        warnings.simplefilter("error")
        assert compiled.lambdified("t.corrupt", (), build)(3.0, 4.0) == 12.0
    assert len(calls) == 2


def test_an_entry_that_passes_its_checksum_but_does_not_run_is_corrupt(cache):
    build, calls = counted(X - Y)
    compiled.lambdified("t.syntax", (), build)
    [path] = compiled.entries()
    reseal(path, lambda body: body.replace("def _lambdifygenerated", "def _lambdifygenerated)("))
    with pytest.warns(compiled.CacheWarning, match="SyntaxError"):
        assert compiled.lambdified("t.syntax", (), build)(3.0, 1.0) == 2.0
    assert len(calls) == 2


def test_the_warning_is_one_line_on_the_command_line(tmp_path):
    env = {**os.environ, compiled.ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent("""
        import sympy as sp
        from concurrency_model import compiled
        x = sp.Symbol("x")
        compiled.lambdified("t.line", (), lambda: ([x], 2 * x))
        [p] = compiled.entries()
        p.write_text("garbage")
        print(compiled.lambdified("t.line", (), lambda: ([x], 2 * x))(2.0))
    """)
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=120)
    assert r.returncode == 0 and r.stdout.strip() == "4.0"
    assert len(r.stderr.strip().splitlines()) == 1 and "CacheWarning" in r.stderr and "rebuilt" in r.stderr


def test_two_processes_filling_the_cache_at_once_leave_it_consistent(tmp_path):
    env = {**os.environ, compiled.ENV: str(tmp_path), "PYTHONPATH": str(ROOT)}
    code = textwrap.dedent("""
        import sympy as sp
        from concurrency_model import compiled
        x = sp.Symbol("x")
        for i in range(40):
            f = compiled.lambdified("t.race", (i,), lambda: ([x], sp.Max(x, i) + sp.sqrt(x) * i))
            assert f(float(i + 1)) == (i + 1) + (i + 1) ** 0.5 * i
        print(compiled.STATS["written"])
    """)
    procs = [subprocess.Popen([sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              text=True) for _ in range(3)]
    outs = [p.communicate(timeout=300) for p in procs]
    assert all(p.returncode == 0 for p in procs), [o[1] for o in outs]
    assert all(not err.strip() for _, err in outs)  # no warning: no process read another's half-written file
    files = sorted(tmp_path.iterdir())
    assert len(files) == 40 and all(compiled.SUFFIX == f.suffix for f in files)  # no temporary file left behind
    os.environ[compiled.ENV], saved = str(tmp_path), os.environ[compiled.ENV]
    try:
        compiled.reset()
        before = compiled.STATS["builds"]
        x = sp.Symbol("x")
        for i in range(40):  # every entry whole and right: read back without a rebuild
            f = compiled.lambdified("t.race", (i,), lambda: pytest.fail("rebuilt"))
            assert f(float(i + 1)) == (i + 1) + (i + 1) ** 0.5 * i
        assert compiled.STATS["builds"] == before
    finally:
        os.environ[compiled.ENV] = saved
        compiled.reset()


def test_an_unwritable_directory_turns_the_cache_off_with_one_line(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(compiled.ENV, str(blocker / "cache"))  # cannot be created, even by root
    compiled.reset()
    try:
        build, calls = counted(X / Y)
        assert compiled.lambdified("t.off", (), build)(3.0, 4.0) == 0.75
        assert compiled.lambdified("t.off", (), build)(3.0, 4.0) == 0.75
        assert compiled.lambdified("t.off2", (), build)(3.0, 4.0) == 0.75
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "cache off" in err and "file" in err
        assert len(calls) == 3 and compiled.info()["enabled"] is False
    finally:
        compiled.reset()


def test_estimate_is_the_same_without_a_cache_with_a_cold_and_with_a_warm_one(tmp_path):
    """Three processes: the cache unwritable, then empty, then full; the same JSON, and one line on stderr in the
    first."""
    blocker = tmp_path / "file"
    blocker.write_text("")
    cmd = [sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "alexnet-one-weird-trick", "--json"]
    outs = []
    for where in (blocker / "cache", tmp_path / "cache", tmp_path / "cache"):
        r = subprocess.run(cmd, env={**os.environ, compiled.ENV: str(where), "PYTHONPATH": str(ROOT)},
                           capture_output=True, text=True, timeout=300)
        assert r.returncode == 0, r.stderr
        outs.append((json.loads(r.stdout), r.stderr))
    assert outs[0][0] == outs[1][0] == outs[2][0]
    assert len(outs[0][1].strip().splitlines()) == 1 and not outs[1][1].strip() and not outs[2][1].strip()


def test_cli_info_and_clear_leave_other_files_alone(cache, capsys):
    compiled.lambdified("t.cli", (), lambda: ([X], X + 1))
    (cache / "notes.txt").write_text("mine")
    assert main(["cache", "info", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["dir"] == str(cache) and out["entries"] == 1 and out["bytes"] > 0 and out["enabled"] is True
    assert main(["cache", "clear", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["removed"] == 1 and not compiled.entries() and (cache / "notes.txt").read_text() == "mine"
    assert main(["cache", "clear"]) == 0 and "removed 0" in capsys.readouterr().out


def test_entries_unused_for_a_month_are_pruned_by_the_next_writer(cache):
    build, calls = counted(X + 2 * Y)
    compiled.lambdified("t.old", (), build)
    compiled.lambdified("t.used", (), build)
    old, used = (next(p for p in compiled.entries() if p.name.startswith(k)) for k in ("t.old-", "t.used-"))
    month_ago = time.time() - compiled.PRUNE_AFTER_S - 60
    for p in (old, used):
        os.utime(p, (month_ago, month_ago))
    (cache / "notes.txt").write_text("mine")
    os.utime(cache / "notes.txt", (month_ago, month_ago))
    compiled.reset()  # a new process
    compiled.lambdified("t.used", (), build)  # a hit: touched
    compiled.lambdified("t.new", (), build)  # the first write of this process prunes
    names = {p.name.split("-")[0] for p in compiled.entries()}
    assert names == {"t.used", "t.new"} and (cache / "notes.txt").exists()


def test_max_and_min_through_cse_give_lambdifys_own_source(cache):
    """cse rebuilds Max and Min of its replacement symbols without evaluating them again (compiled._cse): the code is
    the one lambdify(cse=True) writes, line for line, and so are its numbers."""
    import inspect
    s = X + Y
    exprs = [sp.Max(s, 2 * X * Y) * s, sp.Min(s, sp.Max(X, Y * s), 3) + s ** 2, sp.Max(0, X - s * Y, evaluate=False)]
    f = compiled.lambdified("t.maxcse", (1,), lambda: ([X, Y], exprs), cse=True)
    [path] = compiled.entries()
    ref = sp.lambdify([X, Y], exprs, "numpy", cse=True)
    body = inspect.getsource(ref)
    assert body.strip() in path.read_text()
    x, y = np.linspace(0.1, 5, 50), np.linspace(5, 0.1, 50)
    for a, b in zip(f(x, y), ref(x, y)):
        assert (bits(a) == bits(b)).all()


@pytest.mark.parametrize("cse", [False, True])
def test_the_source_read_from_linecache_is_inspects(cse):
    """compiled._source joins the lines lambdify registers in linecache instead of tokenizing them
    (inspect.getsource): the same text, character for character, on a function of several outputs with Max,
    Piecewise and common subexpressions, and on a single expression."""
    import inspect
    s = X + Y
    cases = ([X, Y], [sp.Max(s, 2 * X * Y) * s, sp.Piecewise((s / X, X > 1), (0, True)), s ** 2 + 3 * s]), \
        ([X], X ** 2 / 7 + 1)
    for args, exprs in cases:
        f = sp.lambdify(args, exprs, "numpy", cse=cse)
        assert compiled._source(f) == inspect.getsource(f)
        assert compiled._source(f).startswith("def _lambdifygenerated(") and compiled._source(f).count("\n") >= 2


def test_equal_expressions_of_two_keys_are_generated_once(cache, monkeypatch):
    """Two keys whose builds give equal expressions share one generated text (each key's file holds it, and a
    fresh lambdify gives the same bits); a number of another type or another symbol is generated again."""
    made = []
    generate = compiled._generate

    def spy(args, exprs, cse):
        made.append(1)
        return generate(args, exprs, cse)
    monkeypatch.setattr(compiled, "_generate", spy)
    exprs = [sp.Max(X * Y + 2, Y) / (X + Y), sp.sqrt(X + Y)]
    f = compiled.lambdified("t.same", ("a",), lambda: ([X, Y], list(exprs)), cse=True)
    g = compiled.lambdified("t.same", ("b",), lambda: ([X, Y], list(exprs)), cse=True)
    assert len(made) == 1 and len(compiled.entries()) == 2
    bodies = {p.read_text().split("\n", 3)[3].rpartition("# sha256")[0] for p in compiled.entries()}
    assert len(bodies) == 1
    x, y = np.array([0.5, 3.0, 7.25]), np.array([2.0, 0.125, 9.0])
    ref = sp.lambdify([X, Y], exprs, "numpy", cse=True)(x, y)
    for a, b, c in zip(f(x, y), g(x, y), ref):
        assert (bits(a) == bits(b)).all() and (bits(a) == bits(c)).all()
    floats = [sp.Max(X * Y + sp.Float(2), Y) / (X + Y), sp.sqrt(X + Y)]
    compiled.lambdified("t.same", ("c",), lambda: ([X, Y], floats), cse=True)
    compiled.lambdified("t.same", ("d",), lambda: ([X, Y], tuple(exprs)), cse=True)  # a tuple: lambdify returns a tuple
    compiled.lambdified("t.same", ("e",), lambda: ([X, Y], list(exprs)), cse=False)
    assert len(made) == 4
    compiled.reset()  # a fresh process's state: generated again
    compiled.lambdified("t.same", ("f",), lambda: ([X, Y], list(exprs)), cse=True)
    assert len(made) == 5
