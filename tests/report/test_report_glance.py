"""The report's "At a glance" section, its validation summary, and the rules every figure keeps (width, legends)."""
import matplotlib
import numpy as np
import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from concurrency_model.report import glance
from concurrency_model.report._plot import MAX_WIDTH_IN, figure, png_bytes
from concurrency_model.report.accuracy import error_table, rows_note
from concurrency_model.validate.targets import NEAR, check, grade, targets_for

matplotlib.use("Agg")


def rows(dataset, mode, apes, group=""):
    return pd.DataFrame({"dataset": dataset, "mode": mode, "row": range(len(apes)), "label": "", "group": group,
                         "measured": 1.0, "predicted": [1 + a for a in apes], "unit": "s", "ape": apes,
                         "status": "ok", "note": ""})


@given(st.floats(0.001, 1.0), st.floats(0.0, 5.0))
def test_grade_bands(limit, x):
    value = limit * x
    g = grade(value, limit)
    assert g == ("met" if value <= limit else "near" if value <= NEAR * limit else "missed")


def test_summary_grades_against_the_mode_shown():
    """megatron-2021's target is a median <= 10% in preset mode: 12% is near, 16% missed, 8% met; a dataset without
    a target has none; the far flag is set above twice the target."""
    df = pd.concat([rows("megatron-2021", "preset", [0.04, 0.12, 0.2]),  # median 12%
                    rows("narayanan2021-table2", "preset", [0.3, 0.35, 0.4]),  # median 35%: > 2 x 10%
                    rows("horovod", "preset", [0.01, 0.02])], ignore_index=True)
    s = glance.validation_summary(error_table(df), df).set_index("dataset")
    assert s.loc["megatron-2021", "median_ape_pct"] == pytest.approx(12.0)
    assert s.loc["megatron-2021", "result"] == "near" and not s.loc["megatron-2021", "far"]
    assert s.loc["narayanan2021-table2", "result"] == "missed" and s.loc["narayanan2021-table2", "far"]
    assert s.loc["horovod", "target"] == "" and s.loc["horovod", "result"] == ""
    page = glance.summary_html(s.reset_index())
    assert page.count("<tr>") == 3 + 2  # a header row in each half
    assert glance.RESULT_COLORS["missed"] in page and glance.RESULT_COLORS["near"] in page
    assert "&#9888;" in page  # the warning of the dataset far above its target


def test_a_target_for_another_mode_is_named_not_graded():
    """deepbench-gemm's targets are for the datasheet and held-out fits; its quick (preset) rows are not graded."""
    df = rows("deepbench-gemm", "preset", [0.01, 0.02])
    s = glance.validation_summary(error_table(df), df).iloc[0]
    assert s["target"] == "median <= 10% in datasheet mode" and s["result"] == "not run"
    assert "not run here" in glance.summary_html(glance.validation_summary(error_table(df), df))


def test_summary_uses_the_worst_group_where_the_target_is_per_system():
    """nccl-tests' held-out target is per system: one system at 5%, one at 30% -> missed, shown with its 30%."""
    df = pd.concat([rows("nccl-tests-allreduce", "held-out", [0.05, 0.05], group="a100"),
                    rows("nccl-tests-allreduce", "held-out", [0.3, 0.3], group="h100")], ignore_index=True)
    table = pd.DataFrame({"dataset": ["nccl-tests-allreduce"], "mode": ["held-out"], "rows": [4],
                          "rows_total": [4], "median_ape_pct": [17.5]})
    s = glance.validation_summary(table, df).iloc[0]
    assert s["target"] == "median <= 10%, each system"
    assert s["worst_pct"] == pytest.approx(30.0) and s["result"] == "missed"
    assert "missed (30.0%)" in glance.summary_html(glance.validation_summary(table, df))


def test_targets_match_the_benchmark():
    """The scaling sets' APE targets joined the table; check() gives the limit with each result."""
    assert targets_for("tf-cnn-benchmarks") == [("preset", "median", "all", 0.15)]
    assert targets_for("torchgpipe") == [("preset", "max", "all", 0.15)]
    assert targets_for("horovod") == []
    r = check(rows("torchgpipe", "preset", [0.1, 0.2]))[0]
    assert r["limit"] == 0.15 and r["worst"] == pytest.approx(0.2) and r["result"] == "missed"


def test_rows_note_never_says_all_rows_beside_fewer():
    assert rows_note("all rows", 4, 19, 15, "preset") == "15 not predicted (outside what the model expresses)"
    assert rows_note("1 row in 20, in file order (quick)", 36, 720, 0, "held-out") == \
        "1 row in 20, in file order (quick)"
    assert "all rows" not in rows_note("all rows", 12, 56, 44, "preset")


@pytest.fixture(scope="module")
def small_headline():
    from concurrency_model.sweep import sweep

    res = sweep({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}}, 8)
    ru = res.runner_up()
    best = ru["estimates"][0]
    return glance.headline(res, best, ru, {}, 400.0, 1024, 8), best, ru


