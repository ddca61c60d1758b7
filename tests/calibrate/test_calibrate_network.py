"""``calibrate network``: the alpha-beta fit on synthetic times, the cluster file, and (with torch) a tiny
gloo run on 2 local ranks through the CLI, no overwriting without --force, and missing sizes when a size
fails or a rank dies part-way."""
from __future__ import annotations

import contextlib
import io
import json
import time
from importlib import util

import numpy as np
import pandas as pd
import pytest

from concurrency_model.calibrate import network
from concurrency_model.calibrate import fit_comm
from concurrency_model.calibrate.fit_comm import fit_alpha_beta, predict
from concurrency_model.cli import main

needs_torch = pytest.mark.skipif(util.find_spec("torch") is None, reason="needs torch (pip install torch==2.13.0)")
TINY_SIZES = (1024, 4096, 16384)
TINY_PLAN = {"warmup": 1, "reps": 3, "min_reps": 2, "budget_s": 0.05}
SIZES = np.array([2.0**k for k in range(10, 27)])


def _cluster_module():
    try:
        from concurrency_model.hardware import clusters as cluster
    except ImportError:
        return None
    return cluster if hasattr(cluster, "load_cluster") else None


# --- the fit, without torch -------------------------------------------------------------------------

@pytest.mark.parametrize("coll", network.COLLECTIVES)
@pytest.mark.parametrize("ranks", [2, 4, 8])
def test_fit_recovers_known_alpha_beta(coll, ranks):
    model, alpha, beta = fit_comm.MODELS[coll], 35e-6, 1 / 3.2e9
    f = fit_alpha_beta(SIZES, ranks, model(SIZES, ranks, alpha, beta), model)
    assert f.alpha == pytest.approx(alpha, rel=0.01) and f.beta == pytest.approx(beta, rel=0.01)
    assert f.bw == pytest.approx(3.2e9, rel=0.01) and f.median_ape < 0.1 and f.n == len(SIZES)


def test_fit_over_several_rank_counts_and_with_noise():
    ring = fit_comm.MODELS["all_gather"]
    n, p = np.r_[SIZES, SIZES], np.r_[np.full(17, 2), np.full(17, 4)]
    f = fit_alpha_beta(n, p, ring(n, p, 2e-6, 4e-10), ring)
    assert f.alpha == pytest.approx(2e-6, rel=0.01) and f.beta == pytest.approx(4e-10, rel=0.01)
    noise = np.exp(np.random.default_rng(1).normal(0.0, 0.05, len(n)))  # 5 % log-normal scatter
    g = fit_alpha_beta(n, p, ring(n, p, 2e-6, 4e-10) * noise, ring)
    assert g.alpha == pytest.approx(2e-6, rel=0.15) and g.beta == pytest.approx(4e-10, rel=0.1)
    assert 2 < g.median_ape < 8 and g.p90_ape >= g.median_ape
    assert np.allclose(predict(ring, f, n, p), ring(n, p, f.alpha, f.beta))


def test_fit_keeps_alpha_and_beta_non_negative_and_checks_input():
    model = fit_comm.MODELS["all_reduce"]
    f = fit_alpha_beta(SIZES, 2, 1e-9 * SIZES, model)  # no latency at all
    assert f.alpha >= 0 and f.alpha < 1e-9 and f.beta == pytest.approx(1e-9, rel=0.01)  # 2(P-1)/P = 1
    with pytest.raises(ValueError, match="cannot fit"):
        fit_alpha_beta([1024], 2, [1e-4], model)
    with pytest.raises(ValueError, match="positive"):
        fit_alpha_beta([1024, 2048], 2, [1e-4, -1.0], model)
    with pytest.raises(ValueError, match="zero time"):
        fit_alpha_beta([1024, 2048], 1, [1e-4, 2e-4], model)


def test_busbw_factors_follow_nccl_tests():
    assert network.BUSBW["all_reduce"](4) == 1.5 and network.BUSBW["broadcast"](4) == 1.0
    assert all(network.BUSBW[c](4) == 0.75 for c in ("all_gather", "reduce_scatter", "alltoall"))
    assert network.SIZES[0] == 1024 and network.SIZES[-1] == 64 * 2**20 and len(network.SIZES) == 17
    assert set(network.QUICK_SIZES) < set(network.SIZES)


def _synthetic_rows(ranks=4, alpha=50e-6, bw=2e9):
    rows = [{"collective": c, "num_ranks": ranks, "num_nodes": 1, "size_bytes": int(n), "count_elements": int(n) // 4,
             "dtype": "float", "redop": "sum", "time_us": fit_comm.MODELS[c](n, ranks, alpha, 1 / bw) * 1e6}
            for c in network.COLLECTIVES for n in SIZES]
    info = {"backend": "gloo", "host": "h", "torch_version": "2.13.0", "python_version": "3.11", "date": "2026-01-01"}
    return network._frame(rows, info)


