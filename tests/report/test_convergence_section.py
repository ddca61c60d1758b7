"""The report's "Time to train" section: its ResNet picks come from its own surface, its penalties say model only."""
from concurrency_model.report.convergence import convergence_section


def test_time_to_train_section_labels_the_penalties_model_only():
    figs = []
    (s,) = convergence_section(figs)
    assert s.anchor == "time-to-train" and s.title == "Time to train: batch against utilisation"
    assert "<b>model only</b>" in s.intro and "local SGD's period has no model" in s.intro
    assert "reaches the target soonest at" in s.intro and len(s.figures) == 1
