"""``concurrency-model infer --scenario FILE``: prefill and decode latency, throughput and memory of an
inference scenario (:mod:`concurrency_model.serving.decoder`); for a model without causal attention (a CNN, an
encoder) one forward pass's latency and samples/s (:mod:`concurrency_model.serving.forward_pass`)."""
from __future__ import annotations

from ..checks import number
from ..serving.capacity import KV_FREE_FRACTION, max_batch, max_throughput, serving_sweep
from ..serving.decoder import infer
from ..serving.disaggregated import plan
from . import add_json, add_scenario, currency_of, scenario_of
from .compare import add_compare, compared, print_rows


def run(a) -> dict:
    raw = scenario_of(a)
    out = _answer(a, raw)
    rows = out.get("sweep") or [out.get("base") or out]
    if "cost_per_million_tokens" in rows[0]:
        out["currency"] = currency_of(raw, "inference")  # the unit of every cost
    return out


def _answer(a, raw: dict) -> dict:
    if a.max_load and (a.sweep or a.disaggregate or a.max_batch or a.compare or a.layers):
        raise ValueError("--max-load: not with --sweep, --disaggregate, --max-batch, --compare or --layers")
    if a.kv_fraction is not None and not a.max_load:
        raise ValueError("--kv-fraction: only with --max-load")
    if a.max_load:
        return max_throughput(raw, KV_FREE_FRACTION if a.kv_fraction is None else a.kv_fraction).to_dict()
    if a.disaggregate and (a.sweep or a.max_batch or a.weights):
        raise ValueError("--disaggregate: not with --sweep, --max-batch or --weights")
    if a.compare and (a.sweep or a.disaggregate or a.max_batch):
        raise ValueError("--compare: of one scenario's figures, not with --sweep, --disaggregate or --max-batch")
    if a.layers and (a.sweep or a.disaggregate or a.max_batch):
        raise ValueError("--layers: of one scenario's decode step, not with --sweep, --disaggregate or --max-batch")
    if a.pipelines is not None and not (a.sweep or a.disaggregate):
        raise ValueError("--pipelines: only with --sweep or --disaggregate")
    for flag, value in (("--max-decode-ms", a.max_decode_ms), ("--max-first-token-ms", a.max_first_token_ms),
                        ("--weights", a.weights), ("--load", a.load)):
        if value is not None and not (a.sweep or a.disaggregate):
            raise ValueError(f"{flag}: only with --sweep or --disaggregate")
    inf = raw.get("inference")
    if (a.sweep or a.disaggregate) and isinstance(inf, dict) and inf.get("load_rps") is not None:
        # a sweep sizes fleets for a load: the scenario's own load is the default of --load
        a.load = inf["load_rps"] if a.load is None else a.load
        raw = {**raw, "inference": {k: v for k, v in inf.items() if k != "load_rps"}}
    for flag, value in (("--max-decode-ms", a.max_decode_ms), ("--max-first-token-ms", a.max_first_token_ms),
                        ("--load", a.load)):
        number(flag, value, none_ok=True)
    if a.disaggregate:
        return disaggregate(raw, a)
    if a.sweep:
        target = None if a.max_decode_ms is None else a.max_decode_ms / 1e3
        first = None if a.max_first_token_ms is None else a.max_first_token_ms / 1e3
        df = serving_sweep(raw, target, progress=not a.json,
                           weights=tuple(a.weights.split(",")) if a.weights else None, load_rps=a.load,
                           max_first_token_s=first, pipelines=_degrees(a.pipelines))
        ok = df[df["meets_target"]] if "meets_target" in df else df
        if a.load is not None:  # the fewest GPUs for the load, then the shortest step
            ok = ok.sort_values(["gpus_for_load", "decode_s_per_token"], kind="stable")
        return {"sweep": df.to_dict("records"), "max_decode_s": target, "max_first_token_s": first,
                "load_rps": a.load,
                "best": ok.iloc[0].to_dict() if len(ok) else None}
    if a.max_batch:
        batch, result = max_batch(raw)
        return {**result.to_dict(), "max_batch": batch}
    if a.compare:
        if a.layers:
            raise ValueError("--compare: not with --layers")
        return compared(raw, a.compare, infer)
    r = infer(raw)
    if not a.layers:
        return r.to_dict()
    if not hasattr(r, "decode_kinds"):
        raise ValueError("--layers: a decode step by kind of layer needs a causal decoder; this model runs one "
                         "forward pass")
    return {**r.to_dict(), "decode_kinds": r.decode_kinds()}


