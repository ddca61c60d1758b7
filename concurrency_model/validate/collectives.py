"""Measured all-reduce times against the alpha-beta model (``data/nccltests_allreduce_sweeps.csv``,
``data/deepbench_allreduce.csv``), and one all-gather sweep from the A3-Mega preset (:func:`allgather_rows`).

* ``fitted``: per system (an nccl-tests run; a DeepBench device, implementation and tier: one node or
  several), :func:`split` sorts the rows by size (then ranks), keeps sizes >= 64 KiB for a system with at
  least 6 of them (the nccl-tests sweeps, 8 B - 8 GiB) and trains on every other row. :func:`fit_group`
  then chooses the model on the training rows alone, by leave-one-out cross-validation with the
  one-standard-error rule (:func:`~concurrency_model.calibrate.fit_select.select`), among
  :func:`candidates`, simplest first:

  - one (alpha, beta) of a flat bandwidth-optimal all-reduce: ring ``2(P-1) a + 2(P-1)/P n b``,
    Rabenseifner ``2 lg P a + 2(P-1)/P n b``, double binary tree ``2 lg P a + 2 n b`` (Thakur, Rabenseifner
    & Gropp 2005 §4.6; training-formulas §6.5; MPICH's non-power-of-two steps), gamma = 0;
  - the two-tier ring of training-formulas §6.6 (intra- and inter-node alpha and beta, ``g = P/N`` ranks
    per node), only where the rows hold two different splits and so identify its four constants;
  - the ring with 2 or 3 (alpha, beta) pairs and the faster per size: NCCL's choice of protocol (LL,
    LL128, Simple), each with its own latency and bandwidth (training-formulas §6.3-6.4 [P], ``tuning.cc``);
  - each flat form with its own constants below and above a fitted size (libraries switch algorithm at
    fixed sizes, Thakur et al. 2005 §4.6);
  - the ring and Rabenseifner on a two-level network, nodes in switch groups of ``G`` (a fitted power of
    two) with their own (alpha, beta) inside a group and across groups (:func:`~concurrency_model.
    calibrate.allreduce_forms.two_level`, the 2D composition of training-formulas §6.6 one level up), with
    one set of constants or a size switch (:class:`~concurrency_model.calibrate.fit_select.GroupSearch`).
    It needs rows at several node counts, some inside one group and some across: of these data only the
    KNL / MLSL rows (2-32 nodes, one rank each) have them. Their bus bandwidth at 12-67 MB is 9-13.6 GB/s
    up to 8 nodes and 6.2-8.5 GB/s at 16 and 32, the step a leaf switch's shared up-links make; the fit
    chooses ``G = 8`` and about 1.5 GB/s per rank across groups (8 ranks: about one 12.5 GB/s Omni-Path
    100 link, hardware.md). Left unmodelled: above 100 MB the KNL runs on up to 8 nodes take 17-21 ms more
    at about the same slope (an MLSL / MPI large-message regime; the two-level form with a size switch fits it
    but is not within one standard error of the simpler form on 18 training rows).

  All fits minimise soft-L1 ``log(predicted/measured)`` with non-negative constants. A system whose
  training rows are too few to score any candidate (2 rows) gets the ring fitted through them. Errors are
  reported for held-out sizes >= 64 KiB (the issue's target); :func:`summary` flags as not ``counted`` the
  systems with fewer than :data:`MIN_HELD_OUT` such rows, which the target does not count. A system of
  ``m`` rows holds out ``floor(m/2)``, so 3 held-out rows need 6 measured ones; the uncounted systems have
  1-5 (every size >= 64 KiB already): P100 / NCCL 2.0 MPI / multi-node has 4 (16 ranks on 2 nodes,
  400 KB - 26 MB: 2 held out), GTX 1080 Ti / Baidu ring / multi-node 3 (2 for training, 1 held out). Holding
  out more would leave 1 training row, which cannot fix the two constants of any form.
* ``preset``: the nccl-tests sweeps from the cluster presets alone (``oci-bm-gpu4-8`` for the 2 x 8 A100 run,
  its own system: A100-40GB, 16 x 100 Gb/s RoCE ports a node; ``gcp-a3-mega`` for the 2 x 8 H100 run, its own
  system: 200 Gb/s GPUDirect-TCPXO NICs where DGX H100 has 400 Gb/s InfiniBand), through
  :func:`~concurrency_model.comm.on_cluster.collective_on_cluster` with ``auto``: what NCCL's tuning
  model runs (:mod:`concurrency_model.comm.nccl`), on the channels NCCL gives the call, with the tables of
  the NCCL version the run states (:func:`nccl_version`: 2.19.3 for the A100 run; 2.21.5 for the H100 run,
  :data:`STATED_ELSEWHERE`), and the run's NCCL environment (:data:`RUN_ENV`). Where the rows miss:
  :func:`preset_diagnosis` and :func:`bucket_misses` (printed by ``benchmarks/collective_accuracy.py`` for every
  size bucket over the target) split each bucket's miss into the bytes' time (measured step bandwidth between
  neighbouring sizes against the bandwidth the prediction runs at) and a per-call latency.

  - nccl-tests' timing adds nothing per call to model: ``all_reduce_perf`` (NVIDIA/nccl-tests @ 1292b25, the last
    commit before the A100 run's 2023-10 container, and @ 26ad4af, before the H100 run of 2024-08; ``src/common.cu``
    ``BenchTime``, ``src/timer.cc``) times 20
    back-to-back calls (after 5 warm-up calls) with the host's ``steady_clock`` from the first enqueue to the end of
    one stream synchronisation, divides by 20 and averages the ranks (``-a 1``); it does not use CUDA events. A
    call's figure is the GPU's back-to-back period, with the first call's enqueue and the final synchronisation
    spread over the 20.
  - The A100 run's manifest sets ``NCCL_IB_QPS_PER_CONNECTION=4``, and NCCL 2.19.3 splits each network message over
    the 4 queue pairs (:func:`~concurrency_model.comm.nccl.qp_split_s`): 12 us a call on its tree. Without it the
    run measured a median 12 / 13 us more than the prediction at 8-128 KiB / 256 KiB - 4 MiB (bucket medians 24.5 /
    17.2%); with it 1.9 / 1.1%.
  - NCCL's estimate chooses the pair, the call's wall time prices it (:class:`~concurrency_model.comm.nccl.Choice`
    ``select_s`` / ``time_s``): the wall time leaves out the ring's x1.4 "plateau" factor
    (:func:`~concurrency_model.comm.nccl.wall_latency_factor`), and a tree / Simple call runs at its links' rate
    (:func:`~concurrency_model.comm.nccl.tree_wall_bw`: the chain's 2(k-1) of k GPUs' sends carry each byte; the NICs
    once each way on two nodes) plus its chunk pipeline's fill (:func:`~concurrency_model.comm.nccl.tree_fill_s`:
    chunks of ``NCCL_BUFFSIZE / NCCL_STEPS``) instead of NCCL's ``0.92 x 1/2`` and ``treeCorrectionFactor``. The
    A100 run's tree / Simple rows (1 - 8 GiB) measured 118-135 GB/s step bandwidth against 131.5 GB/s now (105.8
    in NCCL's estimate): 256 MiB - 8 GiB from 15.2% to 3.5%. The other A100 buckets are unchanged (tree LL / LL128);
    the choice is NCCL's estimate's, as before (LL128 -> Simple at 1 GiB, tuning.cc v2.19.3-1 tables).
  - The H100 run (NCCL 2.21.5, GCP's profile: ``NCCL_ALGO=Ring,Tree``, ``NCCL_PROTO=Simple``, NVLS off,
    ``NCCL_BUFFSIZE=8388608``: 1 MiB tree chunks). With the wall time, 8-128 KiB is at 2.7% (was 42.0: the x1.4
    is not in the call; 4 KiB -> 8 KiB measures +4.7 us, not the +61 us it would add) and 256 MiB - 8 GiB at 3.3%
    (was 5.4: the 8 NICs' 180 GB/s plus the 1 MiB chunks' fill against 182-189 GB/s measured steps). 256 KiB - 4
    MiB (17.6%) and 8-128 MiB (52.3%) are missed, and nothing sourced closes them: the rows lie on two lines, about
    155 us + n / 20.5 GB/s from 256 KiB to 16 MiB and 890 us + n / 183 GB/s from 32 MiB (they cross at 17 MB,
    between the 16 and 32 MiB rows), where NCCL's estimate runs the ring (157 us + n / 96 GB/s) up to 64 MiB. The
    second line is the tree / Simple wall time (within 9% from 128 MiB; 13-17% at 32-64 MiB, where NCCL's estimate
    keeps the ring). The first is a pair on fewer channels than NCCL's enqueue gives: the ring at 12 GB/s a channel
    would take about 1.7 of the 8, NCCL's tree estimate on one channel gives 45 x 0.92 x 1/2 = 20.7 GB/s. The choice
    is GCP's tuner plugin's (``NCCL_TUNER_PLUGIN``; NCCL 2.21.5 takes the algorithm, protocol and channel count it
    sets: ``src/enqueue.cc`` ``getChannnelThreadInfo``, "not preset by users"), whose configuration
    (``a3plus_tuner_config.textproto``) is not public (google/nccl-plugin-gpudirect-tcpxo @ 04815d1 holds no tuner,
    GoogleCloudPlatform/container-engine-accelerators @ 0a2b482 only its path); a rule fitted to these rows would be
    judged on the rows it was fitted on, so none is. The one other published A3-Mega all_reduce_perf output found
    (GoogleCloudPlatform/ai-infra-cluster-provisioning ``sample_workloads/nccltest/a3-mega/README.md`` @ 16a9af0,
    "an example test output", 1 MiB - 8 GiB) is not added: it names neither its ranks, NCCL version nor plugin
    release, its page is titled TCPX (A3's previous stack), and its 89.5 GB/s busbw at 8 GiB is a quarter of this
    run's, with 1-16 MiB flat at 1.6-1.9 ms. The small sizes (8 B - 4 KiB: 123-127 us) stay 24-27% under the ring
    / Simple latency (157 us).
* ``vtrain``: vTrain's own all-reduce tables (``data/vtrain_allreduce_lut_a100.csv``: nccl-tests output on
  2-8 GPUs of one A100 NVSwitch node, 1 MiB to 1 GiB in steps of 1 MiB; VIA-Research/vTrain @ f8dda84,
  ``trace/a100/AR_GPU{2..8}_1M_1024M_LUT``) predicted from the ``dgx-a100`` preset alone (the cluster vTrain's
  training sets are validated on), one node, ``auto`` (NCCL's tuning model). The out-of-place time is compared,
  as for the nccl-tests sweeps (vTrain's predictor reads the in-place column; the two differ by a few per
  cent). vTrain states no NCCL version (its Dockerfile builds on CUDA 11.8 and PyTorch 2.0.1; the tables were
  taken with nccl-tests, whose build is not given), so the default tables (:data:`~concurrency_model.comm.
  nccl.DEFAULT_VERSION`) are used. Target (issue 35 item 2): median APE <= 15% from 1 MiB.
"""
from __future__ import annotations

