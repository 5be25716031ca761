"""Run checkpoints: petrov model files (``petrov.operators.save_model``) with the run state in ``extra``.

``best.pt`` and ``last.pt`` are ordinary model checkpoints — ``petrov.operators.load_model`` reads
either — written atomically (temp file + ``os.replace``) and loaded with ``weights_only=True``.
They hold only tensors, numbers, strings, lists and dicts:

    {"format": "petrov-model", "model_name", "config", "state_dict", "petrov_version",
     "extra": {"run_format": 1,
               "normalizers": {"x": state | None, "y": state | None},   # to_state() dicts
               "noise": {"level", "seed"},    # the operator's InputNoise
               "train_config": dict, "epoch": int (completed), "best_metric": float, "best_epoch": int,
               "data_identity": dict | None,  # the training file's content (petrov.datasets.identity)
               # last.pt only (resume):
               "optimizer", "scheduler", "scaler": dict | None,
               "rng": [per rank {"torch", "cuda", "numpy", "python"}]}}

The DataLoader order needs no stored generator: the sampler permutation is a function of
(seed, epoch) (``DistributedSampler.set_epoch``) and the epoch is stored.

[`load_operator`][] turns a run checkpoint back into the trained operator (model rebuilt by
``petrov.operators.io.model_from_checkpoint``, the one way petrov rebuilds a saved model, plus the
run's normalisers).
"""
from __future__ import annotations

import logging
import os
import random
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..common.host import to_numpy
from ..common.shipped import resolve_source
from ..datasets import InputNoise
from ..datasets.normalizers import normalizer_from_state
from ..operators import save_model
from ..operators.io import check_finite_weights, load_checkpoint, model_from_checkpoint
from .operator import NormalizedOperator

RUN_FORMAT = 1
log = logging.getLogger(__name__)


def save_run_checkpoint(path: str | os.PathLike, model: torch.nn.Module, normalizers: dict[str, Any],
                        noise: InputNoise | None = None, **state: Any) -> None:
    """Write ``model`` with its normaliser states, its input noise and ``state`` (plain data) to
    ``path`` atomically."""
    norms = {k: (None if n is None else n.to_state()) for k, n in normalizers.items()}
    save_model(model, path, extra={"run_format": RUN_FORMAT, "normalizers": norms,
                                   "noise": (noise or InputNoise()).to_state(), **state})


def load_run_checkpoint(path: str | os.PathLike, map_location: Any = "cpu") -> dict[str, Any]:
    """The checkpoint dict with ``extra`` merged in; clear errors for missing or foreign files."""
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"checkpoint {str(path)!r} is a directory, not a checkpoint file; move it out of the "
                                f"way (the run's own {path.name} was replaced by it), or point at another run")
    if not path.is_file():
        hint = ""
        if path.parent.is_dir():
            found = sorted(p.name for p in path.parent.glob("*.pt") if p.is_file())
            hint = f" (found: {', '.join(found)})" if found else " (the directory has no checkpoints)"
        raise FileNotFoundError(f"checkpoint {str(path)!r} does not exist{hint}")
    raw = load_checkpoint(path, map_location=map_location)
    extra = raw.get("extra", {})
    if "run_format" not in extra:
        raise ValueError(
            f"{str(path)!r} is a model file without training state (not written by `petrov train`); "
            f"load it with petrov.operators.load_model"
        )
    if extra["run_format"] > RUN_FORMAT:
        raise ValueError(f"{str(path)!r} was written by a newer petrov (run format {extra['run_format']})")
    if "noise" not in extra:  # what every run checkpoint holds since petrov 0.2
        raise ValueError(f"{str(path)!r} is a run checkpoint of petrov {raw.get('petrov_version', 'before 0.2')}, "
                         f"which this petrov no longer reads (it holds no input noise); train the run again, or "
                         f"load it with petrov 0.2")
    out = {k: v for k, v in raw.items() if k != "extra"}
    out.update(extra)
    check_finite_weights(out, path)
    return out


def read_initial_weights(model: torch.nn.Module, model_cfg: Any, init_from: str | os.PathLike,
                         device: Any = "cpu") -> dict[str, Any]:
    """``run.init_from``'s ``best.pt``, read and checked: its model must be ``model``, the one ``model_cfg`` (a
    ``ModelConfig``) describes; a ValueError (or FileNotFoundError) saying what to give otherwise."""
    if Path(init_from).is_file():
        hint = f" ({str(Path(init_from).parent)!r} here)" if Path(init_from).name == "best.pt" else ""
        raise ValueError(f"run.init_from takes a run directory (its best.pt is loaded), got the file "
                         f"{str(init_from)!r}; give the folder of the finished run{hint}")
    path = Path(init_from) / "best.pt"
    state = load_run_checkpoint(path, map_location=device)
    if state["model_name"] != model_cfg.name or model.config != type(model.config)(**state["config"]):
        raise ValueError(f"run.init_from: {path} holds a {state['model_name']} with other options than this "
                         f"config's {model_cfg.name}; continue a run with its own model.options")
    return state


