"""Scoring a trained operator on a dataset: per-sample errors and the one metrics format.

- [`evaluate_relative_l2`][]: per-sample relative L² ``‖p − y‖ / ‖y‖`` (raw units) of an operator
  on one dataset, batched, with the input noise of its protocol, sharded over ranks in a distributed
  run: the trainer's validation and test, and ``petrov evaluate`` ([`petrov.evaluate`][]), use it;
- [`resolution_row`][] / [`per_time_row`][]: the one metrics format, a row ``{"resolution", "n",
  "mean", "std", "median", "max"}`` per resolution (points per axis of a grid, a pair ``[n_x, n_y]`` of a
  rectangular one, labelled ``16x48`` by [`resolution_label`][], or the name of a mesh level; trajectories add
  per-snapshot statistics, and trajectories of several fields per state, scored by
  [`field_trajectory_scores`][], each field's);
- [`write_metrics`][] / [`read_metrics`][] store rows as ``metrics.csv`` + ``metrics.json``
  (``{**meta, "rows": [...]}``), for training (``RUN_DIR/metrics.json``) and ``petrov evaluate``
  (``RUN_DIR/eval/``) alike.
"""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from ..common.files import write_csv, write_json
from ..datasets import InputNoise
from ..datasets.normalizers import check_fields
from ..operators.trajectory import as_states
from ..operators.models import node_inputs
from . import distributed as dist_
from .batches import Batches
from .compilation import mark_step, static_shapes
from .data import Batch
from .losses import per_time_relative_l2, relative_l2_per_sample
from .operator import NormalizedOperator
from .rollout import trajectory_scores

ROW_FIELDS = ["resolution", "n", "mean", "std", "median", "max"]
"""The columns of a metrics row (``metrics.csv``): the resolution, the number of samples, and the mean,
standard deviation, median and maximum of their relative L² errors."""


@torch.no_grad()
def evaluate_relative_l2(
    operator: NormalizedOperator,
    dataset: Any,
    *,
    batch_size: int = 16,
    device: torch.device | str | None = None,
    noise: InputNoise | float | None = None,
    noise_seed: int = 0,
    ctx: dist_.Context | None = None,
    metric: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] = relative_l2_per_sample,
    net: Callable[..., torch.Tensor] | None = None,
    compile_mode: str = "off",
    after_batch: Callable[[int], None] | None = None,
) -> torch.Tensor:
    """Per-sample relative L² ``(N,)`` of ``operator`` on ``dataset`` (raw units, dataset order).

    ``metric(pred, y)`` gives the per-sample values (default the relative L² of the whole output;
    e.g. ``per_time_relative_l2`` for one column per snapshot, ``(N, S)``).

    ``dataset`` is GridDataset-like (``.x (N,*grid,c)``, ``.y``, ``.coords``, optional ``.indices``
    = file sample numbers used to seed the input noise), a device-resident split
    (``petrov.train.batches.ResidentSplit``) or holds point sets (a ``MeshDataset``: the
    metric then takes the quadrature weights).  ``noise``: the input noise added to the
    normalised inputs, by default the operator's own (``operator.noise``, the protocol it was trained
    with); a bare level is taken with ``noise_seed``.  In a distributed run each rank evaluates its
    share and every rank receives the full, de-duplicated result.  ``net``: the network in place of
    ``operator.model`` (the trainer's compiled one, ``compile_mode`` its resolved ``run.compile``: under
    CUDA graphs every batch is padded to ``batch_size``, a point set's to the largest mesh of ``dataset``, and
    only its real rows are scored).
    ``after_batch(number)``: called after each batch (numbered from 1; the trainer stops there on a signal).
    """
    check_batch_size(batch_size, "evaluate_relative_l2")
    if len(dataset) == 0:
        raise ValueError("evaluate_relative_l2: the dataset holds no samples (an empty selection of the file?); "
                         "give it at least one sample")
    if device is None:
        device = ctx.device if ctx is not None else next(operator.parameters()).device
    device = torch.device(device)
    ctx = ctx or dist_.Context(device=device)
    if noise is None:
        noise = getattr(operator, "noise", InputNoise())
    elif not isinstance(noise, InputNoise):
        noise = InputNoise(float(noise), int(noise_seed))
    source = Batches(dataset, batch_size, dist_.sampler(dataset, ctx, shuffle=False), device,
                     static=static_shapes(compile_mode), node_inputs=node_inputs(operator.model))
    noise = source.noise_for(noise)
    was_training = operator.training
    operator.eval()
    values, where = [], []
    for number, b in enumerate(source, start=1):
        values.append(score_batch(operator, b, noise, metric, net, compile_mode))
        where.append(b.positions[:b.n].to(device))
        if after_batch is not None:
            after_batch(number)
    operator.train(was_training)
    if not values:
        return torch.zeros(0)
    return dist_.gather_per_sample(torch.cat(values), torch.cat(where), len(dataset), ctx)


