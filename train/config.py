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
import inspect
import json
import logging
import math
import os
import sys
import typing
from importlib import resources
from pathlib import Path
from typing import Any, Mapping

from ..common.config import asdict, from_dict
from ..common.files import write_json
from ..common.quick import QUICK_ENV, QUICK_EPOCHS, QUICK_SPLITS, quick_mode, quick_samples
from ..datasets.noise import InputNoise
from ..operators.models import config_class, model_layout
from .config_tables import (
    DataConfig,
    GenerateConfig,
    LossConfig,
    ModelConfig,
    OptimConfig,
    RunConfig,
    TrainConfig,
)
from .rollout import training_mode

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


def validate_model_options(model: ModelConfig) -> None:
    """Check the model name and its options against the model's config class."""
    # KeyError naming the registered models; ValueError naming a wrong option
    from_dict(config_class(model.name), model.options, context=f"model.options ({model.name!r})")


def _check_finite(cfg: TrainConfig) -> None:
    """Every number of the config is finite (NaN passes ``lr <= 0`` and would reach torch)."""
    for section in ("data", "optim", "loss", "run"):
        for key, value in vars(getattr(cfg, section)).items():
            if isinstance(value, float) and not math.isfinite(value):
                raise ValueError(f"{section}.{key} must be a finite number, got {value}")


def _check_run(r: RunConfig) -> None:
    for key, value, minimum in (("threads", r.threads, 1), ("eval_batch_size", r.eval_batch_size, 1),
                                ("num_workers", r.num_workers, 0)):
        if value is not None and value < minimum:
            what = "None (torch's default) or " if key == "threads" else "None or " if key != "num_workers" else ""
            raise ValueError(f"run.{key} must be {what}an integer >= {minimum}, got {value}")
    if r.time_budget_minutes is not None and not r.time_budget_minutes > 0:
        raise ValueError(f"run.time_budget_minutes must be > 0 (or left out), got {r.time_budget_minutes}")
    if r.fill_budget and r.time_budget_minutes is None:
        raise ValueError("run.fill_budget plans the epochs to fill run.time_budget_minutes, which is not set: "
                         "set it (petrov train --budget-minutes M sets both), or leave run.fill_budget out")
    if not r.collective_timeout_minutes > 0:
        raise ValueError(f"run.collective_timeout_minutes must be > 0, got {r.collective_timeout_minutes}")


def _check_values(cfg: TrainConfig) -> None:
    _check_finite(cfg)
    _check_run(cfg.run)
    d, o = cfg.data, cfg.optim
    for name in ("n_train", "n_val"):
        if getattr(d, name) < 1:
            raise ValueError(f"data.{name} must be >= 1, got {getattr(d, name)}")
    if d.n_test < 0:
        raise ValueError(f"data.n_test must be >= 0, got {d.n_test}")
    if d.normalizer_grid is not None and d.normalizer_grid < 2:
        raise ValueError(f"data.normalizer_grid must be an integer >= 2 (nodes per axis) or left out (as fine "
                         f"as the training meshes), got {d.normalizer_grid}")
    try:
        InputNoise(0.0 if d.noise is None else d.noise, d.noise_seed)
    except ValueError as err:
        raise ValueError(f"data.noise / data.noise_seed: {err}") from None
    if o.batch_size < 1:
        raise ValueError(f"optim.batch_size must be >= 1, got {o.batch_size}")
    if not o.epochs > 0:
        raise ValueError(f"optim.epochs must be > 0 (a fraction ends the last pass early), got {o.epochs}")
    if o.lr <= 0 or o.div_factor <= 0 or o.final_div_factor <= 0:
        raise ValueError("optim.lr, optim.div_factor and optim.final_div_factor must be > 0")
    if o.div_factor < 1:  # the schedule would start above its maximum
        raise ValueError(f"optim.div_factor must be >= 1 (the initial learning rate is optim.lr / optim.div_factor, "
                         f"and optim.lr is the schedule's maximum), got {o.div_factor}")
    if not 0.0 < o.pct_start < 1.0:
        raise ValueError(f"optim.pct_start must be in (0, 1), got {o.pct_start}")
    if o.grad_clip < 0 or o.weight_decay < 0 or o.min_warmup_steps < 0:
        raise ValueError("optim.grad_clip, optim.weight_decay, optim.min_warmup_steps must be >= 0")
    if cfg.loss.h1_weight < 0:
        raise ValueError(f"loss.h1_weight must be >= 0, got {cfg.loss.h1_weight}")
    if training_mode(cfg.loss.mode).trajectory and d.normalize_x != d.normalize_y:
        # a marching model's state 0 is its input: both sides must be in the same units
        raise ValueError(f"loss.mode = {cfg.loss.mode!r} needs data.normalize_x = data.normalize_y "
                         f"(got {d.normalize_x}, {d.normalize_y})")