import hashlib
import re

import numpy as np
import pandas as pd

from ..calibrate.allreduce_forms import TWO_LEVEL, flat, hierarchical_ring, identifiable
from ..calibrate.fit_select import Fitted, GroupSearch, Protocols, Single, Switch, select
from ..comm.nccl import DEFAULT_VERSION
from ..comm.on_cluster import collective_on_cluster, nccl_on
from ..datasets import load
from ..frames import cached_frame
from ..hardware.clusters import place

MIN_TARGET_BYTES = 64 * 1024
#: Systems with fewer held-out rows (>= 64 KiB) than this are reported but not counted for the target:
#: with 1-2 training rows no two-constant form can be checked, only interpolated.
MIN_HELD_OUT = 3
#: The flat all-reduces whose bandwidth term is within 2x of the lower bound 2(P-1)/P n beta (Chan et
#: al. 2007): ring, Rabenseifner, double binary tree.
BANDWIDTH_OPTIMAL = ("ring", "rabenseifner", "double_binary_tree")
PRESETS = {"oci_a100_2x8_roce": "oci-bm-gpu4-8", "gcp_a3mega_h100_2x8_tcpxo": "gcp-a3-mega",
           "mgcafe_a3mega_h100_2x8_tcpxo_allgather": "gcp-a3-mega"}
