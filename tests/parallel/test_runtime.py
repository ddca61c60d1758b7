"""Runtimes (``training.framework``, :mod:`concurrency_model.parallel.runtime`): the data-parallel collectives cut
into the calls a runtime issues, by hand on small cases, and the property that a real runtime is never faster than
the ideal model."""
import json
import math
import subprocess
from dataclasses import replace
import sys

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from concurrency_model import estimate
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.training.workload import workload
from concurrency_model.parallel.runtime import (HOST_COPY_S, HOST_GATHER_COPY_S, HOST_VIEW_S, PROFILES,
                                               has_zero_stage, overlaps, runs_with, runtime_of, units)
from concurrency_model.sweep import sweep
from concurrency_model.parallel.triples import collective_triple, triple_seconds

CLUSTER = load_cluster("dgx-a100")
GPT2 = "gpt2"


def test_gpt2_parameter_tensors_by_hand():
    w = workload(GPT2, CLUSTER, "bf16")
    rows = w.param_tensors()
    # 12 blocks of 2 layer norms + 4 linear layers, each two tensors, and wte, wpe and ln_f's two
    assert len(rows) == 12 * 12 + 2 + 2
    assert sum(r[2] for r in rows) == w.params == 124_439_808
    qkv = [r[2] for r in rows if r[1] == "h.0.qkv"]
    assert qkv == [768 * 2304, 2304]


def test_megatron_buckets_by_hand():
    """Megatron-Core: max(40 M, 1 M x d) parameters a bucket; at d = 64 a bucket is 64 M parameters, so the
    124.4 M of GPT-2 make one full bucket and one of 60.4 M, each its own all-reduce of 2-byte gradients."""
    w = workload(GPT2, CLUSTER, "bf16")
    d, rpn = 64, 8
    dp = w.data_parallel(1, 1, d, "allreduce", 0, "none", "ring", ("megatron", None, None, 2, True), "none")
    one = collective_triple("allreduce", 64e6 * 2, d, CLUSTER, rpn, 1)
    rest = collective_triple("allreduce", (124_439_808 - 64e6) * 2, d, CLUSTER, rpn, 1)
    assert dp["ar"] == pytest.approx(tuple(a + b for a, b in zip(one, rest)), rel=1e-12)
    # without overlap Megatron-Core reduces the whole buffer at once (bucket_size None): the ideal's one call
    whole = w.data_parallel(1, 1, d, "allreduce", 0, "none", "ring", ("megatron", None, None, 2, False), "none")
    assert whole["ar"] == pytest.approx(collective_triple("allreduce", 124_439_808 * 2, d, CLUSTER, rpn, 1))


def test_each_stage_buckets_its_own_parameters():
    """Under pipeline stages every stage reduces its own buffer: Megatron-Core's one call a pass (no overlap) is one
    call of the stage's share on each of the 4 stages, with its whole latency (not a quarter of a call of the whole
    model), as the ideal model's; FSDP's per-module units stay on their stage, a quarter of the 12 blocks' calls."""
    w = workload(GPT2, CLUSTER, "bf16")
    d, p, rpn = 64, 4, 8
    whole = w.data_parallel(1, p, d, "allreduce", 0, "none", "ring", ("megatron", None, None, 2, False), "none")
    share = collective_triple("allreduce", 124_439_808 / p * 2, d, CLUSTER, rpn, 1)
    assert whole["ar"] == pytest.approx(share, rel=1e-12)
    ideal = w.data_parallel(1, p, d, "allreduce", 0, "none", "ring", ("ideal", None, None, 2, False), "none")
    assert whole["ar"][0] == pytest.approx(ideal["ar"][0], rel=1e-12)  # one latency a stage, as the ideal's
    fsdp = w.data_parallel(1, p, d, "allreduce", 0, "none", "ring", ("fsdp", None, None, 2, True), "none", zero=3)
    block = collective_triple("reduce_scatter", 7_087_872.0 * 2, d, CLUSTER, rpn, 1)
    root = collective_triple("reduce_scatter", (38_597_376 + 786_432 + 2 * 768) * 2, d, CLUSTER, rpn, 1)
    assert fsdp["rs"] == pytest.approx(tuple(12 / p * b + r / p for b, r in zip(block, root)), rel=1e-12)


