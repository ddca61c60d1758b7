"""The spreads of :mod:`concurrency_model.uncertainty`, derived from the validation data.

``python -m concurrency_model.validate.spreads`` rewrites ``presets/uncertainty.json`` (the module
docstring of :mod:`concurrency_model.uncertainty` says what each spread is). It lives in ``validate`` because
it predicts validation rows; :mod:`concurrency_model.uncertainty` only reads the file it writes.
"""
from __future__ import annotations

import json
from datetime import date

import numpy as np

from ..uncertainty import FILE, MODEL, log_spread
from . import collectives, kernels, training

MODEL_EVERY = 8  # derive_spreads: every 8th calibration row (90 of the 720 even rows; ~15 s on 1 core)


def model_spread(every: int = MODEL_EVERY) -> tuple[float, int]:
    """``(sigma_model, rows)``: :func:`log_spread` of the step times predicted for every ``every``-th
    calibration row of ``HOST_S_PER_KERNEL`` (:func:`~concurrency_model.validate.training.vtrain_fit_rows`,
    the even rows of vTrain single node; the odd ones stay held out)."""
    r = training.evaluate(training.vtrain_fit_rows().iloc[::every].reset_index(drop=True), workers=1)
    r = r[(r["status"] == "ok") & np.isfinite(r["predicted_time_s"])]
    return log_spread(r["predicted_time_s"], r["measured_time_s"]), len(r)


def derive_spreads() -> dict:
    """The spreads from the data (see the module); writes nothing."""
    k = kernels.predict(kernels.all_rows())
    k = k[k["op"].isin(["gemm", "conv"])]
    per_device = np.log(k["predicted_s"] / k["measured_s"]).groupby(k["preset"]).median()
    c = collectives.preset()
    c = c[c["size_bytes"] >= collectives.MIN_TARGET_BYTES]
    net = float(np.std(np.log(c["predicted_s"] / c["measured_s"])))
    device = float(np.std(per_device))
    model, model_rows = model_spread()
    return {"sigma": {"flops": device, "mem_bw": device, "launch": device, "intra_bw": net, "inter_bw": net,
                      MODEL: model},
            "fitted_on": {"flops, mem_bw, launch": f"DeepBench GEMM and conv, {len(per_device)} devices, default "
                          "constants: std of per-device median log(predicted/measured)",
                          "intra_bw, inter_bw": f"nccl-tests all_reduce >= 64 KiB, {len(c)} rows, cluster presets: "
                          "std of log(predicted/measured)",
                          MODEL: f"vTrain single node, every {MODEL_EVERY}th of the even rows HOST_S_PER_KERNEL is "
                          f"fitted on ({model_rows} steps): std of log(predicted/measured) step time"},
            "date": date.today().isoformat()}


if __name__ == "__main__":  # python -m concurrency_model.validate.spreads: rewrite presets/uncertainty.json
    FILE.write_text(json.dumps(derive_spreads(), indent=1) + "\n")
    print(FILE.read_text())
