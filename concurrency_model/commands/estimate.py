"""``concurrency-model estimate --scenario FILE``: step time, breakdown and memory of a training scenario."""
from __future__ import annotations

from ..parallel.estimate import estimate
from . import add_json


def run(a) -> dict:
    return estimate(a.scenario).to_dict()


def show(out: dict) -> None:
    p = out["parallel"]
    print(f"step {out['step_time_s']:.4g} s on {out['gpus']} devices (data {p['data']} x tensor {p['tensor']} x "
          f"pipeline {p['pipeline']}, {p['schedule']}): {out['throughput_samples_per_s']:,.1f} samples/s, "
          f"{out['achieved_flops_per_device'] / 1e12:,.1f} TFLOP/s per device")
    print(f"memory per device {out['memory_bytes_per_device'] / 1e9:,.2f} GB")
    for k, v in out["breakdown"].items():
        print(f"  {k:<28} {v:>12.4g} s")


def register(sub) -> None:
    e = sub.add_parser("estimate", help="step time, breakdown and memory of a scenario (data x tensor x pipeline)")
    e.add_argument("--scenario", required=True, help="scenario file (JSON or TOML), see DESIGN.md")
    add_json(e)
    e.set_defaults(run=run, show=show)
