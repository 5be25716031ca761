"""Time marching on Burgers trajectories at an equal CPU budget: marching1d vs the autoregressive FNO.

    python benchmarks/marching.py --quick                      # about a minute: small file, 25 s per contender
    python benchmarks/marching.py --budget-minutes 20          # the full comparison (see benchmarks/README.md)
    python benchmarks/marching.py --budget-minutes 20 --jobs 2 # the same, both contenders at once on 2 cores
    python benchmarks/marching.py --budget-minutes 20 --jobs 2 --seeds 3   # each contender 3 times

Data: ``burgers-trajectory`` (nu = 0.1, t in [0, 1], 20 steps of 0.05), generated once into ``--data``
(default ``data/burgers-trajectory-8192.h5``, 700 samples at 8192; quick: 120 samples at 2048).
Train on the first ``--n-train`` at ``--train-resolution`` (1024; quick 512), model selection on the
next 64 (quick 16), test on the last 100 (quick 16) by free rollout at every resolution from 256 to
the native grid (strided).

Contenders: the shipped presets ``burgers-marching`` (marching1d) and ``burgers-arfno`` (arfno1d), each
trained by ``petrov.train.train`` with its preset's recipe and training mode, one thread.  Equal budget:
each run is planned by the trainer's own probe of it (``petrov.train.planning``: its training steps, its
validation batches -- free rollouts -- and its checkpoints, timed once warm) to fill 95% (``BUDGET_FRACTION``) of
``--budget-minutes`` with whole epochs and the share of one more (``optim.epochs`` with a fraction); once
its epochs are timed the OneCycle schedule is refitted to the planned time, and the trainer also stops at
the budget.  The share of the budget each run trained is printed.

Printed (with the CPU model; timings on a shared machine are noisy): per contender the parameters,
epochs, seconds per epoch, and the rollout relative L2 at t = 1 per resolution (mean over the test
samples), the spread max/min over resolutions, and the targets: <= 1e-2 at t = 1, flat within 1.1x
from the coarsest to the finest grid, marching1d <= arfno1d.  ``--out`` (JSON) keeps every row,
including the per-time errors; each run directory holds ``eval/metrics.json`` and the plots
(error_vs_time.png, spacetime.png).

Seeds: ``--seeds N`` trains each contender N times with ``run.seed`` = ``--seed``, ``--seed`` + 1, ... (the
initialization and the data order), each run a job of its own (``--jobs 2``: two at a time, each pinned
to its own core).  Every figure is then the mean ± sample standard deviation over the seeds (a second table
gives min / max), and the targets follow ``_common.SPREAD_RULE``: t = 1 error mean + std <= 1e-2 at every
resolution; every seed's max/min spread within 1.1x; marching1d mean + std <= arfno1d mean - std at every
resolution.
"""
from __future__ import annotations

import argparse
import os
from pathlib import Path

import torch

from petrov.datasets import generate_dataset
from petrov.operators import build_model
from petrov.operators.blocks import count_parameters
from petrov.evaluate import evaluate_resolutions, make_plots
from petrov.train.config import load_config
from petrov.train.planning import epochs_for_budget
from petrov.train.trainer import train

from _common import (
    SPREAD_RULE, emit_result, exceeds_spread, format_epochs, format_spread, format_table, machine_info, minutes,
    print_machine, run_pinned, run_worker, seed_stats, verdict, worker_spec, write_json,
)
from records import seed_table, try_write_record

CONTENDERS = {"marching1d": "burgers-marching", "arfno1d": "burgers-arfno"}
TARGET_T1 = 1e-2
TARGET_FLAT = 1.1


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--quick", action="store_true", help="small file, short budgets (about a minute)")
    p.add_argument("--budget-minutes", type=minutes, default=None, help="training budget per contender")
    p.add_argument("--data", default=None, help="trajectory file (generated if missing)")
    p.add_argument("--train-resolution", type=int, default=None)
    p.add_argument("--n-train", type=int, default=None)
    p.add_argument("--runs", default="runs/bench-marching", help="directory of the run directories")
    p.add_argument("--out", default=None, help="JSON results (default RUNS/results.json)")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                   help="2: train two runs at once, each in its own process pinned to its own core "
                        "(one thread each; half the wall-clock on 2 cores)")
    p.add_argument("--seed", type=int, default=0, help="run.seed of every contender's first run")
    p.add_argument("--seeds", type=int, default=1,
                   help="train every contender N times (run.seed = --seed, --seed + 1, ...), each run a job of its own")
    p.add_argument("--record", default="marching", metavar="NAME",
                   help="write the result record benchmarks/results/NAME.json (not with --quick)")
    args = p.parse_args(argv)
    if args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    return args


def settings(args) -> dict:
    quick = args.quick
    return {
        "data": args.data or ("data/burgers-trajectory-2048.h5" if quick else "data/burgers-trajectory-8192.h5"),
        "native": 2048 if quick else 8192,
        "n_samples": 120 if quick else 700,
        "n_train": args.n_train or (64 if quick else 512),
        "n_val": 16 if quick else 64,
        "n_test": 16 if quick else 100,
        "train_resolution": args.train_resolution or (512 if quick else 1024),
        "budget_minutes": args.budget_minutes if args.budget_minutes is not None else (25 / 60 if quick else 20.0),
        "quick": quick,
    }


