"""NCCL's tuning model (comm.nccl) and its use by collective_on_cluster, the triples and the CLI.

Hand-derived figures use NCCL's tables (v2.23.4-1 unless named; src/graph/tuning.cc) and the presets'
effective bandwidths: dgx-a100 NVLink 300 GB/s x 0.767 = 230.1 GB/s per GPU, NIC 25 GB/s x 0.9 = 22.5;
dgx-h100 NVLink 450 x 0.822 = 369.9, NIC 50 x 0.9 = 45; launch 3.8 us (the device presets).
"""
import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.cli import main
from concurrency_model.hardware.clusters import place
from concurrency_model.comm import collective_time, lower_bound
from concurrency_model.comm import nccl
from concurrency_model.comm.on_cluster import collective_on_cluster, nccl_layout, nccl_on
from concurrency_model.parallel.triples import collective_triple, triple_seconds

LAUNCH = 3.8e-6
A100_NVL = 300e9 * 0.767
H100_NVL = 450e9 * 0.822


def test_8KiB_allreduce_on_one_a100_node_is_ring_LL_by_hand():
    # ring LL: base 6.6 us + 2(P-1) = 14 NVLink hops of 0.6 us; NCCL's estimate at all 12 channels: busBw
    # min(llMaxBw Ampere N1 87.7, 230.1 / 2) = 87.7 GB/s, x P / 2(P-1) = 8/14 -> 50.1 GB/s algbw
    alg, t, _ = collective_on_cluster("allreduce", 8192, 8, "dgx-a100")
    assert alg == "nccl:ring/LL"
    lay = nccl_layout(place("dgx-a100", 8))
    ring = nccl.nccl_choice("allreduce", 8192, lay)
    assert ring.model_s == pytest.approx((6.6 + 14 * 0.6) * 1e-6 + LAUNCH + 8192 / (87.7e9 * 8 / 14), rel=1e-12)
    # it runs on one channel of 12 (enqueue.cc: 8 KiB < 512 threads x 8 B x 8 ranks), 1/12 of that bandwidth
    assert ring.channels == 1
    assert t == ring.time_s == pytest.approx((6.6 + 14 * 0.6) * 1e-6 + LAUNCH + 8192 / (87.7e9 * 8 / 14 / 12),
                                             rel=1e-12)
    # the runner-up, tree LL: 6.8 + 2 x 7 x 0.6 us; min(0.92 x 230.1, 12 x 24) / 3.8, x 1/2, x 0.7 (8 KiB) in
    # NCCL's estimate; it would run on 2 channels (8 KiB / (512 x 8 B)) of 230.1 / 12 GB/s
    tree = next(c for c in nccl.choices("allreduce", 8192, lay) if c.name == "nccl:tree/LL")
    bw = 0.92 * A100_NVL / 1e9 / 3.8 * 0.5 * 0.7
    assert tree.model_s == pytest.approx((6.8 + 14 * 0.6) * 1e-6 + LAUNCH + 8192 / (bw * 1e9), rel=1e-12)
    assert tree.channels == 2
    assert tree.time_s == pytest.approx((6.8 + 14 * 0.6) * 1e-6 + LAUNCH + 8192 / (bw * 1e9 * 2 / 12), rel=1e-12)
    assert tree.model_s > ring.model_s and tree.time_s > ring.time_s


def test_1GiB_allreduce_on_one_h100_node_is_nvls_by_hand():
    # NVLS (NVSwitch, sm90): latency hwLat NVLink NVLS 25 us; 8 heads of 369.9 / 9 GB/s, x 5/6
    alg, t, _ = collective_on_cluster("allreduce", 2**30, 8, "dgx-h100")
    assert alg == "nccl:nvls/Simple"
    assert t == pytest.approx(25e-6 + LAUNCH + 2**30 / (8 * H100_NVL / 9 * 5 / 6), rel=1e-12)
    # A100 has no NVLink SHARP: no NVLS pair at all
    assert not any(c.algorithm.startswith("nvls") for c in nccl.choices("allreduce", 2**30,
                                                                          nccl_layout(place("dgx-a100", 8))))


