"""The tied embedding's gradient all-reduce between a pipeline's first and last stages (``tied_sync``)."""
import pytest

from concurrency_model import estimate
from concurrency_model.parallel.triples import ZERO_TRIPLE, collective_triple
from concurrency_model.scenario import load_scenario
from concurrency_model.training.prepare import prepare

GPT2_TIED = 50257 * 768  # GPT-2's output layer is its token embedding: vocabulary x hidden


def _scenario(model="gpt2", t=1, p=2, d=1, **training):
    return {"model": model, "cluster": "dgx-a100",
            "parallel": {"data": d, "tensor": t, "pipeline": p, "global_batch": 8 * d},
            "training": {"dtype": "bf16", **training}}


def _workload(**kw):
    return prepare(load_scenario(_scenario(**kw)))[0]


def test_tied_params_counted_from_the_graph():
    assert _workload().tied_params == GPT2_TIED
    assert _workload(model={"hf_config": "llama-2-7b"}, t=8).tied_params == 0  # untied output layer


@pytest.mark.parametrize("t,d,p,rpn,sharing", [
    (1, 1, 2, 2, 1),   # 2 ranks: the pipeline inside one NVLink domain of 8
    (2, 2, 2, 2, 1),   # 8 ranks: still one node
    (4, 1, 4, 1, 4),   # 16 ranks: first and last stage on different nodes; 4 first-stage ranks share a node's NICs
    (4, 4, 2, 1, 8),   # 32 ranks: a node holds 8 first-stage ranks
])
def test_two_rank_all_reduce_of_a_tensor_ranks_share(t, d, p, rpn, sharing):
    w = _workload(t=t, p=p, d=d)
    got = w.data_parallel(t, p, d, runtime=("megatron",))["emb"]
    nbytes = w.tied_params / t * 2  # bf16 gradients, Megatron's reduction dtype here
    assert got == pytest.approx(collective_triple("allreduce", nbytes, 2, w.cluster, rpn, sharing))
    assert (got[1] > 0) == (rpn == 2) and (got[2] > 0) == (rpn == 1)  # NVLink inside a node, else the network


def test_deepspeed_bf16_optimizer_reduces_the_fp32_copy():
    """DeepSpeed's BF16_Optimizer (ZeRO 0, bf16) reduces the tied weight's fp32 gradient: twice Megatron's bytes."""
    w = _workload(t=1, p=2, d=1)
    fp32 = w.data_parallel(1, 2, 1, runtime=("deepspeed",), zero=0)["emb"]
    assert fp32 == pytest.approx(collective_triple("allreduce", GPT2_TIED * 4, 2, w.cluster, 2, 1))
    assert w.data_parallel(1, 2, 1, runtime=("deepspeed",), zero=1)["emb"] == pytest.approx(
        collective_triple("allreduce", GPT2_TIED * 2, 2, w.cluster, 2, 1))


def test_nothing_without_stages_or_a_tied_layer():
    w = _workload(p=1)
    assert w.data_parallel(1, 1, 2, runtime=("megatron",))["emb"] == ZERO_TRIPLE
    w = _workload(model={"hf_config": "llama-2-7b"}, t=8, p=2)
    assert w.data_parallel(8, 2, 1, runtime=("megatron",))["emb"] == ZERO_TRIPLE


def test_estimate_adds_it_once_a_step_outside_the_passes():
    base = _scenario(p=2, d=1)
    e1 = estimate(base)
    e4 = estimate({**base, "parallel": {**base["parallel"], "global_batch": 32}})  # 4x the microbatches
    emb = e1.breakdown["embedding_sync_s"]
    assert emb > 0 and e4.breakdown["embedding_sync_s"] == pytest.approx(emb)
    assert estimate(_scenario(p=1)).breakdown["embedding_sync_s"] == 0
    w = _workload(p=2)
    lat, intra, inter = w.data_parallel(1, 2, 1, runtime=("megatron",))["emb"]
    assert emb == pytest.approx(lat + max(intra, inter))
    assert e1.breakdown["communication_s"] >= emb
