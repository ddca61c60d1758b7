"""The frame cache (``frames.cached_frame``: the report's serving frames, the collectives fits): a frame read back is
the frame built, column for column and bit for bit; a frame it cannot keep is returned as built, and built again
next time."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import compiled
from concurrency_model.report import inference
from concurrency_model.frames import _from_arrays, _storable, _to_arrays, cached_frame


def _same(a: pd.DataFrame, b: pd.DataFrame) -> bool:
    if list(a.columns) != list(b.columns) or list(a.dtypes) != list(b.dtypes) or not a.index.equals(b.index):
        return False
    for c in a.columns:
        x, y = a[c].to_numpy(), b[c].to_numpy()
        if x.dtype.kind in "fiub":
            if x.tobytes() != y.tobytes():
                return False
        elif x.tolist() != y.tolist() or [type(v) for v in x] != [type(v) for v in y]:
            return False
    return True


def _mixed() -> pd.DataFrame:
    return pd.DataFrame({"x": [0.1, np.nan, -0.0, np.inf], "n": [1, 2, 3, 2**40], "ok": [True, False, True, True],
                         "name": ["a", "bé", "", "d"], "obj": pd.Series(["p", "q", "r", "s"], dtype=object)})


def test_read_back_is_the_frame_built(cache):
    calls = []

    def build():
        calls.append(1)
        return _mixed()

    first = cached_frame("test.mixed", (1,), build)
    second = cached_frame("test.mixed", (1,), build)
    assert len(calls) == 1  # the second read back, not built
    assert _same(first, _mixed()) and _same(second, _mixed())
    assert second["obj"].dtype == object and str(second["name"].dtype) == str(_mixed()["name"].dtype)
    cached_frame("test.mixed", (2,), build)  # other arguments: another entry
    assert len(calls) == 2


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.floats(allow_nan=True, allow_infinity=True), st.integers(-2**62, 2**62),
                          st.text(st.characters(blacklist_characters="\0"), max_size=5)), min_size=1, max_size=20))
def test_round_trip_is_exact(rows):
    df = pd.DataFrame(rows, columns=["f", "i", "s"])
    assert _storable(df)
    assert _same(_from_arrays(_to_arrays(df)), df)


def test_frames_it_cannot_keep_are_returned_as_built(cache):
    odd = [pd.DataFrame({"o": pd.Series(["a", None], dtype=object)}),  # an object column with a None
           pd.DataFrame({"x": [1.0, 2.0]}, index=[3, 4]),  # not a RangeIndex from 0
           pd.DataFrame({"t": pd.to_datetime(["2026-01-01", "2026-01-02"])}),  # not a plain number or string
           pd.DataFrame({"s": ["a\0", "b"]})]  # a NUL, which numpy's fixed-width strings would drop
    with_attrs = pd.DataFrame({"x": [1.0]})
    with_attrs.attrs["note"] = "kept with the frame"
    for k, df in enumerate([*odd, with_attrs]):
        assert not _storable(df)
        written = compiled.STATS["written"]
        assert cached_frame(f"test.odd{k}", (), lambda df=df: df) is df
        assert compiled.STATS["written"] == written


def test_report_serving_frame_read_back_equals_its_build(cache):
    built = inference.batching_frame()
    cached_frame("test.batching", (), inference.batching_frame)
    assert _same(cached_frame("test.batching", (), inference.batching_frame), built)
