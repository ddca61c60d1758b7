"""No module outside scenario.py reads a scenario section as a dict (issue 37, item 2, "Done when"): the sections
are the frozen dataclasses of :mod:`concurrency_model.scenario`, read by attribute (``par.tensor``).

The check walks every module's AST. A section is ``S.parallel``, ``S.training``, ``S.inference`` or ``S.run`` of a
scenario ``S`` (``sc``, ``scenario``, ``E.scenario``, a name bound from ``load_scenario(...)``, ``Scenario(...)`` or
``replace(S, ...)``, a parameter annotated ``Scenario``), ``E.training`` of anything (an Estimate's is the
scenario's), a name bound from one of those or from ``X.from_dict(...)`` / ``inference_section(...)`` /
``check_run(...)`` / ``replace(<a section>, ...)``, a parameter annotated with a section class, and a parameter
named ``par``, ``tr``, ``parallel``, ``training``, ``inf``, ``inference`` or ``run`` (but those of
:data:`NOT_SECTIONS`). A serving result's ``.parallel`` / ``.inference`` and an Estimate's ``.run`` are output
dicts, not sections. Refused on a section: ``X["field"]``, ``X.get("field")``, ``"field" in X``, ``{**X}`` and
``dict(X)``, for every field name of the four classes. The same rules drive /work/tools38/typed_rewrite.py, which
converted the reads.
"""
from __future__ import annotations

import ast
from dataclasses import fields
from pathlib import Path

import pytest

from concurrency_model.scenario import Inference, Parallel, Run, Training

PACKAGE = Path(__file__).resolve().parents[2] / "concurrency_model"
FIELDS = {f.name for c in (Parallel, Training, Inference, Run) for f in fields(c)}
SECTION_ATTRS = {"parallel", "training", "inference", "run"}
SECTION_TYPES = {"Parallel", "Training", "Inference", "InferenceSection", "Run"}
SECTION_CALLS = {"inference_section", "check_run"}
PARAM_NAMES = {"par", "tr", "parallel", "training", "inf", "inference", "run"}
# (module, function, parameter): parameters with a section's name that hold something else
NOT_SECTIONS = {
    ("training/estimate.py", "comm", "tr"),    # a collective's (latency, intra, inter) triple
    ("training/estimate.py", "<lambda>", "tr"),
    ("sweep/engine.py", "comm", "tr"),
    ("parallel/triples.py", "*", "tr"),
    ("report/cnn_parallel.py", "_estimate", "parallel"),   # a scenario file's parallel object
    ("training/remedies.py", "_modelled", "training"),     # the changes to apply
    ("training/remedies.py", "_bytes", "par"),
    ("training/remedies.py", "_bytes", "tr"),
}


def _names(args: ast.arguments) -> list[ast.arg]:
    return args.posonlyargs + args.args + args.kwonlyargs


