"""Collectives as NCCL runs them: NCCL's own tuning model (algorithm x protocol, latency + bytes / bandwidth).

NCCL times every (algorithm, protocol) pair of a call with a latency and a bandwidth it derives from the
topology it detected, and runs the pair with the least time (``ncclTopoTuneModel`` and
``ncclTopoGetAlgoTime`` in ``src/graph/tuning.cc``; the choice in ``topoGetAlgoInfo``, ``src/enqueue.cc``).
This module transcribes that model; the constants below are NCCL's (repository ``NVIDIA/nccl``):

* **v2.19** = tag ``v2.19.3-1`` (commit ``8c6c5951854a57ba90c4424fa040497f6defac46``), the version of the
  A100 nccl-tests sweep in ``data/`` (v2.20.5-1 differs from it only in CollNet and MNNVL); **v2.21** = tag
  ``v2.21.5-1`` (the NCCL core of GCP's GPUDirect-TCPXO plugin in 2024, the A3-Mega sweep's): v2.19's
  tables and step counts but the NVLS NVLink latency of 25 us, Hopper's ``llMaxBws`` row of 141 / 45 / 35
  and ring LL at ``busBw / 2`` (v2.22.3-1 changes only CollNet); **v2.23** = tag ``v2.23.4-1`` (commit
  ``68b542363f9a44cdaac480f51ebe0fc26de96139``), the default: the first table with PAT and with the Hopper
  rows retuned. Paths: ``src/graph/tuning.cc`` (every table and formula named below),
  ``src/graph/search.cc`` (channel search, ``ncclTopoDupChannels``, speed arrays), ``src/enqueue.cc``
  (choice), ``src/include/info.h`` (``nBytes``), ``src/transport/net_ib.cc`` (``props->latency = 0``).

Per pair, with ``P`` ranks on ``N`` nodes, ``k = P / N`` ranks per node (``tuning.cc``):

* **latency** (us) = ``baseLat[alg][proto]`` + per-hop hardware latencies ``hwLat[tier][alg][proto]`` x
  NCCL's hop counts. Ring allreduce / allgather / reduce-scatter: ``(nsteps - nInter) * intraLat + nInter *
  interLat`` with ``nsteps`` = ``2(P-1)`` (allreduce), ``P-1`` (allgather, reduce-scatter), ``P``
  (broadcast, reduce); ``nInter`` = ``2N`` for a multi-node allreduce in v2.19, ``2(N-1)`` in v2.23,
  ``N-1`` for allgather / reduce-scatter; ``intraLat`` is at least the network post overhead once
  ``N > 1`` (``getNetOverhead``: 1 us on Intel hosts, 2 us on AMD, x3 for Simple). Broadcast and reduce:
  one hop when every channel follows the same ring order (``sameChannels``; taken to hold on one node and
  not across nodes, where channels start at different NICs), else ``nsteps`` hops (Simple with the tree's
  hop latency). Tree (allreduce): ``2 ((k-1) intraLat + log2(N) interLat)``. NVLS: ``intraLat`` (+
  ``interLat`` across nodes); NVLS-tree: ``intraLat + 2 log2(N) interLat``; PAT (v2.23, allgather /
  reduce-scatter, one rank per node): ``8 + log2(N) interLat / 3.5 + 2.8 P``. ``interLat`` =
  ``hwLat[NET]`` + the network plugin's latency (0 for InfiniBand / RoCE: ``net_ib.cc``; counted twice for
  Simple, the flush); in v2.23 with ``k = 1`` the tree's network latency. The ring Simple allreduce across
  nodes is x1.4 (x1.9 before Ampere) once ``nBytes / (channels * P) >= 64`` (``ncclTopoGetAlgoTime``,
  "plateau effect of ring").
* **bandwidth** (GB/s) = ``nChannels * bw`` of the algorithm's graph (the channel search's result) with
  NCCL's per-protocol refinements: ring LL ``min(llMaxBw, busBw / 4 or / 3)`` (v2.19) or ``/ 2`` (v2.23);
  ring LL128 ``min(0.92 busBw (0.7 at one rank per node, v2.19), nChannels * perChMaxRingLL128Bw)``; tree
  ``min(0.92 busBw, nChannels * perChMaxTreeBw)``, LL ``min(/ 3.8, llMaxBw)``, LL128 ``min(x 7/9 (one node)
  or x 120/128, nChannels * perChMaxTreeLL128Bw)``, x0.85 for the simple ``TREE`` pattern (one rank per
  node); PAT x0.85. Then to algorithm bandwidth: ring x ``P / nsteps`` (so ``2(P-1)/P`` is the allreduce
  busbw factor), NVLS / NVLS-tree x 5/6, tree x 1/2 (v2.23: not for allgather / reduce-scatter off the
  ring). The caps are per GPU architecture: ``llMaxBws`` (one node: by GPU, Volta / Ampere / Hopper;
  several nodes: by host CPU, Intel / AMD), ``perChMaxRingLL128Bws``, ``perChMaxTreeLL128Bws``,
  ``perChMaxTreeBws`` (columns 1 node / 2 nodes / more). Blackwell has no row in these versions: NCCL's
  ``minCompCap >= 90`` puts it on the Hopper row. The tree's bandwidth is scaled by
  ``treeCorrectionFactor[proto][log2(nBytes / 64)]`` below 512 MiB.
* **time** = ``latency + nBytes / bandwidth`` (``ncclTopoGetAlgoTime``), where ``nBytes`` is the vector for
  allreduce / broadcast / reduce and the whole gathered buffer for allgather / reduce-scatter
  (``info.h``: ``nBytes *= nRanks``), as this toolkit's ``n``.
* **estimate and wall time**: NCCL's estimate chooses the pair (``select_s``: at the channels the call runs on,
  :func:`nccl_choice`); the call is priced by its wall time ``time_s``, which differs from the estimate where the
  estimate carries a choosing adjustment rather than a cost [D]: the ring's x1.4 "plateau" latency factor is left
  out (:func:`wall_latency_factor`), and a tree / Simple call moves its bytes at its links' rate
  (:func:`tree_wall_bw`, in the place of ``0.92 x 1/2`` and ``treeCorrectionFactor``) after its chunk pipeline's
  fill (:func:`tree_fill_s`, chunks of ``NCCL_BUFFSIZE / NCCL_STEPS``: :func:`tree_chunk_bytes`).
* **channels of a small call**: NCCL estimates every pair at all the graph's channels, then gives the call
  fewer, one per ``nt x threshold`` bytes (``enqueue.cc``; :func:`channels_used`), and the call runs at
  that share of the bandwidth (``ncclTopoGetAlgoTime``'s ``bw / nChannels x nc``): ``time_s`` is that run
  time, ``model_s`` NCCL's estimate.
* **per-call cost**: nccl-tests times a loop of back-to-back calls on one stream (``all_reduce_perf``), so
  each call also pays one kernel launch, the device preset's ``launch_overhead_s`` (~3.8 us back-to-back,
  hardware.md [R32]); NCCL's own model leaves it out because it is the same for every pair.
* **queue pairs** (:func:`qp_split_s`): a run with ``NCCL_IB_QPS_PER_CONNECTION`` = q > 1 whose NCCL splits each
  message over the q queue pairs (``NCCL_IB_SPLIT_DATA_ON_QPS``, default 1 at v2.19.3-1, 0 from v2.20.5-1;
  ``src/transport/net_ib.cc``) posts q sends a message where NCCL's tables count one: each network message of the
  critical path pays q - 1 more of NCCL's network post overheads (``getNetOverhead``, 1 us Intel / 2 us AMD) in the
  run time, not in NCCL's estimate (which does not read q) [D].
* **enabled pairs**: LL128 only with NVLink inside the node and compute capability 7.0, 8.0 or 9.0 (the
  default ``protoEnable`` check); NVLS only where the node has NVLink SHARP: an NVSwitch node of compute
  capability >= 9.0 (``search.cc``: no NVLS graph without NVSwitches or below sm90); NVLS itself on one
  node only (across nodes it needs CollNet, which is left out), NVLS-tree across nodes; NVLS allgather /
  reduce-scatter on one node; PAT (v2.23) with one rank per node on a host-driven network.

The topology search is not run. Its outcome is taken from the cluster's tiers (the presets' effective
bandwidths, ``bw * efficiency``, in the place of NCCL's 20 GB/s per NVLink and NIC speeds) [D]:

* one node: ring and tree graphs of ``intra_bw`` per GPU in channels of 20 GB/s (30 GB/s from sm90):
  the NVSwitch search finds 6 x 40 (6 x 60) GB/s and ``ncclTopoDupChannels`` halves them into 12 x 20 (12 x
  30); NVLS: one channel per GPU (head), each head carrying twice its share (``ncclTopoSearchTryNvls``), so
  ``k`` channels of ``intra_bw / (k + 1)`` (the search rounds that down to its speed array: 40 GB/s on an
  H100, 320 GB/s in all, x 5/6 = 267 GB/s algbw against the ~275 measured, hardware.md 3C);
* across nodes: one channel per NIC the group reaches (``k * nic_share``, at least one; with more NICs than
  GPUs, every rank's NICs: OCI's BM.GPU4.8 has 16 ports of 100 Gb/s for 8 GPUs, and NCCL's search, a
  channel per port at the 12 GB/s step of its speed array, finds 16), together at the
  effective bandwidth of those NICs, the total at most ``intra_bw``; the tree's intra-node bandwidth may
  reach twice its network bandwidth on two nodes (``search.cc`` pass 2: "increase bwIntra for trees (2 nodes)"), which
  ``tuning.cc`` uses for ``N <= 2``; NVLS-tree: ``min(intra_bw / (k + 1), nic_bw)`` per channel (half the
  NIC beyond two nodes).

A run's environment (:func:`env_settings`; ``NCCL_BUFFSIZE`` sets the tree's chunk): ``NCCL_ALGO`` and
``NCCL_PROTO`` leave only the listed algorithms / protocols enabled (``tuning.cc``: ``parseList`` into
``algoEnable`` / ``protoEnable``; a listed LL128 skips its default hardware check), ``NCCL_NVLS_ENABLE=0`` removes
NVLS and NVLS-tree. Cloud network stacks set them: GCP's TCPXO profile for NCCL 2.21.5 is ``NCCL_ALGO=Ring,Tree``,
``NCCL_PROTO=Simple``, ``NCCL_NVLS_ENABLE=0`` (GoogleCloudPlatform/container-engine-accelerators
``gpudirect-tcpxo/README.md`` @ ``0a2b482``). GCP's profile also loads a tuner plugin whose size rules override
NCCL's choice; its configuration (``a3plus_tuner_config.textproto``) is not public at a citable commit and is not
modelled.

Host CPU (``Cluster.host_cpu``): NCCL reads it for ``llMaxBw`` across nodes and ``getNetOverhead``; unknown
hosts take NCCL's default (the Intel values).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ..checks import did_you_mean

#: NCCL versions whose tables are transcribed (module doc); the default is the newest.
VERSIONS = ("2.19", "2.21", "2.23")
#: versions before 2.23's retuning: ``nInter = 2N`` for a ring allreduce, no PAT, ring LL128 x0.7 at one rank
#: per node, tree / NVLS bandwidth halved for allgather / reduce-scatter too, no tree net latency at one rank
#: per node
_LEGACY = ("2.19", "2.21")
#: NCCL_ALGO names, lower case (``ncclAlgoStr``, ``src/init.cc`` at v2.21.5-1; PAT from v2.23), and the
#: module's name of each (CollNet is not modelled: listed, it enables nothing here)
ALGORITHM_NAMES = {"tree": "tree", "ring": "ring", "collnetdirect": "collnet_direct", "collnetchain": "collnet_chain",
                   "nvls": "nvls", "nvlstree": "nvls_tree", "pat": "pat"}
DEFAULT_VERSION = "2.23"
PROTOCOLS = ("LL", "LL128", "Simple")
#: ops NCCL's tuning model times (alltoall is grouped send/recv, outside the model)
OPS = ("allreduce", "allgather", "reduce_scatter", "broadcast", "reduce")

_LL, _LL128, _SIMPLE = 0, 1, 2
# tuning.cc baseLat [alg][proto], us
_BASE_LAT = {
    "2.19": {"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
    "2.21": {"tree": (6.8, 14.0, 0.0), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
    "2.23": {"tree": (6.8, 14.0, 8.4), "ring": (6.6, 14.0, 8.4), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
}
# tuning.cc hwLat [NVLINK / PCI / NET][alg][proto], us
_HW_LAT = {
    "2.19": {
        "nvlink": {"tree": (.6, 1.25, 28), "ring": (.6, 1.9, 3.4), "nvls": (0, 0, 23), "nvls_tree": (0, 0, 23)},
        "pci": {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
        "net": {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 14)},
    },
    "2.21": {  # v2.19's table with the NVLS NVLink latency of 25 us
        "nvlink": {"tree": (.6, 1.25, 28), "ring": (.6, 1.9, 3.4), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25)},
        "pci": {"tree": (1.0, 1.9, 28), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
        "net": {"tree": (5.0, 8.5, 28), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 14)},
    },
    "2.23": {
        "nvlink": {"tree": (.6, 1.25, 4.0), "ring": (.6, 1.9, 3.4), "nvls": (0, 0, 25), "nvls_tree": (0, 0, 25)},
        "pci": {"tree": (1.0, 1.9, 4.0), "ring": (1.0, 2.5, 5.7), "nvls": (0, 0, 0), "nvls_tree": (0, 0, 0)},
        "net": {"tree": (5.0, 8.5, 14), "ring": (2.7, 4.0, 14.0), "nvls": (0, 0, 18), "nvls_tree": (0, 0, 14)},
    },
}
# tuning.cc llMaxBws [row][N1/N2/N4], GB/s; row: one node -> GPU (Volta, Ampere, Hopper); several -> CPU (Intel,
# AMD). v2.19's Hopper row equals Ampere's; v2.21 raised it.
_LL_MAX_BW = {"2.19": ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (87.7, 22.5, 19.0)),
              "2.21": ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0)),
              "2.23": ((39.0, 39.0, 20.4), (87.7, 22.5, 19.0), (141.0, 45.0, 35.0))}
# tuning.cc per-channel caps [Volta, Ampere, Hopper][N1/N2/N4], GB/s (the same in both versions)
_PER_CH_RING_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 36.7))
_PER_CH_TREE_LL128 = ((20.0, 20.0, 20.0), (20.0, 20.0, 20.0), (36.7, 36.7, 29.0))
_PER_CH_TREE = ((26.5, 18.5, 10.0), (24.0, 23.6, 17.8), (38.7, 41.4, 36.0))
# tuning.cc treeCorrectionFactor [proto][log2(nBytes >> 6)], powers of two from 64 B to 256 MiB
_TREE_CORRECTION = (
    (1.0, 1.0, 1.0, 1.0, .9, .8, .7, .7, .7, .7, .6, .5, .4, .4, .5, .6, .7, .8, .9, 1.0, 1.0, 1.0, 1.0),
    (1.0, 1.0, 1.0, 1.0, 1.0, .9, .8, .8, .8, .7, .6, .6, .6, .6, .6, .6, .8, .9, .9, .9, .9, 1.0, 1.0),
    (.9, .9, .9, .9, .9, .9, .9, .8, .7, .6, .6, .5, .5, .5, .5, .6, .7, .8, .7, .7, .8, .9, .9),
)
#: per-channel bandwidth of a one-node ring / tree graph after ncclTopoDupChannels (search.cc speed arrays:
#: 40 GB/s halved pre-sm90, 60 GB/s halved from sm90), GB/s
_INTRA_CHANNEL_GBPS = {False: 20.0, True: 30.0}
#: threads per channel before the channel-count loop (``tuning.cc`` ``maxThreads``; ``device.h``
#: NCCL_LL_MAX_NTHREADS 512, NCCL_LL128_MAX_NTHREADS 640, NCCL_SIMPLE_MAX_NTHREADS 512, ring Simple 256 where
#: the ring graph's ``bwIntra * nChannels <= PCI_BW`` = 12 GB/s, ``topo.h``), by protocol
_MAX_THREADS = (512, 640, 512)
#: bytes per thread before NCCL adds a channel (``comm.h`` NCCL_LL/LL128/SIMPLE_THREAD_THRESHOLD 8 / 8 / 64;
#: ``tuning.cc``: ring LL x nRanks), by protocol; the same in v2.19.3, v2.21.5 and v2.23.4
_THREAD_THRESHOLD = (8, 8, 64)
#: ``topo.h`` PCI_BW (GB/s): a ring graph at most this fast runs Simple with 256 threads
_PCI_BW_GBPS = 12.0
#: FIFO slots of a connection (``src/include/device.h`` ``NCCL_STEPS``, 8 in v2.19.3-1, v2.21.5-1 and v2.23.4-1): a
#: protocol's buffer (``NCCL_BUFFSIZE`` for Simple) is cut into this many steps
NCCL_STEPS = 8
#: NCCL's Simple buffer per connection when ``NCCL_BUFFSIZE`` is not set (``src/init.cc`` ``DEFAULT_BUFFSIZE``,
#: ``1 << 22`` = 4 MiB in v2.19.3-1, v2.21.5-1 and v2.23.4-1), bytes
DEFAULT_BUFFSIZE = 1 << 22


@dataclass(frozen=True)
class Layout:
    """What NCCL's tuning model reads of a communicator: ``ranks`` on ``nodes`` nodes; ``cc`` the compute
    capability x 10 (80 = Ampere); ``nvlink`` whether GPUs of a node talk over NVLink (else PCIe);
    ``nvls`` whether the node has NVLink SHARP; ``amd_host`` the host CPU vendor; ``intra_bw`` effective
    bytes/s per GPU inside a node, ``nic_bw`` of one NIC, ``nics`` the NICs per node the group reaches;
    ``net_latency_s`` the network plugin's latency (0 for InfiniBand / RoCE); ``launch_s`` the per-call
    kernel launch; ``host_driven_net`` False for a device-offload network (no PAT); ``algorithms`` and
    ``protocols`` the pairs a run's ``NCCL_ALGO`` / ``NCCL_PROTO`` leave enabled (None: NCCL's defaults;
    ``tuning.cc`` ``parseList``: only the listed ones, LL128 then without its default hardware check);
    ``qps_per_connection`` and ``split_data_on_qps`` the run's ``NCCL_IB_QPS_PER_CONNECTION`` and
    ``NCCL_IB_SPLIT_DATA_ON_QPS`` (None: the version's default), :func:`qp_split_s`; ``buffsize`` the run's
    ``NCCL_BUFFSIZE`` in bytes (0: NCCL's default, :data:`DEFAULT_BUFFSIZE`), :func:`tree_chunk_bytes`."""

    ranks: int
    nodes: int
    cc: int
    nvlink: bool
    nvls: bool
    intra_bw: float
    nic_bw: float = 0.0
    nics: float = 0.0
    amd_host: bool = False
    net_latency_s: float = 0.0
    launch_s: float = 0.0
    host_driven_net: bool = True
    algorithms: tuple[str, ...] | None = None
    protocols: tuple[str, ...] | None = None
    qps_per_connection: int = 1
    split_data_on_qps: bool | None = None
    buffsize: int = 0

    @property
    def per_node(self) -> int:
        return self.ranks // self.nodes

    @property
    def arch(self) -> int:
        """Row of NCCL's per-architecture tables: 0 Volta (and older), 1 Ampere, 2 Hopper and later."""
        return 2 if self.cc >= 90 else 1 if self.cc >= 80 else 0


@dataclass(frozen=True)
class Choice:
    """One (algorithm, protocol) pair: seconds of latency (launch and :func:`qp_split_s` included, NCCL's ring
    "plateau" factor not: :func:`wall_latency_factor`), the bandwidth in bytes/s it runs at on the ``channels`` NCCL
    gives this call (:func:`channels_used`; tree / Simple: :func:`tree_wall_bw`), ``time_s`` the call's wall time
    (that latency, the tree's pipeline fill :func:`tree_fill_s`, the message at that bandwidth), which tier bounds
    it, ``model_s``: NCCL's own estimate, at every channel of the graph (``topoGetAlgoInfo`` times the pairs before
    it sets the channel count) and without :func:`qp_split_s`, and ``select_s``: NCCL's estimate at the channels
    the call runs on, with :func:`qp_split_s` (what :func:`nccl_choice` compares)."""

    algorithm: str
    protocol: str
    latency_s: float
    bw_Bps: float
    time_s: float
    bound: str  # "intra" or "inter"
    model_s: float = 0.0
    channels: float = 1.0
    select_s: float = 0.0

    @property
    def name(self) -> str:
        """``nccl:<algorithm>/<protocol>``, the name :func:`~.on_cluster.collective_on_cluster` returns."""
        return f"nccl:{self.algorithm}/{self.protocol}"


def split_name(name: str) -> tuple[str, str | None]:
    """``(algorithm, protocol)`` of a name :func:`~.on_cluster.collective_on_cluster` returned (protocol
    None for the alpha-beta algorithms).

    >>> split_name("nccl:tree/LL128"), split_name("ring")
    (('nccl:tree', 'LL128'), ('ring', None))
    """
    if name.startswith("nccl:") and "/" in name:
        alg, proto = name.rsplit("/", 1)
        return alg, proto
    return name, None


#: the environment variables of a run that :func:`env_settings` reads
ENV_VARS = ("NCCL_ALGO", "NCCL_PROTO", "NCCL_NVLS_ENABLE", "NCCL_IB_QPS_PER_CONNECTION", "NCCL_IB_SPLIT_DATA_ON_QPS",
            "NCCL_BUFFSIZE")


def _names(field: str, value, allowed: tuple[str, ...]) -> tuple[str, ...]:
    if not isinstance(value, str) or not value.strip():
        raise ValueError(f"{field}: expected a comma-separated list of {', '.join(allowed)}, got {value!r}")
    exclude = value.startswith("^")  # NCCL's parseList: "^a,b" enables all but a and b
    out = []
    for token in value.lstrip("^").split(","):
        name = token.strip().lower()
        if name not in allowed:
            raise ValueError(f"{field}: unknown {token.strip()!r}{did_you_mean(name, allowed)}; allowed: "
                             f"{', '.join(allowed)}")
        out.append(name)
    return tuple(a for a in allowed if (a in out) != exclude)


def env_settings(env: dict | None) -> dict:
    """The :class:`Layout` fields a run's NCCL environment sets: ``NCCL_ALGO`` -> ``algorithms``, ``NCCL_PROTO``
    -> ``protocols`` (NCCL's ``parseList``, case-insensitive, ``^`` excludes; ``tuning.cc``), ``NCCL_NVLS_ENABLE=0``
    -> ``nvls=False``, ``NCCL_IB_QPS_PER_CONNECTION`` (a whole number >= 1) -> ``qps_per_connection``,
    ``NCCL_IB_SPLIT_DATA_ON_QPS`` (0 or 1) -> ``split_data_on_qps`` (:func:`qp_split_s`), ``NCCL_BUFFSIZE`` (bytes, at
    least ``NCCL_STEPS``) -> ``buffsize`` (:func:`tree_chunk_bytes`). Unknown variables or names
    raise ``ValueError`` naming ``nccl_env.<VAR>``.

    >>> env_settings({"NCCL_ALGO": "Ring,Tree", "NCCL_PROTO": "Simple", "NCCL_NVLS_ENABLE": "0"})
    {'algorithms': ('tree', 'ring'), 'protocols': ('Simple',), 'nvls': False}
    >>> env_settings({"NCCL_IB_QPS_PER_CONNECTION": "4", "NCCL_IB_SPLIT_DATA_ON_QPS": "0"})
    {'qps_per_connection': 4, 'split_data_on_qps': False}
    >>> env_settings({"NCCL_BUFFSIZE": "8388608"})
    {'buffsize': 8388608}
    >>> env_settings({"NCCL_ALGO": "^NVLSTree"})["algorithms"]
    ('tree', 'ring', 'collnet_direct', 'collnet_chain', 'nvls', 'pat')
    >>> env_settings({"NCCL_PROTO": "simpel"})
    Traceback (most recent call last):
    ...
    ValueError: nccl_env.NCCL_PROTO: unknown 'simpel'; did you mean 'simple'?; allowed: ll, ll128, simple
    """
    out: dict = {}
    if env is not None and not isinstance(env, dict):
        raise ValueError(f"nccl_env: expected an object of NCCL variable -> value, got {type(env).__name__}")
    for var, value in (env or {}).items():
        if var not in ENV_VARS:
            raise ValueError(f"nccl_env.{var}: unknown variable{did_you_mean(var, ENV_VARS)}; allowed: "
                             f"{', '.join(ENV_VARS)}")
        if var == "NCCL_ALGO":
            out["algorithms"] = tuple(ALGORITHM_NAMES[n] for n in _names(f"nccl_env.{var}", value,
                                                                         tuple(ALGORITHM_NAMES)))
        elif var == "NCCL_PROTO":
            lower = tuple(p.lower() for p in PROTOCOLS)
            out["protocols"] = tuple(PROTOCOLS[lower.index(n)] for n in _names(f"nccl_env.{var}", value, lower))
        elif var == "NCCL_IB_QPS_PER_CONNECTION":
            if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value)) < 1:
                raise ValueError(f"nccl_env.{var}: expected a whole number >= 1, got {value!r}")
            out["qps_per_connection"] = int(str(value))
        elif var == "NCCL_BUFFSIZE":
            if isinstance(value, bool) or not str(value).strip().isdigit() or int(str(value)) < NCCL_STEPS:
                raise ValueError(f"nccl_env.{var}: expected a whole number of bytes >= {NCCL_STEPS}, got {value!r}")
            out["buffsize"] = int(str(value))
        elif str(value) not in ("0", "1"):
            raise ValueError(f"nccl_env.{var}: expected 0 or 1, got {value!r}")
        elif var == "NCCL_IB_SPLIT_DATA_ON_QPS":
            out["split_data_on_qps"] = str(value) == "1"
        elif str(value) == "0":
            out["nvls"] = False
    return out


