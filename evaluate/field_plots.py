"""Figures of fields: predictions against the truth on grids (1-D curves, 2-D images), the inverse
problem's recovered coefficients, and space-time pictures of trajectories.

Every function takes plain data (tensors, arrays), writes one figure as ``NAME.png`` and ``NAME.pdf``
(``figure_style.save_figure``) and returns the PNG's path.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt
import numpy as np
import torch

from . import figure_style
from .figure_style import (
    chosen_samples,
    dataset_domain,
    draw_field,
    field_names,
    grid_extent,
    host_array,
    node_extent,
    relative_l2,
    sample_head,
    scale_axis,
)


def plot_predictions(dataset: Any, pred: torch.Tensor, path: str | os.PathLike, *, n: int = 4,
                     title: str | None = None, labels: Sequence[str] | None = None) -> Path:
    """Prediction vs truth for the first ``n`` samples of ``dataset`` (GridDataset-like: ``.x``,
    ``.y``, ``.coords``, ``.coords_out``, ``.indices``, optional ``.attrs["domain"]``); ``pred`` has
    ``y``'s shape for those samples. ``labels`` name the samples (e.g. from [`chosen_samples`][]:
    "first", "median", "worst"; shown as "sample 612 (median error)")."""
    k = min(n, len(pred), len(dataset))
    if k == 0:
        raise ValueError("no samples to plot")
    x, y, p = host_array(dataset.x[:k]), host_array(dataset.y[:k]), host_array(pred[:k])
    if p.shape != y.shape:
        raise ValueError(f"predictions of shape {p.shape} do not match the targets {y.shape}")
    ids = [int(i) for i in np.asarray(getattr(dataset, "indices", np.arange(k)))[:k]]
    heads = [sample_head(i, labels[j] if labels is not None and j < len(labels) else None) for j, i in enumerate(ids)]
    names = field_names(getattr(dataset, "kind", None), getattr(dataset, "attrs", None))
    domain = dataset_domain(dataset)
    if y.ndim == 3:
        box = np.asarray(domain if domain is not None else [0.0, 1.0], dtype=float).ravel()[:2]
        physical = lambda s: box[0] + (box[1] - box[0]) * s  # noqa: E731
        return _predictions_1d(physical(host_array(dataset.coords)[..., 0]), physical(host_array(dataset.coords_out)[..., 0]),
                               x, y, p, heads, names, path, title)
    if y.ndim == 4:
        extent = grid_extent(dataset.coords, domain), grid_extent(dataset.coords_out, domain)
        return _predictions_2d(x, y, p, heads, names, path, title, extent)
    raise ValueError(f"can plot 1-D or 2-D fields, got targets of shape {y.shape}")


def _predictions_1d(s_in, s_out, x, y, p, heads, names, path, title) -> Path:
    k = len(y)
    fig, axes = plt.subplots(3, k, figsize=(3.6 * k, 7.0), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [1, 2, 1]})
    for j in range(k):
        top, mid, low = axes[:, j]
        top.plot(s_in, x[j, :, 0], color="0.4", lw=1)
        top.set_title(f"{heads[j]}\nrelative L2 {relative_l2(p[j], y[j]):.2e}", fontsize=9)
        mid.plot(s_out, y[j, :, 0], color="k", lw=1.6, label=f"truth {names[1]}")
        mid.plot(s_out, p[j, :, 0], color="tab:red", lw=1.0, ls="--", label="prediction")
        low.plot(s_out, p[j, :, 0] - y[j, :, 0], color="tab:blue", lw=0.9)
        low.axhline(0.0, color="0.7", lw=0.6)
        low.set_xlabel("x")
        left = j == 0
        scale_axis(top.yaxis, x[:, :, 0], f"input {names[0]}" if left else "")
        scale_axis(mid.yaxis, np.concatenate([y[:, :, 0], p[:, :, 0]]), f"output {names[1]}" if left else "")
        scale_axis(low.yaxis, p[..., 0] - y[..., 0], "prediction − truth" if left else "")  # one factor per row
        for ax in (top, mid, low):
            ax.tick_params(labelsize=8)
            ax.set_xlim(s_out.min(), s_out.max())
    handles, texts = axes[1, 0].get_legend_handles_labels()
    fig.legend(handles, texts, loc="lower center", ncol=2, fontsize=8, frameon=False, bbox_to_anchor=(0.5, -0.02))
    if title:
        fig.suptitle(title)
    fig.tight_layout(rect=(0, 0.03, 1, 1))
    return figure_style.save_figure(fig, path)


def _predictions_2d(x, y, p, heads, names, path, title, extent) -> Path:
    k = len(y)
    x_name, y_name = names
    ext_in, ext_out = extent
    fig, axes = plt.subplots(k, 4, figsize=(14.0, 3.2 * k), squeeze=False)
    for j in range(k):
        lo, hi = min(y[j].min(), p[j].min()), max(y[j].max(), p[j].max())  # truth and prediction share a scale
        draw_field(axes[j, 0], fig, x[j, ..., 0], f"{heads[j]}: input {x_name}", x_name, cmap="cividis", extent=ext_in)
        draw_field(axes[j, 1], fig, y[j, ..., 0], f"truth {y_name}", y_name, vmin=lo, vmax=hi, extent=ext_out)
        draw_field(axes[j, 2], fig, p[j, ..., 0], f"prediction of {y_name}", y_name, vmin=lo, vmax=hi, extent=ext_out)
        draw_field(axes[j, 3], fig, np.abs(p[j, ..., 0] - y[j, ..., 0]),
               f"error (relative L2 {relative_l2(p[j], y[j]):.2e})", f"|prediction − {y_name}|", cmap="magma",
               extent=ext_out)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


def plot_inversion(u_obs: np.ndarray, a: np.ndarray, path: str | os.PathLike, *, a_true: np.ndarray | None = None,
                   sample_ids: Sequence[int] | None = None, n: int = 4, title: str | None = None,
                   phase_probability: np.ndarray | None = None, error_interval: np.ndarray | None = None) -> Path:
    """Inverse Darcy, one row per sample: u observed ``(N, m, m)``, a true and a recovered ``(N, k, k)``
    on one colour scale, the error |a recovered − a true| (a true and the error only when ``a_true``
    is given; then the rows are the first sample, the one of median error and the worst, else the
    first ``n``) and, when given, the probability of the high phase per cell ``phase_probability
    (N, k, k)``; ``error_interval (N, 2)`` is written above the recovered field. Fields on node grids of
    the unit square, drawn on it with axes."""
    if len(a) == 0:
        raise ValueError("no samples to plot")
    ids = list(sample_ids if sample_ids is not None else range(len(a)))
    if a_true is None:
        rows = [(j, "") for j in range(min(n, len(a)))]
    else:
        rows = [(pos, label) for label, pos in chosen_samples([relative_l2(a[j], a_true[j]) for j in range(len(a))])]
    cols = (2 if a_true is None else 4) + (phase_probability is not None)
    fig, axes = plt.subplots(len(rows), cols, figsize=(3.5 * cols, 3.2 * len(rows)), squeeze=False)
    for r, (j, name) in enumerate(rows):
        both = [a[j]] if a_true is None else [a[j], a_true[j]]
        lo, hi = min(z.min() for z in both), max(z.max() for z in both)
        ext_u, ext_a = node_extent(u_obs[j].shape[0]), node_extent(a[j].shape[0])
        rec = "a recovered" if error_interval is None else \
            f"a recovered (error in [{error_interval[j][0]:.1e}, {error_interval[j][1]:.1e}])"
        draw_field(axes[r, 0], fig, u_obs[j], f"{sample_head(ids[j], name)}: u observed", "u", cmap="cividis",
               extent=ext_u)
        if a_true is None:
            draw_field(axes[r, 1], fig, a[j], rec, "a", vmin=lo, vmax=hi, extent=ext_a)
        else:
            draw_field(axes[r, 1], fig, a_true[j], "a true (pooled)", "a", vmin=lo, vmax=hi, extent=ext_a)
            draw_field(axes[r, 2], fig, a[j], rec, "a", vmin=lo, vmax=hi, extent=ext_a)
            draw_field(axes[r, 3], fig, np.abs(a[j] - a_true[j]),
                   f"error (relative L2 {relative_l2(a[j], a_true[j]):.2e})", "|a recovered − a true|", cmap="magma",
                   extent=ext_a)
        if phase_probability is not None:
            draw_field(axes[r, -1], fig, phase_probability[j], "P(high phase)", "probability", cmap="coolwarm",
                   vmin=0.0, vmax=1.0, extent=ext_a)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


def plot_spacetime(truth: Any, pred: Any, path: str | os.PathLike, *, sample_ids: Sequence[int] | None = None,
                   n: int = 2, title: str | None = None, labels: Sequence[str] | None = None,
                   t_final: float = 1.0, fields: Sequence[str] | None = None) -> Path:
    """Space-time pictures of trajectories ``(N, n_x, T + 1)`` on a periodic grid ``x_i = i/n_x`` at
    ``t_k = k t_final / T``: truth, prediction (one colour scale) and |error|, one row per sample (first
    ``n``, named by ``labels``); x across, time running up from the given state at t = 0.  ``fields``: the
    names of F > 1 fields per state (channels ``(T + 1) F``, state-major): a row per sample and field."""
    names = list(fields) if fields and len(fields) > 1 else ["u"]
    y, p = host_array(truth), host_array(pred)
    if y.shape != p.shape or y.ndim != 3 or y.shape[-1] % len(names):
        raise ValueError(f"plot_spacetime needs truth and prediction of one shape (N, n_x, (T + 1) * fields), "
                         f"got {y.shape} and {p.shape} for {len(names)} field(s)")
    k = min(n, len(y))
    if k == 0:
        raise ValueError("no samples to plot")
    ids = list(sample_ids if sample_ids is not None else range(k))
    F = len(names)
    hx, dt = 1.0 / y.shape[1], t_final / max(y.shape[2] // F - 1, 1)
    extent = (-hx / 2, 1 - hx / 2, -dt / 2, t_final + dt / 2)  # pixels centred on (x_i, t_k)
    axis_names = ("x", "t (time runs up)")
    rows = [(j, f) for j in range(k) for f in range(F)]
    fig, axes = plt.subplots(len(rows), 3, figsize=(12.0, 3.4 * len(rows)), squeeze=False)
    for r, (j, f) in enumerate(rows):
        yj, pj, u = y[j][:, f::F], p[j][:, f::F], names[f]  # field f at every state
        lo, hi = min(yj.min(), pj.min()), max(yj.max(), pj.max())
        head = sample_head(ids[j], labels[j] if labels is not None and j < len(labels) else None)
        draw_field(axes[r, 0], fig, yj, f"{head}: truth {u}(x, t)", u, vmin=lo, vmax=hi, extent=extent,
                   axis_names=axis_names)
        draw_field(axes[r, 1], fig, pj, f"rollout from {u}(x, 0)", u, vmin=lo, vmax=hi, extent=extent,
                   axis_names=axis_names)
        draw_field(axes[r, 2], fig, np.abs(pj - yj), f"|error| (relative L2 {relative_l2(pj, yj):.2e})", "|error|",
                   cmap="magma", extent=extent, axis_names=axis_names)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)
