"""Pipeline parallelism: stage partitioning, schedule step times, bubbles, in-flight counts, timelines.

Sources (tags as in ``shared/reference/training-formulas.md``; the seed paper, Ben-Nun & Hoefler §6.3,
gives **no** bubble or latency formula, so nothing here is "the paper's"):

* Partitioning (:mod:`.partition`): PipeDream's dynamic program (Narayanan et al. 2019, SOSP, §3.1), here
  without its communication and replication terms: contiguous layer ranges minimising the slowest stage.
* GPipe: Huang et al. 2019 §2.3, bubble ``O((K-1)/(M+K-1))`` [S].
* Bubble ``t_pb = (p-1)(t_f+t_b)``, ideal ``t_id = m(t_f+t_b)``, fraction ``(p-1)/m``; PipeDream-Flush /
  1F1B has the same bubble with at most p microbatches in flight (Narayanan et al. 2021 §2.2.1) [P].
* Interleaved 1F1B with v chunks per device: bubble ``(p-1)(t_f+t_b)/v``, "communication also increases
  by v", m a multiple of p (Narayanan et al. 2021 §2.2.2) [P]; operation order from Megatron-LM
  ``forward_backward_pipelining_with_interleaving`` (warm-up ``2(p-r-1) + (v-1)p`` chunk forwards).
* Asynchronous PipeDream (1F1B without flush, weight stashing): no bubble in steady state, one weight
  version per in-flight input (Narayanan et al. 2019 §3.3; 2BW paper §2: "d in the worst case") [P].
* ZB-H1 (Qi et al. 2024, "Zero Bubble Pipeline Parallelism", ICLR, §2-3; as recalled, not in
  ``shared/reference``): the backward split into the input gradient B and the weight gradient W, which no
  other stage waits for, so W fills the drain; bubble ``(p-1)(T_F + T_B - T_W)`` with 1F1B's peak memory.
  Here ``t_b`` is the whole backward (B + W) and ``t_w`` its W: bubble ``max((p-1)(t_f + t_b - t_w) - t_w
  min(m-1, p-1), (p-1) t_f, (p-1)(t_b - t_w))`` [D]: the paper's for ``m >= p`` where ``t_w`` is at most B and
  the forward, no less than the fill of the forward chain or the drain of the B chain, and with fewer
  microbatches than stages only ``m - 1`` W's to fill with (1F1B's bubble at m = 1). A lower bound of the
  event simulation of :func:`timeline` (W run when F and B must wait, or when p microbatches are in flight,
  1F1B's peak), equal to it where F, B and W take the same time and m >= p; on random uniform stages with
  m >= p the simulated step is 0% (median) to 10% longer, with m < p up to 15%.
* Point-to-point terms are [D] (derived here, checked by the event simulation of :func:`timeline`): a
  transfer takes ``t_p2p`` on the link and overlaps compute. GPipe / 1F1B: the fill crosses p-1 stage
  boundaries forward and the drain p-1 backward, ``2(p-1) t_p2p``; interleaved: the first microbatch
  crosses ``vp-1`` device boundaries each way, ``2(vp-1) t_p2p`` (p > 1); async: stage 0 keeps p inputs
  in flight, and each round trip costs ``p(t_f+t_b) + 2(p-1) t_p2p``, so ``m(t_f+t_b) + 2(p-1)(m/p) t_p2p``.
"""
from __future__ import annotations

import numbers
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from ..choices import SCHEDULES
from .. import symbols as S
from ..checks import count
from ..comm.checks import check_name, check_ranks, check_rate, is_num
from .partition import partition, partition_graph  # noqa: F401 (re-exported: pipeline.partition)

if TYPE_CHECKING:  # annotations only
    import pandas as pd

FLUSH = ("gpipe", "1f1b", "interleaved", "zb-h1")  # synchronous schedules: a flush ends every step

T_F = sp.Symbol("t_f", nonnegative=True)  # forward of one microbatch on the slowest stage, s
T_B = sp.Symbol("t_b", nonnegative=True)  # backward of one microbatch on the slowest stage, s
T_P2P = sp.Symbol("t_p2p", nonnegative=True)  # one stage-to-stage activation (or gradient) transfer, s
T_W = sp.Symbol("t_w", nonnegative=True)  # the weight-gradient part of T_B (zb-h1), s

