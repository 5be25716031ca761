"""Figures of 2-D trajectories (marching models on Navier–Stokes and other flows): the states of a rollout
against the truth.

- [`plot_states`][]: for each chosen sample, the truth, the prediction and their difference at the first
  and the last predicted state; truth and prediction share one colour scale per sample, the difference
  is drawn on a diverging scale centred on 0 (sign matters: a vortex ahead of or behind its place).
- [`animate_rollout`][]: a GIF of one sample's rollout, state after state: truth, prediction and
  difference, on colour scales fixed over the whole rollout (frames drawn by matplotlib, joined by Pillow,
  which matplotlib depends on).

Trajectories are channels-last ``(*grid, S)`` arrays of states, the first ``history`` given to the model.
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


def plot_states(truth: Any, pred: Any, path: str | os.PathLike, *, history: int, name: str = "w",
                sample_ids: Sequence[int] | None = None, labels: Sequence[str] | None = None,
                extent: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0), title: str | None = None) -> Path:
    """Truth, prediction and prediction − truth of each sample of ``truth``/``pred`` ``(k, nx, ny, S)`` at
    its first and last predicted state (``history`` given states first); ``name`` the field's name."""
    y, p = host_array(truth), host_array(pred)
    if y.shape != p.shape or y.ndim != 4:
        raise ValueError(f"plot_states needs truth and prediction of one shape (samples, nx, ny, states), got "
                         f"{y.shape} and {p.shape}")
    if not 0 < history < y.shape[-1]:
        raise ValueError(f"history = {history} leaves no predicted state among {y.shape[-1]}")
    k, first, last = len(y), history, y.shape[-1] - 1
    ids = list(sample_ids) if sample_ids is not None else list(range(k))
    fig, axes = plt.subplots(k, 6, figsize=(20.0, 3.1 * k), squeeze=False)
    for j in range(k):
        head = sample_head(ids[j], labels[j] if labels is not None and j < len(labels) else None)
        lo, hi = y[j, ..., first:].min(), y[j, ..., first:].max()  # one scale for truth and prediction
        for col, state in ((0, first), (3, last)):
            err = p[j, ..., state] - y[j, ..., state]
            step = f"state {state} ({state - history + 1} step{'s' if state > history else ''} ahead)"
            draw_field(axes[j, col], fig, y[j, ..., state], f"{head}: truth, {step}", name, vmin=lo, vmax=hi,
                       cmap="viridis", extent=extent)
            draw_field(axes[j, col + 1], fig, p[j, ..., state], f"prediction, {step}", name, vmin=lo, vmax=hi,
                       cmap="viridis", extent=extent)
            bound = _symmetric(err)
            draw_field(axes[j, col + 2], fig, err,
                       f"prediction − truth (relative L2 {relative_l2(p[j, ..., state], y[j, ..., state]):.2e})",
                       f"{name} difference", cmap=ERROR_MAP, vmin=-bound, vmax=bound, extent=extent)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


def animate_rollout(truth: Any, pred: Any, path: str | os.PathLike, *, history: int, name: str = "w",
                    sample_id: int | None = None, extent: tuple[float, float, float, float] = (0.0, 1.0, 0.0, 1.0),
                    fps: float = 4.0) -> Path:
    """A GIF of one sample's rollout ``truth``/``pred`` ``(nx, ny, S)``: a frame per state (the given ones,
    then the predicted ones), truth | prediction | difference on scales fixed over the rollout.  Written to a
    temporary file and renamed."""
    y, p = host_array(truth), host_array(pred)
    if y.shape != p.shape or y.ndim != 3:
        raise ValueError(f"animate_rollout needs one sample's truth and prediction (nx, ny, states), got "
                         f"{y.shape} and {p.shape}")
    lo, hi = y.min(), y.max()
    bound = _symmetric(p[..., history:] - y[..., history:])
    fig, axes = plt.subplots(1, 3, figsize=(12.0, 3.8), dpi=80)
    images = []
    for ax, cmap, vmin, vmax, label in ((axes[0], "viridis", lo, hi, name), (axes[1], "viridis", lo, hi, name),
                                        (axes[2], ERROR_MAP, -bound, bound, f"{name} difference")):
        draw_field(ax, fig, np.zeros(y.shape[:2]), "", label, cmap=cmap, vmin=vmin, vmax=vmax, extent=extent)
        images.append(ax.images[0])
    head = "" if sample_id is None else f"{sample_head(sample_id)}: "
    fig.tight_layout()

    def frame(state: int) -> Image.Image:
        given = state < history
        for image, values in zip(images, (y[..., state], p[..., state], p[..., state] - y[..., state])):
            image.set_data(values.T)
        axes[0].set_title(f"{head}truth, state {state}", fontsize=9)
        axes[1].set_title("given" if given else f"prediction ({state - history + 1} steps ahead)", fontsize=9)
        axes[2].set_title("prediction − truth", fontsize=9)
        fig.canvas.draw()
        return Image.fromarray(np.asarray(fig.canvas.buffer_rgba())).convert("P", palette=Image.ADAPTIVE)

    try:
        frames = [frame(state) for state in range(y.shape[-1])]
    finally:
        plt.close(fig)
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as fh:
        frames[0].save(fh, format="GIF", save_all=True, append_images=frames[1:], duration=int(1000 / fps), loop=0)
    return path


__all__ = ["animate_rollout", "plot_states"]
