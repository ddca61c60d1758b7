"""The report's sections: each builder computes its figures (appending them to ``figs``) and returns its
:class:`~concurrency_model.report.html.Section` list, with an intro saying what is plotted and where the
data come from (``data/SOURCES.md``)."""
from __future__ import annotations

import html
import math
import time

from ..hardware.devices import load_device
from ..parallel.host import HOST_S_PER_KERNEL
from ..training.run import run_cost
from ..version import __version__
from . import accuracy, cnn_parallel, comm, distribution, minibatch, parallel, ranking, sweep3d, zoo
from ._plot import figure, fmt_bytes, png_bytes
from .html import Figure, Section


def escape(text) -> str:
    """HTML-escaped ``str(text)``."""
    return html.escape(str(text))


def failed_section(anchor: str, title: str, err: Exception) -> Section:
    """A section that says it could not be computed, and why."""
    return Section(anchor.replace(" ", "-"), title,
                   f"<p class='note'>This section could not be computed: {escape(type(err).__name__)}: "
                   f"{escape(err)}</p>")


def add_figure(figs: list, name: str, fig, alt: str, caption: str, finish=None) -> Figure:
    """Render ``fig`` to PNG (after ``finish()``, where given: :func:`._plot.png_bytes`), append it to ``figs`` and
    return it."""
    f = Figure(name, png_bytes(fig, finish=finish), alt, caption)
    figs.append(f)
    return f


def meta(elapsed: float) -> str:

    return (f"concurrency_model {__version__}, written {time.strftime('%Y-%m-%d %H:%M %Z')} in {elapsed:.0f} s "
            f"by <code>concurrency-model report</code>.")


def lead() -> str:
    """The page's first paragraph: what the report answers, in one sentence."""
    return ("<p>How fast a deep-learning model trains or serves on a given cluster, where the time and the memory "
            "go, which parallel layout is best, and how close these predictions come to published "
            "measurements: every number below is computed by <code>concurrency_model</code> from its built-in "
            "device presets and the measurements shipped in its <code>data/</code> folder.</p>")


def about() -> str:
    """What the sections after the contents are, for a reader who wants the models behind the numbers."""
    return ("<p>The models follow Ben-Nun &amp; Hoefler, <i>Demystifying Parallel and Distributed Deep Learning</i> "
            "(ACM Computing Surveys 2019): work and depth of operators and networks, device time on a roofline, "
            "collectives in the alpha-beta model, and data, tensor and pipeline parallelism composed into a "
            "training step. Where a figure shows measurements, it says which and where they were published.</p>")


def zoo_sections(figs):
    zf = zoo.zoo_frame()
    fig, ax = figure(11, 5.2, 1, 2, width_ratios=[1.25, 1])
    zoo.average_parallelism(zf, ax=ax[0, 1])  # first: the labels of work_depth are placed in the final layout
    place = zoo.work_depth_unplaced(zf, ax=ax[0, 0])[1]  # the labels placed when the figure is drawn
    f = add_figure(figs, "zoo_work_depth", fig, "work against depth and average parallelism of the zoo models",
                   "Left: W against D, log-log; dashed lines of equal W/D. Right: W/D of the forward pass and of the "
                   "training step.", finish=place)
    tp = zf.set_index("model")["training_parallelism"]
    intro = (f"<p>Work W (FLOP; a multiply-add counts 2) and depth D (operations on the longest chain of "
             f"dependent operations, paper §2.5) of a training step of each of the {len(zf)} zoo models at "
             f"batch 1, from <code>get_model(name).training()</code>. Their ratio, the average parallelism, "
             f"ranges from {tp.min():,.0f} ({tp.idxmin()}) to {tp.max():.3g} ({tp.idxmax()}): far more than the "
             f"cores of any device, so it is the work, not the critical path, that bounds one device. CNNs "
             f"follow the torchvision definitions, transformers the original papers; no measurements here.</p>")
    return [Section("zoo", "Work, depth and average parallelism of the model zoo", intro, [f])]


