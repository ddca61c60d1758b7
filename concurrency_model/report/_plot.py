"""Small matplotlib helpers shared by the report's figure modules.

Figures of the report are :class:`matplotlib.figure.Figure` objects made without pyplot (no global state,
any backend); a figure function called with ``ax=None`` makes its own Axes through pyplot instead, so that
it shows in a notebook.
"""
from __future__ import annotations

import io

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


def png_bytes(fig, dpi: int = 100) -> bytes:
    """The figure as PNG bytes."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi)
    return buf.getvalue()


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
