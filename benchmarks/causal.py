"""Causal linear attention: recurrent inference per step, and the parallel causal form vs non-causal.

    python benchmarks/causal.py --threads 1              # full: steps to 1000, n = 65536 (a few minutes)
    python benchmarks/causal.py --quick --threads 1      # smoke run: steps to 100, n = 4096

Layer ``Attention(d_model=128, n_heads=4, head_dim=32, pos_dim=1, norm="layer")`` (the coordinates
appended to every head, as in the Burgers model), float32, CPU.

1. Recurrent inference (``init_state`` / ``step``, eval, no grad, batch ``--step-batch``) over a
   synthetic sequence of ``--steps`` points, per mixer in its own process: the wall-clock time of
   step t (median over the ``--window`` steps ending at t) at t = 10, 100, 1000, the state's size,
   and the growth of the process's peak resident set between step 10 and step t (``ru_maxrss``).
   A constant-size state means flat times and zero growth.
2. Training form: forward + ``out.square().mean().backward()`` of the causal layer (chunked
   prefix sums, default chunk) vs the same non-causal Galerkin layer, batch ``--batch``, at
   ``--n``; median of ``--repeats`` steps after a warm-up, each contender in its own process with
   its peak extra RSS (``_common.PeakMemory``).  The non-causal layer is shown with norm "layer"
   (the same operator without the mask) and "column" (the default).
   Target: causal Galerkin fwd+bwd at n = 65536 within 3x of the non-causal Galerkin layer.
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from _common import (
    PeakMemory, emit_result, format_table, fwd_bwd_step, machine_info, median_seconds, peak_rss_bytes,
    print_machine, run_worker, verdict, worker_spec, write_json,
)

TARGET_RATIO = 3.0
TARGET_N = 65536
LAYER = {"d_model": 128, "n_heads": 4, "head_dim": 32, "pos_dim": 1}
CONTENDERS = {  # label -> Attention options
    "causal galerkin": {"mixer": "galerkin", "norm": "layer", "causal": True},
    "galerkin, norm layer": {"mixer": "galerkin", "norm": "layer"},
    "galerkin, norm column": {"mixer": "galerkin", "norm": "column"},
    "causal linear": {"mixer": "linear", "norm": None, "causal": True},
}


def build(options: dict) -> torch.nn.Module:
    from petrov.operators import Attention

    return Attention(LAYER["d_model"], n_heads=LAYER["n_heads"], head_dim=LAYER["head_dim"], pos_dim=LAYER["pos_dim"],
                     **options)


def measure_recurrent(spec: dict) -> dict:
    """Worker: step times, state size and peak-RSS growth of one mixer's recurrent inference."""
    torch.manual_seed(0)
    layer = build({"mixer": spec["mixer"], "norm": "layer" if spec["mixer"] == "galerkin" else None,
                   "causal": True}).eval()
    b, steps, window = spec["batch"], spec["steps"], spec["window"]
    x = torch.randn(steps, b, LAYER["d_model"])
    pos = (torch.arange(steps, dtype=torch.float32) / steps)[:, None, None].expand(steps, b, 1)
    marks = [m for m in spec["marks"] if m <= steps]
    # bookkeeping allocated up front, so that the loop itself allocates only what a step does
    times, peak_at = torch.zeros(steps, dtype=torch.float64), dict.fromkeys(marks, 0)
    with torch.no_grad():
        state = layer.init_state(b, steps)
        state_bytes = sum(t.numel() * t.element_size() for t in state.mixer)
        for t in range(steps):
            start = time.perf_counter()
            _, state = layer.step(state, x[t], pos[t])
            times[t] = time.perf_counter() - start
            if t + 1 in peak_at:
                peak_at[t + 1] = peak_rss_bytes()
    times = times.tolist()
    return {
        "state_bytes": state_bytes,
        "marks": {str(m): {"seconds": statistics.median(times[max(0, m - window):m]),
                           "peak_growth_bytes": peak_at[m] - peak_at[marks[0]]} for m in marks},
    }


def measure_parallel(spec: dict) -> dict:
    """Worker: fwd+bwd time and peak extra RSS of one contender at n."""
    torch.manual_seed(0)
    layer = build(CONTENDERS[spec["label"]])
    b, n = spec["batch"], spec["n"]
    x = torch.randn(b, n, LAYER["d_model"])
    pos = (torch.arange(n, dtype=torch.float32) / n).expand(b, n)[..., None].contiguous()
    memory = PeakMemory()
    seconds = median_seconds(fwd_bwd_step(layer, x, pos), spec["repeats"])
    return {"seconds": seconds, "peak_extra_bytes": memory.extra_bytes()}