def _log2i(x: int) -> int:
    return x.bit_length() - 1 if x > 0 else -1


def _graphs(lay: Layout) -> dict:
    """``(nChannels, bw per channel GB/s, bound tier)`` of the ring, tree, NVLS graphs (module doc [D])."""
    intra = lay.intra_bw / 1e9
    k = lay.per_node
    if lay.nodes == 1:
        nch = max(1, round(intra / _INTRA_CHANNEL_GBPS[lay.cc >= 90]))
        g = {"ring": (nch, intra / nch, "intra"), "tree": (nch, intra / nch, "intra")}
        g["nvls"] = (k, intra / (k + 1), "intra")
        return g
    nch = max(1, round(lay.nics))
    nic = lay.nics * lay.nic_bw / 1e9 / nch  # per channel: the group's share of the node's NICs
    cap = intra / nch if k > 1 else math.inf
    ring = (nch, min(nic, cap), "inter" if nic <= cap else "intra")
    tree_net = 2 * nic if lay.nodes <= 2 else nic
    tree = (nch, min(tree_net, cap), "inter" if tree_net <= cap else "intra")
    head = intra / (k + 1)
    net = nic if lay.nodes <= 2 else nic / 2
    nvls_tree = (nch, min(head, net), "inter" if net <= head else "intra")
    return {"ring": ring, "tree": tree, "nvls_tree": nvls_tree}


