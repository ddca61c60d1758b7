"""``concurrency-model infer --scenario FILE``: prefill and decode latency, throughput and memory of an
inference scenario (:mod:`concurrency_model.inference`); for a model without causal attention (a CNN, an
encoder) one forward pass's latency and samples/s (:mod:`concurrency_model.forward_inference`)."""
from __future__ import annotations

from ..capacity import max_batch
from ..inference import infer
from ..scenario import read_scenario
from . import add_json


def run(a) -> dict:
    raw = read_scenario(a.scenario)  # read once: the file may be a pipe
    if a.max_batch:
        batch, result = max_batch(raw)
        return {**result.to_dict(), "max_batch": batch}
    return infer(raw).to_dict()


def show(out: dict) -> None:
    i, p = out["inference"], out["parallel"]
    if "max_batch" in out:
        m = out["memory"]
        print(f"largest batch that fits: {out['max_batch']:,} (memory {m['total_bytes'] / 1e9:,.2f} of "
              f"{m['usable_bytes'] / 1e9:,.2f} GB per device)")
    weights = f" (weights {i['weight_dtype']})" if i["weight_dtype"] != i["dtype"] else ""
    ws = i.get("weight_sparsity")
    if ws is not None:
        weights += f" (weights pruned {ws if isinstance(ws, str) else f'to {ws:.0%} zeros, CSR'})"
    devices = f"{out['gpus']} device{'s' * (out['gpus'] != 1)}"
    if i.get("host_overhead_s"):
        weights += f", host {i['host_overhead_s'] * 1e6:g} us per kernel"
    if out.get("kind") == "forward":  # a model without a KV cache: one forward pass of the batch
        seq = f", {i['prompt_len']} tokens a sample" if "prompt_len" in i else ""
        print(f"batch {i['batch']}{seq}, {i['dtype']}{weights} on {devices} (tensor {p['tensor']})")
        print(f"forward pass {out['latency_s'] * 1e3:,.3f} ms (80% band {out['latency_p10_s'] * 1e3:,.3f}-"
              f"{out['latency_p90_s'] * 1e3:,.3f} ms); {out['samples_per_s']:,.1f} samples/s")
        print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB")
        for k, v in out["breakdown"].items():
            print(f"  {k:<28} {v:>12.4g} s")
        return
    print(f"batch {i['batch']}, prompt {i['prompt_len']}, {i['decode_len']} decode steps, {i['dtype']}{weights} on "
          f"{devices} (tensor {p['tensor']} x pipeline {p['pipeline']})")
    print(f"prefill (time to first token) {out['prefill_s'] * 1e3:,.3f} ms; decode {out['decode_s_per_token'] * 1e3:,.3f} "
          f"ms per token; total {out['total_s'] * 1e3:,.1f} ms; {out['tokens_per_s']:,.1f} tokens/s")
    if "total_p10_s" in out:  # 80% bands (concurrency_model.uncertainty)
        print(f"80% bands: prefill {out['prefill_p10_s'] * 1e3:,.3f}-{out['prefill_p90_s'] * 1e3:,.3f} ms; decode "
              f"{out['decode_s_per_token_p10'] * 1e3:,.3f}-{out['decode_s_per_token_p90'] * 1e3:,.3f} ms per token; "
              f"total {out['total_p10_s'] * 1e3:,.1f}-{out['total_p90_s'] * 1e3:,.1f} ms")
    sp = i.get("speculative")
    if sp:
        print(f"speculative decoding: {sp['tokens']} draft tokens at acceptance {sp['acceptance']:g} yield "
              f"{sp['tokens_per_iteration']:.2f} tokens an iteration (draft step {sp['draft_step_s'] * 1e3:,.3f} ms, "
              f"verification {sp['verify_step_s'] * 1e3:,.3f} ms): {sp['speedup']:.2f}x the plain decode's "
              f"{sp['plain_decode_s_per_token'] * 1e3:,.3f} ms per token")
    print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB (KV cache "
          f"{out['kv_cache_bytes'] / 1e9:,.3f} GB per device, {out['kv_cache_bytes_total'] / 1e9:,.3f} GB in all)")
    for k, v in out["breakdown"].items():
        print(f"  {k:<28} {v:>12.4g} s")


def register(sub) -> None:
    e = sub.add_parser("infer", help="prefill/decode latency, tokens/s and memory of an inference scenario (a forward "
                       "pass's latency and samples/s for a model without a KV cache)")
    e.add_argument("--scenario", required=True,
                   help="scenario file (JSON or TOML) with an inference object: batch, prompt_len, decode_len, dtype "
                        "[, weight_dtype, weight_sparsity, host_overhead_s, speculative]")
    e.add_argument("--max-batch", action="store_true",
                   help="the largest batch that fits in device memory (replaces inference.batch), and the "
                        "latency and throughput there")
    add_json(e)
    e.set_defaults(run=run, show=show)
