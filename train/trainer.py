"""The training loop: one function, [`train`][], from a validated config to a run directory.

Recipe (the reference Galerkin Transformer's): Adam/AdamW and OneCycleLR stepped per global batch
(``optimization``); gradient clipping by global norm; loss ``relL2 + γ·relH1`` in raw units
(predictions decoded by the y-normaliser, see ``petrov.train.data``; ``loss.mode`` picks how a batch
becomes predictions, loss and validation metric: ``petrov.train.rollout``); model selection on the
validation split (``best.pt``); the test split is only evaluated, after training, with the best model,
at each ``data.eval_resolutions``.  The parts, one module each: the step (``step``), the batches on
the device (``batches``), ``run.compile`` (``compilation``), ``run.amp`` and
``run.matmul_precision`` (``precision``), time and budgets (``timing``, ``planning``), the
run log (``runlog``), out-of-memory errors (``memory``).

Run directory (rank 0 writes it):

    config.json      the resolved config          log.csv / log.jsonl   one row per epoch
    last.pt          resume point (each epoch)    best.pt               best validation model
    metrics.json/csv test relL2 per resolution    tensorboard/          if run.tensorboard
                     (petrov.train.metrics' rows)

Robustness: a non-finite loss or gradient norm stops the run at the end of its epoch with a
``TrainingDiverged`` naming the epoch and the first bad batch; ``last.pt`` then still holds the last
completed (finite) epoch.  Out of device memory: one line saying what to lower (``DeviceOutOfMemory``).
Every split of the data file is checked for NaN/inf before the first step (``datapass``).  SIGTERM or
Ctrl-C under the ``petrov`` command: ``last.pt`` with the place in the epoch, then exit 143 or 130
(``preemption``).  In a distributed run a process that fails takes the others down, each with one line
(``failures``).

Output: one INFO line per epoch on the ``petrov.train.trainer`` logger (shown by the ``petrov``
command, silent in the API unless logging is configured); the batch progress bar only on a terminal
and with ``run.progress``.

Determinism: the sampler order is a function of (seed, epoch), RNG states are checkpointed, so on CPU
(fixed thread count) a resumed run ends with exactly the weights of an uninterrupted one, whether it was
stopped between epochs or within one.
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
from ..common.files import ensure_dir, exclusive_lock
from ..common.interrupts import deferred_interrupts, raise_interrupt
from ..common.outputs import claim_outputs
from ..common.progress import progress_bar
from ..datasets.identity import data_identity, identity_change
from ..datasets.sampling import pool_kernel
from ..operators import build_model
from ..operators.models import node_inputs, sample_transform
from . import checkpoint as ckpt
from . import distributed as dist_
from . import failures, timing
from .augmentation import SymmetryDraws, augment_batch, check_augmentable, group_order
from .batches import Batches, resident
from .compilation import (
    AGREEMENT_TOLERANCE, compile_module, compiled_agreement, drops, evaluation_compile, resolve_compile, static_shapes,
    without_dropout,
)
from .config import (
    TrainConfig, check_resumable, config_from_dict, config_to_dict, load_config_json, save_config_json,
    validate_config, with_evaluation_keys,
)
from .data import (
    TrainingData,
    build_training_data,
    check_model_fits_data,
    check_model_layout,
    ensure_data_file,
    is_point_data,
    sample_ids,
)
from .datapass import check_loaded, check_splits, splits_to_check
from .losses import check_targets
from .memory import DeviceOutOfMemory, evaluation_advice, out_of_memory_advice, training_advice
from .metrics import evaluate_relative_l2
from .operator import NormalizedOperator
from .optimization import make_optimizer, make_scheduler, seed_all
from .planning import EpochEstimate, epochs_for_budget, probe, probe_steps
from .precision import amp_dtype, matmul_precision, resolve_matmul_precision
from .preemption import Position, StopPoll, Stopped
from .rollout import check_mode_fits_model, training_mode
from .runlog import RUN_FILES, EpochRecord, RunLog, TrainResult, check_run_dir, resume_or_start, summary_writer
from .step import PROGRESS_EVERY, BatchLoss, Diverged, EpochTotals, Stepper, batch_loss_of, summarize
from .testing import check_test_resolutions, run_test, test_discretizations, write_test_metrics

log = logging.getLogger(__name__)
# a run planned to a time has its schedule refitted to that time when the steps that fit at the measured pace
# differ from those left by more than this share of its steps (less: timing noise, left alone)
REFIT_TOLERANCE = 0.03
# parameters beyond this magnitude are a divergence (their products overflow float32)
PARAMETER_LIMIT = 1e18
__all__ = ["DataChanged", "DeviceOutOfMemory", "EpochRecord", "RUN_FILES", "RunLog", "TrainResult", "Trainer",
           "TrainingDiverged", "amp_dtype", "train"]  # some defined in the modules above, importable here


class DataChanged(ValueError):
    """The run's data file is not the one it started on (regenerated, replaced, edited)."""


