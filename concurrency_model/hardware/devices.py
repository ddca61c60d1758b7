"""Devices as frozen dataclasses; presets are JSON files under ``presets/devices`` (package data).

A preset file (a profile written by ``calibrate compute`` has the same shape) holds:

* ``name``, ``vendor``, ``kind`` (``gpu`` or ``cpu``);
* ``peak_flops``: dense peak FLOP/s per math dtype (``fp64, fp32, tf32, fp16, bf16, fp8, int8, mxfp8, nvfp4``),
  only those the device supports (a device without a dtype's math refuses it: ``ValueError`` naming ``dtype``); ``vector_flops`` optionally the non-tensor-core rates; ``sparse_flops``
  optionally the rates with 2:4 structured sparsity (sparse tensor cores, Ampere and later: twice the
  dense rate, hardware.md pitfall 1), counted as the dense product's FLOP as the datasheets count them;
* ``mem_bw_Bps`` (bytes/s), ``mem_capacity_bytes``, ``launch_overhead_s``, ``multiprocessors`` (SMs or
  CUs or cores), ``l2_bytes`` and ``board_power_w`` where known;
* ``compute_capability`` (NVIDIA GPUs: 7.0 Volta, 8.0 A100, 9.0 Hopper; 0 = not a CUDA device): picks
  NCCL's per-architecture constants (:mod:`concurrency_model.comm.nccl`);
* ``attention_board``: the benchmarked board whose published fused-attention speeds apply to this device
  (:mod:`concurrency_model.timing.attention`; the same chip at the same clocks), empty where none is published;
* ``efficiency``: optional fitted constants of :mod:`concurrency_model.timing` (see ``Efficiency``);
* ``sources``: one source per field (reference key of ``shared/reference/hardware.md`` and its origin),
  ``notes``.

What-if questions replace fields: ``dataclasses.replace(device, mem_bw=4e12)``; a sweep may put sympy
symbols into the numeric fields (see :func:`symbolic`).
"""
from __future__ import annotations

import numbers
from dataclasses import dataclass, field, fields, replace
from functools import lru_cache
from importlib import resources
from pathlib import Path

from ..checks import count, did_you_mean, file_text, json_object, number

KINDS = ("gpu", "cpu", "accelerator")
# math dtypes a device may have a peak for; mxfp8 / nvfp4: block-scaled tensor-core math (Blackwell, compute
# capability 10.x), the scales applied inside the MMA (PTX ISA 8.7, tcgen05.mma ``.kind::mxf8f6f4`` and
# ``.kind::mxf4nvf4`` with ``.block_scale``) at the datasheets' FP8 and FP4 rates
DTYPES = ("fp64", "fp32", "tf32", "fp16", "bf16", "fp8", "int8", "mxfp8", "nvfp4")


