"""Save and load models as plain-data checkpoints (no pickled code).

A checkpoint is the dict written by ``torch.save``:

    {"format": "petrov-model", "model_name": str, "config": dict, "state_dict": dict,
     "petrov_version": str, "extra": dict}

``extra`` holds anything else the caller wants kept with the weights (the trainer stores its
normalizers there) and must itself be plain data: tensors, numbers, strings, bools, None,
and lists/tuples/dicts of those.  Loading uses ``torch.load(weights_only=True)``, which
refuses anything else, and rebuilds the model from ``model_name`` and ``config`` alone.

- ``save_model(model, path, extra=None)``: writes to a temporary file in the same directory
  and renames it, so ``path`` is never half-written; numpy values and paths in ``extra`` are
  stored as tensors, numbers and strings ([`plain_data`][]), anything else not plain is refused.
- ``load_model(path, map_location="cpu")`` -> model (in eval mode);
  ``load_model(path, return_extra=True)`` -> ``(model, extra)``.
- ``load_checkpoint(path, map_location="cpu")`` -> the validated checkpoint dict.
"""
from __future__ import annotations

import os
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from ..common.files import atomic_write, serialized
from ..common.version import petrov_version
from .models import MODELS, build_model, model_config, model_name

FORMAT = "petrov-model"
_REQUIRED = ("model_name", "config", "state_dict")


def plain_data(value: Any, where: str = "extra") -> Any:
    """``value`` as the plain data a checkpoint may hold (what ``torch.load(weights_only=True)`` reads
    back): numpy scalars become numbers, numpy arrays tensors, paths strings; anything else that is
    not a tensor, number, string, bool, None, list, tuple or dict (string or integer keys) is a
    ValueError naming where it is."""
    if isinstance(value, np.generic):  # before the plain types: np.float64 is a float subclass
        return value.item()
    if value is None or isinstance(value, (bool, int, float, str, bytes, torch.dtype, torch.Size)):
        return value
    if isinstance(value, torch.Tensor):
        return value.detach().cpu()
    if isinstance(value, np.ndarray):
        if value.dtype == object:
            raise ValueError(f"{where} is a numpy array of Python objects; store numbers only")
        return torch.from_numpy(np.ascontiguousarray(value).copy())
    if isinstance(value, os.PathLike):
        return os.fspath(value)
    if isinstance(value, (list, tuple)):
        items = [plain_data(v, f"{where}[{i}]") for i, v in enumerate(value)]
        return items if isinstance(value, list) else tuple(items)
    if isinstance(value, dict):
        bad = [k for k in value if isinstance(k, bool) or not isinstance(k, (str, int))]
        if bad:
            raise ValueError(f"{where} has a key {bad[0]!r} of type {type(bad[0]).__name__}; use strings")
        return {k: plain_data(v, f"{where}[{k!r}]") for k, v in value.items()}
    raise ValueError(f"{where} is a {type(value).__name__}, which a checkpoint cannot hold (petrov loads plain "
                     f"data only: tensors, numbers, strings, bools, None, lists, tuples, dicts); convert it first")


def save_model(model: nn.Module, path: str | os.PathLike, extra: dict[str, Any] | None = None) -> Path:
    """Write ``model`` (any registered model class, however it was built) and ``extra`` to ``path``
    atomically; returns the path.  ``extra`` is converted by [`plain_data`][] (numpy values, paths),
    so what is saved always loads."""
    name, config = model_name(model), model_config(model)
    if extra is not None and not isinstance(extra, dict):
        raise ValueError(f"extra must be a dict of plain data, got {type(extra).__name__}")
    path = Path(path)
    checkpoint = {
        "format": FORMAT,
        "model_name": name,
        "config": plain_data(config, "the model's config"),
        "state_dict": {k: v.detach().cpu() for k, v in model.state_dict().items()},
        "petrov_version": petrov_version(),
        "extra": plain_data(extra or {}),
    }
    # serialised in memory first: a full disk then fails as an OSError of the file write, which
    # atomic_write reports as such (torch.save's own error would not say so)
    atomic_write(path, serialized(lambda buffer: torch.save(checkpoint, buffer)))
    return path


def _check_device(map_location: Any) -> None:
    """ValueError for a ``map_location`` naming a device this machine does not have."""
    if not isinstance(map_location, (str, torch.device)):
        return
    try:
        device = torch.device(map_location)
    except RuntimeError as err:
        raise ValueError(f"map_location={map_location!r} is not a device: {err}") from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ValueError(f"map_location={str(map_location)!r} but no CUDA device is available here; "
                         f"load with map_location='cpu'")


class DamagedCheckpoint(ValueError):
    """A checkpoint file that cannot be read (truncated, corrupt): ``path`` and ``detail``, the first
    sentence of the reader's own error, for callers that know a better remedy (a run directory)."""

    def __init__(self, message: str, path: str | os.PathLike = "", detail: str = ""):
        super().__init__(message)
        self.path, self.detail = Path(path), detail


def _first_sentence(err: BaseException, limit: int = 120) -> str:
    """The first sentence of ``err``'s message, at most ``limit`` characters (torch's run on for lines)."""
    text = " ".join(str(err).split()) or type(err).__name__
    text = text.split(". ")[0].rstrip(".")
    return text if len(text) <= limit else text[:limit - 3].rstrip() + "..."


