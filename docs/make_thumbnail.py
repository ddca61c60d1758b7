"""Redraw README's thumbnail of the report, ``docs/img/report.png``: the report's first screen in headless Chromium,
scaled down and stored as a small palette PNG.

    python docs/make_thumbnail.py [--report reports/report.html] [--out docs/img/report.png]

Without an existing report it writes one first (``concurrency-model report`` into a temporary folder, a few minutes
of CPU). Needs a ``chromium`` (or ``chromium-browser`` / ``google-chrome``) on the PATH, as CI installs it;
``--headless --screenshot`` is Chromium's own screenshot mode (https://developer.chrome.com/docs/chromium/headless).
"""
from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from PIL import Image

ROOT = Path(__file__).resolve().parents[1]
SCREEN = (1280, 900)  # CSS pixels of the first screen, a laptop's browser window
SCALE = 2  # the thumbnail is half that size
COLOURS = 64  # palette entries: the page is text and flat colours, so 64 keep it legible and the file small
BROWSERS = ("chromium", "chromium-browser", "google-chrome")


def screenshot(html: Path, png: Path) -> None:
    """The first ``SCREEN`` of ``html`` as Chromium renders it, into ``png``."""
    browser = next((b for b in map(shutil.which, BROWSERS) if b), None)
    if browser is None:
        sys.exit(f"make_thumbnail: none of {', '.join(BROWSERS)} on the PATH")
    subprocess.run([browser, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars",
                    f"--window-size={SCREEN[0]},{SCREEN[1]}", f"--screenshot={png}", html.resolve().as_uri()],
                   check=True, capture_output=True, timeout=300)


def thumbnail(shot: Path, out: Path) -> int:
    """``shot`` scaled down by ``SCALE`` and reduced to ``COLOURS`` colours, written to ``out``; its size in bytes."""
    img = Image.open(shot).convert("RGB")
    small = img.resize((img.width // SCALE, img.height // SCALE), Image.LANCZOS)
    small.quantize(colors=COLOURS, method=Image.Quantize.MEDIANCUT).save(out, optimize=True)
    return out.stat().st_size


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--report", type=Path, default=ROOT / "reports" / "report.html")
    ap.add_argument("--out", type=Path, default=ROOT / "docs" / "img" / "report.png")
    a = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        html = a.report
        if not html.exists():
            subprocess.run([sys.executable, "-m", "concurrency_model", "report", "--out", f"{tmp}/report"], check=True)
            html = Path(tmp, "report", "report.html")
        shot = Path(tmp, "shot.png")
        screenshot(html, shot)
        size = thumbnail(shot, a.out)
    print(f"wrote {a.out} ({size / 1e3:.0f} kB)")


if __name__ == "__main__":
    main()
