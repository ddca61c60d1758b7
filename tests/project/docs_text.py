"""The docs pages' text for the tests that pin their example figures (``test_docs_pages``, ``test_docs_reference``,
``test_docs_training``): a page, and the check that each literal figure is in it."""
from pathlib import Path

ROOT = Path(__file__).parents[2]


def page(name: str) -> str:
    return (ROOT / "docs" / name).read_text()


def in_page(name: str, *figures: str) -> None:
    text = page(name)
    for figure in figures:
        assert figure in text, (name, figure)