def test_fsdp_prefetch_exposes_the_first_unit_of_each_pass():
    """FSDP gathers one block a call and prefetches the next: the first unit's gather of the forward and of the
    backward pass cannot hide (x_dp), the rest goes through the overlap of :mod:`.compose`."""
    w = workload(GPT2, CLUSTER, "bf16")
    d = 16
    dp = w.data_parallel(1, 1, d, "allreduce", 0, "none", "ring", ("fsdp", None, None, 2, True), "none", zero=3)
    root = 38_597_376 + 786_432 + 2 * 768  # wte, wpe and the final norm: FSDP's root unit, gathered first
    first = collective_triple("allgather", root * 2, d, CLUSTER, 8, 1)
    assert dp["x_dp"] == pytest.approx(tuple(2 * x for x in first), rel=1e-12)
    gathers = units(list(w.param_tensors()), PROFILES["fsdp"], "gather", d)
    assert gathers == [root] + [7_087_872.0] * 12  # the root, then each block's 12 tensors
    assert dp["agb"] == dp["ag"]  # the checkpointed forward runs inside the unit, parameters gathered


def test_fsdp2_copies_around_its_collectives_by_hand():
    """FSDP2 (no flat parameter) copies each gathered parameter out and each gradient into the fp32 reduce-scatter
    input on the compute stream: GPT-2's 124,439,808 parameters over 16 ranks, gathered twice in bf16 (read and write
    2 bytes each: 8 bytes a parameter) and reduced once (read 2, write 4): 14 bytes a parameter, exposed outright
    (x_dp) at the A100's memory rate; FSDP's flat parameter has none, so the two differ by exactly that."""
    w = workload(GPT2, CLUSTER, "bf16")
    d, n = 16, 124_439_808
    args = ("allreduce", 0, "none", "ring")
    two = w.data_parallel(1, 1, d, *args, ("fsdp2", None, None, 2, True), "none", zero=3)
    one = w.data_parallel(1, 1, d, *args, ("fsdp", None, None, 2, True), "none", zero=3)
    rate = float(w.dev.efficiency.memory) * float(w.dev.mem_bw)
    assert two["x_dp"][0] - one["x_dp"][0] == pytest.approx(n * 14 / rate, rel=1e-12)
    assert two["x_dp"][1:] == one["x_dp"][1:]
    # over 2 tensor ranks and 2 stages each device copies a quarter
    quarter = w.inline_copies(PROFILES["fsdp2"], 2, 2, d, 2, 4)
    assert quarter == pytest.approx(n / 4 * 14 / rate, rel=1e-12)
    # fp32 training: 4-byte gathers and gradients, reduced in fp32: 2 x 2 x 4 + 4 + 4 = 24 bytes a parameter
    w32 = workload(GPT2, CLUSTER, "fp32")
    assert w32.inline_copies(PROFILES["fsdp2"], 1, 1, d, 2, 4) == pytest.approx(n * 24 / rate, rel=1e-12)


@settings(max_examples=30, deadline=None)
@given(t=st.sampled_from([1, 2, 4]), p=st.sampled_from([1, 2, 3]), d=st.sampled_from([2, 8, 64]),
       gathers=st.integers(0, 3), wire=st.sampled_from([2, 4]))
def test_fsdp2_copies_are_a_share_of_the_stage_whatever_the_group(t, p, d, gathers, wire):
    """Each device copies its stage's unsharded parameters (1 / (t p) of the model's) whatever the data-parallel group:
    ``gathers`` x 2 reads and writes of 2-byte values and one 2-byte read and ``wire``-byte write, at the memory rate."""
    w = workload(GPT2, CLUSTER, "bf16")
    rate = float(w.dev.efficiency.memory) * float(w.dev.mem_bw)
    got = w.inline_copies(PROFILES["fsdp2"], t, p, d, gathers, wire)
    assert got == pytest.approx(w.params / (t * p) * (gathers * 4 + 2 + wire) / rate, rel=1e-12)


def test_fsdp2_copies_slow_its_step_against_fsdp():
    """The same scenario under FSDP2 and FSDP differs by FSDP2's copies (and its fp32 reduction): never faster."""
    sc = {"model": GPT2, "parallel": {"data": 8, "microbatch_size": 4, "global_batch": 32},
          "training": {"zero_stage": 3, "framework": "fsdp"}}
    fsdp = estimate(sc)
    sc["training"]["framework"] = "fsdp2"
    fsdp2 = estimate(sc)
    assert fsdp2.breakdown["data_parallel_exposed_s"] > fsdp.breakdown["data_parallel_exposed_s"]
    assert fsdp2.step_time_s > fsdp.step_time_s


