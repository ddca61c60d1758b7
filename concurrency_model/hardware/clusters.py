"""Clusters as frozen dataclasses: nodes of identical devices, an intra-node and an inter-node tier.

A preset file (``presets/clusters/*.json``; a scenario may embed the same object under ``cluster``,
and ``calibrate network`` writes the same shape) holds:

* ``name``; ``device``: a device preset name (or device file path, or device object);
* ``gpus_per_node``, ``nodes`` (default 1), ``nics_per_node`` (compute NICs used by collectives);
* ``intra`` and ``inter``: tiers, each ``{name, kind, bw_Bps, latency_s, efficiency, sources, notes}`` and
  optionally ``overlap_slowdown`` and (inter) ``oversubscription`` (:class:`Tier`);
  ``bw_Bps`` is bytes/s **per direction per endpoint**: per GPU for an intra-node tier (all of its
  NVLinks together), per NIC for a network tier; ``efficiency`` is the achievable fraction of it;
* ``host_cpu`` (optional): the host CPU vendor, ``intel``, ``amd`` or ``""`` (unknown); NCCL's tuning
  model reads it across nodes (:mod:`concurrency_model.comm.nccl`);
* ``nvlink_domain`` (optional; default, or 0: ``gpus_per_node``): the GPUs one NVLink switch fabric joins, a whole
  number of nodes (trays). A GB200 / GB300 NVL72 rack is 18 trays of 4 GPUs in one 72-GPU domain (NVIDIA
  GB200 NVL72 page, https://www.nvidia.com/en-us/data-center/gb200-nvl72/: 72 GPUs, 130 TB/s NVLink Switch
  System); every DGX / HGX board is its own domain;
* ``sources`` (one entry per field; ``shared/reference/hardware.md`` keys), ``notes``.

Alpha-beta per tier: ``alpha = latency``, ``beta = 1 / (bw * efficiency)`` (``T = alpha + n * beta``).

Node count. DESIGN: "a cluster of N nodes is the preset with ``nodes`` set; scenarios take the node
count from the GPU count". Hence ``nodes == 1`` (the presets' default) means *as many nodes as the
ranks need*; a cluster with ``nodes > 1`` is a hard limit that :func:`place` enforces.

NVLink domain. Communication sees the NVLink domain as its node: a group inside one domain runs on the
``intra`` tier even across trays, groups spanning domains use the network between them, and a domain's NICs
are its trays' together (``nics_per_node * nvlink_domain / gpus_per_node``, :attr:`Cluster.domain_nics`).
NCCL does the same on multi-node NVLink (MNNVL): its topology fuses the ranks of one NVLink clique into one node, and its tuning
model counts a clique as one node (NVIDIA/nccl ``src/graph/tuning.cc`` ``ncclTopoTuneModel``: "MNNVL support
- treat as a single NVLink connected node"). So :func:`place` counts ``ranks_per_node`` and ``nodes`` per
domain; where the domain is the node (every preset but the NVL72 racks) nothing changes.

Inter-node bandwidth per rank (:func:`place`)::

    nic_share = min(1, nics_per_node / (ranks_per_node * groups_sharing))      NICs per rank
    inter_bw  = nic_bw * efficiency * nic_share                               bytes/s per rank

NCCL spreads its channels (rings) over the node's NICs, each channel using a NIC near its GPU, so the
node's NICs run in parallel: hardware.md 3C / pitfall 12 [R28] shows 2-node all-reduce plateaus (238
GB/s A100, 339 GB/s H100) far above one NIC (25 / 50 GB/s). A node with ``ranks_per_node`` ranks of one
group that all talk across nodes at once shares ``nics_per_node`` NICs among them; ``groups_sharing``
concurrent groups on disjoint GPUs of the node (e.g. the 8 data-parallel groups of tensor-parallel 8)
divide them further. The cap of one NIC per rank: a GPU reaches the network through its own PCIe x16
link, only ~1.26 NICs' worth on all three DGX (15.75 vs 12.5, 31.5 vs 25, 64 vs 50 GB/s, hardware.md 3B),
and each GPU is paired with its nearest NIC (3A [R22][R23]). The intra-node tier is per GPU (switch
ports or the GPU's own links), so ``groups_sharing`` does not divide it.

>>> c = load_cluster("dgx-a100")
>>> c.total_gpus, c.with_nodes(4).total_gpus
(8, 32)
>>> p = place(c, 16)
>>> p.kind, p.nodes, p.ranks_per_node, p.nic_share
('mixed', 2, 8, 1.0)
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..checks import count, number
from .devices import Device, device_from_dict, is_preset_name, load_device, read_spec

TIER_KINDS = ("nvlink", "nvswitch", "pcie", "infiniband", "roce", "ethernet", "omnipath", "loopback")
PLACEMENT_KINDS = ("intra", "inter", "mixed")
HOST_CPUS = ("", "intel", "amd", "arm", "power")


@dataclass(frozen=True)
class Tier:
    """One level of the interconnect. SI units: ``bw`` bytes/s per direction per endpoint (per GPU
    intra-node, per NIC inter-node), ``latency`` seconds, ``efficiency`` achievable fraction of ``bw``."""

    name: str
    kind: str
    bw: float
    latency: float
    efficiency: float = 1.0
    sources: dict = field(default_factory=dict, compare=False)
    notes: str = field(default="", compare=False)
    # seconds of compute lost per second of this tier's communication that overlaps compute (NCCL kernels
    # take SMs and memory bandwidth from the kernels they run beside; Rashidi et al., ISCA 2021): 0 = free
    # overlap, 1 = none at all; fitted where the data overlap (benchmarks/overlap_interference.py)
    overlap_slowdown: float = 0.0
    # injection bandwidth of the nodes over the bisection bandwidth of the fabric (a 2:1 oversubscribed fat
    # tree: 2.0); 1 = full bisection, as the presets' rail-optimised InfiniBand fabrics are
    # (:mod:`concurrency_model.comm.on_cluster` applies it to the algorithms that load the bisection)
    oversubscription: float = 1.0
    # nodes under one pod (leaf switches at full bisection among them), the oversubscription applying only
    # between pods; 0: one flat oversubscribed core (:func:`core_factor`)
    pod_nodes: int = 0

    def __post_init__(self):
        where = f"tier {self.name!r}"
        if self.kind not in TIER_KINDS:
            raise ValueError(f"{where}.kind: unknown {self.kind!r}; allowed: {', '.join(TIER_KINDS)}")
        number(f"{where}.bw_Bps", self.bw, symbols_ok=True)
        number(f"{where}.latency_s", self.latency, low_ok=True, symbols_ok=True)
        number(f"{where}.efficiency", self.efficiency, high=1, high_ok=True, symbols_ok=True)
        number(f"{where}.overlap_slowdown", self.overlap_slowdown, low_ok=True, high=1, high_ok=True,
               symbols_ok=True)
        number(f"{where}.oversubscription", self.oversubscription, low=1, low_ok=True, symbols_ok=True)
        count(f"{where}.pod_nodes", self.pod_nodes, low=0)  # 0: no pods

    def core_factor(self, nodes: int) -> float:
        """How much slower uniform traffic among ``nodes`` nodes runs through the core than at the NICs [D]:
        the ``oversubscription`` r across one flat core; with pods of ``pod_nodes`` nodes at full bisection,
        1 inside a pod and ``r (nodes - pod_nodes) / (nodes - 1)`` (at least 1) across pods, the share of a
        node's peers outside its pod times r (each pod's uplinks carry 1 / r of what its nodes inject).

        >>> t = Tier("ib", "infiniband", 25e9, 5e-6, oversubscription=2.0, pod_nodes=32)
        >>> t.core_factor(16), t.core_factor(64), t.core_factor(128), replace(t, pod_nodes=0).core_factor(64)
        (1.0, 1.0158730158730158, 1.5118110236220472, 2.0)
        """
        r = self.oversubscription
        if r <= 1 or nodes <= 1:
            return 1.0
        if not self.pod_nodes:
            return r
        return max(1.0, r * (nodes - min(self.pod_nodes, nodes)) / (nodes - 1))

    @property
    def effective_bw(self):
        """Achievable bytes/s per direction per endpoint: ``bw * efficiency``."""
        return self.bw * self.efficiency

    def alpha_beta(self) -> tuple:
        """``(alpha, beta) = (latency, 1 / (bw * efficiency))`` in seconds and seconds per byte."""
        return self.latency, 1 / self.effective_bw

    def to_dict(self) -> dict:
        return {"name": self.name, "kind": self.kind, "bw_Bps": self.bw, "latency_s": self.latency,
                "efficiency": self.efficiency, "overlap_slowdown": self.overlap_slowdown,
                "oversubscription": self.oversubscription, "pod_nodes": self.pod_nodes, "sources": dict(self.sources),
                "notes": self.notes}


@dataclass(frozen=True)
class Cluster:
    """``nodes`` nodes of ``gpus_per_node`` devices; ``intra`` links GPUs of a node, ``inter`` the nodes
    through ``nics_per_node`` NICs each. ``nodes == 1`` means "as many nodes as needed" (module doc)."""

    name: str
    device: Device
    gpus_per_node: int
    intra: Tier
    inter: Tier
    nics_per_node: int
    nodes: int = 1
    host_cpu: str = ""  # host CPU vendor (HOST_CPUS); "" = unknown
    sources: dict = field(default_factory=dict, compare=False)
    notes: str = field(default="", compare=False)
    nvlink_domain: int = 0  # GPUs sharing one NVLink switch fabric, whole nodes; 0 = the node (module doc)

    def __post_init__(self):
        if self.host_cpu not in HOST_CPUS:
            raise ValueError(f"host_cpu: unknown {self.host_cpu!r}; allowed: {', '.join(repr(h) for h in HOST_CPUS)}")
        count("gpus_per_node", self.gpus_per_node)
        count("nics_per_node", self.nics_per_node)
        count("nodes", self.nodes)
        if self.nvlink_domain:
            check_domain("nvlink_domain", self.nvlink_domain, self.gpus_per_node)

    @property
    def domain_gpus(self) -> int:
        """GPUs of one NVLink domain: ``nvlink_domain``, or the node where that is 0 (the default).

        >>> load_cluster("gb200-nvl72").domain_gpus, load_cluster("dgx-h100").domain_gpus
        (72, 8)
        """
        return self.nvlink_domain or self.gpus_per_node

    @property
    def domain_nics(self) -> float:
        """NICs of one NVLink domain: its nodes' NICs together."""
        return self.nics_per_node * (self.domain_gpus // self.gpus_per_node)

    @property
    def total_gpus(self) -> int:
        return self.gpus_per_node * self.nodes

    def with_nodes(self, n: int) -> Cluster:
        """The same cluster with ``n`` nodes (``ValueError`` naming ``nodes`` unless a positive integer)."""
        return replace(self, nodes=count("nodes", n))

    def tier(self, tier) -> Tier:
        """``"intra"`` / ``"inter"`` (or a :class:`Tier`, returned as is)."""
        if isinstance(tier, Tier):
            return tier
        if tier not in ("intra", "inter"):
            raise ValueError(f"tier: unknown {tier!r}; allowed: intra, inter")
        return self.intra if tier == "intra" else self.inter

    def alpha_beta(self, tier="intra") -> tuple:
        """``(alpha, beta) = (latency, 1 / (bw * efficiency))`` of a tier, per endpoint (per GPU or NIC).

        >>> load_cluster("dgx-h100").alpha_beta("intra")[1] == 1 / (450e9 * 0.822)
        True
        """
        return self.tier(tier).alpha_beta()

    def to_dict(self) -> dict:
        """The preset-file form (the device as its name; :func:`load_cluster` reads it back)."""
        return {"name": self.name, "device": self.device.name, "gpus_per_node": self.gpus_per_node,
                "nodes": self.nodes, "nics_per_node": self.nics_per_node, "host_cpu": self.host_cpu,
                **({"nvlink_domain": self.nvlink_domain} if self.nvlink_domain else {}),
                "intra": self.intra.to_dict(),
                "inter": self.inter.to_dict(), "sources": dict(self.sources), "notes": self.notes}


def check_domain(where: str, domain, gpus_per_node: int) -> int:
    """``domain`` (GPUs of one NVLink domain) if a positive whole number of nodes of ``gpus_per_node``, else
    ``ValueError`` naming ``where``.

    >>> check_domain("nvlink_domain", 72, 4)
    72
    >>> check_domain("nvlink_domain", 70, 4)
    Traceback (most recent call last):
    ...
    ValueError: nvlink_domain: 70 is not a multiple of gpus_per_node = 4 (an NVLink domain is whole nodes)
    """
    count(where, domain)
    if domain % gpus_per_node:
        raise ValueError(f"{where}: {domain} is not a multiple of gpus_per_node = {gpus_per_node} (an NVLink domain "
                         "is whole nodes)")
    return domain


# -- loading ------------------------------------------------------------------------------------------

_REQUIRED = ("name", "device", "gpus_per_node", "nics_per_node", "intra", "inter")
_OPTIONAL = ("nodes", "host_cpu", "nvlink_domain", "sources", "notes")
_TIER_REQUIRED = ("name", "kind", "bw_Bps", "latency_s")
_TIER_OPTIONAL = ("efficiency", "overlap_slowdown", "oversubscription", "pod_nodes", "sources", "notes")


def _fields(where: str, d, required, optional):
    if not isinstance(d, dict):
        raise ValueError(f"{where}: expected a JSON object, got {type(d).__name__}")
    # an unknown field first: a misspelt one is also the required one found missing
    unknown = sorted(set(d) - set(required) - set(optional))
    if unknown:
        raise ValueError(f"{where}.{unknown[0]}: unknown field; allowed: {', '.join(required + optional)}")
    missing = [k for k in required if k not in d]
    if missing:
        raise ValueError(f"{where}.{missing[0]}: missing field (required: {', '.join(required)})")
    for k in ("sources",):
        if k in d and not isinstance(d[k], dict):
            raise ValueError(f"{where}.{k}: expected an object of field -> source")
    if "notes" in d and not isinstance(d["notes"], str):
        raise ValueError(f"{where}.notes: expected a string")


def tier_from_dict(d: dict, where: str = "tier") -> Tier:
    """Build a :class:`Tier` from its file form, checking every field (errors name ``where.field``)."""
    _fields(where, d, _TIER_REQUIRED, _TIER_OPTIONAL)
    if not isinstance(d["name"], str) or not d["name"]:
        raise ValueError(f"{where}.name: must be a non-empty string")
    if d["kind"] not in TIER_KINDS:
        raise ValueError(f"{where}.kind: unknown {d['kind']!r}; allowed: {', '.join(TIER_KINDS)}")
    bw = number(f"{where}.bw_Bps", d["bw_Bps"])
    latency = number(f"{where}.latency_s", d["latency_s"], low_ok=True)
    eff = number(f"{where}.efficiency", d.get("efficiency", 1.0), high=1, high_ok=True)
    kappa = number(f"{where}.overlap_slowdown", d.get("overlap_slowdown", 0.0), low_ok=True, high=1, high_ok=True)
    over = number(f"{where}.oversubscription", d.get("oversubscription", 1.0), low=1, low_ok=True)
    return Tier(name=d["name"], kind=d["kind"], bw=bw, latency=latency, efficiency=eff, sources=dict(d.get("sources", {})), notes=d.get("notes", ""),
                overlap_slowdown=kappa, oversubscription=over, pod_nodes=d.get("pod_nodes", 0))


def cluster_from_dict(d: dict, origin: str = "cluster") -> Cluster:
    """Build a :class:`Cluster` from a preset / scenario object, checking every field.

    >>> cluster_from_dict({"preset": "dgx-h100", "nodes": 8})
    Traceback (most recent call last):
    ...
    ValueError: cluster.preset: unknown field; a preset is named by a string ("cluster": "dgx-h100"; the node count \
follows from the GPU count); an object needs name, device, gpus_per_node, nics_per_node, intra, inter
    """
    if isinstance(d, dict) and "preset" in d:  # a preset reference written as an object
        name = d["preset"] if isinstance(d["preset"], str) else "dgx-a100"
        raise ValueError(f'{origin}.preset: unknown field; a preset is named by a string ("cluster": "{name}"; the '
                         f"node count follows from the GPU count); an object needs {', '.join(_REQUIRED)}")
    _fields(origin, d, _REQUIRED, _OPTIONAL)
    if not isinstance(d["name"], str) or not d["name"]:
        raise ValueError(f"{origin}.name: must be a non-empty string")
    dev = d["device"]
    if isinstance(dev, dict):
        device = device_from_dict(dev, origin=f"{origin}.device")
    elif isinstance(dev, Device):
        device = dev
    elif isinstance(dev, str) and dev:
        try:
            device = load_device(dev)
        except ValueError as e:
            raise ValueError(f"{origin}.device: {e}") from None
    else:
        raise ValueError(f"{origin}.device: expected a device preset name, file path or object, got {dev!r}")
    counts = {k: count(f"{origin}.{k}", d.get(k, 1)) for k in ("gpus_per_node", "nics_per_node", "nodes")}
    if "nvlink_domain" in d:
        counts["nvlink_domain"] = check_domain(f"{origin}.nvlink_domain", d["nvlink_domain"], counts["gpus_per_node"])
    host = d.get("host_cpu", "")
    if host not in HOST_CPUS:
        raise ValueError(f"{origin}.host_cpu: unknown {host!r}; allowed: {', '.join(repr(h) for h in HOST_CPUS)}")
    return Cluster(name=d["name"], device=device, intra=tier_from_dict(d["intra"], f"{origin}.intra"),
                   inter=tier_from_dict(d["inter"], f"{origin}.inter"), host_cpu=host,
                   sources=dict(d.get("sources", {})),
                   notes=d.get("notes", ""), **counts)


def _preset_dir():
    return resources.files("concurrency_model") / "presets" / "clusters"


def cluster_names() -> list[str]:
    """Names of the cluster presets shipped as package data."""
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".json"))


