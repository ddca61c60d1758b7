"""Predicted against measured, per dataset: log-log scatter plots and the error table.

The rows come from :func:`concurrency_model.validate.registry.validate` (columns ``dataset, mode, row,
label, measured, predicted, unit, ape, status``; ``ape`` a fraction), the table from its
:func:`~concurrency_model.validate.registry.summarize`, with each dataset's source and the date of its
measurements after ``data/SOURCES.md``.
"""
from __future__ import annotations

import html as _html
import re
import textwrap

import numpy as np
import pandas as pd
from matplotlib.ticker import LogLocator

from ..validate.registry import summarize, validate
from ._plot import legend_outside, new_axes

# (pattern on the dataset name, source as data/SOURCES.md names it, date of the measurements)
SOURCES = (
    (r"deepbench.?all.?reduce", "Baidu DeepBench all-reduce, baidu-research/DeepBench @ da81ba7",
     "2016-2017 (CUDA 7.5-8.0, Intel MLSL 2017)"),
    (r"deepbench", "Baidu DeepBench kernels, baidu-research/DeepBench @ da81ba7",
     "2016-2019 (CUDA 7.5-10.1, ROCm 1.7)"),
    (r"nccl", "nccl-tests all_reduce_perf: oracle-quickstart/oci-hpc-oke @ 1402938 (2 x 8 A100), "
              "lessizzmore/create-a3mega-ztan-fork @ c1fd9e1 (2 x 8 H100)",
     "A100: 2023 (NCCL 2.19.3, container 23.10); H100: not stated"),
    (r"vtrain", "vTrain ground truth, VIA-Research/vTrain @ f8dda84 (Bang et al., MICRO 2024)",
     "published 2023-12 (arXiv 2312.12391)"),
    (r"megatron.?2020", "Megatron-LM README tables, NVIDIA/Megatron-LM @ 5281919", "2020-09"),
    (r"megatron(?!.?bridge)", "Megatron-LM README tables, NVIDIA/Megatron-LM @ 152aab3, 50a4b5f",
     "2021-01 and 2021-04"),
    (r"narayanan", "Narayanan et al. 2021 (SC21) Table 2, via cli99/llm-analysis @ b60b392",
     "2021-04 (arXiv 2104.04473)"),
    (r"tf.?cnn", "TensorFlow performance guide benchmarks, tensorflow/docs @ d13c500", "2017"),
    (r"torchgpipe", "torchgpipe benchmarks, kakaobrain/torchgpipe @ a1b4ee2", "2019-2020"),
    (r"horovod", "Horovod docs/benchmarks.rst, horovod/horovod @ 27743d0", "2018"),
    (r"dle", "NVIDIA/DeepLearningExamples READMEs @ 729963d", "2020-2023"),
    (r"fastertransformer", "FasterTransformer GPT 13B latencies (kipply 2022), via cli99/llm-analysis @ b60b392",
     "2022"),
    (r"torchtitan", "torchtitan benchmarks, pytorch/torchtitan @ b5bcd76c (benchmarks/*.md, mxfp8.md)",
     "2024-12 to 2025-08"),
    (r"llmfoundry", "MPT training benchmarks, mosaicml/llm-foundry @ 8c8dd48f (scripts/train/benchmarking/README.md)",
     "2023-2024 (README tables last changed 2024-04-22; versions not given per row)"),
    (r"megatron.?bridge", "Megatron-Bridge performance summary, NVIDIA-NeMo/Megatron-Bridge @ 067f987d "
     "(docs/performance-summary*.md)", "2025-09 to 2026-06 (NeMo containers 25.09-26.06)"),
    (r"nemo", "NeMo performance summary and long-sequence tables, NVIDIA/NeMo @ 8e3d65dc, 19fadb67 "
     "(docs/source/performance/)", "2024-04 to 2025-04 (NeMo 24.03.01, 24.07, 25.04.rc2)"),
    (r"trtllm", "TensorRT-LLM perf overview (trtllm-bench throughput, FP8, H100 / H200), NVIDIA/TensorRT-LLM "
     "@ 00f37686 (docs/source/performance/perf-overview.md)", "2025 (v1.0 era, PyTorch backend)"),
    (r"measured", "this toolkit's own calibrate runs, data/measured/", None),
)


