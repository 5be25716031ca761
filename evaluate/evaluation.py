"""``petrov evaluate``: a trained operator at several resolutions of a data file, on the same samples.

- [`evaluate_resolutions`][]: one operator on the same samples at each resolution (the file strided
  from its native grid, the normalisers restricted to each grid), by default the run's test split;
- [`predict`][], [`make_plots`][]: predictions of a few samples and the evaluation figures;
- [`run_evaluation`][]: what ``petrov evaluate RUN`` does (evaluate, write ``RUN/eval``, plot).

The per-sample metric and the metrics files are [`petrov.train.metrics`][] (the trainer's
validation and test use them too); which samples and resolutions: [`runs`][], [`resolutions`][].
"""
from __future__ import annotations

import functools
import inspect
import json
import logging
import os
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..common.path_checks import ensure_dir
from ..common.host import to_numpy
from ..common.outputs import check_outputs, claim_outputs
from ..datasets import dataset_info, open_dataset, open_mesh_dataset
from ..datasets.mesh.storage import is_mesh_file
from ..datasets.recipes import is_trajectory
from ..operators.models import sample_transform
from ..operators.trajectory import state_fields
from ..train import distributed as dist_
from ..train.data import batch_pos, data_loader, is_point_data, sample_ids, to_batch
from ..train.model_fit import check_model_fits_data
from ..train.datapass import window_of
from ..train.losses import check_targets, relative_l2_per_sample
from ..train.memory import evaluation_advice, out_of_memory_advice
from ..train.metrics import (
    ROW_FIELDS,
    check_batch_size,
    evaluate_relative_l2,
    field_trajectory_scores,
    per_time_row,
    resolution_label,
    resolution_row,
    write_metrics,
)
from ..train.testing import trajectory_metric_text
from .reports import format_table
from .resolutions import (
    check_kind,
    check_resolutions,
    coarse_resolution,
    default_resolutions,
    parse_resolutions,
)
from .runs import (
    EvalSetup,
    as_setup,
    data_file,
    default_batch,
    eval_dir,
    load_run,
    select_indices,
    setup_noise,
    warn_if_other_data,
    warn_if_seen,
)

log = logging.getLogger(__name__)

# what `petrov evaluate` may write into its output folder (the output-folder rule: petrov.common.outputs)
_FIGURES = ("error_vs_resolution", "error_vs_level", "predictions", "training_curves", "error_vs_time", "spacetime",
            "states")
EVAL_FILES = ("metrics.csv", "metrics.json", "rollout.gif") + tuple(f"{f}.{ext}" for f in _FIGURES
                                                                    for ext in ("png", "pdf"))


def _device(device: Any) -> torch.device:
    if device is None:
        return torch.device("cpu")
    return device if isinstance(device, torch.device) else dist_.resolve_device(str(device))