#: runtimes that scatter a stage-boundary activation (and its gradient) over the tensor-parallel ranks: each rank sends
#: ``1 / t`` of the replicated tensor and the receiving stage all-gathers the pieces over its tensor group (the
#: scatter/gather optimisation of Narayanan et al. 2021 §4.1). Megatron: Megatron-DeepSpeed @ 2255b617
#: ``megatron/p2p_communication.py`` (``split_tensor_into_1d_equal_chunks`` before the send,
#: ``gather_split_1d_tensor`` after it, on unless ``--no-scatter-gather-tensors-in-pipeline``; Megatron-LM's of 2021
#: the same). DeepSpeed's pipeline engine: ``pipe_partitioned`` and ``grad_partitioned``, both on by default whenever
#: the model is tensor parallel (microsoft/DeepSpeed @ 38327e0 ``deepspeed/runtime/config.py`` defaults,
#: ``deepspeed/runtime/pipe/engine.py`` ``_exec_forward_pass`` / ``_exec_send_grads``: a ``PartitionedTensor`` of the
#: slice-parallel group, ``.full()`` on receipt; activations partitioned since the engine's first commit, 65c2f974,
#: 2020-09, gradients since e2fdd254, 2021-09, the switch added in c2074b34, 2023-11). ``deepspeed-0.3`` (v0.3.13:
#: ``is_grad_partitioned = False``) sends its gradients whole, and is priced sending whole tensors both ways
SCATTER_GATHER_P2P_RUNTIMES: tuple[str, ...] = ("megatron", "deepspeed")
#: how each runtime's 1F1B exchanges block (:func:`p2p_blocking`): ``BATCHED`` (Megatron: a stage's send and receive
#: of an exchange go out together in one ``batch_isend_irecv``, then ``req.wait()`` and a device ``synchronize()``
#: "to protect against race condition", Megatron-DeepSpeed @ 2255b617 ``_communicate``) or ``SERIAL`` (DeepSpeed's
#: pipeline engine: each ``SendActivation``, ``RecvActivation``, ``SendGrad`` and ``RecvGrad`` command is its own
#: blocking ``dist.send`` / ``dist.recv``, whose ``wait()`` holds the compute stream until the transfer is done,
#: microsoft/DeepSpeed @ 38327e0 ``deepspeed/runtime/pipe/p2p.py``, ``schedule.py`` ``TrainSchedule.steps``; v0.3.13,
#: before torch 1.8's ``send`` / ``recv``, a ``broadcast`` in the two stages' group each, as blocking)
BATCHED, SERIAL = 1, 2
BLOCKING_P2P_RUNTIMES: dict[str, int] = {"megatron": BATCHED, "deepspeed": SERIAL, "deepspeed-0.3": SERIAL}
#: the schedules Megatron runs (NVIDIA/Megatron-LM @ d98e8a6 ``megatron/core/pipeline_parallel/schedules.py``:
#: ``forward_backward_pipelining_without_interleaving``, 1F1B, and ``..._with_interleaving``) and ZB-H1, whose
#: implementation is a fork of Megatron-LM (Qi et al. 2024, sail-sg/zero-bubble-pipeline-parallelism, as recalled);
#: DeepSpeed's engine runs 1F1B only (its ``TrainSchedule``); GPipe's and PipeDream's are other runtimes'
#: (torchgpipe, PipeDream), whose exchanges this model does not block
MEGATRON_SCHEDULES: tuple[str, ...] = ("1f1b", "interleaved", "zb-h1")

__all__ = ["SCHEDULES", "SCATTER_GATHER_P2P_RUNTIMES", "BLOCKING_P2P_RUNTIMES", "BATCHED", "SERIAL",
           "MEGATRON_SCHEDULES", "p2p_scatter_gather", "p2p_blocking", "blocking_p2p_transfers",
           "blocking_p2p_factor",
           "partition", "partition_graph", "step_time_expr", "step_time", "bubble_time",
           "bubble_fraction", "bubble_fraction_of_step", "in_flight_microbatches", "timeline",
           "plot_timeline", "T_F", "T_B", "T_P2P", "T_W"]


