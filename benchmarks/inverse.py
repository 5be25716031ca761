"""Inverse Darcy: accuracy, cost and calibration of every method, and the targets met or not.

    python benchmarks/inverse.py --quick          # a few minutes: 29-point grid, tiny models (numbers rough)
    python benchmarks/inverse.py --noises 0.01    # 141 -> 36, one noise level (learned training + methods)
    python benchmarks/inverse.py --methods learned,refined --noises 0,0.01,0.1
    python benchmarks/inverse.py --many 1000      # only the many-observations run (2 workers, killed, resumed)
    python benchmarks/inverse.py --many 1000 --many-method learned   # the same with the learned inverse (minutes)
    python benchmarks/inverse.py --validation ... # the same on the validation samples (settings were chosen there)
    python benchmarks/inverse.py --noises 0.01 --seeds 3   # the learned inverse trained 3 times (seeds 0, 1, 2)

The held-out samples are those of the earlier tables: the last ``n_test`` of a 470-sample file (seed 0;
at full size samples 450-469), observed once per noise level per the reference protocol (u normalised
point-wise with the statistics of the file's first ``n_stats`` samples, plus ``noise * N(0, 1)`` fixed
per sample). ``--validation`` evaluates samples ``[n_stats, n_stats + n_test)`` (400-419) instead: the
settings below were chosen there, never on the held-out samples. Methods:

- ``learned``: latent2d_inverse trained per noise level on a separate file (seed 1, ``n_train`` +
  ``n_val`` samples; the model with the best validation error is kept) for a fixed number of epochs that
  fits the training budget (``LEARNED``); its training CPU minutes are reported;
- ``pde``: L-BFGS-B with adjoint gradients from the constant 7.5, unknown on the observation grid,
  ``snap``, TV weight per noise level, ``pde_max_iter`` iterations; its iterates are traced
  (relative error against CPU seconds);
- ``pde-learned``: the same from the learned answer, traced;
- ``newton-learned``: the pde method with ``optimizer="gauss-newton"`` (projected Gauss-Newton-CG, one
  factorization per step) from the learned answer, ``newton_max_iter`` steps, traced (the curve
  ``refined`` stops on);
- ``refined``: the learned answer refined by the Gauss-Newton pde method until the data misfit reaches
  ``DISCREPANCY`` times the expected noise norm or ``refined_max_iter`` steps have run (60 at full
  size, chosen on validation traces for the 5-second budget), with the Laplace uncertainty (phase probabilities,
  90% error intervals; their CPU seconds are reported separately). The intervals' split-conformal
  factors are first measured on ``n_cal`` calibration samples (a file of their own, seed 3: 100 at
  full size), then the held-out samples' coverage and phase ECE are reported; ``--check N`` measures
  the coverage also on N fresh samples (a file of their own, seed 4): 20 samples resolve a coverage
  only to about +-0.07 (binomial), N = 100 to about +-0.03;
- ``surrogate`` (not by default): Adam through an fno2d forward model (trained once, clean data).

Columns: relative L2 of a on the coarse grid, phase accuracy, data misfit (solve with the recovered a;
against the clean and the noisy u), CPU seconds per sample (``time.process_time``, one thread;
learned starts included), training CPU minutes. Then the error-vs-CPU-seconds curves (mean relative
L2 of the iterate reached by t seconds), the calibration, the many-observations check and every
target as met / not met. Results: JSON (``--out``) and ``inverse-curves.png`` beside it.

Seeds: ``--seeds N`` trains the learned inverse N times per noise level (``run.seed`` = ``--seed``,
``--seed`` + 1, ...: initialization and data order) and runs every method that uses it with each; the
pde method from the constant start trains nothing and is deterministic, so it runs once. The tables
then give per method the mean ± sample standard deviation over the seeds and min / max, and a target
counts as met only by the rule ``_common.SPREAD_RULE`` (against a threshold t: mean + std <= t).
"""
from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    SPREAD_RULE,
    format_spread,
    format_table,
    machine_info,
    print_machine,
    seed_stats,
    write_json,
)
from records import seed_table, try_write_record  # noqa: E402

from petrov.datasets import fit_normalizer, generate_dataset  # noqa: E402
from petrov.evaluate.plots import read_epoch_log, save_figure  # noqa: E402
from petrov.inverse import interval_coverage, invert, relative_l2  # noqa: E402
from petrov.inverse.calibration import conformal_scale  # noqa: E402
from petrov.train.config import check_resumable, config_from_dict, load_config_json  # noqa: E402
from petrov.train.trainer import train  # noqa: E402

