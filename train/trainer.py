"""The training loop: one function, [`train`][], from a validated config to a run directory.

Recipe (the reference Galerkin Transformer's): Adam/AdamW; OneCycleLR stepped per global batch; gradient clipping by global
norm; loss ``relL2 + γ·relH1`` in raw units (predictions decoded by the y-normaliser, see
``petrov.train.data``; ``loss.mode`` picks how a batch becomes predictions, loss and validation
metric: teacher forcing, pushforward or unrolled rollouts for marching models, see
``petrov.train.rollout``); model selection on the validation split (``best.pt``); the test split is only
evaluated, after training, with the best model, at each ``data.eval_resolutions``.

Run directory (rank 0 writes it):

    config.json      the resolved config          log.csv / log.jsonl   one row per epoch
    last.pt          resume point (each epoch)    best.pt               best validation model
    metrics.json/csv test relL2 per resolution    tensorboard/          if run.tensorboard
                     (petrov.train.metrics' rows)

Robustness: a non-finite loss or gradient norm stops the run with a ``TrainingDiverged`` naming the
epoch and batch; ``last.pt`` then still holds the last completed (finite) epoch.  The OneCycle warm-up
starts at ``lr/div_factor`` and lasts at least ``optim.min_warmup_steps`` batches, so a schedule
compressed into few epochs does not ramp to the maximum lr within a handful of steps.

Output: one INFO line per epoch on the ``petrov.train.trainer`` logger (shown by the ``petrov``
command, silent in the API unless logging is configured); the batch progress bar only on a terminal
and with ``run.progress``.

Determinism: the sampler order is a function of (seed, epoch), RNG states are checkpointed, so on CPU
(fixed thread count) a resumed run ends with exactly the weights of an uninterrupted one.
"""
from __future__ import annotations

import contextlib
import json
import logging
import math
import os
import random
import time
from dataclasses import asdict as dc_asdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable

import numpy as np
import torch

from ..common.files import atomic_write, ensure_dir, exclusive_lock, write_csv
from ..common.interrupts import raise_if_interrupted
from ..common.outputs import MANIFEST, check_outputs, claim_outputs
from ..common.progress import progress_bar
from ..datasets.identity import data_identity, identity_change
from ..datasets.mesh.loading import mesh_levels
from ..datasets.recipes import is_trajectory
from ..operators import build_model
from ..operators.models import sample_transform
from . import checkpoint as ckpt
from . import distributed as dist_
from .config import TrainConfig, check_resumable, config_from_dict, config_to_dict, save_config_json
from .data import (
    TrainingData,
    batches,
    build_training_data,
    check_model_fits_data,
    data_loader,
    ensure_data_file,
    is_point_data,
    open_split,
    sample_ids,
    to_batch,
)
from .losses import check_targets, per_time_relative_l2
from .metrics import evaluate_relative_l2, per_time_row, resolution_row, write_metrics
from .operator import NormalizedOperator
from .rollout import check_mode_fits_model, training_mode

log = logging.getLogger(__name__)

# what `petrov train` writes into a run directory (the output-folder rule: petrov.common.outputs)
RUN_FILES = ("config.json", "log.csv", "log.jsonl", "last.pt", "best.pt", "metrics.json", "metrics.csv", "tensorboard")


class DataChanged(ValueError):
    """The run's data file is not the one it started on (regenerated, replaced, edited)."""


class TrainingDiverged(RuntimeError):
    """A non-finite loss or gradient: the message names the epoch and batch."""


@dataclass
class EpochRecord:
    epoch: int
    train_loss: float
    val_rel_l2: float
    lr: float
    seconds: float
    best: bool


@dataclass
class TrainResult:
    run_dir: Path
    epochs_completed: int
    best_epoch: int
    best_val_rel_l2: float
    stopped: str  # "completed" | "time budget" | "callback"
    test: list[dict[str, Any]] = field(default_factory=list)  # metrics rows, one per resolution


# --- the run -------------------------------------------------------------------------------------

