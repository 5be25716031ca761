"""Where one training step of the budget presets spends its time, by operator category, with and without
bfloat16 autocast (``run.amp``).

    python benchmarks/profile_presets.py --threads 1                    # all targets, float32 and bf16
    python benchmarks/profile_presets.py --targets transolver-darcy --amp off

Targets (random inputs of the training shape; timings depend on shapes, not values):

- ``darcy-budget-85``: the preset's ``latent2d`` at 85 x 85, its batch 8;
- ``burgers-latent``: the preset's ``latent1d`` at n = 1024, its batch 8;
- ``transolver-darcy`` / ``transolver-burgers``: the Transolver contender of ``compare_accuracy.py``
  (``TRANSOLVER_BUDGET``) at 85 x 85, batch 4 / n = 1024, batch 8.

One step is what the trainer does per batch, with its host allocator setting (``petrov.common.allocator``):
the forward (under ``torch.autocast(cpu, bfloat16)`` with ``--amp on``, as ``run.amp``; only the forward is
autocast), the loss relL2 + γ relH1 (γ = 0.5 Darcy, 0.1 Burgers), backward, gradient clipping at 1, Adam
(fused, as the trainer's). After ``--warmup`` untimed steps, ``--steps`` steps are timed (median wall-clock
and median CPU time of this thread: on a machine shared with other jobs the CPU time is the steadier figure),
then one step is profiled (``torch.profiler``): the self time of every op of the forward, loss and backward is
summed by category (``CATEGORIES``; anything unlisted is "other": views, allocation, autograd bookkeeping),
the ops of gradient clipping and of the Adam step count as "clipping" and "optimizer" (the phase an op ran in
is its enclosing ``record_function`` range), and the phases are also listed whole. The profiler's times are
wall-clock intervals, so on a busy machine its totals exceed the CPU time, and the shares are shares of that.
Every figure is printed with the CPU model and its bf16-relevant flags (avx512_bf16, amx_bf16).
"""
from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import torch

from _common import format_table, machine_info, print_machine, write_json

TARGETS = ("darcy-budget-85", "burgers-latent", "transolver-darcy", "transolver-burgers")
PHASES = ("forward", "loss", "backward", "clipping", "optimizer")
# op-name prefixes per category (self CPU time); the first match wins
CATEGORIES = [
    ("matrix products", ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm", "aten::addbmm", "aten::matmul",
                         "aten::linear", "aten::_addmm_activation")),
    ("convolutions", ("aten::mkldnn_convolution", "aten::convolution", "aten::_convolution", "aten::conv",
                      "aten::slow_conv", "aten::_slow_conv", "aten::thnn_conv")),
    ("FFTs", ("aten::_fft", "aten::fft")),
    ("LayerNorm", ("aten::native_layer_norm", "aten::layer_norm")),
    ("softmax / SDPA", ("aten::_softmax", "aten::softmax", "aten::_safe_softmax", "aten::_scaled_dot_product",
                        "aten::scaled_dot_product")),
    ("copies / layout", ("aten::copy_", "aten::clone", "aten::contiguous", "aten::cat", "aten::stack",
                         "aten::constant_pad_nd", "aten::_to_copy", "aten::to", "aten::index", "aten::slice_backward",
                         "aten::select_backward", "aten::_conj", "aten::resolve_conj", "aten::view_as_real",
                         "aten::view_as_complex", "aten::complex", "aten::flip", "aten::roll")),
    ("reductions", ("aten::sum", "aten::mean", "aten::linalg_vector_norm", "aten::norm", "aten::amax", "aten::max",
                    "aten::min", "aten::var", "aten::std")),
    ("elementwise", ("aten::add", "aten::mul", "aten::div", "aten::sub", "aten::rsub", "aten::neg", "aten::abs",
                     "aten::sgn", "aten::sign", "aten::exp", "aten::log", "aten::sqrt", "aten::rsqrt", "aten::pow",
                     "aten::reciprocal", "aten::gelu", "aten::silu", "aten::relu", "aten::threshold", "aten::tanh",
                     "aten::sigmoid", "aten::where", "aten::clamp", "aten::fill_", "aten::zero_", "aten::cos",
                     "aten::sin", "aten::addcmul", "aten::addcdiv", "aten::lerp", "aten::masked_fill", "aten::square",
                     "aten::maximum", "aten::minimum", "aten::eq", "aten::ne", "aten::gt", "aten::lt", "aten::ge",
                     "aten::le", "aten::isfinite", "aten::isnan", "aten::bitwise", "aten::logical", "aten::clamp_min",
                     "aten::clamp_max")),
]


