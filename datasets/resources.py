"""Admission before a long write: is there memory for one chunk of work and disk for the rest of the file?

A generation, a merge or an import that cannot fit is refused before any work, with what it needs, what
is there and what to do (a smaller chunk, a lower resolution, fewer samples).  The disk is checked by
``petrov.common.path_checks.require_space``, with the writer's advice.
"""
from __future__ import annotations

from ..common.disk_space import format_size


def available_memory() -> int | None:
    """Bytes of memory available to a new allocation (``MemAvailable``), None where unknown."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def check_memory(need: int, what: str, advice: str) -> None:
    """ValueError if fewer than ``need`` bytes of memory are available (``what`` needs them; ``advice``:
    what to do then)."""
    have = available_memory()
    if have is not None and need > have:
        raise ValueError(f"{what} needs about {format_size(need)} of memory, {format_size(have)} are available; "
                         f"{advice}")


__all__ = ["available_memory", "check_memory"]
