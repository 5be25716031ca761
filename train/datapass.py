"""The passes over a data file before the first step, each rank of a distributed run reading its share.

- ``fit_normalizers``: the Gaussian normalisers, fitted on the training split (grid files: point-wise,
  at the native resolution; mesh files: per channel with quadrature weights).  In a distributed run each
  rank fits a grid file's statistics on its contiguous share of the training samples
  (``distributed.shard``) and the shares are merged as moments merge:
  ``mean = Σ n_r m_r / N``, ``M2 = Σ ((n_r − 1) s_r² + n_r (m_r − mean)²)``, ``std = √(M2 / (N − 1))``.
  The shares' statistics are float32, so a distributed run's normalisers may differ from one process's
  in their last bits (relative ~1e-7).  Mesh files: every rank fits on the whole split (read per sample).
- ``check_splits``: every sample of the splits not read yet is read once (grid files: both stored
  fields at the native resolution, so every evaluation resolution is covered, in blocks of
  ``CHECK_BYTES``; mesh files: each sample at each level it is used at), so that a NaN or inf is an error
  naming the split, the file, the field and the sample before the first step -- not after a whole
  training, when the test split would first be read.  The splits read already: a training split in
  memory, or one whose both fields the normalisers read (``StoredData.read`` refuses NaN and inf), and a
  validation split in memory.  Each rank checks its share; every rank raises the first error found.
"""
from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import torch

from ..datasets import (PointwiseGaussianNormalizer, fit_normalizer, fit_point_normalizer, open_mesh_dataset,
                        statistics_grid_size)
from ..datasets.loading import fields_per_state, open_source
from ..datasets.mesh.storage import is_mesh_file
from ..datasets.recipes import is_trajectory
from ..datasets.windows import Window
from . import distributed as dist_
from .config_tables import DataConfig

CHECK_BYTES = 2**23  # a check reads this many bytes of samples at a time (a few copies of it are held)
# values beyond this magnitude are refused: sums of their squares (the losses' norms) overflow float32
MAGNITUDE_LIMIT = 1e18
# data.normalizer_grid at most this many nodes per axis: fitting holds ~64 bytes per node of the statistics
# grid (float64 sums of a chunk of samples), ~1 GiB here; the grid chosen from the meshes is at most 257
MAX_NORMALIZER_GRID = 4097
_BYTES_PER_NODE = 64

log = logging.getLogger(__name__)


def check_normalizer_grid(cfg: DataConfig, point_data: bool) -> None:
    """ValueError for a ``data.normalizer_grid`` whose statistics grid would not fit in memory (more than
    ``MAX_NORMALIZER_GRID`` nodes per axis); a warning when it is set for grid data, which ignores it."""
    size = cfg.normalizer_grid
    if size is None:
        return
    if not point_data:
        log.warning("data.normalizer_grid = %s is for mesh files; %s is a grid file, whose normalisers are "
                    "point-wise on its grid: ignored", size, cfg.path)
        return
    if size > MAX_NORMALIZER_GRID:
        need = _BYTES_PER_NODE * float(size) ** 2 / 2**30
        raise ValueError(f"data.normalizer_grid = {size} is too fine: its {size}x{size} statistics grid would take "
                         f"~{need:.3g} GiB to fit; set at most {MAX_NORMALIZER_GRID} nodes per axis, or leave it out "
                         f"(as fine as the training meshes)")


def first_huge(values: Any, limit: float = MAGNITUDE_LIMIT) -> tuple[int, float] | None:
    """``(sample, value)`` of the first sample of ``values`` (samples along the first axis, array or
    tensor) holding a value beyond ``limit`` in magnitude, None if there is none."""
    a = np.abs(values.detach().cpu().numpy() if isinstance(values, torch.Tensor) else np.asarray(values))
    big = (a.reshape(len(a), -1) > limit).any(axis=1) if len(a) else np.zeros(0, bool)
    if not big.any():
        return None
    k = int(np.flatnonzero(big)[0])
    return k, float(np.asarray(values[k]).reshape(-1)[int(np.argmax(a[k].reshape(-1)))])


