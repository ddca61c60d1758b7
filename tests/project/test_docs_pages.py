"""The example figures of docs/serving.md (beyond the sweep's answer, which ``test_readme`` pins),
docs/communication.md, docs/device-time.md, docs/not-modelled.md, docs/scenario.md and docs/cli.md are what the
toolkit computes today: each example run through the command line the page names (or the Python API), its figure
rounded as the page rounds it and compared with a literal, and the literal found in the page (the pattern of
``test_docs_training``). The pages' accuracy tables (DeepBench kernels, collectives, the sparse sheet, the overlap
and fp8 fits) come from benchmarks and dated runs and are not re-run here."""
import json
import shlex

from concurrency_model.cli import main as cli
from concurrency_model.parallel.host import HOST_S_PER_KERNEL
from concurrency_model.serving.capacity import max_batch, max_throughput, serving_sweep
from concurrency_model.serving.decoder import infer
from concurrency_model.serving.disaggregated import plan

from docs_text import in_page, page


def run_json(line: str, capsys) -> dict:
    assert cli(shlex.split(line) + ["--json"]) == 0, capsys.readouterr().err
    return json.loads(capsys.readouterr().out)


# docs/serving.md

def test_max_load_of_llama31_8b_in_fp8_on_one_h100():
    r = max_throughput({"model": {"hf_config": "llama-3.1-8b", "fused_attention": True}, "cluster": "dgx-h100",
                        "inference": {"prompt_len": 1000, "decode_len": 1000, "dtype": "fp8"}})
    assert (r.slots, round(r.output_tokens_per_s)) == (520, 13536)
    in_page("serving.md", "fused attention kernel (`\"fused_attention\": true`), 1,000 input and 1,000 output tokens: "
            "520 slots, 13,536 output\n  tokens/s (TensorRT-LLM's table: 15,220)")


GPT3_SERVING = {"model": "gpt3-175b", "cluster": "dgx-a100",
                "inference": {"batch": 8, "prompt_len": 1024, "decode_len": 256, "dtype": "fp16"}}


def test_gpt3_needs_pipeline_stages_to_serve_more_slots():
    sc = {**GPT3_SERVING, "inference": {**GPT3_SERVING["inference"], "batching": "continuous"}}
    most = serving_sweep(sc, pipelines=(1, 2)).groupby(["tensor", "pipeline"])["batch"].max().to_dict()
    assert (most[8, 1], most[8, 2]) == (47, 152)
    assert {tp for tp in most if tp[1] == 1} == {(8, 1)}  # one node: only split 8 ways
    in_page("serving.md", "GPT-3 175B in fp16 with 8 continuous\n  slots of 1,280 positions (1,024-token prompts, "
            "256 generated) fits a DGX A100 only split 8 ways, at most 47\n  slots; over two nodes (tensor 8 x "
            "pipeline 2), 152.")


def test_llama_disaggregated_against_colocated(capsys):
    """Fixed output lengths as when the figure was written (d2f1693: an inline Llama-2-7B, 1,024 + 128 tokens)."""
    line = "infer --scenario llama-2-7b-serving --disaggregate --load 100 --max-first-token-ms 100 --max-decode-ms 15"
    gpus = {}
    for lengths in ("fixed", "geometric"):
        out = run_json(f"{line} --set inference.output_lengths={lengths}", capsys)
        b = out["best"]
        assert b["gpus"] == 10
        assert (b["prefill_replicas"], b["prefill_tensor"], b["prefill_batch"]) == (4, 1, 1)
        assert (b["decode_replicas"], b["decode_tensor"]) == (3, 2)
        gpus[lengths] = out["colocated"]["gpus_for_load"]
    assert gpus == {"fixed": 12, "geometric": 14}
    in_page("serving.md", "(`--scenario llama-2-7b-serving --set inference.output_lengths=fixed`)\n  at 100 "
            "requests/s within 100 ms to the first token and 15 ms a token: 10 H100s disaggregated (4 prefill "
            "replicas\n  of tensor 1, one prompt a pass, 3 decode replicas of tensor 2) against 12 colocated (14 with "
            "the example's\n  geometric output lengths).")


