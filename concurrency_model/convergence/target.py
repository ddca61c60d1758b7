"""A training target (a shipped MLPerf benchmark's curve or a user's CSV) and the time, GPU-hours and cost to it.

``training.target`` in a scenario: ``{"benchmark": NAME}`` (an MLPerf benchmark, :func:`.points.benchmarks`) or
``{"csv": PATH}`` (a user's convergence runs, :func:`.points.from_csv`), or the name or path alone; optionally
``"unit"``, which must equal the curve's (``samples``, ``tokens``, ``epochs``, ...), so that a target meant in one
unit is never read in another.

Time to target = steps(B) x step time (issue 40: the steps from the fitted curve at the scenario's global batch
``B``, the step time from the estimate; every step of a run has the same shape, as in :mod:`..parallel.run`);
GPU-hours = GPUs x time / 3600; cost = GPU-hours x ``run.price_per_gpu_hour`` where the scenario gives one. The
band is the curve's p10 / p90 times the same step time (the step time's own band is not folded in).
"""
from __future__ import annotations

from functools import lru_cache
from pathlib import Path

from ..checks import did_you_mean, number
from ..parallel.consistency import mean_staleness
from .fit import Curve, fit
from .penalties import LABEL, compression_penalty, steps_with
from .points import benchmarks, from_csv, mlperf

KEYS = ("benchmark", "csv", "unit")


@lru_cache(maxsize=64)
def _mlperf_curve(name: str) -> Curve:
    return fit(mlperf(name))


@lru_cache(maxsize=16)
def _csv_curve(path: str, mtime: float) -> Curve:
    return fit(from_csv(path))


def _key(field: str, key: str) -> str:
    """The name of ``key`` of a target under ``field``: ``training.target.benchmark``, or a CLI flag as it is."""
    return field if field.startswith("--") else f"{field}.{key}"


def curve_of(spec, field: str = "training.target", steps: bool = False) -> Curve:
    """The fitted curve a target names (``ValueError`` naming ``field`` and its key for a bad one; with ``steps``,
    also for a curve whose unit has no known samples per unit, whose steps cannot be derived).

    >>> curve_of({"benchmark": "bert", "unit": "samples"}).points.name
    'bert'
    >>> curve_of({"benchmark": "bert", "unit": "epochs"})
    Traceback (most recent call last):
    ...
    ValueError: training.target.unit: 'epochs' does not match bert's curve, which is in samples
    """
    if isinstance(spec, str):
        spec = {"csv": spec} if spec.lower().endswith(".csv") else {"benchmark": spec}
    if not isinstance(spec, dict):
        raise ValueError(f"{field}: expected an object such as {{\"benchmark\": \"bert\"}} or {{\"csv\": "
                         f"\"runs.csv\"}}, got {spec!r}")
    for k in spec:
        if k not in KEYS:
            raise ValueError(f"{field}.{k}: unknown key{did_you_mean(str(k), KEYS)}; allowed: {', '.join(KEYS)}")
    if ("benchmark" in spec) == ("csv" in spec):
        raise ValueError(f"{field}: give exactly one of benchmark (an MLPerf benchmark: {', '.join(benchmarks())}) "
                         "or csv (a file of convergence runs)")
    if "benchmark" in spec:
        if not isinstance(spec["benchmark"], str):
            raise ValueError(f"{_key(field, 'benchmark')}: expected a name, got {spec['benchmark']!r}")
        mlperf(spec["benchmark"], _key(field, "benchmark"))  # the name checked, with its field
        c = _mlperf_curve(spec["benchmark"])
    else:
        path = Path(str(spec["csv"]))
        if not path.is_file():
            raise ValueError(f"{_key(field, 'csv')}: {path} not found")
        c = _csv_curve(str(path.resolve()), path.stat().st_mtime)
    unit = spec.get("unit")
    if unit is not None and str(unit) != c.points.unit:
        raise ValueError(f"{field}.unit: {unit!r} does not match {c.points.name}'s curve, which is in "
                         f"{c.points.unit}")
    if steps and c.points.samples_per_unit is None:
        raise ValueError(f"{field}: {c.points.name}'s curve is in {c.points.unit} ({c.points.unit_source}) with no "
                         "known samples per unit, so its steps cannot be derived (a CSV can give samples_per_unit)")
    return c


def time_to_target(curve: Curve, batch, step_time_s, gpus, price_per_gpu_hour=None,
                   batch_field: str = "parallel.global_batch") -> dict:
    """Steps, seconds, GPU-hours and cost to the target at global batch ``batch`` with ``step_time_s`` per step on
    ``gpus`` GPUs: each with its p10 / p90 (the curve's band), and the curve's name (``target_curve``), value
    (``value_to_target`` in ``value_to_target_unit``) and form (``target_form``).

    >>> from concurrency_model.convergence.fit import Curve
    >>> from concurrency_model.convergence.points import Points
    >>> import numpy as np
    >>> c = Curve(Points("x", "samples", "samples", np.array([1.0, 2]), np.array([1.0, 2]), ((), ()), 1.0, ""),
    ...           "mccandlish", {"mccandlish": {"E_min": 1e6, "B_noise": 1000.0}}, {}, (0.9, 1.1))
    >>> out = time_to_target(c, 250, 0.5, 8, 2.0)      # E = 1.25e6 samples, 5,000 steps of 0.5 s on 8 GPUs
    >>> out["steps_to_target"], out["time_to_target_s"], out["gpu_hours_to_target"], out["cost_to_target"]
    (5000.0, 2500.0, 5.555555555555555, 11.11111111111111)
    """
    p = curve.predict(batch, batch_field)
    if p["steps_to_target"] is None:
        raise ValueError(f"training.target: {curve.points.name}'s curve is in {curve.points.unit} with no known "
                         "samples per unit, so its steps cannot be derived")
    step = number("step_time_s", step_time_s)
    n = number("gpus", gpus)
    steps = p["steps_to_target"]
    lo, hi = curve.band
    out = {"target_curve": curve.points.name, "value_to_target": p["value_to_target"],
           "value_to_target_unit": p["unit"], "target_form": p["form"], "steps_to_target": steps,
           "steps_to_target_p10": steps * lo,
           "steps_to_target_p90": steps * hi, "time_to_target_s": steps * step,
           "time_to_target_p10_s": steps * lo * step, "time_to_target_p90_s": steps * hi * step,
           "gpu_hours_to_target": steps * step * n / 3600}
    if price_per_gpu_hour is not None:
        out["cost_to_target"] = out["gpu_hours_to_target"] * number("run.price_per_gpu_hour", price_per_gpu_hour,
                                                                    low_ok=True)
    return out


