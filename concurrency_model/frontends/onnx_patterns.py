"""Patterns in exported ONNX graphs that stand for one operator of the library: attention (MatMul, scale,
mask, Softmax, MatMul), GELU in its erf form, and a tied weight's transposed copy; and the values of small
constants (a Dropout's training flag). Used by :mod:`.onnx_import`."""
from __future__ import annotations

from .common import prod

SCALE_OPS = {"Mul", "Div", "Add", "Sub", "Where", "Cast", "Identity", "Dropout"}  # between the GEMMs of attention


def _onnx():
    import onnx
    return onnx


def attention_patterns(graph, is_weight) -> dict:
    """Find MatMul(Q, Kᵀ) -> [scale, mask] -> Softmax -> [dropout, cast] -> MatMul(P, V) chains of two
    activation GEMMs; return {first MatMul: (softmax, second MatMul, nodes in between, causal)}. A mask
    built by a ``Trilu`` (what exporters make of ``is_causal``) makes it causal."""
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)

    def leads_to_matmul(x, depth=0):
        n = producer.get(x)
        return n is not None and depth < 8 and (n.op_type == "MatMul" or (
            n.op_type in SCALE_OPS and any(leads_to_matmul(i, depth + 1) for i in n.input if i)))

    def has_trilu(x, depth=0):
        n = producer.get(x)
        return n is not None and depth < 8 and (n.op_type == "Trilu" or any(has_trilu(i, depth + 1)
                                                                             for i in n.input if i))

    found = {}
    for sm in graph.node:
        if sm.op_type != "Softmax":
            continue
        inner, x = [], sm.input[0]
        while x in producer and producer[x].op_type in SCALE_OPS:
            n = producer[x]
            inner.append(n)
            x = next((i for i in n.input if i and leads_to_matmul(i)), "")
        mm1 = producer.get(x)
        if mm1 is None or mm1.op_type != "MatMul" or any(is_weight(i) for i in mm1.input):
            continue
        y, after = sm.output[0], []
        while len(consumers.get(y, [])) == 1 and consumers[y][0].op_type in ("Cast", "Dropout", "Identity"):
            after.append(consumers[y][0])
            y = consumers[y][0].output[0]
        nxt = consumers.get(y, [])
        if len(nxt) != 1 or nxt[0].op_type != "MatMul" or nxt[0].input[0] != y or is_weight(nxt[0].input[1]):
            continue
        if any(len(consumers.get(n.output[0], [])) != 1 for n in [mm1, *inner]):
            continue  # the scores are used elsewhere too (e.g. returned): keep the operators
        chain = {o for n in [mm1, *inner, sm, *after] for o in n.output}
        side = [i for n in inner for i in n.input if i and i not in chain]
        found[mm1.name or mm1.output[0]] = (sm, nxt[0], inner + after, side, any(has_trilu(i) for i in side))
    return found


def gelu_patterns(graph, is_const) -> dict:
    """GELU as exporters write it before opset 20: ``x * 0.5 * (1 + erf(x / sqrt(2)))`` (Div or Mul, Erf,
    Add, Mul, Mul in some order); return {first node: (x, output, the nodes)} to count it as one GELU."""
    producer = {o: n for n in graph.node for o in n.output}
    consumers: dict[str, list] = {}
    for n in graph.node:
        for i in n.input:
            consumers.setdefault(i, []).append(n)
    found = {}
    for erf in graph.node:
        if erf.op_type != "Erf":
            continue
        scale = producer.get(erf.input[0])
        if scale is None or scale.op_type not in ("Div", "Mul") or not is_const(scale.input[1]):
            continue
        x = scale.input[0]
        nodes, y = [scale, erf], erf.output[0]
        for _ in range(3):  # Add 1, then the two multiplies (by x and by 0.5)
            nxt = consumers.get(y, [])
            if len(nxt) != 1 or nxt[0].op_type not in ("Add", "Mul"):
                break
            n = nxt[0]
            others = [i for i in n.input if i != y]
            if not all(is_const(i) or i == x or (i in producer and producer[i] in nodes) or
                       (i in producer and producer[i].op_type == "Mul" and x in producer[i].input) for i in others):
                break
            nodes.append(n)
            y = n.output[0]
        if len(nodes) == 5:
            extra = [producer[i] for n in nodes for i in n.input
                     if i in producer and producer[i] not in nodes and producer[i].op_type == "Mul" and x in producer[i].input]
            found[scale.name or scale.output[0]] = (x, y, nodes + extra)
    return found


def constant_values(graph) -> dict:
    """Names of the initializers and Constant outputs, with their value where it is one small number."""
    onnx = _onnx()
    out = {}
    tensors = [(t.name, t) for t in graph.initializer]
    tensors += [(n.output[0], a.t) for n in graph.node if n.op_type == "Constant" for a in n.attribute if a.name == "value"]
    for name, t in tensors:
        v = None
        if prod(t.dims) == 1 and (t.raw_data or t.float_data or t.int64_data or t.int32_data):
            try:
                v = onnx.numpy_helper.to_array(t).reshape(-1)[0].item()
            except Exception:  # noqa: BLE001 - external or odd data: the name is enough
                v = None
        out[name] = v
    for n in graph.node:  # Constant nodes with other attributes (value_float, value_int, ...)
        if n.op_type == "Constant" and n.output[0] not in out:
            out[n.output[0]] = None
    return out


def tied_copies(graph) -> dict:
    """Initializers that are the transpose of another (an exporter's folded copy of a tied weight, e.g.
    GPT's output layer); return {copy: original}, so that the weight is counted once."""
    onnx = _onnx()
    by_shape: dict = {}
    for t in graph.initializer:
        if len(t.dims) == 2 and t.dims[0] != t.dims[1] and t.raw_data:
            by_shape.setdefault(tuple(t.dims), []).append(t)
    out = {}
    for dims, ts in by_shape.items():
        for t in ts:
            for other in by_shape.get(dims[::-1], []):
                if other.name < t.name or other.name in out:
                    continue
                a, b = onnx.numpy_helper.to_array(t), onnx.numpy_helper.to_array(other)
                if a.dtype == b.dtype and (a.T == b).all():
                    out[other.name] = t.name
    return out
