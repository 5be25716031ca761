"""Figures for trained operators (matplotlib, Agg backend; each written atomically as PNG and PDF).

Rules every figure follows (so that it can go into a paper as it is): fields are drawn on their
physical domain with axis ticks and labels (x, y; x and t for space-time pictures, time running up);
truth and prediction share one colour scale; a power of ten goes into the axis or colorbar label
("|error| (×10⁻³)") instead of an offset text that would collide with a neighbouring title; legends sit
outside the data; samples are the first one, the one of median error and the worst one
(:func:`chosen_samples`), named as such; "n" is a number of grid points, never of samples.

- :func:`plot_predictions`: prediction vs truth on a few samples — 1-D: input, truth and prediction,
  point-wise error; 2-D: input, truth, prediction and |error| fields side by side. The fields are
  named after the dataset kind (:func:`field_names`: Burgers u₀ -> u(·, 1), Darcy a -> u, imported
  x -> y) and every colorbar is labelled.
- :func:`plot_error_vs_resolution`: relative L² against the grid size, log-log: the median with a
  percentile band of the per-sample errors (:func:`percentile_band`, default 10th–90th), the mean
  and the max as markers, the training resolution marked. (Mean ± std bars would reach below zero
  on a log axis: the errors are skewed.)
- :func:`plot_inversion`: inverse Darcy, per sample: u observed, a true, a recovered, error
  (and, with uncertainty, the probability of the high phase and the error interval).
- :func:`plot_error_vs_time`, :func:`plot_spacetime`: trajectories (marching models): rollout error
  against time per resolution; space-time pictures of truth, rollout and |error|.
- :func:`plot_training_curves`: training loss, validation relative L² and learning rate per epoch,
  read from the run's ``log.jsonl`` (or ``log.csv``) written by the trainer.

Every function takes plain data (tensors/arrays/dicts), writes one figure as ``NAME.png`` and
``NAME.pdf`` and returns the PNG's path.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402,F401
import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..common.files import atomic_path  # noqa: E402


def save_figure(fig, path: str | os.PathLike, dpi: int = 150) -> Path:
    """Save ``fig`` as ``path`` (PNG) and beside it as PDF (vector, for papers), each to a temp file
    renamed into place; close the figure. Returns ``path``."""
    path = Path(path)
    try:
        for target, fmt in ((path, "png"), (path.with_suffix(".pdf"), "pdf")):
            with atomic_path(target) as tmp:
                fig.savefig(tmp, format=fmt, dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")


def power_of_ten(values: Any) -> int:
    """The exponent k that brings the largest |value| into [1, 10) when it lies outside
    [0.1, 10⁴) (ticks then read ``value / 10^k``), else 0 (plain ticks)."""
    top = float(np.nanmax(np.abs(_np(values)))) if np.size(values) else 0.0
    if not np.isfinite(top) or top == 0.0 or 0.1 <= top < 1e4:
        return 0
    return int(np.floor(np.log10(top)))


def scaled_label(label: str, k: int) -> str:
    """``label`` with the factor its ticks were divided by: ``"u (×10⁻³)"``."""
    return label if k == 0 else f"{label} (×10{str(k).translate(SUPERSCRIPT)})"


def scale_axis(axis, values: Any, label: str) -> None:
    """Label ``axis`` (a matplotlib x/y axis or a colorbar's) with ticks divided by ``10^k`` and the
    factor in the label, so no offset text ("1e−2") is drawn where a neighbouring title sits."""
    k = power_of_ten(values)
    axis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v / 10.0**k:g}"))
    axis.set_label_text(scaled_label(label, k))


def chosen_samples(errors: Sequence[float] | np.ndarray | torch.Tensor) -> list[tuple[str, int]]:
    """``[(label, position)]`` of the samples a figure shows: the first, the one of median error
    (``sorted[n // 2]``) and the worst, in that order, a position once under its first label."""
    e = _np(errors).ravel()
    if e.size == 0:
        raise ValueError("no per-sample errors to choose samples from")
    order = np.argsort(e, kind="stable")
    chosen: list[tuple[str, int]] = []
    for label, pos in (("first", 0), ("median", int(order[e.size // 2])), ("worst", int(order[-1]))):
        if pos not in [p for _, p in chosen]:
            chosen.append((label, pos))
    return chosen


def sample_head(sample: int, label: str | None = None) -> str:
    """How a figure names a sample: "sample 612", or with its :func:`chosen_samples` label
    "sample 612 (first)", "sample 650 (median error)", "sample 699 (worst error)"."""
    if not label:
        return f"sample {int(sample)}"
    return f"sample {int(sample)} ({label if label == 'first' else label + ' error'})"


def grid_extent(coords: Any, domain: Any = None) -> tuple[float, float, float, float]:
    """``(x0, x1, y0, y1)`` for ``imshow`` of a field on the 2-D grid ``coords (nx, ny, 2)`` (unit-box
    coordinates, as the models see them): the outer edges of the pixels centred on the grid points,
    mapped to the physical ``domain`` ``[[x_lo, x_hi], [y_lo, y_hi]]`` (default the unit square)."""
    c = _np(coords)
    box = np.asarray(domain if domain is not None else [[0.0, 1.0], [0.0, 1.0]], dtype=float).reshape(2, 2)
    edges = []
    for axis, (lo, hi) in zip((c[:, 0, 0], c[0, :, 1]), box):
        h = (axis[-1] - axis[0]) / max(len(axis) - 1, 1)
        edges += [lo + (hi - lo) * (axis[0] - h / 2), lo + (hi - lo) * (axis[-1] + h / 2)]
    return tuple(edges)


def node_extent(m: int) -> tuple[float, float, float, float]:
    """:func:`grid_extent` of the ``m x m`` node grid of the unit square."""
    h = 1.0 / max(m - 1, 1)
    return (-h / 2, 1 + h / 2, -h / 2, 1 + h / 2)


def dataset_domain(dataset: Any) -> Any:
    """The physical domain recorded with a dataset (imported files: attribute ``domain``), else None."""
    domain = (getattr(dataset, "attrs", None) or {}).get("domain")
    if isinstance(domain, str):
        try:
            domain = json.loads(domain)
        except ValueError:
            return None
    return domain


def _np(t: Any) -> np.ndarray:
    return t.detach().cpu().double().numpy() if isinstance(t, torch.Tensor) else np.asarray(t, dtype=float)


def _rel_l2(pred: np.ndarray, true: np.ndarray) -> float:
    return float(np.linalg.norm(pred - true) / max(np.linalg.norm(true), 1e-300))


# --- field names ----------------------------------------------------------------------------------

# (input, target) of each dataset kind as the figures name them
FIELD_NAMES = {
    "burgers": ("u₀", "u(·, {t})"),
    "burgers-trajectory": ("u₀", "u(·, 0)"),  # the first snapshot (channel 0) is what is drawn
    "darcy": ("a", "u"),
    "darcy-inverse": ("u observed", "a (pooled)"),
    "imported": ("x", "y"),
}


def field_names(kind: str | None, attrs: dict[str, Any] | None = None) -> tuple[str, str]:
    """How the figures name the input and the target of a dataset ``kind`` (Burgers: ``u₀`` and
    ``u(·, t)`` with the file's final time ``t``, default 1); ``("input", "output")`` if unknown."""
    x_name, y_name = FIELD_NAMES.get(kind or "", ("input", "output"))
    params = (attrs or {}).get("params", "{}")
    try:
        t = json.loads(params).get("t", 1.0) if isinstance(params, str) else dict(params).get("t", 1.0)
    except (ValueError, TypeError, AttributeError):
        t = 1.0
    return x_name, y_name.format(t=f"{float(t):g}")


# --- predictions ----------------------------------------------------------------------------------

def plot_predictions(dataset: Any, pred: torch.Tensor, path: str | os.PathLike, *, n: int = 4,
                     title: str | None = None, labels: Sequence[str] | None = None) -> Path:
    """Prediction vs truth for the first ``n`` samples of ``dataset`` (GridDataset-like: ``.x``,
    ``.y``, ``.coords``, ``.coords_out``, ``.indices``, optional ``.attrs["domain"]``); ``pred`` has
    ``y``'s shape for those samples. ``labels`` name the samples (e.g. from :func:`chosen_samples`:
    "first", "median", "worst"; shown as "sample 612 (median error)")."""
    k = min(n, len(pred), len(dataset))
    if k == 0:
        raise ValueError("no samples to plot")
    x, y, p = _np(dataset.x[:k]), _np(dataset.y[:k]), _np(pred[:k])
    if p.shape != y.shape:
        raise ValueError(f"predictions of shape {p.shape} do not match the targets {y.shape}")
    ids = [int(i) for i in np.asarray(getattr(dataset, "indices", np.arange(k)))[:k]]
    heads = [sample_head(i, labels[j] if labels is not None and j < len(labels) else None) for j, i in enumerate(ids)]
    names = field_names(getattr(dataset, "kind", None), getattr(dataset, "attrs", None))
    domain = dataset_domain(dataset)
    if y.ndim == 3:
        box = np.asarray(domain if domain is not None else [0.0, 1.0], dtype=float).ravel()[:2]
        physical = lambda s: box[0] + (box[1] - box[0]) * s  # noqa: E731
        return _predictions_1d(physical(_np(dataset.coords)[..., 0]), physical(_np(dataset.coords_out)[..., 0]),
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
        top.set_title(f"{heads[j]}\nrelative L2 {_rel_l2(p[j], y[j]):.2e}", fontsize=9)
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
    return save_figure(fig, path)


def _field(ax, fig, z, title, label, cmap="viridis", vmin=None, vmax=None, extent=(0.0, 1.0, 0.0, 1.0),
           axis_names=("x", "y")):
    """``z (nx, ny)`` as an image on its physical ``extent`` (x to the right, y up; ticks and axis
    names) with a colorbar labelled ``label`` (a power of ten in the label, not as an offset)."""
    aspect = "equal" if axis_names == ("x", "y") else "auto"
    im = ax.imshow(z.T, origin="lower", extent=extent, cmap=cmap, vmin=vmin, vmax=vmax, aspect=aspect,
                   interpolation="nearest")
    ax.set_title(title, fontsize=9)
    ax.set_xlabel(axis_names[0], fontsize=8, labelpad=2)
    ax.set_ylabel(axis_names[1], fontsize=8, labelpad=2)
    ax.tick_params(labelsize=7)
    ax.locator_params(nbins=4)
    cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    scale_axis(cb.ax.yaxis, [vmin if vmin is not None else np.min(z), vmax if vmax is not None else np.max(z)], label)
    cb.ax.yaxis.label.set_fontsize(8)
    cb.ax.tick_params(labelsize=7)


def _predictions_2d(x, y, p, heads, names, path, title, extent) -> Path:
    k = len(y)
    x_name, y_name = names
    ext_in, ext_out = extent
    fig, axes = plt.subplots(k, 4, figsize=(14.0, 3.2 * k), squeeze=False)
    for j in range(k):
        lo, hi = min(y[j].min(), p[j].min()), max(y[j].max(), p[j].max())  # truth and prediction share a scale
        _field(axes[j, 0], fig, x[j, ..., 0], f"{heads[j]}: input {x_name}", x_name, cmap="cividis", extent=ext_in)
        _field(axes[j, 1], fig, y[j, ..., 0], f"truth {y_name}", y_name, vmin=lo, vmax=hi, extent=ext_out)
        _field(axes[j, 2], fig, p[j, ..., 0], f"prediction of {y_name}", y_name, vmin=lo, vmax=hi, extent=ext_out)
        _field(axes[j, 3], fig, np.abs(p[j, ..., 0] - y[j, ..., 0]),
               f"error (relative L2 {_rel_l2(p[j], y[j]):.2e})", f"|prediction − {y_name}|", cmap="magma",
               extent=ext_out)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


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
        rows = [(pos, label) for label, pos in chosen_samples([_rel_l2(a[j], a_true[j]) for j in range(len(a))])]
    cols = (2 if a_true is None else 4) + (phase_probability is not None)
    fig, axes = plt.subplots(len(rows), cols, figsize=(3.5 * cols, 3.2 * len(rows)), squeeze=False)
    for r, (j, name) in enumerate(rows):
        both = [a[j]] if a_true is None else [a[j], a_true[j]]
        lo, hi = min(z.min() for z in both), max(z.max() for z in both)
        ext_u, ext_a = node_extent(u_obs[j].shape[0]), node_extent(a[j].shape[0])
        rec = "a recovered" if error_interval is None else \
            f"a recovered (error in [{error_interval[j][0]:.1e}, {error_interval[j][1]:.1e}])"
        _field(axes[r, 0], fig, u_obs[j], f"{sample_head(ids[j], name)}: u observed", "u", cmap="cividis",
               extent=ext_u)
        if a_true is None:
            _field(axes[r, 1], fig, a[j], rec, "a", vmin=lo, vmax=hi, extent=ext_a)
        else:
            _field(axes[r, 1], fig, a_true[j], "a true (pooled)", "a", vmin=lo, vmax=hi, extent=ext_a)
            _field(axes[r, 2], fig, a[j], rec, "a", vmin=lo, vmax=hi, extent=ext_a)
            _field(axes[r, 3], fig, np.abs(a[j] - a_true[j]),
                   f"error (relative L2 {_rel_l2(a[j], a_true[j]):.2e})", "|a recovered − a true|", cmap="magma",
                   extent=ext_a)
        if phase_probability is not None:
            _field(axes[r, -1], fig, phase_probability[j], "P(high phase)", "probability", cmap="coolwarm",
                   vmin=0.0, vmax=1.0, extent=ext_a)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


# --- error vs resolution --------------------------------------------------------------------------

def percentile_band(errors: Sequence[float] | np.ndarray | torch.Tensor, low: float = 10.0,
                    high: float = 90.0) -> tuple[float, float, float]:
    """``(P_low, median, P_high)`` of per-sample errors: percentiles with numpy's linear interpolation
    between the sorted values (``P_q`` = value at rank ``q/100 · (n − 1)``)."""
    e = _np(errors).ravel()
    if e.size == 0:
        raise ValueError("no per-sample errors to take percentiles of")
    if not np.isfinite(e).all():
        raise ValueError("per-sample errors hold NaN/inf; evaluate a model that gives finite predictions")
    if not 0.0 <= low <= 50.0 <= high <= 100.0:
        raise ValueError(f"need 0 <= low <= 50 <= high <= 100 for a band around the median, got {low}, {high}")
    lo, med, hi = np.percentile(e, [low, 50.0, high])
    return float(lo), float(med), float(hi)


def plot_error_vs_resolution(rows: Sequence[dict[str, Any]], path: str | os.PathLike, *,
                             train_resolution: int | None = None, target: float | None = None,
                             title: str | None = None, band: tuple[float, float] = (10.0, 90.0)) -> Path:
    """Relative L² against resolution from evaluation rows (``resolution, n, mean, median, max`` and,
    for the band, ``per_sample``: ``evaluate_resolutions(..., per_sample=True)``), log-log: the median
    as a line inside the ``band`` percentiles of the per-sample errors (shaded), mean and max as
    markers. Rows without ``per_sample`` (older metrics files) get the median line and no band."""
    if not rows:
        raise ValueError("no evaluation rows to plot")
    rows = sorted(rows, key=lambda r: r["resolution"])
    res = np.array([r["resolution"] for r in rows], dtype=float)
    fig, ax = plt.subplots(figsize=(7.6, 4.2))
    if all(r.get("per_sample") for r in rows):
        lo, median, hi = np.array([percentile_band(r["per_sample"], *band) for r in rows]).T
        ax.fill_between(res, lo, hi, color="tab:blue", alpha=0.2, lw=0,
                        label=f"{band[0]:g}th–{band[1]:g}th percentile")
    else:
        median = np.array([r["median"] for r in rows])
    ax.plot(res, median, "o-", color="tab:blue", ms=4, lw=1.2, label="median")
    ax.plot(res, [r["mean"] for r in rows], "D", color="tab:orange", ms=5, mfc="none", mew=1.2, label="mean")
    ax.plot(res, [r["max"] for r in rows], "v", color="tab:red", ms=4, label="max")
    if train_resolution is not None:
        ax.axvline(train_resolution, color="0.5", ls="-.", lw=0.8, label=f"trained at {train_resolution}")
    if target is not None:
        ax.axhline(target, color="k", ls=":", lw=0.8, label=f"target {target:g}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(res)
    ax.set_xticklabels([str(int(r)) for r in res])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlim(res.min() / 1.25, res.max() * 1.25)
    ax.set_xlabel("resolution (grid points per axis)")
    ax.set_ylabel("relative L2 error per sample")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
    ax.set_title(title or f"test error vs resolution ({rows[0]['n']} test samples)")
    fig.tight_layout()
    return save_figure(fig, path)


# --- trajectories (snapshots as channels) ---------------------------------------------------------

def plot_error_vs_time(rows: Sequence[dict[str, Any]], path: str | os.PathLike, *,
                       title: str | None = None) -> Path:
    """Rollout relative L² against time, one line per resolution, from trajectory evaluation rows
    (``resolution`` and ``per_time_mean``: the mean over samples of each snapshot's error, snapshot
    ``k`` at ``t_k = k/T`` of the simulated span; snapshot 0, the given state, is not drawn)."""
    if not rows or any("per_time_mean" not in r for r in rows):
        raise ValueError("plot_error_vs_time needs trajectory evaluation rows (with per_time_mean)")
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for r in sorted(rows, key=lambda r: r["resolution"]):
        err = np.asarray(r["per_time_mean"], dtype=float)
        t = np.arange(len(err)) / (len(err) - 1)
        ax.plot(t[1:], err[1:], "o-", ms=3, lw=1.0, label=f"{r['resolution']} grid points")
    ax.set_yscale("log")
    ax.set_xlabel("t / t_final")
    ax.set_ylabel("relative L2 error of the rollout")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_title(title or f"rollout error vs time (mean over {rows[0]['n']} test samples)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_spacetime(truth: Any, pred: Any, path: str | os.PathLike, *, sample_ids: Sequence[int] | None = None,
                   n: int = 2, title: str | None = None, labels: Sequence[str] | None = None,
                   t_final: float = 1.0) -> Path:
    """Space-time pictures of trajectories ``(N, n_x, T + 1)`` on a periodic grid ``x_i = i/n_x`` at
    ``t_k = k t_final / T``: truth, prediction (one colour scale) and |error|, one row per sample (first
    ``n``, named by ``labels``); x across, time running up from the given state at t = 0."""
    y, p = _np(truth), _np(pred)
    if y.shape != p.shape or y.ndim != 3:
        raise ValueError(f"plot_spacetime needs truth and prediction of one shape (N, n_x, T + 1), "
                         f"got {y.shape} and {p.shape}")
    k = min(n, len(y))
    if k == 0:
        raise ValueError("no samples to plot")
    ids = list(sample_ids if sample_ids is not None else range(k))
    hx, dt = 1.0 / y.shape[1], t_final / max(y.shape[2] - 1, 1)
    extent = (-hx / 2, 1 - hx / 2, -dt / 2, t_final + dt / 2)  # pixels centred on (x_i, t_k)
    names = ("x", "t (time runs up)")
    fig, axes = plt.subplots(k, 3, figsize=(12.0, 3.4 * k), squeeze=False)
    for j in range(k):
        lo, hi = min(y[j].min(), p[j].min()), max(y[j].max(), p[j].max())
        head = sample_head(ids[j], labels[j] if labels is not None and j < len(labels) else None)
        _field(axes[j, 0], fig, y[j], f"{head}: truth u(x, t)", "u", vmin=lo, vmax=hi, extent=extent,
               axis_names=names)
        _field(axes[j, 1], fig, p[j], "rollout from u(x, 0)", "u", vmin=lo, vmax=hi, extent=extent, axis_names=names)
        _field(axes[j, 2], fig, np.abs(p[j] - y[j]), f"|error| (relative L2 {_rel_l2(p[j], y[j]):.2e})", "|error|",
               cmap="magma", extent=extent, axis_names=names)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


# --- training curves ------------------------------------------------------------------------------

def read_epoch_log(source: str | os.PathLike) -> list[dict[str, Any]]:
    """The trainer's per-epoch rows from a run directory (``log.jsonl``, else ``log.csv``) or a file."""
    source = Path(source)
    if source.is_dir():
        source = source / "log.jsonl" if (source / "log.jsonl").is_file() else source / "log.csv"
    if not source.is_file():
        raise FileNotFoundError(f"no training log at {str(source)!r} (a run directory has log.jsonl)")
    if source.suffix == ".csv":
        with source.open(newline="") as f:
            rows = [{k: (v == "True" if k == "best" else float(v)) for k, v in r.items()} for r in csv.DictReader(f)]
    else:
        rows = [json.loads(line) for line in source.read_text().splitlines() if line.strip()]
    if not rows:
        raise ValueError(f"{source} holds no epochs yet")
    return rows


def plot_training_curves(source: str | os.PathLike, path: str | os.PathLike, *,
                         title: str | None = None) -> Path:
    """Training loss and validation relative L² (log scale) and the learning rate, per epoch."""
    rows = read_epoch_log(source)
    epoch = np.array([r["epoch"] for r in rows], dtype=float)
    fig, (ax, ax_lr) = plt.subplots(2, 1, figsize=(6.0, 5.2), sharex=True, gridspec_kw={"height_ratios": [3, 1]})
    ax.semilogy(epoch, [r["train_loss"] for r in rows], "o-", ms=3, label="training loss")
    ax.semilogy(epoch, [r["val_rel_l2"] for r in rows], "s-", ms=3, label="validation relative L2")
    best = min(rows, key=lambda r: r["val_rel_l2"])
    ax.plot([best["epoch"]], [best["val_rel_l2"]], "k*", ms=10,
            label=f"best: epoch {int(best['epoch'])}, {best['val_rel_l2']:.2e}")
    ax.set_ylabel("loss / error")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_title(title or "training curves")
    ax_lr.semilogy(epoch, [r["lr"] for r in rows], color="tab:gray")
    ax_lr.set_ylabel("lr (end of epoch)")
    ax_lr.set_xlabel("epoch")
    ax_lr.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_comparison(labels: Sequence[str], values: Sequence[float], path: str | os.PathLike, *,
                    ylabel: str = "relative L2 error", title: str | None = None) -> Path:
    """One value per label (e.g. test error per mixer) as labelled points on a log axis (bars would
    suggest a meaningful zero, which a log axis does not have)."""
    if len(labels) != len(values) or not len(labels):
        raise ValueError(f"need one value per label, got {len(labels)} labels and {len(values)} values")
    fig, ax = plt.subplots(figsize=(1.1 * len(labels) + 2.5, 3.8))
    x = np.arange(len(labels))
    ax.plot(x, values, "o", color="tab:blue", ms=8)
    for xi, v in zip(x, values):
        ax.annotate(f"{v:.2e}", (xi, v), textcoords="offset points", xytext=(0, 8), ha="center", fontsize=8)
    ax.set_xticks(x)
    ax.set_xticklabels(list(labels))
    ax.set_xlim(-0.6, len(labels) - 0.4)
    ax.set_yscale("log")
    ax.margins(y=0.25)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(True, axis="y", which="both", alpha=0.3)
    fig.tight_layout()
    return save_figure(fig, path)


__all__ = [
    "field_names", "grid_extent", "percentile_band", "plot_comparison", "plot_error_vs_resolution", "plot_inversion",
    "plot_predictions", "plot_training_curves", "power_of_ten", "read_epoch_log", "chosen_samples", "sample_head",
    "save_figure", "scale_axis",
]
