"""Evaluation of trained operators: the one module that computes test errors.

- :func:`evaluate_relative_l2`: per-sample relative L² ``‖p − y‖ / ‖y‖`` (raw units) of an operator
  on one dataset, batched, with the input noise of training, sharded over ranks in a distributed run
  (the trainer's validation and test use it too);
- :func:`resolution_row`: the one metrics format, a row ``{"resolution", "n", "mean", "std",
  "median", "max"}`` per resolution; :func:`write_metrics` / :func:`read_metrics` store rows as
  ``metrics.csv`` + ``metrics.json`` (``{**meta, "rows": [...]}``), for training
  (``RUN_DIR/metrics.json``) and ``petrov evaluate`` (``RUN_DIR/eval/``) alike;
- :func:`evaluate_resolutions`: one trained operator on the same samples at several resolutions
  of a data file (the file is strided from its native grid, the normalisers restricted to each
  grid); by default the run's test split (``split_indices``: the last ``data.n_test`` samples), so
  model selection (on the validation split) never saw them;
- :func:`predict`, :func:`make_plots`, :func:`run_evaluation` (what ``petrov evaluate`` does).
"""
from __future__ import annotations

import csv
import io
import json
import logging
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np
import torch
from torch.utils.data import DataLoader, TensorDataset

from petrov.common.files import atomic_write, check_writable, write_json
from petrov.datasets import allowed_resolutions as reachable_resolutions
from petrov.datasets import dataset_info, get_recipe, open_dataset
from petrov.datasets.loading import as_indices
from petrov.datasets.sampling import poolable

from . import distributed as dist_
from . import plots
from .checkpoint import load_operator
from .config import load_config_json
from .data import NormalizedOperator, input_noise, split_indices
from .losses import per_time_relative_l2, relative_l2_per_sample

ROW_FIELDS = ["resolution", "n", "mean", "std", "median", "max"]

log = logging.getLogger(__name__)


# --- the metric -------------------------------------------------------------------------------------

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


@torch.no_grad()
def evaluate_relative_l2(
    operator: NormalizedOperator,
    dataset: Any,
    *,
    batch_size: int = 16,
    device: torch.device | str | None = None,
    noise: float = 0.0,
    noise_seed: int = 0,
    ctx: dist_.Context | None = None,
    metric: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = relative_l2_per_sample,
) -> torch.Tensor:
    """Per-sample relative L² ``(N,)`` of ``operator`` on ``dataset`` (raw units, dataset order).

    ``metric(pred, y)`` gives the per-sample values (default the relative L² of the whole output;
    e.g. ``per_time_relative_l2`` for one column per snapshot, ``(N, S)``).

    ``dataset`` is GridDataset-like (``.x (N,*grid,c)``, ``.y``, ``.coords``, optional ``.indices``
    = file sample numbers used to seed the input noise).  In a distributed run each rank evaluates
    its share and every rank receives the full, de-duplicated result.
    """
    if device is None:
        device = ctx.device if ctx is not None else next(operator.parameters()).device
    device = torch.device(device)
    ctx = ctx or dist_.Context(device=device)
    ids = sample_ids(dataset)
    was_training = operator.training
    operator.eval()
    values, where = [], []
    for x, y, idx in data_loader(dataset, batch_size, dist_.sampler(dataset.x, ctx, shuffle=False)):
        x, y = x.to(device), y.to(device)
        pred = operator.predict(x, batch_pos(dataset.coords, len(x), device), noise=noise,
                              noise_seed=noise_seed, sample_ids=ids[idx])
        values.append(metric(pred, y))
        where.append(idx.to(device))
    operator.train(was_training)
    if not values:
        return torch.zeros(0)
    return dist_.gather_per_sample(torch.cat(values), torch.cat(where), len(dataset), ctx)


def summarize(per_sample: torch.Tensor) -> dict[str, float]:
    """``{"mean", "std", "median", "max", "n"}`` of per-sample errors."""
    v = per_sample.double()
    return {"mean": v.mean().item(), "std": v.std(unbiased=False).item(),
            "median": v.median().item(), "max": v.max().item(), "n": int(v.numel())}


