"""The report's serving sections: a causal decoder's latency, batching, compressed weights and capacity, and a
mixture of experts under tensor or expert parallelism (figures from :mod:`.inference`). The serving frames that
depend on nothing but the package are kept across runs (:func:`concurrency_model.frames.cached_frame`)."""
from __future__ import annotations

from . import inference
from ._plot import figure
from ..frames import cached_frame
from .html import Section
from .sections import add_figure


def _top_row(fig, ax):
    """One Axes across the top row of a 2 x 2 grid (the two there removed)."""
    grid = ax[0, 0].get_gridspec()
    ax[0, 0].remove()
    ax[0, 1].remove()
    return fig.add_subplot(grid[0, :])


def inference_section(figs):
    ft = inference.ft_frame()  # reads data/: built every time
    q, front = cached_frame("quant", (), inference.quant_frame), cached_frame("front", (), inference.front_frame)
    cb_frame = cached_frame("batching", (), inference.batching_frame)
    load, budget = cached_frame("load", (), inference.load_frame), cached_frame("budget", (), inference.budget_frame)
    cb = cb_frame.set_index(["output_lengths", "batching"])
    fig2, ax2 = figure(11, 10, 2, 2)
    inference.load_plot(load, ax=_top_row(fig2, ax2))
    inference.batching_plot(cb_frame, ax=ax2[1, 0])
    inference.budget_plot(budget, ax=ax2[1, 1])
    f2 = add_figure(figs, "continuous_batching", fig2, "time per token and to the first token against the load under "
                    "continuous batching; tokens/s of static and continuous batching; the first token and the longest "
                    "iteration against a token budget", "Model only: Llama-2-7B, 1,024-token prompts, 128 generated "
                    "tokens on average, one H100.")
    whole, small = budget[budget["budget"].isna()].iloc[0], budget[budget["budget"].notna()].iloc[0]
    capacity = float(load.loc[load["load_rps"].isna(), "requests_per_s"].iloc[0])
    light, heavy = load[load["load_rps"] == load["load_rps"].min()].iloc[0], \
        load[load["load_rps"] == load["load_rps"].max()].iloc[0]
    fig, ax = figure(11, 10, 2, 2)
    inference.ft_plot(ft, ax=_top_row(fig, ax))
    inference.quant_plot(q, ax=ax[1, 0])
    inference.front_plot(front, ax=ax[1, 1])
    f = add_figure(figs, "inference", fig, "FasterTransformer GPT 13B latencies against the model; decode time of "
                   "Llama-2-7B with 16-bit, int8, int4 and 2:4-pruned weights; its serving front on H100s",
                   "Top: prefill, decode per token and total latency of 10 generated tokens after 512 prompt "
                   "tokens, batch 1, on one and two A100 40GB (tensor parallelism). Bottom: model only.")
    ape = (ft["predicted_s"] - ft["measured_s"]).abs() / ft["measured_s"]
    inside = ((ft["measured_s"] >= ft["p10_s"]) & (ft["measured_s"] <= ft["p90_s"])).mean()
    d = q.pivot(index="batch", columns="weights", values="decode_s_per_token")
    mem = q[q["batch"] == 1].set_index("weights")["memory_bytes"]
    lo, hi = d.index.min(), d.index.max()
    one = front.iloc[0]
    best = front[front["meets_target"]].iloc[0]
    fleet = front[front["meets_target"]].sort_values(["gpus_for_load", "decode_s_per_token"], kind="stable").iloc[0]
    ss, sf = cb.loc[("fixed", "static")], cb.loc[("fixed", "continuous")]
    us, uc = cb.loc[("uniform", "static")], cb.loc[("uniform", "continuous")]
    intro = ("<p>Serving a causal decoder (<code>concurrency-model infer</code>): a prefill pass over the prompt, then "
             "one decode step per generated token that reads the weights and the KV cache. First figure, top: NVIDIA's "
             "FasterTransformer GPT 13B measurements (the only inference timings in data/): the model is within "
             f"a median {100 * ape.median():.1f}% (worst {100 * ape.max():.1f}%) of the {len(ft)} latencies, "
             f"{100 * inside:.0f}% of them inside the 80% bands. Bottom left, weight-only quantization "
             "(<code>inference.weight_dtype</code>: the blocks' linear weights stored at 1 or 0.5 bytes, math "
             f"in fp16), model only: at batch {lo} a decode step takes {1e3 * d.loc[lo, 'fp16']:.2f} ms with fp16 "
             f"weights, {1e3 * d.loc[lo, 'int8']:.2f} with int8 and {1e3 * d.loc[lo, 'int4']:.2f} with int4 "
             f"({d.loc[lo, 'fp16'] / d.loc[lo, 'int8']:.2f}x and {d.loc[lo, 'fp16'] / d.loc[lo, 'int4']:.2f}x, not "
             "2x and 4x: the fp16 output layer, the KV cache and the launches stay); at batch "
             f"{hi} the gain is {d.loc[hi, 'fp16'] / d.loc[hi, 'int8']:.2f}x and "
             f"{d.loc[hi, 'fp16'] / d.loc[hi, 'int4']:.2f}x, the step being the KV cache's and the GEMMs' "
             f"compute. Memory at batch {lo}: {mem['fp16'] / 1e9:.1f}, {mem['int8'] / 1e9:.1f} and "
             f"{mem['int4'] / 1e9:.1f} GB. Scales and dequantization arithmetic are left out (a simplification of "
             "this toolkit). Pruned 2:4 "
             "(<code>inference.weight_sparsity</code>: the same layers' GEMMs on the sparse tensor cores, twice the "
             "dense rate, half the weights kept with 2-bit indices, 1.125 bytes a weight): "
             f"{1e3 * d.loc[lo, '2:4']:.2f} ms at batch {lo} ({d.loc[lo, 'fp16'] / d.loc[lo, '2:4']:.2f}x, less "
             f"than int8's {d.loc[lo, 'fp16'] / d.loc[lo, 'int8']:.2f}x: more bytes a weight), "
             f"{1e3 * d.loc[hi, '2:4']:.2f} ms at batch {hi}, {mem['2:4'] / 1e9:.1f} GB; no measurement of "
             "either is in data/. Bottom right, the capacity question (<code>infer --sweep</code>): every tensor "
             "degree "
             "in an H100 node and every batch up to the largest that fits in memory, 1,024-token prompts and 128 "
             f"generated tokens; {int(front['pareto'].sum())} of the {len(front)} configurations are on the front "
             f"of decode latency and tokens/s per GPU. The most tokens per GPU: tensor {one['tensor']} at batch "
             f"{one['batch']}, {one['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU at "
             f"{1e3 * one['decode_s_per_token']:.1f} ms a token; "
             f"within {1e3 * inference.FRONT_TARGET_S:g} ms the best is tensor {best['tensor']} at batch "
             f"{best['batch']} ({best['tokens_per_s_per_gpu']:,.0f} tokens/s per GPU, "
             f"{1e3 * best['decode_s_per_token']:.1f} ms), and {inference.LOAD_RPS:g} requests a second within that "
             f"take {fleet['gpus_for_load']} GPUs as {fleet['replicas']} replicas of tensor {fleet['tensor']} at batch "
             f"{fleet['batch']} (<code>--load</code>). Continuous batching (<code>inference.batching</code>, "
             "iteration-level scheduling in steady state: each pass adds a token to every slot and carries the new "
             f"prompts' share) of 32 sequences gives the first token after {1e3 * sf['first_token_s']:.0f} ms instead "
             f"of the static batch's {1e3 * ss['first_token_s']:.0f} ms prefill, at {1e3 * sf['decode_s_per_token']:.1f} "
             f"against {1e3 * ss['decode_s_per_token']:.1f} ms a token and {sf['tokens_per_s']:,.0f} against "
             f"{ss['tokens_per_s']:,.0f} tokens/s; with output lengths uniform around {inference.DECODE} tokens "
             f"(<code>inference.output_lengths</code>) the static batch waits for its longest request and falls to "
             f"{us['tokens_per_s']:,.0f} tokens/s while continuous slots refill ({uc['tokens_per_s']:,.0f}): "
             "Orca's gain. Under a load below the capacity of its "
             f"{inference.SLOTS} slots ({capacity:.1f} requests a second) the engine runs only the slots the load "
             f"needs (Little's law, <code>inference.load_rps</code>): a token takes "
             f"{1e3 * light['decode_s_per_token']:.1f} ms at {light['load_rps']:g} request a second and "
             f"{1e3 * heavy['decode_s_per_token']:.1f} ms at {heavy['load_rps']:g}, where a request also waits "
             f"{1e3 * heavy['queue_wait_s']:,.0f} ms for a free slot on average (Erlang C with the Allen-Cunneen "
             "correction, <code>queue_wait_s</code>; second figure, top). A waiting prompt runs whole in the next "
             "iteration, which then stalls every other slot's next token; a token budget "
             "(<code>inference.max_batched_tokens</code>, chunked prefills) bounds every iteration instead: at "
             f"{inference.BUDGET_LOAD:g} requests a second the longest iteration falls from "
             f"{1e3 * whole['longest_iteration_s']:.1f} ms to {1e3 * small['longest_iteration_s']:.1f} ms under "
             f"{small['budget']:,.0f} tokens, and the first token comes after {1e3 * small['first_token_s']:.1f} ms "
             f"instead of {1e3 * whole['first_token_s']:.1f} ({small['prefill_chunks']:.0f} chunks and the wait for "
             "the prefill lane); the mean time per token is the same (second figure, bottom right). Model only.</p>")
    return [Section("inference", "Inference: latency, batching, compressed weights and capacity", intro, [f, f2]),
            moe_section(figs), disaggregation_section(figs)]


