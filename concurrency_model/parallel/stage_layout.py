"""``parallel.stage_split`` given as a layout: Megatron-Core's ``pipeline_model_parallel_layout`` as decoder layers per
virtual stage (:mod:`.partition` prices it). Kept apart from :mod:`.partition` so that loading a scenario, which checks
the field, imports no numerical library."""
from __future__ import annotations

from ..checks import count


def check_stage_layout(layout, pipeline: int | None, interleave: int = 1) -> tuple[int, ...]:
    """``parallel.stage_split`` given as a layout (module doc): a list of ``pipeline x interleave`` counts of decoder
    layers, each an integer >= 0, every pipeline rank's sum at least 1, as a tuple; ``ValueError`` naming the field.
    ``pipeline`` ``None`` (a sweep, which searches the degrees): the counts alone are checked.

    >>> check_stage_layout([4, 4, 4, 1], 4), check_stage_layout([4, 4, 4, 1], 2, 2)
    ((4, 4, 4, 1), (4, 4, 4, 1))
    >>> check_stage_layout([4, 4, 1], 2)
    Traceback (most recent call last):
    ...
    ValueError: parallel.stage_split: a layout of 3 virtual stages; pipeline x interleave = 2 x 1 = 2
    """
    where = "parallel.stage_split"
    if not isinstance(layout, (list, tuple)) or not layout:
        raise ValueError(f"{where}: expected balanced, layers, counted or a list of decoder layers per virtual stage, "
                         f"got {layout!r}")
    out = tuple(count(f"{where}[{i}]", x, low=0) for i, x in enumerate(layout))
    if not sum(out):
        raise ValueError(f"{where}: the layout holds no decoder layer")
    if pipeline is None:
        return out
    if len(out) != pipeline * interleave:
        raise ValueError(f"{where}: a layout of {len(out)} virtual stages; pipeline x interleave = {pipeline} x "
                         f"{interleave} = {pipeline * interleave}")
    empty = [r for r in range(pipeline) if not sum(out[r::pipeline])]
    if empty:
        entries = ", ".join(str(i) for i in range(empty[0], len(out), pipeline))
        raise ValueError(f"{where}: pipeline rank {empty[0]} holds no decoder layer (its entries: {entries})")
    return out