#: the nccl-tests files, by collective: the all-reduce sweeps of :data:`PRESETS`' first two runs and an all-gather
#: sweep on two A3-Mega nodes (``data/nccltests_allgather_a3mega.csv``: 13 sizes, 64 KiB - 8 GiB, of a later run,
#: NCCL 2.28.7 and the TCPXO plugin of Jan 2026)
NCCLTESTS_FILES = {"allreduce": "nccltests_allreduce_sweeps", "allgather": "nccltests_allgather_a3mega"}
#: NCCL version of a run whose log states none, from its repository (:func:`run_version`): the A3-Mega run's
#: README (lessizzmore/create-a3mega-ztan-fork README.md @ 346b825) lists the installed ``libnccl.so.2.21.5``
#: under /var/lib/tcpxo/lib64, the NCCL core of GCP's TCPXO plugin release of Aug 06 2024
#: (GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/README.md @ 0a2b482: "nccl-2.21.5").
STATED_ELSEWHERE = {"gcp_a3mega_h100_2x8_tcpxo": "2.21"}
#: the NCCL environment of a run (:func:`~concurrency_model.comm.nccl.env_settings`): the A3-Mega run sources
#: GCP's ``nccl-env-profile.sh`` (its README), which for the plugin releases of May - Oct 2024 (NCCL 2.21.5) sets
#: NCCL_ALGO=Ring,Tree, NCCL_PROTO=Simple, NCCL_NVLS_ENABLE=0 (gpudirect-tcpxo/README.md @ 0a2b482, "NCCL
#: configs" of each release; the guest config checker enforces them). The OCI run sets none of the three; its
#: manifest (oracle-quickstart/oci-hpc-oke manifests/a100-nccl-test.yaml @ 1402938) passes NCCL_IB_QPS_PER_CONNECTION=4
#: (modelled: :func:`~concurrency_model.comm.nccl.qp_split_s`, NCCL 2.19.3 splits each message over the 4 queue
#: pairs), NCCL_CROSS_NIC=1, NCCL_IB_GID_INDEX=3, NCCL_IB_TC=41, NCCL_IB_SL=0, NCCL_IB_HCA=mlx5, NCCL_SOCKET_IFNAME
#: and NCCL_TOPO_FILE (the BM.GPU4.8 topology the preset reads), none of which NCCL's tuning model reads; mpirun
#: binds each rank to its NUMA node (``--bind-to numa``) and the pods reach the 16 ports as SR-IOV virtual
#: functions (``oci-rdma-sriov`` x 16). The A3-Mega profile also sets
#: NCCL_MIN_NCHANNELS=4 (``src/graph/connect.cc``: raises the channel count to 4 at least; the 8 NICs already give
#: 8) and NCCL_BUFFSIZE=8388608 (outside NCCL's tuning model; the tree / Simple chunk of the wall time, 1 MiB:
#: :func:`~concurrency_model.comm.nccl.tree_chunk_bytes`, modelled), and loads the tuner plugin with
#: ``a3plus_tuner_config.textproto``, which no public repository holds (searched: google/nccl-plugin-gpudirect-tcpxo
#: @ 04815d1, GoogleCloudPlatform/container-engine-accelerators @ 0a2b482).
#: The all-gather run used GCP's installer v1.0.15 (its report); that release's "NCCL configs"
#: (GoogleCloudPlatform/container-engine-accelerators gpudirect-tcpxo/README.md @ 992db81, "Jan 9, 2026", NCCL 2.28.7)
#: set NCCL_PROTO=Simple,LL128, NCCL_NVLS_ENABLE=1, NCCL_BUFFSIZE=8388608 and NCCL_MIN_NCHANNELS=4 (the 8 NICs give 8
#: channels already), no NCCL_ALGO, and the same tuner plugin (``a3plus_tuner_config.textproto``, not modelled).
RUN_ENV = {"gcp_a3mega_h100_2x8_tcpxo": {"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0",
                                         "NCCL_BUFFSIZE": "8388608"},
           "mgcafe_a3mega_h100_2x8_tcpxo_allgather": {"NCCL_PROTO": "Simple,LL128", "NCCL_NVLS_ENABLE": "1",
                                                      "NCCL_BUFFSIZE": "8388608"},
           "oci_a100_2x8_roce": {"NCCL_IB_QPS_PER_CONNECTION": "4"}}


