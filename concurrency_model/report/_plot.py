"""Small matplotlib helpers shared by the report's figure modules.

Figures of the report are :class:`matplotlib.figure.Figure` objects made without pyplot (no global state,
any backend); a figure function called with ``ax=None`` makes its own Axes through pyplot instead, so that
it shows in a notebook.
"""
from __future__ import annotations

import contextlib
import hashlib
import io
import pickle

import numpy as np

from ..compiled import arrays

KiB, MiB, GiB = 2**10, 2**20, 2**30

# one colour per layer kind (roofline) and per allreduce algorithm (collectives), reused across figures
KIND_COLORS = {"conv2d": "tab:green", "linear": "tab:purple", "attention": "tab:blue", "batch_norm": "tab:orange",
               "layer_norm": "gold", "relu": "tab:red", "gelu": "tab:pink", "add": "dimgray", "dropout": "tab:olive",
               "maxpool": "tab:cyan", "avgpool": "tab:brown", "embedding": "navy", "lstm": "black"}


def new_axes(ax=None, figsize=(8.0, 5.0)):
    """``ax`` itself, or a new pyplot Axes of ``figsize`` inches (for interactive use)."""
    if ax is not None:
        return ax
    import matplotlib.pyplot as plt

    return plt.subplots(figsize=figsize, layout="constrained")[1]


def group_lines(ax, frame, by: str, x: str, y: str, scale: float = 1.0, label: str = "{}") -> None:
    """One marked line per value of ``frame[by]`` (in order of appearance): ``y`` times ``scale`` against
    ``x``, labelled ``label.format(value)``."""
    for name, g in frame.groupby(by, sort=False):
        ax.plot(g[x], scale * g[y], marker="o", label=label.format(name))


MAX_WIDTH_IN = 11.0  # at png_bytes' 100 dpi: 1,100 px, shown unscaled in the page's 1,104 px column (html.CSS)


def figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw):
    """A pyplot-free ``Figure`` of ``width x height`` inches and its ``nrows x ncols`` array of Axes; at most
    :data:`MAX_WIDTH_IN` wide, so that a browser at 100% zoom shows it unscaled.

    >>> figure(12, 3)
    Traceback (most recent call last):
    ...
    ValueError: width: 12 inches is wider than the page's 11.0 (1,100 px at 100 dpi)
    """
    from matplotlib.figure import Figure

    if width > MAX_WIDTH_IN:
        raise ValueError(f"width: {width:g} inches is wider than the page's {MAX_WIDTH_IN} (1,100 px at 100 dpi)")

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


def legend_outside(ax, where: str = "right", **kw):
    """The Axes' legend outside its data: to the ``right`` of the axes (top-aligned) or ``below`` them (centred,
    in columns); ``kw`` go to :meth:`~matplotlib.axes.Axes.legend`. Constrained layout makes room for it.

    >>> import matplotlib.pyplot as plt
    >>> ax = plt.subplots()[1]
    >>> _ = ax.plot([0, 1], label="a")
    >>> legend_outside(ax).get_bbox_to_anchor().bounds == ax.bbox.bounds
    False
    """
    kw.setdefault("fontsize", 7)
    if where == "right":
        return ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kw)
    if where == "below":
        kw.setdefault("frameon", False)
        return ax.legend(loc="upper center", bbox_to_anchor=(0.5, kw.pop("below", -0.16)), **kw)
    raise ValueError(f"where: {where!r}; allowed: right, below")


def _render(fig, dpi: int, finish) -> bytes:
    with _ticks_kept(fig):
        if finish is not None:
            if _laid_out_here(fig):  # the last step's draws (adjustText's) on the renderer of the layout and the draw
                _agg_canvas(fig)
            finish()
        _lay_out(fig, dpi)
        buf = io.BytesIO()
        fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


