import json
import subprocess
import sys

from concurrency_model.cli import main


def run(*args):
    return subprocess.run([sys.executable, "-m", "concurrency_model", *args], capture_output=True, text=True)


def test_workdepth_json_keys_and_values(capsys):
    assert main(["workdepth", "--model", "resnet50", "--batch", "2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    for key in ("model", "batch", "params", "forward_macs", "forward_flop", "training_flop", "work", "depth",
                "average_parallelism", "layers"):
        assert key in out
    assert out["params"] == 25_557_032 and out["batch"] == 2
    assert abs(out["forward_macs"] / 2 / 4.09e9 - 1) < 0.03
    assert out["work"] == out["forward_flop"]
    assert out["average_parallelism"] == out["work"] / out["depth"]
    assert set(out["layers"][0]) >= {"name", "op", "params", "forward_flop", "depth"}
    assert sum(r["params"] for r in out["layers"]) == out["params"]


def test_workdepth_training_pass_and_table(capsys):
    assert main(["workdepth", "--model", "lenet5", "--pass", "training", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["work"] == out["training_flop"] > out["forward_flop"]
    assert main(["workdepth", "--model", "lenet5"]) == 0
    text = capsys.readouterr().out
    assert "parameters" in text and "61,706" in text and "c3" in text


def test_bad_input_exits_2_with_one_line():
    for args in (["workdepth", "--model", "no-such-network"], ["workdepth", "--model", "resnet50", "--batch", "0"],
                 ["workdepth", "--model", '{"kind": "gpt", "layers": 2, "hidden": 64, "heads": 5}'],
                 ["workdepth", "--model", "{not json"],
                 ["workdepth", "--model", "resnet50", "--image-size", "99999999999999999999"]):  # OverflowError
        p = run(*args)
        assert p.returncode == 2, args
        assert "Traceback" not in p.stderr
        assert p.stderr.strip().splitlines()[-1].startswith("usage") is False


def test_workdepth_prints_table6_in_symbols_and_brent_bounds(capsys):
    assert main(["workdepth", "--table6", "--json"]) == 0
    t = json.loads(capsys.readouterr().out)["table6"]
    assert t["direct"]["work"] == "C_in*C_out*K_x*K_y*N*(H - K_y + 1)*(-K_x + W + 1)"
    assert t["fft"]["depth"] == "CeilLog2(C_in) + 2*CeilLog2(H*W)"
    assert set(t) == {"direct", "im2col", "fft", "winograd"}
    # Brent (paper §2.5): max(W/p, D) <= T_p <= W/p + D, here for lenet5's forward pass on 10 processors
    assert main(["workdepth", "--model", "lenet5", "--brent", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    w, d = out["work"], out["depth"]
    assert out["brent"] == {"p": 10, "lower": max(w / 10, d), "upper": w / 10 + d}
    assert main(["workdepth", "--model", "lenet5", "--brent", "10"]) == 0
    assert "Brent, p = 10:" in capsys.readouterr().out


def test_workdepth_without_a_model_is_one_line_exit_2(capsys):
    assert main(["workdepth"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["concurrency-model workdepth: error: --model: required (or give --table6 alone for the "
                   "paper's Table 6)"]
