"""Figures of operators evaluated on meshes: fields drawn on each sample's own triangulation.

- :func:`plot_mesh_predictions`: per chosen sample (the first, the median and the worst by error), the
  coefficient, the true solution, the prediction (on the truth's colour scale) and the error, each
  with tripcolor on the triangles, physical axes of ``[0, 1]²`` and its own colour bar;
- :func:`plot_error_vs_level`: relative L² per mesh level against the mean node count, the nested
  levels joined, the independent remesh marked apart, the training level marked.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.tri import Triangulation  # noqa: E402

from .plots import chosen_samples, sample_head, save_figure  # noqa: E402


def _field(ax, tri: Triangulation, values: np.ndarray, title: str, vmin=None, vmax=None, cmap="viridis"):
    image = ax.tripcolor(tri, values, shading="gouraud", vmin=vmin, vmax=vmax, cmap=cmap)
    ax.triplot(tri, lw=0.05, color="0.6", alpha=0.4)
    ax.set_aspect("equal")
    ax.set_xlim(0.0, 1.0)
    ax.set_ylim(0.0, 1.0)
    ax.set_xticks([0.0, 0.5, 1.0])
    ax.set_yticks([0.0, 0.5, 1.0])
    ax.tick_params(labelsize=7)
    ax.set_title(title, fontsize=8)
    bar = ax.figure.colorbar(image, ax=ax, fraction=0.046, pad=0.03)
    bar.ax.tick_params(labelsize=6)
    bar.formatter.set_powerlimits((-2, 3))
    bar.ax.yaxis.get_offset_text().set_fontsize(6)
    bar.update_ticks()


def plot_mesh_predictions(samples: Sequence[dict[str, Any]], predictions: Sequence[np.ndarray],
                          errors: Sequence[float], path: str | os.PathLike, *, title: str = "") -> Path:
    """One row per sample: ``samples[i]`` a mesh item (``pos (n, 2)``, ``triangles (t, 3)``, ``x (n, c)``,
    ``y (n, c)``, ``index``), ``predictions[i]`` its prediction ``(n, c)`` (first channel drawn),
    ``errors[i]`` its relative L² (in the row's titles).  Saved at ``path`` (PNG and PDF)."""
    if not samples:
        raise ValueError("no samples to plot")
    fig, axes = plt.subplots(len(samples), 4, figsize=(12.0, 2.9 * len(samples)), squeeze=False)
    for row, (item, pred, err) in enumerate(zip(samples, predictions, errors)):
        pos = np.asarray(item["pos"], dtype=float)
        tri = Triangulation(pos[:, 0], pos[:, 1], np.asarray(item["triangles"]))
        truth, guess = np.asarray(item["y"])[:, 0], np.asarray(pred)[:, 0]
        lo, hi = float(min(truth.min(), guess.min())), float(max(truth.max(), guess.max()))
        head = sample_head(int(item["index"]), item.get("label"))
        _field(axes[row, 0], tri, np.asarray(item["x"])[:, 0], f"{head}: coefficient a", cmap="cividis")
        _field(axes[row, 1], tri, truth, "solution u (truth)", lo, hi)
        _field(axes[row, 2], tri, guess, "prediction (same scale)", lo, hi)
        bound = float(np.abs(guess - truth).max()) or 1.0
        _field(axes[row, 3], tri, guess - truth, f"error, relative L2 {err:.2e}", -bound, bound, cmap="RdBu_r")
    for ax in axes[-1]:
        ax.set_xlabel("x", fontsize=8)
    for ax in axes[:, 0]:
        ax.set_ylabel("y", fontsize=8)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    return save_figure(fig, path)


def plot_error_vs_level(rows: Sequence[dict[str, Any]], nodes: dict[str, float], path: str | os.PathLike, *,
                        train_level: str | None = None, title: str | None = None) -> Path:
    """Relative L² (median line, mean and max markers) of each mesh level's row against its mean node
    count ``nodes[level]``; levels named ``level*`` are joined (nested refinements), others (the
    independent remesh) drawn apart.  Saved at ``path`` (PNG and PDF)."""
    if not rows:
        raise ValueError("no evaluation rows to plot")
    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    nested = sorted((r for r in rows if str(r["resolution"]).startswith("level")), key=lambda r: nodes[r["resolution"]])
    others = [r for r in rows if not str(r["resolution"]).startswith("level")]
    if nested:
        x = [nodes[r["resolution"]] for r in nested]
        ax.plot(x, [r["median"] for r in nested], "o-", color="tab:blue", ms=4, lw=1.2, label="median (nested levels)")
        ax.plot(x, [r["mean"] for r in nested], "D", color="tab:orange", ms=5, mfc="none", label="mean")
        ax.plot(x, [r["max"] for r in nested], "v", color="tab:red", ms=4, label="max")
    for r in others:
        x = nodes[r["resolution"]]
        ax.plot([x], [r["median"]], "s", color="tab:green", ms=7, mfc="none", mew=1.5,
                label=f"median ({r['resolution']}: independent mesh)")
        ax.plot([x], [r["mean"]], "D", color="tab:orange", ms=5, mfc="none")
        ax.plot([x], [r["max"]], "v", color="tab:red", ms=4)
    if train_level is not None and train_level in nodes:
        ax.axvline(nodes[train_level], color="0.5", ls="-.", lw=0.8, label=f"trained on {train_level}")
    for r in rows:
        ax.annotate(str(r["resolution"]), (nodes[r["resolution"]], r["median"]), textcoords="offset points",
                    xytext=(0, -12), ha="center", fontsize=7)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("mean nodes per sample")
    ax.set_ylabel("relative L2 error per sample")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.02, 1.0), borderaxespad=0.0)
    ax.set_title(title or f"test error per mesh level ({rows[0]['n']} test samples)", fontsize=9)
    fig.tight_layout()
    return save_figure(fig, path)


__all__ = ["chosen_samples", "plot_error_vs_level", "plot_mesh_predictions"]  # chosen_samples: from .plots
