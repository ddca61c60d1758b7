"""``concurrency-model presets [devices|clusters|models|scenarios]``: every name a scenario or ``--hardware``
accepts, and the shipped example scenarios.

Devices with their peak FLOP/s, memory and bandwidth; clusters with their device and tiers; the zoo, the
shipped Hugging Face configs (``{"hf_config": NAME}``) and the model families (``{"kind": ...}``) with their
parameters and forward FLOP per sample at the default input. Each preset's sources are in its file
(``concurrency_model/presets/``), shown here as the file path.
"""
from __future__ import annotations

import inspect
import textwrap

from ..hardware.clusters import cluster_names, load_cluster
from ..hardware.devices import device_names, load_device
from . import add_json

WHAT = ("devices", "clusters", "models", "scenarios")
SHOWN_DTYPES = ("fp32", "tf32", "fp16", "bf16", "fp8", "int8")


def devices() -> list[dict]:
    out = []
    for name in device_names():
        d = load_device(name)
        out.append({"name": name, "vendor": d.vendor, "kind": d.kind, "peak_flops": dict(d.peak_flops),
                    "mem_capacity_bytes": d.mem_capacity, "mem_bw_Bps": d.mem_bw, "board_power_w": d.board_power_w,
                    "file": f"presets/devices/{name}.json"})
    return out


def _tier(t) -> dict:
    return {"name": t.name, "kind": t.kind, "bw_Bps": t.bw, "latency_s": t.latency}


def clusters() -> list[dict]:
    out = []
    for name in cluster_names():
        c = load_cluster(name)
        out.append({"name": name, "device": c.device.name, "gpus_per_node": c.gpus_per_node,
                    "nics_per_node": c.nics_per_node, "intra": _tier(c.intra), "inter": _tier(c.inter),
                    "file": f"presets/clusters/{name}.json"})
    return out


def _input(g) -> str:
    """The default input a model was built for: an image size or a sequence length."""
    first = g.layers()[0]
    if first.kind == "conv2d":
        return f"{first.attrs['h']}x{first.attrs['w']} image"
    seq = [n.attrs.get("seq") or n.attrs.get("timesteps") for n in g.layers() if n.kind in ("attention", "lstm")]
    return f"{seq[0]} tokens" if seq and seq[0] else f"{first.attrs.get('c_in', '?')} inputs"


def models() -> dict:
    from ..frontends.hf import preset_names
    from ..models import FAMILIES, NAMES, get_model

    def row(name, spec, kind):
        g = get_model(spec)
        return {"name": name, "kind": kind, "params": int(g.params), "forward_flop": float(g.forward_flop()),
                "input": _input(g)}

    families = []
    for kind, f in FAMILIES.items():
        params = list(inspect.signature(f).parameters.values())[1:]  # the first is the graph builder
        families.append({"kind": kind, "required": [p.name for p in params if p.default is inspect.Parameter.empty],
                         "defaults": {p.name: p.default for p in params if p.default is not inspect.Parameter.empty}})
    return {"zoo": [row(n, n, "zoo") for n in NAMES],
            "hf_config": [row(n, {"hf_config": n}, "hf_config") for n in preset_names()],
            "families": families}


def scenarios() -> list[dict]:
    """The shipped example scenarios (``--scenario NAME``), with the command they are for and their notes."""
    from ..scenario import EXAMPLES, example_names, read_scenario
    out = []
    for name in example_names():
        raw = read_scenario(name)
        out.append({"name": name, "command": "infer" if "inference" in raw else "estimate", "notes": raw["notes"],
                    "file": str(EXAMPLES.relative_to(EXAMPLES.parents[1]) / f"{name}.json")})
    return out


def run(a) -> dict:
    parts = {"devices": devices, "clusters": clusters, "models": models, "scenarios": scenarios}
    return {w: parts[w]() for w in ([a.what] if a.what else WHAT)}


def _si(v: float, unit: str) -> str:
    for scale, prefix in ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k")):
        if v >= scale:
            return f"{v / scale:.3g} {prefix}{unit}"
    return f"{v:.3g} {unit}"


def _table(header: tuple, rows: list[tuple]) -> None:
    rows = [header, *rows]
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(header))]
    for r in rows:
        print("  ".join(str(c).ljust(w) for c, w in zip(r, widths)).rstrip())


def _gap(out: dict, what: str) -> None:
    """A blank line before a kind that is not the first shown."""
    if next(iter(out)) != what:
        print()


def show(out: dict) -> None:
    if "devices" in out:
        print("devices (--hardware NAME, a cluster's device; dense peak FLOP/s per dtype):")
        _table(("name", *SHOWN_DTYPES, "memory", "bandwidth", "power"),
               [(d["name"], *(_si(d["peak_flops"][t], "") if t in d["peak_flops"] else "-" for t in SHOWN_DTYPES),
                 _si(d["mem_capacity_bytes"], "B"), _si(d["mem_bw_Bps"], "B/s"),
                 f"{d['board_power_w']:.0f} W" if d["board_power_w"] else "-") for d in out["devices"]])
    if "clusters" in out:
        _gap(out, "clusters")
        print("clusters (scenario \"cluster\", --cluster NAME; node count from the GPU count):")
        _table(("name", "device", "GPUs a node", "inside a node", "between nodes"),
               [(c["name"], c["device"], c["gpus_per_node"],
                 f"{c['intra']['kind']} {_si(c['intra']['bw_Bps'], 'B/s')} a GPU",
                 f"{c['nics_per_node']} x {c['inter']['kind']} {_si(c['inter']['bw_Bps'], 'B/s')}")
                for c in out["clusters"]])
    if "models" in out:
        m = out["models"]
        _gap(out, "models")
        print("models (scenario \"model\": a zoo name, {\"hf_config\": NAME} or a family spec {\"kind\": ...}):")
        _table(("name", "kind", "parameters", "forward FLOP a sample", "input"),
               [(r["name"], r["kind"], f"{r['params']:,}", _si(r["forward_flop"], "FLOP"), r["input"])
                for r in m["zoo"] + m["hf_config"]])
        for f in m["families"]:
            fields = ", ".join([*f["required"], *(f"{k}={v}" for k, v in f["defaults"].items())])
            print(f"  {{\"kind\": \"{f['kind']}\", ...}}: {fields}")
    if "scenarios" in out:
        _gap(out, "scenarios")
        print("example scenarios (--scenario NAME; each file's notes say what it is and where its numbers come "
              "from):")
        for e in out["scenarios"]:
            print(f"  {e['command']} --scenario {e['name']}")
            print(textwrap.fill(e["notes"], width=116, initial_indent="      ",
                                subsequent_indent="      "))
    print("\nsources: each preset's file under concurrency_model/ (\"file\" in --json)")


def register(sub) -> None:
    p = sub.add_parser("presets", help="every device, cluster and model name a scenario accepts, with headline "
                       "figures")
    p.add_argument("what", nargs="?", choices=WHAT, default=None, help="one kind only (default: all)")
    add_json(p)
    p.set_defaults(run=run, show=show)
