"""``concurrency-model workdepth``: work, depth and average parallelism of a model (paper §2.5, App. A)."""
from __future__ import annotations

import json

import sympy as sp

from ..models import NAMES, get_model
from ..ops.conv import ALGORITHMS, table6
from ..ops.optimizer import RULES
from ..serving.generation import generation_cost
from ..cost import to_json as num
from . import add_json, positive_int

TOP_LAYERS = 15  # layers shown in the readable table


def model_arg(text: str, input_shapes=None):
    """A zoo name, a JSON object (``{"kind": "gpt", ...}``, ``{"hf_config": PATH}``, ``{"onnx": PATH}``), or a
    path to an ``.onnx`` file or a Hugging Face ``config.json``; ``input_shapes`` (``--input-shape``) go to
    an ONNX model."""
    if text.lstrip().startswith("{"):
        try:
            model = json.loads(text)
        except json.JSONDecodeError as e:
            raise ValueError(f"model: not a valid JSON object ({e.msg})") from None
        except RecursionError:
            raise ValueError("model: the JSON object nests too deeply to read (more than about 1,000 levels)") from None
    elif text.endswith(".onnx"):
        model = {"onnx": text}
    elif text.endswith(".json"):
        model = {"hf_config": text}
    else:
        model = text
    if input_shapes:
        if not (isinstance(model, dict) and "onnx" in model):
            raise ValueError("input_shape: only an ONNX model takes input shapes")
        from ..frontends.onnx_import import parse_shape_arg
        model = {**model, "input_shapes": dict(parse_shape_arg(t) for t in input_shapes)}
    return model


def table6_symbolic() -> dict:
    """The paper's Table 6 (§5.3) in its own symbols: work and depth of each convolution algorithm.

    >>> table6_symbolic()["direct"]["work"]
    'C_in*C_out*K_x*K_y*N*(H - K_y + 1)*(-K_x + W + 1)'
    """
    names = sp.symbols("N C_in C_out H W K_y K_x", positive=True, integer=True)
    out = {}
    for method in ALGORITHMS:
        args = names if method != "winograd" else (*names[:5], names[6], names[6])  # Winograd: square, r = K_x
        work, depth = table6(method, *args)
        out[method] = {"work": str(work), "depth": str(depth)}
    return out


def run(args) -> dict:
    if args.model is None:
        if not args.table6:
            raise ValueError("--model: required (or give --table6 alone for the paper's Table 6)")
        return {"table6": table6_symbolic()}
    options = {"seq_len": args.seq_len} if args.seq_len else {}
    g = get_model(model_arg(args.model, args.input_shape), batch=args.batch, image_size=args.image_size, **options)
    fwd, train = g.forward(), g.training(args.optimizer)
    chosen = fwd if args.pass_ == "forward" else train
    layers = [{"name": r["name"], "op": r["op"], "params": r["params"], "forward_flop": r["forward_flop"],
               "depth": r["depth"]} for r in g.table().to_dict("records")]
    out = {"model": args.model, "batch": args.batch, "pass": args.pass_, "params": num(g.params),
           "forward_macs": num(fwd.macs), "forward_flop": num(fwd.flop), "training_flop": num(train.flop),
           "work": num(chosen.flop), "depth": num(chosen.depth),
           "average_parallelism": num(chosen.flop / chosen.depth), "layers": layers}
    if args.generate:
        if args.pass_ != "forward":
            raise ValueError("--generate: work and depth of generation are of forward passes; drop --pass")
        gen = generation_cost(model_arg(args.model), args.batch, *args.generate)
        out.update(work=gen["work"], depth=gen["depth"], average_parallelism=gen["average_parallelism"],
                   generation=gen, **{"pass": "generate"})
    if args.brent is not None:
        # Brent 1974 (paper §2.5): max(W/p, D) <= T_p <= W/p + D for a greedy schedule on p processors
        w, d, p = out["work"], out["depth"], args.brent
        out["brent"] = {"p": p, "lower": num(max(w / p, d)), "upper": num(w / p + d)}
    if args.table6:
        out["table6"] = table6_symbolic()
    return out


