"""The operators of :class:`~.common.Emitter`: each frontend operator on full shapes -> its cost and a
graph node (linear, matmul, einsum, convolution, pooling, normalization, softmax, attention, embedding,
recurrent, element-wise, reductions, and unknown operators counted as element-wise).

The mixin uses the emitter's bookkeeping (``shape``, ``batched``, ``lead``, ``emit``, ...); the costs
come from the operator library (:mod:`concurrency_model.ops`).
"""
from __future__ import annotations

import math

from ..cost import Cost, OpCost, chain, clog2
from ..ops import attention as att
from ..ops import conv as convm
from ..ops import dense, elementwise, embedding, norm, pool, recurrent, softmax

ACTIVATIONS = set(elementwise.ACTIVATIONS)
# element-wise operators of other functions: operations per element (the elementwise module's convention)
EW_OPS = {"add": 1, "sub": 1, "rsub": 1, "mul": 1, "div": 1, "neg": 1, "pow": 1, "sqrt": 1, "rsqrt": 1,
          "exp": 1, "log": 1, "log1p": 1, "expm1": 1, "abs": 1, "sin": 1, "cos": 1, "tan": 1, "erf": 1,
          "reciprocal": 1, "square": 1, "maximum": 1, "minimum": 1, "clamp": 2, "clamp_min": 1, "clamp_max": 1,
          "where": 1, "masked_fill": 1, "floor": 1, "ceil": 1, "round": 1, "sign": 1, "eq": 1, "ne": 1, "lt": 1,
          "gt": 1, "le": 1, "ge": 1, "logical_not": 1, "logical_and": 1, "logical_or": 1, "bitwise_not": 1,
          "bitwise_and": 1, "bitwise_or": 1, "addcmul": 2, "addcdiv": 2, "lerp": 3, "fill": 0, "hardtanh": 2,
          "hardswish": 4, "hardsigmoid": 3, "leaky_relu": 2, "elu": 4, "selu": 5, "celu": 4, "softplus": 3,
          "mish": 7, "prelu": 2, "logsigmoid": 5, "glu": 5, "threshold": 1, "erfinv": 1, "atan": 1,
          "isnan": 1, "isinf": 1, "xor": 1, "mod": 1, "fmod": 1, "remainder": 1, "floor_divide": 1,
          "log_sigmoid_forward": 5, "hardshrink": 1, "softshrink": 2}


def prod(xs) -> int:
    return int(math.prod(int(v) for v in xs))