def ensure_data(s: dict) -> Path:
    path = Path(s["data"])
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        generate_dataset("burgers-trajectory", path, s["n_samples"], s["native"], seed=0, progress=False,
                         time_steps=20)
    return path


def run_contender(name: str, s: dict, path: Path, runs: Path, resolutions: list[int], seed: int = 0,
                  run_name: str | None = None) -> dict:
    """Train contender ``name`` with ``run.seed = seed`` into ``runs / run_name`` (default ``name``), planned to
    the budget from the trainer's probe of the run, and evaluate it at every resolution."""
    budget = s["budget_minutes"]
    overrides = [f"run.seed={seed}", f"data.path={str(path)!r}", f"data.train_resolution={s['train_resolution']}",
                 f"data.n_train={s['n_train']}", f"data.n_val={s['n_val']}", f"data.n_test={s['n_test']}",
                 f"data.eval_resolutions={resolutions}", "run.progress=false", "run.threads=1",
                 f"run.time_budget_minutes={budget}",
                 # the file ensure_data wrote (the presets describe the full one)
                 f"data.generate.n_samples={s['n_samples']}", f"data.generate.resolution={s['native']}"]
    if s["quick"]:  # a few dozen steps: the presets' 50-step rise would be most of the run
        overrides.append("optim.min_warmup_steps=0")
    cfg = load_config(CONTENDERS[name], overrides)
    planned: dict = {}

    def plan(estimate) -> float:
        planned.update(epochs=epochs_for_budget(estimate, budget), step=estimate.step_seconds,
                       rollout=estimate.eval_seconds, epoch=estimate.epoch_seconds)
        return planned["epochs"]

    run_dir = runs / (run_name or name)
    result = train(cfg, run_dir, plan_epochs=plan)
    rows = evaluate_resolutions(run_dir, out_dir=run_dir / "eval", per_time=True)
    make_plots(run_dir, rows, run_dir / "eval", n_samples=2, resolution=s["train_resolution"])
    return {"name": name, "seed": seed, "preset": CONTENDERS[name], "mode": cfg.loss.mode,
            "parameters": count_parameters(build_model(cfg.model.name, **cfg.model.options)),
            "epochs": result.epochs_completed, "planned_epochs": planned["epochs"],
            "scheduled_epochs": result.epochs_scheduled, "stopped": result.stopped,
            "budget_used": result.train_seconds / (60.0 * budget),
            "seconds_per_epoch": result.train_seconds / max(result.epochs_completed, 1e-9),
            "probe_seconds_per_epoch": planned["epoch"], "probe_step_seconds": planned["step"],
            "probe_rollout_seconds": planned["rollout"], "best_val": result.best_val_rel_l2, "rows": rows}


def worker(spec: dict) -> None:
    """One run in its own process, pinned to one core with one thread (``--jobs 2``)."""
    os.sched_setaffinity(0, {spec["cpu"]})
    torch.set_num_threads(1)
    emit_result(run_contender(spec["name"], spec["settings"], Path(spec["path"]), Path(spec["runs"]),
                              spec["resolutions"], spec["seed"], spec["run_name"]))


def spread(run: dict) -> float:
    """A run's t = 1 error max/min over the resolutions."""
    t1 = [row["per_time_mean"][-1] for row in run["rows"]]
    return max(t1) / min(t1)


def summarize(runs: list[dict], resolutions: list[int]) -> dict:
    """One contender over its seeds: the t = 1 error per resolution and the max/min spread as
    :func:`_common.seed_stats`, and the spread of every seed."""
    spreads = [spread(r) for r in runs]
    return {"name": runs[0]["name"], "parameters": runs[0]["parameters"], "mode": runs[0]["mode"],
            "seeds": [r["seed"] for r in runs],
            "epochs": " ".join(f"{format_epochs(r['epochs'])}/{format_epochs(r['planned_epochs'])}" for r in runs),
            "budget_used": " ".join(f"{r['budget_used']:.0%}" for r in runs),
            "seconds_per_epoch": sum(r["seconds_per_epoch"] for r in runs) / len(runs),
            "t1": [seed_stats([r["rows"][i]["per_time_mean"][-1] for r in runs]) for i in range(len(resolutions))],
            "spread": seed_stats(spreads), "spreads": spreads}


