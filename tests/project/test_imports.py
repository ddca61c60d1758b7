"""Imports on demand (issue 41): ``import concurrency_model`` loads no heavy library, and a CLI command loads only
what it uses."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("sympy", "numpy", "pandas", "scipy", "matplotlib", "networkx")


def loaded(code: str) -> set:
    """The modules among HEAVY and the package's serving and report modules that a fresh process running ``code``
    has imported."""
    probe = (code + "\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m.split('.')[0] in "
             f"{HEAVY!r} and '.' not in m or m in ('concurrency_model.serving.overheads', 'concurrency_model.report', "
             "'concurrency_model.serving.capacity', 'concurrency_model.serving.decoder'))), file=sys.stderr)")
    r = subprocess.run([sys.executable, "-c", probe], env={**os.environ, "PYTHONPATH": str(ROOT)},
                       capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert r.returncode == 0, r.stderr
    return set(json.loads(r.stderr.strip().splitlines()[-1]))


def test_import_loads_no_heavy_library_and_names_resolve_on_use():
    assert loaded("import concurrency_model") == set()
    assert loaded("import concurrency_model as c; c.__version__; c.estimate") == set()
    built = loaded("from concurrency_model import get_model; get_model('lenet5')")
    assert "sympy" in built and "networkx" not in built  # networkx only for Graph.dag
    assert "networkx" in loaded("from concurrency_model import get_model; get_model('lenet5').dag")


def test_the_input_checks_load_no_heavy_library_and_still_take_sympy_values():
    assert loaded("from concurrency_model.checks import count, number\nnumber('x', 2.0); count('n', 3)") == set()
    from concurrency_model.checks import count, number
    import sympy as sp
    assert (number("x", sp.Float(2.5)), count("n", sp.Integer(3))) == (2.5, 3)
    n = sp.Symbol("n", positive=True)
    assert number("x", n, symbols_ok=True) is n
    with pytest.raises(ValueError, match="x: must be a positive number, got n"):
        number("x", n)


def test_unknown_attribute_is_an_attribute_error_and_submodules_still_import():
    import concurrency_model
    with pytest.raises(AttributeError, match="no_such_name"):
        concurrency_model.no_such_name  # noqa: B018
    from concurrency_model import timing  # a submodule, not one of the lazy names
    assert timing.__name__ == "concurrency_model.timing"
    assert set(concurrency_model.__all__) <= set(dir(concurrency_model))


def test_estimate_command_loads_neither_pandas_scipy_matplotlib_nor_serving():
    got = loaded("import io, contextlib\nfrom concurrency_model.cli import main\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n"
                 "    main(['estimate', '--scenario', 'gpt3-175b-3d', '--json'])")
    assert "numpy" in got  # sympy too on a cache miss only (tests/training/test_estimate_fast.py)
    assert not got & {"pandas", "scipy", "matplotlib", "concurrency_model.serving.overheads", "concurrency_model.report",
                      "concurrency_model.serving.capacity", "concurrency_model.serving.decoder"}


def test_cache_command_loads_no_heavy_library_but_what_it_needs():
    got = loaded("import io, contextlib\nfrom concurrency_model.cli import main\n"
                 "with contextlib.redirect_stdout(io.StringIO()):\n    main(['cache', 'info', '--json'])")
    assert not got & {"pandas", "scipy", "matplotlib", "concurrency_model.serving.overheads", "concurrency_model.report"}
