"""Lambdified functions cached across processes as generated Python source.

Every cost is one sympy expression lambdified once per structural variant (DESIGN.md); building the expression
and ``sympy.lambdify(..., "numpy", cse=...)`` cost a fresh process seconds, every CLI call, notebook cell and
report figure again. :func:`lambdified` keeps the function lambdify generates as a ``.py`` file in the user's
cache directory (``platformdirs.user_cache_dir("concurrency-model")/compiled``, or ``$CONCURRENCY_MODEL_CACHE_DIR``)
and a later process executes that file instead of building the expression and lambdifying it.

* **The code.** The file is lambdify's own generated function (``sympy.printing.numpy.NumPyPrinter`` with the
  settings lambdify gives it, sympy 1.14 ``sympy/utilities/lambdify.py``: unqualified names), preceded by the
  imports of the names the printer used (``printer.module_imports``). A function is always run from that text,
  fresh or cached, in a namespace holding only those imports: one code path in the process that wrote it and in
  every process that reads it, so their results agree to the last bit.
* **The key.** ``sha256`` of the package version, the sympy version, the hash of the package's own sources (every
  ``.py`` and ``.json`` file under it: a change to the code that builds an expression, by anyone, gives new keys,
  with or without a new version number), the function's label and the arguments of the factory that builds the
  expression (``repr``, exact for floats). The key is known before the expression is built, so a hit skips both
  the build and lambdify. The file names its key and version in its header; one whose header names another
  key or version is stale and rebuilt.
* **Integrity.** The last line is the sha256 of the text above it: a file cut short, edited or garbled fails the
  check (or does not compile, or lacks the function) and is ignored with a one-line ``CacheWarning``, then rebuilt.
  Files are written to a temporary name in the same directory and renamed (``os.replace``, atomic on POSIX and
  Windows), so two processes filling the cache at once each write a whole file and a reader sees one or the other,
  never a mixture. The file is executed as Python, as any module on ``sys.path`` is: the cache directory is the
  user's own, and nothing is ever unpickled.
* **No cache.** A directory that cannot be created or written turns the cache off for the process with one line
  on stderr; the functions are built as without a cache and the answers are the same.
* **One expression, one generation.** Two keys whose builds give equal arguments and expressions (sympy's
  structural ``==``: the same tree, symbols of the same names and assumptions, numbers of the same type and
  precision; ``Float(2) != Integer(2)`` since sympy 1.13) get one generated text in a process (:func:`_code_of`),
  which each key's file then holds: the 3D sweep of the report builds 61 runtime-memory functions of 29 distinct
  expressions (measured here). The text is what lambdify would print for either, so no answer changes.
* **Size.** A hit touches its file; the first process to write an entry removes the entries nobody used for
  :data:`PRUNE_AFTER_S` (30 days), so entries of older versions and edited sources do not pile up.

:data:`STATS` counts hits, builds and their seconds in this process (``concurrency-model cache info`` shows the
directory's entries; ``cache clear`` removes them).
"""
from __future__ import annotations

import builtins
import hashlib
import inspect
import linecache
import os
import re
import sys
import tempfile
import time
import warnings
from collections import OrderedDict
from pathlib import Path
from typing import Callable

from .version import __version__

ENV = "CONCURRENCY_MODEL_CACHE_DIR"  # the cache directory, instead of the user's cache directory
FORMAT = 1  # the layout of a cached file; part of the key
SUFFIX = ".py"
FUNC = "_lambdifygenerated"  # the name lambdify gives the generated function
_NAME = re.compile(r"^[a-z0-9_.]+-[0-9a-f]{40}\.(py|npz)$")  # a cached file: label-key.py, label-key.npz
ARRAYS_SUFFIX = ".npz"  # numbers (:func:`arrays`): a checked header line, then numpy's .npz, loaded without pickle
_ARRAYS_MAGIC = b"concurrency_model arrays 1"
_TEMP = ".tmp-"  # prefix of files being written
PRUNE_AFTER_S = 30 * 86400  # an entry unused (neither read nor written) this long is removed when another is written

