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
    assert round(e.step_time_s, 1) == 20.3 and (round(e.step_time_p10_s, 1), round(e.step_time_p90_s, 1)) == (16.5, 26.6)
    assert round(e.breakdown["bubble_s"], 2) == 0.76 and round(e.memory_bytes_per_device / 1e9, 1) == 22.7
    assert {s.name for s in scope["T"].free_symbols} >= {"s_flops", "s_inter", "m"}
    assert list(scope["r"].pareto("gpus")["gpus"]) == [512, 1024, 2048]


@pytest.mark.parametrize("line", [line for line in COMMANDS.splitlines() if line.strip()])
def test_each_command_line_runs(line, capsys):
    argv = shlex.split(line.split("  #")[0])
    assert argv[0] == "concurrency-model"
    assert main(argv[1:]) == 0, capsys.readouterr().err
