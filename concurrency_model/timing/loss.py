"""Kernels of the training loss: Megatron's vocab-parallel softmax cross-entropy on fp32 logits.

The loss reads the language-model head's logits (``rows`` tokens x ``vocab`` entries of one tensor rank),
a memory-bound chain of element-wise and reduction kernels in forward and backward.
"""
from __future__ import annotations

from . import roofline_coeffs
from .parts import Parts, total

# Megatron's vocab-parallel cross-entropy on fp32 logits (training-formulas §4.3: the logits are held in fp32;
# megatron/core/tensor_parallel/cross_entropy.py): bytes read + written per logit element and pass, in the
# kernels it runs [D]. Forward: cast to fp32 (vb + 4), max (4), subtract (8), exp (8), sum (4), divide (8);
# backward: scale by the loss gradient (8), cast back (4 + vb). The cast is absent when vb = 4.
CE_FORWARD = (4, 8, 8, 4, 8)
CE_BACKWARD = (8,)


def cross_entropy_parts(rows: float, vocab: float, value_bytes: int, dev) -> tuple:
    """Forward and backward kernels (:class:`~concurrency_model.timing.parts.Parts`) of the fp32
    cross-entropy over ``rows`` tokens and ``vocab`` logits each (one tensor rank's share of the
    vocabulary), one memory-bound kernel per step of :data:`CE_FORWARD` / :data:`CE_BACKWARD`.

    >>> from concurrency_model.hardware.devices import load_device
    >>> f, b = cross_entropy_parts(1024, 51200, 2, load_device("a100-sxm4-80gb"))
    >>> int(f.count.sum()), int(b.count.sum())   # cast + 5 forward kernels, 1 + cast back backward
    (6, 2)
    """
    n = float(rows) * float(vocab)
    cast = (value_bytes + 4,) if value_bytes < 4 else ()
    out = []
    for steps in (cast + CE_FORWARD, CE_BACKWARD + cast):
        out.append(total(Parts.from_coeffs(roofline_coeffs(n, n * k, dev, "fp32"), dev) for k in steps))
    return tuple(out)
