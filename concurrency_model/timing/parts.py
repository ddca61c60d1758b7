"""Kernels of a layer as coefficient rows, so that a layer's time can be re-evaluated for other hardware
without choosing its kernels again (what-if sweeps over peak FLOP/s, memory bandwidth, launch overhead).

Every kernel model of :mod:`concurrency_model.timing` ends in :class:`~concurrency_model.timing.Coeffs`:
``max(a_math/peak, a_feed/bw, a_mem/bw) + a_extra/bw + launches*launch``. :class:`Parts` keeps, per
kernel, its seconds on the nominal device split the same way::

    time(s_F, s_B, s_L) = sum_k count_k * (max(compute_k / s_F, memory_k / s_B) + extra_k / s_B + launch_k * s_L)

where ``s_F``, ``s_B``, ``s_L`` scale peak FLOP/s, memory bandwidth and launch overhead (1 = the device
as it is). At 1 this is exactly the kernel models' time; elsewhere the kernels (tile, algorithm, split-k)
stay the ones chosen on the nominal device — the structural decision DESIGN.md asks to record.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from . import Coeffs, decided_float


@dataclass(frozen=True)
class Parts:
    """Seconds of kernels on the nominal device: ``compute, memory, extra, launch`` and ``count`` (arrays)."""

    compute: np.ndarray
    memory: np.ndarray
    extra: np.ndarray
    launch: np.ndarray
    count: np.ndarray

    @staticmethod
    def empty() -> "Parts":
        z = np.zeros(0)
        return Parts(z, z, z, z, z)

    @staticmethod
    def from_coeffs(c: Coeffs, dev, count=1.0, scale: float = 1.0) -> "Parts":
        """The rows of ``c`` on ``dev`` (each ``count`` times, times ``scale``, e.g. an efficiency)."""
        bw, launch = decided_float(dev.mem_bw, dev.decide), decided_float(dev.launch_overhead, dev.decide)
        n = len(c.a_math)
        return Parts(c.a_math / c.rate * scale, np.maximum(c.a_feed, c.a_mem) / bw * scale, c.a_extra / bw * scale,
                     c.launches * launch * scale, np.broadcast_to(np.asarray(count, dtype=float), (n,)).copy())

    def __add__(self, other: "Parts") -> "Parts":
        return Parts(*(np.concatenate([getattr(self, f), getattr(other, f)]) for f in _FIELDS))

    def times(self, k: float) -> "Parts":
        """The same kernels ``k`` times as often."""
        return Parts(self.compute, self.memory, self.extra, self.launch, self.count * k)

    def with_math_rate(self, k: float) -> "Parts":
        """The same kernels with their arithmetic at ``k`` times the rate (memory, extra and launch unchanged).

        >>> Parts(*(np.array([x]) for x in (2.0, 1.0, 0.5, 0.1, 1.0))).with_math_rate(0.5).total()
        4.6
        """
        return Parts(self.compute / k, self.memory, self.extra, self.launch, self.count)

    def with_work(self, k: float) -> "Parts":
        """The same kernels doing ``k`` times their work and traffic (launches unchanged)."""
        return Parts(self.compute * k, self.memory * k, self.extra * k, self.launch, self.count)

    def seconds(self, s_flops=1.0, s_mem_bw=1.0, s_launch=1.0) -> np.ndarray:
        """Total seconds; the scales may be arrays (one result per element)."""
        sf, sb, sl = (np.asarray(x, dtype=float)[..., None] for x in (s_flops, s_mem_bw, s_launch))
        t = np.maximum(self.compute / sf, self.memory / sb) + self.extra / sb + self.launch * sl
        return (t * self.count).sum(axis=-1)

    def kernels(self, launch_s: float) -> float:
        """Kernels these parts launch: each row's launch seconds over ``launch_s`` (the device's launch
        overhead; a row without a launch term counts once), times its count.

        >>> Parts(*(np.array([x, x]) for x in (1e-6, 1e-6, 0.0, 8e-6, 3.0))).kernels(4e-6)   # 2 rows x 2 x 3
        12.0
        """
        return float(self.kernel_counts(launch_s).sum())

    def kernel_counts(self, launch_s: float) -> np.ndarray:
        """The kernels of each row (see :meth:`kernels`)."""
        if len(self.count) == 0:
            return np.zeros(0)
        k = np.where(self.launch > 0, self.launch / launch_s, 1.0) if launch_s > 0 else np.ones_like(self.count)
        return k * self.count

    def total(self) -> float:
        """Seconds on the nominal device."""
        return float(((np.maximum(self.compute, self.memory) + self.extra + self.launch) * self.count).sum())

    def row(self, i: int) -> "Parts":
        """Kernel ``i`` alone, on arrays of its own (a row of a vectorised call, kept apart from the others).

        >>> Parts(*(np.array([x, 2 * x]) for x in (1.0, 0.5, 0.0, 0.1)), np.ones(2)).row(1).total()
        2.2
        """
        return Parts(*(getattr(self, f)[i:i + 1].copy() for f in _FIELDS))

    def compact(self, decimals: int = 12) -> "Parts":
        """Identical kernels merged (counts added): a stage of 12 equal blocks has one row per kernel kind."""
        if len(self.count) == 0:
            return self
        keys = np.stack([self.compute, self.memory, self.extra, self.launch], axis=1)
        _, first, inverse = np.unique(keys, axis=0, return_index=True, return_inverse=True)
        counts = np.bincount(inverse.ravel(), weights=self.count, minlength=len(first))
        return Parts(*(getattr(self, f)[first] for f in _FIELDS[:4]), counts)


_FIELDS = ("compute", "memory", "extra", "launch", "count")


def total(parts) -> Parts:
    """The concatenation of several :class:`Parts`."""
    parts = list(parts)
    if not parts:
        return Parts.empty()
    return Parts(*(np.concatenate([getattr(p, f) for p in parts]) for f in _FIELDS))


BOUNDS = ("compute", "memory", "launch")


def bound_of(*parts) -> str:
    """What most of the kernels' seconds wait for: ``compute`` (kernels whose math term is the larger),
    ``memory`` (whose traffic term is, with the traffic outside the roofline) or ``launch``.

    >>> from concurrency_model.timing.parts import Parts
    >>> p = Parts(*(np.array(x) for x in ([3e-6, 1e-6], [1e-6, 2e-6], [0.0, 0.0], [0.0, 0.0], [1.0, 1.0])))
    >>> bound_of(p), bound_of(p.times(0.0))
    ('compute', 'launch')
    """
    seconds = dict.fromkeys(BOUNDS, 0.0)
    for p in parts:
        math_bound = p.compute >= p.memory
        seconds["compute"] += float((np.where(math_bound, p.compute, 0.0) * p.count).sum())
        seconds["memory"] += float(((np.where(math_bound, 0.0, p.memory) + p.extra) * p.count).sum())
        seconds["launch"] += float((p.launch * p.count).sum())
    return max(BOUNDS, key=lambda k: (seconds[k], k == "launch"))  # nothing at all: launch