def resolution_row(resolution: int, per_sample: torch.Tensor, keep_samples: bool = False) -> dict[str, Any]:
    """The metrics row of one resolution: ``ROW_FIELDS`` (+ ``"per_sample"`` if ``keep_samples``)."""
    if not torch.isfinite(per_sample).all():
        raise ValueError(f"non-finite relative L2 at resolution {resolution} (model or data hold NaN/inf)")
    stats = summarize(per_sample)
    row = {"resolution": int(resolution), "n": int(stats["n"]),
           **{k: float(stats[k]) for k in ("mean", "std", "median", "max")}}
    if keep_samples:
        row["per_sample"] = per_sample.double().tolist()
    return row


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


# --- what to evaluate -------------------------------------------------------------------------------

@dataclass
class EvalSetup:
    """The operator and how its training data were read: kind, inverse target grid, input noise.

    ``config`` is the run's :class:`~petrov.train.config.TrainConfig` (None for a bare operator).
    """

    operator: Any
    config: Any = None
    run_dir: Path | None = None
    kind: str | None = None

    @property
    def data_config(self):
        return None if self.config is None else self.config.data


def load_run(run_dir: str | os.PathLike, map_location: Any = "cpu") -> EvalSetup:
    """The best model and config of a run directory (clear errors if either is missing)."""
    run_dir = Path(run_dir)
    if not run_dir.is_dir():
        raise FileNotFoundError(f"run directory {str(run_dir)!r} does not exist")
    config = load_config_json(run_dir / "config.json", check_model=False)
    operator = load_operator(run_dir / "best.pt", map_location=map_location)
    return EvalSetup(operator, config, run_dir, _trained_kind(config))


def _trained_kind(config) -> str | None:
    """The dataset kind the run was trained on: the config's, else its training file's, else generated."""
    d = config.data
    if d.kind:
        return d.kind
    if Path(d.path).exists():
        try:
            return dataset_info(d.path)["kind"]
        except (OSError, ValueError, KeyError):
            pass
    return d.generate.kind if d.generate is not None else None


def _as_setup(source: Any, config: Any, map_location: Any) -> EvalSetup:
    if isinstance(source, EvalSetup):
        return source
    if isinstance(source, (str, os.PathLike)):
        return load_run(source, map_location=map_location)
    if isinstance(source, NormalizedOperator):
        op = source
    elif isinstance(source, torch.nn.Module):
        op = NormalizedOperator(source)  # a bare model: raw data in and out
    else:
        raise TypeError(f"expected a run directory, an EvalSetup or a model, got {type(source).__name__}")
    return EvalSetup(op, config, None, None if config is None else _trained_kind(config))


