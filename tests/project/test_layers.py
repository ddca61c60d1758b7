"""The house rules import-linter does not check (issue 37): no private name is imported across modules, and the
package's modules import each other without a circle (import-linter's layers contract, run by ``lint-imports`` in
CI, checks the layers themselves)."""
from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

PKG = Path(__file__).resolve().parents[2] / "concurrency_model"


def modules() -> dict:
    out = {}
    for path in PKG.rglob("*.py"):
        parts = path.relative_to(PKG.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        out[name] = path
    return out


def imports(name: str, path: Path, known: dict):
    """``(target module, imported name, at the module's top)`` of every package-internal ``from ... import``."""
    tree = ast.parse(path.read_text())
    top = {id(n) for n in tree.body}
    base = name.split(".") if path.name == "__init__.py" else name.split(".")[:-1]
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        if node.level:
            parts = base[: len(base) - node.level + 1] + (node.module.split(".") if node.module else [])
            target = ".".join(parts)
        elif (node.module or "").startswith("concurrency_model"):
            target = node.module
        else:
            continue
        for alias in node.names:
            full = f"{target}.{alias.name}"
            yield (full if full in known else target), alias.name, id(node) in top
            if alias.asname and alias.asname.startswith("_"):  # a public name made private on import
                yield (full if full in known else target), alias.asname, id(node) in top


def test_no_private_name_is_imported_across_modules():
    known = modules()
    bad = [f"{name} imports {what} from {target}" for name, path in known.items()
           for target, what, _ in imports(name, path, known)
           if what.startswith("_") and not what.startswith("__") and target != name]
    assert not bad, bad


def test_the_modules_import_each_other_without_a_circle():
    known = modules()
    g = nx.DiGraph()
    for name, path in known.items():
        for target, _, at_top in imports(name, path, known):
            if target in known and target != name and not name.startswith(target + "."):
                g.add_edge(name, target)
    cycles = list(nx.simple_cycles(g))
    assert not cycles, cycles[:5]