def test_gpt3_disaggregated_over_pipeline_stages():
    best = plan({k: GPT3_SERVING[k] for k in ("model", "cluster")} | {"inference": {"prompt_len": 1024,
                                                                                      "decode_len": 256}},
                2.0, max_first_token_s=1.0, max_decode_s=0.1, pipelines=(1, 2)).iloc[0]
    assert best["gpus"] == 16 and best["prefill_replicas"] == 1 and best["decode_replicas"] == 1
    assert (best["prefill_tensor"], best["prefill_pipeline"]) == (4, 2)
    assert (best["decode_tensor"], best["decode_pipeline"]) == (8, 1)
    in_page("serving.md", "on DGX A100s (1,024-token prompts, 256 generated, `--pipelines 1,2`) at 2 requests/s "
            "within 1 s to the first\n  token and 100 ms a token takes 16 GPUs, a prefill replica of tensor 4 x "
            "pipeline 2 and a decode replica of\n  tensor 8.")


def test_chunked_prefill_of_the_serving_example(capsys):
    whole = run_json("infer --scenario llama-2-7b-serving", capsys)
    chunked = run_json("infer --scenario llama-2-7b-serving --set inference.max_batched_tokens=512", capsys)
    assert whole["inference"]["load_rps"] == 20
    assert (round(1e3 * whole["time_to_first_token_s"], 1), round(1e3 * chunked["time_to_first_token_s"], 1)) == (
        35.1, 72.1)
    assert chunked["inference"]["prefill_chunks"] == 3
    assert round(1e3 * chunked["inference"]["prefill_lane_wait_s"], 1) == 22.8
    assert whole["decode_s_per_token"] == chunked["decode_s_per_token"]
    assert round(1e3 * whole["decode_s_per_token"], 2) == 13.15
    longest = [round(1e3 * r["inference"]["longest_iteration_s"], 1) for r in (whole, chunked)]
    assert longest == [28.5, 16.1]
    in_page("serving.md", "takes 35.1 ms to the first token\nwith whole prompts and 72.1 ms under 512 tokens an "
            "iteration (3 chunks and a 22.8 ms wait), at the same 13.15 ms an\niteration on average, while the "
            "longest iteration, which stalls every other slot's next token, falls from 28.5 ms\n(one carrying a "
            "whole prompt) to 16.1 ms")


def test_fp8_kv_cache_of_llama2_7b_on_one_h100():
    llama = {"model": {"hf_config": "llama-2-7b"}, "cluster": "dgx-h100", "parallel": {"tensor": 1}}
    sc = {**llama, "inference": {"batch": 1, "prompt_len": 1024, "decode_len": 1024, "dtype": "fp16"}}
    fits = [max_batch({**sc, "inference": {**sc["inference"], "kv_dtype": kv}})[0] for kv in ("fp8", None)]
    assert fits == [94, 53]
    attention = [infer({**llama, "inference": {"batch": 2, "prompt_len": 3000, "decode_len": 1000, "dtype": "fp16",
                                               "kv_dtype": kv}}).breakdown["decode_kv_attention_s"]
                 for kv in ("fp8", None)]
    assert [round(1e3 * s, 2) for s in attention] == [0.81, 1.49]
    in_page("serving.md", "Llama-2-7B in fp16 on one\nH100 with 2,048-token requests (1,024 in, 1,024 out) holds 94 "
            "sequences instead of 53, and at batch 2 over\n3,000-4,000 positions the attention over the cache takes "
            "0.81 instead of 1.49 ms a token")


# docs/communication.md

