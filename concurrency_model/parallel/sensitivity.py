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

from ..scenario import load_scenario
from . import compose
from .estimate import consistency_of, host_seconds, prepare, step_inputs, sync_of

SCALES = {"s_flops": "peak FLOP/s", "s_mem_bw": "memory bandwidth", "s_launch": "kernel launch overhead",
          "s_intra": "intra-node link bandwidth", "s_inter": "inter-node link bandwidth",
          "s_latency": "network latency", "s_host": "host (framework) seconds per kernel",
          "m": "microbatches per step (global batch at fixed data x microbatch)"}


def step_expression(scenario) -> tuple[sp.Expr, dict]:
    """The step time of ``scenario`` as a sympy expression and the values of its symbols (see the module).

    >>> from concurrency_model import estimate
    >>> sc = {"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}}
    >>> T, at = step_expression(sc)
    >>> abs(float(T.subs(at)) / estimate(sc).step_time_s - 1) < 1e-12
    True
    """
    sc = load_scenario(scenario)
    w, stage, state, _, key = prepare(sc)
    s = {k: sp.Symbol(k, positive=True) for k in SCALES}

    def seconds(parts):
        return sum(float(n) * (sp.Max(float(c) / s["s_flops"], float(mm) / s["s_mem_bw"], evaluate=False) + float(e) / s["s_mem_bw"]
                               + float(la) * s["s_launch"])
                   for c, mm, e, la, n in zip(parts.compute, parts.memory, parts.extra, parts.launch, parts.count))

    def host_wait(stage):  # the host's issue seconds, scaled by s_host
        return tuple(x * s["s_host"] for x in host_seconds(stage, w.dev, sc.training["host_overhead_s"]))

    def comm(tr):
        return float(tr[0]) * s["s_latency"] + sp.Max(float(tr[1]) / s["s_intra"], float(tr[2]) / s["s_inter"], evaluate=False)

    def optimizer(state_bytes):
        return float(w.optimizer_seconds(state_bytes, 1.0, 0.0)) / s["s_mem_bw"] + \
            float(w.dev.launch_overhead) * s["s_launch"]

    b, t, spar, rec, p, d, m, v, zero = key
    inputs = step_inputs(w, stage, b, t, spar, rec, p, d, s["m"], v, zero, state, seconds, comm, optimizer,
                         sync=sync_of(sc), host=sc.training["host_overhead_s"], host_wait=host_wait,
                         consistency=consistency_of(sc.training, d * sc.parallel["context"]),
                         batch_norm=sc.training["batch_norm"])
    expr = compose.step_expressions(sc.parallel["schedule"], zero, sc.training["overlap"])["step"]
    expr = expr.xreplace({compose.SYMBOLS[k]: sp.sympify(x) for k, x in inputs.items()})
    values = {sym: (m if k == "m" else 1) for k, sym in s.items()}
    return expr, values


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
