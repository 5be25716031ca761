"""petrov on a GPU: training-step speed and memory against the reference Galerkin Transformer, and accuracy
at an equal GPU budget.

    python benchmarks/gpu.py                          # both parts on the GPU (estimated ~40 min)
    python benchmarks/gpu.py --part speed             # (a) only (~5 min)
    python benchmarks/gpu.py --part speed --n 8192 --precisions float32 --compile off --unfused   # fused or not
    python benchmarks/gpu.py --part speed --n 8192 --precisions float32 --checkpoint   # and recomputing (layers, FFNs)
    python benchmarks/gpu.py --part step              # (c) only: the trainer's step of darcy-gpu (~3 min)
    python benchmarks/gpu.py --part step --model-only # (c) and the step with the model alone compiled
    python benchmarks/gpu.py --part accuracy --budget-minutes 5
    python benchmarks/gpu.py --quick                  # smoke run, also on the CPU: tiny sizes, numbers meaningless

It prints the device (name, torch, CUDA and cuDNN versions) first.

(a) Speed and memory: one training step of petrov's ``galerkin1d`` at the reference Burgers configuration
(``galerkin1d.REFERENCE_CONFIG``, 530,305 parameters) against the reference ``SimpleTransformer``
(PyPI ``galerkin-transformer==0.2.1``, built as ``benchmarks/compare_speed_memory.py`` builds it), the
same step for both: forward on a batch of ``--batch`` (4) inputs ``(b, n, 1)`` with coordinates, mean
relative L2 against a target, backward, gradient clipping at norm 1, Adam.  n = 8192 ... 262,144 points;
precisions ``float32``, ``tf32`` (``torch.set_float32_matmul_precision("high")``) and ``bf16`` (the
forward under bfloat16 autocast, as ``run.amp`` trains) for both sides; petrov also under
``--compile`` settings (``run.compile``: ``off``, ``cuda-graphs``); a compiled model is first checked
against its eager copy (``petrov.train.compilation.compiled_agreement``, one forward and backward, as the
trainer checks it), and a row whose values differ beyond the trainer's tolerance is printed "DIFFERS" and
its speed-up marked as not counted.  Each (implementation, precision,
compile, n) runs in its own process: ``--warmup`` untimed steps (cuFFT plans, autotuning, compilation,
graph capture), then the median over 3 blocks of ``--steps`` steps, each block between two device
synchronizations.  Peak memory: ``torch.cuda.max_memory_allocated`` during the steps minus the memory
allocated before them (model, optimizer, inputs) -- the activations kept for backward, gradients, Adam
state and temporaries -- printed with its two parts, the warm-up's and the timed steps' (with CUDA graphs
the capture allocates what the replays reuse, and the cuBLAS workspaces move into the graphs' memory pool:
the split says whether a compiled row's extra memory is the warm-up's); on the CPU, the most torch's CPU
allocator held above its start during one more step (``_common.allocated_peak_bytes``: allocation by
allocation, compiled code's included; at n = 8192, float32, on an AMD EPYC it put petrov eager at 0.66x the
reference's memory and with the fused path off at 0.92x, where the H200 measured 0.68x and 0.91x).

(b) Accuracy at an equal GPU budget: ``benchmarks/compare_accuracy.py`` itself (its data, contenders,
epoch planning and tables) on Darcy at 85 x 85 for ``latent2d`` (physics mixer), ``fno2d``,
``transolver2d`` and neuraloperator's FNO, ``--budget-minutes`` each, with ``--compile``'s first
setting other than ``off`` (``auto``: CUDA graphs) for every contender, each trained on samples moved by
the unit square's symmetries as ``darcy-gpu`` is (``--augment none``: as they are).

(c) The trainer's own training step: ``petrov.train.trainer.Trainer`` built from the ``darcy-gpu`` preset
(``latent2d`` with the physics mixer, 85 x 85, batch 8; its data file, generated on first use) with
``run.compile`` in ``--compile`` (and ``run.amp`` bfloat16 for the last of them, ``--step-amp``), each in its
own process: ``Stepper.step`` on the run's own batches (the training split resident on the device,
noise, loss, backward, clipping, Adam, schedule), ``--warmup`` untimed steps, then the median over 3 blocks
of ``--steps`` steps between device synchronizations, and the peak memory as in (a).  This is what
``petrov train darcy-gpu`` pays per step, validation and checkpoints aside.  A compiled setting also prints
the kernels inductor generated for the step (``torch._inductor.metrics.generated_kernel_count`` over every
graph compiled while the trainer is built and warmed up: the batch loss's forward and backward), which on a
GPU are the launches a CUDA graph replays besides the library calls (matrix products, FFTs, convolutions;
clipping and Adam run outside it).  ``--device cpu --compile default`` counts them without a GPU
(``--step-preset``, ``--step-set`` for a small data file), in inductor's C++ kernels, one of which may run
loops that a GPU runs as several kernels: compare counts made on one device.  A compiled run compiles the
step's whole batch loss (normalisation, noise, model, decoding, loss); ``--model-only`` adds the last
``--compile`` setting with the model alone compiled inside the eager batch loss, as runs were compiled
before 2026-11-28 (the step's 7.61 ms with ``cuda-graphs`` on the H200 then).  ``--profile N`` (here and
in (a)) traces N more steps of each setting with ``torch.profiler`` and prints where the device's time went
(``device_profile.py``): the time it was busy against the wall-clock time (the rest is the device waiting
for the host), its kernels by kind (inductor's, convolutions, matrix products, FFTs, optimizer, copies)
and the largest of them.

Targets (from the H100 measurements of 2026-11-25, torch 2.11, CUDA 13, before the training step was made
sync-free): galerkin1d at n = 8192 about 2x the reference's speed (the reference's step took 14.5 ms,
petrov's eager step 19.2 ms then); ``latent2d`` trained to the accuracy it reached in 6 minutes eager
(7.51e-3 at 85 after 90 epochs) in less time.  This script measures them; it states no figure itself.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

import torch

from _common import (
    allocated_peak_bytes, emit_result, format_table, machine_info, minutes, print_machine, run_worker, worker_spec,
    write_json,
)
from device_profile import format_profile, profile_steps

N_FULL = [8192, 16384, 32768, 65536, 131072, 262144]
N_QUICK = [256, 512]
PRECISIONS = ("float32", "tf32", "bf16")
ACCURACY_CONTENDERS = ["latent-physics", "fno", "transolver", "neuralop"]


def device_info(device: torch.device) -> dict:
    """The device the figures were measured on, with the torch, CUDA and cuDNN versions."""
    info = {"device": str(device), "torch": torch.__version__, "cuda": torch.version.cuda,
            "cudnn": torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None}
    if device.type == "cuda":
        props = torch.cuda.get_device_properties(device)
        info.update(name=props.name, memory_gb=round(props.total_memory / 2**30, 1),
                    capability=f"{props.major}.{props.minor}")
    else:
        info["name"] = "CPU (no GPU: numbers meaningless for this script)"
    return info


# --- (a) one training step --------------------------------------------------------------------------

def cuda_peak(device: torch.device, base: int) -> int:
    """The most bytes allocated on ``device`` above ``base`` since the peak was last reset; resets it."""
    torch.cuda.synchronize(device)
    peak = torch.cuda.max_memory_allocated(device) - base
    torch.cuda.reset_peak_memory_stats(device)
    return peak


def peaks(warm: int | None, steady: int) -> dict:
    """A row's memory: ``peak_extra_bytes``, the most of the run (warm-up included: the figure compared), and
    on a GPU its two parts, ``peak_warmup_bytes`` (compilation, CUDA graph warm-up and capture) and
    ``peak_steady_bytes`` (the timed steps: a CUDA graph's replays allocate nothing, so there what its
    pool holds between steps).  On the CPU (``warm`` None) the peak of one step after the timed ones."""
    if warm is None:
        return {"peak_extra_bytes": steady}
    return {"peak_extra_bytes": max(warm, steady), "peak_warmup_bytes": warm, "peak_steady_bytes": steady}


def memory_text(row: dict) -> str:
    """``peak +X GiB``, with the warm-up's and the timed steps' peaks where they were measured apart."""
    text = f"peak +{row['peak_extra_bytes'] / 2**30:.2f} GiB"
    if "peak_warmup_bytes" in row:
        text += (f" (warm-up +{row['peak_warmup_bytes'] / 2**30:.2f}, timed steps "
                 f"+{row['peak_steady_bytes'] / 2**30:.2f})")
    return text


def measure(spec: dict) -> dict:
    """Worker: one (implementation, precision, compile, n) in this process."""
    from compare_speed_memory import RECOMPUTE, build, relative_l2

    from petrov.train.compilation import AGREEMENT_TOLERANCE, compile_module, compiled_agreement, mark_step
    from petrov.train.precision import autocast
    from petrov.train.timing import clock

    device = torch.device(spec["device"])
    if spec["precision"] == "tf32":
        torch.set_float32_matmul_precision("high")
    impl, b, n, mode = spec["impl"], spec["batch"], spec["n"], spec["compile"]
    torch.manual_seed(0)
    model = build(impl, "galerkin").to(device).train()
    net = compile_module(model, mode) if impl == "petrov" or impl in RECOMPUTE else model
    generator = torch.Generator().manual_seed(1)
    x, y = (torch.randn(b, n, 1, generator=generator).to(device) for _ in range(2))
    pos = (torch.arange(n, dtype=torch.float32) / n).expand(b, n)[..., None].contiguous().to(device)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.Adam(params, lr=1e-4)
    low = torch.bfloat16 if spec["precision"] == "bf16" else None
    checked = {}
    if net is not model:  # a compiled step counts only if it computes the eager model (as the trainer checks)
        def predict(m: torch.nn.Module) -> torch.Tensor:
            with autocast(device, low):
                return m(x, pos)
        outputs, grads = compiled_agreement(predict, model, net, mode)
        tol_out, tol_grad = AGREEMENT_TOLERANCE[low]
        checked = {"agreement_outputs": outputs, "agreement_gradients": grads,
                   "agrees": outputs <= tol_out and grads <= tol_grad}

    def step() -> None:
        mark_step(mode)
        optimizer.zero_grad(set_to_none=True)
        with autocast(device, low):
            out = net(x, None, pos, pos)["preds"] if impl == "reference" else net(x, pos)
        relative_l2(out.float(), y).backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        optimizer.step()

    cuda = device.type == "cuda"
    if cuda:
        torch.cuda.synchronize(device)
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)

    def steps(k: int) -> float:
        """``k`` steps; their seconds between device synchronizations."""
        start = clock(device)
        for _ in range(k):
            step()
        return clock(device) - start

    warmup = steps(spec["warmup"])
    warm_peak = cuda_peak(device, base) if cuda else None
    blocks = [steps(spec["steps"]) / spec["steps"] for _ in range(3)]
    steady_peak = cuda_peak(device, base) if cuda else allocated_peak_bytes(step)
    profile = profile_steps(lambda: steps(spec["profile"]), spec["profile"], device) if spec.get("profile") else None
    return {"seconds_per_step": statistics.median(blocks), "warmup_seconds": warmup,
            **peaks(warm_peak, steady_peak), "parameters": sum(p.numel() for p in params), "profile": profile,
            **checked}


def agreement(row: dict) -> str:
    """A compiled row's values against eager: relative L2 of outputs and gradients, and the verdict."""
    if "agrees" not in row:
        return ""
    return (f"{'agrees' if row['agrees'] else 'DIFFERS'} ({row['agreement_outputs']:.1e} / "
            f"{row['agreement_gradients']:.1e})")


