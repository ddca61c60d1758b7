"""The training step's compiled function: what an estimate and a sweep evaluate, without sympy on a cache hit.

:func:`step_fn` is the step of :func:`.compose.step_expressions` (one per structural variant: the pipeline
``schedule``, the ZeRO stage, ``overlap``), lambdified through the persistent cache of
:mod:`concurrency_model.compiled`: a hit runs the cached generated source, and :mod:`.compose` (with sympy) is imported
only to build the expressions on a miss, so an estimate whose numbers are cached (:func:`.estimate.prepared`) never
imports sympy (issue 41). The sweep evaluates the same function on arrays. Its inputs and outputs are named in
:mod:`.step_parts`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..compiled import lambdified
from .step_parts import STEP_INPUTS, STEP_OUTPUTS, shape_of


@lru_cache(maxsize=None)
def step_fn(schedule: str, zero_stage: int, overlap: bool, outputs: tuple = STEP_OUTPUTS):
    """``f(**inputs) -> dict`` of ``outputs`` (default :data:`STEP_OUTPUTS`), numpy-vectorised (lambdify
    with ``cse=True``, through the persistent cache of :mod:`concurrency_model.compiled`: one point or arrays,
    the same generated code).

    >>> f = step_fn("gpipe", 0, False, ("step",))
    >>> ones = dict.fromkeys(STEP_INPUTS, 1.0) | {"straggle": 0.0, "p": 2.0, "m": 4.0}
    >>> float(f(**ones)["step"])  # (m + p - 1)(t_f + t_b) + 2 (p - 1) t_p2p + opt + emb + ar + m x_dp: 55+2+1+1+1+4
    64.0
    """
    def build():  # on a cache miss only: the sympy expressions of :mod:`.compose`
        from .compose import SYMBOLS, step_expressions
        e = step_expressions(schedule, zero_stage, overlap)
        return [SYMBOLS[k] for k in STEP_INPUTS], [e[k] for k in outputs]
    f = lambdified("step", (schedule, zero_stage, overlap, outputs), build, cse=True)

    def run(**inputs):
        args = [inputs[k] for k in STEP_INPUTS]
        out = f(*args)
        shape = shape_of(args)
        if not shape:  # one point (an estimate): 0-d arrays, without broadcasting each (a third of its time)
            return {k: np.asarray(x, dtype=float) for k, x in zip(outputs, out)}
        return {k: np.broadcast_to(np.asarray(x, dtype=float), shape) for k, x in zip(outputs, out)}
    return run


__all__ = ["step_fn"]
