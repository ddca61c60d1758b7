"""Pipeline stage partitioning: contiguous layer ranges that minimise the slowest stage, or Megatron-Core's
even split of the decoder layers.

Source: PipeDream's dynamic program (Narayanan et al. 2019, SOSP, §3.1), here without its communication
and replication terms (:func:`partition`, ``parallel.stage_split`` ``balanced``). :mod:`.pipeline` re-exports it.

``parallel.stage_split`` ``layers`` (:func:`layer_split`): Megatron-Core's default, the ``L`` decoder layers split
evenly, ``L / p`` a stage, the embedding on the first stage and the output layer with the loss on the last, on top
of their layers (NVIDIA/Megatron-LM @ 2a75ac12, the commit Megatron-Bridge @ 067f987d pins, ``megatron/core/
transformer/transformer_block.py`` ``get_num_layers_to_build``: ``num_layers / pipeline_model_parallel_size``
unless ``pipeline_model_parallel_layout``, ``num_layers_in_first/last_pipeline_stage`` or
``account_for_embedding/loss_in_pipeline_split`` are set; Megatron-Core asserts the division). With virtual
stages each stage holds ``v`` chunks of ``L / (p v)`` layers, the same ``L / p`` in all; the contiguous split
stands for them (the same cost where the layers are alike).

``parallel.stage_split`` a list (:func:`.stage_layout.check_stage_layout`): Megatron-Core's
``pipeline_model_parallel_layout`` as decoder layers per virtual stage, ``p x v`` entries in its order (entry ``i``
on pipeline rank ``i mod p``, the rank's chunk ``i // p``), the embedding with the first entry's layers and the
output layer with the last's, with the multi-token prediction modules and the loss (NVIDIA/Megatron-LM @ 2a75ac12
``docs/user-guide/features/pipeline_parallel_layout.md`` and
``megatron/core/transformer/pipeline_parallel_layer_layout.py``, entry ``vpp_rank x p + pp_rank``: a layout of ``E``,
``t``, ``m`` and ``L`` entries per virtual stage). The MTP modules and the loss are taken to sit on the last rank, as
the layouts the DeepSeek-V3 recipes set put them (NVIDIA-NeMo/Megatron-Bridge @ 067f987d
``src/megatron/bridge/recipes/deepseek/h100/deepseek_v3.py`` ``_get_deepseek_v3_pipeline_layout``); Megatron-Core
also allows them on a rank of their own and stages without decoder layers, which this count cannot say. A rank runs
``sum(layout[r::p])`` layers, taken as the contiguous run of that many (:func:`layer_split` ``layout``; exact where a
rank's chunks hold alike layers, as DeepSeek-V3's three dense layers all fall in the first chunk). Its slowest rank
can be slower than the balanced cut: DeepSeek-V3 on 8 stages, ``[8] * 7 + [5]`` layers a rank, puts 5 layers, the MTP
module and two output heads on the last.
"""
from __future__ import annotations

import bisect
from typing import Sequence, TYPE_CHECKING

import numpy as np

from ..checks import count, number
from ..timing.graph import layer_times

if TYPE_CHECKING:  # annotations only
    import pandas as pd

__all__ = ["partition", "partition_graph", "layer_split"]


_PLAIN = (float, int, np.float64, np.float32, np.int64, np.int32)  # not bool: number() refuses it


def _costs(stage_costs) -> list[float]:
    """``stage_costs`` as floats, each checked as :func:`~concurrency_model.checks.number` checks it (``ValueError``
    naming the first bad one); the common case, finite non-negative floats or integers, in one numpy pass."""
    stage_costs = list(stage_costs)
    if all(type(c) in _PLAIN for c in stage_costs):
        a = np.asarray(stage_costs, dtype=float)
        if np.isfinite(a).all() and (a >= 0).all():
            return a.tolist()
    return [number(f"stage_costs[{i}]", c, low_ok=True) for i, c in enumerate(stage_costs)]


