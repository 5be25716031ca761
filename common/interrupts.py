"""Ctrl-C and SIGTERM: the parent stops cleanly, its worker processes stay quiet.

- [`stop_on_signals`][] (the ``petrov`` command runs every command inside it): SIGTERM raises
  [`Terminated`][], a ``KeyboardInterrupt``, so the clean-up of Ctrl-C runs for both (locks
  removed, partial files kept, one line printed, exit status 130 or 143).  An interrupt Python had
  to drop (raised inside a destructor, where it can only be printed) is remembered, not printed, and
  raised again at the next [`raise_if_interrupted`][] (the generation calls it) and when the block
  ends, so a Ctrl-C is never lost.
- ``deferred_interrupts``: inside it the first Ctrl-C or SIGTERM is recorded, not raised, so that
  the code can stop where its state is whole (the training loop: between two steps, after saving where
  it is) -- it polls ``interrupt_pending`` -- and the interrupt is raised when the block ends.  A
  repeated SIGTERM changes nothing (a scheduler's and a launcher's may both arrive); a second Ctrl-C is
  raised at once (a person who wants it to stop now).
- [`held_signals`][]: worker processes are started inside it.  A terminal's Ctrl-C and a SIGTERM
  sent to the process group reach the workers too; started with both signals blocked, a worker never
  sees them before its initializer runs (torch installs its own SIGTERM handler in a DataLoader worker
  first, which would make it die noisily and the parent report a dead worker), and the parent takes a
  signal that arrived meanwhile once the workers are started (not half-way through starting them).
- the initializers: [`quiet_worker`][] (the Darcy solver pool) ignores both signals, the parent
  kills the pool itself; [`loader_worker`][] (DataLoader workers) ignores both too: a signal sent to
  the process group must not take a batch away from a trainer that stops at the next step boundary;
  the parent ends its workers when it stops (torch sends each a sentinel, which a worker takes after the
  sample it is reading).  Either way no worker prints a traceback, and both end with the parent when it
  is killed outright (their parent-death watch).
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


_SIGNALS = (signal.SIGINT, signal.SIGTERM)
_pending: list[int] = []
# pid: the process that installed the handler (a forked worker inherits it); held, deferred: nesting depths
_state = {"pid": 0, "held": 0, "deferred": 0}


def _raise_for(signum: int) -> None:
    raise Terminated("terminated") if signum == signal.SIGTERM else KeyboardInterrupt()


def _handler(signum: int, frame: Any) -> None:
    if os.getpid() != _state["pid"]:
        return  # a forked worker before its initializer ran: the parent stops it
    first = not _pending
    _pending.append(signum)
    if _state["deferred"] and (first or signum == signal.SIGTERM):
        return  # polled by interrupt_pending, raised when deferred_interrupts ends
    if not _state["held"]:  # else raised when held_signals ends
        _raise_for(signum)


def raise_if_interrupted() -> None:
    """Raise the interrupt that arrived inside [`stop_on_signals`][] if it was dropped on the way
    (inside ``deferred_interrupts``: nothing, the block's owner stops first)."""
    if _pending and not _state["deferred"]:
        _raise_for(_pending[0])


def interrupt_pending() -> bool:
    """Whether a Ctrl-C or SIGTERM arrived that has not been raised yet (inside
    ``deferred_interrupts``: the signal to stop at the next point where the state is whole)."""
    return bool(_pending)


def raise_interrupt() -> None:
    """Raise the pending interrupt, or ``Terminated`` if none arrived here (a process that stops with
    the others of its group, one of which received the signal)."""
    _raise_for(_pending[0] if _pending else signal.SIGTERM)


@contextlib.contextmanager
def deferred_interrupts() -> Iterator[None]:
    """Inside the block the first Ctrl-C or SIGTERM is only recorded (``interrupt_pending``); it is
    raised when the block ends without an exception.  Without ``stop_on_signals`` around it (the
    ``petrov`` command's), signals keep Python's own handling."""
    _state["deferred"] += 1
    try:
        yield
    finally:
        _state["deferred"] -= 1
    raise_if_interrupted()


def exit_status(err: KeyboardInterrupt) -> int:
    """130 for Ctrl-C (SIGINT), 143 for SIGTERM: 128 + the signal's number, as a shell reports it."""
    return 128 + (signal.SIGTERM if isinstance(err, Terminated) else signal.SIGINT)


@contextlib.contextmanager
def stop_on_signals() -> Iterator[None]:
    """Inside the block SIGINT raises KeyboardInterrupt and SIGTERM [`Terminated`][]; a dropped
    one is raised when the block ends.  Outside the main thread it does nothing."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    # a signal the caller ignores (a background job's SIGINT, nohup) stays ignored, as Python does itself
    previous = {s: signal.signal(s, _handler) for s in _SIGNALS if signal.getsignal(s) is not signal.SIG_IGN}
    _state["pid"] = os.getpid()
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
    """Start worker processes inside this block: SIGINT and SIGTERM are blocked in this thread (a
    process started meanwhile inherits the block) and, under [`stop_on_signals`][], one that arrives
    is raised when the block ends."""
    if not hasattr(signal, "pthread_sigmask"):  # pragma: no cover - not POSIX
        yield
        return
    previous = signal.pthread_sigmask(signal.SIG_BLOCK, set(_SIGNALS))
    _state["held"] += 1
    try:
        yield
    finally:
        _state["held"] -= 1
        signal.pthread_sigmask(signal.SIG_SETMASK, previous)
    if not _state["held"]:
        raise_if_interrupted()


def _unblock() -> None:
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, set(_SIGNALS))


def quiet_worker(*_: Any) -> None:
    """Initializer of a pool worker the parent kills itself: ignore SIGINT and SIGTERM."""
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    _unblock()


def loader_worker(*_: Any) -> None:
    """Initializer of a DataLoader worker: ignore SIGINT and SIGTERM (the parent ends it), and do not
    print the connection errors of its threads (torch passes tensors to the parent through a socket
    per batch; a parent that stops mid-way resets it)."""
    for s in _SIGNALS:
        signal.signal(s, signal.SIG_IGN)
    printer = threading.excepthook
    threading.excepthook = lambda args: None if issubclass(args.exc_type, (ConnectionError, EOFError)) \
        else printer(args)
    _unblock()


__all__ = ["Terminated", "deferred_interrupts", "exit_status", "held_signals", "interrupt_pending", "loader_worker",
           "quiet_worker", "raise_if_interrupted", "raise_interrupt", "stop_on_signals"]
