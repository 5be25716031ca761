"""Training modes: how a training step turns a batch into predictions, its loss and the validation
metric, registered by name (``loss.mode`` in the config).

- ``direct`` (default): one prediction ``operator(x)``, loss ``relL2 + γ·relH1`` of the whole output,
  validation relative L² of the whole output (every non-marching model).

For marching models ([`petrov.operators.trajectory`][]: ``x`` the first ``h`` states, targets
``y: (b, *grid, h + T)`` the whole window, ``h = data.history``) the loss is ``relL2 + γ·relH1`` per
predicted state averaged over ``k = h .. h + T - 1``, and validation scores a free rollout (what a user
gets) by ``loss.trajectory_metric``: ``"state_mean"``, the same mean over the predicted states of their
relative L² (every time counts alike although the field decays), or ``"space_time"``, the relative L² of
the whole predicted space-time block (the FNO paper's Navier–Stokes metric):

- ``teacher_forcing``: each step from the true earlier states, all steps at once (one parallel pass);
- ``pushforward`` (Brandstetter et al. 2022): a teacher-forced pass without gradient predicts
  every state one step ahead; those predictions (detached) are the states the second,
  differentiated, teacher-forced pass conditions on, so the model learns to step from its own
  slightly wrong states at the cost of one more forward;
- ``rollout``: the free rollout of all T steps, differentiated through every step (the unrolled
  loss; the costliest, the closest to evaluation).

Adding a mode: ``@TRAINING_MODES.register("name")`` on a [`TrainingMode`][].
"""
from __future__ import annotations

import dataclasses
import functools
import inspect
from dataclasses import dataclass
from typing import Callable

import torch

from ..common.registry import Registry
from .losses import (
    per_time_relative_l2,
    relative_l2_per_sample,
    space_time_relative_l2_per_sample,
    training_loss_per_sample,
    trajectory_loss_per_sample,
    trajectory_relative_l2_per_sample,
)

TRAINING_MODES: Registry = Registry("training mode")


@dataclass(frozen=True)
class TrainingMode:
    """``predict(operator, x, y, **predict_options) -> raw prediction`` (differentiable),
    ``loss(pred, y, h1_weight, periodic, weights=None) -> (b,)``, ``metric(pred, y, weights=None) -> (b,)``
    (validation and test, on ``operator.predict(x)``: a free rollout for marching models); ``weights``:
    the quadrature weights of point-set data (the direct mode only).  A trajectory mode's loss and metric
    take the number of given states too (``history``): [`for_window`][] binds it."""

    predict: Callable[..., torch.Tensor]
    loss: Callable[..., torch.Tensor]
    metric: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]
    trajectory: bool = False


def _direct(operator, x, y, **options) -> torch.Tensor:
    return operator.predict(x, **options)


def _teacher_forcing(operator, x, y, **options) -> torch.Tensor:
    return operator.predict(x, teacher=y, **options)


def _pushforward(operator, x, y, **options) -> torch.Tensor:
    with torch.no_grad():
        one_step = operator.predict(x, teacher=y, **options)
    # the predicted states replaced by their one-step predictions (the given ones, x's channels, stay true)
    given = x.shape[-1]
    return operator.predict(x, teacher=torch.cat([y[..., :given], one_step[..., given:]], dim=-1), **options)


TRAINING_MODES.register("direct")(TrainingMode(_direct, training_loss_per_sample, relative_l2_per_sample))
for _name, _predict in (("teacher_forcing", _teacher_forcing), ("pushforward", _pushforward), ("rollout", _direct)):
    TRAINING_MODES.register(_name)(
        TrainingMode(_predict, trajectory_loss_per_sample, trajectory_relative_l2_per_sample, trajectory=True))


# the validation (and test) metric of a trajectory mode, by ``loss.trajectory_metric``
TRAJECTORY_METRICS = {"state_mean": trajectory_relative_l2_per_sample, "space_time": space_time_relative_l2_per_sample}


def for_window(mode: TrainingMode, history: int, metric: str = "state_mean") -> TrainingMode:
    """``mode`` scoring trajectories whose first ``history`` states are given (``data.history``) and validated
    by ``TRAJECTORY_METRICS[metric]`` (``loss.trajectory_metric``); a direct mode as it is."""
    if not mode.trajectory:
        return mode
    return dataclasses.replace(mode, loss=functools.partial(mode.loss, history=history),
                               metric=functools.partial(TRAJECTORY_METRICS[metric], history=history))


def trajectory_scores(pred: torch.Tensor, y: torch.Tensor, history: int = 1, metric: str = "state_mean") -> torch.Tensor:
    """``(b, 1 + S)``: each sample's ``TRAJECTORY_METRICS[metric]`` over the predicted states, then the relative L²
    of every state ``k = 0 .. S-1`` (the given ones included): what a test and ``petrov evaluate`` report."""
    overall = TRAJECTORY_METRICS[metric](pred, y, history=history)
    return torch.cat([overall[:, None], per_time_relative_l2(pred, y)], dim=1)


def training_mode(name: str) -> TrainingMode:
    """The registered mode ``name``; ``ValueError`` naming the registered ones otherwise."""
    if name not in TRAINING_MODES:
        raise ValueError(f"loss.mode: {TRAINING_MODES.unknown_message(name)}")
    return TRAINING_MODES.get(name)


def check_mode_fits_model(name: str, model: torch.nn.Module) -> None:
    """A trajectory mode needs a marching model (one whose ``forward`` takes ``teacher``), and a marching
    model needs a trajectory mode: ``direct`` would score the whole output, the copied ``u_0`` included, not
    the per-time rollout error that validation selects on and the evaluation reports."""
    mode = training_mode(name)
    marching = "teacher" in inspect.signature(model.forward).parameters
    if mode.trajectory and not marching:
        raise ValueError(f"loss.mode = {name!r} trains a marching model (forward(x, pos, teacher), e.g. "
                         f"marching1d or arfno1d); {type(model).__name__} is not one: use loss.mode = 'direct'")
    if marching and not mode.trajectory:
        modes = ", ".join(repr(k) for k in TRAINING_MODES.names() if TRAINING_MODES.get(k).trajectory)
        default = " (the default)" if name == "direct" else ""
        raise ValueError(f"loss.mode = {name!r}{default} trains a non-marching model on its whole output; "
                         f"{type(model).__name__} marches in time (its error is the rollout's, per time step): "
                         f"set loss.mode to one of {modes}, e.g. loss.mode = 'pushforward'")
