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
- while ``torch.compile`` traces, the builder runs inside the graph instead (its ops depend on no
  input, so the compiler folds them into constants); the cache is neither read nor written there,
  so no guard depends on it.

The returned tensor is shared: never modify it in place (``.clone()`` one to own it).  The public
builders (``petrov.operators.transfer.restriction_matrix`` etc.) stay uncached and return fresh
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


def shape_cached(build: Callable[..., torch.Tensor]) -> Callable[..., torch.Tensor]:
    """``build(*args, **kwargs)`` (arguments: ints, tuples, bools, dtypes and a ``device``) cached per
    argument values in eager mode, traced as is under ``torch.compile`` (module docstring).  The wrapper's
    ``cache`` maps each key (the arguments, defaults filled in, the device normalized) to its tensor;
    ``cache_clear()`` frees them all."""
    signature = inspect.signature(build)
    cache: dict[tuple, torch.Tensor] = {}
    as_called: dict[tuple, torch.Tensor] = {}  # the same tensors by the call as written: no binding

    @functools.wraps(build)
    def cached(*args, **kwargs):
        if torch.compiler.is_compiling():
            return build(*args, **kwargs)
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
                    out = cache[key] = build(*args, **kwargs)
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
