"""``concurrency-model report``: the page, its figures, the --force rule, and the page as a browser shows it.

The report is built once per module (about a minute on 2 cores); the Chromium checks are skipped where
``chromium`` is not installed (``.ci/run`` installs it).
"""
import base64
import json
import re
import shutil
import struct
import subprocess
import sys
from html.parser import HTMLParser

import pytest

from concurrency_model.report import MARKER, prepare_out

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def run(*args, timeout=600):
    return subprocess.run([sys.executable, "-m", "concurrency_model", *args], capture_output=True, text=True,
                          timeout=timeout)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    out = tmp_path_factory.mktemp("report") / "r"
    p = run("report", "--out", str(out), "--json")
    assert p.returncode == 0, p.stderr
    assert "Traceback" not in p.stderr
    return json.loads(p.stdout), p.stderr


class Images(HTMLParser):
    def __init__(self):
        super().__init__()
        self.srcs = []

    def handle_starttag(self, tag, attrs):
        if tag == "img":
            self.srcs.append(dict(attrs).get("src", ""))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_SIGNATURE, "not a PNG"
    return struct.unpack(">II", data[16:24])  # IHDR width, height


def test_json_keys_files_and_progress(report):
    out, err = report
    assert {"out", "figures", "html"} <= set(out)
    assert out["errors"] == []  # every section computed
    assert out["html"].endswith("report.html")
    with open(out["html"], encoding="utf-8") as f:
        assert "<html" in f.read(2000)
    assert len(out["figures"]) >= 8
    for path in out["figures"]:
        with open(path, "rb") as f:
            w, h = png_size(f.read())
        assert 300 <= w <= 1100 and 200 <= h <= 4000, (path, w, h)  # at most the page's 1,100 px
    assert "report:" in err  # progress on stderr (the summary line when stderr is not a terminal)
    for part in ("validation", "3d sweep", "zoo", "examples"):  # a line a part, though stderr is a pipe
        assert re.search(rf"^report: \d+/\d+ {part}: [0-9.]+ s \([0-9.]+ s of CPU\)$", err, re.M), (part, err)
    assert {"validation", "3d sweep"} <= set(out["cpu_s"]) and out["cpu_s"]["all"] > 0


def test_every_image_is_an_embedded_png(report):
    out, _ = report
    parser = Images()
    with open(out["html"], encoding="utf-8") as f:
        parser.feed(f.read())
    assert len(parser.srcs) == len(out["figures"])
    for src in parser.srcs:
        m = re.fullmatch(r"data:image/png;base64,([A-Za-z0-9+/=]+)", src)
        assert m, src[:60]
        data = base64.b64decode(m.group(1), validate=True)
        w, h = png_size(data)
        assert len(data) > 5000 and 300 <= w <= 1100 and 200 <= h <= 4000, (w, h, len(data))


def test_sections_and_error_table(report):
    out, _ = report
    with open(out["html"], encoding="utf-8") as f:
        page = f.read()
    for anchor in ("glance", "zoo", "roofline", "collectives", "dp", "pipeline", "sweep", "inference", "validation",
                   "examples"):
        assert f"id='{anchor}'" in page
    assert page.index("id='glance'") < page.index("id='examples'") < page.index("<nav>") < page.index("id='zoo'")
    for unknown in ("[D]", "paper-models", "reference/", "DESIGN.md"):  # nothing a reader does not have
        assert unknown not in page, unknown
    assert not re.search(r"all rows.{0,40}\d+ of \d+|\d+ of \d+.{0,40}all rows", page)
    assert "<code>concurrency-model estimate --scenario gpt3-175b-3d</code>" in page  # the examples' commands
    table = page[page.index("<table class='errors'>"):]
    assert "date of the data" in table and table.count("<tr>") >= 4


def test_out_directory_rules(tmp_path):
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("keep me")
    p = run("report", "--out", str(foreign))
    assert p.returncode == 2
    assert len(p.stderr.strip().splitlines()) == 1 and "--force" in p.stderr
    assert (foreign / "notes.txt").read_text() == "keep me"
    with pytest.raises(ValueError, match="--force"):
        prepare_out(foreign)
    prepare_out(foreign, force=True)  # allowed with force; other files untouched
    assert (foreign / "notes.txt").exists()
    ours = tmp_path / "ours"
    (ours / "figures").mkdir(parents=True)
    (ours / MARKER).write_text("{}")
    (ours / "figures" / "old.png").write_bytes(PNG_SIGNATURE)
    prepare_out(ours)  # written by the toolkit before: no question; the old report stays whole until replaced
    assert (ours / "figures" / "old.png").exists()
    (tmp_path / "file").write_text("x")
    with pytest.raises(ValueError, match="not a directory"):
        prepare_out(tmp_path / "file")
    prepare_out(tmp_path / "new" / "dir")
    assert (tmp_path / "new" / "dir").is_dir()


def test_rerun_accepts_own_report(report, tmp_path):
    out, _ = report
    again = tmp_path / "again"
    shutil.copytree(out["out"], again)
    assert (again / MARKER).is_file()
    prepare_out(again)  # a directory the report wrote: accepted without --force, kept whole until replaced
    assert list((again / "figures").glob("*.png")) and (again / "report.html").is_file()


