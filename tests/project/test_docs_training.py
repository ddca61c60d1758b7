"""docs/training.md's example figures are what the toolkit computes today: each example run through the Python API
(or the CLI line the page shows), its figure rounded as the page rounds it and compared with a literal, and the
literal found in the page (as ``test_readme.test_the_layout_choice_for_gpt3_on_1024_a100s`` does for
docs/layout-gpt3.md). The validation tables' figures come from benchmarks of minutes and are not re-run here;
the Qwen3 dispatcher figures are the four estimates of ``benchmarks/moe_dispatch.py``'s controlled pair alone."""
import contextlib
import importlib.util
import io
import json
import re
import shlex
from pathlib import Path

import pytest

from concurrency_model import estimate
from concurrency_model.cli import main as cli
from concurrency_model.convergence.penalties import OPTIONS, compression_penalty
from concurrency_model.report.cnn_parallel import trick_frame
from concurrency_model.report.minibatch import regions_frame
from concurrency_model.validate.training import narayanan_flops

ROOT = Path(__file__).parents[2]
PAGE = (ROOT / "docs" / "training.md").read_text()


def in_page(*figures: str) -> None:
    for figure in figures:
        assert figure in PAGE, figure


def test_the_gpt3_estimate_quotes_its_figures():
    """The page's gpt3.json (its bash block, as written) on 64 A100s: step, band, TFLOP/s, memory."""
    scenario = json.loads(re.search(r"cat > gpt3.json <<'JSON'\n(.*?)\nJSON\n", PAGE, re.S).group(1))
    e = estimate(scenario)
    assert round(e.step_time_s, 1) == 19.7
    assert (round(e.step_time_p10_s, 1), round(e.step_time_p90_s, 1)) == (16.0, 25.6)
    assert round(e.achieved_flops_per_device / 1e12) == 112
    # counting the recompute: Narayanan et al. 2021 Eq. (3), the model FLOPs plus the recomputed forward pass
    # (GPT-3 175B: 96 layers of hidden 12,288, sequence 2,048; Brown et al. 2020 Table 2.1)
    hardware = float(narayanan_flops(64, 2048, 96, 12288)) / e.step_time_s / e.scenario.gpus
    assert round(hardware / 1e12) == 149
    assert round(e.memory_bytes_per_device / 1e9, 1) == 56.6
    in_page("19.7 s per step (80% band 16.0-25.6 s), 112 TFLOP/s of model\nFLOPs per GPU (149 counting the recompute), "
            "56.6 GB per GPU.")


def test_resnet50_on_256_v100s_places_its_batches_in_the_regions():
    """The batch-region example: report.minibatch's ResNet-50 on 256 V100s."""
    f = regions_frame(batches=(2048, 4096, 7168, 7680, 8192, 16384), gpus=(256,)).set_index("global_batch")
    assert round(100 * f.loc[2048, "device_utilization"]) == 23
    assert f["region"].tolist() == ["A", "A", "A", "B", "B", "C"]
    assert round(100 * f.loc[8192, "device_utilization"]) == 86
    in_page("V100s: 23% of a GPU's images/s at 2k images a step, region A up to 7k, B from 7.5k to the 8k ceiling "
            "(86% at\n8k), C beyond)")


def mixtral(expert: int, capacity_factor: float | None = None):
    model = {"hf_config": "mixtral-8x7b", "seq_len": 4096}
    if capacity_factor is not None:
        model["capacity_factor"] = capacity_factor
    return estimate({"model": model, "cluster": "dgx-h100",
                     "parallel": {"data": 16, "tensor": 4, "pipeline": 2, "expert": expert, "global_batch": 256},
                     "training": {"recompute": "full"}})


def test_mixtral_expert_groups_quote_their_memory_and_steps():
    """Mixtral 8x7B on 128 H100 (data 16, tensor 4, pipeline 2, global batch 256 as on 2026-12-03, full recompute):
    refused without expert parallelism, then 2 and 8 expert groups, then 8 with capacity buffers."""
    with pytest.raises(ValueError, match=r"memory: 117\.9 GB per device exceeds 80\.0 GB"):
        mixtral(1)
    two, eight, padded = mixtral(2), mixtral(8), mixtral(8, 1.25)
    assert (round(two.memory_bytes_per_device / 1e9), round(two.step_time_s, 2)) == (61, 3.52)
    assert (round(eight.memory_bytes_per_device / 1e9), round(eight.step_time_s, 2)) == (19, 3.66)
    # 8 groups span data replicas on two nodes: their all-to-alls leave NVLink
    assert eight.breakdown["expert_parallel_comm_s"] > 10 * two.breakdown["expert_parallel_comm_s"]
    assert round(padded.step_time_s, 2) == 4.19
    assert round(100 * (padded.step_time_s / eight.step_time_s - 1)) == 15
    in_page("(data 16, tensor 4, pipeline 2, global batch 256, full recompute) needs 117.9 GB per GPU without it "
            "(refused), 61 GB\nwith 2 expert groups (3.52 s a step) and 19 GB with 8 (3.66 s:",
            "the 8-group step takes 4.19 s (+15%:")


