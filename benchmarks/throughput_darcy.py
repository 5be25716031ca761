"""Training throughput on Darcy at 85 x 85: ``latent2d`` vs ``galerkin2d`` at (about) equal parameter count.

    python benchmarks/throughput_darcy.py --threads 1              # n = 85, batch 8
    python benchmarks/throughput_darcy.py --n 141 --steps 5
    python benchmarks/throughput_darcy.py --set latent_size=24 --set latent_modes=6

Models: ``galerkin2d`` at the reference config with coarse grid 29 (the setting compare_accuracy.py
trains at 85; 2,220,829 parameters) and ``latent2d`` at ``latent2d.REFERENCE_SIZE_CONFIG`` (same
d_model, layers, heads, FFN, decoder width and modes; 2,220,000 parameters), optionally changed by
``--set KEY=VALUE`` (values parsed as Python literals).  Other contenders: ``--models``.

Training step (what the trainer does per batch): forward on a batch of seeded random two-valued coefficients
(3 / 12), relative L2 + 0.5 relative H1 loss (the Darcy recipe), backward, gradient clipping 1, Adam step
(fused, as the trainer's). Steps of the models alternate (A, B, A, B, ...) so a noisy neighbour slows both
alike; the table gives the median step time and samples/s = batch / median step.
"""
from __future__ import annotations

import argparse
import ast
import statistics
import sys
import time

import torch

from _common import format_table, machine_info, print_machine

TARGET_RATIO = 3.0


def contenders(overrides: dict) -> dict[str, tuple[str, dict]]:
    from petrov.operators.models import galerkin2d
    from petrov.operators.models import latent as latent2d

    return {
        "galerkin2d": ("galerkin2d", {**galerkin2d.REFERENCE_CONFIG, "coarse_size": 29}),
        "latent2d": ("latent2d", {**latent2d.REFERENCE_SIZE_CONFIG, **overrides}),
        "fno2d": ("fno2d", None),
    }


def make_step(model: torch.nn.Module, x: torch.Tensor, y: torch.Tensor, pos: torch.Tensor):
    from petrov.train.losses import training_loss_per_sample

    # fused, as the trainer's optimizer (petrov.train.optimization.make_optimizer) on the CPU
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-6, fused=True)
    params = list(model.parameters())

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        training_loss_per_sample(model(x, pos), y, 0.5, periodic=False).mean().backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    return step


def parse_set(items: list[str]) -> dict:
    out = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise SystemExit(f"--set expects KEY=VALUE, got {item!r}")
        try:
            out[key] = ast.literal_eval(value)
        except (ValueError, SyntaxError):
            out[key] = value
    return out


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--n", type=int, default=85, help="grid points per axis (default 85)")
    p.add_argument("--batch-size", type=int, default=8)
    p.add_argument("--steps", type=int, default=10, help="timed steps per model (default 10)")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: torch's)")
    p.add_argument("--models", nargs="+", default=["galerkin2d", "latent2d"], choices=["galerkin2d", "latent2d", "fno2d"])
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="latent2d option override")
    args = p.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    print_machine(machine_info(args.threads))
    from petrov.operators import build_model, grid_coordinates
    from petrov.operators.blocks import count_parameters
    from petrov.operators.models import fno

    table = contenders(parse_set(args.set))
    g = torch.Generator().manual_seed(0)
    b, n = args.batch_size, args.n
    x = torch.where(torch.randn(b, n, n, 1, generator=g) > 0, 12.0, 3.0)
    y = torch.randn(b, n, n, 1, generator=g)
    pos = grid_coordinates((n, n)).unsqueeze(0).expand(b, n, n, 2)
    steps, params, times = {}, {}, {}
    for key in args.models:
        name, options = table[key]
        torch.manual_seed(0)
        model = build_model(name, **(options if options is not None else fno.REFERENCE_CONFIG["fno2d"]))
        params[key] = count_parameters(model)
        steps[key] = make_step(model, x, y, pos)
        times[key] = []
        for _ in range(args.warmup):
            steps[key]()
    for _ in range(args.steps):
        for key in args.models:
            start = time.perf_counter()
            steps[key]()
            times[key].append(time.perf_counter() - start)
    med = {k: statistics.median(v) for k, v in times.items()}
    print(f"training step at {n} x {n}, batch {b}: median of {args.steps} alternating steps after {args.warmup} warm-up")
    rows = [[k, f"{params[k]:,}", f"{med[k]:.3f}", f"{b / med[k]:.2f}"] for k in args.models]
    print(format_table(["model", "params", "s/step", "samples/s"], rows))
    if "galerkin2d" in med and "latent2d" in med:
        ratio = med["galerkin2d"] / med["latent2d"]
        met = "met" if ratio >= TARGET_RATIO else "NOT met"
        print(f"latent2d / galerkin2d samples/s: {ratio:.2f}x (target >= {TARGET_RATIO:g}x: {met})")


if __name__ == "__main__":
    sys.exit(main())
