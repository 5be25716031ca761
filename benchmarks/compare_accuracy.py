"""Accuracy at equal wall-clock budget: petrov's operators vs neuraloperator's FNO on the same data, one run.

    python benchmarks/compare_accuracy.py                            # full: Burgers + Darcy, 20 min per contender
    python benchmarks/compare_accuracy.py --problems burgers --budget-minutes 10
    python benchmarks/compare_accuracy.py --epochs 100               # equal epochs instead of equal time
    python benchmarks/compare_accuracy.py --quick                    # smoke run: tiny data, models, budgets

Data (generated once into ``--data-dir`` with petrov.datasets, then loaded identically by every contender):

- Burgers (nu = 0.1): 1224 samples at 8192 points; train on the first 1024 at ``--burgers-train-res``
  (default 1024), model selection on the next 100, test on the last 100 at 256 ... 8192.
- Darcy: 1200 samples solved at ``--darcy-native`` (default 421, the FNO data's native grid; strided
  to coarser grids); train on the first 1000 at 85 x 85 (``--darcy-train-res 43``: at 43 x 43, zero-shot
  super-resolution), select on the next 100, test on the last 100 at the training resolution and at
  61, 85, 141, 211.
``--burgers-file`` / ``--darcy-file`` use existing files instead (petrov HDF5 or the FNO ``.mat`` files).

Contenders (each trained by ``petrov.train.train`` with the same recipe: Adam, OneCycle (max lr
``--lr``), gradient clipping 1, batch ``--batch-size``, loss relL2 + gamma relH1 with the reference's
gamma (Burgers 0.1, Darcy 0.5), point-wise Gaussian normalisers fitted on the training split; the best
validation epoch is tested):

- petrov hybrids, one per registered mixer: Burgers ``galerkin1d`` with ``galerkin1d.REFERENCE_CONFIG``
  (the reference SimpleTransformer, 530,305 parameters), Darcy ``galerkin2d`` with
  ``galerkin2d.REFERENCE_CONFIG`` and ``coarse_size = 29`` (the reference README's setting for an 85 x 85
  fine grid: ``--subsample-attn 15 --subsample-nodes 5``);
- petrov ``latent1d`` / ``latent2d`` (the resolution-invariant attention operators: attention on a
  latent grid fixed in physical space), one per registered mixer, keys ``latent-<mixer>``, configured as
  the ``burgers-latent`` / ``darcy-budget-85`` preset (tuned for this budget);
- petrov Transolver (Wu et al. 2024), key ``transolver``: ``transolver1d`` / ``transolver2d``, the
  published structure (preprocess MLP, pre-norm physics-attention + MLP blocks, LayerNorm + linear head;
  linear projections, slice integrals with the grid's quadrature) scaled to the budget
  (``TRANSOLVER_BUDGET``; the published size, 8 layers of width 128 with 8 heads and 64 slices, takes
  ~4 s per training step at 85 x 85 and batch 4 on one core: one epoch in 20 minutes);
- petrov FNO: ``fno1d`` / ``fno2d`` with ``fno.REFERENCE_CONFIG`` (the FNO paper's settings);
- neuraloperator's ``neuralop.models.FNO`` as installed, wrapped only to take petrov's channels-last
  tensors (it appends its own grid coordinates).  Settings: Darcy = its documented Darcy example
  (``examples/models/plot_FNO_darcy.py``: ``n_modes=(16, 16), hidden_channels=32,
  projection_channel_ratio=2``); Burgers = no 1-D Burgers config ships with neuraloperator, so the FNO
  paper's 1-D Burgers settings in its conventions: 16 retained real-FFT modes = ``n_modes=(32,)``
  (neuraloperator keeps ``n//2 + 1`` of the last axis), ``hidden_channels=64``,
  ``projection_channel_ratio=2`` (128); everything else its defaults.
- Darcy only, ``neuralop FNO even-pad``: the same model with the input zero-padded by one point on
  every odd-sized axis (output cropped back).  neuraloperator 2.0.0 un-shifts its spectrum with
  ``fftshift`` instead of ``ifftshift``; on an odd grid (85, 61, 141, 211 are all odd) this moves the
  retained modes of every spectral layer by one frequency along the first axis (measured: 30% of the
  layer output).  The model still trains, but it is not the documented operator.  Both rows are
  reported; the table marks the shipped one "odd-grid fftshift bug active".

Symmetries: ``--augment square`` trains every Darcy contender on samples moved by the unit square's
quarter turns and reflections (``data.augment = "square"``), ``--augment periodic`` every Burgers
contender on samples shifted along the periodic grid (``data.augment = "periodic"``; ``--augment
periodic-odd`` adds the odd reflection ``u(x) → −u(−x)``); each is exact for its problem's data (see
``petrov.train.augmentation``) and refused with the other problem.

Parallel: ``--jobs N`` trains N contenders at a time, each in its own process pinned to its own
CPU core with one torch thread (N at most the usable cores); every contender then gets the same
single core for its budget.  ``--jobs 2`` halves the wall-clock of the full run on 2 cores.

Seeds: ``--seeds N`` trains every contender N times, with ``run.seed`` = ``--seed``, ``--seed`` + 1, ...
(the seed of the initialization and of the data order), each run a job of its own (``--jobs 2`` runs two
at a time).  The tables then show, per resolution, the mean ± sample standard deviation over the seeds of
the test relL2 mean, and a second table its min and max; the targets use ``VERDICT_RULE``.

Equal budget: each contender gets ``--budget-minutes`` of training wall-clock (data loading, the timing
probe and the final test evaluation excluded).  The trainer's own probe (``petrov.train.planning``: the
run's model, batches, device and ``--compile`` setting; the first steps, which compile and plan, not
counted as the pace; the device synchronized) times a training step and a validation batch; the number
of epochs is chosen so the whole OneCycle schedule fills 95% of the budget (``BUDGET_FRACTION``; whole epochs,
then the share of one more that fits: its last epoch ends early, so a contender whose epoch is a large part
of the budget spends it as the others do), the trainer refits the schedule to that time at the pace it
measures (shorter when its epochs are slower than the probe said, longer when faster), and it stops at
the budget (the table reports epochs done/planned, why it
stopped and the share of the budget trained).  ``--epochs N`` trains every contender N epochs instead.

Device: ``--device`` (default ``auto``: CUDA where there is one), ``--compile`` (``run.compile``, default
``auto``: CUDA graphs on one GPU, eager on the CPU) and ``--amp`` (bfloat16 autocast) apply to every
contender.

Output: a table per problem (test relL2 mean per resolution, parameters, seconds per epoch, epochs;
with ``--seeds`` mean ± std and min/max over the seeds),
the targets as met/not met, the published figures beside ours
("published, not rerun"), ``--out`` JSON and a CSV next to it.
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch
from torch.nn import functional as F

from petrov.common.files import atomic_write

from _common import (
    TensorState, emit_result, exceeds_spread, format_epochs, format_spread, format_table, machine_info, minutes,
    print_machine, run_pinned, run_worker, seed_stats, verdict, worker_spec, write_json,
)
from records import seed_table, try_write_record

NEURALOP_MODEL = "neuralop_fno"
TARGET_UNSEEN_RATIO = 1.5
# --augment: the problem whose data each group holds for
AUGMENT_PROBLEM = {"square": "darcy", "periodic": "burgers", "periodic-odd": "burgers"}
# The attention operators' flatness over the unseen resolutions, per (problem, training grid): Darcy
# trained at 85 within 1.10x at 61...211; trained at 43 (zero-shot super-resolution) within 1.20x;
# Burgers trained at 1024 within 1.05x from 256 to 8192.
ATTENTION_FLAT = {("darcy", 85): 1.10, ("darcy", 43): 1.20, ("burgers", 1024): 1.05}

# Seeds (--seeds N): how a target is judged from N runs per contender.  With one seed the std is 0 and
# these are the plain comparisons.
VERDICT_RULE = ("each figure is the mean over the seeds of the test relL2 mean, ± its sample standard deviation "
                "(std); a comparison target counts as met only when the difference exceeds the spread: "
                "ours mean + ours std < theirs mean - theirs std ('<=' for an 'at most' target); a flatness target "
                "only when every seed's unseen/train ratio is within its limit")

# Transolver scaled to the 20-minute budget on one core (published: d_model 128, 8 layers, 8 heads of width
# 16, 64 slices, batch 4).  CPU seconds of one training step, one thread, AMD EPYC, machine shared with other
# jobs (2026-11-24; a training step as the planning probe of that day timed it: forward, relL2 + H1 loss,
# backward, clipping, Adam):
#   Darcy 85 x 85, batch 4: published size 4.05; d_model 64 x 4 layers 0.64; 64 x 3 0.46 (16 slices 0.39);
#   64 x 2 0.30; 48 x 3 0.43.  Chosen: 64 x 3, 4 heads of width 16, 32 slices (the published slices/width
#   ratio), at the published batch 4: 250 steps x 0.46 s ~ 2 min per epoch, ~9 epochs in 90% of 20 minutes
#   (64 x 2 would get ~13 with one block less).
#   Burgers n = 1024, batch 8: published size 1.08; 128 x 4 (64 slices) 0.52; 96 x 4 with 8 heads 0.32,
#   with 6 heads of width 16 0.27; 64 x 4 0.16.  Chosen: 96 x 4, 6 heads, 32 slices: 128 x 0.27 s ~ 35 s
#   per epoch, ~28 epochs (galerkin1d's reference size got 19, fno1d 79).
# Darcy takes the reference's Darcy coordinates (unified_pos 8: distances to an 8 x 8 grid).  Both keep the
# slice projections' orthogonal start (the model's default; with the reference's normal start the Darcy
# contender stayed at 2.16e-1 for 8 epochs).  A hand-written loop (relL2 loss only, Adam lr 1e-3 after 50
# warm-up steps, batch 4, validation relL2 every 100 steps, 2026-11-24) plateaus at ~0.17 within 100 steps
# whatever the start: orthogonal 0.173, 0.170, 0.169, 0.170; orthogonal + unified_pos 8 0.169, 0.168, 0.169,
# 0.169; the reference's normal start 0.171, 0.169 (the mean field gives 0.248): the start alone is not
# what held the contender back.
TRANSOLVER_BUDGET = {
    1: {"d_model": 96, "n_layers": 4, "n_heads": 6, "n_slices": 32},
    2: {"d_model": 64, "n_layers": 3, "n_heads": 4, "n_slices": 32, "unified_pos": 8, "batch_size": 4},
}

# Published figures (sources in benchmarks/README.md; not rerun here).
PUBLISHED = {
    "burgers": [
        ("FNO (FNO paper, 500 epochs)", "s=256 ... 8192: 0.0149 ... 0.0139"),
        ("Galerkin hybrid (Galerkin Transformer repo, eval notebook)", "n=8192: 1.017e-3"),
        ("Fourier hybrid (Galerkin Transformer README)", "n=2048: 1.123e-3 (100 ep); ~7e-4 (500 ep)"),
    ],
    "darcy": [
        ("FNO (FNO paper)", "85: 0.0108"),
        ("Galerkin hybrid (Galerkin Transformer issue #3)", "211/61: 0.00847 (paper); 0.00914 re-run"),
        ("best published (LNO, Transolver++ READMEs)", "85: 0.0049"),
    ],
}


# --- neuraloperator's FNO behind petrov's model interface -----------------------------------------

@dataclass
class NeuralopFNOConfig:
    in_channels: int = 1
    out_channels: int = 1
    n_modes: list = field(default_factory=lambda: [16, 16])
    hidden_channels: int = 32
    projection_channel_ratio: int = 2
    pad_to_even: bool = False


class NeuralopFNO(TensorState, torch.nn.Module):
    """``neuralop.models.FNO`` (as installed) on channels-last grids ``(b, *grid, c) -> (b, *grid, c)``.

    ``pos`` is ignored: the FNO appends its own grid coordinates (``positional_embedding="grid"``).
    ``pad_to_even``: zero-pad every odd-sized axis by one point at its end and crop the output.
    """

    def __init__(self, config: NeuralopFNOConfig):
        super().__init__()
        from neuralop.models import FNO

        self.config = config
        self.fno = FNO(n_modes=tuple(config.n_modes), in_channels=config.in_channels,
                       out_channels=config.out_channels, hidden_channels=config.hidden_channels,
                       projection_channel_ratio=config.projection_channel_ratio)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        h = x.movedim(-1, 1)
        grid = h.shape[2:]
        if self.config.pad_to_even:
            pads = [p for n in reversed(grid) for p in (0, n % 2)]
            h = F.pad(h, pads)
        out = self.fno(h)
        out = out[(..., *[slice(0, n) for n in grid])]
        return out.movedim(1, -1)


def register_neuralop() -> None:
    from petrov.operators.models import MODELS, register_model

    if NEURALOP_MODEL not in MODELS.names():
        register_model(NEURALOP_MODEL, NeuralopFNOConfig)(NeuralopFNO)


# --- problems and contenders ---------------------------------------------------------------------

@dataclass
class Problem:
    name: str
    kind: str
    native: int
    n_samples: int
    n_train: int
    n_val: int
    n_test: int
    train_res: int
    eval_res: list[int]
    h1_weight: float
    ndim: int
    path: str = ""
    external: bool = False


def problems(args: argparse.Namespace) -> dict[str, Problem]:
    q = args.quick
    burgers = Problem("burgers", "burgers", 1024 if q else 8192, 120 if q else 1224, 80 if q else 1024,
                      20 if q else 100, 20 if q else 100, 256 if q else args.burgers_train_res,
                      [256, 512, 1024] if q else [256, 512, 1024, 2048, 4096, 8192], 0.1, 1)
    darcy = Problem("darcy", "darcy", 85 if q else args.darcy_native, 120 if q else 1200, 80 if q else 1000,
                    20 if q else 100, 20 if q else 100, 43 if q else args.darcy_train_res,
                    [43, 85] if q else sorted({args.darcy_train_res, 61, 85, 141, 211}),
                    0.5, 2)
    out = {}
    for p, file in ((burgers, args.burgers_file), (darcy, args.darcy_file)):
        if p.name not in args.problems:
            continue
        if file:
            p.path, p.external = file, True
        else:
            p.path = str(Path(args.data_dir) / f"{p.kind}-{p.native}-{p.n_samples}.h5")
        out[p.name] = p
    return out


LATENT_PRESETS = {1: "burgers-latent", 2: "darcy-budget-85"}  # tuned for the 20-minute budget


def latent_options(ndim: int, quick: bool) -> dict[str, Any]:
    """``latent1d`` / ``latent2d`` as the ``burgers-latent`` / ``darcy-budget-85`` preset configures it."""
    from petrov.train.config import load_config

    options = dict(load_config(LATENT_PRESETS[ndim]).model.options)
    if quick:
        options.update(d_model=32, n_layers=1, dim_feedforward=64, latent_size=32 if ndim == 1 else 12,
                       latent_modes=min(options.get("latent_modes", 0), 8), fine_width=8,
                       decoder_width=8, decoder_hidden=32, modes=6)
    return options


def contenders(problem: Problem, quick: bool) -> list[dict[str, Any]]:
    """(key, label, model name, options, note) of every contender on ``problem``."""
    from petrov.operators import list_mixers
    from petrov.operators.models import fno, galerkin1d, galerkin2d

    if problem.ndim == 1:
        hybrid_name, hybrid = "galerkin1d", dict(galerkin1d.REFERENCE_CONFIG)
        fno_name, fno_opts = "fno1d", dict(fno.REFERENCE_CONFIG["fno1d"])
        nop = {"n_modes": [32], "hidden_channels": 64, "projection_channel_ratio": 2}
        if quick:
            hybrid.update(d_model=32, n_layers=1, dim_feedforward=64, decoder_width=16, decoder_hidden=16, modes=8)
            fno_opts.update(width=16, modes=8, proj_hidden=32)
            nop.update(n_modes=[16], hidden_channels=16)
    else:
        hybrid_name, hybrid = "galerkin2d", {**galerkin2d.REFERENCE_CONFIG, "coarse_size": 29}
        fno_name, fno_opts = "fno2d", dict(fno.REFERENCE_CONFIG["fno2d"])
        nop = {"n_modes": [16, 16], "hidden_channels": 32, "projection_channel_ratio": 2}
        if quick:
            hybrid.update(d_model=32, n_layers=1, dim_feedforward=64, coarse_size=15, decoder_width=8,
                          decoder_hidden=32, modes=6)
            fno_opts.update(width=8, modes=6, proj_hidden=32)
            nop.update(n_modes=[12, 12], hidden_channels=8)
    rows = [{"key": mixer, "label": f"petrov {hybrid_name} {mixer}", "model": hybrid_name,
             "options": {**hybrid, "mixer": mixer}, "note": ""} for mixer in list_mixers()]
    # the resolution-invariant attention operators (attention on a latent grid), every mixer
    latent, latent_name = latent_options(problem.ndim, quick), f"latent{problem.ndim}d"
    rows += [{"key": f"latent-{mixer}", "label": f"petrov {latent_name} {mixer}", "model": latent_name,
              "options": {**latent, "mixer": mixer}, "note": ""} for mixer in list_mixers()]
    # Transolver (physics attention), the published structure scaled to the budget
    transolver = dict(TRANSOLVER_BUDGET[problem.ndim])
    batch = transolver.pop("batch_size", None)
    if quick:
        transolver.update(d_model=16, n_layers=1, n_heads=2, n_slices=8)
    rows.append({"key": "transolver", "label": f"petrov transolver{problem.ndim}d", "model": f"transolver{problem.ndim}d",
                 "options": transolver, "note": f"batch {batch}" if batch else "",
                 **({"batch_size": batch} if batch else {})})
    rows.append({"key": "fno", "label": f"petrov {fno_name}", "model": fno_name, "options": fno_opts, "note": ""})
    odd = any(r % 2 for r in [problem.train_res, *problem.eval_res])
    rows.append({"key": "neuralop", "label": "neuralop FNO", "model": NEURALOP_MODEL, "options": nop,
                 "note": "odd-grid fftshift bug active" if odd and problem.ndim > 1 else ""})
    if problem.ndim > 1:
        rows.append({"key": "neuralop-even", "label": "neuralop FNO even-pad", "model": NEURALOP_MODEL,
                     "options": {**nop, "pad_to_even": True}, "note": "1-point pad to even grid"})
    return rows


def train_config(problem: Problem, contender: dict, args: argparse.Namespace, epochs: int,
                 seed: int | None = None) -> dict[str, Any]:
    """The contender's training config; ``seed`` (default ``--seed``) seeds the initialization and the data
    order; a contender's own ``batch_size`` replaces ``--batch-size``."""
    batch = contender.get("batch_size", args.batch_size)
    return {
        "data": {"path": problem.path, "train_resolution": problem.train_res, "eval_resolutions": problem.eval_res,
                 "n_train": problem.n_train, "n_val": problem.n_val, "n_test": problem.n_test,
                 "augment": args.augment},
        "model": {"name": contender["model"], "options": contender["options"]},
        "optim": {"optimizer": "adam", "lr": args.lr, "epochs": epochs, "batch_size": batch,
                  "grad_clip": 1.0, "min_warmup_steps": args.min_warmup_steps},
        "loss": {"h1_weight": problem.h1_weight},
        "run": {"seed": args.seed if seed is None else seed, "threads": args.threads, "progress": False,
                "eval_batch_size": 4, "device": args.device, "compile": args.compile, "amp": args.amp,
                "time_budget_minutes": None if args.epochs else args.budget_minutes},
    }