def trainer_step(spec: dict) -> dict:
    """Worker: the trainer's step of ``spec["preset"]`` with ``run.compile = spec["compile"]``."""
    import tempfile

    from torch._inductor import metrics as inductor_metrics

    from petrov.train import distributed as dist_
    from petrov.train.config import load_config
    from petrov.train.step import EpochTotals
    from petrov.train.timing import clock
    from petrov.train.trainer import Trainer

    cfg = load_config(spec["preset"], [f"run.compile={spec['compile']!r}", f"run.amp={str(spec['amp']).lower()}",
                                       "run.progress=false", f"run.device={spec['device']!r}", *spec["set"]])
    ctx = dist_.setup(cfg.run.device)
    inductor_metrics.reset()  # the kernels of every graph compiled from here to the end of the warm-up
    with tempfile.TemporaryDirectory() as run_dir:
        trainer = Trainer(cfg, Path(run_dir) / "run", ctx, None, [])
    if spec["model_only"] and trainer.compile_mode != "off":  # the model compiled inside the eager batch loss
        from petrov.train.compilation import compile_module
        trainer.batch_loss.net = compile_module(trainer.model, trainer.compile_mode)
        trainer.stepper.batch_loss = trainer.batch_loss
        inductor_metrics.reset()  # the kernels of the model's graphs alone (the batch loss's were compiled above)
    device, totals = ctx.device, EpochTotals(ctx.device)
    trainer.model.train()
    batches = []
    while len(batches) < spec["warmup"] + 3 * spec["steps"] + 1 + spec["profile"]:  # + the CPU memory peak's
        batches += list(trainer.train_batches.iterate())
    feed = iter(enumerate(batches, start=1))

    def steps(k: int) -> float:
        start = clock(device)
        for _ in range(k):
            number, b = next(feed)
            trainer.stepper.step(b, number, totals)
        return clock(device) - start

    cuda = device.type == "cuda"
    if cuda:
        base = torch.cuda.memory_allocated(device)
        torch.cuda.reset_peak_memory_stats(device)
    warmup = steps(spec["warmup"])
    warm_peak = cuda_peak(device, base) if cuda else None
    kernels = inductor_metrics.generated_kernel_count if trainer.compile_mode != "off" else None
    blocks = [steps(spec["steps"]) / spec["steps"] for _ in range(3)]
    steady_peak = cuda_peak(device, base) if cuda else allocated_peak_bytes(lambda: steps(1))
    profile = profile_steps(lambda: steps(spec["profile"]), spec["profile"], device) if spec["profile"] else None
    loss, bad = totals.finish(ctx)
    return {"seconds_per_step": statistics.median(blocks), "warmup_seconds": warmup, **peaks(warm_peak, steady_peak),
            "kernels": kernels, "profile": profile, "batch": cfg.optim.batch_size,
            "resolution": cfg.data.train_resolution or cfg.data.level, "resident": bool(trainer.train_batches.resident),
            "finite": bad is None and loss == loss,
            "parameters": sum(p.numel() for p in trainer.model.parameters())}


