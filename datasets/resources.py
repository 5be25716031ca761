"""Admission before a long write: is there memory for one chunk of work and disk for the rest of the file?

A generation, a merge or an import that cannot fit is refused before any work, with what it needs, what
is there and what to do (a smaller chunk, a lower resolution, fewer samples, some free space).
"""
from __future__ import annotations

from pathlib import Path

from ..common.files import NoSpace, Unwritable, existing_ancestor, format_size, free_space, probe_writable


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


def check_disk(need: int, directory: Path, advice: str) -> None:
    """``NoSpace`` if ``directory`` has fewer than ``need`` bytes free (``advice``: what to do then);
    ``Unwritable`` instead if nothing can be written there at all (``/proc`` has 0 bytes free too)."""
    free = free_space(directory)
    if free is not None and need > free:
        # no free bytes is what an unwritable place (/proc, a read-only mount) reports too: not a full disk
        reason = probe_writable(existing_ancestor(Path(directory)))
        if reason is not None:
            raise Unwritable(f"cannot write the dataset in {directory}: {reason}; choose a writable location "
                             f"(-o)")
        raise NoSpace(f"disk full: the dataset needs about {format_size(need)} more on disk, {directory} has "
                      f"{format_size(free)} free; {advice}")


__all__ = ["available_memory", "check_disk", "check_memory"]
