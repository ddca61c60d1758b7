"""Speculative decoding: a small draft model proposes ``tokens`` tokens, the target model verifies them in one
step (``inference.speculative`` of a scenario; :func:`concurrency_model.serving.decoder.predict`).

Leviathan, Kalman & Matias 2023 ("Fast Inference from Transformers via Speculative Decoding", ICML, §3):
with an acceptance rate ``alpha`` (the expected probability that the target accepts a draft token) and
``gamma`` draft tokens an iteration, an iteration yields ``E = (1 - alpha^(gamma + 1)) / (1 - alpha)``
tokens in expectation (their Eq. 1; ``gamma + 1`` at ``alpha = 1``). In the paper's terms (Ben-Nun & Hoefler
§2.5) it trades work for depth: the sequential target steps per generated token fall from 1 to ``1 / E``,
while each iteration does ``gamma`` draft steps and verifies ``gamma + 1`` positions, of which ``E`` are kept.

An iteration here [D]: ``gamma`` decode steps of the draft, one after another, then one step of the target
over ``gamma + 1`` new tokens per sequence (:func:`~concurrency_model.serving.kernels.decode_step` with ``queries =
gamma + 1``: every GEMM on ``batch (gamma + 1)`` rows, logits on every position, attention of ``gamma + 1``
queries against the cache), both on the same devices with the same tensor and pipeline split, at the mean
context of the request. Seconds per generated token = iteration / ``E``. The prefill runs the draft's prompt
pass after the target's; memory holds both models' weights and KV caches. Not modelled: the rejection
sampling itself (a few element-wise kernels), tree or multi-draft speculation, and an acceptance rate that
varies with the position or the batch. The object's shape is checked when the scenario is loaded
(:func:`concurrency_model.scenario.check_speculative`).
"""
from __future__ import annotations

from ..models.transformer import check_tensor_split
from .kernels import decode_step, prefill_pass
from .overheads import model_graph, weights_bytes


def tokens_per_iteration(gamma: int, alpha: float) -> float:
    """Expected tokens an iteration yields (Leviathan et al. 2023, Eq. 1).

    >>> tokens_per_iteration(4, 0.8), tokens_per_iteration(3, 0.0), tokens_per_iteration(3, 1.0)
    (3.3616, 1.0, 4.0)
    """
    if alpha == 1:
        return float(gamma + 1)
    return round((1 - alpha ** (gamma + 1)) / (1 - alpha), 12)


class Speculation:
    """The draft's graphs, weights and KV cache for a request, and the steps of an iteration; the draft is
    checked against the target (``target``: its :func:`~concurrency_model.serving.overheads.model_shape`): the same
    vocabulary (one tokenizer), a context for the whole request, and the target's tensor and pipeline split."""

    def __init__(self, spec: dict, target: dict, model_shape, vb: int, batch: int, prompt_len: int,
                 decode_len: int, t: int = 1, p: int = 1):
        self.gamma, self.alpha, self.draft = spec["tokens"], float(spec["acceptance"]), spec["draft"]
        where = "inference.speculative.draft"
        try:
            self.shape = {**model_shape(model_graph(self.draft, 1, None, vb)), "kv_bytes": target.get("kv_bytes", vb)}
            self.g_pre = model_graph(self.draft, batch, prompt_len, vb)
            check_tensor_split(self.g_pre.layers(), t)
        except ValueError as e:
            raise ValueError(f"{where}: {e}") from None
        if self.shape["vocab"] != target["vocab"]:
            raise ValueError(f"{where}: a vocabulary of {self.shape['vocab']} tokens, the target's has "
                             f"{target['vocab']} (a draft shares the target's tokenizer)")
        if p > self.shape["layers"]:
            raise ValueError(f"{where}: parallel.pipeline {p} exceeds its {self.shape['layers']} blocks")
        self.context = prompt_len + decode_len + self.gamma  # the last iteration may run past decode_len
        if self.context > self.shape["context"]:
            raise ValueError(f"{where}: its context of {self.shape['context']} positions is "
                             f"shorter than prompt_len + decode_len + tokens = {self.context}")
        self.vb, self.batch, self.prompt_len = vb, batch, prompt_len
        self.g_dec = model_graph(self.draft, batch, 1, vb)
        self.weights_bytes = weights_bytes(self.g_pre, vb, None)[0]
        self.tokens = tokens_per_iteration(self.gamma, self.alpha)

    def prefill(self, dev, dtype: str, t: int, comm, host_overhead_s: float = 0.0):
        """The draft's prompt pass (:func:`~concurrency_model.serving.kernels.prefill_pass`)."""
        return prefill_pass(self.g_pre, self.shape["hidden"], dev, dtype, t, self.batch, comm, self.prompt_len,
                            host_overhead_s)

    def steps(self, target_model, target_shape, dev, dtype, t, comm, lo, hi, host_overhead_s, weight_bytes,
              weight_sparsity) -> tuple:
        """``(draft step, verification step)`` (:class:`~concurrency_model.serving.kernels.Step`) at contexts ``lo..hi``."""
        draft = decode_step(self.g_dec, self.shape, dev, dtype, t, self.batch, comm, lo, hi, host_overhead_s)
        g_ver = model_graph(target_model, self.batch, self.gamma + 1, self.vb)
        verify = decode_step(g_ver, target_shape, dev, dtype, t, self.batch, comm, lo, hi, host_overhead_s,
                             weight_bytes, weight_sparsity, queries=self.gamma + 1)
        return draft, verify

    def per_token(self, draft_s, verify_s):
        """Seconds per generated token (numbers or arrays): an iteration over the tokens it yields."""
        return (self.gamma * draft_s + verify_s) / self.tokens

    def summary(self, draft_s: float, verify_s: float, plain_s: float) -> dict:
        """What the output reports: the scenario's fields, ``tokens_per_iteration``, the mean seconds of a draft
        step and of a verification, and the plain decode step's seconds per token and the speed-up over it."""
        per_token = self.per_token(draft_s, verify_s)
        return {"draft": self.draft, "tokens": self.gamma, "acceptance": self.alpha,
                "tokens_per_iteration": self.tokens, "draft_step_s": draft_s, "verify_step_s": verify_s,
                "plain_decode_s_per_token": plain_s, "speedup": plain_s / per_token}
