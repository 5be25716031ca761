"""Where a step's device time goes: a ``torch.profiler`` trace of a few steps, summarized.

``profile_steps(work, steps, device)`` runs ``work()`` (which does ``steps`` steps) under the profiler and
returns, per step: the wall-clock time (between device synchronizations), the time the device was busy (the
union of its kernel and copy intervals, so overlapping streams count once), the kernels launched, their time
by kind (``KINDS``: inductor's generated kernels, convolutions, matrix products, FFTs, the optimizer,
copies, the rest) and the kernels that took the most time. Busy time well below the wall-clock time says the
step waits for the host (launches, Python, synchronizations); busy time near it says the kernels themselves
are what to cut, and the table says which. Kernels replayed by a CUDA graph are traced as any others (CUPTI
records graph kernels).

On a CPU there is no separate device: the summary lists the operators by their own CPU time instead
(``busy_ms`` is then the sum of the operators' self times, which nest in the wall-clock time).

The summary is computed from ``(name, start_us, end_us)`` intervals by ``summarize`` (a pure function);
``format_profile`` prints it. Used by ``gpu.py --part step --profile N``.
"""
from __future__ import annotations

from typing import Any, Callable, Iterable

import torch

# kernel kinds, by what their names contain (lower case; the first match wins)
KINDS = [
    ("inductor (generated)", ("triton_", "cpp_fused")),
    ("convolutions", ("cudnn", "fprop", "dgrad", "wgrad", "winograd", "convolve", "conv2d", "aten::convolution",
                      "aten::mkldnn_convolution")),
    ("matrix products", ("gemm", "gemv", "nvjet", "cutlass", "xmma", "splitkreduce", "cublas", "matmul", "aten::mm",
                         "aten::bmm", "aten::addmm", "aten::baddbmm")),
    ("FFTs", ("fft",)),
    ("optimizer", ("adam", "multi_tensor_apply", "foreach")),
    ("copies", ("memcpy", "memset", "copy", "aten::cat", "aten::clone")),
]
OTHER = "other (aten kernels)"
TOP = 12


def kind_of(name: str) -> str:
    """The ``KINDS`` entry a kernel named ``name`` belongs to (``OTHER`` if none)."""
    low = name.lower()
    return next((kind for kind, marks in KINDS if any(m in low for m in marks)), OTHER)


def busy_us(intervals: Iterable[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals: time during which at least one ran."""
    total, reach = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= reach:
            continue
        total += end - max(start, reach)
        reach = end
    return total


def summarize(kernels: list[tuple[str, float, float]], steps: int, wall_seconds: float,
              overlapping: bool = True) -> dict[str, Any]:
    """Per-step figures of ``kernels`` (``(name, start_us, end_us)``) traced over ``steps`` steps that
    took ``wall_seconds``: ``wall_ms``, ``busy_ms`` (the union of the intervals; their plain sum when
    not ``overlapping``, as for nested CPU operators' self times), ``kernels`` (count), ``by_kind``
    (``{kind: [ms, count]}``, largest first) and ``top`` (``[name, ms, count, us_each]``, the ``TOP``
    largest)."""
    if steps < 1:
        raise ValueError(f"steps must be >= 1, got {steps}")
    spans = [(s, e) for _, s, e in kernels]
    busy = busy_us(spans) if overlapping else sum(e - s for s, e in spans)
    by_name: dict[str, list[float]] = {}
    for name, start, end in kernels:
        entry = by_name.setdefault(name, [0.0, 0])
        entry[0] += end - start
        entry[1] += 1
    by_kind: dict[str, list[float]] = {}
    for name, (us, count) in by_name.items():
        entry = by_kind.setdefault(kind_of(name), [0.0, 0])
        entry[0] += us / 1e3 / steps
        entry[1] += count / steps
    top = sorted(by_name.items(), key=lambda item: -item[1][0])[:TOP]
    return {"steps": steps, "wall_ms": wall_seconds * 1e3 / steps, "busy_ms": busy / 1e3 / steps,
            "kernels": len(kernels) / steps,
            "by_kind": dict(sorted(by_kind.items(), key=lambda item: -item[1][0])),
            "top": [[name, us / 1e3 / steps, count / steps, us / count] for name, (us, count) in top]}


def profile_steps(work: Callable[[], float], steps: int, device: torch.device) -> dict[str, Any]:
    """Trace ``work()`` -- ``steps`` steps, returning their wall-clock seconds (device-synchronized) --
    and ``summarize`` the device's kernels (CUDA) or the operators' self CPU times (CPU)."""
    from torch.profiler import ProfilerActivity, profile

    cuda = device.type == "cuda"
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
    with profile(activities=activities) as prof:
        wall = work()
    if cuda:
        kernels = [(e.name, e.time_range.start, e.time_range.end) for e in prof.events()
                   if e.device_type == torch.autograd.DeviceType.CUDA]
        return {"device": "cuda", **summarize(kernels, steps, wall)}
    # CPU: each operator's own time, laid end to end (self times of nested operators do not overlap)
    ops = [(e.name, 0.0, e.self_cpu_time_total) for e in prof.events()
           if e.device_type == torch.autograd.DeviceType.CPU and e.self_cpu_time_total > 0]
    return {"device": "cpu", **summarize(ops, steps, wall, overlapping=False)}


def format_profile(summary: dict[str, Any], indent: str = "    ") -> str:
    """The summary as lines of text: the totals, the kinds, the top kernels."""
    what = "device busy" if summary["device"] == "cuda" else "operators' own CPU time"
    unit = "kernels" if summary["device"] == "cuda" else "operator calls"
    share = summary["busy_ms"] / summary["wall_ms"] if summary["wall_ms"] > 0 else float("nan")
    lines = [f"{indent}profile of {summary['steps']} steps: wall {summary['wall_ms']:.2f} ms/step, {what} "
             f"{summary['busy_ms']:.2f} ms/step ({share:.0%}), {summary['kernels']:.0f} {unit}/step"]
    lines.append(indent + "  by kind: " + "; ".join(f"{kind} {ms:.2f} ms ({count:.0f})"
                                                    for kind, (ms, count) in summary["by_kind"].items()))
    for name, ms, count, us_each in summary["top"]:
        lines.append(f"{indent}  {ms:7.3f} ms/step  {count:5.0f} x {us_each:8.1f} us  {name[:90]}")
    return "\n".join(lines)
