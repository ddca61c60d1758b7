"""A small layer-list builder: each call adds one node, infers its shape and returns the node's name.

Shapes are per sample: ``(C, H, W)`` for images, ``(S, H)`` for token sequences, ``(F,)`` for vectors.
``scope`` prefixes names, so a ResNet block reads ``layer1.0.conv1``.

>>> b = Builder("tiny", batch=2)
>>> x = b.input((3, 8, 8))
>>> x = b.relu(b.conv(x, 4, 3, pad=1))
>>> b.graph.nodes[x].shape
(4, 8, 8)
"""
from __future__ import annotations

import math
from contextlib import contextmanager

from ..cost import Cost, OpCost, clog2
from ..graph import Graph, Node
from ..ops import attention as ops_attention
from ..ops import conv as ops_conv
from ..ops import dense as ops_dense
from ..ops import elementwise as ops_elementwise
from ..ops import embedding as ops_embedding
from ..ops import norm as ops_norm
from ..ops import pool as ops_pool
from ..ops import recurrent as ops_recurrent
from ..ops import softmax as ops_softmax

MAX_LAYERS = 10_000  # layers of a family model, at most: a graph of more takes minutes to build (a typo, not a model)

class _Memo:
    """An operator module whose functions remember their results: a model repeats the same layer
    (GPT-3's 96 blocks), and the operator costs are immutable, so each distinct call is computed once."""

    LIMIT = 20000

    def __init__(self, module):
        self._module, self._cache = module, {}

    def __getattr__(self, name):
        fn = getattr(self._module, name)

        def call(*args, **kwargs):
            key = (name, args, tuple(sorted(kwargs.items())))
            try:
                return self._cache[key]
            except KeyError:
                pass
            except TypeError:  # unhashable arguments
                return fn(*args, **kwargs)
            if len(self._cache) > self.LIMIT:
                self._cache.clear()
            out = self._cache[key] = fn(*args, **kwargs)
            return out
        return call


att, convm, dense, elementwise, embedding, norm, pool, recurrent, softmax = (
    _Memo(m) for m in (ops_attention, ops_conv, ops_dense, ops_elementwise, ops_embedding, ops_norm, ops_pool,
                       ops_recurrent, ops_softmax))


