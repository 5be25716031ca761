"""The training step, without reading anything back to the host.

A step (``Stepper.step``): predictions as the training mode makes them (``petrov.train.rollout``),
the per-sample loss ``relL2 + γ·relH1`` in raw units, its mean over the batch's real samples (a batch
padded to a static shape weights its padding 0), backward, gradient clipping by global norm, the
optimizer and the OneCycle schedule.  Nothing of it is read on the host: the loss statistics and a
divergence flag accumulate on the device in ``EpochTotals``, read once per epoch (``finish``),
and every ``PROGRESS_EVERY`` steps for a progress bar that is drawn.  A host read would make the host
wait for the device every step, and a CUDA graph cannot contain one.

Divergence: the first batch whose loss or gradient norm is not finite is recorded on the device (its
number, which of the two, the value).  The epoch then runs to its end -- its later steps are wasted on
non-finite weights -- and ``EpochTotals.finish`` reports it before the epoch's validation and
checkpoint, so ``last.pt`` keeps the last good epoch.  In a distributed run ``finish`` gathers every
rank's totals in one collective, so every rank sees the same first bad batch and all stop together.
With float16 autocast (GPUs without bfloat16) the GradScaler skips steps with non-finite gradients
itself (and reads its flag on the host every step: torch's GradScaler does), so only the loss is checked.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import torch

from ..operators.attention.mixers.performer import advance_feature_draws
from . import distributed as dist_
from .compilation import mark_step
from .data import Batch

# a drawn progress bar shows the running loss every this many steps (a host read each time)
PROGRESS_EVERY = 25
_NONE = 2**62  # no bad batch (exact as a float64: the totals travel as one float64 row)
_WHAT = ("loss", "gradient norm")


@dataclass(frozen=True)
class Diverged:
    """The first non-finite value of an epoch: ``what`` ("loss" or "gradient norm") at batch ``batch``."""

    what: str
    value: float
    batch: int


class EpochTotals:
    """Device-side sums of an epoch: the loss over the real samples, their count (host), and the first
    batch whose loss or gradient norm was not finite."""

    def __init__(self, device: torch.device):
        self.loss_sum = torch.zeros((), dtype=torch.float64, device=device)
        self.count = 0
        self.first_bad = torch.full((), _NONE, dtype=torch.float64, device=device)
        self.what = torch.zeros((), dtype=torch.float64, device=device)
        self.value = torch.zeros((), dtype=torch.float64, device=device)

    def add_loss(self, batch_sum: torch.Tensor, n: int, batch: int) -> None:
        self.loss_sum += batch_sum.double()
        self.count += n
        self.flag(batch_sum, 0, batch)

    def flag(self, value: torch.Tensor, what: int, batch: int) -> None:
        """Record ``value`` at ``batch`` if it is the epoch's first non-finite value (device-side)."""
        first = ~torch.isfinite(value) & (self.first_bad == _NONE)
        self.first_bad.masked_fill_(first, batch)
        self.what.masked_fill_(first, what)
        self.value = torch.where(first, value.double(), self.value)

    def running_mean(self) -> float:
        """The mean loss so far on this process (a host read: for a progress bar)."""
        return self.loss_sum.item() / max(self.count, 1)

    def row(self) -> torch.Tensor:
        """``(loss sum, count, first bad batch, what, value)``: one float64 row on the device."""
        count = torch.tensor(float(self.count), dtype=torch.float64, device=self.loss_sum.device)
        return torch.stack([self.loss_sum, count, self.first_bad, self.what, self.value])

    @classmethod
    def from_row(cls, row: list[float], device: torch.device) -> "EpochTotals":
        """The totals a ``row()`` (read on the host) holds: an epoch continued where it was stopped."""
        totals = cls(device)
        for name, value in zip(("loss_sum", "first_bad", "what", "value"), (row[0], *row[2:])):
            getattr(totals, name).fill_(value)
        totals.count = int(row[1])
        return totals

    def gather(self, ctx: dist_.Context) -> list[list[float]]:
        """Every rank's ``row()`` on the host: one collective and one host read."""
        return dist_.all_gather_tensor(self.row(), ctx).tolist()

    def finish(self, ctx: dist_.Context) -> tuple[float, Diverged | None]:
        """The epoch's mean loss over every rank's samples and its first divergence: one collective
        and one host read."""
        return summarize(self.gather(ctx))


def summarize(rows: list[list[float]]) -> tuple[float, Diverged | None]:
    """The mean loss and the first divergence of the ranks' ``EpochTotals.row()`` s."""
    total, count = sum(r[0] for r in rows), sum(r[1] for r in rows)
    bad = min(rows, key=lambda r: (r[2], r[3]))  # the first batch; its loss before its gradient
    diverged = None if bad[2] == _NONE else Diverged(_WHAT[int(bad[3])], bad[4], int(bad[2]))
    return total / max(count, 1), diverged


