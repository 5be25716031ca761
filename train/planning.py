"""Planning a run to a time budget: the number of epochs from a probe of the run itself.

A OneCycle schedule is laid out over the whole run, so the number of epochs must be known before the
first step.  ``train(config, run_dir, plan_epochs=fn)`` (a new run, not a resumed one) first runs
``probe``: training steps and validation batches that are not timed (cuFFT plans, autotuning,
compilation, CUDA graph capture; at least ``WARMUP_STEPS``, and through the batches timed next, so these
meet nothing for the first time), then ``PROBE_STEPS`` of each timed one by one with
the device synchronized (``petrov.train.timing.clock``), on the run's own model, batches, device
and compiled code -- the compiled code stays warm for the run -- and writes the epoch's checkpoints once
into a temporary folder of the run directory (short epochs on a GPU spend a few percent there).  The model's weights and every random
number generator are put back afterwards, and the optimizer and schedule are built afresh for the
planned epochs, so a planned run trains exactly as a run configured with that many epochs.
``fn(estimate)`` gets an ``EpochEstimate`` and returns the epochs (rank 0's answer is every rank's);
``epochs_for_budget`` is the usual rule (``run.fill_budget`` plans with it).
"""
from __future__ import annotations

import logging
import math
import statistics
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from . import checkpoint as ckpt
from . import distributed as dist_
from . import run_state, timing
from .metrics import score_batch
from .step import EpochTotals
from .timing import WARMUP_STEPS

log = logging.getLogger(__name__)

# a run planned to a time has its schedule refitted to that time when the steps that fit at the measured pace
# differ from those left by more than this share of its steps (less: timing noise, left alone)
REFIT_TOLERANCE = 0.03
PROBE_STEPS = 5  # timed steps: the median of 5 is not moved by one slow step (a neighbour's spike)
# The share of a budget a planned schedule fills (``run.fill_budget``, the budget benchmarks), the last epoch
# ending early where a whole one does not fit.  Not all of it: the probe does not time the per-epoch log
# writes, and a schedule the budget cuts short ends before its low learning-rate tail.
BUDGET_FRACTION = 0.95


@dataclass(frozen=True)
class EpochEstimate:
    """One epoch's time from a probe: ``steps`` training steps of ``step_seconds`` (median, once warm),
    ``eval_batches`` validation batches of ``eval_seconds`` and the checkpoints (``checkpoint_seconds``);
    ``warmup_seconds``: what the probe's warm-up took (not part of an epoch's pace; the run does not pay
    it again)."""

    step_seconds: float
    eval_seconds: float
    steps: int
    eval_batches: int
    warmup_seconds: float
    checkpoint_seconds: float = 0.0

    @property
    def overhead_seconds(self) -> float:
        """What an epoch spends besides its steps: the validation and the checkpoints."""
        return self.eval_batches * self.eval_seconds + self.checkpoint_seconds

    @property
    def epoch_seconds(self) -> float:
        return self.steps * self.step_seconds + self.overhead_seconds


def epochs_for_budget(estimate: EpochEstimate, minutes: float, fraction: float = BUDGET_FRACTION,
                      cap: float | None = None) -> float:
    """The epochs whose estimated time fills ``fraction`` of ``minutes``: the whole epochs that fit, then,
    where the time after them holds another epoch's validation and checkpoints and at least one step, the
    share of one more epoch's steps that fits (``optim.epochs`` with a fraction: that epoch ends early;
    whole epochs alone spend as little as ``fraction`` less one epoch).  At least one step, at most
    ``cap`` epochs; an int where no fraction is left."""
    steps = estimate.steps
    whole, extra = divmod(timing.steps_that_fit(fraction * 60.0 * minutes, estimate.step_seconds,
                                                estimate.overhead_seconds, steps), steps)
    if cap is not None and whole >= cap:
        return cap
    if extra == 0:
        return whole if whole > 0 else 1 / steps
    return whole + extra / steps


