"""Hugging Face ``config.json`` -> graph, read as plain JSON (no ``transformers`` dependency).

Architectures (``model_type``) and what is read from them:

* ``gpt2``: ``n_layer, n_embd, n_head, n_positions, vocab_size, n_inner`` -> the zoo's GPT
  (:func:`~concurrency_model.models.transformer.gpt`: learned positions, pre-LN, tied output);
* ``bert``: ``num_hidden_layers, hidden_size, num_attention_heads, intermediate_size,
  max_position_embeddings, type_vocab_size, vocab_size`` -> the zoo's BERT (``BertModel`` with pooler);
* ``gpt_neox``: LayerNorm, biases everywhere, rotary on ``rotary_pct`` of each head,
  ``use_parallel_residual``, untied ``embed_out``;
* ``llama``, ``mistral``: RMSNorm, rotary, SwiGLU (three matrices), grouped-query attention
  (``num_key_value_heads``), ``attention_bias`` / ``mlp_bias``, ``tie_word_embeddings``;
* ``mixtral``: as mistral with a sparse mixture of ``num_local_experts`` SwiGLU experts, of which
  ``num_experts_per_tok`` run per token (parameters count all experts, work the chosen ones);
* ``qwen3_moe`` (Qwen3 Technical Report, Yang et al. 2025, §2 and Table 2): as mistral with ``head_dim``,
  QK-norm (an RMSNorm over every query and key head), ``num_experts`` experts of width ``moe_intermediate_size``,
  ``num_experts_per_tok`` a token, no shared expert; ``mlp_only_layers`` and ``decoder_sparse_step`` other than
  ``[]`` and 1 (dense layers between the sparse ones) are refused;
* ``gpt_oss`` (openai/gpt-oss @ 7b583341 ``gpt_oss/torch/model.py``): grouped-query attention with biases on
  the projections and one learned sink a head, ``num_local_experts`` SwiGLU experts with biases (``intermediate_size``
  wide) behind a router with a bias, ``experts_per_token`` / ``num_experts_per_tok`` a token. Every other layer
  attends within ``sliding_window`` (128) tokens; the builder gives every layer full causal attention (it has no
  windowed core), which overstates the windowed layers' attention work at sequences longer than the window (at
  4,096 tokens the attention cores are about 11% of GPT-OSS-120B's forward FLOP, half of that windowed [D]). The
  default sequence is ``initial_context_length`` (4,096, the pre-training context). The released MXFP4 expert
  weights are an inference format: training is modelled in the scenario's dtype;
* ``deepseek_v3``, ``deepseek_v2`` (DeepSeek-V3 Technical Report, DeepSeek-AI 2024, §2.1-2.2): multi-head latent
  attention (``q_lora_rank``, ``kv_lora_rank``, ``qk_nope_head_dim``, ``qk_rope_head_dim``, ``v_head_dim``), the
  first ``first_k_dense_replace`` layers dense (``intermediate_size``), the rest ``n_routed_experts`` experts of
  width ``moe_intermediate_size``, ``num_experts_per_tok`` a token, plus ``n_shared_experts`` shared ones (one
  MLP of ``n_shared_experts x moe_intermediate_size``) and the router's balancing bias; ``moe_layer_freq`` must be
  1; ``num_nextn_predict_layers`` multi-token prediction modules after the output layer (``mtp_layers`` overrides
  it: 0 leaves them out, as the 671B main model of the DeepSeek-V3 report's count).

The sequence length defaults to the model's context (``max_position_embeddings``, ``n_positions``),
or to ``sliding_window`` when that is shorter (inside the window the attention is exact; longer
sequences with a sliding window are not modelled). Configs of the published models are package data
(``presets/hf``): ``gpt2, bert-base-uncased, gpt-neox-20b, llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b,
llama-3-70b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mistral-7b, mixtral-8x7b, qwen3-30b-a3b, qwen3-235b-a22b,
gpt-oss-20b, gpt-oss-120b, deepseek-v3`` (each file's ``_source`` names where its values come from).
"""
from __future__ import annotations

