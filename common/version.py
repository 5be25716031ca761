"""The installed petrov version (stored in checkpoints and data files, printed by ``petrov --version``)."""
from __future__ import annotations

from importlib import metadata


def petrov_version() -> str:
    """``importlib.metadata`` version of the ``petrov`` distribution, ``"unknown"`` from a bare source tree."""
    try:
        return metadata.version("petrov")
    except metadata.PackageNotFoundError:
        return "unknown"
