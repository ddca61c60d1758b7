"""The model zoo's cache of built graphs (concurrency_model.models.get_model)."""
from __future__ import annotations

import concurrency_model.models as models


def test_the_model_cache_keeps_the_most_recent_graphs_within_its_node_budget(monkeypatch):
    monkeypatch.setattr(models, "_BUILT", type(models._BUILT)())
    monkeypatch.setattr(models, "_NODES", [0])
    per_graph = len(models.get_model("gpt2", batch=1).nodes)
    monkeypatch.setattr(models, "CACHE_NODES", 3 * per_graph)  # room for three gpt2 graphs
    graphs = [models.get_model("gpt2", batch=b) for b in range(1, 5)]
    assert len(models._BUILT) == 3 and models._NODES[0] == 3 * per_graph
    assert models.get_model("gpt2", batch=4) is graphs[3]  # kept
    assert models.get_model("gpt2", batch=1) is not graphs[0]  # the least recently used, dropped
    monkeypatch.setattr(models, "CACHE_SIZE", 2)
    models.get_model("gpt2", batch=5)
    assert len(models._BUILT) == 2 and models._NODES[0] == 2 * per_graph
