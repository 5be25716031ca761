"""Ctrl-C and SIGTERM: the parent stops cleanly, its worker processes stay quiet.

- :func:`stop_on_signals` (the ``petrov`` command runs every command inside it): SIGTERM raises
  :class:`Terminated`, a ``KeyboardInterrupt``, so the clean-up of Ctrl-C runs for both (locks
  removed, partial files kept, one line printed, exit status 130 or 143).  An interrupt Python had
  to drop (raised inside a destructor, where it can only be printed) is remembered and raised again
  at the next :func:`raise_if_interrupted` (the training loop and the generation call it) and when
  the block ends, so a Ctrl-C is never lost.
- :func:`quiet_worker`: the initializer of worker processes (DataLoader workers, the Darcy solver
  pool), which :func:`held_signals` covers until it runs (a forked worker inherits a handler that does
  nothing outside the process that installed it).  A terminal's Ctrl-C and a SIGTERM sent to the process group reach the workers too; they
  ignore both and leave the stopping to the parent, which shuts them down (no worker tracebacks, and
  no race between a dead worker and the parent's own interrupt).  They still end with the parent
  when it is killed outright (their own parent-death watch).
"""
from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from typing import Any, Iterator


class Terminated(KeyboardInterrupt):
    """SIGTERM received (handled like Ctrl-C's KeyboardInterrupt; exit status 143)."""


_pending: list[int] = []
_owner = {"pid": 0}  # the process that installed the handler (a forked worker inherits it)


def _raise_for(signum: int) -> None:
    raise Terminated("terminated") if signum == signal.SIGTERM else KeyboardInterrupt()


def _handler(signum: int, frame: Any) -> None:
    if os.getpid() != _owner["pid"]:
        return  # a forked worker (DataLoader) before its initializer ran: the parent stops it
    _pending.append(signum)
    _raise_for(signum)


def raise_if_interrupted() -> None:
    """Raise the interrupt that arrived inside :func:`stop_on_signals` if it was dropped on the way."""
    if _pending:
        _raise_for(_pending[0])


def exit_status(err: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (SIGINT), 143 for SIGTERM: 128 + the signal's number, as a shell reports it."""
    return 128 + (signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block SIGINT raises KeyboardInterrupt and SIGTERM :class:`Terminated`; a dropped
    one is raised when the block ends.  Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the caller ignores (a background job's SIGINT, nohup) stays ignored, as Python does itself
    previous = {s: signal.signal(s, _handler) for s in (signal.SIGINT, signal.SIGTERM)
                if signal.getsignal(s) is not signal.SIG_IGN}
    _owner["pid"] = os.getpid()
    _pending.clear()
    printer = sys.unraisablehook

    def dropped(unraisable: Any) -> None:  # an interrupt lost in a destructor: raised again, not printed
        if not (isinstance(unraisable.exc_value, KeyboardInterrupt) and _pending):
            printer(unraisable)

    sys.unraisablehook = dropped
    try:
        yield
        raise_if_interrupted()
    finally:
        sys.unraisablehook = printer
        for s, handler in previous.items():
            signal.signal(s, handler)
        _pending.clear()


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Block SIGINT and SIGTERM in this thread while the block starts worker processes: a process
    started meanwhile inherits the block and never sees a Ctrl-C meant for the parent (even before
    its initializer runs); the parent gets a signal that arrived meanwhile when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
    try:
        yield
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def quiet_worker(*_: Any) -> None:
    """Worker-process initializer: ignore SIGINT and SIGTERM (the parent stops the workers)."""
    for s in (signal.SIGINT, signal.SIGTERM):
        signal.signal(s, signal.SIG_IGN)


__all__ = ["Terminated", "exit_status", "held_signals", "quiet_worker", "raise_if_interrupted", "stop_on_signals"]
