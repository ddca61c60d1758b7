"""Sparse and factored gradient exchanges (paper §7.3.2 and §7.3 "other"): Strom's threshold, SparCML's
sparse allreduce with fill-in, sufficient-factor broadcasting (parallel.sparse_comm, parallel.compression),
the mlp model family, and the paper's sparsification fixture (§6 / §7.3.2: "up to 54x speedup for 80
nodes")."""
from __future__ import annotations

import math
from dataclasses import replace

import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model import estimate, get_model
from concurrency_model.hardware.clusters import load_cluster
from concurrency_model.comm import collective_time
from concurrency_model.comm.on_cluster import collective_on_cluster
from concurrency_model.hardware.devices import load_device
from concurrency_model.parallel import compressed_sync as CS
from concurrency_model.parallel import compression as C
from concurrency_model.parallel.sparse_comm import sparse_allreduce_rounds, sparse_allreduce_time, sufficient_factors
from concurrency_model.symbols import P, alpha, beta

SPEECH_DNN = {"kind": "mlp", "inputs": 429, "hidden": 2048, "layers": 7, "outputs": 9304}


def test_sparse_allreduce_hand_values():
    # s = 1000 B, D = 6000 B on 16 workers: 4 rounds of 1000, 2000, 4000, then dense 6000 (8000 >= 6000)
    assert sparse_allreduce_rounds(1000, 6000, 16) == [1000, 2000, 4000, 6000]
    assert sparse_allreduce_time(1000, 6000, 16, 1e-6, 1e-9) == pytest.approx(4e-6 + 13000e-9)
    assert sparse_allreduce_rounds(1000, 10**6, 8) == [1000, 2000, 4000]  # never dense on 8 workers
    assert sparse_allreduce_rounds(1000, 10**6, 5) == [1000, 2000, 4000]  # ceil(log2 5) = 3 rounds
    assert sparse_allreduce_time(1000, 6000, 1, 1e-6, 1e-9) == 0


@settings(max_examples=80, deadline=None)
@given(s=st.integers(1, 10**7), ratio=st.integers(1, 5000), Pn=st.integers(1, 4096))
def test_sparse_allreduce_closed_form_is_the_sum_of_rounds(s, ratio, Pn):
    D = s * ratio
    rounds = sparse_allreduce_rounds(s, D, Pn)
    assert len(rounds) == math.ceil(math.log2(Pn))
    assert all(x <= D for x in rounds) and rounds == sorted(rounds)
    closed = sparse_allreduce_time(s, D, Pn, 0, 1)
    assert float(closed) == pytest.approx(sum(rounds))
    symbolic = sparse_allreduce_time(s, D, P, alpha, beta).subs({P: Pn, alpha: 0, beta: 1})
    assert float(symbolic) == pytest.approx(sum(rounds))
    # never more than recursive doubling of the dense vector sends
    assert sum(rounds) <= float(collective_time("allreduce", "recursive_doubling", D, 2 ** len(rounds), 0, 1)) + 1e-9


def test_topk_sparse_allreduce_and_codec():
    m, Pn, al, be = 10**6, 16, 1e-6, 1e-9
    c = C.compress("topk", m, ratio=0.001, collective="sparse_allreduce")  # 1000 values + indices = 8000 B
    assert c.collective == "sparse_allreduce" and c.messages == (8000,) and c.dense_bytes == 4e6
    assert c.collectives(Pn) == [("p2p", 8000.0), ("p2p", 16000.0), ("p2p", 32000.0), ("p2p", 64000.0)]
    assert c.sent_bytes(Pn) == 120000
    enc, dec = CS.codec_seconds(c, Pn)  # device None: the roofline in the symbols F and B_mem
    F, B = (next(x for x in dec.free_symbols if x.name == k) for k in ("F", "B_mem"))
    # one encode; merges of 120000 received bytes = 15 messages' worth, each read plus a scatter of 1000 values
    assert sp.simplify(dec - 15 * sp.Max(16000 / B, 1000 / F)) == 0
    assert sp.simplify(enc - sp.Max(12008000 / B, 2 * m / F)) == 0
    assert sp.simplify(CS.compressed_sync_time(c, None, Pn, al, be) - (4 * al + 120000 * be + enc + dec)) == 0
    # symbolic P, then P = 16, agrees with the numbers (codec on a V100)
    v100 = "v100-sxm2-32gb"
    e = CS.compressed_sync_time(c, None, P, alpha, beta, device=v100)
    enc, dec = CS.codec_seconds(c, Pn, v100)
    assert float(e.subs({P: Pn, alpha: al, beta: be})) == pytest.approx(4 * al + 120000 * be + enc + dec)
    # the sparse allreduce wins over gathering all P messages once P is large
    gather = C.compress("topk", m, ratio=0.001)
    assert CS.compressed_sync_time(c, None, 1024, al, be, device=v100) < \
        CS.compressed_sync_time(gather, None, 1024, al, be, device=v100)


