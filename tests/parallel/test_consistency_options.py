"""Consistency models as options of estimate and sweep (training.consistency, straggler_cv, staleness,
local_steps): the paper's §7.1 synchronous / stale-synchronous / asynchronous / local SGD spectrum."""
from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import estimate
from concurrency_model.cli import main
from concurrency_model.parallel.consistency import ssp_step_time, step_factors, sync_step_time
from concurrency_model.sweep import sweep

BASE = {"model": "gpt2", "cluster": "dgx-a100",
        "parallel": {"data": 8, "microbatch_size": 8, "global_batch": 64}, "training": {}}
Z8 = 1.4342  # Blom: Phi^-1((8 - 3/8) / (8 + 1/4)) = Phi^-1(0.92424), by hand from a normal table


def run(parallel=None, **training):
    # the analysis' collectives (one all-reduce a step): Megatron-Core buckets only when the reduction overlaps
    training = {"framework": "ideal", **training}
    return estimate({**BASE, "parallel": {**BASE["parallel"], **(parallel or {})}, "training": training})


def core(e) -> float:
    """A replica's compute path: the step without its data-parallel synchronisation."""
    b = e.breakdown
    return e.step_time_s - b["data_parallel_exposed_s"] - b["overlap_interference_s"]


def test_synchronous_stragglers_wait_for_the_expected_maximum():
    e0, e1 = run(), run(straggler_cv=0.1)
    assert e1.breakdown["straggler_wait_s"] == pytest.approx(0.1 * Z8 * core(e0), rel=1e-4)
    assert e1.step_time_s - e0.step_time_s == pytest.approx(e1.breakdown["straggler_wait_s"], rel=1e-9)
    # the module's synchronous step with a gaussian compute time of that mean and spread
    sync = sync_step_time(8, "gaussian", core(e0), 0.1 * core(e0), comm_s=e0.step_time_s - core(e0))
    assert e1.step_time_s == pytest.approx(sync, rel=1e-9)
    assert e0.breakdown["straggler_wait_s"] == 0.0


def test_one_replica_has_no_straggler():  # P = 1: the maximum of one time is its mean
    one = {"data": 1, "global_batch": 8}
    assert run(one, straggler_cv=0.5).step_time_s == run(one).step_time_s


def test_stale_synchronous_window_and_the_asynchronous_limit():
    e0 = run()
    # staleness 0 is synchronous SGD (a scenario says so with consistency "synchronous")
    waits = [run(straggler_cv=0.2, **({"consistency": "ssp", "staleness": s} if s else {})).breakdown["straggler_wait_s"]
             for s in (0, 1, 3, 15)]
    assert waits == sorted(waits, reverse=True)
    for s, wait in zip((0, 1, 3, 15), waits):
        assert wait == pytest.approx(0.2 * Z8 / math.sqrt(s + 1) * core(e0), rel=1e-4)
    assert run(straggler_cv=0.2, consistency="ssp", staleness=3).step_time_s == pytest.approx(
        ssp_step_time(8, 3, "gaussian", core(e0), 0.2 * core(e0), comm_s=e0.step_time_s - core(e0)), rel=1e-9)
    ps = run(sync="parameter_server")
    asynchronous = run(sync="parameter_server", consistency="asynchronous", straggler_cv=0.5)
    assert asynchronous.step_time_s == ps.step_time_s  # nobody waits: each worker's own mean step
    assert asynchronous.breakdown["straggler_wait_s"] == 0.0


def test_local_sgd_amortises_a_blocking_average():
    blocking = run(overlap=False)
    assert run(consistency="local_sgd", local_steps=1).step_time_s == pytest.approx(blocking.step_time_s, rel=1e-12)
    four = run(consistency="local_sgd", local_steps=4)
    assert four.breakdown["data_parallel_exposed_s"] == pytest.approx(
        blocking.breakdown["data_parallel_exposed_s"] / 4, rel=1e-12)
    assert four.step_time_s < blocking.step_time_s
    assert run(consistency="local_sgd", local_steps=4, straggler_cv=0.2).breakdown["straggler_wait_s"] == \
        pytest.approx(0.2 * Z8 / 2 * core(blocking), rel=1e-4)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4096), st.integers(1, 4096), st.floats(0, 2), st.integers(0, 64))
def test_step_factors_properties(p, q, cv, s):
    lo, hi = sorted((p, q))
    assert step_factors(lo, "synchronous", cv)[0] <= step_factors(hi, "synchronous", cv)[0] + 1e-12
    assert step_factors(hi, "ssp", cv, staleness=s + 1)[0] <= step_factors(hi, "ssp", cv, staleness=s)[0] + 1e-12
    assert step_factors(hi, "ssp", cv, staleness=0) == step_factors(hi, "synchronous", cv)
    assert step_factors(hi, "local_sgd", cv, local_steps=s + 1)[1] == pytest.approx(1 / (s + 1))
    assert step_factors(hi, "asynchronous", cv) == (0.0, 1.0)