def check_batch_size(batch_size: object, where: str) -> None:
    """ValueError unless ``batch_size`` is an integer >= 1 (the samples per evaluation batch)."""
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise ValueError(f"{where}: batch_size must be an integer >= 1 (samples per batch), got {batch_size!r}")


@torch.no_grad()
def score_batch(operator: NormalizedOperator, b: Batch, noise: Any, metric: Callable, net=None,
                compile_mode: str = "off") -> torch.Tensor:
    """``metric`` of ``operator``'s predictions on the real rows of batch ``b`` (no gradients)."""
    mark_step(compile_mode)
    pred = operator.predict(b.x, noise=noise, sample_ids=b.sample_ids, net=net, **b.inputs)[:b.n]
    y = b.y[:b.n]
    return metric(pred, y) if b.weights is None else metric(pred, y, b.weights[:b.n])


def summarize(per_sample: torch.Tensor) -> dict[str, float]:
    """``{"mean", "std", "median", "max", "n"}`` of per-sample errors (at least one)."""
    if per_sample.numel() == 0:
        raise ValueError("summarize: no per-sample errors to summarize (an empty selection of samples?); "
                         "evaluate at least one sample")
    v = per_sample.double()
    return {"mean": v.mean().item(), "std": v.std(unbiased=False).item(),
            "median": v.median().item(), "max": v.max().item(), "n": int(v.numel())}


def resolution_label(resolution: Any) -> str:
    """How tables, files and figures name a resolution: ``"64"``, a pair of points per axis of a rectangular 2-D
    grid ``"16x48"`` (x, then y), a mesh level by its name."""
    if isinstance(resolution, (list, tuple)):
        return "x".join(str(int(n)) for n in resolution)
    return str(resolution)


def _resolution_value(resolution: Any) -> int | str | list[int]:
    """A row's ``resolution``: an int, a mesh level's name, or a pair as the list ``[n_x, n_y]`` (JSON)."""
    if isinstance(resolution, str):
        return resolution
    return [int(n) for n in resolution] if isinstance(resolution, (list, tuple)) else int(resolution)


def resolution_row(resolution: Any, per_sample: torch.Tensor, keep_samples: bool = False) -> dict[str, Any]:
    """The metrics row of one resolution: ``ROW_FIELDS`` (+ ``"per_sample"`` if ``keep_samples``); a pair of
    points per axis is kept as the list ``[n_x, n_y]``."""
    if not torch.isfinite(per_sample).all():
        raise ValueError(f"non-finite relative L2 at resolution {resolution_label(resolution)} (model or data hold "
                         f"NaN/inf)")
    stats = summarize(per_sample)
    row = {"resolution": _resolution_value(resolution), "n": int(stats["n"]),
           **{k: float(stats[k]) for k in ("mean", "std", "median", "max")}}
    if keep_samples:
        row["per_sample"] = per_sample.double().tolist()
    return row


def per_time_row(resolution: int, scores: torch.Tensor, keep_samples: bool = False, history: int = 1,
                 fields: Sequence[str] | None = None) -> dict[str, Any]:
    """The metrics row of trajectories at one resolution from ``scores: (N, 1 + S)``
    (``petrov.train.rollout.trajectory_scores``): [`resolution_row`][] of column 0, each sample's error over
    the predicted states (the run's ``loss.trajectory_metric``), plus ``per_time_mean/median/max`` over the
    samples for every state ``k = 0 .. S-1`` (the ``history`` given states first: 0 where the model returns
    them as they are), and ``history``.

    ``fields``: the names of F > 1 fields per state, ``scores`` then [`field_trajectory_scores`][]'s
    ``(N, 1 + F + S + S F)``; the row adds ``fields``, ``field_mean/median/max`` (each field's relative L²
    over the predicted space-time block, F values) and ``per_time_field_mean`` (S lists of F: each state's
    error per field); ``per_time_*`` are then each state's error over all its fields.  One field (or None):
    the row of a single field, exactly as without."""
    names = list(fields or [])
    f = len(names) if len(names) > 1 else 1
    extra = f if f > 1 else 0  # the per-field columns
    states = (scores.shape[1] - 1 - extra) // (1 + extra)
    if f > 1 and scores.shape[1] != 1 + f + states * (1 + f):
        raise ValueError(f"scores of {scores.shape[1]} columns are not those of {f} fields ({', '.join(names)}); "
                         f"score with field_trajectory_scores(..., fields={f})")
    row = resolution_row(resolution, scores[:, 0], keep_samples=keep_samples)
    v = scores[:, 1 + f:1 + f + states].double() if f > 1 else scores[:, 1:].double()
    row.update(per_time_mean=v.mean(0).tolist(), per_time_median=v.median(0).values.tolist(),
               per_time_max=v.max(0).values.tolist(), history=int(history))
    if f > 1:
        block = scores[:, 1:1 + f].double()
        per_state = scores[:, 1 + f + states:].double().view(len(scores), states, f)
        row.update(fields=names, field_mean=block.mean(0).tolist(), field_median=block.median(0).values.tolist(),
                   field_max=block.max(0).values.tolist(), per_time_field_mean=per_state.mean(0).tolist())
    return row


