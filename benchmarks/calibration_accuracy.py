"""How well a ``calibrate compute`` profile predicts numpy GEMMs it was not fitted on.

Runs the quick calibration of this machine into a temporary directory (or takes ``--profile`` PATH), then
times ``HELD_OUT`` numpy fp32 GEMMs (none of them in ``QUICK_SHAPES`` or ``FULL_SHAPES``; odd sizes,
skinny and square, 32..3072) with the same interleaved median timing, and prints one JSON object:
``median_ape, p90_ape`` (absolute percentage error of the GEMM model with the fitted profile, %),
``rows`` (shape, measured and predicted seconds, APE), ``fit`` (the profile's in-sample errors),
``elapsed_s``. Target: median APE <= 20 %. Timing on a shared 2-core machine is noisy: rerun before
reading much into a single bad row.

    python benchmarks/calibration_accuracy.py [--profile DIR/profile.json] [--repeats 7]
"""
from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from concurrency_model.calibrate import compute
from concurrency_model.hardware.devices import load_device
from concurrency_model.timing import gemm_coeffs

HELD_OUT = [(112, 112, 112), (192, 384, 256), (896, 896, 896), (1280, 640, 960), (384, 1536, 512),
            (3072, 256, 256), (32, 2048, 1024), (1024, 1024, 48), (640, 640, 1920), (1792, 1792, 1792),
            (200, 300, 400), (1200, 1200, 1200)]
TARGET_MEDIAN_APE = 20.0


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--profile", help="a profile.json from calibrate compute (default: run --quick now)")
    p.add_argument("--repeats", type=int, default=7)
    a = p.parse_args(argv)
    assert not set(HELD_OUT) & set(compute.FULL_SHAPES), "held-out shapes must not be calibration shapes"
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        if a.profile:
            path = Path(a.profile)
        else:
            compute.calibrate(tmp, quick=True, use_torch=False, stream=sys.stderr)
            path = Path(tmp) / "profile.json"
        dev = load_device(path)
        raw = json.loads(path.read_text())
    rows = compute.measure(HELD_OUT, "fp32", "numpy", a.repeats, 1, 0.5)
    m, n, k = (rows[c].to_numpy(int) for c in ("m", "n", "k"))
    pred = gemm_coeffs(m, n, k, dev, "fp32").seconds(dev)
    err = compute.ape(pred, rows["median_s"])
    out = {"median_ape": round(float(np.median(err)), 2), "p90_ape": round(float(np.percentile(err, 90)), 2),
           "target_median_ape": TARGET_MEDIAN_APE, "profile": str(path) if a.profile else "quick calibration",
           "efficiency": {key: raw["efficiency"][key] for key in ("compute", "memory", "k_startup", "l2_factor",
                                                                   "sigma")},
           "fit": raw.get("notes", ""),
           "rows": [{"m": int(i), "n": int(j), "k": int(h), "measured_s": float(t), "predicted_s": float(q),
                     "ape": round(float(e), 2)} for i, j, h, t, q, e in zip(m, n, k, rows["median_s"], pred, err)],
           "elapsed_s": round(time.perf_counter() - t0, 2)}
    print(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