def test_reduce_dtype_sets_the_bytes_on_the_wire():
    """``training.reduce_dtype`` fp32 makes FSDP's per-block reduce-scatter move 4-byte gradients: GPT-2's root unit
    and its 12 blocks, each one call over 16 ranks, by hand; bf16 keeps FSDP's default (the parameters' dtype)."""
    w = workload(GPT2, CLUSTER, "bf16")
    d = 16
    args = ("allreduce", 0, "none", "ring")
    fp32 = w.data_parallel(1, 1, d, *args, ("fsdp", None, None, 2, True, "fp32"), "none", zero=3)
    bf16 = w.data_parallel(1, 1, d, *args, ("fsdp", None, None, 2, True, "bf16"), "none", zero=3)
    plain = w.data_parallel(1, 1, d, *args, ("fsdp", None, None, 2, True), "none", zero=3)
    root = 38_597_376 + 786_432 + 2 * 768
    calls = [collective_triple("reduce_scatter", n * 4, d, CLUSTER, 8, 1) for n in [root] + [7_087_872] * 12]
    assert fp32["rs"] == pytest.approx(tuple(sum(c[i] for c in calls) for i in range(3)), rel=1e-12)
    assert bf16["rs"] == plain["rs"] != fp32["rs"]
    assert fp32["ag"] == plain["ag"]  # the parameters are still gathered in bf16
    sc = {"model": GPT2, "parallel": {"data": d, "global_batch": 32},
          "training": {"zero_stage": 3, "framework": "fsdp"}}
    slow = estimate({**sc, "training": {**sc["training"], "reduce_dtype": "fp32"}})
    assert slow.breakdown["data_parallel_comm_s"] > estimate(sc).breakdown["data_parallel_comm_s"]


def test_deepspeed_03_is_serialised_with_list_copies():
    """DeepSpeed 0.3.13: one call per tensor over 1e5 elements (gathers) or per gradient tensor (reductions), the
    recomputed forward gathering again, nothing overlapped, d copies per call (PyTorch 1.8's list-form collectives:
    a Python view, a copy_ and a copy kernel per rank), the device's own copies (3 bytes a byte gathered, 4 a byte
    reduced, 2 more for a gradient that fits the 5e7-element bucket) and the persistent tensors gathered back once."""
    w = workload(GPT2, CLUSTER, "bf16")
    d = 16
    spec = ("deepspeed-0.3", None, None, 2, True)
    dp = w.data_parallel(1, 1, d, "allreduce", 0, "none", "ring", spec, "full", zero=3)
    assert dp["ag"] == dp["agb"] == dp["rs"] == (0.0, 0.0, 0.0)
    rows = w.param_tensors()
    big = [r[2] for r in rows if r[2] >= 1e5]
    small = [r[2] for r in rows if r[2] < 1e5]
    assert len(big) == 12 * 4 + 2 and len(small) == 12 * 8 + 2
    dev = CLUSTER.device
    per_rank = float(dev.launch_overhead) + HOST_VIEW_S + HOST_COPY_S  # a view, a copy_ and a copy kernel per rank
    ag = [sum(x) for x in zip(*(collective_triple("allgather", n * 2, d, CLUSTER, 8, 1) for n in big))]
    rs = [sum(x) for x in zip(*(collective_triple("reduce_scatter", r[2] * 2, d, CLUSTER, 8, 1) for r in rows))]
    copies = (3 * len(big) + len(rows)) * d * per_rank  # forward, recompute and backward gathers, every reduction
    # every GPT-2 tensor is under the 5e7-element bucket: 4 + 2 bytes a byte reduced, 3 a byte gathered, 3 gathers
    moved = (3 * 3 * sum(big) + 6 * w.params) * 2 / float(dev.efficiency.memory) / float(dev.mem_bw)
    # the persistent tensors: one gather of their parts (ceil(n / 16) values a rank), then a copy per rank whose part
    # starts inside the tensor: ceil(n / ceil(n / 16)) of them (768 values: 16 ranks of 48; 2,304: 16 of 144)
    parts = [math.ceil(n / d) for n in small]
    one = collective_triple("allgather", sum(parts) * d * 2, d, CLUSTER, 8, 1)
    host = d * per_rank + sum(math.ceil(n / k) for n, k in zip(small, parts)) * (float(dev.launch_overhead)
                                                                                 + HOST_GATHER_COPY_S)
    assert sum(math.ceil(n / k) for n, k in zip(small, parts)) == len(small) * d
    expect = (3 * ag[0] + rs[0] + copies + moved + one[0] + host, 3 * ag[1] + rs[1] + one[1],
              3 * ag[2] + rs[2] + one[2])
    assert dp["x_dp"] == pytest.approx(expect, rel=1e-9)


