"""README's examples run as printed and print what README shows; the pages its claims moved to (docs/) give the
figures they quote. An output block may be abridged: it shows some of the lines, and a line ending in ``...``
stands for every line that starts with what comes before it."""
import contextlib
import io
import re
import shlex
from pathlib import Path

import pytest

from concurrency_model.cli import main
from concurrency_model.report.parts import PARTS

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
LAYOUT = (ROOT / "docs" / "layout-gpt3.md").read_text()
WHAT_IF, WHAT_IF_OUT = re.search(r"## A what-if in Python\n\n```python\n(.*?)```\n\n```text\n(.*?)```", README,
                                 re.S).groups()
# every bash block of README followed by the output it shows (the first two: the install commands)
SHOWN = re.findall(r"```bash\n([^`]*?)```\n\n```text\n(.*?)```", README, re.S)
COMMANDS = [line for block in re.findall(r"```bash\n(.*?)```", README, re.S) for line in block.splitlines()
            if line.startswith("concurrency-model ")]


def shown_in(shown: str, printed: str) -> None:
    """Every line of an abridged output block is a line of the printed output (``...``: a prefix of one)."""
    lines = printed.splitlines()
    for want in shown.rstrip("\n").splitlines():
        if want.endswith("..."):
            assert any(line.startswith(want[:-3].rstrip()) for line in lines), want
        else:
            assert want in lines, want


def test_readme_is_short_and_names_no_file_a_user_lacks():
    assert len(README.encode()) <= 12_000
    assert max(len(line) for line in README.splitlines()) <= 120
    for name in ("DESIGN.md", "shared/", "reference/", "paper-models"):
        assert name not in README, name
    for link in re.findall(r"\]\(([^)#]+)\)", README) + re.findall(r'src="([^"]+)"', README):
        assert (ROOT / link).exists(), link


def test_docs_links_resolve_and_the_thumbnail_is_small():
    for page in (ROOT / "docs").glob("*.md"):
        text = page.read_text()
        for link in re.findall(r"\]\(([^)#]+)\)", text) + re.findall(r'src="([^"]+)"', text):
            assert link.startswith("http") or (page.parent / link).exists(), (page.name, link)
    assert (ROOT / "docs" / "img" / "report.png").stat().st_size < 150_000


def test_the_python_what_if_prints_what_readme_shows():
    scope, out = {}, io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(WHAT_IF, "README.md", "exec"), scope)
    assert out.getvalue() == WHAT_IF_OUT
    e = scope["e"]
    assert round(e.step_time_s, 1) == 20.7
    assert (round(e.step_time_p10_s, 1), round(e.step_time_p90_s, 1)) == (16.8, 27.0)
    assert round(e.breakdown["bubble_s"], 2) == 0.73 and round(e.memory_bytes_per_device / 1e9, 1) == 24.1
    assert {s.name for s in scope["T"].free_symbols} >= {"s_flops", "s_inter", "m"}
    front = scope["front"]
    assert list(front["gpus"]) == [512, 1024, 2048]
    assert (front["tensor"] == 4).all() and list(front["pipeline"]) == [8, 8, 8] and (front["inter_bw"] == 2).all()


@pytest.mark.parametrize("command,shown", [(c, s) for c, s in SHOWN if c.startswith("concurrency-model")],
                         ids=lambda x: x[:60] if x.startswith("concurrency") else "")
def test_each_shown_output_is_what_the_command_prints(command, shown, capsys):
    assert main(shlex.split(command)[1:]) == 0
    shown_in(shown, capsys.readouterr().out)


@pytest.mark.parametrize("line", COMMANDS)
def test_each_command_line_runs(line, capsys):
    argv = shlex.split(line.split("  #")[0])
    assert argv[0] == "concurrency-model"
    assert main(argv[1:]) == 0, capsys.readouterr().err


def test_the_install_blocks_and_their_outputs():
    """The two commands at the top, and the report's output lines in the form the report command prints them."""
    (report, report_out), (tests, tests_out) = SHOWN[:2]
    assert report.strip() == "pip install -e . && concurrency-model report"
    assert tests.strip() == ('pip install torch==2.13.0 && pip install -e ".[test,torch,onnx]" && '
                             'python -m pytest -n auto --maxprocesses 4')
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == tests.strip().split(" && ")[-1]  # CI runs exactly README's test command
    pattern = r"report: (\d+)/\1 in ([\d.]+) s\nwrote reports/report.html \(\d+ figures in (\d+) s\)\n"
    steps, wall = re.fullmatch(pattern, report_out).group(1, 2)
    assert steps == str(len(PARTS) + 1)  # concurrency_model.report: its parts and the page
    assert f"that run took {float(wall):.0f} s of wall time" in README
    assert re.fullmatch(r"\d+ passed(, \d+ skipped)? in [\d.]+s \(0:\d\d:\d\d\)\n", tests_out)