def test_headline_numbers_are_the_estimates(small_headline):
    h, best, ru = small_headline
    assert h["step_s"] == best.step_time_s and h["step_p10_s"] <= h["step_s"] <= h["step_p90_s"]
    assert h["memory_gb"] == pytest.approx(best.memory_bytes_per_device / 1e9)
    assert h["runner_up_s"] == pytest.approx(ru["estimates"][1].step_time_s)
    shares = [s for _, _, s in h["where"]]
    assert shares == sorted(shares, reverse=True) and sum(shares) <= 1 + 1e-9
    # the run: 300e9 tokens / (64 x 1024 tokens a step) steps, each a step long; GPU-hours x price = cost
    steps = np.ceil(glance.RUN_TOKENS / (64 * 1024))
    assert h["run"]["days"] == pytest.approx(steps * h["step_s"] / 86400)
    assert h["run"]["cost"] == pytest.approx(h["run"]["gpu_hours"] * glance.PRICE_PER_GPU_HOUR)
    assert h["run"]["days_p10"] <= h["run"]["days"] <= h["run"]["days_p90"]


def test_glance_section_says_each_answer(small_headline):
    h, _, _ = small_headline
    s = glance.glance_section(h, None)
    assert s.anchor == "glance" and s.title == "At a glance"
    for words in ("Step time", "Where it goes", "Memory per GPU", "Best layout", "Runner-up", "Whole run",
                  f"{h['step_s']:.2f} s", "80% band", glance.CURRENCY):
        assert words in s.intro, words
    failed = glance.glance_section(None, None, {"3d sweep": "RuntimeError: boom"})
    assert "could not be computed: RuntimeError: boom" in failed.intro


def test_figures_are_at_most_the_page_wide():
    with pytest.raises(ValueError, match="width: 12 inches"):
        figure(12, 3)
    fig, _ = figure(MAX_WIDTH_IN, 2)
    png = png_bytes(fig)
    assert int.from_bytes(png[16:20], "big") == 1100


def drawn(fig):
    """The renderer of ``fig`` drawn on an Agg canvas (constrained layout applied)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    return canvas.get_renderer()


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def test_legends_lie_outside_the_axes():
    """Every legend of these figure functions is drawn outside its Axes (the data area)."""
    from concurrency_model.report import accuracy, parallel, zoo

    fig, ax = figure(11, 4, 1, 3)
    zoo.work_depth(zoo.zoo_frame(models=["lenet5", "alexnet", "resnet50", "resnet101"]), ax=ax[0, 0])
    df = pd.DataFrame({"dataset": "d", "measured": [1.0, 2.0], "predicted": [1.1, 1.8], "unit": "s", "ape": 0.1})
    accuracy.validation_scatter(df, "d", ax=ax[0, 1])
    parallel.dp_scaling(parallel.dp_scaling_frame(degrees=(1, 128), models=["1B"]), ax=ax[0, 2])
    renderer = drawn(fig)
    for a in ax.flat:
        leg = a.get_legend()
        assert leg is not None
        assert not overlaps(leg.get_window_extent(renderer), a.get_window_extent(renderer)), a.get_title()


def test_zoo_labels_do_not_overlap():
    """The report's zoo figure as the report lays it out: no two of the models' labels overlap."""
    from concurrency_model.report import zoo

    zf = zoo.zoo_frame()
    fig, ax = figure(11, 5.2, 1, 2, width_ratios=[1.25, 1])
    zoo.average_parallelism(zf, ax=ax[0, 1])
    zoo.work_depth(zf, ax=ax[0, 0])
    r = drawn(fig)
    boxes = [t.get_window_extent(r) for t in ax[0, 0].texts if not t.get_text().startswith("W/D")]
    assert len(boxes) == len(zf)
    assert not any(overlaps(a, b) for i, a in enumerate(boxes) for b in boxes[i + 1:])


def test_a_failing_part_is_one_section_saying_why(monkeypatch):
    """run_part catches a part's exception: one section naming it, no figures, and the error in one line."""
    from concurrency_model.report import parts

    def boom(figs, quick):
        figs.append("half a figure")
        raise RuntimeError("no data <here>")
    monkeypatch.setitem(parts.PARTS, "zoo", ("The zoo", boom))
    r = parts.run_part("zoo")
    assert r["error"] == "RuntimeError: no data <here>" and r["figures"] == [] and r["extra"] == {}
    assert len(r["sections"]) == 1 and "no data &lt;here&gt;" in r["sections"][0].intro
    assert r["cpu_s"] >= 0 and r["wall_s"] >= 0


def test_every_part_is_started_once():
    from concurrency_model.report import parts

    assert sorted(parts.ORDER) == sorted(parts.PARTS)


def test_report_workers_must_be_a_positive_count(tmp_path, capsys):
    from concurrency_model.cli import main

    assert main(["report", "--out", str(tmp_path / "r"), "--workers", "0"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "--workers: must be a positive integer, got 0" in err[0]
    assert not (tmp_path / "r").exists()