@contextlib.contextmanager
def _ticks_kept(fig):
    """While ``fig`` is laid out and drawn, each x and y axis computes its ticks and their labels' extents once for
    each state of what they are computed from (:func:`_tick_state`), not at every call: matplotlib 3.11 ``axis.py``
    recomputes them (``Axis._update_ticks``: the locator's and formatter's output, every tick moved and relabelled;
    ``Axis._get_ticklabel_bboxes``: every label's extent) each time an axis' tight bbox, its label's position, its
    siblings' tick boxes, its spines' extents (``spines.py`` ``Spine.get_window_extent``) or its draw asks, about
    17 times an axis for a figure laid out once and drawn once, nearly all of them with the same view, position and
    resolution. An axis keeps its last result with the state it was computed in and gives it back while the state is
    the same (a call in another state computes afresh): the ticks and labels are a function of that state, so the
    pixels are those of ``savefig`` alone (tests/report/test_plot.py). The instance attributes that hold the kept
    versions are taken away afterwards (any set before put back). Left as they are: an axis of another class (3D,
    polar), and an axis whose tickers are another's (``sharex``, ``sharey``: ``axes/_base.py`` ``_AxesBase.sharex``
    gives both axes one ``Ticker``, whose locator and formatter then read the view, size and offset of whichever axis
    they were last set to, a state not in this axis' own)."""
    from collections import Counter

    from matplotlib.axis import XAxis, YAxis

    axes = [axis for ax in fig.axes for axis in ax._axis_map.values() if type(axis) in (XAxis, YAxis)]
    tickers = Counter(id(t) for axis in axes for t in (axis.major, axis.minor))
    names = ("_update_ticks", "_get_ticklabel_bboxes")
    kept = [(axis, {k: axis.__dict__[k] for k in names if k in axis.__dict__}) for axis in axes
            if tickers[id(axis.major)] == 1 and tickers[id(axis.minor)] == 1]
    for axis, _ in kept:
        axis._update_ticks, axis._get_ticklabel_bboxes = _kept_tick_methods(axis)
    try:
        yield
    finally:
        for axis, before in kept:
            for k in names:
                if k in before:
                    setattr(axis, k, before[k])
                else:
                    delattr(axis, k)


def _tick_state(axis) -> tuple:
    """What an x or y axis' ticks and labels are computed from during a draw: its view interval, its Axes' box on the
    canvas and the resolution (the ticks' display positions; a locator's tick count follows the axes' size,
    ``Axis.get_tick_space``), its scale, locators and formatters, and its lists of ticks (a reset makes new
    ones). The objects themselves, compared by identity, so that none is freed and its id reused while kept."""
    ax = axis.axes
    return ((tuple(axis.get_view_interval()), ax.bbox.bounds, ax.get_figure(root=True).dpi), axis._scale,
            axis.major.locator, axis.minor.locator, axis.major.formatter, axis.minor.formatter,
            axis.__dict__.get("majorTicks"), axis.__dict__.get("minorTicks"))


def _same(a: tuple, b: tuple) -> bool:
    """Whether two states of :func:`_tick_state` (and more objects after it) are the same: equal numbers, the same
    objects."""
    return len(a) == len(b) and a[0] == b[0] and all(x is y for x, y in zip(a[1:], b[1:]))


def _kept_tick_methods(axis):
    """``axis``'s ``_update_ticks`` and ``_get_ticklabel_bboxes``, each giving back its last result while
    :func:`_tick_state` is the same (and, for the extents, the same ticks and renderer)."""
    update, extents = axis._update_ticks, axis._get_ticklabel_bboxes
    last: dict = {}

    def update_kept():
        state = _tick_state(axis)
        hit = last.get("ticks")
        if hit is None or not _same(hit[0], state):
            hit = last["ticks"] = (state, update())
        return list(hit[1])

    def extents_kept(ticks, renderer):
        state = (*_tick_state(axis), renderer, *ticks)
        hit = last.get("extents")
        if hit is None or not _same(hit[0], state):
            hit = last["extents"] = (state, extents(ticks, renderer))
        return list(hit[1][0]), list(hit[1][1])

    return update_kept, extents_kept


