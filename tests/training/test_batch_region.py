"""The global batch in the paper's three regions (§3, Fig. 6a; concurrency_model.parallel.batch_size)."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from concurrency_model.cli import main
from concurrency_model.parallel.batch_size import LARGEST, UNDERUSED, region
from concurrency_model.training.estimate import estimate


def rate(b):  # samples/s of a device with a fixed cost of 3 sample-times a step: b / (b + 3)
    return b / (b + 3)


def test_region_by_hand():
    r = region(512, 8192, 8, rate, fits=lambda b: b <= 32)
    # powers of two that fit: 1..32; the best is 32 (32/35); at 8: 8/11 -> (8/11) / (32/35) = 0.7955
    assert r.saturating_batch == 32 and r.device_utilization == pytest.approx(280 / 352, rel=1e-12)
    assert r.region == "A" and r.per_replica_batch == 8
    # a per-replica batch that does not fit in memory runs at the largest power of two that does
    r = region(4096, 8192, 48, rate, fits=lambda b: b <= 32)
    assert r.device_utilization == 1.0 and r.region == "B"
    # above the ceiling it is C, whatever the device does
    assert region(16384, 8192, 1, rate, fits=lambda b: True).region == "C"
    assert region(16384, 16384, 1024, rate, fits=lambda b: True).region == "B"
    assert region(1, 8192, 1, rate, fits=lambda b: True).saturating_batch == LARGEST  # rate still rising


@given(st.integers(1, 1 << 14), st.floats(0.01, 100))
def test_utilization_is_at_most_one_and_grows_with_the_batch(per_replica, fixed):
    def r(b):
        return b / (b + fixed)
    a = region(per_replica, 8192, per_replica, r, fits=lambda b: True)
    bigger = region(2 * per_replica, 8192, 2 * per_replica, r, fits=lambda b: True)
    assert 0 < a.device_utilization <= bigger.device_utilization <= 1.0
    assert (a.region == "A") == (a.device_utilization < UNDERUSED)


RESNET = {"model": "resnet50", "cluster": "dgx1-v100", "training": {"dtype": "fp16"}}


def test_resnet50_on_256_v100s():
    # 8 images a V100 a step: the kernels' small-size efficiency leaves most of the device unused
    small = estimate({**RESNET, "parallel": {"data": 256, "global_batch": 2048}})
    assert small.batch_region.region == "A" and small.batch_region.per_replica_batch == 8
    assert small.batch_region.device_utilization < 0.5 and "region A" in small.notes[0]
    # 128 a device (32k): the device is used, the batch is past the default ceiling (8k, Fig. 6b) ...
    big = estimate({**RESNET, "parallel": {"data": 256, "microbatch_size": 128, "global_batch": 32768}})
    assert big.batch_region.device_utilization > UNDERUSED and big.batch_region.region == "C"
    assert "32k (You et al., LARS) was reached" in big.notes[0]
    # ... and inside it with a large-batch rule's ceiling
    lars = estimate({**RESNET, "parallel": {"data": 256, "microbatch_size": 128, "global_batch": 32768},
                     "training": {"dtype": "fp16", "max_global_batch": 32768}})
    assert lars.batch_region.region == "B" and lars.notes == ()
    # the same global batch over fewer replicas gives each a larger share: utilization rises
    fewer = estimate({**RESNET, "parallel": {"data": 64, "global_batch": 2048}})
    assert fewer.batch_region.device_utilization > small.batch_region.device_utilization
    assert fewer.batch_region.saturating_batch == small.batch_region.saturating_batch


def test_tensor_parallel_devices_need_more_samples():
    # a tensor-parallel device multiplies smaller matrices: at one sample it is further from saturation
    one = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 8, "global_batch": 8},
           "training": {"host_overhead_s": 0}}
    tp = {**one, "parallel": {"data": 2, "tensor": 4, "global_batch": 2}}
    assert estimate(tp).batch_region.device_utilization < estimate(one).batch_region.device_utilization < UNDERUSED


def test_bad_ceiling_and_json(tmp_path, capsys):
    with pytest.raises(ValueError, match="^training.max_global_batch: must be a positive integer"):
        estimate({**RESNET, "training": {"max_global_batch": 0}})
    f = tmp_path / "r.json"
    f.write_text('{"model": "resnet50", "cluster": "dgx1-v100", "parallel": {"data": 256, "global_batch": 2048},'
                 ' "training": {"dtype": "fp16"}}')
    assert main(["estimate", "--scenario", str(f), "--json"]) == 0
    import json
    out = json.loads(capsys.readouterr().out)
    assert out["batch_region"]["region"] == "A" and out["training"]["max_global_batch"] == 8192
    assert main(["estimate", "--scenario", str(f)]) == 0
    assert "note: 8 samples a step per data-parallel replica run a device at" in capsys.readouterr().out


def test_an_estimate_pickles_with_its_region():
    # estimates travel between processes (report workers, user pools): the lazily computed region must not stop them
    import pickle
    e = estimate({**RESNET, "parallel": {"data": 256, "global_batch": 2048}})
    back = pickle.loads(pickle.dumps(e))
    assert back.step_time_s == e.step_time_s and back.batch_region == e.batch_region
