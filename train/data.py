"""Train/val/test data from a [`DataConfig`][]: splits, normalisers, input noise, batches.

Splits (file order, N complete samples): train ``[0, n_train)``, val ``[n_train, n_train + n_val)``
(model selection only), test ``[N − n_test, N)`` (only ever evaluated); they must not overlap.
The normalisers are fitted on the train indices at the file's native resolution (see
[`petrov.train.operator`][] for how the trained operator uses them); the input noise of the inverse
problem is one [`InputNoise`][], the config's level (else the file's) and seed.
Grid files and mesh files (point sets, ``petrov.datasets.open_mesh_dataset``: each sample on its own
mesh, stored at several levels) go through the same calls: [`open_split`][] opens a split at a
resolution (grids: points per axis) or a mesh level (``data.level``; names like ``"level0"``,
``"remesh"``), and [`data_loader`][] + [`to_batch`][] give a [`Batch`][]: the model's inputs
(``pos``; for point sets also ``weights``, ``mask``, ``boundary`` and what the model's
``sample_transform`` adds) and the quadrature weights of the metric.  Grid data are normalised point
by point, point-set data per channel with quadrature-weighted statistics.
"""
from __future__ import annotations

import dataclasses
import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from ..common.config import asdict
from ..common.interrupts import held_signals, loader_worker
from ..common.quick import QUICK_ENV, QUICK_SAMPLES, quick_mode
from ..datasets.identity import check_data_unchanged, data_identity
from ..datasets import (
    InputNoise,
    collate_points,
    dataset_info,
    generate_dataset,
    get_recipe,
    open_dataset,
    open_mesh_dataset,
)
from ..datasets.loading import open_source
from ..datasets.mesh.recipes import MESH_RECIPES, get_mesh_recipe
from ..datasets.mesh.storage import is_mesh_file
from ..operators.models import MODELS, model_layout
from .config_tables import DataConfig
from .datapass import fit_normalizers, window_of
from .distributed import Context, run_on_main

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

    def with_transform(self, transform: Any) -> "TrainingData":
        """Point sets whose items also carry ``transform(item)`` (a model's per-sample inputs); grids
        unchanged."""
        if transform is None or not is_point_data(self.train):
            return self
        return dataclasses.replace(self, train=self.train.with_transform(transform),
                                   val=self.val.with_transform(transform))


def ensure_data_file(cfg: DataConfig, progress: bool = True) -> Path:
    """``cfg.path``, generated first from ``[data.generate]`` if it does not exist."""
    path = Path(cfg.path)
    if path.exists():
        if cfg.generate is not None:
            check_generated_as(path, cfg.generate)
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


def check_generated_as(path: Path, g: Any) -> None:
    """Warn if the existing file ``path`` is not what the ``[data.generate]`` table ``g`` would generate
    (another seed, kind, size or parameters): the run trains on the file, and says so, instead of
    ignoring the table silently (a preset's table with a user's own ``data.path`` is ordinary)."""
    attrs = dataset_info(path)["attrs"]
    if "seed" not in attrs or "params" not in attrs:  # not generated by petrov (imported, FNO .mat)
        warnings.warn(f"data.path {str(path)!r} exists and was not generated by petrov: training on it, the "
                      f"[data.generate] table is not used", stacklevel=3)
        return
    mesh = g.kind in MESH_RECIPES
    recipe = get_mesh_recipe(g.kind) if mesh else get_recipe(g.kind)
    options = {k: v for k, v in g.options.items() if k != "workers"}  # how, not what
    wanted = {"kind": g.kind, "seed": g.seed, "n_samples": g.n_samples,
              "params": asdict(recipe.make_params(options))}
    found = {"kind": attrs.get("kind"), "seed": attrs.get("seed"), "n_samples": attrs.get("n_samples"),
             "params": json.loads(attrs["params"])}
    if not mesh:
        wanted["native_resolution"] = recipe.native_resolution if g.resolution is None else g.resolution
        found["native_resolution"] = attrs.get("native_resolution")
    diff = [f"{k} {found[k]!r} there, {wanted[k]!r} in [data.generate]" for k in wanted if found[k] != wanted[k]]
    if found["n_samples"] == QUICK_SAMPLES < g.n_samples and not quick_mode():
        diff.append(f"{QUICK_SAMPLES} samples is what a generation keeps in quick mode ({QUICK_ENV}=1): a file "
                    f"written by a quick run")
    if diff:
        warnings.warn(f"data.path {str(path)!r} exists and holds other data than [data.generate] describes "
                      f"({'; '.join(diff)}); training on the existing file (delete it to generate the table's, or "
                      f"point data.path at a new file)", stacklevel=3)


def n_samples_in(path: str | os.PathLike) -> int:
    return int(dataset_info(path)["n_complete"])


def data_splits(cfg: DataConfig) -> Splits:
    return split_indices(n_samples_in(cfg.path), cfg.n_train, cfg.n_val, cfg.n_test)


def is_point_data(dataset: Any) -> bool:
    """Whether ``dataset`` holds point sets (meshes) rather than grids."""
    return hasattr(dataset, "node_counts")