def _lay_out(fig, dpi: int) -> None:
    """Run a figure's constrained layout once at ``dpi`` and take its layout engine away, so that ``savefig`` draws
    the figure once. With a layout engine, matplotlib 3.11 ``backend_bases.FigureCanvasBase.print_figure`` draws the
    figure twice: first with drawing disabled (``renderer._draw_disabled``), to run the engine inside
    ``Figure.draw``, then for real with the engine set to ``"none"``; without an engine it draws once. Here the
    engine runs as that first draw runs it (``LayoutEngine.execute(fig)`` on the Agg renderer of the figure at the
    saving resolution, ``Figure._get_renderer``), and the real draw is the same: the PNG's pixels are those of
    ``savefig`` alone (tests/report/test_plot.py compares them). A pyplot-free figure gets an Agg canvas first, which
    ``savefig`` then prints with instead of a temporary one (``_switch_canvas_and_return_print_method``: a canvas
    with a ``print_png`` is kept), so that the layout and the draw share one renderer
    (``FigureCanvasAgg.get_renderer`` keeps it for the same size and resolution) and its cache of text extents
    (``text._get_text_metrics_with_cache``, one a renderer), as savefig's own two draws do. A figure without Axes,
    or with another engine, is left to ``savefig``."""
    from matplotlib import rc_context

    if not _laid_out_here(fig):
        return
    fig.set_dpi(dpi)
    _agg_canvas(fig)
    try:
        fig.get_layout_engine().execute(fig)
    except ValueError:  # as Figure.draw: the engine gives up (a figure too small), the figure is drawn as it is
        pass
    # no engine at all (``"none"`` would leave a placeholder, and the placeholder the first draw); the rc settings
    # that would choose one for ``None`` held off
    with rc_context({"figure.autolayout": False, "figure.constrained_layout.use": False}):
        fig.set_layout_engine(None)


def _laid_out_here(fig) -> bool:
    """Whether :func:`_lay_out` lays ``fig`` out (a constrained layout and Axes), rather than leaving it to
    ``savefig``."""
    from matplotlib.layout_engine import ConstrainedLayoutEngine

    return isinstance(fig.get_layout_engine(), ConstrainedLayoutEngine) and bool(fig.axes)


def _agg_canvas(fig) -> None:
    """An Agg canvas for a pyplot-free figure (a pyplot figure keeps its own), whose renderer, kept for the figure's
    size and resolution, lays the figure out and draws it (:func:`_lay_out`), with the math-text parser of the
    figures before it (:func:`_share_math_parser`)."""
    from matplotlib.backend_bases import FigureCanvasBase
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    if type(fig.canvas) is FigureCanvasBase:  # a pyplot-free figure (:func:`figure`)
        FigureCanvasAgg(fig)  # (it sets itself as the figure's canvas)
    if isinstance(fig.canvas, FigureCanvasAgg):
        _share_math_parser(fig.canvas.get_renderer())


def _share_math_parser(renderer) -> None:
    """Give an Agg renderer the math-text parser of every figure before it, with what it has parsed. matplotlib 3.11
    makes one for each renderer (``backends/backend_agg.py`` ``RendererAgg.__init__``: ``MathTextParser('path')``),
    and keeps what one parses in a cache keyed by the parser too (``mathtext.py`` ``MathTextParser._parse_cached``,
    an ``lru_cache`` of 50 on the method): each figure parsed its log axes' ``10^k`` labels again, at about 4 ms a
    label (93 parses of 11 labels for the 37 validation figures). What a parse gives depends on the expression, the
    resolution, the font and the rendering flags, all in that key, not on the parser (its grammar is one for the
    class, ``MathTextParser._parser``), and a figure already draws a parse it has measured with: the pixels are the
    same."""
    from matplotlib.backends.backend_agg import RendererAgg
    from matplotlib.mathtext import MathTextParser

    global _MATH_PARSER
    if type(renderer) is not RendererAgg or type(renderer.mathtext_parser) is not MathTextParser:
        return
    if _MATH_PARSER is None:
        _MATH_PARSER = renderer.mathtext_parser
    renderer.mathtext_parser = _MATH_PARSER


_MATH_PARSER = None  # the first Agg renderer's MathTextParser('path'), shared by the later ones (_share_math_parser)


class _StatePickler(pickle.Pickler):
    """A pickler whose bytes are the same in every process, and at every call, for the same figure. Left out, as
    they do not change what is drawn: a transform's ``_parents`` (the transforms to invalidate when it changes,
    pickled by matplotlib as a dict keyed by ``id()``, matplotlib 3.11 ``transforms.py``
    ``TransformNode.__getstate__``) and a callback registry's next connection id (``_cid_gen``, which its
    ``__getstate__`` advances at each pickling, ``cbook.py`` ``CallbackRegistry.__getstate__``)."""

    def reducer_override(self, obj):
        left_out = _left_out(obj)
        if left_out is None:
            return NotImplemented
        fn, args, state, *rest = obj.__reduce_ex__(pickle.HIGHEST_PROTOCOL)
        state = {k: v for k, v in state.items() if k != left_out}
        return (fn, args, state, *rest)


