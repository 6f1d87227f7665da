"""How the host deals a launch's work to the engine's pipelines (``hw/ENGINE.md`` "The host").

One function, :func:`deal_groups`, used by the host (``host/engine.py``, which builds the command lists in
this order) and by the performance model (which must count per pipeline exactly the tiles the host sends).
"""

from __future__ import annotations

__all__ = ["deal_groups", "tiles_per_pipeline"]


def deal_groups(n_groups: int, pipelines: int) -> list[list[int]]:
    """Whole (batch, head) groups ``g = b·H + h`` (``0 <= g < n_groups``) dealt to ``pipelines`` pipelines
    round-robin: per pipeline ``p`` its groups in the order it runs them, ``[p, p + P, p + 2P, ...]``.
    A group's tiles all go to its pipeline (its K/V slices are loaded once for them)."""
    if n_groups < 0 or pipelines < 1:
        raise ValueError(f"need n_groups >= 0 and pipelines >= 1, got {n_groups}, {pipelines}")
    return [list(range(p, n_groups, pipelines)) for p in range(pipelines)]


def tiles_per_pipeline(n_groups: int, tiles_per_group: int, pipelines: int) -> list[int]:
    """Tiles each pipeline runs when every group has ``tiles_per_group`` tiles (:func:`deal_groups`)."""
    return [len(g) * tiles_per_group for g in deal_groups(n_groups, pipelines)]