def p2p_scatter_gather(framework: str) -> bool:
    """Whether ``training.framework`` sends a pipeline boundary activation scattered over the tensor-parallel ranks:
    each of the ``t`` ranks sends its ``1 / t`` of the tensor to its peer on the next stage, which all-gathers
    the ``t`` pieces over the tensor group: the runtimes of :data:`SCATTER_GATHER_P2P_RUNTIMES` (Megatron's and
    DeepSpeed's pipeline engine). The ideal model and FSDP send the whole tensor [D].

    >>> p2p_scatter_gather("megatron"), p2p_scatter_gather("deepspeed"), p2p_scatter_gather("ideal")
    (True, True, False)
    """
    return framework in SCATTER_GATHER_P2P_RUNTIMES


def p2p_blocking(framework: str, schedule: str = "1f1b") -> int:
    """How ``training.framework`` blocks on the pipeline exchanges of ``schedule``: 0 (they overlap compute),
    :data:`BATCHED` (Megatron, on the schedules of :data:`MEGATRON_SCHEDULES`) or :data:`SERIAL` (DeepSpeed's
    pipeline engine, 1F1B); the step then pays :func:`blocking_p2p_factor` times the transfers of the ideal
    schedule.

    >>> p2p_blocking("megatron"), p2p_blocking("deepspeed"), p2p_blocking("fsdp"), p2p_blocking("megatron", "gpipe")
    (1, 2, 0, 0)
    """
    kind = BLOCKING_P2P_RUNTIMES.get(framework, 0)
    return kind if kind == SERIAL or schedule in MEGATRON_SCHEDULES else 0


def blocking_p2p_transfers(p, m, kind=BATCHED):
    """Stage-to-stage transfers on a 1F1B step's critical path when every exchange blocks (:func:`p2p_blocking`'s
    ``kind``), for ``p > 1`` stages and ``m`` microbatches [D: derived from each runtime's order of operations, and
    equal to an event simulation of it in which each transfer holds both stages for one ``t_p2p``,
    tests/training/test_p2p_scatter_gather.py]:

    * ``BATCHED`` (Megatron): a middle stage's steady state is forward, exchange with the next stage
      (``send_forward_recv_backward``), backward, exchange with the previous one (``send_backward_recv_forward``),
      two transfers a microbatch: ``max(2(m + p) - 5, 2(p - 1))``. With two stages each exchange joins the only
      two stages, one a microbatch: ``m + 1``.
    * ``SERIAL`` (DeepSpeed's ``TrainSchedule``): a forward step sends the last gradient to the previous stage and
      then receives the activation from it, a backward step receives the gradient from the next stage and then
      sends it the activation, each its own blocking call: four a microbatch, ``max(4m + 2p - 8, 2(p - 1))``;
      with two stages, ``2m``. Each is priced as one transfer of :meth:`.Workload.p2p`; what that leaves out: the
      engine sends a small meta tensor before each partitioned one (one more latency), and gathers three times a
      microbatch (the received activation and gradient, and its own output again for the backward,
      ``_exec_backward_pass``) where four transfers price four gathers.

    The schedule's compute is not lengthened by either (the same event simulation with instant transfers gives
    ``(m + p - 1)(t_f + t_b)``: each exchange joins stages that alternate forward and backward, not a lock
    step). Numbers, numpy arrays (per layout) and sympy expressions in ``m``.

    >>> blocking_p2p_transfers(4, 8), blocking_p2p_transfers(4, 8, SERIAL), blocking_p2p_transfers(2, 8)
    (19, 32, 9)
    >>> blocking_p2p_transfers(4, sp.Symbol("m", positive=True))
    Max(6, 2*m + 3)
    """
    if any(isinstance(x, np.ndarray) for x in (p, m, kind)):
        p, m, kind = np.asarray(p, dtype=float), np.asarray(m, dtype=float), np.asarray(kind)
        where, top = np.where, np.maximum
    else:  # numbers, or m a symbol of the step's expression
        top = sp.Max if isinstance(m, sp.Basic) or isinstance(p, sp.Basic) else max
        where = lambda two, a, b: a if two else b  # noqa: E731 (np.where's order, for numbers)
    batched = where(p == 2, m + 1, top(2 * (m + p) - 5, 2 * (p - 1)))
    serial = where(p == 2, 2 * m, top(4 * m + 2 * p - 8, 2 * (p - 1)))
    return where(kind == SERIAL, serial, batched)


