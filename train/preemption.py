"""Stopping a run where it is: SIGTERM or Ctrl-C in the middle of an epoch, and continuing from there.

Schedulers send SIGTERM before they kill a job (SLURM: ``--signal``, then the grace period; Kubernetes:
``terminationGracePeriodSeconds``, 30 s by default), and a requeued job runs the same command again.
Inside ``petrov train`` the signal is only recorded (``petrov.common.interrupts.deferred_interrupts``);
the training loop polls it between two steps, where the state is whole, writes ``last.pt`` with the
place in the epoch (``Position``: the steps done, and every rank's device-side loss sums and
first-bad-batch flag, ``EpochTotals``) besides what every ``last.pt`` holds (weights, optimizer,
schedule, gradient scaler, every rank's random number generators), and exits with status 143 (130 for
Ctrl-C).  The sampler's order is a function of (seed, epoch), so the steps done say which batches come
next: ``petrov train --resume`` leaves them out without reading them, and on the CPU the resumed run ends
with exactly the weights of an uninterrupted one.  A stop during validation saves the position "every
step of the epoch done"; the resumed run validates.  An epoch that diverged before the signal is not
saved (``last.pt`` keeps the last good epoch; the divergence is reported instead).

In a distributed run every rank must stop after the same step (their collectives must match), and the
signal reaches them at different moments (each node's torchrun forwards it to its own workers; a
scheduler may signal one node first).  The ranks agree by one collective of one number on the host
(``distributed.any_rank``) every ``poll_steps`` steps: every step on the CPU, every
``CUDA_POLL_STEPS`` on a CUDA device, where steps are queued ahead of the device and a collective per
step would eat into that lead (it never synchronizes the device: it is on the host).  One process alone
polls every step at no cost.  Time from the signal to the exit: at most ``poll_steps`` steps (or one
validation batch), the writing of ``last.pt``, and the process's exit.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from ..common.interrupts import interrupt_pending
from . import distributed as dist_
from .step import EpochTotals

CUDA_POLL_STEPS = 10


def poll_steps(ctx: dist_.Context) -> int:
    """Steps between two polls of the stop request (see the module docstring)."""
    return CUDA_POLL_STEPS if ctx.distributed and ctx.device.type == "cuda" else 1


class StopPoll:
    """``poll(number)``: whether to stop after step (or validation batch) ``number``; ``now()``: at a
    point every rank reaches.  Every rank gets the same answer."""

    def __init__(self, ctx: dist_.Context):
        self.ctx, self.every = ctx, poll_steps(ctx)

    def __call__(self, number: int) -> bool:
        return number % self.every == 0 and self.now()

    def now(self) -> bool:
        return dist_.any_rank(interrupt_pending(), self.ctx)


class Stopped(Exception):
    """Raised inside an epoch to leave it at a step boundary (caught by the trainer, which saves)."""


def _combined(rows: list[list[float]]) -> list[float]:
    """The ranks' totals as one row: sums of the losses and counts, the first bad batch."""
    bad = min(rows, key=lambda r: (r[2], r[3]))
    return [sum(r[0] for r in rows), sum(r[1] for r in rows), *bad[2:]]


@dataclass(frozen=True)
class Position:
    """Where in an epoch a run stopped: ``steps`` done, ``totals`` every rank's ``EpochTotals.row()``."""

    steps: int
    totals: list[list[float]]

    def to_state(self) -> dict[str, Any]:
        return {"steps": self.steps, "totals": [[float(v) for v in row] for row in self.totals]}

    @classmethod
    def from_state(cls, state: dict[str, Any] | None) -> "Position | None":
        return None if not state else cls(int(state["steps"]), [list(r) for r in state["totals"]])

    def totals_for(self, ctx: dist_.Context, device: torch.device) -> EpochTotals:
        """This rank's totals: its own row, or with another number of processes than the stopped run's,
        all of them summed on rank 0 (the epoch's mean loss is the same; its last bits may differ)."""
        if not self.totals:  # an epoch's start
            return EpochTotals(device)
        if len(self.totals) == ctx.world_size:
            return EpochTotals.from_row(self.totals[ctx.rank], device)
        return EpochTotals.from_row(_combined(self.totals), device) if ctx.is_main else EpochTotals(device)


__all__ = ["CUDA_POLL_STEPS", "Position", "StopPoll", "Stopped", "poll_steps"]
