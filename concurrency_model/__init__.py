"""concurrency_model: symbolic performance models of parallel and distributed deep learning.

After T. Ben-Nun and T. Hoefler, "Demystifying Parallel and Distributed Deep Learning: An In-Depth
Concurrency Analysis", ACM Computing Surveys 52(4), 2019.

Importing the package loads none of sympy, numpy, pandas, networkx, scipy or matplotlib: the public names
below are bound on first use by a module-level ``__getattr__`` (PEP 562), so ``import concurrency_model`` and
the CLI's start cost milliseconds and each command loads only what it uses.
"""
from __future__ import annotations

from importlib import import_module

from .version import __version__

# public name -> (module, attribute), imported when first asked for (PEP 562)
_LAZY = {"Cost": (".cost", "Cost"), "OpCost": (".cost", "OpCost"), "chain": (".cost", "chain"),
         "clog2": (".cost", "clog2"), "par": (".cost", "par"), "seq": (".cost", "seq"),
         "Graph": (".graph", "Graph"), "Node": (".graph", "Node"), "MODEL_NAMES": (".models", "NAMES"),
         "Builder": (".models", "Builder"), "get_model": (".models", "get_model"),
         "from_hf_config": (".frontends", "from_hf_config"), "from_onnx": (".frontends", "from_onnx"),
         "from_torch": (".frontends", "from_torch")}


def __getattr__(name: str):
    """The public names of :data:`__all__`, imported on first use; a submodule's name falls through to the
    import system (``AttributeError``)."""
    if name not in _LAZY:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    module, attr = _LAZY[name]
    value = getattr(import_module(module, __name__), attr)
    globals()[name] = value  # bound once: later look-ups do not come here
    return value


def __dir__() -> list:
    return sorted(set(globals()) | set(_LAZY))


def estimate(scenario):
    """One training step of a scenario (file path or dict): :func:`concurrency_model.training.estimate.estimate`.
    Sweeps: :func:`concurrency_model.sweep.sweep`; inference: :func:`concurrency_model.serving.decoder.infer`."""
    from .training.estimate import estimate as run
    return run(scenario)


__all__ = ["estimate", "Cost", "OpCost", "chain", "clog2", "par", "seq", "Graph", "Node", "Builder", "get_model",
           "MODEL_NAMES", "from_torch", "from_onnx", "from_hf_config", "__version__"]