def blocking_p2p_factor(p, m, v=1, kind=BATCHED):
    """How many times the ideal schedule's stage-to-stage transfers (``2(p - 1)``, fill and drain, the others
    overlapping compute: :func:`step_time_expr`) a 1F1B step pays when every exchange blocks:
    :func:`blocking_p2p_transfers` over ``2(p - 1)``. 1 for one stage (no transfer) and for the interleaved schedule
    (``v > 1``): Megatron-LM overlaps its transfers there by default (NVIDIA/Megatron-LM @ d98e8a6,
    ``megatron/training/arguments.py``: ``--no-overlap-p2p-communication`` stores False into ``overlap_p2p_comm``,
    which only a non-interleaved schedule turns off; ``argument_utils.py``: ``batch_p2p_comm = not
    overlap_p2p_comm``; ``megatron/core/pipeline_parallel/p2p_communication.py``: ``torch.cuda.synchronize()`` only
    with ``batch_p2p_comm and batch_p2p_sync``). Numbers, numpy arrays (per layout) and sympy expressions in ``m``.

    >>> blocking_p2p_factor(4, 8), blocking_p2p_factor(4, 8, 1, SERIAL), blocking_p2p_factor(4, 8, 2)
    (3.1666666666666665, 5.333333333333333, 1)
    """
    if any(isinstance(x, np.ndarray) for x in (p, v, kind)):
        p = np.asarray(p, dtype=float)
        x = blocking_p2p_transfers(np.maximum(p, 2), m, np.asarray(kind)) / (2 * np.maximum(p - 1, 1))
        return np.where((np.asarray(v) == 1) & (p > 1), x, 1.0)
    return blocking_p2p_transfers(p, m, kind) / (2 * (p - 1)) if v == 1 and p > 1 else 1


# -- closed forms -------------------------------------------------------------------------------------
def step_time_expr(schedule: str) -> sp.Expr:
    """Step time of one schedule as a sympy expression in ``p, m, v`` (:mod:`concurrency_model.symbols`)
    and ``t_f, t_b, t_p2p`` (this module's ``T_F, T_B, T_P2P``).

    * gpipe, 1f1b: ``(m + p - 1)(t_f + t_b) + 2(p - 1) t_p2p`` (Narayanan et al. 2021 §2.2.1 [P]; p2p
      term [D]). Exact for GPipe; for 1F1B with ``t_p2p > 0`` a lower bound, because the ``p - stage``
      inputs in flight cannot hide the round trip (the simulation in :func:`timeline` shows the excess).
    * interleaved: ``(m + (p - 1)/v)(t_f + t_b) + 2(vp - 1) t_p2p`` for p > 1 (§2.2.2 [P]; p2p [D]).
    * async (PipeDream, no flush): steady state ``m(t_f + t_b) + 2(p - 1)(m/p) t_p2p`` (bubble 0 [P]; p2p
      [D]: the round trip of stage 0's window of p inputs).
    * zb-h1: ``m(t_f + t_b) + max((p-1)(t_f + t_b - t_w) - t_w min(m-1, p-1), (p-1) t_f, (p-1)(t_b - t_w))
      + 2(p - 1) t_p2p`` (module doc).

    >>> step_time_expr("gpipe")
    t_p2p*(2*p - 2) + (t_b + t_f)*(m + p - 1)
    """
    check_name("schedule", schedule, SCHEDULES)
    p, m, v = S.p, S.m, S.v
    if schedule in ("gpipe", "1f1b"):
        return (m + p - 1) * (T_F + T_B) + 2 * (p - 1) * T_P2P
    if schedule == "interleaved":
        return (m + (p - 1) / v) * (T_F + T_B) + 2 * (v * p - 1) * sp.Min(1, p - 1) * T_P2P
    if schedule == "zb-h1":
        return m * (T_F + T_B) + _zb_bubble(p, m, T_F, T_B, T_W) + 2 * (p - 1) * T_P2P
    return m * (T_F + T_B) + 2 * (p - 1) * m / p * T_P2P


