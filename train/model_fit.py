"""Whether a model fits its data, found by running it on one sample before anything trains or is evaluated.

- [`check_model_fits_data`][]: one forward pass on a sample; a clear ValueError where the output is not the
  target's shape (a marching model's other number of time steps named as such), or where a marching model
  steps another number of fields per state, or sees another domain or other periodic axes, than a time
  series holds ([`geometry_mismatch`][]);
- [`forward_error`][]: the model's own error on a sample (or an output that cannot be scored), which the
  checks of the test resolutions turn into their own messages ([`without_advice`][]).
"""
from __future__ import annotations

import inspect
from typing import Any

import numpy as np
import torch

from ..datasets.loading import fields_per_state
from ..grids.domain import periodic_axes
from .data import Batch, data_loader, is_point_data, layout_mismatch, to_batch


def check_model_fits_data(model: torch.nn.Module, data: Any, device: torch.device, source: str, *,
                          evaluating: bool = False) -> None:
    """One forward pass on a sample: a clear ValueError if shapes/channels do not fit the data (for a
    marching model, trajectories of another number of time steps named as such; ``evaluating``: a trained
    model, which another file fits, not other model options)."""
    point_model, point_data = bool(getattr(model, "point_set", False)), is_point_data(data)
    if point_model != point_data:
        raise layout_mismatch(type(model).__name__, point_model, point_data, source)
    name = type(model).__name__
    mismatch = geometry_mismatch(model, data, source)
    if mismatch:
        raise ValueError(f"the run's model {name} {mismatch[0]}; evaluate it on data like its training data" if evaluating
                         else f"model {name} {mismatch[0]}; {mismatch[1]}")
    batch = to_batch(next(iter(data_loader(data, 1))), data, device)
    x, y = batch.x, batch.y
    try:
        out = _forward_one(model, batch)
    except (RuntimeError, ValueError) as err:
        raise ValueError(
            f"model {name} cannot take inputs of shape {tuple(x.shape)} from {source} "
            f"(check model.options, e.g. channels or grid sizes): {err}"
        ) from None
    if tuple(out.shape) != tuple(y.shape):
        marching = "teacher" in inspect.signature(model.forward).parameters
        if marching and out.dim() == y.dim() and out.shape[:-1] == y.shape[:-1]:
            given, fields = x.shape[-1], fields_per_state(data)  # the states given: the rest is predicted
            raise ValueError(time_steps_mismatch(name, (out.shape[-1] - given) // fields,
                                                 (y.shape[-1] - given) // fields, source, evaluating))
        raise ValueError(
            f"model {name} outputs shape {tuple(out.shape)} but the targets in {source} have shape "
            f"{tuple(y.shape)}; check model.options"
        )


def geometry_mismatch(model: torch.nn.Module, data: Any, source: str) -> tuple[str, str] | None:
    """``(what differs, what to set)`` where a marching model steps another number of fields per state than
    ``data`` holds, or (a time series) sees another domain or other periodic axes than its grid; None if
    they agree."""
    config = getattr(model, "config", None)
    names = list(getattr(data, "fields", None) or [])
    fields = max(1, len(names))
    if getattr(config, "fields", fields) != fields:
        held = f"{fields} ({', '.join(names)})" if names else "1"
        return (f"steps {config.fields} fields per state but the states in {source} hold {held}",
                f"set model.options.fields = {fields}")
    if getattr(data, "kind", None) != "time-series" or not hasattr(config, "domain"):
        return None
    box, own = getattr(data, "domain", None), _box(config.domain)
    if (own is None) != (box is None) or own is not None and not np.allclose(own, box, rtol=1e-9, atol=1e-12):
        shown = [list(pair) for pair in box] if box else None
        return (f"has domain {config.domain} but the grid in {source} covers {shown or 'the unit box'}",
                f"set model.options.domain = {shown or 'null (leave it out)'}")
    flags = tuple(data.axis_periodic)
    if periodic_axes(config.periodic, len(flags), type(model).__name__) != flags:
        return (f"has periodic = {config.periodic} but the axes of {source} are periodic = {list(flags)}",
                f"set model.options.periodic = {str(list(flags)).lower()}")
    return None


def _box(domain: Any) -> tuple[tuple[float, float], ...] | None:
    """A model's ``domain`` as float pairs; None for the unit box (as the data name it)."""
    box = None if domain is None else tuple((float(lo), float(hi)) for lo, hi in domain)
    return None if box is None or all(pair == (0.0, 1.0) for pair in box) else box


def time_steps_mismatch(name: str, model_steps: int, file_steps: int, source: str, evaluating: bool) -> str:
    """The message for a marching model of ``model_steps`` time steps on trajectories of ``file_steps``."""
    if evaluating:
        return (f"the run's model {name} was trained for T={model_steps} time steps but the trajectories in "
                f"{source} have T={file_steps}; evaluate it on a trajectory file with {model_steps} steps "
                f"(e.g. petrov generate burgers-trajectory --time-steps {model_steps})")
    return (f"model {name} predicts T={model_steps} time steps but the trajectories in {source} have "
            f"T={file_steps}; set model.options.time_steps = {file_steps}, or use a trajectory file with "
            f"{model_steps} steps")


def _forward_one(model: torch.nn.Module, batch: Batch) -> torch.Tensor:
    """``model``'s output on ``batch`` in eval mode, without gradients (its mode is restored)."""
    was_training = model.training
    try:
        with torch.no_grad():
            return model.eval()(batch.x, **batch.inputs)
    finally:
        model.train(was_training)


OUTPUT_NOT_TARGET = "the model outputs shape"


def forward_error(model: torch.nn.Module, data: Any, device: torch.device) -> str | None:
    """The model's own error (ValueError or RuntimeError) on the first sample of ``data``, or an output
    whose shape is not the target's (which cannot be scored: the message starts with ``OUTPUT_NOT_TARGET``);
    None if it takes it."""
    try:
        batch = to_batch(next(iter(data_loader(data, 1))), data, device)
        out = _forward_one(model, batch)
    except (RuntimeError, ValueError) as err:
        return str(err)
    if tuple(out.shape) != tuple(batch.y.shape):
        return f"{OUTPUT_NOT_TARGET} {tuple(out.shape)} where the targets have shape {tuple(batch.y.shape)}"
    return None


def without_advice(message: str, marker: str = "; use ") -> str:
    """``message`` up to its closing advice (``"...; use modes <= 2 or a finer grid"`` -> ``"..."``): advice
    for building a model, which a caller that has another remedy (another resolution) leaves out."""
    head, found, _ = message.rpartition(marker)
    return head if found else message


__all__ = ["OUTPUT_NOT_TARGET", "check_model_fits_data", "forward_error", "geometry_mismatch", "time_steps_mismatch",
           "without_advice"]