def _degrees(text: str | None) -> tuple | None:
    """``--pipelines 1,2,4`` as integers (``ValueError`` naming the flag for a word or a fraction)."""
    if text is None:
        return None
    try:
        return tuple(int(x) for x in text.split(","))
    except ValueError:
        raise ValueError(f"--pipelines: comma-separated positive integers, got {text!r}") from None


def disaggregate(raw: dict, a) -> dict:
    """``infer --disaggregate``: the plans of :func:`concurrency_model.serving.disaggregated.plan`, the best (the fewest GPUs
    that meet the targets), and for comparison the colocated continuous-batching fleet for the same load and
    targets (:func:`~concurrency_model.serving.capacity.serving_sweep`)."""
    if a.load is None:
        raise ValueError("--disaggregate: needs --load RPS (the requests a second both pools are sized for)")
    first = None if a.max_first_token_ms is None else a.max_first_token_ms / 1e3
    target = None if a.max_decode_ms is None else a.max_decode_ms / 1e3
    stages = _degrees(a.pipelines)
    df = plan(raw, a.load, first, target, progress=not a.json, pipelines=stages)
    ok = df[df["meets_target"]]
    colo = serving_sweep({**raw, "inference": {**raw["inference"], "batching": "continuous"}}, target,
                         progress=not a.json, load_rps=a.load, max_first_token_s=first, pipelines=stages)
    colo = colo[colo["meets_target"]] if "meets_target" in colo else colo
    colo = colo.sort_values(["gpus_for_load", "decode_s_per_token"], kind="stable")
    return {"plans": df.to_dict("records"), "best": ok.iloc[0].to_dict() if len(ok) else None,
            "colocated": colo.iloc[0].to_dict() if len(colo) else None, "load_rps": a.load,
            "max_first_token_s": first, "max_decode_s": target}


def _layout(row: dict, pool: str) -> str:
    """A pool's replica in words: its tensor degree, its pipeline stages, its expert group and (prefill) the prompts
    a pass when not 1."""
    p, e, b = (row.get(f"{pool}_{k}", 1) for k in ("pipeline", "expert", "batch"))
    notes = [f"experts split over groups of {e}"] * (e > 1) + [f"{b} prompts a pass"] * (b > 1)
    return (f"tensor {row[f'{pool}_tensor']}" + (f" x pipeline {p}" if p > 1 else "")
            + (f" ({'; '.join(notes)})" if notes else ""))