def _zb_bubble(p, m, t_f, t_b, t_w):
    """ZB-H1's bubble (module doc); ``t_b`` includes ``t_w``."""
    return sp.Max((p - 1) * (t_f + t_b - t_w) - t_w * sp.Min(m - 1, p - 1), (p - 1) * t_f, (p - 1) * (t_b - t_w))


def _times(t_f, t_b, t_w) -> tuple:
    tf, tb, tw = check_rate("t_f", t_f), check_rate("t_b", t_b), check_rate("t_w", t_w)
    if is_num(tw) and is_num(tb) and tw > tb:
        raise ValueError(f"t_w: the weight gradient is part of the backward t_b = {tb}; got {tw}")
    return tf, tb, tw


def _check(schedule: str, p, m, v, need_numbers: bool = False) -> tuple:
    check_name("schedule", schedule, SCHEDULES)
    p, m, v = check_ranks(p, "p"), check_ranks(m, "m"), check_ranks(v, "v")
    if need_numbers and not (is_num(p) and is_num(m) and is_num(v)):
        raise ValueError("p, m, v: the simulation needs numbers, not symbols")
    if schedule != "interleaved" and not (is_num(v) and v == 1):
        raise ValueError(f"v: only the interleaved schedule takes v chunks per device; {schedule!r} needs v=1")
    if schedule == "interleaved" and is_num(p) and is_num(m) and int(m) % int(p):
        # Narayanan et al. 2021 §2.2.2; Megatron-LM asserts num_microbatches % pipeline size == 0
        raise ValueError(f"m: the interleaved schedule needs m to be a multiple of p={p}, got m={m}")
    return p, m, v


def _out(x: sp.Expr):
    if is_num(x):
        return int(x) if x.is_integer else float(x)
    return x


def step_time(schedule: str, p, m, t_f, t_b, v=1, t_p2p=0, t_w=0):
    """Seconds of one training step (compute and exposed stage-to-stage transfers; no optimizer, no
    data-parallel reduction) for ``m`` microbatches on ``p`` stages; see :func:`step_time_expr` (``t_w``:
    the weight-gradient part of ``t_b``, which only zb-h1 moves).

    Numbers give a Python number; any symbol gives a sympy expression.

    >>> step_time("gpipe", 4, 8, 1, 2), step_time("1f1b", 4, 8, 1, 2), step_time("interleaved", 4, 8, 1, 2, v=2)
    (33, 33, 28.5)
    >>> step_time("async", 4, 8, 1, 2), step_time("zb-h1", 4, 8, 1, 2, t_w=1)  # a third of 1F1B's bubble
    (24, 27)
    """
    p, m, v = _check(schedule, p, m, v)
    tf, tb, tw = _times(t_f, t_b, t_w)
    vals = {T_F: tf, T_B: tb, T_W: tw, T_P2P: check_rate("t_p2p", t_p2p), S.p: p, S.m: m, S.v: v}
    return _out(step_time_expr(schedule).xreplace(vals))


def bubble_time(schedule: str, p, m, t_f, t_b, v=1, t_w=0):
    """Idle compute time of a step: ``(p-1)(t_f+t_b)`` (gpipe, 1f1b; Narayanan 2021 §2.2.1),
    ``(p-1)(t_f+t_b)/v`` (interleaved, §2.2.2), 0 (async, steady state), zb-h1's (module doc).

    >>> bubble_time("1f1b", 4, 8, 1, 2), bubble_time("interleaved", 4, 8, 1, 2, v=2)
    (9, 4.5)
    >>> bubble_time("zb-h1", 4, 8, 1, 2, t_w=1)
    3
    """
    p, m, v = _check(schedule, p, m, v)
    tf, tb, tw = _times(t_f, t_b, t_w)
    if schedule == "async":
        return 0
    if schedule == "zb-h1":
        return _out(_zb_bubble(p, m, tf, tb, tw))
    return _out((p - 1) * (tf + tb) / v)


def bubble_fraction(schedule: str, p, m, v=1):
    """Bubble as a fraction of the **ideal** time ``m(t_f+t_b)``, Narayanan et al. 2021's definition
    (§2.2.1, §2.2.2 [P]): ``(p-1)/m``; interleaved ``(p-1)/(v m)``; async 0.

    >>> bubble_fraction("gpipe", 4, 8), bubble_fraction("interleaved", 4, 8, 2)
    (0.375, 0.1875)
    """
    p, m, v = _check(schedule, p, m, v)
    _not_zb(schedule)
    return 0 if schedule == "async" else _out((p - 1) / (v * m))