def load_initial_weights(model: torch.nn.Module, model_cfg: Any, init_from: str | os.PathLike,
                         device: Any = "cpu") -> None:
    """``run.init_from``: the weights of that run's ``best.pt`` into ``model`` ([`read_initial_weights`][])."""
    state = read_initial_weights(model, model_cfg, init_from, device)
    model.load_state_dict(state["state_dict"])
    note = unfinished_note(Path(init_from), state)
    if note:
        log.warning("%s", note)
    log.info("starting from the weights of %s (a new schedule)", Path(init_from) / "best.pt")


def check_best_checkpoint(run_dir: Path, last: dict[str, Any]) -> None:
    """Before a run is resumed: its ``best.pt`` exists, is readable with finite weights, and is this run's
    (the model and data of ``last``, its loaded ``last.pt``); one line naming it and what to do otherwise.
    A run stopped before its first epoch ended (no best epoch yet) has none to check."""
    if int(last.get("best_epoch", 0)) < 1:
        return
    path = Path(run_dir) / "best.pt"
    advice = (f"put the run's own best.pt back, or start the run again with --overwrite (or another --out); "
              f"{path.parent / 'last.pt'} is kept")
    try:
        best = load_run_checkpoint(path)
    except FileNotFoundError as err:
        raise FileNotFoundError(f"cannot resume {str(run_dir)!r}: {err}; {advice}") from None
    except (OSError, ValueError, RuntimeError) as err:
        raise ValueError(f"cannot resume {str(run_dir)!r}: {err}; {advice}") from None
    if best.get("model_name") != last.get("model_name") or best.get("config") != last.get("config"):
        raise ValueError(f"cannot resume {str(run_dir)!r}: {path} holds a {best.get('model_name')} with other "
                         f"options than the run's {last.get('model_name')} (last.pt): it is not this run's best "
                         f"model; {advice}")
    ours, theirs = last.get("data_identity"), best.get("data_identity")
    if ours and theirs and ours != theirs:
        raise ValueError(f"cannot resume {str(run_dir)!r}: {path} was trained on other data than the run's "
                         f"last.pt: it is not this run's best model; {advice}")


def unfinished_note(run_dir: Path, best: dict[str, Any]) -> str | None:
    """One line if the run ``run_dir`` (``best``: its loaded ``best.pt``) did not finish -- no
    ``metrics.json`` though it has a test split: stopped (Ctrl-C, SIGTERM) or failed before its test --
    saying which weights are taken and how to finish it instead; None for a finished run."""
    if (run_dir / "metrics.json").is_file() or not best.get("train_config", {}).get("data", {}).get("n_test", 1):
        return None
    return (f"{run_dir} did not finish (no metrics.json); taking the weights of its best.pt (epoch "
            f"{best.get('epoch', '?')}, val relL2 {best.get('best_metric', float('nan')):.4e}); to finish that run "
            f"instead: petrov train --out {run_dir} --resume")


def load_operator(path: str | os.PathLike, map_location: Any = "cpu") -> NormalizedOperator:
    """A trained operator (raw units in and out, any resolution) from ``best.pt``/``last.pt``,
    a run directory (its ``best.pt``) or a shipped operator, ``"pretrained:NAME"``
    ([`petrov.common.shipped`][]); in eval mode."""
    path = Path(resolve_source(path))
    if path.is_dir():
        path = path / "best.pt"
    return operator_from_state(load_run_checkpoint(path, map_location=map_location), path, map_location)


def operator_from_state(state: dict[str, Any], path: str | os.PathLike,
                        map_location: Any = "cpu") -> NormalizedOperator:
    """The operator of a loaded run checkpoint ([`load_run_checkpoint`][]), in eval mode."""
    model = model_from_checkpoint(state, path)
    norms = state["normalizers"]
    op = NormalizedOperator(model, normalizer_from_state(norms["x"]), normalizer_from_state(norms["y"]),
                            InputNoise.from_state(state["noise"]))
    if isinstance(map_location, (str, torch.device)):
        op.to(map_location)
    return op.eval()


# --- random number generator states as tensors/lists (weights_only-safe) -----------------------

def rng_state() -> dict[str, Any]:
    """The torch (CPU and CUDA), numpy and python RNG states of this process."""
    _, keys, pos, has_gauss, cached = np.random.get_state()
    version, py_state, gauss_next = random.getstate()
    return {
        "torch": torch.get_rng_state(),
        "cuda": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else [],
        "numpy": {
            "keys": torch.from_numpy(np.asarray(keys, dtype=np.int64)),
            "pos": int(pos), "has_gauss": int(has_gauss), "cached_gaussian": float(cached),
        },
        "python": {"version": version, "state": torch.tensor(py_state, dtype=torch.int64),
                   "gauss_next": gauss_next},
    }


def set_rng_state(state: dict[str, Any]) -> None:
    """Restore what [`rng_state`][] captured."""
    torch.set_rng_state(state["torch"].cpu())
    if state["cuda"] and torch.cuda.is_available():
        torch.cuda.set_rng_state_all([s.cpu() for s in state["cuda"]])
    n = state["numpy"]
    np.random.set_state(
        ("MT19937", to_numpy(n["keys"], np.uint32), n["pos"], n["has_gauss"], n["cached_gaussian"])
    )
    p = state["python"]
    random.setstate((p["version"], tuple(int(v) for v in p["state"].tolist()), p["gauss_next"]))
