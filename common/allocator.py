"""The host memory allocator: keep what a training step frees for the next step.

A training step on the CPU allocates and frees the same large activations every step (``darcy-budget-85``:
tensors of up to 30 MB).  glibc's malloc serves a request above its mmap threshold (128 KiB, raised as
large blocks are freed, at most 32 MiB) with a fresh ``mmap`` that ``free`` hands back to the kernel, trims
the top of its heap once more than twice that threshold lies free there, and gives a thread's arena back
likewise.  Each step then touches thousands of new pages again, each a page fault and a page the kernel
zeroes first: 24,000-44,000 faults per ``darcy-budget-85`` step (85 x 85, batch 8) on a 2-core Intel Xeon.

[`retain_freed_memory`][] (called by the trainer and by the surrogate inversion, whose Adam steps run through
a trained operator) sets both thresholds once, for the process: requests up to 32 MiB (the most glibc
takes) come from the heap, and the heap is not trimmed before 2 GiB lie free at its top, so freed blocks
are reused and a warm step takes no faults.  There, with 2 threads, the trainer's ``darcy-budget-85`` step
went from 161-220 ms to 145-191 ms (three alternated pairs; system time 2.5-3.0 s -> 0.6-0.8 s per 80
steps); ``burgers-latent``'s smaller step (2,500-4,800 faults) did not measurably change.  The process
keeps its peak resident memory until it ends (as PyTorch's CUDA allocator does on a GPU); larger requests
still go through ``mmap``.

Only for glibc (Linux).  Where the environment sets glibc's mmap and trim settings itself
(``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``, ``MALLOC_MMAP_MAX_``, or the
same as ``glibc.malloc.*`` tunables in ``GLIBC_TUNABLES``), nothing is changed and those settings apply:
``MALLOC_TRIM_THRESHOLD_=131072`` restores glibc's trimming, for instance.
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform

M_TRIM_THRESHOLD = -1  # mallopt parameters, from glibc's malloc.h
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 32 << 20  # glibc's largest: HEAP_MAX_SIZE / 2 on 64-bit
TRIM_THRESHOLD = 2**31 - 1  # mallopt takes an int: 2 GiB free at the heap's top before it is trimmed
SETTINGS = ("mmap_threshold", "trim_threshold", "top_pad", "mmap_max")  # glibc's names, lower case
MALLOC_VARIABLES = tuple(f"MALLOC_{name.upper()}_" for name in SETTINGS)


def user_sets_malloc(environ=os.environ) -> bool:
    """Whether ``environ`` sets glibc malloc's thresholds itself (those settings are the user's to keep):
    a ``MALLOC_*_`` variable of ``SETTINGS`` or the same as a ``glibc.malloc.*`` tunable."""
    tunables = environ.get("GLIBC_TUNABLES", "")
    return any(name in environ for name in MALLOC_VARIABLES) or any(f"glibc.malloc.{name}" in tunables
                                                                     for name in SETTINGS)


def on_glibc() -> bool:
    """Whether this process runs on Linux with glibc (whose malloc ``mallopt`` tunes)."""
    return platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"


@functools.cache
def retain_freed_memory() -> bool:
    """Set glibc malloc's mmap threshold to 32 MiB and its trim threshold to 2 GiB for this process (once);
    True where they were set, False where the C library is not glibc or the environment tunes malloc."""
    if not on_glibc() or user_sets_malloc():
        return False
    mallopt = ctypes.CDLL(None).mallopt
    mallopt.argtypes, mallopt.restype = (ctypes.c_int, ctypes.c_int), ctypes.c_int
    # both: setting either one turns off glibc's own adjustment of the other
    return bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)) and bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD))