def _candidates(op: str, lay: Layout, version: str) -> list[tuple[str, int]]:
    out = [("ring", p) for p in range(3)]
    if op == "allreduce":
        out += [("tree", p) for p in range(3)]
        if lay.nvls:
            out.append(("nvls" if lay.nodes == 1 else "nvls_tree", _SIMPLE))
    elif op in ("allgather", "reduce_scatter"):  # broadcast and reduce: ring only
        if lay.nvls and lay.nodes == 1:
            out.append(("nvls", _SIMPLE))
        if version not in _LEGACY and lay.nodes == lay.ranks and lay.host_driven_net:
            out.append(("pat", _SIMPLE))
    ll128 = lay.nvlink and lay.cc in (70, 80, 90)
    if lay.protocols is not None:  # NCCL_PROTO: the listed protocols only (LL128 as listed)
        return [(a, p) for a, p in out if PROTOCOLS[p] in lay.protocols
                and (lay.algorithms is None or a in lay.algorithms)]
    return [(a, p) for a, p in out if (p != _LL128 or ll128) and (lay.algorithms is None or a in lay.algorithms)]


def _bandwidth(op, alg, p, lay, version, graphs) -> tuple[float, str]:
    """Algorithm bandwidth in GB/s (NCCL's ``comm->bandwidths``) and the tier bounding it."""
    P, N, a = lay.ranks, lay.nodes, lay.arch
    col = 0 if N == 1 else 1 if N == 2 else 2
    row = a if N == 1 else (1 if lay.amd_host else 0)
    ll_max = _LL_MAX_BW[version][row][col]
    nch, bw, bound = graphs["ring" if alg == "pat" else alg]
    bus = nch * bw
    ppn = P / N
    if alg == "ring" and p == _LL:
        quarter = N > 1 or op in ("allreduce", "reduce")
        bus = min(ll_max, bus * ((0.25 if quarter else 1 / 3) if version == "2.19" else 0.5))
    if alg == "ring" and p == _LL128:
        eff = 0.7 if (version in _LEGACY and ppn < 2) else 0.92
        bus = min(bus * eff, nch * _PER_CH_RING_LL128[a][col])
    if alg == "tree":
        bus = min(bus * .92, nch * _PER_CH_TREE[a][col])
        if p == _LL:
            bus = min(bus / 3.8, ll_max)
        if p == _LL128:
            bus = min(bus * (7 / 9 if N == 1 else 120 / 128), nch * _PER_CH_TREE_LL128[a][col])
        if ppn == 1:  # the simple TREE pattern of a one-GPU node (search.cc), x0.85 in tuning.cc
            bus *= .85
    if alg == "pat":
        bus *= .85
    nsteps = 2 * (P - 1) if op == "allreduce" else P - 1 if op in ("allgather", "reduce_scatter") else P
    gather = op in ("allgather", "reduce_scatter")
    if not (version not in _LEGACY and alg != "ring" and gather):
        bus *= P / nsteps if alg == "ring" else 5 / 6 if alg in ("nvls", "nvls_tree") else .5
    return bus, bound


