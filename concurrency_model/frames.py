"""A table through the persistent cache: a frame computed once for the package's sources (and its arguments).

The serving frames of the report (``report.inference``) price a few hundred decoder passes on every run, warm or
not, about 4 s of CPU; the nccl-tests fits (``validate.collectives``) run hundreds of least-squares fits.
:func:`cached_frame` keeps such a frame in :func:`concurrency_model.compiled.arrays` (keyed, as every entry there,
by the package's version and sources, with the frame's label and arguments, and here the versions of numpy and
pandas): a later process reads its columns back bit for bit. Only plain frames are kept: a ``RangeIndex``, string
column names, no ``attrs``, and columns of float, integer or bool numbers or of strings (pandas' ``str`` dtype, or
``object`` holding only ``str``; without NUL characters); any other frame is returned as built, every time. A frame
that reads a file outside the package passes that file's hash in its arguments (the key sees nothing else).
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import pandas as pd

from .compiled import arrays


def _storable(df: pd.DataFrame) -> bool:
    if df.attrs or not isinstance(df.index, pd.RangeIndex) or df.index.start != 0 or df.index.step != 1:
        return False
    if not all(isinstance(c, str) for c in df.columns) or df.columns.has_duplicates:
        return False
    for name in df.columns:
        col = df[name]
        if col.dtype.kind in "fiub" and isinstance(col.dtype, np.dtype):
            continue
        # no NUL: numpy's fixed-width strings drop trailing NULs
        if (isinstance(col.dtype, pd.StringDtype) or col.dtype == object) and \
                all(type(v) is str and "\0" not in v for v in col):
            continue
        return False
    return True


def _to_arrays(df: pd.DataFrame) -> dict:
    out = {"names": np.array(list(df.columns), dtype=str), "dtypes": np.array([str(t) for t in df.dtypes], dtype=str)}
    for i, name in enumerate(df.columns):
        col = df[name]
        out[f"c{i}"] = col.to_numpy() if isinstance(col.dtype, np.dtype) and col.dtype != object else \
            np.array(col.tolist(), dtype=str)
    return out


def _from_arrays(a: dict) -> pd.DataFrame:
    cols = {}
    for i, (name, dtype) in enumerate(zip(a["names"].tolist(), a["dtypes"].tolist())):
        v = a[f"c{i}"]
        if dtype == "object":
            cols[name] = pd.Series(v.tolist(), dtype=object)
        elif v.dtype.kind == "U":
            cols[name] = pd.Series(v.tolist(), dtype=dtype)
        else:
            cols[name] = pd.Series(v, dtype=v.dtype)
    return pd.DataFrame(cols, columns=a["names"].tolist())


def cached_frame(label: str, args: tuple, build: Callable[[], pd.DataFrame]) -> pd.DataFrame:
    """``build()``, a frame that depends on nothing but the package and ``args`` (numbers and strings, keyed by
    ``repr``; a frame built from data passes its data's hash), through the persistent cache (module docstring). A
    frame that cannot be kept is returned as built.

    >>> f = cached_frame("doc.frame", (2,), lambda: pd.DataFrame({"x": [1.5, 2.5], "name": ["a", "b"]}))
    >>> f["x"].tolist(), f["name"].tolist()
    ([1.5, 2.5], ['a', 'b'])
    """
    token = (args, np.__version__, pd.__version__)
    built: list = []

    def make() -> dict:
        df = build()
        built.append(df)
        if not _storable(df):
            raise _NotStorable
        return _to_arrays(df)

    try:
        a = arrays(f"frame.{label}", token, make)
    except _NotStorable:
        return built[0]
    return built[0] if built else _from_arrays(a)


class _NotStorable(Exception):
    """The frame built cannot be kept (see :func:`_storable`)."""
