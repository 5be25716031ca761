"""What every figure of petrov shares: the file it is written to, tick labels with their power of ten,
the samples a figure shows and how it names them, the physical extent of a grid, the names of a
dataset kind's fields, and one field drawn as an image with its colorbar.

These are the rules that let a figure go into a paper as it is (``petrov.evaluate.plots`` lists them):
a power of ten goes into the axis or colorbar label ("|error| (×10⁻³)"), never an offset text that
would collide with a neighbouring title; fields are drawn on their physical domain; samples are the
first one, the one of median error and the worst one, named as such.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Sequence

import matplotlib

matplotlib.use("Agg")  # files only; never needs a display
import matplotlib.pyplot as plt  # noqa: E402
import matplotlib.ticker  # noqa: E402
import numpy as np  # noqa: E402
import torch  # noqa: E402

from ..common.files import atomic_path  # noqa: E402
from ..common.host import to_numpy  # noqa: E402


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
    top = float(np.nanmax(np.abs(host_array(values)))) if np.size(values) else 0.0
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
    e = host_array(errors).ravel()
    if e.size == 0:
        raise ValueError("no per-sample errors to choose samples from")
    order = np.argsort(e, kind="stable")
    chosen: list[tuple[str, int]] = []
    for label, pos in (("first", 0), ("median", int(order[e.size // 2])), ("worst", int(order[-1]))):
        if pos not in [p for _, p in chosen]:
            chosen.append((label, pos))
    return chosen


def sample_head(sample: int, label: str | None = None) -> str:
    """How a figure names a sample: "sample 612", or with its [`chosen_samples`][] label
    "sample 612 (first)", "sample 650 (median error)", "sample 699 (worst error)"."""
    if not label:
        return f"sample {int(sample)}"
    return f"sample {int(sample)} ({label if label == 'first' else label + ' error'})"


def grid_extent(coords: Any, domain: Any = None) -> tuple[float, float, float, float]:
    """``(x0, x1, y0, y1)`` for ``imshow`` of a field on the 2-D grid ``coords (nx, ny, 2)`` (unit-box
    coordinates, as the models see them): the outer edges of the pixels centred on the grid points,
    mapped to the physical ``domain`` ``[[x_lo, x_hi], [y_lo, y_hi]]`` (default the unit square)."""
    c = host_array(coords)
    box = np.asarray(domain if domain is not None else [[0.0, 1.0], [0.0, 1.0]], dtype=float).reshape(2, 2)
    edges = []
    for axis, (lo, hi) in zip((c[:, 0, 0], c[0, :, 1]), box):
        h = (axis[-1] - axis[0]) / max(len(axis) - 1, 1)
        edges += [lo + (hi - lo) * (axis[0] - h / 2), lo + (hi - lo) * (axis[-1] + h / 2)]
    return tuple(edges)


def node_extent(m: int) -> tuple[float, float, float, float]:
    """[`grid_extent`][] of the ``m x m`` node grid of the unit square."""
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


def host_array(values: Any) -> np.ndarray:
    """``values`` (a tensor on any device, an array, a list) as a float64 numpy array on the host."""
    return to_numpy(values, dtype=np.float64)


def relative_l2(pred: np.ndarray, true: np.ndarray) -> float:
    """``‖pred − true‖ / ‖true‖`` over every entry (the per-sample error written in a figure's titles)."""
    return float(np.linalg.norm(pred - true) / max(np.linalg.norm(true), 1e-300))


# (input, target) of each dataset kind as the figures name them
FIELD_NAMES = {
    "burgers": ("u₀", "u(·, {t})"),
    "burgers-trajectory": ("u₀", "u(·, 0)"),  # the first snapshot (channel 0) is what is drawn
    "darcy": ("a", "u"),
    "navier-stokes": ("w₀", "vorticity w"),
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


def draw_field(ax, fig, z, title, label, cmap="viridis", vmin=None, vmax=None, extent=(0.0, 1.0, 0.0, 1.0),
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