def _check_required(cls: type, raw: Mapping[str, Any], where: str) -> None:
    """ValueError naming required keys (fields without defaults) missing from ``raw``."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in raw:
            kind = "table" if dataclasses.is_dataclass(hints[f.name]) else "key"
            raise ValueError(f"{where}: missing required {kind} {f.name!r}")
        if dataclasses.is_dataclass(hints[f.name]) and isinstance(raw.get(f.name), Mapping):
            _check_required(hints[f.name], raw[f.name], f"{where}.{f.name}" if where else f.name)


def _tables() -> dict[str, type]:
    """The config's tables by their TOML name: ``{"data": DataConfig, "data.generate": GenerateConfig, ...}``."""
    hints = typing.get_type_hints(TrainConfig)
    tables = {f.name: hints[f.name] for f in dataclasses.fields(TrainConfig)}
    return {**tables, "data.generate": GenerateConfig}


def _check_misplaced(raw: Mapping[str, Any]) -> None:
    """ValueError for a key that is unknown where it stands but a key of another table (``epochs`` under
    ``[run]``), saying which table it belongs in."""
    tables = _tables()
    fields = {name: {f.name for f in dataclasses.fields(cls)} for name, cls in tables.items()}
    places = [("", raw, set(tables) - {"data.generate"})]
    places += [(name, raw.get(name.split(".")[0]), fields[name]) for name in tables if "." not in name]
    data = raw.get("data")
    if isinstance(data, Mapping):
        places.append(("data.generate", data.get("generate"), fields["data.generate"]))
    for where, table, valid in places:
        if not isinstance(table, Mapping):
            continue
        for key in table:
            homes = [name for name, keys in fields.items() if key in keys and name != where]
            if key not in valid and homes:
                place = f"[{where}]" if where else "the top level"
                raise ValueError(f"config: {key!r} is not a key of {place}; it belongs in "
                                 f"{' or '.join(f'[{home}]' for home in homes)} ({homes[0]}.{key})")


