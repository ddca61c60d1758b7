"""Disaggregated serving (concurrency_model.serving.disaggregated): a prefill pool and a decode pool sized for a load, the KV
cache moved between them."""
from __future__ import annotations

import json

import pandas as pd
import pytest

from concurrency_model.cli import main
from concurrency_model.commands.infer import _layout
from concurrency_model.hardware.clusters import load_cluster, place
from concurrency_model.serving.kernels import decode_step, prefill_pass
from concurrency_model.serving.disaggregated import plan
from concurrency_model.serving.decoder import model_shape
from concurrency_model.serving.queueing import mean_wait, replicas_for
from concurrency_model.serving.overheads import Comm, model_graph

SC = {"model": "gpt2", "cluster": "dgx-a100", "inference": {"prompt_len": 512, "decode_len": 64}}
P, O, LOAD = 512, 64, 300.0


@pytest.fixture(scope="module")
def df():
    return plan(SC, LOAD, max_first_token_s=0.05, max_decode_s=0.01)


def _pass_s(model, cl, shape, batch: int, t: int, p: int = 1, e: int = 1) -> float:
    """Seconds of a prompt pass of ``batch`` prompts of P tokens on tensor ``t`` x ``p`` stages in an expert group of
    ``e``, summed by hand from :func:`prefill_pass`."""
    return sum(prefill_pass(model_graph(model, batch, P, 2), shape["hidden"], cl.device, "fp16", t, batch,
                            Comm(cl, t, p, e), P).breakdown.values())


def test_a_plan_by_hand(df):
    cl = load_cluster("dgx-a100")
    dev, shape = cl.device, model_shape(model_graph("gpt2", 1, None, 2))
    row = df[(df["prefill_tensor"] == 1) & (df["prefill_batch"] == 1) & (df["decode_tensor"] == 1)
             & (df["slots"] == 64)].iloc[0]
    # prefill: one prompt a pass on one GPU; the replicas the fewest whose mean first token is within 50 ms
    s_p = _pass_s("gpt2", cl, shape, 1, 1)
    assert row["prefill_s"] == pytest.approx(s_p, rel=1e-12)
    assert (row["prefill_replicas"], row["prefill_wait_s"]) == replicas_for(LOAD, 1, s_p, 0.0, 0.05 - s_p)
    # the KV cache of 512 positions (12 layers x 12 heads x 64 x K and V x 2 bytes) over one NIC
    alpha, beta = place(cl, 2, 1).inter
    assert row["kv_transfer_s"] == pytest.approx(alpha + 2 * 12 * 512 * 12 * 64 * 2 * beta, rel=1e-12)
    # decode: a step of the 64 slots at contexts 513 .. 576; a request holds its slot for 64 of them
    step = decode_step(model_graph("gpt2", 64, 1, 2), shape, dev, "fp16", 1, 64, Comm(cl, 1, 1), P + 1, P + O).seconds
    assert row["iteration_s"] == pytest.approx(step, rel=1e-12)
    r_d = row["decode_replicas"]
    assert row["decode_wait_s"] == pytest.approx(mean_wait(64, LOAD / r_d * O * step, O * step, 0.0), rel=1e-12)
    assert row["decode_s_per_token"] == pytest.approx(step + (row["kv_transfer_s"] + row["decode_wait_s"]) / (O - 1),
                                                      rel=1e-12)
    assert row["gpus"] == row["prefill_replicas"] + r_d
    assert row["tokens_per_s_per_gpu"] == pytest.approx(LOAD * O / row["gpus"], rel=1e-12)


def test_plans_meet_their_targets_with_no_replica_to_spare(df):
    ok = df[df["meets_target"]]
    assert len(ok) and (ok["first_token_s"] <= 0.05).all() and (ok["decode_s_per_token"] <= 0.01).all()
    assert df.iloc[0]["meets_target"] and df.iloc[0]["gpus"] == ok["gpus"].min()  # the fewest GPUs first
    for row in ok[ok["prefill_batch"] == 1].to_dict("records"):  # one prefill replica fewer misses the target
        # or is unstable
        fewer = row["prefill_replicas"] - 1
        assert fewer == 0 or LOAD * row["prefill_s"] >= fewer or \
            row["prefill_s"] + mean_wait(fewer, LOAD * row["prefill_s"], row["prefill_s"], 0.0) > 0.05


