"""pytest, for every test, docstring example and notebook: a compiled-function cache of the session's own in a
temporary directory (:mod:`concurrency_model.compiled`), never the user's; subprocesses inherit it."""
import atexit
import os
import shutil
import tempfile

os.environ["CONCURRENCY_MODEL_CACHE_DIR"] = tempfile.mkdtemp(prefix="concurrency-model-test-cache-")
atexit.register(shutil.rmtree, os.environ["CONCURRENCY_MODEL_CACHE_DIR"], ignore_errors=True)


def _needs_missing_extra() -> list:
    """The package's modules that import an optional extra (torch, onnx) at their top or in a docstring example, and
    the notebooks that import one, while it is not installed: not collected, so that ``pip install -e ".[test]" && python -m pytest`` runs
    without the extras (the tests that need one skip themselves)."""
    import ast
    from importlib import util
    from pathlib import Path

    missing = {m for m in ("torch", "onnx") if util.find_spec(m) is None}
    if not missing:
        return []
    out = []
    for path in Path(__file__).parent.joinpath("concurrency_model").rglob("*.py"):
        tree = ast.parse(path.read_text())
        names = {a.name.split(".")[0] for n in tree.body if isinstance(n, ast.Import) for a in n.names}
        names |= {n.module.split(".")[0] for n in tree.body if isinstance(n, ast.ImportFrom) and n.module}
        examples = {m for m in missing if f">>> import {m}" in path.read_text() or f">>> from {m}" in path.read_text()}
        if names & missing or examples:  # imported at the top, or by a docstring example
            out.append(str(path.relative_to(Path(__file__).parent)))
    for path in Path(__file__).parent.joinpath("notebooks").glob("*.ipynb"):  # a notebook that imports one
        if any(f"import {m}" in path.read_text() for m in missing):
            out.append(str(path.relative_to(Path(__file__).parent)))
    return out


collect_ignore = _needs_missing_extra()