def partition(stage_costs: Sequence[float], stages: int) -> list[tuple[int, int]]:
    """Contiguous ``[start, stop)`` layer ranges that minimise the slowest stage's time.

    PipeDream's dynamic program (Narayanan et al. 2019 §3.1), compute only: ``A(j, k) = min_i max(A(i,
    k-1), sum(cost[i:j]))``, O(L^2 p). Among the optimal partitions a second pass picks the one with the
    smallest sum of squared stage times (the most balanced), so uniform layers split evenly.

    >>> partition([1, 1, 1, 1, 1, 1, 1, 1], 4)
    [(0, 2), (2, 4), (4, 6), (6, 8)]
    >>> partition([5, 1, 1, 1, 1, 1], 2)
    [(0, 1), (1, 6)]
    """
    costs = _costs(stage_costs)  # seconds
    L = len(costs)
    k_max = count("stages", stages, high=L)  # at most one stage a layer
    pre = np.concatenate([[0.0], np.cumsum(costs)])
    inf = np.inf
    # pass 1: the smallest bottleneck. Greedy filling up to a cap B succeeds in <= k stages exactly when
    # some partition has bottleneck <= B; bisect B, then read the bottleneck off the greedy partition
    # (the same value as the dynamic program's A(L, p), found in O(p log L) per probe); the bisection stops
    # at a relative width of 1e-9, where the greedy partition at the upper end is within 1e-9 of the optimum
    prefix = pre.tolist()

    def greedy_max(cap):
        start, worst = 0, 0.0
        for _ in range(k_max):
            stop = min(bisect.bisect_right(prefix, prefix[start] + cap) - 1, L)
            if stop <= start:
                return inf
            worst = max(worst, prefix[stop] - prefix[start])
            start = stop
            if start == L:
                return worst
        return inf
    # bounds: no stage can be cheaper than the dearest layer or the mean; greedy filling to mean + dearest
    # always fits in k stages (each full stage exceeds the mean)
    lo = max(max(costs), pre[L] / k_max)
    hi = min(pre[L], pre[L] / k_max + max(costs))
    for _ in range(200):
        mid = (lo + hi) / 2
        if not lo < mid < hi or hi - lo <= 1e-9 * hi:
            break
        if greedy_max(mid) < inf:
            hi = mid
        else:
            lo = mid
    bottleneck = greedy_max(hi) if greedy_max(lo) == inf else greedy_max(lo)
    cap = bottleneck * (1 + 1e-12) + 1e-300
    # pass 2: among partitions whose every stage is <= cap, the smallest sum of squares (balance); for
    # each stage count k, all ends j at once over the window of starts i whose stage fits the cap
    sq = np.full((k_max + 1, L + 1), inf)
    arg = np.zeros((k_max + 1, L + 1), dtype=int)
    sq[0, 0] = 0.0
    j_all = np.arange(L + 1)
    lo_i = np.searchsorted(pre, pre - cap, side="left")
    width = int((j_all - lo_i).max()) + 1
    for k in range(1, k_max + 1):
        j = j_all[k:]
        i = np.maximum(lo_i[k:], k - 1)[:, None] + np.arange(width)[None, :]
        ok = i < j[:, None]
        i = np.where(ok, i, 0)
        seg = pre[j][:, None] - pre[i]
        cand = np.where(ok & (seg <= cap), sq[k - 1, i] + seg ** 2, inf)
        n = np.argmin(cand, axis=1)
        sq[k, k:] = cand[np.arange(len(j)), n]
        arg[k, k:] = i[np.arange(len(j)), n]
    out, j = [], L
    for k in range(k_max, 0, -1):
        i = int(arg[k, j])
        out.append((i, j))
        j = i
    return out[::-1]


