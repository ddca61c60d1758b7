"""Device presets (package data) and the loader of :mod:`concurrency_model.hardware.devices`."""
from __future__ import annotations

import dataclasses
import json
import re
from importlib import resources
from pathlib import Path

import pytest
import sympy as sp

from concurrency_model.hardware import devices as hardware
from concurrency_model.hardware.devices import DTYPES, Device, device_names, load_device

PRESET_DIR = resources.files("concurrency_model") / "presets" / "devices"
PRESET_FILES = sorted(p.name for p in PRESET_DIR.iterdir() if p.name.endswith(".json"))

EXPECTED = {"p100-sxm2-16gb", "v100-sxm2-32gb", "a100-sxm4-40gb", "a100-sxm4-80gb", "h100-sxm5-80gb",
            "h200-sxm-141gb", "h100-sxm-96gb-hbm2e", "m40-24gb", "titanx-maxwell", "titanx-pascal", "titan-xp", "gtx-1080-ti",
            "p100-pcie-16gb", "t4", "mi25", "vega-fe", "xeon-phi-7250"}

# top-level fields that hold numbers (or dtype -> number objects); each needs a ``sources`` entry
NUMERIC_FIELDS = ("peak_flops", "vector_flops", "sparse_flops", "mem_bw_Bps", "mem_capacity_bytes", "launch_overhead_s",
                  "multiprocessors", "l2_bytes", "board_power_w", "compute_capability", "attention_board")


def _raw(filename: str) -> dict:
    return json.loads((PRESET_DIR / filename).read_text())


def _hardware_md() -> Path | None:
    root = Path(__file__).resolve().parents[2]
    for cand in (root / "shared" / "reference" / "hardware.md", root.parent / "shared" / "reference" / "hardware.md"):
        if cand.is_file():
            return cand
    return None


# -- every preset file --------------------------------------------------------------------------------

def test_all_expected_presets_exist():
    assert EXPECTED <= set(device_names())


@pytest.mark.parametrize("filename", PRESET_FILES)
def test_preset_loads_and_name_is_file_stem(filename):
    stem = filename[:-5]
    dev = load_device(stem)
    assert isinstance(dev, Device)
    assert dev.name == stem
    assert _raw(filename)["name"] == stem
    # loading by path gives the same device
    with resources.as_file(PRESET_DIR / filename) as path:
        assert load_device(path) == dev
        assert load_device(str(path)) == dev


@pytest.mark.parametrize("filename", PRESET_FILES)
def test_preset_sources_cover_every_numeric_field(filename):
    raw = _raw(filename)
    sources = raw.get("sources", {})
    present = [k for k in NUMERIC_FIELDS if k in raw]
    assert {"peak_flops", "mem_bw_Bps", "mem_capacity_bytes", "launch_overhead_s", "multiprocessors"} <= set(present)
    for k in present:
        assert isinstance(sources.get(k), str) and sources[k].strip(), f"{filename}: no source for {k}"
        # a reference key of hardware.md, a repository at a commit (owner/name @ hash), an explicit estimate,
        # (compute capability) NVIDIA's table by URL, a datasheet / document by URL (the Blackwell presets: no
        # hardware.md key yet), or a value marked "as recalled" (rules: say so where no source was found)
        cites = re.search(r"\[R\d+\]|[\w.-]+/[\w.-]+ @ [0-9a-f]{7,}|https?://\S+", sources[k]) or \
            "estimate" in sources[k] or "as recalled" in sources[k] or \
            (k == "compute_capability" and "https://developer.nvidia.com/cuda-" in sources[k])
        assert cites, f"{filename}: {k} cites nothing"
    assert not set(sources) - set(NUMERIC_FIELDS), f"{filename}: sources for unknown fields"


