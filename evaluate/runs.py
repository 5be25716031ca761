"""Which operator and which samples an evaluation uses: runs, bare models, index rules.

An [`EvalSetup`][] is a trained operator with how its training data were read (config, kind);
[`load_run`][] makes one from a run directory (its ``best.pt`` and ``config.json``) or a shipped
operator (``pretrained:NAME``).  The samples:
``"test"`` (the run's test split, the last ``data.n_test`` samples of the file, never seen by model
selection), ``"all"``, or a slice ``a:b`` of the file; a selection that overlaps the run's training
or validation split is evaluated with a warning.
"""
from __future__ import annotations

import json
import os
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..common.path_checks import require_dir, require_file
from ..common.shipped import resolve_source, shipped_name
from ..datasets import dataset_info
from ..datasets.identity import data_identity, identity_change
from ..datasets.loading import _slice_text as slice_text
from ..datasets.loading import as_indices
from ..train.checkpoint import load_run_checkpoint, operator_from_state
from ..operators.io import DamagedCheckpoint
from ..operators.models import model_name
from ..train.config import config_to_dict, load_config_json
from ..train.data import input_noise, split_indices
from ..train.operator import NormalizedOperator


@dataclass
class EvalSetup:
    """The operator and how its training data were read: kind, inverse target grid, input noise.

    ``config`` is the run's [`TrainConfig`][petrov.train.config.TrainConfig] (None for a bare operator).
    """

    operator: Any
    config: Any = None
    run_dir: Path | None = None
    kind: str | None = None
    data_identity: dict | None = None  # the content of the file the run trained on, if recorded

    @property
    def data_config(self):
        return None if self.config is None else self.config.data


def load_run(run_dir: str | os.PathLike, map_location: Any = "cpu") -> EvalSetup:
    """The best model and config of a run directory, or of a shipped operator (``"pretrained:NAME"``,
    [`petrov.common.shipped`][]); clear errors if either is missing."""
    run_dir = require_dir(resolve_source(run_dir), "run directory")
    config = load_config_json(run_dir / "config.json", check_model=False)
    try:
        state = load_run_checkpoint(run_dir / "best.pt", map_location=map_location)
    except DamagedCheckpoint as err:
        raise DamagedCheckpoint(
            f"the run's checkpoint {err.path} is damaged (corrupt or truncated?: {err.detail}); restore it from a "
            f"copy, or train the run again: petrov train CONFIG --out {run_dir} --overwrite", err.path,
            err.detail) from None
    warn_if_model_edited(config, state, run_dir)
    operator = operator_from_state(state, run_dir / "best.pt", map_location)
    return EvalSetup(operator, config, run_dir, _trained_kind(config), state.get("data_identity"))


def eval_dir(run_dir: str | os.PathLike) -> Path:
    """Where ``petrov evaluate`` writes unless told: ``RUN_DIR/eval``; for a shipped operator, whose folder is
    part of the installed package, ``pretrained-eval/NAME`` in the working directory."""
    name = shipped_name(run_dir)
    return Path(run_dir) / "eval" if name is None else Path("pretrained-eval") / name


def _flat(value: Any, prefix: str) -> dict[str, Any]:
    if isinstance(value, dict):
        return {k: v for key, x in value.items() for k, v in _flat(x, f"{prefix}.{key}").items()}
    return {prefix: value}


def warn_if_model_edited(config: Any, state: dict, run_dir: Path) -> None:
    """Warn when the model section of the run's ``config.json`` differs from the one saved in its
    checkpoint: the model is rebuilt from the checkpoint alone, so an edit of config.json does nothing."""
    saved = (state.get("train_config") or {}).get("model")
    if not isinstance(saved, dict):
        return  # an older checkpoint without its training config: nothing to compare with
    ours = _flat(json.loads(json.dumps(config_to_dict(config)["model"])), "model")
    theirs = _flat(json.loads(json.dumps(saved)), "model")
    changed = sorted(k for k in set(ours) | set(theirs) if ours.get(k) != theirs.get(k))
    if changed:
        shown = "; ".join(f"{k} is {ours.get(k)!r} there, {theirs.get(k)!r} in the checkpoint" for k in changed[:2])
        more = f" and {len(changed) - 2} more" if len(changed) > 2 else ""
        warnings.warn(f"the model section of {run_dir / 'config.json'} differs from the checkpoint's ({shown}{more}); "
                      f"the checkpoint's model config is used", stacklevel=3)


def warn_if_other_data(setup: EvalSetup, data_path: Path) -> None:
    """Warn when ``data_path`` does not hold the content the run recorded for its training file."""
    if not setup.data_identity:
        return
    why = identity_change(setup.data_identity, data_identity(data_path))
    if why:
        warnings.warn(f"{data_path} is not the data this run was trained on ({why}); its 'test' samples are "
                      f"not the run's held-out test split", stacklevel=3)


def _trained_kind(config) -> str | None:
    """The dataset kind the run was trained on: the config's, else its training file's, else generated."""
    d = config.data
    if d.kind:
        return d.kind
    if Path(d.path).exists():
        try:
            return dataset_info(d.path)["kind"]
        except (OSError, ValueError, KeyError):
            pass
    return d.generate.kind if d.generate is not None else None