def show(out: dict) -> None:
    if "table6" in out:
        print("paper Table 6 (§5.3): work W and depth D of one convolution (unit stride, no padding; Winograd "
              "with r = K_x, m = 2, c the FFT constant)")
        for method, row in out["table6"].items():
            print(f"  {method:<9} W = {row['work']}\n  {'':<9} D = {row['depth']}")
        if "model" not in out:
            return
        print()
    print(f"{out['model']}  (batch {out['batch']}, {out['pass']} pass)")
    gen = out.get("generation")
    if gen:
        steps = gen["decode"]["steps"]
        print(f"  prefill         W {gen['prefill']['work']:>14,.6g}  D {gen['prefill']['depth']:>12,.0f}")
        print(f"  {steps} decode steps W {gen['decode']['work']:>14,.6g}  D {gen['decode']['depth']:>12,.0f}  "
              f"(one after another: each step waits for the token before it)")
    for key, label in [("params", "parameters"), ("forward_macs", "forward MACs"), ("forward_flop", "forward FLOP"),
                       ("training_flop", "training FLOP"), ("work", "work W"), ("depth", "depth D"),
                       ("average_parallelism", "W/D")]:
        v = out[key]
        print(f"  {label:<15} {v:>22,.6g}" if isinstance(v, float) else f"  {label:<15} {v:>22,}")
    if "brent" in out:
        b = out["brent"]
        print(f"  Brent, p = {b['p']:,}: {b['lower']:,.6g} <= T_p <= {b['upper']:,.6g} operation times")
    layers = out["layers"]
    if not layers or not isinstance(layers[0]["forward_flop"], (int, float)):
        return
    top = sorted(layers, key=lambda r: -r["forward_flop"])[:TOP_LAYERS]
    keep = {id(r) for r in top}
    print(f"\n  the {len(top)} heaviest of {len(layers)} layers, in network order (--json lists all):")
    print(f"  {'layer':<42} {'op':<16} {'params':>12} {'forward FLOP':>16} {'depth':>6}")
    for r in (r for r in layers if id(r) in keep):
        print(f"  {r['name'][:42]:<42} {r['op']:<16} {r['params']:>12,} {r['forward_flop']:>16,} {r['depth']:>6}")


def register(sub) -> None:
    wd = sub.add_parser("workdepth", help="work, depth and average parallelism of a model (paper §2.5, App. A)")
    wd.add_argument("--model", default=None, help=f"zoo name ({', '.join(NAMES)}), a JSON spec object, "
                    "an .onnx file or a Hugging Face config.json")
    wd.add_argument("--input-shape", action="append", metavar="NAME=D1xD2x...",
                    help="shape of an ONNX input without a static shape (repeatable)")
    wd.add_argument("--batch", type=positive_int, default=1)
    wd.add_argument("--image-size", type=positive_int, default=None)
    wd.add_argument("--seq-len", type=positive_int, default=None)
    wd.add_argument("--pass", dest="pass_", choices=("forward", "training"), default="forward",
                    help="which pass work/depth describe (training = forward + backward + update)")
    wd.add_argument("--optimizer", choices=tuple(RULES), default="sgd")
    wd.add_argument("--generate", type=positive_int, nargs=2, metavar=("PROMPT", "TOKENS"), default=None,
                    help="work and depth of generating TOKENS tokens after a PROMPT-token prompt (causal decoders)")
    wd.add_argument("--brent", type=positive_int, default=None, metavar="P",
                    help="Brent's bounds on the time with P processors: max(W/P, D) <= T_P <= W/P + D")
    wd.add_argument("--table6", action="store_true",
                    help="print the paper's Table 6 (work and depth of each convolution algorithm) in symbols")
    add_json(wd)
    wd.set_defaults(run=run, show=show)