def step(args: argparse.Namespace, device: torch.device) -> list[dict]:
    cases = ([(mode, False, False) for mode in args.compile] + [(args.compile[-1], True, False)] * args.step_amp
             + [(args.compile[-1], False, True)] * (args.model_only and args.compile[-1] != "off"))
    rows = []
    for mode, amp, model_only in cases:
        spec = {"part": "step", "preset": args.step_preset, "compile": mode, "amp": amp, "steps": args.steps,
                "warmup": args.warmup, "device": device.type, "set": args.step_set, "model_only": model_only,
                "profile": args.profile}
        row = {"compile": mode + (" (model only)" if model_only else ""), "amp": "bf16" if amp else "off"}
        row.update(run_worker(__file__, spec, timeout=args.timeout))
        rows.append(row)
        kernels = f", {row['kernels']} kernels generated" if row.get("kernels") is not None else ""
        what = (f"{row['seconds_per_step'] * 1e3:8.2f} ms/step  {memory_text(row)}  "
                f"(warm-up {row['warmup_seconds']:.1f} s; batch {row['batch']} at {row['resolution']}, data "
                f"{'on the device' if row['resident'] else 'loaded per batch'}, finite loss {row['finite']}{kernels})"
                if "seconds_per_step" in row else row.get("error"))
        print(f"  {args.step_preset} compile={row['compile']:<11} amp={row['amp']:<4} {what}", flush=True)
        if row.get("profile"):
            print(format_profile(row["profile"]), flush=True)
    return rows