class TrainingDiverged(RuntimeError):
    """A non-finite loss or gradient: the message names the epoch and batch."""


def check_before_data(cfg: TrainConfig, device: torch.device, distributed: bool = False) -> None:
    """What the config alone decides, checked before its data are generated or read (minutes, for a GPU
    preset's on a CPU), so that a wrong option is not reported after them: ``run.compile`` suits the device,
    the model builds (its mixer and mixer options), ``run.init_from`` holds this model, and
    ``run.tensorboard`` has its package."""
    resolve_compile(cfg.run.compile, device, distributed=distributed)
    if cfg.run.tensorboard:
        summary_writer()
    model = build_model(cfg.model.name, **cfg.model.options)
    if cfg.run.init_from:
        ckpt.read_initial_weights(model, cfg.model, cfg.run.init_from)


class Trainer:
    """One training run.  Use [`train`][]; the class exists to keep the state in one place."""

    def __init__(self, cfg: TrainConfig, run_dir: Path, ctx: dist_.Context,
                 data: TrainingData | None, callbacks: Iterable[Callable]):
        self.cfg, self.run_dir, self.ctx = cfg, Path(run_dir), ctx
        self.callbacks = list(callbacks)
        self.data_identity = None  # the content the run trains on: its test must be on the same file
        from_file = data is None
        if from_file:
            check_before_data(cfg, ctx.device, ctx.distributed)
            dist_.run_on_main(lambda: ensure_data_file(cfg.data, progress=cfg.run.progress), ctx, patient=True)
            check_model_layout(cfg.model.name, cfg.model.options, cfg.data)  # before the levels, sizes, values
            self.data_identity = data_identity(cfg.data.path)
            data = build_training_data(cfg.data, ctx)
            self.check_data_unchanged("while it was being read")
        if cfg.run.threads:
            torch.set_num_threads(cfg.run.threads)
        retain_freed_memory()  # the steps reuse the host memory they free (no page faults per step)
        self.periodic = bool(getattr(data.train, "periodic", False))
        self.mode = training_mode(cfg.loss.mode)
        point_data = is_point_data(data.train)
        self.compile_mode = resolve_compile(cfg.run.compile, ctx.device, point_data, ctx.distributed)
        seed_all(cfg.run.seed)
        model = build_model(cfg.model.name, **cfg.model.options).to(ctx.device)
        if cfg.run.init_from:
            ckpt.load_initial_weights(model, cfg.model, cfg.run.init_from, ctx.device)
        self.transform = sample_transform(model)  # a point-set model's per-sample inputs (mesh_fno's grid)
        self.data = data = data.with_transform(self.transform)
        check_model_fits_data(model, data.train, ctx.device, cfg.data.path)
        check_mode_fits_model(cfg.loss.mode, model)
        if data.splits is not None:  # the test's resolutions: an error now, not after the training
            check_test_resolutions(cfg.data, model, data.train, data.splits.test, self.transform, ctx.device)
        for split, dataset in (("training", data.train), ("validation", data.val)):
            self.check_targets(dataset, split, cfg.loss.h1_weight if split == "training" else 0.0)
        if from_file:  # NaN/inf or huge values in any split: an error now, not after the training
            check_loaded(cfg.data, {"training": data.train, "validation": data.val})
            norms = (data.x_normalizer, data.y_normalizer)
            check_splits(cfg.data, splits_to_check(cfg.data, data.splits, data.train, data.val, norms), ctx,
                         test_discretizations(cfg.data, data.train) if point_data else None)
        torch.manual_seed(cfg.run.seed + ctx.rank)  # per-rank stream for dropout etc.
        self.operator = NormalizedOperator(model, data.x_normalizer, data.y_normalizer, data.noise)
        self.ddp = dist_.wrap_model(model, ctx)
        # the compiled modules wrap the model and share its parameters; checkpoints save the plain model.  One
        # process compiles the step's whole batch loss (normalisation, noise, model, loss: one graph); under
        # DDP the DDP-wrapped model is compiled, torch.compile's supported form for it
        self.train_net = compile_module(self.ddp, self.compile_mode) if ctx.distributed else self.ddp
        self.eval_compile_mode = evaluation_compile(self.compile_mode, self.mode.trajectory)
        self.eval_net = compile_module(model, self.eval_compile_mode)
        self.batch = dist_.local_batch_size(cfg.optim.batch_size, ctx)
        self.train_sampler = dist_.sampler(data.train, ctx, shuffle=True, seed=cfg.run.seed)
        self.train_batches = Batches(resident(data.train, ctx.device, data.noise) or data.train, self.batch,
                                     self.train_sampler, ctx.device, workers=cfg.run.num_workers,
                                     static=static_shapes(self.compile_mode), node_inputs=node_inputs(model))
        self.symmetries = self._symmetry_draws(data.train) if cfg.data.augment != "none" else None
        self.val_split = resident(data.val, ctx.device, data.noise) or data.val
        self.val_batches = Batches(self.val_split, self.eval_batch, dist_.sampler(self.val_split, ctx, shuffle=False),
                                   ctx.device, static=static_shapes(self.eval_compile_mode),
                                   node_inputs=node_inputs(model))
        self.amp_dtype = amp_dtype(ctx.device) if cfg.run.amp else None
        self.batch_loss = BatchLoss(self.operator, self.train_net, self.mode, h1_weight=cfg.loss.h1_weight,
                                    periodic=self.periodic, amp_dtype=self.amp_dtype, device=ctx.device,
                                    noise=self.train_batches.noise_for(self.operator.noise))
        self.step_loss = self.batch_loss if ctx.distributed else compile_module(self.batch_loss, self.compile_mode)
        self._build_optimization()
        if self.compile_mode != "off" and not ctx.distributed:
            self._check_compiled()
        self.warmup = timing.WarmupTimer(ctx.device)
        self.stop = StopPoll(ctx)
        self.epoch = 0
        self.plan_seconds: float | None = None  # a run planned in this process: the time its plan fills
        self.position: Position | None = None  # where in its epoch a resumed run continues
        self.totals = EpochTotals(ctx.device)
        self.best_metric, self.best_epoch = math.inf, 0
        self.saved_config: TrainConfig | None = None  # a resumed run: the config its last.pt recorded
        if ctx.is_main:
            log.debug("model %s: %d parameters on %s (compile: %s); %d training batches of %d per epoch (rank 0)%s",
                      cfg.model.name, sum(p.numel() for p in model.parameters()), ctx.device, self.compile_mode,
                      len(self.train_batches), self.batch, ", data on the device" if self.train_batches.resident else "")

    def _symmetry_draws(self, train: Any) -> SymmetryDraws:
        """``data.augment`` ("square", "diagonal", "periodic", "periodic-odd"): checked on the first training
        sample, then the draws (``petrov.train.augmentation``)."""
        item, group = train[0], self.cfg.data.augment
        added = set(self.transform(item)) if self.transform is not None and isinstance(item, dict) else set()
        coarse = getattr(train, "coarse_resolution", None)
        pooling = pool_kernel(train.resolution, coarse) if coarse else 1
        check_augmentable(item, added, self.cfg.data.path, group, periodic=bool(getattr(train, "periodic", False)),
                          pooling=pooling)
        n_ids = max(len(train), int(sample_ids(train).max()) + 1)
        return SymmetryDraws(self.cfg.run.seed, n_ids, self.ctx.device, group_order(group, item))

    def _check_compiled(self) -> None:
        """The compiled batch loss against the eager one on the first training batch, its predictions and
        gradients ([`compiled_agreement`][petrov.train.compilation.compiled_agreement]): beyond
        ``AGREEMENT_TOLERANCE``, ``run.compile = "auto"`` trains eager (a warning says why) and an explicit
        setting is an error."""
        b = next(iter(self.train_batches.iterate()))
        self.operator.prepare(b.x, b.y)  # the compiled code reads the restricted normalisers, never builds them
        self.model.train()
        eager, compiled = self.batch_loss, self.step_loss
        if drops(self.model):  # compiled dropout draws other masks: compare a copy without it (without_dropout)
            eager = without_dropout(self.batch_loss)
            compiled = compile_module(eager, self.compile_mode)
        with self.out_of_memory("the check of the compiled model", self.batch, self._training_advice()):
            outputs, grads = compiled_agreement(lambda loss: batch_loss_of(loss, b)[1], eager, compiled,
                                                self.compile_mode)
        tol_out, tol_grad = AGREEMENT_TOLERANCE[self.amp_dtype]
        if outputs <= tol_out and grads <= tol_grad:
            log.info("compiled model (run.compile = %r) checked against eager on the first batch: outputs %.2e, "
                     "gradients %.2e apart (relative L2)", self.compile_mode, outputs, grads)
            return
        what = (f"torch.compile (run.compile = {self.compile_mode!r}) computes another {self.cfg.model.name} than the "
                f"eager model on {self.ctx.device}: on the first training batch its outputs differ by {outputs:.2e} and "
                f"its gradients by {grads:.2e} (relative L2; rounding gives < {tol_out:g} and {tol_grad:g}) -- a "
                f"compiler fault on this device and torch {torch.__version__}")
        if self.cfg.run.compile != "auto":
            raise ValueError(f"{what}; train with run.compile = 'off' (or 'auto', which falls back to eager)")
        log.warning("%s; training eager (run.compile = 'off') instead", what)
        self.compile_mode = self.eval_compile_mode = "off"
        self.step_loss, self.eval_net = self.batch_loss, self.model
        self._build_optimization()

    def _build_optimization(self, epochs: float | None = None) -> None:
        """A fresh optimizer, OneCycle schedule (for ``optim.epochs``, first set to ``epochs`` if given),
        gradient scaler and step."""
        if epochs is not None:
            self.cfg = dataclasses.replace(self.cfg, optim=dataclasses.replace(self.cfg.optim, epochs=epochs))
        self.optimizer = make_optimizer(self.cfg, self.model.parameters())
        self.scheduler = make_scheduler(self.cfg, self.optimizer, len(self.train_batches))
        self.scheduled_steps = self.scheduler.total_steps  # refitted under a time budget (fit_schedule_to)
        # float16 has too few exponent bits for small gradients: scaled; bfloat16 has float32's range
        self.scaler = torch.amp.GradScaler(self.ctx.device.type) if self.amp_dtype == torch.float16 else None
        self.stepper = Stepper(operator=self.operator, loss=self.step_loss, optimizer=self.optimizer,
                               scheduler=self.scheduler, scaler=self.scaler, grad_clip=self.cfg.optim.grad_clip,
                               compile_mode=self.compile_mode)

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
        per_epoch = len(self.train_batches)
        return min(self.epoch * per_epoch, self.scheduled_steps) / per_epoch

    @property
    def eval_batch(self) -> int:
        return self.cfg.run.eval_batch_size or self.batch

    def plan(self, plan_epochs: Callable[[EpochEstimate], float]) -> EpochEstimate:
        """``optim.epochs = plan_epochs(probe)`` (rank 0's answer on every rank), then a fresh optimizer
        and schedule for them (``petrov.train.planning``)."""
        if self.cfg.optim.epochs * len(self.train_batches) < probe_steps():  # OneCycle refuses a step past its end
            self._build_optimization(math.ceil(probe_steps() / len(self.train_batches)))
        with self.out_of_memory("the timing probe", self.batch, self._training_advice()):
            estimate = probe(self)
        epochs = dist_.broadcast_object(plan_epochs(estimate) if self.ctx.is_main else None, self.ctx)
        if not epochs * len(self.train_batches) >= 1:
            raise ValueError(f"plan_epochs returned {epochs}; a run needs at least one step "
                             f"(1/{len(self.train_batches)} of an epoch)")
        self._build_optimization(epochs)
        self.plan_seconds = self.scheduled_steps * estimate.step_seconds + self.epochs * estimate.overhead_seconds
        if self.ctx.is_main:
            log.info("planned %s epochs of ~%.1fs (a step %.3gs, warm-up %.1fs)", f"{epochs:.4g}",
                     estimate.epoch_seconds, estimate.step_seconds, estimate.warmup_seconds)
        return estimate

    # --- state -------------------------------------------------------------------------------
    def save(self, best: bool, position: Position | None = None) -> None:
        """``best.pt`` (if ``best``) then ``last.pt`` (``position``: within the epoch after ``self.epoch``);
        rank 0 writes, every rank must call."""
        rngs = dist_.all_gather_objects(ckpt.rng_state(), self.ctx)  # collective
        if self.ctx.is_main:
            self.write_checkpoints(self.run_dir, best, rngs, position)

    def save_position(self, steps: int) -> None:
        """``last.pt`` with ``steps`` of the current epoch done (``preemption``); an epoch that diverged
        before is reported instead (``last.pt`` keeps the last good epoch)."""
        rows = self.totals.gather(self.ctx)
        bad = summarize(rows)[1]
        if bad is not None:
            raise self._stop(bad)
        self.save(best=False, position=Position(steps, rows))
        if self.ctx.is_main:
            log.info("stopped at batch %d of %d in epoch %d; saved %s", steps, len(self.train_batches),
                     self.epoch + 1, self.run_dir / "last.pt")

    def write_checkpoints(self, folder: Path, best: bool, rngs: list, position: Position | None = None) -> None:
        """``folder/best.pt`` (if ``best``) and ``folder/last.pt`` of the current state (``rngs``: every rank's
        RNG states; ``position``: where in the next epoch, None at its start)."""
        state = dict(train_config=config_to_dict(self.cfg), epoch=self.epoch, scheduled_steps=self.scheduled_steps,
                     best_metric=self.best_metric, best_epoch=self.best_epoch, data_identity=self.data_identity)
        norms, noise = self.operator.normalizer_states(), self.operator.noise
        if best:
            ckpt.save_run_checkpoint(folder / "best.pt", self.model, norms, noise, **state)
            log.debug("saved %s (epoch %d)", folder / "best.pt", self.epoch)
        ckpt.save_run_checkpoint(
            folder / "last.pt", self.model, norms, noise, **state,
            optimizer=self.optimizer.state_dict(), scheduler=self.scheduler.state_dict(),
            scaler=None if self.scaler is None else self.scaler.state_dict(), rng=rngs,
            position=None if position is None else position.to_state(),
        )

    def restore(self) -> None:
        """The state of ``last.pt``, read by rank 0 and sent to every rank."""
        state = dist_.run_on_main(lambda: ckpt.load_run_checkpoint(self.run_dir / "last.pt"), self.ctx)
        state = dist_.broadcast_object(state, self.ctx)
        self.saved_config = config_from_dict(state["train_config"], check_model=False)  # config.json's content
        check_resumable(self.saved_config, self.cfg, self.run_dir)
        dist_.run_on_main(lambda: ckpt.check_best_checkpoint(self.run_dir, state), self.ctx)
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
        self.scheduled_steps = self.scheduler.steps  # as an earlier budget refitted it (the schedule's own state)
        self.best_metric = float(state["best_metric"])
        rngs = state["rng"]
        ckpt.set_rng_state(rngs[self.ctx.rank] if len(rngs) == self.ctx.world_size else rngs[0])
        self.position = Position.from_state(state.get("position"))
        if self.ctx.is_main:
            within = f", at batch {self.position.steps} of epoch {self.epoch + 1}" if self.position else ""
            log.info("resuming %s after epoch %d%s (best %.4e at epoch %d)", self.run_dir / "last.pt",
                     self.epoch, within, self.best_metric, self.best_epoch)

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
    def out_of_memory(self, what: str, batch: int, advice: list[str]):
        return out_of_memory_advice(what, batch, self.ctx.device, advice)

    def _training_advice(self) -> list[str]:
        return training_advice(self.cfg, self.model, self.batch)

    def _stop(self, bad: Diverged) -> TrainingDiverged:
        """The divergence an epoch's totals recorded: the first non-finite loss or gradient norm."""
        where = f"epoch {self.epoch + 1}, batch {bad.batch} of {len(self.train_batches)}"
        return TrainingDiverged(divergence_message(f"non-finite {bad.what} ({bad.value}) at {where}",
                                                   self.last_good()))

    def last_good(self) -> str:
        """The checkpoint a diverged run keeps (``last.pt`` of the last completed epoch)."""
        return f"{self.run_dir / 'last.pt'} (epoch {self.epoch})" if self.epoch else "none (no epoch completed)"

    def divergence_of(self, err: ValueError, batch: int | None, totals: EpochTotals | None) -> TrainingDiverged | None:
        """A model's value check that failed (NaN or inf inside it, ``err``) in training (``batch``, with the
        epoch's ``totals``) or validation (None): the training's divergence when the epoch recorded a
        non-finite loss or gradient norm before it, or the parameters became non-finite or huge; None
        otherwise (then ``err`` stands).  An exception path: this process's values, read once."""
        bad = summarize([totals.row().tolist()])[1] if totals is not None else None
        if bad is not None:
            return self._stop(bad)
        state = parameters_state(self.model)
        if not state:
            return None
        where = (f"epoch {self.epoch + 1}, batch {batch} of {len(self.train_batches)}" if batch is not None
                 else f"the validation after epoch {self.epoch + 1}")
        return TrainingDiverged(divergence_message(f"training diverged at {where}: the parameters became {state}",
                                                   self.last_good()))

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
        with self.out_of_memory("training", self.batch, self._training_advice()):
            for number, b in enumerate(bar, start=done + 1):
                with self.warmup.step():
                    try:
                        self.stepper.step(b, number, totals)
                    except ValueError as err:  # a model's value check: data are checked, so a divergence?
                        raise self.divergence_of(err, number, totals) or err
                if not bar.disable and number % PROGRESS_EVERY == 0:  # a host read: only for a drawn bar
                    bar.set_postfix(loss=f"{totals.running_mean():.3e}")
                if self.stop(number):
                    raise Stopped(number)
            loss, bad = totals.finish(ctx)
        if bad is not None:
            raise self._stop(bad)
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
                raise self.divergence_of(err, None, None) or err
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
                self.save_position(stop.args[0])
                return "interrupted"
            seconds = timing.clock(ctx.device) - t0
            warm, warm_steps = self.warmup.take()
            budget.record(timing.EpochTime(t1 - t0, seconds - (t1 - t0), self.epoch_steps(), warm, warm_steps))
            self.epoch += 1
            self.fit_schedule_to(budget)  # before the checkpoint: a resume continues the refitted schedule
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

    def fit_schedule_to(self, budget: timing.Budget) -> None:
        """With a time budget that no longer fits the steps left (the epochs turned out slower than
        planned, or ``optim.epochs`` is more than the budget allows), the run's steps
        (``self.scheduled_steps``, checkpointed; the config keeps ``optim.epochs``) become those that fit at
        the pace so far (``Budget.steps_left``: the median of the recent epochs; the last epoch may end
        early) and the rest of the OneCycle schedule is run in them (``OneCycle.resize``): the run ends
        annealed, at the end of its schedule, instead of being stopped by the budget with its learning
        rate still high.  A run planned in this process (``plan``) is refitted both ways to the time its
        plan was to fill, at the pace measured rather than the probe's, when the two differ by more than
        ``REFIT_TOLERANCE`` of its steps (within the budget).  Rank 0's clock decides for every rank."""
        if self.epoch >= self.epochs or self.cfg.run.time_budget_minutes is None:  # the same on every rank
            return
        per_epoch, done = len(self.train_batches), self.epoch * len(self.train_batches)
        left = self.scheduled_steps - done
        steps = dist_.broadcast_object(self._steps_to_fit(budget, per_epoch, left) if self.ctx.is_main else None,
                                       self.ctx)
        if steps is None:
            return
        before, self.scheduled_steps = self.scheduled_steps, done + steps
        self.scheduler.resize(self.scheduled_steps)
        if self.ctx.is_main:
            step, validation = budget.pace()
            log.info("at %.3gs per step and %.1fs per validation %d more steps fit %s: the schedule now ends "
                     "after %.4g epochs (was %.4g)", step, validation, steps,
                     "the budget" if self.plan_seconds is None else "the planned time", self.scheduled_steps / per_epoch,
                     before / per_epoch)

    def _steps_to_fit(self, budget: timing.Budget, per_epoch: int, left: int) -> int | None:
        """The steps the schedule is to have left instead of ``left`` (None: keep it; see
        ``fit_schedule_to``)."""
        fits = budget.steps_left(per_epoch)
        if not fits:
            return None  # no pace yet, or not even one more step: the stop rule ends the run
        if self.plan_seconds is not None:
            aim = min(fits, budget.steps_left(per_epoch, until=self.plan_seconds))
            if aim > 0 and abs(aim - left) > REFIT_TOLERANCE * self.scheduled_steps:
                return aim
        return fits if fits < left else None

    def check_targets(self, dataset: Any, split: str, h1_weight: float) -> None:
        """Targets a relative error can be taken of (not all zero; not constant with an H¹ term), checked
        when they are in memory (grids; point sets and lazily read grids are read per batch)."""
        if hasattr(dataset, "y"):
            check_targets(dataset.y, sample_ids(dataset), f"{self.cfg.data.path} ({split} split)",
                          periodic=self.periodic, h1_weight=h1_weight, snapshots=self.mode.trajectory)