def roofline_section(figs):

    dev = load_device("a100-sxm4-80gb")
    rf = zoo.roofline_frame()
    fig, ax = figure(11, 6.2)
    zoo.roofline(rf, ax=ax[0, 0])
    f = add_figure(figs, "roofline", fig, "the zoo's forward layers on the A100 roofline",
                   "Layers with identical intensity and rate are drawn once; the legend counts the distinct points "
                   "per kind.")
    intro = (f"<p>Each forward layer of the zoo (images at batch 32, BERT/GPT-2/LSTM at batch 8, GPT-3 175B at "
             f"batch 1: {len(rf):,} layers of {rf['kind'].nunique()} kinds) as predicted by the device-time model "
             f"(<code>timing.graph.layer_times</code>) on the <code>a100-sxm4-80gb</code> preset in fp16: "
             f"arithmetic intensity (FLOP per byte of minimum memory traffic) against predicted FLOP/s. The roof "
             f"is the datasheet peak and bandwidth ({dev.peak('fp16') / 1e12:.0f} TFLOP/s dense fp16, "
             f"{dev.mem_bw / 1e9:,.0f} GB/s: NVIDIA's A100 datasheet and Ampere architecture whitepaper) times the "
             f"fitted efficiencies; points "
             f"below it are GEMM wave/tile quantisation, launch overhead or small shapes; convolutions above it "
             f"run as Winograd, which needs fewer FLOP than the direct count the intensity uses. Predicted kernel "
             f"times are checked against DeepBench in the last section.</p>")
    return [Section("roofline", "The zoo's layers on a roofline", intro, [f])]


def comm_section(figs):
    cfs = [comm.collective_frame(s) for s in comm.SYSTEMS]
    fig, ax = figure(11, 11, 2, 1)
    for a, cf in zip(ax[:, 0], cfs):
        comm.collective_crossovers(cf, ax=a)
    f = add_figure(figs, "collectives", fig, "all-reduce algorithms, crossovers and measured nccl-tests points",
                   "Top: A100 cluster (preset oci-bm-gpu4-8, its own shape: 16 x 100 Gb/s RoCE ports; NCCL 2.19). "
                   "Bottom: H100 cluster (preset gcp-a3-mega, its own system: 200 Gb/s NICs where dgx-h100 has "
                   "400; NCCL 2.21 with GCP's TCPXO profile).")
    cross = "; ".join(f"{comm.SYSTEMS[cf['system']]}: " + ", ".join(f"{a} to {b} at {fmt_bytes(x)}"
                                                                     for a, b, x in cf["crossovers"]) for cf in cfs)
    intro = ("<p>All-reduce time against the message size on 16 ranks (2 nodes x 8 GPUs) for every algorithm of "
             "<code>comm.collective_time</code> in the alpha-beta model, with alpha and beta fitted as a ring "
             "all-reduce to the measured sizes of 64 KiB and more; the Chan et al. lower bound; the algorithm "
             "<code>comm.auto</code> picks (bands along the top) and where it switches (<code>comm.crossover</code>: "
             f"{cross}); and the cluster preset with <code>auto</code> on its tiers (dash-dot). Black dots: "
             "nccl-tests <code>all_reduce_perf</code> out-of-place times from data/SOURCES.md, "
             "<code>oracle-quickstart/oci-hpc-oke</code> @ 1402938 (8 x A100-SXM4-40GB per node, RoCE, NCCL "
             "2.19.3) and <code>lessizzmore/create-a3mega-ztan-fork</code> @ c1fd9e1 (8 x H100 per node, GCP "
             "A3-Mega). Below 64 KiB NCCL's latency (40-130 µs here) is far above one alpha: NCCL switches to "
             "low-latency protocols that one alpha-beta line does not describe.</p>")
    return [Section("collectives", "Collective algorithms: crossovers and measurements", intro, [f])]