def test_sparse_allreduce_on_a_cluster_uses_the_node_first():
    cl = load_cluster("dgx1-v100")
    c = C.compress("topk", 10**7, ratio=0.001, collective="sparse_allreduce")
    r = CS.compressed_sync_on_cluster(c, None, 32, cl)
    rounds = sparse_allreduce_rounds(c.messages[0], c.dense_bytes, 32)
    intra = sum(collective_on_cluster("p2p", n, 2, cl, 2)[1] for n in rounds[:3])  # partners 1, 2, 4 away
    inter = sum(collective_on_cluster("p2p", n, 2, cl, 1, groups_sharing=8)[1] for n in rounds[3:])
    assert r["comm_s"] == pytest.approx(intra + inter) and r["algorithm"] == "sparse_recursive_doubling"


def test_threshold_sizes_and_codec():
    m = 10**6
    c = C.compress("threshold", m, ratio=0.001)  # Strom: one 4-byte word (index and sign) per value above tau
    assert c.message_bytes == 4000 and c.collective == "allgather"
    assert c.dense_bytes / c.message_bytes == 1000
    strom = C.compress("threshold", m, ratio=1 / 846)  # the low end of the paper's 846-2871x
    assert strom.dense_bytes / strom.message_bytes == pytest.approx(846, rel=1e-3)
    # encode: read the gradient, read and write the residual, two passes, write the message
    assert c.encode_bytes == 3 * 4 * m + 2 * 4 * m + 4000
    assert c.decode_bytes == 4000 + 2 * 1000 * 4
    assert C.compress("threshold", m, ratio=0.9).message_bytes == 3.6e6  # still smaller: one word, not two
    assert C.compress("threshold", m, ratio=1).collective == "allreduce"  # as large as dense: send dense


def test_sfb_hand_values():
    # AlexNet at 32 samples per worker: fc6 (9216 -> 4096), fc7 (4096 -> 4096), fc8 (4096 -> 1000)
    c = C.compress("sfb", "alexnet", batch=32, workers=8)
    assert c.gemms_decode == ((4096, 9216, 32), (4096, 4096, 32), (1000, 4096, 32))
    factors = 32 * ((9216 + 4096) + (4096 + 4096) + (4096 + 1000))
    rest = get_model("alexnet").params - (9216 * 4096 + 4096 * 4096 + 4096 * 1000)
    assert c.messages == (4 * factors, 4 * rest) and rest == 2478888
    assert c.collectives(8) == [("allgather", 8 * 4 * factors), ("allreduce", 4 * rest)]
    assert c.sent_bytes(8) == pytest.approx(7 * 4 * factors + 2 * 7 / 8 * 4 * rest)
    assert c.codec_counts(8) == (0, 7)
    # Poseidon's rule: at 64 workers fc8 (64 * 32 * 5096 > 2 * 4096 * 1000) goes back to the allreduce
    assert [lay[:2] for lay in C.compress("sfb", "alexnet", batch=32, workers=64).gemms_decode] == \
        [(4096, 9216), (4096, 4096)]
    # a transformer's linear layers see every token: their factors are larger than the matrices
    assert C.compress("sfb", "gpt2", batch=1).messages[0] == 0
    # with 4 tokens they are not, but the output layer's weight is the token embedding's (tied): it goes with
    # the embedding's gradient in the all-reduce, not as factors
    tiny = get_model({"kind": "gpt", "layers": 2, "hidden": 64, "heads": 2, "seq_len": 4, "vocab": 1000})
    ct = C.compress("sfb", tiny, workers=2)
    assert len(ct.gemms_decode) == 8 and (1000, 64, 4) not in ct.gemms_decode  # 4 GEMMs a block, no LM head
    assert float(ct.messages[1]) / 4 + sum(a * b for a, b, _ in ct.gemms_decode) == tiny.params
    # the decode rebuilds the remote gradients: P - 1 times the GEMMs
    enc, dec = CS.codec_seconds(c, 8)  # device None: read the factors, then the GEMMs, 7 times
    F, B = (next(x for x in dec.free_symbols if x.name == k) for k in ("F", "B_mem"))
    gemm_flop = 2 * 32 * (9216 * 4096 + 4096 * 4096 + 4096 * 1000)
    assert enc == 0 and sp.simplify(dec - 7 * (4 * factors / B + gemm_flop / F)) == 0


