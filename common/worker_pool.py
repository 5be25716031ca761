"""Process pools for CPU-bound work: ``worker_pool(k)`` starts k single-threaded spawn workers that die
with the process that started them, and are killed at once when the block using them is left by an
exception (Ctrl-C, SIGTERM, an error) instead of finishing their tasks.

Workers are started with the "spawn" method and OMP/OpenBLAS/MKL thread counts set to 1 in their
environment at start-up (the parent's environment is overridden only while the pool starts, so BLAS reads it
before it is first loaded in the child): two processes with one thread each beat one process whose sparse
solve cannot use threads.  Used by the Darcy solves of ``petrov generate`` (grids and meshes), by
``petrov train``'s data step and by ``petrov invert --workers``.
"""
from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
import threading
from concurrent.futures import ProcessPoolExecutor

from .interrupts import held_signals, quiet_worker

_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "VECLIB_MAXIMUM_THREADS",
                "NUMEXPR_NUM_THREADS")


@contextlib.contextmanager
def _single_threaded_children():
    """Temporarily set the BLAS/OpenMP thread variables to 1 so processes started meanwhile inherit them."""
    saved = {k: os.environ.get(k) for k in _THREAD_VARS}
    os.environ.update({k: "1" for k in _THREAD_VARS})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def worker_thread_settings() -> dict[str, str | None]:
    """The thread variables of the calling process (run in a worker to check what it was started with)."""
    return {k: os.environ.get(k) for k in _THREAD_VARS}


def _die_with_parent(parent: int) -> None:
    """Worker initializer: end this worker when the process that started it ends, even by kill -9;
    leave SIGINT and SIGTERM to the parent.

    On Linux the kernel sends SIGKILL on the parent's death (``prctl(PR_SET_PDEATHSIG)``); a parent
    that died before this ran is caught by the pid check.  Elsewhere workers end when their task
    queue closes, as usual.
    """
    if sys.platform.startswith("linux"):
        try:
            ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # 1 = PR_SET_PDEATHSIG
        except (OSError, AttributeError):
            pass
    if os.getppid() != parent:
        os._exit(1)
    # a progress bar (a silent one too) would make tqdm's multiprocessing lock, a named semaphore that
    # multiprocessing's resource tracker reports as leaked when the parent kills this worker
    from tqdm import tqdm

    tqdm.set_lock(threading.RLock())
    quiet_worker()  # Ctrl-C / SIGTERM of the process group: the parent stops the pool (stop_workers)


def stop_workers(pool: ProcessPoolExecutor) -> None:
    """End the pool's workers now (an interrupt or error in the parent): they ignore SIGINT and
    SIGTERM and hold no state worth finishing, so they are killed; queued work is dropped."""
    for process in list((getattr(pool, "_processes", None) or {}).values()):
        with contextlib.suppress(OSError, ValueError):
            process.kill()
    # a worker killed while it sent a result (a 421 x 421 solution is 1.4 MB, more than a pipe holds) leaves
    # part of a message in the result pipe, and the pool's manager thread would wait for the rest forever,
    # the shutdown below and the interpreter's exit with it.  This process holds the pipe's last writing end:
    # closed, the read ends (EOF) and the pool shuts down as broken
    writer = getattr(getattr(pool, "_result_queue", None), "_writer", None)
    if writer is not None:
        with contextlib.suppress(OSError):
            writer.close()
    # waiting is short now (dead workers are reaped at once) and lets the pool free its queues: without it
    # multiprocessing's resource tracker warns of leaked semaphores at exit
    pool.shutdown(wait=True, cancel_futures=True)


class WorkerPool(ProcessPoolExecutor):
    """A process pool that, left by an exception (Ctrl-C, SIGTERM, an error), kills its workers at once
    (``stop_workers``) instead of waiting for the tasks they are running: an interrupted command stops
    within a second, not after its longest task."""

    def __exit__(self, exc_type, exc, tb):
        if exc_type is None:
            return super().__exit__(exc_type, exc, tb)
        stop_workers(self)
        return False


def worker_pool(workers: int) -> WorkerPool:
    """A spawn-based process pool whose workers run single-threaded BLAS/OpenMP; reuse it across calls.

    All ``workers`` processes are started here (while the thread variables are set) and have imported this
    module; they end with the process that started them, even when it is killed. Use as a context manager
    (an exception in the block kills the workers: ``WorkerPool``), or call ``shutdown()``. The calling
    script needs the usual ``if __name__ == "__main__":`` guard (spawned children re-import the main module).
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise ValueError(f"workers must be a positive integer, got {workers!r}")
    pool = WorkerPool(max_workers=workers, mp_context=multiprocessing.get_context("spawn"),
                               initializer=_die_with_parent, initargs=(os.getpid(),))
    try:
        with _single_threaded_children(), held_signals():  # workers are spawned on demand by submit()
            warm = [pool.submit(worker_thread_settings) for _ in range(workers)]
        for fut in warm:
            fut.result()
    except BaseException:  # an interrupt while they start (raised when held_signals ends): no pool is left
        stop_workers(pool)
        raise
    return pool


__all__ = ["WorkerPool", "stop_workers", "worker_pool", "worker_thread_settings"]