def dp_section(figs):
    dp = parallel.dp_scaling_frame()
    fig, ax = figure(11, 5.5)
    parallel.dp_scaling(dp, ax=ax[0, 0])
    f = add_figure(figs, "dp_scaling", fig, "data-parallel weak scaling, predicted and measured",
                   "Lines: predicted; stars: measured. The legend gives the weak-scaling efficiency t(1) / t(128).")
    top = dp["d"].max()
    eff = []
    for model, g in dp.groupby("model"):
        g = g.set_index("d")
        eff.append((model, g.loc[1, "measured_s"] / g.loc[top, "measured_s"],
                    g.loc[1, "predicted_s"] / g.loc[top, "predicted_s"]))
    meas = ", ".join(f"{m} {a:.0%}" for m, a, _ in eff)
    pred = ", ".join(f"{m} {b:.0%}" for m, _, b in eff)
    intro = ("<p>Iteration time of GPT-2 models of 1.2 to 8.3 billion parameters (tensor parallel 1, 2, 4, 8 "
             "inside one DGX-A100) as data parallelism replicates them, 16 sequences per replica (weak scaling), "
             "predicted by <code>estimate</code> for every d from 1 to 128 (lines) and measured at d = 1 and "
             "d = 128 (stars): the Megatron-LM README's 2020-09 tables (data/SOURCES.md, "
             "<code>megatron_readme_scaling.csv</code>, NVIDIA/Megatron-LM @ 5281919), mapped to scenarios as in "
             f"<code>validate.training</code>. Weak-scaling efficiency at d = {top}: measured {meas}; predicted "
             f"{pred}. Megatron-LM's local DDP all-reduces the gradients after the backward pass (no overlap), "
             "so the predicted loss is the all-reduce itself; shaded: the predictions' 80% bands. Stragglers, "
             "contention and framework overhead are not modelled. The other scaling sets in data/ "
             "(tf_cnn_benchmarks, Horovod, DeepLearningExamples, torchgpipe) and the training sets that vary the "
             "configuration at a fixed GPU count (vTrain, Megatron 2021, Narayanan et al. Table 2) are in the "
             "last section.</p>")
    return [Section("dp", "Data-parallel scaling against measurements", intro, [f]), minibatch_section(figs)]


def minibatch_section(figs) -> Section:
    """The minibatch against the paper's three regions (§3, Fig. 6a)."""
    df = minibatch.regions_frame()
    fig, ax = figure(11, 4.8)
    minibatch.batch_regions(df, ax=ax[0, 0])
    f = add_figure(figs, "batch_regions", fig, "images/s per GPU against the global minibatch, with the paper's "
                   "regions A and C", "Lines: predicted images/s per GPU; hollow markers: region A; shaded: region C.")
    big = df[df["gpus"] == df["gpus"].max()].set_index("global_batch")
    edge = int(big[big["region"] == "A"].index.max())
    p, small = int(big["gpus"].iloc[0]), int(df["gpus"].min())
    none = ("; no batch is in region B there: the minibatch, not the machine, bounds data parallelism"
            if not (big["region"] == "B").any() else "")
    intro = ("<p>The paper's tradeoff between generalization and utilization (§3, Fig. 6a): a minibatch too "
             "small leaves the hardware unused (region A), one too large generalizes worse (region C), and data "
             "parallelism divides the minibatch among the devices, so the minibatch bounds it (§6.1). "
             f"<code>estimate</code> places every scenario's global batch (key <code>batch_region</code>): here "
             f"ResNet-50 in fp16 with momentum SGD on {small} and {p} V100s of DGX-1 nodes, at most "
             f"{minibatch.MICROBATCH} images a GPU a microbatch. Region A (its edge is a convention of this "
             "toolkit, not the paper's) is "
             "where a GPU, given its share of the batch, runs below 80% of the images/s it reaches at the best "
             "microbatch that fits (the kernels' small-size efficiency and the host's "
             f"{HOST_S_PER_KERNEL * 1e6:.0f} us a kernel): on "
             f"{p} GPUs up to {edge:,} images a step ({edge // p} a GPU){none}. Region C is above "
             "<code>training.max_global_batch</code>, by default 8,192 (Fig. 6b: ResNet-50's ImageNet error "
             "rising beyond about 8k); 32k (LARS) and 64k were reached with large-batch rules (§3). The images/s "
             "are predicted; the generalization side of Fig. 6a is the paper's reported ceilings, not a model.</p>")
    return Section("minibatch", "The minibatch: utilization against generalization (§3)", intro, [f])