@dataclass(frozen=True)
class Efficiency:
    """Constants that turn datasheet peaks into achieved rates (:mod:`concurrency_model.timing`).

    ``compute``: fraction of peak reached by a large, well-shaped GEMM main loop; ``memory``: fraction of
    the datasheet bandwidth reached by streaming kernels; ``k_startup``: reduction-dimension elements of
    pipeline fill and epilogue per output tile; ``l2_factor``: L2 bandwidth over DRAM bandwidth (feeds
    the GEMM tiles); ``conv``, ``conv_wgrad``, ``winograd`` and ``rnn``:
    factors on the time of convolutions (all passes; weight gradients; Winograd GEMMs) and recurrent
    layers over the GEMMs they are made of (the implicit-GEMM gather, the reductions of ∇w, the
    per-step synchronisation); ``rnn_sync``: launch overheads per time step of a recurrent layer beyond
    its two kernels (the host loop's stream synchronisation and bookkeeping); ``rnn_unfused``: launch
    overheads per dependent element-wise stage of the cell (about 0 where the library fuses the cell
    into one kernel, as cuDNN; more where each stage is its own kernel); ``sigma``: relative spread
    of the residuals the constants were fitted on.
    Defaults, the same for every device: ``compute``, ``memory``, ``k_startup``, ``l2_factor`` and the
    conv factors are round engineering values (80% of peak and of bandwidth; not fitted), the RNN
    constants a global fit on DeepBench's RNN rows with the others at these values. A global fit of all
    of them on DeepBench (compute 0.78, memory 0.47, l2_factor 1.5) moves the training validation both
    ways (vTrain single node 46% -> 24% median error, Megatron 2020 4% -> 30%), so it is not the default;
    ``calibrate compute`` and :func:`concurrency_model.validate.kernels.fit` fit them per device.
    """

    compute: float = 0.80
    memory: float = 0.80
    k_startup: float = 64.0
    l2_factor: float = 3.0
    conv: float = 1.0
    conv_wgrad: float = 1.0
    winograd: float = 1.0
    rnn: float = 0.83  # rnn, rnn_sync, rnn_unfused: fitted on all DeepBench RNN rows, other fields default
    rnn_sync: float = 10.2
    rnn_unfused: float = 0.36
    sigma: float = 0.0
    fitted_on: str = "default"
    # the math rate a training step sustains over the kernel model's (a long run's clocks under its power limit),
    # applied to the compute part of every kernel of a training step (:mod:`concurrency_model.training.workload`),
    # not to single-kernel timings; 1 = none (default); fitted per device family on training data
    sustained: float = 1.0

    def __post_init__(self):
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "fitted_on":
                continue
            if isinstance(v, numbers.Real) and v < 0:
                raise ValueError(f"efficiency.{f.name}: must be >= 0, got {v}")
        for name in ("compute", "memory", "sustained"):
            v = getattr(self, name)
            if isinstance(v, numbers.Real) and not 0 < v <= 1:
                raise ValueError(f"efficiency.{name}: must be in (0, 1], got {v}")


@dataclass(frozen=True)
class Device:
    """One accelerator or CPU. SI units: FLOP/s, bytes/s, bytes, seconds."""

    name: str
    peak_flops: dict  # math dtype -> dense FLOP/s
    mem_bw: float
    mem_capacity: float
    launch_overhead: float
    multiprocessors: int
    vendor: str = ""
    kind: str = "gpu"
    vector_flops: dict = field(default_factory=dict)
    sparse_flops: dict = field(default_factory=dict)  # math dtype -> FLOP/s with 2:4 structured sparsity
    l2_bytes: float = 0.0
    board_power_w: float = 0.0
    compute_capability: float = 0.0  # CUDA compute capability (8.0 = A100); 0 = not an NVIDIA CUDA GPU
    attention_board: str = ""  # board whose published fused-attention speeds apply (timing.attention)
    efficiency: Efficiency = field(default_factory=Efficiency)
    sources: dict = field(default_factory=dict, compare=False)
    notes: str = field(default="", compare=False)
    decide: dict = field(default_factory=dict, compare=False, repr=False)  # symbol -> number, for choices

    def __hash__(self):  # the dict fields are not hashable; the name and headline numbers identify a device
        return hash((self.name, str(self.mem_bw), self.multiprocessors))

    def peak(self, dtype: str):
        """Dense peak FLOP/s for math in ``dtype``; ``ValueError`` if the device has no such unit."""
        if dtype not in DTYPES:
            raise ValueError(f"dtype: unknown {dtype!r}; allowed: {', '.join(DTYPES)}")
        if dtype not in self.peak_flops:
            have = ", ".join(self.peak_flops)
            raise ValueError(f"dtype: {self.name} has no {dtype} peak; it supports {have}")
        return self.peak_flops[dtype]

    def to_dict(self) -> dict:
        """The preset-file form (units in the keys)."""
        eff = {f.name: getattr(self.efficiency, f.name) for f in fields(Efficiency)}
        return {"name": self.name, "vendor": self.vendor, "kind": self.kind, "peak_flops": dict(self.peak_flops),
                "vector_flops": dict(self.vector_flops), "sparse_flops": dict(self.sparse_flops),
                "mem_bw_Bps": self.mem_bw,
                "mem_capacity_bytes": self.mem_capacity, "launch_overhead_s": self.launch_overhead,
                "multiprocessors": self.multiprocessors, "l2_bytes": self.l2_bytes,
                "board_power_w": self.board_power_w, "compute_capability": self.compute_capability,
                "attention_board": self.attention_board,
                "efficiency": eff, "sources": dict(self.sources),
                "notes": self.notes}