#: this process's counts: ``hits`` (functions read from the cache), ``builds`` (expressions built and lambdified),
#: ``build_s`` and ``load_s`` (their seconds), ``rejected`` (corrupt files ignored), ``written``
STATS = {"hits": 0, "builds": 0, "build_s": 0.0, "load_s": 0.0, "rejected": 0, "written": 0}
# why the cache is off in this process (None: on); the sources' hash; whether this process pruned the directory
_state = {"off": None, "sources": None, "pruned": False}
# (cse, arguments, expressions, their container's type) -> generated text, the most recently used last
# (:func:`_code_of`); at most CODES_KEPT entries, a few kB of text and the expressions each
CODES_KEPT = 256
_CODES: OrderedDict = OrderedDict()


class CacheWarning(UserWarning):
    """A cached file was ignored (corrupt) and rebuilt."""


def cache_dir() -> Path:
    """The directory of the cached functions: ``$CONCURRENCY_MODEL_CACHE_DIR`` if set, else the user's cache
    directory for ``concurrency-model`` (``platformdirs.user_cache_dir``: ``~/.cache/concurrency-model`` on Linux)
    with ``compiled`` below it.

    >>> cache_dir().is_absolute()
    True
    """
    env = os.environ.get(ENV)
    if env:
        return Path(env).expanduser()
    import platformdirs  # small; only where no directory is given
    return Path(platformdirs.user_cache_dir("concurrency-model")) / "compiled"


def sources_hash() -> str:
    """sha256 of the package's own sources (every ``.py`` and ``.json`` file under it, by relative path), once a
    process: part of every key, so that any change to the code that builds an expression gives new keys."""
    if _state["sources"] is None:
        root = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for p in sorted(q for q in root.rglob("*") if q.suffix in (".py", ".json") and "__pycache__" not in q.parts):
            h.update(p.relative_to(root).as_posix().encode() + b"\0")
            h.update(p.read_bytes() + b"\0")
        _state["sources"] = h.hexdigest()
    return _state["sources"]


def sympy_version() -> str:
    """The version of sympy, whose printer writes the code: part of every key. Read from the loaded module, or from
    the installed distribution's metadata without importing sympy (a cached entry is read without it, issue 41).

    >>> sympy_version().count(".") >= 1
    True
    """
    loaded = sys.modules.get("sympy")
    if loaded is not None:
        return loaded.__version__
    if _state.get("sympy") is None:
        from importlib.metadata import version  # a few ms: only where sympy is not loaded
        _state["sympy"] = version("sympy")
    return _state["sympy"]


def key_of(label: str, token) -> str:
    """The cache key of function ``label`` built from factory arguments ``token`` (see the module).

    >>> key_of("step", ("1f1b", 0, True)) == key_of("step", ("1f1b", 0, True)) != key_of("step", ("1f1b", 1, True))
    True
    """
    text = "\n".join((f"format {FORMAT}", f"concurrency_model {__version__}", f"sympy {sympy_version()}",
                      f"sources {sources_hash()}", f"label {label}", f"token {token!r}"))
    return hashlib.sha256(text.encode()).hexdigest()


def _warn_off(why: str) -> None:
    """Turn the cache off for this process, with one line on stderr."""
    if _state["off"] is None:
        _state["off"] = why
        print(f"concurrency-model: compiled-function cache off: {why}; functions are built in each process",
              file=sys.stderr)


def _reject(path: Path, why: str) -> None:
    """A corrupt cached file: one line (a :class:`CacheWarning` shown without a source line), then rebuilt."""
    STATS["rejected"] += 1
    warnings.warn_explicit(f"compiled-function cache: ignored {path} ({why}); rebuilt", CacheWarning,
                           "concurrency-model", 0)