class RunLog:
    """Per-epoch rows in ``log.csv`` and ``log.jsonl`` (rewritten atomically), plus TensorBoard."""

    FIELDS = ["epoch", "train_loss", "val_rel_l2", "lr", "seconds", "best"]

    def __init__(self, run_dir: Path, keep_until: int, tensorboard: bool):
        self.run_dir = run_dir
        self.rows: list[dict[str, Any]] = []
        jsonl = run_dir / "log.jsonl"
        if keep_until > 0 and jsonl.is_file():  # resume: drop epochs the checkpoint does not have
            rows = [json.loads(line) for line in jsonl.read_text().splitlines() if line.strip()]
            self.rows = [r for r in rows if r["epoch"] <= keep_until]
        self.writer = None
        if tensorboard:
            try:
                from torch.utils.tensorboard import SummaryWriter
            except ImportError:
                raise ValueError("run.tensorboard = true needs the tensorboard package "
                                 "(pip install tensorboard), or set run.tensorboard = false") from None
            self.writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=keep_until + 1)

    def append(self, record: EpochRecord) -> None:
        row = dc_asdict(record)
        self.rows.append(row)
        atomic_write(self.run_dir / "log.jsonl", "".join(json.dumps(r) + "\n" for r in self.rows))
        write_csv(self.run_dir / "log.csv", self.rows, self.FIELDS)
        if self.writer is not None:
            for key in ("train_loss", "val_rel_l2", "lr", "seconds"):
                self.writer.add_scalar(key, row[key], record.epoch)
            self.writer.flush()

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()


def _seed_all(seed: int) -> None:
    torch.manual_seed(seed)
    np.random.seed(seed % 2**32)
    random.seed(seed)


def _make_optimizer(cfg: TrainConfig, params) -> torch.optim.Optimizer:
    o = cfg.optim
    cls = torch.optim.AdamW if o.optimizer == "adamw" else torch.optim.Adam
    return cls(params, lr=o.lr, weight_decay=o.weight_decay)


def _make_scheduler(cfg: TrainConfig, optimizer, steps_per_epoch: int):
    o = cfg.optim
    total = o.epochs * steps_per_epoch
    pct = min(max(o.pct_start, o.min_warmup_steps / total), 0.9)
    return torch.optim.lr_scheduler.OneCycleLR(
        optimizer, max_lr=o.lr, total_steps=total, pct_start=pct, div_factor=o.div_factor,
        final_div_factor=o.final_div_factor,
    )


