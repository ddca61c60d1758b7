"""The report's figure cache (``report._plot.png_bytes``): the bytes read back are the bytes drawn, the key follows
the figure and is the same in every process, and a figure that cannot be pickled is still drawn."""
from __future__ import annotations

import functools
import subprocess
import sys
import textwrap

import matplotlib
import numpy as np
from matplotlib.ticker import FuncFormatter

from concurrency_model import compiled
from concurrency_model.report import _plot
from concurrency_model.report._plot import figure, figure_token, png_bytes


def _scatter(seed: int = 0, label: str = "y = x"):
    rng = np.random.default_rng(seed)
    fig, ax = figure(3, 3)
    x = rng.lognormal(size=50)
    ax[0, 0].scatter(x, x * rng.lognormal(0, 0.2, size=50), s=8)
    ax[0, 0].plot([0.1, 10], [0.1, 10], label=label)
    ax[0, 0].set_xscale("log")
    ax[0, 0].set_yscale("log")
    _plot.legend_outside(ax[0, 0], "below")
    return fig


def _direct(fig, dpi: int = 100) -> bytes:
    return _plot._render(fig, dpi, None)


def test_cached_bytes_are_the_drawn_bytes(cache):
    first = png_bytes(_scatter())
    hits = compiled.STATS["hits"]
    again = png_bytes(_scatter())  # a new figure object of the same state: read back, not drawn
    assert compiled.STATS["hits"] == hits + 1
    assert first == again == _direct(_scatter())
    assert first[:8] == b"\x89PNG\r\n\x1a\n"
    assert len([p for p in compiled.entries(cache) if p.name.startswith("report.png-")]) == 1


def test_key_follows_the_figure_settings_and_resolution():
    base = figure_token(_scatter())
    assert base == figure_token(_scatter())
    assert base != figure_token(_scatter(seed=1))  # other data
    assert base != figure_token(_scatter(label="y = 2x"))  # another legend text
    assert base != figure_token(_scatter(), dpi=50)
    with matplotlib.rc_context({"lines.linewidth": 3.0}):  # a setting read while drawing
        assert base != figure_token(_scatter())


def test_key_is_the_same_in_another_process():
    code = textwrap.dedent("""
        import numpy as np
        from concurrency_model.report._plot import figure, figure_token, legend_outside
        rng = np.random.default_rng(0)
        fig, ax = figure(3, 3)
        x = rng.lognormal(size=50)
        ax[0, 0].scatter(x, x * rng.lognormal(0, 0.2, size=50), s=8)
        ax[0, 0].plot([0.1, 10], [0.1, 10], label="y = x")
        ax[0, 0].set_xscale("log")
        ax[0, 0].set_yscale("log")
        legend_outside(ax[0, 0], "below")
        print(figure_token(fig))
    """)
    # hash randomisation differs between the two processes: a key that depends on it (ids, set order) differs.
    # Two fresh processes, as two report runs are: in this test process, other tests may have changed rcParams or
    # drawn figures that share matplotlib's cached objects (a marker's path) with this one, which changes the
    # pickle's memo and so the key (a needless redraw, never a wrong hit: the pickle holds every value drawn)
    out = [subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
           for _ in range(2)]
    assert out[0] == out[1] and len(out[0]) == 64


def test_a_figure_that_cannot_be_pickled_is_drawn_every_time(cache):
    def made():  # a new figure each time: drawing one figure twice need not give the same bytes (its layout moves)
        fig = _scatter()
        fig.axes[0].xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:.1f}"))
        return fig

    assert figure_token(made()) is None
    written = compiled.STATS["written"]
    assert png_bytes(made()) == _direct(made())
    assert compiled.STATS["written"] == written


def _move_label(text) -> None:
    text.set_position((0.9, 0.1))


def test_finish_runs_before_drawing_and_is_skipped_on_a_hit(cache):
    def made():
        fig = _scatter()
        text = fig.axes[0].text(0.5, 0.5, "label", transform=fig.axes[0].transAxes)
        return fig, text, functools.partial(_move_label, text)

    fig, text, finish = made()
    drawn = png_bytes(fig, finish=finish)
    assert text.get_position() == (0.9, 0.1)
    fig2, text2, finish2 = made()
    assert png_bytes(fig2, finish=finish2) == drawn
    assert text2.get_position() == (0.5, 0.5)  # read back: the label was not moved, nor the figure drawn
    fig3, _, _ = made()
    assert png_bytes(fig3) != drawn  # without the step: another figure, another key


def test_cache_off_draws(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    monkeypatch.setenv(compiled.ENV, str(blocker / "cache"))  # cannot be created: the cache is off
    compiled.reset()
    try:
        assert png_bytes(_scatter()) == _direct(_scatter())
        assert "cache off" in capsys.readouterr().err
    finally:
        compiled.reset()


def test_zoo_labels_placed_at_drawing_give_the_figure_placed_at_once(cache):
    """The report keys the zoo figure before adjustText moves its labels and places them only when it draws: the
    PNG is the one of the figure whose labels were placed as it was made (zoo.work_depth), drawn or read back."""
    from concurrency_model.report import zoo

    zf = zoo.zoo_frame(models=["lenet5", "alexnet", "resnet50", "vgg16"])

    def at_once():
        fig, ax = figure(11, 5.2, 1, 2, width_ratios=[1.25, 1])
        zoo.average_parallelism(zf, ax=ax[0, 1])
        zoo.work_depth(zf, ax=ax[0, 0])
        return fig

    def later():
        fig, ax = figure(11, 5.2, 1, 2, width_ratios=[1.25, 1])
        zoo.average_parallelism(zf, ax=ax[0, 1])
        return fig, zoo.work_depth_unplaced(zf, ax=ax[0, 0])[1]

    expected = _direct(at_once())
    fig, _ = later()
    assert _direct(fig) != expected  # the labels not placed: another figure
    fig, place = later()
    hits = compiled.STATS["hits"]
    assert png_bytes(fig, finish=place) == expected
    fig, place = later()
    assert png_bytes(fig, finish=place) == expected
    assert compiled.STATS["hits"] == hits + 1