from functools import partial
from pathlib import Path

from ..checks import count, did_you_mean, file_text, json_object, number
from ..graph import Graph
from ..models import transformer
from ..models.builder import Builder
from .presets import preset_names, presets_dir

ARCHITECTURES = ("gpt2", "bert", "gpt_neox", "llama", "mistral", "mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3",
                 "deepseek_v2")
MOE_ARCHITECTURES = ("mixtral", "qwen3_moe", "gpt_oss", "deepseek_v3", "deepseek_v2")
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu",
               "gelu_pytorch_tanh": "gelu", "gelu_python": "gelu", "quick_gelu": "gelu", "relu": "relu",
               "tanh": "tanh"}


def load_hf_config(path_or_dict) -> tuple[dict, str]:
    """The config as a dict and a name for the graph: from a dict, a ``config.json`` path, a directory
    holding one, or the name of a shipped preset (:func:`preset_names`)."""
    if isinstance(path_or_dict, dict):
        cfg = path_or_dict
        return cfg, str(cfg.get("_name_or_path") or cfg.get("model_type") or "hf_model")
    if not isinstance(path_or_dict, (str, Path)):
        raise ValueError(f"hf_config: expected a dict or a path, got {type(path_or_dict).__name__}")
    path = Path(path_or_dict)
    if path.is_dir():
        if not (path / "config.json").exists():
            raise ValueError(f"hf_config: {str(path_or_dict)!r} is a directory without a config.json")
        path = path / "config.json"
    if not path.exists():
        preset = presets_dir() / f"{path_or_dict}.json"
        if isinstance(path_or_dict, str) and preset.is_file():
            path = preset
        else:
            raise ValueError(f"hf_config: no such file {str(path_or_dict)!r} and no preset of that name"
                             f"{did_you_mean(str(path_or_dict), preset_names())}; presets: {', '.join(preset_names())}")
    cfg = json_object("hf_config", file_text("hf_config", path), path.name)
    if not isinstance(cfg, dict):
        raise ValueError(f"hf_config: {path.name} must hold a JSON object")
    name = path.parent.name if path.name == "config.json" and path.parent.name else path.stem
    return cfg, str(cfg.get("_name_or_path") or name)


def _get(cfg: dict, *keys, default=None, kind=int):
    """The first of ``keys`` present in the config, checked to be a positive ``kind``."""
    for k in keys:
        if k in cfg and cfg[k] is not None:
            v = cfg[k]
            if kind is int:
                count(f"hf_config.{k}", v)
            if kind is float:
                number(f"hf_config.{k}", v, low_ok=True, high=1, high_ok=True)
            if kind is bool and not isinstance(v, bool):
                raise ValueError(f"hf_config.{k}: must be true or false, got {v!r}")
            return v
    if default is None:
        raise ValueError(f"hf_config.{keys[0]}: missing")
    return default


def _act(cfg: dict, *keys, default: str) -> str:
    for k in keys:
        if k in cfg:
            v = cfg[k]
            if v not in ACTIVATIONS:
                raise ValueError(f"hf_config.{k}: unsupported activation {v!r}; allowed: {', '.join(ACTIVATIONS)}")
            return ACTIVATIONS[v]
    return default


def _seq(cfg: dict, seq_len, context: int) -> int:
    if seq_len is not None:
        return seq_len
    window = cfg.get("sliding_window")
    return min(context, window) if isinstance(window, int) and window > 0 else context


