"""GPipe's re-materialisation of a graph model (a CNN) in memory: each stage keeps its input per microbatch and one
microbatch's activations (:func:`concurrency_model.parallel.memory.rematerialised_stage_bytes`, GPipe §2.3)."""
import pytest

from concurrency_model.models import get_model
from concurrency_model.parallel.memory import graph_activation_bytes, rematerialised_stage_bytes
from concurrency_model.sweep import sweep
from concurrency_model.training.estimate import estimate


def test_two_stages_by_hand():
    # ResNet-50 at 4 images cut after its 60th layer: the first stage keeps the images (4 x 3 x 224 x 224 fp32 values)
    # per microbatch, the second the tensors it reads from the first; each stage rebuilds one microbatch's own
    g = get_model("resnet50", batch=4)
    layers = g.layers()
    n, cut = len(layers), 60
    first, second = layers[:cut], layers[cut:]
    inside = {x.name for x in second}
    read = {src for x in second for src in x.inputs if src not in inside}
    second_in = sum(4 * g.nodes[src].numel * 4 for src in read)
    acts = [sum(float(x.cost.forward.act_bytes) for x in part) for part in (first, second)]
    for m in (1, 7, 50):
        want = max(m * 4 * 3 * 224 * 224 * 4 + acts[0], m * second_in + acts[1])
        assert rematerialised_stage_bytes(g, [(0, cut), (cut, n)], m) == pytest.approx(want, rel=1e-12)
    # one stage and one microbatch: the input and every activation once
    assert rematerialised_stage_bytes(g, [(0, n)], 1) == graph_activation_bytes(g) + 4 * 3 * 224 * 224 * 4


SC = {"model": "resnet101", "cluster": "dgx-a100",
      "parallel": {"data": 1, "pipeline": 2, "microbatch_size": 8, "global_batch": 8 * 400, "schedule": "gpipe"},
      "training": {"dtype": "fp32", "optimizer": "sgd", "recompute": "full"}}


def test_many_microbatches_keep_the_stage_inputs_not_their_checkpoints():
    # 400 microbatches of 8 images over 2 stages: the old count (sqrt(n) checkpoints of every microbatch) needed
    # hundreds of GB; GPipe keeps each microbatch's stage input, and its estimate grows by that alone
    e = estimate(SC)
    more = estimate({**SC, "parallel": {**SC["parallel"], "global_batch": 8 * 401}})
    per_microbatch = more.memory["activations_bytes"] - e.memory["activations_bytes"]
    assert 0 < per_microbatch < graph_activation_bytes(get_model("resnet101", batch=8), "full") / 2
    assert e.memory["activations_bytes"] < 80e9
    # the sweep prices the same layout the same way
    r = sweep({**SC, "parallel": {k: v for k, v in SC["parallel"].items() if k != "schedule"} | {"schedule": "gpipe"}},
              2)
    row = r.frame[(r.frame["pipeline"] == 2) & (r.frame["microbatch_size"] == 8) & (r.frame["recompute"] == "full")]
    assert len(row)
    got = estimate(r.scenario(row.iloc[0]))
    assert got.memory_bytes_per_device == pytest.approx(row.iloc[0]["memory_bytes_per_device"], rel=1e-9)
