"""Where a training step of the Burgers hybrid spends its time and what it keeps for backward.

    python benchmarks/profile_step.py --threads 1                 # galerkin1d, reference config, n = 8192
    python benchmarks/profile_step.py --impl reference --threads 1       # the reference SimpleTransformer
    python benchmarks/profile_step.py --n 2048 --impl petrov+checkpoint --threads 1
    python benchmarks/profile_step.py --impl petrov+bf16 --threads 1     # the forward under bfloat16 autocast

One training step of an implementation of ``compare_speed_memory.py`` (the same model and step: batch
4, forward with coordinates, mean relative L2, backward, clipping at 1, Adam), after ``--warmup``
untimed steps, is timed (median of ``--steps`` unprofiled steps) and profiled twice:

- *time*: ``torch.profiler`` per-op table (self CPU time, ops sorted by it, the top ``--rows``), and
  the dense products (``mm``, ``bmm``, ``addmm``, ``baddbmm``): their floating-point operations (the
  profiler's count) and the share of the step they take;
- *saved tensors*: every tensor autograd keeps for backward, recorded by
  ``torch.autograd.graph.saved_tensors_hooks`` with the module that was running when it was saved
  (forward hooks keep a stack of module names); tensors sharing one storage count once.  The total is
  what the forward pass holds alive for backward at its end, besides parameters and the output.
"""
from __future__ import annotations

import argparse
import collections
import sys

import torch

from _common import format_table, machine_info, median_seconds, print_machine, write_json
from compare_speed_memory import IMPLEMENTATIONS, build, forward as forward_of, relative_l2

DENSE_PRODUCTS = ("aten::mm", "aten::bmm", "aten::addmm", "aten::baddbmm")


def module_stack_hooks(model: torch.nn.Module, stack: list[str]) -> list:
    """Forward pre/post hooks that keep ``stack`` = the names of the modules running now."""
    handles = []
    for name, module in model.named_modules():
        handles.append(module.register_forward_pre_hook(lambda m, a, name=name: stack.append(name or "model")))
        handles.append(module.register_forward_hook(lambda m, a, o: (stack.pop(), None)[1]))
    return handles


def saved_tensor_table(model, step_forward) -> tuple[list[list], int]:
    """Bytes kept for backward by each (innermost) module, distinct storages counted once."""
    stack: list[str] = []
    seen: dict[tuple, str] = {}
    handles = module_stack_hooks(model, stack)

    def pack(t: torch.Tensor):
        key = (t.untyped_storage().data_ptr(), t.untyped_storage().nbytes())
        if key not in seen and t.untyped_storage().nbytes() > 0:
            seen[key] = (stack[-1] if stack else "loss", tuple(t.shape), str(t.dtype).replace("torch.", ""))
        return t

    try:
        with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
            loss = step_forward()
    finally:
        for h in handles:
            h.remove()
    loss.backward()
    by_module: dict[str, list] = collections.defaultdict(lambda: [0, 0, collections.Counter()])
    for (_, nbytes), (name, shape, dtype) in seen.items():
        entry = by_module[name]
        entry[0] += nbytes
        entry[1] += 1
        entry[2][f"{shape} {dtype}"] += 1
    rows = [[name, f"{b / 1e6:.1f}", count, "; ".join(f"{k} x{v}" if v > 1 else k for k, v in shapes.items())]
            for name, (b, count, shapes) in sorted(by_module.items(), key=lambda kv: -kv[1][0])]
    return rows, sum(nbytes for _, nbytes in seen)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--n", type=int, default=8192)
    parser.add_argument("--batch", type=int, default=4)
    parser.add_argument("--mixer", default="galerkin")
    parser.add_argument("--impl", choices=IMPLEMENTATIONS, default="petrov",
                        help="petrov+checkpoint: checkpoint_layers; petrov+ffn-checkpoint: checkpoint_layers='ffn'; petrov+bf16: the forward under bfloat16 "
                             "autocast (what run.amp does); reference: the reference SimpleTransformer")
    parser.add_argument("--warmup", type=int, default=2)
    parser.add_argument("--steps", type=int, default=5, help="unprofiled steps timed (median)")
    parser.add_argument("--rows", type=int, default=25, help="ops shown in the time table")
    parser.add_argument("--threads", type=int, default=None)
    parser.add_argument("--out", default="bench-results/profile_step.json")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)
    info = machine_info(args.threads)
    print_machine(info)
    torch.manual_seed(0)
    model = build(args.impl, args.mixer).train()
    g = torch.Generator().manual_seed(1)
    b, n = args.batch, args.n
    x, y = torch.randn(b, n, 1, generator=g), torch.randn(b, n, 1, generator=g)
    pos = (torch.arange(n, dtype=torch.float32) / n).expand(b, n)[..., None].contiguous()
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-4)

    def forward():
        return relative_l2(forward_of(args.impl, model, x, pos), y)

    def step():
        optimizer.zero_grad(set_to_none=True)
        forward().backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()

    step_seconds = median_seconds(step, args.steps, warmup=args.warmup)
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], with_flops=True) as prof:
        step()
    events = prof.key_averages()
    total = sum(e.self_cpu_time_total for e in events)
    top = sorted(events, key=lambda e: -e.self_cpu_time_total)[:args.rows]
    time_rows = [[e.key, e.count, f"{e.self_cpu_time_total / 1e3:.1f}", f"{100 * e.self_cpu_time_total / total:.1f}"]
                 for e in top]
    dense = [e for e in events if e.key in DENSE_PRODUCTS]
    dense_flop, dense_us = sum(e.flops for e in dense), sum(e.self_cpu_time_total for e in dense)
    print(f"\n{args.impl}, Burgers hybrid at the reference config, mixer {args.mixer}, n = {n}, batch {b}: "
          f"one training step {step_seconds * 1e3:.0f} ms (median of {args.steps}), profiled "
          f"{total / 1e3:.0f} ms self CPU time (slower than unprofiled)")
    print(format_table(["op", "calls", "self ms", "%"], time_rows))
    print(f"dense products: {dense_flop / 1e9:.1f} GFLOP, {dense_us / 1e3:.0f} ms profiled "
          f"({100 * dense_us / total:.0f}% of the step, {dense_flop / dense_us / 1e3:.0f} GFLOP/s); "
          f"at that share, {dense_us / total * step_seconds * 1e3:.0f} ms of the unprofiled step")

    optimizer.zero_grad(set_to_none=True)
    saved_rows, saved_total = saved_tensor_table(model, forward)
    print(f"\nsaved for backward: {saved_total / 1e6:.1f} MB in total (distinct storages)")
    print(format_table(["module", "MB", "tensors", "shapes"], saved_rows))
    write_json(args.out, {"benchmark": "profile_step", "machine": info, "settings": vars(args),
                          "step_seconds": step_seconds, "total_self_ms": total / 1e3, "ops": time_rows,
                          "dense_gflop": dense_flop / 1e9, "dense_self_ms": dense_us / 1e3,
                          "saved_total_bytes": saved_total, "saved": saved_rows})


if __name__ == "__main__":
    sys.exit(main())