def _open(setup: EvalSetup, data_path: Path, idx: np.ndarray, resolution: Any):
    """The samples ``idx`` at a grid resolution (a pair ``(n_x, n_y)`` for a rectangular grid) or, from a mesh
    file, on the mesh level ``resolution``."""
    if is_mesh_file(data_path):
        return open_mesh_dataset(data_path, resolution, idx, transform=sample_transform(setup.operator.model))
    resolution = tuple(resolution) if isinstance(resolution, list) else resolution  # a row's pair, from JSON
    d = setup.data_config
    return open_dataset(data_path, resolution=resolution, indices=idx, kind=setup.kind,
                        coarse_resolution=coarse_resolution(setup), window=None if d is None else window_of(d))


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
    overwrite: bool = False,
) -> list[dict[str, Any]]:
    """Relative L² of one trained operator at each resolution, on the same samples.

    ``source``: a run directory (its ``best.pt`` and ``config.json``), an [`EvalSetup`][], or a
    model/``NormalizedOperator`` (then ``config`` optionally gives the data settings).
    ``data_path``: default the run's training file.  ``resolutions``: default the config's
    ``eval_resolutions`` (else the training resolution).  ``indices``: ``"test"`` (default for runs:
    the run's test split), ``"all"`` (default for bare models), a slice or index list.
    ``batch_size``: default the run's ``run.eval_batch_size`` or ``optim.batch_size`` (else 8); the
    quadratic mixers (fourier, softmax) hold ``batch·n²`` numbers per layer at resolution n.
    Returns one row per resolution ``{"resolution", "n", "mean", "std", "median", "max"}`` (plus
    ``"per_sample"``, a list, if ``per_sample``); with ``out_dir`` also writes
    ``metrics.csv``/``metrics.json`` there (see [`write_metrics`][]), under the output-folder rule of
    [`petrov.common.outputs`][] (``overwrite``: write into a folder holding other files).  A data file
    whose content differs from what the run recorded for its training file is evaluated with a warning.

    ``per_time`` (default: when the data kind stores trajectories, states as channels): the operator's
    prediction (a free rollout for marching models) is scored over the predicted states by the run's
    ``loss.trajectory_metric`` (the row's statistics) and per state: ``per_time_mean``, ``per_time_median``,
    ``per_time_max`` (lists over the window's states ``k = 0 .. S-1``, the given ones first).
    """
    if batch_size is not None:
        check_batch_size(batch_size, "evaluate_resolutions")
    dev = _device(device)
    setup = as_setup(source, config, dev)
    setup.operator.to(dev).eval()
    data_path = data_file(setup, data_path)
    if out_dir is not None:  # before the work, not after it
        check_outputs(out_dir, "evaluate", EVAL_FILES, overwrite=overwrite)
    info = dataset_info(data_path)
    check_kind(setup, info, data_path)
    warn_if_other_data(setup, data_path)
    resolutions = default_resolutions(setup, info) if resolutions is None else parse_resolutions(resolutions)
    check_resolutions(resolutions, setup, info, data_path)
    idx = select_indices(setup, data_path, indices, int(info["n_complete"]))
    warn_if_seen(setup, data_path, idx, int(info["n_complete"]))

    batch_size = batch_size or default_batch(setup)
    per_time = is_trajectory(info["kind"]) if per_time is None else per_time
    history, how = trajectory_scoring(setup)
    rows = []
    for res in resolutions:
        dataset = _open(setup, data_path, idx, res)
        names = state_field_names(setup, dataset)  # several fields per state: scored per field too
        fields = max(len(names), 1)
        metric = (functools.partial(field_trajectory_scores, fields=fields, history=history, metric=how)
                  if per_time else relative_l2_per_sample)
        where = f"{data_path} at resolution {resolution_label(res)}"
        check_model_fits_data(setup.operator.model, dataset, dev, where, evaluating=True)
        if not is_point_data(dataset):  # mesh samples are checked where they are read
            check_targets(dataset.y, sample_ids(dataset), where, snapshots=per_time, history=history * fields)
        noise = setup_noise(setup, dataset)
        log.debug("resolution %s: %d samples of %s, batch %d, input noise %g", resolution_label(res), len(dataset),
                  data_path, batch_size, noise.level)
        with out_of_memory_advice(f"the evaluation at resolution {resolution_label(res)}", batch_size, dev,
                                  evaluation_advice("the batch size (petrov evaluate --batch-size)", batch_size)):
            errors = evaluate_relative_l2(setup.operator, dataset, batch_size=batch_size, device=dev,
                                          noise=noise, metric=metric)
        rows.append(per_time_row(res, errors, per_sample, history, fields=names) if per_time
                    else resolution_row(res, errors, keep_samples=per_sample))
    if out_dir is not None:
        meta = _meta(setup, data_path, idx)
        if per_time:
            meta["metric"] = trajectory_metric_text(how)
        claim_outputs(out_dir, "evaluate", EVAL_FILES, overwrite=overwrite)  # the earlier evaluation's go
        write_metrics(rows, out_dir, meta=meta)
    return rows