def test_v219_tables_differ_where_nccl_changed_them():
    # tree Simple: v2.19 base 0 + 2 x 7 x 28 us NVLink hops; v2.23 8.4 + 2 x 7 x 4.0
    lay = nccl_layout(place("dgx-a100", 8))

    def tree_simple(v):
        return next(c for c in nccl.choices("allreduce", 2**30, lay, v) if c.name == "nccl:tree/Simple")
    assert tree_simple("2.19").latency_s == pytest.approx(2 * 7 * 28e-6 + LAUNCH)
    assert tree_simple("2.23").latency_s == pytest.approx((8.4 + 2 * 7 * 4.0) * 1e-6 + LAUNCH)
    with pytest.raises(ValueError, match="nccl_version"):
        nccl.choices("allreduce", 8, lay, "2.18")


def test_protocol_moves_from_LL_to_LL128_to_Simple_as_size_grows():
    protos = [nccl.split_name(collective_on_cluster("allreduce", 2**k, 8, "dgx-a100")[0])[1] for k in range(3, 34)]
    order = {"LL": 0, "LL128": 1, "Simple": 2}
    assert [order[p] for p in protos] == sorted(order[p] for p in protos)
    assert set(protos) == set(order)
    # ring LL -> LL128 where 15 + n / 50.1 = 40.6 + n / (211.7 x 8/14) us: n = 2.19 MB, between 2 and 4 MiB
    assert protos[21 - 3] == "LL" and protos[22 - 3] == "LL128"


def test_pat_only_with_one_rank_per_node_from_v223():
    lay = nccl_layout(place("dgx-h100", 4, ranks_per_node=1))
    pats = [c for c in nccl.choices("allgather", 2**20, lay) if c.algorithm == "pat"]
    assert len(pats) == 1
    # 8 + log2(4) x 14 / 3.5 + 2.8 x 4 us; bandwidth 0.85 x the ring graph (one 45 GB/s NIC)
    assert pats[0].latency_s == pytest.approx((8 + 2 * 14 / 3.5 + 2.8 * 4) * 1e-6 + LAUNCH)
    assert pats[0].bw_Bps == pytest.approx(0.85 * 45e9)
    assert not [c for c in nccl.choices("allgather", 2**20, lay, "2.19") if c.algorithm == "pat"]
    assert not [c for c in nccl.choices("allgather", 2**20, nccl_layout(place("dgx-h100", 16)))
                if c.algorithm == "pat"]


def test_explicit_algorithms_and_cpu_clusters_keep_alpha_beta():
    p = place("dgx-a100", 8)
    alg, t, _ = collective_on_cluster("allreduce", 2**20, 8, "dgx-a100", algorithm="ring")
    assert alg == "ring" and t == pytest.approx(float(collective_time("allreduce", "ring", 2**20, 8, *p.intra)))
    alg, _, _ = collective_on_cluster("allreduce", 2**20, 4, "cpu-host")
    assert not alg.startswith("nccl:") and nccl_layout(place("cpu-host", 4)) is None
    # alltoall is grouped send/recv in NCCL, outside its tuning model: the alpha-beta algorithms stay
    assert collective_on_cluster("alltoall", 2**20, 8, "dgx-a100")[0] in ("bruck", "pairwise")


@pytest.mark.parametrize("cluster,ranks", [("dgx-a100", 8), ("dgx-a100", 16), ("dgx-h100", 16), ("dgx1-v100", 16)])
@pytest.mark.parametrize("op", nccl.OPS)
def test_triple_gives_the_on_cluster_time_and_rescales_the_bounding_tier(cluster, ranks, op):
    n = 3 * 2**22
    _, t, p = collective_on_cluster(op, n, ranks, cluster)
    tr = collective_triple(op, n, ranks, cluster, p.ranks_per_node)
    assert triple_seconds(tr) == pytest.approx(t, rel=1e-12)
    assert min(tr[1], tr[2]) == 0 and tr[0] > 0
    if p.nodes == 1:
        assert tr[2] == 0


