"""Data-generation speed: seconds per 1000 samples, petrov's generators vs naive baselines in the same run.

    python benchmarks/data_generation.py            # full: Burgers 1000 x 8192, Darcy 85/141/421, Navier-Stokes
    python benchmarks/data_generation.py --quick    # smoke run, small counts (numbers are rough)
    python benchmarks/data_generation.py --only navier-stokes --ns-variants float32:0:1 float64:0:1

Burgers at 8192 (GRF + solve, batched) vs the naive baseline: a per-sample loop on the full 8192 grid with
the reference time step dt = 1e-4 and no batching; the baseline is timed on one sample (its cost does not
depend on the sample; over t = 0.01 only in --quick mode) and extrapolated. Darcy at 85, 141, 421 (GRF + threshold + solve with
worker processes) vs default scipy.sparse.linalg.spsolve per sample in this process, both timed on a few
samples and extrapolated to 1000. Navier-Stokes (nu = 1e-5, T = 20, 20 snapshots, stored 128^2: the
published NavierStokes_V1e-5_N1200_T20 setting) through ``generate_dataset`` with ``--workers`` processes,
for each variant PRECISION:SOLVE_GRID:CFL (solve grid 0: the stored grid), timed on ``--ns-samples``
samples and extrapolated to 1200 (the worker pool's start-up, timed apart, counted once). Targets: Burgers
1000 x 8192 under 30 s; Darcy 421 at least 2.5x faster than the baseline; Navier-Stokes 1200 samples
under 30 minutes. Wall-clock times: on a shared machine they depend on the load (printed).
"""
from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse.linalg as spla
import torch

from petrov.datasets import generate_dataset
from petrov.datasets.burgers import solve_burgers
from petrov.common.machine import cpu_model
from petrov.common.worker_pool import worker_pool
from petrov.datasets.darcy import darcy_matrix, solve_darcy
from petrov.datasets.grf import darcy_coefficient, neumann_grf_2d, periodic_grf_1d

BURGERS_TARGET_S = 30.0
DARCY_TARGET_RATIO = 2.5
NS_TARGET_S = 30 * 60.0  # 1200 samples
NS_SAMPLES = 1200


def per_1000(seconds: float, samples: int) -> float:
    return 1000.0 * seconds / samples


def burgers(n_samples: int, n_baseline: int, baseline_t: float, seed: int = 0) -> None:
    n = 8192
    start = time.perf_counter()
    u0 = periodic_grf_1d(n, seed, range(n_samples))
    solve_burgers(u0)
    ours = per_1000(time.perf_counter() - start, n_samples)

    start = time.perf_counter()
    for i in range(n_baseline):
        u = periodic_grf_1d(n, seed, [i])
        solve_burgers(u, t=baseline_t, n_internal=n, dt=1e-4, start_levels=0, batch_size=1)
    baseline = per_1000((time.perf_counter() - start) / baseline_t, n_baseline)
    note = f"{n_baseline} sample(s)" + (f" over t={baseline_t}, scaled to t=1" if baseline_t < 1 else "")
    print(f"Burgers 8192: {ours:8.1f} s/1000 ({n_samples} samples)   naive baseline {baseline:9.1f} s/1000 "
          f"(dt=1e-4, per sample, {note})   speed-up {baseline / ours:6.1f}x")
    met = ours < BURGERS_TARGET_S
    print(f"  target 1000 x 8192 under {BURGERS_TARGET_S:.0f} s: {'target met' if met else 'target not met'}")


def darcy(resolution: int, n_samples: int, n_baseline: int, pool, workers: int, seed: int = 0) -> float:
    start = time.perf_counter()
    a = darcy_coefficient(neumann_grf_2d(resolution, seed, range(n_samples)))
    solve_darcy(a, workers=pool if workers else 0)
    ours = per_1000(time.perf_counter() - start, n_samples)

    start = time.perf_counter()
    for i in range(n_baseline):
        a1 = darcy_coefficient(neumann_grf_2d(resolution, seed, [i]))[0]
        spla.spsolve(darcy_matrix(a1).tocsc(), np.ones((resolution - 2) ** 2))
    baseline = per_1000(time.perf_counter() - start, n_baseline)
    ratio = baseline / ours
    print(f"Darcy {resolution:4d}: {ours:8.1f} s/1000 ({n_samples} samples, {workers} workers)   "
          f"spsolve baseline {baseline:8.1f} s/1000 ({n_baseline} samples, extrapolated)   speed-up {ratio:5.1f}x")
    return ratio


