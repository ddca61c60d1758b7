"""Where a microbatch's time goes on the slowest pipeline stage, layer by layer and by kind of layer
(``Estimate.layers()``, ``estimate --layers``).

Each layer of the stage that sets the pipeline's pace (:meth:`.features.Workload.stage`) has the seconds of one
microbatch on its device, split as :func:`.features.layer_seconds` splits them (forward, backward, recompute,
tensor-, expert- and context-parallel communication: the sum the stage partition balances), its share of the
stage, and what bounds its kernels: ``compute`` or ``memory`` (the larger term of each kernel's roofline,
weighted by its seconds, :mod:`concurrency_model.timing`) or ``launch`` (kernel launch overhead). The step runs
this for every microbatch and adds what the layers do not have: the bubble, data-parallel communication, the
optimizer and host waits (``Estimate.breakdown``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING

from ..timing.parts import bound_of
from .workload import layer_seconds

if TYPE_CHECKING:  # annotations only
    import pandas as pd


def layer_table(w, stage: dict, recompute: str, c: int, algorithm: str, e: int, b: int, t: int,
                sp: bool) -> pd.DataFrame:
    """One row a layer of the slowest stage of workload ``w`` (``stage``: :meth:`.features.Workload.stage` of
    the layout ``b, t, sp, c, algorithm, e``): ``layer``, ``kind``, the parts of :func:`.features.layer_seconds`,
    ``total_s``, ``share`` of the stage's microbatch and ``bound``; ``attrs``: ``stage`` (its index), ``stages``,
    its ``first_layer`` and ``end_layer`` (exclusive) among the model's and ``microbatch_s``."""
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    lo, hi = stage["slowest"]
    rows = w.layers(b, t, sp, c, algorithm, e)[lo:hi]
    table = pd.DataFrame([{"layer": r["name"], "kind": r["kind"], **layer_seconds(r, recompute),
                           "bound": bound_of(r["f"], r["b"])} for r in rows])
    parts = [k for k in table.columns if k.endswith("_s")]
    table.insert(len(table.columns) - 1, "total_s", table[parts].sum(axis=1))
    table.insert(len(table.columns) - 1, "share", table["total_s"] / table["total_s"].sum())
    # which stage: its index among the pipeline's, and its layers [first_layer, end_layer) of the model's
    table.attrs = {"stage": stage["stages"].index((lo, hi)), "stages": len(stage["stages"]), "first_layer": lo,
                   "end_layer": hi, "microbatch_s": float(table["total_s"].sum())}
    return table


def by_kind(table: pd.DataFrame) -> pd.DataFrame:
    """The layer table summed by ``kind``, largest first: ``layers`` (how many), the seconds, ``share`` and the
    ``bound`` of most of the kind's seconds."""
    seconds = [k for k in table.columns if k.endswith("_s")]
    out = table.groupby("kind", sort=False)[seconds + ["share"]].sum()
    out.insert(0, "layers", table.groupby("kind", sort=False).size())
    out["bound"] = table.groupby(["kind", "bound"], sort=False)["total_s"].sum().unstack().idxmax(axis=1)
    return out.sort_values("total_s", ascending=False).reset_index()