def test_prompts_batched_by_hand(df):
    """A prefill replica may run b prompts a pass (powers of two, while they fit and a doubling saves at least 10% of
    a prompt's time): b seats of service S_p(b), and half a pass more to wait for the one in flight."""
    cl = load_cluster("dgx-a100")
    shape = model_shape(model_graph("gpt2", 1, None, 2))
    row = df[(df["prefill_tensor"] == 2) & (df["prefill_batch"] == 4) & (df["decode_tensor"] == 1)
             & (df["slots"] == 64)].iloc[0]
    s_p = _pass_s("gpt2", cl, shape, 4, 2)
    assert row["prefill_s"] == pytest.approx(s_p, rel=1e-12)
    r_p, wait = replicas_for(LOAD, 4, s_p, 0.0, 0.05 - s_p - s_p / 2)
    assert (row["prefill_replicas"], row["prefill_wait_s"]) == (r_p, pytest.approx(wait + s_p / 2, rel=1e-12))
    passes = df.groupby(["prefill_tensor", "prefill_batch"])["prefill_s"].first()
    for t in (1, 2, 4):
        per_prompt = passes[t] / passes[t].index
        assert list(passes[t].index) == [2 ** i for i in range(len(passes[t]))]
        assert (per_prompt.iloc[1:-1].to_numpy() <= 0.9 * per_prompt.iloc[:-2].to_numpy()).all()  # each doubling paid
        assert per_prompt.iloc[-1] > 0.9 * per_prompt.iloc[-2]  # until the last saved less than 10%
    assert df.iloc[0]["prefill_batch"] == 1  # 300 short prompts a second: one GPU's passes keep up unbatched
    assert _layout({"prefill_tensor": 2, "prefill_batch": 4}, "prefill") == "tensor 2 (4 prompts a pass)"


def test_a_tighter_first_token_needs_more_prefill_replicas():
    loose = plan(SC, LOAD, max_first_token_s=0.5).iloc[0]
    tight = plan(SC, LOAD, max_first_token_s=0.0025).iloc[0]  # a prompt pass takes 1.9 ms
    assert tight["prefill_replicas"] * tight["prefill_tensor"] > loose["prefill_replicas"] * loose["prefill_tensor"]


def test_bad_input_names_the_field():
    for kw, field in (({"load_rps": 0}, "load_rps"), ({"load_rps": None}, "load_rps"),
                      ({"load_rps": 5, "max_decode_s": -1}, "max_decode_s")):
        with pytest.raises(ValueError, match=f"^{field}: "):
            plan(SC, **kw)
    with pytest.raises(ValueError, match=r"^inference\.load_rps: not in a disaggregated plan"):
        plan({**SC, "inference": {**SC["inference"], "batching": "continuous", "load_rps": 3}}, 5.0)
    with pytest.raises(ValueError, match=r"^parallel: a disaggregated plan chooses"):
        plan({**SC, "parallel": {"pipeline": 2}}, 5.0)
    with pytest.raises(ValueError, match=r"^parallel.expert_imbalance: 1.3 needs a model with mixture-of-experts"):
        plan({**SC, "parallel": {"expert_imbalance": 1.3}}, 5.0)
    with pytest.raises(ValueError, match=r"^model: inference with a KV cache needs a causal decoder"):
        plan({**SC, "model": "bert-base"}, 5.0)