def ring(n, P, alpha, beta):
    """Ring all-reduce (Thakur, Rabenseifner & Gropp 2005; the paper's T_pipe)."""
    return 2 * (P - 1) * alpha + 2 * (P - 1) / P * n * beta


def candidates(train: pd.DataFrame) -> list:
    """The models :func:`fit_group` chooses among for one system's training rows, simplest first (the
    order breaks ties and the one-standard-error rule of :func:`~concurrency_model.calibrate.fit_select.
    select`): the flat bandwidth-optimal all-reduces (``ring`` first), the two-tier ring where the rows
    identify it, the ring with 2 NCCL protocols, the two-level ring and Rabenseifner (switch groups of
    ``G`` nodes), each flat form with a size switch, the ring with 3 protocols, the two-level forms with a
    size switch (``GroupSearch`` raises for rows that identify no ``G``; the selection leaves it
    unscored). Recursive doubling and the binomial tree move ``lg P`` times the vector and are used by
    MPI libraries for short messages only (Thakur et al. 2005 §4.6; every size here is >= 64 KiB), so
    they are not candidates."""
    n, P, N = (train[c].to_numpy(float) for c in ("size_bytes", "ranks", "nodes"))
    out = [Single(flat(a)) for a in BANDWIDTH_OPTIMAL]
    if identifiable(hierarchical_ring(), n, P, N):
        out.append(Single(hierarchical_ring()))
    out.append(Protocols(flat("ring"), 2))
    out += [GroupSearch(a) for a in TWO_LEVEL]
    out += [Switch(flat(a)) for a in BANDWIDTH_OPTIMAL]
    out.append(Protocols(flat("ring"), 3))
    out += [GroupSearch(a, Switch) for a in TWO_LEVEL]
    return out


def split(g: pd.DataFrame) -> tuple[pd.DataFrame, pd.DataFrame]:
    """One system's ``(train, test)`` rows: sorted by size (then ranks), restricted to sizes >= 64 KiB
    when it has at least 6 of them (the nccl-tests sweeps), every other row for training."""
    g = g.sort_values(["size_bytes", "ranks"]).reset_index(drop=True)
    if (g["size_bytes"] >= MIN_TARGET_BYTES).sum() >= 6:  # long sweeps: fit the target range only
        g = g[g["size_bytes"] >= MIN_TARGET_BYTES].reset_index(drop=True)
    return g.iloc[::2], g.iloc[1::2].copy()


def fit_group(train: pd.DataFrame) -> tuple[Fitted, pd.DataFrame]:
    """The model of :func:`candidates` with the best leave-one-out error on ``train`` (fitted on all of
    it) and the table of every candidate's score (:func:`~concurrency_model.calibrate.fit_select.select`)."""
    n, P, N, t = (train[c].to_numpy(float) for c in ("size_bytes", "ranks", "nodes", "measured_s"))
    return select(candidates(train), n, P, N, t)


def loo_sigma(table: pd.DataFrame) -> float:
    """The chosen model's root-mean-square leave-one-out log error on the training rows (``select``'s
    table): the spread of a held-out row's; nan when no candidate could be scored (too few rows)."""
    if "chosen" not in table or not table["chosen"].any():
        return float("nan")
    return float(table.loc[table["chosen"], "loo_rms_log"].iloc[0])