def probe_steps(steps: int = PROBE_STEPS, warmup: int = WARMUP_STEPS) -> int:
    """The training steps ``probe`` takes (warm-up and timed)."""
    return max(warmup, steps) + steps


def _warmed(source: Iterable, steps: int, warm_up: int) -> list:
    """The first ``steps`` batches of ``source``, preceded by a warm-up of ``warm_up`` steps that goes
    through those same batches: the timed steps meet batches already seen, as the epochs after the
    first do (caches built per batch shape, e.g. ``mesh_fno``'s, whose first meeting made a probe of
    fresh batches 1.25-1.3x slower than its later epochs)."""
    batches = _first(source, steps)
    return _first(batches, warm_up) + batches


def _first(source: Iterable, k: int) -> list:
    """The first ``k`` items of ``source``, going through it again if it has fewer."""
    out: list = []
    while len(out) < k:
        before = len(out)
        for item in source:
            out.append(item)
            if len(out) == k:
                break
        if len(out) == before:
            raise ValueError("nothing to probe: the split has no batch")
    return out


def _timed(run, items: list, warmup: int, device: torch.device) -> tuple[list[float], float]:
    """``run(item)`` for each item, each between two synchronized clock readings: the times after the
    first ``warmup`` items, and the time of those."""
    times = []
    for item in items:
        start = timing.clock(device)
        run(item)
        times.append(timing.clock(device) - start)
    return times[warmup:], sum(times[:warmup])


def probe(trainer: Any, steps: int = PROBE_STEPS, warmup: int = WARMUP_STEPS) -> EpochEstimate:
    """Time ``trainer``'s training step and validation batch (see the module docstring); the weights and
    the random number generators are as they were afterwards, the optimizer and schedule are not (build
    them again: ``plan`` does)."""
    device = trainer.ctx.device
    weights = {k: v.detach().clone() for k, v in trainer.model.state_dict().items()}
    rng = ckpt.rng_state()
    try:
        trainer.model.train()
        totals = EpochTotals(device)
        warm_up = probe_steps(steps, warmup) - steps
        numbered = list(enumerate(_warmed(trainer.train_batches, steps, warm_up), start=1))
        step_times, warm = _timed(lambda nb: trainer.stepper.step(nb[1], nb[0], totals), numbered, warm_up, device)
        trainer.model.eval()
        val = trainer.val_batches
        noise = val.noise_for(trainer.operator.noise)
        eval_times, eval_warm = _timed(
            lambda b: score_batch(trainer.operator, b, noise, trainer.mode.metric, trainer.eval_net,
                                  trainer.eval_compile_mode), _warmed(val, steps, warm_up), warm_up, device)
    finally:
        trainer.model.load_state_dict(weights)
        ckpt.set_rng_state(rng)
        trainer.model.train()
    return EpochEstimate(statistics.median(step_times), statistics.median(eval_times), len(trainer.train_batches),
                         len(val), warm + eval_warm, _checkpoint_seconds(trainer))


def _checkpoint_seconds(trainer: Any) -> float:
    """What writing an epoch's ``best.pt`` and ``last.pt`` takes (rank 0 writes them; 0 elsewhere)."""
    if not trainer.ctx.is_main:
        return 0.0
    trainer.run_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=".probe-", dir=trainer.run_dir) as folder:
        start = timing.clock(trainer.ctx.device)
        run_state.write_checkpoints(trainer, Path(folder), True, [ckpt.rng_state()])
        return timing.clock(trainer.ctx.device) - start