_FILE_KEYS = {"mem_bw_Bps": "mem_bw", "mem_capacity_bytes": "mem_capacity", "launch_overhead_s": "launch_overhead"}
_REQUIRED = ("name", "peak_flops", "mem_bw_Bps", "mem_capacity_bytes", "launch_overhead_s", "multiprocessors")


def _positive(where: str, v, allow_zero: bool = False) -> float:
    """``v`` as written (an int stays an int) once :func:`.checks.number` has passed it."""
    number(where, v, low_ok=allow_zero)
    return v


def device_from_dict(d: dict, origin: str = "device") -> Device:
    """Build a :class:`Device` from a preset or profile dictionary, checking every field."""
    if not isinstance(d, dict):
        raise ValueError(f"{origin}: expected a JSON object")
    missing = [k for k in _REQUIRED if k not in d]
    if missing:
        raise ValueError(f"{origin}: missing field {missing[0]!r}")
    known = set(_REQUIRED) | {"vendor", "kind", "vector_flops", "sparse_flops", "l2_bytes", "board_power_w",
                              "compute_capability", "attention_board", "efficiency",
                              "sources", "notes"}
    unknown = sorted(set(d) - known)
    if unknown:
        raise ValueError(f"{origin}: unknown field {unknown[0]!r}")
    peaks = {}
    for group in ("peak_flops", "vector_flops", "sparse_flops"):
        g = d.get(group, {})
        if not isinstance(g, dict) or (group == "peak_flops" and not g):
            raise ValueError(f"{origin}.{group}: expected an object of dtype -> FLOP/s")
        for k, v in g.items():
            if k not in DTYPES:
                raise ValueError(f"{origin}.{group}.{k}: unknown dtype; allowed: {', '.join(DTYPES)}")
            _positive(f"{origin}.{group}.{k}", v)
        peaks[group] = dict(g)
    kw = {_FILE_KEYS.get(k, k): _positive(f"{origin}.{k}", d[k], allow_zero=k == "launch_overhead_s")
          for k in ("mem_bw_Bps", "mem_capacity_bytes", "launch_overhead_s")}
    if d.get("kind", "gpu") not in KINDS:
        raise ValueError(f"{origin}.kind: unknown {d['kind']!r}; allowed: {', '.join(KINDS)}")
    if not isinstance(d["name"], str) or not d["name"]:
        raise ValueError(f"{origin}.name: must be a non-empty string")
    if not isinstance(d.get("vendor", ""), str):
        raise ValueError(f"{origin}.vendor: must be a string, got {d['vendor']!r}")
    mp = count(f"{origin}.multiprocessors", d["multiprocessors"])
    if not isinstance(d.get("attention_board", ""), str):
        raise ValueError(f"{origin}.attention_board: must be a string, got {d['attention_board']!r}")
    eff = d.get("efficiency", {}) or {}
    if not isinstance(eff, dict):
        raise ValueError(f"{origin}.efficiency: expected an object")
    bad = sorted(set(eff) - {f.name for f in fields(Efficiency)})
    if bad:
        raise ValueError(f"{origin}.efficiency: unknown field {bad[0]!r}")
    for k, v in eff.items():
        if k != "fitted_on":
            _positive(f"{origin}.efficiency.{k}", v, allow_zero=True)
    return Device(name=d["name"], peak_flops=peaks["peak_flops"], vector_flops=peaks["vector_flops"],
                  sparse_flops=peaks["sparse_flops"],
                  multiprocessors=mp, vendor=d.get("vendor", ""), kind=d.get("kind", "gpu"),
                  l2_bytes=_positive(f"{origin}.l2_bytes", d.get("l2_bytes", 0), True),
                  board_power_w=_positive(f"{origin}.board_power_w", d.get("board_power_w", 0), True),
                  compute_capability=_positive(f"{origin}.compute_capability", d.get("compute_capability", 0), True),
                  attention_board=d.get("attention_board", ""),
                  efficiency=Efficiency(**eff), sources=d.get("sources", {}), notes=d.get("notes", ""), **kw)


