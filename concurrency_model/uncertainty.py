"""Error bands: the spread of the fitted constants, propagated through the lambdified step expression.

Every prediction scales the device's peak FLOP/s, memory bandwidth and launch overhead, and the links'
bandwidth, by efficiencies that are fitted (or defaults) and off by a device- or system-level factor. The
log of that factor is taken as normal with the spread of the calibration residuals
(``presets/uncertainty.json``, made by :func:`derive_spreads`):

* ``flops``, ``mem_bw``, ``launch``: the standard deviation across DeepBench devices of each device's median
  log(predicted/measured) kernel time (GEMM and convolution, default constants): the systematic part, which
  does not average out over the thousands of kernels of a step;
* ``intra_bw``, ``inter_bw``: the standard deviation of log(predicted/measured) of the cluster presets'
  all-reduce times at >= 64 KiB against nccl-tests.

:func:`band` samples the five scales together (independent log-normals, one draw per sample for the whole
step), evaluates the step on the whole sample at once and returns the 10th and 90th percentiles. Whether
the bands are honest is checked in ``benchmarks/accuracy.py``: the share of measured training steps inside
the 80% band, on datasets the spreads were not derived from.
"""
from __future__ import annotations

import json
from datetime import date
from functools import lru_cache
from pathlib import Path

import numpy as np

SCALES = ("flops", "mem_bw", "launch", "intra_bw", "inter_bw")
FILE = Path(__file__).parent / "presets" / "uncertainty.json"
SAMPLES = 400
QUANTILES = (0.1, 0.9)


@lru_cache(maxsize=None)
def spreads() -> dict:
    """``{scale: sigma of log}`` from ``presets/uncertainty.json``."""
    d = json.loads(FILE.read_text())
    return {k: float(d["sigma"][k]) for k in SCALES}


def sample_scales(n: int = SAMPLES, seed: int = 0, sigma: dict | None = None) -> dict:
    """``n`` draws of each scale: rates (FLOP/s, bandwidths) multiplied by ``exp(N(0, sigma))``, the launch
    overhead too (a time: the same law)."""
    sigma = spreads() if sigma is None else sigma
    rng = np.random.default_rng(seed)
    return {k: np.exp(rng.normal(0.0, sigma[k], n)) for k in SCALES}


def band(step_fn, n: int = SAMPLES, seed: int = 0) -> tuple[float, float]:
    """10th and 90th percentile of ``step_fn(**scales)`` (a function of arrays of the five scales).

    >>> lo, hi = band(lambda flops, mem_bw, launch, intra_bw, inter_bw: 2.0 / flops)
    >>> round(lo, 2), round(hi, 2)   # about 2 s x exp(-+1.28 sigma_flops)
    (1.64, 2.43)
    """
    t = np.asarray(step_fn(**sample_scales(n, seed)), dtype=float)
    lo, hi = np.quantile(t, QUANTILES)
    return float(lo), float(hi)


def derive_spreads() -> dict:
    """The spreads from the data (see the module); writes nothing."""
    from .validate import collectives, kernels
    k = kernels.predict(kernels.all_rows())
    k = k[k["op"].isin(["gemm", "conv"])]
    per_device = np.log(k["predicted_s"] / k["measured_s"]).groupby(k["preset"]).median()
    c = collectives.preset()
    c = c[c["size_bytes"] >= collectives.MIN_TARGET_BYTES]
    net = float(np.std(np.log(c["predicted_s"] / c["measured_s"])))
    device = float(np.std(per_device))
    return {"sigma": {"flops": device, "mem_bw": device, "launch": device, "intra_bw": net, "inter_bw": net},
            "fitted_on": {"flops, mem_bw, launch": f"DeepBench GEMM and conv, {len(per_device)} devices, default "
                          "constants: std of per-device median log(predicted/measured)",
                          "intra_bw, inter_bw": f"nccl-tests all_reduce >= 64 KiB, {len(c)} rows, cluster presets: "
                          "std of log(predicted/measured)"},
            "date": date.today().isoformat()}


if __name__ == "__main__":  # python -m concurrency_model.uncertainty: rewrite presets/uncertainty.json
    FILE.write_text(json.dumps(derive_spreads(), indent=1) + "\n")
    print(FILE.read_text())