class Builder:
    def __init__(self, name: str, batch=1, value_bytes=4, conv_algorithm: str = "direct"):
        self.graph = Graph(name, batch, value_bytes)
        self.batch = self.graph.batch
        self.vb = value_bytes
        self.conv_algorithm = conv_algorithm
        self._prefix: list[str] = []
        self._count: dict[str, int] = {}
        self._blocks: dict = {}  # key -> a block's nodes as built once (:meth:`repeated`)

    # -- plumbing --------------------------------------------------------------------------------
    @contextmanager
    def scope(self, name: str):
        self._prefix.append(str(name))
        try:
            yield self
        finally:
            self._prefix.pop()

    def _name(self, kind: str, name: str | None) -> str:
        if name is None:
            base = ".".join(self._prefix + [kind])
            k = self._count.get(base, 0)
            self._count[base] = k + 1
            return base if k == 0 else f"{base}_{k}"
        return ".".join(self._prefix + [name])

    def repeated(self, scope: str, x: str, build, key) -> str:
        """``build(x)`` in ``scope``: one block of a stack of identical blocks (a decoder's layers); returns its
        output. The first block of a ``key`` is built; each later one adds the same nodes again (the same kinds,
        shapes, costs and attributes, their names and the names they read under this ``scope``, ``x`` where the first
        read its input), as building it would: the operator costs depend on the shapes alone (:class:`_Memo`), so a
        block of L identical ones costs a copy, not L calls into the operator models. ``key`` names everything the
        block's nodes depend on besides ``x``'s shape (its kind and arguments); a block whose nodes do not all lie
        in its scope is built every time.

        >>> b = Builder("stack", batch=2)
        >>> x = b.input((4, 8))
        >>> for i in range(3):
        ...     x = b.repeated(f"layers.{i}", x, lambda y: b.add(y, b.relu(b.linear(y, 8)), name="add"), key="mlp")
        >>> x, b.graph.nodes["layers.2.linear"].inputs, b.graph.nodes["layers.2.add"].inputs
        ('layers.2.add', ('layers.1.add',), ('layers.1.add', 'layers.2.relu'))
        """
        prefix = ".".join(self._prefix + [scope])
        key = (key, self.shape(x))
        template = self._blocks.get(key)
        if template is not None:
            nodes, counts, out = template
            for suffix, kind, reads, shape, cost, attrs in nodes:
                inputs = tuple(prefix + name if where == 0 else (x if where == 1 else name) for where, name in reads)
                self.graph.add(Node(prefix + suffix, kind, inputs, shape, cost, dict(attrs)))
            for suffix, k in counts:  # later unnamed nodes of this scope number on as after a built block
                self._count[prefix + suffix] = k
            return prefix + out
        first = len(self.graph.nodes)
        with self.scope(scope):
            y = build(x)
        added = list(self.graph.nodes.values())[first:]
        mine = prefix + "."
        names = {n.name for n in added}
        if y in names and all(n.name.startswith(mine) for n in added):
            cut = len(prefix)
            nodes = tuple((n.name[cut:], n.kind, tuple((0, i[cut:]) if i in names else (1, None) if i == x else (2, i)
                                                       for i in n.inputs), n.shape, n.cost, n.attrs) for n in added)
            counts = tuple((k[cut:], v) for k, v in self._count.items() if k.startswith(mine))
            self._blocks[key] = (nodes, counts, y[cut:])
        return y

    def shape(self, x: str) -> tuple[int, ...]:
        return self.graph.nodes[x].shape

    def node(self, kind: str, inputs, shape, cost: OpCost | None, name: str | None = None, **attrs) -> str:
        """Add a node with an explicit cost (for operators the builder has no method for)."""
        inputs = (inputs,) if isinstance(inputs, str) else tuple(inputs)
        n = Node(self._name(kind, name), kind, inputs, tuple(int(v) for v in shape), cost, attrs)
        return self.graph.add(n).name

    def _image(self, x: str, what: str) -> tuple[int, int, int]:
        s = self.shape(x)
        if len(s) != 3:
            raise ValueError(f"{what}: needs a (C, H, W) input, got shape {s}")
        return s  # type: ignore[return-value]

    # -- layers ----------------------------------------------------------------------------------
    def input(self, shape, name: str = "input") -> str:
        return self.node("input", (), shape, None, name)

    def conv(self, x, c_out, k, stride=1, pad=0, dilation=1, groups=1, bias=True, algorithm=None, name=None):
        c, h, w = self._image(x, "conv")
        kh, kw = convm.pair("k", k)
        cost = convm.conv2d(self.batch, c, c_out, h, w, kh, kw, stride, pad, dilation, groups, bias,
                            algorithm or self.conv_algorithm, self.vb)
        (sh, sw), (ph, pw), (dh, dw) = convm.pair("stride", stride), convm.pair("pad", pad), \
            convm.pair("dilation", dilation)
        shape = (c_out, convm.out_size(h, kh, sh, ph, dh), convm.out_size(w, kw, sw, pw, dw))
        return self.node("conv2d", x, shape, cost, name, c_in=c, c_out=c_out, h=h, w=w, kh=kh, kw=kw,
                         stride=(sh, sw), pad=(ph, pw), dilation=(dh, dw), groups=groups)

    def bn(self, x, name=None):
        s = self.shape(x)
        return self.node("batch_norm", x, s, norm.batch_norm(self.batch, s[0], math.prod(s[1:]), value_bytes=self.vb),
                         name)

    def act(self, x, kind="relu", name=None):
        s = self.shape(x)
        return self.node(kind, x, s, elementwise.activation(kind, self.batch * math.prod(s), self.vb), name)

    def relu(self, x, name=None):
        return self.act(x, "relu", name)

    def pool(self, x, kind, k, stride=None, pad=0, name=None, ceil_mode=False):
        c, h, w = self._image(x, f"{kind}pool")
        kh, kw = convm.pair("k", k)
        (sh, sw) = convm.pair("stride", (kh, kw) if stride is None else stride)
        ph, pw = convm.pair("pad", pad)
        cost = pool.pool2d(kind, self.batch, c, h, w, kh, kw, (sh, sw), (ph, pw), self.vb, ceil_mode)
        shape = (c, convm.out_size(h, kh, sh, ph, ceil_mode=ceil_mode), convm.out_size(w, kw, sw, pw, ceil_mode=ceil_mode))
        return self.node(f"{kind}pool", x, shape, cost, name, kh=kh, kw=kw, stride=(sh, sw), pad=(ph, pw))

    def maxpool(self, x, k, stride=None, pad=0, name=None, ceil_mode=False):
        return self.pool(x, "max", k, stride, pad, name, ceil_mode)

    def avgpool(self, x, k, stride=None, pad=0, name=None):
        return self.pool(x, "avg", k, stride, pad, name)

    def adaptive_avgpool(self, x, out: int = 1, name=None):
        """PyTorch's AdaptiveAvgPool2d for an input divisible by ``out`` (identity when equal)."""
        c, h, w = self._image(x, "adaptive_avgpool")
        if h % out or w % out:
            raise ValueError(f"out: input {h}x{w} is not divisible into {out}x{out} windows")
        if (h, w) == (out, out):
            return x
        return self.pool(x, "avg", (h // out, w // out), name=name)

    def flatten(self, x, name=None):
        return self.node("flatten", x, (math.prod(self.shape(x)),), OpCost("flatten", Cost()), name)

    def reshape(self, x, shape, name=None):
        if math.prod(shape) != math.prod(self.shape(x)):
            raise ValueError(f"shape: cannot reshape {self.shape(x)} to {tuple(shape)}")
        return self.node("reshape", x, shape, OpCost("reshape", Cost()), name)

    def linear(self, x, c_out, bias=True, tied: bool = False, split: str | None = None, name=None):
        """Fully connected layer on the last dimension; ``tied`` shares its weight with another layer
        (e.g. GPT's output layer and token embedding): its weight is not counted again, its bias is (BERT's
        MLM decoder, Devlin et al. 2019, has a bias of its own on the tied weight); the node carries ``tied``
        (a pipeline that puts the two layers on different stages keeps a copy of the weight on each). ``split``
        says how tensor parallelism cuts it (Shoeybi et al. 2019 §3): ``column`` (outputs) or ``row``
        (inputs)."""
        s = self.shape(x)
        rows = self.batch * math.prod(s[:-1])
        cost = dense.linear(rows, s[-1], c_out, bias, self.vb)
        if tied:
            cost = OpCost(cost.op, cost.forward.with_(params=c_out if bias else 0), cost.grad_input, cost.grad_weight,
                          cost.source)
        return self.node("linear", x, (*s[:-1], c_out), cost, name, rows_per_sample=math.prod(s[:-1]), c_in=s[-1],
                         c_out=c_out, split=split, **({"tied": True} if tied else {}))

    def dropout(self, x, name=None):
        s = self.shape(x)
        return self.node("dropout", x, s, elementwise.dropout(self.batch * math.prod(s), self.vb), name)

    def add(self, *xs, name=None):
        s = self.shape(xs[0])
        if any(self.shape(x) != s for x in xs):
            raise ValueError(f"add: shapes differ: {[self.shape(x) for x in xs]}")
        return self.node("add", xs, s, elementwise.add(self.batch * math.prod(s), len(xs), self.vb), name)

    def channel_scale(self, x, s, name=None):
        """``x`` (C, H, W) times ``s`` (C, 1, 1), one factor per feature map (squeeze-and-excitation)."""
        c, h, w = self._image(x, "channel_scale")
        if self.shape(s) != (c, 1, 1):
            raise ValueError(f"channel_scale: factors {self.shape(s)} do not match {c} feature maps")
        return self.node("channel_scale", (x, s), (c, h, w),
                         elementwise.channel_scale(self.batch * c, h * w, self.vb), name)

    def concat(self, xs, axis: int = 0, name=None):
        shapes = [self.shape(x) for x in xs]
        rest = [s[:axis] + s[axis + 1:] for s in shapes]
        if any(r != rest[0] for r in rest):
            raise ValueError(f"concat: shapes differ outside axis {axis}: {shapes}")
        shape = list(shapes[0])
        shape[axis] = sum(s[axis] for s in shapes)
        return self.node("concat", xs, shape, elementwise.concat(self.batch * math.prod(shape), self.vb),
                         name)

    def layer_norm(self, x, name=None):
        s = self.shape(x)
        return self.node("layer_norm", x, s, norm.layer_norm(self.batch * math.prod(s[:-1]), s[-1], value_bytes=self.vb),
                         name)

    def rms_norm(self, x, name=None):
        s = self.shape(x)
        return self.node("rms_norm", x, s, norm.rms_norm(self.batch * math.prod(s[:-1]), s[-1], self.vb),
                         name)

    def softmax(self, x, name=None):
        s = self.shape(x)
        return self.node("softmax", x, s, softmax.softmax(self.batch * math.prod(s[:-1]), s[-1], self.vb),
                         name)

    def embedding(self, x, vocab, dim, name=None):
        """Token ids of shape ``(S,)`` -> ``(S, dim)``."""
        s = self.shape(x)
        return self.node("embedding", x, (*s, dim),
                         embedding.embedding(self.batch * math.prod(s), vocab, dim, self.vb), name)

    def attention(self, qkv, heads, fused=False, causal=False, name=None):
        """Attention core on a packed ``(S, 3H)`` QKV tensor -> ``(S, H)``."""
        s, h3 = self.shape(qkv)
        if h3 % 3:
            raise ValueError(f"qkv: last dimension {h3} is not 3 x hidden")
        h = h3 // 3
        if h % heads:
            raise ValueError(f"heads: hidden={h} must be divisible by heads={heads}")
        cost = att.attention(self.batch, heads, s, h // heads, fused=fused, causal=causal, value_bytes=self.vb)
        return self.node("attention", qkv, (s, h), cost, name, heads=heads, seq=s, head_dim=h // heads, fused=fused,
                         causal=causal)

    def learned(self, x, kind: str, params: int, shape=None, concat: bool = False, name=None):
        """A learned tensor of ``params`` values added to ``x`` (position embedding) or concatenated
        to it (class token, ``concat=True``); its gradient sums ∇y over the batch."""
        shape = tuple(shape or self.shape(x))
        el = self.batch * math.prod(shape)
        fwd = Cost(flop=0 if concat else el, depth=0 if concat else 1,
                   bytes=2 * self.vb * el + self.vb * params, params=params)
        gw = Cost(flop=(self.batch - 1) * params, depth=clog2(self.batch))
        return self.node(kind, x, shape, OpCost(kind, fwd, Cost(), gw), name)

    def recurrent(self, x, cell, hidden, layers=1, name=None):
        """An RNN/LSTM/GRU over a ``(T, I)`` sequence -> ``(T, hidden)``."""
        t, i = self.shape(x)
        cost = recurrent.recurrent(cell, t, self.batch, i, hidden, layers, value_bytes=self.vb)
        return self.node(cell, x, (t, hidden), cost, name, cell=cell, hidden=hidden, input_size=i, timesteps=t,
                         layers=layers)

    def select(self, x, index_shape, name=None):
        """Take part of the tensor (e.g. the class token): free, a view."""
        return self.node("select", x, index_shape, OpCost("select", Cost()), name)