def test_cli_json_protocol_keys(capsys):
    main(["collective", "allreduce", "--bytes", "8KiB", "--ranks", "8", "--cluster", "dgx-a100", "--json"])
    d = json.loads(capsys.readouterr().out)
    assert d["algorithm"] == "nccl:ring/LL" and d["protocol"] == "LL"
    assert {"time_s", "algbw_Bps", "busbw_Bps"} <= set(d)
    main(["collective", "allreduce", "--bytes", "8KiB", "--ranks", "8", "--alpha", "1e-6", "--beta", "1e-10",
          "--json"])
    assert json.loads(capsys.readouterr().out)["protocol"] is None


SIZES = st.integers(min_value=1, max_value=2**33)
CASES = st.sampled_from([("dgx-a100", 8, None), ("dgx-a100", 16, None), ("dgx-h100", 8, None), ("dgx-h100", 32, None),
                         ("dgx1-v100", 8, None), ("dgx-a100", 4, 1), ("gcp-a3-mega", 16, None),
                         ("oci-bm-gpu4-8", 16, None)])


@settings(max_examples=150, deadline=None)
@given(n=SIZES, case=CASES, op=st.sampled_from(nccl.OPS), version=st.sampled_from(nccl.VERSIONS))
def test_doubling_the_message_never_makes_it_faster(n, case, op, version):
    # NCCL's tree correction factor rises by at most 4/3 from one power of two to the next, so t(2n) >= t(n)
    # (within a power-of-two bin the time grows with n; across a bin's edge the tree's may dip)
    cluster, ranks, rpn = case
    t1 = collective_on_cluster(op, n, ranks, cluster, rpn, nccl_version=version)[1]
    t2 = collective_on_cluster(op, 2 * n, ranks, cluster, rpn, nccl_version=version)[1]
    assert t2 >= t1


@settings(max_examples=150, deadline=None)
@given(n=SIZES, case=st.sampled_from([("dgx-a100", 8), ("dgx-a100", 4), ("dgx1-v100", 8), ("dgx-a100", 2)]),
       op=st.sampled_from(nccl.OPS), version=st.sampled_from(nccl.VERSIONS))
def test_without_nvls_one_node_is_never_below_the_alpha_beta_lower_bound(n, case, op, version):
    # Chan et al. 2007's bound on the node's tier (alpha = its latency, beta = 1 / effective bandwidth): NCCL's
    # ring moves the bound's bytes, its tree fewer per second; across nodes NCCL's tree and NVLS beat the
    # flat bound of the slower tier (in-network or two-level), so the property is one node without NVLS
    cluster, ranks = case
    _, t, p = collective_on_cluster(op, n, ranks, cluster, nccl_version=version)
    assert t >= float(lower_bound(op, n, ranks, *p.intra)) * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(n=SIZES, ranks=st.sampled_from([2, 4, 8]))
def test_nvls_allreduce_still_moves_every_byte_through_the_gpus_links(n, ranks):
    # NVLink SHARP reduces in the switch, beating the alpha-beta bound, but each GPU still sends its n bytes
    _, t, p = collective_on_cluster("allreduce", n, ranks, "dgx-h100")
    assert t >= n / p.intra_bw


# --- v2.21 tables, a run's NCCL environment, NICs beyond one per GPU -------------------------------------
def test_v221_is_v219_but_for_nvls_latency_hopper_ll_caps_and_ring_ll():
    # NVIDIA/nccl v2.21.5-1 tuning.cc: NVLS NVLink latency 25 us (v2.19: 23), Hopper llMaxBws 141 (v2.19: 87.7,
    # the Ampere row), ring LL busBw x 1/2 (v2.19: x 1/4 or 1/3); tree Simple keeps v2.19's 0 + 28 us hops
    h100 = nccl_layout(place("dgx-h100", 8))

    def pick(v, name, n=2**30, lay=h100):
        return next(c for c in nccl.choices("allreduce", n, lay, v) if c.name == name)
    assert pick("2.21", "nccl:nvls/Simple").latency_s == pytest.approx(25e-6 + LAUNCH)
    assert pick("2.19", "nccl:nvls/Simple").latency_s == pytest.approx(23e-6 + LAUNCH)
    # ring LL on one H100 node: min(llMaxBw, busBw x 1/2) x 8/14
    assert pick("2.21", "nccl:ring/LL").bw_Bps == pytest.approx(141e9 * 8 / 14)
    assert pick("2.19", "nccl:ring/LL").bw_Bps == pytest.approx(87.7e9 * 8 / 14)
    assert pick("2.21", "nccl:tree/Simple").latency_s == pytest.approx(2 * 7 * 28e-6 + LAUNCH)
    # across nodes v2.21 counts 2N network steps in a ring allreduce, as v2.19 (v2.23: 2(N-1))
    two = nccl_layout(place("dgx-h100", 16))
    ring = {v: pick(v, "nccl:ring/LL", 8, two).latency_s for v in ("2.19", "2.21")}
    assert ring["2.21"] == ring["2.19"] == pytest.approx((6.6 + 26 * 1.0 + 4 * 2.7) * 1e-6 + LAUNCH)


