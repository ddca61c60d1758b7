"""The report's last section: the example scenarios shipped with the package, each with the command that runs
it and its headline figures, so that a reader can go from the page to the command line."""
from __future__ import annotations

import html

from .html import Section


def example_rows() -> list[dict]:
    """``name, command, what, result`` of every shipped example (:func:`concurrency_model.scenario.example_names`):
    ``estimate`` for training scenarios, ``infer`` for those with an ``inference`` object."""
    from ..inference import infer
    from ..parallel.estimate import estimate
    from ..scenario import example_names, read_scenario

    rows = []
    for name in example_names():
        raw = read_scenario(name)
        if "inference" in raw:
            r = infer(raw)
            result = (f"first token {r.prefill_s * 1e3:,.1f} ms, {r.decode_s_per_token * 1e3:,.2f} ms a token, "
                      f"{r.tokens_per_s:,.0f} tokens/s on {_gpus(r.to_dict()['gpus'])}, "
                      f"{r.memory_bytes_per_device / 1e9:,.1f} GB each")
        else:
            e = estimate(raw)
            result = (f"{e.step_time_s:.3g} s a step (80% band {e.step_time_p10_s:.3g}-{e.step_time_p90_s:.3g}) on "
                      f"{_gpus(e.scenario.gpus)}, {e.throughput_samples_per_s:,.0f} samples/s, "
                      f"{e.memory_bytes_per_device / 1e9:,.1f} GB each"
                      + (f"; the run {e.run['run_days']:,.1f} days" if e.run else ""))
        rows.append({"name": name, "command": "infer" if "inference" in raw else "estimate", "what": raw["notes"],
                     "result": result})
    return rows


def _gpus(n: int) -> str:
    return f"{n:,} GPU{'s' * (n != 1)}"


def examples_section(figs) -> list:
    rows = example_rows()
    table = ("<table><tr><th>command</th><th>what it is</th><th>the toolkit's answer</th></tr>"
             + "".join(f"<tr><td><code>concurrency-model {r['command']} --scenario {html.escape(r['name'])}</code>"
                       f"</td><td>{html.escape(r['what'])}</td><td>{html.escape(r['result'])}</td></tr>"
                       for r in rows) + "</table>")
    intro = (f"<p>The {len(rows)} example scenarios shipped with the package (<code>concurrency-model presets "
             "scenarios</code>; files under <code>concurrency_model/presets/scenarios/</code>, every field in "
             "<code>docs/scenario.md</code>). Each row's command prints the figures on the right and where they come "
             "from; <code>--set KEY=VALUE</code> changes a field, <code>--compare KEY=VALUE</code> shows the change "
             "beside the scenario as given (<code>estimate --scenario gpt3-175b-3d --compare "
             "training.zero_stage=3</code>). Model only: no measurements in this section.</p>")
    return [Section("examples", "Try it: the example scenarios", intro, tables=[table])]
