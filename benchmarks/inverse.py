"""Inverse Darcy: method x noise table of coefficient error, phase accuracy, data misfit and cost.

    python benchmarks/inverse.py --quick          # ~1 min: 29-point grid, tiny models, 4 samples (numbers rough)
    python benchmarks/inverse.py                  # 141-point grid -> 36, 400 training samples, 20 held out
    python benchmarks/inverse.py --methods learned,pde --noises 0,0.1   # no forward model to train
    python benchmarks/inverse.py --seeds 3 --jobs 2   # every trained model 3 times, two jobs at a time

For each noise level (0, 0.01, 0.1 by default) the same held-out samples (the file's last ``n_test``)
are observed once per the reference protocol (u normalised point-wise with the learned inverse run's
statistics, plus ``noise * N(0, 1)`` fixed per sample) and inverted by

- ``learned``: a latent2d_inverse (the ``darcy-inverse-quick`` preset's architecture) trained at that
  noise level (an amortized inverse, as the reference's);
- ``surrogate``: Adam on the coefficient through an fno2d forward operator (trained once, on clean
  data), started from the learned inverse's output;
- ``pde``: L-BFGS-B with adjoint gradients on petrov's finite-difference solver (no training), the
  unknown on the observation grid (``pde_grid``), its values within ``PDE_SNAP`` of 3 or 12 set to
  that value (``snap``) and the result average-pooled to the output grid.

Columns: relative L2 of a on the coarse grid, phase accuracy, data misfit (solve with the recovered a;
relative L2 against the clean and the noisy u), CPU seconds per sample (inversion only; the surrogate's
includes its learned start), training CPU minutes the method needs (learned: its inverse model;
surrogate: the forward model plus the inverse model of its start). The regularization weight is the
default of ``InversionConfig`` (surrogate) or ``pde_reg_weight(noise)`` (pde), chosen, like ``PDE_SNAP``,
on samples outside the held-out set. One thread per job.

Seeds: ``--seeds N`` trains every model N times with ``run.seed`` = ``--seed``, ``--seed`` + 1, ... (the
initialization and the data order) and inverts with each: learned with its seed's inverse model,
surrogate with its seed's forward and inverse models; pde trains nothing and is deterministic, so it runs
once per noise level (std 0).  Every training and every inversion is a job of its own; ``--jobs 2`` runs
two at a time, each in its own process pinned to its own core.  The table then gives the mean ± sample
standard deviation over the seeds (a second table: min / max of relL2 a), and any comparison drawn from it
follows ``_common.SPREAD_RULE`` (printed with the table and stored in the JSON).
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from _common import (  # noqa: E402
    SPREAD_RULE, emit_result, format_spread, format_table, machine_info, print_machine, run_pinned, run_worker,
    seed_stats, worker_spec, write_json,
)

from petrov.datasets import generate_dataset  # noqa: E402
from petrov.train.config import config_from_dict  # noqa: E402
from petrov.inverse import invert  # noqa: E402
from petrov.evaluate.plots import read_epoch_log  # noqa: E402
from petrov.train.trainer import train  # noqa: E402

SIZES = {
    "quick": dict(native=29, coarse=8, n_train=64, n_val=8, n_test=4, epochs=12, d_model=16, fine_width=8, width=8, modes=4,
                  max_iter=40, steps=60, pde_max_iter=40),
    "full": dict(native=141, coarse=36, n_train=400, n_val=50, n_test=20, epochs=40, d_model=64, fine_width=32, width=20,
                 modes=8, max_iter=200, steps=300, pde_max_iter=1000),
}
# pde: the unknown on the observation grid, pooled to the output grid. TV weight chosen on the validation
# samples 400-402 of the full file (the held-out ones are 450-469), mean relL2(a): at 1% noise 2.82e-2
# (1e-7), 2.08e-2 (3e-8), 2.36e-2 (1e-8); at 10% noise 1.25e-1 (3e-8), 8.75e-2 (1.5e-7), 6.99e-2 (3e-7),
# 6.72e-2 (5e-7), 7.55e-2 (1e-6), 1.01e-1 (3e-6). More noise wants more regularization.


# snap (fine values within it of 3 or 12 set to that value before pooling), chosen on the validation
# samples 400-409 with the weights above, mean relL2(a) without / with snap 1.5, 2.0, 2.5: clean
# 1.36e-2 / 1.31e-2, 1.33e-2, 1.34e-2; at 1% noise 1.67e-2 / 1.53e-2, 1.53e-2, 1.54e-2; at 10% 5.97e-2 /
# 5.66e-2, 5.55e-2, 5.66e-2 (rounding every value to its phase, 4.5: 1.80e-2 and 6.25e-2 at 1 and 10%).
PDE_SNAP = 2.0


def pde_reg_weight(noise: float) -> float:
    """The TV weight of the pde method at this noise level (chosen at 0.01 and 0.1, above)."""
    return 3e-8 if noise <= 0.01 else 5e-7


METHODS = ["learned", "surrogate", "pde"]


def _timed_train(cfg: dict, run_dir: Path) -> float:
    """Train (or reuse a finished run in ``run_dir``) and return the training CPU minutes (of a reused
    run: the sum of its epochs' seconds from its ``log.jsonl``, one thread, so CPU ~ wall-clock)."""
    if (run_dir / "best.pt").exists():
        return sum(row["seconds"] for row in read_epoch_log(run_dir)) / 60.0
    t0 = time.process_time()
    train(config_from_dict(cfg), run_dir)
    return (time.process_time() - t0) / 60.0


def _configs(s: dict, data: Path, noise: float, seed: int = 0) -> tuple[dict, dict]:
    split = {"path": str(data), "n_train": s["n_train"], "n_val": s["n_val"], "n_test": s["n_test"]}
    common = {"optim": {"epochs": s["epochs"], "batch_size": 8, "min_warmup_steps": 0},
              "run": {"device": "cpu", "progress": False, "seed": seed}}
    inverse = {"data": {**split, "kind": "darcy-inverse", "coarse_resolution": s["coarse"], "noise": noise},
               "model": {"name": "latent2d_inverse",
                         "options": {"coarse_size": s["coarse"], "latent_size": s["coarse"], "latent_kernel": 3,
                                     "d_model": s["d_model"], "fine_width": s["fine_width"], "n_layers": 2,
                                     "n_heads": 4, "norm": "layer"}}, **common}
    forward = {"data": {**split, "kind": "darcy"},
               "model": {"name": "fno2d", "options": {"width": s["width"], "modes": s["modes"]}}, **common}
    return inverse, forward


def run_job(job: dict) -> dict:
    """One training (``kind`` "train": the training CPU minutes) or one inversion (``kind`` "invert": the
    metrics of :meth:`InversionResult.summary`), in this process, one thread."""
    torch.set_num_threads(1)
    if job["kind"] == "train":
        return {"minutes": _timed_train(job["cfg"], Path(job["run_dir"]))}
    noise, method = job["noise"], job["method"]
    settings = {"grid": job["coarse"], "max_iter": job["max_iter"], "steps": job["steps"]}
    if method == "pde":
        settings.update(pde_grid=job["native"], max_iter=job["pde_max_iter"], snap=PDE_SNAP,
                        reg_weight=pde_reg_weight(noise))
    forward_run = Path(job["forward_run"]) if job["forward_run"] else None
    result = invert(Path(job["data"]), method, indices=slice(*job["held_out"]), noise=noise, noise_seed=0,
                    inverse_run=Path(job["inverse_run"]), forward_run=forward_run,
                    start="learned" if method == "surrogate" else "midpoint", settings=settings)
    return result.summary()


def run_jobs(jobs: list[dict], n_jobs: int) -> list[dict]:
    """Every job, ``n_jobs`` at a time (each then in its own process pinned to its own core, one thread);
    a failed job stops the benchmark."""
    def launch(job, cpu):
        if cpu is None:
            return run_job(job)
        return run_worker(__file__, {**job, "cpu": cpu}, env={"OMP_NUM_THREADS": "1"}, echo=True)

    results = run_pinned(jobs, n_jobs, launch)
    failed = [f"{j['kind']} {j.get('method', j.get('run_dir'))}: {r['error']}" for j, r in zip(jobs, results)
              if "error" in r]
    if failed:
        raise SystemExit("job failed: " + "; ".join(failed))
    return results


def main(argv=None) -> int:
    spec = worker_spec(argv)
    if spec is not None:
        os.sched_setaffinity(0, {spec.pop("cpu")})
        emit_result(run_job(spec))
        return 0
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--quick", action="store_true", help="tiny sizes, ~1 minute")
    p.add_argument("--noises", default="0,0.01,0.1", help="comma-separated noise levels")
    p.add_argument("--work", default=None, help="data and run directory (default bench-results/inverse[-quick])")
    p.add_argument("--out", default=None, help="JSON results (default bench-results/inverse[-quick].json)")
    p.add_argument("--methods", default=",".join(METHODS),
                   help="comma-separated subset of " + ", ".join(METHODS) + " (the forward model is trained "
                        "only for surrogate)")
    p.add_argument("--seed", type=int, default=0, help="run.seed of the first run of every trained model")
    p.add_argument("--seeds", type=int, default=1,
                   help="train every model N times (run.seed = --seed, --seed + 1, ...) and invert with each")
    p.add_argument("--jobs", type=int, default=1, choices=(1, 2),
                   help="2: two trainings / inversions at once, each in its own process pinned to its own core")
    args = p.parse_args(argv)
    methods = [m.strip() for m in args.methods.split(",") if m.strip()]
    unknown = sorted(set(methods) - set(METHODS))
    if unknown or not methods:
        p.error(f"--methods: unknown {', '.join(unknown) or '(none given)'}; choose from {', '.join(METHODS)}")
    if args.seeds < 1:
        p.error(f"--seeds must be >= 1, got {args.seeds}")
    if args.jobs > len(os.sched_getaffinity(0)):
        p.error(f"--jobs {args.jobs} needs as many usable cores, this process may use {len(os.sched_getaffinity(0))}")
    torch.set_num_threads(1)
    mode = "quick" if args.quick else "full"
    s = SIZES[mode]
    suffix = "-quick" if args.quick else ""
    work = Path(args.work or f"bench-results/inverse{suffix}")
    out = Path(args.out or f"bench-results/inverse{suffix}.json")
    noises = [float(x) for x in args.noises.split(",")]
    seeds = list(range(args.seed, args.seed + args.seeds))
    info = machine_info(1)
    print_machine(info)
    print(f"mode {mode}: grid {s['native']} -> {s['coarse']}, {s['n_train']} training samples, "
          f"held-out samples: the last {s['n_test']}, training {s['epochs']} epochs, seeds {seeds}, "
          f"{args.jobs} job(s) at a time")

    data = work / f"darcy-{s['native']}.h5"
    n_total = s["n_train"] + s["n_val"] + s["n_test"]
    if not data.exists():
        data.parent.mkdir(parents=True, exist_ok=True)
        generate_dataset("darcy", data, n_total, resolution=s["native"], seed=0, progress=False)

    def tag(seed: int) -> str:  # one seed keeps the run directories' names of before
        return "" if args.seeds == 1 else f"-seed{seed}"

    def forward_dir(seed):
        return work / f"forward{tag(seed)}"

    def inverse_dir(noise, seed):
        return work / f"inverse-noise{noise:g}{tag(seed)}"

    # stage 1: every training (forward models only for the surrogate), one job each
    trainings = [{"kind": "train", "cfg": _configs(s, data, 0.0, seed)[1], "run_dir": str(forward_dir(seed))}
                 for seed in seeds if "surrogate" in methods]
    trainings += [{"kind": "train", "cfg": _configs(s, data, noise, seed)[0], "run_dir": str(inverse_dir(noise, seed))}
                  for noise in noises for seed in seeds]
    minutes = {job["run_dir"]: r["minutes"] for job, r in zip(trainings, run_jobs(trainings, args.jobs))}

    # stage 2: every inversion, one job each (pde trains nothing and is deterministic: once per noise)
    common = {"kind": "invert", "data": str(data), "held_out": [n_total - s["n_test"], n_total], "coarse": s["coarse"],
              "native": s["native"], "max_iter": s["max_iter"], "steps": s["steps"], "pde_max_iter": s["pde_max_iter"]}
    inversions = []
    for noise in noises:
        for method in methods:
            for seed in (seeds[:1] if method == "pde" else seeds):
                inv, fwd = str(inverse_dir(noise, seed)), str(forward_dir(seed))
                train_minutes = {"learned": minutes[inv], "surrogate": minutes.get(fwd, 0.0) + minutes[inv],
                                 "pde": 0.0}[method]
                inversions.append({**common, "method": method, "noise": noise,
                                   "seed": None if method == "pde" else seed, "inverse_run": inv, "forward_run": fwd if method == "surrogate" else None,
                                   "training_cpu_minutes": train_minutes})
    records = []
    for job, m in zip(inversions, run_jobs(inversions, args.jobs)):
        records.append({"method": job["method"], "noise": job["noise"], "seed": job["seed"], **m,
                        "training_cpu_minutes": job["training_cpu_minutes"]})
        print(f"  {job['method']:9s} noise {job['noise']:<5g} seed {job['seed']}  relL2(a) {m['rel_l2_a']:.3e}  "
              f"({m['cpu_seconds']:.2f} CPU s/sample)", flush=True)

    keys = ["rel_l2_a", "phase_accuracy", "misfit_clean", "misfit_noisy", "cpu_seconds", "training_cpu_minutes"]
    summary, rows, spread = [], [], []
    for noise in noises:
        for method in methods:
            group = [r for r in records if r["method"] == method and r["noise"] == noise]
            stats = {k: seed_stats([r[k] for r in group]) for k in keys}
            summary.append({"method": method, "noise": noise, "seeds": [r["seed"] for r in group], **stats})
            rows.append([method, f"{noise:g}", format_spread(stats["rel_l2_a"]),
                         format_spread(stats["phase_accuracy"], ".3f"), format_spread(stats["misfit_clean"], ".2e"), format_spread(stats["misfit_noisy"], ".2e"),
                         f"{stats['cpu_seconds']['mean']:.2f}", f"{stats['training_cpu_minutes']['mean']:.2f}"])
            a = stats["rel_l2_a"]
            spread.append([method, f"{noise:g}", f"{a['min']:.3e} / {a['max']:.3e}", str(a["n"])])
    print()
    over = f"; mean ± std over seeds {seeds} (pde: one run, no training)" if args.seeds > 1 else ""
    print(f"inverse Darcy, {s['native']} -> {s['coarse']}, {s['n_test']} held-out samples{over}, CPU: {info['cpu']}")
    print(format_table(["method", "noise", "relL2 a", "phase acc", "misfit clean", "misfit noisy",
                        "CPU s/sample", "train CPU min"], rows))
    if args.seeds > 1:
        print("relL2 a, min / max over the seeds:")
        print(format_table(["method", "noise", "min / max", "runs"], spread))
        print(f"verdict rule for comparisons across seeds: {SPREAD_RULE}")
    print("published (Galerkin Transformer README, 141 -> 36, learned; not rerun): 1.5-2e-2 clean, "
          "2.5e-2 at 0.01, 7-8e-2 at 0.1")
    write_json(out, {"machine": info, "mode": mode, "sizes": s, "noises": noises, "seeds": seeds, "results": records,
                     "summary": summary, "verdict_rule": SPREAD_RULE})
    print(f"saved {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
