"""from_onnx: the test set of test_frontends_torch exported with torch.onnx (the TorchScript exporter,
which needs no extra package) agrees with from_torch within 1% (forward FLOP; MACs and parameters
exactly), files without shapes, inputs without static shapes, attention and GELU patterns, unknown
operators."""
import warnings

import pytest

torch = pytest.importorskip("torch")
onnx = pytest.importorskip("onnx")

import numpy as np  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from test_frontends_torch import MODELS, Llama, inputs  # noqa: E402

from concurrency_model import from_onnx, from_torch, get_model  # noqa: E402
from concurrency_model.frontends.common import UnknownOperatorWarning  # noqa: E402
from concurrency_model.training.estimate import estimate  # noqa: E402


class ManualRMSNorm(torch.nn.Module):
    """RMSNorm written out (the TorchScript exporter has no aten::rms_norm)."""

    def __init__(self, d):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.ones(d))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * self.weight


ONNX_MODELS = {**MODELS, "llama": (lambda: Llama(rms_norm=ManualRMSNorm), MODELS["llama"][1])}


def export(name, path, fold=True, dynamic=False):
    make, shapes = ONNX_MODELS[name]
    torch.manual_seed(0)
    m = make()
    with torch.no_grad():  # distinct values: the exporter merges equal initializers (e.g. fresh LayerNorms)
        for p in m.parameters():
            p.normal_()
    xs = inputs(shapes)
    kw = {"input_names": ["x"], "dynamic_axes": {"x": {0: "batch"}}} if dynamic else {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(m, xs, str(path), dynamo=False, opset_version=17, do_constant_folding=fold,
                          training=torch.onnx.TrainingMode.TRAINING, **kw)
    return m, xs


@pytest.mark.parametrize("name", sorted(ONNX_MODELS))
def test_onnx_agrees_with_torch_within_1pct(name, tmp_path):
    path = tmp_path / f"{name}.onnx"
    m, xs = export(name, path)
    gt = from_torch(m, xs)
    with warnings.catch_warnings():
        warnings.simplefilter("error", UnknownOperatorWarning)
        go = from_onnx(path)
    assert abs(float(go.forward_flop() / gt.forward_flop()) - 1) < 0.01, name
    assert go.forward_macs() == gt.forward_macs()
    assert go.params == gt.params  # the tied GPT output layer too (a folded transposed copy is recognised)
    assert go.batch == gt.batch == 2


@pytest.mark.parametrize("name", ["gpt", "lstm"])
def test_unfolded_export_weights_counted_once(name, tmp_path):
    """Without constant folding the exporter reorders LSTM gates and transposes the tied weight in the
    graph: weights made of weights still count once."""
    path = tmp_path / f"{name}.onnx"
    m, xs = export(name, path, fold=False)
    go = from_onnx(path)
    assert go.params == sum(p.numel() for p in m.parameters())
    assert go.forward_macs() == from_torch(m, xs).forward_macs()


def test_attention_and_gelu_patterns_become_nodes(tmp_path):
    export("gpt", tmp_path / "gpt.onnx")
    g = from_onnx(tmp_path / "gpt.onnx")
    att = [n for n in g.layers() if n.kind == "attention"]
    assert len(att) == 2 and att[0].attrs["heads"] == 4 and att[0].attrs["seq"] == 16
    assert att[0].attrs["causal"] is True  # the exported is_causal mask (Trilu) is recognised
    export("encoder", tmp_path / "enc.onnx")
    e = from_onnx(tmp_path / "enc.onnx")
    assert [n.attrs["causal"] for n in e.layers() if n.kind == "attention"] == [False, False]
    assert sum(n.kind == "gelu" for n in e.layers()) == 2  # x/√2, erf, +1, ×x, ×0.5 counted as one GELU
    assert sum(n.kind == "dropout" for n in e.layers()) == 6  # training-mode Dropout is counted


def test_file_without_shapes_runs_shape_inference(tmp_path):
    export("resnet", tmp_path / "r.onnx")
    model = onnx.load(str(tmp_path / "r.onnx"))
    del model.graph.value_info[:]
    onnx.save(model, str(tmp_path / "bare.onnx"))
    a, b = from_onnx(tmp_path / "r.onnx"), from_onnx(tmp_path / "bare.onnx")
    assert a.forward_flop() == b.forward_flop() and b.missing_shapes == 0


def test_dynamic_input_asks_for_input_shape(tmp_path):
    path = tmp_path / "dyn.onnx"
    export("grouped_depthwise_dilated", path, dynamic=True)
    with pytest.raises(ValueError, match=r"input 'x' has no static shape.*--input-shape x="):
        from_onnx(path)
    g2 = from_onnx(path, input_shapes={"x": [2, 8, 16, 16]})
    g8 = from_onnx(path, input_shapes={"x": "8x8x16x16"})
    assert g8.forward_macs() == 4 * g2.forward_macs()
    assert get_model(g2, batch=8).forward_macs() == g8.forward_macs()
    with pytest.raises(ValueError, match="no input 'y'"):
        from_onnx(path, input_shapes={"y": [1, 8, 16, 16]})


def test_get_model_and_scenario_accept_onnx(tmp_path):
    path = tmp_path / "resnet.onnx"
    export("resnet", path)
    g = get_model({"onnx": str(path)}, batch=4)
    assert g.forward_macs() == 2 * from_onnx(path).forward_macs()
    e = estimate({"model": {"onnx": str(path)}, "cluster": "dgx-a100",
                  "parallel": {"data": 8, "microbatch_size": 16}})
    assert e.step_time_s > 0


def _helper_model(nodes, inits, x_shape, y_shape, opset=17, extra_inputs=()):
    graph = helper.make_graph(nodes, "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, x_shape),
                                           *extra_inputs],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, y_shape)], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("custom", 1)])


