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


def add_scenario(p: argparse.ArgumentParser, what: str = "") -> None:
    """``--scenario FILE`` and repeatable ``--set KEY=VALUE`` (:func:`concurrency_model.scenario.with_settings`)."""
    p.add_argument("--scenario", required=True, help=f"scenario file (JSON or TOML) or the name of a shipped example "
                   f"(presets scenarios){what}; every field: docs/scenario.md")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="change one field of the scenario, e.g. --set parallel.tensor=4 --set cluster=dgx-h100 "
                        "(VALUE as JSON, else a string; repeatable)")


def scenario_of(a) -> dict:
    """The scenario a command was given: the file, read once (it may be a pipe), with its ``--set`` settings."""
    from ..scenario import read_scenario, with_settings
    return with_settings(read_scenario(a.scenario), a.set)


__all__ = ["num", "int_at_least", "positive_int", "nonnegative_int", "add_json", "add_scenario", "scenario_of"]
