"""``concurrency-model estimate --scenario FILE``: step time, breakdown and memory of a training scenario."""
from __future__ import annotations

from ..parallel.runtime import MEMORY_PARTS as PARTS
from ..training.estimate import MEMORY_PARTS, estimate
from ..training.step_parts import STEP_PARTS
from . import add_json, add_scenario, positive_int, scenario_of
from .compare import add_compare, compared, print_rows


def run(a) -> dict:
    raw = scenario_of(a)
    if a.target is not None:  # --target NAME_OR_CSV: training.target (issue 40)
        raw = {**raw, "training": {**(raw.get("training") or {}), "target": a.target}}
    if a.compare:
        if a.sensitivities or a.layers:
            raise ValueError(f"--compare: not with {'--sensitivities' if a.sensitivities else '--layers'}")
        return compared(raw, a.compare, estimate)
    e = estimate(raw)
    out = e.to_dict()
    if a.layers:  # the slowest stage, one microbatch: by kind, then its slowest layers
        table = e.layers()
        out["slowest_stage"] = dict(table.attrs)
        out["layer_kinds"] = e.layer_kinds().to_dict(orient="records")
        out["layers"] = table.nlargest(a.layers, "total_s").to_dict(orient="records")
    if a.runner_up:
        from ..sweep import runner_up
        ru = runner_up(raw)
        if ru:
            out["runner_up"] = {**ru["runner_up"], "separates": ru["separates"], "faster": ru["faster"]}
    if a.sensitivities:
        from ..training.sensitivity import bound_by, sensitivities
        out["sensitivities"] = sensitivities(raw).to_dict(orient="records")
        out["bound_by"] = bound_by(raw)
    return out


# what the runtime (training.framework) adds to the memory, in words (:mod:`..parallel.allocator` prices each)
RUNTIME_PARTS = {f"{k}_bytes": k.replace("_", " ") for k in PARTS}


def _breakdown(step: float, b: dict) -> None:
    """The parts that add up to the step with their shares, then what ran hidden beside them and the totals."""
    print("where the step goes (these add up to it):")
    for k in STEP_PARTS:
        if b[k]:
            print(f"  {k:<28} {b[k]:>10.4g} s  {b[k] / step:>6.1%}")
    if b["data_parallel_overlapped_s"]:
        print(f"  hidden behind the backward pass: {b['data_parallel_overlapped_s']:.4g} s of the "
              f"{b['data_parallel_comm_s']:.4g} s of data-parallel communication")
    zero = sum(1 for k in STEP_PARTS if not b[k])
    print(f"  compute_s {b['compute_s']:.4g} s, communication_s (exposed) {b['communication_s']:.4g} s"
          + (f"; {zero} parts are 0 (--json lists every key)" if zero else ""))


def _layers(out: dict) -> None:
    """The slowest stage's microbatch by kind of layer, then its slowest layers (``--layers``)."""
    st = out["slowest_stage"]
    where = f"stage {st['stage'] + 1} of {st['stages']}, " if st["stages"] > 1 else ""
    print(f"one microbatch on the slowest stage ({where}layers {st['first_layer']}-{st['end_layer'] - 1}): "
          f"{st['microbatch_s'] * 1e3:.4g} ms")
    print(f"  {'kind':<20} {'layers':>6} {'ms':>10} {'share':>7}  bound")
    for r in out["layer_kinds"]:
        print(f"  {r['kind']:<20} {r['layers']:>6} {r['total_s'] * 1e3:>10.4g} {r['share']:>7.1%}  {r['bound']}")
    print(f"the {len(out['layers'])} slowest layers (ms: forward / backward / recompute / communication):")
    for r in out["layers"]:
        comm = r["tensor_comm_s"] + r["expert_comm_s"] + r["context_comm_s"]
        print(f"  {r['layer']:<28} {r['kind']:<14} {r['total_s'] * 1e3:>9.4g} {r['share']:>7.1%}  {r['bound']:<8} "
              f"{r['forward_s'] * 1e3:.3g} / {r['backward_s'] * 1e3:.3g} / {r['recompute_s'] * 1e3:.3g} / "
              f"{comm * 1e3:.3g}")


