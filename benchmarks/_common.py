"""Shared helpers of the benchmark scripts: machine description, timing, resident-memory accounting,
one-measurement-per-process workers, tables and JSON output.

The scripts import this as ``_common`` (running ``python benchmarks/NAME.py`` puts ``benchmarks/`` on
``sys.path``).  Nothing here is part of the petrov package.

Memory accounting (Linux): a measurement runs in its own process; it records the resident set size
``rss_base`` (``/proc/self/statm``) once its model/layer and inputs exist, runs the measured work, and
reports ``peak_rss - rss_base`` with ``peak_rss = resource.getrusage(RUSAGE_SELF).ru_maxrss`` — the
high-water mark of the process's resident memory.  That is the extra memory the work needed on top of
the model, inputs and the imported libraries (activations kept for backward, gradients, optimizer
state, temporaries).  The peak includes anything earlier in the process, so each worker does nothing
heavy before the baseline; if the measured work peaks below an earlier peak the value reads as 0.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import resource
import statistics
import subprocess
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any, Callable, Sequence

import torch

from petrov.common import files
from petrov.common.machine import cpu_model

# --- machine --------------------------------------------------------------------------------------

def package_version(name: str) -> str | None:
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def machine_info(threads: int | None = None) -> dict[str, Any]:
    """What the figures were measured on (printed at the top of every script, stored in the JSON)."""
    try:
        usable = len(os.sched_getaffinity(0))
    except AttributeError:
        usable = os.cpu_count()
    info = {
        "cpu": cpu_model(),
        "logical_cores": os.cpu_count(),
        "usable_cores": usable,
        "torch": torch.__version__,
        "torch_threads": threads or torch.get_num_threads(),
        "python": platform.python_version(),
        "platform": platform.platform(),
        "memory_available_gb": round(mem_available_bytes() / 1e9, 1) if mem_available_bytes() else None,
        "load_average": list(os.getloadavg()) if hasattr(os, "getloadavg") else None,
        "petrov": package_version("petrov"),
        "galerkin-transformer": package_version("galerkin-transformer"),
        "neuraloperator": package_version("neuraloperator"),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"),
    }
    return info


def print_machine(info: dict[str, Any]) -> None:
    load = info.get("load_average")
    print(f"machine: {info['cpu']}; {info['usable_cores']} usable of {info['logical_cores']} logical cores; "
          f"{info['memory_available_gb']} GB available; load average "
          f"{', '.join(f'{x:.2f}' for x in load) if load else 'n/a'}")
    peers = ", ".join(f"{k} {info[k]}" for k in ("petrov", "galerkin-transformer", "neuraloperator") if info[k])
    print(f"software: python {info['python']}, torch {info['torch']} ({info['torch_threads']} threads); {peers}")
    print(f"date: {info['date']}")
    cores = info.get("usable_cores") or 1
    if load and load[0] > 0.5 * cores:
        # measured here: with another process on the second core, torch's 2-thread element-wise ops ran
        # ~30x slower than with 1 thread; timings on a busy machine say little
        print(f"WARNING: the machine is busy (1-min load {load[0]:.2f} on {cores} cores): timings are "
              f"unreliable; rerun on an idle machine, or pass --threads 1 to limit the damage")


# --- memory ---------------------------------------------------------------------------------------

def current_rss_bytes() -> int:
    """Resident set size of this process now (Linux /proc/self/statm; 0 where unavailable)."""
    try:
        pages = int(Path("/proc/self/statm").read_text().split()[1])
    except (OSError, IndexError, ValueError):
        return 0
    return pages * os.sysconf("SC_PAGE_SIZE")


def peak_rss_bytes() -> int:
    """High-water mark of this process's resident set (ru_maxrss: KiB on Linux, bytes on macOS)."""
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak if sys.platform == "darwin" else peak * 1024


def mem_available_bytes() -> int:
    """MemAvailable from /proc/meminfo (0 where unavailable)."""
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def allocated_peak_bytes(work: Callable[[], Any]) -> int:
    """The most bytes torch's CPU allocator held during one call of ``work`` above what it held when the
    call began: the GPU's ``max_memory_allocated`` measure on the CPU, allocation by allocation, compiled
    code's included (from the profiler's allocation events, which carry the allocator's running total;
    torch's private event tree, as no public profiler API gives that total).  Unlike the resident set it
    does not depend on what the process touched before, nor on when the allocator returns pages."""
    from torch._C._profiler import _EventType
    from torch.profiler import ProfilerActivity, profile

    with profile(activities=[ProfilerActivity.CPU], profile_memory=True) as prof:
        work()
    events = []
    stack = list(prof.profiler.kineto_results.experimental_event_tree())
    while stack:
        node = stack.pop()
        if node.typed[0] == _EventType.Allocation:
            events.append((node.start_time_ns, node.typed[1].total_allocated, node.typed[1].alloc_size))
        stack.extend(node.children)
    if not events:
        return 0
    events.sort()
    base = events[0][1] - events[0][2]  # the total before the first allocation (or free) of the call
    return max(0, max(total for _, total, _ in events) - base)