def _check_generate(cfg: TrainConfig) -> None:
    """Check ``[data.generate]`` before anything is generated: the kind, its options, the sample count, and,
    when ``data.path`` does not exist yet (so the table will be used), that the data it makes fit the splits,
    the model's grid dimension and the resolutions (or levels) to train and test at."""
    from ..datasets.generation import generate_dataset
    from ..datasets.mesh.recipes import MESH_RECIPES
    from ..datasets.recipes import RECIPES
    from ..datasets.sampling import stride_for

    g, d = cfg.data.generate, cfg.data
    if g is None:
        return
    mesh = g.kind in MESH_RECIPES
    if not mesh and g.kind not in RECIPES:
        raise ValueError(f"data.generate.kind: {RECIPES.unknown_message(g.kind)}; mesh kinds: "
                         f"{', '.join(MESH_RECIPES.names())}")
    for key, minimum in (("n_samples", 1), ("seed", 0)):
        if getattr(g, key) < minimum:
            raise ValueError(f"data.generate.{key} must be an integer >= {minimum}, got {getattr(g, key)}")
    recipe = MESH_RECIPES.get(g.kind) if mesh else RECIPES.get(g.kind)
    if mesh and g.resolution is not None:
        raise ValueError(f"data.generate.resolution: {g.kind} is a mesh dataset with no resolution (its mesh "
                         f"spacing is the h option); leave data.generate.resolution out")
    how = {p.name for p in inspect.signature(generate_dataset).parameters.values()
           if p.kind is inspect.Parameter.KEYWORD_ONLY}  # options of the generation, not of the kind
    try:
        params = recipe.make_params({k: v for k, v in g.options.items() if k not in how})
    except ValueError as err:
        raise ValueError(f"data.generate.options: {err}") from None
    native = None if mesh else (recipe.native_resolution if g.resolution is None else g.resolution)
    try:
        recipe.validate(params) if mesh else recipe.validate(params, native)
    except ValueError as err:
        raise ValueError(f"data.generate ({g.kind!r}): {err}") from None
    if Path(d.path).exists():  # the file is used as it is (ensure_data_file warns if it differs)
        return
    n, total = quick_samples(g.n_samples), d.n_train + d.n_val + d.n_test
    if n < total:
        raise ValueError(f"data.generate.n_samples = {n} is fewer than data.n_train + n_val + n_test = {d.n_train} + "
                         f"{d.n_val} + {d.n_test} = {total}; raise data.generate.n_samples or lower the splits")
    layout = model_layout(cfg.model.name, cfg.model.options)
    if layout is not None:
        point_model, dim = layout
        made = "point sets (meshes)" if mesh else f"{recipe.dim}-D grids"
        if point_model != mesh or (not mesh and dim is not None and dim != recipe.dim):
            takes = "point sets (meshes)" if point_model else f"{dim}-D grids" if dim else "grids"
            raise ValueError(f"data.generate.kind {g.kind!r} makes {made} but model {cfg.model.name!r} takes {takes}; "
                             f"choose a kind (petrov generate --help) or a model (petrov models) that fit each other")
    wrong = ["train_resolution", "eval_resolutions"] if mesh else ["level", "eval_levels"]
    given = [f"data.{k}" for k in wrong if getattr(d, k) not in (None, [])]
    if given:
        use = "data.level / data.eval_levels" if mesh else "data.train_resolution / data.eval_resolutions"
        raise ValueError(f"data.generate.kind {g.kind!r} makes {'meshes' if mesh else 'grids'}: choose {use}, not "
                         f"{', '.join(given)}")
    if not mesh:
        for key, values in (("train_resolution", [d.train_resolution]), ("eval_resolutions", d.eval_resolutions)):
            for resolution in values:
                if resolution is None:
                    continue
                try:
                    stride_for(native, resolution, recipe.periodic)
                except ValueError as err:
                    raise ValueError(f"data.{key} cannot be read from the {native}-point grid data.generate makes "
                                     f"(data.generate.resolution): {err}") from None


def config_from_dict(raw: Mapping[str, Any], check_model: bool = True) -> TrainConfig:
    """Validate a plain dict (parsed TOML or a saved ``config.json``) into a [`TrainConfig`][]."""
    _check_misplaced(raw)
    _check_required(TrainConfig, raw, "config")
    if isinstance(raw.get("data"), Mapping) and isinstance(raw["data"].get("generate"), Mapping):
        _check_required(GenerateConfig, raw["data"]["generate"], "config.data.generate")
    cfg = from_dict(TrainConfig, raw, context="config")
    if isinstance(cfg.data.generate, Mapping):  # from_dict leaves Optional[dataclass] as a dict
        cfg.data.generate = from_dict(GenerateConfig, cfg.data.generate, "config.data.generate")
    _check_values(cfg)
    if check_model:
        validate_model_options(cfg.model)
    _check_generate(cfg)
    return cfg


def validate_config(cfg: TrainConfig, check_model: bool = True) -> TrainConfig:
    """A validated copy of ``cfg``: the checks [`config_from_dict`][] makes of a file, for a config built in
    Python from the dataclasses (``TrainConfig(DataConfig(...), ...)``), whose constructors check nothing."""
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
