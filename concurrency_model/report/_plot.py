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


def figure(width: float, height: float, nrows: int = 1, ncols: int = 1, **kw):
    """A pyplot-free ``Figure`` of ``width x height`` inches and its ``nrows x ncols`` array of Axes."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=(width, height), layout="constrained")
    return fig, fig.subplots(nrows, ncols, squeeze=False, **kw)


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
