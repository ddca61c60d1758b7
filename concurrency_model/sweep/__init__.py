"""What-if sweeps over layouts and hardware (:mod:`.engine`, :mod:`.space`, :mod:`.result`) and sensitivities."""
from __future__ import annotations

from .engine import sweep
from .result import SCALES, SweepResult

__all__ = ["SCALES", "SweepResult", "sweep"]
