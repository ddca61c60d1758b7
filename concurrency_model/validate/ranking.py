"""Does the estimate rank layouts as the measurements do? For every shared set that measured several layouts of one
workload (one model on one system), the Spearman rank correlation between predicted and measured throughput
(``scipy.stats.spearmanr``; ties take average ranks) and whether the predicted fastest layout is the measured one.

Groups, one rule per set (issue 35, item 6):

* ``vtrain_single``, ``vtrain_multi``: one model shape (hidden, layers, heads, sequence), GPU count and global batch;
  the layouts are the (tensor, data, pipeline, microbatch) splits; throughput = global batch / iteration time.
* ``narayanan_table2``: one model size (175B, 530B); the layouts are PTD and ZeRO-3 at each GPU count; TFLOP/s
  per GPU (Eq. (3), as :mod:`.training` compares them).
* ``torchtitan``: one model on one GPU count and system (the tables' rows; torch.compile and async TP are not
  modelled, so their rows tie in the prediction); tokens/s per GPU.
* ``llmfoundry``: one MPT size on one GPU type; the layouts are the sequence length, GPU count, microbatch and
  precision; tokens/s per GPU.
* ``megatron_bridge``: one model and task on one system; the same layout in several containers is one layout (the
  median of its measurements); tokens/s per GPU.
* ``megatron_bridge_moe``: the same file's mixtures of experts (DeepSeek-V3, Qwen3, GPT-OSS), grouped and deduplicated
  as ``megatron_bridge``, the expert degree and the token dispatcher part of the layout; a variant the table names
  apart (``tokendrop``, ``w/ MTP``, ``dropless``) is a group of its own.
* ``bigscience``: BigScience's layout search of 2022 (not a shared set: found with the code search): one model
  shape (hidden, layers, heads, dtype) on Jean Zay; the layouts are the (data, tensor, pipeline, microbatch, global
  batch, ZeRO stage) choices, a layout timed on several days one layout; the runs that went out of memory left out;
  tokens/s per GPU.

A set's Spearman is the mean over its groups of at least three layouts (two layouts only give +-1); the issue's
target is >= 0.8 on every set with such groups.

A/B pairs (:func:`ab_pairs`): measured runs that change one setting of one layout (Megatron-Bridge's EP overlap and
CUDA-graph comparisons, ``megatron_bridge_ab``; the steps of Megatron-LM's DeepSeek-V3 on GB200 optimization history
that change a modelled setting, the dispatcher, the recompute modules or the CUDA graphs, ``megatron_dsv3_ab``), the
predicted speed-up of each case over the pair's first against the measured one (tokens/s, or TFLOP/s per GPU where a
set measures those: the same model FLOPs in every case of a pair).

>>> f = pd.DataFrame({"dataset": "d", "group": "g", "layout": list("abcd"), "measured": [1.0, 2, 3, 4],
...                   "predicted": [1.0, 3, 2, 4]})
>>> t = rank_groups(f)
>>> round(float(t["spearman"].iloc[0]), 6), bool(t["best_match"].iloc[0])   # 1 - 6 x 2 / (4 x 15)
(0.8, True)
"""
from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.stats import spearmanr
from . import modern, training

TARGET = 0.8  # issue 35: Spearman >= 0.8 on every multi-layout shared set
MIN_LAYOUTS = 3  # groups with fewer layouts are listed but not averaged into a set's Spearman
SETS = ("vtrain_single", "vtrain_multi", "narayanan_table2", "torchtitan", "llmfoundry", "megatron_bridge",
        "megatron_bridge_moe", "bigscience")
OUTSIDE_SETS = ("bigscience",)  # found with the code search, not the project's shared data
SHARED_SETS = tuple(s for s in SETS if s not in OUTSIDE_SETS)


