"""README's examples run as printed, and give the figures their comments quote."""
import re
import shlex
from pathlib import Path

import pytest

from concurrency_model.cli import main

README = (Path(__file__).parents[1] / "README.md").read_text()
WHAT_IF = re.search(r"## A what-if in ten lines\n\n```python\n(.*?)```", README, re.S).group(1)
COMMANDS = re.search(r"The same from the command line.*?```bash\n(.*?)```", README, re.S).group(1)


def test_the_python_what_if_and_its_comments():
    scope = {}
    exec(compile(WHAT_IF, "README.md", "exec"), scope)
    e = scope["e"]
    assert round(e.step_time_s, 1) == 20.7 and (round(e.step_time_p10_s, 1), round(e.step_time_p90_s, 1)) == (16.8, 26.9)
    assert round(e.breakdown["bubble_s"], 2) == 0.77 and round(e.memory_bytes_per_device / 1e9, 1) == 23.7
    assert {s.name for s in scope["T"].free_symbols} >= {"s_flops", "s_inter", "m"}
    assert list(scope["r"].pareto("gpus")["gpus"]) == [512, 1024, 2048]


@pytest.mark.parametrize("line", [line for line in COMMANDS.splitlines() if line.strip()])
def test_each_command_line_runs(line, capsys):
    argv = shlex.split(line.split("  #")[0])
    assert argv[0] == "concurrency-model"
    assert main(argv[1:]) == 0, capsys.readouterr().err


def test_the_layout_choice_for_gpt3_on_1024_a100s():
    """README "Choosing a layout": the pick, its runner-up and what separates them, the fastest ZeRO-3, and the
    Narayanan ZeRO-3 rows under DeepSpeed 0.3."""
    from concurrency_model.cli import main as cli
    from concurrency_model.sweep import sweep
    from concurrency_model.validate.training import narayanan_flops, narayanan_rows, scenario_for
    from concurrency_model import estimate
    line = re.search(r"## Choosing a layout.*?```bash\n(.*?)\n```", README, re.S).group(1)
    assert cli(shlex.split(line)[1:] + ["--json"]) == 0
    r = sweep({"model": "gpt3-175b", "cluster": "dgx-a100", "parallel": {"global_batch": 1536},
               "training": {"dtype": "bf16"}}, 1024)
    out = r.to_dict(top=1)
    best, ru = out["best"][0], out["runner_up"]
    p = best["parallel"]
    assert (p["data"], p["tensor"], p["pipeline"], p["interleave"], p["sequence_parallel"]) == (32, 4, 8, 4, True)
    assert (best["training"]["zero_stage"], best["training"]["recompute"]) == (1, "selective")
    assert round(best["step_time_s"], 2) == 18.64 and round(best["memory_bytes_per_device"] / 1e9, 1) == 50.2
    assert (round(best["step_time_p10_s"], 1), round(best["step_time_p90_s"], 1)) == (15.3, 24.3)
    q = ru["parallel"]
    assert (q["data"], q["tensor"], q["pipeline"], q["interleave"]) == (64, 4, 4, 4)
    assert round(ru["step_time_s"], 1) == 18.8
    assert round(ru["memory_bytes_per_device"] / 1e9, 1) == 71.4
    sep = {x["part"]: round(x["runner_up_minus_best_s"], 2) for x in ru["separates"]}
    assert (sep["data_parallel_exposed_s"], sep["backward_s"], sep["bubble_s"]) == (0.47, -0.13, -0.10)
    z3 = r.frame[r.frame["zero_stage"] == 3].nsmallest(1, "step_time_s").iloc[0]
    assert (z3["data"], z3["tensor"], round(z3["step_time_s"], 1)) == (128, 8, 21.9)
    e3 = estimate(r.scenario(z3))
    assert round(e3.breakdown["data_parallel_exposed_s"], 1) == 4.2
    rows = narayanan_rows()
    zero3 = rows[(rows["zero_stage"] == 3) & (rows["layers"] == 96)]
    tflops = [round(float(narayanan_flops(x["global_batch"], x["seq"], x["layers"], x["hidden"]))
                    / estimate(scenario_for(x)).step_time_s / x["gpus"] / 1e12) for _, x in zero3.iterrows()]
    assert tflops == [166, 110, 51] and list(zero3["measured_tflops"]) == [144, 88, 44]