def test_sfb_beats_the_allreduce_where_fc_layers_dominate():
    cl = load_cluster("dgx1-v100")
    slow = replace(cl, inter=replace(cl.inter, bw=1.25e9), gpus_per_node=1, nics_per_node=1)  # 10 GbE, one GPU a node
    sfb = CS.compressed_sync_on_cluster("sfb", "alexnet", 8, slow, batch=32, workers=8)
    dense = CS.compressed_sync_on_cluster("fp32", get_model("alexnet").params, 8, slow)
    assert sfb["time_s"] < dense["time_s"] / 3


@pytest.mark.parametrize("call, field", [
    (lambda: C.compress("sfb", 1000), "gradient"),
    (lambda: C.compress("topk", 1000, batch=4), "batch"),
    (lambda: C.compress("threshold", 1000, collective="sparse_allreduce"), "collective"),
    (lambda: C.compress("threshold", 1000, index_bytes=0), "index_bytes"),
    (lambda: C.compress("topk", 1000, collective="compressed_allreduce"), "collective"),
    (lambda: C.compress("sfb", "alexnet", batch=0), "batch"),
    (lambda: C.compress("sfb", "alexnet", batch=4, workers=0), "workers"),
    (lambda: sparse_allreduce_rounds(10, 100, P), "P"),
    (lambda: sparse_allreduce_time(-1, 100, 4, 1e-6, 1e-9), "sparse_bytes"),
    (lambda: get_model({"kind": "mlp", "inputs": 0, "outputs": 10}), "model.inputs"),
    (lambda: get_model({"kind": "mlp", "inputs": 10, "outputs": 10, "hidden": [64, -1]}), "model.hidden"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=rf"^{field}\b"):
        call()


def test_mlp_family():
    g = get_model(SPEECH_DNN, batch=256)
    assert g.params == 429 * 2048 + 2048 + 6 * (2048 * 2048 + 2048) + 2048 * 9304 + 9304 == 45122648
    assert get_model({"kind": "mlp", "inputs": 10, "hidden": [20, 30], "outputs": 5}).params \
        == 10 * 20 + 20 + 20 * 30 + 30 + 30 * 5 + 5
    assert sufficient_factors(g)[0][0] == (2048, 429, 256)  # size rule: 256 (429 + 2048) < 429 * 2048
    # the paper's fully connected model parallelism: every layer split by its outputs over 2 GPUs, whose
    # activations are exchanged; the same work as on one GPU
    run = {"model": SPEECH_DNN, "cluster": "dgx1-v100", "training": {"dtype": "fp32"}}
    one = estimate({**run, "parallel": {"microbatch_size": 256, "global_batch": 256}})
    two = estimate({**run, "parallel": {"tensor": 2, "microbatch_size": 256, "global_batch": 256}})
    assert two.breakdown["tensor_parallel_comm_s"] > 0 and two.flop_per_step == one.flop_per_step


def _speedup(P, compression, mb=256):
    """Weak scaling of the speech DNN over ``P`` one-GPU nodes on 10 Gb/s Ethernet (assumptions of this
    fixture, not Strom's published setup, which the paper does not give: a Kepler GPU per node as in the
    commodity GPU cloud of Strom 2015, 256 frames per node and step, momentum SGD in fp32)."""
    base = load_cluster("dgx1-v100")
    eth = replace(base.inter, name="10gbe", kind="ethernet", bw=1.25e9, latency=50e-6, efficiency=1.0)
    cloud = replace(base, name="gpu-cloud", device=load_device("k80-gk210-12gb"), gpus_per_node=1, nics_per_node=1,
                    nodes=1, inter=eth, intra=eth)

    def step(p, comp):
        return estimate({"model": SPEECH_DNN, "cluster": cloud,
                         "parallel": {"data": p, "microbatch_size": mb, "global_batch": p * mb},
                         "training": {"dtype": "fp32", "optimizer": "momentum", "compression": comp,
                                      "host_overhead_s": 0}}).step_time_s
    return P * step(1, "none") / step(P, compression)


def test_strom_threshold_trend():
    # paper §7.3.2 [S1]: Strom's static threshold gave "up to 54x speedup for 80 nodes" at 846-2871x compression.
    # The trend: at 1000x (the scheme's default ratio) the 80-node speedup reaches about the 54x the paper reports
    # (within 10%: the model leaves out the convergence and implementation overheads the measured run had, and
    # charges the fixture's tier the presets' fitted overlap interference), while the
    # uncompressed all-reduce on the same network stays far below it, and more nodes always help
    s = {P_: _speedup(P_, "threshold") for P_ in (20, 40, 80)}
    assert s[80] >= 0.9 * 54 and s[20] < s[40] < s[80] <= 80
    dense = _speedup(80, "none")
    assert dense < 54 / 3 and dense < s[80] / 4


def _alexnet(compression, batch_per_gpu, **parallel):
    base = load_cluster("dgx1-v100")
    slow = replace(base, inter=replace(base.inter, bw=1.25e9), gpus_per_node=1, nics_per_node=1)  # 10 GbE
    return estimate({"model": "alexnet", "cluster": slow,
                     "parallel": {"data": 8, "microbatch_size": batch_per_gpu, "global_batch": 8 * batch_per_gpu,
                                  **parallel},
                     "training": {"dtype": "fp32", "optimizer": "momentum", "compression": compression,
                                  "overlap": False, "host_overhead_s": 0}})


def test_sfb_in_estimate():
    # 32 images per GPU: the three fully connected layers go as factors; the step's synchronisation is the
    # API's (allgather of the factors, allreduce of the rest, 7 rebuilds of the remote gradients)
    sfb, dense = _alexnet("sfb", 32), _alexnet("none", 32)
    assert sfb.breakdown["data_parallel_comm_s"] < dense.breakdown["data_parallel_comm_s"] / 3
    assert sfb.flop_per_step == dense.flop_per_step
    # 1024 images per GPU: no layer qualifies (fc6: 8 x 1024 x (9216 + 4096) > 2 x 9216 x 4096), the plain
    # all-reduce
    assert _alexnet("sfb", 1024).step_time_s == pytest.approx(_alexnet("none", 1024).step_time_s, rel=1e-12)
    with pytest.raises(ValueError, match=r"^training.compression: sfb .* parallel.tensor = 2"):
        _alexnet("sfb", 32, tensor=2, data=4)
    for sync in ("parameter_server", "gossip"):
        with pytest.raises(ValueError, match=rf"^training.compression: sfb .* got '{sync}'"):
            estimate({"model": "alexnet", "cluster": "dgx1-v100",
                      "parallel": {"data": 8, "microbatch_size": 32, "global_batch": 256},
                      "training": {"compression": "sfb", "sync": sync}})


def test_sfb_in_sweep():
    from concurrency_model.sweep import sweep
    r = sweep({"model": "alexnet", "cluster": "dgx1-v100", "parallel": {"global_batch": 256},
               "training": {"dtype": "fp32", "optimizer": "momentum", "compression": "sfb"}}, [8, 16])
    top = r.top(100)
    assert set(top["tensor"]) == {1} and set(top["pipeline"]) == {1} and set(top["data"]) == {8, 16}
    # on 8 GPUs (one node) the fastest is the estimate of the same layout
    best = top[top["gpus"] == 8].iloc[0]
    e = estimate({"model": "alexnet", "cluster": "dgx1-v100",
                  "parallel": {"data": 8, "microbatch_size": int(best["microbatch_size"]), "global_batch": 256,
                               "schedule": best["schedule"]},
                  "training": {"dtype": "fp32", "optimizer": "momentum", "compression": "sfb",
                               "recompute": best["recompute"]}})
    assert best["step_time_s"] == pytest.approx(e.step_time_s, rel=1e-9)


@settings(max_examples=40, deadline=None)
@given(widths=st.lists(st.integers(1, 4096), min_size=1, max_size=4), inputs=st.integers(1, 4096),
       outputs=st.integers(1, 4096), batch=st.integers(1, 512), workers=st.integers(2, 512))
def test_sfb_never_sends_more_than_the_allreduce(widths, inputs, outputs, batch, workers):
    # Poseidon's rule takes a layer only when its gathered factors are fewer bytes than its ring all-reduce
    g = get_model({"kind": "mlp", "inputs": inputs, "hidden": widths, "outputs": outputs}, batch=batch)
    sfb, dense = C.compress("sfb", g, workers=workers), C.compress("fp32", g.params)
    assert sfb.sent_bytes(workers) <= dense.sent_bytes(workers) * (1 + 1e-12)
    assert float(sfb.messages[1]) + sum(4 * a * b for a, b, _ in sfb.gemms_decode) == dense.message_bytes


@pytest.mark.parametrize("module", ["concurrency_model.parallel.compressed_sync",
                                    "concurrency_model.parallel.compression", "concurrency_model.serving.forward_pass",
                                    "concurrency_model.serving.overheads"])
def test_module_imports_first_in_a_fresh_interpreter(module):
    # modules that import each other (compression <-> compressed_sync) must load whichever comes first
    import subprocess
    import sys
    p = subprocess.run([sys.executable, "-c", f"import {module}"], capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr[-500:]