# file: 470 samples at 141 (seed 0) as before; held out: the last 20; normalizer statistics: the first 400
SIZES = {
    "quick": dict(native=29, coarse=8, n_total=96, n_stats=64, n_test=4, n_cal=20, n_train=96, n_val=16, epochs=6, train_resolution=None,
                  d_model=16, fine_width=8, latent=8, n_layers=1, width=8, modes=4, steps=60, pde_max_iter=60,
                  refined_max_iter=40, newton_max_iter=20, max_iter=40, many=24, many_chunk=2, curve=[0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5]),
    "full": dict(native=141, coarse=36, n_total=470, n_stats=400, n_test=20, n_cal=100, n_train=1000, n_val=100, epochs=52, train_resolution=None,
                 d_model=64, fine_width=32, latent=36, n_layers=2, width=20, modes=8, steps=300,
                 pde_max_iter=1000, refined_max_iter=20, newton_max_iter=100, max_iter=200, many=1000, many_chunk=8,
                 curve=[0.5, 1, 2, 3, 5, 7.5, 10, 15, 20, 30, 45, 60]),
}
TRAINING_BUDGET_MINUTES = 60.0  # the learned inverse's target budget (CPU minutes per noise level)
# learned: the darcy-inverse-quick architecture without its stencil grid (d_model 64, fine width 32, 2 layers,
# latent 36) on 1000 samples of its own file (seed 1) + 100 for validation, 52 epochs (~1 CPU minute each:
# ~55 of the 60).
# Evidence (1% noise, one thread): 1000 samples x 12 epochs took 12.5 CPU minutes for validation relL2
# 9.12e-2 (1500 steps), 400 x 40 epochs (the earlier benchmark, 2000 steps, ~15 minutes) 7.98e-2 on the
# held-out samples; train loss = validation loss in both: the error falls with the number of steps, not
# with the data, so the budget goes to steps (7 000 at 52 epochs) on data enough not to over-fit.
# Training on u strided to 71 instead (train_resolution=71: half the CPU per step, 100 epochs in the same
# budget, evaluated at 141) was slower to learn: validation relL2 6.50e-2 (at 71) at 60% of its schedule
# against 5.68e-2 (at 141) for the 141 run at 60% of its own (epoch 31), and was stopped there.
# bfloat16 autocast (run.amp) with 64 epochs in the same budget: validation 4.786e-2 against 4.921e-2,
# in 60.1 CPU minutes (at the budget's edge; fp32 kept, benchmarks/README.md).