def _generate(args: list, exprs, cse: bool) -> str:
    """lambdify's generated function (its own printer and settings) with the imports of the names it uses."""
    import sympy as sp  # heavy; loaded by whoever builds an expression anyway
    from sympy.printing.numpy import NumPyPrinter

    # the printer lambdify builds for modules="numpy" (sympy/utilities/lambdify.py), kept to read its imports
    printer = NumPyPrinter({"fully_qualified_modules": False, "inline": True, "allow_unknown_functions": True,
                            "user_functions": {}})
    # docstring_limit=0 (sympy >= 1.13): no docstring, which prints every expression with str (about a quarter of
    # lambdify's time on the estimate's functions; sympy 1.14 sympy/utilities/lambdify.py, the "Apply the docstring"
    # block); the generated source is the same
    if "quiet" not in _state:  # lambdify's signature, read once a process
        _state["quiet"] = {"docstring_limit": 0} if "docstring_limit" in inspect.signature(sp.lambdify).parameters \
            else {}
    f = sp.lambdify(args, exprs, "numpy", printer=printer, cse=_cse if cse else False, **_state["quiet"])
    body = _source(f)
    imports = [f"from {mod} import {', '.join(sorted(names))}" for mod, names in sorted(printer.module_imports.items())]
    return "\n".join(imports) + "\n" + body


def _code_of(args: list, exprs, cse: bool) -> str:
    """:func:`_generate`'s text, generated once a process for equal ``args`` and ``exprs`` (module docstring: "One
    expression, one generation"); arguments or expressions that cannot be hashed (nested lists, a dict) are
    generated afresh.

    >>> import sympy as sp
    >>> x, y = sp.symbols("x y", positive=True)
    >>> a = _code_of([x, y], [x * y + 2, sp.Max(x, y)], True)
    >>> _code_of([x, y], [x * y + 2, sp.Max(x, y)], True) is a
    True
    >>> zero = _code_of([x, y], [0, x], False)
    >>> _code_of([x, y], [x * y + 2.0, sp.Max(x, y)], True) is a, _code_of([x, y], [0.0, x], False) == zero
    (False, False)
    """
    try:
        # each item with its type: Python's 0 == 0.0 == False (a bare number among the expressions prints as itself)
        key = (bool(cse), tuple((type(a), a) for a in args), type(exprs),
               tuple((type(e), e) for e in exprs) if isinstance(exprs, (list, tuple)) else exprs)
        hash(key)
    except TypeError:
        return _generate(args, exprs, cse)
    code = _CODES.get(key)
    if code is None:
        code = _CODES[key] = _generate(args, exprs, cse)
        while len(_CODES) > CODES_KEPT:
            _CODES.popitem(last=False)
    else:
        _CODES.move_to_end(key)
    return code


def _source(f) -> str:
    """The text of lambdify's generated function ``f``: the lines lambdify registers in :mod:`linecache` under the
    function's file name (sympy 1.14 ``sympy/utilities/lambdify.py``: ``linecache.cache[filename] = (len(funcstr),
    None, funcstr.splitlines(True), filename)``), which hold the function alone, joined; ``inspect.getsource`` reads
    the same lines and tokenizes them to find the function's end, the last line (tests/core/test_compiled.py
    compares the two). Without that entry, ``inspect.getsource``."""
    entry = linecache.cache.get(f.__code__.co_filename)
    if entry is None or f.__code__.co_firstlineno != 1:
        return inspect.getsource(f)
    return "".join(entry[2])


_KEPT: dict = {}  # sympy's Max and Min -> their subclasses that never evaluate (:func:`_cse`), made once


def _kept_classes() -> dict:
    if not _KEPT:
        import sympy as sp

        def kept(base):
            def new(cls, *args, **options):
                return base.__new__(cls, *args, **{**options, "evaluate": False})
            return type(f"Kept{base.__name__}", (base,), {"__new__": new})
        _KEPT.update({sp.Max: kept(sp.Max), sp.Min: kept(sp.Min)})
    return _KEPT