def load_cluster(spec) -> Cluster:
    """A cluster from a preset name (``dgx-a100``), a JSON file path, a dict of the preset shape (as
    scenarios embed it), or a :class:`Cluster` (returned as is).

    >>> c = load_cluster("dgx-a100")
    >>> c.device.name, c.gpus_per_node, c.nics_per_node, c.inter.bw
    ('a100-sxm4-80gb', 8, 8, 25000000000.0)
    """
    if isinstance(spec, Cluster):
        return spec
    if isinstance(spec, dict):
        return cluster_from_dict(spec, origin="cluster")
    if not isinstance(spec, (str, Path)):
        raise ValueError(f"cluster: expected a preset name, file path or object, got {type(spec).__name__}")
    if is_preset_name(spec):  # package data: read once a process (a Cluster is frozen)
        return _preset_cluster(spec)
    data, origin = read_spec(spec, _preset_dir(), "cluster", cluster_names)
    return cluster_from_dict(data, origin=origin)


@lru_cache(maxsize=None)
def _preset_cluster(name: str) -> Cluster:
    data, origin = read_spec(name, _preset_dir(), "cluster", cluster_names)
    return cluster_from_dict(data, origin=origin)


# -- placement ----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Placement:
    """Where the ``ranks`` of one communicator sit, and the alpha-beta each rank sees per tier.

    ``kind``: ``"intra"`` (one node), ``"inter"`` (one rank per node), ``"mixed"`` (several nodes, several
    ranks on each); a "node" is an NVLink domain (``ranks_per_node`` and ``nodes`` count per domain: the
    node itself unless the cluster's ``nvlink_domain`` spans several, module doc). ``intra`` / ``inter`` are
    ``(alpha, beta)`` per rank (computed for both tiers whatever the kind); ``nic_share`` is NICs per rank,
    ``intra_bw`` / ``inter_bw`` effective bytes/s per rank per direction (``1 / beta``).
    """

    ranks: int
    ranks_per_node: int
    nodes: int
    groups_sharing: int
    kind: str
    intra: tuple
    inter: tuple
    nic_share: float
    intra_bw: float
    inter_bw: float
    cluster: Cluster = field(repr=False, compare=False)

    def to_dict(self) -> dict:
        return {"cluster": self.cluster.name, "ranks": self.ranks, "ranks_per_node": self.ranks_per_node,
                "nodes": self.nodes, "groups_sharing": self.groups_sharing, "kind": self.kind,
                "intra_alpha_s": self.intra[0], "intra_beta_s_per_byte": self.intra[1],
                "inter_alpha_s": self.inter[0], "inter_beta_s_per_byte": self.inter[1],
                "nic_share": self.nic_share, "intra_bw_Bps": self.intra_bw, "inter_bw_Bps": self.inter_bw}


