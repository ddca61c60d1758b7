"""Convergence points: the data to a target quality at each global batch, from MLPerf or a user's CSV.

MLPerf's reference convergence points (``data/mlperf_rcp_latest.csv``, one row per benchmark and batch, and
``data/mlperf_rcp_runs_long.csv``, one row per reference run; ``mlcommons/logging`` @
``7bbf792686936919201796120b970dd820331099``, ``mlperf_logging/rcp_checker/*/rcps_<benchmark>.json``, see
``data/SOURCES.md``). A benchmark is named as the runs file's ``benchmark`` column (``bert``, ``resnet``, ``gpt3``,
``llama31_8b``, ...); its points are the newest ruleset's entries (the latest file), the value at each batch is the
checker's olympic mean (mean without the fastest and slowest run, the figure MLPerf's RCP checker compares
against: ``rcp_checker.py`` in the same repository), and the runs are that entry's reference runs.

Units differ by benchmark (``convergence_unit``): :func:`short_unit` maps the source's text to ``samples``,
``tokens``, ``epochs``, ``steps`` or ``epoch_num`` (dlrm v1: ``1 + a fraction of an epoch`` as logged,
unverified). The samples per unit (to turn the value into steps, ``steps = value x k / B``) are read from the
file's ``derived_steps_how`` (:func:`samples_per_unit`: 1 for ``samples/BS``, 1/2048 for gpt3's
``tokens/(2048*BS)``, the dataset size of ``epochs*N/BS`` where a source states it); where the file derives none,
steps are unknown (``None``).

A user CSV has the runs file's columns ``global_batch_size``, ``value_to_converge`` and ``convergence_unit`` (one
unit throughout), one row per run, optionally ``samples_per_unit``; the value at a batch is the mean of its runs.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import re

import numpy as np

from ..checks import did_you_mean, number
from ..datasets import data_dir, read_checked

LATEST = "mlperf_rcp_latest.csv"
RUNS = "mlperf_rcp_runs_long.csv"
USER_COLUMNS = ("global_batch_size", "value_to_converge", "convergence_unit")
# the source's unit text -> a short unit, checked in this order (the texts are the files' convergence_unit values)
UNIT_WORDS = (("epoch_num as logged", "epoch_num"), ("appears to be training samples", "samples"),
              ("training samples", "samples"), ("training tokens", "tokens"), ("training steps", "steps"),
              ("epochs", "epochs"), ("samples", "samples"), ("tokens", "tokens"), ("steps", "steps"))


def short_unit(text: str) -> str:
    """The short unit of a ``convergence_unit`` text (the text itself, stripped, where no word of it is known).

    >>> short_unit("training samples (MLLOG epoch_num = samples)"), short_unit("epochs (fraction of one epoch)")
    ('samples', 'epochs')
    """
    low = str(text).strip().lower()
    for word, unit in UNIT_WORDS:
        if low.startswith(word) or word in low:
            return unit
    return str(text).strip()


def samples_per_unit(how: str) -> float | None:
    """Samples per unit of the value from the data's ``derived_steps_how`` text (``None``: not derived).

    >>> samples_per_unit("epochs*1281167/BS (ImageNet-1k)"), samples_per_unit("tokens/(2048*BS) (GPT-3)")
    (1281167.0, 0.00048828125)
    >>> samples_per_unit("samples/BS"), samples_per_unit("not derived (epoch size not stated in source)")
    (1.0, None)
    """
    how = str(how).strip()
    if m := re.match(r"epochs\s*\*\s*([0-9]+)\s*/\s*BS", how):
        return float(m.group(1))
    if m := re.match(r"tokens\s*/\s*\(\s*([0-9]+)\s*\*\s*BS\s*\)", how):
        return 1.0 / float(m.group(1))
    if re.match(r"(samples|value)\s*/\s*BS", how):
        return 1.0
    return None


@dataclass(frozen=True)
class Points:
    """The convergence points of one workload: ``batch`` (distinct global batches, ascending), ``value`` (the data
    to the target at each, in ``unit``), ``runs`` (each batch's runs), ``samples_per_unit`` (``None``: unknown)."""

    name: str
    unit: str
    unit_source: str
    batch: np.ndarray
    value: np.ndarray
    runs: tuple
    samples_per_unit: float | None
    source: str

    def without(self, i: int) -> "Points":
        """The points less the ``i``-th batch (leave-one-batch-out)."""
        keep = [j for j in range(len(self.batch)) if j != i]
        return Points(self.name, self.unit, self.unit_source, self.batch[keep], self.value[keep],
                      tuple(self.runs[j] for j in keep), self.samples_per_unit, self.source)


@lru_cache(maxsize=1)
def _tables():
    latest = read_checked(data_dir() / LATEST, ("global_batch_size", "olympic_mean_rcp_checker", "n_runs"),
                          ("benchmark_family", "ruleset_version", "convergence_unit", "derived_steps_how",
                           "source_path", "source_key"))
    runs = read_checked(data_dir() / RUNS, ("global_batch_size", "run_index", "value_to_converge"),
                        ("benchmark", "ruleset_version", "convergence_unit", "source_path", "source_key"))
    runs = runs.merge(latest[["source_path", "source_key", "benchmark_family"]], on=["source_path", "source_key"])
    return latest, runs


def benchmarks() -> list[str]:
    """The MLPerf benchmarks with convergence points, by the runs file's name.

    >>> {"bert", "resnet", "gpt3", "llama31_8b"} <= set(benchmarks())
    True
    """
    return list(_names())


@lru_cache(maxsize=1)
def _names() -> tuple:
    return tuple(sorted(_tables()[1]["benchmark"].unique()))


def mlperf(name: str, field: str = "benchmark") -> Points:
    """The newest MLPerf reference convergence points of benchmark ``name`` (``ValueError`` naming ``field``
    for an unknown one).

    >>> p = mlperf("resnet")
    >>> p.unit, [int(b) for b in p.batch[:3]], round(p.samples_per_unit)
    ('epochs', [1632, 3264, 4096], 1281167)
    """
    names = _names()
    if name not in names:
        raise ValueError(f"{field}: unknown MLPerf benchmark {name!r}{did_you_mean(name, names)}; allowed: "
                         f"{', '.join(names)}")
    p = _mlperf_points(name)
    # the caller's own arrays (the cached ones stay as read): a copy costs microseconds, the tables' filters
    # milliseconds (a target's every check reads its points, :func:`.target.curve_of`)
    return replace(p, batch=p.batch.copy(), value=p.value.copy(), runs=tuple(r.copy() for r in p.runs))


@lru_cache(maxsize=None)
def _mlperf_points(name: str) -> Points:
    latest, runs = _tables()
    r = runs[runs["benchmark"] == name]
    rows = latest[latest["benchmark_family"] == r["benchmark_family"].iloc[0]].sort_values("global_batch_size")
    batch = rows["global_batch_size"].to_numpy(float)
    value = rows["olympic_mean_rcp_checker"].to_numpy(float)
    spread = tuple(r.loc[r["source_key"] == k, "value_to_converge"].to_numpy(float) for k in rows["source_key"])
    k = samples_per_unit(rows["derived_steps_how"].iloc[0])
    text = str(rows["convergence_unit"].iloc[0])
    source = (f"MLPerf {rows['benchmark_family'].iloc[0]} v{rows['ruleset_version'].iloc[0]} reference convergence "
              f"points (mlcommons/logging @ 7bbf792, {rows['source_path'].iloc[0]})")
    return Points(name, short_unit(text), text, batch, value, spread, k, source)


def from_csv(path, field: str = "csv") -> Points:
    """A user's convergence points from a CSV of runs (columns :data:`USER_COLUMNS`, optional ``samples_per_unit``).
    ``ValueError`` names a missing column (file, row 1), a bad value (file, row, column), a mixed unit, or fewer
    than two distinct batches.

    >>> import tempfile, os
    >>> f = os.path.join(tempfile.mkdtemp(), "runs.csv")
    >>> _ = open(f, "w").write("global_batch_size,value_to_converge,convergence_unit\\n"
    ...                        "64,1000,samples\\n64,1100,samples\\n256,1500,samples\\n")
    >>> p = from_csv(f)
    >>> p.unit, p.batch.tolist(), p.value.tolist(), p.samples_per_unit
    ('samples', [64.0, 256.0], [1050.0, 1500.0], 1.0)
    """
    path = Path(path)
    df = read_checked(path, USER_COLUMNS[:2], USER_COLUMNS[2:], ())
    if df.empty:
        raise ValueError(f"{path}: no rows; at least two distinct global_batch_size values are needed to fit")
    for col in USER_COLUMNS[:2]:
        zero = df[col].astype(float) <= 0
        if zero.any():
            row = int(zero.to_numpy().argmax())
            raise ValueError(f"{path}: row {row + 2}, column {col!r}: must be > 0, got {df[col].iloc[row]!r}")
    units = df["convergence_unit"].astype(str).map(short_unit).unique()
    if len(units) != 1:
        raise ValueError(f"{path}: column 'convergence_unit': one unit throughout, got {', '.join(map(str, units))}")
    unit = str(units[0])
    k = None
    if "samples_per_unit" in df.columns:
        given = df["samples_per_unit"].dropna().unique()
        if len(given) != 1:
            raise ValueError(f"{path}: column 'samples_per_unit': one value throughout, got {len(given)}")
        k = number(f"{path}: column 'samples_per_unit'", float(given[0]))
    elif unit == "samples":
        k = 1.0
    g = df.groupby("global_batch_size")["value_to_converge"]
    batch = np.array(sorted(g.groups), dtype=float)
    if len(batch) < 2:
        raise ValueError(f"{path}: column 'global_batch_size': at least two distinct batch sizes are needed to fit, "
                         f"got {len(batch)}")
    runs = tuple(g.get_group(b).to_numpy(float) for b in sorted(g.groups))
    value = np.array([r.mean() for r in runs])
    return Points(path.stem, unit, str(df["convergence_unit"].iloc[0]), batch, value, runs, k, f"user CSV {path}")


__all__ = ["Points", "samples_per_unit", "benchmarks", "mlperf", "from_csv", "short_unit", "USER_COLUMNS", "LATEST",
           "RUNS"]
