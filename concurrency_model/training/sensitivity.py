"""Sensitivities of a step time: elasticities ``d ln T / d ln x`` by symbolic differentiation.

The step of one configuration is rebuilt as a sympy expression (:mod:`.compose` with its inputs written
out: every kernel of the slowest stage as ``max(compute/s_F, memory/s_B) + extra/s_B + launch*s_L``,
every collective as ``s_lat*latency + max(intra/s_intra, inter/s_inter)``, the host's issue time of a
pass as ``s_host`` times its kernels' host seconds) in scale symbols that are 1
for the scenario as given, and in ``m``, the microbatches per step. The elasticity of x is
``(x/T) dT/dx`` there: -0.8 for inter-node bandwidth means 10% more bandwidth saves about 8% of the step.
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import sympy as sp

from .prepare import SCALES, step_expression

def sensitivities(scenario) -> pd.DataFrame:
    """Elasticities of the step time, largest magnitude first: ``symbol, what, elasticity``.

    >>> df = sensitivities({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 16, "global_batch": 64,
    ...                     "microbatch_size": 4}, "training": {"overlap": False}})
    >>> df.iloc[0]["symbol"] in ("s_flops", "s_inter", "s_mem_bw", "m")
    True
    """
    expr, at = step_expression(scenario)
    syms = list(at)
    grads = sp.lambdify(syms, [expr] + [sp.diff(expr, x) for x in syms],
                        modules=[{"Heaviside": lambda x, h=0.5: np.heaviside(x, h)}, "numpy"])
    T, *d = (float(y) for y in grads(*at.values()))
    rows = [{"symbol": x.name, "what": SCALES[x.name], "elasticity": dx * float(at[x]) / T} for x, dx in zip(syms, d)]
    df = pd.DataFrame(rows)
    return df.reindex(df["elasticity"].abs().sort_values(ascending=False).index).reset_index(drop=True)


def bound_by(scenario) -> str:
    """One line: the hardware parameter the step time depends on most."""
    df = sensitivities(scenario)
    hw = df[df["symbol"] != "m"].iloc[0]
    return f"bound by {hw['what']} (elasticity {hw['elasticity']:+.2f}: 10% more changes the step by " \
           f"{100 * (1.1 ** hw['elasticity'] - 1):+.1f}%)"