def load_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """Read and validate a checkpoint written by [`save_model`][] (plain data only)."""
    path = Path(path)
    if path.is_dir():
        found = sorted(p.name for p in path.glob("*.pt"))
        hint = f" (it holds {', '.join(found)})" if found else ""
        raise IsADirectoryError(f"checkpoint {str(path)!r} is a directory{hint}; give the .pt file")
    if not path.is_file():
        raise FileNotFoundError(f"no checkpoint at {str(path)!r}")
    _check_device(map_location)
    with open(path, "rb") as fh:
        magic = fh.read(8)
    if magic.startswith(b"\x89HDF"):
        raise ValueError(f"{str(path)!r} is an HDF5 file (a dataset?), not a petrov model checkpoint")
    try:
        checkpoint = torch.load(path, map_location=map_location, weights_only=True)
    except pickle.UnpicklingError as err:
        # torch words it "Unsupported global" or "unsupported GLOBAL" depending on the version
        if "unsupported global" in str(err).lower():  # a class or function, i.e. pickled code
            raise ValueError(
                f"{str(path)!r} holds pickled code (classes or functions), not only tensors and plain "
                "data; petrov never loads code from a checkpoint. Re-save the model with "
                "petrov.operators.save_model"
            ) from None
        # torch's message would advise weights_only=False, i.e. running the file's code: not repeated
        raise ValueError(f"{str(path)!r} is not a readable checkpoint (corrupt, or not a petrov "
                         "model file)") from None
    except Exception as err:  # torch raises RuntimeError/EOFError/KeyError/... on damaged files
        detail = _first_sentence(err)
        raise DamagedCheckpoint(
            f"{str(path)!r} is not a readable checkpoint (corrupt or truncated?: {detail}); restore it from a "
            f"copy, or save or train the model again", path=path, detail=detail) from None
    if not isinstance(checkpoint, dict) or checkpoint.get("format") != FORMAT:
        raise ValueError(f"{str(path)!r} is not a petrov model checkpoint")
    missing = [k for k in _REQUIRED if k not in checkpoint]
    if missing:
        raise ValueError(f"{str(path)!r} is missing {', '.join(missing)}")
    checkpoint.setdefault("extra", {})
    damaged = f"{str(path)!r} is damaged: its"
    remedy = "restore it from a copy, or save or train the model again"
    for key, kind in (("model_name", str), ("config", dict), ("state_dict", dict), ("extra", dict)):
        value = checkpoint[key]
        if not isinstance(value, kind):
            got = "None" if value is None else type(value).__name__
            raise ValueError(f"{damaged} {key} should be a {kind.__name__}, got {got}; {remedy}")
    for key in ("config", "state_dict"):
        bad = [k for k in checkpoint[key] if not isinstance(k, str)]
        if bad:
            raise ValueError(f"{damaged} {key} should have names as keys, got the key {bad[0]!r}; {remedy}")
    return checkpoint


def check_finite_weights(state: dict[str, Any], path: str | os.PathLike) -> None:
    """ValueError naming the first weight (or, in a run's checkpoint, normaliser statistic) of a loaded
    checkpoint that holds NaN or inf: the file is damaged or was written from a broken model, not a fault
    of the inputs."""
    norms = state.get("normalizers") or {}
    tensors = [(f"weight {k!r}", v) for k, v in state["state_dict"].items()]
    tensors += [(f"{side}-normaliser {k!r}", v) for side, n in norms.items() if n for k, v in n.items()]
    for name, value in tensors:
        if isinstance(value, torch.Tensor) and value.is_floating_point() and not torch.isfinite(value).all():
            bad = int((~torch.isfinite(value)).sum())
            raise ValueError(f"checkpoint {str(path)!r} is damaged: its {name} holds {bad} NaN/inf of {value.numel()} "
                             f"values (the inputs are not the cause); restore the file, or save or train the model again")


def model_from_checkpoint(checkpoint: dict[str, Any], path: str | os.PathLike) -> nn.Module:
    """The model of a validated ``checkpoint`` (from [`load_checkpoint`][]), rebuilt from its
    name and config alone, with its weights; the one way petrov rebuilds a saved model."""
    name = checkpoint["model_name"]
    if name not in MODELS:
        raise KeyError(f"checkpoint {str(path)!r}: {MODELS.unknown_message(name)}")
    try:
        model = build_model(name, **checkpoint["config"])
    except (ValueError, KeyError) as err:  # KeyError: an unknown name in the config (activation, mixer, ...)
        detail = err.args[0] if isinstance(err, KeyError) and err.args else err
        raise ValueError(f"checkpoint {str(path)!r}: config does not match model {name!r}: {detail}") from None
    check_finite_weights(checkpoint, path)  # NaN/inf weights would make every output NaN
    try:
        model.load_state_dict(checkpoint["state_dict"], strict=True)
    except RuntimeError as err:
        raise ValueError(
            f"checkpoint {str(path)!r}: weights do not match model {name!r} built from its config: {err}"
        ) from None
    return model


def load_model(path: str | os.PathLike, map_location: Any = "cpu", return_extra: bool = False):
    """Rebuild the model saved at ``path`` (eval mode); with ``return_extra`` also return ``extra``."""
    checkpoint = load_checkpoint(path, map_location)
    model = model_from_checkpoint(checkpoint, path)
    if isinstance(map_location, (str, torch.device)):
        model.to(map_location)
    model.eval()
    return (model, checkpoint["extra"]) if return_extra else model
