"""The file formats an exported operator is written in, registered by name in ``FORMATS``.

Each [`ExportFormat`][] turns a traced program (a ``torch.export.ExportedProgram`` of
[`InferenceGraph`][petrov.export.graph.InferenceGraph]) into the bytes of its file, and runs those bytes
back (the check that the file computes what the PyTorch operator computes):

- ``onnx`` (``.onnx``): ``torch.onnx.export`` of the program (the ``torch.export`` based exporter, which
  needs ``onnx`` and ``onnxscript``), one self-contained file with its weights; input ``x``, output ``y``,
  the batch axis named ``batch`` and a dynamic grid size ``n``.  Run with onnxruntime on the CPU.
- ``torch-export`` (``.pt2``): ``torch.export.save`` of the program; run as
  ``torch.export.load(FILE).module()(x)`` in any Python with torch, without petrov.

Adding a format: ``@register_format(ExportFormat("name", ".suffix", serialize, runner))``.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import logging
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterator

import torch

from ..common.files import serialized
from ..common.registry import Registry

INSTALL = 'pip install "petrov[export]"'

Runner = Callable[[torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class ExportFormat:
    """``serialize(program) -> bytes``; ``runner(data, threads) -> run``, ``run(x) -> y`` (CPU tensors)."""

    name: str
    suffix: str
    serialize: Callable[[torch.export.ExportedProgram], bytes]
    runner: Callable[[bytes, int], Runner]


FORMATS: Registry = Registry("export format")


def register_format(fmt: ExportFormat) -> ExportFormat:
    return FORMATS.register(fmt.name)(fmt)


def require(module: str, purpose: str) -> Any:
    """``import module``; ``ModuleNotFoundError`` saying what needs it and how to install it otherwise."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise ModuleNotFoundError(f"{purpose} needs the package {module}, which is not installed: "
                                  f"{INSTALL}") from None


@contextlib.contextmanager
def quiet_torch() -> Iterator[None]:
    """torch's deprecation notices about its own internals (``torch.export`` and its serializer raise some on
    every call in 2.13) kept off the terminal while the block runs."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        warnings.simplefilter("ignore", DeprecationWarning)
        yield


@contextlib.contextmanager
def _quiet_exporter() -> Iterator[None]:
    """torch.onnx's progress lines, its notice about torchvision's operators and its warnings kept off the
    terminal (a failure still raises)."""
    logger = logging.getLogger("torch.onnx")
    level = logger.level
    logger.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings(), contextlib.redirect_stdout(io.StringIO()):
            warnings.simplefilter("ignore")
            yield
    finally:
        logger.setLevel(level)


def _name_axes(model: Any) -> None:
    """The symbolic sizes of the graph's input and output named ``batch`` and ``n`` (torch's are ``s0``...):
    the first axis is the batch, the others of a dynamic grid share one size."""
    names: dict[str, str] = {}
    for value in [*model.graph.inputs, *model.graph.outputs]:
        for axis, dim in enumerate(value.shape):
            if not isinstance(dim, int) and getattr(dim, "value", None) is not None:
                names.setdefault(dim.value, "batch" if axis == 0 else "n")
    ir = importlib.import_module("onnx_ir")
    for value in [*model.graph.inputs, *model.graph.outputs]:
        value.shape = ir.Shape([names.get(getattr(d, "value", None), d) if not isinstance(d, int) else d
                                for d in value.shape])


def onnx_bytes(program: torch.export.ExportedProgram) -> bytes:
    """The program as one ONNX file (weights inside)."""
    for module in ("onnx", "onnxscript"):
        require(module, "the ONNX export (torch.onnx)")
    with _quiet_exporter():
        onnx_program = torch.onnx.export(program, dynamo=True, input_names=["x"], output_names=["y"],
                                         verbose=False, report=False)
    _name_axes(onnx_program.model)
    return onnx_program.model_proto.SerializeToString()


def onnx_runner(data: bytes, threads: int) -> Runner:
    """An onnxruntime session of ``data`` on the CPU with ``threads`` threads."""
    ort = require("onnxruntime", "checking an ONNX export")
    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.inter_op_num_threads = 1
    session = ort.InferenceSession(data, options, providers=["CPUExecutionProvider"])

    def run(x: torch.Tensor) -> torch.Tensor:
        return torch.from_numpy(session.run(["y"], {"x": x.detach().cpu().numpy()})[0])

    return run


def program_bytes(program: torch.export.ExportedProgram) -> bytes:
    """The program as ``torch.export.save`` writes it, in the inference IR: the models' autocast-off regions
    (their float32 transforms) inlined, which ``torch.export.save`` cannot write as they are traced
    (higher-order ``wrap_with_autocast`` nodes) and an inference graph need not keep.  (torch.onnx lowers the
    program itself.)"""
    with quiet_torch():
        program = program.run_decompositions({})
        return serialized(lambda buffer: torch.export.save(program, buffer))


def program_runner(data: bytes, threads: int) -> Runner:
    """``torch.export.load(data).module()`` (``threads``: the process's torch threads, left as they are)."""
    with quiet_torch():
        module = torch.export.load(io.BytesIO(data)).module()

    def run(x: torch.Tensor) -> torch.Tensor:
        with torch.no_grad(), quiet_torch():
            return module(x)

    return run


register_format(ExportFormat("onnx", ".onnx", onnx_bytes, onnx_runner))
register_format(ExportFormat("torch-export", ".pt2", program_bytes, program_runner))


def export_format(name: str | None, path: str | Path | None = None) -> ExportFormat:
    """The format ``name``, or with None the one whose suffix ``path`` has; ValueError naming the formats."""
    if name is None:
        suffix = Path(path).suffix if path is not None else ""
        found = [FORMATS.get(n) for n in FORMATS.names() if FORMATS.get(n).suffix == suffix]
        if not found:
            known = ", ".join(f"{n} ({FORMATS.get(n).suffix})" for n in FORMATS.names())
            raise ValueError(f"which format? {str(path)!r} has no suffix of an export format; give the format "
                             f"(one of {known})")
        return found[0]
    if name not in FORMATS:
        raise ValueError(FORMATS.unknown_message(name))
    return FORMATS.get(name)


__all__ = ["FORMATS", "INSTALL", "ExportFormat", "export_format", "onnx_bytes", "onnx_runner", "program_bytes",
           "program_runner", "quiet_torch", "register_format", "require"]