# --- data ------------------------------------------------------------------------------------------

def ensure_data(problem: Problem, workers: int) -> None:
    from petrov.datasets import generate_dataset

    path = Path(problem.path)
    if path.exists():
        print(f"{problem.name}: using {path}")
        return
    if problem.external:
        raise FileNotFoundError(f"--{problem.name}-file {path} does not exist")
    path.parent.mkdir(parents=True, exist_ok=True)
    start = time.perf_counter()
    print(f"{problem.name}: generating {problem.n_samples} samples at native resolution {problem.native} "
          f"into {path} ...", flush=True)
    generate_dataset(problem.kind, path, problem.n_samples, resolution=problem.native, seed=0,
                     workers=workers if problem.kind == "darcy" else 0, progress=False)
    print(f"{problem.name}: generated in {time.perf_counter() - start:.0f} s", flush=True)


# --- one contender (worker) ------------------------------------------------------------------------

def evaluate_best(cfg, run_dir: Path, splits) -> dict[str, dict[str, float]]:
    """Test the best checkpoint at every resolution (used when a run diverged before its own test)."""
    from petrov.train import evaluate_relative_l2, load_operator
    from petrov.train.data import open_split
    from petrov.evaluate import summarize

    op = load_operator(run_dir / "best.pt")
    return {str(r): summarize(evaluate_relative_l2(op, open_split(cfg.data, splits.test, r), batch_size=4))
            for r in (cfg.data.eval_resolutions or [cfg.data.train_resolution])}


