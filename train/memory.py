"""Out of device memory: one line naming the batch size and what to lower, never a traceback.

``torch.cuda.OutOfMemoryError`` raised in a training step, a validation pass, the test or
``petrov evaluate`` becomes a ``DeviceOutOfMemory`` whose message names where it happened, the
batch size, and the settings that lower the memory a step needs: the batch size, the model's
``checkpoint_layers`` (recompute each layer in backward instead of keeping its activations) where the
model has that option, and ``run.amp`` (bfloat16 activations) in training.  Evaluation keeps no
activations for backward, so there only its batch size helps.
"""
from __future__ import annotations

import contextlib
from typing import Iterator, Sequence

import torch


class DeviceOutOfMemory(RuntimeError):
    """The device ran out of memory; the message says what to lower."""


@contextlib.contextmanager
def out_of_memory_advice(what: str, batch: int, device: torch.device, lower: Sequence[str]) -> Iterator[None]:
    """Inside the block, ``torch.cuda.OutOfMemoryError`` is raised again as a ``DeviceOutOfMemory``:
    ``out of memory on DEVICE in WHAT at batch size BATCH; lower: ...``."""
    try:
        yield
    except torch.cuda.OutOfMemoryError:
        raise DeviceOutOfMemory(f"out of memory on {device} in {what} at batch size {batch}; to need less: "
                                f"{'; '.join(lower)}") from None


def training_advice(cfg, model: torch.nn.Module, per_process: int) -> list[str]:
    """What lowers a training step's memory under config ``cfg`` for ``model``."""
    o, r = cfg.optim, cfg.run
    world = f" ({per_process} per process)" if per_process != o.batch_size else ""
    advice = [f"lower optim.batch_size (now {o.batch_size}{world})"]
    options = getattr(model, "config", None)
    if options is not None and getattr(options, "checkpoint_layers", True) is not True:  # False or "ffn"
        advice.append("set model.options.checkpoint_layers = true (each layer recomputed in backward)")
    if not r.amp:
        advice.append("set run.amp = true (bfloat16 activations)")
    return advice


def evaluation_advice(key: str, batch: int) -> list[str]:
    """What lowers an evaluation's memory: its batch size, set by ``key`` (a config key or a flag)."""
    return [f"lower {key} (now {batch})"]


__all__ = ["DeviceOutOfMemory", "evaluation_advice", "out_of_memory_advice", "training_advice"]
