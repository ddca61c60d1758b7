"""Figure functions whose bars are numbers a test can check against the estimates they draw."""
import matplotlib
import pytest

from concurrency_model.training.step_parts import STEP_PARTS
from concurrency_model.training.estimate import estimate
from concurrency_model.report import sweep3d

matplotlib.use("Agg")


def bar_widths(ax):
    return [p.get_width() for p in ax.patches]


def test_step_breakdown_bars_are_the_step_parts():
    """Every non-zero part of the step gets its bar and the coloured bars add up to the step, whatever parts a
    layout has (here a host wait and a straggler wait, which the GPT-3 figure never shows)."""
    e = estimate({"model": "resnet50", "cluster": "dgx-a100", "parallel": {"data": 16, "global_batch": 512},
                  "training": {"straggler_cv": 0.2, "batch_norm": "sync"}})
    ax = sweep3d.step_breakdown(e)
    shown = [t.get_text() for t in ax.get_yticklabels()][:-1]  # the last, grey bar: the hidden data-parallel traffic
    coloured = bar_widths(ax)[:len(shown)]  # the bars, then the step's 80% band
    assert sum(coloured) == pytest.approx(e.step_time_s, rel=1e-9)
    assert "straggler wait" in shown and "host (kernel issue) wait" in shown and "batch-norm sync" in shown
    assert len(coloured) == sum(1 for k in STEP_PARTS if e.breakdown[k])


def test_memory_tradeoff_stacks_each_configurations_memory():
    res = sweep3d.sweep_result({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 512}}, gpus=64)
    ax = sweep3d.memory_tradeoff(res)
    labels = [t.get_text() for t in ax.get_yticklabels()]
    groups = res.frame.groupby(["zero_stage", "recompute"]).ngroups
    assert len(labels) == groups and len(ax.patches) == 5 * groups  # five parts stacked per configuration
    totals = [sum(p.get_width() for p in ax.patches[i::groups]) for i in range(groups)]
    ends = [max(p.get_x() + p.get_width() for p in ax.patches[i::groups]) for i in range(groups)]
    assert totals == pytest.approx(ends)  # stacked end to end
    best = res.frame.loc[res.frame.groupby(["zero_stage", "recompute"])["step_time_s"].idxmin()]
    assert sorted(totals) == pytest.approx(sorted(best["memory_bytes_per_device"] / 1e9), rel=1e-6)


def test_layer_kind_bars_are_each_examples_shares():
    from concurrency_model.report._plot import figure
    from concurrency_model.report.examples import SHOWN_KINDS, layer_kinds_plot

    named = [(m, estimate({"model": m, "parallel": {"data": 2, "global_batch": 8, "microbatch_size": 4}}))
             for m in ("gpt2", "resnet50")]
    fig, ax = figure(8, 3)
    layer_kinds_plot(named, ax[0][0])
    widths = bar_widths(ax[0][0])
    at = 0
    for _, e in named:
        kinds = e.layer_kinds()
        n = min(SHOWN_KINDS, len(kinds)) + 1  # the kinds named, then "other"
        bars = widths[at:at + n]
        assert bars[:-1] == pytest.approx(list(kinds["share"].iloc[:SHOWN_KINDS]), rel=1e-12)
        assert sum(bars) == pytest.approx(1.0, rel=1e-12)
        at += n
    assert at == len(widths)