def test_sweep_agrees_with_estimate():
    sc = {**BASE, "parallel": {"global_batch": 64, "tensor": 1, "pipeline": 1},
          "training": {"straggler_cv": 0.2, "consistency": "local_sgd", "local_steps": 4}}
    r = sweep(sc, [8, 16])
    assert set(r.layouts["zero_stage"]) == {0}
    for i in range(min(4, r.feasible)):
        row = r.top(4).iloc[i]
        assert estimate(r.scenario(row)).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)


@pytest.mark.parametrize("training, message", [
    ({"consistency": "eventual"}, r"^training.consistency: unknown 'eventual'"),
    ({"staleness": 2}, r"^training.staleness: only used with consistency \"ssp\""),
    ({"consistency": "ssp", "staleness": -1}, r"^training.staleness: must be an integer >= 0, got -1"),
    ({"consistency": "ssp"}, r"^training.staleness: consistency \"ssp\" needs a staleness bound >= 1"),
    ({"local_steps": 4}, r"^training.local_steps: only used with consistency \"local_sgd\""),
    ({"consistency": "local_sgd", "local_steps": 0}, r"^training.local_steps: must be a positive integer"),
    ({"straggler_cv": -0.1}, r"^training.straggler_cv: must be a number >= 0"),
    ({"straggler_cv": True}, r"^training.straggler_cv: must be a number >= 0"),
    ({"consistency": "asynchronous"}, r"^training.consistency: \"asynchronous\" updates go through parameter"),
    ({"consistency": "ssp", "staleness": 1, "zero_stage": 1}, r"^training.zero_stage: .* consistency models"),
])
def test_bad_input_names_the_field(training, message):
    with pytest.raises(ValueError, match=message):
        run(**training)


def test_cli_refuses_a_bad_consistency(tmp_path, capsys):
    import json
    path = tmp_path / "s.json"
    path.write_text(json.dumps({**BASE, "training": {"consistency": "ssp", "staleness": 3, "local_steps": 2}}))
    assert main(["estimate", "--scenario", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "error: training.local_steps: only used with" in err[0]


GOSSIP = {"model": "resnet50", "cluster": "dgx1-v100", "parallel": {"data": 32, "microbatch_size": 64,
          "global_batch": 2048}, "training": {"dtype": "fp32", "optimizer": "sgd", "overlap": False}}


def gossip_run(**training):
    return estimate({**GOSSIP, "training": {**GOSSIP["training"], **training}})


def test_gossip_is_one_round_per_step_and_waits_for_neighbours_only():
    from concurrency_model.parallel.distribution import gossip_on_cluster
    ring = gossip_run(sync="gossip")
    grad = 25_557_032 * 4  # resnet50's fp32 parameters, sent to each neighbour (D-PSGD)
    assert ring.breakdown["data_parallel_comm_s"] == pytest.approx(gossip_on_cluster(grad, 32, "dgx1-v100"), rel=1e-9)
    expo = gossip_run(sync="gossip", gossip_topology="exponential")  # 5 neighbours instead of 2
    complete = gossip_run(sync="gossip", gossip_topology="complete")  # 31
    assert complete.breakdown["data_parallel_comm_s"] > expo.breakdown["data_parallel_comm_s"] \
        > ring.breakdown["data_parallel_comm_s"]
    # a ring worker waits for its 2 neighbours: the maximum of 3 replicas, not of 32
    z3, z32 = 0.8694, 2.0669  # Blom: Phi^-1(2.625 / 3.25), Phi^-1(31.625 / 32.25)
    ring_wait = gossip_run(sync="gossip", straggler_cv=0.1).breakdown["straggler_wait_s"]
    allreduce_wait = gossip_run(straggler_cv=0.1).breakdown["straggler_wait_s"]
    assert ring_wait == pytest.approx(0.1 * z3 * core(ring), rel=1e-3)
    assert allreduce_wait == pytest.approx(0.1 * z32 * core(gossip_run()), rel=1e-3)


def test_gossip_in_a_sweep_and_its_bad_input():
    sc = {**GOSSIP, "parallel": {"global_batch": 2048, "tensor": 1, "pipeline": 1},
          "training": {**GOSSIP["training"], "sync": "gossip", "gossip_topology": "exponential", "straggler_cv": 0.1}}
    r = sweep(sc, [16, 32])
    for i in range(min(4, r.feasible)):
        row = r.top(4).iloc[i]
        assert estimate(r.scenario(row)).step_time_s == pytest.approx(row["step_time_s"], rel=1e-9)
    with pytest.raises(ValueError, match=r"^training.gossip_topology: only used with sync 'gossip'"):
        gossip_run(gossip_topology="exponential")
    with pytest.raises(ValueError, match=r"^training.gossip_topology: unknown 'torus'"):
        gossip_run(sync="gossip", gossip_topology="torus")