def reference_installed() -> bool:
    try:
        import galerkin_transformer  # noqa: F401
    except ImportError:
        return False
    return True


def speed(args: argparse.Namespace, device: torch.device) -> list[dict]:
    cases = [("reference", p, "off") for p in args.precisions] if reference_installed() else []
    cases += [("petrov", p, c) for p in args.precisions for c in args.compile]
    if args.unfused:  # eager only: what the fused Galerkin path costs or saves on this device
        cases += [("petrov+unfused", p, "off") for p in args.precisions]
    if args.checkpoint:  # the memory lever, under the last --compile setting
        cases += [(impl, p, args.compile[-1]) for impl in ("petrov+checkpoint", "petrov+ffn-checkpoint")
                  for p in args.precisions]
    if not reference_installed():
        print("  reference: galerkin-transformer is not installed (pip install galerkin-transformer==0.2.1 "
              "ipython, or pip install -e '.[bench]'); petrov alone")
    rows = []
    for n in args.n:
        for impl, precision, mode in cases:
            spec = {"impl": impl, "precision": precision, "compile": mode, "n": n, "batch": args.batch,
                    "steps": args.steps, "warmup": args.warmup, "device": str(device), "profile": args.profile}
            row = {k: spec[k] for k in ("impl", "precision", "compile", "n")}
            row.update(run_worker(__file__, spec, timeout=args.timeout))
            rows.append(row)
            what = (f"{row['seconds_per_step'] * 1e3:9.2f} ms/step  {memory_text(row)}  "
                    f"(warm-up {row['warmup_seconds']:.1f} s) {agreement(row)}"
                    ) if "seconds_per_step" in row else row.get("error")
            print(f"  {impl:<21} {precision:<7} compile={mode:<11} n={n:<7} {what}", flush=True)
            if row.get("profile"):
                print(format_profile(row["profile"]), flush=True)
    return rows