class OperatorEmitters:
    """The operator methods of :class:`~.common.Emitter` (see the module)."""

    def _scalar_cost(self, op: str, n, ops: int, in_el, grad_ops: int | None = None) -> OpCost:
        vb = self.vb
        g = ops if grad_ops is None else grad_ops
        return OpCost(op, Cost(flop=ops * n, depth=min(ops, 1) if ops else 0, bytes=vb * (in_el + n)),
                      Cost(flop=g * n, depth=1 if g else 0, bytes=vb * (in_el + n)), source="element-wise")

    def linear(self, x, w, bias, out, shape, name):
        xs = self.shape(x)
        c_in, c_out = int(xs[-1]) if xs else 1, int(shape[-1]) if shape else 1
        batched = self.batched([x])
        rows_full = prod(xs[:-1])
        cost = dense.linear(self.lead(rows_full, batched), c_in, c_out, bias is not None, self.vb)
        return self.emit("linear", [x, w, bias], out, shape, cost, name, c_in=c_in, c_out=c_out, split=None,
                         rows_per_sample=self.per_sample_count(rows_full, batched))

    def matmul(self, a, b, out, shape, name, extra=()):
        """``a @ b`` with NumPy broadcasting; a parameter on the right makes it a linear layer."""
        sa, sb = self.shape(a), self.shape(b)
        m, k = (1, sa[0]) if len(sa) == 1 else (sa[-2], sa[-1])
        n = 1 if len(sb) == 1 else sb[-1]
        if self.is_param(b) and not self.is_param(a) and len(sb) == 2:
            rows_full = prod(sa[:-1])
            batched = self.batched([a])
            cost = dense.linear(self.lead(rows_full, batched), k, n, False, self.vb)
            return self.emit("linear", [a, b, *extra], out, shape, cost, name, c_in=int(k), c_out=int(n), split=None,
                             rows_per_sample=self.per_sample_count(rows_full, batched))
        if len(sb) == 1:  # matrix-vector: every row of a is one dot product
            bcount, m = 1, prod(sa[:-1])
        else:
            bcount = prod(shape[:-2]) if len(sa) > 1 else prod(sb[:-2])
        batched = self.batched([a, b])
        bc, mm = self.lead_first(batched, bcount, m)
        g = dense.gemm(mm, n, k, bc, self.vb)
        if not (self.is_param(a) or self.is_param(b)):  # two activations: both gradients are input gradients
            g = OpCost("matmul", g.forward, g.backward, source=g.source)
        return self.emit("matmul", [a, b, *extra], out, shape, g, name)

    def einsum(self, equation: str, ins, out, shape, name):
        """Contractions left to right; each pairwise product is a GEMM of the product of all its index sizes."""
        lhs, _, rhs = equation.replace(" ", "").partition("->")
        terms = lhs.split(",")
        if len(terms) != len(ins) or "..." in equation:
            return self.unknown_op("einsum", ins, out, shape, name)
        sizes = {}
        for t, key in zip(terms, ins):
            for ch, d in zip(t, self.shape(key)):
                sizes[ch] = int(d)
        macs = 0
        cur = terms[0]
        for i, t in enumerate(terms[1:], 1):
            rest = set("".join(terms[i + 1:]) + rhs)
            macs += prod(sizes[c] for c in set(cur) | set(t))
            cur = "".join(c for c in dict.fromkeys(cur + t) if c in rest)
        batched = self.batched(ins)
        macs = self.lead(macs, batched)
        el_in = sum(self.lead(prod(self.shape(i)), self.vals[i].batched) for i in ins)
        el_out = self.lead(prod(shape), batched)
        contracted = prod(sizes[c] for c in set(sizes) - set(rhs))
        f = Cost(flop=2 * macs, depth=1 + clog2(contracted), bytes=self.vb * (el_in + el_out), macs=macs,
                 act_bytes=self.vb * el_in)
        n_par = sum(1 for i in ins if self.is_param(i))
        # the gradient of each operand is a contraction of the same size (2 operands: 2 x 2 MACs FLOP)
        gi = Cost(flop=2 * macs * (len(ins) - n_par), depth=f.depth, bytes=f.bytes, macs=macs * (len(ins) - n_par))
        gw = Cost(flop=2 * macs * n_par, depth=f.depth, bytes=f.bytes, macs=macs * n_par)
        cost = OpCost("einsum", f, gi, gw, source="pairwise contractions (GEMMs), 2 FLOP per multiply-add")
        return self.emit("matmul", ins, out, shape, cost, name)

    def conv(self, x, w, bias, out, shape, stride, pad, dilation, groups, name, transposed=False):
        xs, ws = self.shape(x), self.shape(w)
        d = len(xs) - 2
        if d not in (1, 2, 3):
            return self.unknown_op(f"conv{d}d", [x, w, bias], out, shape, name)
        stride, pad, dilation = (tuple(int(v) for v in (t if isinstance(t, (list, tuple)) else [t] * d))
                                 for t in (stride, pad, dilation))
        batched = self.batched([x])
        n = self.lead(xs[0], batched)
        c_in, c_out, groups = int(xs[1]), int(shape[1]), int(groups)
        ks = tuple(int(v) for v in ws[2:])
        if transposed:
            macs = n * prod(xs[1:]) * (c_out // groups) * prod(ks)
            out_el = n * prod(shape[1:])
            params = prod(ws) + (c_out if bias is not None else 0)
            x_el = n * prod(xs[1:])
            depth = 1 + clog2(max(1, prod(ks) // max(1, prod(stride)))) + clog2(c_in // groups)
            f = Cost(flop=2 * macs + (out_el if bias is not None else 0), depth=depth, macs=macs, params=params,
                     bytes=self.vb * (x_el + params + out_el), act_bytes=self.vb * x_el)
            g = Cost(flop=2 * macs, depth=depth, bytes=f.bytes, macs=macs)
            cost = OpCost("conv_transpose", f, g, g, "transposed convolution = the gradient of a convolution")
            return self.emit(f"conv_transpose{d}d", [x, w, bias], out, shape, cost, name)
        ins_sp, outs_sp = [int(v) for v in xs[2:]], [int(v) for v in shape[2:]]
        pad = tuple(self._fit_pad(i, o, kk, s, p, dd) for i, o, kk, s, p, dd in
                    zip(ins_sp, outs_sp, ks, stride, pad, dilation))
        if d == 2:
            cost = convm.conv2d(n, c_in, c_out, ins_sp[0], ins_sp[1], ks[0], ks[1], stride, pad, dilation, groups,
                                bias is not None, "direct", self.vb)
            return self.emit("conv2d", [x, w, bias], out, shape, cost, name, c_in=c_in, c_out=c_out, h=ins_sp[0],
                             w=ins_sp[1], kh=ks[0], kw=ks[1], stride=stride, pad=pad, dilation=dilation, groups=groups)
        if d == 1:  # a 2-D convolution of height 1
            cost = convm.conv2d(n, c_in, c_out, 1, ins_sp[0], 1, ks[0], (1, stride[0]), (0, pad[0]),
                                (1, dilation[0]), groups, bias is not None, "direct", self.vb)
            return self.emit("conv1d", [x, w, bias], out, shape, cost, name, c_in=c_in, c_out=c_out, length=ins_sp[0],
                             k=ks[0], stride=stride[0], pad=pad[0], dilation=dilation[0], groups=groups)
        # 3-D: each output depth slice is a 2-D convolution over k_d input slices taken as extra channels
        # (exact MACs, FLOP and parameters; the input traffic counts each slice once per tap [D])
        cost = convm.conv2d(n * outs_sp[0], c_in * ks[0], c_out, ins_sp[1], ins_sp[2], ks[1], ks[2], stride[1:],
                            pad[1:], dilation[1:], groups, bias is not None, "direct", self.vb)
        return self.emit("conv3d", [x, w, bias], out, shape, cost, name, c_in=c_in, c_out=c_out, kernel=ks,
                         stride=stride, pad=pad, dilation=dilation, groups=groups)

    @staticmethod
    def _fit_pad(i, o, k, s, p, d):
        """The symmetric padding that gives the traced output size (asymmetric or "same" padding)."""
        def fits(q):
            return d * (k - 1) + 1 <= i + 2 * q and convm.out_size(i, k, s, q, d) == o
        return p if fits(p) else next((q for q in range(d * (k - 1) + s + 1) if fits(q)), p)

    def pool(self, kind, x, out, shape, kernel, stride, pad, name, ceil_mode=False):
        xs = self.shape(x)
        batched = self.batched([x])
        d = len(xs) - 2
        kernel = tuple(int(v) for v in (kernel if isinstance(kernel, (list, tuple)) else [kernel] * d))
        stride = tuple(int(v) for v in (stride if isinstance(stride, (list, tuple)) and stride else
                                        ([stride] * d if stride else kernel)))
        pad = tuple(int(v) for v in (pad if isinstance(pad, (list, tuple)) else [pad] * d))
        if d == 2 and tuple(shape[2:]) == tuple(
                convm.out_size(i, kk, ss, pp, 1, ceil_mode=ceil_mode) if kk <= i + 2 * pp else -1
                for i, kk, ss, pp in zip(xs[2:], kernel, stride, pad)):
            try:
                cost = pool.pool2d(kind, self.lead(xs[0], batched), xs[1], xs[2], xs[3], kernel[0], kernel[1], stride,
                                   pad, self.vb, ceil_mode)
                return self.emit(f"{kind}pool", [x], out, shape, cost, name)
            except ValueError:
                pass
        return self._window(f"{kind}pool", x, out, shape, prod(kernel) - (kind == "max"), name)

    def _window(self, op, x, out, shape, ops_per_out, name):
        batched = self.batched([x])
        n_out, n_in = self.lead(prod(shape), batched), self.lead(prod(self.shape(x)), batched)
        win = max(1, prod(self.shape(x)) // max(1, prod(shape)))
        f = Cost(flop=n_out * max(ops_per_out, 1), depth=clog2(win) + 1, bytes=self.vb * (n_in + n_out),
                 act_bytes=self.vb * n_in)
        cost = OpCost(op, f, Cost(flop=n_in, depth=2, bytes=self.vb * (n_in + n_out)), source="window reduction")
        return self.emit(op, [x], out, shape, cost, name)

    def adaptive_pool(self, kind, x, out, shape, name):
        xs = self.shape(x)
        if len(xs) == 4 and xs[2] % shape[2] == 0 and xs[3] % shape[3] == 0:
            kh, kw = xs[2] // shape[2], xs[3] // shape[3]
            if (kh, kw) == (1, 1):
                self.alias(out, x, shape)
                return self.vals[out].node
            return self.pool(kind, x, out, shape, (kh, kw), (kh, kw), 0, name)
        return self._window(f"{kind}pool", x, out, shape, prod(xs[2:]) // max(1, prod(shape[2:])), name)

    def batch_norm(self, x, w, b, out, shape, name):
        xs = self.shape(x)
        batched = self.batched([x])
        cost = norm.batch_norm(self.lead(xs[0], batched), xs[1] if len(xs) > 1 else 1, prod(xs[2:]),
                               affine=w is not None, value_bytes=self.vb)
        return self.emit("batch_norm", [x, w, b], out, shape, cost, name)

    def layer_norm(self, x, w, b, features, out, shape, name, rms=False):
        batched = self.batched([x])
        rows = self.lead(prod(self.shape(x)) // features, batched)
        if rms:
            cost = norm.rms_norm(rows, features, self.vb)
        else:
            cost = norm.layer_norm(rows, features, affine=w is not None, value_bytes=self.vb)
        return self.emit("rms_norm" if rms else "layer_norm", [x, w, b], out, shape, cost, name)

    def group_norm(self, x, w, b, groups, out, shape, name):
        xs = self.shape(x)
        batched = self.batched([x])
        cost = norm.group_norm(self.lead(xs[0], batched), xs[1], max(1, prod(xs[2:])), groups,
                               affine=w is not None, value_bytes=self.vb)
        return self.emit("group_norm", [x, w, b], out, shape, cost, name)

    def softmax(self, x, dim, out, shape, name, log=False):
        xs = self.shape(x)
        k = int(xs[dim]) if xs else 1
        batched = self.batched([x])
        rows = self.lead(prod(xs) // max(k, 1), batched)
        cost = softmax.softmax(rows, max(k, 1), self.vb)
        if log:  # log of the normalised values: one more operation per element
            n = rows * k
            cost = OpCost("log_softmax", cost.forward + Cost(flop=n, depth=1), cost.grad_input, source=cost.source)
        return self.emit("softmax", [x], out, shape, cost, name)

    def attention(self, q, k, v, out, shape, causal, name, extra=()):
        """Scaled dot-product attention on (..., heads, seq, head_dim) tensors (plain kernel: every score
        is computed, as the math backend and FlopCounterMode count it)."""
        qs, ks = self.shape(q), self.shape(k)
        heads = int(qs[-3]) if len(qs) >= 3 else 1
        sq, d, skv = int(qs[-2]), int(qs[-1]), int(ks[-2])
        batched = self.batched([q, k, v])
        bc, hc = self.lead_first(batched, prod(qs[:-3]), heads)
        cost = att.attention(bc, hc, sq, d, seq_kv=skv, causal=bool(causal), value_bytes=self.vb)
        return self.emit("attention", [q, k, v, *extra], out, shape, cost, name, heads=heads, seq=sq, head_dim=d,
                         seq_kv=skv, fused=False, causal=bool(causal))

    def embedding(self, w, idx, out, shape, name):
        vocab, dim = (int(v) for v in self.shape(w)[:2])
        batched = self.batched([idx])
        cost = embedding.embedding(self.lead(prod(self.shape(idx)) or 1, batched), vocab, dim, self.vb)
        return self.emit("embedding", [w, idx], out, shape, cost, name)

    def recurrent(self, cell, x, weights, out, shape, hidden, layers, bidirectional, bias, batch_first, name):
        xs = self.shape(x)
        batched = self.batched([x])
        if len(xs) == 2:
            t, n, i = xs[0], 1, xs[1]
        else:
            t, n, i = (xs[1], xs[0], xs[2]) if batch_first else (xs[0], xs[1], xs[2])
        nb, tb = self.lead_first(batched, n, t)
        dirs = 2 if bidirectional else 1
        if dirs == 1:
            cost = recurrent.recurrent(cell, tb, nb, i, hidden, layers, bias, self.vb)
        else:
            parts = [recurrent.recurrent(cell, tb, nb, i if li == 0 else dirs * hidden, hidden, 1, bias, self.vb).scaled(2)
                     for li in range(layers)]
            cost = chain(cell, *parts)
        return self.emit(cell, [x, *weights], out, shape, cost, name, cell=cell, hidden=int(hidden),
                         input_size=int(i), timesteps=int(t), layers=int(layers) * dirs)

    def activation(self, kind, x, out, shape, name):
        n = self.lead(prod(shape), self.batched([x]))
        return self.emit(kind, [x], out, shape, elementwise.activation(kind, n, self.vb), name)

    def elementwise(self, op, ins, out, shape, name, ops=None):
        batched = self.batched(ins)
        n = self.lead(prod(shape), batched)
        if op == "add" and len(ins) == 2 and all(self.vals[i].node is not None for i in ins):
            cost = elementwise.add(n, 2, self.vb)
        elif op == "dropout":
            cost = elementwise.dropout(n, self.vb)
        else:
            o = EW_OPS.get(op, 1) if ops is None else ops
            in_el = sum(self.lead(prod(self.shape(i)), self.vals[i].batched) for i in ins)
            cost = self._scalar_cost(op, n, o, in_el)
        return self.emit(op, ins, out, shape, cost, name)

    def concat(self, ins, out, shape, name):
        n = self.lead(prod(shape), self.batched(ins))
        return self.emit("concat", ins, out, shape, elementwise.concat(n, self.vb), name)

    def reduction(self, op, x, out, shape, name):
        batched = self.batched([x])
        n_in = self.lead(prod(self.shape(x)), batched)
        n_out = self.lead(max(1, prod(shape)), batched)
        m = max(1, prod(self.shape(x)) // max(1, prod(shape)))
        f = Cost(flop=n_in, depth=clog2(m) + 1, bytes=self.vb * (n_in + n_out))
        cost = OpCost(op, f, Cost(flop=n_in, depth=1, bytes=self.vb * (n_in + n_out)),
                      source="reduction (paper §2.5): n - 1 operations per group, + 1 for a mean or norm")
        return self.emit(op, [x], out, shape, cost, name)

    def unknown_op(self, op, ins, out, shape, name):
        """An operator the library does not model: one FLOP per output element, and counted."""
        self.unknown[op] += 1
        ins = [i for i in ins if i is not None and i in self.vals]
        n = self.lead(max(1, prod(shape)), self.batched(ins))
        in_el = sum(self.lead(prod(self.shape(i)), self.vals[i].batched) for i in ins)
        cost = self._scalar_cost(op, n, 1, in_el)
        return self.emit(op, ins, out, shape, OpCost(f"unknown:{op}", cost.forward, cost.grad_input,
                                                     source="not in the operator library: 1 FLOP per element"), name)