# pde: the unknown on the observation grid, pooled to the output grid; TV weight chosen on the validation
# samples 400-402 (mean relL2(a): at 1% noise 2.82e-2 (1e-7), 2.08e-2 (3e-8), 2.36e-2 (1e-8); at 10% noise
# 1.25e-1 (3e-8), 8.75e-2 (1.5e-7), 6.99e-2 (3e-7), 6.72e-2 (5e-7), 7.55e-2 (1e-6), 1.01e-1 (3e-6)).
# snap chosen on 400-409 (without / with 1.5, 2.0, 2.5: clean 1.36e-2 / 1.31e-2, 1.33e-2, 1.34e-2; 1% 1.67e-2 /
# 1.53e-2, 1.53e-2, 1.54e-2; 10% 5.97e-2 / 5.66e-2, 5.55e-2, 5.66e-2).
PDE_SNAP = 2.0
# refined: stop when the misfit reaches DISCREPANCY x the expected noise norm; L-BFGS-B memory 50 for the
# learned starts. Chosen on the validation samples 400-402 at 1% noise from traces of pde started at the
# learned answer (1000 x 12 epochs model, relL2 9.9e-2 there), mean relL2 at the first iterate within tau x
# the noise norm and its CPU s: tau 1.0: 2.53e-2 in 10.0 s, 1.01: 2.67e-2 in 6.5 s, 1.02: 2.95e-2 in 5.4 s,
# 1.05: 3.23e-2 in 4.7 s, 1.1: 3.79e-2 in 3.9 s (the misfit flattens at the noise level while the error
# still falls, so tau > 1 stops early); mean relL2 at 5 s: memory 50 3.14e-2, memory 10 3.46e-2, the
# constant start 9.39e-2 (pde from the constant start converges to 2.0e-2 on these three samples).
# With the learned inverse of the 52-epoch budget (validation samples 400-419, every iteration traced, then
# stop rules replayed; mean relL2 / mean CPU s per sample): the misfit reaches the noise level after
# 60-300 iterations (~60 ms each, 45 of them the sparse factorization) and the error keeps falling slowly
# after it, so no discrepancy factor buys time cheaply: tau 1.0 uncapped 2.17e-2 / 6.46 s, 1.005 2.31e-2 /
# 4.65 s, 1.01 2.41e-2 / 4.20 s, 1.02 2.58e-2 / 3.72 s; tau 1.0 capped at 100, 120, 150 iterations 2.27e-2 /
# 4.63 s, 2.23e-2 / 4.93 s, 2.21e-2 / 5.22 s (the traced curve at 5 s: 2.20e-2). (A warm-up at the 71
# grid, 60 iterations at a tenth of the cost, left 130 and 300 iterations to do at 141 on samples
# 400-401: no time saved.) Gauss-Newton instead (optimizer="gauss-newton", CG 20 / 0.1; the same samples,
# traced to 60 steps, replayed): one factorization per step serves every Hessian product, and 20-60 steps
# do: tau 1.0 capped at 20, 30, 40, 60 steps 2.03e-2 / 2.18 s, 1.93e-2 / 2.84 s, 1.91e-2 / 3.15 s,
# 1.89e-2 / 3.72 s (the traced curve at 5 s: 1.74e-2; tau below 1 fits further, e.g. 0.99 with 30 steps
# 1.81e-2 / 3.95 s, but stops short of the noise level are what the discrepancy principle is for).
# Then (same protocol, two runs at a time, one per core) the line search started from twice the previous
# step's alpha with quadratic-interpolation backtracking (the accepted alpha was below 1 in 80% of the
# steps, mostly 1/8-1/4, at 3.2 trials per step; now 1.65) and the TV Hessian assembled as a sparse matrix
# (torch's double backward cost ~1 ms per CG product): CG 20 capped at 60 steps 1.89e-2 / 3.28 s before
# the sparse Hessian; with it, by CG iterations per step and step cap: CG 30 cap 20 1.86e-2 / 1.81 s,
# cap 30 1.84e-2 / 2.08 s; CG 50 cap 15 1.80e-2 / 1.99 s, cap 20 1.77e-2 / 2.25 s, cap 30 1.76e-2 /
# 2.60 s; CG 80 cap 15 1.73e-2 / 2.54 s, cap 20 1.68e-2 / 3.25 s; CG 120 cap 20 1.69e-2 / 4.57 s.
# refined: CG 50 (the config default), refined_max_iter = 20, tau 1: the lowest validation error within
# 2.5 CPU s per sample, half the budget (the held-out samples took 1.45x the validation ones' seconds with
# the previous settings, and CPU seconds of identical iterates moved by 30% between runs).
DISCREPANCY = 1.0
LEARNED_START_LBFGS_MEMORY = 50
# uncertainty: the Laplace prior (scale in units of a, correlation length), chosen on the validation samples
# 400-429 at 1% noise (refined answers, mean relL2 2.47e-2; rank 100, 200 samples, ~1.5 CPU s per sample).
# Phase ECE / spread max/min of the ratio actual error / posterior median error over the 30 samples:
# (3, 0.02) 0.0030 / 2.75; (10, 0.02) 0.0010 / 5.5; (30, 0.02) 0.0395 / 9.3; (3, 0.05) 0.0036 / 2.42;
# (10, 0.05) 0.0030 / 2.80 (thresholding the answer instead: ECE 0.0040). The posterior's own 90% error
# quantiles are far too narrow (max/min 1.2-2.1 against the ratios' 2.4-9; coverage 0-0.23): the
# posterior median error predicts each sample's error up to a factor, which split conformal calibrates:
# the interval is [c_low, c_high] x the posterior median, the factors the order statistics of the ratios
# on the calibration samples (n_cal after the evaluated ones: 420-449 at full size), per noise level.
# (3, 0.05) gives the sharpest intervals (smallest spread) with an ECE far below 0.05.
PRIOR = {"prior_std": 3.0, "prior_length": 0.05, "posterior_rank": 100, "posterior_samples": 200}

METHODS = ["learned", "pde", "pde-learned", "newton-learned", "refined", "surrogate"]
TRACED = ("pde", "pde-learned", "newton-learned")  # methods whose iterates give error-vs-seconds curves
DEFAULT_METHODS = "learned,pde,pde-learned,newton-learned,refined"
TARGETS = {"refined_error": 2e-2, "refined_seconds": 5.0, "learned_error": 4e-2, "coverage": (0.85, 0.95),
           "phase_ece": 0.05}


def pde_reg_weight(noise: float) -> float:
    """The TV weight of the pde method at this noise level (chosen at 0.01 and 0.1, above)."""
    return 3e-8 if noise <= 0.01 else 5e-7


def _timed_train(cfg: dict, run_dir: Path) -> float:
    """Train (or reuse a finished run in ``run_dir``) and return the training CPU minutes (of a reused
    run: the sum of its epochs' seconds from its ``log.jsonl``, one thread, so CPU ~ wall-clock)."""
    if (run_dir / "best.pt").exists():  # reused only when trained with this very config
        check_resumable(load_config_json(run_dir / "config.json"), config_from_dict(cfg), run_dir)
        return sum(row["seconds"] for row in read_epoch_log(run_dir)) / 60.0
    t0 = time.process_time()
    train(config_from_dict(cfg), run_dir)
    return (time.process_time() - t0) / 60.0