def show_disaggregated(out: dict) -> None:
    goals = " and ".join(f"{out[k] * 1e3:g} ms {what}" for k, what in (("max_first_token_s", "to the first token"),
                                                                        ("max_decode_s", "per token")) if out[k])
    within = f" within {goals}" if goals else ""
    b, c = out["best"], out["colocated"]
    print(f"{out['load_rps']:,g} requests/s{within}: {len(out['plans'])} disaggregated plans")
    if b is None:
        print("disaggregated: no plan meets the targets")
    else:
        print(f"disaggregated: {b['gpus']:,} GPUs = {b['prefill_replicas']} prefill replica"
              f"{'s' * (b['prefill_replicas'] != 1)} of {_layout(b, 'prefill')} + {b['decode_replicas']} decode "
              f"replica{'s' * (b['decode_replicas'] != 1)} of {_layout(b, 'decode')} with "
              f"{b['slots']} slots{' each' * (b['decode_replicas'] != 1)}; first token {b['first_token_s'] * 1e3:,.1f} ms (prefill "
              f"{b['prefill_s'] * 1e3:,.1f}, "
              f"waiting {b['prefill_wait_s'] * 1e3:,.1f}), {b['decode_s_per_token'] * 1e3:,.2f} ms per token (KV "
              f"transfer {b['kv_transfer_s'] * 1e3:,.1f} ms, waiting for a slot {b['decode_wait_s'] * 1e3:,.1f} ms), "
              f"{b['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU")
    if c is None:
        print("colocated continuous batching: no configuration meets the targets")
    else:
        print(f"colocated continuous batching: {c['gpus_for_load']:,} GPUs = {fleet(c)} with {c['batch']} slots "
              f"each; first token {c['prefill_s'] * 1e3:,.1f} ms + "
              f"{c['queue_wait_s'] * 1e3:,.1f} ms waiting, {c['decode_s_per_token'] * 1e3:,.2f} ms per token")


def fleet(row: dict, fmt: str = "") -> str:
    """The replicas of a serving sweep row under a load, in words (an expert-parallel row's are groups of replicas
    that share their experts)."""
    n, e = row["replicas"], row.get("expert") or 1
    what = f"{fmt}tensor {row['tensor']}" + (f" x pipeline {row['pipeline']}" if row.get("pipeline", 1) > 1 else "")
    if e > 1:
        return f"{n:,} group{'s' * (n != 1)} of {e} replicas of {what} sharing their experts"
    return f"{n:,} replica{'s' * (n != 1)} of {what}"


def show_sweep(out: dict) -> None:
    rows = [r for r in out["sweep"] if r["pareto"]]
    goals = [f"{out[k] * 1e3:g} ms {what}" for k, what in (("max_decode_s", "per token"),
                                                           ("max_first_token_s", "to the first token"))
             if out.get(k)]
    target = " and ".join(goals)
    pp = len({r.get("pipeline", 1) for r in out["sweep"]}) > 1  # pipeline degrees searched: a column
    stages = f", each over {rows[0]['pipeline']} pipeline stages" if "pipeline" in rows[0] and not pp else ""
    print(f"{len(out['sweep'])} configurations{stages}; the {len(rows)} on the Pareto front of decode latency and "
          f"tokens/s per GPU, shortest step first{f' (target {target})' if target else ''}:")
    w = "weights" in out["sweep"][0]
    priced = "cost_per_million_tokens" in out["sweep"][0]
    cur = out.get("currency", "USD") if priced else ""
    wait = "queue_wait_s" in out["sweep"][0]  # under a load: each row's mean wait for a slot
    mtok = f" {cur + '/Mtok':>9}" if priced else ""
    waits = f" {'wait ms':>9}" if wait else ""
    x = "expert" in out["sweep"][0]  # a mixture of experts: its expert groups
    print(f"{'weights ' if w else ''}{'tensor':>6} {'pipeline ' if pp else ''}{'expert ' if x else ''}{'batch':>6} "
          f"{'TTFT ms':>11} "
          f"{'decode ms':>10} {'tokens/s':>10} "
          f"{'per GPU':>9} {'GB/device':>10}{mtok}{waits}")
    for r in sorted(rows, key=lambda r: r["decode_s_per_token"]):
        mark = "" if not target or r["meets_target"] else "  over target"
        cost = f" {r['cost_per_million_tokens']:>9.3f}" if priced else ""
        print((f"{r['weights']!s:<8}" if w else "") + f"{r['tensor']:>6} " + (f"{r['pipeline']:>8} " if pp else "")
              + (f"{r['expert']:>6} " if x else "") +
              f"{r['batch']:>6} {r['prefill_s'] * 1e3:>11,.1f} "
              f"{r['decode_s_per_token'] * 1e3:>10.2f} "
              f"{r['tokens_per_s']:>10,.0f} {r['tokens_per_s_per_gpu']:>9,.0f} "
              f"{r['memory_bytes_per_device'] / 1e9:>10.1f}{cost}"
              + (f" {r['queue_wait_s'] * 1e3:>9,.1f}" if wait else "") + mark)
    b = out["best"]
    group = f", experts over {b['expert']} replicas" if b is not None and b.get("expert", 1) > 1 else ""
    if b is None:
        print("no configuration meets the target")
    elif out.get("load_rps") is not None:
        fmt = f"{b['weights']} weights, " if w else ""
        print(f"fewest GPUs for {out['load_rps']:,g} requests/s{' within ' + target if target else ''}: "
              f"{b['gpus_for_load']:,} = {fleet(b, fmt)}, batch {b['batch']} each "
              f"({b['requests_per_s']:,.2f} requests/s each, {b['decode_s_per_token'] * 1e3:.2f} ms per token"
              + (f", {b['queue_wait_s'] * 1e3:,.1f} ms waiting for a slot on average" if "queue_wait_s" in b else "")
              + ")")
        if "queue_wait_s" in b and not out.get("max_first_token_s"):
            # the wait for a slot comes before the first token, which no target bounds: say so, with its figure
            print(f"  no target on the first token: {(b['prefill_s'] + b['queue_wait_s']) * 1e3:,.1f} ms on average, "
                  f"{b['queue_wait_s'] * 1e3:,.1f} ms of it waiting for a slot (--max-first-token-ms MS bounds it)")
    else:
        fmt = f"{b['weights']} weights, " if w else ""
        stage = f" x pipeline {b['pipeline']}" if b.get("pipeline", 1) > 1 else ""
        print(f"most tokens/s per GPU{' within the target' if target else ''}: {fmt}tensor {b['tensor']}{stage}"
              f"{group}, batch {b['batch']}: {b['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU at "
              f"{b['decode_s_per_token'] * 1e3:.2f} ms per token"
              + (f", {b['cost_per_million_tokens']:,.3f} {cur} per million tokens" if priced else ""))