def category(op: str) -> str:
    for name, prefixes in CATEGORIES:
        if op.startswith(prefixes):
            return name
    return "other (Python between ops, views, allocation)"


def cpu_flags() -> str:
    """The bf16-relevant flags of /proc/cpuinfo (Linux), e.g. ``avx512_bf16``; "none" without them."""
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("flags"):
                flags = set(line.split(":", 1)[1].split())
                found = sorted(f for f in flags if "bf16" in f or f.startswith("amx"))
                return ", ".join(found) or "none"
    except OSError:
        pass
    return "unknown"


def target_setup(name: str) -> dict:
    """Model name and options, input shape, H1 weight and periodicity of a target."""
    if name.startswith("transolver"):
        from compare_accuracy import TRANSOLVER_BUDGET

        ndim = 2 if name == "transolver-darcy" else 1
        options = dict(TRANSOLVER_BUDGET[ndim])
        batch = options.pop("batch_size", 8)
        shape = (batch, 85, 85, 1) if ndim == 2 else (batch, 1024, 1)
        return {"model": f"transolver{ndim}d", "options": options, "shape": shape, "h1": 0.5 if ndim == 2 else 0.1,
                "periodic": ndim == 1}
    from petrov.train.config import load_config

    cfg = load_config(name)
    n, b = cfg.data.train_resolution, cfg.optim.batch_size
    ndim = 2 if cfg.model.name.endswith("2d") else 1
    return {"model": cfg.model.name, "options": dict(cfg.model.options), "shape": (b,) + (n,) * ndim + (1,),
            "h1": cfg.loss.h1_weight, "periodic": ndim == 1}


def make_step(setup: dict, amp: bool):
    """A fresh model (seed 0) and the closure of one training step; phases are ``record_function`` ranges."""
    from petrov.operators import build_model
    from petrov.operators.blocks import count_parameters
    from petrov.train.losses import training_loss_per_sample

    torch.manual_seed(0)
    model = build_model(setup["model"], **setup["options"]).train()
    g = torch.Generator().manual_seed(1)
    x, y = torch.randn(setup["shape"], generator=g), torch.randn(setup["shape"], generator=g)
    # fused, as the trainer's optimizer (petrov.train.optimization.make_optimizer) on the CPU
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-6, fused=True)
    params = list(model.parameters())
    rf = torch.profiler.record_function

    def step() -> None:
        optimizer.zero_grad(set_to_none=True)
        with rf("phase: forward"), torch.autocast("cpu", dtype=torch.bfloat16, enabled=amp):
            pred = model(x)
        with rf("phase: loss"):
            loss = training_loss_per_sample(pred.float(), y, setup["h1"], setup["periodic"]).mean()
        with rf("phase: backward"):
            loss.backward()
        with rf("phase: clipping"):
            torch.nn.utils.clip_grad_norm_(params, 1.0)
        with rf("phase: optimizer"):
            optimizer.step()

    return step, count_parameters(model)


