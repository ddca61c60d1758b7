"""training.compose: the step's expressions built with unevaluated Max and Min are those of sympy's evaluated ones."""
from __future__ import annotations

import numpy as np
import pytest
import sympy as sp

from concurrency_model.choices import SCHEDULES
from concurrency_model.training import compose
from concurrency_model.training.step_parts import STEP_INPUTS

VARIANTS = [(s, z, o) for s in SCHEDULES for z in range(4) for o in (False, True)]


@pytest.fixture(scope="module")
def both():
    """``(shipped, evaluated)``: every variant's expressions as shipped and with ``_max``, ``_min`` sympy's own."""
    compose.step_expressions.cache_clear()
    shipped = {v: compose.step_expressions(*v) for v in VARIANTS}
    mp = pytest.MonkeyPatch()
    mp.setattr(compose, "_max", sp.Max)
    mp.setattr(compose, "_min", sp.Min)
    compose.step_expressions.cache_clear()
    try:
        evaluated = {v: compose.step_expressions(*v) for v in VARIANTS}
    finally:
        mp.undo()
        compose.step_expressions.cache_clear()
    return shipped, evaluated


def test_every_variant_equals_the_evaluated_build(both):
    shipped, evaluated = both
    differ = [(v, k) for v in VARIANTS for k in evaluated[v]
              if shipped[v][k] != evaluated[v][k] or sp.srepr(shipped[v][k]) != sp.srepr(evaluated[v][k])]
    assert differ == []
    assert len(VARIANTS) == 40 and all(len(shipped[v]) == 9 for v in VARIANTS)


def test_the_same_numbers_on_a_grid(both):
    """Lambdified alike, both give the same floats (a random grid of inputs, bit for bit)."""
    shipped, evaluated = both
    rng = np.random.default_rng(0)
    syms = [compose.SYMBOLS[k] for k in STEP_INPUTS]
    grid = [rng.uniform(0.0, 2.0, 64) for _ in syms]
    for v in [("zb-h1", 3, True), ("interleaved", 2, True), ("1f1b", 1, True), ("gpipe", 0, False)]:
        a = sp.lambdify(syms, list(shipped[v].values()), "numpy")(*grid)
        b = sp.lambdify(syms, list(evaluated[v].values()), "numpy")(*grid)
        for x, y in zip(a, b):
            np.testing.assert_array_equal(np.broadcast_to(x, (64,)), np.broadcast_to(y, (64,)))


def test_max_flattens_a_nested_max():
    x, y, z = sp.symbols("x y z")
    assert compose._max(0, compose._max(x, y), z).args == sp.Max(0, sp.Max(x, y), z).args == (0, x, y, z)
    assert compose._max(0, x - y) == sp.Max(0, x - y)
    assert compose._min(x, y + z) == sp.Min(x, y + z)