class PeakMemory:
    """``rss_base`` at construction; ``.extra_bytes()`` = peak RSS since process start minus it."""

    def __init__(self) -> None:
        self.base = current_rss_bytes()

    def extra_bytes(self) -> int:
        return max(0, peak_rss_bytes() - self.base)


# --- timing ---------------------------------------------------------------------------------------

def median_seconds(step: Callable[[], Any], repeats: int, warmup: int = 1) -> float:
    """Median wall-clock seconds of ``step()`` over ``repeats`` calls after ``warmup`` untimed ones."""
    for _ in range(warmup):
        step()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        step()
        times.append(time.perf_counter() - start)
    return statistics.median(times)


# --- attention-layer helpers (shared by attention_speed.py and attention_scaling.py) --------------

QUADRATIC = {"fourier", "softmax"}


def mixer_variants(mixers: Sequence[str]) -> list[tuple[str, str, dict]]:
    """(label, mixer name, options) rows: every mixer, plus ``fourier*`` = the Fourier operator
    computed by associativity in O(n d²)."""
    rows = []
    for name in mixers:
        options = {"seed": 0} if name == "performer" else {}
        rows.append((name, name, options))
        if name == "fourier":
            rows.append(("fourier*", name, {"associative": True}))
    return rows


def kernel_matrix_gb(label: str, b: int, h: int, n: int) -> float:
    """Memory of the n x n matrices (kernel + its gradient, float32) of the dense Fourier kernel;
    0 for the others (softmax goes through scaled_dot_product_attention, whose fused CPU kernel
    does not store the matrix: only its time is quadratic)."""
    return 2 * b * h * n * n * 4 / 1e9 if label == "fourier" else 0.0


def fwd_bwd_step(layer: torch.nn.Module, x: torch.Tensor, pos: torch.Tensor) -> Callable[[], None]:
    """One forward + backward pass of an attention layer (a closure for :func:`median_seconds`)."""

    def step() -> None:
        layer.zero_grad(set_to_none=True)
        layer(x, pos).square().mean().backward()

    return step


# --- workers: one measurement per process ---------------------------------------------------------

WORKER_FLAG = "--worker"
RESULT_PREFIX = "RESULT-JSON: "


def run_worker(script: str | Path, spec: dict[str, Any], timeout: float | None = None,
               env: dict[str, str] | None = None, echo: bool = False) -> dict[str, Any]:
    """Run ``python script --worker '<spec json>'`` and return the dict it printed after
    ``RESULT-JSON:``; a failure (non-zero exit, e.g. killed for memory, or a timeout) becomes
    ``{"error": ...}`` instead of an exception, so one contender cannot sink the whole table."""
    cmd = [sys.executable, str(script), WORKER_FLAG, json.dumps(spec)]
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, **(env or {})})
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if echo and proc.stderr.strip():
        print(proc.stderr.rstrip(), file=sys.stderr)
    for line in reversed(proc.stdout.splitlines()):
        if line.startswith(RESULT_PREFIX):
            return json.loads(line[len(RESULT_PREFIX):])
    if proc.returncode < 0:
        reason = f"killed by signal {-proc.returncode} (out of memory?)"
    else:
        last = (proc.stderr.strip().splitlines() or ["no output"])[-1]
        reason = f"exit {proc.returncode}: {last[:200]}"
    return {"error": reason}


def emit_result(result: dict[str, Any]) -> None:
    """Called by a worker: print its result for :func:`run_worker`."""
    print(RESULT_PREFIX + json.dumps(result), flush=True)