def _microbatches(p: dict) -> str:
    m = p["global_batch"] // (p["data"] * p["microbatch_size"])
    return f"{m} microbatch{'es' * (m != 1)} of {p['microbatch_size']} a replica"


def _layout(out: dict) -> str:
    """The devices and how the work is split over them, in words."""
    p = out["parallel"]
    how = "rows, halo exchange" if p.get("context_split") == "rows" else p.get("context_algorithm")
    ctx = f" x context {p['context']} ({how})" if p.get("context", 1) > 1 else ""
    fc = " (fully connected layers only)" if p.get("tensor_layers") == "fc" and p["tensor"] > 1 else ""
    tr = out.get("training") or {}
    lora = f", LoRA rank {tr['lora_rank']}" + (f" on a {tr['lora_base_dtype']} base" if tr.get("lora_base_dtype")
                                                 else "") if tr.get("lora_rank") else ""
    f = p.get("expert_imbalance_factor", 1.0)
    moe = f", experts split over {p['expert']} replicas" + (f" (busiest device {f:.3f}x the mean rows)" if f != 1
                                                              else "") if p.get("expert", 1) > 1 else ""
    zero = f", ZeRO-{tr['zero_stage']}" if tr.get("zero_stage") else ""
    runtime = f" under {tr['framework']}{zero}" if tr.get("framework") else ""
    return (f"{out['gpus']} x {out['device']} (data {p['data']} x tensor {p['tensor']}{fc} x pipeline "
            f"{p['pipeline']}{ctx}{moe}, {p['schedule']}{lora}{runtime}; {_microbatches(p)})")


def show(out: dict) -> None:
    if "compare" in out:
        show_compare(out)
        return
    print(f"step {out['step_time_s']:.4g} s (80% band {out['step_time_p10_s']:.4g}-{out['step_time_p90_s']:.4g}) on "
          f"{_layout(out)}: {out['throughput_samples_per_s']:,.1f} samples/s, "
          f"{out['achieved_flops_per_device'] / 1e12:,.1f} TFLOP/s per device")
    m = out["memory"]
    parts = ", ".join(f"{label} {m[k] / 1e9:,.2f}" for k, label in {**MEMORY_PARTS, **RUNTIME_PARTS}.items()
                      if m.get(k))
    upper = out.get("memory_p90_bytes_per_device", out["memory_bytes_per_device"])
    band = "" if upper == out["memory_bytes_per_device"] else \
        f" (band to {upper / 1e9:,.2f} GB with the allocator's headroom and measured peaks' spread)"
    print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB{band} of {m['capacity_bytes'] / 1e9:,.0f} "
          f"GB ({parts} GB)")
    if out.get("memory_at_risk"):
        print(f"at risk: {out['memory_risk'].removeprefix('memory: ')}")
    if "run_days" in out:  # a run object: its keys sit beside the step's (DESIGN.md contract)
        r = out
        cost = f", cost {r['cost']:,.0f} {r['currency']}" if r.get("cost") is not None else ""
        print(f"run: {r['run_steps']:,} steps, {r['run_days']:,.2f} days, {r['gpu_hours']:,.0f} GPU-hours{cost}, "
              f"{r['energy_kwh']:,.0f} kWh")
        if "expected_failures" in r:
            print(f"  with failures: {r['expected_failures']:,.1f} expected, a checkpoint every "
                  f"{r['checkpoint_interval_s'] / 60:,.1f} min ({r['failure_free_days']:,.2f} days without failures)")
    if "time_to_target_s" in out:  # training.target: time to a quality target (issue 40)
        cost = f", cost {out['cost_to_target']:,.0f} {out['currency']}" if "cost_to_target" in out else ""
        print(f"to {out['target_curve']}'s target: {out['steps_to_target']:,.0f} steps ({out['value_to_target']:,.4g} "
              f"{out['value_to_target_unit']}, {out['target_form']} curve), {out['time_to_target_s'] / 3600:,.3g} h "
              f"(80% band {out['time_to_target_p10_s'] / 3600:,.3g}-{out['time_to_target_p90_s'] / 3600:,.3g}), "
              f"{out['gpu_hours_to_target']:,.4g} GPU-hours{cost}")
        if "steps_to_target_model_only" in out:
            print(f"  with {out['convergence_penalty']}: {out['steps_to_target_model_only']:,.0f} steps, "
                  f"{out['time_to_target_model_only_s'] / 3600:,.3g} h")
    for note in out.get("notes", []):
        print(f"note: {note}")
    _breakdown(out["step_time_s"], out["breakdown"])
    if "layer_kinds" in out:
        _layers(out)
    if "runner_up" in out:
        ru = out["runner_up"]
        p, t = ru["parallel"], ru["training"]
        how = "a faster layout" if ru["faster"] else "runner-up (the fastest other layout)"
        print(f"{how} on these {ru['gpus']} GPUs: data {p['data']} x tensor {p['tensor']} x pipeline {p['pipeline']}, "
              f"microbatch {p['microbatch_size']}, {p['schedule']}, ZeRO-{t['zero_stage']} ({t['framework']}): "
              f"{ru['step_time_s']:.4g} s; what separates it (its seconds minus these):")
        for x in ru["separates"][:4]:
            print(f"  {x['runner_up_minus_best_s']:>+10.4g} s  {x['part']}")
    if "sensitivities" in out:
        print(f"{out['bound_by']}; elasticities d ln T / d ln x:")
        for r in out["sensitivities"]:
            print(f"  {r['elasticity']:>+8.3f}  {r['what']}")