def moe_section(figs) -> Section:
    """A mixture of experts on one node: tensor parallelism against replicas sharing their experts."""
    df = cached_frame("moe", (), inference.moe_frame)
    fig, ax = figure(8, 4.8)
    inference.moe_plot(df, ax=ax[0, 0])
    f = add_figure(figs, "moe_serving", fig, "tokens/s per GPU against decode ms per token of Mixtral 8x7B on 8 "
                   "H100s under tensor and expert parallelism", "Model only: bf16, 1,024-token prompts, 128 "
                   "generated tokens, batches 8 to 256.")
    at = df.set_index(["layout", "batch"])
    lo, hi = df["batch"].min(), df["batch"].max()
    tp, ep = at.loc["tensor 8"], at.loc["expert 8"]
    intro = ("<p>A mixture of experts can be served with every layer split over the node's GPUs (tensor "
             "parallelism: two all-reduces of every token's hidden vector a block) or as replicas of its attention "
             "that share their experts (<code>parallel.data</code> = <code>parallel.expert</code>: each GPU holds "
             "the dense weights and an eighth of the experts, and a dispatch and a combine all-to-all a layer send "
             f"each routed token to its expert's GPU and back). Mixtral 8x7B at batch {lo}: tensor 8 takes "
             f"{1e3 * tp.loc[lo, 'decode_s_per_token']:.2f} ms a token, expert 8 "
             f"{1e3 * ep.loc[lo, 'decode_s_per_token']:.2f} (each GPU reads the whole attention and its expert); at "
             f"batch {hi}, expert 8 gives {ep.loc[hi, 'tokens_per_s']:,.0f} tokens/s against "
             f"{tp.loc[hi, 'tokens_per_s']:,.0f} ({ep.loc[hi, 'tokens_per_s'] / tp.loc[hi, 'tokens_per_s']:.2f}x) "
             f"and the first token after {ep.loc[hi, 'first_token_s']:.2f} s against "
             f"{tp.loc[hi, 'first_token_s']:.2f} s. Balanced routing; the all-to-alls as collectives on the "
             "node's NVLink (the toolkit's assumption, not a measured routing). Model only.</p>")
    return Section("moe-serving", "Serving a mixture of experts: tensor or expert parallelism", intro, [f])