def test_profile_is_a_cluster_file_with_the_all_reduce_link():
    prof = network.profile(_synthetic_rows())
    assert set(prof) == {"name", "device", "gpus_per_node", "nodes", "intra", "inter", "nics_per_node", "sources",
                         "notes"}
    assert prof["name"] == "cpu-host-gloo" and prof["device"] == "cpu-host" and prof["gpus_per_node"] == 4
    for tier in ("intra", "inter"):
        assert {"name", "kind", "bw_Bps", "latency_s", "efficiency", "sources"} <= set(prof[tier])
        assert prof[tier]["kind"] == "loopback" and prof[tier]["efficiency"] == 1.0
        assert prof[tier]["bw_Bps"] == pytest.approx(2e9, rel=1e-3)
        assert prof[tier]["latency_s"] == pytest.approx(50e-6, rel=1e-3)
    assert all("not measured" in v for v in prof["inter"]["sources"].values())
    assert "measured by concurrency-model calibrate network" in prof["intra"]["sources"]["bw_Bps"]
    with pytest.raises(ValueError, match="cannot fit"):
        network.profile(_synthetic_rows(ranks=1))


def test_a_run_whose_times_do_not_grow_with_the_size_still_gives_a_loadable_profile(tmp_path):
    """A noisy run (every size as fast as the smallest) leaves beta at its bound 0: the profile keeps a finite
    lower bound, the bandwidth that moves the largest message in its whole time, and says so (also when the fitted
    per-byte time is under 1% of that message's time)."""
    rows = _synthetic_rows()
    rows["time_us"] = 100.0
    prof = network.profile(rows)
    big = max(SIZES)
    link = fit_comm.fits(rows)["all_reduce"]
    assert link["beta_s_per_byte"] < 1e-15 and link["bw_lower_bound"]  # beta at (or next to) its bound 0
    assert link["bw_Bps"] == prof["intra"]["bw_Bps"] == pytest.approx(2 * 3 / 4 * big / 100e-6, rel=1e-3)  # 2(P-1)/P n
    assert not fit_comm.fits(_synthetic_rows())["all_reduce"]["bw_lower_bound"]
    assert "a lower bound" in prof["intra"]["sources"]["bw_Bps"]
    cluster = _cluster_module()
    if cluster is not None:
        path = tmp_path / "profile.json"
        path.write_text(json.dumps(prof))
        assert cluster.load_cluster(path).intra.bw == pytest.approx(prof["intra"]["bw_Bps"])


def test_profile_loads_with_the_cluster_loader(tmp_path):
    cluster = _cluster_module()
    if cluster is None:
        pytest.skip("concurrency_model.hardware.clusters.load_cluster not there yet")
    path = tmp_path / "profile.json"
    path.write_text(json.dumps(network.profile(_synthetic_rows())))
    c = cluster.load_cluster(path)
    assert c.name == "cpu-host-gloo" and c.gpus_per_node == 4 and c.device.name == "cpu-host"
    assert c.intra.bw == pytest.approx(2e9, rel=1e-3) and c.intra.latency == pytest.approx(50e-6, rel=1e-3)
    assert c.alpha_beta("inter") == c.alpha_beta("intra")


def test_without_torch_the_command_says_how_to_get_it(monkeypatch, tmp_path):
    monkeypatch.setattr(network.util, "find_spec", lambda name: None)
    with pytest.raises(ValueError, match=r"pip install torch==2\.13\.0"):
        network.calibrate(tmp_path / "x")


# --- measurements, with torch -----------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    """The CLI's quick run, cut to 3 small sizes and few repetitions."""
    if util.find_spec("torch") is None:
        pytest.skip("needs torch")
    out, stdout, stderr = tmp_path_factory.mktemp("net") / "run", io.StringIO(), io.StringIO()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(network, "QUICK_SIZES", TINY_SIZES)
        mp.setattr(network, "QUICK", TINY_PLAN)
        t = time.perf_counter()
        with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
            rc = main(["calibrate", "network", "--quick", "--ranks", "2", "--backend", "gloo", "--out", str(out),
                       "--json"])
        elapsed = time.perf_counter() - t
    assert rc == 0, stderr.getvalue()
    return out, json.loads(stdout.getvalue()), stderr.getvalue(), elapsed


def _snapshot(d):
    return {p.name: p.read_bytes() for p in sorted(d.iterdir())}


