"""ONNX -> graph: ``from_onnx(path)`` (the ``onnx`` extra).

Shapes come from ONNX shape inference (run here, with data propagation, so files saved without shapes
work); an input without a static shape needs ``input_shapes={"name": [1, 3, 224, 224]}`` (CLI:
``--input-shape name=1x3x224x224``). Operators go to the operator library through
:class:`~concurrency_model.frontends.common.Emitter`, as in :mod:`.torch_fx`:

Conv (1d/2d/3d, group, dilation, pads) and ConvTranspose; Gemm and MatMul (a weight on the right: a
linear layer), Einsum; BatchNormalization, LayerNormalization, GroupNormalization, InstanceNormalization,
RMSNormalization; MaxPool, AveragePool, GlobalAveragePool / GlobalMaxPool; Relu, Sigmoid, Tanh, Gelu,
Clip (ReLU6) and the other activations; Softmax, LogSoftmax; Gather on a weight (embedding); LSTM, GRU,
RNN; attention, as the opset-23 ``Attention`` operator or as the exported pattern (a MatMul of two
activations, scale and mask, Softmax, MatMul), which becomes one ``attention`` node with its heads and
sequence length, as the torch import gives; element-wise arithmetic; reductions; reshapes, transposes,
slices, casts and other data movement are free. Anything else becomes an element-wise cost and is
listed, with its count, in a warning and in ``graph.unknown_ops``.

Initializers count as parameters where an operator uses them as weights (Conv, Gemm, MatMul, norms,
embeddings, recurrent weights, and element-wise Add/Mul/Sub: biases, learned scales, position tables);
BatchNormalization's running statistics and shape tensors do not.
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from .common import ACTIVATIONS, EW_OPS, Emitter, prod
from .onnx_patterns import attention_patterns, constant_values, gelu_patterns, tied_copies

# ONNX op type -> the torch-style names of common.EW_OPS / ACTIVATIONS
EW = {"Add": "add", "Sub": "sub", "Mul": "mul", "Div": "div", "Neg": "neg", "Pow": "pow", "Sqrt": "sqrt",
      "Exp": "exp", "Log": "log", "Abs": "abs", "Sin": "sin", "Cos": "cos", "Tan": "tan", "Erf": "erf",
      "Reciprocal": "reciprocal", "Max": "maximum", "Min": "minimum", "Where": "where", "Floor": "floor",
      "Ceil": "ceil", "Round": "round", "Sign": "sign", "Equal": "eq", "Less": "lt", "Greater": "gt",
      "LessOrEqual": "le", "GreaterOrEqual": "ge", "Not": "logical_not", "And": "logical_and",
      "Or": "logical_or", "Xor": "xor", "Mod": "mod", "HardSigmoid": "hardsigmoid", "HardSwish": "hardswish",
      "LeakyRelu": "leaky_relu", "Elu": "elu", "Selu": "selu", "Celu": "celu", "Softplus": "softplus",
      "Mish": "mish", "PRelu": "prelu", "Atan": "atan", "IsNaN": "isnan", "IsInf": "isinf",
      "BitwiseNot": "bitwise_not", "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "Sum": "add",
      "Mean": "add", "Clip": "clamp", "Shrink": "softshrink", "ThresholdedRelu": "threshold"}
ACT = {"Relu": "relu", "Sigmoid": "sigmoid", "Tanh": "tanh", "Gelu": "gelu", "Identity": None}
FREE = {"Reshape", "Transpose", "Squeeze", "Unsqueeze", "Flatten", "Identity", "Cast", "CastLike", "Expand",
        "Slice", "Split", "Tile", "GatherElements", "GatherND", "Pad", "DepthToSpace", "SpaceToDepth", "Trilu",
        "NonZero", "Compress", "ReverseSequence", "Resize", "Upsample", "Optional", "OptionalGetElement",
        "SplitToSequence", "SequenceAt", "Dropout", "DequantizeLinear", "QuantizeLinear", "Gather"}
CONST = {"Shape", "Size", "ConstantOfShape", "Range", "EyeLike", "RandomNormalLike", "RandomUniformLike",
         "RandomNormal", "RandomUniform", "Multinomial", "Bernoulli"}
MOVE = {"Concat", "ScatterND", "ScatterElements", "Scatter", "ConcatFromSequence"}
REDUCE = {"ReduceMean": "mean", "ReduceSum": "sum", "ReduceMax": "amax", "ReduceMin": "amin", "ReduceProd": "prod",
          "ReduceL1": "norm", "ReduceL2": "norm", "ReduceLogSumExp": "logsumexp", "ReduceSumSquare": "sum",
          "ReduceLogSum": "sum", "ArgMax": "argmax", "ArgMin": "argmin", "CumSum": "cumsum", "TopK": "topk",
          "LpNormalization": "norm"}
PARAM_OPS = {"Conv", "ConvTranspose", "Gemm", "MatMul", "Einsum", "BatchNormalization", "LayerNormalization",
             "GroupNormalization", "InstanceNormalization", "RMSNormalization", "SimplifiedLayerNormalization",
             "Gather", "LSTM", "GRU", "RNN", "Add", "Mul", "Sub", "PRelu"}


def _onnx():
    try:
        import onnx
    except ImportError:  # pragma: no cover - the extra is missing
        raise ImportError("from_onnx needs onnx: pip install 'concurrency-model[onnx]'", name="onnx") from None
    return onnx


def _dims(type_proto) -> list | None:
    t = type_proto.tensor_type
    if not t.HasField("shape"):
        return None
    return [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in t.shape.dim]


def _attrs(node) -> dict:
    onnx = _onnx()
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def parse_shape_arg(text: str) -> tuple[str, list[int]]:
    """``name=1x3x224x224`` -> ("name", [1, 3, 224, 224]) (the CLI's ``--input-shape``)."""
    name, _, dims = text.rpartition("=")
    try:
        return name, [int(d) for d in dims.lower().split("x")]
    except ValueError:
        raise ValueError(f"input_shape: expected NAME=D1xD2x..., got {text!r}") from None


def load(path_or_model, input_shapes: dict | None = None):
    """Load the model, pin the input shapes and run shape inference; return (model, shapes by name)."""
    onnx = _onnx()
    if isinstance(path_or_model, onnx.ModelProto):
        model = path_or_model
    else:
        p = Path(path_or_model)
        if not p.is_file():
            raise ValueError(f"onnx: no such file {str(path_or_model)!r}")
        try:
            model = onnx.load(str(p), load_external_data=False)  # weights are not needed, only their shapes
        except Exception as e:  # noqa: BLE001 - protobuf raises several kinds
            raise ValueError(f"onnx: {p.name} is not an ONNX model ({type(e).__name__}: {e})") from None
    model_copy = onnx.ModelProto()
    model_copy.CopyFrom(model)
    model = model_copy
    g = model.graph
    inits = {t.name for t in g.initializer}
    given = {}
    for k, v in (input_shapes or {}).items():
        if isinstance(v, str):
            v = parse_shape_arg(f"{k}={v}")[1]
        given[k] = [int(d) for d in v]
    inputs = [i for i in g.input if i.name not in inits]
    names = {i.name for i in inputs}
    for k in given:
        if k not in names:
            raise ValueError(f"input_shapes: the model has no input {k!r}; its inputs: {', '.join(sorted(names))}")
    for i in inputs:
        dims = given.get(i.name) or _dims(i.type)
        if dims is None or any(not isinstance(d, int) or d < 1 for d in dims):
            raise ValueError(f"input {i.name!r} has no static shape ({dims}); give it: from_onnx(path, input_shapes="
                             f"{{{i.name!r}: [...]}}) or, on the command line, --input-shape {i.name}=1x3x224x224")
        shape = i.type.tensor_type.shape
        del shape.dim[:]
        for d in dims:
            shape.dim.add().dim_value = d
    try:
        model = onnx.shape_inference.infer_shapes(model, check_type=False, strict_mode=False, data_prop=True)
    except Exception as e:  # noqa: BLE001 - report and go on with what the file has
        raise ValueError(f"onnx: shape inference failed ({type(e).__name__}: {str(e)[:300]})") from None
    shapes = {}
    for vi in [*model.graph.input, *model.graph.value_info, *model.graph.output]:
        dims = _dims(vi.type)
        if dims is not None and all(isinstance(d, int) for d in dims):
            shapes[vi.name] = tuple(dims)
    for t in model.graph.initializer:
        shapes[t.name] = tuple(int(d) for d in t.dims)
    return model, shapes


def _convert(model, shapes: dict, name: str, batch=None, value_bytes=4):
    onnx = _onnx()
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    inputs = [i for i in g.input if i.name not in inits]
    batch0 = shapes[inputs[0].name][0] if inputs and shapes.get(inputs[0].name) else 1
    em = Emitter(name, batch0, batch0 if batch is None else batch, value_bytes, "from_onnx")
    for i in inputs:
        em.input(i.name, shapes[i.name], name=i.name)
    float_types = {onnx.TensorProto.FLOAT, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16,
                   onnx.TensorProto.DOUBLE}
    tied = tied_copies(g)
    for t in g.initializer:
        if t.data_type in float_types and prod(t.dims) > 1 and t.name not in tied:
            em.parameter(t.name, t.dims)
        else:
            em.constant(t.name, t.dims)
    for copy, original in tied.items():
        em.alias(copy, original, shapes[copy])
    patterns = attention_patterns(g, lambda k: k in inits)
    consts = constant_values(g)
    gelus = gelu_patterns(g, lambda k: k in consts)
    skip: dict[str, str] = {}  # node output -> the fused attention's output it stands for
    missing = 0
    for node in g.node:
        outs = [o for o in node.output if o]
        if not outs:
            continue
        if outs[0] in skip:
            continue

        def shape_of(o, node=node):
            nonlocal missing
            if o in shapes:
                return shapes[o]
            missing += 1
            known = [shapes[i] for i in node.input if i in shapes]
            return max(known, key=prod) if known else (1,)

        ins = [i for i in node.input if i and em.has(i)]
        op = node.op_type

        def weight(j, node=node):  # a norm's scale or bias: only a learned one makes the norm affine
            k = node.input[j] if len(node.input) > j and node.input[j] else None
            return k if k is not None and em.has(k) and em.is_param(k) else None

        shape = shape_of(outs[0])
        nm = (node.name or f"{op.lower()}").strip("/").replace("/", ".")
        a = _attrs(node)
        if op == "Constant":
            v = a.get("value")
            em.constant(outs[0], tuple(v.dims) if hasattr(v, "dims") else ())
            continue
        if op in CONST:
            em.constant(outs[0], shape, em.batched(ins))
            continue
        if (op in FREE or op in MOVE) and ins and all(em.vals[i].node is None for i in ins) and \
                any(em.is_param(i) for i in ins):  # weights sliced, reordered or joined before use
            for o in outs:
                em.carry(o, ins, shape_of(o))
            continue
        if op not in PARAM_OPS:  # initializers read by shape or mask operators are constants
            ins = [i for i in ins if not em.is_param(i)] + [i for i in ins if em.is_param(i) and op in FREE]
        if em.foldable(ins):
            for o in outs:
                em.constant(o, shape_of(o), em.batched(ins))
            continue
        key = (node.name or outs[0])
        if key in gelus and em.has(gelus[key][0]):
            x, y, nodes = gelus[key]
            em.activation("gelu", x, y, shape_of(y), nm.rsplit(".", 1)[0] + ".gelu" if "." in nm else "gelu")
            for n in nodes:
                for o in n.output:
                    skip[o] = y
            continue
        if op == "MatMul" and key in patterns:
            sm, mm2, between, side, causal = patterns[key]
            q, kt = node.input
            qs, ks = shapes.get(q), shapes.get(kt)
            out = mm2.output[0]
            if qs and ks and len(qs) >= 3 and all(em.has(i) for i in (q, kt, mm2.input[1])):
                k_key = f"{kt}::transposed"
                em.alias(k_key, kt, (*ks[:-2], ks[-1], ks[-2]))  # K from Kᵀ: (..., s_kv, d)
                mask = [i for i in side if em.has(i) and em.vals[i].node is not None]  # e.g. a padding mask
                where = nm.rsplit(".", 1)[0] + ".attention" if "." in nm else "attention"
                em.attention(q, k_key, mm2.input[1], out, shape_of(out), causal and not mask, where, extra=tuple(mask))
                for n in [sm, mm2, *between]:
                    for o in n.output:
                        skip[o] = out
                continue
        if op == "Dropout" and len(node.input) > 2 and consts.get(node.input[2]) and em.has(node.input[0]):
            em.elementwise("dropout", [node.input[0]], outs[0], shape, nm)  # training_mode: a real dropout
            for o in outs[1:]:
                em.alias(o, outs[0], shape_of(o))
            continue
        if op in FREE and not (op == "Gather" and em.is_param(node.input[0]) and not em.foldable(node.input[1:2])):
            src = node.input[0] if em.has(node.input[0]) else (ins[0] if ins else None)
            for o in outs:
                if src is None:
                    em.constant(o, shape_of(o))
                else:
                    em.alias(o, src, shape_of(o))
            continue
        if op in MOVE:
            em.concat(ins, outs[0], shape, nm)
        elif op == "Conv" or op == "ConvTranspose":
            x, w = node.input[0], node.input[1]
            b = node.input[2] if len(node.input) > 2 and node.input[2] else None
            d = len(shapes[x]) - 2
            pads = a.get("pads") or [0] * (2 * d)
            em.conv(x, w, b, outs[0], shape, a.get("strides") or [1] * d, list(pads[:d]), a.get("dilations") or [1] * d,
                    a.get("group", 1), nm, transposed=op == "ConvTranspose")
        elif op == "Gemm":
            x, w = node.input[0], node.input[1]
            b = node.input[2] if len(node.input) > 2 and node.input[2] else None
            if em.is_param(w) and not a.get("transA"):
                em.linear(x, w, b, outs[0], shape, nm)
            else:
                em.matmul(x, w, outs[0], shape, nm, extra=(b,) if b else ())
        elif op == "MatMul":
            em.matmul(node.input[0], node.input[1], outs[0], shape, nm)
        elif op == "Einsum":
            em.einsum(a["equation"].decode() if isinstance(a["equation"], bytes) else a["equation"],
                      list(node.input), outs[0], shape, nm)
        elif op == "BatchNormalization":
            em.batch_norm(node.input[0], weight(1), weight(2), outs[0], shape, nm)
        elif op in ("LayerNormalization", "RMSNormalization", "SimplifiedLayerNormalization"):
            x = node.input[0]
            axis = a.get("axis", -1) % len(shapes[x])
            em.layer_norm(x, weight(1), weight(2), prod(shapes[x][axis:]), outs[0], shape, nm,
                          rms=op != "LayerNormalization")
        elif op == "GroupNormalization":
            em.group_norm(node.input[0], weight(1), weight(2), a["num_groups"], outs[0], shape, nm)
        elif op == "InstanceNormalization":  # also what exporters make of GroupNorm (constant scale, then Mul/Add)
            x = node.input[0]
            em.group_norm(x, weight(1), weight(2), shapes[x][1], outs[0], shape, nm)
        elif op in ("MaxPool", "AveragePool"):
            x = node.input[0]
            d = len(shapes[x]) - 2
            pads = a.get("pads") or [0] * (2 * d)
            em.pool("max" if op == "MaxPool" else "avg", x, outs[0], shape, a["kernel_shape"], a.get("strides"),
                    list(pads[:d]), nm, bool(a.get("ceil_mode", 0)))
        elif op in ("GlobalAveragePool", "GlobalMaxPool"):
            em.adaptive_pool("avg" if "Average" in op else "max", node.input[0], outs[0], shape, nm)
        elif op in ("Softmax", "LogSoftmax"):
            x = node.input[0]
            em.softmax(x, a.get("axis", -1) % len(shapes[x]), outs[0], shape, nm, log=op == "LogSoftmax")
        elif op == "Gather":  # a weight table indexed by activations: an embedding
            em.embedding(node.input[0], node.input[1], outs[0], shape, nm)
        elif op in ("LSTM", "GRU", "RNN"):
            x = node.input[0]
            direction = a.get("direction", b"forward")
            direction = direction.decode() if isinstance(direction, bytes) else direction
            weights = [i for i in node.input[1:4] if i]
            has_bias = len(node.input) > 3 and bool(node.input[3])
            em.recurrent(op.lower(), x, weights, outs[0], shape, int(a["hidden_size"]), 1,
                         direction == "bidirectional", has_bias, bool(a.get("layout", 0)), nm)
        elif op == "Attention" and len(node.input) >= 3 and len(shapes.get(node.input[0], ())) == 4:
            mask = node.input[3] if len(node.input) > 3 and node.input[3] else None
            em.attention(node.input[0], node.input[1], node.input[2], outs[0], shape, bool(a.get("is_causal", 0)), nm,
                         extra=(mask,) if mask else ())
        elif op in ACT and ACT[op]:
            em.activation(ACT[op], ins[0], outs[0], shape, nm)
        elif op in REDUCE:
            em.reduction(REDUCE[op], ins[0], outs[0], shape, nm)
        elif op in EW:
            name_ = EW[op]
            if name_ in ACTIVATIONS:
                em.activation(name_, ins[0], outs[0], shape, nm)
            else:
                em.elementwise(name_, ins, outs[0], shape, nm, ops=EW_OPS.get(name_, 1) * max(1, len(ins) - 1)
                               if op in ("Sum", "Mean") else None)
        else:
            em.unknown_op(op, ins, outs[0], shape, nm)
        for o in outs[1:]:  # extra outputs (LSTM states, indices, saved statistics) stand for the node
            if em.has(outs[0]):
                em.alias(o, outs[0], shape_of(o))
    for o, fused in skip.items():
        if em.has(fused) and not em.has(o):
            em.alias(o, fused, shapes.get(o, em.shape(fused)))
    graph = em.finish(rebuild=partial(_convert, model, shapes, name))
    graph.missing_shapes = missing
    return graph


def from_onnx(path, *, input_shapes: dict | None = None, batch=None, value_bytes=4, name: str | None = None):
    """Import an ONNX model (a file path or a loaded ``onnx.ModelProto``) as a graph.

    Parameters
    ----------
    path : the ``.onnx`` file (weights stored outside it are not read: only their shapes are needed).
    input_shapes : ``{input name: [dims]}`` (or ``"1x3x224x224"``) for inputs without a static shape.
    batch : the batch the graph is built for (default: the first input's first dimension); an integer or
        a sympy symbol.
    value_bytes : bytes per value of the traffic counts.

    Examples
    --------
    >>> import onnx
    >>> from onnx import TensorProto, helper, numpy_helper
    >>> import numpy as np
    >>> w = numpy_helper.from_array(np.zeros((64, 10), np.float32), "w")
    >>> graph = helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "mlp",
    ...     [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", 64])],
    ...     [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", 10])], [w])
    >>> g = from_onnx(helper.make_model(graph), input_shapes={"x": [32, 64]})
    >>> g.params, int(g.forward_macs())
    (640, 20480)
    """
    model, shapes = load(path, input_shapes)
    default = Path(str(path)).stem if not hasattr(path, "graph") else (path.graph.name or "onnx_model")
    return _convert(model, shapes, name or default, batch, value_bytes)