def _preset_dir():
    return resources.files("concurrency_model") / "presets" / "devices"


def device_names() -> list[str]:
    return sorted(p.name[:-5] for p in _preset_dir().iterdir() if p.name.endswith(".json"))


def load_device(name_or_path) -> Device:
    """A preset by name (``a100-sxm4-80gb``) or a device / profile JSON file by path.

    >>> load_device("a100-sxm4-80gb").peak("bf16")
    312000000000000.0
    """
    if isinstance(name_or_path, Device):
        return name_or_path
    if is_preset_name(name_or_path):  # package data: read once a process (a Device is frozen)
        return _preset_device(str(name_or_path))
    data, origin = read_spec(name_or_path, _preset_dir(), "hardware", device_names)
    return device_from_dict(data, origin=origin)


@lru_cache(maxsize=None)
def _preset_device(name: str) -> Device:
    data, origin = read_spec(name, _preset_dir(), "hardware", device_names)
    return device_from_dict(data, origin=origin)


def is_preset_name(spec) -> bool:
    """Whether ``spec`` names a preset rather than a file (as :func:`read_spec` tells them apart): a string not
    ending in ``.json`` that names no existing path."""
    text = str(spec)
    return isinstance(spec, str) and not text.endswith(".json") and not Path(text).exists()


def read_spec(spec, preset_dir, field_name: str, names) -> tuple[dict, str]:
    """The JSON object of a preset (a file stem in ``preset_dir``) or of a ``.json`` file path, and a
    label for error messages; ``ValueError`` naming ``field_name`` if neither exists."""
    text = str(spec)
    path = Path(text)
    if text.endswith(".json") or path.is_file() or path.is_dir():
        if not path.exists():
            raise ValueError(f"{field_name}: no such file {text!r}")
        return read_json(path, field_name), path.name
    preset = preset_dir / f"{text}.json"
    if not preset.is_file():
        raise ValueError(f"{field_name}: unknown preset {text!r}{did_you_mean(text, names())}; allowed: "
                         f"{', '.join(names())}")
    return read_json(preset, field_name), text


def read_json(path, field_name: str) -> dict:
    """A JSON file's object; ``ValueError`` naming ``field_name`` and the line if it is not valid JSON."""
    return json_object(field_name, file_text(field_name, path), Path(str(path)).name)


def symbolic(device: Device, dtype: str = "fp16") -> tuple[Device, dict]:
    """The device with its peak for ``dtype``, bandwidth and launch overhead replaced by sympy symbols,
    and the mapping symbol -> number that turns it back (for sweeps over hardware parameters). The
    device keeps the mapping in ``decide``: discrete choices (kernel tiles, algorithms) use the numbers."""
    import sympy as sp  # the one function here that makes symbols: reading a device needs no sympy (issue 41)

    F = sp.Symbol(f"F_{dtype}", positive=True)
    Bm = sp.Symbol("B_mem", positive=True)
    L = sp.Symbol("t_launch", nonnegative=True)
    values = {F: device.peak(dtype), Bm: device.mem_bw, L: device.launch_overhead}
    peaks = dict(device.peak_flops)
    peaks[dtype] = F
    return replace(device, peak_flops=peaks, mem_bw=Bm, launch_overhead=L, decide=values), values
