"""``run.compile``: ``torch.compile`` in training and validation.

In one process the trainer compiles the step's whole batch loss (``petrov.train.step.BatchLoss``: the
inputs' normalisation and noise, the model, the decoding and the loss), so that the normalisation and the
loss are not launched op by op around a compiled model; under DDP it compiles the DDP-wrapped model (the
form torch.compile supports for DDP); validation compiles the model alone.

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
  remove; so ``"auto"`` is ``"cuda-graphs"`` on one CUDA device for grid data (the trainer's whole step
  of ``darcy-gpu`` on one NVIDIA H200, 2026-11-28: 30.06 ms eager, 7.61 ms ``"cuda-graphs"``);
- on the project's 2-core CPU (AMD EPYC): compiled and eager were within 4% of each other (0.327 and
  0.338 s per step); on 2026-11-28, with the spectral convolution in real arithmetic and the whole batch
  loss compiled, the trainer's step of ``darcy-budget-85`` took 116 ms compiled and 123 ms eager (eager
  with the CPU's truncated DFT and the one-output head as a matrix-vector product; 182 ms with the
  FFTs).  ``"auto"`` stays ``"off"`` on the CPU: inductor needs a C++ compiler there and tens of seconds
  to compile, and the 1.06x is one preset's; set ``"default"`` to take it;
- point sets (meshes) are padded per batch to its largest mesh, so their shapes change from batch to
  batch; under ``"cuda-graphs"`` every batch of a split is padded to the split's largest mesh instead
  (``petrov.train.batches.pad_points``: zero-weight nodes, which change no integral and no metric), so
  each split replays one shape.  How much that buys on a GPU is not measured yet, so ``"auto"`` is
  ``"off"`` for them;
- in a distributed run (DDP) ``"auto"`` is ``"off"``: CUDA graphs with DDP's gradient hooks are not
  measured here, and torch reports crashes of ``"reduce-overhead"`` with DDP when training and
  inference alternate (pytorch/pytorch issue 128218).

A marching model is validated by free rollouts, which stay eager under any setting
([`evaluation_compile`][]): compiled, the loop over its ``T`` steps would unroll into one graph.

The compiled module wraps the model (``torch.compile`` returns an ``OptimizedModule`` sharing its
parameters); checkpoints save the plain model's ``state_dict`` (no ``_orig_mod.`` prefixes), so a run
compiled on a GPU loads anywhere.

A compiler can be wrong where eager is right: on one NVIDIA H200 (torch 2.11, CUDA 13, 2026-11-27) the
inductor-compiled ``latent2d`` of ``darcy-gpu`` (``"default"`` and ``"cuda-graphs"`` alike) gave outputs
134% (relative L2) away from the eager model's on the same weights and batch and did not learn, while the
same compilation on the CPU agreed to 3e-7.  With the spectral convolution computed in real arithmetic
when compiled (``petrov.grids.fourier_modes``) the two agreed on an H200 the next day (1.3e-6); as
another model or torch version may meet another such bug, before a run trains compiled
[`compiled_agreement`][] compares one forward and backward of the compiled model with the eager one on
the run's first batch (the trainer does: ``"auto"`` falls back to eager with a warning, an explicit
setting stops with an error).  A model with dropout is compared through a copy without it
([`without_dropout`][]): compiled dropout draws other masks than eager from the same seed.
"""
from __future__ import annotations

import copy
import logging
from typing import Any, Callable

import torch

log = logging.getLogger(__name__)

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


def evaluation_compile(mode: str, free_rollout: bool) -> str:
    """The compile setting of validation: the run's ``mode``, but ``"off"`` where validation is a free
    rollout (a marching model's ``T`` steps): compiled, the rollout's loop over the steps unrolls into
    one graph ``T`` steps long, whose compilation outweighs the run (``burgers-marching``, ``T`` = 20, one
    quick epoch with inductor on an AMD EPYC core: 128 s, of which 115 s for the rollout's graph)."""
    return "off" if free_rollout else mode


def mark_step(mode: str) -> None:
    """Before each step under ``"cuda-graphs"``: the previous replay's outputs may be overwritten now."""
    if mode == "cuda-graphs":
        torch.compiler.cudagraph_mark_step_begin()


def static_shapes(mode: str) -> bool:
    """Whether every batch must have one shape (CUDA graphs replay the shapes they captured)."""
    return mode == "cuda-graphs"


# relative L2 differences (outputs, gradients) beyond which a compiled model is not the eager one: float32
# compilations differ by rounding (1e-7..1e-4 here; 3.1e-4 the most on an H200, benchmarks/compile_check.py), a
# miscompilation by far more, but not always by O(1) once the gradients of every parameter are pooled: torch 2.11
# put galerkin1d's (column norms) 4.8e-2 off with inductor, its first layer's 4.8e-1, hence
# 1e-2 for the gradients, not 5e-2; bfloat16 autocast rounds more (galerkin1d: 8.5e-4 and 4.6e-3)
AGREEMENT_TOLERANCE = {None: (1e-2, 1e-2), torch.bfloat16: (5e-2, 2e-1), torch.float16: (5e-2, 2e-1)}