def divergence_message(what: str, last_good: str) -> str:
    """What a diverged run says: ``what`` happened, the checkpoint kept, what to try."""
    return (f"{what}; training stopped. Last good checkpoint: {last_good}. "
            f"Try a lower optim.lr, a longer warm-up (optim.min_warmup_steps) or optim.grad_clip.")


def parameters_state(model: torch.nn.Module, limit: float = PARAMETER_LIMIT) -> str:
    """``"non-finite"`` if a parameter of ``model`` holds NaN or inf, ``"huge (largest |w| = ...)"`` if one is
    beyond ``limit``, else ``""`` (one host read: for exception paths)."""
    params = [p.detach() for p in model.parameters() if p.is_floating_point() or p.is_complex()]
    if not params:
        return ""
    finite, largest = torch.stack([torch.stack([torch.isfinite(p).all().float(), p.abs().max().float()])
                                   for p in params]).T.tolist()
    if not all(finite):
        return "non-finite"
    return f"huge (largest |w| = {max(largest):.3g})" if max(largest) > limit else ""


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
    files or another run is refused unless ``overwrite`` (which replaces the earlier run), and another
    command's outputs are never written over.  The run records its data file's content
    ([`data_identity`][]) and is tested, or resumed, only on that content.

    ``data`` overrides building the splits from ``config.data`` (tests, custom pipelines; then no
    test evaluation unless it carries ``splits``).  ``callbacks(trainer, record)`` run after each
    epoch's checkpoint; returning True stops the run cleanly.  ``plan_epochs(estimate)`` (a new run
    only) sets ``optim.epochs`` from a timing probe of the run (``petrov.train.planning``), e.g. to
    fill a time budget (``run.fill_budget`` does that with ``planning.epochs_for_budget``).  Launched by
    torchrun, every process calls this; rank 0 writes the run directory.
    Under ``stop_on_signals`` (the ``petrov`` command's) Ctrl-C or SIGTERM saves where it stopped (``preemption``).
    The process keeps the host memory its steps free for the next ones ([`retain_freed_memory`][]).
    """
    if not isinstance(config, TrainConfig):
        what = "a dict" if isinstance(config, dict) else f"{type(config).__name__} {config!r}"[:200]
        raise TypeError(f"train: config must be a TrainConfig, got {what}; make one with petrov.train.load_config(...) "
                        f"from a TOML file or preset name, or petrov.train.config.config_from_dict(...) from a dict")
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
            trainer.restore()
            if ctx.is_main:
                record_evaluation_keys(trainer.cfg, run_dir / "config.json", trainer.saved_config)
        else:
            if plan_epochs is None and config.run.fill_budget:
                minutes, cap = config.run.time_budget_minutes, config.optim.epochs
                plan_epochs = lambda estimate: epochs_for_budget(estimate, minutes, cap=cap)
            if plan_epochs is not None:
                trainer.plan(plan_epochs)
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
