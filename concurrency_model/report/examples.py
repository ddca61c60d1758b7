"""The report's last section: the example scenarios shipped with the package, each with the command that runs
it and its headline figures, so that a reader can go from the page to the command line; and where a microbatch
of each training example goes, by kind of layer (``estimate --layers``)."""
from __future__ import annotations

import html

from ..scenario import example_names, read_scenario
from ..serving.decoder import infer
from ..training.estimate import estimate
from ._plot import figure, kind_color
from .html import Section
from .sections import add_figure

SHOWN_KINDS = 6  # kinds a bar names; the rest are "other"


def example_rows() -> list[dict]:
    """``name, command, what, result`` of every shipped example (:func:`concurrency_model.scenario.example_names`):
    ``estimate`` for training scenarios (with the :class:`~concurrency_model.training.estimate.Estimate` as
    ``estimate``), ``infer`` for those with an ``inference`` object."""

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
                     "result": result, "estimate": None if "inference" in raw else e})
    return rows


def layer_kinds_plot(named: list, ax) -> None:
    """One bar a training example (``named``: ``(name, Estimate)``): its slowest stage's microbatch by kind of
    layer (:meth:`~concurrency_model.training.estimate.Estimate.layer_kinds`) as shares, the largest kinds named,
    memory- or launch-bound kinds hatched, the microbatch's milliseconds at the bar's end."""
    from matplotlib.patches import Patch

    tables = [(name, e.layer_kinds(), e.layers().attrs["microbatch_s"]) for name, e in named]
    order = list(dict.fromkeys(k for _, kinds, _ in tables for k in kinds["kind"].iloc[:SHOWN_KINDS]))
    colors = {k: kind_color(k, i) for i, k in enumerate(order)}
    hatches = {"compute": "", "memory": "//", "launch": ".."}
    for y, (name, kinds, seconds) in enumerate(tables):
        top, rest = kinds.iloc[:SHOWN_KINDS], kinds.iloc[SHOWN_KINDS:]
        left = 0.0
        for k in top.itertuples():
            ax.barh(y, k.share, left=left, color=colors[k.kind], edgecolor="white", hatch=hatches[k.bound])
            left += k.share
        ax.barh(y, rest["share"].sum(), left=left, color="lightgray", edgecolor="white")
        ax.text(1.01, y, f"{seconds * 1e3:,.4g} ms", va="center", fontsize=8)
    ax.set(xlim=(0, 1), yticks=range(len(tables)), yticklabels=[n for n, _, _ in tables],
           xlabel="share of one microbatch on the slowest pipeline stage (ms: the microbatch)")
    ax.invert_yaxis()
    handles = [Patch(facecolor=c, label=k) for k, c in colors.items()] + [Patch(facecolor="lightgray", label="other")]
    handles += [Patch(facecolor="white", edgecolor="gray", hatch=hatches[b], label=f"{b}-bound")
                for b in ("memory", "launch")]
    ax.legend(handles=handles, fontsize=7, ncol=6, loc="upper center", bbox_to_anchor=(0.5, -0.2))


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
    named = [(r["name"], r["estimate"]) for r in rows if r["estimate"] is not None]
    fig, ax = figure(11, 0.55 * len(named) + 1.8)
    layer_kinds_plot(named, ax[0][0])
    f = add_figure(figs, "example_layer_kinds", fig, "where a microbatch of each training example goes, by kind of "
                   "layer", "Model only: the slowest pipeline stage's forward, backward, recompute and tensor-, "
                   "expert- and context-parallel communication of one microbatch, by kind of layer "
                   "(<code>estimate --scenario NAME --layers</code>).")
    intro += ("<p>Below, where each training example's microbatch goes on its slowest pipeline stage, by kind of "
              "layer and what bounds it: the roofline's compute term or its memory term, or the kernel launches "
              "(<code>estimate --layers</code>, <code>Estimate.layers()</code>).</p>")
    return [Section("examples", "Try it: the example scenarios", intro, [f], tables=[table])]