def bubble_fraction_of_step(schedule: str, p, m, v=1):
    """Bubble as a fraction of the **whole step** ``t_pb/(t_id + t_pb)``: ``(p-1)/(m+p-1)`` (GPipe's
    form, Huang et al. 2019 §2.3 [S]; training-formulas §4.2 [D]); interleaved ``(p-1)/(v m + p - 1)``;
    async 0.

    >>> bubble_fraction_of_step("1f1b", 4, 8), bubble_fraction_of_step("interleaved", 4, 8, 2)
    (0.2727272727272727, 0.15789473684210525)
    """
    p, m, v = _check(schedule, p, m, v)
    _not_zb(schedule)
    return 0 if schedule == "async" else _out((p - 1) / (v * m + p - 1))


def _not_zb(schedule: str) -> None:
    if schedule == "zb-h1":
        raise ValueError("schedule: zb-h1's bubble depends on the weight-gradient share of the backward, not on p, m "
                         "and v alone; use bubble_time or step_time with t_w")


def in_flight_microbatches(schedule: str, p, m, v=1, stage=0):
    """Peak microbatches whose activations a stage holds (forward done, backward not yet), in units of
    one microbatch through the whole stage (all its chunks):

    * gpipe: ``m`` (Narayanan et al. 2021 §2.2.1: GPipe stashes all m);
    * 1f1b: ``min(p - stage, m)`` (warm-up of ``p - stage - 1`` forwards, then one more before the first
      backward; §2.2.1 "p or fewer");
    * interleaved: ``min(2(p - stage - 1) + (v - 1)p + 1, m v) / v`` chunk-microbatches of 1/v of the stage
      (Megatron-LM's warm-up count); for stage 0 and m > p this is ``p (1 + (p-1)/(p v))``, Korthikanti
      et al. 2022 §4.2.3's factor;
    * async: ``p - stage``, also the number of weight versions stashed (PipeDream weight stashing);
    * zb-h1: ``min(p, m)`` on every stage (1F1B's peak; a later stage keeps inputs until their deferred W,
      :func:`timeline`).

    >>> [in_flight_microbatches("1f1b", 4, 8, stage=s) for s in range(4)]
    [4, 3, 2, 1]
    >>> in_flight_microbatches("interleaved", 4, 8, v=2, stage=0)
    5.5
    """
    p, m, v = _check(schedule, p, m, v)
    if isinstance(stage, bool) or not isinstance(stage, (numbers.Integral, sp.Basic)):
        raise ValueError(f"stage: must be an integer from 0 to p-1, got {stage!r}")
    stage = sp.sympify(stage)
    if is_num(stage) and (not stage.is_integer or stage < 0 or (is_num(p) and stage >= p)):
        raise ValueError(f"stage: must be an integer from 0 to p-1={p - 1}, got {stage}")
    if schedule == "gpipe":
        x = m
    elif schedule == "1f1b":
        x = sp.Min(p - stage, m)
    elif schedule == "async":
        x = p - stage
    elif schedule == "zb-h1":
        x = sp.Min(p, m)
    else:
        x = sp.Min(2 * (p - stage - 1) + (v - 1) * p + 1, m * v) / v
    return _out(x)