def layer_split(unit_layers: Sequence[int | None], stages: int, split="layers") -> list[tuple[int, int]]:
    """Megatron-Core's split of the decoder layers (module doc): ``[start, stop)`` ranges of units, ``unit_layers``
    naming each unit's decoder layer (``None``: a unit outside them, the embedding before the first layer or the output
    layer after the last, which stays with its neighbour's stage). ``split``: ``layers``, ``L / p`` a rank
    (``ValueError`` naming ``parallel.stage_split`` unless the ``stages`` divide the layers); ``counted``, the embedding
    and the loss counted as a layer each, ``(L + 2) / p`` a rank, the first and the last one fewer
    (``account_for_embedding_in_pipeline_split`` and ``account_for_loss_in_pipeline_split``, NVIDIA/Megatron-LM @
    2a75ac12 ``megatron/core/transformer/transformer_block.py`` ``get_num_layers_to_build``; ``ValueError`` unless the
    stages divide ``L + 2``); or a layout (:func:`.stage_layout.check_stage_layout`), ``sum(layout[r::stages])`` on
    rank ``r`` (``ValueError`` unless its entries are a multiple of the stages and add up to the decoder layers).

    >>> layer_split([None, 0, 0, 1, 1, 2, 2, 3, 3, None], 2)   # embedding, 4 layers of 2 units, output layer
    [(0, 5), (5, 10)]
    >>> layer_split([None, 0, 1, 2, None], 2)
    Traceback (most recent call last):
    ...
    ValueError: parallel.stage_split: 'layers' splits the decoder layers evenly; 2 stages do not divide 3 layers
    >>> layer_split([None, 0, 1, 2, None], 2, (2, 1))   # 2 layers and the embedding, 1 layer and the output layer
    [(0, 3), (3, 5)]
    >>> layer_split([None, 0, 1, 2, 3, 4, None], 2, (2, 1, 1, 1))   # rank 0: entries 0 and 2, rank 1: 1 and 3
    [(0, 4), (4, 7)]
    >>> layer_split([None, 0, 1, 2, 3, 4, 5, None], 2, "counted")   # (6 + 2) / 2 = 4 a rank, 3 beside the ends
    [(0, 4), (4, 8)]
    """
    k = count("stages", stages)
    layers = sorted({x for x in unit_layers if x is not None})
    n = len(layers)
    if not n:
        what = f"'{split}'" if isinstance(split, str) else "a layout"
        raise ValueError(f"parallel.stage_split: {what} cuts a transformer's decoder layers; this model has none "
                         "(balanced cuts any model)")
    if split == "layers":
        if n % k:
            raise ValueError(f"parallel.stage_split: 'layers' splits the decoder layers evenly; {k} stages do not "
                             f"divide {n} layers")
        per_rank = [n // k] * k
    elif split == "counted":
        if (n + 2) % k:
            raise ValueError(f"parallel.stage_split: 'counted' splits the decoder layers, the embedding and the loss "
                             f"evenly; {k} stages do not divide {n} + 2")
        per_rank = [(n + 2) // k] * k
        per_rank[0] -= 1
        per_rank[-1] -= 1
    else:
        if len(split) % k:
            raise ValueError(f"parallel.stage_split: a layout of {len(split)} virtual stages on {k} pipeline stages")
        if sum(split) != n:
            raise ValueError(f"parallel.stage_split: the layout holds {sum(split)} decoder layers; the model has {n}")
        per_rank = [sum(split[r::k]) for r in range(k)]
    if min(per_rank) < 1:
        raise ValueError(f"parallel.stage_split: pipeline rank {per_rank.index(min(per_rank))} holds no decoder layer")
    first = np.cumsum([0] + per_rank)  # the rank of layer i: the last rank whose first layer is at most i
    rank = {x: int(np.searchsorted(first, i, side="right")) - 1 for i, x in enumerate(layers)}
    stage, out = 0, []
    for x in unit_layers:  # units outside the layers keep the stage of the unit before them (the first: stage 0)
        stage = stage if x is None else rank[x]
        out.append(stage)
    return [(out.index(s), len(out) - out[::-1].index(s)) for s in range(k)]


def partition_graph(graph, stages: int, device, dtype: str = "fp32") -> pd.DataFrame:
    """Partition a :class:`~concurrency_model.graph.Graph` into pipeline stages by layer time.

    Layer times come from :func:`concurrency_model.timing.graph.layer_times` (forward, and backward =
    grad-input + grad-weight). One row per stage: ``stage, start, stop, first_layer, last_layer, layers,
    forward_s, backward_s, time_s``; the slowest stage's ``forward_s`` / ``backward_s`` are the
    ``t_f`` / ``t_b`` of :func:`~.pipeline.step_time`.

    >>> from concurrency_model import get_model
    >>> df = partition_graph(get_model("lenet5", batch=8), 2, "v100-sxm2-32gb")
    >>> list(df["stage"]), int(df["layers"].sum()) == len(get_model("lenet5", batch=8).layers())
    ([0, 1], True)
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built

    lt = layer_times(graph, device, dtype)
    fwd = lt["forward_s"].to_numpy(float)
    bwd = (lt["grad_input_s"] + lt["grad_weight_s"]).to_numpy(float)
    rows = []
    for s, (a, b) in enumerate(partition(list(fwd + bwd), stages)):
        f, bw = float(fwd[a:b].sum()), float(bwd[a:b].sum())
        rows.append({"stage": s, "start": a, "stop": b, "first_layer": lt["name"].iloc[a],
                     "last_layer": lt["name"].iloc[b - 1], "layers": b - a, "forward_s": f,
                     "backward_s": bw, "time_s": f + bw})
    return pd.DataFrame(rows)
