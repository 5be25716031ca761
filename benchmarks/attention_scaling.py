"""Attention scaling: forward+backward time and peak memory of one attention layer per mixer, n = 1024 ... 65536,
beside the dense-matmul floor of the Galerkin kernel.

    python benchmarks/attention_scaling.py                      # full: n = 1024 ... 65536 (about 25-40 min)
    python benchmarks/attention_scaling.py --quick              # smoke run: n = 256, 1024 (under a minute)
    python benchmarks/attention_scaling.py --n 4096 65536 --mixers galerkin softmax --max-mem-gb 12

What is measured.  Layer ``Attention(d_model=128, n_heads=4, head_dim=32, mixer=..., pos_dim=1)`` (the
coordinates appended to every head, as in the Burgers model), batch 4, float32, on CPU.  One step =
forward + ``out.square().mean().backward()``; the time is the median of ``--repeats`` steps after one
warm-up step.  Every (mixer, n) runs in its own process: it records its resident set size once the
layer and the inputs exist and reports the peak RSS over the steps minus that (``_common.PeakMemory``):
the memory of activations kept for backward, gradients and temporaries.

The floor.  Whatever the implementation, Galerkin attention has to do these dense products, each of
the shapes the layer uses (d' = head_dim + 1 coordinate): the projections ``x W_q, x W_k, x W_v``
``(b, n, 128) x (128, 4 d')``, per head ``K^T V`` ``(d', n) x (n, d')`` and ``Q (K^T V)``
``(n, d') x (d', d')``, and the output projection ``(b, n, 4 d') x (4 d', 128)``, forward and backward.
The row "floor" times exactly those products (``torch.einsum``/``@``, no biases, normalisation,
concatenation or scaling) with the same loss; ``galerkin / floor`` is the overhead of everything else.
Target: Galerkin attention at n = 65536 within 1.5x of its floor.

Skipped, and said so in the table: the dense Fourier kernel where its n x n matrices (kernel and
gradient, ``2 b h n^2 4`` bytes) would exceed ``--max-mem-gb``; any mixer whose time, extrapolated from
the previous n (quadratic for fourier/softmax, linear otherwise), would exceed ``--max-seconds`` per step.
``fourier*`` is the same Fourier-type operator computed by associativity in O(n d^2).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

from _common import (
    QUADRATIC, PeakMemory, emit_result, format_table, fwd_bwd_step, kernel_matrix_gb, machine_info,
    median_seconds, mixer_variants, print_machine, run_worker, verdict, worker_spec, write_json,
)

FLOOR = "floor"
TARGET_RATIO = 1.5
TARGET_N = 65536
# Measured earlier on a 2-core machine of this kind (noisy), not rerun by this script.
EARLIER = {4096: "8-13x", 16384: "~78x"}


class GalerkinMatmulFloor(torch.nn.Module):
    """Only the dense products of Galerkin attention: ``x W_{q,k,v}``, per head ``K^T V`` and
    ``Q (K^T V)``, output projection.  ``x: (b, n, d_model) -> (b, n, d_model)``."""

    def __init__(self, d_model: int, n_heads: int, head_dim: int, pos_dim: int):
        super().__init__()
        self.h, self.d = n_heads, head_dim + pos_dim
        inner = self.h * self.d
        scale = d_model ** -0.5
        self.w_qkv = torch.nn.ParameterList(
            torch.nn.Parameter(torch.randn(d_model, inner) * scale) for _ in range(3))
        self.w_out = torch.nn.Parameter(torch.randn(inner, d_model) * inner ** -0.5)

    def forward(self, x: torch.Tensor, pos: torch.Tensor | None = None) -> torch.Tensor:
        b, n, _ = x.shape
        q, k, v = (torch.matmul(x, w).view(b, n, self.h, self.d) for w in self.w_qkv)
        kv = torch.einsum("bnhi,bnhj->bhij", k, v)  # (b, h, d', d')
        z = torch.einsum("bnhi,bhij->bnhj", q, kv)  # (b, n, h, d')
        return torch.matmul(z.reshape(b, n, self.h * self.d), self.w_out)


def build_layer(label: str, spec: dict) -> torch.nn.Module:
    if label == FLOOR:
        return GalerkinMatmulFloor(spec["d_model"], spec["heads"], spec["head_dim"], 1)
    from petrov.operators import Attention

    variants = {lab: (name, opts) for lab, name, opts in mixer_variants([spec["mixer"]])}
    name, opts = variants[label]
    return Attention(spec["d_model"], n_heads=spec["heads"], head_dim=spec["head_dim"], mixer=name, pos_dim=1, **opts)


def measure(spec: dict) -> dict:
    """Worker: time and peak extra RSS of one (label, n)."""
    if spec.get("threads"):
        torch.set_num_threads(spec["threads"])
    torch.manual_seed(0)
    b, n = spec["batch"], spec["n"]
    layer = build_layer(spec["label"], spec)
    x = torch.randn(b, n, spec["d_model"])
    pos = (torch.arange(n, dtype=torch.float32) / n).expand(b, n)[..., None].contiguous()
    memory = PeakMemory()
    seconds = median_seconds(fwd_bwd_step(layer, x, pos), spec["repeats"])
    return {"seconds": seconds, "peak_extra_bytes": memory.extra_bytes(), "threads": torch.get_num_threads()}


def rows_for(mixers: list[str]) -> list[tuple[str, str]]:
    """(label, mixer) in table order; the floor goes right after galerkin."""
    rows = []
    for label, name, _ in mixer_variants(mixers):
        rows.append((label, name))
        if label == "galerkin":
            rows.append((FLOOR, "galerkin"))
    return rows


def run(args: argparse.Namespace) -> dict:
    results: dict[str, dict[str, dict]] = {}
    base = {"batch": args.batch, "heads": args.heads, "head_dim": args.head_dim, "d_model": args.d_model,
            "repeats": args.repeats, "threads": args.threads}
    for label, mixer in rows_for(args.mixers):
        results[label] = {}
        previous: tuple[int, float] | None = None
        for n in args.n:
            need = kernel_matrix_gb(label, args.batch, args.heads, n)
            if need > args.max_mem_gb:
                results[label][str(n)] = {"skipped": f"memory ~{need:.0f} GB > --max-mem-gb {args.max_mem_gb:g}"}
                continue
            if previous is not None:
                power = 2 if mixer in QUADRATIC and label != "fourier*" else 1
                estimate = previous[1] * (n / previous[0]) ** power
                if estimate > args.max_seconds:
                    results[label][str(n)] = {"skipped": f"time ~{estimate:.0f} s/step > --max-seconds {args.max_seconds:g}"}
                    continue
            spec = {**base, "label": label, "mixer": mixer, "n": n}
            timeout = 120 + (args.repeats + 1) * args.max_seconds * 4
            out = run_worker(__file__, spec, timeout=timeout)
            results[label][str(n)] = out
            if "seconds" in out:
                previous = (n, out["seconds"])
            print(f"  {label:<10} n={n:<6} " + (f"{out['seconds'] * 1e3:9.1f} ms  +{out['peak_extra_bytes'] / 1e6:8.1f} MB"
                                                 if "seconds" in out else out.get("error", "?")), flush=True)
    return results


def cell(entry: dict, key: str) -> str:
    if "seconds" in entry:
        return f"{entry['seconds'] * 1e3:.1f}" if key == "time" else f"{entry['peak_extra_bytes'] / 1e6:.0f}"
    return "skip" if "skipped" in entry else "failed"


def report(results: dict, args: argparse.Namespace) -> dict:
    ns = [str(n) for n in args.n]
    labels = list(results)
    for key, title in (("time", "forward+backward time, ms (median)"), ("mem", "peak extra RSS, MB")):
        print(f"\n{title}")
        print(format_table(["mixer"] + [f"n={n}" for n in ns], [[lab] + [cell(results[lab][n], key) for n in ns]
                                                                  for lab in labels]))
    notes = sorted(f"{lab} n={n}: {entry.get('skipped') or entry.get('error')}"
                   for lab in labels for n in ns if "seconds" not in (entry := results[lab][n]))
    if notes:
        print("\nnot measured:\n  " + "\n  ".join(notes))

    summary: dict = {"galerkin_over_floor": {}, "softmax_over_galerkin": {}}
    g, f, s = results.get("galerkin", {}), results.get(FLOOR, {}), results.get("softmax", {})
    for n in ns:
        if "seconds" in g.get(n, {}) and "seconds" in f.get(n, {}):
            summary["galerkin_over_floor"][n] = g[n]["seconds"] / f[n]["seconds"]
        if "seconds" in g.get(n, {}) and "seconds" in s.get(n, {}):
            summary["softmax_over_galerkin"][n] = s[n]["seconds"] / g[n]["seconds"]
    if summary["galerkin_over_floor"]:
        print("\ngalerkin / floor time: " + ", ".join(f"n={n}: {r:.2f}x" for n, r in summary["galerkin_over_floor"].items()))
    if summary["softmax_over_galerkin"]:
        print("softmax / galerkin time (ours): " + ", ".join(
            f"n={n}: {r:.1f}x" + (f" [earlier run on a machine of this kind, not rerun: {EARLIER[int(n)]}]" if int(n) in EARLIER else "")
            for n, r in summary["softmax_over_galerkin"].items()))
    ratio = summary["galerkin_over_floor"].get(str(TARGET_N))
    summary["target"] = {"text": f"Galerkin attention at n={TARGET_N} within {TARGET_RATIO:g}x of its dense-matmul floor",
                         "ratio": ratio, "met": None if ratio is None else ratio <= TARGET_RATIO}
    measured = f"measured {ratio:.2f}x" if ratio is not None else f"n={TARGET_N} not measured in this run"
    print(f"\ntarget: {summary['target']['text']}: {verdict(summary['target']['met'])} ({measured})")
    return summary


def main(argv: list[str] | None = None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        emit_result(measure(spec))
        return
    from petrov.operators import list_mixers

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, nargs="+", default=[1024, 2048, 4096, 8192, 16384, 32768, 65536])
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--heads", type=int, default=4)
    parser.add_argument("--head-dim", type=int, default=32)
    parser.add_argument("--d-model", type=int, default=128)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mixers", nargs="+", default=None, help=f"subset of {list_mixers()} (default all)")
    parser.add_argument("--max-mem-gb", type=float, default=8.0, help="skip dense n x n kernels above this")
    parser.add_argument("--max-seconds", type=float, default=60.0, help="skip steps extrapolated above this")
    parser.add_argument("--threads", type=int, default=None, help="torch threads per worker (default: torch's)")
    parser.add_argument("--out", default="bench-results/attention_scaling.json", help="JSON output path")
    parser.add_argument("--quick", action="store_true", help="n = 256, 1024; 2 repeats (smoke run)")
    args = parser.parse_args(argv)
    if args.quick:
        args.n, args.repeats = [256, 1024], 2
    args.mixers = args.mixers or list_mixers()
    if "galerkin" not in args.mixers:
        args.mixers = ["galerkin"] + args.mixers  # the floor is reported against it
    info = machine_info(args.threads)
    print_machine(info)
    print(f"one Attention layer: b={args.batch}, heads={args.heads}, head_dim={args.head_dim}, "
          f"d_model={args.d_model}, pos_dim=1, float32; each (mixer, n) in its own process"
          + ("  [quick mode: rough numbers]" if args.quick else ""))
    results = run(args)
    summary = report(results, args)
    write_json(args.out, {"benchmark": "attention_scaling", "machine": info, "settings": {
        k: v for k, v in vars(args).items() if k != "out"}, "results": results, "summary": summary})
    print(f"\nwrote {Path(args.out).resolve()}")


if __name__ == "__main__":
    sys.exit(main())
