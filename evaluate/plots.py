"""Figures for trained operators (matplotlib, Agg backend, PNG written atomically).

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

Every function takes plain data (tensors/arrays/dicts), writes one PNG and returns its path.
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

from petrov.common.files import atomic_path  # noqa: E402


def save_figure(fig, path: str | os.PathLike, dpi: int = 120) -> Path:
    """Save ``fig`` as PNG to a temp file next to ``path``, rename it into place, close the figure."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format="png", dpi=dpi, bbox_inches="tight")
    finally:
        plt.close(fig)
    return path


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
                     title: str | None = None) -> Path:
    """Prediction vs truth for the first ``n`` samples of ``dataset`` (GridDataset-like: ``.x``,
    ``.y``, ``.coords``, ``.coords_out``, ``.indices``); ``pred`` has ``y``'s shape for those samples."""
    k = min(n, len(pred), len(dataset))
    if k == 0:
        raise ValueError("no samples to plot")
    x, y, p = _np(dataset.x[:k]), _np(dataset.y[:k]), _np(pred[:k])
    if p.shape != y.shape:
        raise ValueError(f"predictions of shape {p.shape} do not match the targets {y.shape}")
    ids = [int(i) for i in np.asarray(getattr(dataset, "indices", np.arange(k)))[:k]]
    names = field_names(getattr(dataset, "kind", None), getattr(dataset, "attrs", None))
    if y.ndim == 3:
        return _predictions_1d(_np(dataset.coords)[..., 0], _np(dataset.coords_out)[..., 0], x, y, p, ids,
                               names, path, title)
    if y.ndim == 4:
        return _predictions_2d(x, y, p, ids, names, path, title)
    raise ValueError(f"can plot 1-D or 2-D fields, got targets of shape {y.shape}")


def _predictions_1d(s_in, s_out, x, y, p, ids, names, path, title) -> Path:
    k = len(y)
    fig, axes = plt.subplots(3, k, figsize=(3.4 * k, 7.0), sharex=True, squeeze=False,
                             gridspec_kw={"height_ratios": [1, 2, 1]})
    for j in range(k):
        top, mid, low = axes[:, j]
        top.plot(s_in, x[j, :, 0], color="0.4", lw=1)
        top.set_title(f"sample {ids[j]}: relL2 {_rel_l2(p[j], y[j]):.2e}", fontsize=9)
        mid.plot(s_out, y[j, :, 0], color="k", lw=1.6, label=f"truth {names[1]}")
        mid.plot(s_out, p[j, :, 0], color="tab:red", lw=1.0, ls="--", label="prediction")
        low.plot(s_out, p[j, :, 0] - y[j, :, 0], color="tab:blue", lw=0.9)
        low.axhline(0.0, color="0.7", lw=0.6)
        low.set_xlabel("x")
        for ax in (top, mid, low):
            ax.ticklabel_format(axis="y", style="sci", scilimits=(-2, 3))
            ax.tick_params(labelsize=8)
    axes[0, 0].set_ylabel(f"input {names[0]}")
    axes[1, 0].set_ylabel(f"output {names[1]}")
    axes[2, 0].set_ylabel("prediction − truth")
    axes[1, 0].legend(fontsize=8, loc="best")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def _field(ax, fig, z, title, label, cmap="viridis", vmin=None, vmax=None):
    """``z (nx, ny)`` as an image (x to the right, y up) with a colorbar labelled ``label``."""
    im = ax.imshow(z.T, origin="lower", extent=(0, 1, 0, 1), cmap=cmap, vmin=vmin, vmax=vmax)
    ax.set_title(title, fontsize=9)
    ax.set_xticks([]), ax.set_yticks([])
    cb = fig.colorbar(im, ax=ax, fraction=0.046, pad=0.03)
    cb.set_label(label, fontsize=8)
    cb.ax.tick_params(labelsize=7)
    cb.formatter.set_powerlimits((-2, 3))
    cb.update_ticks()