def large_message_constants(f: Fitted, n_max: float, P: float, N: float) -> tuple[float, float]:
    """``(alpha_s, beta_s_per_byte)`` of the part of ``f`` that serves the largest size ``n_max``: the
    fastest protocol there or the regime above the switch; the inter-node pair of the two-tier form."""
    if f.kind == "switch":
        x = f.params[-1]
    else:
        x = f.params[int(np.argmin([f.form.design(np.array([n_max]), np.array([P]), np.array([N]))[0] @ p
                                    for p in f.params]))]
    k = dict(zip(f.form.names, x))
    return (k["alpha_inter"], k["beta_inter"]) if "alpha_inter" in k else (k["alpha"], k["beta"])


def rows() -> pd.DataFrame:
    """All measured all-reduce rows: ``system, source, ranks, nodes, size_bytes, measured_s``."""
    nt = load("nccltests_allreduce_sweeps")
    nt = nt[nt["collective"] == "all_reduce"]
    a = pd.DataFrame({"system": nt["run_id"], "source": "nccl-tests", "ranks": nt["num_ranks"],
                      "nodes": nt["num_nodes"], "size_bytes": nt["size_bytes"].astype(float),
                      "measured_s": nt["oop_time_us"] * 1e-6})
    db = load("deepbench_allreduce")
    tier = np.where(db["num_nodes"] > 1, "multi-node", "one node")
    b = pd.DataFrame({"system": db["device"] + " / " + db["algorithm"] + " / " + tier, "source": "DeepBench",
                      "ranks": db["num_ranks"], "nodes": db["num_nodes"], "size_bytes": db["size_floats"] * 4.0,
                      "measured_s": db["mean_time_ms"] * 1e-3})
    out = pd.concat([a, b], ignore_index=True)
    return out[out["measured_s"] > 0].sort_values(["system", "ranks", "size_bytes"]).reset_index(drop=True)


def allgather_rows() -> pd.DataFrame:
    """The all-gather sweep (``data/nccltests_allgather_a3mega.csv``) as :func:`rows` gives the all-reduces, with
    ``collective`` (``allgather``) and ``row`` (the file line); ``size_bytes`` is nccl-tests' size, the gathered
    output (each of the 16 ranks contributes a sixteenth), as :func:`~concurrency_model.comm.on_cluster.
    collective_on_cluster` takes it.

    >>> r = allgather_rows()
    >>> len(r), int(r["size_bytes"].min()), int(r["size_bytes"].max()), set(r["collective"])
    (13, 65536, 8589934592, {'allgather'})
    """
    nt = load(NCCLTESTS_FILES["allgather"])
    out = pd.DataFrame({"system": nt["run_id"], "source": "nccl-tests", "collective": "allgather",
                        "ranks": nt["num_ranks"], "nodes": nt["num_nodes"], "size_bytes": nt["size_bytes"].astype(float),
                        "measured_s": nt["oop_time_us"] * 1e-6, "row": nt.index + 2})
    return out.sort_values(["system", "ranks", "size_bytes"]).reset_index(drop=True)


