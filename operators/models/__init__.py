"""Operator models, registered by name in ``MODELS``.

Every model takes channels-last grid tensors ``x: (b, *grid, in_channels)`` and optional
coordinates ``pos: (b, *grid, d)`` (default: the uniform grid of its config, see
``petrov.grids.layout.grid_coordinates``) and returns ``(b, *grid_out, out_channels)``.
A model keeps its config dataclass as ``model.config`` (grid models through
[`GridOperator`][petrov.operators.models.base.GridOperator], which also checks their inputs);
``model_name(model)`` and ``model_config(model)`` (a plain dict) are all that is needed to rebuild
it, ``build_model(name, **config)``, however the model was built (``build_model`` or its own
constructor with a config).

Point-set models (class attribute ``point_set = True``, listed by [`point_set_models`][]) take
meshes instead: ``model(x, pos, weights, mask=None, boundary=None)`` on a padded batch of node sets
([`petrov.operators.models.base`][]).

Adding a model: ``@register_model("name", Config)`` on a class whose ``__init__`` takes the
config dataclass and stores it as ``self.config``; import its module below (or, from another
package, declare it as a ``petrov.models`` entry point).
"""
from __future__ import annotations

from ...common.config import asdict, from_dict
from ...common.registry import Registry

MODELS: Registry = Registry("model", entry_point_group="petrov.models")
"""The models by name (``petrov models``); ``@register_model("name", Config)`` adds one."""
_CONFIG_CLASSES: dict[str, type] = {}


def register_model(name: str, config_cls: type):
    """Register a model class under ``name``, built as ``cls(config_cls(...))``."""

    def add(cls):
        _CONFIG_CLASSES[name] = config_cls
        return MODELS.register(name)(cls)

    return add


def config_class(name: str) -> type:
    """The config dataclass of the registered model ``name`` (unknown names raise ``KeyError``)."""
    MODELS.get(name)
    return _CONFIG_CLASSES[name]


def model_name(model) -> str:
    """The registered name of ``model``'s class; ``ValueError`` for a class that is not registered."""
    for name in MODELS:
        if type(model) is MODELS.get(name):
            return name
    raise ValueError(
        f"{type(model).__name__} is not a registered petrov model; build one with "
        "petrov.operators.build_model or register the class with @register_model"
    )


def model_config(model) -> dict:
    """``model.config`` as a plain dict (defaults filled in): with [`model_name`][], what rebuilds it."""
    name = model_name(model)
    cfg = getattr(model, "config", None)
    if not isinstance(cfg, config_class(name)):
        raise ValueError(f"model {name!r} has no {config_class(name).__name__} in .config")
    return asdict(cfg)


def list_models() -> list[str]:
    """Names of the registered models."""
    return MODELS.names()


def sample_transform(model):
    """The callable a data loader applies to each point-set sample for ``model`` (``item -> dict`` of its
    extra per-mesh inputs, e.g. ``mesh_fno``'s grid interpolation), or None when it needs none."""
    make = getattr(model, "sample_transform", None)
    return None if make is None else make()


def node_inputs(model) -> tuple[str, ...]:
    """The names of the per-node tensors ``(b, n, ...)`` among ``model``'s extra point-set inputs (what
    [`sample_transform`][] adds and a batch padded to more nodes pads with them, e.g. ``boundary_distance``);
    the others (``mesh_fno``'s grid interpolation) have one shape whatever the node count.  Empty for grid
    models."""
    names = getattr(model, "node_inputs", None)
    return () if names is None else tuple(names())


def point_set_models() -> list[str]:
    """Names of the registered models that take point sets (``forward(x, pos, weights, mask=None,
    boundary=None)``, [`petrov.operators.models.base`][]) rather than grids."""
    return [name for name in MODELS.names() if getattr(MODELS.get(name), "point_set", False)]


def model_layout(name: str, options: dict) -> tuple[bool, int | None] | None:
    """``(takes point sets?, grid axes)`` of the registered model ``name`` with ``options``, read from its
    class and config without building it (grid axes None where the model does not say); None if the name or
    options are not usable (building the model says why)."""
    try:
        cls = MODELS.get(name)
        if getattr(cls, "point_set", False):
            return True, None
        ndim = getattr(cls, "ndim", 0) or getattr(from_dict(config_class(name), options), "ndim", None)
    except (KeyError, ValueError, TypeError):
        return None
    return False, (int(ndim) if isinstance(ndim, int) and not isinstance(ndim, bool) and ndim > 0 else None)


def build_model(name: str, **config):
    """Build model ``name`` from keyword config; unknown keys or names raise a clear error."""
    cls = MODELS.get(name)
    return cls(from_dict(config_class(name), config, context=f"model {name!r} config"))


# Importing the modules registers the models.
from . import (  # noqa: E402,F401
    arfno1d,
    arfno2d,
    artransolver2d,
    fno,
    fno3d,
    galerkin1d,
    galerkin2d,
    latent,
    marching1d,
    marching2d,
    mesh_attention,
    mesh_fno,
    mesh_latent,
    mesh_transolver,
    transolver,
)
