"""The toolkit's own kernel and GPT-step measurements (``data/measured/kernels-*``, ``steps-*``) in the
validation: found, mapped to the scenario they are, predicted in each mode."""
from __future__ import annotations

import numpy as np
import pytest

from concurrency_model import datasets
from concurrency_model.serving.decoder import infer
from concurrency_model.training.estimate import estimate
from concurrency_model.validate import measured, registry
from concurrency_model.validate import kernels as vk

KERNELS = "measured-kernels-cpu-host-20261204"
STEPS = "measured-steps-cpu-host-20261204"


def _folder(name):
    return datasets.data_dir() / "measured" / name[len("measured-"):]


def test_runs_are_datasets_with_their_modes():
    assert {KERNELS, STEPS} <= set(registry.names())
    df = registry.validate([KERNELS, STEPS], workers=1, all_modes=True)
    s = {x["name"]: x for x in registry.summarize(df)}
    # both runs carry their machine's torch profile (profile.json): predicted on it first, on the preset too
    assert s[KERNELS]["mode"] == "calibrated" and s[KERNELS]["rows"] == s[KERNELS]["rows_total"] == 48
    assert s[KERNELS]["other_modes"]["held-out"]["rows"] == 24  # every other row of each op, dtype and pass
    assert s[KERNELS]["other_modes"]["preset"]["rows"] == 48 and "datasheet" not in s[KERNELS]["other_modes"]
    assert s[STEPS]["mode"] == "calibrated" and s[STEPS]["rows"] == s[STEPS]["rows_total"] == 9
    assert s[STEPS]["other_modes"]["preset"]["rows"] == 9
    assert s[STEPS]["error"] is None and s[STEPS]["not_predicted"] == 0 and s[STEPS]["band_rows"] == 9
    st = df[df["dataset"] == STEPS]
    assert ((st["p10"] < st["predicted"]) & (st["predicted"] < st["p90"])).all()  # estimate's and infer's bands
    k = df[df["dataset"] == KERNELS]
    assert set(k[k["mode"] == "preset"]["group"]) == {"gemm cpu-host fp32", "conv cpu-host fp32", "rnn cpu-host fp32"}
    assert set(k[k["mode"] == "calibrated"]["group"]) == {"gemm cpu-host-torch fp32", "conv cpu-host-torch fp32",
                                                          "rnn cpu-host-torch fp32"}
    cal = k[k["mode"] == "calibrated"]
    assert ((cal["p10"] < cal["predicted"]) & (cal["predicted"] < cal["p90"])).all()  # the profile's own spread


def test_datasheet_mode_fits_nothing_on_the_device():
    pre = measured.kernels_frame(KERNELS, _folder(KERNELS), "preset")
    sheet = measured.kernels_frame(KERNELS, _folder(KERNELS), "datasheet")
    assert (pre["measured"].to_numpy() == sheet["measured"].to_numpy()).all()
    assert not np.allclose(pre["predicted"], sheet["predicted"])  # DeepBench's fitted constants, not the preset's
    with pytest.raises(ValueError, match="mode: unknown"):
        measured.kernels_frame(KERNELS, _folder(KERNELS), "fitted")


def test_preset_of_names():
    assert vk.preset_of("NVIDIA H200") == "h200-sxm-141gb"
    assert vk.preset_of("NVIDIA V100") == "v100-sxm2-32gb"  # DeepBench's name
    assert vk.preset_of("CPU x86_64") == "cpu-host" and vk.preset_of("Some NPU") is None


def test_a_training_row_is_the_estimate_of_its_scenario():
    df = datasets.load_measured(_folder(STEPS), "gpt_steps.csv")
    r = df[(df["kind"] == "train") & (df["attention"] == "unfused")].iloc[0].to_dict()
    by_hand = estimate({"model": {"kind": "gpt", "layers": 6, "hidden": 512, "heads": 8, "seq_len": 128,
                                  "vocab": 50257, "fused_attention": False, "max_positions": 1024},
                        "cluster": measured.one_device_cluster("cpu-host"),
                        "parallel": {"data": 1, "tensor": 1, "pipeline": 1, "microbatch_size": 4, "global_batch": 4},
                        "training": {"dtype": "fp32", "optimizer": "adam", "recompute": "none", "zero_stage": 0}})
    assert measured.predict_step(r)["time_s"] == pytest.approx(by_hand.step_time_s, rel=1e-12)
    fused = measured.predict_step({**r, "attention": "flash"})["time_s"]
    assert fused < by_hand.step_time_s  # the fused kernel keeps the score matrix out of memory