def worker_spec(argv: Sequence[str] | None) -> dict[str, Any] | None:
    """The spec if this process was started by :func:`run_worker`, else None."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if len(argv) == 2 and argv[0] == WORKER_FLAG:
        return json.loads(argv[1])
    return None


# --- several seeds and several jobs ---------------------------------------------------------------

SPREAD_RULE = ("a comparison counts as met only when the difference exceeds the spread over the seeds: "
               "ours mean + ours std < theirs mean - theirs std ('<=' for an 'at most' target), and against a "
               "fixed threshold t: mean + std <= t (std: sample standard deviation; 0 with one seed, which "
               "leaves the plain comparisons)")


def seed_stats(values: Sequence[float | None]) -> dict[str, Any] | None:
    """``{"mean", "std", "min", "max", "n", "values"}`` of one figure over the seeds (runs that gave none,
    ``None``, are left out; None if none did).  ``std`` is the sample standard deviation, 0 for one run."""
    vals = [float(v) for v in values if v is not None]
    if not vals:
        return None
    return {"mean": statistics.fmean(vals), "std": statistics.stdev(vals) if len(vals) > 1 else 0.0,
            "min": min(vals), "max": max(vals), "n": len(vals), "values": vals}


def exceeds_spread(ours: dict[str, Any], theirs: dict[str, Any], strict: bool = True) -> bool:
    """The verdict rule of a comparison over seeds (lower is better): ours counts as better only when the
    difference exceeds the spread, ``ours mean + ours std < theirs mean - theirs std`` (``<=`` when not
    ``strict``, for an "at most" target).  With one seed each, the plain comparison."""
    lhs, rhs = ours["mean"] + ours["std"], theirs["mean"] - theirs["std"]
    return lhs < rhs if strict else lhs <= rhs


def format_spread(stats: dict[str, Any] | None, spec: str = ".3e") -> str:
    """``mean`` for one seed, ``mean ± std`` for several, ``-`` for none."""
    if stats is None:
        return "-"
    return f"{stats['mean']:{spec}}" + (f" ± {stats['std']:.1e}" if stats["n"] > 1 else "")


def run_pinned(jobs: Sequence[Any], n_jobs: int, fn: Callable[[Any, int | None], Any]) -> list[Any]:
    """``[fn(job, cpu) for job in jobs]``, ``n_jobs`` at a time; each call gets a usable core of its own
    (``cpu``, to pin its worker process to) while it runs, or None with ``n_jobs == 1`` (in order)."""
    if n_jobs == 1:
        return [fn(job, None) for job in jobs]
    import queue
    from concurrent.futures import ThreadPoolExecutor

    free: queue.Queue = queue.Queue()
    for cpu in sorted(os.sched_getaffinity(0))[:n_jobs]:
        free.put(cpu)

    def pinned(job):
        cpu = free.get()
        try:
            return fn(job, cpu)
        finally:
            free.put(cpu)

    with ThreadPoolExecutor(max_workers=n_jobs) as pool:
        return list(pool.map(pinned, jobs))


# --- arguments ------------------------------------------------------------------------------------

def minutes(text: str) -> float:
    """``--budget-minutes`` as argparse reads it: a finite number of minutes > 0 (else argparse's one-line
    error, before any data is generated)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected minutes as a number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"must be a number of minutes > 0, got {text!r}")
    return value


# --- output ---------------------------------------------------------------------------------------

def format_epochs(epochs: float | None) -> str:
    """Epochs as a table shows them: whole ones as integers, a run whose last epoch ended early
    (``optim.epochs`` with a fraction) with two decimals; ``?`` for None."""
    if epochs is None:
        return "?"
    return f"{epochs:.0f}" if float(epochs).is_integer() else f"{epochs:.2f}"


def format_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain-text table with right-aligned columns (first column left-aligned)."""
    cells = [[str(h) for h in headers]] + [[str(c) for c in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]

    def line(r: Sequence[str]) -> str:
        return "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(r, widths)))

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(cells[0]), rule] + [line(r) for r in cells[1:]])


def write_json(path: str | Path, data: Any) -> None:
    """Write ``data`` as JSON atomically (temp file in the same directory, then rename)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    files.write_json(path, data)


def verdict(met: bool | None) -> str:
    return "n/a (not measured)" if met is None else ("met" if met else "not met")


def gb(n_bytes: float | None) -> str:
    return "-" if n_bytes is None else f"{n_bytes / 1e9:.2f} GB"


class TensorState:
    """Mixin for modules that wrap a neuraloperator model: ``state_dict`` without neuraloperator's
    ``"_metadata"`` entry (its constructor arguments, functions included).  petrov's checkpoints hold
    tensors only (``torch.load(weights_only=True)``), and the config rebuilds the model."""

    def state_dict(self, *args, **kwargs):
        state = super().state_dict(*args, **kwargs)
        for key in [k for k, v in state.items() if not isinstance(v, torch.Tensor)]:
            del state[key]
        return state