def field_trajectory_scores(pred: torch.Tensor, y: torch.Tensor, *, fields: int = 1, history: int = 1,
                            metric: str = "state_mean") -> torch.Tensor:
    """Per-sample scores of trajectories of ``fields`` = F fields per state, channels state-major
    (``(b, *grid, S F)``, channel ``s F + f`` field f of state s; the first ``history`` states given).

    F = 1: ``trajectory_scores(pred, y, history, metric)``, ``(b, 1 + S)``, exactly.  F > 1: ``(b, 1 + F + S +
    S F)``: the run's ``metric`` over the predicted channels (all fields together); each field's relative L²
    over the predicted space-time block, ``‖p_f − y_f‖ / ‖y_f‖`` over every point and predicted state of field
    f; each state's relative L² over all its fields; each (state, field)'s (column ``s F + f``)."""
    f = check_fields(fields)
    if f == 1:
        return trajectory_scores(pred, y, history=history, metric=metric)
    if pred.shape != y.shape:
        raise ValueError(f"prediction shape {tuple(pred.shape)} does not match target shape {tuple(y.shape)}")
    p, t = as_states(pred, f), as_states(y, f)  # (b, *grid, S, F)
    overall = trajectory_scores(pred, y, history=history * f, metric=metric)[:, 0]
    block = [relative_l2_per_sample(p[..., history:, k], t[..., history:, k]) for k in range(f)]
    per_state = [relative_l2_per_sample(p[..., s, :], t[..., s, :]) for s in range(p.shape[-2])]
    return torch.cat([overall[:, None], torch.stack(block + per_state, dim=1), per_time_relative_l2(pred, y)], dim=1)


def write_metrics(rows: list[dict[str, Any]], out_dir: str | os.PathLike,
                  meta: dict[str, Any] | None = None) -> tuple[Path, Path]:
    """``out_dir/metrics.csv`` (one line per resolution, ``ROW_FIELDS``) and ``metrics.json``
    (``{"rows": rows, **meta}``), each written to a temp file and renamed."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    flat = [{**r, "resolution": resolution_label(r["resolution"])} if isinstance(r["resolution"], list) else r
            for r in rows]  # a pair as "16x48" in its one column
    write_csv(out / "metrics.csv", flat, ROW_FIELDS)  # floats with repr: they read back exactly
    write_json(out / "metrics.json", {**(meta or {}), "rows": rows})
    return out / "metrics.csv", out / "metrics.json"


def read_metrics(out_dir: str | os.PathLike) -> list[dict[str, Any]]:
    """The rows saved by [`write_metrics`][] (from the JSON file)."""
    path = Path(out_dir) / "metrics.json"
    if not path.is_file():
        raise FileNotFoundError(f"no evaluation results at {str(path)!r}; run `petrov evaluate` first")
    try:
        saved = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{str(path)!r} is damaged (not valid JSON: {err}); evaluate again to rewrite it") from None
    if not isinstance(saved, dict) or not isinstance(saved.get("rows"), list):
        raise ValueError(f"{str(path)!r} is damaged: it holds no list of metrics rows (a JSON object with \"rows\"); "
                         f"evaluate again to rewrite it")
    return saved["rows"]


__all__ = ["ROW_FIELDS", "check_batch_size", "evaluate_relative_l2", "field_trajectory_scores", "per_time_row",
           "read_metrics", "resolution_label", "resolution_row", "score_batch", "summarize", "write_metrics"]
