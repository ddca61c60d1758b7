"""Canonical sympy symbols, declared once with their assumptions.

Every module that needs a what-if variable imports it from here, so that two expressions built in
different places share the same symbol (sympy symbols with different assumptions are different symbols).
"""
from __future__ import annotations

from functools import lru_cache

import sympy as sp

# Workload
N = sp.Symbol("N", integer=True, positive=True)  # minibatch size (paper §4 notation)
b = sp.Symbol("b", integer=True, positive=True)  # microbatch size
B = sp.Symbol("B", integer=True, positive=True)  # global batch size
s = sp.Symbol("s", integer=True, positive=True)  # sequence length
value_bytes = sp.Symbol("value_bytes", positive=True)  # the paper's gamma: bytes per value

# Parallel degrees
P = sp.Symbol("P", integer=True, positive=True)  # processes / ranks
p = sp.Symbol("p", integer=True, positive=True)  # processors in Brent's bound, pipeline stages
t = sp.Symbol("t", integer=True, positive=True)  # tensor-parallel degree
d = sp.Symbol("d", integer=True, positive=True)  # data-parallel degree
m = sp.Symbol("m", integer=True, positive=True)  # microbatches per step
v = sp.Symbol("v", integer=True, positive=True)  # interleaved model chunks per device

# Communication (alpha-beta-gamma; Thakur, Rabenseifner & Gropp 2005)
alpha = sp.Symbol("alpha", nonnegative=True)  # latency, s
beta = sp.Symbol("beta", nonnegative=True)  # s per byte
gamma_red = sp.Symbol("gamma_red", nonnegative=True)  # reduction compute, s per byte (NOT the paper's gamma)
n_bytes = sp.Symbol("n", nonnegative=True)  # message size, bytes

# Device
peak_flops = sp.Symbol("F", positive=True)  # FLOP/s
mem_bw = sp.Symbol("B_mem", positive=True)  # bytes/s

# FFT constant of Table 6 (paper §5.3): a complex radix-2 FFT of n points costs about 5 n log2 n FLOP
fft_c = sp.Symbol("c", positive=True)

ALL = {sym.name: sym for sym in [N, b, B, s, value_bytes, P, p, t, d, m, v, alpha, beta, gamma_red,
                                 n_bytes, peak_flops, mem_bw, fft_c]}


@lru_cache(maxsize=4096, typed=True)
def nsimplified(value):
    """``sympy.nsimplify(value)``, kept per value (and type: ``2`` and ``2.0`` apart) for the process: a float's
    search for a simple fraction (mpmath's ``identify``, PSLQ) costs milliseconds, and an expression's build asks for
    the same few numbers (a model's parameters, a runtime's constant) hundreds of times. nsimplify depends on its
    argument alone, and sympy's values are immutable, so a kept answer is the one a new call would give.

    >>> nsimplified(0.11), nsimplified(0.11) is nsimplified(0.11), nsimplified(2.0), nsimplified(2)
    (11/100, True, 2, 2)
    """
    return sp.nsimplify(value)
