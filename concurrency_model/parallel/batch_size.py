"""The global minibatch against the paper's three regions (§3, Fig. 6a; paper-models §1.3 [S1]).

The paper places the minibatch size in three regions: too small to use the hardware (A), a sweet spot
(B), and too large to generalize (C), and reports the largest sizes trained without a large loss of
accuracy: 8k (Goyal et al.), 32k (You et al., LARS) and 64k; tricks "increase the upper bound ... but do not
remove it" [S1]. ``estimate`` models the time of a step, not convergence, so a batch outside region B gets
a note, never a refusal.

How the toolkit draws the regions' edges for a scenario [D]:

* **C** above ``training.max_global_batch`` samples a step, by default 8,192: the paper's Fig. 6b shows
  ResNet-50's ImageNet error rising beyond about 8k; set it to 32,768 or 65,536 for a large-batch rule
  (LARS, LAMB), or to what is known for the model at hand.
* **A** when a device, given the largest microbatch the global batch allows it (``global_batch / data``
  samples a step, one microbatch, as far as memory holds), runs below ``UNDERUSED`` = 80% of the samples/s
  it reaches at the best microbatch that fits in its memory (powers of two up to ``LARGEST``): the kernels'
  efficiency at small sizes (:mod:`concurrency_model.timing`) and the host's launches are what a small
  batch leaves unused. Measured on the layout of the scenario (tensor, context, expert split, recompute):
  a tensor-parallel device works on smaller matrices and needs more samples.
"""
from __future__ import annotations

from dataclasses import dataclass

DEFAULT_CEILING = 8 * 1024  # Fig. 6b [S1]: error rising beyond about 8k (ResNet-50, ImageNet)
LARGE_BATCH_RULES = {32 * 1024: "32k (You et al., LARS)", 64 * 1024: "64k"}  # §3 [S1]
UNDERUSED = 0.8  # [D] a device below 80% of its saturated samples/s is in region A
LARGEST = 4096  # [D] largest microbatch tried for the saturated samples/s


@dataclass(frozen=True)
class BatchRegion:
    """Where a scenario's global batch sits in the paper's Fig. 6a."""

    region: str  # "A", "B" or "C"
    global_batch: int
    ceiling: int  # region C above it (``training.max_global_batch``)
    per_replica_batch: float  # samples a step of one data-parallel replica: global_batch / data
    device_utilization: float  # samples/s at that batch / samples/s at ``saturating_batch``
    saturating_batch: int  # the microbatch (a power of two that fits) with the most samples/s per device

    def to_dict(self) -> dict:
        return {"region": self.region, "global_batch": self.global_batch, "ceiling": self.ceiling,
                "per_replica_batch": self.per_replica_batch, "device_utilization": self.device_utilization,
                "saturating_batch": self.saturating_batch}

    def notes(self) -> list[str]:
        """What the region means for the scenario, in words; empty in region B."""
        out = []
        if self.global_batch > self.ceiling:
            rules = [name for size, name in LARGE_BATCH_RULES.items() if size >= self.global_batch]
            known = (f"{rules[0]} was reached with a large-batch rule (§3)" if rules else
                     "64k is the largest the paper reports trained without a large loss of accuracy (§3)")
            out.append(f"global batch {self.global_batch:,} is above {self.ceiling:,} samples (training."
                       f"max_global_batch): the paper's region C (Fig. 6), where generalization suffers; {known}; "
                       "the step time is modelled, not convergence")
        if self.device_utilization < UNDERUSED:
            n = self.per_replica_batch
            out.append(f"{n:,.4g} sample{'' if n == 1 else 's'} a step per data-parallel replica run a device at "
                       f"{self.device_utilization:.0%} of the samples/s it reaches at microbatch "
                       f"{self.saturating_batch:,}: the paper's region A (§3, Fig. 6a), the minibatch too small to "
                       "use the hardware; a larger global batch or fewer data-parallel replicas use it better")
        return out


def region(global_batch: int, ceiling: int, per_replica_batch: float, rate, fits, unit: int = 1) -> BatchRegion:
    """The region of ``global_batch`` given a device's samples/s ``rate(b)`` at microbatch ``b`` and
    ``fits(b)``, whether microbatch ``b`` fits in its memory (the scenario's own microbatch always does);
    microbatches are multiples of ``unit`` (Krizhevsky's hybrid splits each over the tensor group).

    >>> r = region(1024, 8192, 2, rate=lambda b: b / (1 + b), fits=lambda b: b <= 64)  # saturates at large b
    >>> r.region, r.saturating_batch, round(r.device_utilization, 3)
    ('A', 64, 0.677)
    """
    candidates = [unit]
    while candidates[-1] * 2 <= LARGEST * unit and fits(candidates[-1] * 2):
        candidates.append(candidates[-1] * 2)
    best = max(candidates, key=rate)
    usable = per_replica_batch if fits(per_replica_batch) else max(b for b in candidates if b <= per_replica_batch)
    utilization = min(1.0, rate(usable) / rate(best))
    name = "C" if global_batch > ceiling else "A" if utilization < UNDERUSED else "B"
    return BatchRegion(name, int(global_batch), int(ceiling), float(per_replica_batch), float(utilization), int(best))