def cpu_seconds() -> float:
    """CPU time of this process and of its ended children (worker processes, once their pool is shut down)."""
    own, children = resource.getrusage(resource.RUSAGE_SELF), resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def navier_stokes(n_samples: int, workers: int, variants: list[str], chunk: int | None) -> None:
    """Wall-clock time, and CPU time over the cores used (what the wall clock is on an idle machine: a
    shared one's load stretches the first, much less the second)."""
    start, cpu = time.perf_counter(), cpu_seconds()
    if workers:
        with worker_pool(workers):
            pass
    startup, startup_cpu = (time.perf_counter() - start, cpu_seconds() - cpu) if workers else (0.0, 0.0)
    cores = max(1, workers)
    print(f"Navier-Stokes nu=1e-5, T=20, 128^2 stored, {workers} worker processes (start-up {startup:.1f} s), "
          f"{n_samples} samples timed, extrapolated to {NS_SAMPLES}; load average {os.getloadavg()[0]:.1f}")
    for variant in variants:
        precision, solve_grid, cfl = variant.split(":")
        with tempfile.TemporaryDirectory() as folder:
            start, cpu = time.perf_counter(), cpu_seconds()
            generate_dataset("navier-stokes", Path(folder) / "ns.h5", n_samples, 128, seed=0, workers=workers,
                             chunk_size=chunk, progress=False, precision=precision, solve_grid=int(solve_grid),
                             cfl=float(cfl))
            seconds, cpu = time.perf_counter() - start - startup, cpu_seconds() - cpu - startup_cpu
        wall = startup + seconds * NS_SAMPLES / n_samples
        idle = startup + cpu / cores * NS_SAMPLES / n_samples
        met = "target met" if idle < NS_TARGET_S else "target not met"
        print(f"  {precision}, solve grid {int(solve_grid) or 128}, cfl {cfl}: {seconds / n_samples:6.2f} s/sample "
              f"wall, {cpu / n_samples:6.2f} CPU s/sample; {NS_SAMPLES} samples in {wall / 60:5.1f} min wall, "
              f"{idle / 60:5.1f} min from the CPU time over {cores} cores (30 min target: {met})", flush=True)


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="small counts for a smoke run")
    parser.add_argument("--workers", type=int, default=2, help="Darcy worker processes (0 = in process)")
    # One thread: batched small FFTs gained nothing from a second intra-op thread here and lost up to 10x
    # when the other core was busy (measured); compare --threads 2 on an idle machine.
    parser.add_argument("--threads", type=int, default=1, help="torch threads for the Burgers solve")
    parser.add_argument("--burgers-samples", type=int, default=None)
    parser.add_argument("--darcy-samples", type=int, nargs=3, default=None, metavar=("N85", "N141", "N421"))
    parser.add_argument("--ns-samples", type=int, default=None, help="Navier-Stokes samples timed (default 16)")
    parser.add_argument("--ns-variants", nargs="+", default=["float64:0:1"], metavar="PRECISION:GRID:CFL",
                        help="Navier-Stokes solver settings to time (default the recipe's: float64:0:1)")
    parser.add_argument("--ns-chunk", type=int, default=None, help="Navier-Stokes samples per chunk (batch)")
    parser.add_argument("--only", nargs="+", choices=["burgers", "darcy", "navier-stokes"],
                        default=["burgers", "darcy", "navier-stokes"])
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    quick = args.quick
    b_samples = args.burgers_samples or (64 if quick else 1000)
    d_samples = args.darcy_samples or ([8, 4, 2] if quick else [1000, 200, 50])
    d_baseline = [1, 1, 1] if quick else [20, 10, 4]
    print(f"{cpu_model()}; torch threads {torch.get_num_threads()}; Darcy workers {args.workers}; "
          f"{'quick mode: rough numbers' if quick else 'full mode'}")

    if "navier-stokes" in args.only:
        navier_stokes(args.ns_samples or (2 if quick else 16), args.workers, args.ns_variants, args.ns_chunk)
    if "burgers" in args.only:
        burgers(b_samples, n_baseline=1, baseline_t=0.01 if quick else 1.0)
    if "darcy" not in args.only:
        return
    pool = None
    if args.workers:
        start = time.perf_counter()
        pool = worker_pool(args.workers)
        print(f"(worker pool start-up {time.perf_counter() - start:.1f} s, not included below)")
    try:
        ratio = 0.0
        for resolution, count, base in zip((85, 141, 421), d_samples, d_baseline):
            ratio = darcy(resolution, count, base, pool, args.workers)
        met = ratio >= DARCY_TARGET_RATIO
        print(f"  target Darcy 421 at least {DARCY_TARGET_RATIO}x faster than spsolve: "
              f"{ratio:.1f}x, {'target met' if met else 'target not met'}")
    finally:
        if pool is not None:
            pool.shutdown()


if __name__ == "__main__":
    main()