def _latency(op, alg, p, lay, version) -> float:
    """NCCL's ``comm->latencies`` in us (module doc)."""
    P, N = lay.ranks, lay.nodes
    ppn = P // N
    hw = _HW_LAT[version]
    intra_hw = "nvlink" if lay.nvlink else "pci"
    if alg == "pat":
        inter = hw["net"]["tree"][p] + lay.net_latency_s * 1e6 * (2 if p == _SIMPLE else 1)
        return 8 + _log2i(N) * inter / 3.5 + P * 2.8
    base = _BASE_LAT[version][alg][p]
    intra = hw[intra_hw][alg][p]
    net_alg = "tree" if (version not in _LEGACY and ppn == 1) else alg
    inter = hw["net"][net_alg][p] + lay.net_latency_s * 1e6 * (2 if p == _SIMPLE else 1)
    if alg == "ring":
        nsteps = 2 * (P - 1) if op == "allreduce" else P - 1 if op in ("allgather", "reduce_scatter") else P
        if op in ("broadcast", "reduce"):
            where = "net" if N > 1 else intra_hw
            if N == 1:  # sameChannels [D]
                return base + hw[where]["ring"][p]
            lat = hw[where]["tree" if p == _SIMPLE else "ring"][p]
            return base + nsteps * lat
        overhead = 0.0
        if N > 1:
            overhead = (2.0 if lay.amd_host else 1.0) * (3 if p == _SIMPLE else 1)
        intra = max(intra, overhead)
        if version in _LEGACY:
            n_inter = (2 * N if N > 1 else 0) if op == "allreduce" else N - 1
        else:
            n_inter = 0 if N == 1 else 2 * (N - 1) if op == "allreduce" else N - 1
        return base + (nsteps - n_inter) * intra + n_inter * inter
    if alg == "tree":
        return base + 2 * ((ppn - 1) * intra + _log2i(N) * inter)
    if alg == "nvls":
        return intra + (inter if N > 1 else 0)
    return base + intra + 2 * _log2i(N) * inter  # nvls_tree


