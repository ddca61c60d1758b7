"""A full recompute runs the transformer blocks' forward again, not the layers around them (Megatron's
_checkpointed_forward loops over the transformer layers only)."""
import numpy as np
from hypothesis import given, strategies as st

from concurrency_model.parallel.host import issue_sequence
from concurrency_model.parallel.recompute import block_of, full_recompute_rows
from concurrency_model.timing.parts import Parts
from concurrency_model.training.estimate import estimate

GPT = {"kind": "gpt", "layers": 2, "hidden": 256, "heads": 4, "seq_len": 128, "vocab": 1024}


def test_blocks_only_on_a_transformer_and_every_layer_without_blocks():
    names = ["wte", "wpe", "dropout", "h.0.ln1", "h.0.qkv", "h.1.fc2", "ln_f", "lm_head"]
    assert full_recompute_rows(names) == [False, False, False, True, True, True, False, False]
    assert full_recompute_rows(["conv1", "bn1", "fc"]) == [True, True, True]
    assert full_recompute_rows([]) == []


@given(st.lists(st.sampled_from(["wte", "ln_f", "lm_head", "conv1", "h.0.qkv", "layers.3.mlp.up_proj", "h.12.ln1"]),
                max_size=12))
def test_the_rule_is_the_block_mask_or_all(names):
    got = full_recompute_rows(names)
    blocks = [block_of(n) is not None for n in names]
    assert got == (blocks if any(blocks) else [True] * len(names))


def test_step_recomputes_the_blocks_forward_only():
    sc = {"model": GPT, "cluster": "dgx-a100", "parallel": {"data": 1, "global_batch": 1, "microbatch_size": 1}}
    none, full = (estimate({**sc, "training": {"recompute": r}}) for r in ("none", "full"))
    layers = none.layers()
    blocks = layers["layer"].str.match(r"^h\.\d+\.")
    # the recompute is the blocks' forward, the output layer's (and its loss's) forward is not run again
    assert full.breakdown["recompute_s"] == float(np.float64(layers.loc[blocks, "forward_s"].sum()))
    head = layers.set_index("layer").loc["lm_head", "forward_s"]
    assert head > 0 and full.breakdown["recompute_s"] < none.breakdown["forward_s"] - head / 2
    assert full.step_time_s > none.step_time_s


def test_the_host_issues_a_blocks_kernels_again_and_not_the_output_layers():
    one = Parts(*(np.array([x]) for x in (2e-6, 1e-6, 0.0, 4e-6, 1.0)))   # 1 kernel of 6 us
    z = (0.0, 0.0, 0.0)
    row = {"f": one, "b": one.times(2), "tp_f": z, "tp_b": z, "tp_again": z, "again": 0.0}
    rows = [{**row, "name": "h.0.fc1", "full": True}, {**row, "name": "lm_head", "full": False}]
    q = issue_sequence(rows, [(0, 0), (0, 0)], "full", 4e-6)
    # backward from the last block: lm_head's backward (2), then h.0's forward again (1) and its backward (2)
    assert q["b"][0].tolist() == [2.0, 1.0, 2.0]
    assert [round(float(x) * 1e6, 3) for x in q["b"][1]] == [12.0, 6.0, 12.0]
    q_all = issue_sequence([{**r, "full": True} for r in rows], [(0, 0), (0, 0)], "full", 4e-6)
    assert q_all["b"][0].sum() == q["b"][0].sum() + 1   # the output layer's forward again: one kernel more
