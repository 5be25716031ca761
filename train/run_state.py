"""A run's state in its checkpoints: what ``best.pt`` and ``last.pt`` hold, and a resumed run read back.

``last.pt`` holds everything a resumed run needs to end with exactly the weights of an uninterrupted one
(on the CPU, with a fixed thread count): the model, optimizer, schedule and gradient scaler, the epoch and
the best validation so far, every rank's random number generators, and where in its epoch a stopped run
was (``petrov.train.preemption.Position``).  ``best.pt`` holds the model and normalisers of the best
validation epoch.  The file format is ``petrov.train.checkpoint``'s; the data the run trained on is
recorded (``data_identity``) and a resumed run must find the same content.
"""
from __future__ import annotations

import logging
from pathlib import Path
from typing import Any

from ..datasets.identity import check_data_unchanged
from . import checkpoint as ckpt
from . import distributed as dist_
from .config import (TrainConfig, check_resumable, config_from_dict, config_to_dict, load_config_json, save_config_json,
                     with_evaluation_keys)
from .divergence import diverged
from .preemption import Position
from .step import summarize

log = logging.getLogger(__name__)


def write_checkpoints(trainer: Any, folder: Path, best: bool, rngs: list, position: Position | None = None) -> None:
    """``folder/best.pt`` (if ``best``) and ``folder/last.pt`` of ``trainer``'s current state (``rngs``: every
    rank's RNG states; ``position``: where in the next epoch, None at its start)."""
    state = dict(train_config=config_to_dict(trainer.cfg), epoch=trainer.epoch, scheduled_steps=trainer.scheduled_steps,
                 best_metric=trainer.best_metric, best_epoch=trainer.best_epoch, data_identity=trainer.data_identity)
    operator = trainer.operator
    norms, noise = operator.normalizer_states(), operator.noise
    if best:
        ckpt.save_run_checkpoint(folder / "best.pt", operator.model, norms, noise, **state)
        log.debug("saved %s (epoch %d)", folder / "best.pt", trainer.epoch)
    ckpt.save_run_checkpoint(
        folder / "last.pt", operator.model, norms, noise, **state,
        optimizer=trainer.optimizer.state_dict(), scheduler=trainer.scheduler.state_dict(),
        scaler=None if trainer.scaler is None else trainer.scaler.state_dict(), rng=rngs,
        position=None if position is None else position.to_state(),
    )


def save_position(trainer: Any, steps: int) -> None:
    """``last.pt`` with ``steps`` of ``trainer``'s current epoch done (``preemption``); an epoch that diverged
    before is reported instead (``last.pt`` keeps the last good epoch)."""
    rows = trainer.totals.gather(trainer.ctx)
    bad = summarize(rows)[1]
    if bad is not None:
        raise diverged(bad, trainer.epoch, len(trainer.train_batches), trainer.run_dir)
    trainer.save(best=False, position=Position(steps, rows))
    if trainer.ctx.is_main:
        log.info("stopped at batch %d of %d in epoch %d; saved %s", steps, len(trainer.train_batches),
                 trainer.epoch + 1, trainer.run_dir / "last.pt")


def restore(trainer: Any) -> None:
    """``trainer`` put in the state of its run's ``last.pt``, read by rank 0 and sent to every rank: the config
    must be the run's (only runtime keys may differ), its ``best.pt`` whole, its data unchanged."""
    ctx, run_dir = trainer.ctx, trainer.run_dir
    state = dist_.run_on_main(lambda: ckpt.load_run_checkpoint(run_dir / "last.pt"), ctx)
    state = dist_.broadcast_object(state, ctx)
    trainer.saved_config = config_from_dict(state["train_config"], check_model=False)  # config.json's content
    check_resumable(trainer.saved_config, trainer.cfg, run_dir)
    dist_.run_on_main(lambda: ckpt.check_best_checkpoint(run_dir, state), ctx)
    recorded = state.get("data_identity")
    if trainer.data_identity is not None and recorded:
        check_data_unchanged(trainer.cfg.data.path, recorded, "since the run started",
                             "it cannot continue on other data: put the original file back, or start a new run "
                             "(--overwrite, or another --out)")
        trainer.data_identity = recorded
    trainer.model.load_state_dict(state["state_dict"])
    trainer.optimizer.load_state_dict(state["optimizer"])
    trainer.scheduler.load_state_dict(state["scheduler"])
    if trainer.scaler is not None and state.get("scaler"):
        trainer.scaler.load_state_dict(state["scaler"])
    trainer.epoch, trainer.best_epoch = int(state["epoch"]), int(state["best_epoch"])
    trainer.scheduled_steps = trainer.scheduler.steps  # as an earlier budget refitted it (the schedule's own state)
    trainer.best_metric = float(state["best_metric"])
    rngs = state["rng"]
    ckpt.set_rng_state(rngs[ctx.rank] if len(rngs) == ctx.world_size else rngs[0])
    trainer.position = Position.from_state(state.get("position"))
    if ctx.is_main:
        within = f", at batch {trainer.position.steps} of epoch {trainer.epoch + 1}" if trainer.position else ""
        log.info("resuming %s after epoch %d%s (best %.4e at epoch %d)", run_dir / "last.pt", trainer.epoch, within,
                 trainer.best_metric, trainer.best_epoch)


def record_evaluation_keys(config: TrainConfig, path: Path, saved: TrainConfig | None = None) -> None:
    """A resumed run tested at other resolutions (``EVALUATION_KEYS``): its ``config.json`` says so.
    A ``config.json`` that went missing is written back from ``saved`` (the config ``last.pt`` recorded)."""
    if not path.exists() and saved is not None:
        save_config_json(with_evaluation_keys(saved, config) or saved, path)
        log.warning("%s was missing; wrote it back from %s", path, path.parent / "last.pt")
    elif path.is_file():
        updated = with_evaluation_keys(load_config_json(path, check_model=False), config)
        if updated is not None:
            save_config_json(updated, path)


__all__ = ["record_evaluation_keys", "restore", "save_position", "write_checkpoints"]
