"""Concurrency of hyperparameter and architecture search (paper §7.5, ``parallel.search``): hand values,
properties (one worker is serial, work does not depend on the strategy, more workers never slow a search),
bad input."""
import pytest
import sympy as sp
from hypothesis import given, settings
from hypothesis import strategies as st

from concurrency_model.cost import Cost
from concurrency_model.parallel.search import evolution, independent_trials, search_seconds, smbo

TRIAL = Cost(flop=6, depth=5)


def test_hand_values():
    # 12 trials of W = 6, D = 5: random search is as deep as one trial, SMBO with 4 proposals 3 rounds,
    # evolution of 4 generations of 3 four rounds
    assert (independent_trials(TRIAL, 12).flop, independent_trials(TRIAL, 12).depth) == (72, 5)
    assert (smbo(TRIAL, 12, 4).flop, smbo(TRIAL, 12, 4).depth) == (72, 15)
    assert (evolution(TRIAL, 4, 3).flop, evolution(TRIAL, 4, 3).depth) == (72, 20)
    assert smbo(TRIAL, 12, 4).average_parallelism == sp.Rational(72, 15)
    # 12 one-hour trials on 5 workers: 3 waves; SMBO q = 4: 3 rounds of 1 wave + 60 s of proposal fitting
    assert search_seconds("grid", 3600.0, 12, 5) == 3 * 3600.0
    assert search_seconds("smbo", 3600.0, 12, 5, q=4, proposal_s=60.0) == 3 * (3600.0 + 60.0)
    assert search_seconds("evolution", 3600.0, 12, 2, population=3) == 4 * 2 * 3600.0


def test_symbolic():
    n, q, w, d = sp.symbols("n q w d", positive=True, integer=True)
    c = smbo(Cost(flop=w, depth=d), n, q)
    assert c.flop == n * w and c.depth == d * sp.ceiling(n / q)


@settings(max_examples=60, deadline=None)
@given(trials=st.integers(1, 200), workers=st.integers(1, 64), q=st.integers(1, 32),
       population=st.integers(1, 32), strategy=st.sampled_from(["random", "smbo", "evolution"]))
def test_properties(trials, workers, q, population, strategy):
    kw = {"q": q, "population": population}
    t = search_seconds(strategy, 1.0, trials, workers, **kw)
    # one worker runs the trials one after another
    serial = search_seconds(strategy, 1.0, trials, 1, **kw)
    assert serial == trials
    # more workers never slow it down, and it is never faster than its depth in trials
    assert search_seconds(strategy, 1.0, trials, workers + 1, **kw) <= t <= serial
    depth = {"random": 1, "smbo": -(-trials // q), "evolution": -(-trials // population)}[strategy]
    assert t >= depth
    # the work does not depend on the strategy
    assert smbo(TRIAL, trials, q).flop == independent_trials(TRIAL, trials).flop == trials * TRIAL.flop


@pytest.mark.parametrize("call, field", [
    (lambda: search_seconds("bayes", 1.0, 10, 2), "strategy"),
    (lambda: search_seconds("smbo", 1.0, 10, 2), "q"),
    (lambda: search_seconds("smbo", 1.0, 10, 2, q=0), "q"),
    (lambda: search_seconds("evolution", 1.0, 10, 2), "population"),
    (lambda: search_seconds("grid", 0.0, 10, 2), "trial_s"),
    (lambda: search_seconds("grid", 1.0, 0, 2), "trials"),
    (lambda: search_seconds("grid", 1.0, 10, 0), "workers"),
    (lambda: smbo(TRIAL, 10, 0), "parallel"),
    (lambda: evolution(TRIAL, 2, -1), "population"),
])
def test_bad_input_names_the_field(call, field):
    with pytest.raises(ValueError, match=f"^{field}"):
        call()