def parse_resolutions(text: str | Sequence[int] | None) -> list[int] | None:
    """``"256,512"`` -> ``[256, 512]`` (also accepts a list); duplicates dropped, order kept."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[int] = []
    for item in items:
        try:
            r = int(str(item).strip())
        except ValueError:
            raise ValueError(f"resolutions must be integers separated by commas, got {text!r}") from None
        if r not in out:
            out.append(r)
    if not out:
        raise ValueError("give at least one resolution")
    return out


def parse_indices(text: str | None) -> Any:
    """``"test"`` (default), ``"all"``, or ``"a:b"`` (a Python slice of the file's samples)."""
    if text is None or text in ("test", "all"):
        return text or "test"
    a, sep, b = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return slice(int(a) if a.strip() else None, int(b) if b.strip() else None)
    except ValueError:
        raise ValueError(f"--indices must be 'test', 'all' or 'a:b' (e.g. 1000:1100), got {text!r}") from None


def select_indices(setup: EvalSetup, data_path: Path, indices: Any, n_complete: int) -> np.ndarray:
    """File sample numbers to evaluate; ``"test"`` is the run's test split rule applied to this file."""
    if indices is None:
        indices = "test" if setup.config is not None else "all"
    if isinstance(indices, str):
        if indices == "all":
            return np.arange(n_complete)
        if indices != "test":
            return select_indices(setup, data_path, parse_indices(indices), n_complete)
        if setup.config is None:
            raise ValueError("indices='test' needs the run's config (evaluate a run directory, "
                             "or give indices explicitly)")
        d = setup.config.data
        if d.n_test == 0:
            raise ValueError("the run has no test split (data.n_test = 0); give the samples with --indices a:b")
        try:
            return split_indices(n_complete, d.n_train, d.n_val, d.n_test).test
        except ValueError as err:
            raise ValueError(f"{data_path}: cannot place the run's test split in this file ({err}); "
                             f"give the samples with --indices a:b") from None
    if isinstance(indices, slice):
        if indices.stop is not None and indices.stop > n_complete:
            raise ValueError(f"--indices {indices.start}:{indices.stop} goes past the {n_complete} "
                             f"samples of {data_path}")
        idx = np.arange(n_complete)[indices]
    else:
        idx = as_indices(indices, n_complete)
    if len(idx) == 0:
        raise ValueError(f"no samples selected from {data_path} (indices {indices!r})")
    return idx


def _warn_if_seen(setup: EvalSetup, data_path: Path, idx: np.ndarray, n_complete: int) -> None:
    d = setup.data_config
    if d is None or not Path(d.path).exists() or Path(d.path).resolve() != data_path.resolve():
        return
    seen = np.intersect1d(idx, np.arange(min(d.n_train + d.n_val, n_complete)))
    if len(seen):
        warnings.warn(f"{len(seen)} of the evaluated samples belong to the run's training/validation "
                      f"split (the first {d.n_train + d.n_val}); these are not test errors", stacklevel=3)


# --- resolutions ----------------------------------------------------------------------------------

def allowed_resolutions(setup: EvalSetup, info: dict[str, Any]) -> list[int]:
    """Resolutions of the data file that the operator's normalisers (and, for the inverse problem,
    the pooled target grid) can be taken to."""
    allowed = list(info["resolutions"])
    xn = setup.operator.x_normalizer
    if xn is not None and getattr(xn, "pointwise", False) and xn.grid:
        fitted = set(reachable_resolutions(xn.grid[0], bool(xn.periodic)))
        allowed = [r for r in allowed if r in fitted]
    coarse = _coarse_resolution(setup)
    if coarse is not None:
        allowed = [r for r in allowed if poolable(r, coarse)]
    return sorted(allowed)


def _is_inverse(kind: str | None) -> bool:
    if kind is None:
        return False
    return bool(get_recipe(kind).inverse)


def _coarse_resolution(setup: EvalSetup) -> int | None:
    """The inverse target grid: the config's, else the fitted target normaliser's grid."""
    if not _is_inverse(setup.kind):
        return None
    d = setup.data_config
    if d is not None and d.coarse_resolution is not None:
        return int(d.coarse_resolution)
    yn = setup.operator.y_normalizer
    if yn is not None and getattr(yn, "grid", ()):
        return int(yn.grid[0])
    return None


def check_resolutions(resolutions: list[int], allowed: list[int], data_path: Path) -> None:
    bad = [r for r in resolutions if r not in allowed]
    if bad:
        raise ValueError(
            f"resolution{'s' if len(bad) > 1 else ''} {', '.join(map(str, bad))} not available for this "
            f"model from {data_path}; allowed resolutions: {', '.join(map(str, allowed))}"
        )


def _check_kind(setup: EvalSetup, info: dict[str, Any], data_path: Path) -> None:
    if setup.kind is None:
        return
    trained, found = get_recipe(setup.kind), get_recipe(info["kind"])
    if trained.family != found.family:
        raise ValueError(
            f"{data_path} holds {info['kind']!r} data but the model was trained on {setup.kind!r} data; "
            f"evaluate it on a {trained.family} file"
        )


# --- evaluation -----------------------------------------------------------------------------------

def _open(setup: EvalSetup, data_path: Path, idx: np.ndarray, resolution: int):
    return open_dataset(data_path, resolution=resolution, indices=idx, kind=setup.kind,
                        coarse_resolution=_coarse_resolution(setup))


def _noise(setup: EvalSetup, dataset) -> tuple[float, int]:
    """Input noise as in training: the config's level, else the file's (inverse problem)."""
    d = setup.data_config
    return input_noise(d, dataset), 0 if d is None else int(d.noise_seed)


def _device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return device if isinstance(device, torch.device) else dist_.resolve_device(str(device))


def evaluate_resolutions(
    source: Any,
    data_path: str | os.PathLike | None = None,
    resolutions: Sequence[int] | str | None = None,
    *,
    indices: Any = None,
    batch_size: int | None = None,
    device: Any = None,
    config: Any = None,
    out_dir: str | os.PathLike | None = None,
    per_sample: bool = False,
    per_time: bool | None = None,
) -> list[dict[str, Any]]:
    """Relative L² of one trained operator at each resolution, on the same samples.

    ``source``: a run directory (its ``best.pt`` and ``config.json``), an :class:`EvalSetup`, or a
    model/``NormalizedOperator`` (then ``config`` optionally gives the data settings).
    ``data_path``: default the run's training file.  ``resolutions``: default the config's
    ``eval_resolutions`` (else the training resolution).  ``indices``: ``"test"`` (default for runs:
    the run's test split), ``"all"`` (default for bare models), a slice or index list.
    ``batch_size``: default the run's ``run.eval_batch_size`` or ``optim.batch_size`` (else 8); the
    quadratic mixers (fourier, softmax) hold ``batch·n²`` numbers per layer at resolution n.
    Returns one row per resolution ``{"resolution", "n", "mean", "std", "median", "max"}`` (plus
    ``"per_sample"``, a list, if ``per_sample``); with ``out_dir`` also writes
    ``metrics.csv``/``metrics.json`` there (see :func:`write_metrics`).

    ``per_time`` (default: when the data kind stores trajectories, snapshots as channels): the
    operator's prediction (a free rollout for marching models) is scored per snapshot; the row's
    statistics are those of the final snapshot ``t_T`` and it adds ``per_time_mean``,
    ``per_time_median``, ``per_time_max`` (lists over the snapshots ``k = 0..T``).
    """
    dev = _device(device)
    setup = _as_setup(source, config, dev)
    setup.operator.to(dev).eval()
    data_path = _data_path(setup, data_path)
    info = dataset_info(data_path)
    _check_kind(setup, info, data_path)
    resolutions = _default_resolutions(setup, info) if resolutions is None else parse_resolutions(resolutions)
    check_resolutions(resolutions, allowed_resolutions(setup, info), data_path)
    idx = select_indices(setup, data_path, indices, int(info["n_complete"]))
    _warn_if_seen(setup, data_path, idx, int(info["n_complete"]))

    batch_size = batch_size or _default_batch(setup)
    per_time = is_trajectory(info["kind"]) if per_time is None else per_time
    metric = per_time_relative_l2 if per_time else relative_l2_per_sample
    rows = []
    for res in resolutions:
        dataset = _open(setup, data_path, idx, res)
        check_model_fits_data(setup.operator.model, dataset, dev, f"{data_path} at resolution {res}")
        noise, seed = _noise(setup, dataset)
        log.debug("resolution %d: %d samples of %s, batch %d, input noise %g", res, len(dataset), data_path,
                  batch_size, noise)
        errors = evaluate_relative_l2(setup.operator, dataset, batch_size=batch_size, device=dev,
                                      noise=noise, noise_seed=seed, metric=metric)
        rows.append(per_time_row(res, errors, per_sample) if per_time
                    else resolution_row(res, errors, keep_samples=per_sample))
    if out_dir is not None:
        meta = _meta(setup, data_path, idx)
        if per_time:
            meta["metric"] = ("relative L2 per sample at the final snapshot t_T (rows), raw units; "
                              "per snapshot k = 0..T in per_time_*")
        write_metrics(rows, out_dir, meta=meta)
    return rows


def is_trajectory(kind: str | None) -> bool:
    """Whether data of ``kind`` store trajectories (``y``: snapshots as the trailing channels)."""
    return kind is not None and get_recipe(kind).snapshots is not None


def per_time_row(resolution: int, per_time: torch.Tensor, keep_samples: bool = False) -> dict[str, Any]:
    """The metrics row of a trajectory at one resolution: :func:`resolution_row` of the final
    snapshot's errors plus ``per_time_mean/median/max`` over the samples, per snapshot
    (``per_time: (N, T + 1)``)."""
    row = resolution_row(resolution, per_time[:, -1], keep_samples=keep_samples)
    v = per_time.double()
    row.update(per_time_mean=v.mean(0).tolist(), per_time_median=v.median(0).values.tolist(),
               per_time_max=v.max(0).values.tolist())
    return row


def _default_batch(setup: EvalSetup) -> int:
    if setup.config is None:
        return 8
    return int(setup.config.run.eval_batch_size or setup.config.optim.batch_size)


def _data_path(setup: EvalSetup, data_path) -> Path:
    if data_path is None:
        if setup.data_config is None:
            raise ValueError("give the data file (data_path / --data)")
        data_path = setup.data_config.path
        if not Path(data_path).exists():
            raise FileNotFoundError(
                f"the run's data file {str(data_path)!r} (from its config.json, relative to the directory "
                f"it was trained in) does not exist here; pass it with --data FILE"
            )
    data_path = Path(data_path)
    if not data_path.exists():
        raise FileNotFoundError(f"data file {str(data_path)!r} does not exist")
    return data_path


def _default_resolutions(setup: EvalSetup, info: dict[str, Any]) -> list[int]:
    d = setup.data_config
    if d is not None and d.eval_resolutions:
        return list(d.eval_resolutions)
    if d is not None and d.train_resolution:
        return [int(d.train_resolution)]
    return [int(info["native_resolution"])]


def _meta(setup: EvalSetup, data_path: Path, idx: np.ndarray) -> dict[str, Any]:
    d = setup.data_config
    contiguous = len(idx) and bool(np.all(np.diff(idx) == 1))
    return {
        "run_dir": None if setup.run_dir is None else str(setup.run_dir),
        "data": str(data_path),
        "kind": setup.kind,
        "train_resolution": None if d is None else d.train_resolution,
        "samples": (f"{int(idx[0])}:{int(idx[-1]) + 1}" if contiguous else [int(i) for i in idx]),
        "metric": "relative L2 per sample, raw units",
    }


# --- output ---------------------------------------------------------------------------------------

def write_metrics(rows: list[dict[str, Any]], out_dir: str | os.PathLike,
                  meta: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """``out_dir/metrics.csv`` (one line per resolution, ``ROW_FIELDS``) and ``metrics.json``
    (``{"rows": rows, **meta}``), each written to a temp file and renamed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    buf = io.StringIO()
    writer = csv.DictWriter(buf, fieldnames=ROW_FIELDS, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)  # floats are written with repr: they read back exactly
    atomic_write(out / "metrics.csv", buf.getvalue())
    write_json(out / "metrics.json", {**(meta or {}), "rows": rows})
    return out / "metrics.csv", out / "metrics.json"


def read_metrics(out_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows saved by :func:`write_metrics` (from the JSON file)."""
    path = Path(out_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"no evaluation results at {str(path)!r}; run `petrov evaluate` first")
    return json.loads(path.read_text())["rows"]


def format_table(rows: list[dict[str, Any]], train_resolution: int | None = None) -> str:
    """A fixed-width text table of the rows (the training resolution marked with ``*``)."""
    head = f"{'resolution':>11} {'n':>5} {'mean':>11} {'std':>10} {'median':>11} {'max':>10}"
    what = "rollout relative L2 at the final time" if rows and "per_time_mean" in rows[0] else "relative L2"
    lines = [f"{what} on the test samples", head, "-" * len(head)]
    for r in rows:
        mark = "*" if train_resolution is not None and r["resolution"] == train_resolution else " "
        lines.append(f"{r['resolution']:>10}{mark} {r['n']:>5} {r['mean']:>11.4e} {r['std']:>10.2e} "
                     f"{r['median']:>11.4e} {r['max']:>10.2e}")
    if train_resolution is not None and any(r["resolution"] == train_resolution for r in rows):
        lines.append("* training resolution")
    return "\n".join(lines)


# --- predictions and plots ------------------------------------------------------------------------

@torch.no_grad()
def predict(setup: EvalSetup, dataset, positions: Sequence[int], device: Any = None) -> torch.Tensor:
    """Predictions ``(k, *grid_out, c)`` (raw units, CPU) for the samples at ``positions`` of
    ``dataset``, with the same input noise as the evaluation."""
    dev = _device(device)
    op = setup.operator.to(dev).eval()
    pos_idx = torch.as_tensor(list(positions), dtype=torch.long)
    x = dataset.x[pos_idx].to(dev)
    noise, seed = _noise(setup, dataset)
    return op.predict(x, batch_pos(dataset.coords, len(x), dev), noise=noise, noise_seed=seed,
                    sample_ids=sample_ids(dataset)[pos_idx]).cpu()


def make_plots(
    source: Any,
    rows: list[dict[str, Any]],
    out_dir: str | os.PathLike,
    data_path: str | os.PathLike | None = None,
    *,
    indices: Any = None,
    n_samples: int = 4,
    resolution: int | None = None,
    device: Any = None,
) -> list[Path]:
    """The evaluation figures in ``out_dir``: ``predictions.png`` (a few evaluated samples at
    ``resolution``, default the finest evaluated one), ``error_vs_resolution.png`` and, for a run
    directory, ``training_curves.png``.  Returns the written paths."""
    dev = _device(device)
    setup = _as_setup(source, None, dev)
    data_path = _data_path(setup, data_path)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    d = setup.data_config
    train_res = None if d is None else d.train_resolution
    written = [plots.plot_error_vs_resolution(rows, out / "error_vs_resolution.png",
                                              train_resolution=train_res)]
    res = resolution or max(r["resolution"] for r in rows)
    idx = select_indices(setup, data_path, indices, int(dataset_info(data_path)["n_complete"]))
    dataset = _open(setup, data_path, idx[:n_samples], res)
    pred = predict(setup, dataset, range(len(dataset)), dev)
    noise = _noise(setup, dataset)[0]
    title = f"test samples at resolution {res}" + (
        f" (inputs drawn without the noise {noise:g} the model was given)" if noise else "")
    if "per_time_mean" in rows[0]:
        written.append(plots.plot_error_vs_time(rows, out / "error_vs_time.png"))
        written.append(plots.plot_spacetime(dataset.y, pred, out / "spacetime.png", sample_ids=dataset.indices,
                                            title=f"{title}: rollouts"))
    else:
        written.append(plots.plot_predictions(dataset, pred, out / "predictions.png", title=title))
    if setup.run_dir is not None and (setup.run_dir / "log.jsonl").is_file():
        written.append(plots.plot_training_curves(setup.run_dir, out / "training_curves.png"))
    return written


# --- what `petrov evaluate` does -------------------------------------------------------------------

def run_evaluation(
    run_dir: str | os.PathLike,
    data_path: str | os.PathLike | None = None,
    resolutions: Sequence[int] | str | None = None,
    *,
    indices: Any = None,
    device: Any = "auto",
    batch_size: int | None = None,
    plots: bool = True,
    out_dir: str | os.PathLike | None = None,
    echo: bool = True,
) -> list[dict[str, Any]]:
    """What ``petrov evaluate`` does: evaluate, write ``RUN_DIR/eval`` (or ``out_dir``), plot.

    Logs (INFO, logger ``petrov.train.evaluate``) the table of :func:`format_table` if ``echo``, and
    the files written. The rows (returned and in ``metrics.json``) carry the per-sample errors as
    ``"per_sample"``: the error-vs-resolution figure draws their percentiles."""
    dev = _device(device)
    setup = load_run(run_dir, map_location=dev)
    out = Path(out_dir) if out_dir is not None else Path(run_dir) / "eval"
    check_writable(out, "evaluation output directory")  # before the work, not after it
    rows = evaluate_resolutions(setup, data_path, resolutions, indices=indices, batch_size=batch_size,
                                device=dev, out_dir=out, per_sample=True)
    if echo:
        log.info("%s", format_table(rows, setup.config.data.train_resolution))
    log.info("saved %s and %s", out / "metrics.csv", out / "metrics.json")
    if plots:
        paths = make_plots(setup, rows, out, data_path, indices=indices, device=dev)
        log.info("plots: %s", ", ".join(str(p) for p in paths))
    return rows


__all__ = [
    "EvalSetup", "check_model_fits_data", "evaluate_relative_l2", "evaluate_resolutions", "format_table",
    "is_trajectory", "load_run", "make_plots", "parse_indices", "parse_resolutions", "per_time_row", "predict",
    "read_metrics", "resolution_row", "run_evaluation", "summarize", "write_metrics",
]