@pytest.mark.parametrize("filename", PRESET_FILES)
def test_preset_values_are_sane(filename):
    dev = load_device(filename[:-5])
    assert dev.kind in ("gpu", "cpu")
    assert set(dev.peak_flops) <= set(DTYPES) and set(dev.vector_flops) <= set(DTYPES)
    for dtype, v in dev.peak_flops.items():
        assert 1e11 <= v <= 2e16, (dtype, v)  # FLOP/s, not TFLOP/s (NVFP4 on Blackwell Ultra: 1.5e16)
        # a tensor peak is never below the non-tensor rate of the same dtype
        assert v >= dev.vector_flops.get(dtype, 0)
    assert (1e9 if dev.kind == "cpu" else 1e11) <= dev.mem_bw <= 1e13  # bytes/s (a small VM streams ~25 GB/s)
    assert 1e9 <= dev.mem_capacity <= 1e12  # bytes
    assert 0 < dev.launch_overhead <= 1e-4  # seconds
    assert 0 <= dev.l2_bytes <= 1e9
    assert 0 <= dev.board_power_w <= 1400  # GB300: 1,400 W
    # machine balance is finite and positive
    assert dev.peak("fp32") / dev.mem_bw > 0


def test_cited_reference_keys_exist_in_hardware_md():
    md = _hardware_md()
    if md is None:
        pytest.skip("shared/reference/hardware.md not available")
    defined = set(re.findall(r"\*\*\[(R\d+)\]\*\*", md.read_text()))
    for filename in PRESET_FILES:
        cited = set(re.findall(r"\[(R\d+)\]", json.dumps(_raw(filename)["sources"])))
        assert cited <= defined, (filename, cited - defined)


# -- spot checks against shared/reference/hardware.md -------------------------------------------------

@pytest.mark.parametrize("name, attr, key, expected", [
    ("v100-sxm2-32gb", "peak", "fp16", 125e12),
    ("v100-sxm2-32gb", "peak", "fp32", 15.7e12),
    ("v100-sxm2-32gb", "peak", "fp64", 7.8e12),
    ("v100-sxm2-32gb", "vector", "fp16", 31.4e12),
    ("v100-sxm2-32gb", "mem_bw", None, 900e9),
    ("v100-sxm2-32gb", "multiprocessors", None, 80),
    ("v100-sxm2-32gb", "mem_capacity", None, 32e9),
    ("h100-sxm5-80gb", "peak", "bf16", 989.4e12),
    ("h100-sxm5-80gb", "peak", "fp8", 1978.9e12),
    ("h100-sxm5-80gb", "peak", "tf32", 494.7e12),
    ("h100-sxm5-80gb", "mem_bw", None, 3.35e12),
    ("h100-sxm5-80gb", "multiprocessors", None, 132),
    ("h200-sxm-141gb", "peak", "bf16", 989.4e12),
    ("h200-sxm-141gb", "mem_bw", None, 4.8e12),
    ("h200-sxm-141gb", "mem_capacity", None, 141e9),
    ("h100-sxm-96gb-hbm2e", "mem_bw", None, 2.4e12),  # torchtitan benchmarks/*_h100_*.md, Hardware
    ("h100-sxm-96gb-hbm2e", "mem_capacity", None, 96e9),
    ("h100-sxm-96gb-hbm2e", "board_power_w", None, 500),
    ("a100-sxm4-40gb", "mem_bw", None, 1.555e12),
    ("a100-sxm4-40gb", "peak", "bf16", 312e12),
    ("a100-sxm4-40gb", "mem_capacity", None, 40e9),
    ("a100-sxm4-80gb", "mem_bw", None, 2.039e12),
    ("p100-sxm2-16gb", "peak", "fp32", 10.6e12),
    ("p100-sxm2-16gb", "peak", "fp16", 21.2e12),
    ("p100-pcie-16gb", "peak", "fp32", 9.3e12),
    ("p100-pcie-16gb", "peak", "fp16", 18.7e12),
    ("p100-pcie-16gb", "mem_bw", None, 732e9),
    ("t4", "peak", "fp16", 65e12),
    ("t4", "peak", "int8", 130e12),
    ("t4", "mem_bw", None, 320e9),
    ("t4", "board_power_w", None, 70),
    ("m40-24gb", "peak", "fp32", 6.8e12),
    ("m40-24gb", "mem_bw", None, 288e9),
    ("m40-24gb", "mem_capacity", None, 24e9),
    ("titanx-maxwell", "mem_bw", None, 336.5e9),
    ("titanx-pascal", "peak", "int8", 44e12),
    ("titanx-pascal", "mem_bw", None, 480e9),
    ("titan-xp", "mem_bw", None, 547.7e9),
    ("gtx-1080-ti", "mem_capacity", None, 11e9),
    ("gtx-1080-ti", "mem_bw", None, 484e9),
    ("mi25", "peak", "fp16", 24.6e12),
    ("mi25", "peak", "fp32", 12.3e12),
    ("mi25", "multiprocessors", None, 64),
    ("xeon-phi-7250", "peak", "fp32", 6092.8e9),
    ("xeon-phi-7250", "mem_bw", None, 490e9),
    ("xeon-phi-7250", "multiprocessors", None, 68),
])
def test_spot_values(name, attr, key, expected):
    dev = load_device(name)
    if attr == "peak":
        got = dev.peak(key)
    elif attr == "vector":
        got = dev.vector_flops[key]
    else:
        got = getattr(dev, attr)
    assert got == expected


