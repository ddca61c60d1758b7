"""The training step's interface: the names of its inputs (:data:`STEP_INPUTS`) and outputs (:data:`STEP_OUTPUTS`),
which :mod:`.compose` describes and makes its symbols of, and :func:`breakdown`, the step's named seconds (the
``estimate`` contract's ``breakdown``, DESIGN.md) from the inputs and outputs of :func:`.step.step_fn`. Without
sympy: a cached estimate reads it (issue 41).
"""
from __future__ import annotations

import numpy as np

STEP_INPUTS = ("c_f", "c_b", "c_r", "c_w", "c_tf", "c_tb", "c_ef", "c_eb", "c_cf", "c_cb", "c_nf", "c_nb", "t_p2p",
               "p", "m", "v", "ar", "rs", "ag", "agb", "x_dp", "emb", "last", "opt", "kappa", "h_f", "h_b", "straggle",
               "sync_frac", "fill")
STEP_OUTPUTS = ("step", "step_pp", "bubble", "p2p_exposed", "dp_total", "dp_exposed", "dp_interference", "host_wait",
                "straggler_wait")


def shape_of(values) -> tuple:
    """The broadcast shape of ``values`` (numbers and arrays), reading an array's ``shape`` directly.

    >>> shape_of([1.0, np.zeros((2, 1)), np.zeros(3)]), shape_of([1, 2.0])
    ((2, 3), ())
    """
    shapes = [x.shape if isinstance(x, np.ndarray) else () if isinstance(x, (int, float)) else np.shape(x)
              for x in values]
    return np.broadcast_shapes(*shapes) if any(shapes) else ()


# the breakdown's parts that add up to the step (the others are totals or the overlapped share beside them)
STEP_PARTS = ("forward_s", "backward_s", "recompute_s", "tensor_parallel_comm_s", "expert_parallel_comm_s",
              "context_parallel_comm_s", "batch_norm_sync_s", "pipeline_p2p_s", "bubble_s", "data_parallel_exposed_s",
              "embedding_sync_s", "overlap_interference_s", "optimizer_s", "host_wait_s", "straggler_wait_s")


def breakdown(inputs: dict, out: dict) -> dict:
    """Named seconds of a step (the ``estimate`` contract's ``breakdown``) from the inputs and outputs of
    :func:`step_fn`; arrays in, arrays out. The :data:`STEP_PARTS` add up to the step.

    No part is below 0. Three are differences of terms equal by construction when nothing is exposed: the host's
    wait ``m (max(gpu, host) - gpu)``, the overlapped transfers ``total - exposed`` (``exposed = min(total, ...)``)
    and their interference; lambdify evaluates each side with its own order of additions, so that where the two are
    equal the float difference is a rounding residue of either sign (-1.4e-17 s): such a residue is 0."""
    m = inputs["m"]
    out = {**out, **{k: np.maximum(0.0, out[k]) for k in ("host_wait", "dp_interference")}}
    b = {"forward_s": m * inputs["c_f"], "backward_s": m * inputs["c_b"], "recompute_s": m * inputs["c_r"],
         "tensor_parallel_comm_s": m * (inputs["c_tf"] + inputs["c_tb"]),
         "expert_parallel_comm_s": m * (inputs["c_ef"] + inputs["c_eb"]),
         "context_parallel_comm_s": m * (inputs["c_cf"] + inputs["c_cb"]),
         "batch_norm_sync_s": m * (inputs["c_nf"] + inputs["c_nb"]), "pipeline_p2p_s": out["p2p_exposed"],
         "bubble_s": out["bubble"], "data_parallel_comm_s": out["dp_total"],
         "data_parallel_exposed_s": out["dp_exposed"],
         "data_parallel_overlapped_s": np.maximum(0.0, out["dp_total"] - out["dp_exposed"]),
         "embedding_sync_s": inputs["emb"],
         "overlap_interference_s": out["dp_interference"], "optimizer_s": inputs["opt"],
         "host_wait_s": out["host_wait"], "straggler_wait_s": out["straggler_wait"]}
    b["compute_s"] = b["forward_s"] + b["backward_s"] + b["recompute_s"]
    b["communication_s"] = (b["tensor_parallel_comm_s"] + b["expert_parallel_comm_s"] + b["context_parallel_comm_s"]
                            + b["batch_norm_sync_s"] + out["p2p_exposed"] + out["dp_exposed"] + b["embedding_sync_s"])
    return b


__all__ = ["STEP_INPUTS", "STEP_OUTPUTS", "STEP_PARTS", "shape_of", "breakdown"]
