"""A process of a distributed run that fails takes the others down, each with one line that says why.

When one process of a run stops (an exception, a kill, out of memory, its machine gone), the others
are waiting for it in a collective.  They learn it there: the collective fails at once when the
process's connections close (gloo: "Connection closed by peer"), or after
``run.collective_timeout_minutes`` when it is alive but does not answer (stuck, stopped, unreachable).

- a process that raises writes its one-line error into the run's key-value store (the one torchrun's
  rendezvous gives every worker, at ``MASTER_ADDR:MASTER_PORT``) before it exits (``report``);
- a process whose collective fails raises ``PeerFailed`` instead of the backend's message (``explain``):
  which rank failed and why, if that rank could say so; else that it ended without a word (killed, out of
  memory: its launcher's log says which signal) or did not answer in time; and how to continue (the
  same command with ``--resume``, from the run's ``last.pt``).

The store is read with a short timeout; if it is gone with the failed machine, the line says what this
process saw.  Keys are per restart of the launcher (``TORCHELASTIC_RESTART_COUNT``), so a restarted
group does not read the failure of the previous one.
"""
from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

import torch.distributed as dist

from .distributed import Context

STORE_TIMEOUT = timedelta(seconds=5)
# what gloo and NCCL say when a peer is gone or silent (torch raises some of them as plain RuntimeError)
_LOST = ("Connection closed by peer", "Connection reset by peer", "Broken pipe", "Connection refused",
         "NCCL communicator was aborted", "remote process exited")
_TIMED_OUT = ("Timed out", "timed out", "Timeout", "Watchdog caught collective operation timeout")


class PeerFailed(RuntimeError):
    """Another process of the distributed run failed or stopped answering; the message says which and
    how to continue."""


def _key() -> str:
    return f"petrov/failure/{os.environ.get('TORCHELASTIC_RESTART_COUNT', '0')}"


def _store():
    """A client of the run's store, or None (not launched by torchrun, or the store is gone)."""
    host, port = os.environ.get("MASTER_ADDR"), os.environ.get("MASTER_PORT")
    if not host or not port:
        return None
    try:
        return dist.TCPStore(host, int(port), is_master=False, timeout=STORE_TIMEOUT, wait_for_workers=False)
    except Exception:  # the store's host is gone: nothing to read or write
        return None


def collective_failure(err: BaseException) -> str | None:
    """``"lost"`` or ``"timeout"`` if ``err`` is a collective that failed because of another process, else None."""
    text = str(err)
    if not isinstance(err, (RuntimeError, dist.DistError)):
        return None
    if any(m in text for m in _TIMED_OUT) and ("recv" in text or "send" in text or "collective" in text.lower()
                                                 or isinstance(err, dist.DistError)):
        return "timeout"
    if isinstance(err, dist.DistError) or any(m in text for m in _LOST):
        return "lost"
    return None


def one_line(err: BaseException) -> str:
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0]}" if text else type(err).__name__


def report(err: BaseException, ctx: Context) -> None:
    """Write this rank's failure into the store (the first failure of the run stays)."""
    store = _store()
    if store is None:
        return
    try:
        store.compare_set(_key(), "", f"rank {ctx.rank}: {one_line(err)}")
    except Exception:  # the store went away meanwhile
        pass


def _reported() -> str | None:
    store = _store()
    if store is None:
        return None
    try:
        return store.get(_key()).decode() if store.check([_key()]) else None
    except Exception:
        return None


def resume_hint(run_dir: Path) -> str:
    """How to continue the run in ``run_dir`` (rank 0's view of it)."""
    if (run_dir / "last.pt").is_file():
        return f"continue with the same command and --resume (from {run_dir / 'last.pt'})"
    return "nothing was saved yet: run the same command again"


def explain(kind: str, ctx: Context, run_dir: Path, timeout_minutes: float) -> PeerFailed:
    """``PeerFailed`` for a collective of rank ``ctx.rank`` that failed because of another process
    (``kind``: see ``collective_failure``)."""
    others = f"rank {1 - ctx.rank}" if ctx.world_size == 2 else "another process of the run"
    reported = _reported()
    if reported is not None:
        what = f"{reported.split(':', 1)[0]} failed ({reported.split(': ', 1)[1]})"
    elif kind == "timeout":
        what = (f"{others} did not answer within run.collective_timeout_minutes = {timeout_minutes:g} (stuck, "
                f"stopped or unreachable)")
    else:
        what = (f"{others} ended without a word (killed, out of memory, or its machine went down: see its "
                f"launcher's log)")
    return PeerFailed(f"rank {ctx.rank} of {ctx.world_size} stopped: {what}; {resume_hint(run_dir)}")


__all__ = ["PeerFailed", "collective_failure", "explain", "one_line", "report", "resume_hint"]