ACCURACY = dict(re.findall(r"^\| ([^|]+?) \| ([\d.]+)% \| <= \d+% \| (?:met|missed) \|$", README, re.M))


@pytest.mark.parametrize("row,dataset", [("Megatron-LM README 2021 (TFLOP/s per GPU)", "megatron-2021"),
                                         ("Megatron-Bridge, dense Llama", "megatron-bridge")])
def test_accuracy_rows_are_validate_s_figures(row, dataset):
    """Two of the table's rows, the fast ones, against the validation's quick median (the others:
    ``python benchmarks/accuracy.py --quick --markdown``, minutes)."""
    from concurrency_model.validate.registry import summarize, validate
    s = summarize(validate(dataset, workers=1))[0]
    assert f"{100 * s['median_ape']:.1f}" == ACCURACY[row]


def test_accuracy_rows_say_met_by_their_target():
    rows = re.findall(r"^\| ([^|]+?) \| ([\d.]+)% (?:\([^)]*\) )?\| (?:mean )?<= (\d+)% (?:each )?\| (met|missed) \|$",
                      README, re.M)
    assert len(rows) == 14
    for name, value, limit, verdict in rows:
        assert (float(value) <= float(limit)) == (verdict == "met"), name


def test_the_layout_choice_for_gpt3_on_1024_a100s():
    """docs/layout-gpt3.md: the pick, its runner-up and what separates them, the fastest ZeRO-3, and the
    Narayanan ZeRO-3 rows under DeepSpeed 0.3."""
    from concurrency_model.cli import main as cli
    from concurrency_model.sweep import sweep
    from concurrency_model.validate.training import narayanan_flops, narayanan_rows, scenario_for
    from concurrency_model import estimate
    line = re.search(r"```bash\n(.*?)\n```", LAYOUT, re.S).group(1)
    assert cli(shlex.split(line)[1:] + ["--json"]) == 0
    r = sweep({"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 1536},
               "training": {"dtype": "bf16"}}, 1024)
    out = r.to_dict(top=1)
    best, ru = out["best"][0], out["runner_up"]
    p = best["parallel"]
    assert (p["data"], p["tensor"], p["pipeline"], p["interleave"], p["sequence_parallel"]) == (32, 4, 8, 4, True)
    assert (best["training"]["zero_stage"], best["training"]["recompute"]) == (1, "selective")
    assert round(best["step_time_s"], 2) == 18.83 and round(best["memory_bytes_per_device"] / 1e9, 1) == 50.8
    assert (round(best["step_time_p10_s"], 1), round(best["step_time_p90_s"], 1)) == (15.5, 24.5)
    q = ru["parallel"]
    assert (q["data"], q["tensor"], q["pipeline"], q["interleave"]) == (64, 4, 4, 4)
    assert round(ru["step_time_s"], 1) == 19.2
    assert round(ru["memory_bytes_per_device"] / 1e9, 1) == 71.9
    sep = {x["part"]: round(x["runner_up_minus_best_s"], 2) for x in ru["separates"]}
    assert (sep["data_parallel_exposed_s"], sep["overlap_interference_s"], sep["backward_s"], sep["bubble_s"]) == (
        0.47, 0.19, -0.13, -0.09)
    z3 = r.frame[r.frame["zero_stage"] == 3].nsmallest(1, "step_time_s").iloc[0]
    assert (z3["data"], z3["tensor"], round(z3["step_time_s"], 1)) == (256, 4, 35.6)
    e3 = estimate(r.scenario(z3))
    assert round(e3.breakdown["data_parallel_exposed_s"], 1) == 5.5
    rows = narayanan_rows()
    zero3 = rows[(rows["zero_stage"] == 3) & (rows["layers"] == 96)]
    tflops = [round(float(narayanan_flops(x["global_batch"], x["seq"], x["layers"], x["hidden"]))
                    / estimate(scenario_for(x)).step_time_s / x["gpus"] / 1e12) for _, x in zero3.iterrows()]
    assert tflops == [154, 96, 41] and list(zero3["measured_tflops"]) == [144, 88, 44]
    assert ru["memory_at_risk"] and round(ru["memory_p90_bytes_per_device"] / 1e9, 1) == 83.2
    for figure in ("18.83 s a\nstep", "15.5-24.5 s", "50.8 GB", "19.2 s", "71.9 GB", "83.2 GB", "+0.47 s", "+0.19 s",
                   "-0.13 s", "-0.09 s", "35.6 s", "5.5 s", "154 / 96 / 41", "144 / 88 / 44"):
        assert figure in LAYOUT, figure
    # README states the pick, its runner-up and why, and the ZeRO-3 order (issue 35)
    said = " ".join(README.split())
    for figure in ("data 32 x tensor 4 x pipeline 8", "18.83 s a step and 50.8 GB", "data 64 x tensor 4 x pipeline 4",
                   "19.2 s", "+0.47 s", "71.9 GB (upper end 83.2 GB) it is at risk", "ZeRO-3 takes 35.6 s"):
        assert figure in said, figure