def check_magnitudes(values: Any, indices: Any, field: str, path: Any) -> None:
    """ValueError naming the file, the field, the sample (its number in the file, ``indices``) and the
    value if a value of ``values`` is beyond ``MAGNITUDE_LIMIT``."""
    found = first_huge(values)
    if found is not None:
        k, value = found
        raise ValueError(f"{path}: field {field!r} holds {value:.3g} in sample {int(np.asarray(indices)[k])}, beyond "
                         f"{MAGNITUDE_LIMIT:g} in magnitude (sums of its square overflow float32); fix or drop "
                         f"such samples first")


def _merged(parts: list[tuple[int, Any]]) -> PointwiseGaussianNormalizer:
    """One normaliser from ``(n_r, normaliser fitted on n_r samples)`` shares (see the module docstring)."""
    first = parts[0][1]
    n = sum(k for k, _ in parts)
    mean = sum(k * norm.mean.double() for k, norm in parts) / n
    m2 = sum((k - 1) * norm.std.double() ** 2 + k * (norm.mean.double() - mean) ** 2 for k, norm in parts)
    return PointwiseGaussianNormalizer(mean.float(), (m2 / (n - 1)).sqrt().float(), first.eps,
                                       periodic=first.periodic, strideable=first.strideable, cells=first.cells,
                                       fields=first.fields)


def window_of(cfg: DataConfig) -> Window | None:
    """The trajectory window ``data.history``, ``first_state`` and ``states`` choose (None: the defaults, the
    stored input and the whole trajectory)."""
    if (cfg.history, cfg.first_state, cfg.states) == (1, 0, None):
        return None
    return Window(cfg.history, cfg.first_state, cfg.states)


def _fit_grid(cfg: DataConfig, field: str, indices: np.ndarray, ctx: dist_.Context,
              fields: int = 1) -> PointwiseGaussianNormalizer:
    def fit(idx: np.ndarray) -> PointwiseGaussianNormalizer:
        # x: point values at the native grid (restricted later); y of the inverse problem is pooled
        # from the training grid, so its statistics are fitted there
        return fit_normalizer(cfg.path, field, idx, kind=cfg.kind, coarse_resolution=cfg.coarse_resolution,
                              resolution=cfg.train_resolution if field == "y" else None,
                              pointwise=cfg.normalizer == "pointwise", window=window_of(cfg), fields=fields)

    if not ctx.distributed or len(indices) < 2 * ctx.world_size:  # shares of fewer than 2 samples: no std
        return fit(indices)
    own = indices[dist_.shard(len(indices), ctx)]
    norm = dist_.on_every_rank(lambda: fit(own), ctx)
    return _merged(dist_.all_gather_objects((len(own), norm), ctx))


def fit_normalizers(cfg: DataConfig, train_indices: np.ndarray, train: Any = None,
                    ctx: dist_.Context | None = None) -> tuple[Any, Any]:
    """The x and y normalisers (None where ``data.normalize_x`` / ``normalize_y`` is off) fitted on the
    training split (``train``: the opened split, which tells grids from point sets).  Trajectories: the
    input's normaliser is the target's for its first ``data.history`` states (one fit, the same units); a
    time series of F fields per state is normalised per field."""
    ctx = ctx or dist_.Context()
    point_data = train is not None and hasattr(train, "node_counts")
    fields = fields_per_state(train)

    def fit(field: str, size: int | None) -> Any:
        if not point_data:
            return _fit_grid(cfg, field, train_indices, ctx, fields)
        return fit_point_normalizer(train, field, size=size)

    wanted = [field for field in ("x", "y") if getattr(cfg, f"normalize_{field}")]
    if wanted and train is not None:
        check_normalizer_grid(cfg, point_data)
    try:
        # point sets: one statistics grid for both, as fine as the training meshes unless set
        size = cfg.normalizer_grid or (statistics_grid_size(train) if point_data and wanted else None)
        trajectory = is_trajectory(getattr(train, "kind", None)) and wanted == ["x", "y"]
        fitted = {field: fit(field, size) for field in (["y"] if trajectory else wanted)}
        if trajectory:
            fitted["x"] = fitted["y"].first_channels(cfg.history * fields)
    except ValueError as err:  # NaN or inf: the normalisers read the training split first
        raise ValueError(f"training split (checked before training): {err}") from None
    return fitted.get("x"), fitted.get("y")