def learned_config(s: dict, train_file: Path, noise: float, seed: int = 0) -> dict:
    """The learned inverse's training: ``n_train`` + ``n_val`` samples of its own file, ``epochs``,
    ``run.seed`` = ``seed``."""
    return {"data": {"path": str(train_file), "n_train": s["n_train"], "n_val": s["n_val"], "n_test": 0,
                     "kind": "darcy-inverse", "coarse_resolution": s["coarse"], "noise": noise,
                     "train_resolution": s["train_resolution"]},
            "model": {"name": "latent2d_inverse",
                      "options": {"coarse_size": s["coarse"], "latent_size": s["latent"], "latent_kernel": 3,
                                  "d_model": s["d_model"], "fine_width": s["fine_width"],
                                  "n_layers": s["n_layers"], "n_heads": 4, "norm": "layer"}},
            "optim": {"epochs": s["epochs"], "batch_size": 8, "min_warmup_steps": 0},
            "run": {"device": "cpu", "progress": False, "threads": 1, "seed": int(seed)}}


SEED_FREE = {"pde"}  # methods that use no trained model: one run whatever --seeds


def seed_summary(records: list[dict]) -> dict[tuple[str, float], dict]:
    """``{(method, noise): record}`` with every figure the mean over the seeds and ``<figure>_stats``
    (:func:`_common.seed_stats`) beside it."""
    out = {}
    for key in sorted({(r["method"], r["noise"]) for r in records}):
        group = [r for r in records if (r["method"], r["noise"]) == key]
        numbers = [k for k, v in group[0].items() if isinstance(v, (int, float)) and k not in ("noise", "seed")]
        merged = {"method": key[0], "noise": key[1], "seeds": [r.get("seed") for r in group]}
        for k in numbers:
            st = seed_stats([r.get(k) for r in group])
            merged[k], merged[f"{k}_stats"] = (st["mean"], st) if st else (None, None)
        out[key] = merged
    return out


def within(r: dict, key: str, limit: float) -> bool:
    """The figure ``key`` of a seed summary is at most ``limit`` by the spread rule (mean + std <= limit)."""
    st = r.get(f"{key}_stats")
    return st is not None and st["mean"] + st["std"] <= limit


def forward_config(s: dict, train_file: Path) -> dict:
    return {"data": {"path": str(train_file), "n_train": s["n_train"], "n_val": s["n_val"], "n_test": 0,
                     "kind": "darcy"},
            "model": {"name": "fno2d", "options": {"width": s["width"], "modes": s["modes"]}},
            "optim": {"epochs": s["epochs"], "batch_size": 8, "min_warmup_steps": 0},
            "run": {"device": "cpu", "progress": False, "threads": 1}}


# --- curves and calibration -------------------------------------------------------------------------

def error_at_seconds(result, seconds: list[float]) -> np.ndarray:
    """``(len(seconds),)`` mean over samples of the relative error of the last traced iterate reached
    within ``t`` CPU seconds (the start's error before the first); plus each sample's start offset
    (the learned answer's seconds) added to the trace's clock."""
    rows = []
    for i, info in enumerate(result.info):
        trace = info["trace"]
        offset = info["cpu_seconds"] - trace["cpu_seconds"][-1]  # the learned start, if any
        t = trace["cpu_seconds"] + offset
        errors = relative_l2(trace["a"], np.repeat(result.a_true[i:i + 1], len(trace["a"]), 0))
        reached = np.searchsorted(t, seconds, side="right") - 1
        rows.append(errors[np.maximum(reached, 0)])
    return np.mean(rows, axis=0)


def plot_curves(curves: dict, seconds: list[float], path: Path) -> Path:
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.0, 4.2))
    for (label, noise), values in sorted(curves.items()):
        ax.plot(seconds, values, marker="o", ms=3, label=f"{label}, noise {noise:g}")
    ax.set_xscale("log"), ax.set_yscale("log")
    ax.set_xlabel("CPU seconds per sample"), ax.set_ylabel("mean relative L2 of a")
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=7)
    ax.set_title("pde iterates from the constant and from the learned start")
    return save_figure(fig, path)


# --- many observations ------------------------------------------------------------------------------

def _chunks_done(out: Path) -> int:
    return len(list((out / ".partial-inversion").glob("chunk-*.npz")))