def test_qwen3_dispatchers_are_the_benchmark_s_controlled_pair():
    """benchmarks/moe_dispatch.py's skill_pair (four estimates; its MoE-row medians, the slow part, not run)."""
    spec = importlib.util.spec_from_file_location("moe_dispatch", ROOT / "benchmarks" / "moe_dispatch.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    pair = bench.skill_pair().set_index("case")
    step = {case: round(float(s), 1) for case, s in pair["predicted_step_s"].items()}
    assert (step["alltoall, overlap off"], step["hybridep, overlap off"], step["hybridep, overlap on"]) == (
        36.5, 22.9, 20.8)
    measured = pair["measured_step_s"]
    assert (round(measured["hybridep, overlap off"], 1), round(measured["hybridep, overlap on"], 1)) == (24.7, 21.0)
    in_page("takes 36.5 s a step with `alltoall`, 22.9 s with `hybridep` and 20.8 s with the overlap\ntoo; "
            "Megatron-Bridge's skill page measured 24.7 s and 21.0 s for the last two")


def test_synchronous_batch_norm_of_resnet50_on_one_node():
    e = estimate({"model": "resnet50", "cluster": "dgx-a100", "parallel": {"data": 8, "microbatch_size": 32},
                  "training": {"dtype": "fp32", "batch_norm": "sync"}})
    assert int((e.layers()["kind"] == "batch_norm").sum()) == 53
    assert round(1e3 * e.breakdown["batch_norm_sync_s"], 2) == 2.08
    in_page("53 layers,\n2.08 ms a step at fp32, microbatch 32")


def test_vgg16_channel_splits_on_one_node():
    """VGG16 on 8 A100 (fp16, global batch 256, microbatch 32): data 8, data 4 x tensor 2, tensor 8."""
    got = []
    for data, tensor in ((8, 1), (4, 2), (1, 8)):
        e = estimate({"model": "vgg16", "cluster": "dgx-a100", "training": {"dtype": "fp16"},
                      "parallel": {"data": data, "tensor": tensor, "microbatch_size": 32, "global_batch": 256}})
        got.append((round(1e3 * e.step_time_s, 1), round(e.memory_bytes_per_device / 1e9, 1)))
    assert got == [(21.4, 4.5), (29.9, 2.9), (97.0, 1.5)]
    in_page("data 8 takes 21.4 ms a step and 4.5 GB per GPU, data 4 x tensor 2 29.9 ms and 2.9 GB, tensor 8\n"
            "97.0 ms and 1.5 GB")


def test_alexnet_one_weird_trick_speedups():
    """Notebook 04 §8's figure: AlexNet on 8 GPUs of report.cnn_parallel.pcie_box, speedups over one GPU."""
    row = trick_frame(gpus=(8,)).iloc[0]
    speedups = tuple(round(float(row[k]), 1) for k in ("one weird trick", "data parallel", "model parallel"))
    assert speedups == (6.8, 4.9, 1.9)
    in_page("6.8x one GPU's throughput against 4.9x data-parallel and 1.9x model-parallel")


def test_the_time_to_target_block_is_what_converge_prints():
    """The converge command the page names prints the page's block; the paragraph after it quotes its rows."""
    line = re.search(r"`(converge --scenario gpt3-175b-3d .*?)`", PAGE, re.S).group(1)
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert cli(shlex.split(line.replace("\n", " "))) == 0
    printed = out.getvalue()
    assert re.search(r"```text\n(time to gpt3's target.*?)```", PAGE, re.S).group(1) == printed
    rows = {(int(b.replace(",", "")), int(g.replace(",", ""))): (float(step), float(sps), float(hours))
            for b, g, step, sps, hours in re.findall(
                r"^ +([\d,]+) +([\d,]+) +\S+ +([\d.]+) +([\d.]+) +[\d,]+ +([\d.]+) ", printed, re.M)}
    assert len(rows) == 15
    assert rows[1536, 2048][0::2] == (10.09, 1.06)
    assert (rows[6144, 2048][2], rows[3072, 2048][2]) == (1.12, 1.01)
    assert round(100 * (rows[6144, 2048][1] / rows[3072, 2048][1] - 1)) == 4
    tokens = re.search(r"needs ([\d.]+)x the tokens", printed).group(1)
    assert round(100 * (float(tokens) - 1)) == 16
    in_page("(1,536 on 2,048 GPUs, 10.1 s a step) reaches the target in\n1.06 h; swept over the batch, the throughput "
            "pick is 6,144 (1.12 h: 4% more samples/s, 16% more tokens to the\ntarget) and the time-to-target pick "
            "3,072 (1.01 h).")


def test_qsgd_variance_factor():
    assert (OPTIONS["bucket_size"], OPTIONS["levels"]) == (512, 7)
    assert round(compression_penalty("qsgd", 8)["omega"], 2) == 3.23
    in_page("(512 values, 7 levels: omega 3.23;")