def fitted(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """Held-out predictions per system: the model :func:`fit_group` selects and fits on the training
    half of :func:`split`, predicted on the other half; ``loo_sigma`` is its spread (:func:`loo_sigma`),
    ``model`` names it, ``alpha_s`` and
    ``beta_s_per_byte`` are its large-message constants (:func:`large_message_constants`).

    The fits (a leave-one-out search over :func:`candidates`, seconds of CPU) depend only on ``df``: the frame is
    kept through :func:`concurrency_model.frames.cached_frame`, keyed by the sha256 of ``df``'s CSV text (floats
    written exactly) and dtypes, so a later process reads it back bit for bit."""
    df = rows() if df is None else df
    text = df.to_csv().encode() + repr([str(t) for t in df.dtypes]).encode()
    return cached_frame("collectives_fitted", (hashlib.sha256(text).hexdigest(),), lambda: _fitted(df))


def _fitted(df: pd.DataFrame) -> pd.DataFrame:
    out = []
    for system, g in df.groupby("system", sort=False):
        train, test = split(g)
        if len(train) < 2 or len(test) < 1:
            continue
        f, table = fit_group(train)
        n, P, N = (test[c].to_numpy(float) for c in ("size_bytes", "ranks", "nodes"))
        test["predicted_s"] = f.predict(n, P, N)
        test["loo_sigma"] = loo_sigma(table)
        last = train.iloc[-1]
        test["alpha_s"], test["beta_s_per_byte"] = large_message_constants(
            f, float(train["size_bytes"].max()), float(last["ranks"]), float(last["nodes"]))
        test["model"] = f.name
        out.append(test)
    res = pd.concat(out, ignore_index=True)
    res["ape"] = (res["predicted_s"] - res["measured_s"]).abs() / res["measured_s"] * 100
    res["mode"] = "fitted"
    return res


def nccl_version(software: str) -> str:
    """The transcribed NCCL tables (:data:`~concurrency_model.comm.nccl.VERSIONS`) for a run's stated
    software: ``2.19`` for NCCL 2.19-2.20, ``2.21`` for 2.21-2.22, ``2.23`` from 2.23 (NVIDIA/nccl
    ``src/graph/tuning.cc``: v2.20.5-1 changes only CollNet and MNNVL against v2.19.3-1, v2.22.3-1 only CollNet
    against v2.21.5-1), the default where no version is stated.

    >>> nccl_version("nccl-tests:pytorch-23.10-nccl-2.19.3-1"), nccl_version("nccl-2.21.5"), nccl_version("mpirun")
    ('2.19', '2.21', '2.23')
    >>> nccl_version("NCCL 2.28.7; plugin v1.0.15")
    '2.23'
    """
    m = re.search(r"nccl[- ](\d+)\.(\d+)", str(software), re.I)
    if not m:
        return DEFAULT_VERSION
    v = (int(m.group(1)), int(m.group(2)))
    return "2.19" if v < (2, 21) else "2.21" if v < (2, 23) else "2.23"


def size_bucket(size_bytes) -> np.ndarray:
    """The size buckets of the issue-35 target (median APE <= 15% in each, per system): 8-128 KiB, 256 KiB -
    4 MiB, 8-128 MiB, 256 MiB - 8 GiB (five powers of two each, six in the last); ``below 8K`` under it.

    >>> [str(b) for b in size_bucket([1024, 65536, 2**30])]
    ['below 8K', '8K-128K', '256M-8G']
    """
    n = np.asarray(size_bytes, float)
    return np.select([n < 2**13, n < 2**18, n < 2**23, n < 2**28], ["below 8K", "8K-128K", "256K-4M", "8M-128M"],
                     "256M-8G")


def run_settings(system: str) -> dict:
    """``nccl_version`` and ``nccl_env`` of an nccl-tests run (:data:`PRESETS`): the version its log states
    (:func:`nccl_version`) or :data:`STATED_ELSEWHERE`, the environment :data:`RUN_ENV` (None: NCCL's defaults).

    >>> run_settings("gcp_a3mega_h100_2x8_tcpxo")["nccl_version"], run_settings("oci_a100_2x8_roce")
    ('2.21', {'nccl_version': '2.19', 'nccl_env': {'NCCL_IB_QPS_PER_CONNECTION': '4'}})
    """
    if system not in PRESETS:
        raise ValueError(f"system: unknown {system!r}; allowed: {', '.join(PRESETS)}")
    for file in NCCLTESTS_FILES.values():  # the file that holds the run, read only as far as needed
        nt = load(file)
        if (nt["run_id"] == system).any():
            software = nt.loc[nt["run_id"] == system, "software"].iloc[0]
            break
    else:
        raise ValueError(f"system: no row of {system!r} in {', '.join(NCCLTESTS_FILES.values())}")
    return {"nccl_version": STATED_ELSEWHERE.get(system, nccl_version(software)), "nccl_env": RUN_ENV.get(system)}


def preset(df: pd.DataFrame | None = None) -> pd.DataFrame:
    """The nccl-tests sweeps predicted from the cluster presets (no fitting), each row's ``collective`` (default
    all-reduce; :func:`allgather_rows` are all-gathers); ``algorithm`` is the
    (algorithm, protocol) NCCL's model runs, ``latency_s`` its latency (launch included), ``channels`` the
    channels the call runs on and ``nccl_estimate_s`` NCCL's own estimate at every channel
    (:class:`~concurrency_model.comm.nccl.Choice`): where a row misses, these say which part does."""
    df = rows() if df is None else df
    res = df[df["system"].isin(PRESETS)].copy()
    settings = {system: run_settings(system) for system in res["system"].unique()}
    pred, algs, lat, chans, est = [], [], [], [], []
    for _, r in res.iterrows():
        op = r.get("collective", "allreduce")
        alg, t, pl = collective_on_cluster(op, r["size_bytes"], int(r["ranks"]), PRESETS[r["system"]],
                                           int(r["ranks"] // r["nodes"]), **settings[r["system"]])
        c = nccl_on(op, r["size_bytes"], pl, **settings[r["system"]])
        pred.append(t)
        algs.append(alg)
        lat.append(c.latency_s)
        chans.append(c.channels)
        est.append(c.model_s)
    res["predicted_s"] = pred
    res["algorithm"] = algs
    res["latency_s"] = lat
    res["channels"] = chans
    res["nccl_estimate_s"] = est
    res["ape"] = (res["predicted_s"] - res["measured_s"]).abs() / res["measured_s"] * 100
    res["mode"] = "preset"
    return res


#: the issue-35 target: median APE of every size bucket from 8 KiB at most this (per cent)
BUCKET_TARGET_PCT = 15.0


def preset_diagnosis(pre: pd.DataFrame | None = None, target_pct: float = BUCKET_TARGET_PCT) -> pd.DataFrame:
    """Which part of each preset row (:func:`preset`, sizes >= 8 KiB) misses: its ``bucket`` (:func:`size_bucket`),
    ``ratio`` (measured / predicted), ``excess_us`` (measured - predicted), ``latency_us`` (the chosen pair's
    latency, launch included), ``run_GBps`` (the bandwidth the prediction moves the bytes at: size / (predicted -
    latency)), ``measured_step_GBps`` (the measured bandwidth between this size and the next smaller one of the sweep:
    d size / d time, NaN on a system's first row or where the time did not grow: what the bytes cost, free of the
    per-call latency), ``estimate_us`` (NCCL's own estimate at every channel), ``implied_channels`` (the channels on
    which the chosen pair, at its bandwidth a channel, would move the bytes at ``measured_step_GBps``: where a tuner
    runs a pair on other channels than NCCL's enqueue gives, it shows here), ``bucket_ape`` (the bucket's median
    APE) and ``missed`` (that median above ``target_pct``). A row whose ``measured_step_GBps`` is near
    ``run_GBps`` and whose ``excess_us`` stays constant misses on latency; one whose step bandwidth is far from
    ``run_GBps`` misses on the bandwidth (the pair, or its channels).

    >>> p = pd.DataFrame({"system": "s", "size_bytes": [8192.0, 16384.0], "measured_s": [40e-6, 48e-6],
    ...                   "predicted_s": [30e-6, 31e-6], "latency_s": 29e-6, "ape": [25.0, 35.4],
    ...                   "algorithm": "nccl:tree/LL", "channels": [2.0, 4.0], "nccl_estimate_s": [30e-6, 31e-6]})
    >>> d = preset_diagnosis(p)
    >>> d["measured_step_GBps"].round(3).tolist(), d["run_GBps"].round(3).tolist(), d["missed"].tolist()
    ([nan, 1.024], [8.192, 8.192], [True, True])
    """
    pre = (preset() if pre is None else pre).sort_values(["system", "size_bytes"])
    g = pre.groupby("system", sort=False)
    dn, dt = g["size_bytes"].diff(), g["measured_s"].diff()
    step = (dn / dt.where(dt > 0)) / 1e9
    d = pre.assign(measured_step_GBps=step)[pre["size_bytes"] >= 2**13].copy()
    d["bucket"] = size_bucket(d["size_bytes"])
    d["ratio"] = d["measured_s"] / d["predicted_s"]
    d["excess_us"] = (d["measured_s"] - d["predicted_s"]) * 1e6
    d["latency_us"] = d["latency_s"] * 1e6
    d["run_GBps"] = d["size_bytes"] / (d["predicted_s"] - d["latency_s"]) / 1e9
    d["estimate_us"] = d["nccl_estimate_s"] * 1e6
    d["implied_channels"] = d["channels"] * d["measured_step_GBps"] / d["run_GBps"]
    d["bucket_ape"] = d.groupby(["system", "bucket"], sort=False)["ape"].transform("median")
    d["missed"] = d["bucket_ape"] > target_pct
    return d.reset_index(drop=True)


def bucket_misses(d: pd.DataFrame) -> pd.DataFrame:
    """Per system and size bucket of :func:`preset_diagnosis`: ``median_ape``, ``missed``, the medians of ``ratio``,
    ``excess_us``, ``run_GBps``, ``measured_step_GBps`` and ``implied_channels``, the pairs chosen (``algorithms``),
    and the miss split in two, each the median over the bucket's rows that have a step bandwidth: ``bytes_miss_us``,
    the measured time of the bytes (size / ``measured_step_GBps``) less the predicted one (predicted - latency), and
    ``latency_miss_us``, the rest of the measured time less the predicted latency. ``part`` names the larger of the
    two (``-`` for a bucket within the target): ``latency``, a per-call time the prediction lacks or has too much
    of; ``bandwidth``, bytes that cost what the chosen pair and its channels do not say.

    >>> p = pd.DataFrame({"system": "s", "size_bytes": [8192.0, 16384.0, 32768.0], "measured_s": [40e-6, 41e-6, 43e-6],
    ...                   "predicted_s": [30e-6, 31e-6, 33e-6], "latency_s": 29e-6, "ape": [25.0, 24.4, 23.3],
    ...                   "algorithm": "nccl:tree/LL", "channels": 2.0, "nccl_estimate_s": 0.0})
    >>> b = bucket_misses(preset_diagnosis(p))
    >>> b[["bucket", "median_ape", "run_GBps", "measured_step_GBps", "bytes_miss_us", "latency_miss_us", "part"]
    ...   ].values.tolist()
    [['8K-128K', 24.4, 8.192, 8.192, 0.0, 10.0, 'latency']]
    """
    rows = []
    for (system, bucket), g in d.groupby(["system", "bucket"], sort=False):
        step = g["measured_step_GBps"]
        bytes_meas = g["size_bytes"] / (step * 1e9) * 1e6
        bytes_pred = (g["predicted_s"] - g["latency_s"]) * 1e6
        bytes_miss = float((bytes_meas - bytes_pred).median())
        latency_miss = float((g["measured_s"] * 1e6 - bytes_meas - g["latency_us"]).median())
        missed = bool(g["missed"].iloc[0])
        part = "-" if not missed else "bandwidth" if abs(bytes_miss) > abs(latency_miss) else "latency"
        rows.append({"system": system, "bucket": bucket, "median_ape": round(float(g["ape"].median()), 2),
                     "missed": missed, "ratio": round(float(g["ratio"].median()), 3),
                     "excess_us": round(float(g["excess_us"].median()), 2),
                     "run_GBps": round(float(g["run_GBps"].median()), 3),
                     "measured_step_GBps": round(float(step.median()), 3),
                     "implied_channels": round(float(g["implied_channels"].median()), 2),
                     "bytes_miss_us": round(bytes_miss, 2) + 0.0, "latency_miss_us": round(latency_miss, 2) + 0.0,
                     "algorithms": ", ".join(dict.fromkeys(g["algorithm"])), "part": part})
    return pd.DataFrame(rows)


def machine_summary(res: pd.DataFrame, min_bytes: float = MIN_TARGET_BYTES) -> pd.DataFrame:
    """Median and max APE per mode and *machine* over sizes >= ``min_bytes``: the DeepBench device (one
    spreadsheet, one cluster: every implementation and tier measured on it) or the nccl-tests run. The
    fits stay per system (device / implementation / tier, :func:`fitted`); this pools their held-out rows,
    so a group of 1-2 held-out rows counts as those rows, neither dropped nor a whole system."""
    r = res[res["size_bytes"] >= min_bytes].assign(machine=lambda x: x["system"].str.split(" / ").str[0])
    g = r.groupby(["mode", "machine"])["ape"]
    return pd.DataFrame({"rows": g.size(), "groups": r.groupby(["mode", "machine"])["system"].nunique(),
                         "median_ape": g.median(), "max_ape": g.max()}).reset_index()


def summary(res: pd.DataFrame, min_bytes: float = MIN_TARGET_BYTES) -> pd.DataFrame:
    """Median and max APE per mode and system, over sizes >= ``min_bytes``; ``counted`` is whether the
    system has at least :data:`MIN_HELD_OUT` such rows (the fitted target counts only those)."""
    r = res[res["size_bytes"] >= min_bytes]
    g = r.groupby(["mode", "system"])["ape"]
    out = pd.DataFrame({"rows": g.size(), "median_ape": g.median(), "max_ape": g.max()}).reset_index()
    out["counted"] = out["rows"] >= MIN_HELD_OUT
    return out


#: the cluster preset vTrain's all-reduce tables are predicted on (its single-node training rows use it too)
VTRAIN_PRESET = "dgx-a100"
#: size buckets of the vTrain tables (MiB, lower edges): the small / mid sizes where the gap was found and the
#: bandwidth-bound rest
VTRAIN_BUCKETS = (1, 5, 17, 257)


def vtrain_rows() -> pd.DataFrame:
    """vTrain's A100 all-reduce tables as measured rows: ``system`` (``vtrain_a100``), ``ranks``, ``nodes`` (1),
    ``size_bytes``, ``measured_s`` (out-of-place time) and ``row`` (the file line).

    >>> r = vtrain_rows()
    >>> len(r), sorted(r["ranks"].unique().tolist()), int(r["size_bytes"].min()), int(r["size_bytes"].max())
    (7168, [2, 3, 4, 5, 6, 7, 8], 1048576, 1073741824)
    """
    lut = load("vtrain_allreduce_lut_a100")
    out = pd.DataFrame({"system": "vtrain_" + lut["gpu"], "source": "vTrain", "ranks": lut["num_gpus"],
                        "nodes": 1, "size_bytes": lut["size_bytes"].astype(float),
                        "measured_s": lut["oop_time_ns"] * 1e-9, "row": lut.index + 2})
    return out.sort_values(["system", "ranks", "size_bytes"]).reset_index(drop=True)


def vtrain_preset(df: pd.DataFrame | None = None, nccl_version: str | None = None) -> pd.DataFrame:
    """vTrain's rows (:func:`vtrain_rows`) predicted on :data:`VTRAIN_PRESET`, all ranks on one node, with
    NCCL's tuning model (``nccl_version``: default :data:`~concurrency_model.comm.nccl.DEFAULT_VERSION`); columns
    as :func:`preset`'s."""
    res = (vtrain_rows() if df is None else df).copy()
    pred, algs = [], []
    placements = {}  # one placement per group size (what collective_on_cluster does per call)
    for ranks, size in zip(res["ranks"].astype(int), res["size_bytes"]):
        p = placements.setdefault(ranks, place(VTRAIN_PRESET, ranks, ranks))
        c = nccl_on("allreduce", size, p, nccl_version)
        pred.append(c.time_s)
        algs.append(c.name)
    res["predicted_s"] = pred
    res["algorithm"] = algs
    res["ape"] = (res["predicted_s"] - res["measured_s"]).abs() / res["measured_s"] * 100
    res["mode"] = "preset"
    return res


def vtrain_bucket(size_bytes) -> np.ndarray:
    """The :data:`VTRAIN_BUCKETS` size bucket of each size: ``1-4M``, ``5-16M``, ``17-256M``, ``257M-1G``.

    >>> [str(b) for b in vtrain_bucket([2**20, 16 * 2**20, 17 * 2**20, 2**30])]
    ['1-4M', '5-16M', '17-256M', '257M-1G']
    """
    mib = np.asarray(size_bytes, float) / 2**20
    b = VTRAIN_BUCKETS
    return np.select([mib < b[1], mib < b[2], mib < b[3]], [f"{b[0]}-{b[1] - 1}M", f"{b[1]}-{b[2] - 1}M",
                                                           f"{b[2]}-{b[3] - 1}M"], f"{b[3]}M-1G")
