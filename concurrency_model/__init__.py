"""concurrency_model: symbolic performance models of parallel and distributed deep learning.

After T. Ben-Nun and T. Hoefler, "Demystifying Parallel and Distributed Deep Learning: An In-Depth
Concurrency Analysis", ACM Computing Surveys 52(4), 2019.
"""
from __future__ import annotations

__version__ = "0.1.0"

from .cost import Cost, OpCost, chain, clog2, par, seq  # noqa: E402
from .graph import Graph, Node  # noqa: E402
from .models import NAMES as MODEL_NAMES  # noqa: E402
from .models import Builder, get_model  # noqa: E402
from .frontends import from_hf_config, from_onnx, from_torch  # noqa: E402  (lazy: no torch/onnx import)



def estimate(scenario):
    """One training step of a scenario (file path or dict): :func:`concurrency_model.parallel.estimate.estimate`.
    Sweeps: :func:`concurrency_model.sweep.sweep`; inference: :func:`concurrency_model.inference.infer`."""
    from .parallel.estimate import estimate as run
    return run(scenario)


__all__ = ["estimate", "Cost", "OpCost", "chain", "clog2", "par", "seq", "Graph", "Node", "Builder", "get_model",
           "MODEL_NAMES", "from_torch", "from_onnx", "from_hf_config", "__version__"]
