"""Inference speed of an exported Darcy operator on the CPU: eager PyTorch, onnxruntime and torch.export.

    python benchmarks/export_speed.py                          # latent2d at 85 x 85, batch 8, 2 threads
    python benchmarks/export_speed.py --batch 1 --threads 1
    python benchmarks/export_speed.py --dynamic                # the grid size a dynamic axis of both files

Model: the ``darcy-gpu`` preset's ``latent2d`` (its model options; untrained weights: this times, it does not
score) between point-wise normalisers drawn on the 421 grid its data live on, saved as a run folder and
written by ``petrov.export.export_operator`` at 85 (checked against PyTorch there), as ``petrov export`` does.

Timing: one forward of a batch of raw inputs per call (eager: ``NormalizedOperator.predict`` under
``torch.inference_mode``; onnxruntime: one session on the CPU; torch.export: ``torch.export.load(FILE).module()``),
the three runtimes called in turn (A, B, C, A, B, C, ...) so that a noisy neighbour slows them alike, after
warm-up calls; the median of ``--repeats`` calls each.  All three run with ``--threads`` threads
(``torch.set_num_threads`` and onnxruntime's intra-op threads).  Target: onnxruntime at least as fast as
eager PyTorch (ratio eager / onnxruntime >= 1).
"""
from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import torch

from _common import format_table, machine_info, print_machine

TARGET = 1.0


def write_darcy_run(root: Path, native: int = 421) -> Path:
    """A run folder holding the darcy-gpu preset's latent2d (seeded, untrained) and point-wise normalisers on the
    ``native`` grid (statistics of the size the Darcy data have: a ~ 3..12, u ~ 1e-2)."""
    from petrov.datasets.normalizers import PointwiseGaussianNormalizer
    from petrov.operators import build_model
    from petrov.train.checkpoint import save_run_checkpoint
    from petrov.train.config import load_config

    cfg = load_config("darcy-gpu")
    torch.manual_seed(0)
    model = build_model(cfg.model.name, **cfg.model.options).eval()
    g = torch.Generator().manual_seed(1)
    grid = (native, native, 1)
    x_norm = PointwiseGaussianNormalizer(7.5 + 0.1 * torch.randn(grid, generator=g),
                                         4.5 + 0.1 * torch.rand(grid, generator=g))
    y_norm = PointwiseGaussianNormalizer(5e-3 * torch.rand(grid, generator=g),
                                         3e-3 + 1e-3 * torch.rand(grid, generator=g))
    run = root / "darcy-gpu"
    run.mkdir()
    save_run_checkpoint(run / "best.pt", model, {"x": x_norm, "y": y_norm}, epoch=1,
                        train_config={"data": {"train_resolution": cfg.data.train_resolution}})
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=8, help="samples per call (default 8, the preset's batch)")
    parser.add_argument("--resolution", type=int, default=85)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--dynamic", action="store_true", help="export with the grid size as a dynamic axis")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    print_machine(machine_info(args.threads))

    from petrov.export import export_operator
    from petrov.export.api import random_input
    from petrov.export.formats import onnx_runner, program_runner
    from petrov.train.checkpoint import load_operator

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        run = write_darcy_run(root)
        op = load_operator(run)
        files = {}
        for fmt, suffix in (("onnx", ".onnx"), ("torch-export", ".pt2")):
            started = time.perf_counter()
            result = export_operator(run, root / f"darcy{suffix}", format=fmt, resolution=args.resolution,
                                     dynamic=args.dynamic, threads=args.threads)
            files[fmt] = result.path.read_bytes()
            shown = ", ".join(f"{d:.1e} at {n}" for n, d in result.differences.items())
            print(f"{fmt}: exported in {time.perf_counter() - started:.0f} s, {result.bytes / 1e6:.1f} MB, "
                  f"relative L2 difference from PyTorch {shown}")
        x = random_input(op, args.resolution, 2, 1, args.batch, torch.Generator().manual_seed(2))

        def eager():
            with torch.inference_mode():
                return op.predict(x)

        runtimes = {"eager PyTorch": eager, "onnxruntime": _bound(onnx_runner(files["onnx"], args.threads), x),
                    "torch.export": _bound(program_runner(files["torch-export"], args.threads), x)}
        times = {name: [] for name in runtimes}
        for _ in range(args.warmup):
            for run_once in runtimes.values():
                run_once()
        for _ in range(args.repeats):
            for name, run_once in runtimes.items():
                started = time.perf_counter()
                run_once()
                times[name].append(time.perf_counter() - started)
    median = {name: statistics.median(t) for name, t in times.items()}
    base = median["eager PyTorch"]
    rows = [[name, f"{1e3 * m:.1f}", f"{args.batch / m:.0f}", f"{base / m:.2f}x"] for name, m in median.items()]
    print(f"\nlatent2d (darcy-gpu) at {args.resolution} x {args.resolution}, batch {args.batch}, {args.threads} "
          f"thread(s), {'dynamic' if args.dynamic else 'fixed'} grid, median of {args.repeats} calls")
    print(format_table(["runtime", "ms / batch", "samples / s", "speed vs eager"], rows))
    ratio = base / median["onnxruntime"]
    print(f"onnxruntime at {ratio:.2f}x eager: target >= {TARGET:g}x {'met' if ratio >= TARGET else 'NOT met'}")


def _bound(run, x):
    return lambda: run(x)


if __name__ == "__main__":
    main()
