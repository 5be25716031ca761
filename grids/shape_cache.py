"""Tensors that depend only on sizes, dtype and device, built once per key and shared.

Transfer matrices, quadrature weights, grid coordinates and FFT index lists are the same at every
call with the same sizes; rebuilding them costs a handful of kernel launches per forward (most of a
step's time on a GPU at these sizes) and, where a builder checked a value, a host synchronization.
``shape_cached`` wraps such a builder:

- in eager mode the first call with a key (the call's arguments; a device is normalized, so
  ``"cuda"`` and ``"cuda:0"`` share an entry) builds the tensor and every later call returns that
  same tensor: one object, one address, which a CUDA graph captured after a warm-up call reads at
  every replay.  It is built with autograd off and outside inference mode, so it carries no graph
  and can be saved for backward whatever mode the first call ran in.  A different dtype, device or
  size is a different entry.
- while ``torch.compile`` traces, a tensor the cache already holds for the call as written enters the
  graph as an input: dynamo guards the entry (its key, shape, dtype and device; a cleared cache makes
  the graph recompile), and the tensor is marked as having a static address, so a CUDA graph reads it
  in place instead of copying it at every replay.  Without an entry (nothing built it in eager mode
  yet, a ``None`` or a name as the device, or sizes that are symbolic under dynamic shapes) the builder
  runs inside the graph, and the cache is not written there.  Traced, a builder is code of the step:
  inductor folds only uniform constants in a training graph, so it would build the tensor in every
  step (``darcy-gpu``'s ``latent2d``: 263 of the 614 operations of its forward graph built 14 transfer
  and DFT matrices, and its compiled forward and backward generated 268 kernels on a CPU, 249 with the
  cache's tensors as inputs).  A compiled model's first call should then follow an eager one at the
  same sizes (the trainer's check of the compiled model makes one).

The returned tensor is shared: never modify it in place (``.clone()`` one to own it).  The public
builders (``petrov.grids.transfer.restriction_matrix`` etc.) stay uncached and return fresh
tensors; the models use their cached twins.  ``clear_shape_caches()`` empties every cache (frees the
memory; a CUDA graph captured before must not be replayed after it).
"""
from __future__ import annotations

import functools
import inspect
from typing import Callable

import torch

_CACHES: list[Callable[[], None]] = []  # every shape_cached builder's cache_clear


def clear_shape_caches() -> None:
    """Empty the cache of every ``shape_cached`` builder."""
    for clear in _CACHES:
        clear()


def _device(value) -> torch.device:
    """The device a ``device`` argument means (None: torch's default; ``"cuda"``: the current GPU)."""
    device = torch.get_default_device() if value is None else torch.device(value)
    if device.type == "cuda" and device.index is None:
        device = torch.device("cuda", torch.cuda.current_device())
    return device


def _key_part(name: str, value: object) -> object:
    if name == "device":
        return _device(value)
    return tuple(value) if isinstance(value, (list, torch.Size)) else value


def _concrete(values: tuple) -> bool:
    """Whether no value (nor a tuple's item) is a symbolic size: a key of concrete Python values."""
    return not any(isinstance(v, torch.SymInt) or (isinstance(v, tuple) and not _concrete(v)) for v in values)


def static_address(t: torch.Tensor) -> torch.Tensor:
    """``t``, marked as ``torch._dynamo.mark_static_address(t)`` marks it (without a guard), without importing
    ``torch._dynamo`` (seconds of start-up of every command that compiles nothing): a compiled graph taking it
    as an input reads it where it is (a CUDA graph does not copy it at every replay; ``tests/test_capture.py``
    checks the mark is torch's, and that a compiled model's static inputs, which inductor's CUDA graphs read in
    place, are every input but the call's own tensors)."""
    t._dynamo_static_input_type = "unguarded"
    return t


def shape_cached(build: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``build(*args, **kwargs)`` (arguments: ints, tuples, bools, dtypes and a ``device``) cached per
    argument values in eager mode; under ``torch.compile`` the cached tensor as a graph input, or the
    builder traced where there is none (module docstring).  The wrapper's
    ``cache`` maps each key (the arguments, defaults filled in, the device normalized) to its tensor;
    ``cache_clear()`` frees them all."""
    signature = inspect.signature(build)
    cache: dict[tuple, torch.Tensor] = {}
    as_called: dict[tuple, torch.Tensor] = {}  # the same tensors by the call as written: no binding

    @functools.wraps(build)
    def cached(*args, **kwargs):
        if torch.compiler.is_compiling():
            out = as_called.get((args, tuple(kwargs.items()))) if _concrete((*args, *kwargs.values())) else None
            return build(*args, **kwargs) if out is None else out
        # None and a device name may mean another device later: such calls always take the full key
        values = (*args, *kwargs.values())
        plain = not any(v is None or isinstance(v, (str, list)) for v in values)
        written = (args, tuple(kwargs.items())) if plain else None
        out = as_called.get(written) if written is not None else None
        if out is None:
            bound = signature.bind(*args, **kwargs)
            bound.apply_defaults()
            key = tuple(_key_part(k, v) for k, v in bound.arguments.items())
            out = cache.get(key)
            if out is None:
                with torch.inference_mode(False), torch.no_grad():
                    out = cache[key] = static_address(build(*args, **kwargs))
            if written is not None:
                as_called[written] = out
        return out

    def cache_clear() -> None:
        cache.clear()
        as_called.clear()

    cached.cache = cache
    cached.cache_clear = cache_clear
    _CACHES.append(cache_clear)
    return cached
