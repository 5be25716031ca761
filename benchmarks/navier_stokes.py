"""Navier–Stokes (2-D vorticity on the torus) at an equal CPU budget: petrov's marching2d against FNO-2D, FNO-3D,
Transolver and neuraloperator's FNO, on the same data, several seeds.

    python benchmarks/navier_stokes.py --quick                        # minutes: small file, short budgets
    python benchmarks/navier_stokes.py --budget-minutes 20 --jobs 2 --seeds 3   # the full comparison
    python benchmarks/navier_stokes.py ... --contenders marching2d arfno2d      # some of them

Data: ``navier-stokes`` at ν = 1e-5 (FNO's recipe: w0 ~ N(0, 7^{3/2} (−Δ + 49 I)^{−2.5}), forcing
0.1 (sin 2π(x+y) + cos 2π(x+y)), states at t = 1 .. 20), the ``navier-stokes-1e5`` preset's file (1300 samples
stored at 128 × 128), generated once by its recipe if ``--data`` does not exist (``--quick``: the
``navier-stokes-quick`` preset, ν = 1e-3, 5 states in and 5 out at 32 × 32).  The FNO benchmark's protocol: the
10 states after w0 in, the next 10 out (``data.first_state = 1``, ``data.history = 10``), training on the first 1000 samples at 64 × 64, model
selection on the next 100, the last 200 tested by free rollout at 32, 64 and 128 (strided from the stored
grid).  The metric: the relative L² of the whole predicted space-time block per sample (FNO's), mean over the
test samples; the per-state errors are in each run's ``eval/metrics.json``.

Contenders, each trained by ``petrov.train.train`` from the ``navier-stokes-1e5`` preset with its model swapped
in (``CONTENDERS``): petrov's ``marching2d`` (attention on a latent grid fixed in physical space, stepping from the
last 10 states), ``arfno2d`` (the FNO paper's FNO-2D: one state from the last 10, modes 12, width 20),
``fno3d`` (FNO-3D on space-time, all 10 states at once, modes 8, width 20), ``artransolver2d`` (Transolver
stepping as Neural-Solver-Library runs it) and neuraloperator's ``FNO`` as installed (2.0.0: its FNO with
``n_modes=(12, 12)``, ``hidden_channels=20``, the last 10 states as channels, stepping like FNO-2D).  Every
contender: the preset's recipe (Adam, OneCycle, clipping, the pushforward mode where it steps, one global
mean and std as normaliser).  Equal budget: each run is planned by the trainer's own probe of it
(``petrov.train.planning``) to fill 95% of ``--budget-minutes`` of one core, and stops at the budget.

Parallel and resumable: ``--jobs 2`` trains two runs at once, each pinned to its own core with one thread; a run
that finished keeps its ``result.json`` in its folder and is not trained again when the benchmark is rerun (an
interrupted run is started again from scratch).

Printed (with the CPU model; timings on a shared machine are noisy): per contender the parameters, epochs,
seconds per epoch, the test error at each resolution (mean ± std over the seeds), its spread over the
resolutions, and the targets: marching2d below every other contender by more than the spread; its error at 32
and at 128 within 1.10× of its error at 64.  The published figures (GPUs, ~500 epochs, the FNO paper's own data)
are printed beside, labelled as published.
"""
from __future__ import annotations

import argparse
import json
import os
from dataclasses import dataclass, field
from pathlib import Path

import torch

from petrov.datasets import generate_dataset
from petrov.evaluate import evaluate_resolutions, make_plots
from petrov.operators import build_model
from petrov.operators.blocks import count_parameters
from petrov.train.config import load_config
from petrov.train.planning import epochs_for_budget
from petrov.train.trainer import train

from _common import (
    SPREAD_RULE, emit_result, exceeds_spread, format_epochs, format_spread, format_table, machine_info, minutes,
    print_machine, run_pinned, run_worker, seed_stats, verdict, worker_spec, write_json,
)

