"""Figures of 2-D trajectories (marching models on Navier–Stokes and other flows): the states of a rollout
against the truth.

- [`plot_states`][]: for each chosen sample (and each field of a state of several), the truth, the
  prediction and their difference at the first and the last predicted state; truth and prediction share one
  colour scale per sample and field, diverging and centred on 0 where the field takes both signs, the
  difference always on a diverging scale centred on 0 (sign matters: a vortex ahead of or behind its place).
- [`animate_rollout`][]: a GIF of one sample's rollout, state after state: truth, prediction and
  difference (a row per field), on colour scales fixed over the whole rollout (frames drawn by matplotlib,
  joined by Pillow, which matplotlib depends on).

Trajectories are channels-last ``(*grid, S F)`` arrays of S states of F fields (state-major: channel
``s F + f`` is field f of state s; F = 1 by default), the first ``history`` states given to the model.
Fields are drawn on their domain's ``extent`` at its true aspect ratio (x across, y up): a grid on
``[0, 1] x [0, 3]`` is three times as tall as wide, whatever its points per axis.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
from PIL import Image

from ..common.files import atomic_path
from . import figure_style
from .figure_style import draw_field, host_array, relative_l2, sample_head

ERROR_MAP = "RdBu_r"  # diverging, centred on 0


def _symmetric(values: np.ndarray) -> float:
    return float(max(np.abs(values).max(), 1e-300))


def field_scale(values: np.ndarray) -> tuple[str, float, float]:
    """``(colour map, vmin, vmax)`` of a field drawn from ``values``: a signed field (negative and positive
    values) on the diverging map, symmetric about 0; a one-signed field on viridis over its range."""
    lo, hi = float(values.min()), float(values.max())
    if lo < 0.0 < hi:
        bound = _symmetric(values)
        return ERROR_MAP, -bound, bound
    return "viridis", lo, hi


def panel_size(extent: Sequence[float], side: float = 3.3) -> tuple[float, float]:
    """``(width, height)`` in inches of one field's panel (colorbar included) that keeps the ``extent``'s
    aspect ratio at about ``side²`` of area (a tall domain gets a tall panel, not a thin stripe)."""
    ratio = float(np.clip((extent[3] - extent[2]) / max(extent[1] - extent[0], 1e-300), 1 / 8, 8))
    return side / np.sqrt(ratio) + 0.6, side * np.sqrt(ratio) + 0.5


def as_fields(values: np.ndarray, fields: int, what: str) -> np.ndarray:
    """``(..., S F)`` -> ``(..., S, F)`` (channel ``s F + f``: field f of state s); ValueError unless whole."""
    if values.shape[-1] % fields:
        raise ValueError(f"{what} has {values.shape[-1]} channels, not a whole number of states of {fields} fields")
    return values.reshape(*values.shape[:-1], values.shape[-1] // fields, fields)


def _field_names(fields: Sequence[str] | None, name: str) -> list[str]:
    return list(fields) if fields else [name]


def plot_states(truth: Any, pred: Any, path: str | os.PathLike, *, history: int, name: str = "w",
                sample_ids: Sequence[int] | None = None, labels: Sequence[str] | None = None,
                extent: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0), title: str | None = None,
                fields: Sequence[str] | None = None) -> Path:
    """Truth, prediction and prediction − truth of each sample of ``truth``/``pred`` ``(k, nx, ny, S F)`` at
    its first and last predicted state (``history`` given states first): a row per sample and field.
    ``fields``: the names of the F fields of a state (default one, named ``name``); truth and prediction of a
    field share its colour scale ([`field_scale`][]); ``extent`` the physical ``(x0, x1, y0, y1)``."""
    names = _field_names(fields, name)
    y, p = host_array(truth), host_array(pred)
    if y.shape != p.shape or y.ndim != 4:
        raise ValueError(f"plot_states needs truth and prediction of one shape (samples, nx, ny, states), got "
                         f"{y.shape} and {p.shape}")
    y, p = as_fields(y, len(names), "the truth"), as_fields(p, len(names), "the prediction")
    if not 0 < history < y.shape[-2]:
        raise ValueError(f"history = {history} leaves no predicted state among {y.shape[-2]}")
    k, first, last = len(y), history, y.shape[-2] - 1
    ids = list(sample_ids) if sample_ids is not None else list(range(k))
    width, height = panel_size(extent)
    rows = [(j, f) for j in range(k) for f in range(len(names))]
    fig, axes = plt.subplots(len(rows), 6, figsize=(6 * width, height * len(rows)), squeeze=False)
    for row, (j, f) in enumerate(rows):
        head = sample_head(ids[j], labels[j] if labels is not None and j < len(labels) else None)
        head = head if len(names) == 1 else f"{head}, {names[f]}"
        cmap, lo, hi = field_scale(y[j, ..., first:, f])  # one scale for truth and prediction
        for col, state in ((0, first), (3, last)):
            truth_s, pred_s = y[j, ..., state, f], p[j, ..., state, f]
            step = f"state {state} ({state - history + 1} step{'s' if state > history else ''} ahead)"
            draw_field(axes[row, col], fig, truth_s, f"{head}: truth, {step}", names[f], vmin=lo, vmax=hi,
                       cmap=cmap, extent=extent)
            draw_field(axes[row, col + 1], fig, pred_s, f"prediction, {step}", names[f], vmin=lo, vmax=hi,
                       cmap=cmap, extent=extent)
            bound = _symmetric(pred_s - truth_s)
            draw_field(axes[row, col + 2], fig, pred_s - truth_s,
                       f"prediction − truth (relative L2 {relative_l2(pred_s, truth_s):.2e})",
                       f"{names[f]} difference", cmap=ERROR_MAP, vmin=-bound, vmax=bound, extent=extent)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


def animate_rollout(truth: Any, pred: Any, path: str | os.PathLike, *, history: int, name: str = "w",
                    sample_id: int | None = None, extent: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0),
                    fps: float = 4.0, fields: Sequence[str] | None = None) -> Path:
    """A GIF of one sample's rollout ``truth``/``pred`` ``(nx, ny, S F)``: a frame per state (the given ones,
    then the predicted ones), truth | prediction | difference on scales fixed over the rollout, a row per
    field (``fields``: their names; default one, ``name``).  Written to a temporary file and renamed."""
    names = _field_names(fields, name)
    y, p = host_array(truth), host_array(pred)
    if y.shape != p.shape or y.ndim != 3:
        raise ValueError(f"animate_rollout needs one sample's truth and prediction (nx, ny, states), got "
                         f"{y.shape} and {p.shape}")
    y, p = as_fields(y, len(names), "the truth"), as_fields(p, len(names), "the prediction")
    width, height = panel_size(extent, 3.0)
    fig, axes = plt.subplots(len(names), 3, figsize=(3 * width, height * len(names)), dpi=80, squeeze=False)
    images = []
    for f, label in enumerate(names):
        cmap, lo, hi = field_scale(y[..., f])
        bound = _symmetric(p[..., history:, f] - y[..., history:, f])
        for ax, c, vmin, vmax, what in ((axes[f, 0], cmap, lo, hi, label), (axes[f, 1], cmap, lo, hi, label),
                                        (axes[f, 2], ERROR_MAP, -bound, bound, f"{label} difference")):
            draw_field(ax, fig, np.zeros(y.shape[:2]), "", what, cmap=c, vmin=vmin, vmax=vmax, extent=extent)
            images.append(ax.images[0])
    head = "" if sample_id is None else f"{sample_head(sample_id)}: "
    fig.tight_layout()

    def frame(state: int) -> Image.Image:
        given = state < history
        for f in range(len(names)):
            truth_s, pred_s = y[..., state, f], p[..., state, f]
            for image, values in zip(images[3 * f:3 * f + 3], (truth_s, pred_s, pred_s - truth_s)):
                image.set_data(values.T)
            field = "" if len(names) == 1 else f"{names[f]}, "
            axes[f, 0].set_title(f"{head}{field}truth, state {state}", fontsize=9)
            axes[f, 1].set_title("given" if given else f"prediction ({state - history + 1} steps ahead)", fontsize=9)
            axes[f, 2].set_title("prediction − truth", fontsize=9)
        fig.canvas.draw()
        return Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("P", palette=Image.ADAPTIVE)

    try:
        frames = [frame(state) for state in range(y.shape[-2])]
    finally:
        plt.close(fig)
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        frames[0].save(fh, format="GIF", save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    return path


__all__ = ["animate_rollout", "as_fields", "field_scale", "panel_size", "plot_states"]