def amp_dtype(device: torch.device) -> torch.dtype:
    """The 16-bit type of ``run.amp`` on ``device``: bfloat16 on the CPU and on CUDA devices that
    support it (float32's exponent range: no gradient scaling), else float16 (with a GradScaler)."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def _load_initial_weights(model: torch.nn.Module, cfg: TrainConfig, device: torch.device) -> None:
    """``run.init_from``: the weights of that run's ``best.pt``; its model must be this config's."""
    path = Path(cfg.run.init_from) / "best.pt"
    state = ckpt.load_run_checkpoint(path, map_location=device)
    if state["model_name"] != cfg.model.name or model.config != type(model.config)(**state["config"]):
        raise ValueError(f"run.init_from: {path} holds a {state['model_name']} with other options than this "
                         f"config's {cfg.model.name}; continue a run with its own model.options")
    model.load_state_dict(state["state_dict"])
    log.info("starting from the weights of %s (a new schedule)", path)


class Trainer:
    """One training run.  Use [`train`][]; the class exists to keep the state in one place."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, ctx: dist_.Context,
                 data: TrainingData | None, callbacks: Iterable[Callable]):
        self.cfg, self.run_dir, self.ctx = cfg, Path(run_dir), ctx
        self.callbacks = list(callbacks)
        self.data_identity = None  # the content the run trains on: its test must be on the same file
        if data is None:
            dist_.run_on_main(lambda: ensure_data_file(cfg.data, progress=cfg.run.progress), ctx)
            self.data_identity = data_identity(cfg.data.path)
            data = build_training_data(cfg.data)
            self.check_data_unchanged("while it was being read")
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        self.periodic = bool(getattr(data.train, "periodic", False))
        self.mode = training_mode(cfg.loss.mode)
        _seed_all(cfg.run.seed)
        model = build_model(cfg.model.name, **cfg.model.options).to(ctx.device)
        if cfg.run.init_from:
            _load_initial_weights(model, cfg, ctx.device)
        self.transform = sample_transform(model)  # a point-set model's per-sample inputs (mesh_fno's grid)
        self.data = data = data.with_transform(self.transform)
        check_model_fits_data(model, data.train, ctx.device, cfg.data.path)
        check_mode_fits_model(cfg.loss.mode, model)
        for split, dataset in (("training", data.train), ("validation", data.val)):
            self._check_targets(dataset, split, cfg.loss.h1_weight if split == "training" else 0.0)
        torch.manual_seed(cfg.run.seed + ctx.rank)  # per-rank stream for dropout etc.
        self.operator = NormalizedOperator(model, data.x_normalizer, data.y_normalizer, data.noise)
        self.ddp = dist_.wrap_model(model, ctx)
        self.batch = dist_.local_batch_size(cfg.optim.batch_size, ctx)
        self.train_sampler = dist_.sampler(data.train, ctx, shuffle=True, seed=cfg.run.seed)
        self.train_loader = data_loader(data.train, self.batch, self.train_sampler, cfg.run.num_workers)
        self.train_ids = sample_ids(data.train)
        self.optimizer = _make_optimizer(cfg, model.parameters())
        self.scheduler = _make_scheduler(cfg, self.optimizer, len(self.train_loader))
        self.amp_dtype = amp_dtype(ctx.device) if cfg.run.amp else None
        # float16 has too few exponent bits for small gradients: scaled; bfloat16 has float32's range
        self.scaler = torch.amp.GradScaler(ctx.device.type) if self.amp_dtype == torch.float16 else None
        self.epoch = 0
        self.best_metric, self.best_epoch = math.inf, 0
        if ctx.is_main:
            log.debug("model %s: %d parameters on %s; %d training batches of %d per epoch (rank 0)",
                      cfg.model.name, sum(p.numel() for p in model.parameters()), ctx.device,
                      len(self.train_loader), self.batch)

    @property
    def model(self) -> torch.nn.Module:
        return self.operator.model

    # --- state -------------------------------------------------------------------------------
    def save(self, best: bool) -> None:
        """``best.pt`` (if ``best``) then ``last.pt``; rank 0 writes, every rank must call."""
        rngs = dist_.all_gather_objects(ckpt.rng_state(), self.ctx)  # collective
        if not self.ctx.is_main:
            return
        state = dict(train_config=config_to_dict(self.cfg), epoch=self.epoch,
                     best_metric=self.best_metric, best_epoch=self.best_epoch, data_identity=self.data_identity)
        norms, noise = self.operator.normalizer_states(), self.operator.noise
        if best:
            ckpt.save_run_checkpoint(self.run_dir / "best.pt", self.model, norms, noise, **state)
            log.debug("saved %s (epoch %d)", self.run_dir / "best.pt", self.epoch)
        ckpt.save_run_checkpoint(
            self.run_dir / "last.pt", self.model, norms, noise, **state,
            optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
            scaler=None if self.scaler is None else self.scaler.state_dict(), rng=rngs,
        )

    def restore(self) -> None:
        state = ckpt.load_run_checkpoint(self.run_dir / "last.pt", map_location=self.ctx.device)
        check_resumable(config_from_dict(state["train_config"], check_model=False), self.cfg, self.run_dir)
        recorded = state.get("data_identity")  # None: a run of petrov 0.1
        if self.data_identity is not None and recorded:
            self.check_data_unchanged("since the run started", recorded,
                                      "it cannot continue on other data: put the original file back, or start a "
                                      "new run (--overwrite, or another --out)")
            self.data_identity = recorded
        self.model.load_state_dict(state["state_dict"])
        self.optimizer.load_state_dict(state["optimizer"])
        self.scheduler.load_state_dict(state["scheduler"])
        if self.scaler is not None and state.get("scaler"):
            self.scaler.load_state_dict(state["scaler"])
        self.epoch, self.best_epoch = int(state["epoch"]), int(state["best_epoch"])
        self.best_metric = float(state["best_metric"])
        rngs = state["rng"]
        ckpt.set_rng_state(rngs[self.ctx.rank] if len(rngs) == self.ctx.world_size else rngs[0])
        if self.ctx.is_main:
            log.debug("resuming %s after epoch %d (best %.4e at epoch %d)", self.run_dir / "last.pt",
                      self.epoch, self.best_metric, self.best_epoch)

    def check_data_unchanged(self, when: str, recorded: dict | None = None, advice: str | None = None) -> None:
        """[`DataChanged`][] if the data file no longer holds the content the run recorded."""
        recorded = self.data_identity if recorded is None else recorded
        if recorded is None:
            return
        path = self.cfg.data.path
        why = identity_change(recorded, data_identity(path))
        if why:
            raise DataChanged(f"the data file {path} changed {when} ({why}); "
                              + (advice or "the run must be tested on the data it trained on"))

    # --- epochs ------------------------------------------------------------------------------
    def _autocast(self):
        if self.amp_dtype is None:
            return contextlib.nullcontext()
        return torch.autocast(device_type=self.ctx.device.type, dtype=self.amp_dtype)

    def _net(self, x_hat: torch.Tensor, pos: torch.Tensor, **inputs) -> torch.Tensor:
        """The (DDP-wrapped) model under autocast (``run.amp``): what a training step differentiates
        (``inputs``: e.g. a marching model's ``teacher``).  Only the model's forward is autocast: the
        normalizer's decode, the loss, the gradients of the float32 weights and the optimizer run in
        float32, and so do validation and test (they call the operator without autocast)."""
        with self._autocast():
            return self.ddp(x_hat, pos, **inputs)

    def _stop(self, what: str, value: float, batch: int) -> TrainingDiverged:
        where = f"epoch {self.epoch + 1}, batch {batch} of {len(self.train_loader)}"
        last = (f"{self.run_dir / 'last.pt'} (epoch {self.epoch})" if self.epoch
                else "none (no epoch completed)")
        return TrainingDiverged(
            f"non-finite {what} ({value}) at {where}; training stopped. Last good checkpoint: {last}. "
            f"Try a lower optim.lr, a longer warm-up (optim.min_warmup_steps) or optim.grad_clip."
        )

    def train_epoch(self) -> float:
        cfg, ctx = self.cfg, self.ctx
        self.model.train()
        self.train_sampler.set_epoch(self.epoch + 1)
        params = [p for p in self.model.parameters() if p.requires_grad]
        clip = cfg.optim.grad_clip if cfg.optim.grad_clip > 0 else math.inf
        total, count = 0.0, 0
        bar = progress_bar(batches(self.train_loader), total=len(self.train_loader),
                           desc=f"epoch {self.epoch + 1}/{cfg.optim.epochs}", leave=False,
                           enabled=ctx.is_main and cfg.run.progress)
        for batch, raw in enumerate(bar, start=1):
            raise_if_interrupted()  # a Ctrl-C that arrived where Python had to drop it
            b = to_batch(raw, self.data.train, ctx.device)
            pred = self.mode.predict(self.operator, b.x, b.y, noise=self.operator.noise,
                                     sample_ids=self.train_ids[b.positions], net=self._net, **b.inputs)
            per_sample = self.mode.loss(pred, b.y, cfg.loss.h1_weight, self.periodic, weights=b.weights)
            loss = per_sample.mean()
            # summed over ranks before backward, so every rank stops together on a bad batch
            stats = dist_.all_sum(torch.stack([per_sample.detach().sum(),
                                               torch.tensor(float(len(b.x)), device=ctx.device)]), ctx)
            batch_sum, batch_n = stats.tolist()
            if not math.isfinite(batch_sum):
                raise self._stop("loss", batch_sum, batch)
            self.optimizer.zero_grad(set_to_none=True)
            if self.scaler is not None:
                self.scaler.scale(loss).backward()
                self.scaler.unscale_(self.optimizer)
                torch.nn.utils.clip_grad_norm_(params, clip)
                self.scaler.step(self.optimizer)  # skips steps with inf gradients
                self.scaler.update()
            else:
                loss.backward()
                norm = float(torch.nn.utils.clip_grad_norm_(params, clip))
                if not math.isfinite(norm):
                    raise self._stop("gradient norm", norm, batch)
                self.optimizer.step()
            self.scheduler.step()
            total, count = total + batch_sum, count + int(batch_n)
            bar.set_postfix(loss=f"{total / count:.3e}")
        return total / max(count, 1)

    def validate(self) -> float:
        per_sample = evaluate_relative_l2(
            self.operator, self.data.val, batch_size=self.eval_batch, device=self.ctx.device, ctx=self.ctx,
            metric=self.mode.metric,
        )
        return per_sample.mean().item()

    @property
    def eval_batch(self) -> int:
        return self.cfg.run.eval_batch_size or self.batch

    def fit(self, run_log: RunLog) -> str:
        cfg, start = self.cfg, time.monotonic()
        budget = cfg.run.time_budget_minutes
        durations: list[float] = []
        while self.epoch < cfg.optim.epochs:
            t0 = time.monotonic()
            train_loss = self.train_epoch()
            val = self.validate()
            self.epoch += 1
            improved = val < self.best_metric
            if improved:
                self.best_metric, self.best_epoch = val, self.epoch
            seconds = time.monotonic() - t0
            durations.append(seconds)
            record = EpochRecord(self.epoch, train_loss, val, self.scheduler.get_last_lr()[0],
                                 seconds, improved)
            if self.ctx.is_main:
                run_log.append(record)  # before the checkpoint: a resume drops rows it does not cover
                log.info("epoch %d/%d: train loss %.4e  val relL2 %.4e  lr %.2e  %.1fs%s", self.epoch,
                         cfg.optim.epochs, train_loss, val, record.lr, seconds, "  (best)" if improved else "")
            self.save(best=improved)
            if any(cb(self, record) for cb in self.callbacks):
                return "callback"
            if budget is not None:
                elapsed = time.monotonic() - start
                if elapsed + max(durations) > 60.0 * budget and self.epoch < cfg.optim.epochs:
                    return "time budget"
        return "completed"

    @property
    def trajectory(self) -> bool:
        """Whether the data store trajectories (snapshots as channels): then the test rows are those of
        ``petrov evaluate``, the error at the final snapshot plus ``per_time_*`` lists."""
        return is_trajectory(getattr(self.data.train, "kind", None))

    def test(self) -> list[dict[str, Any]]:
        """Best model on the test split at every evaluation resolution (mesh level): one metrics row each,
        scored as ``petrov evaluate`` scores it (trajectories: a free rollout, the final snapshot's error)."""
        d = self.cfg.data
        splits = self.data.splits
        if splits is None or len(splits.test) == 0:
            return []
        self.check_data_unchanged(
            "while the run trained on it", advice=f"its test split there is not the held-out part of the data it "
            f"trained on, so the run is not tested. {self.run_dir / 'best.pt'} is kept: put the original file "
            f"back and run `petrov evaluate {self.run_dir}`")
        best = ckpt.load_run_checkpoint(self.run_dir / "best.pt", map_location=self.ctx.device) \
            if self.ctx.is_main else None
        state = dist_.broadcast_object(None if best is None else best["state_dict"], self.ctx)
        self.model.load_state_dict(state)
        rows = []
        for res in self._test_discretizations():
            test = open_split(d, splits.test, res, self.transform)
            self._check_targets(test, "test", 0.0)
            per_sample = evaluate_relative_l2(
                self.operator, test, batch_size=self.eval_batch, device=self.ctx.device, ctx=self.ctx,
                metric=per_time_relative_l2 if self.trajectory else self.mode.metric,
            )
            rows.append(per_time_row(res, per_sample) if self.trajectory else resolution_row(res, per_sample))
        return rows

    def _check_targets(self, dataset: Any, split: str, h1_weight: float) -> None:
        """Targets a relative error can be taken of (not all zero; not constant with an H¹ term), checked
        when they are in memory (grids; point sets and lazily read grids are read per batch)."""
        if hasattr(dataset, "y"):
            check_targets(dataset.y, sample_ids(dataset), f"{self.cfg.data.path} ({split} split)",
                          periodic=self.periodic, h1_weight=h1_weight, snapshots=self.mode.trajectory)

    def _test_discretizations(self) -> list:
        """The resolutions (grids) or mesh levels (point sets) the test split is scored at."""
        d, train = self.cfg.data, self.data.train
        if is_point_data(train):
            return list(d.eval_levels) or mesh_levels(train.attrs)
        return list(d.eval_resolutions) or [train.resolution]


