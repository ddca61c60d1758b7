"""The report's "Choosing right" section: does the estimate order the alternatives as the measurements do? Per shared
set with several layouts of one workload, the Spearman rank correlation between predicted and measured throughput and
how often the predicted fastest layout is the measured one (:mod:`concurrency_model.validate.ranking`, as
``benchmarks/ranking.py`` prints them); and the measured A/B pairs, runs that change one setting of one layout, their
predicted speed-up against the measured one (:func:`~concurrency_model.validate.ranking.ab_pairs`); and whether it
says "fits" only of runs that fit: its verdict on runs that ran and runs that went out of memory
(:func:`~concurrency_model.validate.modern.memory_verdicts`)."""
from __future__ import annotations

import html

import numpy as np
import pandas as pd

from ..validate import modern, ranking
from ._plot import figure


def ranking_data(quick: bool = True) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """``(summary, pairs, verdicts)``: :func:`~concurrency_model.validate.ranking.summarize` of every set's groups
    (``quick``: the big sets sampled, as ``benchmarks/ranking.py --quick``), the A/B pairs, and the memory verdicts on
    the runs of BigScience and the dense shared sets (:func:`~concurrency_model.validate.modern.verdicts_by_set`,
    every row: a miss is rare, a sample would not show it), one worker."""
    table = ranking.rank_groups(ranking.frames(quick=quick, workers=1))
    verdicts = modern.verdicts_by_set(workers=1)[0]
    return ranking.summarize(table), ranking.ab_pairs(workers=1), verdicts


def verdicts_html(verdicts: pd.DataFrame) -> str:
    """:func:`~concurrency_model.validate.modern.memory_verdicts`' counts as an HTML ``<table>``, a row an outcome.

    >>> v = pd.DataFrame({"fits": [9, 1], "at risk": [2, 0], "does not fit": [0, 5]},
    ...                  index=["bigscience: ran", "bigscience: went out of memory"])
    >>> "<td>bigscience: went out of memory</td><td>1</td><td>0</td><td>5</td>" in verdicts_html(v)
    True
    """
    head = ["the runs", *(f"said &ldquo;{html.escape(c)}&rdquo;" for c in verdicts.columns)]
    lines = ["<table class='errors'>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>",
             "<tbody>"]
    for outcome, r in verdicts.iterrows():
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in [html.escape(str(outcome)), *map(int, r)]) + "</tr>")
    return "\n".join(lines + ["</tbody></table>"])


def ranking_figure(summary: pd.DataFrame, pairs: pd.DataFrame):
    """Left: each set's mean Spearman (its groups of at least :data:`~concurrency_model.validate.ranking.MIN_LAYOUTS`
    layouts; none: no bar) with the target line, and the share of groups whose predicted best is the measured best;
    right: each A/B pair's predicted against measured speed-up, the line y = x."""
    fig, ax = figure(11, 4.2, 1, 2, width_ratios=[1.2, 1])
    left, right = ax[0, 0], ax[0, 1]
    y = np.arange(len(summary))
    mean = pd.to_numeric(summary["mean_spearman"], errors="coerce").to_numpy(dtype=float)
    left.barh(y, np.nan_to_num(mean), color=["tab:green" if m >= ranking.TARGET else "tab:red" for m in mean])
    for k, (m, best) in enumerate(zip(mean, summary["best_match"])):
        text = (f"{m:.2f}" if np.isfinite(m) else "no group of 3+") + (
            f", best-match {best:.0%}" if best is not None and np.isfinite(best) else "")
        left.text(max(np.nan_to_num(m), 0) + 0.02, k, text, va="center", fontsize=8)
    left.axvline(ranking.TARGET, color="gray", ls="--", lw=1)
    left.set_yticks(y, summary["dataset"])
    left.invert_yaxis()
    left.set_xlim(-0.05, 1.45)
    left.set_xlabel("mean Spearman, predicted against measured (dashed: target 0.8)")
    lo = float(min(pairs["measured_speedup"].min(), pairs["predicted_speedup"].min(), 1.0)) * 0.97
    hi = float(max(pairs["measured_speedup"].max(), pairs["predicted_speedup"].max(), 1.0)) * 1.03
    right.plot([lo, hi], [lo, hi], color="gray", lw=1)
    right.axhline(1.0, color="lightgray", lw=0.8)
    right.axvline(1.0, color="lightgray", lw=0.8)
    for pair, g in pairs.groupby("pair", sort=False):
        right.scatter(g["measured_speedup"], g["predicted_speedup"], s=28, label=pair)
    right.set_xlim(lo, hi)
    right.set_ylim(lo, hi)
    right.set_xlabel("measured speed-up over the pair's first case")
    right.set_ylabel("predicted speed-up")
    right.legend(fontsize=7, loc="upper left")
    return fig


def summary_html(summary: pd.DataFrame) -> str:
    """The per-set table as an HTML ``<table>``."""
    def num(v, fmt):
        return "" if v is None or pd.isna(v) else format(float(v), fmt)
    head = ["set", "groups", "groups of 3+ layouts", "mean Spearman", "lowest Spearman", "predicted best = measured"]
    lines = ["<table class='errors'>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>",
             "<tbody>"]
    for r in summary.itertuples():
        cells = [html.escape(str(r.dataset)), str(r.groups), str(r.ranked), num(r.mean_spearman, ".2f"),
                 num(r.min_spearman, ".2f"), num(r.best_match, ".0%")]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(lines + ["</tbody></table>"])


def pairs_html(pairs: pd.DataFrame) -> str:
    """The A/B pairs as an HTML ``<table>``."""
    head = ["pair", "case", "against", "measured speed-up", "predicted speed-up", "error"]
    lines = ["<table class='errors'>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>",
             "<tbody>"]
    for r in pairs.itertuples():
        cells = [html.escape(str(r.pair)), html.escape(str(r.case)), html.escape(str(r.base)),
                 f"{r.measured_speedup:.3f}", f"{r.predicted_speedup:.3f}", f"{r.error:+.1%}"]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    return "\n".join(lines + ["</tbody></table>"])
