"""Run each notebook and keep its first figure as ``docs/img/<notebook>.png`` (README's pictures).

    python docs/make_images.py            # about a minute; notebooks stay unexecuted in git
"""
from __future__ import annotations

import base64
import io
from pathlib import Path

import nbformat
from nbclient import NotebookClient

ROOT = Path(__file__).resolve().parents[1]
WIDTH = 720  # pixels: small enough for the README


def first_png(nb) -> bytes | None:
    for cell in nb.cells:
        for out in cell.get("outputs", []):
            data = out.get("data", {})
            if "image/png" in data:
                return base64.b64decode(data["image/png"])
    return None


def shrink(png: bytes) -> bytes:
    from PIL import Image
    im = Image.open(io.BytesIO(png)).convert("RGB")
    if im.width > WIDTH:
        im = im.resize((WIDTH, round(im.height * WIDTH / im.width)), Image.LANCZOS)
    buf = io.BytesIO()
    im.save(buf, "PNG", optimize=True)
    return buf.getvalue()


def main() -> None:
    out = ROOT / "docs" / "img"
    out.mkdir(parents=True, exist_ok=True)
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(path, as_version=4)
        NotebookClient(nb, timeout=300, resources={"metadata": {"path": str(path.parent)}}).execute()
        png = first_png(nb)
        if png is None:
            print(f"{path.name}: no figure")
            continue
        (out / f"{path.stem}.png").write_bytes(shrink(png))
        print(f"{path.name} -> docs/img/{path.stem}.png")


if __name__ == "__main__":
    main()