def main(argv=None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        worker(spec)
        return
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    info = machine_info(args.threads)
    print_machine(info)
    s = settings(args)
    path = ensure_data(s)
    resolutions = [r for r in (256, 512, 1024, 2048, 4096, 8192) if r <= s["native"]]
    runs = Path(args.runs) / ("quick" if args.quick else "full")
    if runs.exists() and any(runs.iterdir()):
        raise SystemExit(f"{runs} already holds runs; remove it or pass another --runs")
    print(f"data {path}: train {s['n_train']} at {s['train_resolution']}, test {s['n_test']}; "
          f"budget {s['budget_minutes']:.2f} min per contender, {args.threads} thread(s)")
    seeds = list(range(args.seed, args.seed + args.seeds))
    jobs = [(name, seed) for name in CONTENDERS for seed in seeds]

    def run_name(name: str, seed: int) -> str:
        return name if args.seeds == 1 else f"{name}-seed{seed}"

    if args.jobs == 1:
        results = [run_contender(name, s, path, runs, resolutions, seed, run_name(name, seed)) for name, seed in jobs]
    else:
        cores = sorted(os.sched_getaffinity(0))
        if len(cores) < 2:
            raise SystemExit(f"--jobs 2 needs 2 usable cores, this process may use {len(cores)}")

        def launch(job, cpu):
            name, seed = job
            spec = {"name": name, "seed": seed, "run_name": run_name(name, seed), "settings": s, "path": str(path),
                    "runs": str(runs), "resolutions": resolutions, "cpu": cpu}
            return run_worker(__file__, spec, env={"OMP_NUM_THREADS": "1"}, echo=True)

        results = run_pinned(jobs, 2, launch)
        failed = [f"{name} seed {seed}: {r['error']}" for (name, seed), r in zip(jobs, results) if "error" in r]
        if failed:
            raise SystemExit("contender failed: " + "; ".join(failed))

    for r in results:  # kept per run in the JSON, as before
        r["spread"] = spread(r)
    groups = {name: summarize([r for r in results if r["name"] == name], resolutions) for name in CONTENDERS}
    headers = (["model", "params", "mode", "epochs/planned", "budget used", "s/epoch"] + [f"t=1 @{r}" for r in resolutions]
               + ["max/min"])
    table = [[g["name"], g["parameters"], g["mode"], g["epochs"], g["budget_used"], f"{g['seconds_per_epoch']:.1f}"]
             + [format_spread(st) for st in g["t1"]] + [format_spread(g["spread"], ".3f")] for g in groups.values()]
    over = f", mean ± std over seeds {seeds}" if args.seeds > 1 else ""
    print(f"\nrollout relative L2 at t = 1 (mean over {s['n_test']} test samples{over}), CPU {info['cpu']}, "
          f"noisy shared machine")
    print(format_table(headers, table))
    if args.seeds > 1:
        print("min / max over the seeds:")
        print(format_table(["model"] + [f"t=1 @{r}" for r in resolutions] + ["max/min"],
                           [[g["name"]] + [f"{st['min']:.3e} / {st['max']:.3e}" for st in g["t1"]]
                            + [f"{g['spread']['min']:.3f} / {g['spread']['max']:.3f}"] for g in groups.values()]))
    march, ar = groups["marching1d"], groups["arfno1d"]
    targets = {
        f"t=1 <= {TARGET_T1:g} at every resolution (marching1d)":
            all(st["mean"] + st["std"] <= TARGET_T1 for st in march["t1"]),
        f"flat within {TARGET_FLAT}x over resolutions (marching1d, every seed)":
            max(march["spreads"]) <= TARGET_FLAT,
        "marching1d <= arfno1d at every resolution":
            all(exceeds_spread(m, a, strict=False) for m, a in zip(march["t1"], ar["t1"])),
    }
    print(f"targets ({args.seeds} seed{'s' if args.seeds > 1 else ''} per contender)")
    print(f"  verdict rule: {SPREAD_RULE}")
    for text, met in targets.items():
        print(f"  target {text}: {verdict(met)}")
    out = Path(args.out) if args.out else runs / "results.json"
    write_json(out, {"machine": info, "settings": {**s, "seeds": seeds}, "results": results,
                     "summary": {"contenders": groups, "targets": targets, "verdict_rule": SPREAD_RULE}})
    print(f"saved {out}; plots in {runs}/*/eval/")
    if not args.quick:  # --quick's numbers are meaningless: no record
        write_marching_record(args, s, results)


def write_marching_record(args, s: dict, results: list[dict]) -> None:
    """benchmarks/results/RECORD.json (benchmarks/records.py): each contender's rollout relL2 at t = 1 per
    resolution and seed, its parameters, epochs and budget used per seed."""
    facts = {name: {"preset": preset, "train_resolution": s["train_resolution"],
                    **{k: [r[k] for r in results if r["name"] == name] for k in
                       ("parameters", "epochs", "planned_epochs", "budget_used", "seconds_per_epoch", "spread")}}
             for name, preset in CONTENDERS.items()}
    values = seed_table(results, lambda r: r["name"],
                        lambda r: {row["resolution"]: row["per_time_mean"][-1] for row in r["rows"]})
    try_write_record(args.record, values, facts=facts, settings={**s, "seeds": args.seeds, "seed": args.seed,
                                                                  "jobs": args.jobs},
                     metric=f"rollout relative L2 at t = 1, mean over the {s['n_test']} test samples",
                     device="auto", threads=1 if args.jobs > 1 else args.threads)


if __name__ == "__main__":
    main()