def test_cli(tmp_path, capsys):
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SC))
    assert main(["infer", "--scenario", str(f), "--disaggregate", "--load", "300", "--max-first-token-ms", "50",
                 "--max-decode-ms", "10", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["best"]["meets_target"] and out["colocated"]["gpus_for_load"] >= 1
    assert main(["infer", "--scenario", str(f), "--disaggregate"]) == 2  # a plan needs a load
    assert "--disaggregate: needs --load" in capsys.readouterr().err
    assert main(["infer", "--scenario", str(f), "--disaggregate", "--load", "300"]) == 0
    text = capsys.readouterr().out
    assert "prefill" in text and "colocated" in text


def test_pipeline_stages_by_hand():
    """--pipelines: a prefill replica of 2 stages takes a prompt every half pass; a decode replica of 2 stages runs
    its slots in 2 groups, each group's step passing both stages."""
    both = plan(SC, LOAD, max_first_token_s=0.05, max_decode_s=0.01, pipelines=(1, 2))
    assert set(both["prefill_pipeline"]) == set(both["decode_pipeline"]) == {1, 2}
    flat = both[(both["prefill_pipeline"] == 1) & (both["decode_pipeline"] == 1)]
    assert len(flat) == len(plan(SC, LOAD, max_first_token_s=0.05, max_decode_s=0.01))
    row = both[(both["prefill_tensor"] == 1) & (both["prefill_pipeline"] == 2) & (both["decode_tensor"] == 1)
               & (both["decode_pipeline"] == 2) & (both["slots"] == 64)].iloc[0]
    cl = load_cluster("dgx-a100")
    dev, shape = cl.device, model_shape(model_graph("gpt2", 1, None, 2))
    s_p = _pass_s("gpt2", cl, shape, 1, 1, p=2)
    assert row["prefill_s"] == pytest.approx(s_p, rel=1e-12)
    assert (row["prefill_replicas"], row["prefill_wait_s"]) == replicas_for(LOAD, 1, s_p / 2, 0.0, 0.05 - s_p)
    step = decode_step(model_graph("gpt2", 32, 1, 2), shape, dev, "fp16", 1, 32, Comm(cl, 1, 2), P + 1, P + O).seconds
    assert row["iteration_s"] == pytest.approx(step, rel=1e-12)
    assert row["gpus"] == 2 * row["prefill_replicas"] + 2 * row["decode_replicas"]
    alpha, beta = place(cl, 2, 1).inter  # 2 GPUs a side: the cache over 2 NICs
    assert row["kv_transfer_s"] == pytest.approx(alpha + 2 * 12 * 512 * 12 * 64 * 2 / 2 * beta, rel=1e-12)
    assert (both["slots"][both["decode_pipeline"] == 2] % 2 == 0).all()
    with pytest.raises(ValueError, match="^pipelines: 16 stages for 12 layers"):
        plan(SC, LOAD, pipelines=(16,))
    with pytest.raises(ValueError, match="^pipelines: must be a positive integer, got 0"):
        plan(SC, LOAD, pipelines=(0,))


def test_a_large_model_across_stages(tmp_path, capsys, monkeypatch):
    """GPT-3 175B on DGX A100s (80 GB): a decode replica of tensor 8 holds 48 slots of 1,280 positions, one of
    tensor 8 x pipeline 2 holds 154 (each stage half the weights and caches); a prefill replica of tensor 4 fits
    only over 2 stages. The CLI takes --pipelines with --disaggregate."""
    sc = {"model": "gpt3-175b", "cluster": "dgx-a100", "inference": {"prompt_len": 1024, "decode_len": 256}}
    df = plan(sc, 2.0, pipelines=(1, 2))
    slots = df.groupby(["decode_tensor", "decode_pipeline"])["slots"].max().to_dict()
    assert slots == {(4, 2): 48, (8, 1): 48, (8, 2): 154}
    assert set(zip(df["prefill_tensor"], df["prefill_pipeline"])) == {(4, 2), (8, 1), (8, 2)}
    assert _layout(df.iloc[0].to_dict() | {"prefill_tensor": 4, "prefill_pipeline": 2}, "prefill") == \
        "tensor 4 x pipeline 2"
    assert _layout({"decode_tensor": 8, "decode_pipeline": 1}, "decode") == "tensor 8"
    f = tmp_path / "s.json"
    f.write_text(json.dumps(SC))
    # the colocated comparison is test_cli's; here the plans alone
    monkeypatch.setattr("concurrency_model.commands.infer.serving_sweep",
                        lambda *a, **k: pd.DataFrame(columns=["gpus_for_load", "decode_s_per_token"]))
    assert main(["infer", "--scenario", str(f), "--disaggregate", "--load", "50", "--pipelines", "1,2", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert {"prefill_pipeline", "decode_pipeline"} <= set(out["best"])
    assert {r["decode_pipeline"] for r in out["plans"]} == {1, 2}


MOE = {"model": {"hf_config": {"model_type": "mixtral", "num_hidden_layers": 4, "hidden_size": 1024,
                               "intermediate_size": 3584, "num_attention_heads": 16, "num_key_value_heads": 4,
                               "vocab_size": 32000, "max_position_embeddings": 4096, "num_local_experts": 8,
                               "num_experts_per_tok": 2}},
       "cluster": "dgx-h100", "inference": {"prompt_len": 512, "decode_len": 64}}


def test_expert_groups_by_hand():
    """A mixture of experts: each pool's replicas also in expert groups (the experts split over e replicas, as infer
    serves them), a group of e prefill replicas a server of e prompts, a group of e decode replicas of n slots each
    one of e n slots; a dense model's plan has no such columns."""
    df = plan(MOE, LOAD, max_first_token_s=0.05, max_decode_s=0.01)
    assert set(df["prefill_expert"]) == set(df["decode_expert"]) == {1, 2, 4, 8}
    assert (df["prefill_tensor"] * df["prefill_expert"] <= 8).all()
    row = df[(df["prefill_tensor"] == 1) & (df["prefill_expert"] == 2) & (df["decode_tensor"] == 1)
             & (df["decode_expert"] == 4) & (df["slots"] == 32)].iloc[0]
    cl = load_cluster("dgx-h100")
    graph = model_graph(MOE["model"], 1, None, 2)
    dev, shape = cl.device, model_shape(graph)
    s_p = _pass_s(MOE["model"], cl, shape, 1, 1, e=2)
    assert row["prefill_s"] == pytest.approx(s_p, rel=1e-12)
    groups, wait = replicas_for(LOAD, 2, s_p, 0.0, 0.05 - s_p)
    assert (row["prefill_replicas"], row["prefill_wait_s"]) == (2 * groups, wait)
    step = decode_step(model_graph(MOE["model"], 32, 1, 2), shape, dev, "fp16", 1, 32, Comm(cl, 1, 1, 4), P + 1,
                       P + O).seconds
    assert row["iteration_s"] == pytest.approx(step, rel=1e-12)
    room = (0.01 - step) * (O - 1) - row["kv_transfer_s"]
    groups, wait = replicas_for(LOAD, 4 * 32, O * step, 0.0, room)
    assert row["decode_replicas"] == 4 * groups and row["decode_wait_s"] == pytest.approx(wait, rel=1e-12)
    assert row["gpus"] == row["prefill_replicas"] + row["decode_replicas"]
    most = df.groupby(["decode_tensor", "decode_expert"])["slots"].max()
    assert most[1, 1] < most[1, 2] < most[1, 4] < most[1, 8]  # each device holds fewer experts: room for caches
    hot = plan({**MOE, "parallel": {"expert_imbalance": 1.5}}, LOAD, max_first_token_s=0.05, max_decode_s=0.01)
    key = ["prefill_tensor", "prefill_expert", "prefill_batch", "decode_tensor", "decode_expert", "slots"]
    both = df.merge(hot, on=key, suffixes=("", "_hot"))
    one = (both["decode_expert"] == 1)
    assert (both["iteration_s_hot"][one] == both["iteration_s"][one]).all()  # one replica: nothing to wait for
    assert (both["iteration_s_hot"][~one] > both["iteration_s"][~one]).all()  # the busiest device's rows
    assert _layout(row.to_dict(), "decode") == "tensor 1 (experts split over groups of 4)"
    assert _layout({"prefill_tensor": 2, "prefill_expert": 2, "prefill_batch": 4}, "prefill") == \
        "tensor 2 (experts split over groups of 2; 4 prompts a pass)"
    assert "prefill_expert" not in plan(SC, LOAD).columns


def test_expert_groups_over_pipeline_stages_by_hand():
    """Expert groups and pipeline stages together (as infer serves them): each stage's all-to-alls within its group of
    replicas of t x p GPUs; a prefill group of e replicas is a server of e prompts of a stage time, a decode group
    of e replicas of n slots in p groups one of e n slots."""
    df = plan(MOE, LOAD, max_first_token_s=0.05, max_decode_s=0.01, pipelines=(1, 2))
    both = df[(df["prefill_expert"] > 1) & (df["prefill_pipeline"] > 1) & (df["decode_expert"] > 1)
              & (df["decode_pipeline"] > 1)]
    assert len(both)
    row = both[(both["prefill_tensor"] == 1) & (both["prefill_expert"] == 2) & (both["prefill_batch"] == 1)
               & (both["decode_tensor"] == 1) & (both["decode_expert"] == 2) & (both["slots"] == 32)].iloc[0]
    cl = load_cluster("dgx-h100")
    shape = model_shape(model_graph(MOE["model"], 1, None, 2))
    s_p = _pass_s(MOE["model"], cl, shape, 1, 1, p=2, e=2)
    assert row["prefill_s"] == pytest.approx(s_p, rel=1e-12)
    groups, wait = replicas_for(LOAD, 2, s_p / 2, 0.0, 0.05 - s_p)  # a new prompt every stage time
    assert (row["prefill_replicas"], row["prefill_wait_s"]) == (2 * groups, wait)
    step = decode_step(model_graph(MOE["model"], 16, 1, 2), shape, cl.device, "fp16", 1, 16, Comm(cl, 1, 2, 2),
                       P + 1, P + O).seconds  # 32 slots in 2 groups of 16, one group a stage
    assert row["iteration_s"] == pytest.approx(step, rel=1e-12)
    assert row["gpus"] == 2 * (row["prefill_replicas"] + row["decode_replicas"])
