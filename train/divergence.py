"""A training run that diverged: what it says and which checkpoint it keeps.

The step records the first non-finite loss or gradient norm of an epoch on the device
(``petrov.train.step.EpochTotals``); the epoch's end reads it once and stops the run with a
[`TrainingDiverged`][] naming the epoch and the batch, before the epoch's checkpoint, so ``last.pt`` keeps
the last completed (finite) epoch.  A model's own value check that fails inside a step (NaN or inf
reaching it) is taken for a divergence when the epoch recorded one before it or the parameters became
non-finite or huge ([`parameters_state`][]); otherwise the model's error stands.
"""
from __future__ import annotations

from pathlib import Path

import torch

from .step import Diverged, EpochTotals, summarize

# parameters beyond this magnitude are a divergence (their products overflow float32)
PARAMETER_LIMIT = 1e18


class TrainingDiverged(RuntimeError):
    """A non-finite loss or gradient: the message names the epoch and batch."""


def divergence_message(what: str, last_good: str) -> str:
    """What a diverged run says: ``what`` happened, the checkpoint kept, what to try."""
    return (f"{what}; training stopped. Last good checkpoint: {last_good}. "
            f"Try a lower optim.lr, a longer warm-up (optim.min_warmup_steps) or optim.grad_clip.")


def parameters_state(model: torch.nn.Module, limit: float = PARAMETER_LIMIT) -> str:
    """``"non-finite"`` if a parameter of ``model`` holds NaN or inf, ``"huge (largest |w| = ...)"`` if one is
    beyond ``limit``, else ``""`` (one host read: for exception paths)."""
    params = [p.detach() for p in model.parameters() if p.is_floating_point() or p.is_complex()]
    if not params:
        return ""
    finite, largest = torch.stack([torch.stack([torch.isfinite(p).all().float(), p.abs().max().float()])
                                   for p in params]).T.tolist()
    if not all(finite):
        return "non-finite"
    return f"huge (largest |w| = {max(largest):.3g})" if max(largest) > limit else ""


def last_good(run_dir: Path, epoch: int) -> str:
    """The checkpoint a run that diverged after ``epoch`` completed epochs keeps (``last.pt`` of the last one)."""
    return f"{run_dir / 'last.pt'} (epoch {epoch})" if epoch else "none (no epoch completed)"


def diverged(bad: Diverged, epoch: int, steps_per_epoch: int, run_dir: Path) -> TrainingDiverged:
    """The divergence an epoch's totals recorded (``bad``: its first non-finite loss or gradient norm), the
    epoch after ``epoch`` completed ones."""
    where = f"epoch {epoch + 1}, batch {bad.batch} of {steps_per_epoch}"
    return TrainingDiverged(divergence_message(f"non-finite {bad.what} ({bad.value}) at {where}",
                                               last_good(run_dir, epoch)))


def divergence_of(model: torch.nn.Module, totals: EpochTotals | None, batch: int | None, epoch: int,
                  steps_per_epoch: int, run_dir: Path) -> TrainingDiverged | None:
    """A model's value check failed (NaN or inf inside it) in training (at ``batch``, with the epoch's
    ``totals``) or in validation (``totals`` None): the training's divergence when the epoch recorded a
    non-finite loss or gradient norm before it, or the parameters became non-finite or huge; None
    otherwise (then the model's error stands).  An exception path: this process's values, read once."""
    bad = summarize([totals.row().tolist()])[1] if totals is not None else None
    if bad is not None:
        return diverged(bad, epoch, steps_per_epoch, run_dir)
    state = parameters_state(model)
    if not state:
        return None
    where = (f"epoch {epoch + 1}, batch {batch} of {steps_per_epoch}" if batch is not None
             else f"the validation after epoch {epoch + 1}")
    return TrainingDiverged(divergence_message(f"training diverged at {where}: the parameters became {state}",
                                               last_good(run_dir, epoch)))


__all__ = ["PARAMETER_LIMIT", "TrainingDiverged", "divergence_message", "divergence_of", "diverged",
           "last_good", "parameters_state"]
