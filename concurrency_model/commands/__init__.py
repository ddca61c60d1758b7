"""One module per CLI command; each has ``register(subparsers)``."""
from __future__ import annotations

import argparse


from ..cost import to_json as num


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {v}")
        return v
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


__all__ = ["num", "int_at_least", "positive_int", "nonnegative_int", "add_json"]