def distribution_section(figs):
    sync, cons, search = distribution.sync_frame(), distribution.consistency_frame(), distribution.search_frame()
    fig, ax = figure(11, 11.5, 3, 1)
    distribution.sync_schemes(sync, ax=ax[0, 0])
    distribution.consistency_models(cons, ax=ax[1, 0])
    distribution.search_strategies(search, ax=ax[2, 0])
    f = add_figure(figs, "distribution", fig, "step time under each synchronisation scheme and consistency model; "
                   "days of a hyperparameter search under three strategies",
                   "Top: data-parallel VGG-16 on 8 to 256 V100 (no overlap). Middle: 64 workers, the all-reduce "
                   "overlapped, against the spread of a replica's compute time. Bottom: a search whose trials "
                   "are such trainings on one node each.")
    days = search.set_index(["search", "gpus"])["days"]
    most = search["gpus"].max()

    def took(name):
        d = days[(name, most)]
        return f"{d:.1f} days" if d >= 1 else f"{24 * d:.1f} hours"
    top = sync[sync["workers"] == sync["workers"].max()].set_index("scheme")["step_s"]
    at8 = sync[sync["workers"] == sync["workers"].min()].set_index("scheme")["step_s"]
    sfb8, all8 = at8["sufficient factors (fully connected) + allreduce"], at8["allreduce"]
    c = cons.set_index(["mode", "straggler_cv"])["step_s"]
    sync_t, ssp_t = c[("synchronous", 0.1)], c[("SSP, staleness 3", 0.1)]
    intro = ("<p>The paper's training distribution (§7), through <code>estimate</code>: VGG-16 (a 277 MB fp16 "
             "gradient) data parallel on DGX-1 V100 nodes, 64 images per GPU. Top, the synchronisation of "
             f"each step at {sync['workers'].max()} workers: the all-reduce (hierarchical: NVLink inside a node) "
             f"{1e3 * top['allreduce']:.0f} ms a step, parameter servers sharded one per worker "
             f"{1e3 * top['parameter servers (one shard per worker)']:.0f} ms (each node's 4 NICs carry its 8 "
             f"workers' pushes and pulls), gossip on a ring {1e3 * top['gossip, ring']:.0f} ms (two neighbours, "
             "flat in the worker count; it mixes the models only slowly) and on the exponential graph "
             f"{1e3 * top['gossip, exponential graph']:.0f} ms (log2 P neighbours). Strom's threshold "
             "sparsification (the paper's first sparsification method, 1/1000 of the values kept and allgathered) "
             f"takes {1e3 * top['threshold sparsification (Strom), allgathered']:.0f} ms; sufficient-factor "
             f"broadcasting of the fully connected layers (Poseidon) {1e3 * sfb8:.0f} ms at 8 workers against "
             f"{1e3 * all8:.0f} ms for the all-reduce: rebuilding every worker's gradients from its factors costs "
             "more GPU time than the fewer bytes save on NVLink and InfiniBand, and past 64 workers no layer "
             "qualifies (the factors of all workers outweigh the matrix). Middle, 64 workers whose compute "
             "time per step varies (gaussian, <code>training.straggler_cv</code> = std / mean): a synchronous step "
             f"waits for the slowest ({1e3 * sync_t:.0f} ms at 10%, against {1e3 * c[('synchronous', 0.0)]:.0f} ms "
             f"without stragglers); stale-synchronous with bound 3 pays that wait over 4 steps ({1e3 * ssp_t:.0f} ms), "
             "local SGD over its 4 local steps, and asynchronous workers not at all, but here they pay the "
             "parameter servers' traffic. The paper names these schemes without cost formulas: every time is "
             "derived in the alpha-beta model (<code>parallel.distribution</code>, <code>.consistency</code>, "
             "<code>.compression</code>), model only, and what staleness or gossip costs in convergence is not "
             "modelled. Bottom, hyperparameter search (§7.5): "
             f"{distribution.TRIALS} trials, each {distribution.TRIAL_STEPS:,} steps on one node. Random search "
             f"runs every trial at once ({took('random search')} on {most:,} GPUs); SMBO waits for each round of 8 "
             f"proposals ({took('SMBO, 8 proposals a round')} on any count from 64 GPUs up) and evolution for each "
             f"generation of 64 ({took('evolution, population 64')} from 512 GPUs up): the strategy, not the "
             "machine, sets the depth (<code>parallel.search</code>; the paper's §7.5 names the strategies, the costs "
             "are this toolkit's).</p>")
    return [Section("distribution", "Training distribution: synchronisation, consistency and search", intro, [f])]


