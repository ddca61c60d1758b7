"""Closed forms: break-even points and optima of the cost models, solved with sympy.

Each function returns a :class:`Solution`: the symbolic answer (a sympy expression in the canonical
symbols of :mod:`concurrency_model.symbols` and this module's ``T_FIXED, T_SAMPLE, T_COMPUTE,
EFFICIENCY, BUBBLE``, when ``sympy.solve`` finds one) and the number for the given inputs. Where the
answer must be an integer (ranks, microbatches, stages) the continuous root only seeds a search over the
valid integers, which checks the inequality itself, so rounding can never pick an invalid or worse value.

* :func:`crossover_bytes` — message size at which two collective algorithms cost the same
  (:func:`concurrency_model.comm.select.crossover`; costs of Thakur, Rabenseifner & Gropp 2005,
  ``reference/paper-models.md`` §2.2 [D], not the paper's).
* :func:`optimal_microbatches` — the microbatch count minimising a pipeline step (closed forms of
  :func:`concurrency_model.parallel.pipeline.step_time_expr`, Narayanan et al. 2021 §2.2.1-§2.2.2,
  ``training-formulas.md`` §4.2-§4.3 [P]).
* :func:`max_data_parallel` — the largest data-parallel P keeping a target efficiency (the data-parallel
  step of ``paper-models.md`` §4.1 [D]: compute plus the exposed gradient allreduce).
* :func:`bandwidth_to_hide`, :func:`bandwidth_for_time` — the link bandwidth ``1/beta`` at which a
  transfer takes exactly the compute it should hide behind (alpha-beta model, paper-models §1.2).
* :func:`max_pipeline_stages` — the largest p whose bubble fraction stays within a target.

Every optimum and root here is derived in this module [D]; none is a formula of Ben-Nun & Hoefler.
"""
from __future__ import annotations

from .base import BUBBLE, EFFICIENCY, LINK_BW, T_COMPUTE, T_FIXED, T_SAMPLE, Solution
from .collective import bandwidth_for_time, bandwidth_to_hide, crossover_bytes, max_data_parallel
from .pipeline import max_pipeline_stages, optimal_microbatches

__all__ = ["Solution", "crossover_bytes", "optimal_microbatches", "max_data_parallel", "bandwidth_to_hide",
           "bandwidth_for_time", "max_pipeline_stages", "T_FIXED", "T_SAMPLE", "T_COMPUTE", "EFFICIENCY",
           "BUBBLE", "LINK_BW"]