def run_contender(spec: dict[str, Any]) -> dict[str, Any]:
    from petrov.train import train
    from petrov.train.config import config_from_dict
    from petrov.train.data import build_training_data
    from petrov.train.planning import epochs_for_budget
    from petrov.train.trainer import TrainingDiverged

    if spec.get("cpu") is not None:  # --jobs: one core per contender
        os.sched_setaffinity(0, {spec["cpu"]})
    if spec["threads"]:
        torch.set_num_threads(spec["threads"])
    result: dict[str, Any] = {"key": spec["key"], "label": spec["label"], "note": spec["note"]}
    if spec["config"]["model"]["name"] == NEURALOP_MODEL:
        try:
            register_neuralop()
        except ImportError as err:
            return {**result, "error": f"neuraloperator not importable ({err}); pip install neuraloperator==2.0.0"}
    cfg = config_from_dict(spec["config"])
    data = build_training_data(cfg.data)
    budget = cfg.run.time_budget_minutes
    result["epochs_planned"] = cfg.optim.epochs

    def plan(estimate) -> float:  # from the trainer's probe of this very run (petrov.train.planning)
        epochs = epochs_for_budget(estimate, budget, cap=spec["max_epochs"])
        result.update(epochs_planned=epochs, probe_seconds_per_epoch=estimate.epoch_seconds,
                      probe_seconds_per_step=estimate.step_seconds, probe_warmup_seconds=estimate.warmup_seconds)
        return epochs

    from petrov.operators import build_model

    result["parameters"] = sum(p.numel() for p in build_model(cfg.model.name, **cfg.model.options).parameters())
    run_dir = Path(spec["run_dir"])
    start = time.perf_counter()
    try:
        out = train(cfg, run_dir, data=data, plan_epochs=plan if budget is not None else None)
        result.update(stopped=out.stopped, epochs=out.epochs_completed, epochs_scheduled=out.epochs_scheduled,
                      best_epoch=out.best_epoch, best_val_rel_l2=out.best_val_rel_l2, train_seconds=out.train_seconds,
                      test={str(row["resolution"]): row for row in out.test})
        if budget is not None:
            result["budget_used"] = out.train_seconds / (60.0 * budget)
    except TrainingDiverged as err:
        result.update(stopped="diverged", diverged=str(err).split(";")[0])
        if (run_dir / "best.pt").is_file():
            result["test"] = evaluate_best(cfg, run_dir, data.splits)
    result["wall_seconds"] = time.perf_counter() - start
    log = run_dir / "log.jsonl"
    rows = [json.loads(line) for line in log.read_text().splitlines() if line.strip()] if log.is_file() else []
    if rows:
        seconds = sorted(r["seconds"] for r in rows)
        result["seconds_per_epoch"] = seconds[len(seconds) // 2]
        result.setdefault("train_seconds", sum(seconds))
        result.setdefault("epochs", rows[-1]["epoch"])  # a diverged run: the epochs it logged
    return result


def run_contender_safely(spec: dict[str, Any]) -> dict[str, Any]:
    try:
        return run_contender(spec)
    except Exception as err:  # one contender must not sink the table
        traceback.print_exc()
        return {"key": spec["key"], "label": spec["label"], "note": spec["note"],
                "error": f"{type(err).__name__}: {str(err).splitlines()[0][:200] if str(err) else ''}"}


# --- report ------------------------------------------------------------------------------------------

def mean_at(result: dict, res: int) -> float | None:
    """The test relL2 mean at ``res`` of a run, or of a contender over its seeds (the mean of the means)."""
    entry = result.get("test", {}).get(str(res))
    return None if entry is None else entry["mean"]


def stats_at(result: dict, res: int) -> dict[str, Any] | None:
    """Mean, std, min, max over the seeds at ``res`` (see :func:`aggregate`)."""
    entry = result.get("test", {}).get(str(res))
    return None if entry is None else entry.get("seeds") or {"mean": entry["mean"], "std": 0.0,
                                                               "min": entry["mean"], "max": entry["mean"], "n": 1}


def unseen_ratio(result: dict, problem: Problem) -> float | None:
    base = mean_at(result, problem.train_res)
    others = [mean_at(result, r) for r in problem.eval_res if r != problem.train_res]
    others = [v for v in others if v is not None]
    if not base or not others:
        return None
    return max(others) / base


def aggregate(runs: list[dict], problem: Problem) -> dict[str, Any]:
    """One contender over its seeds: the first run's fields, ``test[res]`` = the mean over the seeds of
    the runs' test means with ``seeds`` = :func:`_common.seed_stats`, ``unseen_ratios`` per seed, the
    runs themselves in ``runs``, ``error`` only when every run failed."""
    ok = [r for r in runs if "error" not in r]
    out: dict[str, Any] = {k: runs[0][k] for k in ("key", "label", "note")}
    out.update(runs=runs, seeds=[r.get("seed") for r in runs], failed=len(runs) - len(ok))
    if not ok:
        out["error"] = runs[0]["error"]
        return out
    out["parameters"] = ok[0].get("parameters", 0)
    test = {}
    for res in problem.eval_res:
        stats = seed_stats([mean_at(r, res) for r in ok])
        if stats is not None:
            test[str(res)] = {"mean": stats["mean"], "seeds": stats}
    out["test"] = test
    per_epoch = [r["seconds_per_epoch"] for r in ok if "seconds_per_epoch" in r]
    if per_epoch:
        out["seconds_per_epoch"] = sum(per_epoch) / len(per_epoch)
    out["epochs"] = " ".join(f"{format_epochs(r.get('epochs', 0))}/{format_epochs(r.get('epochs_planned'))}"
                             for r in ok)  # done/planned
    out["stopped"] = "/".join(sorted({str(r.get("stopped", "?")) for r in ok}))
    used = [r["budget_used"] for r in ok if "budget_used" in r]
    if used:
        out["budget_used"] = " ".join(f"{u:.0%}" for u in used)  # per seed: the share of the budget trained
    out["unseen_ratios"] = [unseen_ratio(r, problem) for r in ok]
    return out


def report(problem: Problem, results: list[dict]) -> dict[str, Any]:
    """Print the tables and targets of ``results`` (one :func:`aggregate` per contender)."""
    res = problem.eval_res
    n_seeds = max((len(r["runs"]) for r in results), default=1)
    headers = ["contender", "params", "s/epoch", "epochs", "stopped", "budget used"] + [
        f"{r}{'*' if r == problem.train_res else ''}" for r in res] + ["unseen/train", "note"]
    table, spread = [], []
    for r in results:
        if "error" in r:
            table.append([r["label"], "-", "-", "-", "failed", "-"] + ["-"] * len(res) + ["-", r["error"][:60]])
            continue
        ratio = unseen_ratio(r, problem)
        note = r.get("note", "") + (f" ({r['failed']} of {len(r['runs'])} runs failed)" if r["failed"] else "")
        table.append([
            r["label"], f"{r.get('parameters', 0):,}", f"{r['seconds_per_epoch']:.1f}" if "seconds_per_epoch" in r else "-",
            r["epochs"], r.get("stopped", "?"), r.get("budget_used", "-"),
            *[format_spread(stats_at(r, x)) for x in res],
            f"{ratio:.2f}" if ratio else "-", note.strip(),
        ])
        spread.append([r["label"]] + [f"{st['min']:.3e} / {st['max']:.3e}" if (st := stats_at(r, x)) else "-"
                                      for x in res])
    over = f"; mean ± std over {n_seeds} seeds" if n_seeds > 1 else ""
    print(f"\n{problem.name}: test relative L2 (mean over {problem.n_test} samples) per resolution{over}; "
          f"* = training resolution ({problem.train_res}); trained on {problem.n_train}")
    print(format_table(headers, table))
    if n_seeds > 1:
        print("min / max over the seeds:")
        print(format_table(["contender"] + [str(x) for x in res], spread))
    print("published figures (not rerun):")
    for what, figure in PUBLISHED[problem.name]:
        print(f"  {what}: {figure}")

    ok = [r for r in results if "error" not in r and mean_at(r, problem.train_res) is not None]
    ours = [r for r in ok if r["label"].startswith("petrov")]
    theirs = [r for r in ok if r["key"].startswith("neuralop")]
    summary: dict[str, Any] = {"targets": [], "seeds": n_seeds, "verdict_rule": VERDICT_RULE}
    if ours:
        best = min(ours, key=lambda r: mean_at(r, problem.train_res))
        summary["best_petrov"] = best["label"]
        if theirs:
            rival = min(theirs, key=lambda r: mean_at(r, problem.train_res))
            summary["targets"].append(comparison(
                f"{problem.name}: best petrov model ({best['label']}) has lower relL2 than neuraloperator's FNO "
                f"({rival['label']}) at {problem.train_res}", best, rival, problem, strict=True))
        summary["targets"].append(flatness(f"{problem.name}: {best['label']} error at unseen resolutions within "
                                           f"{TARGET_UNSEEN_RATIO}x of its training-resolution error",
                                           best, TARGET_UNSEEN_RATIO, problem))
        summary["targets"] += attention_targets(ours, problem)
    print(f"targets ({n_seeds} seed{'s' if n_seeds > 1 else ''} per contender):")
    print(f"  verdict rule: {VERDICT_RULE}")
    for t in summary["targets"]:
        if "ours" in t:
            pm = (lambda std: f" ± {std:.1e}") if n_seeds > 1 else (lambda std: "")
            detail = (f"{t['ours']:.3e}{pm(t['ours_std'])} vs {t['theirs']:.3e}{pm(t['theirs_std'])}, "
                      f"ratio {t['ratio']:.2f}")
        else:
            worst = f" (worst seed {t['worst_seed_ratio']:.2f})" if n_seeds > 1 else ""
            detail = f"max unseen/train {t['ratio']:.2f}{worst}" if t["ratio"] is not None else "no unseen resolution"
        print(f"  {t['text']}: {verdict(t['met'])} ({detail})")
    if not summary["targets"]:
        print("  n/a (no petrov result)")
    return summary


def comparison(text: str, ours: dict, theirs: dict, problem: Problem, strict: bool) -> dict[str, Any]:
    """A lower-is-better target at the training resolution, judged by :func:`_common.exceeds_spread`."""
    a, b = stats_at(ours, problem.train_res), stats_at(theirs, problem.train_res)
    return {"text": text, "ours": a["mean"], "ours_std": a["std"], "theirs": b["mean"], "theirs_std": b["std"],
            "ratio": a["mean"] / b["mean"], "met": exceeds_spread(a, b, strict=strict)}


def flatness(text: str, result: dict, limit: float, problem: Problem) -> dict[str, Any]:
    """Unseen/train within ``limit``: the ratio of the seed means, judged on every seed's own ratio."""
    ratio = unseen_ratio(result, problem)
    per_seed = [x for x in result.get("unseen_ratios", [ratio]) if x is not None]
    worst = max(per_seed) if per_seed else None
    return {"text": text, "ratio": ratio, "worst_seed_ratio": worst,
            "met": None if worst is None else worst <= limit}


def attention_targets(ours: list[dict], problem: Problem) -> list[dict[str, Any]]:
    """The attention operators' targets: the best one at most petrov's FNO error at the training
    resolution, and flat over the unseen resolutions (within ATTENTION_FLAT[problem, training grid])."""
    attention = [r for r in ours if r["key"] != "fno"]
    fno = [r for r in ours if r["key"] == "fno"]
    if not attention:
        return []
    best = min(attention, key=lambda r: mean_at(r, problem.train_res))
    out = []
    if fno:
        out.append(comparison(f"{problem.name}: best attention model ({best['label']}) at most petrov's FNO error "
                              f"at {problem.train_res}", best, fno[0], problem, strict=False))
    limit = ATTENTION_FLAT.get((problem.name, problem.train_res))
    if limit is not None:
        out.append(flatness(f"{problem.name}: {best['label']} error at unseen resolutions within {limit}x of its "
                            f"training-resolution error", best, limit, problem))
    return out


def write_csv(path: Path, results: dict[str, list[dict]], probs: dict[str, Problem]) -> None:
    """One row per run and resolution (``seed`` column); with several seeds also rows ``seed = all`` with
    the mean over the seeds and their std, min and max."""
    sink = io.StringIO()
    w = csv.writer(sink)
    w.writerow(["problem", "contender", "parameters", "seconds_per_epoch", "epochs", "epochs_planned", "stopped",
                "resolution", "train_resolution", "rel_l2_mean", "rel_l2_median", "rel_l2_max", "note", "error",
                "seed", "rel_l2_seed_std", "rel_l2_seed_min", "rel_l2_seed_max", "budget_used"])
    for name, groups in results.items():
        for g in groups:
            for r in g["runs"]:
                tests = r.get("test") or {"": {}}
                for res, s in tests.items():
                    w.writerow([name, r["label"], r.get("parameters", ""), r.get("seconds_per_epoch", ""),
                                r.get("epochs", ""), r.get("epochs_planned", ""), r.get("stopped", ""), res,
                                probs[name].train_res, s.get("mean", ""), s.get("median", ""), s.get("max", ""),
                                r.get("note", ""), r.get("error", ""), r.get("seed", ""), "", "", "",
                                r.get("budget_used", "")])
            if len(g["runs"]) > 1 and "error" not in g:
                for res, entry in g["test"].items():
                    st = entry["seeds"]
                    w.writerow([name, g["label"], g.get("parameters", ""), g.get("seconds_per_epoch", ""),
                                g.get("epochs", ""), "", g.get("stopped", ""), res,
                                probs[name].train_res, st["mean"], "", "", g.get("note", ""), "", "all",
                                st["std"], st["min"], st["max"], g.get("budget_used", "")])
    atomic_write(path, sink.getvalue())


def write_accuracy_record(args: argparse.Namespace, problem: Problem, results: list[dict]) -> None:
    """benchmarks/results/RECORD-PROBLEM.json (benchmarks/records.py): every contender's test relL2 mean
    per resolution and seed, its parameters, epochs and budget used per seed."""
    ran = {g["label"]: [r for r in g["runs"] if r.get("test")] for g in results}
    facts = {g["label"]: {"key": g["key"], "parameters": g.get("parameters"), "train_resolution": problem.train_res,
                          **{k: [r.get(k) for r in ran[g["label"]]] for k in
                             ("epochs", "epochs_planned", "budget_used", "seconds_per_epoch", "stopped")}}
             for g in results if ran[g["label"]]}
    values = seed_table([r for runs in ran.values() for r in runs], lambda r: r["label"],
                        lambda r: {x: r["test"][str(x)]["mean"] for x in problem.eval_res if str(x) in r["test"]})
    try_write_record(f"{args.record}-{problem.name}", values, facts=facts, device=args.device, threads=args.threads,
                     settings={**vars(args), "problem": vars(problem)},
                     metric=f"test relative L2, mean over the {problem.n_test} test samples")


def run_one(job: tuple, args: argparse.Namespace, runs_dir: Path, cpu: int | None) -> dict[str, Any]:
    """Train one (problem, contender, seed)."""
    name, problem, c, seed = job
    run_name = f"{name}-{c['key']}" + (f"-seed{seed}" if args.seeds > 1 else "")
    spec = {**c, "config": train_config(problem, c, args, args.epochs or 1, seed), "threads": args.threads,
            "max_epochs": args.max_epochs, "run_dir": str(runs_dir / run_name), "cpu": cpu}
    tag = f"{c['label']}" + (f" seed {seed}" if args.seeds > 1 else "")
    print(f"  {name}: training {tag}" + (f" on core {cpu}" if cpu is not None else "") + " ...", flush=True)
    result = run_contender_safely(spec) if args.in_process else run_worker(__file__, spec)
    result.setdefault("label", c["label"])
    result.setdefault("key", c["key"])
    result.setdefault("note", c["note"])
    result["seed"] = seed
    if "error" in result:
        print(f"    {name} {tag} failed: {result['error']}", flush=True)
    else:
        at = mean_at(result, problem.train_res)
        used = f", {result['budget_used']:.0%} of the budget trained" if "budget_used" in result else ""
        print(f"    {name} {tag}: {format_epochs(result.get('epochs'))} epochs, stopped: {result.get('stopped')}{used}, "
              + (f"relL2 at {problem.train_res}: {at:.3e}" if at is not None else "no test result"), flush=True)
    return result


def run_all(jobs: list, args: argparse.Namespace, runs_dir: Path) -> list[dict[str, Any]]:
    """Train every (problem, contender, seed); ``--jobs`` at a time, each worker on a core of its own."""
    return run_pinned(jobs, args.jobs, lambda job, cpu: run_one(job, args, runs_dir, cpu))


# --- main --------------------------------------------------------------------------------------------

def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--problems", nargs="+", default=["burgers", "darcy"], choices=["burgers", "darcy"])
    parser.add_argument("--contenders", nargs="+", default=None,
                        help="subset by key: mixer names (hybrids), latent-<mixer> (latent1d / latent2d), fno, "
                             "neuralop, neuralop-even (default: all)")
    parser.add_argument("--budget-minutes", type=minutes, default=None,
                        help="training wall-clock per contender (default 20; 0.05 with --quick)")
    parser.add_argument("--epochs", type=int, default=None, help="train every contender this many epochs instead")
    parser.add_argument("--max-epochs", type=int, default=1000, help="cap on the epochs chosen from the budget")
    parser.add_argument("--device", default="auto", choices=["auto", "cpu", "cuda"], help="run.device of every contender")
    parser.add_argument("--compile", default="auto", choices=["auto", "off", "default", "cuda-graphs"],
                        help="run.compile of every contender (auto: CUDA graphs on one GPU, eager on the CPU)")
    parser.add_argument("--amp", action="store_true", help="run.amp = true (bfloat16 autocast) for every contender")
    parser.add_argument("--augment", default="none", choices=["none", *AUGMENT_PROBLEM],
                        help="data.augment of every contender: 'square' moves each training sample by a random "
                             "symmetry of the unit square in each epoch (Darcy only), 'periodic' shifts it along "
                             "its periodic grid (Burgers only), 'periodic-odd' shifts it or shifts and "
                             "negates its mirror image (Burgers only)")
    parser.add_argument("--lr", type=float, default=1e-3, help="OneCycle maximum learning rate (all contenders)")
    parser.add_argument("--min-warmup-steps", type=int, default=200)
    parser.add_argument("--batch-size", type=int, default=8)
    parser.add_argument("--burgers-train-res", type=int, default=1024, choices=[1024, 2048])
    parser.add_argument("--darcy-train-res", type=int, default=85, choices=[43, 85],
                        help="Darcy training resolution (43: zero-shot super-resolution to 61 ... 211)")
    parser.add_argument("--darcy-native", type=int, default=421, help="native grid of the generated Darcy data")
    parser.add_argument("--burgers-file", default=None, help="existing Burgers file (petrov .h5 or FNO .mat)")
    parser.add_argument("--darcy-file", default=None, help="existing Darcy file (petrov .h5 or FNO .mat)")
    parser.add_argument("--data-dir", default="data/bench")
    parser.add_argument("--data-workers", type=int, default=2, help="processes for the Darcy solves")
    parser.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's; 1 with --jobs > 1)")
    parser.add_argument("--jobs", type=int, default=1,
                        help="contenders trained at once, each pinned to its own core with 1 thread")
    parser.add_argument("--seed", type=int, default=0, help="run.seed of the first run of every contender")
    parser.add_argument("--seeds", type=int, default=1,
                        help="train every contender N times (run.seed = --seed, --seed + 1, ...), each run a job "
                             "of its own; tables show mean ± std and min/max, targets use VERDICT_RULE")
    parser.add_argument("--in-process", action="store_true", help="train contenders in this process "
                        "(default: each in its own process; --quick implies it unless --isolate)")
    parser.add_argument("--isolate", action="store_true", help="each contender in its own process even with --quick")
    parser.add_argument("--out", default="bench-results/compare_accuracy.json", help="JSON path (CSV next to it)")
    parser.add_argument("--runs-dir", default=None, help="run directories (default: next to --out)")
    parser.add_argument("--record", default="accuracy", metavar="NAME",
                        help="write the result records benchmarks/results/NAME-PROBLEM.json (not with --quick)")
    parser.add_argument("--quick", action="store_true",
                        help="smoke run: ~100 samples, small grids and models, 0.05 min per contender, in process")
    args = parser.parse_args(argv)
    cores = sorted(os.sched_getaffinity(0))
    if args.seeds < 1:
        parser.error(f"--seeds must be >= 1, got {args.seeds}")
    if not 1 <= args.jobs <= len(cores):
        parser.error(f"--jobs must be between 1 and the {len(cores)} usable cores, got {args.jobs}")
    if args.jobs > 1:
        if args.threads not in (None, 1):
            parser.error("--jobs > 1 runs each contender with one thread on its own core; drop --threads")
        args.threads = 1
    if args.augment != "none" and set(args.problems) != {AUGMENT_PROBLEM[args.augment]}:
        only = AUGMENT_PROBLEM[args.augment]
        parser.error(f"--augment {args.augment} holds for {only} data only (petrov.train.augmentation); "
                     f"use --problems {only}")
    if args.budget_minutes is None:
        args.budget_minutes = 0.05 if args.quick else 20.0
    if args.quick:
        args.in_process = not args.isolate
        args.min_warmup_steps = 0
        args.batch_size = min(args.batch_size, 4)
        args.data_dir = str(Path(args.data_dir) / "quick")
    if args.jobs > 1:  # contenders must not share a process (threads, affinity)
        args.in_process = False
    return args


def main(argv: list[str] | None = None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        emit_result(run_contender_safely(spec))
        return
    args = parse(argv)
    info = machine_info(args.threads)
    print_machine(info)
    mode = f"{args.epochs} epochs each" if args.epochs else f"{args.budget_minutes:g} min training budget each"
    seeds = list(range(args.seed, args.seed + args.seeds))
    print(f"accuracy comparison: {mode}; batch {args.batch_size}; lr {args.lr:g}; seeds {seeds}"
          + ("  [quick mode: tiny data and models, numbers meaningless]" if args.quick else ""))
    probs = problems(args)
    if args.contenders:
        known = {c["key"] for p in probs.values() for c in contenders(p, args.quick)}
        unknown = sorted(set(args.contenders) - known)
        if unknown:
            raise SystemExit(f"unknown --contenders {unknown}; choose from {sorted(known)}")
    stamp = time.strftime("%Y%m%d-%H%M%S")
    runs_dir = Path(args.runs_dir or Path(args.out).parent / f"accuracy-runs-{stamp}")
    for problem in probs.values():
        ensure_data(problem, args.data_workers)
    jobs = [(name, problem, c, seed) for name, problem in probs.items() for c in contenders(problem, args.quick)
            if not args.contenders or c["key"] in args.contenders for seed in seeds]
    results = run_all(jobs, args, runs_dir)
    runs: dict[tuple[str, str], list[dict]] = {}
    for (name, _, c, _), result in zip(jobs, results):
        runs.setdefault((name, c["key"]), []).append(result)
    all_results: dict[str, list[dict]] = {name: [] for name in probs}
    for (name, _), group in runs.items():  # contenders in their order, each over its seeds
        all_results[name].append(aggregate(group, probs[name]))
    summaries = {name: report(problem, all_results[name]) for name, problem in probs.items()}
    out = Path(args.out)
    write_json(out, {"benchmark": "compare_accuracy", "machine": info, "verdict_rule": VERDICT_RULE,
                     "settings": {k: v for k, v in vars(args).items()},
                     "problems": {n: vars(p) for n, p in probs.items()}, "results": all_results,
                     "summary": summaries, "published_not_rerun": PUBLISHED})
    write_csv(out.with_suffix(".csv"), all_results, probs)
    if not args.quick:  # --quick's numbers are meaningless: no record
        for name, problem in probs.items():
            write_accuracy_record(args, problem, all_results[name])
    print(f"\nwrote {out.resolve()} and {out.with_suffix('.csv').resolve()}; runs in {runs_dir.resolve()}")


if __name__ == "__main__":
    sys.exit(main())
