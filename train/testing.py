"""The test after training: the best model (``best.pt``) on the test split at every evaluation resolution
(mesh level), one metrics row each, scored as ``petrov evaluate`` scores it (trajectories: a free
rollout, the error at the final snapshot plus ``per_time_*`` lists) -- eagerly: each resolution is scored
once, not worth a compilation.  The run is tested only on the data it trained on (its recorded content).
In a distributed run rank 0 reads ``best.pt`` and sends it to every rank; each scores its share.
"""
from __future__ import annotations

from typing import Any

from ..datasets.mesh.loading import mesh_levels
from ..datasets.recipes import is_trajectory
from . import checkpoint as ckpt
from . import distributed as dist_
from .data import is_point_data, open_split
from .losses import per_time_relative_l2
from .memory import evaluation_advice
from .metrics import evaluate_relative_l2, per_time_row, resolution_row, write_metrics


def test_discretizations(cfg: Any, train: Any) -> list:
    """The resolutions (grids) or mesh levels (point sets) the test split is scored at (``cfg``: the
    ``DataConfig``, ``train``: the training split)."""
    if is_point_data(train):
        return list(cfg.eval_levels) or mesh_levels(train.attrs)
    return list(cfg.eval_resolutions) or [train.resolution]


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
    rows = []
    for res in test_discretizations(d, trainer.data.train):
        test = open_split(d, splits.test, res, trainer.transform, lazy=True if ctx.distributed else None)
        trainer.check_targets(test, "test", 0.0)
        with trainer.out_of_memory(f"the test at {res}", trainer.eval_batch,
                                   evaluation_advice("run.eval_batch_size", trainer.eval_batch)):
            per_sample = evaluate_relative_l2(
                trainer.operator, test, batch_size=trainer.eval_batch, device=ctx.device, ctx=ctx,
                metric=per_time_relative_l2 if trajectory else trainer.mode.metric,
            )
        rows.append(per_time_row(res, per_sample) if trajectory else resolution_row(res, per_sample))
    return rows


def write_test_metrics(trainer: Any, rows: list[dict[str, Any]]) -> None:
    """``metrics.json``/``metrics.csv`` of the run directory (rank 0 writes)."""
    if not (trainer.ctx.is_main and rows):
        return
    metric = ("relative L2 per sample at the final snapshot t_T (rows), raw units; per snapshot k = 0..T in "
              "per_time_*") if is_trajectory_data(trainer.data.train) else "relative L2 per sample, raw units"
    write_metrics(rows, trainer.run_dir, meta={"split": "test", "best_epoch": trainer.best_epoch,
                                               "best_val_rel_l2": trainer.best_metric, "metric": metric})


__all__ = ["is_trajectory_data", "run_test", "test_discretizations", "write_test_metrics"]
