"""One rule for 16-bit tensors: sums over many points, FFTs and normalizers run in float32.

A bfloat16 sum over thousands of points, a 16-bit centring or an FFT of an arbitrary size keeps
few or no correct digits; autocast outputs are therefore promoted before such operations.
"""
from __future__ import annotations

import torch

LOW_PRECISION = (torch.float16, torch.bfloat16)


def upcast(x: torch.Tensor) -> torch.Tensor:
    """float16/bfloat16 -> float32; float32/float64 (and non-float tensors) unchanged."""
    return x.float() if x.dtype in LOW_PRECISION else x


def to_caller_dtype(out: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """Hand back ``out``, computed in float32 at least from an input of ``dtype``: unchanged under
    autocast (as autocast's own float32 operations do: the next matrix product rounds it to 16 bits
    where that pays, everything else keeps its digits), else cast back to ``dtype``."""
    return out if torch.is_autocast_enabled(out.device.type) else out.to(dtype)
