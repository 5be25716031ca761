"""The test after training: the best model (``best.pt``) on the test split at every evaluation resolution
(mesh level), one metrics row each, scored as ``petrov evaluate`` scores it (trajectories: a free
rollout, the error at the final snapshot plus ``per_time_*`` lists) -- eagerly: each resolution is scored
once, not worth a compilation.  The run is tested only on the data it trained on (its recorded content).
In a distributed run rank 0 reads ``best.pt`` and sends it to every rank; each scores its share.
"""
from __future__ import annotations

import functools
from typing import Any

from ..datasets.mesh.loading import mesh_levels
from ..datasets.recipes import is_inverse, is_trajectory
from ..datasets.sampling import allowed_resolutions
from . import checkpoint as ckpt
from . import distributed as dist_
from .data import is_point_data, open_split
from .model_fit import OUTPUT_NOT_TARGET, forward_error, without_advice
from .memory import evaluation_advice
from .metrics import evaluate_relative_l2, field_trajectory_scores, per_time_row, resolution_row, write_metrics


def test_discretizations(cfg: Any, train: Any) -> list:
    """The resolutions (grids) or mesh levels (point sets) the test split is scored at (``cfg``: the
    ``DataConfig``, ``train``: the training split)."""
    if is_point_data(train):
        return list(cfg.eval_levels) or mesh_levels(train.attrs)
    return list(cfg.eval_resolutions) or [train.resolution]


def resolution_refusal(cfg: Any, model: Any, index: int, resolution: int, transform: Any, device: Any) -> str | None:
    """Why the test cannot be scored at grid ``resolution`` (``cfg``: the ``DataConfig``; ``index``: a test
    sample, read at that resolution and passed through ``model``): the data file's rule (a strided
    sub-grid of its grid, for the inverse problem one the target can be pooled from) or the model's own
    (e.g. a spectral layer's minimum grid), without their advice; None if it can."""
    try:
        sample = open_split(cfg, [index], resolution, transform, lazy=True)
    except ValueError as err:
        return without_advice(str(err), "; allowed")
    return without_advice(forward_error(model, sample, device) or "") or None


def check_test_resolutions(cfg: Any, model: Any, train: Any, test_indices: Any, transform: Any, device: Any) -> None:
    """Before training: every ``data.eval_resolutions`` of a grid file is one the test split can be read
    at and the model can take (``resolution_refusal``); else a ValueError naming the resolution, why, and
    the resolutions this model takes from the file (read and run on one test sample each)."""
    if is_point_data(train) or not len(test_indices) or not cfg.eval_resolutions:
        return
    index = int(test_indices[0])
    for res in cfg.eval_resolutions:
        why = resolution_refusal(cfg, model, index, res, transform, device)
        if why is None:
            continue
        if why.startswith(OUTPUT_NOT_TARGET) and is_inverse(getattr(train, "kind", None)):
            why += (f"; {train.kind} pools every target to data.coarse_resolution: a model of the inverse problem "
                    f"(latent2d_inverse, its coarse_size that grid) outputs it from any input grid")
        reachable = allowed_resolutions(train.native_resolution, train.periodic, getattr(train, "cells", False))
        takes = [r for r in reachable if resolution_refusal(cfg, model, index, r, transform, device) is None]
        raise ValueError(f"data.eval_resolutions: resolution {res} cannot be tested ({why}); from {cfg.path} this "
                         f"model takes {', '.join(map(str, takes)) or 'no resolution'}: choose among them "
                         f"(checked before training)")


def is_trajectory_data(train: Any) -> bool:
    """Whether the data store trajectories (snapshots as channels)."""
    return is_trajectory(getattr(train, "kind", None))


def run_test(trainer: Any) -> list[dict[str, Any]]:
    """The metrics rows of ``trainer``'s best model on its test split (none without one)."""
    d, ctx, run_dir = trainer.cfg.data, trainer.ctx, trainer.run_dir
    splits = trainer.data.splits
    if splits is None or len(splits.test) == 0:
        return []
    trainer.check_data_unchanged(
        "while the run trained on it", advice=f"its test split there is not the held-out part of the data it "
        f"trained on, so the run is not tested. {run_dir / 'best.pt'} is kept: put the original file "
        f"back and run `petrov evaluate {run_dir}`")
    best = ckpt.load_run_checkpoint(run_dir / "best.pt", map_location=ctx.device) if ctx.is_main else None
    trainer.model.load_state_dict(dist_.broadcast_object(None if best is None else best["state_dict"], ctx))
    trajectory = is_trajectory_data(trainer.data.train)
    names = list(getattr(trainer.data.train, "fields", None) or [])  # a time series' fields per state
    rows = []
    for res in test_discretizations(d, trainer.data.train):
        test = open_split(d, splits.test, res, trainer.transform, lazy=True if ctx.distributed else None)
        trainer.check_targets(test, "test", 0.0)
        with trainer.out_of_memory(f"the test at {res}", trainer.eval_batch,
                                   evaluation_advice("run.eval_batch_size", trainer.eval_batch)):
            per_sample = evaluate_relative_l2(
                trainer.operator, test, batch_size=trainer.eval_batch, device=ctx.device, ctx=ctx,
                metric=functools.partial(field_trajectory_scores, fields=len(names) or 1, history=d.history,
                                         metric=trainer.cfg.loss.trajectory_metric)
                if trajectory else trainer.mode.metric,
            )
        rows.append(per_time_row(res, per_sample, history=d.history, fields=names) if trajectory
                    else resolution_row(res, per_sample))
    return rows


def trajectory_metric_text(metric: str) -> str:
    """What the rows of a trajectory run's metrics hold (``metric``: its ``loss.trajectory_metric``)."""
    what = ("the relative L2 of the whole predicted space-time block" if metric == "space_time"
            else "the mean over the predicted states of their relative L2")
    return f"per sample {what} of a free rollout (rows), raw units; per state k in per_time_*"


def write_test_metrics(trainer: Any, rows: list[dict[str, Any]]) -> None:
    """``metrics.json``/``metrics.csv`` of the run directory (rank 0 writes)."""
    if not (trainer.ctx.is_main and rows):
        return
    metric = trajectory_metric_text(trainer.cfg.loss.trajectory_metric) if is_trajectory_data(trainer.data.train) \
        else "relative L2 per sample, raw units"
    write_metrics(rows, trainer.run_dir, meta={"split": "test", "best_epoch": trainer.best_epoch,
                                               "best_val_rel_l2": trainer.best_metric, "metric": metric})


__all__ = ["check_test_resolutions", "is_trajectory_data", "resolution_refusal", "run_test", "test_discretizations",
           "trajectory_metric_text", "write_test_metrics"]
