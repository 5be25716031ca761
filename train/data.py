"""Train/val/test data from a :class:`DataConfig`: splits, normalisers, input noise, batches.

Splits (file order, N complete samples): train ``[0, n_train)``, val ``[n_train, n_train + n_val)``
(model selection only), test ``[N − n_test, N)`` (only ever evaluated); they must not overlap.
The normalisers are fitted on the train indices at the file's native resolution (see
:mod:`petrov.train.operator` for how the trained operator uses them); the input noise of the inverse
problem is one :class:`~petrov.datasets.InputNoise`, the config's level (else the file's) and seed.
Batches of a grid dataset are ``(x, y, position)`` from :func:`data_loader`, with the coordinates
from :func:`batch_pos` and the file sample numbers from :func:`sample_ids`.
"""
from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from petrov.datasets import InputNoise, dataset_info, fit_normalizer, generate_dataset, open_dataset

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


# --- building the splits -------------------------------------------------------------------------

@dataclass
class TrainingData:
    """What the trainer needs: the train/val datasets (GridDataset-like: ``.x``, ``.y``,
    ``.coords``, ``.periodic``, ``.indices``), the fitted normalisers and the input noise."""

    train: Any
    val: Any
    x_normalizer: Any
    y_normalizer: Any
    noise: InputNoise
    splits: Splits | None = None

    def __post_init__(self):
        if not isinstance(self.noise, InputNoise):  # a bare level, seed 0
            self.noise = InputNoise(float(self.noise))


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


def input_noise(cfg: DataConfig | None, dataset: Any) -> InputNoise:
    """The input noise: the config's ``data.noise`` level, else the file's (the inverse problem's),
    seeded by ``data.noise_seed``."""
    level = dataset.noise if cfg is None or cfg.noise is None else cfg.noise
    return InputNoise(float(level), 0 if cfg is None else int(cfg.noise_seed))


# --- batches -------------------------------------------------------------------------------------

def data_loader(dataset: Any, batch: int, sampler=None, workers: int = 0) -> DataLoader:
    """Batches ``(x, y, position)`` of a GridDataset-like ``dataset`` (``.x``, ``.y``)."""
    tensors = TensorDataset(dataset.x, dataset.y, torch.arange(len(dataset)))
    return DataLoader(tensors, batch_size=batch, sampler=sampler, num_workers=workers)


def batch_pos(coords: torch.Tensor, b: int, device: torch.device) -> torch.Tensor:
    """Grid coordinates ``(*grid, d)`` as a batch ``(b, *grid, d)`` (a view) on ``device``."""
    return coords.to(device).unsqueeze(0).expand(b, *coords.shape)


def sample_ids(dataset: Any) -> torch.Tensor:
    """File sample numbers of ``dataset`` (they seed the input noise), default ``0..N-1``."""
    return torch.as_tensor(np.asarray(getattr(dataset, "indices", np.arange(len(dataset)))))


def check_model_fits_data(model: torch.nn.Module, data: Any, device: torch.device, source: str) -> None:
    """One forward pass on a sample: a clear ValueError if shapes/channels do not fit the data."""
    x, y = data.x[:1].to(device), data.y[:1]
    was_training = model.training
    name = type(model).__name__
    try:
        with torch.no_grad():
            out = model.eval()(x, batch_pos(data.coords, 1, device))
    except (RuntimeError, ValueError) as err:
        raise ValueError(
            f"model {name} cannot take inputs of shape {tuple(x.shape)} from {source} "
            f"(check model.options, e.g. channels or grid sizes): {err}"
        ) from None
    finally:
        model.train(was_training)
    if tuple(out.shape) != tuple(y.shape):
        raise ValueError(
            f"model {name} outputs shape {tuple(out.shape)} but the targets in {source} have shape "
            f"{tuple(y.shape)}; check model.options"
        )