def test_the_runtime_choice_for_gpt3_on_1024_a100s():
    """docs/layout-gpt3.md "Which runtime": the fastest layout under each of three runtimes, one sweep."""
    from concurrency_model.cli import main as cli
    from concurrency_model.sweep import sweep
    line = next(b for b in re.findall(r"```bash\n(.*?)\n```", LAYOUT, re.S) if '"framework": [' in b)
    assert cli(shlex.split(line)[1:] + ["--json"]) == 0
    r = sweep({"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 1536},
               "training": {"dtype": "bf16", "framework": ["megatron", "deepspeed", "fsdp2"]}}, 1024)
    per = {b["training"]["framework"]: b for b in r.to_dict(top=1)["per_framework"]}
    assert list(per) == ["megatron", "deepspeed", "fsdp2"]
    got = {k: (b["parallel"]["data"], b["parallel"]["tensor"], b["parallel"]["pipeline"], b["parallel"]["schedule"],
               b["training"]["recompute"], round(b["step_time_s"], 2)) for k, b in per.items()}
    assert got == {"megatron": (32, 4, 8, "interleaved", "selective", 18.83),
                   "deepspeed": (16, 8, 8, "1f1b", "none", 20.53), "fsdp2": (8, 8, 16, "1f1b", "none", 21.02)}
    assert per["fsdp2"]["training"]["zero_stage"] == 0  # FSDP has no ZeRO-1 mode
    parts = {k: r.estimate_of(next(row for _, row in r.fastest_per_runtime().iterrows() if row["framework"] == k))
             .breakdown for k in per}
    assert round(per["fsdp2"]["memory_bytes_per_device"] / 1e9, 1) == 66.7
    assert (round(parts["fsdp2"]["tensor_parallel_comm_s"], 1), round(parts["megatron"]["tensor_parallel_comm_s"], 2)) \
        == (2.1, 0.86)
    assert (round(parts["deepspeed"]["bubble_s"], 2), round(parts["megatron"]["bubble_s"], 2)) == (1.32, 0.62)
    assert round(parts["deepspeed"]["data_parallel_exposed_s"], 2) == 0.48
    assert (round(parts["deepspeed"]["pipeline_p2p_s"], 2), round(parts["megatron"]["pipeline_p2p_s"], 2)) == (0.11, 0.03)
    assert parts["deepspeed"]["overlap_interference_s"] == 0.0  # nothing overlaps under its pipeline engine
    for figure in ("18.83 s", "21.02 s", "20.53 s", "66.7 GB", "2.1 s", "0.86 s", "1.32 s", "0.62 s", "0.48 s", "0.11 s",
                   "0.03 s"):
        assert figure in LAYOUT.split("## Which runtime")[1], figure


def test_serving_page_quotes_the_sweep_s_answer():
    """docs/serving.md's Llama-2-7B fleet for 100 requests/s within 20 ms a token is README's command's answer."""
    page = (ROOT / "docs" / "serving.md").read_text()
    line = next(c for c in COMMANDS if "--load 100 --max-decode-ms 20" in c)
    out = dict(SHOWN)[line + "\n"]
    assert "8 = 8 replicas of tensor 1, batch 32 each" in out and "2,524.6 ms of it waiting" in out
    assert "takes 8 H100s, 8 replicas of tensor 1 at batch 32" in page and "2,524.6 ms" in page
    assert "2,576.5 ms" in page and "2,576.5 ms" in out
