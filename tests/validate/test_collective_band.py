"""The preset band of the all-reduce rows, one leave-one-system-out spread a system (the report's speed, issue 38):
the same numbers, bit for bit, as the spread computed row by row."""
from __future__ import annotations

import numpy as np
import pandas as pd
from hypothesis import given, settings, strategies as st

from concurrency_model.uncertainty import leave_one_out_sigma, lognormal_band
from concurrency_model.validate.adapters import collective_band


def row_by_row(p: pd.DataFrame):
    r, g = np.log(p["predicted_s"] / p["measured_s"]).to_numpy(), p["system"].to_numpy()
    return lognormal_band(p["predicted_s"], np.array([leave_one_out_sigma(r, g, s) for s in g]))


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(["a", "b", "c", "d"]), st.floats(1e-6, 1.0), st.floats(1e-6, 1.0)),
                min_size=1, max_size=30))
def test_preset_band_is_the_row_by_row_band(rows):
    p = pd.DataFrame(rows, columns=["system", "predicted_s", "measured_s"])
    p["system"] = p["system"].astype(object)
    got, want = collective_band(p, "preset"), row_by_row(p)
    for x, y in zip(got, want):
        assert np.asarray(x, float).tobytes() == np.asarray(y, float).tobytes()


def test_preset_band_by_hand():
    # systems a (two rows) and b (one): a's band from b's residual alone, b's from a's two
    p = pd.DataFrame({"system": ["a", "a", "b"], "predicted_s": [1.0, 2.0, 1.0], "measured_s": [1.0, 1.0, np.e]})
    lo, hi = collective_band(p, "preset")
    sigma_a = 1.0  # b's one log ratio, -1: its group median -1, no scatter
    sigma_b = np.sqrt(np.log(2.0) ** 2 / 4 + np.log(2.0) ** 2 / 4)  # a's median ln2/2, scatter +-ln2/2
    want_lo, want_hi = lognormal_band(p["predicted_s"], np.array([sigma_a, sigma_a, sigma_b]))
    assert np.allclose(lo, want_lo, rtol=1e-12) and np.allclose(hi, want_hi, rtol=1e-12)
