"""Figures of operators evaluated on meshes: fields drawn on each sample's own triangulation.

- [`plot_mesh_predictions`][]: per chosen sample (the first, the median and the worst by error), the
  coefficient, the true solution, the prediction (on the truth's colour scale) and the error, each
  with tripcolor on the triangles, physical axes of ``[0, 1]²`` and its own colour bar;
- [`plot_error_vs_level`][]: relative L² per mesh level, the levels in the order of their mean node
  count, the nested levels joined, the independent remesh marked apart, the training level marked.
"""
from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
from matplotlib.tri import Triangulation  # noqa: E402

from . import figure_style  # noqa: E402
from .figure_style import chosen_samples, sample_head  # noqa: E402


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
    return figure_style.save_figure(fig, path)


def plot_error_vs_level(rows: Sequence[dict[str, Any]], nodes: dict[str, float], path: str | os.PathLike, *,
                        train_level: str | None = None, title: str | None = None) -> Path:
    """Relative L² (median line, mean and max markers) of each mesh level's row, one column per level
    in the order of its mean node count ``nodes[level]`` (named under it: "level1" over "1,225 nodes");
    levels named ``level*`` are joined (nested refinements), others (the independent remesh) drawn
    apart, after a dotted separator; the training level's column is marked.  Saved at ``path`` (PNG and
    PDF).

    Columns, not a log axis of node counts: ``level2`` and the remesh have nearly the same count, so
    their points and names would print over each other."""
    if not rows:
        raise ValueError("no evaluation rows to plot")
    missing = sorted({str(r["resolution"]) for r in rows} - set(nodes))
    if missing:
        raise ValueError(f"no node count for mesh level(s) {', '.join(missing)}")
    nested = sorted((r for r in rows if str(r["resolution"]).startswith("level")), key=lambda r: nodes[r["resolution"]])
    others = sorted((r for r in rows if not str(r["resolution"]).startswith("level")), key=lambda r: nodes[r["resolution"]])
    ordered = nested + others
    fig, ax = plt.subplots(figsize=(1.3 * len(ordered) + 2.4, 4.0))
    x = np.arange(len(ordered), dtype=float)
    k = len(nested)
    if nested:
        ax.plot(x[:k], [r["median"] for r in nested], "o-", color="tab:blue", ms=5, lw=1.2, label="median")
    if others:
        ax.plot(x[k:], [r["median"] for r in others], "s", color="tab:blue", ms=7, mfc="none", mew=1.5,
                label="median, independent mesh")
        if nested:
            ax.axvline(k - 0.5, color="0.6", ls=":", lw=0.8)
    ax.plot(x, [r["mean"] for r in ordered], "D", color="tab:orange", ms=5, mfc="none", mew=1.2, label="mean")
    ax.plot(x, [r["max"] for r in ordered], "v", color="tab:red", ms=5, label="max")
    names = [str(r["resolution"]) for r in ordered]
    if train_level in names:
        ax.axvspan(names.index(train_level) - 0.4, names.index(train_level) + 0.4, color="0.93", zorder=0,
                   label=f"trained on {train_level}")
    ax.set_xticks(x)
    ax.set_xticklabels([f"{name}\n{nodes[name]:,.0f} nodes" for name in names], fontsize=8)
    ax.set_xlim(-0.6, len(ordered) - 0.4)
    ax.set_yscale("log")
    ax.yaxis.set_major_locator(matplotlib.ticker.LogLocator(subs=(1.0, 2.0, 3.0, 5.0)))
    ax.yaxis.set_major_formatter(matplotlib.ticker.FuncFormatter(lambda v, _: f"{v:.0e}".replace("e-0", "e-")))
    ax.yaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())  # unlabelled: labels would overprint
    ax.margins(y=0.15)
    ax.set_xlabel("mesh (mean nodes per sample)")
    ax.set_ylabel("relative L2 error per sample")
    ax.grid(True, axis="y", which="major", alpha=0.3)
    ax.legend(fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.28), ncol=3, frameon=False)
    ax.set_title(title or f"test error per mesh level ({rows[0]['n']} test samples)", fontsize=9)
    fig.tight_layout()
    return figure_style.save_figure(fig, path)


__all__ = ["chosen_samples", "plot_error_vs_level", "plot_mesh_predictions"]  # chosen_samples: from .figure_style
