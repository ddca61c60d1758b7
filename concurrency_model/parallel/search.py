"""Concurrency of hyperparameter and architecture search (paper §7.5; paper-models §5.5).

A search runs many trainings ("trials"). How many can run at once depends on the strategy, not on the
trials themselves; the paper names the strategies and paper-models §5.5 gives their concurrency [D]:

* ``grid`` / ``random``: every trial is independent: W = sum of the trials' work, D = the deepest trial
  (embarrassingly parallel);
* ``smbo`` (sequential model-based optimisation: Spearmint, TPE, PNAS; also an RL controller that trains
  ``q`` children per update, as NAS does): rounds of ``q`` parallel proposals, each round waiting for the
  previous one's results: ``ceil(trials / q)`` rounds, D = rounds x the trial's depth;
* ``evolution`` (regularized evolution, AmoebaNet): ``generations`` of a population of ``population``
  trials, the population in parallel, the generations in sequence: D = generations x the trial's depth.

Each function takes one trial as a :class:`~concurrency_model.cost.Cost` (its W and D) and returns the
search's :class:`~concurrency_model.cost.Cost`; :func:`search_seconds` gives the wall-clock time of a
search on ``workers`` workers that each run one trial at a time of ``trial_s`` seconds (a trial is not
split across workers here: split it with the other parallelism of this package and give the result as
``trial_s``). The proposal model's own fitting (SMBO, the controller update) is ``proposal_s`` per round.
"""
from __future__ import annotations

import sympy as sp

from ..checks import number
from ..cost import Cost
from ..ops import checks as op_checks

STRATEGIES = ("grid", "random", "smbo", "evolution")


def independent_trials(trial: Cost, trials) -> Cost:
    """Grid or random search: ``trials`` independent trials, W = trials x W_trial, D = D_trial.

    >>> c = independent_trials(Cost(flop=10, depth=4), 8)
    >>> c.flop, c.depth, c.average_parallelism
    (80, 4, 20)
    """
    return trial.repeat(op_checks.size("trials", trials), parallel=True)


def rounds(trials, parallel) -> sp.Expr:
    """Rounds of a search with ``parallel`` trials a round: ``ceil(trials / parallel)`` (numbers or positive
    integer symbols)."""
    return sp.ceiling(op_checks.size("trials", trials) / op_checks.size("parallel", parallel))


def smbo(trial: Cost, trials, q) -> Cost:
    """Sequential model-based optimisation (or an RL controller) with ``q`` parallel proposals a round:
    W = trials x W_trial, D = ceil(trials / q) x D_trial.

    >>> c = smbo(Cost(flop=10, depth=4), 10, 4)
    >>> c.flop, c.depth
    (100, 12)
    """
    t = op_checks.size("trials", trials)
    return trial.repeat(t, parallel=True).with_(depth=rounds(t, q) * trial.depth)


def evolution(trial: Cost, generations, population) -> Cost:
    """Evolutionary search: W = generations x population x W_trial, D = generations x D_trial.

    >>> c = evolution(Cost(flop=10, depth=4), 3, 5)
    >>> c.flop, c.depth
    (150, 12)
    """
    k = op_checks.size("population", population)
    return trial.repeat(k, parallel=True).repeat(op_checks.size("generations", generations))


def search_seconds(strategy: str, trial_s: float, trials: int, workers: int, q: int | None = None,
                   population: int | None = None, proposal_s: float = 0.0) -> float:
    """Wall-clock seconds of a search whose trials each take ``trial_s`` on one worker, on ``workers``.

    * ``grid`` / ``random``: ``ceil(trials / workers)`` waves of trials;
    * ``smbo``: rounds of ``q`` trials (the last one of what is left), each ``ceil(its trials / workers)``
      waves plus ``proposal_s``;
    * ``evolution``: generations of ``population`` trials (the last one of what is left), each
      ``ceil(its trials / workers)`` waves.

    >>> search_seconds("random", 3600.0, 100, 8)        # 13 waves of an hour
    46800.0
    >>> search_seconds("smbo", 3600.0, 100, 8, q=4)     # 25 rounds, 4 of the 8 workers busy
    90000.0
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy: unknown {strategy!r}; allowed: {', '.join(STRATEGIES)}")
    number("trial_s", trial_s), number("proposal_s", proposal_s, low_ok=True)
    op_checks.size("trials", trials), op_checks.size("workers", workers)
    if strategy in ("grid", "random"):
        return float(rounds(trials, workers) * trial_s)
    name, per_round = ("q", q) if strategy == "smbo" else ("population", population)
    if per_round is None:
        raise ValueError(f"{name}: {strategy} needs the trials per round")
    n, k = int(op_checks.size("trials", trials)), int(op_checks.size(name, per_round))
    full, rest = divmod(n, k)
    pause = proposal_s if strategy == "smbo" else 0.0
    seconds = full * (rounds(k, workers) * trial_s + pause)
    if rest:
        seconds += rounds(rest, workers) * trial_s + pause
    return float(seconds)