def speed_report(rows: list[dict]) -> list[dict]:
    ok = [r for r in rows if "seconds_per_step" in r]
    print()
    print(format_table(["implementation", "precision", "compile", "n", "ms/step", "peak extra GiB",
                        "compiled vs eager (outputs / gradients)"],
                       [[r["impl"], r["precision"], r["compile"], r["n"], f"{r['seconds_per_step'] * 1e3:.2f}",
                         f"{r['peak_extra_bytes'] / 2**30:.3f}", agreement(r) or "-"] for r in ok]))
    reference = {(r["precision"], r["n"]): r for r in ok if r["impl"] == "reference"}
    ratios = []
    for r in ok:
        ref = reference.get((r["precision"], r["n"]))
        if r["impl"] != "reference" and ref is not None:
            ratios.append({"impl": r["impl"], "precision": r["precision"], "compile": r["compile"], "n": r["n"],
                           "speedup": ref["seconds_per_step"] / r["seconds_per_step"],
                           "memory_ratio": r["peak_extra_bytes"] / max(ref["peak_extra_bytes"], 1),
                           "agrees": r.get("agrees", True)})
    if ratios:
        print("\npetrov vs reference (same precision, same n): speed-up and peak-memory ratio")
        for q in ratios:
            print(f"  {q['impl']:<21} {q['precision']:<7} compile={q['compile']:<11} n={q['n']:<7} "
                  f"{q['speedup']:5.2f}x faster, {q['memory_ratio']:5.2f}x the memory"
                  + ("" if q["agrees"] else "  (not counted: the compiled step computes another function)"))
    return ratios


# --- (b) accuracy at an equal budget ----------------------------------------------------------------

def accuracy(args: argparse.Namespace, out: Path) -> None:
    """``compare_accuracy.py`` on Darcy at 85 with the GPU contenders (its own output and tables)."""
    import compare_accuracy

    mode = next((c for c in args.compile if c != "off"), "off")
    argv = ["--problems", "darcy", "--contenders", *ACCURACY_CONTENDERS, "--device", args.device,
            "--compile", mode, "--data-workers", str(args.data_workers), "--out", str(out),
            "--data-dir", args.data_dir, "--augment", args.augment]
    if args.budget_minutes is not None:
        argv += ["--budget-minutes", str(args.budget_minutes)]
    compare_accuracy.main(argv + (["--quick"] if args.quick else []))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", choices=["speed", "step", "accuracy", "all"], default="all")
    parser.add_argument("--device", choices=["auto", "cpu", "cuda"], default="auto")
    parser.add_argument("--n", type=int, nargs="+", default=None, help=f"points (default {N_FULL})")
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--precisions", nargs="+", choices=PRECISIONS, default=list(PRECISIONS))
    parser.add_argument("--compile", nargs="+", choices=["off", "default", "cuda-graphs"], default=None,
                        help="petrov's run.compile settings to measure (default: off cuda-graphs on CUDA, off on the CPU)")
    parser.add_argument("--unfused", action="store_true",
                        help="(a): also petrov eager with the Galerkin layers' fused path off (petrov+unfused)")
    parser.add_argument("--checkpoint", action="store_true",
                        help="(a): also petrov with checkpoint_layers (the encoder layers' activations recomputed in "
                             "backward: petrov+checkpoint; the feed-forward hidden activations only: "
                             "petrov+ffn-checkpoint) under the last --compile setting")
    parser.add_argument("--steps", type=int, default=20, help="steps per timed block (3 blocks)")
    parser.add_argument("--warmup", type=int, default=5, help="untimed steps first (compilation, graph capture)")
    parser.add_argument("--timeout", type=float, default=900.0, help="seconds per measurement process")
    parser.add_argument("--step-preset", default="darcy-gpu", help="(c): the preset whose trainer step is timed")
    parser.add_argument("--step-amp", type=int, choices=[0, 1], default=1,
                        help="(c): also time the last --compile setting under bfloat16 autocast (1, default) or not (0)")
    parser.add_argument("--model-only", action="store_true",
                        help="(c): also the last --compile setting with the model alone compiled, the rest of the "
                             "batch loss eager around it (how the step was compiled before 2026-11-28)")
    parser.add_argument("--profile", type=int, default=0, metavar="STEPS",
                        help="(a), (c): after the timing, trace this many more steps with torch.profiler and print "
                             "where the device's time went: busy against wall-clock time, kernels by kind, the "
                             "largest (device_profile.py)")
    parser.add_argument("--step-set", action="append", default=[], metavar="KEY=VALUE",
                        help="(c): an override of the preset (as petrov train --set)")
    parser.add_argument("--budget-minutes", type=minutes, default=None,
                        help="(b): training budget per contender (default 5; compare_accuracy's 0.05 with --quick)")
    parser.add_argument("--data-workers", type=int, default=max(1, min(16, os.cpu_count() or 1)),
                        help="(b): processes solving the Darcy data")
    parser.add_argument("--data-dir", default="data/bench")
    parser.add_argument("--out", default="bench-results/gpu.json", help="JSON of (a); (b) writes gpu-accuracy.json")
    parser.add_argument("--augment", default="square", choices=["none", "square"],
                        help="(b): data.augment of every contender (default: square, as darcy-gpu trains)")
    parser.add_argument("--quick", action="store_true", help="tiny sizes, 2 steps: checks that everything runs")
    args = parser.parse_args(argv)
    if args.profile < 0:
        parser.error(f"--profile: the steps to trace must be 0 (none) or more, got {args.profile}")
    if args.quick:
        args.n = args.n or N_QUICK
        # (c) on a small file solved at 85 itself (the preset's 421 grid takes minutes to solve)
        args.step_set = args.step_set or [f"data.path='{Path(args.data_dir) / 'darcy-85-quick-step.h5'}'",
                                          "data.generate.resolution=85", "data.eval_resolutions=[85]",
                                          "data.generate.n_samples=32", "data.n_train=16", "data.n_val=8",
                                          "data.n_test=8"]
        args.steps, args.warmup = min(args.steps, 2), min(args.warmup, 1)
    else:
        args.n = args.n or N_FULL
        if args.budget_minutes is None:
            args.budget_minutes = 5.0
    return args