def disaggregation_section(figs) -> Section:
    """GPUs for a load: colocated continuous batching against prefill and decode pools apart."""
    df = cached_frame("disaggregation", (), inference.disaggregation_frame)
    fig, ax = figure(8, 4.8)
    inference.disaggregation_plot(df, ax=ax[0, 0])
    f = add_figure(figs, "disaggregation", fig, "H100s for a load of Llama-2-7B requests, colocated against "
                   "disaggregated serving", "Model only: 1,024-token prompts, 128 generated tokens.")
    top = df.iloc[-1]
    intro = ("<p>Prefill and decode on separate GPUs (<code>infer --disaggregate</code>; DistServe, Splitwise): "
             "prompts on prefill replicas behind a queue (batched while that pays), the KV cache sent over the "
             "network, decode "
             "iterations without prompt chunks, each pool with its own tensor degree and sized for the load. "
             f"Within {1e3 * inference.DIS_FIRST_S:g} ms to the first token and {1e3 * inference.DIS_TOKEN_S:g} ms a "
             "token, colocated continuous batching needs a replica's slots to stay lightly loaded (its iterations "
             "carry the prompts, and a full engine makes requests wait for a slot); apart, "
             f"{top['load_rps']:g} requests a second take {top['disaggregated_gpus']} H100s against "
             f"{top['colocated_gpus']} colocated. Prompts batched in powers of two while a doubling saves 10% of a "
             "prompt's time, one NIC a rank for the cache (both conventions of this toolkit). "
             "Model only.</p>")
    return Section("disaggregation", "Prefill and decode apart: the GPUs a load needs", intro, [f])
