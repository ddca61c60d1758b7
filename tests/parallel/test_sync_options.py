"""Parameter servers and gradient compression as options of estimate and sweep (training.sync, .compression)."""
from __future__ import annotations

import pytest

from concurrency_model import estimate
from concurrency_model.parallel import compression
from concurrency_model.scenario import COMPRESSIONS
from concurrency_model.sweep import sweep

BASE = {"model": "resnet50", "cluster": "dgx1-v100", "parallel": {"data": 32, "microbatch_size": 64,
        "global_batch": 2048}, "training": {"dtype": "fp32", "optimizer": "sgd", "overlap": False}}


def run(**training):
    return estimate({**BASE, "training": {**BASE["training"], **training}})


def test_compression_shrinks_the_gradient_traffic():
    dense = run().breakdown["data_parallel_comm_s"]
    half = run(compression="fp16").breakdown["data_parallel_comm_s"]
    sparse = run(compression="topk").breakdown["data_parallel_comm_s"]
    assert 0.4 * dense < half < 0.75 * dense  # half the bytes; latency and codec time stay
    assert sparse < half
    assert run(compression="none").step_time_s == run().step_time_s


def test_parameter_servers():
    allreduce = run().breakdown["data_parallel_comm_s"]
    sharded = run(sync="parameter_server").breakdown["data_parallel_comm_s"]
    single = run(sync="parameter_server", ps_servers=1).breakdown["data_parallel_comm_s"]
    assert allreduce < sharded < single  # one server's links carry every worker's gradient (paper §7.2)
    from concurrency_model.parallel.distribution import ps_on_cluster
    grad = 25_557_032 * 4
    assert single == pytest.approx(ps_on_cluster(grad, 32, "dgx1-v100", 1, "dedicated", 8), rel=1e-9)


@pytest.mark.parametrize("training", [{"compression": "1bit"}, {"sync": "parameter_server"}])
def test_sweep_agrees_with_estimate(training):
    sc = {**BASE, "parallel": {"global_batch": 2048, "tensor": 1, "pipeline": 1},
          "training": {**BASE["training"], **training}}
    r = sweep(sc, 32)
    assert set(r.layouts["zero_stage"]) == {0}
    for i in range(min(5, r.feasible)):
        row = r.top(5).iloc[i]
        assert estimate(r.scenario(row)).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


def test_bad_input_names_the_field():
    with pytest.raises(ValueError, match=r"^training.zero_stage: parameter servers, gossip, gradient compression"):
        run(compression="fp16", zero_stage=1)
    with pytest.raises(ValueError, match=r"^training.compression: unknown 'zip'"):
        run(compression="zip")
    with pytest.raises(ValueError, match=r"^training.sync: unknown"):
        run(sync="gather")
    with pytest.raises(ValueError, match=r"^training.ps_servers: must be"):
        run(sync="parameter_server", ps_servers=-1)
    assert set(COMPRESSIONS) == {"none", *compression.SCHEMES} - {"fp32"}