def measure(spec: dict) -> dict:
    torch.set_num_threads(spec["threads"])
    return measure_recurrent(spec) if spec["kind"] == "recurrent" else measure_parallel(spec)


def run_recurrent(args) -> dict:
    results = {}
    for mixer in args.mixers:
        spec = {"kind": "recurrent", "mixer": mixer, "batch": args.step_batch, "steps": args.steps,
                "window": args.window, "marks": args.marks, "threads": args.threads}
        results[mixer] = run_worker(__file__, spec, timeout=1800)
    print(f"\nrecurrent inference, batch {args.step_batch}: time of step t (median of the {args.window} "
          f"steps up to t), peak-RSS growth since step {args.marks[0]}")
    marks = [str(m) for m in args.marks if m <= args.steps]
    rows = []
    for mixer, out in results.items():
        if "marks" not in out:
            rows.append([mixer, out.get("error", "failed")] + [""] * (2 * len(marks)))
            continue
        cells = [f"{out['marks'][m]['seconds'] * 1e6:.0f}" for m in marks]
        cells += [f"{out['marks'][m]['peak_growth_bytes'] / 1e3:.0f}" for m in marks]
        rows.append([mixer, f"{out['state_bytes'] / 1e3:.1f}"] + cells)
    print(format_table(["mixer", "state kB"] + [f"us @ {m}" for m in marks] + [f"+kB @ {m}" for m in marks], rows))
    return results


def run_parallel(args) -> dict:
    results = {}
    for label in CONTENDERS:
        spec = {"kind": "parallel", "label": label, "batch": args.batch, "n": args.n, "repeats": args.repeats,
                "threads": args.threads}
        results[label] = run_worker(__file__, spec, timeout=3600)
    print(f"\nforward+backward, batch {args.batch}, n = {args.n} (median of {args.repeats})")
    rows = [[label] + ([f"{out['seconds']:.3f}", f"{out['peak_extra_bytes'] / 1e6:.0f}"]
                       if "seconds" in out else [out.get("error", "failed"), ""])
            for label, out in results.items()]
    print(format_table(["layer", "seconds", "peak extra MB"], rows))
    return results


def summarize(parallel: dict, args) -> dict:
    causal, plain = parallel.get("causal galerkin", {}), parallel.get("galerkin, norm layer", {})
    ratio = causal["seconds"] / plain["seconds"] if "seconds" in causal and "seconds" in plain else None
    met = None if ratio is None or args.n != TARGET_N else ratio <= TARGET_RATIO
    text = f"causal Galerkin fwd+bwd at n={TARGET_N} within {TARGET_RATIO:g}x of the non-causal Galerkin layer"
    measured = "not measured" if ratio is None else f"{ratio:.2f}x at n={args.n}"
    print(f"\ntarget: {text}: {verdict(met)} ({measured}; noisy if the machine is shared)")
    return {"target": {"text": text, "ratio": ratio, "n": args.n, "met": met}}


def main(argv: list[str] | None = None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        emit_result(measure(spec))
        return
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=TARGET_N, help="points of the parallel fwd+bwd comparison")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--steps", type=int, default=1000, help="length of the recurrent sequence")
    parser.add_argument("--step-batch", type=int, default=1)
    parser.add_argument("--window", type=int, default=10, help="steps per recurrent timing median")
    parser.add_argument("--mixers", nargs="+", default=["galerkin", "linear", "performer", "cosformer"],
                        help="mixers of the recurrent part")
    parser.add_argument("--threads", type=int, default=1, help="torch threads per worker (default 1)")
    parser.add_argument("--out", default="bench-results/causal.json", help="JSON output path")
    parser.add_argument("--quick", action="store_true", help="steps to 100, n = 4096, 2 repeats (smoke run)")
    args = parser.parse_args(argv)
    args.marks = [10, 100, 1000]
    if args.quick:
        args.steps, args.n, args.repeats = 100, 4096, 2
    info = machine_info(args.threads)
    print_machine(info)
    print(f"one Attention layer: {LAYER}, float32; each measurement in its own process"
          + ("  [quick mode: rough numbers]" if args.quick else ""))
    recurrent = run_recurrent(args)
    parallel = run_parallel(args)
    summary = summarize(parallel, args)
    write_json(args.out, {"benchmark": "causal", "machine": info, "settings": {
        k: v for k, v in vars(args).items() if k != "out"}, "recurrent": recurrent, "parallel": parallel,
        "summary": summary})
    print(f"\nwrote {Path(args.out).resolve()}")


if __name__ == "__main__":
    sys.exit(main())