def source_of(dataset: str) -> tuple[str, str]:
    """``(source, date)`` of a dataset name, after ``data/SOURCES.md`` (the toolkit's own runs: the date
    in the run's name).

    >>> source_of("vtrain-multi")[1]
    'published 2023-12 (arXiv 2312.12391)'
    >>> source_of("measured-compute-cpu-host-20261202")[1]
    '2026-12-02'
    """
    for pattern, src, date in SOURCES:
        if re.search(pattern, dataset, re.IGNORECASE):
            if date is None:
                m = re.search(r"(\d{4})(\d{2})(\d{2})$", dataset)
                date = "-".join(m.groups()) if m else "see data/measured/"
            return src, date
    return "see data/SOURCES.md", "see data/SOURCES.md"


def validation_rows(quick: bool = True) -> pd.DataFrame:
    """:func:`concurrency_model.validate.registry.validate` of every dataset (``quick``: its quick mode)."""

    return validate(None, quick=quick, progress=None)


def predicted_rows(df: pd.DataFrame) -> pd.DataFrame:
    """The rows that have a prediction (``status`` ok, finite positive values)."""
    ok = np.isfinite(df["measured"].astype(float)) & np.isfinite(df["predicted"].astype(float))
    ok &= (df["measured"].astype(float) > 0) & (df["predicted"].astype(float) > 0)
    if "status" in df:
        ok &= df["status"] == "ok"
    return df[ok]