def test_inference_rows_are_infer_of_their_scenario():
    df = datasets.load_measured(_folder(STEPS), "gpt_steps.csv")
    r = df[(df["kind"] == "decode") & (df["model"] == "gpt2") & (df["batch"] == 8)].iloc[0].to_dict()
    assert r["positions"] == 1024  # the measured model's position table: the served context
    sc = {"model": {"kind": "gpt", "layers": 12, "hidden": 768, "heads": 12, "seq_len": 1024, "vocab": 50257,
                    "fused_attention": True, "max_positions": 1024},
          "cluster": measured.one_device_cluster("cpu-host")}
    got = infer({**sc, "inference": {"batch": 8, "prompt_len": 256, "decode_len": 64, "dtype": "fp32"}})
    assert measured.predict_step(r)["time_s"] == pytest.approx(got.decode_s_per_token, rel=1e-12)
    pre = measured.predict_step({**r, "kind": "prefill"})["time_s"]
    got = infer({**sc, "inference": {"batch": 8, "prompt_len": 256, "decode_len": 1, "dtype": "fp32"}})
    assert pre == pytest.approx(got.prefill_s, rel=1e-12)
    with pytest.raises(ValueError, match="kind: unknown 'serve'"):
        measured.predict_step({**r, "kind": "serve"})


def test_a_gpu_row_pays_the_training_host_constant():
    """On a GPU the eager loop's launches cost the training estimate's host seconds per kernel: a batch-1
    decode of GPT-2 on an H200 is host-bound (a fraction of a millisecond of weights to read, dozens of
    kernels a layer)."""
    from concurrency_model.parallel.host import HOST_S_PER_KERNEL
    r = {"kind": "decode", "model": "gpt2", "batch": 1, "seq": 1024, "attention": "flash", "dtype": "bf16",
         "vocab": 50257, "layers": 12, "hidden": 768, "heads": 12, "positions": 1088, "device": "NVIDIA H200"}
    t = measured.predict_step(r)["time_s"]
    weights_s = 124e6 * 2 / 4.8e12
    assert t > 10 * weights_s and t > 12 * 10 * HOST_S_PER_KERNEL


def test_memory_of_a_gpu_run_is_its_own_dataset(tmp_path):
    folder = tmp_path / "steps-h200-test"
    folder.mkdir()
    base = {"model": "gpt2", "seq": 1024, "attention": "flash", "dtype": "bf16", "vocab": 50257, "layers": 12,
            "hidden": 768, "heads": 12, "positions": 1088, "device": "NVIDIA H200", "date": "2026-12-04"}
    import pandas as pd
    pd.DataFrame([{**base, "kind": "train", "batch": 4, "median_ms": 60.0, "peak_allocated_bytes": 2.0e10},
                  {**base, "kind": "decode", "batch": 1, "median_ms": 8.0, "peak_allocated_bytes": 3e8},
                  {**base, "kind": "train", "batch": 64, "median_ms": float("nan"), "peak_allocated_bytes": None,
                   "error": "CUDA out of memory"}]).to_csv(folder / "gpt_steps.csv", index=False)
    assert measured.has_memory(folder) and not measured.has_memory(_folder(STEPS))
    t = measured.steps_frame("s", folder)
    m = measured.steps_frame("s", folder, "memory")
    assert list(t["label"].str.split().str[0]) == ["train", "decode"] and set(t["unit"]) == {"s"}
    assert len(m) == 1 and m["unit"].iloc[0] == "B" and m["measured"].iloc[0] == 2.0e10
    e = estimate({**measured._scenario({**base, "kind": "train"}, "h200-sxm-141gb"),
                  "parallel": {"microbatch_size": 4, "global_batch": 4},
                  "training": {"dtype": "bf16", "optimizer": "adam", "recompute": "none", "zero_stage": 0}})
    assert m["predicted"].iloc[0] == pytest.approx(e.memory_bytes_per_device)
    with pytest.raises(ValueError, match="what: unknown"):
        measured.steps_frame("s", folder, "energy")


