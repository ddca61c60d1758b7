"""Communication cost models: point-to-point and collectives in the alpha-beta(-gamma) model.

Modules (one concern each):

* :mod:`.collectives` — every collective per algorithm (Thakur, Rabenseifner & Gropp 2005; Chan et al.
  2007; NCCL), ``collective_time``, ``ALGORITHMS``, ``OPS``, ``p2p_time``;
* :mod:`.chain` — pipelined chain with k segments and the optimal k*;
* :mod:`.bounds` — Chan et al. 2007 lower bounds, ``lower_bound``;
* :mod:`.paper` — **the paper's** allreduce forms (Ben-Nun & Hoefler §2.5): ``T_tree, T_bfly, T_pipe,
  T_rabe, T_lower``;
* :mod:`.select` — ``auto`` and ``crossover``;
* :mod:`.loggp` — LogGP (Alexandrov et al. 1995) and its mapping to alpha-beta;
* :mod:`.hierarchical` — two-level allreduce / allgather / reduce_scatter (NCCL 2.4 blog);
* :mod:`.bandwidth` — nccl-tests ``algbw`` / ``busbw``.

>>> from concurrency_model.comm import collective_time
>>> collective_time("allreduce", "ring", 1000, 4, 1, 1)
1506
"""
from __future__ import annotations

from .bandwidth import algbw, busbw
from .bounds import lower_bound
from .collectives import ALGORITHMS, OPS, collective_time, p2p_time
from .hierarchical import hierarchical_allgather, hierarchical_allreduce, hierarchical_reduce_scatter
from .select import auto, crossover

__all__ = ["collective_time", "ALGORITHMS", "OPS", "lower_bound", "auto", "crossover", "p2p_time",
           "busbw", "algbw", "hierarchical_allreduce", "hierarchical_allgather",
           "hierarchical_reduce_scatter"]