def _cse(exprs):
    """``sympy.cse(exprs, list=False)`` (what ``lambdify(cse=True)`` calls) with every ``Max`` and ``Min`` a subclass
    that does not evaluate: cse rebuilds each node whose arguments it replaced, and an evaluated ``Max`` of the
    replacement symbols searches its arguments' pairwise order again (``_find_localzeros``, ``factor_terms``:
    seconds on the estimate's step and memory functions) while it cannot order symbols it knows nothing of. The
    subclasses print as ``Max`` and ``Min`` do (the printers look methods up along the class's MRO, sympy 1.14
    ``sympy/printing/printer.py``, ``Printer._print``), so the code is that of the evaluated rebuild wherever the
    search decides nothing (tests/core/test_compiled.py compares the two).

    >>> import sympy as sp
    >>> a, b, c = sp.symbols("a b c")
    >>> exprs = [sp.Max(a + b, c) * (a + b), sp.Min(a + b, 1)]
    >>> from sympy.printing.numpy import NumPyPrinter
    >>> p = NumPyPrinter()
    >>> subs, reduced = _cse(exprs)
    >>> subs, [p.doprint(e) for e in reduced]
    ([(x0, a + b)], ['x0*functools.reduce(numpy.maximum, [c, x0])', 'functools.reduce(numpy.minimum, [1, x0])'])
    >>> [p.doprint(e) for e in reduced] == [p.doprint(e) for e in sp.cse(exprs, list=False)[1]]
    True
    """
    import sympy as sp
    from sympy.simplify.cse_main import cse

    classes, memo = _kept_classes(), {}

    def kept(e):
        if not isinstance(e, sp.Basic) or not e.args:
            return e
        got = memo.get(e)
        if got is None:
            args = tuple(kept(a) for a in e.args)
            func = classes.get(type(e), e.func)
            got = memo[e] = func(*args) if func is not e.func or args != e.args else e
        return got
    if isinstance(exprs, (list, tuple)):
        exprs = type(exprs)(kept(e) for e in exprs)
    else:
        exprs = kept(exprs)
    return cse(exprs, list=False)


def _seal(key: str, code: str) -> str:
    head = (f"# concurrency_model compiled function: generated by sympy's NumPyPrinter through lambdify; do not edit\n"
            f"# key {key}\n# version {__version__}\n")
    text = head + code.rstrip("\n") + "\n"
    return text + f"# sha256 {hashlib.sha256(text.encode()).hexdigest()}\n"


def _unseal(text: str, key: str) -> tuple[str, str | None]:
    """``("ok" | "stale" | "corrupt", why)`` of a cached file's text for ``key``."""
    body, sep, last = text.rstrip("\n").rpartition("\n")
    if not sep or last != f"# sha256 {hashlib.sha256((body + chr(10)).encode()).hexdigest()}":
        return "corrupt", "its checksum does not match its text"
    lines = body.split("\n")
    if len(lines) < 4 or lines[1] != f"# key {key}" or lines[2] != f"# version {__version__}":
        return "stale", None
    return "ok", None


def _load(text: str, origin: str) -> Callable:
    """Run a generated file's text in a namespace of its own imports (and lambdify's builtins) and return its
    function."""
    namespace = {"builtins": builtins, "range": range, "__name__": "concurrency_model.compiled"}
    exec(compile(text, origin, "exec"), namespace)
    f = namespace[FUNC]
    if not callable(f):
        raise TypeError(f"{FUNC} is not a function")
    return f


