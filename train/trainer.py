"""The training loop: one function, [`train`][], from a validated config to a run directory.

Recipe (the reference Galerkin Transformer's): Adam/AdamW and OneCycleLR stepped per global batch
(``optimization``); gradient clipping by global norm; loss ``relL2 + γ·relH1`` in raw units
(predictions decoded by the y-normaliser, see ``petrov.train.data``; ``loss.mode`` picks how a batch
becomes predictions, loss and validation metric: ``petrov.train.rollout``); model selection on the
validation split (``best.pt``); the test split is only evaluated, after training, with the best model,
at each ``data.eval_resolutions`` (``testing``).

The road from the command to the model's forward: ``train`` -> ``Trainer.fit`` -> ``train_epoch`` ->
``Stepper.step`` (``step``) -> ``BatchLoss`` -> the training mode's ``predict`` (``rollout``) ->
``NormalizedOperator.predict`` (``operator``) -> the model.  Each is called, none calls back.  The
other parts, one module each: the batches on the device (``batches``), ``run.compile``
(``compilation``), ``run.amp`` and ``run.matmul_precision`` (``precision``), time and budgets
(``timing``, ``planning``), the checkpointed state (``run_state``), divergence (``divergence``), the
run log (``runlog``), out-of-memory errors (``memory``).

Run directory (rank 0 writes it):

    config.json      the resolved config          log.csv / log.jsonl   one row per epoch
    last.pt          resume point (each epoch)    best.pt               best validation model
    metrics.json/csv test relL2 per resolution    tensorboard/          if run.tensorboard
                     (petrov.train.metrics' rows)

Robustness: a non-finite loss or gradient norm stops the run at the end of its epoch (``divergence``);
``last.pt`` then still holds the last completed epoch.  Out of device memory: one line saying what to lower.
Every split of the data file is checked for NaN/inf before the first step (``datapass``).  SIGTERM or
Ctrl-C under the ``petrov`` command: ``last.pt`` with the place in the epoch, then exit 143 or 130
(``preemption``).  In a distributed run a process that fails takes the others down (``failures``).
One INFO line per epoch on this module's logger; the progress bar only on a terminal with ``run.progress``.

Determinism: the sampler order is a function of (seed, epoch), RNG states are checkpointed, so on CPU
(fixed thread count) a resumed run ends with exactly the weights of an uninterrupted one.
"""
from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import os
from pathlib import Path
from typing import Any, Callable, Iterable

import torch

from ..common.allocator import retain_freed_memory
from ..common.interrupts import deferred_interrupts, raise_interrupt
from ..common.locks import exclusive_lock
from ..common.outputs import claim_outputs
from ..common.path_checks import ensure_dir
from ..common.progress import progress_bar
from ..datasets.identity import DataChanged, check_data_unchanged
from ..datasets.loading import fields_per_state
from ..operators import build_model
from ..operators.blocks import count_parameters
from ..operators.models import node_inputs, sample_transform
from . import checkpoint as ckpt, distributed as dist_, failures, planning, run_state, timing
from .augmentation import augment_batch, symmetry_draws
from .batches import Batches, resident
from .compilation import compile_module, compiled_fault, evaluation_compile, resolve_compile, static_shapes
from .config import TrainConfig, save_config_json, validate_config
from .data import TrainingData, is_point_data, read_training_data, sample_ids
from .datapass import check_loaded, check_splits, splits_to_check
from .divergence import TrainingDiverged, divergence_of, diverged, parameters_state
from .losses import check_targets
from .memory import DeviceOutOfMemory, evaluation_advice, out_of_memory_advice, training_advice
from .metrics import evaluate_relative_l2
from .model_fit import check_model_fits_data
from .operator import NormalizedOperator
from .optimization import make_optimizer, make_scheduler, seed_all
from .planning import EpochEstimate, epochs_for_budget
from .precision import amp_dtype, matmul_precision, resolve_matmul_precision
from .preemption import Position, StopPoll, Stopped
from .rollout import check_mode_fits_model, for_window, training_mode
from .runlog import RUN_FILES, EpochRecord, RunLog, TrainResult, check_run_dir, resume_or_start, summary_writer
from .step import PROGRESS_EVERY, BatchLoss, EpochTotals, Stepper, batch_loss_of
from .testing import check_test_resolutions, run_test, test_discretizations, write_test_metrics

