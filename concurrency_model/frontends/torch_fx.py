"""PyTorch -> graph: ``from_torch(module, example_inputs)`` (the ``torch`` extra).

The module is traced with ``torch.export`` (non-strict) on fake tensors: nothing is computed and no
activation memory is allocated, and a module built on the meta device (``with torch.device("meta"):``)
has no weights either, so a 70B model imports on a laptop. The exported ATen graph carries every
tensor's shape and the submodule each operator came from; each operator goes to the operator library
through :class:`~concurrency_model.frontends.common.Emitter`:

linear / addmm / mm / bmm / matmul / baddbmm / einsum -> GEMMs (a parameter on the right: a linear layer);
conv 1d/2d/3d and transposed (groups, dilation, stride, padding); batch, layer, group, instance and RMS
norm; activations; softmax and log-softmax; ``scaled_dot_product_attention`` (``nn.MultiheadAttention``
and ``nn.TransformerEncoderLayer`` arrive as projections + attention); embedding; LSTM / GRU / RNN
(stacked, bidirectional); max / average / adaptive pooling; element-wise arithmetic; reductions;
views, reshapes, indexing and copies are free. Operations on constants only (masks, position ids,
rotary tables) are folded: they are computed once, not per sample. Anything else becomes an element-wise
cost (one FLOP per output element) and is listed with its count in an
:class:`~concurrency_model.frontends.common.UnknownOperatorWarning` and in ``graph.unknown_ops``.

The first dimension (``batch_dim``) of the first tensor input is the batch of the example (``B0``); the graph is built
for ``batch`` (default ``B0``; a symbol works too) and rebuilds itself for another batch without tracing
again (``get_model(graph, batch=8)``, or as a scenario's model).
"""
from __future__ import annotations

import logging
import warnings
from functools import partial

from .common import ACTIVATIONS, EW_OPS, Emitter, UnknownOperatorWarning

FREE = {"view", "_unsafe_view", "reshape", "transpose", "permute", "t", "expand", "expand_as", "squeeze",
        "unsqueeze", "flatten", "unflatten", "slice", "select", "narrow", "contiguous", "clone", "detach",
        "alias", "lift_fresh_copy", "_to_copy", "to", "type_as", "view_as", "reshape_as", "split",
        "split_with_sizes", "chunk", "unbind", "tensor_split", "repeat_interleave", "repeat", "expand_copy",
        "view_copy", "permute_copy", "as_strided", "movedim", "swapaxes", "swapdims", "unfold", "index_select",
        "index", "_unsafe_index", "gather", "take_along_dim", "constant_pad_nd", "pad", "roll", "flip", "tril",
        "triu", "diagonal", "squeeze_copy", "unsqueeze_copy", "pixel_shuffle", "pixel_unshuffle",
        "channel_shuffle", "native_channel_shuffle", "_reshape_alias", "float", "half", "bfloat16", "type",
        "dequantize", "masked_select", "nonzero", "_assert_tensor_metadata", "resolve_conj", "resolve_neg",
        "real", "view_as_real", "view_as_complex", "_reshape_copy", "slice_copy", "select_copy",
        "transpose_copy", "t_copy", "detach_copy", "clone_copy", "set_", "copy"}
MOVE = {"cat", "concat", "concatenate", "stack", "hstack", "vstack", "index_put", "scatter", "slice_scatter",
        "select_scatter", "index_copy", "masked_scatter", "diagonal_scatter", "as_strided_scatter"}
CREATE = {"zeros_like", "ones_like", "empty_like", "full_like", "rand_like", "randn_like", "randint_like",
          "new_zeros", "new_ones", "new_empty", "new_full", "arange", "zeros", "ones", "full", "empty",
          "scalar_tensor", "tensor", "rand", "randn", "randint", "empty_strided", "linspace", "eye",
          "bernoulli", "zero", "detach_"}
