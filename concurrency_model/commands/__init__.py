"""One module per CLI command; each has ``register(subparsers)``."""
from __future__ import annotations

import argparse

import sympy as sp


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return v


def nonnegative_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"must be an integer >= 0, got {v}")
    return v


def num(e):
    """A JSON-ready number (or the expression's text when it has symbols)."""
    e = sp.sympify(e)
    if not e.is_number:
        return str(e)
    return int(e) if e.is_Integer else float(e)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