def test_deepspeed_03_reduction_copies_by_bucket():
    """A gradient over the 5e7-element bucket is reduced in place (4 bytes a byte through memory); one under it is
    first copied into the bucket (6): hand count on a 2-tensor model."""
    w = workload(GPT2, CLUSTER, "bf16")
    rt = PROFILES["deepspeed-0.3"]
    dev = CLUSTER.device
    bw = float(dev.efficiency.memory) * float(dev.mem_bw)
    for bucket, per_byte in ((1.0, 4.0), (1e9, 6.0)):  # every tensor over the bucket, then every one under it
        r = replace(rt, bucket_elements=bucket, list_copies=False)
        x = w._calls("reduce_scatter", r, "reduce", 2, 1, 1, 16, 8, 1)
        plain = w._calls("reduce_scatter", replace(r, copy_bytes=(0.0, 0.0), bucket_copy_bytes=0.0), "reduce", 2, 1,
                         1, 16, 8, 1)
        assert x[0] - plain[0] == pytest.approx(per_byte * w.params * 2 / bw, rel=1e-9)


def test_serialised_runtime_exposes_every_zero3_collective():
    sc = {"model": GPT2, "parallel": {"data": 16, "global_batch": 32},
          "training": {"zero_stage": 3, "framework": "deepspeed-0.3", "recompute": "full"}}
    e = estimate(sc)
    w = workload(GPT2, CLUSTER, "bf16")
    x = w.data_parallel(1, 1, 16, "allreduce", 0, "none", "ring", ("deepspeed-0.3", None, None, 2, True), "full",
                        zero=3)["x_dp"]
    b = e.breakdown
    assert b["data_parallel_exposed_s"] == pytest.approx(2 * float(triple_seconds(x)), rel=1e-9)  # 2 microbatches
    assert b["data_parallel_overlapped_s"] == pytest.approx(0.0, abs=1e-12)


def test_deepspeed_refuses_zero3_with_pipeline_stages():
    sc = {"model": GPT2, "parallel": {"data": 4, "pipeline": 2, "global_batch": 16}, "training": {"zero_stage": 3}}
    with pytest.raises(ValueError, match=r"^training\.zero_stage: deepspeed runs ZeRO-3 without pipeline"):
        estimate(sc)
    sc["training"]["framework"] = "fsdp2"  # torchtitan runs FSDP2 with pipeline stages
    assert estimate(sc).step_time_s > 0


def test_default_framework_follows_the_zero_stage():
    e = estimate({"model": GPT2, "parallel": {"data": 8, "global_batch": 8}, "training": {"zero_stage": 3}})
    assert e.to_dict()["training"]["framework"] == "deepspeed"
    e = estimate({"model": GPT2, "parallel": {"data": 8, "global_batch": 8}})
    assert e.to_dict()["training"]["framework"] == "megatron"


@pytest.mark.parametrize("field, value, message", [
    ("framework", "deepspd", "training.framework: unknown 'deepspd'; did you mean 'deepspeed'?"),
    ("bucket_bytes", 0, "training.bucket_bytes: must be a number in (0, "),
    ("bucket_bytes", -5, "training.bucket_bytes: must be a number in (0, "),
    ("prefetch", 1.5, "training.prefetch: must be an integer in [0, 1024], got 1.5"),
    ("prefetch", "two", "training.prefetch: must be an integer in [0, 1024], got 'two'"),
    ("reduce_dtype", "fp23", "training.reduce_dtype: unknown 'fp23'; did you mean 'fp32'?"),
    ("reduce_dtype", 4, "training.reduce_dtype: unknown 4"),
])
def test_bad_runtime_fields_name_the_field(field, value, message):
    with pytest.raises(ValueError) as e:
        estimate({"model": GPT2, "training": {field: value}})
    assert str(e.value).startswith(message)