REDUCE = {"sum", "mean", "amax", "amin", "max", "min", "var", "std", "var_mean", "std_mean", "norm",
          "linalg_vector_norm", "logsumexp", "prod", "argmax", "argmin", "cumsum", "cumprod", "topk", "sort",
          "all", "any", "count_nonzero", "nansum", "nanmean", "median", "mode", "aminmax", "max_pool"}
DROPOUT = {"dropout", "native_dropout", "feature_dropout", "alpha_dropout", "feature_alpha_dropout"}
MATMUL = {"mm", "bmm", "matmul", "dot", "mv", "vdot", "inner", "outer", "addmm", "baddbmm", "addbmm", "addmv", "linear",
          "einsum", "bilinear"}
ATTENTION = {"scaled_dot_product_attention", "_scaled_dot_product_flash_attention_for_cpu",
             "_scaled_dot_product_flash_attention", "_scaled_dot_product_efficient_attention",
             "_scaled_dot_product_cudnn_attention", "_scaled_dot_product_attention_math"}
RECURRENT = {"lstm": "lstm", "gru": "gru", "rnn_tanh": "rnn", "rnn_relu": "rnn"}
NN_LEAVES_NOT = ("MultiheadAttention", "Transformer", "container.")


class TraceError(ValueError):
    """The module could not be traced; the message names the submodule and suggests the ONNX path."""


def _torch():
    try:
        import torch
    except ImportError:  # pragma: no cover - the extra is missing
        raise ImportError("from_torch needs PyTorch: pip install torch==2.13.0 then "
                          "pip install 'concurrency-model[torch]'") from None
    return torch


def _op_name(target) -> str:
    schema = getattr(target, "_schema", None)
    if schema is not None:
        name = schema.name.split("::")[-1]
    else:
        name = getattr(target, "__name__", str(target))
    if name.endswith("_") and not name.endswith("__") and name not in ("set_", "detach_"):
        name = name[:-1]  # in-place variant
    return name


def _bind(node) -> dict:
    """The operator's arguments by their schema names (defaults filled in)."""
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    out = {}
    for i, a in enumerate(schema.arguments):
        if i < len(node.args):
            out[a.name] = node.args[i]
        elif a.name in node.kwargs:
            out[a.name] = node.kwargs[a.name]
        else:
            out[a.name] = a.default_value if a.has_default_value() else None
    return out


def _shapes(val) -> list[tuple]:
    torch = _torch()
    if isinstance(val, torch.Tensor):
        return [tuple(int(d) for d in val.shape)]
    if isinstance(val, (list, tuple)):
        out = []
        for v in val:
            out += _shapes(v) if isinstance(v, (torch.Tensor, list, tuple)) else []
        return out
    return []


def _tensor_nodes(obj, em) -> list[str]:
    """Names of the traced tensors among the (possibly nested) arguments."""
    torch = _torch()
    if isinstance(obj, torch.fx.Node):
        return [obj.name] if em.has(obj.name) else []
    if isinstance(obj, (list, tuple)):
        return [n for o in obj for n in _tensor_nodes(o, em)]
    if isinstance(obj, dict):
        return [n for o in obj.values() for n in _tensor_nodes(o, em)]
    return []


def _key(x, em):
    return x.name if x is not None and hasattr(x, "name") and em.has(x.name) else None


class _Namer:
    """Node names from the submodule path (``layers.0.attn.q_proj``); the first operator of a built-in
    leaf module (Linear, Conv2d, LayerNorm, ...) takes the module's own name."""

    def __init__(self, em: Emitter):
        self.em = em
        self.used: set[str] = set()

    def __call__(self, node, op: str) -> str:
        stack = node.meta.get("nn_module_stack") or {}
        if not stack:
            return op
        path, cls = list(stack.values())[-1]
        cls = cls if isinstance(cls, str) else f"{cls.__module__}.{cls.__qualname__}"
        if path and path not in self.used and cls.startswith("torch.nn.modules.") and \
                not any(s in cls for s in NN_LEAVES_NOT):
            self.used.add(path)
            return path
        return f"{path}.{op}" if path else op