def test_env_settings_follow_nccls_parse_list():
    assert nccl.env_settings(None) == {}
    assert nccl.env_settings({"NCCL_PROTO": "^LL128"}) == {"protocols": ("LL", "Simple")}
    assert nccl.env_settings({"NCCL_ALGO": "ring"}) == {"algorithms": ("ring",)}
    assert nccl.env_settings({"NCCL_ALGO": "nvls,NVLSTree"}) == {"algorithms": ("nvls", "nvls_tree")}
    assert nccl.env_settings({"NCCL_NVLS_ENABLE": "1"}) == {}
    with pytest.raises(ValueError, match=r"nccl_env\.NCCL_ALGO: unknown 'Rnig'; did you mean 'ring'"):
        nccl.env_settings({"NCCL_ALGO": "Rnig"})
    with pytest.raises(ValueError, match=r"nccl_env\.NCCL_PORTO: unknown variable; did you mean 'NCCL_PROTO'"):
        nccl.env_settings({"NCCL_PORTO": "Simple"})
    with pytest.raises(ValueError, match=r"nccl_env\.NCCL_NVLS_ENABLE: expected 0 or 1"):
        nccl.env_settings({"NCCL_NVLS_ENABLE": "no"})
    with pytest.raises(ValueError, match=r"nccl_env: expected an object"):
        nccl.env_settings("NCCL_PROTO=Simple")


