"""Training configs: TOML files validated against dataclasses (the tables, one dataclass each, are in
[`petrov.train.config_tables`][] and importable from here).

A config has five tables; only ``[data]`` and ``[model]`` are required:

    [data]                        # DataConfig
    path = "data/burgers.h5"
    train_resolution = 512
    [model]                       # ModelConfig
    name = "galerkin1d"
    [model.options]               # passed to petrov.operators.build_model(name, **options)
    d_model = 64
    [optim]                       # OptimConfig
    [loss]                        # LossConfig
    [run]                         # RunConfig

Every key is checked: an unknown or mistyped key is a ``ValueError`` naming it (model options are
checked against the model's own config class).  ``--set section.key=value`` overrides are parsed
as TOML values (``optim.lr=5e-4``, ``data.eval_resolutions=[256,512]``, ``model.options.mixer=fourier``;
a value that is not valid TOML is taken as a plain string) and validated the same way.
A config path may also name a shipped preset (``petrov/train/configs/NAME.toml``).
"""
from __future__ import annotations

import dataclasses
import difflib
import json
import logging
import os
import sys
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..common.config import asdict, from_dict
from ..common.files import write_json
from ..common.quick import QUICK_ENV, QUICK_EPOCHS, QUICK_SPLITS, quick_mode, quick_samples
from .config_tables import (
    DataConfig,
    GenerateConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from .config_checks import check_generate, check_misplaced, check_required, check_values, validate_model_options

if sys.version_info >= (3, 11):
    import tomllib
else:  # the same parser, packaged for Python 3.10 (a conditional dependency)
    import tomli as tomllib

log = logging.getLogger(__name__)

# Keys that may differ between a run and its resumption (they do not change the result).
RUNTIME_KEYS = {
    "run.device", "run.num_workers", "run.threads", "run.progress", "run.time_budget_minutes", "run.fill_budget",
    "run.tensorboard", "run.eval_batch_size", "run.compile", "run.collective_timeout_minutes",
}

# Keys that may also differ on resuming: they choose what the test after training scores, not the training
EVALUATION_KEYS = {"data.eval_resolutions", "data.eval_levels"}


def preset_names() -> list[str]:
    """Names of the shipped presets (``petrov train NAME`` accepts them)."""
    files = resources.files("petrov.train.configs").iterdir()
    return sorted(f.name[:-5] for f in files if f.name.endswith(".toml"))


def read_toml(source: str | os.PathLike) -> dict[str, Any]:
    """Parse a TOML config file, or a shipped preset given by name (``burgers-quick``)."""
    path = Path(source)
    if path.is_dir():
        run = (path / "config.json").is_file()
        hint = f" (to continue that run: petrov train --out {path} --resume)" if run else ""
        raise IsADirectoryError(f"config {str(source)!r} is a directory, not a TOML file{hint}")
    if path.is_file():
        try:
            text = path.read_text(encoding="utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"config {str(source)!r} is not a UTF-8 text file ({err.reason} at byte {err.start}); "
                             f"save it as UTF-8 TOML") from None
    else:
        name = path.name[:-5] if path.name.endswith(".toml") else path.name
        preset = resources.files("petrov.train.configs") / f"{name}.toml"
        if str(source) not in (name, f"{name}.toml") or not preset.is_file():
            close = difflib.get_close_matches(name, preset_names(), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            raise FileNotFoundError(
                f"config {str(source)!r} is neither a file nor a shipped preset{hint}; "
                f"presets: {', '.join(preset_names())}"
            )
        text = preset.read_text(encoding="utf-8")
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as err:
        raise ValueError(f"config {str(source)!r} is not valid TOML: {err}") from None


REMOVE = object()  # the value of ``--set ~section.key``: the key is removed and its default applies


def parse_override(item: str) -> tuple[list[str], Any]:
    """``"optim.lr=5e-4"`` -> ``(["optim", "lr"], 0.0005)``; the value is parsed as TOML.
    ``"~run.time_budget_minutes"`` -> ``(["run", "time_budget_minutes"], REMOVE)`` (Hydra's syntax): the
    key is removed from the config, so its default applies (a preset's time budget, for one)."""
    if item.startswith("~") and "=" in item:
        key = item[1:].partition("=")[0].strip()
        raise ValueError(f"--set {item!r}: ~section.key removes a key and takes no =value; give --set '~{key}' to "
                         f"remove it, or --set '{item[1:]}' to set it")
    remove = item.startswith("~")
    key, sep, raw = (item[1:], "", "") if remove else item.partition("=")
    keys = [k.strip() for k in key.split(".")]
    if not (sep or remove) or len(keys) < 2 or not all(keys):
        raise ValueError(f"--set {item!r}: expected section.key=value (e.g. optim.lr=5e-4), or ~section.key "
                         f"to remove a key")
    if remove:
        return keys, REMOVE
    try:
        value = tomllib.loads(f"value = {raw.strip()}")["value"]
    except tomllib.TOMLDecodeError:
        value = raw.strip()  # unquoted strings: --set model.options.mixer=fourier
    return keys, value


def apply_overrides(raw: Mapping[str, Any], overrides: list[str]) -> dict[str, Any]:
    """A copy of ``raw`` with each ``section.key=value`` applied (validation comes after)."""
    result = json.loads(json.dumps(raw))  # deep copy of plain TOML data
    for item in overrides:
        keys, value = parse_override(item)
        table = result
        for depth, key in enumerate(keys[:-1]):
            table = table.get(key) if value is REMOVE else table.setdefault(key, {})
            if not isinstance(table, dict):
                where = ".".join(keys[: depth + 1])
                if table is None:
                    raise ValueError(f"--set {item!r}: the config has no {where!r} table; nothing to remove")
                raise ValueError(f"--set {item!r}: {where!r} is a value, not a table")
        if value is not REMOVE:
            table[keys[-1]] = value
        elif table.pop(keys[-1], REMOVE) is REMOVE:
            raise ValueError(f"--set {item!r}: the config does not set {'.'.join(keys)!r}; nothing to remove")
    return result


def config_from_dict(raw: Mapping[str, Any], check_model: bool = True) -> TrainConfig:
    """Validate a plain dict (parsed TOML or a saved ``config.json``) into a [`TrainConfig`][]."""
    check_misplaced(raw)
    check_required(TrainConfig, raw, "config")
    if isinstance(raw.get("data"), Mapping) and isinstance(raw["data"].get("generate"), Mapping):
        check_required(GenerateConfig, raw["data"]["generate"], "config.data.generate")
    cfg = from_dict(TrainConfig, raw, context="config")
    if isinstance(cfg.data.generate, Mapping):  # from_dict leaves Optional[dataclass] as a dict
        cfg.data.generate = from_dict(GenerateConfig, cfg.data.generate, "config.data.generate")
    check_values(cfg)
    if check_model:
        validate_model_options(cfg.model)
    check_generate(cfg)
    if check_model:  # validated whole: validate_config (train's) need not do it again while it is unchanged
        vars(cfg)[_VALIDATED] = _fingerprint(cfg)
    return cfg


_VALIDATED = "_validated_as"  # a config's fingerprint when config_from_dict validated it (not a dataclass field)


def _fingerprint(cfg: TrainConfig) -> str:
    return json.dumps(config_to_dict(cfg), sort_keys=True, default=str)


def is_validated(cfg: TrainConfig) -> bool:
    """Whether ``cfg`` came from [`config_from_dict`][] (a file, a preset, ``load_config``) and has not been
    changed since: [`validate_config`][] then returns it as it is."""
    return vars(cfg).get(_VALIDATED) == _fingerprint(cfg)


def validate_config(cfg: TrainConfig, check_model: bool = True) -> TrainConfig:
    """A validated copy of ``cfg``: the checks [`config_from_dict`][] makes of a file, for a config built in
    Python from the dataclasses (``TrainConfig(DataConfig(...), ...)``), whose constructors check nothing.
    A config [`config_from_dict`][] validated and nobody changed since is returned as it is (``is_validated``):
    a config is validated once."""
    if not isinstance(cfg, TrainConfig):
        what = "a dict" if isinstance(cfg, dict) else f"{type(cfg).__name__} {cfg!r}"[:200]
        raise TypeError(f"train: config must be a TrainConfig, got {what}; make one with petrov.train.load_config(...) "
                        f"from a TOML file or preset name, or petrov.train.config.config_from_dict(...) from a dict")
    if check_model and is_validated(cfg):
        return cfg
    hints = typing.get_type_hints(TrainConfig)
    for f in dataclasses.fields(TrainConfig):
        value = getattr(cfg, f.name)
        if not isinstance(value, hints[f.name]):
            raise TypeError(f"TrainConfig.{f.name} must be a {hints[f.name].__name__}, got {type(value).__name__}")
    raw = config_to_dict(cfg)
    for section in raw.values():  # paths may be given as Path objects in Python (a file holds strings)
        for key, value in section.items():
            if isinstance(value, os.PathLike):
                section[key] = os.fspath(value)
    return config_from_dict(raw, check_model=check_model)


def load_config(
    source: str | os.PathLike, overrides: list[str] | None = None, check_model: bool = True
) -> TrainConfig:
    """Read ``source`` (file or preset name), apply ``--set`` overrides, validate.

    In quick mode (``PETROV_QUICK=1``, [`petrov.common.quick`][]) the splits and epochs are then
    shrunk to toy sizes ([`quick_config`][])."""
    if isinstance(source, Mapping):
        raise TypeError("load_config reads a TOML file or a preset name, got a dict; validate a dict with "
                        "petrov.train.config.config_from_dict(raw)")
    if not isinstance(source, (str, os.PathLike)):
        raise TypeError(f"load_config: source must be a TOML file's path or a preset name, got {type(source).__name__}")
    try:  # a bare string would be read character by character
        items = None if isinstance(overrides, (str, bytes, Mapping)) else list(overrides or [])
    except TypeError:  # not iterable
        items = None
    if items is None or not all(isinstance(item, str) for item in items):
        raise TypeError(f'load_config: overrides takes a list of "key=value" strings (e.g. ["optim.lr=1e-4"]), '
                        f"got {overrides!r}")
    raw = apply_overrides(read_toml(source), items)
    return config_from_dict(quick_config(raw) if quick_mode() else raw, check_model=check_model)


def quick_config(raw: Mapping[str, Any]) -> dict[str, Any]:
    """A plain config dict with at most ``QUICK_SPLITS`` samples per split and ``QUICK_EPOCHS`` epochs,
    generating at most ``QUICK_SAMPLES`` samples; everything else (grids, model, files) unchanged."""
    original = json.loads(json.dumps(raw))
    raw = json.loads(json.dumps(raw))  # a deep copy of plain data

    def integer(value: Any) -> bool:  # anything else is left to the validator, which names the key
        return isinstance(value, int) and not isinstance(value, bool)

    data = raw.setdefault("data", {})
    if isinstance(data, dict):  # anything else: the validator's "expected a table"
        for key, cap in QUICK_SPLITS.items():
            value = data.get(key, getattr(DataConfig, key))
            if integer(value):
                data[key] = min(value, cap)
        generate = data.get("generate")
        if isinstance(generate, dict) and integer(generate.get("n_samples")):
            generate["n_samples"] = quick_samples(generate["n_samples"])
    optim = raw.setdefault("optim", {})
    if isinstance(optim, dict):
        epochs = optim.get("epochs", OptimConfig.epochs)
        if isinstance(epochs, (int, float)) and not isinstance(epochs, bool):  # anything else: the validator's error
            optim["epochs"] = min(epochs, QUICK_EPOCHS)
    if raw != original:
        splits = "/".join(str(cap) for cap in QUICK_SPLITS.values())
        log.info("quick mode (%s=%s): splits capped at %s train/val/test samples, %s epoch(s); the results are "
                 "meaningless", QUICK_ENV, os.environ.get(QUICK_ENV, "").strip(), splits, QUICK_EPOCHS)
    return raw


def config_to_dict(cfg: TrainConfig) -> dict[str, Any]:
    """Plain-dict form (JSON/TOML/torch.save safe)."""
    return asdict(cfg)


def flatten(raw: Mapping[str, Any], prefix: str = "") -> dict[str, Any]:
    """``{"a": {"b": 1}}`` -> ``{"a.b": 1}``."""
    out: dict[str, Any] = {}
    for key, value in raw.items():
        name = f"{prefix}{key}"
        if isinstance(value, Mapping) and value:
            out.update(flatten(value, name + "."))
        else:
            out[name] = value
    return out


def config_differences(a: TrainConfig, b: TrainConfig, ignore=RUNTIME_KEYS) -> list[str]:
    """Dotted keys whose values differ, runtime keys (``RUNTIME_KEYS``) aside."""
    fa, fb = flatten(config_to_dict(a)), flatten(config_to_dict(b))
    keys = sorted(set(fa) | set(fb))
    return [k for k in keys if k not in ignore and fa.get(k) != fb.get(k)]


def check_resumable(saved: TrainConfig, config: TrainConfig, run_dir: str | os.PathLike) -> None:
    """The one rule for resuming: only runtime keys may differ from the run's saved config."""
    changed = config_differences(saved, config, RUNTIME_KEYS | EVALUATION_KEYS)
    if changed:
        raise ValueError(
            f"cannot resume {str(run_dir)!r}: the config differs in {', '.join(changed)}; only the "
            f"runtime keys ({', '.join(sorted(RUNTIME_KEYS))}) and the test's "
            f"({', '.join(sorted(EVALUATION_KEYS))}) may change when resuming"
        )


def with_evaluation_keys(saved: TrainConfig, config: TrainConfig) -> TrainConfig | None:
    """``saved`` with ``config``'s ``EVALUATION_KEYS`` (a resumed run tested at other resolutions), None if
    they are the same."""
    old, new = saved.data, config.data
    if (old.eval_resolutions, old.eval_levels) == (new.eval_resolutions, new.eval_levels):
        return None
    return dataclasses.replace(saved, data=dataclasses.replace(
        saved.data, eval_resolutions=config.data.eval_resolutions, eval_levels=config.data.eval_levels))


def save_config_json(cfg: TrainConfig, path: str | os.PathLike) -> None:
    """Write the resolved config as JSON, atomically."""
    write_json(path, config_to_dict(cfg))


def load_config_json(path: str | os.PathLike, check_model: bool = True) -> TrainConfig:
    """Read a run's ``config.json`` back."""
    path = Path(path)
    if path.parent.exists() and not path.parent.is_dir():
        raise NotADirectoryError(f"{str(path.parent)!r} is a file, not a run directory; give the directory "
                                 f"`petrov train --out` wrote")
    if not path.is_file():
        raise FileNotFoundError(f"no config.json in {str(path.parent)!r}: not a petrov run directory")
    try:
        raw = json.loads(path.read_text())
    except (ValueError, UnicodeDecodeError) as err:
        raise ValueError(f"{path} is not valid JSON (damaged or edited by hand?): {err}; restore it from the run's "
                         f"checkpoint: petrov.train.checkpoint.load_run_checkpoint(...)['train_config']") from None
    if not isinstance(raw, dict):
        raise ValueError(f"{path} does not hold a config (a JSON object); the file is damaged")
    try:
        return config_from_dict(raw, check_model=check_model)
    except ValueError as err:
        raise ValueError(f"{path}: {err}") from None


def replace(cfg: TrainConfig, **sections: Any) -> TrainConfig:
    """``replace(cfg, optim={"epochs": 3})``: a validated copy with some keys changed."""
    raw = config_to_dict(cfg)
    for section, values in sections.items():
        raw.setdefault(section, {}).update(values)
    return config_from_dict(raw, check_model=False)


__all__ = [
    "DataConfig", "GenerateConfig", "LossConfig", "ModelConfig", "OptimConfig", "RunConfig",
    "EVALUATION_KEYS", "TrainConfig", "apply_overrides", "config_differences", "config_from_dict", "config_to_dict",
    "load_config", "load_config_json", "parse_override", "preset_names", "read_toml",
    "replace", "save_config_json", "validate_config", "with_evaluation_keys",
]
