"""Precision rules: sums over many points, FFTs and normalizers of 16-bit tensors run in float32;
float64 work is placed only where float64 arithmetic is fast.

A bfloat16 sum over thousands of points, a 16-bit centring or an FFT of an arbitrary size keeps
few or no correct digits; autocast outputs are therefore promoted before such operations.
"""
from __future__ import annotations

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)

# NVIDIA GPUs whose 64-bit arithmetic runs at half their 32-bit rate (32 64-bit fused multiply-adds per
# clock per multiprocessor): compute capability 6.0, 7.0, 8.0, 9.0, 10.0 -- P100, V100, A100, H100/H200,
# B200/GB200.  The others (GeForce/RTX, T4, A10, L4, L40, Jetson, B300) do 1/32 to 1/64 of it.
FAST_FLOAT64_CAPABILITIES = frozenset({(6, 0), (7, 0), (8, 0), (9, 0), (10, 0)})
_fast_float64_gpus: dict = {}


def upcast(x: torch.Tensor) -> torch.Tensor:
    """float16/bfloat16 -> float32; float32/float64 (and non-float tensors) unchanged."""
    return x.float() if x.dtype in LOW_PRECISION else x


def to_caller_dtype(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Hand back ``out``, computed in float32 at least from an input of ``dtype``: unchanged under
    autocast (as autocast's own float32 operations do: the next matrix product rounds it to 16 bits
    where that pays, everything else keeps its digits), else cast back to ``dtype``."""
    return out if torch.is_autocast_enabled(out.device.type) else out.to(dtype)


def fast_float64(device: torch.device) -> bool:
    """Whether float64 arithmetic on ``device`` is known to cost about twice float32's, not 32-64 times:
    the CPU and NVIDIA's datacenter GPUs (``FAST_FLOAT64_CAPABILITIES``); not consumer and inference
    GPUs, nor (not known here) AMD GPUs, Apple's MPS (no float64 at all) or other devices.  Decided once
    per device, a constant inside a compiled graph."""
    if device.type == "cpu":
        return True
    return device.type == "cuda" and _fast_float64_gpu(torch.cuda.current_device() if device.index is None
                                                        else device.index)


def constant_in_compiled_graphs(fn):
    """``torch.compiler.assume_constant_result(fn)`` without importing ``torch._dynamo`` (about 2 s of every
    command's start-up, most of which compile nothing): that decorator only marks ``fn``, as here
    (``tests/test_fused_galerkin.py`` checks that they mark alike)."""
    fn._dynamo_marked_constant = True
    return fn


@constant_in_compiled_graphs
def _fast_float64_gpu(index: int) -> bool:
    if index not in _fast_float64_gpus:
        capability = torch.cuda.get_device_capability(index)
        _fast_float64_gpus[index] = not torch.version.hip and capability in FAST_FLOAT64_CAPABILITIES
    return _fast_float64_gpus[index]