class Reads(ast.NodeVisitor):
    """The dict-style uses of a scenario section in one module: ``(line, text)``."""

    def __init__(self, rel: str):
        self.rel = rel
        self.sections: list[set[str]] = [set()]
        self.scenarios: list[set[str]] = [set()]
        self.found: list[tuple[int, str]] = []

    def is_scenario(self, e) -> bool:
        if isinstance(e, ast.Attribute):
            return e.attr == "scenario"
        return isinstance(e, ast.Name) and (e.id in ("sc", "scenario") or e.id in self.scenarios[-1])

    def is_section(self, e) -> bool:
        if isinstance(e, ast.Attribute) and e.attr in SECTION_ATTRS:
            return e.attr == "training" or self.is_scenario(e.value)
        return isinstance(e, ast.Name) and e.id in self.sections[-1]

    def _call_name(self, v) -> str:
        f = v.func
        return f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""

    def _bind(self, target, value) -> None:
        if isinstance(target, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                and len(target.elts) == len(value.elts):
            for t, v in zip(target.elts, value.elts):
                self._bind(t, v)
            return
        if not isinstance(target, ast.Name):
            return
        call = self._call_name(value) if isinstance(value, ast.Call) else ""
        first = value.args[0] if isinstance(value, ast.Call) and value.args else None
        scenario = self.is_scenario(value) or call in ("load_scenario", "Scenario") or \
            (call == "replace" and first is not None and self.is_scenario(first))
        section = self.is_section(value) or call in SECTION_CALLS or \
            (call == "from_dict" and ast.unparse(value.func.value).split(".")[-1] in SECTION_TYPES) or \
            (call == "replace" and first is not None and self.is_section(first))
        for names, yes in ((self.scenarios[-1], scenario), (self.sections[-1], section)):
            names.add(target.id) if yes else names.discard(target.id)

    def _function(self, node) -> None:
        name = getattr(node, "name", "<lambda>")
        params = _names(node.args)
        own = {a.arg for a in params if (a.annotation is not None and
                                          set(ast.unparse(a.annotation).replace("scenario.", "").split(" | "))
                                          & SECTION_TYPES)
               or (a.arg in PARAM_NAMES and (self.rel, name, a.arg) not in NOT_SECTIONS
                   and (self.rel, "*", a.arg) not in NOT_SECTIONS)}
        scen = {a.arg for a in params if a.annotation is not None and "Scenario" in ast.unparse(a.annotation)}
        every = {a.arg for a in params}
        self.sections.append((self.sections[-1] - every) | own)
        self.scenarios.append((self.scenarios[-1] - every) | scen)
        for stmt in node.body if isinstance(node.body, list) else [node.body]:
            self.visit(stmt)
        self.sections.pop()
        self.scenarios.pop()

    visit_FunctionDef = visit_AsyncFunctionDef = visit_Lambda = _function

    def visit_Assign(self, node):
        self.visit(node.value)
        for t in node.targets:
            self._bind(t, node.value)
            self.visit(t)

    def visit_NamedExpr(self, node):
        self.visit(node.value)
        self._bind(node.target, node.value)

    def visit_Subscript(self, node):
        if isinstance(node.slice, ast.Constant) and node.slice.value in FIELDS and self.is_section(node.value):
            self.found.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)

    def visit_Call(self, node):
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("get", "pop", "setdefault") and node.args \
                and isinstance(node.args[0], ast.Constant) and node.args[0].value in FIELDS \
                and self.is_section(f.value):
            self.found.append((node.lineno, ast.unparse(node)))
        if isinstance(f, ast.Name) and f.id == "dict" and node.args and self.is_section(node.args[0]):
            self.found.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)

    def visit_Dict(self, node):
        for k, v in zip(node.keys, node.values):
            if k is None and self.is_section(v):
                self.found.append((node.lineno, f"{{**{ast.unparse(v)}}}"))
        self.generic_visit(node)

    def visit_Compare(self, node):
        if isinstance(node.left, ast.Constant) and node.left.value in FIELDS and \
                any(isinstance(op, (ast.In, ast.NotIn)) and self.is_section(c)
                    for op, c in zip(node.ops, node.comparators)):
            self.found.append((node.lineno, ast.unparse(node)))
        self.generic_visit(node)


def dict_reads(source: str, rel: str = "x.py") -> list[tuple[int, str]]:
    r = Reads(rel)
    r.visit(ast.parse(source))
    return r.found


def test_no_module_outside_scenario_reads_a_section_as_a_dict():
    found = []
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = str(path.relative_to(PACKAGE))
        if rel != "scenario.py":
            found += [f"{rel}:{line}: {text}" for line, text in dict_reads(path.read_text(), rel)]
    assert not found, "scenario sections read as dicts (use attributes, dataclasses.replace, to_dict()):\n" + \
        "\n".join(found)


PLANTED = '''
def f(sc, e, w):
    par, tr = sc.parallel, sc.training
    a = par["tensor"]
    b = tr.get("zero_stage", 0)
    c = sc.run["tokens"]
    d = e.training["framework"]
    g = {**sc.parallel, "tensor": 2}
    h = "tokens" in sc.run
    s2 = load_scenario(w)
    i = s2.inference["batch"]
    j = dict(e.scenario.parallel)

def k(inf):
    return inf["prompt_len"]

def m(x: Parallel):
    return x["data"]
'''


@pytest.mark.parametrize("text", ["par['tensor']", "tr.get('zero_stage', 0)", "sc.run['tokens']",
                                  "e.training['framework']", "{**sc.parallel}", "'tokens' in sc.run",
                                  "s2.inference['batch']", "dict(e.scenario.parallel)", "inf['prompt_len']",
                                  "x['data']"])
def test_a_planted_dict_read_is_found(text):
    assert text in [t for _, t in dict_reads(PLANTED)]


def test_other_dicts_are_not_flagged():
    """JSON outputs, raw scenario objects, data-frame rows and a serving result's layout keep their keys."""
    source = '''
def f(raw, out, row, r, lay, e):
    a = out["parallel"]["tensor"] + raw["parallel"]["data"] + row["tensor"] + lay["pipeline"]
    p = raw.get("parallel") or {}
    b = p["tensor"] + r.parallel["pipeline"] + r.inference["batch"] + e.run["run_days"]
    tr = out.get("training") or {}
    return tr["zero_stage"], {**raw["training"], "zero_stage": 1}

def comm(tr):
    return tr[0]
'''
    assert dict_reads(source) == []
    assert dict_reads("def comm(tr):\n    return tr['tokens']\n", "sweep/engine.py") == []
