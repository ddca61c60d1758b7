"""Inference of a model without a KV cache: one forward pass over a batch (CNNs, ViT, BERT-style encoders,
fully connected networks), ``concurrency-model infer`` on a scenario whose model is not a causal decoder.

* **Latency** of a batch: the forward kernels of every layer on the device
  (:func:`~concurrency_model.timing.graph.layer_parts`; dropout is the identity in eval mode and costs
  nothing), one after another on one stream, plus under tensor parallelism (transformer encoders only:
  Megatron's splits, Shoeybi et al. 2019 §3) the allreduces of the row-split GEMMs' outputs and of the
  embedding. One stage: a batch without microbatches would run pipeline stages one after another.
* ``samples_per_s = batch / latency_s``: one batch at a time (no overlap of batches). The kernels run back
  to back, as a compiled or graph-captured runtime issues them (TensorRT, CUDA graphs); with
  ``host_overhead_s`` (an eager framework's seconds per kernel) the pass lasts at least its kernels times
  that (``host_wait_s``: the excess), as in :mod:`concurrency_model.serving.decoder`.
* **Memory per device**: the weights (at ``weight_dtype``, or pruned 2:4 with ``weight_sparsity``, for the fully
  connected layers, the output layer of a language model aside, as in :mod:`concurrency_model.serving.decoder`;
  under tensor parallelism split evenly),
  and the workspace of the largest operator (its inputs and output); no activations are kept for a backward
  pass.
* ``prompt_len`` is the sequence length of a sequence model (BERT's tokens per sample); an image model
  takes the image size of its spec (``{"name": "resnet50", "image_size": 128}``). There are no decode steps.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from ..hardware.clusters import load_cluster
from ..models import IMAGE_MODELS
from ..models.channel_split import is_channel_split
from ..models.transformer import check_tensor_split
from ..parallel.host import issued
from ..parallel.memory import memory_per_device
from ..scenario import Inference as InferenceSection
from ..scenario import Scenario
from ..timing.graph import layer_parts
from ..timing.parts import total
from ..uncertainty import bands
from ..units import dtype_bytes, value_dtype
from .overheads import FREE, Comm, check_weight_sparsity, model_graph, weights_bytes, workspace_bytes

@dataclass
class ForwardInference:
    """The result of :func:`predict_forward` (SI units)."""

    latency_s: float
    samples_per_s: float
    memory_bytes_per_device: float
    breakdown: dict
    memory: dict
    parallel: dict
    inference: dict
    bands: dict = field(default_factory=dict)  # latency_p10_s, latency_p90_s

    def to_dict(self) -> dict:
        return {"kind": "forward", "latency_s": self.latency_s, "samples_per_s": self.samples_per_s,
                "memory_bytes_per_device": self.memory_bytes_per_device, "breakdown": self.breakdown,
                "memory": {k: v for k, v in self.memory.items() if k != "reason"},
                "gpus": self.parallel["tensor"], "parallel": self.parallel,
                "inference": self.inference, **self.bands}

    def __repr__(self) -> str:
        return (f"ForwardInference(batch {self.inference['batch']}: {self.latency_s * 1e3:,.4g} ms a pass, "
                f"{self.samples_per_s:,.4g} samples/s; tensor {self.parallel['tensor']}; "
                f"{self.memory_bytes_per_device / 1e9:,.3g} GB per device)")


def is_sequence_model(model) -> bool:
    """Whether ``model`` takes token sequences (a ``seq_len``), not images."""
    name = model.get("kind") or model.get("name") if isinstance(model, dict) else model
    return name not in IMAGE_MODELS and name != "mlp" and not (isinstance(model, dict) and "onnx" in model)


def predict_forward(model, cluster, batch: int, dtype: str = "fp16", tensor: int = 1, seq_len: int | None = None,
                    weight_dtype: str | None = None, host_overhead_s: float = 0.0,
                    weight_sparsity: str | None = None) -> ForwardInference:
    """Latency, throughput and memory of one forward pass of ``batch`` samples.

    >>> r = predict_forward("resnet50", "dgx-a100", 64, "fp16")
    >>> r.samples_per_s > 1000, r.parallel
    (True, {'tensor': 1})
    """

    cl = load_cluster(cluster)
    dev = cl.device
    vb = dtype_bytes(dtype)
    try:
        dev.peak(dtype)
    except ValueError as e:
        raise ValueError(f"inference.{e}") from None
    t = tensor
    g = model_graph(model, batch, seq_len, vb)
    nodes = g.layers()
    if t > 1:
        if is_channel_split(nodes) or not any(n.kind == "attention" for n in nodes):
            raise ValueError(f"parallel.tensor: {t} > 1 is modelled for transformer encoders at inference; "
                             f"{g.name!r} has no attention")
        check_tensor_split(nodes, t)
    weight_sparsity = check_weight_sparsity(dev, dtype, weight_sparsity, weight_dtype)
    weights, quantized = weights_bytes(g, vb, weight_dtype, weight_sparsity)
    mem = memory_per_device(weights / t, workspace_bytes(g, t, batch, vb), dev)
    if not mem["fits"]:
        raise ValueError(mem["reason"])
    rows = layer_parts(g, dev, dtype, tensor=t, weight_bytes=quantized, weight_sparsity=weight_sparsity,
                       passes=("forward",))  # an inference runs the forward pass only
    parts = total([r["forward"] for n, r in zip(nodes, rows) if n.kind not in FREE])
    host = host_overhead_s * issued(parts, float(dev.launch_overhead))  # the host's seconds to issue the pass
    brk = {"compute_s": parts.total(), "host_wait_s": max(0.0, host - parts.total()),
           "tensor_comm_s": Comm(cl, t, 1).tensor(g, batch, dtype_bytes(value_dtype(dtype)), last_only=False)}
    latency = sum(brk.values())

    def latencies(flops, mem_bw, launch, intra_bw, inter_bw):
        net = intra_bw if t <= cl.gpus_per_node else inter_bw
        return (np.maximum(parts.seconds(flops, mem_bw, launch), host) + brk["tensor_comm_s"] / net,)

    (lo, hi), = bands(latencies)
    return ForwardInference(latency, batch / latency, float(mem["total_bytes"]), brk, mem, {"tensor": t},
                            {"batch": batch, "dtype": dtype, "weight_dtype": weight_dtype or dtype,
                             "weight_sparsity": weight_sparsity,
                             "host_overhead_s": host_overhead_s,
                             **({"prompt_len": seq_len} if seq_len else {})},
                            {"latency_p10_s": lo, "latency_p90_s": hi})


DECODER_ONLY = ("speculative", "batching", "output_lengths", "prompt_lengths", "load_rps", "price_per_gpu_hour")


def infer_forward(sc: Scenario, given: dict, inf: InferenceSection) -> ForwardInference:
    """:func:`concurrency_model.serving.decoder.infer` of a model without a KV cache: the scenario's checks, then
    :func:`predict_forward` (``given``: the inference fields the scenario states, ``inf``: with defaults)."""
    par = sc.parallel
    if "decode_len" in given:
        raise ValueError("inference.decode_len: the model has no causal attention, so no decode steps; "
                         "its inference is one forward pass of the batch")
    for k in DECODER_ONLY:
        if given.get(k) is not None:
            raise ValueError(f"inference.{k}: for a causal decoder's generated tokens; the model has no causal "
                             "attention, so its inference is one forward pass of the batch")
    if "prompt_len" in given and not is_sequence_model(sc.model):
        raise ValueError("inference.prompt_len: an image model takes its image size from the model spec "
                         "({\"name\": ..., \"image_size\": ...})")
    for k in ("data", "pipeline", "context", "expert"):
        if getattr(par, k) != 1:
            raise ValueError(f"parallel.{k}: inference of a model without a KV cache is modelled on one replica "
                             f"and one stage, with tensor parallelism only; got {getattr(par, k)}")
    try:
        return predict_forward(sc.model, sc.cluster, inf.batch, inf.dtype, par.tensor,
                               inf.prompt_len if "prompt_len" in given else None, inf.weight_dtype,
                               inf.host_overhead_s, inf.weight_sparsity)
    except ValueError as e:  # the model's sequence length is the scenario's prompt_len
        msg = str(e)
        raise ValueError(msg.replace("model.seq_len:", "inference.prompt_len:", 1)
                         if msg.startswith("model.seq_len:") else msg) from None


__all__ = ["predict_forward", "infer_forward", "ForwardInference", "is_sequence_model"]
