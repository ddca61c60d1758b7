"""A tiny progress bar on stderr, without dependencies.

The bar is redrawn in place (carriage return) only when the stream is a terminal; a final summary line
(``label: done/total in 12.3 s``) is always written, so logs and captured output get one line, not
hundreds. Use it as a context manager (``with Progress(20, "gemm") as bar: bar.update()``) or wrap an
iterable (``for x in progress(items, "gemm"): ...``).
"""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TextIO

WIDTH = 30


class Progress:
    """Progress over ``total`` steps, drawn on ``stream`` (default ``sys.stderr``)."""

    def __init__(self, total: int, label: str = "", stream: TextIO | None = None, enabled: bool = True):
        self.total = max(int(total), 0)
        self.label = label
        self.stream = stream if stream is not None else sys.stderr
        self.enabled = enabled
        self.done = 0
        self.note = ""
        self.start = time.perf_counter()
        try:
            self.tty = bool(self.stream.isatty())
        except (AttributeError, ValueError):
            self.tty = False

    def __enter__(self) -> "Progress":
        self.start = time.perf_counter()
        self._draw()
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close(ok=exc_type is None)

    @property
    def elapsed(self) -> float:
        return time.perf_counter() - self.start

    def update(self, n: int = 1, note: str = "") -> None:
        """Advance by ``n`` steps; ``note`` (e.g. the current shape) is shown after the bar."""
        self.done = min(self.done + n, self.total) if self.total else self.done + n
        self.note = note
        self._draw()

    def log(self, text: str) -> None:
        """Write ``text`` as a line of its own, also when the stream is not a terminal (a step's outcome in a log);
        on a terminal the bar is redrawn below it.

        >>> import io
        >>> out = io.StringIO()
        >>> Progress(3, "report", stream=out).log("zoo: 1.2 s")
        >>> out.getvalue()
        'report: zoo: 1.2 s\\n'
        """
        if not self.enabled:
            return
        clear = "\r" + " " * 120 + "\r" if self.tty else ""
        self.stream.write(f"{clear}{self.label}: {text}\n")
        self.stream.flush()
        self._draw()

    def _draw(self) -> None:
        if not (self.enabled and self.tty):
            return
        frac = self.done / self.total if self.total else 0.0
        fill = int(round(frac * WIDTH))
        line = (f"\r{self.label} [{'#' * fill}{'.' * (WIDTH - fill)}] {self.done}/{self.total} "
                f"{self.elapsed:5.1f}s {self.note}")
        self.stream.write(line[:120].ljust(120))
        self.stream.flush()

    def close(self, ok: bool = True) -> None:
        """End the bar with the summary line (written once)."""
        if not self.enabled:
            return
        self.enabled = False
        prefix = "\r" + " " * 120 + "\r" if self.tty else ""
        status = "" if ok else " (stopped)"
        self.stream.write(f"{prefix}{self.label}: {self.done}/{self.total} in {self.elapsed:.1f} s{status}\n")
        self.stream.flush()


def progress(items: Iterable, label: str = "", total: int | None = None, stream: TextIO | None = None,
             enabled: bool = True) -> Iterator:
    """Yield from ``items`` while drawing a :class:`Progress` bar (``total`` defaults to ``len(items)``)."""
    if total is None:
        try:
            total = len(items)  # type: ignore[arg-type]
        except TypeError:
            total = 0
    with Progress(total, label, stream, enabled) as bar:
        for x in items:
            yield x
            bar.update(1)
