"""``--compare KEY=VALUE ...`` of ``estimate`` and ``infer``: the scenario and the scenario with those fields changed
(:func:`concurrency_model.scenario.with_settings`), side by side."""
from __future__ import annotations

from ..scenario import with_settings


def add_compare(p) -> None:
    p.add_argument("--compare", action="append", metavar="KEY=VALUE", default=[],
                   help="evaluate the scenario also with these fields changed (as --set does; repeatable, applied "
                        "together) and show both side by side with the change of each figure")


def compared(raw: dict, settings: list, evaluate) -> dict:
    """``{compare, base, changed}``: ``evaluate(scenario).to_dict()`` of the scenario and of the changed one (an
    error of the changed one names ``--compare`` and its settings)."""
    changed = with_settings(raw, settings, flag="--compare")
    base = evaluate(raw).to_dict()
    try:
        other = evaluate(changed).to_dict()
    except ValueError as e:
        raise ValueError(f"--compare {' '.join(settings)}: {e}") from None
    return {"compare": settings, "base": base, "changed": other}


def print_rows(rows: list) -> None:
    """``(label, base, changed)`` rows with the relative change."""
    print(f"  {'':<28} {'base':>12} {'changed':>12} {'change':>9}")
    for label, x, y in rows:
        change = f"{y / x - 1:+.1%}" if x else ("" if not y else "new")
        print(f"  {label:<28} {_num(x):>12} {_num(y):>12} {change:>9}")


def _num(x: float) -> str:
    return f"{x:,.0f}" if abs(x) >= 1e4 else f"{x:.4g}"