def place(cluster, ranks: int, ranks_per_node: int | None = None, groups_sharing: int = 1) -> Placement:
    """Place ``ranks`` ranks of one communicator on ``cluster`` (a :class:`Cluster` or anything
    :func:`load_cluster` accepts).

    Ranks fill NVLink domains (nodes, unless the domain spans several: module doc): ``ranks_per_node =
    min(ranks, nvlink_domain)`` unless given. ``ranks`` must be a multiple of ``ranks_per_node`` and
    ``ranks_per_node * groups_sharing <= nvlink_domain`` (the ``groups_sharing`` groups sit on disjoint GPUs
    of each domain). The domains used, ``ranks / ranks_per_node``, may exceed the cluster's only when
    ``cluster.nodes`` is 1 ("as many as needed"). Per-rank bandwidths follow the module doc: intra ``bw *
    efficiency``; inter ``nic_bw * efficiency * min(1, domain_nics / (ranks_per_node * groups_sharing))``.

    >>> p = place("dgx1-v100", 16, ranks_per_node=8)
    >>> p.kind, p.nic_share, p.inter_bw == 12.5e9 * 0.9 * 0.5
    ('mixed', 0.5, True)
    >>> place("gb200-nvl72", 64).kind, place("gb200-nvl72", 144).nodes   # 16 trays, one domain; two racks
    ('intra', 2)
    """
    c = load_cluster(cluster)
    ranks = count("ranks", ranks)
    groups_sharing = count("groups_sharing", groups_sharing)
    dom = c.domain_gpus
    unit = "gpus_per_node" if dom == c.gpus_per_node else "nvlink_domain"
    k = min(ranks, dom) if ranks_per_node is None else count("ranks_per_node", ranks_per_node)
    if k > dom:
        raise ValueError(f"ranks_per_node: {k} exceeds {unit} = {dom} of {c.name}")
    if k > ranks:
        raise ValueError(f"ranks_per_node: {k} exceeds ranks = {ranks}")
    if ranks % k:
        raise ValueError(f"ranks: {ranks} is not a multiple of ranks_per_node = {k}")
    if k * groups_sharing > dom:
        raise ValueError(f"groups_sharing: {groups_sharing} groups x {k} ranks per node exceed "
                         f"{unit} = {dom} of {c.name}")
    nodes = ranks // k
    have = -(-c.total_gpus // dom)  # domains of the cluster (a part-filled last one counts)
    if c.nodes > 1 and nodes > have:
        raise ValueError(f"ranks: {ranks} ranks at {k} per node need {nodes} nodes; {c.name} has "
                         f"{have} (nodes = 1 would mean as many as needed)")
    kind = "intra" if nodes == 1 else "inter" if k == 1 else "mixed"
    share = min(1.0, c.domain_nics / (k * groups_sharing))
    intra_bw = c.intra.effective_bw
    inter_bw = c.inter.effective_bw * share
    return Placement(ranks=ranks, ranks_per_node=k, nodes=nodes, groups_sharing=groups_sharing, kind=kind,
                     intra=(c.intra.latency, 1 / intra_bw), inter=(c.inter.latency, 1 / inter_bw),
                     nic_share=share, intra_bw=intra_bw, inter_bw=inter_bw, cluster=c)
