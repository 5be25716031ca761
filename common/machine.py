"""The machine a figure was measured on, as every record, card and benchmark names it.

A timing or an error reached under a time budget means little without the CPU it came from (the same
command is twice as fast on one x86 server as on another), so every place that prints or stores a
measurement takes the CPU's name from [`cpu_model`][].
"""
from __future__ import annotations

import platform
from pathlib import Path


def cpu_model() -> str:
    """The CPU's model name: the ``model name`` line of ``/proc/cpuinfo`` (Linux), else what ``platform``
    knows (the processor, else the architecture), else ``"unknown"``."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown"


__all__ = ["cpu_model"]
