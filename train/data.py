"""Train/val/test data from a :class:`DataConfig`, and the normalised operator wrapper.

Splits (file order, N complete samples): train ``[0, n_train)``, val ``[n_train, n_train + n_val)``
(model selection only), test ``[N − n_test, N)`` (only ever evaluated); they must not overlap.

Normalisation (decided once, the same at every resolution): the network sees point-wise Gaussian
normalised inputs ``x̂ = (x − μ_x)/σ_x`` (plus ``noise·N(0,1)`` for the inverse problem) and its output
is read as a normalised target, decoded ``y = ŷ σ_y + μ_y`` *before* the loss — losses and metrics are
always relative L² in raw units.  The normalisers are fitted on the train indices at the file's
native resolution and restricted to any other grid with ``at_resolution``, so a model trained at one
resolution is evaluated at another with consistent statistics.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from petrov.datasets import (
    PointwiseGaussianNormalizer, add_noise, dataset_info, fit_normalizer, generate_dataset, open_dataset,
)

from .config import DataConfig

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Splits:
    """Sample indices (in the file) of each split."""

    train: np.ndarray
    val: np.ndarray
    test: np.ndarray


def split_indices(n_total: int, n_train: int, n_val: int, n_test: int) -> Splits:
    """Train from the front, val right after it, test from the end; ValueError if they overlap."""
    if n_train + n_val + n_test > n_total:
        raise ValueError(
            f"the data file has {n_total} samples but n_train + n_val + n_test = "
            f"{n_train} + {n_val} + {n_test} = {n_train + n_val + n_test}; lower them or generate more"
        )
    return Splits(
        train=np.arange(0, n_train),
        val=np.arange(n_train, n_train + n_val),
        test=np.arange(n_total - n_test, n_total),
    )


# --- normalisers ---------------------------------------------------------------------------------

def _norm_at(normalizer: Any, grid: tuple[int, ...], device: torch.device) -> Any:
    """The normaliser restricted to ``grid`` (n points per axis) and moved to ``device``."""
    return normalizer.at_resolution(grid[0]).to(device)


def normalizer_from_state(state: dict[str, Any] | None) -> Any:
    if state is None:
        return None
    return PointwiseGaussianNormalizer.from_state(state)


class NormalizedOperator(nn.Module):
    """``y = decode(model(encode(x) [+ noise], pos))`` at any resolution of the training family.

    ``x: (b, *grid, c_in)`` raw units -> ``(b, *grid_out, c_out)`` raw units.  ``model`` is the
    trained network (it sees normalised data); ``x_normalizer``/``y_normalizer`` are fitted
    point-wise Gaussian normalisers (``None``: identity).  The restricted normalisers are cached
    per (grid, device).
    """

    def __init__(self, model: nn.Module, x_normalizer: Any = None, y_normalizer: Any = None):
        super().__init__()
        self.model = model
        self.x_normalizer = x_normalizer
        self.y_normalizer = y_normalizer
        self._cache: dict[tuple, Any] = {}

    def _at(self, which: str, grid: tuple[int, ...], device: torch.device) -> Any:
        base = self.x_normalizer if which == "x" else self.y_normalizer
        if base is None:
            return None
        key = (which, tuple(grid), str(device))
        if key not in self._cache:
            self._cache[key] = _norm_at(base, tuple(grid), device)
        return self._cache[key]

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        norm = self._at("x", x.shape[1:-1], x.device)
        return x if norm is None else norm.encode(x)

    def decode(self, y_hat: torch.Tensor) -> torch.Tensor:
        norm = self._at("y", y_hat.shape[1:-1], y_hat.device)
        return y_hat if norm is None else norm.decode(y_hat)

    def encode_target(self, y: torch.Tensor) -> torch.Tensor:
        """Raw targets in the units the model outputs (the inverse of :meth:`decode`)."""
        norm = self._at("y", y.shape[1:-1], y.device)
        return y if norm is None else norm.encode(y)

    def predict(
        self,
        x: torch.Tensor,
        pos: torch.Tensor | None = None,
        *,
        noise: float = 0.0,
        noise_seed: int = 0,
        sample_ids: torch.Tensor | np.ndarray | None = None,
        net=None,
        teacher: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """``decode(net(encode(x) + noise·ξ, pos))``: the one path from raw inputs to raw predictions.

        ``noise·ξ`` is the input noise of the inverse problem, fixed per (``noise_seed``, file sample
        number in ``sample_ids``) (see :func:`add_input_noise`); ``net`` defaults to ``self.model``
        (the trainer passes its DDP-wrapped model under autocast).  ``teacher`` (raw units, the
        target's shape): states a marching model conditions on (teacher forcing), passed to it as
        ``teacher=encode_target(teacher)`` (see :mod:`petrov.operators.trajectory`).
        """
        x_hat = add_input_noise(self.encode(x), noise, noise_seed, sample_ids)
        extra = {} if teacher is None else {"teacher": self.encode_target(teacher)}
        return self.decode((net or self.model)(x_hat, pos, **extra).float())

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        return self.predict(x, pos)

    def normalizer_states(self) -> dict[str, Any]:
        return {"x": self.x_normalizer, "y": self.y_normalizer}


def input_noise(cfg: DataConfig | None, dataset: Any) -> float:
    """The input noise level: the config's ``data.noise``, else the file's (the inverse problem's)."""
    return float(dataset.noise if cfg is None or cfg.noise is None else cfg.noise)


def add_input_noise(
    x_hat: torch.Tensor, noise: float, seed: int, sample_ids: torch.Tensor | np.ndarray
) -> torch.Tensor:
    """``x̂ + noise·ξ`` with ξ ~ N(0, 1) seeded per (seed, file sample index): fixed per sample."""
    if not noise:
        return x_hat
    return add_noise(x_hat, noise, seed, sample_ids)


# --- building the splits -------------------------------------------------------------------------

@dataclass
class TrainingData:
    """What the trainer needs: the train/val datasets (GridDataset-like: ``.x``, ``.y``,
    ``.coords``, ``.periodic``, ``.indices``), the fitted normalisers and the input noise level."""

    train: Any
    val: Any
    x_normalizer: Any
    y_normalizer: Any
    noise: float
    splits: Splits | None = None


def ensure_data_file(cfg: DataConfig, progress: bool = True) -> Path:
    """``cfg.path``, generated first from ``[data.generate]`` if it does not exist."""
    path = Path(cfg.path)
    if path.exists():
        return path
    if cfg.generate is None:
        raise FileNotFoundError(
            f"data file {str(path)!r} does not exist; create it with `petrov generate` or add a "
            f"[data.generate] table to the config"
        )
    g = cfg.generate
    path.parent.mkdir(parents=True, exist_ok=True)
    log.info("generating %d %s samples into %s ...", g.n_samples, g.kind, path)
    generate_dataset(
        g.kind, path, g.n_samples, resolution=g.resolution, seed=g.seed, progress=progress, **g.options
    )
    return path


def n_samples_in(path: str | os.PathLike) -> int:
    return int(dataset_info(path)["n_complete"])


def data_splits(cfg: DataConfig) -> Splits:
    return split_indices(n_samples_in(cfg.path), cfg.n_train, cfg.n_val, cfg.n_test)


def open_split(cfg: DataConfig, indices: np.ndarray, resolution: int | None = None) -> Any:
    """The samples ``indices`` of ``cfg.path`` at ``resolution`` (default: the training one)."""
    res = cfg.train_resolution if resolution is None else resolution
    return open_dataset(
        cfg.path, resolution=res, indices=indices, coarse_resolution=cfg.coarse_resolution,
        kind=cfg.kind,
    )


def fit_normalizers(cfg: DataConfig, train_indices: np.ndarray) -> tuple[Any, Any]:
    """Point-wise Gaussian normalisers of x and y fitted on the train split (native resolution)."""
    def fit(field: str, enabled: bool) -> Any:
        if not enabled:
            return None
        # x: point values at the native grid (restricted later); y of the inverse problem is pooled
        # from the training grid, so its statistics are fitted there
        return fit_normalizer(
            cfg.path, field, train_indices, kind=cfg.kind, coarse_resolution=cfg.coarse_resolution,
            resolution=cfg.train_resolution if field == "y" else None,
        )

    return fit("x", cfg.normalize_x), fit("y", cfg.normalize_y)


def build_training_data(cfg: DataConfig) -> TrainingData:
    """Open train and val at the training resolution and fit the normalisers on train."""
    splits = data_splits(cfg)
    train, val = open_split(cfg, splits.train), open_split(cfg, splits.val)
    x_norm, y_norm = fit_normalizers(cfg, splits.train)
    return TrainingData(train, val, x_norm, y_norm, input_noise(cfg, train), splits)