def _check_grid(path: str, indices: np.ndarray) -> None:
    with open_source(path) as src:
        for name in ("x", "y"):
            size = 4 * src.native_resolution ** src.dim * math.prod(src.channel_shape(name))
            block = max(1, CHECK_BYTES // size)
            for lo in range(0, len(indices), block):
                rows = indices[lo:lo + block]
                check_magnitudes(src.read(name, rows, 1), rows, name, path)  # NaN/inf: src.read's ValueError


def _check_mesh(cfg: DataConfig, indices: np.ndarray, levels: list) -> None:
    for level in levels:
        dataset = open_mesh_dataset(cfg.path, level, indices)
        for k in range(len(dataset)):
            item = dataset[k]  # NaN/inf: a ValueError naming the sample
            for field in ("x", "y"):
                if isinstance(item, dict) and isinstance(item.get(field), torch.Tensor):
                    check_magnitudes(item[field][None], indices[k:k + 1], field, cfg.path)


def check_splits(cfg: DataConfig, splits: dict[str, np.ndarray], ctx: dist_.Context | None = None,
                 test_levels: list | None = None) -> None:
    """Read ``splits`` (name -> sample indices) of ``cfg.path`` once; a NaN or inf is a ValueError naming
    the split (see the module docstring).  Every rank of ``ctx`` reads its share.  Mesh files: the test
    split at ``test_levels``, the others at ``data.level``."""
    ctx = ctx or dist_.Context()
    mesh = is_mesh_file(cfg.path)

    def check() -> None:
        for name, indices in splits.items():
            own = np.asarray(indices)[dist_.shard(len(indices), ctx)]
            try:
                if mesh:
                    _check_mesh(cfg, own, list(test_levels or []) if name == "test" else [cfg.level])
                elif len(own):
                    _check_grid(cfg.path, own)
            except ValueError as err:
                raise ValueError(f"{name} split (checked before training): {err}") from None

    dist_.on_every_rank(check, ctx)


def check_loaded(cfg: DataConfig, datasets: dict[str, Any]) -> None:
    """The splits held in memory (name -> dataset with ``x``, ``y`` tensors and ``indices``): a value beyond
    ``MAGNITUDE_LIMIT`` is a ValueError naming the split (their NaN/inf were refused when they were read)."""
    for name, dataset in datasets.items():
        if not (isinstance(getattr(dataset, "x", None), torch.Tensor) and hasattr(dataset, "indices")):
            continue  # read per batch, or point sets: check_splits reads them
        try:
            for field in ("x", "y"):
                check_magnitudes(getattr(dataset, field), dataset.indices, field, cfg.path)
        except ValueError as err:
            raise ValueError(f"{name} split (checked before training): {err}") from None


def huge_statistics(normalizers: Any, n: int) -> bool:
    """Whether fitted normalisers (``mean``/``std`` tensors, None: none) over ``n`` samples may hide a value
    beyond ``MAGNITUDE_LIMIT``: one such value moves the mean by at least ``MAGNITUDE_LIMIT / n`` or the
    std by more (or makes them non-finite)."""
    for norm in normalizers:
        for stat in (getattr(norm, "mean", None), getattr(norm, "std", None)):
            if isinstance(stat, torch.Tensor) and stat.numel():
                s = stat.detach().abs()
                if not bool(torch.isfinite(s).all()) or float(s.max()) > MAGNITUDE_LIMIT / max(n, 1):
                    return True
    return False


def splits_to_check(cfg: DataConfig, splits: Any, train: Any, val: Any,
                    normalizers: Any = ()) -> dict[str, np.ndarray]:
    """The splits ``check_splits`` must read (see the module docstring): the test split, and the
    training and validation splits where they were not read already (a training split the normalisers
    read: again if their statistics may hide a huge value, ``huge_statistics``)."""
    out = {}
    lazy = lambda d: not hasattr(d, "x")  # noqa: E731 - read per batch (lazy grid files, meshes)
    if lazy(train) and (not (cfg.normalize_x and cfg.normalize_y)
                        or huge_statistics(normalizers, len(splits.train))):
        out["training"] = splits.train
    if lazy(val):
        out["validation"] = splits.val
    if len(splits.test):
        out["test"] = splits.test
    return out


__all__ = ["CHECK_BYTES", "MAGNITUDE_LIMIT", "check_loaded", "check_magnitudes", "check_splits", "first_huge",
           "huge_statistics", "fit_normalizers", "splits_to_check", "window_of"]
