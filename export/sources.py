"""Which trained operator an export takes: the one place a source names a run.

A source is a run folder written by ``petrov train`` (its ``best.pt``: the model, its config and the
normalisers) or a shipped operator, ``pretrained:NAME`` (``petrov.common.shipped.resolve_source``: its folder,
once its files match its card).  [`load_source`][] is the single function that turns a source into an operator.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from ..common.path_checks import require_dir
from ..common.shipped import resolve_source
from ..operators.io import DamagedCheckpoint
from ..operators.models import model_name
from ..train.checkpoint import load_run_checkpoint, operator_from_state
from ..train.operator import NormalizedOperator

@dataclass
class Source:
    """A trained operator and what an export needs to know of it: ``operator`` (eval mode, on the CPU), the
    registered ``model`` name, ``resolution`` (points per grid axis it was trained at; None if unknown)
    and ``label`` (the source as the user named it)."""

    operator: NormalizedOperator
    model: str
    resolution: int | None
    label: str


def load_source(source: str | os.PathLike) -> Source:
    """The operator of ``source``: a run folder (its ``best.pt``) or ``pretrained:NAME``.  One line saying what is
    wrong otherwise (no such folder or shipped name, no ``best.pt``, a damaged checkpoint or card)."""
    text = os.fspath(source)
    run_dir = require_dir(resolve_source(text), "run folder")
    best = run_dir / "best.pt"
    if not best.is_file():
        found = sorted(p.name for p in run_dir.glob("*.pt") if p.is_file())
        have = f" (it holds {', '.join(found)})" if found else ""
        raise FileNotFoundError(f"run folder {text!r} has no best.pt{have}: `petrov train` writes it at the end of "
                                f"the first epoch; give a run that has trained at least one epoch")
    try:
        state = load_run_checkpoint(best)
    except DamagedCheckpoint as err:
        raise DamagedCheckpoint(f"the run's checkpoint {err.path} is damaged (corrupt or truncated?: {err.detail}); "
                                f"restore it from a copy, or train the run again", err.path, err.detail) from None
    operator = operator_from_state(state, best, "cpu")
    return Source(operator, model_name(operator.model), _trained_resolution(state, operator), text)


def _trained_resolution(state: dict[str, Any], operator: NormalizedOperator) -> int | None:
    """The grid the run trained at: its config's ``data.train_resolution``, else the input statistics' grid
    (fitted at the file's native resolution, which is then the training one); None if neither says."""
    data = (state.get("train_config") or {}).get("data") or {}
    if isinstance(data.get("train_resolution"), int):
        return int(data["train_resolution"])
    grid = getattr(operator.x_normalizer, "grid", ())
    return int(grid[0]) if grid else None


__all__ = ["Source", "load_source"]
