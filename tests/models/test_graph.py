"""Graph composition: W sums, D is the critical path, backward and training steps."""
import pytest
import sympy as sp

from concurrency_model import Builder, get_model
from concurrency_model.ops.dense import linear
from concurrency_model.ops.elementwise import activation, add
from concurrency_model.ops.optimizer import optimizer_update


def _mlp(batch=2):
    b = Builder("mlp", batch)
    x = b.input((3,))
    h = b.relu(b.linear(x, 4, name="fc1"))
    return b, b.linear(h, 2, name="fc2")


def test_chain_work_adds_and_depth_adds():
    b, _ = _mlp()
    fc1, r, fc2 = linear(2, 3, 4), activation("relu", 8), linear(2, 4, 2)
    f = b.graph.forward()
    assert f.flop == fc1.forward.flop + r.forward.flop + fc2.forward.flop
    assert f.depth == fc1.forward.depth + 1 + fc2.forward.depth  # (1+2+1) + 1 + (1+2+1) = 9
    assert f.depth == 9
    assert b.graph.params == 3 * 4 + 4 + 4 * 2 + 2


def test_branches_take_the_max_depth():
    b = Builder("branches", 1)
    x = b.input((8,))
    deep = b.linear(b.linear(x, 8, name="a1"), 8, name="a2")  # depth (1+3+1) * 2 = 10
    shallow = b.linear(x, 8, name="s")  # depth 5
    b.add(deep, shallow)  # depth 1
    f = b.graph.forward()
    assert f.depth == 10 + 1
    assert f.flop == 3 * linear(1, 8, 8).forward.flop + add(8).forward.flop


def test_backward_skips_data_gradient_and_sums_branch_gradients():
    b = Builder("branches", 1)
    x = b.input((8,))
    y = b.linear(x, 8, name="l0")
    z = b.add(b.linear(y, 8, name="l1"), b.linear(y, 8, name="l2"))  # y has two consumers
    assert z
    bw = b.graph.backward()
    lin = linear(1, 8, 8)
    # ∇x of l0 is not formed (its input is data); l1 and l2 give ∇x and ∇w; l0 only ∇w;
    # the two contributions to ∇y are summed: 8 adds
    expected = 3 * lin.grad_weight.flop + 2 * lin.grad_input.flop + 8
    assert bw.flop == expected
    # critical path: add's ∇ is free (depth 0); l1 ∇x (1+3) -> sum (1) -> l0 ∇w (max(1+0, 1+0)=1)
    assert bw.depth == lin.grad_input.depth + 1 + lin.grad_weight.depth


def test_training_step_is_forward_backward_update():
    b, _ = _mlp()
    g = b.graph
    t = g.training("adam")
    upd = optimizer_update("adam", g.params)
    assert t.flop == g.forward().flop + g.backward().flop + upd.forward.flop
    assert t.depth == g.forward().depth + g.backward().depth + 9


def test_table_rows_and_symbolic_batch():
    n = sp.Symbol("n", integer=True, positive=True)
    b, _ = _mlp(batch=n)
    df = b.graph.table()
    assert list(df["name"]) == ["fc1", "relu", "fc2"]
    assert df.loc[0, "forward_flop"] == 2 * n * 3 * 4 + n * 4
    assert b.graph.subs(b.graph.forward_flop(), batch=5) == _mlp(5)[0].graph.forward_flop()


def test_brent_bounds_on_a_graph():
    b, _ = _mlp()
    f = b.graph.forward()
    lo, hi = f.brent_bounds(4)
    assert lo == max(f.flop / 4, f.depth) and hi == f.flop / 4 + f.depth
    assert f.average_parallelism == f.flop / f.depth


def test_builder_errors_name_the_field():
    b = Builder("bad", 1)
    x = b.input((3, 8, 8))
    with pytest.raises(ValueError, match="kh"):
        b.conv(x, 4, 11)
    with pytest.raises(ValueError, match="groups"):
        b.conv(x, 4, 3, groups=2)
    with pytest.raises(ValueError, match="add"):
        b.add(x, b.conv(x, 4, 3))
    with pytest.raises(ValueError, match="name"):
        b.input((3,), name="input")
    with pytest.raises(ValueError, match="conv"):
        b.conv(b.input((3,), name="vec"), 4, 3)


@pytest.mark.parametrize("name", ["googlenet", "densenet121", "gpt2", "lstm-lm"])
def test_work_without_the_critical_path_is_the_same_work(name):
    """``forward(depth=False)`` / ``backward(depth=False)`` (what ``training_flop`` sums) give the same W, bytes and
    parameters as the full passes, depth 0; ``dag`` has one edge per (input, reader) pair."""
    g = get_model(name, batch=3)
    for full, quick in ((g.forward(), g.forward(depth=False)), (g.backward(), g.backward(depth=False))):
        assert quick.flop == full.flop and quick.bytes == full.bytes and quick.depth == 0 and full.depth > 0
    edges = {(i, n.name) for n in g.nodes.values() for i in n.inputs}
    assert set(g.dag.edges) == edges and set(g.dag.nodes) == set(g.nodes)
