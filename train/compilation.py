"""``run.compile``: the model under ``torch.compile`` in training and validation.

Settings: ``"off"`` (eager), ``"default"`` (``torch.compile(model)``: fused kernels, the step still
launched op by op from Python), ``"cuda-graphs"`` (``torch.compile(model, mode="reduce-overhead")``:
the compiled forward and backward captured as CUDA graphs and replayed, one launch per graph).  A CUDA
graph replays the shapes it captured, so with ``"cuda-graphs"`` every batch has the same shape
(``petrov.train.batches`` pads the last partial batch with zero-weight copies of its own samples) and
each step begins with ``torch.compiler.cudagraph_mark_step_begin()`` (``mark_step``), which tells
the graphs that the previous step's outputs are no longer read.

``"auto"`` chooses by device, from measurements of one training step (latent2d with the physics mixer,
the ``darcy-budget-85`` sizes, 85 × 85, batch 8):

- on one NVIDIA H100 (torch 2.11, CUDA 13, 2026-11-25): 25.9 ms eager, 22.5 ms ``"default"``, 7.4 ms
  ``"cuda-graphs"`` -- the step is bound by kernel launches and host synchronization, which CUDA graphs
  remove; so ``"auto"`` is ``"cuda-graphs"`` on one CUDA device for grid data;
- on the project's 2-core CPU (AMD EPYC): compiled and eager within 4% of each other (0.327 and 0.338 s
  per step) -- nothing to win for the compilation time, so ``"auto"`` is ``"off"`` on the CPU;
- point sets (meshes) are padded per batch to its largest mesh, so their shapes change from batch to
  batch (a CUDA graph, or a recompilation, per shape): ``"auto"`` is ``"off"`` for them, and
  ``"cuda-graphs"`` is refused;
- in a distributed run (DDP) ``"auto"`` is ``"off"``: CUDA graphs with DDP's gradient hooks are not
  measured here, and torch reports crashes of ``"reduce-overhead"`` with DDP when training and
  inference alternate (pytorch/pytorch issue 128218).

The compiled module wraps the model (``torch.compile`` returns an ``OptimizedModule`` sharing its
parameters); checkpoints save the plain model's ``state_dict`` (no ``_orig_mod.`` prefixes), so a run
compiled on a GPU loads anywhere.
"""
from __future__ import annotations

from typing import Any

import torch

COMPILE_SETTINGS = ("auto", "off", "default", "cuda-graphs")


def resolve_compile(setting: str, device: torch.device, point_data: bool = False, distributed: bool = False) -> str:
    """``run.compile`` on ``device`` as ``"off"``, ``"default"`` or ``"cuda-graphs"`` (``"auto"``: see the
    module docstring); ValueError for a setting the device or the data cannot take."""
    if setting not in COMPILE_SETTINGS:
        raise ValueError(f"run.compile must be one of {', '.join(COMPILE_SETTINGS)}, got {setting!r}")
    if setting == "auto":
        return "cuda-graphs" if device.type == "cuda" and not point_data and not distributed else "off"
    if setting == "cuda-graphs" and device.type != "cuda":
        raise ValueError(f"run.compile = 'cuda-graphs' needs a CUDA device (this run trains on {device}); "
                         f"use 'default' or 'off'")
    if setting == "cuda-graphs" and point_data:
        raise ValueError("run.compile = 'cuda-graphs' replays one shape, but point-set batches are padded to their "
                         "largest mesh, which changes from batch to batch; use 'default' or 'off'")
    return setting


def compile_options(mode: str) -> dict[str, Any]:
    """The keyword arguments of ``torch.compile`` for a resolved ``mode`` (not ``"off"``)."""
    return {"mode": "reduce-overhead"} if mode == "cuda-graphs" else {}


def compile_module(module: torch.nn.Module, mode: str) -> torch.nn.Module:
    """``module`` itself for ``"off"``, else ``torch.compile(module, ...)`` (compiled lazily, at its first
    call; the parameters are the module's own)."""
    if mode == "off":
        return module
    return torch.compile(module, **compile_options(mode))


def mark_step(mode: str) -> None:
    """Before each step under ``"cuda-graphs"``: the previous replay's outputs may be overwritten now."""
    if mode == "cuda-graphs":
        torch.compiler.cudagraph_mark_step_begin()


def static_shapes(mode: str) -> bool:
    """Whether every batch must have one shape (CUDA graphs replay the shapes they captured)."""
    return mode == "cuda-graphs"


__all__ = ["COMPILE_SETTINGS", "compile_module", "compile_options", "mark_step", "resolve_compile", "static_shapes"]
