"""The GEMM and convolution parts kept per kernel arguments (timing.graph._kept, the report's speed, issue 38) give
every layer the arrays a fresh kernel model gives, and a convolution a Parts object of its own."""
from __future__ import annotations

import numpy as np
import pytest

from concurrency_model import get_model
from concurrency_model.timing import graph as tg

FIELDS = ("compute", "memory", "extra", "launch", "count")


def rows_of(model, batch, dev, dtype, **kw):
    return tg.layer_parts(get_model(model, batch=batch), dev, dtype, **kw)


def same(a, b) -> bool:
    return all(np.asarray(getattr(a, f)).tobytes() == np.asarray(getattr(b, f)).tobytes() for f in FIELDS)


@pytest.mark.parametrize("model,dev,dtype,kw", [
    ("resnet50", "v100-sxm2-32gb", "fp16", {}),
    ("gpt2", "a100-sxm4-80gb", "bf16", {"tensor": 2}),
    ("alexnet", "p100-sxm2-16gb", "fp32", {"tensor": 2}),
])
def test_kept_parts_are_the_fresh_ones(model, dev, dtype, kw):
    tg._KEPT.clear()
    first = rows_of(model, 4, dev, dtype, **kw)  # fills the kept parts
    assert tg._KEPT
    again = rows_of(model, 4, dev, dtype, **kw)  # served from them
    tg._KEPT.clear()
    fresh = rows_of(model, 4, dev, dtype, **kw)
    for a, b, c in zip(first, again, fresh):
        assert a["algorithm"] == b["algorithm"] == c["algorithm"]
        for p in tg.PASSES:
            assert same(a[p], c[p]) and same(b[p], c[p]), (a["name"], p)


def test_a_kept_convolution_is_a_new_object():
    tg._KEPT.clear()
    a = rows_of("resnet50", 2, "v100-sxm2-32gb", "fp16")
    b = rows_of("resnet50", 2, "v100-sxm2-32gb", "fp16")
    conv = [i for i, r in enumerate(a) if r["op"] == "conv2d"]
    assert conv and all(a[i]["forward"] is not b[i]["forward"] for i in conv)


def test_the_kept_parts_are_bounded(monkeypatch):
    monkeypatch.setattr(tg, "KEPT_SIZE", 3)
    tg._KEPT.clear()
    rows_of("resnet50", 3, "v100-sxm2-32gb", "fp16")
    assert len(tg._KEPT) <= 3


@pytest.mark.parametrize("model,batch,dev,dtype,kw", [
    ("resnet50", 7, "v100-sxm2-32gb", "fp16", {}),
    ("inception_v3", 3, "p40-24gb", "fp32", {"tensor": 2}),  # 1x7 and 7x1 convolutions, a channel split
    ("gpt2", 5, "a100-sxm4-80gb", "bf16", {"tensor": 4, "sequence_parallel": True}),
    ({"hf_config": "llama-3-8b", "seq_len": 512}, 3, "h100-sxm5-80gb", "fp8", {"fp8_recipe": "torchao"}),  # q, k, v
    ({"hf_config": "mixtral-8x7b", "seq_len": 256}, 2, "h100-sxm5-80gb", "bf16", {"expert": 2, "imbalance": 1.3}),
    ({"hf_config": "llama-3-8b", "seq_len": 256}, 1, "a100-sxm4-80gb", "fp16",
     {"passes": ("forward",), "weight_bytes": 0.5}),
    ({"hf_config": "llama-3-8b", "seq_len": 256}, 1, "a100-sxm4-80gb", "fp16",
     {"passes": ("forward",), "weight_sparsity": "2:4"}),
])
def test_prefetched_kernels_are_the_one_row_ones(model, batch, dev, dtype, kw, monkeypatch):
    """The kernels layer_parts computes in one vectorised call per kind (_prefetch) have the bytes and algorithms
    of the kernel models called one shape at a time."""
    tg._KEPT.clear()
    together = rows_of(model, batch, dev, dtype, **kw)
    assert len(tg._KEPT) > (0 if "weight_sparsity" in kw else 2)  # sparse GEMMs are not kept
    tg._KEPT.clear()
    with monkeypatch.context() as m:
        m.setattr(tg, "_prefetch", lambda *args, **kwargs: None)
        alone = rows_of(model, batch, dev, dtype, **kw)
    tg._KEPT.clear()
    assert len(together) == len(alone)
    for a, b in zip(together, alone):
        assert a["algorithm"] == b["algorithm"]
        for p in tg.PASSES:
            if p in a:
                assert same(a[p], b[p]), (a["name"], p)