def channels_used(alg: str, proto: str, n: float, lay: Layout, graph_channels: int, ring_bus_gbps: float = math.inf
                  ) -> float:
    """Channels NCCL gives one ``n``-byte call of ``alg`` / ``proto`` (ring and tree; NVLS and PAT keep every
    channel). NCCL's loop (``src/enqueue.cc``: ``topoGetAlgoInfo`` at v2.19.3-1, ``getChannnelThreadInfo`` at
    v2.21.5-1, ``topoGetAlgoInfo`` at v2.23.4-1) drops a channel while ``n < nc * nt * threshold``, down to one:
    each channel carries at least ``nt x threshold`` bytes (512 x 8 = 4 KiB for tree LL, 640 x 8 = 5 KiB for
    LL128, 512 x 64 = 32 KiB for Simple, ring LL x ``P``). Taken continuous, ``n / (nt x threshold)`` between
    1 and the graph's channels, so that a call's time never falls as it grows; NCCL's whole channels (the
    floor) give at most one channel's share more. ``ring_bus_gbps``: the ring graph's ``bwIntra x
    nChannels`` (256 threads for ring Simple at most ``PCI_BW``). The call's bandwidth is then the pair's x
    ``nc / nChannels``, as ``ncclTopoGetAlgoTime`` (``src/graph/tuning.cc``, v2.19.3-1 - v2.21.5-1) scales it
    for a channel count set in advance (``bw / comm->nChannels * info->nChannels``).

    >>> lay = Layout(16, 2, 80, True, False, 230e9, 11.25e9, 16)
    >>> channels_used("tree", "LL", 8192, lay, 16), channels_used("tree", "Simple", 2**20, lay, 16)
    (2.0, 16.0)
    """
    if alg not in ("ring", "tree"):
        return float(graph_channels)
    p = PROTOCOLS.index(proto)
    nt = 256 if (alg == "ring" and p == _SIMPLE and ring_bus_gbps <= _PCI_BW_GBPS) else _MAX_THREADS[p]
    per_channel = nt * _THREAD_THRESHOLD[p] * (lay.ranks if (alg == "ring" and p == _LL) else 1)
    return float(graph_channels) if n >= graph_channels * per_channel else max(1.0, n / per_channel)


