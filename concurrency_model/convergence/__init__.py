"""Time to a target quality (issue 40): steps to the target against the global batch, fitted per workload on
MLPerf's reference convergence points or a user's CSV, times the step time.

:mod:`.forms` the closed forms (McCandlish et al. 2018; a three-regime form after Shallue et al. 2018), symbolic in
``B``; :mod:`.points` the data; :mod:`.fit` the fits, the held-out choice of form and the band;
:mod:`.target` a scenario's ``training.target`` and the time, GPU-hours and cost to it.
"""
