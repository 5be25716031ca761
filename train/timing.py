"""Time on any device: the clock, the warm-up, and the time budget (``run.time_budget_minutes``).

A CUDA device runs the work the host queued for it later, so the host's clock says when the work was
queued, not when it was done: ``clock`` waits for the device (``torch.cuda.synchronize``) before it
reads the time.  It is read at epoch boundaries and around the first steps only -- a synchronization
per step would keep the host from running ahead of the device.

The first steps of a process are not like the others: cuFFT plans, cuBLAS autotuning, the compilation
of ``run.compile`` and the capture of CUDA graphs happen there (seconds to minutes against milliseconds
per step).  ``WarmupTimer`` times the first ``WARMUP_STEPS`` steps of the process one by one;
an epoch's *steady* time (``EpochTime.steady``) is its later steps' pace extrapolated to all its
steps.  ``Budget`` stops a run when the time spent plus the next epoch's steady estimate would pass
the budget: the warm-up counts as time spent (it was spent) but not as the pace of later epochs.
``Budget.steps_left`` is how many more steps fit at their typical pace (whole epochs, then part of one more
that leaves time for its validation): the trainer shortens the learning-rate schedule to them when the
steps planned no longer fit (epochs slower than planned), so that the run ends at the end of its schedule
rather than being stopped in the middle of it, and a run planned to a time fits its schedule to that time.
"""
from __future__ import annotations

import contextlib
import math
import statistics
import time
from dataclasses import dataclass
from typing import Iterator

import torch

# CUDA graphs under torch.compile(mode="reduce-overhead") run a step eagerly, then record it, then replay:
# the third step is the first at the steady pace
WARMUP_STEPS = 3
PACE_EPOCHS = 5  # Budget.pace: the median of this many recent epochs


def clock(device: torch.device) -> float:
    """Seconds on a monotonic clock once ``device`` has finished the work queued so far."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)
    return time.perf_counter()


@dataclass(frozen=True)
class EpochTime:
    """Where an epoch's time went: ``train`` seconds over ``steps`` steps (of which the first
    ``warmup_steps`` took ``warmup`` seconds) and ``validation`` seconds."""

    train: float
    validation: float
    steps: int
    warmup: float = 0.0
    warmup_steps: int = 0

    @property
    def seconds(self) -> float:
        return self.train + self.validation

    @property
    def step_seconds(self) -> float:
        """A step at the pace after the warm-up, ``(train − warmup) / (steps − warmup_steps)``; an epoch
        with no step after its warm-up is taken as it was (nothing to extrapolate from)."""
        if self.steps <= self.warmup_steps:
            return self.train / max(self.steps, 1)
        return (self.train - self.warmup) / (self.steps - self.warmup_steps)

    def steady(self, steps: int | None = None) -> float:
        """An epoch of ``steps`` steps (this one's by default) at ``step_seconds``, plus the validation."""
        return self.step_seconds * (self.steps if steps is None else steps) + self.validation


class WarmupTimer:
    """Times the first ``steps`` steps of a process one by one (each ``step`` block between two
    ``clock`` readings); later steps pass untimed.  ``take`` returns what the current epoch spent
    in warm-up steps and how many, and starts the next epoch's count."""

    def __init__(self, device: torch.device, steps: int = WARMUP_STEPS):
        self.device, self.left = device, steps
        self.seconds, self.count = 0.0, 0

    @contextlib.contextmanager
    def step(self) -> Iterator[None]:
        if self.left <= 0:
            yield
            return
        start = clock(self.device)
        yield
        self.seconds += clock(self.device) - start
        self.count += 1
        self.left -= 1

    def take(self) -> tuple[float, int]:
        seconds, count = self.seconds, self.count
        self.seconds, self.count = 0.0, 0
        return seconds, count


def steps_that_fit(seconds: float, step_seconds: float, overhead_seconds: float, steps_per_epoch: int) -> int:
    """The training steps that fit in ``seconds``: whole epochs of ``steps_per_epoch`` steps of
    ``step_seconds`` and ``overhead_seconds`` each (validation, checkpoints), then, where the time after
    them holds another overhead and at least one step, the steps of a last, shorter epoch."""
    epoch = step_seconds * steps_per_epoch + overhead_seconds
    whole = max(0, math.floor(seconds / epoch))
    rest = seconds - whole * epoch - overhead_seconds
    extra = min(steps_per_epoch - 1, max(0, math.floor(rest / step_seconds))) if step_seconds > 0 else 0
    return whole * steps_per_epoch + extra


class Budget:
    """``run.time_budget_minutes`` (None: no budget) as a stop rule, measured from ``start``."""

    def __init__(self, minutes: float | None, device: torch.device):
        self.seconds = None if minutes is None else 60.0 * minutes
        self.device = device
        self.started = 0.0
        self.epochs: list[EpochTime] = []

    def start(self) -> None:
        self.started = clock(self.device)

    def elapsed(self) -> float:
        return clock(self.device) - self.started

    def record(self, epoch: EpochTime) -> None:
        self.epochs.append(epoch)

    def next_epoch(self, steps: int | None = None) -> float:
        """The next epoch's estimate (of ``steps`` steps; as many as the epoch timed by default): the first
        epoch's steady time while it is the only one, then the slowest of the later epochs (the first,
        which holds the warm-up, no longer counts)."""
        if not self.epochs:
            return 0.0
        later = self.epochs[1:] or self.epochs
        return max(e.steady(steps) for e in later)

    def pace(self) -> tuple[float, float]:
        """The typical ``(step, validation)`` seconds: medians over the last ``PACE_EPOCHS`` epochs after
        the first (``(0, 0)`` until there is one).  The first epoch is left out even past its warm-up
        steps: its steps are the first to meet each sample (caches built per mesh, memory first touched;
        1.3x the later epochs of ``mesh_fno``).  Unlike ``next_epoch``'s slowest epoch, one slow epoch (a
        neighbour's spike) does not move it, and a machine that slows down for good moves it within a
        few epochs."""
        later = self.epochs[1:][-PACE_EPOCHS:]
        if not later:
            return 0.0, 0.0
        return statistics.median(e.step_seconds for e in later), statistics.median(e.validation for e in later)

    def steps_left(self, steps_per_epoch: int, until: float | None = None) -> int | None:
        """The training steps that still fit in the budget (or before ``until`` seconds from the start) at
        ``pace``: whole epochs of ``steps_per_epoch`` steps and their validation, then, where the time left
        after them holds a validation and at least one step, the steps of a last, shorter epoch (None: no
        budget, or no epoch after the first timed yet)."""
        step, validation = self.pace()
        if self.seconds is None or step <= 0.0:
            return None
        return steps_that_fit((self.seconds if until is None else until) - self.elapsed(), step, validation,
                              steps_per_epoch)

    def exhausted(self, steps: int | None = None) -> bool:
        """Whether another epoch (of ``steps`` steps) would end past the budget."""
        return self.seconds is not None and self.elapsed() + self.next_epoch(steps) > self.seconds


__all__ = ["Budget", "EpochTime", "PACE_EPOCHS", "WARMUP_STEPS", "WarmupTimer", "clock", "steps_that_fit"]
