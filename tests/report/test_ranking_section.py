"""The report's "Choosing right" part (:mod:`concurrency_model.report.ranking`): its figure and tables from a set
summary and A/B pairs in :mod:`concurrency_model.validate.ranking`'s shapes."""
import pandas as pd

from concurrency_model.report.ranking import pairs_html, ranking_figure, summary_html

SUMMARY = pd.DataFrame({"dataset": ["a", "b"], "groups": [3, 1], "ranked": [2, 0], "mean_spearman": [0.9, None],
                        "min_spearman": [0.8, None], "best_match": [2 / 3, 1.0], "meets": [True, None]})
PAIRS = pd.DataFrame({"pair": ["p", "p", "q"], "case": ["on", "on again", "graphs"], "base": ["off", "off", "eager"],
                      "measured_speedup": [1.17, 1.18, 0.98], "predicted_speedup": [1.24, 1.24, 1.0],
                      "error": [1.24 / 1.17 - 1, 1.24 / 1.18 - 1, 1.0 / 0.98 - 1]})


def test_the_tables_say_each_set_and_pair():
    s = summary_html(SUMMARY)
    assert s.count("<tr>") == 3 and "<td>0.90</td>" in s and "<td>67%</td>" in s
    assert "<td>b</td><td>1</td><td>0</td><td></td><td></td><td>100%</td>" in s  # no group of 3+: no Spearman
    p = pairs_html(PAIRS)
    assert p.count("<tr>") == 4 and "<td>+6.0%</td>" in p and "<td>+2.0%</td>" in p


def test_the_figure_has_a_bar_a_set_and_a_point_a_case():
    fig = ranking_figure(SUMMARY, PAIRS)
    left, right = fig.axes[:2]
    assert [t.get_text() for t in left.get_yticklabels()] == ["a", "b"]
    assert len(left.patches) == 2  # the set without ranked groups has a zero-width bar and its note
    assert sum(len(c.get_offsets()) for c in right.collections) == 3
    lo, hi = right.get_xlim()
    assert lo < 0.98 and hi > 1.24 and right.get_ylim() == (lo, hi)