def _predictions_2d(x, y, p, ids, names, path, title) -> Path:
    k = len(y)
    x_name, y_name = names
    fig, axes = plt.subplots(k, 4, figsize=(13.0, 3.0 * k), squeeze=False)
    for j in range(k):
        lo, hi = min(y[j].min(), p[j].min()), max(y[j].max(), p[j].max())  # truth and prediction share a scale
        _field(axes[j, 0], fig, x[j, ..., 0], f"sample {ids[j]}: input {x_name}", x_name, cmap="cividis")
        _field(axes[j, 1], fig, y[j, ..., 0], f"truth {y_name}", y_name, vmin=lo, vmax=hi)
        _field(axes[j, 2], fig, p[j, ..., 0], f"prediction of {y_name}", y_name, vmin=lo, vmax=hi)
        _field(axes[j, 3], fig, np.abs(p[j, ..., 0] - y[j, ..., 0]),
               f"error (relL2 {_rel_l2(p[j], y[j]):.2e})", f"|prediction − {y_name}|", cmap="magma")
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_inversion(u_obs: np.ndarray, a: np.ndarray, path: str | os.PathLike, *, a_true: np.ndarray | None = None,
                   sample_ids: Sequence[int] | None = None, n: int = 4, title: str | None = None,
                   phase_probability: np.ndarray | None = None, error_interval: np.ndarray | None = None) -> Path:
    """Inverse Darcy, one row per sample (first ``n``): u observed ``(N, m, m)``, a true and a recovered
    ``(N, k, k)`` on one colour scale, the error |a recovered − a true| (a true and the error only
    when ``a_true`` is given) and, when given, the probability of the high phase per cell
    ``phase_probability (N, k, k)``; ``error_interval (N, 2)`` is written above the recovered field."""
    k = min(n, len(a))
    if k == 0:
        raise ValueError("no samples to plot")
    ids = list(sample_ids if sample_ids is not None else range(k))
    cols = (2 if a_true is None else 4) + (phase_probability is not None)
    fig, axes = plt.subplots(k, cols, figsize=(3.3 * cols, 3.0 * k), squeeze=False)
    for j in range(k):
        both = [a[j]] if a_true is None else [a[j], a_true[j]]
        lo, hi = min(z.min() for z in both), max(z.max() for z in both)
        rec = "a recovered" if error_interval is None else \
            f"a recovered (error in [{error_interval[j][0]:.1e}, {error_interval[j][1]:.1e}])"
        _field(axes[j, 0], fig, u_obs[j], f"sample {int(ids[j])}: u observed", "u", cmap="cividis")
        if a_true is None:
            _field(axes[j, 1], fig, a[j], rec, "a", vmin=lo, vmax=hi)
        else:
            _field(axes[j, 1], fig, a_true[j], "a true (pooled)", "a", vmin=lo, vmax=hi)
            _field(axes[j, 2], fig, a[j], rec, "a", vmin=lo, vmax=hi)
            _field(axes[j, 3], fig, np.abs(a[j] - a_true[j]), f"error (relL2 {_rel_l2(a[j], a_true[j]):.2e})",
                   "|a recovered − a true|", cmap="magma")
        if phase_probability is not None:
            _field(axes[j, -1], fig, phase_probability[j], "P(high phase)", "probability", cmap="coolwarm",
                   vmin=0.0, vmax=1.0)
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
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
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
    ax.legend(fontsize=8)
    ax.set_title(title or f"test error vs resolution (n = {rows[0]['n']})")
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
        ax.plot(t[1:], err[1:], "o-", ms=3, lw=1.0, label=f"n = {r['resolution']}")
    ax.set_yscale("log")
    ax.set_xlabel("t / t_final")
    ax.set_ylabel("relative L2 error of the rollout")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title(title or f"rollout error vs time (mean over {rows[0]['n']} samples)")
    fig.tight_layout()
    return save_figure(fig, path)


def plot_spacetime(truth: Any, pred: Any, path: str | os.PathLike, *, sample_ids: Sequence[int] | None = None,
                   n: int = 2, title: str | None = None) -> Path:
    """Space-time pictures of trajectories ``(N, n_x, T + 1)``: truth, prediction (one colour scale)
    and |error|, one row per sample (first ``n``); x across, t upwards."""
    y, p = _np(truth), _np(pred)
    if y.shape != p.shape or y.ndim != 3:
        raise ValueError(f"plot_spacetime needs truth and prediction of one shape (N, n_x, T + 1), "
                         f"got {y.shape} and {p.shape}")
    k = min(n, len(y))
    if k == 0:
        raise ValueError("no samples to plot")
    ids = list(sample_ids if sample_ids is not None else range(k))
    fig, axes = plt.subplots(k, 3, figsize=(11.0, 3.0 * k), squeeze=False)
    for j in range(k):
        lo, hi = min(y[j].min(), p[j].min()), max(y[j].max(), p[j].max())
        _field(axes[j, 0], fig, y[j], f"sample {int(ids[j])}: truth u(x, t)", "u", vmin=lo, vmax=hi)
        _field(axes[j, 1], fig, p[j], "rollout", "u", vmin=lo, vmax=hi)
        _field(axes[j, 2], fig, np.abs(p[j] - y[j]), f"|error| (relL2 {_rel_l2(p[j], y[j]):.2e})", "|error|",
               cmap="magma")
        for ax in axes[j]:
            ax.set_xlabel("x", fontsize=8)
            ax.set_ylabel("t", fontsize=8)
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
    ax.legend(fontsize=8)
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
    "field_names", "percentile_band", "plot_comparison", "plot_error_vs_resolution", "plot_inversion",
    "plot_predictions", "plot_training_curves", "read_epoch_log", "save_figure",
]