def main(argv: list[str] | None = None) -> None:
    spec = worker_spec(argv)
    if spec is not None:
        emit_result(trainer_step(spec) if spec.get("part") == "step" else measure(spec))
        return
    args = parse(argv)
    from petrov.train.distributed import resolve_device

    device = resolve_device(args.device)
    args.device = device.type
    if args.compile is None:
        args.compile = ["off", "cuda-graphs"] if device.type == "cuda" else ["off"]
    if device.type != "cuda" and "cuda-graphs" in args.compile:
        raise SystemExit("--compile cuda-graphs needs a CUDA device")
    info = machine_info()
    print_machine(info)
    dev = device_info(device)
    print(f"device: {dev['name']}" + (f" ({dev['memory_gb']} GiB, compute capability {dev['capability']})"
                                       if "memory_gb" in dev else "")
          + f"; torch {dev['torch']}, CUDA {dev['cuda']}, cuDNN {dev['cudnn']}"
          + ("  [quick mode: tiny sizes, numbers meaningless]" if args.quick else ""))
    out = Path(args.out)
    result = {"benchmark": "gpu", "machine": info, "device": dev, "settings": vars(args),
              "date": time.strftime("%Y-%m-%d")}
    if args.part in ("speed", "all"):
        print(f"\n(a) one training step of galerkin1d (reference config) vs the reference, batch {args.batch}, "
              f"n = {', '.join(map(str, args.n))}")
        rows = speed(args, device)
        result.update(speed=rows, speed_ratios=speed_report(rows))
        write_json(out, result)
    if args.part in ("step", "all"):
        print(f"\n(c) the trainer's training step of {args.step_preset}, run.compile = {', '.join(args.compile)}"
              + (f", and {args.compile[-1]} with bfloat16 autocast" if args.step_amp else ""))
        result.update(step=step(args, device))
        write_json(out, result)
    if args.part in ("accuracy", "all"):
        print(f"\n(b) accuracy at an equal budget on Darcy 85: {', '.join(ACCURACY_CONTENDERS)}")
        accuracy(args, out.with_name(out.stem + "-accuracy.json"))
    write_json(out, result)
    print(f"\nwrote {out.resolve()}")


if __name__ == "__main__":
    sys.exit(main())
