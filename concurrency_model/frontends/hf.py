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
  ``num_experts_per_tok`` run per token (parameters count all experts, work the chosen ones).

The sequence length defaults to the model's context (``max_position_embeddings``, ``n_positions``),
or to ``sliding_window`` when that is shorter (inside the window the attention is exact; longer
sequences with a sliding window are not modelled). Configs of the published models are package data
(``presets/hf``): ``gpt2, bert-base-uncased, gpt-neox-20b, llama-2-7b, llama-2-13b, llama-2-70b, llama-3-8b,
llama-3-70b, llama-3.1-8b, llama-3.1-70b, llama-3.1-405b, mistral-7b, mixtral-8x7b``.
"""
from __future__ import annotations

from functools import partial
from importlib import resources
from pathlib import Path

from ..checks import count, did_you_mean, file_text, json_object, number
from ..graph import Graph
from ..models import transformer
from ..models.builder import Builder

ARCHITECTURES = ("gpt2", "bert", "gpt_neox", "llama", "mistral", "mixtral")
ACTIVATIONS = {"silu": "silu", "swish": "silu", "gelu": "gelu", "gelu_new": "gelu", "gelu_fast": "gelu",
               "gelu_pytorch_tanh": "gelu", "gelu_python": "gelu", "quick_gelu": "gelu", "relu": "relu",
               "tanh": "tanh"}


def _presets() -> Path:
    return Path(str(resources.files("concurrency_model") / "presets" / "hf"))


def preset_names() -> list[str]:
    """Names of the Hugging Face configs shipped with the package.

    >>> "llama-2-7b" in preset_names()
    True
    """
    return sorted(p.stem for p in _presets().glob("*.json"))


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
        preset = _presets() / f"{path_or_dict}.json"
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


def from_hf_config(path_or_dict, batch=1, seq_len: int | None = None, value_bytes=4, fused_attention: bool = False,
                   name: str | None = None, capacity_factor: float | None = None) -> Graph:
    """Build the graph of a Hugging Face model from its ``config.json`` (a path, a directory, a dict or a
    preset name) for ``batch`` sequences of ``seq_len`` tokens; ``capacity_factor`` gives a mixture of
    experts fixed-capacity expert buffers (:func:`~concurrency_model.models.transformer.decoder`; the
    default is dropless routing).

    Examples
    --------
    >>> from_hf_config("llama-2-7b").params
    6738415616
    >>> g = from_hf_config({"model_type": "llama", "hidden_size": 64, "intermediate_size": 128,
    ...                     "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    ...                     "vocab_size": 100, "max_position_embeddings": 32})
    >>> g.params                # 2 x 36,992 + 2 x 6,400 (embedding, lm_head) + 64
    86848
    """
    cfg, default_name = load_hf_config(path_or_dict)
    mt = cfg.get("model_type")
    if mt not in ARCHITECTURES:
        raise ValueError(f"hf_config.model_type: unsupported {mt!r}; allowed: {', '.join(ARCHITECTURES)}")
    if capacity_factor is not None and mt != "mixtral":
        raise ValueError(f"capacity_factor: a {mt} model has no mixture-of-experts layers")
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
        common = dict(layers=_get(cfg, "num_hidden_layers"), hidden=hidden, heads=heads,
                      seq_len=_seq(cfg, seq_len, ctx), vocab=_get(cfg, "vocab_size"),
                      ffn=_get(cfg, "intermediate_size", default=4 * hidden), fused_attention=fused_attention,
                      head_dim=_get(cfg, "head_dim", default=hidden // heads))
        if mt == "gpt_neox":
            transformer.decoder(b, **common, norm="layer", mlp="plain", act=_act(cfg, "hidden_act", default="gelu"),
                                bias=True, rotary=_get(cfg, "rotary_pct", default=1.0, kind=float),
                                parallel_residual=_get(cfg, "use_parallel_residual", default=True, kind=bool),
                                tied=_get(cfg, "tie_word_embeddings", default=False, kind=bool))
        else:
            experts = _get(cfg, "num_local_experts", default=8) if mt == "mixtral" else 0
            transformer.decoder(b, **common, kv_heads=_get(cfg, "num_key_value_heads", default=heads),
                                norm="rms", mlp="swiglu", act=_act(cfg, "hidden_act", default="silu"),
                                bias=_get(cfg, "attention_bias", default=False, kind=bool),
                                mlp_bias=_get(cfg, "mlp_bias", default=False, kind=bool), rotary=1.0,
                                tied=_get(cfg, "tie_word_embeddings", default=False, kind=bool),
                                experts=experts, top_k=_get(cfg, "num_experts_per_tok", default=2),
                                capacity_factor=capacity_factor)
    b.graph.source = {"frontend": "hf", "model_type": mt}
    b.graph.rebuild = partial(from_hf_config, cfg, seq_len=seq_len, fused_attention=fused_attention, name=b.graph.name,
                              capacity_factor=capacity_factor)
    return b.graph
