"""Mesh data generation speed: seconds per 1000 darcy-mesh samples (each solved on four meshes: level0,
level1, level2 of ~5,000 nodes, and a remesh of about the same size), written to an HDF5 file.

    python benchmarks/mesh_data.py                    # 100 samples, 2 workers, extrapolated to 1000
    python benchmarks/mesh_data.py --quick            # 8 samples: a smoke run (rough numbers)
    python benchmarks/mesh_data.py --profile 10       # also: where the time goes, per stage, in this process

Target: 1000 samples in at most 300 s with 2 worker processes. The figure is the wall-clock time of
``generate_dataset("darcy-mesh", ...)`` including the pool start-up, so a longer run only improves it; on a
shared machine it depends on the load (run it under ``flock /tmp/petrov-cpu.lock``).
"""
from __future__ import annotations

import argparse
import collections
import tempfile
import time
from pathlib import Path

import numpy as np
from _common import cpu_model

from petrov.datasets import generate_dataset
from petrov.datasets.grf import darcy_coefficient
from petrov.datasets.mesh import DarcyMeshParams, evaluate_series, mesh_domain, mesh_info, sample_domain
from petrov.datasets.mesh import series_coefficients, solve_darcy_fem, to_skfem
from petrov.datasets.mesh.darcy import STREAM_DOMAIN, STREAM_MESH
from petrov.datasets.mesh.fem import centroids, from_skfem
from petrov.datasets.mesh.sample import mesh_sample

TARGET_S = 300.0  # per 1000 samples with 2 workers


def generation(n_samples: int, workers: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mesh.h5"
        start = time.perf_counter()
        generate_dataset("darcy-mesh", path, n_samples, seed=0, workers=workers, progress=False)
        seconds = time.perf_counter() - start
        info = mesh_info(path)
        size = path.stat().st_size
    per_1000 = 1000.0 * seconds / n_samples
    nodes = ", ".join(f"{k} {v['nodes']['mean']:,.0f}" for k, v in info["levels"].items())
    print(f"darcy-mesh: {n_samples} samples in {seconds:.1f} s with {workers} workers = {per_1000:.1f} s per 1000 "
          f"samples ({size / n_samples / 2**20:.2f} MiB per sample on disk)")
    print(f"  mean nodes per sample: {nodes}")
    print(f"  target 1000 samples in {TARGET_S:.0f} s: {'met' if per_1000 <= TARGET_S else 'NOT met'}")


def profile(n_samples: int) -> None:
    """The stages of ``darcy.darcy_mesh_sample`` (and the checks), timed one by one on the default parameters."""
    p = DarcyMeshParams()
    times: dict[str, float] = collections.defaultdict(float)

    def timed(stage, fn, *args, **kwargs):
        start = time.perf_counter()
        out = fn(*args, **kwargs)
        times[stage] += time.perf_counter() - start
        return out

    for index in range(n_samples):
        domain = timed("domain", sample_domain, np.random.default_rng([0, STREAM_DOMAIN, index]), p.h)
        meshes = {"level0": to_skfem(*timed("mesh level0", mesh_domain, domain, p.h,
                                            np.random.default_rng([0, STREAM_MESH, index, 0])))}
        for r in range(1, p.refinements + 1):
            meshes[f"level{r}"] = timed("refine", meshes[f"level{r - 1}"].refined)
        fine = p.h / 2**p.refinements
        meshes["remesh"] = to_skfem(*timed("mesh remesh", mesh_domain, domain, fine,
                                           np.random.default_rng([0, STREAM_MESH, index, 1])))
        c = timed("coefficient draws", series_coefficients, 0, index, p.modes)
        for name, mesh in meshes.items():
            psi = timed("coefficient series", evaluate_series, c, np.concatenate([mesh.p.T, centroids(mesh)]))
            a = darcy_coefficient(psi)
            u = timed(f"solve {name}", solve_darcy_fem, mesh, a[mesh.p.shape[1]:])
            sample = timed("weights, boundary", mesh_sample, *from_skfem(mesh), a[: mesh.p.shape[1]], u)
            timed("checks", sample.check)
    total = sum(times.values())
    print(f"profile: {n_samples} samples in this process, {total / n_samples:.3f} s per sample")
    for stage, seconds in sorted(times.items(), key=lambda kv: -kv[1]):
        print(f"  {stage:<20} {seconds / n_samples * 1000:8.1f} ms per sample  {100 * seconds / total:5.1f}%")


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="8 samples: a smoke run")
    parser.add_argument("--samples", type=int, default=100, help="samples to generate (default 100)")
    parser.add_argument("--workers", type=int, default=2, help="worker processes (default 2)")
    parser.add_argument("--profile", type=int, default=0, metavar="N", help="also time each stage on N samples")
    args = parser.parse_args(argv)
    print(f"CPU: {cpu_model()}")
    generation(8 if args.quick else args.samples, args.workers)
    if args.profile:
        profile(args.profile)


if __name__ == "__main__":
    main()
