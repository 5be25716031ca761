"""Progress bars: every bar petrov draws (generation, import, training, inversion) comes from here.

A bar redraws itself many times a second; written into a redirected log (``petrov train ... > log``)
every redraw would stay in the file. So a bar is drawn only when asked for (``enabled``: the
``--no-progress`` flags, ``run.progress``) and when its stream, stderr, is a terminal (tqdm's own
``disable=None`` rule) — or when tqdm draws a notebook widget, which leaves nothing in any log.
"""
from __future__ import annotations

from typing import Any, Iterable

from tqdm.auto import tqdm

# tqdm.auto picks a notebook widget under Jupyter, else the terminal bar
NOTEBOOK = any(cls.__module__ == "tqdm.notebook" for cls in tqdm.__mro__)


def progress_disable(enabled: bool = True) -> bool | None:
    """tqdm's ``disable`` for a bar that is ``enabled``: True (off), None (off unless stderr is a
    terminal), or False (a notebook widget: on)."""
    if not enabled:
        return True
    return False if NOTEBOOK else None


def progress_bar(iterable: Iterable | None = None, *, enabled: bool = True, **kwargs: Any) -> tqdm:
    """``tqdm(iterable, **kwargs)`` drawn only if ``enabled`` and on a terminal (or in a notebook);
    otherwise a silent pass-through (``update``/``set_postfix`` still work and print nothing)."""
    return tqdm(iterable, disable=progress_disable(enabled), **kwargs)


__all__ = ["progress_bar", "progress_disable"]