PRESET = "navier-stokes-1e5"
NEURALOP = "neuralop_fno_marching"
# contender -> (model name, options over the preset's marching fields, training mode)
CONTENDERS: dict[str, tuple[str, dict, str]] = {
    "marching2d": ("marching2d", {}, "pushforward"),
    "arfno2d": ("arfno2d", {"width": 20, "modes": 12, "n_layers": 4}, "pushforward"),
    "fno3d": ("fno3d", {"width": 20, "modes": 8, "time_modes": 8, "n_layers": 4}, "rollout"),
    "artransolver2d": ("artransolver2d", {}, "pushforward"),
    "neuralop-fno": (NEURALOP, {"n_modes": [12, 12], "hidden_channels": 20}, "pushforward"),
}
# relative L2 over the 10 predicted states, 1000 training samples at 64 x 64, GPUs, ~500 epochs, FNO's data
# (the published tables of the Transolver / Transolver++ papers, which rerun the baselines on FNO's file)
PUBLISHED_1E5 = [("Transolver++", 0.0719), ("LNO", 0.0845), ("Transolver", 0.0900), ("ONO", 0.1195),
                 ("FactFormer", 0.1214), ("GNOT", 0.1380), ("Galerkin Transformer", 0.1401), ("FNO-2D", 0.1556),
                 ("FNO-3D", 0.1893)]
TARGET_FLAT = 1.10


# --- neuraloperator's FNO as a stepping model ---------------------------------------------------

@dataclass
class NeuralopMarchingConfig:
    time_steps: int = 10
    history: int = 10
    n_modes: list = field(default_factory=lambda: [12, 12])
    hidden_channels: int = 20
    periodic: bool = True
    residual: bool = False  # FNO-2D's: the state itself


def register_neuralop() -> None:
    """``neuralop.models.FNO`` (as installed) as a petrov marching model: the last ``history`` states as its
    input channels, one state out, rolled out by petrov's own stepping (``SteppingOperator``)."""
    from neuralop.models import FNO

    from petrov.operators.models import MODELS, register_model
    from petrov.operators.models.stepping import SteppingOperator

    if NEURALOP in MODELS.names():
        return

    class ChannelsFirst(torch.nn.Module):
        """neuraloperator's FNO on petrov's channels-last grids; it makes its own coordinate channels."""

        def __init__(self, config: NeuralopMarchingConfig):
            super().__init__()
            self.fno = FNO(n_modes=tuple(config.n_modes), in_channels=config.history, out_channels=1,
                           hidden_channels=config.hidden_channels)

        def forward(self, states: torch.Tensor, pos: torch.Tensor) -> torch.Tensor:  # (B, n, n, h) -> (B, n, n, 1)
            return self.fno(states.movedim(-1, 1)).movedim(1, -1)

    class NeuralopMarching(SteppingOperator):
        ndim = 2

        def __init__(self, config: NeuralopMarchingConfig):
            super().__init__(config, ChannelsFirst(config))

    register_model(NEURALOP, NeuralopMarchingConfig)(NeuralopMarching)


# --- the runs -----------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small file, short budgets (minutes)")
    p.add_argument("--budget-minutes", type=minutes, default=None, help="training budget per run (default 20)")
    p.add_argument("--data", default=None, help="navier-stokes file (generated if missing)")
    p.add_argument("--contenders", nargs="+", choices=sorted(CONTENDERS), default=sorted(CONTENDERS))
    p.add_argument("--runs", default="runs/bench-navier-stokes", help="directory of the run directories")
    p.add_argument("--out", default=None, help="JSON results (default RUNS/results.json)")
    p.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                   help="2: two runs at once, each pinned to its own core with one thread")
    p.add_argument("--seed", type=int, default=0, help="run.seed of every contender's first run")
    p.add_argument("--seeds", type=int, default=1, help="train every contender N times (run.seed = --seed, +1, ...)")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    return args


