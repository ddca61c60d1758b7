"""Write the report page: one self-contained HTML file (figures as base64 PNG data URIs, inline CSS).

A page is a title, a lead paragraph and a list of :class:`Section` (heading, intro HTML, figures and
tables); :func:`render` returns the HTML text and :func:`write` writes it atomically.
"""
from __future__ import annotations

import base64
import html
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

CSS = """
* { box-sizing: border-box; }
body { font-family: -apple-system, "Segoe UI", Helvetica, Arial, sans-serif; color: #1d1d1f; margin: 0;
       background: #fafafa; line-height: 1.5; }
main { max-width: 1160px; margin: 0 auto; padding: 20px 28px 60px; background: #fff; }
h1 { font-size: 1.8em; margin: 0.2em 0 0.3em; }
h2 { font-size: 1.35em; margin-top: 2.2em; border-bottom: 1px solid #ddd; padding-bottom: 0.2em; }
p, li { max-width: 100%; overflow-wrap: anywhere; }
code { background: #f1f1f1; padding: 0 3px; border-radius: 3px; font-size: 0.92em; }
figure { margin: 1.2em 0; }
figure img { display: block; max-width: 100%; height: auto; border: 1px solid #e4e4e4; }
.gallery { display: flex; flex-wrap: wrap; gap: 4px 12px; }
.gallery figure { margin: 0.4em 0; max-width: 100%; }
table.glance th { width: 12em; }
table.glance td:nth-child(3) { width: 34%; }
.glance-grid table { font-size: 0.8em; margin: 0.4em 0; }
.glance-grid td, .glance-grid th { padding: 1px 6px; }
.glance-grid td:nth-child(2), .glance-grid td:nth-child(3) { text-align: right; white-space: nowrap; }
.glance-grid td:nth-child(4), .glance-grid td:nth-child(5) { white-space: nowrap; }
.glance-grid td:first-child { overflow-wrap: anywhere; }
@media (min-width: 1000px) { .glance-grid { display: grid; grid-template-columns: 1fr 1fr; column-gap: 18px;
  align-items: start; } }
figcaption { font-size: 0.9em; color: #555; margin-top: 0.3em; }
.meta { color: #666; font-size: 0.9em; }
.note { background: #fff8e1; border-left: 4px solid #f0c040; padding: 6px 12px; font-size: 0.92em; }
nav ol { columns: 2; font-size: 0.95em; }
nav h2 { margin-top: 1.4em; }
.table-wrap { max-width: 100%; overflow-x: auto; }
table { border-collapse: collapse; width: 100%; font-size: 0.86em; margin: 0.8em 0; }
th, td { border: 1px solid #ddd; padding: 4px 7px; text-align: left; vertical-align: top;
         overflow-wrap: break-word; }
th { background: #f3f3f3; }
table.errors td:nth-child(n+4):nth-child(-n+7) { text-align: right; white-space: nowrap; }
table.errors td:nth-child(3) { min-width: 9em; }
table.errors td:first-child { min-width: 10em; }
small { color: #666; }
"""


@dataclass
class Figure:
    """A PNG with its file name (beside the page), alt text and caption."""

    name: str
    png: bytes
    alt: str
    caption: str = ""


@dataclass
class Section:
    """A heading, intro paragraphs (trusted HTML written by the report), figures and HTML tables."""

    anchor: str
    title: str
    intro: str
    figures: list = field(default_factory=list)
    tables: list = field(default_factory=list)
    after: str = ""
    gallery: bool = False  # small figures side by side (wrapping), each at its own size


def data_uri(png: bytes) -> str:
    """``data:image/png;base64,...`` of PNG bytes.

    >>> data_uri(b"x")
    'data:image/png;base64,eA=='
    """
    return "data:image/png;base64," + base64.b64encode(png).decode("ascii")


def render(title: str, lead: str, sections: list, meta: str = "", notes: list | None = None, front: int = 0,
           about: str = "") -> str:
    """The whole page as one HTML string: the title, ``lead``, the first ``front`` sections, the contents (links to
    the other sections, after ``about``), then those sections.

    >>> page = render("T", "lead", [Section("g", "G", "<p>x</p>"), Section("a", "A", "<p>y</p>")], front=1)
    >>> page.index("<h2 id='g'>") < page.index("<nav>") < page.index("<h2 id='a'>")
    True
    """
    out = ["<!DOCTYPE html>", "<html lang='en'>", "<head>", "<meta charset='utf-8'>",
           "<meta name='viewport' content='width=device-width, initial-scale=1'>",
           f"<title>{html.escape(title)}</title>", f"<style>{CSS}</style>", "</head>", "<body>", "<main>",
           f"<h1>{html.escape(title)}</h1>"]
    if meta:
        out.append(f"<p class='meta'>{meta}</p>")
    out.append(lead)
    for n in notes or []:
        out.append(f"<p class='note'>{n}</p>")
    links = "".join(f"<li><a href='#{s.anchor}'>{html.escape(s.title)}</a></li>" for s in sections[front:])
    nav = f"<nav><h2>Contents</h2>{about}<ol>{links}</ol></nav>"
    for i, s in enumerate(sections):
        if i == front:
            out.append(nav)
        out.append(f"<section><h2 id='{s.anchor}'>{html.escape(s.title)}</h2>")
        out.append(s.intro)
        if s.gallery:
            out.append("<div class='gallery'>")
        for f in s.figures:
            out.append(f"<figure><img src='{data_uri(f.png)}' alt='{html.escape(f.alt, quote=True)}'>"
                       + (f"<figcaption>{f.caption}</figcaption>" if f.caption else "") + "</figure>")
        if s.gallery:
            out.append("</div>")
        for t in s.tables:
            out.append(f"<div class='table-wrap'>{t}</div>")
        out.append(s.after)
        out.append("</section>")
    if front >= len(sections):
        out.append(nav)
    out += ["</main>", "</body>", "</html>", ""]
    return "\n".join(out)


def write_atomic(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` through a temporary file in the same directory and a rename."""
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