def cnn_parallel_section(figs):
    splits, trick = cnn_parallel.splits_frame(), cnn_parallel.trick_frame()
    fig, ax = figure(11, 5.4, 1, 2, width_ratios=[1.4, 1])
    cnn_parallel.splits_plot(splits, ax=ax[0, 0])
    cnn_parallel.trick_plot(trick, ax=ax[0, 1])
    f = add_figure(figs, "cnn_parallel", fig, "data, channel, spatial and hybrid splits of three CNNs; the one weird "
                   "trick's speedups", "Left: step time of each split of 8 GPUs over the data-parallel one (labels: "
                   "GB per GPU). Right: AlexNet's speedup over one GPU on 8 PCIe GPUs.")
    by = splits.set_index(["model", "split"])
    rel = splits.pivot(index="model", columns="split", values="step_s")
    rel = rel.div(rel["data 8"], axis=0)
    ch, rows, hy = "channels: data 4 x tensor 2", "rows: data 4 x context 2", "hybrid: tensor 8 on FC layers"
    at8 = trick.set_index("gpus").loc[8]
    intro = ("<p>The paper's model parallelism of CNNs (§6.2) and its per-layer hybrid (§6.4), through "
             "<code>estimate</code> (no measurements: <code>data/</code> has none for these splits). Left, 8 A100 "
             "of one node, 32 images per GPU, no host gaps. Splitting every layer's channels (<code>tensor</code>) "
             f"gathers each layer's input: {rel.loc['vgg16', ch]:.2f}x the data-parallel step for VGG16 and "
             f"{rel.loc['resnet50', ch]:.2f}x for ResNet-50, whose gathered inputs are stored whole "
             f"({by.loc[('resnet50', ch), 'memory_gb']:.1f} against {by.loc[('resnet50', 'data 8'), 'memory_gb']:.1f} "
             "GB per GPU). Splitting every feature map's rows (<code>context</code>) exchanges only halos and "
             f"batch-norm statistics ({rel[rows].min():.2f}-{rel[rows].max():.2f}x). The hybrid "
             "(<code>tensor_layers: \"fc\"</code>) is the fastest where the fully connected layers hold most of "
             f"the weights (AlexNet {rel.loc['alexnet', hy]:.2f}x, VGG16 {rel.loc['vgg16', hy]:.2f}x): each GPU reads "
             "and updates an eighth of them (AlexNet's optimizer pass "
             f"{1e3 * by.loc[('alexnet', 'data 8'), 'optimizer_s']:.2f} -> "
             f"{1e3 * by.loc[('alexnet', hy), 'optimizer_s']:.2f} ms) and all-reduces only the convolutions' gradients; ResNet-50's one small fully connected layer "
             f"leaves it level ({rel.loc['resnet50', hy]:.2f}x). Right, Krizhevsky's setting, 8 GPUs on PCIe: "
             f"the hybrid reaches {at8['one weird trick']:.1f}x one GPU (his paper: 6.25x), data parallelism "
             f"{at8['data parallel']:.1f}x and model parallelism {at8['model parallel']:.1f}x, the order he "
             "reported. Per-layer formulas: the paper's §4.2 (convolution) and §6.2 (model parallelism), as "
             "derived by this toolkit.</p>")
    return [Section("cnn-parallel", "Model parallelism of CNNs: channels, rows and the one weird trick", intro, [f])]


