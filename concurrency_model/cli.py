"""Command-line front end: ``concurrency-model COMMAND ...``; every command takes ``--json``.

Input errors (``ValueError``) print one line on stderr and exit with code 2, never a traceback.
"""
from __future__ import annotations

import argparse
import json
import sys

import sympy as sp

from . import __version__
from .models import NAMES, get_model

TOP_LAYERS = 15  # layers shown in the readable workdepth table


def _num(e):
    e = sp.sympify(e)
    if not e.is_number:
        return str(e)
    return int(e) if e.is_Integer else float(e)


def _model_arg(text: str):
    """A zoo name or a JSON object (``{"kind": "gpt", ...}``)."""
    if text.lstrip().startswith("{"):
        try:
            return json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"model: not a valid JSON object ({e.msg})") from None
    return text


def cmd_workdepth(args) -> dict:
    options = {"seq_len": args.seq_len} if args.seq_len else {}
    g = get_model(_model_arg(args.model), batch=args.batch, image_size=args.image_size, **options)
    fwd, train = g.forward(), g.training(args.optimizer)
    chosen = fwd if args.pass_ == "forward" else train
    layers = [{"name": r["name"], "op": r["op"], "params": r["params"], "forward_flop": r["forward_flop"],
               "depth": r["depth"]} for r in g.table().to_dict("records")]
    return {"model": args.model, "batch": args.batch, "pass": args.pass_, "params": _num(g.params),
            "forward_macs": _num(fwd.macs), "forward_flop": _num(fwd.flop), "training_flop": _num(train.flop),
            "work": _num(chosen.flop), "depth": _num(chosen.depth),
            "average_parallelism": _num(chosen.flop / chosen.depth), "layers": layers}


def _print_workdepth(out: dict) -> None:
    print(f"{out['model']}  (batch {out['batch']}, {out['pass']} pass)")
    for key, label in [("params", "parameters"), ("forward_macs", "forward MACs"), ("forward_flop", "forward FLOP"),
                       ("training_flop", "training FLOP"), ("work", "work W"), ("depth", "depth D"),
                       ("average_parallelism", "W/D")]:
        v = out[key]
        print(f"  {label:<15} {v:>22,.6g}" if isinstance(v, float) else f"  {label:<15} {v:>22,}")
    layers = out["layers"]
    if not layers or not isinstance(layers[0]["forward_flop"], (int, float)):
        return
    top = sorted(layers, key=lambda r: -r["forward_flop"])[:TOP_LAYERS]
    keep = {id(r) for r in top}
    print(f"\n  the {len(top)} heaviest of {len(layers)} layers, in network order (--json lists all):")
    print(f"  {'layer':<42} {'op':<16} {'params':>12} {'forward FLOP':>16} {'depth':>6}")
    for r in (r for r in layers if id(r) in keep):
        print(f"  {r['name'][:42]:<42} {r['op']:<16} {r['params']:>12,} {r['forward_flop']:>16,} {r['depth']:>6}")


def _positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {v}")
    return v


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="concurrency-model", description=__doc__.splitlines()[0])
    p.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    sub = p.add_subparsers(dest="command", required=True)

    wd = sub.add_parser("workdepth", help="work, depth and average parallelism of a model (paper §2.5, App. A)")
    wd.add_argument("--model", required=True, help=f"zoo name ({', '.join(NAMES)}) or a JSON spec object")
    wd.add_argument("--batch", type=_positive_int, default=1)
    wd.add_argument("--image-size", type=_positive_int, default=None)
    wd.add_argument("--seq-len", type=_positive_int, default=None)
    wd.add_argument("--pass", dest="pass_", choices=("forward", "training"), default="forward",
                    help="which pass work/depth describe (training = forward + backward + update)")
    wd.add_argument("--optimizer", choices=("sgd", "momentum", "adam", "adamw"), default="sgd")
    wd.add_argument("--json", action="store_true", help="print one JSON object")
    wd.set_defaults(run=cmd_workdepth, show=_print_workdepth)
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    try:
        out = args.run(args)
    except ValueError as e:
        print(f"concurrency-model {args.command}: error: {e}", file=sys.stderr)
        return 2
    try:
        if args.json:
            print(json.dumps(out))
        else:
            args.show(out)
    except BrokenPipeError:  # e.g. piped into head
        sys.stderr.close()
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