def _convert(ep, name: str, batch0: int, batch_dim: int = 0, batch=None, value_bytes=4):
    """Walk an ``ExportedProgram``'s graph and emit the toolkit's nodes."""
    torch = _torch()
    em = Emitter(name, batch0, batch0 if batch is None else batch, value_bytes, "from_torch")
    kinds = {spec.arg.name: spec.kind.name for spec in ep.graph_signature.input_specs
             if hasattr(spec.arg, "name")}
    namer = _Namer(em)
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder":
            if not isinstance(val, torch.Tensor):
                continue
            kind = kinds.get(node.name, "USER_INPUT")
            if kind == "USER_INPUT":
                em.input(node.name, val.shape, batch_dim=batch_dim)
            elif kind == "PARAMETER":
                em.parameter(node.name, val.shape)
            else:
                em.constant(node.name, val.shape)
        elif node.op == "get_attr":
            if isinstance(val, torch.Tensor):
                em.constant(node.name, val.shape)
        elif node.op == "call_function":
            _op(em, node, namer)
    return em.finish(rebuild=partial(_convert, ep, name, batch0, batch_dim))


def _op(em: Emitter, node, namer: _Namer) -> None:  # noqa: C901  (one dispatch table)
    shapes = _shapes(node.meta.get("val"))
    if not shapes:
        return  # sizes, scalars, assertions
    op = _op_name(node.target)
    shape = shapes[0]
    key = node.name
    ins = _tensor_nodes((node.args, node.kwargs), em)
    if op == "getitem":
        src = _key(node.args[0], em)
        if src is not None:
            em.alias(key, src, shape)
        return
    if op in CREATE:
        em.constant(key, shape, em.batched(ins))
        return
    if em.foldable(ins):
        em.constant(key, shape, em.batched(ins))
        return
    if op in FREE:
        em.alias(key, ins[0], shape)
        return
    a = _bind(node)
    name = namer(node, op)

    def k(arg):
        return _key(a.get(arg), em)

    if op in MOVE:
        nodes = [i for i in ins if em.vals[i].node is not None]
        if len(set(em.vals[i].node for i in nodes)) > 1 or any(em.is_param(i) for i in ins):
            em.concat(ins, key, shape, name)
        else:
            em.alias(key, nodes[0], shape)
    elif op == "linear":
        em.linear(k("input"), k("weight"), k("bias"), key, shape, name)
    elif op == "addmm":
        x, w, bias = k("mat1"), k("mat2"), k("self")
        if em.is_param(w):
            em.linear(x, w, bias, key, shape, name)
        else:
            em.matmul(x, w, key, shape, name, extra=(bias,))
    elif op in ("mm", "bmm", "matmul", "mv", "dot", "vdot", "inner"):
        em.matmul(ins[0], ins[1], key, shape, name)
    elif op in ("baddbmm", "addbmm", "addmv"):
        em.matmul(ins[1], ins[2], key, shape, name, extra=(ins[0],))
    elif op == "einsum":
        em.einsum(a["equation"], [t.name for t in a["tensors"]], key, shape, name)
    elif op in ("conv1d", "conv2d", "conv3d", "convolution", "_convolution", "conv_transpose1d",
                "conv_transpose2d", "conv_transpose3d"):
        transposed = bool(a.get("transposed")) or op.startswith("conv_transpose")
        pad = a.get("padding")
        pad = 0 if isinstance(pad, str) else pad  # "same" / "valid": fitted to the traced output size
        em.conv(k("input"), k("weight"), k("bias"), key, shape, a.get("stride") or 1, pad or 0,
                a.get("dilation") or 1, a.get("groups") or 1, name, transposed=transposed)
    elif "batch_norm" in op and "backward" not in op:
        em.batch_norm(k("input"), k("weight"), k("bias"), key, shape, name)
    elif op in ("layer_norm", "native_layer_norm", "rms_norm", "_fused_rms_norm"):
        features = 1
        for d in a["normalized_shape"]:
            features *= int(d)
        em.layer_norm(k("input"), k("weight"), k("bias") if "bias" in a else None, features, key, shape, name,
                      rms="rms" in op)
    elif op in ("group_norm", "native_group_norm"):
        em.group_norm(k("input"), k("weight"), k("bias"), int(a.get("num_groups") or a.get("group")), key, shape,
                      name)
    elif op == "instance_norm":
        em.group_norm(k("input"), k("weight"), k("bias"), int(em.shape(k("input"))[1]), key, shape, name)
    elif op in ("softmax", "_softmax", "_safe_softmax", "log_softmax", "_log_softmax"):
        x = k("self")
        em.softmax(x, int(a["dim"]) % max(1, len(em.shape(x))), key, shape, name, log="log" in op)
    elif op in ATTENTION:
        mask = k("attn_mask") or k("attn_bias")
        em.attention(k("query"), k("key"), k("value"), key, shape, bool(a.get("is_causal")), name,
                     extra=(mask,) if mask else ())
    elif op == "embedding":
        em.embedding(k("weight"), k("indices"), key, shape, name)
    elif op in RECURRENT and node.target.__name__.endswith(".input"):
        weights = [p.name for p in a["params"] if em.has(p.name)]
        dirs = 2 if a["bidirectional"] else 1
        em.recurrent(RECURRENT[op], k("input"), weights, key, shape, int(shape[-1]) // dirs, int(a["num_layers"]),
                     bool(a["bidirectional"]), bool(a["has_biases"]), bool(a["batch_first"]), name)
    elif op.startswith(("max_pool", "avg_pool")) and op[-2:] in ("1d", "2d", "3d", "es"):
        kind = "max" if op.startswith("max") else "avg"
        em.pool(kind, k("self"), key, shape, a["kernel_size"], a.get("stride"), a.get("padding") or 0, name,
                bool(a.get("ceil_mode")))
    elif "adaptive_avg_pool" in op or "adaptive_max_pool" in op:
        em.adaptive_pool("avg" if "avg" in op else "max", k("self"), key, shape, name)
    elif op == "hardtanh" and a.get("min_val") == 0 and a.get("max_val") == 6:
        em.activation("relu6", ins[0], key, shape, name)
    elif op in ACTIVATIONS:
        em.activation(op, ins[0], key, shape, name)
    elif op in DROPOUT:
        em.elementwise("dropout", ins[:1], key, shape, name)
    elif op in ("max", "min") and len(ins) == 2:
        em.elementwise("maximum", ins, key, shape, name)
    elif op in REDUCE:
        em.reduction(op, ins[0], key, shape, name)
    elif op in EW_OPS:
        em.elementwise(op, ins, key, shape, name)
    else:
        em.unknown_op(op, ins, key, shape, name)


