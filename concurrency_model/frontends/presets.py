"""The Hugging Face configs shipped with the package (``presets/hf``): their directory and names, read without
building a graph (a scenario naming one is keyed and cached without importing the model builders, issue 41)."""
from __future__ import annotations

from importlib import resources
from pathlib import Path


def presets_dir() -> Path:
    """The directory of the shipped configs.

    >>> (presets_dir() / "llama-2-7b.json").is_file()
    True
    """
    return Path(str(resources.files("concurrency_model") / "presets" / "hf"))


def preset_names() -> list[str]:
    """Names of the Hugging Face configs shipped with the package.

    >>> "llama-2-7b" in preset_names()
    True
    """
    return sorted(p.stem for p in presets_dir().glob("*.json"))


__all__ = ["presets_dir", "preset_names"]