def test_failed_section_is_shown_and_exits_1(monkeypatch, capsys, tmp_path):
    import concurrency_model.report as rep
    from concurrency_model.cli import main
    from concurrency_model.report.html import render
    from concurrency_model.report.sections import failed_section

    page = render("t", "", [failed_section("zoo", "Zoo", RuntimeError("boom <x>"))])
    assert "could not be computed: RuntimeError: boom &lt;x&gt;" in page
    fake = {"out": str(tmp_path), "html": str(tmp_path / "report.html"), "figures": [], "elapsed_s": 1.0,
            "timings_s": {}, "errors": [{"section": "zoo", "error": "RuntimeError: boom"}]}
    monkeypatch.setattr(rep, "build_report", lambda *a, **k: dict(fake))
    assert main(["report", "--out", str(tmp_path), "--json"]) == 1
    out, err = capsys.readouterr()
    assert json.loads(out)["errors"] and "section zoo failed: RuntimeError: boom" in err


CHECK = """<script>
window.addEventListener("load", () => {
  const imgs = Array.from(document.images);
  const vw = window.innerWidth;
  const wide = Array.from(document.querySelectorAll("body *"))
    .filter(e => e.getBoundingClientRect().right > vw + 1 && !e.closest(".table-wrap"))
    .map(e => e.tagName + "." + e.className);
  const pre = document.createElement("pre");
  pre.id = "layout-check";
  pre.textContent = JSON.stringify({
    images: imgs.length,
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
    scrollWidth: document.documentElement.scrollWidth, innerWidth: vw, wide: wide.slice(0, 10)});
  document.body.appendChild(pre);
});
</script>"""


def chromium(*args, timeout=90):
    exe = shutil.which("chromium") or shutil.which("chromium-browser")
    return subprocess.run([exe, "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", *args],
                          capture_output=True, text=True, timeout=timeout)


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="chromium not installed")
@pytest.mark.parametrize("width", [1280, 800])
def test_page_in_chromium(report, tmp_path, width):
    out, _ = report
    with open(out["html"], encoding="utf-8") as f:
        page = f.read().replace("</body>", CHECK + "</body>")
    probe = tmp_path / "probe.html"
    probe.write_text(page, encoding="utf-8")
    p = chromium(f"--window-size={width},1000", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="layout-check">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert res["images"] == len(out["figures"]) and res["broken"] == 0, res
    assert res["scrollWidth"] <= res["innerWidth"], res
    assert not res["wide"], res


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="chromium not installed")
def test_screenshot_is_not_blank(report, tmp_path):
    import numpy as np
    from matplotlib.image import imread

    out, _ = report
    shot = tmp_path / "shot.png"
    p = chromium("--window-size=1280,3000", f"--screenshot={shot}", "file://" + out["html"])
    assert shot.is_file(), p.stderr[-2000:]
    img = imread(shot)
    assert img.shape[1] == 1280 and float(np.std(img[..., :3])) > 0.05


FIRST_SCREEN = """<script>
window.addEventListener("load", () => {
  const box = e => e ? e.getBoundingClientRect() : {top: -1, bottom: -1};  // -1: not on the page
  const imgs = Array.from(document.images);
  const links = Array.from(document.querySelectorAll("a[href]")).map(a => a.getAttribute("href"));
  const pre = document.createElement("pre");
  pre.id = "first-screen";
  pre.textContent = JSON.stringify({
    glanceTop: box(document.getElementById("glance")).top,
    headlineBottom: box(document.querySelector("table.glance")).bottom,
    summaryTop: box(document.querySelector(".glance-grid")).top,
    examplesTop: box(document.getElementById("examples")).top,
    scales: imgs.map(i => i.getBoundingClientRect().width / i.naturalWidth),
    broken: imgs.filter(i => !(i.complete && i.naturalWidth > 0)).length,
    dangling: links.filter(h => !(h.startsWith("#") && document.getElementById(h.slice(1)))),
    height: document.documentElement.scrollHeight});
  document.body.appendChild(pre);
});
</script>"""


@pytest.mark.skipif(not (shutil.which("chromium") or shutil.which("chromium-browser")),
                    reason="chromium not installed")
def test_first_screen_figure_scale_and_links(report, tmp_path):
    """At 1280 x 900 and 100% zoom: "At a glance" and its headline answers are on the first screen (900 px) and the
    validation summary starts below them, the examples right after the glance; no figure is shown below 90% of its
    size; every link points at an element of the page and every image loads."""
    out, _ = report
    with open(out["html"], encoding="utf-8") as f:
        page = f.read().replace("</body>", FIRST_SCREEN + "</body>")
    probe = tmp_path / "first.html"
    probe.write_text(page, encoding="utf-8")
    p = chromium("--window-size=1280,900", "--virtual-time-budget=10000", "--dump-dom", probe.as_uri())
    m = re.search(r'<pre id="first-screen">(.*?)</pre>', p.stdout, re.S)
    assert m, p.stderr[-2000:]
    res = json.loads(m.group(1).replace("&quot;", '"').replace("&amp;", "&"))
    assert 0 < res["glanceTop"] < res["headlineBottom"] <= 900, res
    assert res["headlineBottom"] <= res["summaryTop"] < res["examplesTop"], res
    assert len(res["scales"]) == len(out["figures"]) and min(res["scales"]) >= 0.9, sorted(res["scales"])[:5]
    assert res["broken"] == 0 and res["dangling"] == [], res