def pipeline_section(figs):
    fig, ax = figure(11, 10, len(parallel.SCHEDULES), 1, sharex=True)
    for a, (sched, v, title) in zip(ax[:, 0], parallel.SCHEDULES):
        parallel.pipeline_timeline(sched, 4, 8, 1.0, 2.0, v=v, title=title, ax=a)
    f = add_figure(figs, "pipeline_timelines", fig, "GPipe, 1F1B, interleaved and ZB-H1 pipeline timelines",
                   "Numbers are microbatches; the dashed line is the end of the step.")
    intro = ("<p>Event-simulated timelines (<code>parallel.pipeline.timeline</code>) of p = 4 stages and m = 8 "
             "microbatches, forward 1 s and backward 2 s per microbatch and stage, no transfer time: GPipe (all "
             "forwards, then all backwards), 1F1B / PipeDream-Flush (same step, at most p microbatches in "
             "flight) and Megatron's interleaved 1F1B with v = 2 chunks per device (lighter bars: the second "
             "chunk), whose bubble is v times smaller (Narayanan et al. 2021), and ZB-H1 (Qi et al. 2024, as "
             "recalled), whose backward is split into the input gradient and the weight gradient (green), which "
             "no other stage waits for and which fills the drain: a third of 1F1B's bubble with F = B = W, at "
             "1F1B's peak memory. The simulated step equals the closed form of <code>pipeline.step_time</code>. "
             "Model only: data/ holds no pipeline timing traces.</p>")
    return [Section("pipeline", "Pipeline schedules", intro, [f])]