def train(
    config: TrainConfig,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    data: TrainingData | None = None,
    callbacks: Iterable[Callable[[Trainer, EpochRecord], bool]] = (),
) -> TrainResult:
    """Train ``config`` into ``run_dir`` (``resume``: continue from ``run_dir/last.pt``).

    ``run_dir`` follows the output-folder rule ([`petrov.common.outputs`][]): a folder holding a user's
    files or another run is refused unless ``overwrite`` (which replaces the earlier run), and another
    command's outputs are never written over.  The run records its data file's content
    ([`data_identity`][]) and is tested, or resumed, only on that content.

    ``data`` overrides building the splits from ``config.data`` (tests, custom pipelines; then no
    test evaluation unless it carries ``splits``).  ``callbacks(trainer, record)`` run after each
    epoch's checkpoint; returning True stops the run cleanly.  Launched by torchrun, every process
    calls this; rank 0 writes the run directory.
    """
    run_dir = Path(run_dir)
    owns_group = not torch.distributed.is_initialized()
    ctx = dist_.setup(config.run.device)
    try:
        dist_.run_on_main(lambda: _check_run_dir(run_dir, resume, overwrite), ctx)
        # data, model and their fit are validated before the run directory is made
        trainer = Trainer(config, run_dir, ctx, data, callbacks)
        with contextlib.ExitStack() as lock:

            def claim() -> None:  # one writer per run directory
                ensure_dir(run_dir, "run directory")
                lock.enter_context(exclusive_lock(run_dir / "last.pt", what="trained"))
                _check_run_dir(run_dir, resume, overwrite)  # again: another run may have written it meanwhile
                claim_outputs(run_dir, "train", RUN_FILES, overwrite=overwrite, resume=resume, what="run directory")

            dist_.run_on_main(claim, ctx)
            if resume:
                trainer.restore()
            elif ctx.is_main:
                save_config_json(config, run_dir / "config.json")
            run_log = RunLog(run_dir, trainer.epoch, config.run.tensorboard) if ctx.is_main else None
            try:
                stopped = trainer.fit(run_log)
            finally:
                if run_log is not None:
                    run_log.close()
            test = trainer.test() if stopped != "callback" else []
            if ctx.is_main and test:
                metric = ("relative L2 per sample at the final snapshot t_T (rows), raw units; per snapshot "
                          "k = 0..T in per_time_*") if trainer.trajectory else "relative L2 per sample, raw units"
                write_metrics(test, run_dir, meta={"split": "test", "best_epoch": trainer.best_epoch,
                                                   "best_val_rel_l2": trainer.best_metric, "metric": metric})
        return TrainResult(run_dir, trainer.epoch, trainer.best_epoch, trainer.best_metric, stopped, test)
    finally:
        if owns_group:
            dist_.teardown(ctx)


