"""What-if sweeps over layouts and hardware (:mod:`.engine`, :mod:`.space`) and sensitivities."""
from __future__ import annotations

from .engine import SCALES, SweepResult, sweep

__all__ = ["SCALES", "SweepResult", "sweep"]