def rank_groups(frame: pd.DataFrame) -> pd.DataFrame:
    """One row per (``dataset``, ``group``) of ``frame`` (columns ``dataset, group, layout, measured, predicted``;
    throughputs, higher is better; rows without both values are dropped, repeated layouts take their medians):
    ``layouts``, ``spearman`` (NaN below two layouts or when one side is constant), ``measured_best``,
    ``predicted_best`` (layouts) and ``best_match``."""
    ok = frame[np.isfinite(frame["measured"].astype(float)) & np.isfinite(frame["predicted"].astype(float))]
    ok = ok.groupby(["dataset", "group", "layout"], sort=False, as_index=False)[["measured", "predicted"]].median()
    out = []
    for (ds, grp), g in ok.groupby(["dataset", "group"], sort=False):
        m, p = g["measured"].to_numpy(float), g["predicted"].to_numpy(float)
        rho = np.nan
        if len(g) >= 2 and np.ptp(m) > 0 and np.ptp(p) > 0:
            rho = float(spearmanr(m, p).statistic)
        mbest, pbest = g["layout"].iloc[int(np.argmax(m))], g["layout"].iloc[int(np.argmax(p))]
        # a tie for the predicted best (layouts the estimate cannot tell apart) counts as a match if it holds it
        pbest_all = set(g["layout"][p == p.max()])
        out.append({"dataset": ds, "group": grp, "layouts": len(g), "spearman": rho, "measured_best": mbest,
                    "predicted_best": pbest, "best_match": mbest in pbest_all})
    return pd.DataFrame(out, columns=["dataset", "group", "layouts", "spearman", "measured_best", "predicted_best",
                                      "best_match"])


def summarize(table: pd.DataFrame) -> pd.DataFrame:
    """Per set: ``groups``, ``ranked`` (groups of at least :data:`MIN_LAYOUTS` layouts with a Spearman),
    ``mean_spearman`` and ``min_spearman`` over those, ``best_match`` (share of all groups of two or more layouts
    whose predicted best is the measured best), ``meets`` (mean >= :data:`TARGET`; None without ranked groups).

    >>> t = pd.DataFrame({"dataset": "d", "group": ["a", "b"], "layouts": [4, 2], "spearman": [0.8, -1.0],
    ...                   "best_match": [True, False]})
    >>> s = summarize(t).iloc[0]
    >>> int(s["ranked"]), float(s["mean_spearman"]), float(s["best_match"]), bool(s["meets"])
    (1, 0.8, 0.5, True)
    """
    out = []
    for ds, g in table.groupby("dataset", sort=False):
        multi = g[g["layouts"] >= 2]
        ranked = g[(g["layouts"] >= MIN_LAYOUTS) & g["spearman"].notna()]
        mean = float(ranked["spearman"].mean()) if len(ranked) else None
        out.append({"dataset": ds, "groups": len(g), "ranked": len(ranked), "mean_spearman": mean,
                    "min_spearman": float(ranked["spearman"].min()) if len(ranked) else None,
                    "best_match": float(multi["best_match"].mean()) if len(multi) else None,
                    "meets": None if mean is None else mean >= TARGET})
    return pd.DataFrame(out)


def sample_groups(df: pd.DataFrame, keys: list, every: int = 1, cap: int | None = None) -> pd.DataFrame:
    """Every ``every``-th group of ``df`` by ``keys`` (file order), each cut to at most ``cap`` rows spread
    evenly over it (deterministic; for ``--quick``).

    >>> df = pd.DataFrame({"k": [1, 1, 1, 1, 2, 3, 3], "x": range(7)})
    >>> sample_groups(df, ["k"], every=2, cap=2)["x"].tolist()
    [0, 3, 5, 6]
    """
    parts = []
    for i, (_, g) in enumerate(df.groupby(keys, sort=False, dropna=False)):
        if i % every:
            continue
        if cap is not None and len(g) > cap:
            g = g.iloc[np.unique(np.linspace(0, len(g) - 1, cap).round().astype(int))]
        parts.append(g)
    return pd.concat(parts).reset_index(drop=True) if parts else df.iloc[:0]


def _training_frame(dataset: str, quick: bool, workers: int) -> pd.DataFrame:
    if dataset == "narayanan_table2":
        df = training.narayanan_rows()
    else:
        df = training.vtrain_rows(dataset.split("_")[1])
        if quick and dataset == "vtrain_single":
            df = sample_groups(df, ["hidden", "layers", "heads", "seq", "gpus", "global_batch"], every=8, cap=8)
    r = training.evaluate(df, workers=workers)
    if dataset == "narayanan_table2":
        return pd.DataFrame({"dataset": dataset, "group": r["label"].str.split(" on ").str[0].str.split(" ").str[-1],
                             "layout": r["label"], "measured": r["measured_tflops"],
                             "predicted": r["predicted_tflops"]})
    group = [f"hidden {h:g}, {l:g} layers, seq {s:g}, {n:g} GPUs, batch {b:g}" for h, l, s, n, b in
             zip(r["hidden"], r["layers"], r["seq"], r["gpus"], r["global_batch"])]
    layout = [f"t{t:g} d{d:g} p{p:g} mb{m:g}" for t, d, p, m in
              zip(r["tensor"], r["data"], r["pipeline"], r["microbatch"])]
    return pd.DataFrame({"dataset": dataset, "group": group, "layout": layout,
                         "measured": r["global_batch"] / r["measured_time_s"],
                         "predicted": r["global_batch"] / r["predicted_time_s"]})