def settings(args) -> dict:
    """The protocol, read from the preset (``navier-stokes-quick`` with ``--quick``): its file, splits and
    resolutions, and the budget."""
    preset = "navier-stokes-quick" if args.quick else PRESET
    d = load_config(preset).data
    budget = args.budget_minutes if args.budget_minutes is not None else (1.0 if args.quick else 20.0)
    return {"preset": preset, "data": args.data or d.path, "n_train": d.n_train, "n_val": d.n_val,
            "n_test": d.n_test, "train_resolution": d.train_resolution, "resolutions": list(d.eval_resolutions),
            "history": d.history, "budget_minutes": budget, "quick": args.quick}


def ensure_data(s: dict) -> Path:
    """The preset's file, generated by its ``data.generate`` recipe if missing."""
    path = Path(s["data"])
    if not path.exists():
        g = load_config(s["preset"]).data.generate
        options = {k: v for k, v in g.options.items() if k != "workers"}
        generate_dataset(g.kind, path, g.n_samples, g.resolution, seed=g.seed, progress=True,
                         workers=g.options.get("workers", 0), **options)
    return path


def run_contender(name: str, s: dict, path: Path, run_dir: Path, seed: int) -> dict:
    """Train contender ``name`` (``run.seed = seed``) into ``run_dir`` planned to the budget, and evaluate it at every
    resolution; the result is also kept in ``run_dir/result.json`` (a rerun of the benchmark reads it back)."""
    done = run_dir / "result.json"
    if done.is_file():
        return json.loads(done.read_text())
    model, options, mode = CONTENDERS[name]
    if model == NEURALOP:
        register_neuralop()
    budget = s["budget_minutes"]
    base = load_config(s["preset"])
    marching = {"time_steps": base.model.options["time_steps"], "history": base.data.history}
    overrides = [f"run.seed={seed}", f"data.path={str(path)!r}", "run.progress=false", "run.threads=1",
                 f"run.time_budget_minutes={budget}", "run.fill_budget=false", f"model.name={model!r}",
                 "~model.options", f"loss.mode={mode!r}"]
    overrides += [f"model.options.{k}={json.dumps(v)}" for k, v in {**marching, **options}.items()]
    cfg = load_config(s["preset"], overrides)
    planned: dict = {}

    def plan(estimate) -> float:
        planned.update(epochs=epochs_for_budget(estimate, budget), step=estimate.step_seconds,
                       epoch=estimate.epoch_seconds)
        return planned["epochs"]

    result = train(cfg, run_dir, plan_epochs=plan, overwrite=True)
    rows = evaluate_resolutions(run_dir, out_dir=run_dir / "eval", per_sample=True)
    make_plots(run_dir, rows, run_dir / "eval", n_samples=2, resolution=s["train_resolution"])
    out = {"name": name, "seed": seed, "model": model, "mode": mode,
           "parameters": count_parameters(build_model(cfg.model.name, **cfg.model.options)),
           "epochs": result.epochs_completed, "planned_epochs": planned["epochs"], "stopped": result.stopped,
           "budget_used": result.train_seconds / (60.0 * budget),
           "seconds_per_epoch": result.train_seconds / max(result.epochs_completed, 1e-9),
           "probe_step_seconds": planned["step"], "best_val": result.best_val_rel_l2,
           "rows": [{k: v for k, v in r.items() if k != "per_sample"} for r in rows]}
    done.write_text(json.dumps(out))
    return out


def worker(spec: dict) -> None:
    os.sched_setaffinity(0, {spec["cpu"]})
    torch.set_num_threads(1)
    emit_result(run_contender(spec["name"], spec["settings"], Path(spec["path"]), Path(spec["run_dir"]), spec["seed"]))


def spread(run: dict) -> float:
    errors = [row["mean"] for row in run["rows"]]
    return max(errors) / min(errors)


