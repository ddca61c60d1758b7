"""One draw per figure (``report._plot._render``: the constrained layout run once, then ``savefig`` without an
engine) gives the PNG that ``savefig`` gives with its own two draws, byte for byte."""
from __future__ import annotations

import contextlib
import io

import numpy as np
import pytest
from matplotlib.axis import Axis
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.layout_engine import ConstrainedLayoutEngine

from concurrency_model.report import _plot


def _savefig(fig, dpi: int = 100) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)  # matplotlib's own: a draw to lay out, then the draw
    return buf.getvalue()


def _log_scatter():
    fig, ax = _plot.figure(4, 3)
    x = np.random.default_rng(0).lognormal(size=40)
    ax[0, 0].scatter(x, 2 * x, s=8, label="points")
    ax[0, 0].set_xscale("log")
    ax[0, 0].set_yscale("log")
    ax[0, 0].set_title("a title that takes room")
    _plot.legend_outside(ax[0, 0])
    return fig


def _grid_with_colorbar():
    fig, ax = _plot.figure(6, 4, 2, 2, sharex=True)
    for i, a in enumerate(ax.flat):
        a.plot(np.arange(10), np.arange(10) ** (i + 1), label=f"power {i + 1}")
        a.set_ylabel(f"y{i}" * (i + 1))
    im = ax[0, 1].imshow(np.arange(12.0).reshape(3, 4), aspect="auto")
    fig.colorbar(im, ax=ax[:, 1])
    fig.suptitle("four panels")
    _plot.legend_outside(ax[1, 0], "below", ncols=2)
    return fig


@pytest.mark.parametrize("make", [_log_scatter, _grid_with_colorbar])
@pytest.mark.parametrize("dpi", [100, 60])
def test_one_draw_gives_savefigs_bytes(make, dpi):
    fig = make()
    assert _plot._render(fig, dpi, None) == _savefig(make(), dpi)
    assert fig.get_layout_engine() is None and isinstance(fig.canvas, FigureCanvasAgg)  # laid out once, no engine


def test_a_figure_without_axes_or_engine_is_left_to_savefig():
    from matplotlib.figure import Figure

    def text_only():
        fig = Figure(figsize=(2, 1), layout="constrained")
        fig.text(0.5, 0.5, "no axes")
        return fig

    fig = text_only()
    assert _plot._render(fig, 100, None) == _savefig(text_only())
    assert isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine)  # untouched: savefig lays it out
    plain, _ = _plot.figure(2, 2)
    plain.set_layout_engine("none")
    plain.axes[0].plot([0, 1])
    _plot._render(plain, 100, None)
    assert plain.get_layout_engine() is not None and not isinstance(plain.canvas, FigureCanvasAgg)


def test_kept_ticks_are_computed_once_a_state_and_given_back_to_matplotlib():
    fig = _log_scatter()
    axis = fig.axes[0].xaxis
    calls = []
    original = axis._update_ticks
    axis._update_ticks = lambda: calls.append(1) or original()  # counts the real computations under the kept ones
    with _plot._ticks_kept(fig):
        first = axis._update_ticks()
        again = axis._update_ticks()
        assert len(calls) == 1 and [t.get_loc() for t in again] == [t.get_loc() for t in first]
        fig.axes[0].set_xlim(10, 1000)  # another view: computed afresh, with its ticks
        narrower = sorted(t.get_loc() for t in axis._update_ticks() if t in axis.majorTicks)
        assert len(calls) == 2 and narrower == [10, 100, 1000] != sorted(t.get_loc() for t in first)
    del axis._update_ticks
    assert "_update_ticks" not in axis.__dict__ and "_get_ticklabel_bboxes" not in axis.__dict__


def test_a_render_computes_ticks_a_few_times_an_axis_not_at_every_call(monkeypatch):
    counted = {"n": 0}
    original = Axis._update_ticks

    def count(self):
        counted["n"] += 1
        return original(self)

    monkeypatch.setattr(Axis, "_update_ticks", count)
    kept_png = _plot._render(_log_scatter(), 100, None)
    kept, counted["n"] = counted["n"], 0
    monkeypatch.setattr(_plot, "_ticks_kept", lambda fig: contextlib.nullcontext())
    assert _plot._render(_log_scatter(), 100, None) == kept_png
    assert kept * 3 < counted["n"]  # measured: 6 against 35 for the two axes


def test_figures_share_one_math_text_parser_and_draw_the_same():
    first, second = _log_scatter(), _log_scatter()
    assert _plot._render(first, 100, None) == _plot._render(second, 100, None)  # the 10^k labels parsed once
    assert first.canvas.get_renderer().mathtext_parser is second.canvas.get_renderer().mathtext_parser


def _nudge(fig):
    """A last step that draws the figure to measure a text, then moves it (as adjustText's placement does)."""
    fig.draw_without_rendering()
    text = fig.axes[0].texts[0]
    width = text.get_window_extent().width
    text.set_position((1 + width / 400, 1))


def _labelled():
    fig = _log_scatter()
    fig.axes[0].text(1, 1, "a label to move", fontsize=7)
    return fig


def test_a_last_step_that_draws_gives_what_it_gives_before_savefig():
    fig = _labelled()
    png = _plot._render(fig, 100, lambda: _nudge(fig))
    plain = _labelled()
    _nudge(plain)
    assert png == _savefig(plain)


def test_axes_sharing_their_tickers_are_left_as_they_are():
    fig = _grid_with_colorbar()  # sharex=True: the four x axes share one Ticker
    with _plot._ticks_kept(fig):
        kept = [axis for ax in fig.axes for axis in (ax.xaxis, ax.yaxis) if "_update_ticks" in axis.__dict__]
    shared = {id(ax.xaxis.major) for ax in fig.axes[:4]}
    assert len(shared) == 1 and all(ax.yaxis in kept and ax.xaxis not in kept for ax in fig.axes[:4])