def _modern_frame(dataset: str, quick: bool, workers: int) -> pd.DataFrame:
    df = modern.rows(dataset)
    df = df[(df["unmappable"] == "") & df["measured_tps"].notna()].reset_index(drop=True)  # not the runs that OOMed
    if quick and dataset == "llmfoundry":
        df = sample_groups(df, ["group"], cap=6)
    r = modern.evaluate(df, workers=workers)
    if dataset.startswith("megatron_bridge"):  # a layout: everything but the container
        layout = [f"gbs {g} mbs {m} seq {s} tp {t} pp {p} cp {c} vp {v} zero {z} {d}" for g, m, s, t, p, c, v, z, d in
                  zip(r["global_batch"], r["microbatch"], r["seq"], r["tensor"], r["pipeline"], r["context"],
                      r["interleave"], r["zero_stage"], r["dtype"])]
        if dataset == "megatron_bridge_moe":
            layout = [f"{lay} ep {e} {disp}" for lay, e, disp in zip(layout, r["expert"], r["moe_dispatcher"])]
    elif dataset == "llmfoundry":
        layout = [f"{lab}, mb {m:g}, {d}" for lab, m, d in zip(r["label"], r["microbatch"], r["dtype"])]
    elif dataset == "bigscience":  # a layout measured on several days is one layout
        layout = [f"d{d:g} t{t:g} p{p:g} mb{m:g} gbs {g:g} zero {z:g}" for d, t, p, m, g, z in
                  zip(r["data"], r["tensor"], r["pipeline"], r["microbatch"], r["global_batch"], r["zero_stage"])]
    else:
        layout = r["label"].tolist()
    return pd.DataFrame({"dataset": dataset, "group": r["group"], "layout": layout, "measured": r["measured_tps"],
                         "predicted": r["predicted_tps"]})


AB_SETS = ("megatron_bridge_ab", "megatron_dsv3_ab")  # :func:`ab_pairs`' sets (module doc)


def ab_pairs(workers: int = 2) -> pd.DataFrame:
    """Per case of each A/B pair (module doc) but the first: the measured and predicted speed-up over the pair's first
    case (its step time over the case's) and the predicted one's error, ``predicted / measured - 1``.

    >>> t = ab_pairs(workers=1)
    >>> t["pair"].tolist()[:1], bool((t["measured_speedup"] > 0).all())
    (['hybridep-ep-overlap'], True)
    """
    r = modern.evaluate(pd.concat([modern.rows(s) for s in AB_SETS], ignore_index=True), workers=workers)
    out = []
    for pair, g in r.groupby("group", sort=False):
        base = g.iloc[0]
        key = "measured_tps" if np.isfinite(base["measured_tps"]) else "measured_tflops"
        for _, c in g.iloc[1:].iterrows():
            meas = c[key] / base[key]
            pred = c["predicted_tps"] / base["predicted_tps"]
            out.append({"pair": pair, "case": c["label"].split(": ", 1)[1], "base": base["label"].split(": ", 1)[1],
                        "measured_speedup": meas, "predicted_speedup": pred, "error": pred / meas - 1})
    return pd.DataFrame(out)


def frames(datasets=SETS, quick: bool = False, workers: int = 2) -> pd.DataFrame:
    """Measured and predicted throughput of every layout of ``datasets`` (:data:`SETS`) in :func:`rank_groups`'s
    shape. ``quick``: one vTrain single-node group in 8 (each cut to 8 layouts) and at most 6 layouts of each
    llm-foundry group."""
    bad = [d for d in datasets if d not in SETS]
    if bad:
        raise ValueError(f"dataset: unknown {bad[0]!r}; allowed: {', '.join(SETS)}")
    parts = [(_training_frame if d in SETS[:3] else _modern_frame)(d, quick, workers) for d in datasets]
    return pd.concat(parts, ignore_index=True)
