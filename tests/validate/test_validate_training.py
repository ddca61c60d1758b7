"""Published training iterations against ``estimate``: row mapping, Eq. (3), and an error ratchet."""
import pandas as pd
import pytest

from concurrency_model.validate import training as vt

# Mean APE (%) on the subset below when this test was written; a change may not make any worse by more
# than MARGIN percentage points. Lower these numbers when the model improves.
CURRENT_MEAN_APE = {"vtrain_single": 6.4, "vtrain_multi": 4.6, "megatron_2020": 3.4, "narayanan_table2": 4.6}
MARGIN = 3.0


@pytest.fixture(scope="module")
def subset():
    """Deterministic: every 48th held-out (odd) vTrain single-node row (15), the first 3 of every 27th multi-node row,
    the 8 Megatron README 2020 DGX-A100 rows, Narayanan Table 2 PTD 175B on 384 GPUs (about 10 s)."""
    meg = vt.megatron_rows()
    df = pd.concat([vt.sample(vt.vtrain_held_out_rows(), 48), vt.sample(vt.vtrain_rows("multi"), 27).iloc[:3],
                    meg[meg["label"].str.contains("dgxa100")], vt.narayanan_rows().iloc[[6]]], ignore_index=True)
    return vt.evaluate(df, workers=1)


def test_error_does_not_get_worse(subset):
    assert (subset["status"] == "ok").all()
    s = vt.summary(subset)
    for name, current in CURRENT_MEAN_APE.items():
        assert s[name]["mean_ape"] <= current + MARGIN, (name, s[name]["mean_ape"])


def test_vtrain_single_row_mapped_by_hand():
    # file line 2: "2,16,8,1024,16,24,1024,1,1,2,372.160408"
    r = vt.vtrain_rows("single").iloc[0]
    assert r["source_row"] == 2 and r["measured_time_s"] == pytest.approx(0.372160408)
    assert vt.scenario_for(r) == {
        "model": {"kind": "gpt", "layers": 24, "hidden": 1024, "heads": 16, "seq_len": 1024, "vocab": 51200},
        "cluster": "dgx-a100",
        "parallel": {"data": 1, "tensor": 1, "pipeline": 2, "microbatch_size": 8, "global_batch": 16,
                     "schedule": "1f1b", "stage_split": "layers"},   # Megatron-DeepSpeed's even split of the layers
        "training": {"dtype": "fp16", "recompute": "full", "optimizer": "adam", "zero_stage": 0, "overlap": False,
                     "framework": "megatron"}}  # Megatron's local DDP: no overlap, one all-reduce of the buffer


def test_narayanan_ptd_row_mapped_by_hand():
    # PTD 175B on 384 GPUs, tp=8 pp=12 -> data 4, microbatch 1, batch 1536, full recompute
    r = vt.narayanan_rows().iloc[6]
    sc = vt.scenario_for(r)
    assert sc["model"] == {"kind": "gpt", "layers": 96, "hidden": 12288, "heads": 96, "seq_len": 2048,
                           "vocab": 51200}
    assert {k: sc["parallel"][k] for k in ("data", "tensor", "pipeline", "microbatch_size", "global_batch",
                                           "stage_split")} == \
        {"data": 4, "tensor": 8, "pipeline": 12, "microbatch_size": 1, "global_batch": 1536, "stage_split": "layers"}
    assert sc["training"]["recompute"] == "full" and r["measured_tflops"] == 153


def test_eq3_reproduces_published_tflops():
    # Megatron README 2020: 1B (24 x 1920, s 1024, V 51200) at batch 16 on one A100, 1076 ms -> 149.8 TFLOP/s
    assert vt.narayanan_flops(16, 1024, 24, 1920, 51200) / 1.076 / 1e12 == pytest.approx(149.8, abs=0.1)


def test_refused_and_unmappable_rows_are_counted():
    row = vt.vtrain_rows("multi").iloc[[0]].assign(recompute="none")  # 3.6B, data 64, microbatch 8: 273 GB
    meg = vt.megatron_rows()
    bad = meg[meg["label"].str.startswith("2020apr_readme_text")]
    res = vt.evaluate(pd.concat([row, bad], ignore_index=True), workers=1)
    s = vt.summary(res)
    assert s["vtrain_multi"]["refused"] == 1 and res["reason"].iloc[0].startswith("memory")
    assert s["megatron_2020"]["unmappable"] == 3 and s["megatron_2020"]["predicted"] == 0


def test_vtrain_multi_nodes_have_the_800_gbps_their_configurations_state():
    """vTrain's multi-node rows run on nodes of 800 Gb/s (4 HDR ports of 25 GB/s), half the dgx-a100 preset's; a
    row whose tensor group spans two nodes (tensor 16) is then slower by its cross-node all-reduces only."""
    from concurrency_model import estimate
    rows = vt.vtrain_rows("multi")
    c = rows["cluster"].iloc[0]
    assert c["nics_per_node"] == 4 and c["inter"]["bw_Bps"] == 25e9 and c["gpus_per_node"] == 8
    r = rows[rows["tensor"] == 16].iloc[0]
    slow = estimate(vt.scenario_for(r))
    fast = estimate(vt.scenario_for({**r.to_dict(), "cluster": "dgx-a100"}))
    assert slow.breakdown["tensor_parallel_comm_s"] > fast.breakdown["tensor_parallel_comm_s"]
    assert slow.breakdown["forward_s"] == pytest.approx(fast.breakdown["forward_s"], rel=1e-12)


def test_error_table_groups_the_predicted_rows():
    # hand counts: rows not predicted are left out; shares add to 1; the largest share first
    import pandas as pd
    from concurrency_model.validate.training import error_table
    res = pd.DataFrame({"status": ["ok", "ok", "ok", "refused", "ok"], "tensor": [1, 2, 2, 2, 1],
                        "microbatch": [1, 1, 2, 2, 1], "ape": [1.0, 6.0, 3.0, 99.0, 2.0],
                        "signed_error_pct": [1.0, -6.0, 3.0, 99.0, -2.0]})
    t = error_table(res, ["tensor", "microbatch"])
    # ties (0.25) keep the groups' order
    assert t[["tensor", "microbatch", "rows"]].values.tolist() == [[2, 1, 1], [1, 1, 2], [2, 2, 1]]
    assert t["ape_share"].tolist() == pytest.approx([0.5, 0.25, 0.25])
    assert t.loc[1, "mean_ape"] == pytest.approx(1.5) and t.loc[1, "median_signed_pct"] == pytest.approx(-0.5)
    assert error_table(res, "tensor")["rows"].tolist() == [2, 2]