def error_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per dataset: ``dataset, mode, rows, rows_total, sampled, median_ape_pct, mean_ape_pct,
    max_ape_pct, within_20_pct, in_band_pct, band_note, source, date, error`` (``registry.summarize`` plus
    the share of rows within ±20% and the source and date of the data).

    >>> df = pd.DataFrame({"dataset": "vtrain-multi", "mode": "preset", "row": [2, 3], "label": "",
    ...                    "group": "", "measured": [1.0, 1.0], "predicted": [1.1, 1.3], "unit": "s",
    ...                    "ape": [0.1, 0.3], "status": "ok", "note": ""})
    >>> [float(x) for x in error_table(df).loc[0, ["rows", "median_ape_pct", "within_20_pct"]]]
    [2.0, 20.0, 50.0]
    """

    # the rows without the frame's attrs (the registry's notes, read by summarize): pandas deep-copies them into every
    # frame and column derived from one (pandas 3.1 core/generic.py NDFrame.__finalize__), here in each dataset's
    # filter below (this function on the report's rows: 0.69 -> 0.59 s); a frame made from a frame starts with none
    # (core/frame.py DataFrame.__init__, the manager shallow-copied; generic.py NDFrame.__init__ ``_attrs = {}``)
    ok = predicted_rows(pd.DataFrame(df, copy=False))
    out = []
    for s in summarize(df):
        name = s["name"]
        g = ok[(ok["dataset"] == name) & ((ok["mode"] == s.get("mode")) if "mode" in ok else True)]
        src, date = source_of(str(name))
        pct = (lambda v: None if v is None else 100 * float(v))
        out.append({"dataset": name, "mode": s.get("mode"), "rows": s.get("rows"), "rows_total": s.get("rows_total"),
                    "not_predicted": s.get("not_predicted") or 0,
                    "sampled": s.get("sampled") or "", "median_ape_pct": pct(s.get("median_ape")),
                    "mean_ape_pct": pct(s.get("mean_ape")), "max_ape_pct": pct(s.get("max_ape")),
                    "within_20_pct": float((g["ape"].astype(float) <= 0.2).mean() * 100) if len(g) else None,
                    "in_band_pct": pct(s.get("band_coverage")), "band_note": s.get("band_note") or "",
                    "source": src, "date": date, "error": s.get("error")})
    return pd.DataFrame(out)


def rows_note(sampled: str, rows, rows_total, not_predicted, mode) -> str:
    """Why a dataset compares fewer rows than its file holds, in words: the sample taken (quick mode), the rows the
    model could not predict, or the rows a held-out fit used; ``""`` when every row is compared. Never "all rows"
    beside a smaller count.

    >>> rows_note("all rows", 4, 19, 15, "preset")
    '15 not predicted (outside what the model expresses)'
    >>> rows_note("all rows", 12, 12, 0, "preset"), rows_note("all rows", 18, 36, 0, "held-out")
    ('', 'the other rows fitted the constants')
    """
    def count(v):
        return None if v is None or pd.isna(v) else int(v)

    rows, total, missing = count(rows), count(rows_total), count(not_predicted) or 0
    notes = [] if not sampled or sampled == "all rows" else [sampled]
    if missing:
        notes.append(f"{missing:,} not predicted (outside what the model expresses)")
    elif not notes and rows is not None and total is not None and rows < total and mode == "held-out":
        notes.append("the other rows fitted the constants")
    return "; ".join(notes)


def error_table_html(table: pd.DataFrame) -> str:
    """The error table as an HTML ``<table>`` (percentages with one decimal)."""
    def pct(v, digits=1):
        return "" if v is None or pd.isna(v) else f"{v:.{digits}f}%"

    head = ["dataset", "mode", "rows compared", "median APE", "mean APE", "max APE", "within ±20%",
            "in the 80% band", "source", "date of the data"]
    lines = ["<table class='errors'>", "<thead><tr>" + "".join(f"<th>{h}</th>" for h in head) + "</tr></thead>",
             "<tbody>"]
    for r in table.itertuples():
        rows = "" if r.rows is None or pd.isna(r.rows) else f"{int(r.rows):,}"
        if r.rows_total is not None and not pd.isna(r.rows_total):
            rows += f" of {int(r.rows_total):,}"
        why = rows_note(r.sampled, r.rows, r.rows_total, getattr(r, "not_predicted", 0), r.mode)
        rows += f"<br><small>{_html.escape(why)}</small>" if why else ""
        rows += f"<br><b>error:</b> {_html.escape(str(r.error))}" if r.error else ""
        cells = [_html.escape(str(r.dataset)), _html.escape(str(r.mode or "")), rows, pct(r.median_ape_pct),
                 pct(r.mean_ape_pct), pct(r.max_ape_pct), pct(r.within_20_pct, 0),
                 pct(getattr(r, "in_band_pct", None), 0) or f"<small>{_html.escape(getattr(r, 'band_note', '') or '')}"
                 "</small>", _html.escape(r.source),
                 _html.escape(r.date)]
        lines.append("<tr>" + "".join(f"<td>{c}</td>" for c in cells) + "</tr>")
    lines.append("</tbody></table>")
    return "\n".join(lines)


def log_ticks(axis, lo: float, hi: float) -> None:
    """Unlabelled minor ticks on a log ``axis``; over less than two decades, ticks at 1, 2, 5 of each
    decade labelled as plain numbers. The ticks are those of the log scale's own locators (matplotlib 3.11
    ``scale.py`` ``LogScale.set_default_locators_and_formatters``: ``LogLocator(10)`` and, minor,
    ``LogLocator(10, None)``), in the view only (:class:`InViewLogLocator`).

    >>> from matplotlib.figure import Figure
    >>> ax = Figure().subplots()
    >>> ax.set_xscale("log"); _ = ax.set_xlim(3, 700); log_ticks(ax.xaxis, 3, 700)
    >>> [float(x) for x in ax.xaxis.get_majorticklocs()], len(ax.xaxis.get_minorticklocs())
    ([10.0, 100.0], 21)
    """
    from matplotlib.ticker import FuncFormatter, NullFormatter

    axis.set_minor_formatter(NullFormatter())
    axis.set_minor_locator(InViewLogLocator(10.0, None))
    if hi / lo < 100:
        axis.set_major_locator(InViewLogLocator(10.0, (1.0, 2.0, 5.0)))
        axis.set_major_formatter(FuncFormatter(plain_number))
    else:
        axis.set_major_locator(InViewLogLocator(10.0))


class InViewLogLocator(LogLocator):
    """A ``LogLocator`` that gives the ticks in its axis' view only (and any within a factor 1.001 of it).
    matplotlib's also gives those of the decade beyond each end (3.11 ``ticker.py`` ``LogLocator.tick_values``), for
    which the axis makes a tick (five artists) that it then leaves undrawn (``axis.py`` ``Axis._update_ticks`` draws
    those within the view, to a relative 1e-10 of its log width): the same ticks are drawn, with a quarter fewer
    made on the validation figures. The labels are the same: a log formatter labels a tick by its value and the
    view (``LogFormatter.set_locs`` ignores the locations). A module-level class, so that a figure using it can be
    pickled (:func:`._plot.figure_token`).

    >>> from matplotlib.figure import Figure
    >>> ax = Figure().subplots()
    >>> ax.set_yscale("log"); _ = ax.set_ylim(0.2, 30); ax.yaxis.set_major_locator(InViewLogLocator(10.0))
    >>> [float(x) for x in ax.yaxis.get_majorticklocs()]
    [1.0, 10.0]
    """

    def __call__(self):
        locs = np.asarray(super().__call__())
        lo, hi = sorted(self.axis.get_view_interval())
        return locs[(locs >= lo / 1.001) & (locs <= hi * 1.001)]


def plain_number(v, _pos=None) -> str:
    """A tick label as a plain number (``%g``); a module-level function, so that a figure using it can be pickled
    (:func:`._plot.figure_token`).

    >>> plain_number(0.5), plain_number(200.0)
    ('0.5', '200')
    """
    return f"{v:g}"


def validation_scatter(df: pd.DataFrame, dataset: str | None = None, ax=None):
    """Predicted against measured for one dataset (log-log), the line y = x and the ±20% band.

    >>> df = pd.DataFrame({"dataset": "d", "measured": [1.0, 2.0], "predicted": [1.1, 1.8], "unit": "s",
    ...                    "ape": [0.1, 0.1]})
    >>> validation_scatter(df, "d").get_xscale()
    'log'
    """
    ax = new_axes(ax, (4.5, 4.5))
    g = predicted_rows(df if dataset is None else df[df["dataset"] == dataset])
    name = dataset if dataset is not None else "all rows"
    mode = f" ({g['mode'].iloc[0]})" if "mode" in g and len(g) and g["mode"].nunique() == 1 else ""
    if not len(g):
        ax.text(0.5, 0.5, "no predicted rows", ha="center", va="center", transform=ax.transAxes)
        ax.set_title(f"{name}{mode}", fontsize=9)
        return ax
    m, p = g["measured"].to_numpy(float), g["predicted"].to_numpy(float)
    lo, hi = min(m.min(), p.min()) / 1.5, max(m.max(), p.max()) * 1.5
    xs = np.array([lo, hi])
    ax.fill_between(xs, xs * 0.8, xs * 1.2, color="0.6", alpha=0.35, lw=0, label="±20%", zorder=1)
    ax.plot(xs, xs, color="k", lw=1, label="y = x", zorder=3)
    ax.scatter(m, p, s=10 if len(g) > 200 else 18, alpha=0.5 if len(g) > 200 else 0.8, color="tab:blue", lw=0,
               zorder=2)
    if "p10" in g and np.isfinite(g["p10"].astype(float)).any():  # the predictions' 80% bands (uncertainty.py)
        b = g[np.isfinite(g["p10"].astype(float))]
        ax.vlines(b["measured"].astype(float), b["p10"].astype(float), b["p90"].astype(float), color="tab:blue",
                  alpha=0.35, lw=1, zorder=2, label="80% band")
    ax.set_xscale("log")
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        log_ticks(axis, lo, hi)
    ax.set_xlim(lo, hi)
    ax.set_ylim(lo, hi)
    ax.set_aspect("equal")
    unit = ", ".join(sorted(set(g["unit"].astype(str)))) if "unit" in g else ""
    ax.set_xlabel(f"measured ({unit})")
    ax.set_ylabel(f"predicted ({unit})")
    ape = g["ape"].astype(float) * 100
    ax.set_title(f"{textwrap.fill(name + mode, 40)}\n{len(g):,} rows, median APE {ape.median():.1f}%, "
                 f"{(ape <= 20).mean():.0%} within ±20%", fontsize=9)
    ax.grid(True, which="major", alpha=0.3)
    legend_outside(ax, "below", ncol=3, below=-0.2)
    return ax