def check_discretization(cfg: DataConfig) -> None:
    """Grid files take ``train_resolution``/``eval_resolutions``, mesh files ``level``/``eval_levels``."""
    mesh = is_mesh_file(cfg.path)
    wrong = ["data.level", "data.eval_levels"] if not mesh else ["data.train_resolution", "data.eval_resolutions"]
    given = [k for k in wrong if getattr(cfg, k.split(".")[1]) not in (None, [])]
    if given:
        what = "holds point sets (meshes): choose data.level / data.eval_levels" if mesh else \
            "holds grids: choose data.train_resolution / data.eval_resolutions"
        raise ValueError(f"{cfg.path} {what}, not {', '.join(given)}")


def open_split(cfg: DataConfig, indices: np.ndarray, resolution: int | str | None = None,
               transform: Any = None, lazy: bool | None = None) -> Any:
    """The samples ``indices`` of ``cfg.path`` at ``resolution`` (default: the training one): points
    per axis of a grid file, or a mesh level of a mesh file (``transform``: items' extra inputs).
    ``lazy``: the split read per sample (default ``data.lazy``), else into memory at once."""
    lazy = cfg.lazy if lazy is None else lazy
    if is_mesh_file(cfg.path):
        split = open_mesh_dataset(cfg.path, cfg.level if resolution is None else resolution, indices,
                                  transform=transform)
        return split if lazy else split.in_memory()
    res = cfg.train_resolution if resolution is None else resolution
    return open_dataset(
        cfg.path, resolution=res, indices=indices, coarse_resolution=cfg.coarse_resolution,
        kind=cfg.kind, lazy=lazy, window=window_of(cfg),
    )


def build_training_data(cfg: DataConfig, ctx: Context | None = None) -> TrainingData:
    """Open train and val at the training resolution (or mesh level) and fit the normalisers on train.
    In a distributed run (``ctx``) grid splits are read lazily -- each rank reads the samples its sampler
    gives it, never the whole split into memory -- and each rank fits the normalisers on its share
    (``petrov.train.datapass``)."""
    check_discretization(cfg)
    splits = data_splits(cfg)
    lazy = cfg.lazy or (ctx is not None and ctx.distributed)
    train, val = open_split(cfg, splits.train, lazy=lazy), open_split(cfg, splits.val, lazy=lazy)
    x_norm, y_norm = fit_normalizers(cfg, splits.train, train, ctx)
    return TrainingData(train, val, x_norm, y_norm, input_noise(cfg, train), splits)


def read_training_data(cfg: Any, ctx: Context) -> tuple[TrainingData, dict]:
    """The splits of ``cfg.data.path`` (``cfg``: the ``TrainConfig``; generated first from ``[data.generate]``
    where it does not exist) and the content they were read from (``data_identity``): a file that changed
    while it was read is a ``DataChanged``."""
    run_on_main(lambda: ensure_data_file(cfg.data, progress=cfg.run.progress), ctx, patient=True)
    check_model_layout(cfg.model.name, cfg.model.options, cfg.data)  # before the levels, sizes, values
    identity = data_identity(cfg.data.path)
    data = build_training_data(cfg.data, ctx)
    check_data_unchanged(cfg.data.path, identity, "while it was being read",
                                   "the run must be tested on the data it trained on")
    return data, identity


def input_noise(cfg: DataConfig | None, dataset: Any) -> InputNoise:
    """The input noise: the config's ``data.noise`` level, else the file's (the inverse problem's),
    seeded by ``data.noise_seed``."""
    level = getattr(dataset, "noise", 0.0) if cfg is None or cfg.noise is None else cfg.noise
    return InputNoise(float(level), 0 if cfg is None else int(cfg.noise_seed))


# --- batches -------------------------------------------------------------------------------------

@dataclass
class Batch:
    """One batch as the model and the metric take it: ``model(x, **inputs)``, ``metric(pred, y, weights)``.

    ``positions``: the samples' positions in the dataset (``sample_ids(dataset)[positions]`` are their
    numbers in the file); ``inputs``: ``pos`` (grids: the coordinates, a view; point sets also
    ``weights``, ``mask``, ``boundary`` and the model's per-sample inputs); ``weights``: the point
    sets' quadrature weights, None on grids (uniform sums); ``n``: the number of real samples (the first
    ``n`` rows); ``sample_ids``: what the input noise is seeded by (the samples' numbers in the file, or
    their positions in a device-resident split, see ``petrov.train.batches``); ``sample_weight``:
    ``(b,)``, 1 for the real samples and 0 for the rows that pad a batch to a static shape (None: no
    padding)."""

    x: torch.Tensor
    y: torch.Tensor
    positions: torch.Tensor
    inputs: dict[str, torch.Tensor]
    weights: torch.Tensor | None = None
    n: int = 0
    sample_ids: torch.Tensor | None = None
    sample_weight: torch.Tensor | None = None

    def __post_init__(self):
        self.n = self.n or len(self.x)


_POINT_SET_ONLY = {"y", "indices", "positions", "triangles"}