def layout(p: dict) -> str:
    """The parallel layout of a served decoder, in words."""
    one = f"tensor {p['tensor']}" + (f" x pipeline {p['pipeline']}" if p["pipeline"] > 1 else "")
    if "expert" in p:
        return f"{p['data']} replicas of {one}, the experts split over groups of {p['expert']}, all-to-all"
    return f"{p['data']} replicas of {one}, each serving its own requests" if "data" in p else one


# (key, label, factor) of the figures compared side by side, where both results have them
COMPARED = (("prefill_s", "first token ms", 1e3), ("decode_s_per_token", "ms per token", 1e3),
            ("total_s", "a request ms", 1e3), ("tokens_per_s", "tokens/s", 1), ("latency_s", "forward pass ms", 1e3),
            ("samples_per_s", "samples/s", 1), ("gpus", "devices", 1),
            ("memory_bytes_per_device", "memory GB", 1e-9), ("kv_cache_bytes", "KV cache GB", 1e-9),
            ("gpu_hours_per_million_tokens", "GPU-hours a M tokens", 1),
            ("cost_per_million_tokens", "cost a M tokens", 1), ("energy_per_token_j", "J a token", 1))


def show_compare(out: dict) -> None:
    base, other = out["base"], out["changed"]
    print(f"changed: {' '.join(out['compare'])}")
    rows = [(label.replace("cost", f"cost {out.get('currency', 'USD')}"), base[k] * f, other[k] * f)
            for k, label, f in COMPARED if k in base and k in other]
    parts = [k for k in {**base["breakdown"], **other["breakdown"]}
             if base["breakdown"].get(k) or other["breakdown"].get(k)]
    rows += [(k, base["breakdown"].get(k, 0.0), other["breakdown"].get(k, 0.0)) for k in parts]
    print_rows(rows)