def test_cli_bad_framework_is_one_line_exit_2():
    r = subprocess.run([sys.executable, "-m", "concurrency_model", "estimate", "--scenario", "gpt3-175b-3d", "--set",
                        "training.framework=fdsp"], capture_output=True, text=True)
    assert r.returncode == 2 and len(r.stderr.strip().splitlines()) == 1
    assert "training.framework: unknown 'fdsp'; did you mean 'fsdp'?" in r.stderr


def test_sweep_names_the_runner_up_and_what_separates_it():
    from concurrency_model.sweep import sweep
    r = sweep({"model": GPT2, "parallel": {"global_batch": 64}}, 16)
    out = r.to_dict(top=3)
    best, ru = out["best"][0], out["runner_up"]
    key = ("data", "tensor", "pipeline")
    assert tuple(best["parallel"][k] for k in key) + (best["training"]["zero_stage"],) != \
        tuple(ru["parallel"][k] for k in key) + (ru["training"]["zero_stage"],)
    assert ru["step_time_s"] >= best["step_time_s"]
    total = sum(x["runner_up_minus_best_s"] for x in ru["separates"])
    assert total == pytest.approx(ru["step_time_s"] - best["step_time_s"], rel=1e-6, abs=1e-9)


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(framework=st.sampled_from(["megatron", "deepspeed", "deepspeed-0.3", "fsdp", "fsdp2"]),
       zero=st.integers(0, 3), data=st.sampled_from([2, 8, 16, 64]), tensor=st.sampled_from([1, 2]),
       recompute=st.sampled_from(["none", "full"]), overlap=st.booleans(), micro=st.sampled_from([1, 2]),
       bucket=st.sampled_from([None, 2**20, 2**26]), pipeline=st.sampled_from([1, 1, 2, 4]))
def test_a_runtime_is_never_faster_than_the_ideal_model(framework, zero, data, tensor, recompute, overlap, micro,
                                                        bucket, pipeline):
    assume(has_zero_stage(framework, zero))  # FSDP has no ZeRO-1 mode (refused: test_fsdp_has_no_zero_1)
    # with pipeline stages: the runtimes that run them at this ZeRO stage; tensor 1, since scattering a boundary
    # activation over the tensor ranks (Megatron, DeepSpeed) is a saving the ideal model does not make, not an overhead
    assume(pipeline == 1 or (tensor == 1 and runs_with(framework, zero, pipeline)
                             and (not overlap or overlaps(framework, zero, pipeline))))
    sc = {"model": {"kind": "gpt", "layers": 4, "hidden": 512, "heads": 8, "seq_len": 256, "vocab": 8192},
          "parallel": {"data": data, "tensor": tensor, "pipeline": pipeline, "microbatch_size": micro,
                       "global_batch": data * micro * 2},
          "training": {"zero_stage": zero, "recompute": recompute, "overlap": overlap, "framework": "ideal"}}
    ideal = estimate(sc).step_time_s
    sc["training"].update(framework=framework, bucket_bytes=bucket)
    real = estimate(sc).step_time_s
    assert real >= ideal * (1 - 1e-12)
    assert math.isfinite(real)


def test_runtime_of_applies_overrides():
    rt = runtime_of("megatron", bucket_bytes=8e6, grad_bytes=4)
    assert rt.bucket(1024) == 2e6  # the floor per rank is the default's, not an override's
    assert runtime_of("deepspeed", prefetch=0).serial
    assert json.dumps(PROFILES["fsdp2"].name) == '"fsdp2"'


SMALL_GPT = {"kind": "gpt", "layers": 4, "hidden": 512, "heads": 8, "seq_len": 256, "vocab": 8192}


def test_deepspeed_overlaps_as_its_defaults_say():
    """DeepSpeed's ``overlap_comm`` defaults to true at ZeRO-3 only (deepspeed/runtime/zero/config.py
    ``overlap_comm_valid``), and its pipeline engine reduces the gradients after the last backward pass
    (``TrainSchedule``'s ``ReduceGrads``); the other runtimes overlap; ``training.overlap`` overrides."""
    assert [overlaps("deepspeed", z, 1) for z in range(4)] == [False, False, False, True]
    assert [overlaps("deepspeed-0.3", z, 1) for z in range(4)] == [False, False, False, True]
    assert overlaps("deepspeed", 1, 4) is False
    assert overlaps(None, 2, 1) is False and overlaps(None, 1, 8) is True  # ZeRO-2 implies DeepSpeed, 1 Megatron
    assert [overlaps(f, 1, 4) for f in ("ideal", "megatron", "fsdp", "fsdp2")] == [True] * 4
    assert overlaps("deepspeed", 2, 1, True) is True and overlaps("fsdp", 0, 1, False) is False


