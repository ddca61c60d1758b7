"""The result of a sweep (:func:`concurrency_model.sweep.sweep`): the feasible layouts, the hardware grid and the
step time of every (layout, hardware point), with the fastest, the Pareto fronts, the scenario of any row (so
that ``estimate`` reproduces it), its 80% band and the ``sweep --json`` object."""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..parallel.runtime import default_framework
from ..scenario import load_scenario
from ..training.step_parts import STEP_PARTS
from ..training.estimate import estimate
from ..training.prepare import prepare, step_band
from ..training.run import run_cost

SCALES = ("flops", "mem_bw", "launch", "intra_bw", "inter_bw")
#: what makes two configurations different layouts (not a variant of one: microbatch, recompute, schedule); a sweep
#: over several runtimes (``training.framework`` a list) adds the runtime (:attr:`SweepResult.layout_key`)
LAYOUT_KEY = ("gpus", "data", "tensor", "pipeline", "context", "expert", "zero_stage")


@dataclass
class SweepResult:
    """Feasible layouts (``layouts``: one row each, with ``memory_bytes_per_device``), hardware points
    (``hardware``: one row of scales each) and ``step_time_s[i, j]`` of layout i on point j."""

    layouts: pd.DataFrame
    hardware: pd.DataFrame
    step_time_s: np.ndarray
    evaluated: int
    rejected: dict
    compile_s: float
    eval_s: float
    base: dict = field(repr=False)
    busy_s: np.ndarray | None = field(default=None, repr=False)  # seconds in kernels a step (run only)
    # estimates of rows' scenarios already made (:meth:`estimate_of`), keyed by the scenario's repr
    _estimates: dict = field(default_factory=dict, init=False, repr=False, compare=False)

    @classmethod
    def of_runtimes(cls, results: dict) -> SweepResult:
        """One result of the sweeps of one scenario under several runtimes (``{framework: SweepResult}``, each
        over the same GPU counts and hardware grid): their layouts in one table with a ``framework`` column, their
        counts and seconds added."""
        parts = list(results.items())
        first = parts[0][1]
        layouts = pd.concat([r.layouts.assign(framework=fw) for fw, r in parts], ignore_index=True)
        busy = None if first.busy_s is None else np.vstack([r.busy_s for _, r in parts])
        rejected = {}
        for _, r in parts:
            for k, v in r.rejected.items():
                rejected[k] = rejected.get(k, 0) + v
        return cls(layouts, first.hardware, np.vstack([r.step_time_s for _, r in parts]),
                   sum(r.evaluated for _, r in parts), rejected, sum(r.compile_s for _, r in parts),
                   sum(r.eval_s for _, r in parts), first.base, busy)

    @property
    def layout_key(self) -> tuple:
        """The columns that make two configurations different layouts: :data:`LAYOUT_KEY`, and the runtime in a
        sweep over several."""
        return LAYOUT_KEY + (("framework",) if "framework" in self.layouts.columns else ())

    @property
    def feasible(self) -> int:
        return int(self.step_time_s.size)

    @property
    def elapsed_s(self) -> float:
        return self.compile_s + self.eval_s

    @property
    def configs_per_s(self) -> float:
        """Configurations evaluated per second after compilation, the rejected ones counted (the contract's
        ``configs_per_s``; the same as :attr:`evaluated_per_s`)."""
        return self.evaluated_per_s

    @property
    def evaluated_per_s(self) -> float:
        """Configurations evaluated per second of evaluation, those rejected before it (layout rules, memory)
        counted."""
        return self.evaluated / self.eval_s if self.eval_s > 0 else float("inf")

    @property
    def feasible_per_s(self) -> float:
        """Feasible configurations (those given a step time) per second of evaluation."""
        return self.feasible / self.eval_s if self.eval_s > 0 else float("inf")

    def rows(self, flat_index) -> pd.DataFrame:
        """Configurations by flat index into ``step_time_s`` (layout columns, scales, step time)."""
        i, j = np.unravel_index(np.asarray(flat_index), self.step_time_s.shape)
        df = self.layouts.iloc[i].reset_index(drop=True)
        hw = self.hardware.iloc[j].reset_index(drop=True)
        df = pd.concat([df, hw], axis=1)
        df.insert(len(df.columns), "step_time_s", self.step_time_s[i, j])
        if self.busy_s is not None:
            for k, v in self._run(i, j).items():
                df[k] = v
        return df

    def _run(self, i, j) -> dict:
        """Run days, GPU-hours, cost and energy of configurations (layout i, hardware point j)."""
        step = self.step_time_s[i, j]
        lay = self.layouts.iloc[i]
        out = run_cost(self.base["run"], step, (lay["data"] * lay["microbatch_size"] * lay["microbatches"]).to_numpy(),
                       lay["gpus"].to_numpy(), self.busy_s[i, j] / step, self.base["board_power_w"],
                       self.base["seq_len"])
        return {k: v for k, v in out.items() if v is not None}

    def top(self, k: int = 10) -> pd.DataFrame:
        """The ``k`` fastest configurations, fastest first."""
        flat = self.step_time_s.ravel()
        k = min(k, flat.size)
        idx = np.argpartition(flat, k - 1)[:k] if k < flat.size else np.arange(flat.size)
        return self.rows(idx[np.argsort(flat[idx], kind="stable")])

    @property
    def frame(self) -> pd.DataFrame:
        """Every feasible configuration (can be large: ``feasible`` rows)."""
        return self.rows(np.arange(self.feasible))

    def pareto(self, cost: str = "gpus") -> pd.DataFrame:
        """Configurations no other beats on both step time and ``cost``: a layout column (e.g. ``gpus``) or,
        for a scenario with a ``run``, ``gpu_hours``, ``cost`` or ``energy_kwh``; the fastest for each cost,
        kept while it is faster than every cheaper one."""
        flat = self.step_time_s.ravel()
        n_hw = self.step_time_s.shape[1]
        if cost in self.layouts.columns:
            c = np.repeat(self.layouts[cost].to_numpy(dtype=float), n_hw)
        elif self.busy_s is not None and cost in ("gpu_hours", "cost", "energy_kwh", "run_days"):
            i, j = np.unravel_index(np.arange(flat.size), self.step_time_s.shape)
            c = self._run(i, j).get(cost)
            if c is None:
                raise ValueError("cost: the scenario's run has no price_per_gpu_hour")
        else:
            raise ValueError(f"cost: unknown {cost!r}; a layout column, or gpu_hours/cost/energy_kwh/run_days "
                             "for a scenario with a run")
        order = np.lexsort((flat, c))
        keep, best = [], np.inf
        for i in order:
            if flat[i] < best:
                if keep and c[keep[-1]] == c[i]:
                    continue
                keep.append(i)
                best = flat[i]
        return self.rows(np.array(keep, dtype=int))

    def scenario(self, row: pd.Series) -> dict:
        """The scenario (scenario-file shape) of one configuration row, so that ``estimate`` reproduces it."""
        par = {k: (bool(row[k]) if k == "sequence_parallel" else str(row[k]) if k in ("schedule", "context_algorithm")
                   else int(row[k]))
               for k in ("data", "tensor", "pipeline", "interleave", "sequence_parallel", "microbatch_size",
                         "schedule", "context", "context_algorithm", "expert")}
        par["global_batch"] = int(row["data"] * row["microbatch_size"] * row["microbatches"])
        given = self.base["parallel"]  # the scenario's fields a layout does not set, where not their defaults
        if given.tensor_layers != "all":
            par["tensor_layers"] = given.tensor_layers
        if given.expert_imbalance != 1.0:
            par["expert_imbalance"] = given.expert_imbalance
        if given.moe_dispatcher != "alltoall":
            par["moe_dispatcher"] = given.moe_dispatcher
        if given.expert_overlap:
            par["expert_overlap"] = True
        if given.stage_split != "balanced":
            par["stage_split"] = given.stage_split
        tr = {**self.base["training"].to_dict(), "recompute": str(row["recompute"]),
              "zero_stage": int(row["zero_stage"])}
        if "framework" in row.index:  # a sweep over several runtimes (:meth:`of_runtimes`)
            tr["framework"] = str(row["framework"])
        out = {"model": self.base["model"], "cluster": self.base["cluster"], "parallel": par, "training": tr}
        if self.base.get("run"):
            out["run"] = self.base["run"].to_dict()
        return out

    def estimate_of(self, row: pd.Series):
        """``estimate(self.scenario(row))``, made once a result and scenario: the report's memory figure estimates the
        fastest configuration of each ZeRO stage and recompute policy, one of which :meth:`runner_up` estimated
        already (the sweep's fastest). The same object is handed back; an estimate is read, never changed.

        >>> from concurrency_model.sweep import sweep
        >>> res = sweep({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"global_batch": 64}}, gpus=8)
        >>> row = res.top(1).iloc[0]
        >>> res.estimate_of(row) is res.estimate_of(row), res.estimate_of(row).step_time_s > 0
        (True, True)
        """
        sc = self.scenario(row)
        key = repr(sc)
        got = self._estimates.get(key)
        if got is None:
            got = self._estimates[key] = estimate(sc)
        return got

    def band(self, row: pd.Series) -> tuple[float, float]:
        """The 80% band (10th, 90th percentile) of one configuration's step time
        (:mod:`concurrency_model.uncertainty`)."""
        sc = load_scenario(self.scenario(row))
        w, stage, state, _, key = prepare(sc)
        return step_band(sc, w, stage, state, key, {k: float(row[k]) for k in SCALES})

    def fastest_per_gpus(self) -> pd.DataFrame:
        """The fastest configuration at each GPU count (over the hardware grid too), fewest GPUs first: what more
        GPUs buy, where :meth:`pareto` keeps only the counts that are faster than every smaller one."""
        return self._fastest_of_each(self.layouts["gpus"].to_numpy())

    def fastest_per_runtime(self) -> pd.DataFrame:
        """The fastest configuration under each runtime of a sweep over several (``training.framework`` a list), in
        the order given; empty for a sweep under one."""
        if "framework" not in self.layouts.columns:
            return self.rows(np.array([], dtype=int))
        names = list(dict.fromkeys(self.layouts["framework"]))  # the order given
        return self._fastest_of_each(self.layouts["framework"].map(names.index).to_numpy())

    def _fastest_of_each(self, group: np.ndarray) -> pd.DataFrame:
        """The fastest configuration of each value of ``group`` (one a layout; over the hardware grid too), in the
        values' order."""
        flat = self.step_time_s.ravel()
        code = np.repeat(group, self.step_time_s.shape[1])
        order = np.lexsort((flat, code))  # by group, then step time: the first of each group is its fastest
        return self.rows(order[np.unique(code[order], return_index=True)[1]])

    def against(self, layout: dict) -> dict | None:
        """The fastest configuration of another layout than ``layout`` (a row or dict with the
        :data:`LAYOUT_KEY` fields), with its estimate: the runner-up of a given configuration (``estimate
        --runner-up``); ``None`` when there is none."""
        flat = self.step_time_s.ravel()
        rows = self.rows(np.argsort(flat, kind="stable"))
        key = [k for k in self.layout_key if k in layout]
        mine = "/".join(str(layout[k]) for k in key)
        other = np.flatnonzero(rows[key].astype(str).agg("/".join, axis=1).to_numpy() != mine)
        if not len(other):
            return None
        row = rows.iloc[other[0]]
        return {**self._row_dict(row), "estimate": estimate(self.scenario(row))}

    def runner_up(self) -> dict | None:
        """The fastest configuration and the fastest of another layout (another :data:`LAYOUT_KEY`: degrees or
        ZeRO stage), each estimated, and what separates them: the breakdown's parts that add up to the step
        (:data:`~concurrency_model.training.step_parts.STEP_PARTS`), runner-up minus best, largest first; the two
        :class:`~concurrency_model.training.estimate.Estimate` in ``estimates``. ``None`` when every feasible
        configuration shares one layout."""
        flat = self.step_time_s.ravel()
        order = np.argsort(flat, kind="stable")
        rows = self.rows(order)
        key = rows[list(self.layout_key)].astype(str).agg("/".join, axis=1)
        other = np.flatnonzero(key.to_numpy() != key.iloc[0])
        if not len(other):
            return None
        best, second = (rows.iloc[i] for i in (0, other[0]))
        eb, es = self.estimate_of(best), self.estimate_of(second)
        diff = sorted(((k, es.breakdown[k] - eb.breakdown[k]) for k in STEP_PARTS), key=lambda kv: -abs(kv[1]))
        return {"best": self._row_dict(best), "runner_up": self._row_dict(second),
                "separates": [{"part": k, "runner_up_minus_best_s": v} for k, v in diff if abs(v) > 1e-12],
                "estimates": (eb, es)}

    def _row_dict(self, r: pd.Series) -> dict:
        """One configuration in the scenario's shape with its step, band, memory and run figures (``to_dict``)."""
        s = self.scenario(r)
        lo, hi = self.band(r)
        tr = dict(s["training"])
        tr["framework"] = tr["framework"] or default_framework(tr["zero_stage"])
        return {"parallel": s["parallel"], "training": tr, "gpus": int(r["gpus"]),
                "step_time_s": float(r["step_time_s"]), "step_time_p10_s": lo, "step_time_p90_s": hi,
                "memory_bytes_per_device": float(r["memory_bytes_per_device"]),
                "memory_p90_bytes_per_device": float(r.get("memory_p90_bytes_per_device",
                                                           r["memory_bytes_per_device"])),
                "memory_at_risk": bool(r.get("memory_at_risk", False)),
                "memory": {k: float(r[k]) for k in ("model_state_bytes", "weights_bytes", "gradients_bytes",
                                                    "optimizer_bytes", "activations_bytes")},
                "hardware_scales": {k: float(r[k]) for k in SCALES},
                **{k: float(r[k]) for k in ("run_steps", "run_days", "gpu_hours", "cost", "energy_kwh") if k in r}}

    def to_dict(self, top: int = 10) -> dict:
        """``best``: the ``top`` fastest configurations; ``per_gpus``: the fastest at each GPU count;
        ``runner_up``: the fastest of another layout and what separates it from the best (:meth:`runner_up`);
        ``frameworks`` and ``per_framework``: the runtimes with a feasible layout and the fastest under each, in a
        sweep over several (:meth:`of_runtimes`, :meth:`fastest_per_runtime`; a runtime that refused the scenario is
        among ``rejected``, with its reason)."""
        ru = self.runner_up()
        searched = list(dict.fromkeys(self.layouts["framework"])) if "framework" in self.layouts.columns else None
        return {"evaluated": self.evaluated, "feasible": self.feasible, "elapsed_s": self.elapsed_s,
                "compile_s": self.compile_s, "eval_s": self.eval_s, "configs_per_s": self.configs_per_s,
                "evaluated_per_s": self.evaluated_per_s, "feasible_per_s": self.feasible_per_s,
                "rejected": self.rejected,
                "best": [self._row_dict(r) for _, r in self.top(top).iterrows()],
                "per_gpus": [self._row_dict(r) for _, r in self.fastest_per_gpus().iterrows()],
                **({"runner_up": {**ru["runner_up"], "separates": ru["separates"]}} if ru else {}),
                **({"frameworks": searched,
                    "per_framework": [self._row_dict(r) for _, r in self.fastest_per_runtime().iterrows()]}
                   if searched else {})}