def data_loader(dataset: Any, batch: int, sampler=None, workers: int = 0, pin: bool = False) -> DataLoader:
    """Batches of ``dataset`` (turn each into a [`Batch`][] with [`to_batch`][]): a GridDataset-like
    one (``.x``, ``.y``) as ``(x, y, position)``, a point-set one padded by ``collate_points``.  ``pin``:
    in page-locked host memory (batches for a CUDA device: ``to_batch`` copies them without
    waiting)."""
    # workers leave Ctrl-C to this process, which shuts them down (no worker tracebacks); iterate with
    # batches(), which starts them with the signals held
    # a generator of its own: the loader's seed for its workers is not drawn from torch's global generator,
    # whose state a run resumed in the middle of an epoch restores (petrov.train.preemption)
    options = dict(batch_size=batch, sampler=sampler, num_workers=workers, generator=torch.Generator(),
                   worker_init_fn=loader_worker if workers else None, pin_memory=pin)
    if is_point_data(dataset):
        return DataLoader(dataset, collate_fn=collate_points, **options)
    if not hasattr(dataset, "x"):  # read per batch (LazyGridDataset)
        return DataLoader(_WithPositions(dataset), **options)
    return DataLoader(TensorDataset(dataset.x, dataset.y, torch.arange(len(dataset))), **options)


def batches(loader: DataLoader) -> Iterator:
    """The batches of ``loader``, its worker processes started inside
    [`held_signals`][] (no worker sees the process group's Ctrl-C or
    SIGTERM before its initializer, the parent takes it once they are started)."""
    with held_signals():
        iterator = iter(loader)
    yield from iterator


class _WithPositions(torch.utils.data.Dataset):
    """Items ``(x, y, k)`` of a dataset of ``(x, y)`` items (the TensorDataset form of in-memory grids)."""

    def __init__(self, dataset: Any):
        self.dataset = dataset

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, k: int):
        return (*self.dataset[k], k)


def to_batch(raw: Any, dataset: Any, device: torch.device, coords: torch.Tensor | None = None) -> Batch:
    """A loader's raw batch (``data_loader``) as a ``Batch`` on ``device`` (copies from pinned
    memory do not wait for the device; ``coords``: the grid's coordinates already on ``device``)."""
    if isinstance(raw, dict):  # point sets
        inputs = {k: v.to(device, non_blocking=True) for k, v in raw.items() if k not in _POINT_SET_ONLY}
        inputs.pop("x")
        return Batch(raw["x"].to(device, non_blocking=True), raw["y"].to(device, non_blocking=True),
                     raw["positions"], inputs, inputs["weights"])
    x, y, idx = raw
    pos = batch_pos(dataset.coords if coords is None else coords, len(x), device)
    return Batch(x.to(device, non_blocking=True), y.to(device, non_blocking=True), idx, {"pos": pos})


def batch_pos(coords: torch.Tensor, b: int, device: torch.device) -> torch.Tensor:
    """Grid coordinates ``(*grid, d)`` as a batch ``(b, *grid, d)`` (a view) on ``device``."""
    return coords.to(device).unsqueeze(0).expand(b, *coords.shape)


def sample_ids(dataset: Any) -> torch.Tensor:
    """File sample numbers of ``dataset`` (they seed the input noise), default ``0..N-1``."""
    return torch.as_tensor(np.asarray(getattr(dataset, "indices", np.arange(len(dataset)))))


def layout_mismatch(name: str, point_model: bool, point_data: bool, source: str) -> ValueError:
    """The error for model class ``name`` (taking point sets or grids) on data of the other layout."""
    return ValueError(
        f"model {name} takes {'point sets (meshes)' if point_model else 'grids'} but {source} "
        f"holds {'point sets (meshes)' if point_data else 'grids'}; choose a "
        f"{'mesh model (e.g. mesh_latent)' if point_data else 'grid model'}")


def _file_layout(path: str) -> tuple[bool, int | None] | None:
    """``(point sets?, grid axes)`` of the data file ``path`` (mesh files: ``(True, None)``), None if it
    cannot be read (the data checks then say why)."""
    try:
        if is_mesh_file(path):
            return True, None
        with open_source(path) as src:
            return False, int(src.dim)
    except (OSError, ValueError, KeyError, TypeError):
        return None


def check_model_layout(model_name: str, options: dict, cfg: DataConfig) -> None:
    """Before any other check of the data: the model takes the layout of ``cfg.path`` (point sets or grids,
    and on grids as many axes); a ValueError saying which model fits, so that a wrong pairing is not first
    reported as a wrong level, resolution or split size."""
    model, data = model_layout(model_name, options), _file_layout(cfg.path)
    if model is None or data is None:
        return
    (point_model, model_dim), (point_data, data_dim) = model, data
    name = MODELS.get(model_name).__name__
    if point_model != point_data:
        raise layout_mismatch(name, point_model, point_data, cfg.path)
    if model_dim is not None and data_dim is not None and model_dim != data_dim:
        raise ValueError(f"model {name} takes {model_dim}-D grids but {cfg.path} holds {data_dim}-D grids; choose a "
                         f"{data_dim}-D grid model (petrov models lists them) or a {model_dim}-D data file")