def _experts(cfg: dict, mt: str) -> dict:
    """The mixture-of-experts arguments of :func:`~concurrency_model.models.transformer.decoder` for a config of
    architecture ``mt`` (``ValueError`` naming the field for a top-k larger than the experts)."""
    if mt == "mixtral":
        e_key, k_keys = "num_local_experts", ("num_experts_per_tok",)
        out = {"experts": _get(cfg, e_key, default=8), "top_k": _get(cfg, *k_keys, default=2)}
    elif mt == "qwen3_moe":
        if cfg.get("mlp_only_layers") or _get(cfg, "decoder_sparse_step", default=1) != 1:
            raise ValueError("hf_config.mlp_only_layers: dense layers between the sparse ones are not modelled "
                             "(need mlp_only_layers [] and decoder_sparse_step 1)")
        e_key, k_keys = "num_experts", ("num_experts_per_tok",)
        out = {"experts": _get(cfg, e_key), "top_k": _get(cfg, *k_keys), "moe_ffn": _get(cfg, "moe_intermediate_size"),
               "qk_norm": True}
    elif mt == "gpt_oss":
        e_key, k_keys = "num_local_experts", ("num_experts_per_tok", "experts_per_token")
        out = {"experts": _get(cfg, e_key), "top_k": _get(cfg, *k_keys), "router_bias": True, "expert_bias": True,
               "sinks": True}
    else:  # deepseek_v3, deepseek_v2
        if _get(cfg, "moe_layer_freq", default=1) != 1:
            raise ValueError(f"hf_config.moe_layer_freq: {cfg['moe_layer_freq']} (dense layers between the sparse "
                             "ones) is not modelled; allowed: 1")
        e_key, k_keys = "n_routed_experts", ("num_experts_per_tok",)
        moe_ffn = _get(cfg, "moe_intermediate_size")
        shared = cfg.get("n_shared_experts") or 0
        count("hf_config.n_shared_experts", shared, low=0)
        dense = cfg.get("first_k_dense_replace") or 0
        count("hf_config.first_k_dense_replace", dense, low=0)
        out = {"experts": _get(cfg, e_key), "top_k": _get(cfg, *k_keys), "moe_ffn": moe_ffn,
               "shared_ffn": shared * moe_ffn, "dense_layers": dense, "router_bias": mt == "deepseek_v3"}
    if out["top_k"] > out["experts"]:
        k = next(k for k in k_keys if cfg.get(k) is not None)
        raise ValueError(f"hf_config.{k}: {out['top_k']} experts a token exceed the {out['experts']} experts "
                         f"(hf_config.{e_key})")
    return out