def show(out: dict) -> None:
    if "compare" in out:
        show_compare(out)
        return
    if "plans" in out:
        show_disaggregated(out)
        return
    if "sweep" in out:
        show_sweep(out)
        return
    i, p = out["inference"], out["parallel"]
    if "max_load" in out:
        m = out["max_load"]
        print(f"full load (trtllm-bench throughput): {out['output_tokens_per_s']:,.1f} output tokens/s on "
              f"{out['gpus']} GPU{'s' * (out['gpus'] != 1)} ({out['output_tokens_per_s_per_gpu']:,.1f} a GPU); "
              f"{m['slots']:,} slots busy, limited by {m['limited_by'].replace('_', ' ')} (the KV cache at "
              f"{m['kv_fraction']:.0%} of {m['free_bytes_per_device'] / 1e9:,.2f} GB free a device holds "
              f"{m['kv_slots']:,}; engine max batch {m['max_batch_size']:,}, max tokens {m['max_num_tokens']:,})")
    if "max_batch" in out:
        m = out["memory"]
        print(f"largest batch that fits: {out['max_batch']:,} (memory {m['total_bytes'] / 1e9:,.2f} of "
              f"{m['usable_bytes'] / 1e9:,.2f} GB per device)")
    weights = f" (weights {i['weight_dtype']})" if i["weight_dtype"] != i["dtype"] else ""
    ws = i.get("weight_sparsity")
    if ws is not None:
        weights += f" (weights pruned {ws if isinstance(ws, str) else f'to {ws:.0%} zeros, CSR'})"
    if i.get("kv_dtype", i["dtype"]) != i["dtype"]:
        weights += f" (KV cache {i['kv_dtype']})"
    devices = f"{out['gpus']} device{'s' * (out['gpus'] != 1)}"
    if i.get("host_overhead_s"):
        weights += f", host {i['host_overhead_s'] * 1e6:g} us per kernel"
    if out.get("kind") == "forward":  # a model without a KV cache: one forward pass of the batch
        seq = f", {i['prompt_len']} tokens a sample" if "prompt_len" in i else ""
        print(f"batch {i['batch']}{seq}, {i['dtype']}{weights} on {devices} (tensor {p['tensor']})")
        print(f"forward pass {out['latency_s'] * 1e3:,.3f} ms (80% band {out['latency_p10_s'] * 1e3:,.3f}-"
              f"{out['latency_p90_s'] * 1e3:,.3f} ms); {out['samples_per_s']:,.1f} samples/s")
        print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB")
        _parts(out["breakdown"])
        return
    prefix = f", the first {i['prefix_len']:,} a cached prefix" if i.get("prefix_len") else ""
    if i.get("prompt_lengths", "fixed") != "fixed":
        prefix += f", {i['prompt_lengths']} lengths (mean {i['mean_prompt_len']:,.0f}" + \
            (f", padded to {i['padded_prompt_len']:,})" if "padded_prompt_len" in i else ")")
    if i.get("batching") == "continuous":
        print(f"continuous batching: {i['batch']} slots, prompts of {i['prompt_len']} tokens{prefix} "
              f"({i['prompt_tokens_per_iteration']:,} new prompt tokens an iteration), {i['decode_len']} generated, "
              f"{i['dtype']}{weights} on {devices} ({layout(p)})")
        sp = i.get("speculative")
        step = "iteration (time per output token)" if not sp else \
            f"time per output token (iterations of {sp['iteration_s'] * 1e3:,.3f} ms over their tokens)"
        print(f"{step} {out['decode_s_per_token'] * 1e3:,.3f} ms; time to first token "
              f"{out['prefill_s'] * 1e3:,.3f} ms; a request {out['total_s'] * 1e3:,.1f} ms; "
              f"{out['tokens_per_s']:,.1f} tokens/s, {i['requests_per_s']:,.2f} requests/s"
              + (f" under the load: {i['slots_run']} slots run, {i['slots_in_use']:,.1f} in use (Little's law); a "
                 f"request waits {i['queue_wait_s'] * 1e3:,.3f} ms for a slot on average, 99% of them within "
                 f"{i['queue_wait_p99_s'] * 1e3:,.3f} ms (it waits at all with probability "
                 f"{i['wait_probability']:.3f})" if "load_rps" in i else " at full slots"))
        if "longest_iteration_s" in i:
            print(f"longest iteration {i['longest_iteration_s'] * 1e3:,.3f} ms ("
                  + ("a full prefill lane)" if "prefill_chunks" in i else
                     "one that carries a whole new prompt; inference.max_batched_tokens bounds it)"))
        if "prefill_chunks" in i:
            print(f"prompts in chunks under {i['max_batched_tokens']:,} tokens an iteration: {i['prefill_chunks']} a "
                  f"prompt, the prefill lane busy {i['prefill_lane_utilization']:.1%} of the time and a mean wait of "
                  f"{i['prefill_lane_wait_s'] * 1e3:,.3f} ms for it; at most {i['slots_busy_at_most']:,} of the "
                  f"{i['batch']:,} slots decode at once")
    else:
        steps = "decode steps" if i.get("output_lengths", "fixed") == "fixed" else "generated tokens on average"
        print(f"batch {i['batch']}, prompt {i['prompt_len']}{prefix}, {i['decode_len']} {steps}, "
              f"{i['dtype']}{weights} on {devices} ({layout(p)})")
        print(f"prefill (time to first token) {out['prefill_s'] * 1e3:,.3f} ms; decode "
              f"{out['decode_s_per_token'] * 1e3:,.3f} ms per token; total {out['total_s'] * 1e3:,.1f} ms; "
              f"{out['tokens_per_s']:,.1f} tokens/s")
    if "total_p10_s" in out:  # 80% bands (concurrency_model.uncertainty)
        first, step, whole = ("first token", "iteration", "a request") if i.get("batching") == "continuous" else \
            ("prefill", "decode", "total")
        print(f"80% bands: {first} {out['prefill_p10_s'] * 1e3:,.3f}-{out['prefill_p90_s'] * 1e3:,.3f} ms; {step} "
              f"{out['decode_s_per_token_p10'] * 1e3:,.3f}-{out['decode_s_per_token_p90'] * 1e3:,.3f} ms per token; "
              f"{whole} {out['total_p10_s'] * 1e3:,.1f}-{out['total_p90_s'] * 1e3:,.1f} ms")
    if i.get("output_lengths", "fixed") != "fixed":
        waits = (f": the batch decodes {i['decode_steps']:,.1f} steps on average, until its longest request ends"
                 if "decode_steps" in i else ": the slots refill as requests end")
        print(f"{i['output_lengths']} output lengths, mean {i['mean_decode_len']:,.1f} tokens{waits}")
    sp = i.get("speculative")
    if sp:
        print(f"speculative decoding: {sp['tokens']} draft tokens at acceptance {sp['acceptance']:g} yield "
              f"{sp['tokens_per_iteration']:.2f} tokens an iteration (draft step {sp['draft_step_s'] * 1e3:,.3f} ms, "
              f"verification {sp['verify_step_s'] * 1e3:,.3f} ms): {sp['speedup']:.2f}x the plain decode's "
              f"{sp['plain_decode_s_per_token'] * 1e3:,.3f} ms per token")
    if "gpu_hours_per_million_tokens" in out:
        cost = (f", cost {out['cost_per_million_tokens']:,.3f} {out['currency']}" if "cost_per_million_tokens" in out
                else "")
        energy = f", {out['energy_per_token_j']:,.3f} J a token" if "energy_per_token_j" in out else ""
        print(f"per million generated tokens: {out['gpu_hours_per_million_tokens']:,.3f} GPU-hours{cost}{energy}")
    m = out["memory"]
    print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB of {m['capacity_bytes'] / 1e9:,.0f} GB "
          f"(weights {m['model_state_bytes'] / 1e9:,.2f}, activations {m['activations_bytes'] / 1e9:,.2f}, KV cache "
          f"{out['kv_cache_bytes'] / 1e9:,.3f} GB; {out['kv_cache_bytes_total'] / 1e9:,.3f} GB of KV cache in all)")
    _parts(out["breakdown"])
    if "decode_kinds" in out:
        step = "an iteration" if i.get("batching") == "continuous" else "a decode step"
        print(f"{step} by kind of layer ({out['decode_s_per_token'] * 1e3:,.3f} ms):")
        for r in out["decode_kinds"]:
            layers = f"{r['layers']:>5}" if r["layers"] else " " * 5
            print(f"  {r['kind']:<22} {layers} {r['seconds'] * 1e3:>10.4g} ms {r['share']:>7.1%}  {r['bound']}")