def test_collective_commands_ring_formula_and_auto_pick(capsys):
    text = page("communication.md")
    lines = [x.split("  #")[0] for x in text.split("```bash\n")[1].split("```")[0].splitlines()
             if x.startswith("concurrency-model collective")]
    ring, auto = (run_json(x.removeprefix("concurrency-model ").replace(" --json", ""), capsys) for x in lines)
    n, p, alpha, beta = 1048576, 8, 5e-6, 1e-10
    assert ring["time_s"] == 2 * (p - 1) * alpha + 2 * (p - 1) / p * n * beta  # the page's formula, exactly
    assert auto["algorithm"] == "nccl:tree/Simple"
    in_page("communication.md", "--cluster dgx-a100 --json   # auto: nccl:tree/Simple",
            "ring allreduce is exactly `2(P-1) alpha + 2(P-1)/P n beta`")


# docs/device-time.md

def test_pruned_gemm_stops_paying_from_batch_11(capsys):
    out = run_json("op gemm --m 7680 --n 4 --k 2560 --sparsity 0.95 --hardware gtx-1080-ti", capsys)
    assert out["format"] == "csr" and out["dense_faster_from_n"] == 11
    assert out["speedup_vs_dense"] > 1  # at n = 4 the pruned product is the faster one
    in_page("device-time.md",
            "concurrency-model op gemm --m 7680 --n 4 --k 2560 --sparsity 0.95 --hardware gtx-1080-ti",
            "(the batch from which pruning stops paying: 11 for DeepBench's 7680 x 2560 layer at 95% zeros on the "
            "GTX 1080 Ti")


# docs/not-modelled.md

def test_fp8_training_of_gpt3_on_1024_h100s(capsys):
    line = "estimate --scenario gpt3-175b-3d --set cluster=dgx-h100"
    bf16 = run_json(line, capsys)
    fp8 = run_json(line + " --set training.dtype=fp8", capsys)
    assert bf16["gpus"] == fp8["gpus"] == 1024 and bf16["device"] == "h100-sxm5-80gb"
    p = bf16["parallel"]
    assert (p["data"], p["tensor"], p["pipeline"], p["schedule"]) == (8, 8, 16, "interleaved")
    assert (bf16["training"]["recompute"], bf16["training"]["zero_stage"]) == ("selective", 1)
    steps = (round(bf16["step_time_s"], 2), round(fp8["step_time_s"], 2))
    assert steps == (8.95, 6.88)
    assert round(bf16["step_time_s"] / fp8["step_time_s"], 2) == 1.30
    in_page("not-modelled.md", "GPT-3 175B on 1,024 H100s (`--scenario gpt3-175b-3d\n  --set cluster=dgx-h100`: data 8 "
            "x tensor 8 x pipeline 16, interleaved, selective recompute, ZeRO-1): 8.95 s a step\n  in bf16, 6.88 s in "
            "fp8 (1.30x).")


# docs/scenario.md

def test_host_overhead_default():
    assert round(HOST_S_PER_KERNEL * 1e6) == 62
    in_page("scenario.md", "`null`: 62 us on a GPU (fitted on vTrain)")


# docs/cli.md

def test_memory_refusal_names_the_changes_that_fit(tmp_path, capsys):
    f = tmp_path / "gpt3.json"
    f.write_text(json.dumps({"model": "gpt3-175b", "cluster": "dgx-a100",
                             "parallel": {"data": 16, "tensor": 8, "pipeline": 8, "global_batch": 512}}))
    assert cli(["estimate", "--scenario", str(f)]) == 2
    err = capsys.readouterr().err
    assert "memory: 101.1 GB per device exceeds 80.0 GB" in err
    fixes = "fits with training.recompute=full (64.0 GB), parallel.pipeline=64 parallel.data=2 (77.4 GB)"
    assert err.rstrip().endswith(fixes)
    in_page("cli.md", "GPT-3 175B on 1,024 A100s, data 16 x tensor 8 x pipeline 8, global batch 512, needs 101.1 GB a "
            f"GPU and `{fixes}`")