# -- event simulation ---------------------------------------------------------------------------------
def _order(schedule: str, p: int, m: int, v: int, s: int) -> list[tuple[str, int, int]]:
    """Operations ``(kind, microbatch, chunk)`` of stage ``s`` in execution order."""
    if schedule == "gpipe":  # all forwards, then all backwards (Huang et al. 2019, Fig. 2)
        return [("F", i, 0) for i in range(m)] + [("B", i, 0) for i in range(m)]
    if schedule in ("1f1b", "async"):  # PipeDream-Flush: warm-up p-s-1 forwards, 1F1B, drain
        w = min(p - s - 1, m)
        ops = [("F", i, 0) for i in range(w)]
        for i in range(m - w):
            ops += [("F", w + i, 0), ("B", i, 0)]
        return ops + [("B", i, 0) for i in range(m - w, m)]
    # interleaved: Megatron-LM forward_backward_pipelining_with_interleaving; virtual microbatch k runs
    # microbatch (k // pv) p + k % p, forward chunk (k % pv) // p, backward chunk v - 1 - that
    total = m * v

    def mb(k):
        return (k // (p * v)) * p + k % p

    def ch(k):
        return (k % (p * v)) // p

    w = min(2 * (p - s - 1) + (v - 1) * p, total)
    ops = [("F", mb(k), ch(k)) for k in range(w)]
    for i in range(total - w):
        ops += [("F", mb(w + i), ch(w + i)), ("B", mb(i), v - 1 - ch(i))]
    return ops + [("B", mb(k), v - 1 - ch(k)) for k in range(total - w, total)]


def _simulate(schedule, p, m, v, tf, tb, c) -> list[tuple]:
    """Each stage runs its operations in order, each as soon as its input is there: forward of virtual
    stage g = chunk*p + s after forward of g-1, backward of g after backward of g+1 (or after its own
    forward on the last virtual stage); ``c`` seconds are added when the input comes from another device."""
    ops = [_order(schedule, p, m, v, s) for s in range(p)]
    end: dict[tuple, float] = {}
    free, ptr, events = [0.0] * p, [0] * p, []
    n = sum(map(len, ops))
    while len(events) < n:
        progress = False
        for s in range(p):
            while ptr[s] < len(ops[s]):
                kind, i, chunk = ops[s][ptr[s]]
                g = chunk * p + s
                if kind == "F":
                    dep = ("F", i, g - 1) if g > 0 else None
                else:
                    dep = ("B", i, g + 1) if g < v * p - 1 else ("F", i, g)
                if dep is not None and dep not in end:
                    break
                start = free[s] if dep is None else max(free[s], end[dep] + (c if dep[2] % p != s else 0.0))
                stop = start + (tf if kind == "F" else tb) / v
                end[(kind, i, g)] = free[s] = stop
                events.append((s, i, kind, chunk, start, stop))
                ptr[s] += 1
                progress = True
        if not progress:  # cannot happen for the orders above; guards future schedules
            raise RuntimeError(f"schedule {schedule!r} deadlocks")
    return events


def _simulate_zb(p, m, tf, tb, tw, c) -> list[tuple]:
    """ZB-H1 (module doc): each stage runs its forwards and input-gradient backwards B in 1F1B's order, each as
    soon as its input is there, and a pending weight gradient W (first come, first served) whenever the next F
    or B must wait, or before a forward that would put more than ``p`` microbatches in flight (1F1B's peak);
    the rest of the W's at the end. ``tb`` is B + W."""
    ops = [[(k, i) for k, i, _ in _order("1f1b", p, m, 1, s)] for s in range(p)]
    end: dict[tuple, float] = {}
    free, ptr, held, waiting, events = [0.0] * p, [0] * p, [0] * p, [[] for _ in range(p)], []
    dur = {"F": tf, "B": tb - tw, "W": tw}
    while True:
        best = None
        for s in range(p):
            if ptr[s] < len(ops[s]):
                kind, i = ops[s][ptr[s]]
                dep = (("F", i, s - 1) if s > 0 else None) if kind == "F" else \
                    ("B", i, s + 1) if s < p - 1 else ("F", i, s)
                start = free[s] if dep is None else max(free[s], end[dep] + c * (dep[2] != s)) if dep in end \
                    else float("inf")
                full = kind == "F" and held[s] >= p
                if waiting[s] and (start > free[s] or full):
                    cand = (free[s], s, "W", waiting[s][0])
                elif full:
                    continue
                else:
                    cand = (start, s, kind, i)
            elif waiting[s]:
                cand = (free[s], s, "W", waiting[s][0])
            else:
                continue
            if best is None or cand[0] < best[0]:
                best = cand
        if best is None:
            return events
        start, s, kind, i = best
        if start == float("inf"):  # cannot happen for 1F1B's order; guards changes
            raise RuntimeError("schedule 'zb-h1' deadlocks")
        if kind == "W":
            waiting[s].pop(0)
            held[s] -= 1
        else:
            ptr[s] += 1
            held[s] += kind == "F"
            if kind == "B":
                waiting[s].append(i)
        end[(kind, i, s)] = free[s] = start + dur[kind]
        events.append((s, i, kind, 0, start, free[s]))


def timeline(schedule: str, p: int, m: int, t_f: float, t_b: float, v: int = 1, t_p2p: float = 0.0,
             steps: int = 1, t_w: float = 0.0) -> pd.DataFrame:
    """Event simulation of a schedule: one row per operation, ``stage, step, microbatch, kind ('F'/'B'; zb-h1
    also 'W', the weight gradient ``t_w`` split off the backward ``t_b``), chunk, start_s, end_s``, sorted by
    stage and start.

    Stages are uniform (each forward ``t_f/v`` per chunk, backward ``t_b/v``); a transfer between devices
    delays the receiver by ``t_p2p`` and overlaps compute. Synchronous schedules repeat ``steps`` times
    with a flush in between (optimizer ignored); ``async`` runs ``steps * m`` microbatches as one
    stream without a flush, so its steady-state period (``steps >= 3``) is the step time.

    >>> df = timeline("1f1b", 4, 8, 1.0, 2.0)
    >>> float(df["end_s"].max()), float(timeline("zb-h1", 4, 8, 1.0, 2.0, t_w=1.0)["end_s"].max())
    (33.0, 27.0)
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    p, m, v = (int(x) for x in _check(schedule, p, m, v, need_numbers=True))
    count("steps", steps)
    tf, tb, tw = (float(x) for x in _times(t_f, t_b, t_w))
    c = float(check_rate("t_p2p", t_p2p))
    if 2 * p * m * v * steps > 2_000_000:
        raise ValueError("m: p * m * v * steps is too large to simulate (over 1e6 microbatch-chunks)")
    cols = ["stage", "step", "microbatch", "kind", "chunk", "start_s", "end_s"]
    rows = []
    if schedule == "async":
        for s, i, kind, chunk, a, b in _simulate(schedule, p, m * steps, v, tf, tb, c):
            rows.append((s, i // m, i % m, kind, chunk, a, b))
    else:
        ev = _simulate_zb(p, m, tf, tb, tw, c) if schedule == "zb-h1" else _simulate(schedule, p, m, v, tf, tb, c)
        span = max(e[5] for e in ev)
        for k in range(steps):
            rows += [(s, k, i, kind, chunk, a + k * span, b + k * span) for s, i, kind, chunk, a, b in ev]
    return pd.DataFrame(rows, columns=cols).sort_values(["stage", "start_s"], kind="stable").reset_index(drop=True)


def plot_timeline(df: pd.DataFrame, ax=None):
    """Gantt chart of a :func:`timeline` frame (stage 0 on top; forward blue, backward orange, a split-off
    weight gradient green, later chunks lighter). Returns the Axes.

    >>> import matplotlib; matplotlib.use("Agg")
    >>> ax = plot_timeline(timeline("gpipe", 2, 2, 1.0, 2.0))
    >>> ax.get_xlabel()
    'time (s)'
    """
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 0.5 + 0.4 * max(1, df["stage"].nunique() if len(df) else 1)))
    colors = {"F": "tab:blue", "B": "tab:orange", "W": "tab:green"}
    vmax = int(df["chunk"].max()) + 1 if len(df) else 1
    label = len(df) <= 400
    for r in df.itertuples(index=False):
        w = r.end_s - r.start_s
        ax.barh(r.stage, w, left=r.start_s, height=0.8, color=colors[r.kind],
                alpha=1.0 - 0.5 * r.chunk / max(1, vmax - 1) if vmax > 1 else 1.0, edgecolor="white", linewidth=0.5)
        if label:
            ax.text(r.start_s + w / 2, r.stage, str(r.microbatch), ha="center", va="center", fontsize=7)
    ax.set_yticks(sorted(df["stage"].unique()) if len(df) else [])
    ax.invert_yaxis()
    ax.set_ylabel("stage")
    ax.set_xlabel("time (s)")
    from matplotlib.patches import Patch

    kinds = {"F": "forward", "B": "backward" if "W" not in set(df["kind"]) else "input gradient",
             "W": "weight gradient"}
    ax.legend(handles=[Patch(color=colors[k], label=kinds[k]) for k in kinds if k in set(df["kind"]) or k != "W"],
              loc="upper right", fontsize=7)
    return ax