def _relative(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(torch.finfo(b.dtype).tiny))


def compiled_agreement(predict: Callable[[torch.nn.Module], torch.Tensor], model: torch.nn.Module,
                       compiled: torch.nn.Module, mode: str) -> tuple[float, float]:
    """``(outputs, gradients)``: the relative L2 differences between ``predict(compiled)`` and the same on
    an eager copy of ``model`` -- one forward each, from the same random state -- and between the
    gradients of ``Σ r·prediction`` (``r`` a fixed random tensor) with respect to the trainable
    parameters.  Host reads: only at the end.  ``model`` is left as it was: nothing in ``.grad``, its
    buffers restored, and its host-side state (the Performer's call count) untouched, as the eager pass
    runs on a copy."""
    buffers = [(b, b.detach().clone()) for b in model.buffers()]
    try:
        return _agreement(predict, copy.deepcopy(model), compiled, mode, model)
    finally:
        with torch.no_grad():
            for b, saved in buffers:
                b.copy_(saved)


def drops(module: torch.nn.Module) -> bool:
    """Whether ``module`` holds a dropout layer that drops anything (``p > 0``)."""
    return any(isinstance(m, torch.nn.modules.dropout._DropoutNd) and m.p > 0 for m in module.modules())


def without_dropout(module: torch.nn.Module) -> torch.nn.Module:
    """A copy of ``module`` whose dropout layers drop nothing (``p = 0``), for [`compiled_agreement`][]: a
    compiled dropout draws its masks from another random stream than eager's (inductor's own generator), so
    the same seed gives other masks, and a model with active dropout differs from its compiled self by what
    the masks drop (``galerkin1d`` with dropout 0.05 on an AMD EPYC: 4.3e-2 outputs, 1.1e-1 gradients) --
    not a compiler fault.  The copy is compared instead: the same model, compiler and device, without the
    noise."""
    twin = copy.deepcopy(module)
    for m in twin.modules():
        if isinstance(m, torch.nn.modules.dropout._DropoutNd):
            m.p = 0.0
    return twin


def compiled_fault(predict: Callable[[torch.nn.Module], torch.Tensor], eager: torch.nn.Module,
                   compiled: torch.nn.Module, model: torch.nn.Module, mode: str, amp: torch.dtype | None,
                   what: str) -> str | None:
    """None if the ``compiled`` batch loss agrees with the ``eager`` one within ``AGREEMENT_TOLERANCE`` (of the
    run's autocast type ``amp``) on one forward and backward, ``predict(loss)`` giving a loss's prediction
    ([`compiled_agreement`][]; a ``model`` with dropout is compared through copies without it,
    [`without_dropout`][]); else the sentence that says how far apart they are (``what``: the model's name
    and the device)."""
    if drops(model):  # compiled dropout draws other masks: compare a copy without it
        eager = without_dropout(eager)
        compiled = compile_module(eager, mode)
    outputs, grads = compiled_agreement(predict, eager, compiled, mode)
    tol_out, tol_grad = AGREEMENT_TOLERANCE[amp]
    if outputs <= tol_out and grads <= tol_grad:
        log.info("compiled model (run.compile = %r) checked against eager on the first batch: outputs %.2e, "
                 "gradients %.2e apart (relative L2)", mode, outputs, grads)
        return None
    return (f"torch.compile (run.compile = {mode!r}) computes another {what}: on the first training batch its "
            f"outputs differ by {outputs:.2e} and its gradients by {grads:.2e} (relative L2; rounding gives < "
            f"{tol_out:g} and {tol_grad:g}) -- a compiler fault on this device and torch {torch.__version__}")


def _agreement(predict, reference: torch.nn.Module, compiled: torch.nn.Module, mode: str,
               model: torch.nn.Module) -> tuple[float, float]:
    outputs, grads = [], []
    for net, owner in ((reference, reference), (compiled, model)):
        params = [p for p in owner.parameters() if p.requires_grad]
        if net is compiled:
            mark_step(mode)
        with torch.random.fork_rng(devices=[p.device for p in params[:1] if p.device.type == "cuda"]):
            torch.manual_seed(0)
            out = predict(net).float()
        r = torch.randn(out.shape, generator=torch.Generator().manual_seed(1)).to(out.device)
        g = torch.autograd.grad((out * r).sum(), params, allow_unused=True)
        outputs.append(out.detach().clone())
        grads.append(torch.cat([torch.zeros_like(p).flatten() if x is None else x.flatten().float()
                                for p, x in zip(params, g)]))
    return _relative(outputs[1], outputs[0]), _relative(grads[1], grads[0])


__all__ = ["AGREEMENT_TOLERANCE", "COMPILE_SETTINGS", "compile_module", "compile_options", "compiled_agreement",
           "compiled_fault",
           "drops", "evaluation_compile", "mark_step", "resolve_compile", "static_shapes", "without_dropout"]