def test_xeon_phi_is_a_cpu_with_derived_peak():
    dev = load_device("xeon-phi-7250")
    assert dev.kind == "cpu" and dev.vendor == "Intel"
    assert dev.peak("fp32") == pytest.approx(68 * 1.4e9 * 64)
    assert dev.peak("fp64") == pytest.approx(68 * 1.4e9 * 32)
    assert dev.launch_overhead == 1e-5
    assert "estimate" in dev.sources["launch_overhead_s"]


def test_gpus_have_back_to_back_launch_overhead():
    # [R32]: ~3.8 us per kernel with back-to-back stream launches
    for name in device_names():
        dev = load_device(name)
        if dev.kind == "gpu":
            assert dev.launch_overhead == 3.8e-6, name


def test_dense_not_sparse_peaks():
    # the sparse figures are twice these; a preset holding them would be a unit-of-meaning bug
    assert load_device("a100-sxm4-80gb").peak("fp16") == 312e12
    assert load_device("h100-sxm5-80gb").peak("int8") == 1978.9e12
    assert load_device("h200-sxm-141gb").peak("fp8") == 1978.9e12


def test_pascal_consumer_cards_have_no_fp16_peak():
    for name in ("titanx-pascal", "titan-xp", "gtx-1080-ti", "titanx-maxwell", "m40-24gb"):
        with pytest.raises(ValueError, match="dtype"):
            load_device(name).peak("fp16")


# -- what-if replacement and Device.peak errors -------------------------------------------------------

def test_dataclasses_replace_mem_bw():
    dev = load_device("v100-sxm2-32gb")
    faster = dataclasses.replace(dev, mem_bw=2e12)
    assert faster.mem_bw == 2e12
    assert dev.mem_bw == 900e9  # frozen original unchanged
    assert faster.peak("fp16") == dev.peak("fp16")
    assert faster != dev
    with pytest.raises(dataclasses.FrozenInstanceError):
        dev.mem_bw = 1.0


def test_peak_unsupported_dtype_raises():
    with pytest.raises(ValueError, match="dtype") as e:
        load_device("v100-sxm2-32gb").peak("fp8")
    assert "fp8" in str(e.value)


def test_peak_unknown_dtype_raises():
    with pytest.raises(ValueError, match="dtype") as e:
        load_device("v100-sxm2-32gb").peak("fp4x")
    assert "fp4x" in str(e.value)


# -- load_device errors --------------------------------------------------------------------------------

def _valid_profile() -> dict:
    return {"name": "tmpdev", "peak_flops": {"fp32": 1e13}, "mem_bw_Bps": 5e11, "mem_capacity_bytes": 16e9,
            "launch_overhead_s": 5e-6, "multiprocessors": 10}


def test_load_device_returns_device_unchanged():
    dev = load_device("t4")
    assert load_device(dev) is dev


def test_load_device_valid_tmp_file(tmp_path):
    p = tmp_path / "dev.json"
    p.write_text(json.dumps(_valid_profile()))
    dev = load_device(p)
    assert dev.name == "tmpdev" and dev.peak("fp32") == 1e13 and dev.kind == "gpu"


def test_load_device_unknown_preset():
    with pytest.raises(ValueError, match="unknown preset") as e:
        load_device("no-such-gpu")
    assert "no-such-gpu" in str(e.value)
    assert "v100-sxm2-32gb" in str(e.value)  # lists the allowed names


def test_load_device_missing_file(tmp_path):
    missing = tmp_path / "absent.json"
    with pytest.raises(ValueError, match="no such file") as e:
        load_device(missing)
    assert "absent.json" in str(e.value)


