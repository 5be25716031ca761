"""The arithmetic of a training run: ``run.amp`` and ``run.matmul_precision``.

- ``run.amp``: the model's forward in training under 16-bit autocast (``amp_dtype``: bfloat16 on the
  CPU and on CUDA devices that have it, else float16 with gradient scaling); the weights, the
  normaliser's decode, the loss, the gradients, the optimizer, validation and test stay float32.
- ``run.matmul_precision``: ``torch.set_float32_matmul_precision`` for the run (restored after it):
  ``"highest"`` float32 products, ``"high"`` TF32 tensor cores on GPUs that have them (inputs rounded to
  10 mantissa bits, float32 accumulation), ``"medium"`` bfloat16 products.  ``"auto"`` is ``"highest"``
  on every device: a training step of these models is bound by kernel launches, not by matrix products
  (latent2d at 85², batch 8, is a few GFLOP per step: under a millisecond of an H100's float32 rate
  against 25.9 ms measured per eager step), so TF32 has nothing measured to win here, and the accuracy
  figures were measured in float32.  Large point counts (galerkin1d at n = 262,144) are where ``"high"``
  may pay; ``benchmarks/gpu.py`` measures it.
"""
from __future__ import annotations

import contextlib
from typing import Iterator

import torch

MATMUL_PRECISIONS = ("highest", "high", "medium")


def amp_dtype(device: torch.device) -> torch.dtype:
    """The 16-bit type of ``run.amp`` on ``device``: bfloat16 on the CPU and on CUDA devices that
    support it (float32's exponent range: no gradient scaling), else float16 (with a GradScaler)."""
    if device.type == "cuda" and not torch.cuda.is_bf16_supported():
        return torch.float16
    return torch.bfloat16


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` to ``dtype`` on ``device``'s type; a no-op context for ``dtype`` None."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device_type=device.type, dtype=dtype)


def resolve_matmul_precision(setting: str) -> str:
    """``run.matmul_precision`` as ``torch.set_float32_matmul_precision`` takes it (``"auto"``:
    ``"highest"``, see the module docstring)."""
    if setting == "auto":
        return "highest"
    if setting not in MATMUL_PRECISIONS:
        raise ValueError(f"run.matmul_precision must be auto or one of {', '.join(MATMUL_PRECISIONS)}, got {setting!r}")
    return setting


@contextlib.contextmanager
def matmul_precision(precision: str) -> Iterator[None]:
    """``torch.set_float32_matmul_precision(precision)`` inside the block, the previous setting after it
    (the setting is global to the process; ``train`` is an API call and leaves it as it found it)."""
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision(precision)
    try:
        yield
    finally:
        torch.set_float32_matmul_precision(before)


__all__ = ["MATMUL_PRECISIONS", "amp_dtype", "autocast", "matmul_precision", "resolve_matmul_precision"]
