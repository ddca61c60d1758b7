"""Models from elsewhere as graphs (DESIGN.md ``frontends/``; optional extras ``torch`` and ``onnx``).

* :func:`from_torch` (``frontends.torch_fx``): a ``torch.nn.Module`` traced with ``torch.export`` on
  fake/meta tensors (no real memory);
* :func:`from_onnx` (``frontends.onnx_import``): an ONNX file, shapes from ONNX shape inference;
* :func:`from_hf_config` (``frontends.hf``): a Hugging Face ``config.json`` read as plain JSON.

Importing this package imports neither torch nor onnx; each function imports its library when called.
"""
from __future__ import annotations


def from_torch(module, example_inputs, **kwargs):
    """See :func:`concurrency_model.frontends.torch_fx.from_torch`."""
    from .torch_fx import from_torch as f
    return f(module, example_inputs, **kwargs)


def from_onnx(path, **kwargs):
    """See :func:`concurrency_model.frontends.onnx_import.from_onnx`."""
    from .onnx_import import from_onnx as f
    return f(path, **kwargs)


def from_hf_config(path_or_dict, **kwargs):
    """See :func:`concurrency_model.frontends.hf.from_hf_config`."""
    from .hf import from_hf_config as f
    return f(path_or_dict, **kwargs)


__all__ = ["from_torch", "from_onnx", "from_hf_config"]