def test_unknown_onnx_operator_is_counted_and_listed():
    w = numpy_helper.from_array(np.ones((8, 8), np.float32), "w")
    nodes = [helper.make_node("MatMul", ["x", "w"], ["h"]),
             helper.make_node("Swizzle", ["h"], ["s"], domain="custom"),
             helper.make_node("Relu", ["s"], ["y"])]
    model = _helper_model(nodes, [w], [4, 8], [4, 8])
    model.graph.value_info.append(helper.make_tensor_value_info("s", TensorProto.FLOAT, [4, 8]))
    with pytest.warns(UnknownOperatorWarning, match="Swizzle x1"):
        g = from_onnx(model)
    assert g.unknown_ops == {"Swizzle": 1} and g.params == 64
    assert int(g.forward_flop()) == 2 * 4 * 8 * 8 + 32 + 32  # GEMM, 1 FLOP per unknown element, ReLU


def test_opset23_attention_operator():
    q = [helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 4, 16, 8]) for n in ("k", "v")]
    model = _helper_model([helper.make_node("Attention", ["x", "k", "v"], ["y"], is_causal=1)], [],
                          [2, 4, 16, 8], [2, 4, 16, 8], opset=23, extra_inputs=q)
    g = from_onnx(model)
    (att,) = [n for n in g.layers() if n.kind == "attention"]
    assert att.attrs["heads"] == 4 and att.attrs["causal"] and int(g.forward_macs()) == 2 * 2 * 4 * 16 * 16 * 8


def test_bad_files(tmp_path):
    with pytest.raises(ValueError, match="no such file"):
        from_onnx(tmp_path / "missing.onnx")
    (tmp_path / "junk.onnx").write_bytes(b"not a protobuf at all")
    with pytest.raises(ValueError, match="onnx"):
        from_onnx(tmp_path / "junk.onnx")


def test_cli_input_shape_for_a_dynamic_onnx_input(tmp_path):
    import json
    import subprocess
    import sys
    onnx = pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 64])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    w = helper.make_tensor("w", TensorProto.FLOAT, [64, 32], [0.0] * 2048)
    path = tmp_path / "mm.onnx"
    onnx.save(helper.make_model(helper.make_graph([helper.make_node("MatMul", ["x", "w"], ["y"])], "g", [x], [y], [w])),
              str(path))

    def cli(*extra):
        return subprocess.run([sys.executable, "-m", "concurrency_model", "workdepth", "--model", str(path), *extra,
                               "--json"], capture_output=True, text=True)
    missing = cli()
    assert missing.returncode == 2 and "--input-shape" in missing.stderr and len(missing.stderr.strip().splitlines()) == 1
    ok = cli("--input-shape", "x=8x64", "--batch", "8")
    assert ok.returncode == 0, ok.stderr
    assert json.loads(ok.stdout)["forward_macs"] == 8 * 64 * 32