def _locate_failure(module, args, kwargs) -> tuple[str, str]:
    """Run the export again with hooks that track the submodule being called; return its path and class."""
    torch = _torch()
    stack: list[tuple[str, str]] = []
    hooks = []

    def enter(info):
        def hook(m, a):
            stack.append(info)
        return hook

    def leave(m, a, o):  # must return None (a value would replace the module's output)
        if stack:
            stack.pop()

    for path, sub in module.named_modules():
        hooks.append(sub.register_forward_pre_hook(enter((path or "<root>", type(sub).__name__))))
        hooks.append(sub.register_forward_hook(leave))
    log = logging.getLogger("torch.fx.experimental.symbolic_shapes")
    level = log.level
    log.setLevel(logging.ERROR)  # the first attempt has already logged the failing graph
    try:
        torch.export.export(module, args, kwargs, strict=False)
    except Exception:  # noqa: BLE001 - the stack tells where it failed
        pass
    finally:
        log.setLevel(level)
        for h in hooks:
            h.remove()
    return stack[-1] if stack else ("<root>", type(module).__name__)


def _reason(e: Exception) -> str:
    lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]
    text = lines[0] if lines else ""
    return f"{type(e).__name__}: {text[:300]}"


def from_torch(module, example_inputs, *, batch=None, value_bytes=4, name: str | None = None,
               example_kwargs: dict | None = None, batch_dim: int = 0):
    """Import a ``torch.nn.Module`` as a graph, tracing it on fake tensors (nothing is computed).

    Parameters
    ----------
    module : a ``torch.nn.Module``; on the meta device it needs no weight memory.
    example_inputs : a tensor or a tuple of tensors (meta tensors do; ``torch.empty(..., device="meta")``);
        dimension ``batch_dim`` of the first one is the example's batch.
    batch : the batch the graph is built for (default: the example's); an integer or a sympy symbol.
    value_bytes : bytes per value of the traffic counts (4 for fp32, 2 for bf16).
    batch_dim : the batch dimension of the inputs (1 for sequence-first models such as ``nn.LSTM()``).

    Returns a :class:`~concurrency_model.graph.Graph` with ``unknown_ops`` (operators counted as
    element-wise, by name) and ``unused_params`` (parameters no operator read).

    Raises :class:`TraceError` (a ``ValueError``) naming the submodule that could not be traced.

    Examples
    --------
    >>> import torch
    >>> with torch.device("meta"):
    ...     net = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.GELU(), torch.nn.Linear(256, 10))
    >>> g = from_torch(net, torch.empty(32, 64, device="meta"))
    >>> g.params, int(g.forward_macs())
    (19210, 606208)
    """
    torch = _torch()
    if not isinstance(module, torch.nn.Module):
        raise ValueError(f"module: expected a torch.nn.Module, got {type(module).__name__}")
    args = tuple(example_inputs) if isinstance(example_inputs, (tuple, list)) else (example_inputs,)
    kwargs = dict(example_kwargs or {})
    first = next(iter(module.parameters()), None)
    if first is None:
        first = next(iter(module.buffers()), None)
    if first is not None and first.device.type == "meta":  # shapes only: inputs on the meta device too
        def to_meta(t):
            return t.to("meta") if isinstance(t, torch.Tensor) else t
        args = tuple(torch.utils._pytree.tree_map(to_meta, list(args)))
        kwargs = torch.utils._pytree.tree_map(to_meta, kwargs)
    tensors = [t for t in torch.utils._pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if not tensors:
        raise ValueError("example_inputs: need at least one tensor")
    if not isinstance(batch_dim, int) or batch_dim < 0:
        raise ValueError(f"batch_dim: must be a non-negative integer, got {batch_dim!r}")
    batch0 = int(tensors[0].shape[batch_dim]) if tensors[0].dim() > batch_dim else 1
    try:
        with warnings.catch_warnings():  # RNN modules re-assign their flat weights during export: harmless
            warnings.filterwarnings("ignore", message=r"The tensor attributes .*_flat_weights")
            ep = torch.export.export(module, args, kwargs, strict=False)
    except Exception as e:  # noqa: BLE001 - any tracing failure is reported with where it happened
        path, cls = _locate_failure(module, args, kwargs)
        raise TraceError(
            f"module: cannot trace submodule {path!r} ({cls}): {_reason(e)}. Fallback: export the model to "
            f"ONNX (torch.onnx.export(module, example_inputs, 'model.onnx', dynamo=False)) and import it "
            f"with from_onnx('model.onnx'), or make {path!r} traceable (no control flow on tensor values)"
        ) from e
    return _convert(ep, name or type(module).__name__, batch0, batch_dim, batch, value_bytes)


__all__ = ["from_torch", "TraceError", "UnknownOperatorWarning"]
