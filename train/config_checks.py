"""What makes a training config valid: the checks [`config_from_dict`][petrov.train.config.config_from_dict] makes
of every config, whether read from a TOML file, a run's ``config.json`` or built in Python.

- the shape: every required table and key present ([`check_required`][]), no key in the wrong table
  ([`check_misplaced`][]: ``epochs`` under ``[run]`` is named with the table it belongs in);
- the values: finite numbers, positive sizes, schedules that make sense, and the training mode's
  demands on the normalisation ([`check_values`][]);
- the model: its name and options against its own config class ([`validate_model_options`][]);
- the ``[data.generate]`` table, before anything is generated: the kind, its options, the sample count, and
  that the data it would make fit the splits, the model and the resolutions ([`check_generate`][]).
"""
from __future__ import annotations

import dataclasses
import inspect
import math
import typing
from pathlib import Path
from typing import Any, Mapping

from ..common.config import from_dict
from ..common.quick import quick_samples
from ..datasets.noise import InputNoise
from ..operators.models import config_class, model_layout
from .config_tables import GenerateConfig, ModelConfig, RunConfig, TrainConfig
from .rollout import training_mode


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


def check_resolution(value: Any, where: str) -> int | tuple[int, int]:
    """A grid resolution: a whole number of points per axis (``64``), or a pair ``[n_x, n_y]`` of points per axis
    of a rectangular 2-D grid, each >= 1; returned as an int or a tuple.  ValueError naming ``where`` else."""
    pair = isinstance(value, (list, tuple))
    items = list(value) if pair else [value]
    if (pair and len(items) != 2) or not all(isinstance(n, int) and not isinstance(n, bool) and n >= 1 for n in items):
        raise ValueError(f"{where} must be a whole number of grid points per axis >= 1 (e.g. 64) or a pair "
                         f"[n_x, n_y] of them for a rectangular 2-D grid (e.g. [16, 48]), got {value!r}")
    return (items[0], items[1]) if pair else items[0]


def check_values(cfg: TrainConfig) -> None:
    """ValueError for an impossible value: a number that is not finite, a size or split under its minimum, a
    schedule or budget that cannot run, a trajectory window for a model trained on whole samples, or a
    trajectory mode with the input and target normalised differently."""
    _check_finite(cfg)
    _check_run(cfg.run)
    d, o = cfg.data, cfg.optim
    for name in ("n_train", "n_val"):
        if getattr(d, name) < 1:
            raise ValueError(f"data.{name} must be >= 1, got {getattr(d, name)}")
    if d.n_test < 0:
        raise ValueError(f"data.n_test must be >= 0, got {d.n_test}")
    if d.train_resolution is not None:
        check_resolution(d.train_resolution, "data.train_resolution")
    for k, resolution in enumerate(d.eval_resolutions):
        check_resolution(resolution, f"data.eval_resolutions[{k}]")
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
    for key, minimum in (("history", 1), ("first_state", 0)):
        if getattr(d, key) < minimum:
            raise ValueError(f"data.{key} must be an integer >= {minimum}, got {getattr(d, key)}")
    if d.states is not None and d.states <= d.history:
        raise ValueError(f"data.states = {d.states} leaves no state to predict after data.history = {d.history} "
                         f"given ones; choose data.states > data.history, or leave it out (to the last state)")
    trajectory = training_mode(cfg.loss.mode).trajectory
    window = (d.history, d.first_state, d.states) != (1, 0, None)
    if window and not trajectory:
        raise ValueError(f"data.history / first_state / states choose a window of a trajectory for a marching "
                         f"model; loss.mode = {cfg.loss.mode!r} trains a model on whole samples: set a trajectory "
                         f"mode (e.g. loss.mode = 'pushforward') or leave them out")
    if trajectory and d.normalize_x != d.normalize_y:
        # a marching model's state 0 is its input: both sides must be in the same units
        raise ValueError(f"loss.mode = {cfg.loss.mode!r} needs data.normalize_x = data.normalize_y "
                         f"(got {d.normalize_x}, {d.normalize_y})")


def check_required(cls: type, raw: Mapping[str, Any], where: str) -> None:
    """ValueError naming required keys (fields without defaults) missing from ``raw``."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        required = f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
        if required and f.name not in raw:
            kind = "table" if dataclasses.is_dataclass(hints[f.name]) else "key"
            raise ValueError(f"{where}: missing required {kind} {f.name!r}")
        if dataclasses.is_dataclass(hints[f.name]) and isinstance(raw.get(f.name), Mapping):
            check_required(hints[f.name], raw[f.name], f"{where}.{f.name}" if where else f.name)


def _tables() -> dict[str, type]:
    """The config's tables by their TOML name: ``{"data": DataConfig, "data.generate": GenerateConfig, ...}``."""
    hints = typing.get_type_hints(TrainConfig)
    tables = {f.name: hints[f.name] for f in dataclasses.fields(TrainConfig)}
    return {**tables, "data.generate": GenerateConfig}


def check_misplaced(raw: Mapping[str, Any]) -> None:
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


def check_generate(cfg: TrainConfig) -> None:
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
                if isinstance(resolution, (list, tuple)):  # generated grids are square
                    raise ValueError(f"data.{key}: {list(resolution)} is a rectangular grid, but data.generate "
                                     f"makes square {native}-point grids: give one number of points per axis")
                try:
                    stride_for(native, resolution, recipe.periodic)
                except ValueError as err:
                    raise ValueError(f"data.{key} cannot be read from the {native}-point grid data.generate makes "
                                     f"(data.generate.resolution): {err}") from None


__all__ = ["check_generate", "check_misplaced", "check_required", "check_resolution", "check_values",
           "validate_model_options"]