class BatchLoss(torch.nn.Module):
    """A batch's per-sample training loss: ``forward(x, y, sample_ids, loss_weights=None, **inputs) -> (loss
    (b,), prediction)``, raw inputs to ``relL2 + γ·relH1`` in raw units (``loss_weights``: point sets'
    quadrature weights for the loss; ``inputs``: the model's other inputs, ``Batch.inputs``) -- the input
    normalisation and noise, the net under autocast, the decoding and the loss in one call, so that a
    compiled run captures all of it as one graph (with ``"cuda-graphs"``: one CUDA graph for the forward,
    one for the backward) rather than the model alone with the rest launched op by op around it (one
    ``darcy-gpu`` step compiled on a CPU: 152 operations outside the compiled graphs with the model alone
    compiled, 36 with this).

    ``operator``: the NormalizedOperator; ``net``: what the forward calls in place of its plain model (the
    DDP-wrapped and/or compiled model, or the model itself); ``noise``: what adds the input noise
    (``Batches.noise_for``); ``amp_dtype``: autocast of the net's forward (None: float32) -- only the
    net is autocast; the normaliser's decode and the loss run in float32.  The prediction is returned for
    the check of a compiled step against the eager one (``compiled_agreement``)."""

    def __init__(self, operator, net: torch.nn.Module, mode, *, noise: Any, h1_weight: float, periodic: bool,
                 amp_dtype):
        super().__init__()
        self.operator, self.net, self.mode, self.noise = operator, net, mode, noise
        self.h1_weight, self.periodic, self.amp_dtype = h1_weight, periodic, amp_dtype

    def forward(self, x: torch.Tensor, y: torch.Tensor, sample_ids: torch.Tensor | None,
                loss_weights: torch.Tensor | None = None, **inputs) -> tuple[torch.Tensor, torch.Tensor]:
        pred = self.mode.predict(self.operator, x, y, noise=self.noise, sample_ids=sample_ids, net=self.net,
                                 amp=self.amp_dtype, **inputs)
        return self.mode.loss(pred, y, self.h1_weight, self.periodic, weights=loss_weights), pred


def batch_loss_of(loss: torch.nn.Module, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """``loss`` (a [`BatchLoss`][], compiled or not) on batch ``b``: ``(per-sample loss, prediction)``."""
    return loss(b.x, b.y, b.sample_ids, b.weights, **b.inputs)


class Stepper:
    """What a training step needs, held once: ``step(batch, number, totals)``.

    ``operator``: the NormalizedOperator (its plain model); ``loss``: the [`BatchLoss`][] the step
    differentiates (compiled as a whole, or around a compiled or DDP-wrapped net); ``compile_mode``: the
    resolved ``run.compile``; ``scaler``: float16's GradScaler or None."""

    def __init__(self, *, operator, loss: torch.nn.Module, optimizer: torch.optim.Optimizer, scheduler,
                 scaler, grad_clip: float, compile_mode: str):
        self.operator, self.batch_loss = operator, loss
        self.optimizer, self.scheduler, self.scaler = optimizer, scheduler, scaler
        self.clip = grad_clip if grad_clip > 0 else math.inf
        self.compile_mode = compile_mode
        self.params = [p for p in operator.model.parameters() if p.requires_grad]

    def loss(self, b: Batch) -> tuple[torch.Tensor, torch.Tensor]:
        """``(loss, summed per-sample loss)`` of batch ``b``: the mean over its real samples."""
        per_sample, _ = batch_loss_of(self.batch_loss, b)
        if b.sample_weight is None:
            return per_sample.mean(), per_sample.detach().sum()
        weighted = per_sample * b.sample_weight
        return weighted.sum() / b.n, weighted.detach().sum()

    def step(self, b: Batch, number: int, totals: EpochTotals) -> None:
        """One optimizer step on batch ``b`` (``number``: its place in the epoch, from 1)."""
        mark_step(self.compile_mode)
        if self.compile_mode != "off":  # a compiled forward leaves the Performer's feature redraws out
            advance_feature_draws(self.operator.model)
        loss, batch_sum = self.loss(b)
        totals.add_loss(batch_sum, b.n, number)
        self.optimizer.zero_grad(set_to_none=True)
        if self.scaler is not None:
            self.scaler.scale(loss).backward()
            self.scaler.unscale_(self.optimizer)
            torch.nn.utils.clip_grad_norm_(self.params, self.clip)
            self.scaler.step(self.optimizer)  # skips steps with inf gradients
            self.scaler.update()
        else:
            loss.backward()
            totals.flag(torch.nn.utils.clip_grad_norm_(self.params, self.clip), 1, number)
            self.optimizer.step()
        self.scheduler.step()


__all__ = ["BatchLoss", "Diverged", "EpochTotals", "PROGRESS_EVERY", "Stepper", "batch_loss_of", "summarize"]