def from_hf_config(path_or_dict, batch=1, seq_len: int | None = None, value_bytes=4, fused_attention: bool = False,
                   name: str | None = None, capacity_factor: float | None = None, mtp_layers: int | None = None) -> Graph:
    """Build the graph of a Hugging Face model from its ``config.json`` (a path, a directory, a dict or a
    preset name) for ``batch`` sequences of ``seq_len`` tokens; ``capacity_factor`` gives a mixture of
    experts fixed-capacity expert buffers (:func:`~concurrency_model.models.transformer.decoder`; the
    default is dropless routing); ``mtp_layers``: DeepSeek's multi-token prediction modules (default: the
    config's ``num_nextn_predict_layers``).

    Examples
    --------
    >>> from_hf_config("llama-2-7b").params
    6738415616
    >>> g = from_hf_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    ...                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    ...                     "vocab_size": 100, "max_position_embeddings": 32})
    >>> g.params                # 2 x 36,992 + 2 x 6,400 (embedding, lm_head) + 64
    86848
    >>> round(from_hf_config("qwen3-30b-a3b", seq_len=8).params / 1e9, 2)   # the model card's 30.5B
    30.53
    """
    cfg, default_name = load_hf_config(path_or_dict)
    mt = cfg.get("model_type")
    if mt not in ARCHITECTURES:
        raise ValueError(f"hf_config.model_type: unsupported {mt!r}; allowed: {', '.join(ARCHITECTURES)}")
    if capacity_factor is not None and mt not in MOE_ARCHITECTURES:
        raise ValueError(f"capacity_factor: a {mt} model has no mixture-of-experts layers")
    if mtp_layers is not None:
        count("mtp_layers", mtp_layers, low=0)
        if mtp_layers and not mt.startswith("deepseek"):
            raise ValueError(f"mtp_layers: a {mt} model has no multi-token prediction modules")
    b = Builder(name or default_name, batch, value_bytes)
    if mt == "gpt2":
        hidden = _get(cfg, "n_embd", "hidden_size")
        ctx = _get(cfg, "n_positions", "n_ctx", "max_position_embeddings")
        common = dict(layers=_get(cfg, "n_layer", "num_hidden_layers"), hidden=hidden,
                      heads=_get(cfg, "n_head", "num_attention_heads"), seq_len=_seq(cfg, seq_len, ctx),
                      vocab=_get(cfg, "vocab_size"), ffn=_get(cfg, "n_inner", default=4 * hidden),
                      fused_attention=fused_attention, max_positions=ctx)
        if _get(cfg, "tie_word_embeddings", default=True, kind=bool):
            transformer.gpt(b, **common)
        else:
            transformer.decoder(b, **common, norm="layer", mlp="plain", act=_act(cfg, "activation_function",
                                default="gelu"), bias=True, rotary=0, tied=False)
    elif mt == "bert":
        ctx = _get(cfg, "max_position_embeddings", default=512)
        transformer.bert(b, layers=_get(cfg, "num_hidden_layers"), hidden=_get(cfg, "hidden_size"),
                         heads=_get(cfg, "num_attention_heads"), seq_len=_seq(cfg, seq_len, ctx),
                         vocab=_get(cfg, "vocab_size"), ffn=_get(cfg, "intermediate_size"),
                         fused_attention=fused_attention, max_positions=ctx,
                         type_vocab=_get(cfg, "type_vocab_size", default=2))
    else:
        hidden = _get(cfg, "hidden_size")
        heads = _get(cfg, "num_attention_heads")
        ctx = _get(cfg, "max_position_embeddings", default=2048)
        if mt == "gpt_oss":  # the window is on every other layer only; the pre-training context by default
            ctx = _get(cfg, "initial_context_length", default=ctx)
            seq = seq_len or ctx
        else:
            seq = _seq(cfg, seq_len, ctx)
        common = dict(layers=_get(cfg, "num_hidden_layers"), hidden=hidden, heads=heads,
                      seq_len=seq, vocab=_get(cfg, "vocab_size"),
                      ffn=_get(cfg, "intermediate_size", default=4 * hidden), fused_attention=fused_attention,
                      head_dim=_get(cfg, "head_dim", default=hidden // heads))
        if mt == "gpt_neox":
            transformer.decoder(b, **common, norm="layer", mlp="plain", act=_act(cfg, "hidden_act", default="gelu"),
                                bias=True, rotary=_get(cfg, "rotary_pct", default=1.0, kind=float),
                                parallel_residual=_get(cfg, "use_parallel_residual", default=True, kind=bool),
                                tied=_get(cfg, "tie_word_embeddings", default=False, kind=bool))
        else:
            moe = _experts(cfg, mt) if mt in MOE_ARCHITECTURES else {}
            if mt.startswith("deepseek"):
                moe["mla"] = {k: (cfg.get(k) or 0) if k == "q_lora_rank" else _get(cfg, k)
                              for k in transformer.MLA_KEYS}
                moe["mtp_layers"] = cfg.get("num_nextn_predict_layers") or 0 if mtp_layers is None else mtp_layers
                count("hf_config.num_nextn_predict_layers", moe["mtp_layers"], low=0)
            transformer.decoder(b, **common, kv_heads=_get(cfg, "num_key_value_heads", default=heads),
                                norm="rms", mlp="swiglu", act=_act(cfg, "hidden_act", default="silu"),
                                bias=_get(cfg, "attention_bias", default=False, kind=bool),
                                mlp_bias=_get(cfg, "mlp_bias", default=False, kind=bool), rotary=1.0,
                                tied=_get(cfg, "tie_word_embeddings", default=False, kind=bool),
                                capacity_factor=capacity_factor, **moe)
    b.graph.source = {"frontend": "hf", "model_type": mt}
    b.graph.rebuild = partial(from_hf_config, cfg, seq_len=seq_len, fused_attention=fused_attention, name=b.graph.name,
                              capacity_factor=capacity_factor, mtp_layers=mtp_layers)
    return b.graph
