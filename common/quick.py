"""``PETROV_QUICK=1``: every command at toy size, to check that a workflow runs end to end.

With the environment variable ``PETROV_QUICK`` set to ``1`` (or ``true``, ``yes``, ``on``; ``0``,
``false``, ``no``, ``off`` and the empty string leave it off, any other value is an error), the
commands and functions a workflow goes through shrink what they do, and only that:

- generating a dataset keeps at most ``QUICK_SAMPLES`` samples (same kind, grid and seed);
- a training config keeps at most ``QUICK_SPLITS`` samples per split, ``QUICK_EPOCHS`` epoch(s);
- ``petrov invert`` runs at most ``QUICK_ITERATIONS`` optimizer iterations per sample;
- the example scripts run as with ``--quick``.

Grids, models and file names stay as written, so a README or a script runs unchanged in a few
minutes; the numbers it prints are then meaningless.  The README's test (``tests/test_readme.py``)
runs every README command this way.
"""
from __future__ import annotations

import os

QUICK_ENV = "PETROV_QUICK"
QUICK_SAMPLES = 32  # samples a quick generation keeps: the three quick splits below
QUICK_SPLITS = {"n_train": 16, "n_val": 8, "n_test": 8}
QUICK_EPOCHS = 1
QUICK_ITERATIONS = 3
QUICK_ON = ("1", "true", "yes", "on")
QUICK_OFF = ("", "0", "false", "no", "off")


def quick_mode() -> bool:
    """Whether ``PETROV_QUICK`` asks for toy sizes (ValueError for a value that is neither on nor off)."""
    value = os.environ.get(QUICK_ENV, "").strip()
    if value.lower() in QUICK_OFF:
        return False
    if value.lower() in QUICK_ON:
        return True
    raise ValueError(f"{QUICK_ENV}={value!r} is neither on ({', '.join(QUICK_ON)}) nor off "
                     f"({', '.join(repr(v) for v in QUICK_OFF)}); set one of them or unset it")


def quick_samples(n_samples: int) -> int:
    """``n_samples``, capped at ``QUICK_SAMPLES`` in quick mode."""
    return min(n_samples, QUICK_SAMPLES) if quick_mode() else n_samples