def test_env_restricts_the_pairs_nccl_may_run():
    # GCP's TCPXO profile: ring and tree with Simple, no NVLS; the 8 KiB allreduce on one H100 node, NVLS or
    # LL by default, becomes ring / Simple: 8.4 + 14 x 3.4 us + launch (v2.23), 8192 B on one channel (below
    # 512 threads x 64 B) of the 12 the 369.9 GB/s graph has, x 8/14
    env = {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"}
    alg, t, _ = collective_on_cluster("allreduce", 8192, 8, "dgx-h100", nccl_env=env)
    assert alg == "nccl:ring/Simple"
    nch = round(H100_NVL / 30e9)
    assert t == pytest.approx((8.4 + 14 * 3.4) * 1e-6 + LAUNCH + 8192 / (H100_NVL / nch * 8 / 14), rel=1e-12)
    assert collective_on_cluster("allreduce", 8192, 8, "dgx-h100")[0] != "nccl:ring/Simple"
    # an environment that leaves the op nothing to run is an error naming the field
    with pytest.raises(ValueError, match="nccl_env"):
        collective_on_cluster("broadcast", 8192, 8, "dgx-h100", nccl_env={"NCCL_ALGO": "Tree"})


def test_a_node_with_two_ports_per_gpu_gives_a_channel_per_port():
    # oci-bm-gpu4-8: 16 x 100 Gb/s ports for 8 GPUs (oci-hpc-oke manifests/topology/BM.GPU4.8.xml)
    lay = nccl_layout(place("oci-bm-gpu4-8", 16))
    assert (lay.nics, lay.nic_bw, lay.amd_host) == (16.0, 12.5e9 * 0.9, True)
    assert nccl_layout(place("dgx-a100", 16)).nics == 8.0
    # a group of 4 ranks per node reaches its 8 ports
    assert nccl_layout(place("oci-bm-gpu4-8", 8, 4)).nics == 8.0


ENV_ALGOS = st.lists(st.sampled_from(["Ring", "Tree", "NVLS", "NVLSTree", "PAT", "CollNetDirect"]), min_size=1,
                     unique=True)
ENV_PROTOS = st.lists(st.sampled_from(["LL", "LL128", "Simple"]), min_size=1, unique=True)


@settings(max_examples=150, deadline=None)
@given(n=SIZES, case=st.sampled_from([("dgx-a100", 16), ("dgx-h100", 8), ("dgx-h100", 32), ("oci-bm-gpu4-8", 16)]),
       algos=ENV_ALGOS, protos=ENV_PROTOS, version=st.sampled_from(nccl.VERSIONS))
def test_an_environment_only_removes_pairs_so_never_lowers_nccls_estimate(n, case, algos, protos, version):
    # on NVLink nodes of compute capability 8.0 / 9.0 LL128 is on by default, so NCCL_ALGO / NCCL_PROTO can only
    # shrink the set NCCL takes the least estimate of (an environment that leaves nothing raises). NCCL chooses by
    # its estimate (``select_s``), and the call's wall time is priced apart (comm.nccl, "estimate and wall time"),
    # so a forced pair may run faster than NCCL's own choice: Tree on 2 dgx-a100 nodes at 512 MiB (NCCL 2.19)
    cluster, ranks = case
    p = place(cluster, ranks)
    default = nccl_on("allreduce", n, p, version)
    env = {"NCCL_ALGO": ",".join(algos), "NCCL_PROTO": ",".join(protos)}
    try:
        c = nccl_on("allreduce", n, p, version, env)
    except ValueError as e:
        assert "nccl_env" in str(e)
        return
    assert c.select_s >= default.select_s * (1 - 1e-12)


def test_small_calls_run_on_the_channels_nccls_enqueue_gives_them():
    # enqueue.cc drops a channel while n < nc x nt x threshold: tree LL 512 x 8 B = 4 KiB a channel, LL128
    # 640 x 8 = 5 KiB, Simple 512 x 64 = 32 KiB, ring LL x nRanks (16 ranks: 64 KiB); at least one channel
    lay = nccl_layout(place("oci-bm-gpu4-8", 16))  # 16 channels, one per 100 Gb/s port
    assert nccl.channels_used("tree", "LL", 8192, lay, 16) == 2.0
    assert nccl.channels_used("tree", "LL", 100, lay, 16) == 1.0
    assert nccl.channels_used("tree", "LL128", 40 * 1024, lay, 16) == 8.0
    assert nccl.channels_used("ring", "Simple", 128 * 1024, lay, 16) == 4.0
    assert nccl.channels_used("ring", "LL", 128 * 1024, lay, 16) == 2.0
    assert nccl.channels_used("ring", "Simple", 2**20, lay, 16) == 16.0
    # ring Simple on a graph at most PCI_BW (12 GB/s) fast runs 256 threads: 16 KiB a channel
    assert nccl.channels_used("ring", "Simple", 64 * 1024, lay, 16, ring_bus_gbps=12.0) == 4.0
    # NVLS and PAT keep every channel
    assert nccl.channels_used("nvls", "Simple", 8, lay, 8) == 8.0
    # the time is at the channels the pair runs on: the 2 x 8 A100 RoCE
    # 8 KiB all-reduce is tree LL (v2.19): min(16 x 230.1 / 16 x 0.92 / 3.8, llMaxBw AMD 2 nodes 22.5) GB/s, x 1/2,
    # x 0.7 (treeCorrectionFactor LL, 8 KiB), on 2 of 16 channels (ncclTopoGetAlgoTime's bw / nChannels x nc)
    c = nccl.nccl_choice("allreduce", 8192, lay, "2.19")
    assert (c.name, c.channels) == ("nccl:tree/LL", 2.0)
    bw = 22.5e9 * 0.5 * 0.7 * 2 / 16
    assert c.time_s == pytest.approx(c.latency_s + 8192 / bw, rel=1e-12)
    assert c.time_s > c.model_s


@settings(max_examples=100, deadline=None)
@given(n=SIZES, case=CASES, op=st.sampled_from(nccl.OPS), version=st.sampled_from(nccl.VERSIONS))
def test_nccls_estimate_at_a_calls_channels_is_never_below_its_estimate_at_every_channel(n, case, op, version):
    # fewer channels only remove bandwidth: the estimate NCCL's pick is compared on (select_s) is at least NCCL's
    # estimate at every channel (model_s); the wall time (time_s) differs from it only by the ring's plateau factor
    # and the tree / Simple pipeline (comm.nccl.wall_latency_factor, tree_wall_bw, tree_fill_s)
    cluster, ranks, rpn = case
    lay = nccl_layout(place(cluster, ranks, rpn))
    for c in nccl.choices(op, n, lay, version):
        assert 1.0 <= c.channels
        assert c.select_s >= c.model_s * (1 - 1e-12)
        if not (c.algorithm == "tree" and c.protocol == "Simple"):
            assert c.time_s <= c.select_s * (1 + 1e-12)


def test_queue_pair_split_adds_posts_by_hand():
    # the 2 x 8 A100 RoCE run (oci-bm-gpu4-8, AMD host: NCCL's network post overhead 2 us) with
    # NCCL_IB_QPS_PER_CONNECTION=4, split over the queue pairs by NCCL 2.19.3's default: 3 more posts per network
    # message. Tree allreduce: 2 messages (up, down) -> 12 us; ring allreduce (v2.19 nInter = 2N = 4) -> 24 us;
    # ring allgather (N - 1 = 1) -> 6 us; none from v2.20.5 (split off by default) unless the run sets it
    env = {"NCCL_IB_QPS_PER_CONNECTION": "4"}
    lay = nccl_layout(place("oci-bm-gpu4-8", 16), env)
    assert (lay.qps_per_connection, lay.split_data_on_qps, lay.amd_host) == (4, None, True)
    assert nccl.qp_split_s("allreduce", "tree", lay, "2.19") == pytest.approx(12e-6)
    assert nccl.qp_split_s("allreduce", "ring", lay, "2.19") == pytest.approx(24e-6)
    assert nccl.qp_split_s("allgather", "ring", lay, "2.19") == pytest.approx(6e-6)
    assert nccl.qp_split_s("allreduce", "ring", lay, "2.23") == 0.0
    split = nccl_layout(place("oci-bm-gpu4-8", 16), {**env, "NCCL_IB_SPLIT_DATA_ON_QPS": "1"})
    assert nccl.qp_split_s("allreduce", "ring", split, "2.23") == pytest.approx(2 * 3 * 2e-6)  # 2(N-1) from 2.23
    # an Intel host (gcp-a3-mega) posts in 1 us; one node has no network message
    intel = nccl_layout(place("gcp-a3-mega", 16), {**env, "NCCL_IB_SPLIT_DATA_ON_QPS": "1"})
    assert nccl.qp_split_s("allreduce", "tree", intel, "2.21") == pytest.approx(6e-6)
    assert nccl.qp_split_s("allreduce", "tree", nccl_layout(place("oci-bm-gpu4-8", 8), env), "2.19") == 0.0
    # in the run time, not in NCCL's estimate: the 8 KiB call is 12 us slower, NCCL's estimate unchanged
    base = nccl.nccl_choice("allreduce", 8192, nccl_layout(place("oci-bm-gpu4-8", 16)), "2.19")
    c = nccl.nccl_choice("allreduce", 8192, lay, "2.19")
    assert c.name == base.name == "nccl:tree/LL"
    assert c.time_s - base.time_s == pytest.approx(12e-6, rel=1e-9) and c.model_s == base.model_s
    with pytest.raises(ValueError, match="nccl_version"):
        nccl.qp_split_s("allreduce", "tree", lay, "2.5")


@pytest.mark.parametrize("var, value", [("NCCL_IB_QPS_PER_CONNECTION", "0"), ("NCCL_IB_QPS_PER_CONNECTION", "-1"),
                                        ("NCCL_IB_QPS_PER_CONNECTION", "four"), ("NCCL_IB_QPS_PER_CONNECTION", True),
                                        ("NCCL_IB_QPS_PER_CONNECTION", 2.5), ("NCCL_IB_SPLIT_DATA_ON_QPS", "2")])
def test_queue_pair_settings_refuse_bad_values_naming_the_field(var, value):
    with pytest.raises(ValueError, match=rf"^nccl_env\.{var}: expected"):
        nccl.env_settings({var: value})


@settings(max_examples=100, deadline=None)
@given(n=SIZES, case=st.sampled_from([("oci-bm-gpu4-8", 16), ("dgx-a100", 32), ("gcp-a3-mega", 16), ("dgx-h100", 8)]),
       qps=st.integers(min_value=1, max_value=8), split=st.sampled_from(["0", "1"]), op=st.sampled_from(nccl.OPS),
       version=st.sampled_from(nccl.VERSIONS))
def test_more_queue_pairs_never_speed_a_call_up_nor_break_monotony(n, case, qps, split, op, version):
    cluster, ranks = case
    env = {"NCCL_IB_QPS_PER_CONNECTION": str(qps), "NCCL_IB_SPLIT_DATA_ON_QPS": split}
    one = collective_on_cluster(op, n, ranks, cluster, nccl_version=version)[1]
    t1 = collective_on_cluster(op, n, ranks, cluster, nccl_version=version, nccl_env=env)[1]
    t2 = collective_on_cluster(op, 2 * n, ranks, cluster, nccl_version=version, nccl_env=env)[1]
    assert t1 >= one * (1 - 1e-12) and t2 >= t1


# --- the wall time: NCCL's estimate chooses, the call's own costs price it --------------------------------------
def test_wall_time_leaves_out_the_ring_plateau_factor_by_hand():
    # 8 KiB on 2 x 8 H100 (gcp-a3-mega, v2.21, Ring/Tree Simple only): ring Simple, latency 8.4 + 26 x 3.4 (NVLink,
    # above the 1 us x 3 net overhead) + 4 x 14 (2N network hops, v2.21) = 152.8 us; 8192 / (8 channels x 16 ranks)
    # = 64 B, so NCCL's estimate multiplies it by 1.4 (tuning.cc "Plateau effect of ring"); the call runs on one of 8
    # channels (8 KiB < 512 threads x 64 B) at 8 x 22.5 x 16/30 / 8 = 12 GB/s
    env = {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"}
    lay = nccl_layout(place("gcp-a3-mega", 16), env)
    c = nccl.nccl_choice("allreduce", 8192, lay, "2.21")
    assert (c.name, c.channels) == ("nccl:ring/Simple", 1.0)
    assert nccl.wall_latency_factor("allreduce", "ring", "Simple", 8192, lay, 8) == 1.4
    assert c.select_s == pytest.approx(152.8e-6 * 1.4 + LAUNCH + 8192 / 12e9, rel=1e-9)
    assert c.time_s == pytest.approx(152.8e-6 + LAUNCH + 8192 / 12e9, rel=1e-9)
    # 4 KiB (32 B per channel and rank) has no factor in either
    four = nccl.nccl_choice("allreduce", 4096, lay, "2.21")
    assert four.select_s == pytest.approx(four.time_s, rel=1e-12)
    # one node and other pairs never get it
    assert nccl.wall_latency_factor("allreduce", "ring", "Simple", 2**20, nccl_layout(place("dgx-h100", 8)), 8) == 1.0
    assert nccl.wall_latency_factor("allreduce", "tree", "Simple", 2**20, lay, 8) == 1.0


def test_tree_simple_wall_time_is_its_links_and_its_chunk_pipeline_by_hand():
    # 1 GiB tree / Simple on the 2 x 8 A100 RoCE run (NCCL 2.19.3, 16 channels): each byte leaves 2 x 7 of a node's
    # 8 GPUs (up and down the chain): 230.1 x 8/14 = 131.49 GB/s; the NICs carry it once each way on two nodes:
    # 16 x 11.25 = 180 GB/s; chunks of 4 MiB / 8 = 512 KiB (1 GiB / (16 x 512 KiB) = 128 >= depth 8 x 8: not halved);
    # the first chunk crosses 14 NVLink hops at 131.49 / 16 and 2 network hops at 180 / 16 GB/s before the pipeline
    # runs at its slowest hop
    lay = nccl_layout(place("oci-bm-gpu4-8", 16))
    intra, net = nccl.tree_wall_bw(lay)
    assert intra == pytest.approx(A100_NVL * 8 / 14, rel=1e-12) and net == pytest.approx(16 * 11.25e9, rel=1e-12)
    assert nccl.tree_chunk_bytes(2**30, 16, lay, "2.19") == 2**19
    hop_nvl, hop_net = 2**19 / (intra / 16), 2**19 / (net / 16)
    fill = 14 * hop_nvl + 2 * hop_net - hop_nvl
    assert nccl.tree_fill_s(2**30, 16, 16, lay, "2.19") == pytest.approx(fill, rel=1e-12)
    tree = next(c for c in nccl.choices("allreduce", 2**30, lay, "2.19") if c.name == "nccl:tree/Simple")
    assert tree.latency_s == pytest.approx(2 * 8 * 28e-6 + LAUNCH, rel=1e-12)
    assert tree.time_s == pytest.approx(tree.latency_s + fill + 2**30 / intra, rel=1e-12)
    # NCCL's estimate keeps its own 0.92 x 1/2 of the graph's 16 x 14.38 GB/s
    assert tree.model_s == pytest.approx(tree.latency_s + 2**30 / (0.92 * A100_NVL / 2), rel=1e-12)
    # a call with less than a chunk per channel moves it as one: store and forward over the 16 hops
    assert nccl.tree_fill_s(2**20, 16, 16, lay, "2.21") + 2**20 / intra == pytest.approx(
        14 * 2**16 / (intra / 16) + 2 * 2**16 / (net / 16), rel=1e-12)
    # more than two nodes: the inner node of a double binary tree sends each byte twice across the network
    assert nccl.tree_wall_bw(nccl_layout(place("oci-bm-gpu4-8", 32)))[1] == pytest.approx(16 * 11.25e9 / 2)


def test_nccl_buffsize_sets_the_tree_chunk_and_is_checked():
    lay = nccl_layout(place("gcp-a3-mega", 16), {"NCCL_BUFFSIZE": "8388608"})
    assert lay.buffsize == 8 << 20 and nccl.tree_chunk_bytes(2**30, 8, lay, "2.21") == 2**20
    assert nccl.tree_chunk_bytes(2**30, 8, nccl_layout(place("gcp-a3-mega", 16)), "2.21") == 2**19
    for bad in ("abc", "4", True, "-8"):
        with pytest.raises(ValueError, match=r"^nccl_env\.NCCL_BUFFSIZE: expected"):
            nccl.env_settings({"NCCL_BUFFSIZE": bad})


@settings(max_examples=100, deadline=None)
@given(n=SIZES, case=st.sampled_from([("oci-bm-gpu4-8", 16), ("dgx-a100", 32), ("gcp-a3-mega", 16), ("dgx-h100", 8)]),
       small=st.integers(min_value=16, max_value=24), version=st.sampled_from(nccl.VERSIONS))
def test_a_larger_buffer_never_speeds_a_tree_simple_call_up(n, case, small, version):
    # a larger chunk lengthens the pipeline's fill and nothing else (tree_fill_s)
    cluster, ranks = case
    times = []
    for b in (2**small, 2**(small + 1)):
        lay = nccl_layout(place(cluster, ranks), {"NCCL_BUFFSIZE": str(b)})
        times.append(next(c.time_s for c in nccl.choices("allreduce", n, lay, version) if c.name == "nccl:tree/Simple"))
    assert times[1] >= times[0] * (1 - 1e-12)


@settings(max_examples=100, deadline=None)
@given(n=SIZES, op=st.sampled_from(nccl.OPS), version=st.sampled_from(nccl.VERSIONS),
       run=st.sampled_from([("gcp-a3-mega", {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0",
                                             "NCCL_BUFFSIZE": "8388608"}),
                            ("oci-bm-gpu4-8", {"NCCL_IB_QPS_PER_CONNECTION": "4"})]))
def test_the_sweeps_environments_keep_the_wall_time_growing_with_size(n, op, version, run):
    # the nccl-tests runs' own settings (validate.collectives.RUN_ENV): estimate-chosen pair, wall-time priced
    cluster, env = run
    t1 = collective_on_cluster(op, n, 16, cluster, nccl_version=version, nccl_env=env)[1]
    t2 = collective_on_cluster(op, 2 * n, 16, cluster, nccl_version=version, nccl_env=env)[1]
    assert t2 >= t1