def _check_run_dir(run_dir: Path, resume: bool, overwrite: bool = False) -> None:
    """What may be done with ``run_dir``: resume needs its ``last.pt``, a new run must not find one
    (unless ``overwrite``), and the output-folder rule must allow it."""
    if resume and overwrite:
        raise ValueError("choose one of resume (--resume: continue the run) and overwrite (--overwrite: replace it)")
    if resume:
        if not (run_dir / "last.pt").is_file():
            raise FileNotFoundError(
                f"cannot resume: {run_dir / 'last.pt'} does not exist (no completed epoch in "
                f"{str(run_dir)!r}); start the run without --resume"
            )
    # config.json without last.pt is a run killed before its first epoch ended: nothing to keep,
    # so it starts again from scratch
    elif (run_dir / "last.pt").exists():
        if not overwrite:
            raise FileExistsError(
                f"{str(run_dir)!r} already holds a run; pass --resume to continue it, --overwrite to replace it, "
                f"or choose another --out"
            )
        nested = sorted(p.name for p in run_dir.iterdir() if p.is_dir() and (p / MANIFEST).is_file())
        if nested:  # e.g. RUN/eval: the results of the run being replaced would stay beside the new one
            raise FileExistsError(f"{str(run_dir)!r} holds outputs of other commands for the run being replaced "
                                  f"({', '.join(nested)}); remove them first, or choose another --out")
    check_outputs(run_dir, "train", RUN_FILES, overwrite=overwrite, what="run directory")