def test_deepspeed_zero2_exposes_every_reduction_unless_told_to_overlap():
    sc = {"model": SMALL_GPT, "parallel": {"data": 8, "microbatch_size": 2, "global_batch": 64},
          "training": {"zero_stage": 2, "framework": "deepspeed"}}
    serial = estimate(sc).breakdown
    assert serial["data_parallel_comm_s"] > 0
    assert serial["data_parallel_overlapped_s"] == 0.0
    assert serial["data_parallel_exposed_s"] == pytest.approx(serial["data_parallel_comm_s"], rel=1e-12)
    sc["training"]["overlap"] = True  # overlap_comm set in the DeepSpeed config
    on = estimate(sc)
    hidden = on.breakdown["data_parallel_overlapped_s"]
    assert hidden > 0
    # the step without overlap pays the hidden seconds back, less the interference the overlap cost
    assert estimate({**sc, "training": {**sc["training"], "overlap": None}}).step_time_s - on.step_time_s == \
        pytest.approx(hidden - on.breakdown["overlap_interference_s"], rel=1e-9)


@pytest.mark.parametrize("changes, field", [
    ({"schedule": "interleaved", "interleave": 2}, "parallel.schedule"),
    ({"schedule": "gpipe"}, "parallel.schedule"),
    ({"overlap": True}, "training.overlap"),
])
def test_deepspeed_pipeline_engine_refuses_what_it_cannot_run(changes, field):
    par = {"pipeline": 2, "microbatch_size": 1, "global_batch": 8}
    tr = {"framework": "deepspeed", "zero_stage": 1}
    for k, v in changes.items():
        (tr if k == "overlap" else par)[k] = v
    with pytest.raises(ValueError, match=f"^{field}: deepspeed's pipeline engine"):
        estimate({"model": SMALL_GPT, "parallel": par, "training": tr})
    par.pop("interleave", None)
    par["schedule"] = "1f1b"
    tr.pop("overlap", None)
    assert estimate({"model": SMALL_GPT, "parallel": par, "training": tr}).breakdown["data_parallel_overlapped_s"] == 0


def test_overlap_is_a_boolean_or_null():
    with pytest.raises(ValueError, match="^training.overlap: must be true, false or null"):
        estimate({"model": SMALL_GPT, "training": {"overlap": "yes"}})


def test_sweep_under_deepspeed_pipelines_with_1f1b_only():
    res = sweep({"model": SMALL_GPT, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
                 "training": {"framework": "deepspeed", "zero_stage": 1}}, gpus=[8])
    piped = res.layouts[res.layouts["pipeline"] > 1]
    assert len(piped) and set(piped["schedule"]) == {"1f1b"}
    assert res.rejected["schedule: the runtime's pipeline engine runs 1f1b only"] > 0


@pytest.mark.parametrize("framework", ["fsdp", "fsdp2"])
def test_fsdp_has_no_zero_1(framework):
    """PyTorch FSDP's sharding strategies are NO_SHARD, SHARD_GRAD_OP and FULL_SHARD (ZeRO 0, 2, 3): none shards the
    optimizer state alone; FSDP2's fully_shard the same. A scenario asking for it is refused, a sweep skips it."""
    assert [has_zero_stage(framework, z) for z in range(4)] == [True, False, True, True]
    with pytest.raises(ValueError, match=rf"^training.zero_stage: {framework} has no ZeRO-1 mode"):
        estimate({"model": SMALL_GPT, "parallel": {"data": 8, "global_batch": 64},
                  "training": {"framework": framework, "zero_stage": 1}})
    res = sweep({"model": SMALL_GPT, "cluster": "dgx-a100", "parallel": {"global_batch": 64},
                 "training": {"framework": framework}}, gpus=[8])
    assert set(res.layouts["zero_stage"]) == {0, 2, 3}
    assert res.rejected["zero_stage: the runtime has no mode for this ZeRO stage"] > 0