#: ``NCCL_IB_SPLIT_DATA_ON_QPS`` by version (``src/transport/net_ib.cc``: 1 at v2.19.3-1, 0 from v2.20.5-1, so at
#: v2.21.5-1 and v2.23.4-1; NVIDIA/nccl issue #1401, 2024-08: a maintainer confirms 0 is the implementation's default
#: and the documentation's split mode a mistake)
SPLIT_DATA_ON_QPS_DEFAULT = {"2.19": True, "2.21": False, "2.23": False}


def net_post_overhead_s(lay: Layout) -> float:
    """NCCL's network post overhead (``getNetOverhead``, ``src/graph/tuning.cc`` v2.19.3-1 - v2.23.4-1: "Network
    post overhead", 1 us on Intel hosts, 2 us on AMD; the tables read it only as the floor of a multi-node ring's
    step, x3 for Simple), in seconds.

    >>> net_post_overhead_s(Layout(16, 2, 80, True, False, 230e9, amd_host=True))
    2e-06
    """
    return (2.0 if lay.amd_host else 1.0) * 1e-6


def network_messages(op: str, alg: str, lay: Layout, version: str = DEFAULT_VERSION) -> int:
    """Network messages one after another on a call's critical path: the ``interLat`` terms of ``tuning.cc``'s
    latency (module doc): a ring allreduce's ``nInter`` (``2N`` in v2.19 / v2.21, ``2(N - 1)`` from v2.23), ``N -
    1`` for ring allgather / reduce-scatter, and for broadcast / reduce (the ring crosses each node boundary once)
    [D]; ``2 log2 N`` for the tree and NVLS-tree (up and down), ``log2 N`` for PAT, one for NVLS across nodes; 0 on
    one node.

    >>> lay = Layout(16, 2, 80, True, False, 230e9)
    >>> [network_messages("allreduce", a, lay, "2.19") for a in ("ring", "tree")]
    [4, 2]
    """
    N = lay.nodes
    if N <= 1:
        return 0
    if alg == "ring":
        if op == "allreduce":
            return 2 * N if version in _LEGACY else 2 * (N - 1)
        return N - 1
    if alg in ("tree", "nvls_tree"):
        return 2 * _log2i(N)
    if alg == "pat":
        return _log2i(N)
    return 1  # nvls across nodes


def qp_split_s(op: str, alg: str, lay: Layout, version: str = DEFAULT_VERSION) -> float:
    """Seconds a call pays for a network message split over several queue pairs, which NCCL's tables leave out.

    With ``NCCL_IB_QPS_PER_CONNECTION`` = q > 1 and ``NCCL_IB_SPLIT_DATA_ON_QPS`` = 1 (NCCL's default at v2.19.3-1,
    0 from v2.20.5-1: :data:`SPLIT_DATA_ON_QPS_DEFAULT`), NCCL's IB transport cuts every message into q pieces and
    posts each on its own queue pair, one ``ibv_post_send`` after another (``src/transport/net_ib.cc`` v2.19.3-1,
    ``ncclIbMultiSend``); the receiver posts q receives and the request completes on q events (``ncclIbIrecv``:
    ``req->events = nqps``), and the data's last piece leaves after the q-th post. NCCL's latency tables were set
    with one queue pair (the default, ``NCCL_PARAM(IbQpsPerConn, ..., 1)``) and do not read q. Each of the q - 1
    further posts is priced at NCCL's own network post overhead (:func:`net_post_overhead_s`, taken per post [D]:
    tuning.cc has no per-queue-pair figure), on every network message of the critical path
    (:func:`network_messages`). The GDR flush after a Simple receive is one per message whatever q, so the x3 of
    Simple's overhead is not taken. 0 on one node, with one queue pair, or without the split.

    The 2 x 8 A100 RoCE run (AMD host, ``NCCL_IB_QPS_PER_CONNECTION=4``, NCCL 2.19.3): a tree allreduce crosses
    the network twice, 2 x 3 x 2 us = 12 us:

    >>> lay = Layout(16, 2, 80, True, False, 230e9, amd_host=True, qps_per_connection=4)
    >>> round(qp_split_s("allreduce", "tree", lay, "2.19") * 1e6, 6), qp_split_s("allreduce", "tree", lay, "2.21")
    (12.0, 0.0)
    """
    if version not in SPLIT_DATA_ON_QPS_DEFAULT:
        raise ValueError(f"nccl_version: unknown {version!r}; allowed: {', '.join(VERSIONS)}")
    split = lay.split_data_on_qps if lay.split_data_on_qps is not None else SPLIT_DATA_ON_QPS_DEFAULT[version]
    if lay.nodes <= 1 or lay.qps_per_connection <= 1 or not split:
        return 0.0
    return network_messages(op, alg, lay, version) * (lay.qps_per_connection - 1) * net_post_overhead_s(lay)


