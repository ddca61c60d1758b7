"""The validation figures' log axes make ticks in their view only (``report.accuracy.InViewLogLocator``): the ticks
drawn, and their labels, are those of matplotlib's own log locators."""
from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from matplotlib.figure import Figure
from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

from concurrency_model.report.accuracy import InViewLogLocator, log_ticks, plain_number


def _drawn(axis) -> list[tuple[float, str]]:
    return sorted((float(t.get_loc()), t.label1.get_text()) for t in axis._update_ticks())


@settings(max_examples=40, deadline=None)
@given(st.floats(-6, 8), st.floats(0.05, 14))
def test_the_ticks_drawn_are_those_of_the_log_scale(lo_exp, decades):
    lo, hi = 10.0**lo_exp, 10.0 ** (lo_exp + decades)
    own, plain = Figure().subplots(), Figure().subplots()
    for ax in (own, plain):
        ax.set_xscale("log")
        ax.set_xlim(lo, hi)
    log_ticks(own.xaxis, lo, hi)
    plain.xaxis.set_minor_formatter(NullFormatter())
    if hi / lo < 100:  # log_ticks' own ticks at 1, 2, 5 a decade, also in the plain one, unclipped
        plain.xaxis.set_major_locator(LogLocator(base=10, subs=(1.0, 2.0, 5.0)))
        plain.xaxis.set_major_formatter(FuncFormatter(plain_number))
    assert _drawn(own.xaxis) == _drawn(plain.xaxis)
    made = len(own.xaxis.get_majorticklocs()) + len(own.xaxis.get_minorticklocs())
    assert made - len(_drawn(own.xaxis)) <= 2  # at most one made beyond each end (within its factor 1.001 of slack)


def test_it_gives_the_ticks_in_view_of_a_reversed_axis():
    ax = Figure().subplots()
    ax.set_yscale("log")
    ax.set_ylim(500, 2)
    ax.yaxis.set_major_locator(InViewLogLocator(10.0))
    assert [float(x) for x in ax.yaxis.get_majorticklocs()] == [10.0, 100.0]