def timed(step, steps: int, warmup: int) -> tuple[float, float]:
    """Median wall-clock and median thread CPU seconds of ``step`` over ``steps`` calls after ``warmup``."""
    for _ in range(warmup):
        step()
    wall, cpu = [], []
    for _ in range(steps):
        w, c = time.perf_counter(), time.thread_time()
        step()
        wall.append(time.perf_counter() - w)
        cpu.append(time.thread_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def phase_of(event) -> str | None:
    """The phase (``record_function`` range "phase: ...") an op ran in, if any."""
    while event is not None:
        if event.name.startswith("phase: "):
            return event.name[len("phase: "):]
        event = event.cpu_parent
    return None


def profile(step) -> tuple[dict[str, float], dict[str, float], float]:
    """Self ms per category and ms per phase of one profiled step, and the total self ms."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        step()
    by_category: dict[str, float] = {}
    phases: dict[str, float] = {}
    total = 0.0
    for e in prof.events():
        if e.name.startswith("phase: "):
            phases[e.name[len("phase: "):]] = phases.get(e.name[len("phase: "):], 0.0) + e.cpu_time_total / 1e3
        ms = e.self_cpu_time_total / 1e3
        phase = phase_of(e)
        name = phase if phase in ("clipping", "optimizer") else category(e.name)
        total += ms
        by_category[name] = by_category.get(name, 0.0) + ms
    return by_category, phases, total


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--targets", nargs="+", default=list(TARGETS), choices=TARGETS)
    parser.add_argument("--amp", choices=("off", "on", "both"), default="both",
                        help="float32, bfloat16 autocast of the forward (run.amp), or both")
    parser.add_argument("--steps", type=int, default=3, help="timed steps (median)")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--out", default="bench-results/profile_presets.json")
    args = parser.parse_args(argv)
    torch.set_num_threads(args.threads)
    from petrov.common.allocator import retain_freed_memory

    retain_freed_memory()  # as the trainer does
    info = machine_info(args.threads)
    info["cpu_bf16_flags"] = cpu_flags()
    print_machine(info)
    print(f"CPU: {info['cpu']}; bf16-relevant flags: {info['cpu_bf16_flags']}; {args.threads} thread(s)")
    modes = {"off": [False], "on": [True], "both": [False, True]}[args.amp]
    results = []
    for name in args.targets:
        setup = target_setup(name)
        runs = {}
        for amp in modes:
            step, n_params = make_step(setup, amp)
            wall, cpu = timed(step, args.steps, args.warmup)
            by_category, phases, total = profile(step)
            runs["bf16" if amp else "float32"] = {"wall_s": wall, "cpu_s": cpu, "categories_ms": by_category,
                                                  "phases_ms": phases, "profiled_total_ms": total}
        label = f"{name}: {setup['model']} ({n_params:,} parameters), input {tuple(setup['shape'])}"
        print(f"\n{label}; CPU {info['cpu']}")
        kinds = list(runs)
        print("one step: " + "; ".join(f"{k} {r['wall_s'] * 1e3:.0f} ms wall, {r['cpu_s'] * 1e3:.0f} ms CPU "
                                       f"(median of {args.steps})" for k, r in runs.items()))
        if len(kinds) == 2:
            print(f"bf16 autocast / float32, CPU time: {runs['bf16']['cpu_s'] / runs['float32']['cpu_s']:.2f}x "
                  f"(< 1: autocast is faster)")
        names = sorted({c for r in runs.values() for c in r["categories_ms"]},
                       key=lambda c: -runs[kinds[0]]["categories_ms"].get(c, 0.0))
        rows = [[c] + [f"{runs[k]['categories_ms'].get(c, 0.0):.0f} "
                       f"({100 * runs[k]['categories_ms'].get(c, 0.0) / runs[k]['profiled_total_ms']:.0f}%)"
                       for k in kinds] for c in names]
        rows.append(["total (profiled, self CPU)"] + [f"{runs[k]['profiled_total_ms']:.0f}" for k in kinds])
        print(format_table(["op category"] + [f"{k} ms (%)" for k in kinds], rows))
        print(format_table(["phase"] + [f"{k} ms" for k in kinds],
                           [[p] + [f"{runs[k]['phases_ms'].get(p, 0.0):.0f}" for k in kinds] for p in PHASES]))
        results.append({"target": name, "model": setup["model"], "options": setup["options"],
                        "shape": list(setup["shape"]), "parameters": n_params, "runs": runs})
    write_json(args.out, {"benchmark": "profile_presets", "machine": info, "settings": vars(args), "results": results})
    print(f"\nwrote {args.out}")


if __name__ == "__main__":
    sys.exit(main())