def _parts(breakdown: dict) -> None:
    """The breakdown's seconds, those that are 0 left to --json."""
    for k, v in breakdown.items():
        if v:
            print(f"  {k:<28} {v:>12.4g} s")
    zero = sum(1 for v in breakdown.values() if not v)
    if zero:
        print(f"  ({zero} more are 0 s; --json lists every key)")


def register(sub) -> None:
    e = sub.add_parser("infer", help="prefill/decode latency, tokens/s and memory of an inference scenario (a forward "
                       "pass's latency and samples/s for a model without a KV cache)")
    add_scenario(e, " with an inference object: batch, prompt_len, decode_len, dtype, ...")
    add_compare(e)
    e.add_argument("--sweep", action="store_true",
                   help="a causal decoder on every tensor degree inside a node and batch up to the largest that "
                        "fits: the Pareto front of decode latency and tokens/s per GPU")
    e.add_argument("--weights", default=None, metavar="F1,F2,...",
                   help="with --sweep: weight formats to compare (fp16, bf16, int8, fp8, int4, 2:4, a fraction "
                        "of zeros)")
    e.add_argument("--pipelines", default=None, metavar="P1,P2,...",
                   help="with --sweep or --disaggregate: pipeline degrees to search as well (a model over one "
                        "node's memory served across nodes); default: the scenario's (--disaggregate: 1)")
    e.add_argument("--max-decode-ms", type=float, default=None, metavar="MS",
                   help="with --sweep or --disaggregate: the decode latency target per token, in milliseconds")
    e.add_argument("--max-first-token-ms", type=float, default=None, metavar="MS",
                   help="with --sweep or --disaggregate: the time-to-first-token target, in milliseconds (with "
                        "continuous batching in the scenario, tens of ms; a static batch waits for its whole prefill)")
    e.add_argument("--load", type=float, default=None, metavar="RPS",
                   help="with --sweep or --disaggregate: requests a second to serve (default: the scenario's "
                        "inference.load_rps); adds the replicas and GPUs each configuration needs for it, and the best "
                        "is the one with the fewest GPUs")
    e.add_argument("--disaggregate", action="store_true",
                   help="with --load: a prefill pool and a decode pool sized for the load and the targets (DistServe, "
                        "Splitwise), against colocated continuous batching")
    e.add_argument("--layers", action="store_true",
                   help="add a decode step (continuous batching: an iteration) by kind of layer, each compute-, "
                        "memory- or launch-bound, beside the KV cache's attention and the communication")
    e.add_argument("--max-batch", action="store_true",
                   help="the largest batch that fits in device memory (replaces inference.batch), and the "
                        "latency and throughput there")
    e.add_argument("--max-load", action="store_true",
                   help="serving at full load as trtllm-bench throughput runs it: the KV cache at --kv-fraction of "
                        "the memory left free, the engine's max batch and tokens, continuous batching with every slot "
                        "busy (replaces inference.batch); output tokens/s of the system")
    e.add_argument("--kv-fraction", type=float, default=None, metavar="F",
                   help=f"with --max-load: the KV cache's share of the free memory (default {KV_FREE_FRACTION})")
    add_json(e)
    e.set_defaults(run=run, show=show)
