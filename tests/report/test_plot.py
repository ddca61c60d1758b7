"""One draw per figure (``report._plot._render``: the constrained layout run once, then ``savefig`` without an
engine) gives the PNG that ``savefig`` gives with its own two draws, byte for byte."""
from __future__ import annotations

import io

import numpy as np
import pytest
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