def test_a_gpu_calibration_predicts_its_cuda_gemms_with_the_gpu_profile(tmp_path):
    """``calibrate compute`` on a CUDA machine writes numpy, torch and cuda rows and two profiles: each
    backend's GEMMs are predicted with its own device (torch's CPU rows have none and are left out)."""
    import json
    import shutil
    import pandas as pd
    from concurrency_model.hardware.devices import load_device
    from concurrency_model.timing import gemm_coeffs
    from concurrency_model.validate.adapters import measured_compute, measured_gemms
    src = datasets.data_dir() / "measured" / "compute-cpu-host-20261202"
    folder = tmp_path / "compute-gpu-test"
    shutil.copytree(src, folder)
    gpu = json.loads((datasets.data_dir().parent / "concurrency_model" / "presets" / "devices"
                      / "h200-sxm-141gb.json").read_text())
    (folder / "profile-cuda.json").write_text(json.dumps(gpu))
    rows = pd.read_csv(folder / "measurements.csv")
    dev = load_device(folder / "profile-cuda.json")
    shapes = [(4096, 4096, 4096), (8192, 1024, 512), (64, 8192, 8192)]
    t = gemm_coeffs([s[0] for s in shapes], [s[1] for s in shapes], [s[2] for s in shapes], dev, "fp16").seconds(dev)
    extra = pd.DataFrame([{"op": "gemm", "m": a, "n": b, "k": c, "dtype": "fp16", "median_s": x, "backend": "cuda"}
                          for (a, b, c), x in zip(shapes, t)]
                         + [{"op": "gemm", "m": 64, "n": 64, "k": 64, "dtype": "fp32", "median_s": 1e-5,
                             "backend": "torch"}])
    pd.concat([rows, extra], ignore_index=True).to_csv(folder / "measurements.csv", index=False)
    assert len(measured_gemms(folder)) == len(rows[rows["op"] == "gemm"]) + 3  # this torch row has no profile
    today = measured_gemms(datasets.data_dir() / "measured" / "compute-cpu-host-20261204")
    assert set(today["backend"]) == {"numpy", "torch"}  # that run wrote profile-torch.json
    got = measured_compute("m", folder, "in-sample")
    cuda = got[got["label"].str.startswith("cuda ")]
    assert len(cuda) == 3 and set(cuda["group"]) == {"cuda fp16"}
    assert cuda["ape"].max() < 1e-12  # the GPU's own profile, not the host's
    (folder / "profile.json").unlink()
    with pytest.raises(ValueError, match="profile.json: not found"):
        measured_gemms(folder)


def test_calibrated_mode_predicts_on_the_runs_own_profile(tmp_path):
    """A run's ``profile.json`` is the device its rows are predicted on in ``calibrated`` mode: the same rows
    on a copy of the run without it have no such mode (refused, naming the file)."""
    import shutil
    from concurrency_model.hardware.devices import load_device
    prof = load_device(_folder(STEPS) / "profile.json")
    assert prof.name == "cpu-host-torch" and "torch.matmul" in prof.efficiency.fitted_on
    df = datasets.load_measured(_folder(STEPS), "gpt_steps.csv")
    r = df[df["kind"] == "prefill"].iloc[0].to_dict()
    on_profile = measured.predict_step(r, _folder(STEPS) / "profile.json")["time_s"]
    assert on_profile != measured.predict_step(r)["time_s"]
    frame = measured.steps_frame("s", _folder(STEPS), mode="calibrated")
    assert frame.loc[frame["row"] == df.index[df["kind"] == "prefill"][0] + 2, "predicted"].iloc[0] == on_profile
    bare = tmp_path / "steps-bare"
    shutil.copytree(_folder(STEPS), bare)
    (bare / "profile.json").unlink()
    assert measured.run_profile(bare) is None
    with pytest.raises(ValueError, match="profile.json: not found"):
        measured.steps_frame("s", bare, mode="calibrated")
