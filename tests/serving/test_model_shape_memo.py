"""model_shape is read once a graph (serving.memo) and hands each caller its own dict."""
from __future__ import annotations

import pytest

from concurrency_model.models import get_model
from concurrency_model.serving.overheads import model_graph, model_shape


def test_model_shape_is_read_once_a_graph_and_copied():
    g = model_graph({"hf_config": "llama-2-7b"}, 1, None, 2)
    s = model_shape(g)
    # LLaMA-2-7B: 32 layers of 32 heads of 128, hidden 4096, vocabulary 32,000, context 4,096 (its config.json)
    assert (s["layers"], s["heads"], s["kv_heads"], s["head_dim"], s["hidden"], s["vocab"], s["context"]) == \
        (32, 32, 32, 128, 4096, 32000, 4096)
    s["layers"] = -1  # a caller's edit stays its own
    again = model_shape(g)
    assert again["layers"] == 32 and again is not s
    assert again == model_shape(model_graph({"hf_config": "llama-2-7b"}, 1, None, 2))


def test_model_shape_refuses_a_non_decoder_every_time():
    g = get_model("resnet50")
    for _ in range(2):
        with pytest.raises(ValueError, match="^model: inference with a KV cache needs a causal decoder"):
            model_shape(g)