def as_setup(source: Any, config: Any, map_location: Any) -> EvalSetup:
    if isinstance(source, EvalSetup):
        return source
    if isinstance(source, (str, os.PathLike)):
        return load_run(source, map_location=map_location)
    if isinstance(source, NormalizedOperator):
        op = source
    elif isinstance(source, torch.nn.Module):
        try:
            model_name(getattr(source, "_orig_mod", source))  # (torch.compile's wrapper) a petrov model takes (x, pos)
        except ValueError as err:
            raise TypeError(f"expected a run directory, an EvalSetup, a NormalizedOperator or a petrov model, got "
                            f"{type(source).__name__}: {err}") from None
        op = NormalizedOperator(source)  # a bare model: raw data in and out
    else:
        raise TypeError(f"expected a run directory, an EvalSetup or a model, got {type(source).__name__}")
    return EvalSetup(op, config, None, None if config is None else _trained_kind(config))


def parse_indices(text: str | None, *, test: bool = True, flag: str = "--indices") -> Any:
    """``"test"`` (default), ``"all"``, or ``"a:b"`` (a Python slice of the file's samples).  ``test``:
    whether the command accepts ``"test"`` (the run's test split; without it the default is ``"all"``);
    ``flag``: the option named in the error, which lists only what is accepted."""
    words = ("test", "all") if test else ("all",)
    if text is None or text in words:
        return text or words[0]
    a, sep, b = text.partition(":")
    try:
        if not sep:
            raise ValueError
        return slice(int(a) if a.strip() else None, int(b) if b.strip() else None)
    except ValueError:
        accepted = "'test', 'all' or 'a:b'" if test else "'all' or 'a:b'"
        raise ValueError(f"{flag} must be {accepted} (e.g. 1000:1100), got {text!r}") from None


def none_selected(indices: Any) -> str:
    """What selected no samples, as the user wrote it (a slice as ``A:B``, with what ``A:B`` means)."""
    if isinstance(indices, slice):
        return f"indices {slice_text(indices)}; A:B selects the samples A..B-1: give A < B"
    return f"indices {indices!r}"


def select_indices(setup: EvalSetup, data_path: Path, indices: Any, n_complete: int) -> np.ndarray:
    """File sample numbers to evaluate; ``"test"`` is the run's test split rule applied to this file."""
    if indices is None:
        indices = "test" if setup.config is not None else "all"
    if isinstance(indices, str):
        if indices == "all":
            return np.arange(n_complete)
        if indices != "test":
            return select_indices(setup, data_path, parse_indices(indices), n_complete)
        if setup.config is None:
            raise ValueError("indices='test' needs the run's config (evaluate a run directory, "
                             "or give indices explicitly)")
        d = setup.config.data
        if d.n_test == 0:
            raise ValueError("the run has no test split (data.n_test = 0); give the samples with --indices a:b")
        try:
            return split_indices(n_complete, d.n_train, d.n_val, d.n_test).test
        except ValueError as err:
            raise ValueError(f"{data_path}: cannot place the run's test split in this file ({err}); "
                             f"give the samples with --indices a:b") from None
    try:
        idx = as_indices(indices, n_complete)
    except IndexError as err:
        raise IndexError(f"{data_path}: {err}") from None
    if len(idx) == 0:
        raise ValueError(f"no samples selected from {data_path} ({none_selected(indices)})")
    return idx


def warn_if_seen(setup: EvalSetup, data_path: Path, idx: np.ndarray, n_complete: int) -> None:
    d = setup.data_config
    if d is None or not Path(d.path).exists() or Path(d.path).resolve() != data_path.resolve():
        return
    seen = np.intersect1d(idx, np.arange(min(d.n_train + d.n_val, n_complete)))
    if len(seen):
        warnings.warn(f"{len(seen)} of the evaluated samples belong to the run's training/validation "
                      f"split (the first {d.n_train + d.n_val}); these are not test errors", stacklevel=3)


def data_file(setup: EvalSetup, data_path) -> Path:
    if data_path is None:
        if setup.data_config is None:
            raise ValueError("give the data file (data_path / --data)")
        data_path = setup.data_config.path
        if not Path(data_path).exists():
            raise FileNotFoundError(
                f"the run's data file {str(data_path)!r} (from its config.json, relative to the directory "
                f"it was trained in) does not exist here; pass it with --data FILE"
            )
    return require_file(data_path, "data file")


def default_batch(setup: EvalSetup) -> int:
    if setup.config is None:
        return 8
    return int(setup.config.run.eval_batch_size or setup.config.optim.batch_size)


def setup_noise(setup: EvalSetup, dataset: Any):
    """The input noise to score with: a run's saved one; for a bare model with a config, the level
    and seed the config (else the data file) give; else the operator's own."""
    if setup.run_dir is None and setup.config is not None:
        return input_noise(setup.data_config, dataset)
    return setup.operator.noise


__all__ = ["EvalSetup", "as_setup", "data_file", "default_batch", "eval_dir", "load_run", "none_selected",
           "parse_indices", "select_indices", "setup_noise", "warn_if_other_data", "warn_if_seen"]
