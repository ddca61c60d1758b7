"""How many tokens each request generates (``inference.output_lengths``), and what a batch waits for [D].

Requests rarely stop at the same token. With ``decode_len`` as the mean:

* ``fixed``: every request generates ``decode_len`` tokens (the default);
* ``uniform``: lengths equally likely from 1 to ``2 decode_len - 1``;
* ``geometric``: each token ends the request with probability ``1 / decode_len`` (lengths 1, 2, ...),
  truncated at what the model's context leaves after the prompt (the mean is then that of the truncated law).

A static batch runs until its longest request ends, its finished sequences idle in their slots, and holds
the KV cache of the longest possible one (FasterTransformer allocates for the maximum length): its steps are
the expected maximum of ``batch`` lengths, ``E[max] = sum_{k >= 0} (1 - F(k)^batch)`` for the lengths' CDF F
(the standard identity ``E[X] = sum_k P(X > k)`` for a variable on 1, 2, ...). Continuous batching
(:mod:`concurrency_model.serving.continuous_batching`) refills a slot when its request ends, so only the mean matters there.
This is what Orca (Yu et al., OSDI 2022) names as static batching's loss.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..checks import did_you_mean
from ..scenario import LENGTH_LAWS as DISTRIBUTIONS  # the law's name is checked on load too


@dataclass(frozen=True)
class Lengths:
    """The law of the generated lengths: ``pmf[i]`` is the probability of ``i + 1`` tokens."""

    kind: str
    pmf: np.ndarray

    @property
    def mean(self) -> float:
        return float(np.dot(np.arange(1, len(self.pmf) + 1), self.pmf))

    @property
    def cv2(self) -> float:
        """Squared coefficient of variation, variance / mean^2 (0 for fixed lengths; about 1/3 for uniform ones and
        1 - 1 / decode_len for geometric ones).

        >>> round(lengths("uniform", 2, 10).cv2, 12)  # 1..3: variance 2/3, mean 2
        0.166666666667
        """
        n = np.arange(1, len(self.pmf) + 1)
        return float(np.dot(n ** 2, self.pmf)) / self.mean ** 2 - 1.0

    @property
    def longest(self) -> int:
        return int(np.flatnonzero(self.pmf)[-1]) + 1

    def expected_max(self, batch: int) -> float:
        """Expected longest of ``batch`` independent lengths.

        >>> lengths("uniform", 2, 10).expected_max(2)   # lengths 1..3: 1 + (1 - 1/9) + (1 - 4/9) = 22/9
        2.4444444444444446
        """
        cdf = np.cumsum(self.pmf)[:-1]  # F(1) .. F(longest - 1); F(0) = 0
        return float(1.0 + np.sum(1.0 - np.clip(cdf, 0.0, 1.0) ** batch))


def lengths(kind: str, decode_len: int, cap: int, field: str = "output_lengths",
            mean_field: str = "decode_len") -> Lengths:
    """The law of ``kind`` with mean ``decode_len`` on ``1 .. cap`` tokens (``ValueError`` naming the field:
    ``inference.<field>`` for the law, ``inference.<mean_field>`` for a mean it cannot have; prompts use the same
    laws, :func:`~concurrency_model.serving.overheads.served`).

    >>> round(lengths("geometric", 4, 1000).mean, 9)  # the truncation at 1,000 tokens does not show
    4.0
    """
    if kind not in DISTRIBUTIONS:
        raise ValueError(f"inference.{field}: unknown {kind!r}{did_you_mean(kind, DISTRIBUTIONS)}; allowed: "
                         f"{', '.join(DISTRIBUTIONS)}")
    if kind == "fixed":
        pmf = np.zeros(decode_len)
        pmf[-1] = 1.0
    elif kind == "uniform":
        top = 2 * decode_len - 1
        if top > cap:
            raise ValueError(f"inference.{mean_field}: uniform lengths reach 2 x {decode_len} - 1 = {top} tokens, more "
                             f"than the {cap} the model's context leaves")
        pmf = np.full(top, 1.0 / top)
    else:
        q = 1.0 / decode_len
        pmf = q * (1 - q) ** np.arange(cap)
        pmf /= pmf.sum()
    return Lengths(kind, pmf)


def spread_factor(prompts: Lengths, prefix: int = 0) -> float:
    """The mean causal attention of prompts whose new tokens ``q`` follow this law after ``prefix`` cached ones,
    over that of the mean prompt: ``E[q (S + q / 2)] / (m (S + m / 2))`` with ``E[q^2] = m^2 (1 + cv^2)``, the
    (query, key) pairs a prompt's queries compute (the ``+ 1`` of the diagonal left out) [D]. 1 for equal prompts.

    >>> round(spread_factor(lengths("uniform", 2, 10)), 12)  # q in 1..3: E[q^2] = 14/3 over 4
    1.166666666667
    """
    m = prompts.mean
    return (prefix * m + m * m * (1 + prompts.cv2) / 2) / (prefix * m + m * m / 2)


def prompts_summary(prompts: Lengths, prefix: int = 0, padded: int | None = None) -> dict:
    """``prompt_lengths`` and, for unequal prompts, ``mean_prompt_len`` (the prefix included) and (a static batch)
    ``padded_prompt_len``, the expected longest prompt its pass is padded to."""
    if prompts.kind == "fixed":
        return {"prompt_lengths": "fixed"}
    return {"prompt_lengths": prompts.kind, "mean_prompt_len": round(prefix + prompts.mean, 6),
            **({"padded_prompt_len": padded} if padded is not None else {})}


def lengths_summary(dist: Lengths, steps: float | None = None) -> dict:
    """``output_lengths`` and, for unequal ones, ``mean_decode_len`` and (a static batch) ``decode_steps``, the
    expected longest request."""
    if dist.kind == "fixed":
        return {"output_lengths": "fixed"}
    return {"output_lengths": dist.kind, "mean_decode_len": dist.mean,
            **({"decode_steps": steps} if steps is not None else {})}
