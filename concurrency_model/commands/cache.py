"""``concurrency-model cache info|clear``: the persistent cache of compiled functions
(:mod:`concurrency_model.compiled`): where it is, how many entries and bytes it holds; ``clear`` removes them.

The directory is the user's cache directory (``~/.cache/concurrency-model/compiled`` on Linux) or
``$CONCURRENCY_MODEL_CACHE_DIR``. Clearing is always safe: a function missing from the cache is built again.
"""
from __future__ import annotations

from ..compiled import ENV, clear, info
from . import add_json


def run_info(a) -> dict:
    return info()


def show_info(out: dict) -> None:
    state = "on" if out["enabled"] else f"off ({out['reason']})"
    print(f"compiled-function cache ({state}): {out['dir']}\n  {out['entries']} entries, {out['bytes'] / 1e3:,.1f} kB; "
          f"another directory: ${ENV}")


def run_clear(a) -> dict:
    return clear()


def show_clear(out: dict) -> None:
    print(f"removed {out['removed']} cached functions ({out['bytes'] / 1e3:,.1f} kB) from {out['dir']}")


def register(sub) -> None:
    c = sub.add_parser("cache", help="the cache of compiled step and memory functions: where, how big; clear it")
    what = c.add_subparsers(dest="cache", required=True)
    i = what.add_parser("info", help="the cache directory, its entries and bytes, and whether it is on")
    add_json(i)
    i.set_defaults(run=run_info, show=show_info)
    k = what.add_parser("clear", help="remove every cached function (they are built again when next needed)")
    add_json(k)
    k.set_defaults(run=run_clear, show=show_clear)