log = logging.getLogger(__name__)
__all__ = ["DataChanged", "DeviceOutOfMemory", "EpochRecord", "RUN_FILES", "RunLog", "TrainResult", "Trainer",
           "TrainingDiverged", "amp_dtype", "parameters_state", "train"]  # some defined in the modules above


def build_checked_model(cfg: TrainConfig, ctx: dist_.Context) -> torch.nn.Module:
    """The run's model, built once from ``cfg.model`` on the CPU (seeded by ``run.seed``; ``run.init_from``: that
    run's weights), with what the config alone decides checked before the data are generated or read
    (minutes, for a GPU preset's on a CPU), so that a wrong option is not reported after them:
    ``run.compile`` suits the device, the model builds (its mixer and mixer options), ``run.init_from`` holds
    this model, ``run.tensorboard`` has its package."""
    resolve_compile(cfg.run.compile, ctx.device, distributed=ctx.distributed)
    if cfg.run.tensorboard:
        summary_writer()
    seed_all(cfg.run.seed)
    model = build_model(cfg.model.name, **cfg.model.options)
    if cfg.run.init_from:
        ckpt.load_initial_weights(model, cfg.model, cfg.run.init_from)
    return model


class Trainer:
    """One training run.  Use [`train`][]; the class exists to keep the state in one place."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, ctx: dist_.Context,
                 data: TrainingData | None, callbacks: Iterable[Callable]):
        self.cfg, self.run_dir, self.ctx = cfg, Path(run_dir), ctx
        self.callbacks = list(callbacks)
        model = build_checked_model(cfg, ctx)
        from_file = data is None
        data, self.data_identity = read_training_data(cfg, ctx) if from_file else (data, None)
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        retain_freed_memory()  # the steps reuse the host memory they free (no page faults per step)
        self.periodic = bool(getattr(data.train, "periodic", False))
        self.given = cfg.data.history * fields_per_state(data.train)  # channels: F per state of F fields
        self.mode = for_window(training_mode(cfg.loss.mode), self.given, cfg.loss.trajectory_metric)
        self.compile_mode = resolve_compile(cfg.run.compile, ctx.device, is_point_data(data.train), ctx.distributed)
        model = model.to(ctx.device)
        self.transform = sample_transform(model)  # a point-set model's per-sample inputs (mesh_fno's grid)
        self.data = data = data.with_transform(self.transform)
        self._check_data(model, from_file)
        torch.manual_seed(cfg.run.seed + ctx.rank)  # per-rank stream for dropout etc.
        self.operator = NormalizedOperator(model, data.x_normalizer, data.y_normalizer, data.noise)
        self._build_batches(model)
        self._build_step(model)
        self.warmup = timing.WarmupTimer(ctx.device)
        self.stop = StopPoll(ctx)
        self.epoch, self.best_metric, self.best_epoch = 0, math.inf, 0
        self.plan_seconds: float | None = None  # a run planned in this process: the time its plan fills
        self.position: Position | None = None  # where in its epoch a resumed run continues
        self.totals = EpochTotals(ctx.device)
        self.saved_config: TrainConfig | None = None  # a resumed run: the config its last.pt recorded

    # --- set-up ------------------------------------------------------------------------------
    def _check_data(self, model: torch.nn.Module, from_file: bool) -> None:
        """The model takes the data, the mode the model, the test resolutions the model; the targets can be
        scored; and (a file's data) no NaN, inf or huge value in any split: errors now, not after training."""
        cfg, data, device = self.cfg, self.data, self.ctx.device
        check_model_fits_data(model, data.train, device, cfg.data.path)
        check_mode_fits_model(cfg.loss.mode, model)
        if data.splits is not None:
            check_test_resolutions(cfg.data, model, data.train, data.splits.test, self.transform, device)
        for split, dataset in (("training", data.train), ("validation", data.val)):
            self.check_targets(dataset, split, cfg.loss.h1_weight if split == "training" else 0.0)
        if from_file:
            check_loaded(cfg.data, {"training": data.train, "validation": data.val})
            norms = (data.x_normalizer, data.y_normalizer)
            check_splits(cfg.data, splits_to_check(cfg.data, data.splits, data.train, data.val, norms), self.ctx,
                         test_discretizations(cfg.data, data.train) if is_point_data(data.train) else None)

    def _build_batches(self, model: torch.nn.Module) -> None:
        """The training and validation batches on the device (resident where they fit), and the symmetry
        draws of ``data.augment``."""
        cfg, ctx, data = self.cfg, self.ctx, self.data
        self.eval_compile_mode = evaluation_compile(self.compile_mode, self.mode.trajectory)
        self.batch = dist_.local_batch_size(cfg.optim.batch_size, ctx)
        self.train_sampler = dist_.sampler(data.train, ctx, shuffle=True, seed=cfg.run.seed)
        self.train_batches = Batches(resident(data.train, ctx.device, data.noise) or data.train, self.batch,
                                     self.train_sampler, ctx.device, workers=cfg.run.num_workers,
                                     static=static_shapes(self.compile_mode), node_inputs=node_inputs(model))
        self.symmetries = None if cfg.data.augment == "none" else \
            symmetry_draws(data.train, cfg.data, self.transform, cfg.run.seed, ctx.device)
        self.val_split = resident(data.val, ctx.device, data.noise) or data.val
        self.val_batches = Batches(self.val_split, self.eval_batch, dist_.sampler(self.val_split, ctx, shuffle=False),
                                   ctx.device, static=static_shapes(self.eval_compile_mode),
                                   node_inputs=node_inputs(model))
        if ctx.is_main:
            log.debug("model %s: %d parameters on %s (compile: %s); %d training batches of %d per epoch (rank 0)%s",
                      cfg.model.name, count_parameters(model), ctx.device, self.compile_mode, len(self.train_batches),
                      self.batch, ", data on the device" if self.train_batches.resident else "")

    def _build_step(self, model: torch.nn.Module) -> None:
        """The batch loss (compiled as a whole in one process; under DDP around the compiled DDP-wrapped model,
        torch.compile's supported form for it), the compiled validation model, the optimizer and schedule,
        and the check of the compiled step against eager.  The compiled modules share the model's parameters;
        checkpoints save the plain model."""
        cfg, ctx = self.cfg, self.ctx
        ddp = dist_.wrap_model(model, ctx)
        self.eval_net = compile_module(model, self.eval_compile_mode)
        self.amp_dtype = amp_dtype(ctx.device) if cfg.run.amp else None
        self.batch_loss = BatchLoss(self.operator, compile_module(ddp, self.compile_mode) if ctx.distributed else ddp,
                                    self.mode, h1_weight=cfg.loss.h1_weight, periodic=self.periodic,
                                    amp_dtype=self.amp_dtype, noise=self.train_batches.noise_for(self.operator.noise))
        self.step_loss = self.batch_loss if ctx.distributed else compile_module(self.batch_loss, self.compile_mode)
        self.build_optimization()
        if self.compile_mode != "off" and not ctx.distributed:
            self._check_compiled()

    def _check_compiled(self) -> None:
        """The compiled batch loss against the eager one on the first training batch, its predictions and
        gradients ([`compiled_fault`][petrov.train.compilation.compiled_fault]): apart, ``run.compile = "auto"``
        trains eager (a warning says why) and an explicit setting is an error."""
        b = next(iter(self.train_batches.iterate()))
        self.operator.prepare(b.x, b.y)  # the compiled code reads the restricted normalisers, never builds them
        self.model.train()
        with self.out_of_memory("the check of the compiled model", self.batch, self.training_advice()):
            fault = compiled_fault(lambda loss: batch_loss_of(loss, b)[1], self.batch_loss, self.step_loss,
                                   self.model, self.compile_mode, self.amp_dtype,
                                   f"{self.cfg.model.name} than the eager model on {self.ctx.device}")
        if fault is None:
            return
        if self.cfg.run.compile != "auto":
            raise ValueError(f"{fault}; train with run.compile = 'off' (or 'auto', which falls back to eager)")
        log.warning("%s; training eager (run.compile = 'off') instead", fault)
        self.compile_mode = self.eval_compile_mode = "off"
        self.step_loss, self.eval_net = self.batch_loss, self.model
        self.build_optimization()

    def build_optimization(self, epochs: float | None = None) -> None:
        """A fresh optimizer, OneCycle schedule (for ``optim.epochs``, first set to ``epochs`` if given),
        gradient scaler and step."""
        if epochs is not None:
            self.cfg = dataclasses.replace(self.cfg, optim=dataclasses.replace(self.cfg.optim, epochs=epochs))
        self.optimizer = make_optimizer(self.cfg, self.model.parameters())
        self.scheduler = make_scheduler(self.cfg, self.optimizer, len(self.train_batches))
        self.scheduled_steps = self.scheduler.total_steps  # refitted under a time budget (planning.fit_schedule_to)
        # float16 has too few exponent bits for small gradients: scaled; bfloat16 has float32's range
        self.scaler = torch.amp.GradScaler(self.ctx.device.type) if self.amp_dtype == torch.float16 else None
        self.stepper = Stepper(operator=self.operator, loss=self.step_loss, optimizer=self.optimizer,
                               scheduler=self.scheduler, scaler=self.scaler, grad_clip=self.cfg.optim.grad_clip,
                               compile_mode=self.compile_mode)

    # --- what the run is at ------------------------------------------------------------------
    @property
    def model(self) -> torch.nn.Module:
        return self.operator.model

    @property
    def epochs(self) -> int:
        """The epochs the schedule runs (the last may be shorter: ``epoch_steps``)."""
        return math.ceil(self.scheduled_steps / len(self.train_batches))

    def epoch_steps(self) -> int:
        """The training steps of the epoch after ``self.epoch``: all the batches, or what is left of the
        schedule in its last epoch."""
        return min(len(self.train_batches), self.scheduled_steps - self.epoch * len(self.train_batches))

    def epochs_done(self) -> float:
        """The epochs trained, a shorter last one as its fraction of the batches."""
        return min(self.epoch * len(self.train_batches), self.scheduled_steps) / len(self.train_batches)

    @property
    def eval_batch(self) -> int:
        return self.cfg.run.eval_batch_size or self.batch

    # --- state -------------------------------------------------------------------------------
    def save(self, best: bool, position: Position | None = None) -> None:
        """``best.pt`` (if ``best``) then ``last.pt`` (``position``: within the epoch after ``self.epoch``);
        rank 0 writes, every rank must call."""
        rngs = dist_.all_gather_objects(ckpt.rng_state(), self.ctx)  # collective
        if self.ctx.is_main:
            run_state.write_checkpoints(self, self.run_dir, best, rngs, position)

    def check_data_unchanged(self, when: str, advice: str = "the run must be tested on the data it trained on") -> None:
        """[`DataChanged`][] if the data file no longer holds the content the run recorded."""
        check_data_unchanged(self.cfg.data.path, self.data_identity, when, advice)

    def check_targets(self, dataset: Any, split: str, h1_weight: float) -> None:
        """Targets a relative error can be taken of (not all zero; not constant with an H¹ term), checked
        when they are in memory (grids; point sets and lazily read grids are read per batch)."""
        if hasattr(dataset, "y"):
            check_targets(dataset.y, sample_ids(dataset), f"{self.cfg.data.path} ({split} split)",
                          periodic=self.periodic, h1_weight=h1_weight, snapshots=self.mode.trajectory,
                          history=self.given)

    # --- epochs ------------------------------------------------------------------------------
    def out_of_memory(self, what: str, batch: int, advice: list[str]):
        return out_of_memory_advice(what, batch, self.ctx.device, advice)

    def training_advice(self) -> list[str]:
        return training_advice(self.cfg, self.model, self.batch)

    def _divergence(self, batch: int | None, totals: EpochTotals | None) -> TrainingDiverged | None:
        return divergence_of(self.model, totals, batch, self.epoch, len(self.train_batches), self.run_dir)

    def train_epoch(self) -> float:
        """One epoch of steps (a resumed run: from its position on); its mean loss, read once at its end (a
        divergence raises then).  ``Stopped`` after a step where the run is to stop (``preemption``)."""
        cfg, ctx = self.cfg, self.ctx
        self.model.train()
        self.train_sampler.set_epoch(self.epoch + 1)
        position, self.position = self.position or Position(0, []), None  # a resumed run: where it stopped
        self.totals = totals = position.totals_for(ctx, ctx.device)
        done, steps = position.steps, self.epoch_steps()
        batches = itertools.islice(self.train_batches.iterate(done), max(0, steps - done))
        if self.symmetries is not None:
            batches = (augment_batch(b, self.symmetries.of(b, self.epoch), cfg.data.augment) for b in batches)
        bar = progress_bar(batches, total=steps, initial=done,
                           desc=f"epoch {self.epoch + 1}/{self.epochs}", leave=False,
                           enabled=ctx.is_main and cfg.run.progress)
        with self.out_of_memory("training", self.batch, self.training_advice()):
            for number, b in enumerate(bar, start=done + 1):
                with self.warmup.step():
                    try:
                        self.stepper.step(b, number, totals)
                    except ValueError as err:  # a model's value check: data are checked, so a divergence?
                        raise self._divergence(number, totals) or err
                if not bar.disable and number % PROGRESS_EVERY == 0:  # a host read: only for a drawn bar
                    bar.set_postfix(loss=f"{totals.running_mean():.3e}")
                if self.stop(number):
                    raise Stopped(number)
            loss, bad = totals.finish(ctx)
        if bad is not None:
            raise diverged(bad, self.epoch, len(self.train_batches), self.run_dir)
        return loss

    def validate(self) -> float:
        key = "run.eval_batch_size" if self.cfg.run.eval_batch_size else "run.eval_batch_size (default: the batch)"

        def poll(number: int) -> None:  # a stop during validation: every step of the epoch is done
            if self.stop(number):
                raise Stopped(self.epoch_steps())

        with self.out_of_memory("validation", self.eval_batch, evaluation_advice(key, self.eval_batch)):
            try:
                per_sample = evaluate_relative_l2(
                    self.operator, self.val_split, batch_size=self.eval_batch, device=self.ctx.device, ctx=self.ctx,
                    metric=self.mode.metric, net=self.eval_net, compile_mode=self.eval_compile_mode, after_batch=poll,
                )
            except ValueError as err:
                raise self._divergence(None, None) or err
        return per_sample.mean().item()

    def fit(self, run_log: RunLog | None) -> str:
        """The epochs; a Ctrl-C or SIGTERM stops them where the state is whole: ``last.pt`` says where,
        and every rank raises the interrupt (``preemption``)."""
        with deferred_interrupts():
            stopped = self._epochs(run_log)
            if stopped == "interrupted" or self.stop.now():
                raise_interrupt()
        return stopped

    def _epochs(self, run_log: RunLog | None) -> str:
        cfg, ctx = self.cfg, self.ctx
        self.budget = budget = timing.Budget(cfg.run.time_budget_minutes, ctx.device)
        budget.start()
        while self.epoch < self.epochs:
            t0 = timing.clock(ctx.device)
            try:
                train_loss = self.train_epoch()
                t1 = timing.clock(ctx.device)
                val = self.validate()
            except Stopped as stop:
                run_state.save_position(self, stop.args[0])
                return "interrupted"
            seconds = timing.clock(ctx.device) - t0
            warm, warm_steps = self.warmup.take()
            budget.record(timing.EpochTime(t1 - t0, seconds - (t1 - t0), self.epoch_steps(), warm, warm_steps))
            self.epoch += 1
            planning.fit_schedule_to(self, budget)  # before the checkpoint: a resume continues the refitted schedule
            improved = val < self.best_metric
            if improved:
                self.best_metric, self.best_epoch = val, self.epoch
            record = EpochRecord(self.epoch, train_loss, val, self.scheduler.get_last_lr()[0], seconds, improved)
            if run_log is not None:
                run_log.append(record)  # before the checkpoint: a resume drops rows it does not cover
                log.info("epoch %d/%d: train loss %.4e  val relL2 %.4e  lr %.2e  %.1fs%s", self.epoch,
                         self.epochs, train_loss, val, record.lr, seconds, "  (best)" if improved else "")
            self.save(best=improved)
            if any(cb(self, record) for cb in self.callbacks):
                return "callback"
            if self.stop.now():  # a signal during the epoch's end: its checkpoint is written
                return "interrupted"
            # rank 0's clock decides for every rank: ranks that disagreed would wait for each other forever
            if self.epoch < self.epochs and dist_.broadcast_object(
                    budget.exhausted(self.epoch_steps()) if ctx.is_main else None, ctx):
                return "time budget"
        return "completed"


def train(
    config: TrainConfig,
    run_dir: str | os.PathLike,
    *,
    resume: bool = False,
    overwrite: bool = False,
    data: TrainingData | None = None,
    callbacks: Iterable[Callable[[Trainer, EpochRecord], bool]] = (),
    plan_epochs: Callable[[EpochEstimate], int] | None = None,
) -> TrainResult:
    """Train ``config`` into ``run_dir`` (``resume``: continue from ``run_dir/last.pt``; none: start, saying so).

    ``run_dir`` follows the output-folder rule ([`petrov.common.outputs`][]): a folder holding a user's
    files or another run is refused unless ``overwrite`` (which replaces it); another command's outputs are
    never written over.  The run records its data file's content
    ([`data_identity`][petrov.datasets.identity.data_identity]) and is tested, or resumed, only on that content.  ``data`` replaces the splits of
    ``config.data`` (tests, custom pipelines; no test unless it carries ``splits``).  ``callbacks(trainer,
    record)`` run after each epoch's checkpoint; True stops the run cleanly.  ``plan_epochs(estimate)`` (a new
    run) sets ``optim.epochs`` from a timing probe (``petrov.train.planning``; ``run.fill_budget`` fills a
    time budget so).  Under torchrun every process calls this; rank 0 writes the run directory.  Under
    ``stop_on_signals`` (the ``petrov`` command's) Ctrl-C or SIGTERM saves where it stopped."""
    config = validate_config(config)  # a config built from the dataclasses in Python is checked like a file
    run_dir = Path(run_dir)
    owns_group = not torch.distributed.is_initialized()
    ctx = dist_.setup(config.run.device, config.run.collective_timeout_minutes)
    try:
        with matmul_precision(resolve_matmul_precision(config.run.matmul_precision)):
            return _train(config, run_dir, ctx, resume, overwrite, data, callbacks, plan_epochs)
    except BaseException as err:
        if not ctx.distributed:
            raise
        kind = failures.collective_failure(err)
        if kind is None:  # this rank's own failure: the others read it from the store
            failures.report(err, ctx)
            raise
        raise failures.explain(kind, ctx, run_dir, config.run.collective_timeout_minutes) from None
    finally:
        if owns_group:
            dist_.teardown(ctx)


def _train(config: TrainConfig, run_dir: Path, ctx: dist_.Context, resume: bool, overwrite: bool,
           data: TrainingData | None, callbacks: Iterable[Callable], plan_epochs: Callable | None) -> TrainResult:
    resume = dist_.broadcast_object(resume_or_start(run_dir, resume, overwrite) if ctx.is_main else None, ctx)
    dist_.run_on_main(lambda: check_run_dir(run_dir, resume, overwrite), ctx)
    # data, model and their fit are validated before the run directory is made
    trainer = Trainer(config, run_dir, ctx, data, callbacks)
    with contextlib.ExitStack() as lock:

        def claim() -> None:  # one writer per run directory
            ensure_dir(run_dir, "run directory")
            lock.enter_context(exclusive_lock(run_dir / "last.pt", what="trained"))
            check_run_dir(run_dir, resume, overwrite)  # again: another run may have written it meanwhile
            claim_outputs(run_dir, "train", RUN_FILES, overwrite=overwrite, resume=resume, what="run directory")

        dist_.run_on_main(claim, ctx)
        if resume:
            run_state.restore(trainer)
            if ctx.is_main:
                run_state.record_evaluation_keys(trainer.cfg, run_dir / "config.json", trainer.saved_config)
        else:
            if plan_epochs is None and config.run.fill_budget:
                minutes, cap = config.run.time_budget_minutes, config.optim.epochs
                plan_epochs = lambda estimate: epochs_for_budget(estimate, minutes, cap=cap)
            if plan_epochs is not None:
                planning.plan(trainer, plan_epochs)
            if ctx.is_main:
                save_config_json(trainer.cfg, run_dir / "config.json")
        run_log = RunLog(run_dir, trainer.epoch, config.run.tensorboard) if ctx.is_main else None
        try:
            stopped = trainer.fit(run_log)
        finally:
            if run_log is not None:
                run_log.close()
        seconds = trainer.budget.elapsed()
        test = run_test(trainer) if stopped != "callback" else []  # the best model on the test split
        write_test_metrics(trainer, test)
    return TrainResult(run_dir, trainer.epochs_done(), trainer.best_epoch, trainer.best_metric, stopped, test,
                       seconds, trainer.scheduled_steps / len(trainer.train_batches))
