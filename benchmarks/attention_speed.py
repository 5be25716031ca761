"""Forward + backward time of ONE attention layer for every mixer, at several numbers of points.

    python benchmarks/attention_speed.py                 # n = 1024, 4096, 16384 (slow: minutes)
    python benchmarks/attention_speed.py --quick         # small n, a few seconds
    python benchmarks/attention_speed.py --n 2048 8192 --mixers galerkin softmax --repeats 5

Layer: ``Attention(d_model=128, n_heads=4, head_dim=32, pos_dim=1)`` on a batch of 4 (1-D
coordinates appended, as in the Burgers model; cosformer needs them).  Each entry is the median of
``--repeats`` timed forward+backward passes after one warm-up pass, in float32.

Quadratic mixers are not run where they cannot finish: the Fourier kernel matrix and its gradient
take about ``2 * b * h * n² * 4`` bytes (17 GB at n = 16384), so a run whose estimate exceeds
``--max-mem-gb`` is marked "OOM"; a run whose time, extrapolated from the previous n, exceeds
``--max-seconds`` per pass is marked "too slow".  ``fourier*`` is the same Fourier-type operator
computed in O(n d²) by associativity (``associative=True``).
"""
from __future__ import annotations

import argparse

import torch

from _common import QUADRATIC, fwd_bwd_step, kernel_matrix_gb, machine_info, median_seconds, print_machine
from _common import mixer_variants as variants
from petrov.operators import Attention, list_mixers


def time_layer(layer: Attention, x: torch.Tensor, pos: torch.Tensor, repeats: int) -> float:
    """Median seconds of forward + backward (one untimed warm-up)."""
    return median_seconds(fwd_bwd_step(layer, x, pos), repeats)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--n", type=int, nargs="+", default=[1024, 4096, 16384])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mixers", nargs="+", default=None, help=f"subset of {list_mixers()}")
    parser.add_argument("--max-mem-gb", type=float, default=4.0)
    parser.add_argument("--max-seconds", type=float, default=60.0, help="per pass, extrapolated")
    parser.add_argument("--threads", type=int, default=None, help="torch.set_num_threads")
    parser.add_argument("--quick", action="store_true", help="n = 256, 1024; 3 repeats")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.repeats = [256, 1024], 3
    if args.threads:
        torch.set_num_threads(args.threads)
    mixers = args.mixers or list_mixers()
    b, h = args.batch, args.heads

    print_machine(machine_info())
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; one Attention layer "
          f"(b={b}, heads={h}, head_dim={args.head_dim}, d_model={args.d_model}, pos_dim=1), "
          f"float32 forward+backward, median of {args.repeats}")
    results: dict[tuple[str, int], float | str] = {}
    for label, name, options in variants(mixers):
        torch.manual_seed(0)
        layer = Attention(args.d_model, n_heads=h, head_dim=args.head_dim, mixer=name, pos_dim=1, **options)
        previous: tuple[int, float] | None = None
        for n in args.n:
            gb = kernel_matrix_gb(label, b, h, n)
            if gb > args.max_mem_gb:
                results[label, n] = f"OOM (~{gb:.0f} GB)"
                continue
            if previous is not None:
                power = 2 if name in QUADRATIC and label != "fourier*" else 1
                estimate = previous[1] * (n / previous[0]) ** power
                if estimate > args.max_seconds:
                    results[label, n] = f"too slow (~{estimate:.0f} s)"
                    continue
            x = torch.randn(b, n, args.d_model)
            pos = (torch.arange(n) / n).expand(b, n)[..., None]
            try:
                seconds = time_layer(layer, x, pos, args.repeats)
            except RuntimeError as err:  # allocation failure despite the estimate
                results[label, n] = f"failed: {str(err).splitlines()[0][:30]}"
                continue
            results[label, n] = seconds
            previous = (n, seconds)

    width = 18
    print(f"{'mixer':<10}" + "".join(f"{'n=' + str(n):>{width}}" for n in args.n))
    for label, _, _ in variants(mixers):
        cells = []
        for n in args.n:
            value = results[label, n]
            timed = isinstance(value, float)
            cells.append(f"{value * 1e3:>{width - 3}.1f} ms" if timed else f"{value:>{width}}")
        print(f"{label:<10}" + "".join(cells))
    for n in args.n:
        g, s = results.get(("galerkin", n)), results.get(("softmax", n))
        if isinstance(g, float) and isinstance(s, float):
            print(f"n={n}: softmax / galerkin time = {s / g:.1f}x")


if __name__ == "__main__":
    main()