@needs_torch
def test_tiny_run_is_fast_and_writes_two_files(tiny_run):
    out, result, stderr, elapsed = tiny_run
    assert elapsed < 20
    assert sorted(p.name for p in out.iterdir()) == ["measurements.csv", "profile.json"]  # no temporary files
    assert {"out", "rows", "fitted", "missing"} <= set(result) and result["out"] == str(out)
    assert result["missing"] == [] and result["stopped"] == "" and result["ranks"] == 2
    assert result["rows"] == len(TINY_SIZES) * (len(network.COLLECTIVES) - len(result["skipped"]))
    assert set(result["fitted"]) == set(network.COLLECTIVES) - set(result["skipped"])
    assert "calibrate network (gloo, 2 ranks)" in stderr  # the progress bar's summary line


@needs_torch
def test_measurements_in_nccl_tests_columns(tiny_run):
    out, result, _, _ = tiny_run
    df = pd.read_csv(out / "measurements.csv")
    assert list(df.columns) == network.COLUMNS
    assert list(df.columns[:10]) == ["collective", "num_ranks", "num_nodes", "size_bytes", "count_elements", "dtype",
                                     "redop", "time_us", "algbw_GBps", "busbw_GBps"]
    assert (df["num_ranks"] == 2).all() and (df["num_nodes"] == 1).all() and (df["backend"] == "gloo").all()
    assert set(df["size_bytes"]) == set(TINY_SIZES) and (df["count_elements"] * 4 == df["size_bytes"]).all()
    assert (df["time_us"] > 0).all() and (df["repetitions"] >= TINY_PLAN["min_reps"]).all()
    assert np.allclose(df["algbw_GBps"], df["size_bytes"] / df["time_us"] / 1e3, rtol=1e-3)
    factor = df["collective"].map(lambda c: network.BUSBW[c](2))
    assert np.allclose(df["busbw_GBps"], df["algbw_GBps"] * factor, rtol=1e-3)
    assert set(df.loc[df["collective"] == "all_reduce", "redop"]) == {"sum"}
    import torch
    assert df["torch_version"].iloc[0] == torch.__version__ and df["host"].notna().all()
    assert df["date"].str.endswith("+00:00").all() and df["python_version"].notna().all()


@needs_torch
def test_profile_of_the_run(tiny_run):
    out, result, _, _ = tiny_run
    prof = json.loads((out / "profile.json").read_text())
    assert prof["name"] == "cpu-host-gloo" and prof["gpus_per_node"] == 2 and prof["nodes"] == 1
    assert prof["intra"]["bw_Bps"] == result["fitted"]["all_reduce"]["bw_Bps"] > 0
    assert prof["intra"]["latency_s"] == result["fitted"]["all_reduce"]["alpha_s"] >= 0
    cluster = _cluster_module()
    if cluster is not None:
        c = cluster.load_cluster(out / "profile.json")
        assert c.gpus_per_node == 2


@needs_torch
def test_no_overwrite_without_force(tiny_run, tmp_path):
    out, _, _, _ = tiny_run
    before = _snapshot(out)
    err = io.StringIO()
    t = time.perf_counter()
    with contextlib.redirect_stderr(err):
        rc = main(["calibrate", "network", "--quick", "--out", str(out)])
    assert rc == 2 and "--force" in err.getvalue() and time.perf_counter() - t < 10  # refused before measuring
    assert _snapshot(out) == before
    copy = tmp_path / "copy"
    copy.mkdir()
    for name, data in before.items():
        (copy / name).write_bytes(data)
    r = network.calibrate(copy, ranks=2, force=True, sizes=[1024, 2048], collectives=["all_reduce"],
                          stream=io.StringIO(), **TINY_PLAN)
    assert r["rows"] == 2 and len(pd.read_csv(copy / "measurements.csv")) == 2
    assert sorted(p.name for p in copy.iterdir()) == ["measurements.csv", "profile.json"]


@needs_torch
def test_failed_sizes_and_a_dead_rank_keep_what_was_measured(tmp_path):
    err = io.StringIO()
    hooks = {"fail": {("all_reduce", 4096)}, "crash": {("all_gather", 4096)}}
    r = network.calibrate(tmp_path / "part", ranks=2, sizes=list(TINY_SIZES), collectives=["all_reduce", "all_gather"],
                          stream=err, hooks=hooks, timeout_s=30, **TINY_PLAN)
    missing = {(m["collective"], m["size_bytes"]) for m in r["missing"]}
    assert missing == {("all_reduce", 4096), ("all_gather", 4096), ("all_gather", 16384)}
    assert "injected" in next(m["error"] for m in r["missing"] if m["collective"] == "all_reduce")
    df = pd.read_csv(tmp_path / "part" / "measurements.csv")
    assert set(zip(df["collective"], df["size_bytes"])) == {("all_reduce", 1024), ("all_reduce", 16384),
                                                              ("all_gather", 1024)}
    assert r["rows"] == 3 and "all_reduce" in r["fitted"] and "all_gather" not in r["fitted"]
    assert "missing all_reduce at 4 KiB" in err.getvalue() and "missing all_gather at 4 KiB, 16 KiB" in err.getvalue()