def penalty_of(training, replicas: int) -> list | None:
    """The step penalties (:mod:`.penalties`, model only) of a scenario's consistency model and gradient compression
    over ``replicas`` data-parallel replicas: ``ssp`` a staleness of its bound ``s``, ``asynchronous`` the mean
    staleness ``P - 1`` (:func:`concurrency_model.parallel.consistency.mean_staleness`), ``training.compression``
    as :func:`.penalties.compression_penalty` maps it; ``None`` where neither has one (synchronous SGD, local SGD:
    no model, :mod:`.penalties`; an uncompressed or unmodelled scheme). ``training``: a scenario's
    :class:`~concurrency_model.scenario.Training` (not imported: the scenario sits above this layer).

    >>> from concurrency_model.scenario import Training
    >>> penalty_of(Training(consistency="ssp", staleness=2), 8)
    [{'kind': 'staleness', 'tau': 2.0}]
    >>> penalty_of(Training(compression="topk"), 8)
    [{'kind': 'error_feedback', 'delta': 0.001}]
    >>> penalty_of(Training(consistency="local_sgd", local_steps=4), 8) is None
    True
    """
    out = []
    mode = training.consistency
    if mode == "ssp":
        out.append({"kind": "staleness", "tau": float(training.staleness)})
    if mode == "asynchronous":
        out.append({"kind": "staleness", "tau": float(mean_staleness(replicas))})
    comp = compression_penalty(training.compression, replicas)
    if comp is not None:
        out.append(comp)
    return out or None


def with_penalty(curve: Curve, out: dict, batch, step_time_s, gpus, penalty) -> dict:
    """``out`` of :func:`time_to_target` with the penalised steps and time beside it, labelled model only
    (McCandlish's parameters of the curve: ``S_min = E_min k / B_noise``, ``k`` the samples per unit). ``penalty``:
    one penalty (a dict) or several (a list: staleness and compression together), whose factors on the steps
    multiply (our assumption [D]: no published model combines them).

    >>> from concurrency_model.convergence.fit import Curve
    >>> from concurrency_model.convergence.points import Points
    >>> import numpy as np
    >>> c = Curve(Points("x", "samples", "samples", np.array([1.0, 2]), np.array([1.0, 2]), ((), ()), 1.0, ""),
    ...           "mccandlish", {"mccandlish": {"E_min": 1e5, "B_noise": 1000.0}}, {}, (1.0, 1.0))
    >>> o = with_penalty(c, time_to_target(c, 1000, 1.0, 8), 1000, 1.0, 8, {"kind": "staleness", "tau": 1.0})
    >>> o["steps_to_target"], o["steps_to_target_model_only"], o["convergence_penalty"]
    (200.0, 300.0, 'staleness tau=1.0 (model only)')
    >>> two = [{"kind": "staleness", "tau": 1.0}, {"kind": "error_feedback", "delta": 0.5}]
    >>> o = with_penalty(c, time_to_target(c, 1000, 1.0, 8), 1000, 1.0, 8, two)  # 200 x 1.5 x 1.5
    >>> o["steps_to_target_model_only"], o["convergence_penalty"]
    (450.0, 'staleness tau=1.0; error_feedback delta=0.5 (model only)')
    """
    p = curve.params["mccandlish"]
    k = curve.points.samples_per_unit
    s_min = p["E_min"] * k / p["B_noise"]
    plain = float(steps_with("staleness", s_min, p["B_noise"], float(batch)))
    factor, words = 1.0, []
    for one in ([penalty] if isinstance(penalty, dict) else list(penalty)):
        params = {key: v for key, v in one.items() if key != "kind"}
        kw = {key: params[key] for key in ("tau", "delta", "omega", "workers") if key in params}
        factor *= float(steps_with(one["kind"], s_min, p["B_noise"], float(batch), **kw)) / plain
        words.append(f"{one['kind']} " + " ".join(f"{key}={v}" for key, v in params.items()))
    # the kept form's steps times the penalties' factors on McCandlish's, so that they scale the curve in use
    steps = out["steps_to_target"] * factor
    return {**out, "convergence_penalty": "; ".join(words) + f" ({LABEL})",
            "steps_to_target_model_only": steps, "time_to_target_model_only_s": steps * step_time_s,
            "gpu_hours_to_target_model_only": steps * step_time_s * gpus / 3600}


__all__ = ["curve_of", "time_to_target", "penalty_of", "with_penalty", "KEYS"]