def sweep_section(figs, res, best, ru):
    """The 3D sweep's figures and text from its result ``res``, the estimate of its fastest configuration ``best``
    and ``res.runner_up()`` (``ru``), computed once by the caller (:mod:`.parts`)."""
    fig, ax = figure(11, 4.6)
    sweep3d.sweep_heatmap(res.frame, ax=ax[0, 0], runner_up=ru["runner_up"] if ru else None)
    f1 = add_figure(figs, "sweep_heatmap", fig, "best step time of gpt3-175b over tensor and pipeline degrees",
                    "Best step time per (tensor, pipeline) over the other fields; red outline: the fastest; orange "
                    "dashed: the fastest of another layout (degrees or ZeRO stage), the runner-up.")
    extra = []
    if ru:
        fig, ax = figure(11, 4.6)
        sweep3d.runner_up_breakdown(*ru["estimates"], ax=ax[0, 0])
        extra.append(add_figure(figs, "runner_up", fig, "the fastest layout against the runner-up, part by part",
                                "Each part of the step for both; the parts that differ most are what separates "
                                "them."))
    fig, ax = figure(11, 4.2)
    sweep3d.step_breakdown(best, ax=ax[0, 0])
    f2 = add_figure(figs, "step_breakdown", fig, "step-time breakdown of the fastest configuration",
                    "The bars above the rule add up to the step. The hatched bar below it is data-parallel traffic "
                    "that runs while the backward pass computes: it takes no time of its own and is not added.")
    fig, ax = figure(11, 4.2)
    sweep3d.memory_tradeoff(res, ax=ax[0, 0])
    f3 = add_figure(figs, "memory_tradeoff", fig, "memory per GPU of the fastest configuration per ZeRO stage and "
                    "recompute policy", "Stacked: weights, gradients, optimizer state and activations per GPU "
                    "(<code>estimate(...).memory</code>), with each configuration's step time; ZeRO shards the "
                    "model state over the data-parallel ranks, recompute trades activations for compute.")
    par, tr = best.scenario.parallel, best.scenario.training
    rejected = "; ".join(f"{k} ({v:,})" for k, v in sorted(res.rejected.items(), key=lambda kv: -kv[1]))
    busy = best.breakdown["compute_s"] / best.step_time_s
    args = (best.step_time_s, par.global_batch, sweep3d.GPUS, busy, best.scenario.cluster.device.board_power_w)
    plain = run_cost({"tokens": 300e9}, *args, seq_len=sweep3d.SEQ_LEN)
    failing = run_cost({"tokens": 300e9, **sweep3d.FAILURES}, *args, seq_len=sweep3d.SEQ_LEN)
    intro = (f"<p>GPT-3 175B on {sweep3d.GPUS} A100-80GB GPUs (<code>dgx-a100</code> preset, 128 nodes), global "
             f"batch {sweep3d.GLOBAL_BATCH}, fp16 with Adam: <code>sweep</code> evaluated {res.evaluated:,} "
             f"configurations of data, tensor, pipeline, microbatch, schedule, interleave, sequence parallelism, "
             f"recompute and ZeRO stage in {res.elapsed_s:.1f} s; {res.feasible:,} are feasible (rejected: "
             f"{escape(rejected)}). Each cell shows the fastest for its tensor and pipeline degree. The fastest "
             f"overall: data {par.data} x tensor {par.tensor} x pipeline {par.pipeline}, microbatch "
             f"{par.microbatch_size}, {par.schedule}, recompute {tr.recompute}, ZeRO {tr.zero_stage}: "
             f"{best.step_time_s:.2f} s per step ({best.achieved_flops_per_device / 1e12:.0f} TFLOP/s of model "
             f"FLOPs per GPU), below broken down by <code>estimate(...).breakdown</code>. 300 billion tokens "
             f"(Brown et al. 2020) take {plain['run_days']:.1f} days at that step; with failures "
             f"(<code>run.gpu_mtbf_hours</code>, an illustrative {sweep3d.FAILURES['gpu_mtbf_hours']:,} h per GPU, "
             f"{sweep3d.FAILURES['checkpoint_s'] / 60:.0f}-minute checkpoints, "
             f"{sweep3d.FAILURES['restart_s'] / 60:.0f}-minute restarts) {failing['run_days']:.1f} days, {failing['expected_failures']:.0f} failures expected and a "
             f"checkpoint every {failing['checkpoint_interval_s'] / 60:.0f} minutes (Young 1974).</p>")
    if ru:
        b, r = ru["estimates"]
        why = ", ".join(f"{sweep3d.PARTS[x['part']]} {x['runner_up_minus_best_s']:+.2f} s" for x in ru["separates"][:3])
        intro += (f"<p>Runner-up of another layout: data {r.scenario.parallel.data} x tensor "
                  f"{r.scenario.parallel.tensor} x pipeline {r.scenario.parallel.pipeline}, ZeRO "
                  f"{r.training.zero_stage} under {escape(r.training.framework)}, {r.step_time_s:.2f} s against "
                  f"{b.step_time_s:.2f} s under {escape(b.training.framework)}; what separates them (runner-up "
                  f"minus best): {escape(why)}. Each runtime's collectives are priced call by call as it issues them "
                  f"(<code>training.framework</code>): the ZeRO-3 of DeepSpeed 2021 (<code>deepspeed-0.3</code>, "
                  f"one call per tensor, none overlapped) is the one Narayanan et al. 2021 measured (validation "
                  f"section).</p>")
    return [Section("sweep", "3D parallelism of GPT-3 175B", intro, [f1, *extra, f2, f3])]


def _finite(v, default):
    """``v`` as a float, or ``default`` where ``v`` is None or NaN."""
    return default if v is None or (isinstance(v, float) and math.isnan(v)) else float(v)


VALIDATION_FIGURE_IN = (3.5, 3.5)  # one small figure a dataset (350 x 350 px), three a row on the page