def many_observations(s: dict, work: Path, inverse_run: Path, n: int, noise: float, method: str = "refined") -> dict:
    """``n`` observations (a file of their own, seed 2) through ``petrov invert --method METHOD
    --workers 2``: once killed (SIGKILL) half-way and resumed by the same command, once uninterrupted;
    the two answers must be identical.  Each method has its own output folders."""
    data = work / f"darcy-{s['native']}-many{n}.h5"
    if not data.exists():
        generate_dataset("darcy", data, n, resolution=s["native"], seed=2, workers=2, progress=False)
    settings = [f"--set={k}={json.dumps(v)}" for k, v in _settings(s, method, noise).items() if k not in ("steps", "grid")]
    cmd = [sys.executable, "-m", "petrov", "invert", str(data), "--method", method, "--inverse-run",
           str(inverse_run), "--noise", f"{noise:g}", "--grid", str(s["coarse"]), "--workers", "2",
           "--chunk-size", str(s["many_chunk"]), "--no-plots", "--no-progress", *settings]
    n_chunks = -(-n // s["many_chunk"])
    out = {"method": method}
    tag = f"{n}-{method}"  # a finished folder is reused: one per size and method
    for name in ("killed", "whole"):
        target = work / f"many-{tag}-{name}"
        t0 = time.monotonic()
        if not (target / "coefficients.h5").exists():
            proc = subprocess.Popen(cmd + ["--out", str(target)], start_new_session=True)
            if name == "killed":
                while (target / ".partial-inversion").is_dir() is False or _chunks_done(target) < n_chunks // 2:
                    if proc.poll() is not None:
                        raise RuntimeError(f"the run to be killed ended first (status {proc.returncode})")
                    time.sleep(0.02)  # the learned method finishes a chunk in a fraction of a second
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
                out["chunks_at_kill"], out["chunks"] = _chunks_done(target), n_chunks
                print(f"  killed after {out['chunks_at_kill']} of {n_chunks} chunks; resuming", flush=True)
                proc = subprocess.Popen(cmd + ["--out", str(target)], start_new_session=True)
            if proc.wait() != 0:
                raise RuntimeError(f"petrov invert failed (status {proc.returncode})")
        out[f"{name}_wall_seconds"] = time.monotonic() - t0
    with h5py.File(work / f"many-{tag}-killed" / "coefficients.h5") as h1, \
            h5py.File(work / f"many-{tag}-whole" / "coefficients.h5") as h2:
        out["identical"] = bool(np.array_equal(h1["a"][()], h2["a"][()]))
        out["n"] = int(len(h1["a"]))
    # a kill after the last chunk would test nothing: count it only when work was left to resume
    out["interrupted"] = "chunks_at_kill" in out and out["chunks_at_kill"] < n_chunks
    return out


# --- the run ----------------------------------------------------------------------------------------

def _settings(s: dict, method: str, noise: float) -> dict:
    base = {"grid": s["coarse"], "max_iter": s["max_iter"], "steps": s["steps"]}
    if method in ("pde", "pde-learned", "newton-learned", "refined"):
        base.update(pde_grid=s["native"], max_iter=s["pde_max_iter"], snap=PDE_SNAP, reg_weight=pde_reg_weight(noise),
                    discrepancy=DISCREPANCY, **PRIOR)
    if method in ("pde-learned", "refined"):
        base.update(lbfgs_memory=LEARNED_START_LBFGS_MEMORY)
    if method in ("newton-learned", "refined"):
        base.update(optimizer="gauss-newton", max_iter=s["newton_max_iter"])
    if method == "refined":  # the iteration cap chosen on validation samples for the 5-second budget (above)
        base.update(max_iter=s["refined_max_iter"])
    return base


def darcy_file(work: Path, tag: str, native: int, n: int, seed: int) -> Path:
    """``work/darcy-{native}{tag}.h5``, ``n`` Darcy samples of seed ``seed``, generated on first use."""
    path = work / f"darcy-{native}{tag}.h5"
    if not path.exists():
        generate_dataset("darcy", path, n, resolution=native, seed=seed, progress=False)
    return path


def run_method(method: str, s: dict, data: Path, indices: slice, noise: float, stats, inverse_dir: Path,
               forward_dir: Path | None, extra: dict | None = None, noise_seed: int = 0):
    name = {"pde-learned": "pde", "newton-learned": "pde"}.get(method, method)
    return invert(data, name, indices=indices, noise=noise, noise_seed=noise_seed, noise_stats=stats, inverse_run=inverse_dir,
                  forward_run=forward_dir if method == "surrogate" else None,
                  start="learned" if method in ("surrogate", "pde-learned", "newton-learned") else "midpoint",
                  settings={**_settings(s, method, noise), **(extra or {})}, uncertainty=method == "refined",
                  trace=method in TRACED)


def calibrate(s: dict, data: Path, samples: slice, noise: float, stats, inverse_dir: Path) -> dict:
    """Split-conformal factors of the refined method's error intervals from the calibration samples
    ``samples`` of the file ``data`` (noise seed 3: not the realizations of the other files' samples)."""
    cal = run_method("refined", s, data, samples, noise, stats, inverse_dir, None, noise_seed=3)
    errors, median = cal.metrics["rel_l2_a"], cal.metrics["error_median"]
    scale = conformal_scale(errors, median, cal.config.interval)
    raw = np.stack([i["uncertainty"]["posterior_interval"] for i in cal.info])
    print(f"  calibration on {data.name} samples {samples.start}-{samples.stop - 1}: error / posterior median in "
          f"[{np.min(errors / median):.2f}, {np.max(errors / median):.2f}], factors {scale[0]:.3f}, {scale[1]:.3f}; "
          f"coverage of the posterior's own intervals {interval_coverage(errors, raw):.2f}", flush=True)
    return {"error_scale": list(scale), "file": data.name, "samples": [samples.start, samples.stop], "ratios": (errors / median).tolist(),
            "posterior_coverage": interval_coverage(errors, raw), "phase_ece": cal.summary()["phase_ece"]}


def coverage_check(s: dict, work: Path, n: int, noise: float, stats, inverse_dir: Path, extra: dict) -> dict:
    """The refined method with the calibrated intervals on ``n`` fresh samples (their own file, seed 4):
    coverage, phase ECE, relL2 and CPU seconds (a coverage measured on 20 samples is +-0.07)."""
    check = run_method("refined", s, darcy_file(work, f"-check{n}", s["native"], n, seed=4), slice(0, n), noise,
                       stats, inverse_dir, None, extra, noise_seed=4)
    m = check.summary()
    out = {"n": n, **{k: m[k] for k in ("coverage", "phase_ece", "rel_l2_a", "cpu_seconds")}}
    print(f"  refined on {n} fresh samples: coverage {out['coverage']:.2f}, phase ECE {out['phase_ece']:.4f}, "
          f"relL2 {out['rel_l2_a']:.3e}, {out['cpu_seconds']:.2f} CPU s/sample", flush=True)
    return out


def verdict(ok: bool) -> str:
    return "met" if ok else "NOT met"


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, a few minutes")
    p.add_argument("--noises", default="0,0.01,0.1", help="comma-separated noise levels")
    p.add_argument("--methods", default=DEFAULT_METHODS, help="comma-separated subset of " + ", ".join(METHODS))
    p.add_argument("--validation", action="store_true",
                   help="evaluate the validation samples (where the settings were chosen), not the held-out ones")
    p.add_argument("--many", type=int, default=None, metavar="N",
                   help="only the many-observations run, N observations (--quick runs it after the methods)")
    p.add_argument("--many-method", default="refined", choices=["learned", "pde", "refined"],
                   help="the method of the many-observations run (default refined)")
    p.add_argument("--no-many", action="store_true", help="--quick: skip the many-observations run")
    p.add_argument("--check", type=int, default=0, metavar="N",
                   help="refined: measure the intervals' coverage also on N fresh samples (their own file)")
    p.add_argument("--seed", type=int, default=0, help="run.seed of the first learned inverse (default 0)")
    p.add_argument("--seeds", type=int, default=1,
                   help="train the learned inverse N times (seeds --seed, --seed + 1, ...) and run its methods with each")
    p.add_argument("--work", default=None, help="data and run directory (default bench-results/inverse[-quick])")
    p.add_argument("--out", default=None, help="JSON results (default bench-results/inverse[-quick].json)")
    p.add_argument("--record", default=None, metavar="NAME", help="write the result record benchmarks/results/"
                   "NAME.json (default inverse, inverse-validation with --validation; not with --quick)")
    args = p.parse_args(argv)
    if args.seeds < 1 or args.seed < 0 or args.check < 0:
        p.error("--seeds must be >= 1, --seed and --check >= 0")
    seeds = list(range(args.seed, args.seed + args.seeds))
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        p.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    torch.set_num_threads(1)
    mode = "quick" if args.quick else "full"
    s = SIZES[mode]
    suffix = "-quick" if args.quick else ""
    work = Path(args.work or f"bench-results/inverse{suffix}")
    out = Path(args.out or f"bench-results/inverse{suffix}{'-validation' if args.validation else ''}.json")
    noises = [float(x) for x in args.noises.split(",")]
    info = machine_info(1)
    print_machine(info)
    work.mkdir(parents=True, exist_ok=True)

    data = darcy_file(work, "", s["native"], s["n_total"], seed=0)
    train_file = darcy_file(work, "-train", s["native"], s["n_train"] + s["n_val"], seed=1)
    lo = s["n_stats"] if args.validation else s["n_total"] - s["n_test"]
    samples = slice(lo, lo + s["n_test"])
    stats = fit_normalizer(data, "x", indices=range(s["n_stats"]), kind="darcy-inverse")
    print(f"mode {mode}: grid {s['native']} -> {s['coarse']}, {'validation' if args.validation else 'held-out'} "
          f"samples {samples.start}-{samples.stop - 1}; learned: {s['n_train']} training samples, {s['epochs']} epochs")

    records, curves, rows = [], {}, []
    run_methods = args.many is None
    forward_dir = work / "forward"
    forward_minutes = _timed_train(forward_config(s, train_file), forward_dir) \
        if run_methods and "surrogate" in methods else 0.0
    runs = [(noise, seed) for noise in noises for seed in seeds] if run_methods else []
    for noise, seed in runs:
        tag = "" if seed == 0 else f"-seed{seed}"  # seed 0 keeps the run directories of before
        inverse_dir = work / f"inverse-noise{noise:g}{tag}"
        inverse_minutes = _timed_train(learned_config(s, train_file, noise, seed), inverse_dir)
        minutes = {"learned": inverse_minutes, "surrogate": forward_minutes + inverse_minutes, "pde": 0.0,
                   "pde-learned": inverse_minutes, "newton-learned": inverse_minutes, "refined": inverse_minutes}
        for method in methods:
            if method in SEED_FREE and seed != seeds[0]:
                continue
            extra, calibration = None, None
            if method == "refined":
                cal_file = darcy_file(work, f"-cal{s['n_cal']}", s["native"], s["n_cal"], seed=3)
                calibration = calibrate(s, cal_file, slice(0, s["n_cal"]), noise, stats, inverse_dir)
                extra = {"error_scale": calibration["error_scale"]}
            result = run_method(method, s, data, samples, noise, stats, inverse_dir, forward_dir, extra)
            m = result.summary()
            record = {"method": method, "noise": noise, "seed": None if method in SEED_FREE else seed, **m,
                      "training_cpu_minutes": minutes[method]}
            if calibration is not None:
                raw = np.stack([i["uncertainty"]["posterior_interval"] for i in result.info])
                record.update(calibration=calibration,
                              posterior_coverage=interval_coverage(result.metrics["rel_l2_a"], raw))
                if args.check:
                    record["check"] = coverage_check(s, work, args.check, noise, stats, inverse_dir, extra)
            if method in TRACED:
                curve = error_at_seconds(result, s["curve"])
                curves.setdefault((method, noise), []).append(curve)
                record["curve"] = dict(zip(map(str, s["curve"]), curve.tolist()))
            records.append(record)
            rows.append([method, f"{noise:g}", "-" if method in SEED_FREE else str(seed), f"{m['rel_l2_a']:.3e}", f"{m['phase_accuracy']:.3f}",
                         f"{m['misfit_clean']:.2e}", f"{m['misfit_noisy']:.2e}", f"{m['cpu_seconds']:.2f}",
                         f"{minutes[method]:.2f}", f"{m['coverage']:.2f}" if "coverage" in m else "",
                         f"{m['phase_ece']:.4f}" if "phase_ece" in m else "",
                         f"{m['uncertainty_cpu_seconds']:.2f}" if "uncertainty_cpu_seconds" in m else ""])
            print(f"  {method:11s} noise {noise:<5g} seed {record['seed']}  relL2(a) {m['rel_l2_a']:.3e}  ({m['cpu_seconds']:.2f} CPU s/sample)",
                  flush=True)
    if rows:
        print()
        print(f"inverse Darcy, {s['native']} -> {s['coarse']}, samples {samples.start}-{samples.stop - 1}, CPU: {info['cpu']}")
        print(format_table(["method", "noise", "seed", "relL2 a", "phase acc", "misfit clean", "misfit noisy", "CPU s/sample",
                            "train CPU min", "coverage 90%", "phase ECE", "UQ CPU s"], rows))
    curves = {k: np.mean(v, axis=0) for k, v in curves.items()}  # mean over the seeds
    if curves:
        print("\nmean relL2(a) of the iterate reached within t CPU seconds per sample (learned start included):")
        print(format_table(["curve", "noise"] + [f"{t:g}s" for t in s["curve"]],
                           [[k[0], f"{k[1]:g}"] + [f"{v:.2e}" for v in vals] for k, vals in sorted(curves.items())]))
        plot_curves(curves, s["curve"], out.with_name(out.stem + "-curves.png"))

    many = None
    if args.many is not None or (args.quick and not args.no_many):  # at full size a run of its own (--many)
        n_many = args.many or s["many"]
        print(f"\nmany observations: {n_many}, {args.many_method}, --workers 2, killed once and resumed", flush=True)
        _timed_train(learned_config(s, train_file, 0.01), work / "inverse-noise0.01")
        many = many_observations(s, work, work / "inverse-noise0.01", n_many, 0.01, args.many_method)
        print(f"  identical to the uninterrupted run: {many['identical']} ({many})")

    by = seed_summary(records)
    if len(seeds) > 1 and by:
        print(f"\nover the seeds {seeds} (pde: one run): mean ± std, min / max")
        print(format_table(["method", "noise", "relL2 a", "min / max", "CPU s/sample", "coverage 90%", "phase ECE"],
                           [[m, f"{nz:g}", format_spread(r["rel_l2_a_stats"]),
                             f"{r['rel_l2_a_stats']['min']:.3e} / {r['rel_l2_a_stats']['max']:.3e}",
                             format_spread(r["cpu_seconds_stats"], ".2f"),
                             format_spread(r.get("coverage_stats"), ".2f"), format_spread(r.get("phase_ece_stats"), ".4f")]
                            for (m, nz), r in by.items()]))
        print(f"verdict rule: {SPREAD_RULE}")
    print("\ntargets:")
    checks = []
    if ("refined", 0.01) in by:
        r = by[("refined", 0.01)]
        checks.append(("refined at 1%: relL2 <= 2e-2 in <= 5 CPU s/sample",
                       f"{r['rel_l2_a']:.3e} in {r['cpu_seconds']:.2f} s",
                       within(r, "rel_l2_a", TARGETS["refined_error"])
                       and within(r, "cpu_seconds", TARGETS["refined_seconds"])))
    if ("learned", 0.01) in by:
        r = by[("learned", 0.01)]
        checks.append(("learned at 1%: relL2 <= 4e-2, trained in <= 60 CPU min",
                       f"{r['rel_l2_a']:.3e}, {r['training_cpu_minutes']:.1f} min",
                       within(r, "rel_l2_a", TARGETS["learned_error"])
                       and within(r, "training_cpu_minutes", TRAINING_BUDGET_MINUTES)))
    for (method, noise), r in sorted(by.items()):
        if "coverage" in r:
            lo_c, hi_c = TARGETS["coverage"]
            checks.append((f"{method} at {noise:g}: 90% intervals cover 85-95%", f"{r['coverage']:.2f}",
                           lo_c <= r["coverage"] - r["coverage_stats"]["std"]
                           and r["coverage"] + r["coverage_stats"]["std"] <= hi_c))
            checks.append((f"{method} at {noise:g}: phase ECE <= 0.05", f"{r['phase_ece']:.4f}",
                           within(r, "phase_ece", TARGETS["phase_ece"])))
            for rec in (x for x in records if (x["method"], x["noise"]) == (method, noise) and "check" in x):
                c = rec["check"]
                checks.append((f"{method} at {noise:g} (seed {rec['seed']}): 90% intervals cover 85-95% of {c['n']} fresh samples",
                               f"{c['coverage']:.2f}", lo_c <= c["coverage"] <= hi_c))
    if many is not None:
        checks.append((f"{many['n']} observations ({many['method']}), --workers 2, killed and resumed = uninterrupted",
                       f"identical: {many['identical']}, killed after {many.get('chunks_at_kill')} of {many.get('chunks')} chunks",
                       many["identical"] and many["interrupted"]))
    for what, value, ok in checks:
        print(f"  {what}: {value} -> {verdict(ok)}")
    write_json(out, {"machine": info, "mode": mode, "sizes": s, "noises": noises, "seeds": seeds,
                     "summary": [{k: v for k, v in r.items()} for r in by.values()], "verdict_rule": SPREAD_RULE, "samples": [samples.start, samples.stop],
                     "validation": args.validation, "results": records, "many": many,
                     "targets": [{"target": w, "value": v, "met": ok} for w, v, ok in checks]})
    print(f"saved {out}")
    if not args.quick and records:  # --quick's numbers are meaningless: no record
        write_inverse_record(args, records, s, samples)
    return 0


def write_inverse_record(args, results: list[dict], s: dict, samples: slice) -> None:
    """benchmarks/results/RECORD.json (benchmarks/records.py): relL2 of a per method, noise level and seed
    of the learned inverse (a seed-free method, run once, under the first), with CPU seconds per sample and
    training CPU minutes as facts."""
    runs = [{**r, "seed": args.seed if r["seed"] is None else r["seed"]} for r in results]
    facts: dict[str, dict] = {}
    for r in runs:  # per method: each figure per noise level, a value per seed
        f = facts.setdefault(r["method"], {"seed_free": r["method"] in SEED_FREE})
        for k in ("cpu_seconds", "training_cpu_minutes"):
            f.setdefault(k, {}).setdefault(f"{r['noise']:g}", []).append(r[k])
    name = args.record or ("inverse-validation" if args.validation else "inverse")
    try_write_record(name, seed_table(runs, lambda r: r["method"], lambda r: {f"{r['noise']:g}": r["rel_l2_a"]}),
                     facts=facts, threads=1,
                     settings={"sizes": s, "samples": [samples.start, samples.stop], "methods": args.methods,
                               "seeds": args.seeds, "seed": args.seed},
                     metric=f"relative L2 of the recovered coefficient a, mean over samples {samples.start}-"
                            f"{samples.stop - 1}; columns: the noise level")


if __name__ == "__main__":
    sys.exit(main())