COMPARED = (("step_time_s", "step s", 1), ("throughput_samples_per_s", "samples/s", 1),
            ("achieved_flops_per_device", "TFLOP/s per device", 1e-12))
RUN = (("run_days", "run days"), ("gpu_hours", "GPU-hours"), ("cost", "cost"), ("energy_kwh", "kWh"))


def show_compare(out: dict) -> None:
    """The scenario and the scenario with the --compare settings, side by side: headline, step parts, memory."""
    base, other = out["base"], out["changed"]
    print(f"base:    {_layout(base)}")
    print(f"changed: {_layout(other)}  [{' '.join(out['compare'])}]")
    rows = [(label, base[k] * f, other[k] * f) for k, label, f in COMPARED]
    rows += [(k, base["breakdown"][k], other["breakdown"][k]) for k in STEP_PARTS
             if base["breakdown"][k] or other["breakdown"][k]]
    rows += [(f"{label} GB", base["memory"][k] / 1e9, other["memory"][k] / 1e9)
             for k, label in {**MEMORY_PARTS, "total_bytes": "memory"}.items()]
    rows += [(f"{label} {base['currency']}" if k == "cost" else label, base[k], other[k]) for k, label in RUN
             if base.get(k) is not None and other.get(k) is not None]
    print_rows(rows)


def register(sub) -> None:
    e = sub.add_parser("estimate", help="step time, breakdown and memory of a scenario (data x tensor x pipeline)")
    add_scenario(e)
    e.add_argument("--runner-up", action="store_true",
                   help="also the fastest other layout (degrees, ZeRO stage) on these GPUs and what separates it "
                        "(a sweep: seconds)")
    e.add_argument("--sensitivities", action="store_true",
                   help="add the elasticity of the step time to each hardware parameter")
    e.add_argument("--layers", nargs="?", const=10, type=positive_int, metavar="N",
                   help="add one microbatch on the slowest pipeline stage by kind of layer and its N slowest layers "
                        "(default 10), each with what bounds it (compute, memory or launch)")
    e.add_argument("--target", metavar="NAME_OR_CSV", default=None,
                   help="time, GPU-hours and cost to a quality target: an MLPerf benchmark (bert, resnet, gpt3, ...) "
                        "or a CSV of your convergence runs (sets training.target; concurrency-model converge)")
    add_compare(e)
    add_json(e)
    e.set_defaults(run=run, show=show)
