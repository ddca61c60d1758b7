"""The shared checks of numeric inputs (concurrency_model.checks): the value back, or one line naming the field."""
import math

import numpy as np
import pytest
import sympy as sp
from hypothesis import given, strategies as st

from concurrency_model.checks import count, number


@given(st.floats(min_value=1e-300, max_value=1e300))
def test_number_returns_positive_floats(x):
    assert number("f", x) == x


@pytest.mark.parametrize("bad", [0, -1.0, math.inf, math.nan, True, "1", None, [1], sp.Symbol("x")])
def test_number_refuses_and_names_the_field(bad):
    with pytest.raises(ValueError, match=r"^training\.straggler_cv: must be a positive number, got "):
        number("training.straggler_cv", bad)


def test_number_intervals():
    assert number("f", 0, low_ok=True) == 0.0
    assert number("f", 1, high=1, high_ok=True) == 1.0
    assert number("f", np.float32(0.5), high=1) == 0.5
    assert number("f", sp.Float(2.5)) == 2.5
    assert number("f", None, none_ok=True) is None
    x = sp.Symbol("x")
    assert number("f", 2 * x, symbols_ok=True) == 2 * x
    with pytest.raises(ValueError, match=r"^f: must be a number in \(0, 1\), got 1$"):
        number("f", 1, high=1)
    with pytest.raises(ValueError, match=r"^f: must be a number >= 1, got 0.5$"):
        number("f", 0.5, low=1, low_ok=True)
    with pytest.raises(ValueError, match=r"^f: must be a number in \[0, 1\], got -0.1$"):
        number("f", -0.1, low_ok=True, high=1, high_ok=True)


@given(st.integers(min_value=1, max_value=10**12))
def test_count_returns_ints(n):
    assert count("parallel.data", n) == n and type(count("parallel.data", np.int64(n))) is int


@pytest.mark.parametrize("bad, message", [
    (0, "must be a positive integer, got 0"), (2.0, "must be a positive integer, got 2.0"),
    (True, "must be a positive integer, got True"), ("4", "must be a positive integer, got '4'")])
def test_count_refuses_and_names_the_field(bad, message):
    with pytest.raises(ValueError, match=rf"^parallel\.data: {message}$"):
        count("parallel.data", bad)


def test_count_bounds():
    assert count("zero_stage", 0, low=0) == 0
    assert count("stages", 3, high=3) == 3
    with pytest.raises(ValueError, match=r"^stages: must be an integer in \[1, 3\], got 4$"):
        count("stages", 4, high=3)
    with pytest.raises(ValueError, match=r"^k: must be an integer >= 0, got -1$"):
        count("k", -1, low=0)
    assert count("vocab", 2**53) == 2**53  # the last integer float64 and every one below it hold exactly
    with pytest.raises(ValueError, match=r"^vocab: 1e\+30 is past 2\*\*53"):  # was an OverflowError deep inside
        count("vocab", 10**30)