def _write(path: Path, data: str | bytes) -> None:
    """Write ``data`` (text, or bytes) to ``path`` atomically (a temporary file in the same directory, then
    ``os.replace``)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=_TEMP, dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data.encode("utf-8") if isinstance(data, str) else data)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def lambdified(label: str, token, build: Callable[[], tuple], cse: bool = False) -> Callable:
    """``sympy.lambdify(args, exprs, "numpy", cse=cse)`` of ``(args, exprs) = build()``, through the persistent
    cache: on a hit neither ``build`` nor lambdify runs. ``label`` names the function (letters, digits, ``_``,
    ``.``) and ``token`` holds every argument ``build`` depends on besides the package's code (their ``repr``
    is part of the key).

    >>> import sympy as sp
    >>> x, y = sp.symbols("x y", positive=True)
    >>> f = lambdified("doc.hypot", (), lambda: ([x, y], [sp.sqrt(x**2 + y**2), sp.Max(x, y)]))
    >>> [float(v) for v in f(3.0, 4.0)]
    [5.0, 4.0]
    """
    if not re.fullmatch(r"[a-z0-9_.]+", label):
        raise ValueError(f"label: letters, digits, '_' and '.' only, got {label!r}")
    path = None
    if _state["off"] is None:
        try:
            key = key_of(label, token)
            path = cache_dir() / f"{label}-{key[:40]}{SUFFIX}"
        except OSError as e:  # the package's own files unreadable: no key, no cache
            _warn_off(f"cannot read the package's sources ({type(e).__name__}: {e})")
    if path is not None:
        f = _read_function(path, key)
        if f is not None:
            return f
    lock, waited = _claim(path)  # another process building the same entry: wait for it rather than build it too
    try:
        if waited:  # written while this process waited
            f = _read_function(path, key)
            if f is not None:
                return f
        return _build_function(label, path, key if path is not None else None, build, cse)
    finally:
        _release(lock)


LOCK_WAIT_S = 120.0  # the longest a process waits for another's build of the same entry before building it itself
LOCK_STALE_S = 600.0  # a build lock older than this was left by a process that stopped: ignored
_held = [0]  # build locks this process holds


def _claim(path: Path | None) -> tuple[Path | None, bool]:
    """``(lock, waited)``: a lock file beside ``path`` made by this process (removed by :func:`_release`), so that
    processes filling the cache at once (the report's workers) build each entry once; or ``None`` when another
    process holds it, after waiting until its entry is written (``waited``: read it again), its lock goes, or
    :data:`LOCK_WAIT_S`. A process that holds a lock (a build inside a build) never waits, so no two processes wait
    for each other. The lock is a temporary file of the directory (``.tmp-``): ``clear`` and the pruning remove one
    left by a process that was stopped."""
    if path is None or _held[0] or _state["off"] is not None:
        return None, False
    lock = path.with_name(f"{_TEMP}lock-{path.name}")
    deadline, waited = time.monotonic() + LOCK_WAIT_S, False
    while True:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            os.close(os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600))
        except FileExistsError:
            try:
                age = time.time() - lock.stat().st_mtime
            except OSError:  # released just now: try again
                continue
            if path.exists() and waited:
                return None, True
            if age > LOCK_STALE_S or time.monotonic() > deadline:
                return None, waited
            time.sleep(0.02)
            waited = True
        except OSError:  # the directory cannot be written: writing the entry says so
            return None, False
        else:
            _held[0] += 1
            return lock, waited


def _release(lock: Path | None) -> None:
    if lock is not None:
        _held[0] -= 1
        try:
            lock.unlink()
        except OSError:
            pass


def _read_function(path: Path, key: str) -> Callable | None:
    """The cached function of ``path`` if its file is whole and of ``key``; None if absent or stale; a corrupt file
    is reported (one warning line) and None."""
    t0 = time.perf_counter()
    try:
        text = path.read_text(encoding="utf-8")
    except OSError:  # absent, or unreadable (then writing it says so below)
        return None
    except UnicodeDecodeError as e:  # garbled
        _reject(path, f"{type(e).__name__}: {e}")
        return None
    verdict, why = _unseal(text, key)
    if verdict == "ok":
        try:
            f = _load(text, str(path))
        except Exception as e:  # noqa: BLE001  a file that passed the checksum but does not run
            verdict, why = "corrupt", f"{type(e).__name__}: {e}"
    if verdict == "ok":
        try:
            os.utime(path)  # used now: kept by the pruning
        except OSError:
            pass
        STATS["hits"] += 1
        STATS["load_s"] += time.perf_counter() - t0
        return f
    if verdict == "corrupt":
        _reject(path, why)
    return None


def _build_function(label: str, path: Path | None, key: str | None, build: Callable, cse: bool) -> Callable:
    t0 = time.perf_counter()
    args, exprs = build()
    code = _code_of(list(args), exprs, cse)
    text = code if path is None else _seal(key, code)
    f = _load(text, f"<compiled {label}>" if path is None else str(path))
    STATS["builds"] += 1
    STATS["build_s"] += time.perf_counter() - t0
    if path is not None and _state["off"] is None:
        try:
            _write(path, text)
            STATS["written"] += 1
        except OSError as e:
            _warn_off(f"cannot write {path.parent} ({type(e).__name__}: {e.strerror or e})")
        else:
            if not _state["pruned"]:
                _state["pruned"] = True
                prune(path.parent)
    return f


def arrays(label: str, token, build: Callable[[], dict]) -> dict:
    """``build()``, a dict of numpy arrays (names: letters, digits, ``_``, ``.`` and ``/``), through the persistent
    cache: on a hit ``build`` does not run and the arrays are read back bit for bit. Keyed as :func:`lambdified`
    (``label``, ``token``, the versions and the package's sources). The file is a header line (a magic string, the
    key, the version and the sha256 of the rest) followed by ``numpy.savez`` of the arrays, read with
    ``allow_pickle=False``: an object array is never written nor read. A file whose header names another key or
    version is stale and rebuilt; one whose checksum fails, or that numpy cannot read, is corrupt: one
    :class:`CacheWarning` line, then rebuilt. Written atomically, as functions are; with the cache off, ``build()``.

    >>> import numpy as np
    >>> a = arrays("doc.squares", (3,), lambda: {"x": np.arange(3.0) ** 2})
    >>> a["x"].tolist()
    [0.0, 1.0, 4.0]
    """
    if not re.fullmatch(r"[a-z0-9_.]+", label):
        raise ValueError(f"label: letters, digits, '_' and '.' only, got {label!r}")
    path = None
    if _state["off"] is None:
        try:
            key = key_of(label, token)
            path = cache_dir() / f"{label}-{key[:40]}{ARRAYS_SUFFIX}"
        except OSError as e:
            _warn_off(f"cannot read the package's sources ({type(e).__name__}: {e})")
    if path is not None:
        out = _read_arrays(path, key)
        if out is not None:
            return out
    lock, waited = _claim(path)
    try:
        if waited:
            out = _read_arrays(path, key)
            if out is not None:
                return out
        return _build_arrays(label, path, key if path is not None else None, build)
    finally:
        _release(lock)


def _read_arrays(path: Path, key: str) -> dict | None:
    """The cached arrays of ``path`` if its file is whole and of ``key``; None if absent or stale; a corrupt file is
    reported (one warning line) and None."""
    import io

    import numpy as np

    t0 = time.perf_counter()
    try:
        blob = path.read_bytes()
    except OSError:
        return None
    head, sep, payload = blob.partition(b"\n")
    fields = head.split(b" ")
    if not sep or len(fields) < 4 or b" ".join(fields[:-3]) != _ARRAYS_MAGIC:
        _reject(path, "not a cached arrays file")
        return None
    if fields[-3].decode("ascii", "replace") != key or fields[-2].decode("ascii", "replace") != __version__:
        return None  # stale: rebuilt
    if fields[-1].decode("ascii", "replace") != hashlib.sha256(payload).hexdigest():
        _reject(path, "its checksum does not match its contents")
        return None
    try:
        with np.load(io.BytesIO(payload), allow_pickle=False) as z:
            out = {name: z[name] for name in z.files}
    except Exception as e:  # noqa: BLE001  a file that passed the checksum but numpy cannot read
        _reject(path, f"{type(e).__name__}: {e}")
        return None
    try:
        os.utime(path)
    except OSError:
        pass
    STATS["hits"] += 1
    STATS["load_s"] += time.perf_counter() - t0
    return out


def _build_arrays(label: str, path: Path | None, key: str | None, build: Callable[[], dict]) -> dict:
    import io

    import numpy as np

    t0 = time.perf_counter()
    out = {name: np.asarray(v) for name, v in build().items()}
    bad = [n for n, v in out.items() if v.dtype == object or not re.fullmatch(r"[A-Za-z0-9_./]+", n)]
    if bad:
        raise ValueError(f"arrays {label}: {bad[0]!r} is an object array or a name numpy's .npz cannot hold")
    STATS["builds"] += 1
    STATS["build_s"] += time.perf_counter() - t0
    if path is not None and _state["off"] is None:
        buf = io.BytesIO()
        np.savez(buf, **out)
        payload = buf.getvalue()
        head = b" ".join((_ARRAYS_MAGIC, key.encode(), __version__.encode(),
                          hashlib.sha256(payload).hexdigest().encode()))
        try:
            _write(path, head + b"\n" + payload)
            STATS["written"] += 1
        except OSError as e:
            _warn_off(f"cannot write {path.parent} ({type(e).__name__}: {e.strerror or e})")
    return out


def prune(directory: Path | None = None, older_than_s: float = PRUNE_AFTER_S) -> int:
    """Remove the cached files (and temporary files) of ``directory`` (default :func:`cache_dir`) not used for
    ``older_than_s`` seconds (their modification time: a hit touches its file); how many were removed."""
    cutoff = time.time() - older_than_s
    removed = 0
    for p in entries(directory):
        try:
            if p.stat().st_mtime < cutoff:
                p.unlink()
                removed += 1
        except OSError:  # gone already, or not ours to remove
            pass
    return removed


def reset() -> None:
    """Forget this process's decision to turn the cache off (after the directory was made writable, or
    ``$CONCURRENCY_MODEL_CACHE_DIR`` changed), the sources' hash and the texts generated (:func:`_code_of`): the
    next function tries the cache again and generates its text afresh."""
    _state.update(off=None, sources=None, pruned=False)
    _CODES.clear()


def entries(directory: Path | None = None) -> list[Path]:
    """The cached files in ``directory`` (default :func:`cache_dir`), and temporary files left by a process that
    was stopped while writing; nothing else the directory holds."""
    d = cache_dir() if directory is None else Path(directory)
    if not d.is_dir():
        return []
    return sorted(p for p in d.iterdir() if p.is_file() and (_NAME.match(p.name) or p.name.startswith(_TEMP)))


def info() -> dict:
    """``dir``, ``entries``, ``bytes`` of the cache directory and whether the cache is ``enabled`` in this process
    (``reason`` when it is not)."""
    files = entries()
    out = {"dir": str(cache_dir()), "entries": sum(1 for p in files if _NAME.match(p.name)),
           "bytes": sum(p.stat().st_size for p in files), "enabled": _state["off"] is None}
    return out if _state["off"] is None else {**out, "reason": _state["off"]}


def clear() -> dict:
    """Remove the cached files (and temporary files left behind) from the cache directory: ``dir``, ``removed``,
    ``bytes``. Other files in the directory are left alone."""
    removed = size = 0
    for p in entries():
        try:
            n = p.stat().st_size
            p.unlink()
        except FileNotFoundError:  # another process removed it first
            continue
        removed, size = removed + 1, size + n
    return {"dir": str(cache_dir()), "removed": removed, "bytes": size}