def validation_section(figs, vdf, table, summary, quick):
    """Predicted against measured: one small figure a dataset (each beside its neighbour on a wide page), the error
    table, and a warning for every dataset whose error is far above its target (``summary``:
    :func:`.glance.validation_summary`)."""
    names = list(dict.fromkeys(vdf["dataset"]))
    shown = []
    for k, name in enumerate(names):
        fig, ax = figure(*VALIDATION_FIGURE_IN)
        accuracy.validation_scatter(vdf, name, ax=ax[0, 0])
        shown.append(add_figure(figs, f"validation_{k + 1:02d}", fig, f"predicted against measured: {name}",
                                ""))
    far = summary[summary["far"]] if len(summary) else summary
    warn = "".join(f"<p class='note'>&#9888; {escape(r.dataset)}: {escape(r.target)} is the target, the error is "
                   f"{_finite(r.worst_pct, r.median_ape_pct):.0f}% "
                   "(more than twice the target): read its predictions as a rough guide only.</p>"
                   for r in far.itertuples())
    intro = ("<p>Every dataset in data/ through its predictor (<code>validate.registry.validate</code>"
             f"{', quick mode: the slow training sets sampled' if quick else ''}), each in its main mode: "
             "<i>preset</i> (the device and cluster presets with default constants, none fitted on these data), "
             "<i>held-out</i> (constants fitted on the other half of the same system's rows) or <i>in-sample</i>. "
             "The error is the absolute percentage error (APE) per row; the table gives its median, mean and "
             "maximum, the share of rows within ±20%, how many rows were compared of how many the file holds (and "
             "why the others were not), and the source and date of the measurements. The same registry backs "
             "<code>concurrency-model validate</code>. Each figure: one dataset, predicted against measured on "
             "log axes, the line y = x, the ±20% band and, where the predictor gives one, each prediction's 80% "
             "band.</p>" + warn)
    return [Section("validation", "Predicted against measured", intro, shown,
                    tables=[accuracy.error_table_html(table)], gallery=True)]


def ranking_section(figs, quick):
    """Choosing right: each set's rank correlation and best-layout match, and the A/B pairs (:mod:`.ranking`)."""
    summary, pairs, verdicts = ranking.ranking_data(quick)
    f = add_figure(figs, "ranking", ranking.ranking_figure(summary, pairs),
                   "rank correlation per set and the A/B pairs' predicted against measured speed-ups",
                   "Left: mean Spearman of each set's groups of 3 or more layouts (green: at or above 0.8) and the "
                   "share of groups whose predicted fastest layout is the measured fastest. Right: one point per A/B "
                   "case, predicted against measured speed-up over its pair's first case; on the line, right.")
    worst = pairs.loc[pairs["error"].abs().idxmax()] if len(pairs) else None
    oom = int(verdicts.filter(like="went out of memory", axis=0).to_numpy().sum())
    intro = ("<p>What a planner needs first is the order: does the estimate rank the alternatives as the "
             "measurements do? For every shared set with several layouts of one model on one system (a group), the "
             "Spearman rank correlation between predicted and measured throughput, averaged over the set's groups of "
             "three or more layouts (<code>validate.ranking</code>; <code>benchmarks/ranking.py</code> prints every "
             f"group{', the big sets sampled as its --quick' if quick else ''}), and how often the predicted fastest "
             "layout is the measured fastest. Then the A/B pairs: measured runs that change one setting of one "
             "layout (an EP overlap, CUDA graphs, a token dispatcher, the recompute modules: Megatron-Bridge's "
             "documentation and Megatron-LM's DeepSeek-V3 on GB200 history, <code>data/SOURCES.md</code>), the "
             "predicted speed-up against the measured one"
             + (f"; the largest miss is {escape(worst['pair'])}, {worst['error']:+.0%} "
                "(docs/residuals.md says why)" if worst is not None else "") + ". Last, whether it says "
             "&ldquo;fits&rdquo; only of what fits: its verdict on the runs of BigScience's layout search of 2022 "
             "(DeepSpeed on Jean Zay's A100s, not a shared set), those that ran and those that went out of memory "
             f"({oom}), and on every run of the dense shared sets, all of which ran "
             "(<code>validate.modern.verdicts_by_set</code>; <code>benchmarks/memory_accuracy.py</code> names each "
             "miss).</p>")
    return [Section("ranking", "Choosing right: rank order, A/B pairs and what fits", intro, [f],
                    tables=[ranking.summary_html(summary), ranking.pairs_html(pairs), ranking.verdicts_html(verdicts)])]