def dataset_fields(dataset: Any) -> list[str]:
    """The names of the F fields of one state of a time series (the opened data's ``fields``, else the file's
    ``fields`` attribute, a JSON list); ``[]`` where the data hold one unnamed field per state."""
    names = getattr(dataset, "fields", None)
    if names is None:
        names = (getattr(dataset, "attrs", None) or {}).get("fields")
        if isinstance(names, (str, bytes)):
            try:
                names = json.loads(names)
            except ValueError:
                names = None
    return [str(n) for n in names] if isinstance(names, (list, tuple)) else []


def state_field_names(setup: EvalSetup, dataset: Any) -> list[str]:
    """The names of the fields of a state ([`dataset_fields`][]; ``field 0, field 1, ...`` where the data name
    none but the marching model steps several); ValueError where the data and a marching model differ in
    their number of fields."""
    names = dataset_fields(dataset)
    model = getattr(setup.operator.model, "_orig_mod", setup.operator.model)
    if "teacher" not in inspect.signature(model.forward).parameters:  # not a marching model
        return names
    stepped = state_fields(getattr(model, "config", None))
    if not names:
        return [f"field {k}" for k in range(stepped)] if stepped > 1 else []
    if len(names) != stepped:
        raise ValueError(f"the data hold {len(names)} field(s) per state ({', '.join(names)}) but the model steps "
                         f"{stepped} (model.options.fields); evaluate it on data of its own fields")
    return names


def trajectory_scoring(setup: EvalSetup) -> tuple[int, str]:
    """``(given states, loss.trajectory_metric)`` of the run (a bare operator: 1 and the per-state mean)."""
    cfg = setup.config
    return (1, "state_mean") if cfg is None else (cfg.data.history, cfg.loss.trajectory_metric)


def _meta(setup: EvalSetup, data_path: Path, idx: np.ndarray) -> dict[str, Any]:
    d = setup.data_config
    contiguous = len(idx) and bool(np.all(np.diff(idx) == 1))
    return {
        "run_dir": None if setup.run_dir is None else str(setup.run_dir),
        "data": str(data_path),
        "kind": setup.kind,
        "train_resolution": None if d is None else (d.level or d.train_resolution),
        "samples": (f"{int(idx[0])}:{int(idx[-1]) + 1}" if contiguous else [int(i) for i in idx]),
        "metric": "relative L2 per sample, raw units",
    }