def choices(op: str, n: float, lay: Layout, version: str = DEFAULT_VERSION) -> list[Choice]:
    """Every enabled (algorithm, protocol) pair of ``op`` on ``n`` bytes, priced as NCCL prices it.

    >>> lay = Layout(ranks=8, nodes=1, cc=80, nvlink=True, nvls=False, intra_bw=230e9)
    >>> [c.name for c in choices("allreduce", 8192, lay)][:3]
    ['nccl:ring/LL', 'nccl:ring/LL128', 'nccl:ring/Simple']
    """
    if op not in OPS:
        raise ValueError(f"op: NCCL's tuning model covers {', '.join(OPS)}, not {op!r}")
    if version not in VERSIONS:
        raise ValueError(f"nccl_version: unknown {version!r}; allowed: {', '.join(VERSIONS)}")
    if lay.ranks < 2:
        return [Choice("none", "none", 0.0, math.inf, 0.0, "intra", 0.0, 0.0)]
    graphs = _graphs(lay)
    out = []
    nbytes = int(n)
    enabled = _candidates(op, lay, version)
    if not enabled:
        raise ValueError(f"nccl_env: no algorithm / protocol left enabled for {op} (algorithms {lay.algorithms}, "
                         f"protocols {lay.protocols})")
    ring_bus = graphs["ring"][0] * graphs["ring"][1]
    for alg, p in enabled:
        bw, bound = _bandwidth(op, alg, p, lay, version, graphs)
        if bw <= 0:
            continue
        g = graphs["ring" if alg == "pat" else alg]
        nc = channels_used(alg, PROTOCOLS[p], n, lay, g[0], ring_bus)
        run_bw = bw * nc / g[0]  # ncclTopoGetAlgoTime's own scaling for a preset nChannels: bw / nChannels * nc
        lat = _latency(op, alg, p, lay, version)
        if alg == "tree":
            ls = _log2i(nbytes >> 6) if version not in _LEGACY else max(0, _log2i(nbytes >> 6))
            if 0 <= ls < 23:
                bw *= _TREE_CORRECTION[p][ls]
                run_bw *= _TREE_CORRECTION[p][ls]
        factor = wall_latency_factor(op, alg, PROTOCOLS[p], n, lay, graphs["ring"][0])
        lat_s = lat * factor * 1e-6 + lay.launch_s  # NCCL's estimate's latency
        qp = qp_split_s(op, alg, lay, version)  # posts NCCL's tables do not count (qp_split_s)
        select_s = lat_s + qp + n / (run_bw * 1e9)
        wall_lat_s = lat * 1e-6 + lay.launch_s + qp
        bw_Bps, fill = run_bw * 1e9, 0.0
        if alg == "tree" and p == _SIMPLE:  # the call's wall time: the tree's links and its chunk pipeline
            intra, net = tree_wall_bw(lay)
            bw_Bps = min(intra, net) * nc / g[0]
            fill = tree_fill_s(n, nc, g[0], lay, version)
        out.append(Choice(alg, PROTOCOLS[p], wall_lat_s, bw_Bps, wall_lat_s + fill + n / bw_Bps, bound,
                          model_s=lat_s + n / (bw * 1e9), channels=nc, select_s=select_s))
    return out


def wall_latency_factor(op: str, alg: str, proto: str, n: float, lay: Layout, ring_channels: int) -> float:
    """NCCL's multiplier on a multi-node ring / Simple allreduce's latency once ``n / (channels x ranks) >= 64``
    bytes: 1.4 from compute capability 8.0, 1.9 below (``ncclTopoGetAlgoTime``, ``src/graph/tuning.cc`` v2.19.3-1 -
    v2.23.4-1, commented "Plateau effect of ring"); 1 otherwise. It is an adjustment of the estimate NCCL chooses by,
    made after the latency tables, not a latency of the call: it sits in ``model_s`` and ``select_s``
    (:class:`Choice`), and the call's wall time ``time_s`` takes the tables' latency alone [D]. The 2 x 8 H100
    sweep (data/nccltests_allreduce_sweeps.csv, ring / Simple in NCCL's model) shows no step where NCCL applies
    it (4 KiB: 126.9 us, 8 KiB: 131.6 us; x1.4 would be +61 us).

    >>> lay = Layout(16, 2, 90, True, False, 370e9, 22.5e9, 8)
    >>> wall_latency_factor("allreduce", "ring", "Simple", 8192, lay, 8), wall_latency_factor(
    ...     "allreduce", "ring", "Simple", 4096, lay, 8)
    (1.4, 1.0)
    """
    if alg == "ring" and proto == "Simple" and lay.nodes > 1 and op == "allreduce" and \
            int(n) / (ring_channels * lay.ranks) >= 64:
        return 1.4 if lay.cc >= 80 else 1.9
    return 1.0