def summarize(runs: list[dict], resolutions: list[int]) -> dict:
    spreads = [spread(r) for r in runs]
    train_at = runs[0]["rows"]
    return {"name": runs[0]["name"], "parameters": runs[0]["parameters"], "mode": runs[0]["mode"],
            "epochs": " ".join(f"{format_epochs(r['epochs'])}/{format_epochs(r['planned_epochs'])}" for r in runs),
            "budget_used": " ".join(f"{r['budget_used']:.0%}" for r in runs),
            "seconds_per_epoch": sum(r["seconds_per_epoch"] for r in runs) / len(runs),
            "errors": [seed_stats([r["rows"][i]["mean"] for r in runs]) for i in range(len(resolutions))],
            "spread": seed_stats(spreads), "spreads": spreads, "resolutions": [r["resolution"] for r in train_at]}


def main(argv=None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        worker(spec)
        return
    args = parse_args(argv)
    torch.set_num_threads(1)
    info = machine_info(1)
    print_machine(info)
    s = settings(args)
    path = ensure_data(s)
    runs = Path(args.runs) / ("quick" if args.quick else "full")
    print(f"data {path}: train {s['n_train']} at {s['train_resolution']}, test {s['n_test']} at {s['resolutions']}; "
          f"budget {s['budget_minutes']:.2f} min of one core per run")
    seeds = list(range(args.seed, args.seed + args.seeds))
    jobs = [(name, seed) for name in args.contenders for seed in seeds]

    def launch(job, cpu):
        name, seed = job
        run_dir = runs / f"{name}-seed{seed}"
        if cpu is None:
            return run_contender(name, s, path, run_dir, seed)
        spec = {"name": name, "seed": seed, "settings": s, "path": str(path), "run_dir": str(run_dir), "cpu": cpu}
        return run_worker(__file__, spec, env={"OMP_NUM_THREADS": "1"}, echo=True)

    results = run_pinned(jobs, args.jobs, launch)
    failed = [f"{name} seed {seed}: {r['error']}" for (name, seed), r in zip(jobs, results) if "error" in r]
    if failed:
        raise SystemExit("contender failed: " + "; ".join(failed))
    resolutions = s["resolutions"]
    groups = {name: summarize([r for r in results if r["name"] == name], resolutions) for name in args.contenders}
    headers = (["model", "params", "mode", "epochs/planned", "budget used", "s/epoch"]
               + [f"@{r}" for r in resolutions] + ["max/min"])
    table = [[g["name"], g["parameters"], g["mode"], g["epochs"], g["budget_used"], f"{g['seconds_per_epoch']:.1f}"]
             + [format_spread(st) for st in g["errors"]] + [format_spread(g["spread"], ".3f")] for g in groups.values()]
    over = f", mean ± std over seeds {seeds}" if args.seeds > 1 else ""
    print(f"\nrelative L2 of the predicted space-time block (10 states; mean over {s['n_test']} test samples{over}), "
          f"CPU {info['cpu']}, {s['budget_minutes']:g} minutes of one core per run, noisy shared machine")
    print(format_table(headers, table))
    print("published (GPUs, ~500 epochs, FNO's file; not rerun): "
          + ", ".join(f"{name} {value:.4f}" for name, value in PUBLISHED_1E5))
    targets = {}
    if "marching2d" in groups:
        ours = groups["marching2d"]
        train_index = resolutions.index(s["train_resolution"])
        for name, g in groups.items():
            if name != "marching2d":
                targets[f"marching2d below {name} at {s['train_resolution']}"] = exceeds_spread(
                    ours["errors"][train_index], g["errors"][train_index])
        targets[f"marching2d within {TARGET_FLAT}x of its error at {s['train_resolution']} at every resolution"] = all(
            st["mean"] <= TARGET_FLAT * ours["errors"][train_index]["mean"] for st in ours["errors"])
    print(f"targets ({args.seeds} seed{'s' if args.seeds > 1 else ''} per contender); {SPREAD_RULE}")
    for text, met in targets.items():
        print(f"  target {text}: {verdict(met)}")
    out = Path(args.out) if args.out else runs / "results.json"
    write_json(out, {"machine": info, "settings": {**s, "seeds": seeds}, "results": results,
                     "summary": {"contenders": groups, "targets": targets, "published": PUBLISHED_1E5}})
    print(f"saved {out}; plots in {runs}/*/eval/")


if __name__ == "__main__":
    main()