def plan(trainer: Any, plan_epochs: Callable[[EpochEstimate], float]) -> EpochEstimate:
    """``optim.epochs = plan_epochs(probe)`` (rank 0's answer on every rank), then a fresh optimizer and
    schedule for them (``trainer.build_optimization``)."""
    per_epoch = len(trainer.train_batches)
    if trainer.cfg.optim.epochs * per_epoch < probe_steps():  # OneCycle refuses a step past its end
        trainer.build_optimization(math.ceil(probe_steps() / per_epoch))
    with trainer.out_of_memory("the timing probe", trainer.batch, trainer.training_advice()):
        estimate = probe(trainer)
    epochs = dist_.broadcast_object(plan_epochs(estimate) if trainer.ctx.is_main else None, trainer.ctx)
    if not epochs * per_epoch >= 1:
        raise ValueError(f"plan_epochs returned {epochs}; a run needs at least one step (1/{per_epoch} of an epoch)")
    trainer.build_optimization(epochs)
    trainer.plan_seconds = trainer.scheduled_steps * estimate.step_seconds + trainer.epochs * estimate.overhead_seconds
    if trainer.ctx.is_main:
        log.info("planned %s epochs of ~%.1fs (a step %.3gs, warm-up %.1fs)", f"{epochs:.4g}",
                 estimate.epoch_seconds, estimate.step_seconds, estimate.warmup_seconds)
    return estimate


def fit_schedule_to(trainer: Any, budget: timing.Budget) -> None:
    """With a time budget that no longer fits the steps left (the epochs turned out slower than planned, or
    ``optim.epochs`` is more than the budget allows), the run's steps (``trainer.scheduled_steps``,
    checkpointed; the config keeps ``optim.epochs``) become those that fit at the pace so far
    (``Budget.steps_left``: the median of the recent epochs; the last epoch may end early) and the rest of
    the OneCycle schedule is run in them (``OneCycle.resize``): the run ends annealed, at the end of its
    schedule, instead of being stopped by the budget with its learning rate still high.  A run planned in
    this process (``plan``) is refitted both ways to the time its plan was to fill, at the pace measured
    rather than the probe's, when the two differ by more than ``REFIT_TOLERANCE`` of its steps (within the
    budget).  Rank 0's clock decides for every rank."""
    if trainer.epoch >= trainer.epochs or trainer.cfg.run.time_budget_minutes is None:  # the same on every rank
        return
    per_epoch, done = len(trainer.train_batches), trainer.epoch * len(trainer.train_batches)
    left = trainer.scheduled_steps - done
    fits = _steps_to_fit(budget, per_epoch, left, trainer.scheduled_steps, trainer.plan_seconds) \
        if trainer.ctx.is_main else None
    steps = dist_.broadcast_object(fits, trainer.ctx)
    if steps is None:
        return
    before, trainer.scheduled_steps = trainer.scheduled_steps, done + steps
    trainer.scheduler.resize(trainer.scheduled_steps)
    if trainer.ctx.is_main:
        step, validation = budget.pace()
        log.info("at %.3gs per step and %.1fs per validation %d more steps fit %s: the schedule now ends after "
                 "%.4g epochs (was %.4g)", step, validation, steps,
                 "the budget" if trainer.plan_seconds is None else "the planned time",
                 trainer.scheduled_steps / per_epoch, before / per_epoch)


def _steps_to_fit(budget: timing.Budget, per_epoch: int, left: int, scheduled: int,
                  plan_seconds: float | None) -> int | None:
    """The steps the schedule is to have left instead of ``left`` (None: keep it; see ``fit_schedule_to``)."""
    fits = budget.steps_left(per_epoch)
    if not fits:
        return None  # no pace yet, or not even one more step: the stop rule ends the run
    if plan_seconds is not None:
        aim = min(fits, budget.steps_left(per_epoch, until=plan_seconds))
        if aim > 0 and abs(aim - left) > REFIT_TOLERANCE * scheduled:
            return aim
    return fits if fits < left else None


__all__ = ["BUDGET_FRACTION", "EpochEstimate", "PROBE_STEPS", "REFIT_TOLERANCE", "epochs_for_budget", "fit_schedule_to",
           "plan", "probe", "probe_steps"]