def _left_out(obj) -> str | None:
    """The attribute of ``obj``'s pickled state that :class:`_StatePickler` leaves out, if any: decided once a type
    (the pickler asks for every object but the builtin ones, tens of thousands a figure)."""
    kind = type(obj)
    try:
        return _LEFT_OUT[kind]
    except KeyError:
        pass
    from matplotlib.cbook import CallbackRegistry
    from matplotlib.transforms import TransformNode

    left_out = "_parents" if issubclass(kind, TransformNode) else "_cid_gen" if issubclass(kind, CallbackRegistry) \
        else None
    _LEFT_OUT[kind] = left_out
    return left_out


_LEFT_OUT: dict = {}  # type -> what _left_out gives for its objects


def figure_token(fig, dpi: int = 100, finish=None) -> str | None:
    """The sha256 of everything a figure's PNG is made from: the figure's pickled state (what matplotlib keeps to
    draw it again, matplotlib's own pickle support), ``finish``, the resolution, matplotlib's settings
    (``rcParams``, read while drawing) and the versions of matplotlib (its code and bundled fonts), Pillow (the PNG
    encoder) and numpy; None where the figure cannot be pickled (a lambda in it). Two figures of one token draw the
    same pixels.

    >>> fig, ax = figure(2, 2)
    >>> _ = ax[0, 0].plot([1, 2], [3, 4])
    >>> t = figure_token(fig)
    >>> len(t), t == figure_token(fig), t == figure_token(fig, dpi=50)
    (64, True, False)
    """
    import matplotlib
    import PIL

    buf = io.BytesIO()
    try:
        _StatePickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump((fig, dpi, finish))
    except (pickle.PicklingError, TypeError, AttributeError):
        return None
    h = hashlib.sha256(buf.getvalue())
    # dict's items: no backend resolution; the backend left out (an object's address while unresolved; a figure is
    # written to PNG by Agg whatever it is)
    settings = sorted((k, repr(v)) for k, v in dict.items(matplotlib.rcParams) if k != "backend")
    h.update(repr((matplotlib.__version__, PIL.__version__, np.__version__, settings)).encode())
    return h.hexdigest()


def png_bytes(fig, dpi: int = 100, finish=None) -> bytes:
    """The figure as PNG bytes, after ``finish()`` (a picklable callable, or None) where the figure needs a last step
    that moves its artists (the zoo's label placement).

    Drawing is most of the report's CPU time on a warm cache, so the PNG is kept in the persistent cache of
    :func:`concurrency_model.compiled.arrays` under :func:`figure_token` (with the package's sources, as every entry
    there): a later process drawing the same figure reads its bytes back instead of drawing it (and running
    ``finish``). A figure that cannot be pickled is drawn every time. The bytes are the same either way.

    >>> fig, ax = figure(2, 2)
    >>> _ = ax[0, 0].plot([1, 2], [3, 4])
    >>> png_bytes(fig)[:8]
    b'\\x89PNG\\r\\n\\x1a\\n'
    """
    token = figure_token(fig, dpi, finish)
    if token is None:
        return _render(fig, dpi, finish)
    png = arrays("report.png", token, lambda: {"png": np.frombuffer(_render(fig, dpi, finish), np.uint8)})
    return png["png"].tobytes()


def fmt_bytes(x) -> str:
    """``8 B``, ``512 KiB``, ``1.5 MiB``, ...

    >>> fmt_bytes(3 * 2**20)
    '3 MiB'
    """
    x = float(x)
    for unit, size in (("GiB", GiB), ("MiB", MiB), ("KiB", KiB)):
        if x >= size:
            return f"{x / size:.3g} {unit}"
    return f"{x:.3g} B"


def bytes_axis(ax, lo: int = 0, hi: int = 40, every: int = 4) -> None:
    """A log2 x axis labelled in B / KiB / MiB / GiB, a tick every ``every`` octaves."""
    ticks = [2.0**k for k in range(lo, hi + 1, every)]
    ax.set_xscale("log", base=2)
    ax.set_xticks(ticks, [fmt_bytes(t) for t in ticks])


def kind_color(kind: str, i: int = 0):
    """The colour of a layer kind (a Set3 colour for kinds without one)."""
    from matplotlib import colormaps

    return KIND_COLORS.get(kind, colormaps["Set3"](i % 12))