def tree_chunk_bytes(n: float, channels: float, lay: Layout, version: str = DEFAULT_VERSION) -> int:
    """The chunk a tree / Simple allreduce moves per pipeline step: one FIFO step of the Simple buffer,
    ``NCCL_BUFFSIZE / NCCL_STEPS`` (tree ``chunkSteps`` = 1; ``src/enqueue.cc``, ``computeColl`` at v2.19.3-1,
    ``computeCollChunkInfo`` at v2.21.5-1, v2.23.4-1), 512 KiB at the default 4 MiB buffer. v2.19.3-1 halves it for
    a small call while ``n / (channels x chunk)`` is under ``depth x 8`` (down to 128 KiB), ``depth x 4`` (64 KiB)
    and ``depth`` (32 KiB), with the tree's depth ``ranks/nodes - 1 + log2(nodes)`` (``src/graph/connect.cc``);
    v2.21.5-1 and v2.23.4-1 do not.

    >>> lay = Layout(16, 2, 80, True, False, 230e9, 11.25e9, 16)
    >>> tree_chunk_bytes(2**30, 16, lay, "2.19"), tree_chunk_bytes(2**20, 16, lay, "2.19")
    (524288, 32768)
    >>> tree_chunk_bytes(2**20, 8, Layout(16, 2, 90, True, False, 370e9, 22.5e9, 8, buffsize=8 << 20), "2.21")
    1048576
    """
    chunk = (lay.buffsize or DEFAULT_BUFFSIZE) // NCCL_STEPS
    if version == "2.19":
        depth = lay.per_node - 1 + max(0, _log2i(lay.nodes))
        for times, floor in ((8, 131072), (4, 65536), (1, 32768)):
            while math.floor(n / (channels * chunk)) < depth * times and chunk > floor:
                chunk //= 2
    return chunk


def tree_wall_bw(lay: Layout) -> tuple[float, float]:
    """Algorithm bandwidth (bytes/s) a tree / Simple allreduce's links allow, ``(intra, network)``: inside a node
    every channel's tree is a chain of the node's ``k`` GPUs (``src/graph/connect.cc``), the reduction goes up it
    and the broadcast down it at once, so ``2(k - 1)`` of the node's ``k`` GPUs' sends carry each byte: ``intra_bw
    x k / (2(k - 1))`` (a GPU's NVLink / NVSwitch bandwidth is per direction and shared by its sends); across nodes,
    on two nodes each direction of the node's NICs carries every byte once (the two trees of a channel pair have
    their roots on opposite nodes), ``nics x nic_bw``; on more, the double binary tree's inner node of one tree
    sends to two children and its parent, twice that: ``nics x nic_bw / 2`` [D]. This replaces, for the call's
    wall time, NCCL's estimate of ``0.92 x nChannels x bw x 1/2`` and its ``treeCorrectionFactor``, which choose
    the pair (``tuning.cc``). The 2 x 8 A100 sweep's tree / Simple rows (1 - 8 GiB) run at 118-135 GB/s
    measured step bandwidth against 230.1 x 8/14 = 131.5 here and 105.8 in NCCL's estimate.

    >>> [round(x / 1e9, 1) for x in tree_wall_bw(Layout(16, 2, 80, True, False, 230.1e9, 11.25e9, 16))]
    [131.5, 180.0]
    """
    k, N = lay.per_node, lay.nodes
    intra = lay.intra_bw * k / (2 * (k - 1)) if k > 1 else math.inf
    net = (lay.nics * lay.nic_bw / (1 if N == 2 else 2)) if N > 1 else math.inf
    return intra, net


def tree_fill_s(n: float, channels: float, graph_channels: int, lay: Layout, version: str = DEFAULT_VERSION
                ) -> float:
    """Seconds a tree / Simple allreduce's chunk pipeline adds to ``n / bandwidth``: each channel's data moves in
    chunks (:func:`tree_chunk_bytes`; a channel with less data than one chunk moves it as one), each hop forwarding
    a chunk once it has received it, so the first chunk crosses the ``2(k - 1)`` NVLink and ``2 log2(N)`` network
    hops of the tree's way up and down one after another before the pipeline runs at its slowest hop
    (Hockney-style store-and-forward pipeline over the chain of ``connect.cc``'s trees): ``sum over hops of c / r -
    max c / r``, with each hop's per-channel rate ``r`` the tier's :func:`tree_wall_bw` over the graph's channels.

    2 x 8 A100 (16 channels, 512 KiB chunks): 14 NVLink hops of 524288 B at 131.5 / 16 GB/s and 2 network hops at
    180 / 16 GB/s, less the slowest hop:

    >>> lay = Layout(16, 2, 80, True, False, 230.1e9, 11.25e9, 16)
    >>> round(tree_fill_s(2**30, 16, 16, lay, "2.19") * 1e6, 1)
    922.6
    """
    c = min(float(tree_chunk_bytes(n, channels, lay, version)), n / channels)
    intra, net = tree_wall_bw(lay)
    hops = [(2 * (lay.per_node - 1), intra), (2 * max(0, _log2i(lay.nodes)), net)]
    rates = [bw / graph_channels for h, bw in hops if h > 0]
    if not rates:
        return 0.0
    return sum(h * c * graph_channels / bw for h, bw in hops if h > 0) - c / min(rates)


def nccl_choice(op: str, n: float, lay: Layout, version: str = DEFAULT_VERSION) -> Choice:
    """The pair NCCL runs and its cost: the least ``select_s`` of :func:`choices` (ties to the first listed, as
    NCCL's strict ``<``). NCCL itself takes the least of its estimates at every channel (``model_s``), then
    gives a small call fewer channels; the two picks differ only where NCCL's pick runs on fewer channels
    than its graph has (below ``nChannels x nt x threshold``: 384 KiB for ring LL on 8 A100s) and another
    pair then runs faster. Taking the least estimate at the channels each pair runs on (``select_s``) keeps a
    call's time from falling as it grows, which
    NCCL's own pick does not (a 413 KB allgather on 4 x 8 H100, v2.19: NCCL's pick, ring LL, runs on 3 of 8
    channels in 96 us, where LL128 takes 84; at twice the size NCCL picks LL128, 86 us) [D]. The nccl-tests
    sweeps in ``data/`` get the same pair either way. The time returned is the call's wall time ``time_s``
    (:class:`Choice`: NCCL's estimate chooses, the wall time prices).

    8 KiB all-reduce on 8 A100s of one node (230 GB/s per GPU, 12 channels): ring LL, ``6.6 + 14 x 0.6 = 15`` us
    plus 8192 B at ``min(87.7, 230 / 2) x 8 / 14`` GB/s in NCCL's estimate; it runs on one channel of the 12
    (8 KiB is below 512 threads x 8 B x 8 ranks), at 1/12 of that bandwidth:

    >>> c = nccl_choice("allreduce", 8192, Layout(8, 1, 80, True, False, 230e9))
    >>> c.name, round(c.model_s * 1e6, 2), c.channels, round(c.time_s * 1e6, 2)
    ('nccl:ring/LL', 15.16, 1.0, 16.96)
    """
    return min(choices(op, n, lay, version), key=lambda c: c.select_s)
