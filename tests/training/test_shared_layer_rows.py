"""Layer tables and training FLOP kept per graph (training.workload._KERNEL_ROWS, _FLOP): the workloads of one model
on clusters that differ only in their node count (a scaling curve's points) share the kernels of their layer table,
and every number they give is the one a workload computing alone gives."""
from __future__ import annotations

import dataclasses

import numpy as np

from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.training import workload as wl

MODEL = {"kind": "gpt", "layers": 4, "hidden": 512, "heads": 8, "seq_len": 256, "vocab": 1000}


def _flat(rows) -> list:
    out = []
    for r in rows:
        for k in sorted(r):
            v = r[k]
            if hasattr(v, "compute"):
                out.append((k, *(getattr(v, f).tobytes() for f in ("compute", "memory", "extra", "launch", "count"))))
            else:
                out.append((k, repr(v)))
    return out


def test_two_clusters_of_one_device_share_the_kernels_and_give_the_numbers_of_a_lone_workload():
    one = load_cluster("dgx-a100")
    many = dataclasses.replace(one, nodes=8)
    a = wl.Workload(MODEL, one, "bf16")
    b = wl.Workload(MODEL, many, "bf16")
    rows_a, rows_b = a.layers(4, 2, True), b.layers(4, 2, True)
    g = a.graph(4)
    assert b.graph(4) is g and len(wl._KERNEL_ROWS[g][1]) == 1  # one table of kernels for both
    assert rows_a[1]["f"] is rows_b[1]["f"]
    flop = a.training_flop(4)
    assert b.training_flop(4) == flop and wl._FLOP[g][1] == {0: flop}
    # the same numbers with nothing kept: a workload that computes everything itself
    wl._KERNEL_ROWS.clear()
    wl._FLOP.clear()
    lone = wl.Workload(MODEL, many, "bf16")
    assert _flat(lone.layers(4, 2, True)) == _flat(rows_b)
    assert lone.training_flop(4) == flop > 0
    assert lone.stage(4, 2, True, "full", 2)["tp_f"] == b.stage(4, 2, True, "full", 2)["tp_f"]


def test_another_tensor_degree_or_dtype_gets_its_own_table():
    c = load_cluster("dgx-a100")
    w = wl.Workload(MODEL, c, "bf16")
    w.layers(2, 1, False)
    w.layers(2, 2, False)
    wl.Workload(MODEL, c, "fp16").layers(2, 1, False)
    keys = wl._KERNEL_ROWS[w.graph(2)][1]
    assert sorted((k[1], k[2]) for k in keys) == [("bf16", 1), ("bf16", 2), ("fp16", 1)]
    f1, f2 = (w.layers(2, t, False)[1]["f"].total() for t in (1, 2))
    assert np.isclose(f1, 2 * f2, rtol=0.5) and f1 > f2  # a tensor split's share of the kernels is smaller


def test_a_device_below_its_peak_rate_keeps_its_slowed_kernels_shared_like_layer_parts_does():
    """dgx-h100's GPUs sustain 0.9 of their kernels' rate (hardware.Efficiency.sustained): every row's passes are
    layer_parts' at that rate, and rows that shared a Parts object share its slowed one."""
    c = load_cluster("dgx-h100")
    s = c.device.efficiency.sustained
    assert s == 0.9
    w = wl.Workload(MODEL, c, "bf16")
    rows = w._kernel_rows(w.graph(2), 1, False, {}, 1)
    ref = wl.layer_parts(w.graph(2), c.device, "bf16", rate_8bit=wl.eight_bit_rate(c.device))
    for r, q in zip(rows, ref):
        for p in ("forward", "grad_input", "grad_weight"):
            mine, theirs = r[p], q[p].with_math_rate(s)
            assert all(np.array_equal(getattr(mine, k), getattr(theirs, k)) for k in ("compute", "memory", "count"))
    shared = [(i, j) for i in range(len(ref)) for j in range(i) if ref[i]["forward"] is ref[j]["forward"]]
    assert shared  # the blocks' identical layers share their Parts in layer_parts, and so after slowing
    assert all(rows[i]["forward"] is rows[j]["forward"] for i, j in shared)
    assert w._kernel_rows(w.graph(2), 1, False, {}, 1)[1]["forward"] is rows[1]["forward"]  # kept
    rows = w.layers(2, 1, False)
    assert rows[1]["f_s"] > 0


def test_rows_of_alike_nodes_computed_once_are_those_computed_for_each_node(monkeypatch):
    """Layer rows shared by nodes alike (workload.SHARE_ALIKE_ROWS) equal the rows computed node by node, with tensor
    parallelism, async TP's fused copies, sequence parallelism, the per-op recompute, LoRA adapters, the loss on the
    output layer and expert parallelism's all-to-alls."""
    c = load_cluster("dgx-a100")
    moe = {"hf_config": "mixtral-8x7b", "seq_len": 128}
    cases = [(MODEL, {}, (4, 2, True)), (MODEL, {"tp_overlap": True, "selective": "op"}, (2, 4, True)),
             (MODEL, {"lora_rank": 8}, (2, 1, False)), (moe, {}, (1, 2, False, 1, "ring", 4))]
    for model, options, args in cases:
        shared = wl.Workload(model, c, "bf16", **options).layers(*args)
        with monkeypatch.context() as m:
            m.setattr(wl, "SHARE_ALIKE_ROWS", False)
            alone = wl.Workload(model, c, "bf16", **options).layers(*args)
        assert _flat(shared) == _flat(alone)
        assert [list(r) for r in shared] == [list(r) for r in alone]  # the same keys in the same order
        blocks = [r for r in shared if r["name"].endswith((".fc2", ".experts.w2"))]  # one a block
        assert len(blocks) > 1 and blocks[0]["f"] is blocks[1]["f"]