@torch.no_grad()
def predict(setup: EvalSetup, dataset, positions: Sequence[int], device: Any = None) -> torch.Tensor:
    """Predictions ``(k, *grid_out, c)`` (raw units, CPU) for the samples at ``positions`` of
    ``dataset``, with the same input noise as the evaluation; for point sets a list of the ``k``
    samples' ``(n_i, c)`` predictions."""
    dev = _device(device)
    op = setup.operator.to(dev).eval()
    pos_idx = torch.as_tensor(list(positions), dtype=torch.long)
    if is_point_data(dataset):
        part = dataset.subset(to_numpy(pos_idx))
        b = to_batch(next(iter(data_loader(part, len(part)))), part, dev)
        pred = op.predict(b.x, noise=setup_noise(setup, part), sample_ids=sample_ids(part), **b.inputs).cpu()
        return [pred[i, :n] for i, n in enumerate(part.node_counts)]
    x = dataset.x[pos_idx].to(dev)
    return op.predict(x, batch_pos(dataset.coords, len(x), dev), noise=setup_noise(setup, dataset),
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
    """The evaluation figures in ``out_dir`` (PNG, and PDF beside each): ``predictions.png`` (at
    ``resolution``, default the finest evaluated one: the first evaluated sample, the one of median
    error and the worst when ``rows`` carry ``per_sample`` errors, else the first ``n_samples``),
    ``error_vs_resolution.png`` and, for a run directory, ``training_curves.png``.  Returns the PNG paths."""
    from . import plots as figures  # here, not at import: matplotlib is ~0.7 s of every command's start-up

    _check_rows(rows)
    if isinstance(n_samples, bool) or not isinstance(n_samples, int) or n_samples < 1:
        raise ValueError(f"make_plots: n_samples must be an integer >= 1 (samples to draw), got {n_samples!r}")
    dev = _device(device)
    setup = as_setup(source, None, dev)
    data_path = data_file(setup, data_path)
    out = ensure_dir(out_dir, "output directory", "--out")
    if is_mesh_file(data_path):
        return _mesh_plots(setup, rows, out, data_path, indices, resolution, dev)
    d = setup.data_config
    train_res = None if d is None else d.train_resolution
    written = [figures.plot_error_vs_resolution(rows, out / "error_vs_resolution.png",
                                              train_resolution=train_res)]
    res = resolution or max(rows, key=lambda r: figures.axis_points(r["resolution"]))["resolution"]
    res = list(res) if isinstance(res, tuple) else res  # a pair as the rows hold it
    idx = select_indices(setup, data_path, indices, int(dataset_info(data_path)["n_complete"]))
    row = next((r for r in rows if r["resolution"] == res), {})
    if row.get("per_sample") and len(row["per_sample"]) == len(idx):  # the first, median and worst samples
        chosen = figures.chosen_samples(row["per_sample"])
    else:
        chosen = [("", j) for j in range(min(n_samples, len(idx)))]
    labels = [label for label, _ in chosen]
    dataset = _open(setup, data_path, idx[[j for _, j in chosen]], res)
    pred = predict(setup, dataset, range(len(dataset)), dev)
    noise = setup_noise(setup, dataset).level
    title = f"test samples at resolution {resolution_label(res)}" + (
        f" (inputs drawn without the noise {noise:g} the model was given)" if noise else "")
    if "per_time_mean" in rows[0]:
        written.append(figures.plot_error_vs_time(rows, out / "error_vs_time.png"))
        written += _rollout_figures(dataset, pred, out, int(rows[0].get("history", 1)), f"{title}: rollouts", labels,
                                    state_field_names(setup, dataset))
    else:
        written.append(figures.plot_predictions(dataset, pred, out / "predictions.png", title=title, labels=labels,
                                                n=len(chosen)))
    written += _training_curves(setup, out)
    return written


def _rollout_figures(dataset: Any, pred: torch.Tensor, out: Path, history: int, title: str,
                     labels: list[str], names: list[str]) -> list[Path]:
    """Trajectories: ``spacetime.png`` on 1-D grids; on 2-D grids ``states.png`` (truth, prediction and their
    difference at the first and last predicted states) and ``rollout.gif`` (the first chosen sample)."""
    from . import plots as figures, state_plots

    fields = names if len(names) > 1 else None  # one field: named after the kind, as always
    if dataset.y.dim() == 3:
        return [figures.plot_spacetime(dataset.y, pred, out / "spacetime.png", sample_ids=dataset.indices,
                                       title=title, labels=labels, n=len(pred), fields=fields)]
    extent = figures.grid_extent(dataset.coords, figures.dataset_domain(dataset))
    ids = [int(i) for i in dataset.indices]
    name = figures.field_names(getattr(dataset, "kind", None), getattr(dataset, "attrs", None))[1]
    name = names[0] if len(names) == 1 and getattr(dataset, "kind", None) == "time-series" else name
    return [state_plots.plot_states(dataset.y, pred, out / "states.png", history=history, name=name, sample_ids=ids,
                                    labels=labels, extent=extent, title=title, fields=fields),
            state_plots.animate_rollout(dataset.y[0], pred[0], out / "rollout.gif", history=history, name=name,
                                        sample_id=ids[0], extent=extent, fields=fields)]


def _training_curves(setup: EvalSetup, out: Path) -> list[Path]:
    """``[training_curves.png]`` of a run directory with a ``log.jsonl``; ``[]`` with a warning when the log
    cannot be read (a damaged file): the evaluation's metrics and other figures stand without it."""
    from . import plots as figures

    if setup.run_dir is None or not (setup.run_dir / "log.jsonl").is_file():
        return []
    try:
        return [figures.plot_training_curves(setup.run_dir, out / "training_curves.png")]
    except ValueError as err:
        log.warning("training_curves.png not drawn: %s", err)
        return []


def _check_rows(rows: Any) -> None:
    """ValueError unless ``rows`` is a non-empty list of metrics rows (dicts with the ``ROW_FIELDS``)."""
    if not isinstance(rows, (list, tuple)) or not rows:
        got = f"an empty {type(rows).__name__}" if isinstance(rows, (list, tuple)) else type(rows).__name__
        raise ValueError(f"make_plots: rows must be the non-empty list of metrics rows that evaluate_resolutions "
                         f"returns (or read_metrics reads), got {got}")
    for i, row in enumerate(rows):
        missing = [k for k in ROW_FIELDS if not isinstance(row, dict) or k not in row]
        if missing:
            got = f"keys {sorted(map(str, row))}" if isinstance(row, dict) else type(row).__name__
            raise ValueError(f"make_plots: rows[{i}] is not a metrics row (it lacks {', '.join(missing)}; got "
                             f"{got}); give the rows evaluate_resolutions returns (or read_metrics reads)")


def _mesh_plots(setup: EvalSetup, rows: list[dict[str, Any]], out: Path, data_path: Path, indices: Any,
                level: str | None, dev: torch.device) -> list[Path]:
    """``error_vs_level.png`` and ``predictions.png`` (the first, median and worst test samples on the
    mesh ``level``, default the last evaluated one) of a mesh run, and its training curves."""
    from . import mesh_plots

    info = dataset_info(data_path)
    nodes = {name: float(v["nodes"]["mean"]) for name, v in info["levels"].items() if v["nodes"]}
    d = setup.data_config
    written = [mesh_plots.plot_error_vs_level(rows, nodes, out / "error_vs_level.png",
                                              train_level=None if d is None else d.level)]
    row = next((r for r in rows if r["resolution"] == level), rows[-1]) if level else rows[-1]
    idx = select_indices(setup, data_path, indices, int(info["n_complete"]))
    if "per_sample" in row:
        picks = mesh_plots.chosen_samples(np.asarray(row["per_sample"]))
    else:
        picks = [("first", 0)]
    dataset = _open(setup, data_path, idx, row["resolution"])
    pred = predict(setup, dataset, [k for _, k in picks], dev)
    samples = [{**dataset[k], "label": label} for label, k in picks]
    errors = [row["per_sample"][k] if "per_sample" in row else float("nan") for _, k in picks]
    written.append(mesh_plots.plot_mesh_predictions(samples, pred, errors, out / "predictions.png",
                                                    title=f"test samples on mesh level {row['resolution']}"))
    written += _training_curves(setup, out)
    return written


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
    overwrite: bool = False,
) -> list[dict[str, Any]]:
    """What ``petrov evaluate`` does: evaluate, write ``RUN_DIR/eval`` (or ``out_dir``), plot.

    The output folder follows [`petrov.common.outputs`][]: it must not hold another command's
    outputs (the run's own ``metrics.json``), nor, unless ``overwrite``, a user's files; an earlier
    evaluation's files there are replaced as a whole (no old plot beside new metrics).

    Logs (INFO, logger ``petrov.evaluate.evaluation``) the table of [`format_table`][] if ``echo``, and
    the files written. The rows (returned and in ``metrics.json``) carry the per-sample errors as
    ``"per_sample"``: the error-vs-resolution figure draws their percentiles."""
    dev = _device(device)
    setup = load_run(run_dir, map_location=dev)
    out = Path(out_dir) if out_dir is not None else eval_dir(run_dir)
    rows = evaluate_resolutions(setup, data_path, resolutions, indices=indices, batch_size=batch_size,
                                device=dev, out_dir=out, per_sample=True, overwrite=overwrite)
    if echo:
        log.info("%s", format_table(rows, setup.config.data.train_resolution,
                                       trajectory_metric=setup.config.loss.trajectory_metric))
    log.info("saved %s and %s", out / "metrics.csv", out / "metrics.json")
    if plots:
        paths = make_plots(setup, rows, out, data_path, indices=indices, device=dev)
        log.info("plots: %s", ", ".join(str(p) for p in paths))
    return rows



__all__ = ["dataset_fields", "evaluate_resolutions", "is_trajectory", "make_plots", "predict", "run_evaluation"]
