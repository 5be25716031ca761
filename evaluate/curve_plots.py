"""Figures of curves: the error against the resolution (a percentile band of the per-sample errors),
the rollout error against time, the training curves read from a run's log, and one value per label.

Every function takes plain data (rows, lists, a run directory), writes one figure as ``NAME.png`` and
``NAME.pdf`` (``figure_style.save_figure``) and returns the PNG's path.
"""
from __future__ import annotations

import csv
import json
import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib.pyplot as plt
import matplotlib.ticker
import numpy as np
import torch

from ..train.metrics import resolution_label
from . import figure_style
from .figure_style import host_array


def percentile_band(errors: Sequence[float] | np.ndarray | torch.Tensor, low: float = 10.0,
                    high: float = 90.0) -> tuple[float, float, float]:
    """``(P_low, median, P_high)`` of per-sample errors: percentiles with numpy's linear interpolation
    between the sorted values (``P_q`` = value at rank ``q/100 · (n − 1)``)."""
    e = host_array(errors).ravel()
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
    rows = sorted(rows, key=lambda r: axis_points(r["resolution"]))
    res = np.array([axis_points(r["resolution"]) for r in rows], dtype=float)
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
        ax.axvline(axis_points(train_resolution), color="0.5", ls="-.", lw=0.8,
                   label=f"trained at {resolution_label(train_resolution)}")
    if target is not None:
        ax.axhline(target, color="k", ls=":", lw=0.8, label=f"target {target:g}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xticks(res)
    ax.set_xticklabels([resolution_label(r["resolution"]) for r in rows])
    ax.xaxis.set_minor_locator(matplotlib.ticker.NullLocator())
    ax.set_xlim(res.min() / 1.25, res.max() * 1.25)
    ax.set_xlabel("resolution (grid points per axis; n_x x n_y at their geometric mean)"
                  if any(isinstance(r["resolution"], (list, tuple)) for r in rows) else "resolution (grid points per axis)")
    ax.set_ylabel("relative L2 error per sample")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)  # beside the data
    ax.set_title(title or f"test error vs resolution ({rows[0]['n']} test samples)")
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


def axis_points(resolution: Any) -> float:
    """Where a resolution sits on a resolution axis: its points per axis; a pair ``(n_x, n_y)`` at their
    geometric mean (the side of the square grid of as many points)."""
    if isinstance(resolution, (list, tuple)):
        return float(np.prod(np.asarray(resolution, dtype=float)) ** (1.0 / len(resolution)))
    return float(resolution)


def plot_error_vs_time(rows: Sequence[dict[str, Any]], path: str | os.PathLike, *,
                       title: str | None = None) -> Path:
    """Rollout relative L² against time, one line per resolution, from trajectory evaluation rows
    (``resolution`` and ``per_time_mean``: the mean over samples of each state's error, state ``k`` of
    the window at ``k`` steps; the ``history`` given states are not drawn).  Rows of several fields
    (``fields``, ``per_time_field_mean``): a panel per field, on one error axis."""
    if not rows or any("per_time_mean" not in r for r in rows):
        raise ValueError("plot_error_vs_time needs trajectory evaluation rows (with per_time_mean)")
    names = list(rows[0].get("fields", [])) if len(rows[0].get("fields", [])) > 1 else [None]
    fig, axes = plt.subplots(1, len(names), figsize=(6.0 + 3.6 * (len(names) - 1), 4.2), sharey=True,
                             squeeze=False)
    for f, (ax, name) in enumerate(zip(axes[0], names)):
        for r in sorted(rows, key=lambda r: axis_points(r["resolution"])):
            per_time = r["per_time_mean"] if name is None else [state[f] for state in r["per_time_field_mean"]]
            err, given = np.asarray(per_time, dtype=float), int(r.get("history", 1))
            steps = np.arange(1, len(err) - given + 1)
            ax.plot(steps, err[given:], "o-", ms=3, lw=1.0, label=f"{resolution_label(r['resolution'])} grid points")
        ax.set_yscale("log")
        ax.set_xlabel("steps after the given states")
        ax.grid(True, which="both", alpha=0.3)
        if name is not None:
            ax.set_title(name, fontsize=9)
    axes[0, 0].set_ylabel("relative L2 error of the rollout")
    axes[0, -1].legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    heading = title or f"rollout error vs time (mean over {rows[0]['n']} test samples)"
    if names == [None]:
        axes[0, 0].set_title(heading)
    else:
        fig.suptitle(f"{heading}, per field")
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


_EPOCH_KEYS = frozenset({"epoch", "train_loss", "val_rel_l2", "lr"})  # what plot_training_curves reads


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
        rows = []
        for number, line in enumerate(source.read_text().splitlines(), 1):
            if not line.strip():
                continue
            try:
                row = json.loads(line)
            except ValueError as err:
                raise ValueError(f"training log {str(source)!r} is damaged: line {number} is not a JSON record "
                                 f"({err})") from None
            if not isinstance(row, dict) or not _EPOCH_KEYS <= row.keys():
                raise ValueError(f"training log {str(source)!r} is damaged: line {number} is not an epoch record "
                                 f"(with {', '.join(sorted(_EPOCH_KEYS))})")
            rows.append(row)
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
    return figure_style.save_figure(fig, path)


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
    return figure_style.save_figure(fig, path)