def test_load_device_invalid_json(tmp_path):
    p = tmp_path / "broken.json"
    p.write_text('{"name": "x", "peak_flops": ')
    with pytest.raises(ValueError, match="not valid JSON") as e:
        load_device(p)
    assert "broken.json" in str(e.value)


def test_load_device_not_an_object(tmp_path):
    p = tmp_path / "list.json"
    p.write_text("[1, 2]")
    with pytest.raises(ValueError, match="JSON object"):
        load_device(p)


@pytest.mark.parametrize("field", ["mem_bw_Bps", "peak_flops", "multiprocessors", "name"])
def test_load_device_missing_field(tmp_path, field):
    d = _valid_profile()
    del d[field]
    p = tmp_path / "missing.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="missing field") as e:
        load_device(p)
    assert field in str(e.value)


@pytest.mark.parametrize("field, value", [("mem_bw_Bps", -1.0), ("mem_capacity_bytes", -16e9),
                                          ("launch_overhead_s", -5e-6), ("multiprocessors", -4),
                                          ("l2_bytes", -1), ("board_power_w", -300),
                                          # JSON files may hold NaN / Infinity (Python writes them): no NaN step time
                                          ("mem_bw_Bps", float("nan")), ("launch_overhead_s", float("inf"))])
def test_load_device_negative_field(tmp_path, field, value):
    d = _valid_profile()
    d[field] = value
    p = tmp_path / "negative.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match=field) as e:
        load_device(p)
    assert str(value) in str(e.value)


def test_load_device_negative_peak(tmp_path):
    d = _valid_profile()
    for bad in (-1e13, float("nan")):
        d["peak_flops"] = {"fp32": bad}
        p = tmp_path / "negpeak.json"
        p.write_text(json.dumps(d))
        with pytest.raises(ValueError, match=r"peak_flops\.fp32"):
            load_device(p)


def test_load_device_unknown_dtype_in_file(tmp_path):
    d = _valid_profile()
    d["peak_flops"] = {"fp13": 1e13}
    p = tmp_path / "baddtype.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="unknown dtype"):
        load_device(p)


def test_load_device_unknown_field(tmp_path):
    d = _valid_profile()
    d["mem_bandwidth"] = 1e12
    p = tmp_path / "extra.json"
    p.write_text(json.dumps(d))
    with pytest.raises(ValueError, match="unknown field 'mem_bandwidth'"):
        load_device(p)


def test_to_dict_round_trips():
    dev = load_device("h100-sxm5-80gb")
    assert hardware.device_from_dict(dev.to_dict()) == dev


# -- symbolic -----------------------------------------------------------------------------------------

def test_symbolic_peak_and_mapping():
    dev = load_device("v100-sxm2-32gb")
    sdev, values = hardware.symbolic(dev, "fp16")
    F = sdev.peak("fp16")
    assert isinstance(F, sp.Symbol)
    assert values[F] == 125e12
    assert isinstance(sdev.mem_bw, sp.Symbol) and values[sdev.mem_bw] == 900e9
    assert values[sdev.launch_overhead] == 3.8e-6
    assert sdev.peak("fp32") == 15.7e12  # other dtypes stay numbers
    # an expression in the symbols evaluates back to the number
    t = 1e15 / sdev.peak("fp16") + 1e9 / sdev.mem_bw + sdev.launch_overhead
    expected = 1e15 / 125e12 + 1e9 / 900e9 + 3.8e-6
    assert float(t.subs(values)) == pytest.approx(expected)
    assert dev.peak("fp16") == 125e12  # original untouched


def test_symbolic_unsupported_dtype_raises():
    with pytest.raises(ValueError, match="dtype"):
        hardware.symbolic(load_device("v100-sxm2-32gb"), "fp8")


def test_a_preset_written_as_an_object_is_told_how_to_name_it():
    from concurrency_model.hardware.clusters import cluster_from_dict
    with pytest.raises(ValueError, match=r'^cluster\.preset: unknown field; a preset is named by a string \("cluster": '
                                         r'"dgx-h100"'):
        cluster_from_dict({"preset": "dgx-h100", "nodes": 8})
    # a misspelt field is named as such, not as the required field it leaves missing
    with pytest.raises(ValueError, match=r"^cluster\.devce: unknown field"):
        cluster_from_dict({"name": "x", "devce": "h100-sxm5-80gb", "gpus_per_node": 8, "nics_per_node": 8,
                           "intra": {}, "inter": {}})
