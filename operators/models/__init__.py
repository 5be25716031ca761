"""Operator models, registered by name in ``MODELS``.

Every model takes channels-last grid tensors ``x: (b, *grid, in_channels)`` and optional
coordinates ``pos: (b, *grid, d)`` (default: the uniform grid of its config, see
``petrov.operators.layout.grid_coordinates``) and returns ``(b, *grid_out, out_channels)``.
A model keeps its config dataclass as ``model.cfg``; ``model_name(model)`` and
``model_config(model)`` (a plain dict) are all that is needed to rebuild it,
``build_model(name, **config)``, however the model was built (``build_model`` or its own
constructor with a config).

Adding a model: ``@register_model("name", Config)`` on a class whose ``__init__`` takes the
config dataclass and stores it as ``self.cfg``; import its module below.
"""
from __future__ import annotations

from petrov.common.config import asdict, from_dict
from petrov.common.registry import Registry

MODELS: Registry = Registry("model", entry_point_group="petrov.models")
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
    """``model.cfg`` as a plain dict (defaults filled in): with :func:`model_name`, what rebuilds it."""
    name = model_name(model)
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, config_class(name)):
        raise ValueError(f"model {name!r} has no {config_class(name).__name__} in .cfg")
    return asdict(cfg)


def list_models() -> list[str]:
    """Names of the registered models."""
    return MODELS.names()


def build_model(name: str, **config):
    """Build model ``name`` from keyword config; unknown keys or names raise a clear error."""
    cls = MODELS.get(name)
    return cls(from_dict(config_class(name), config, context=f"model {name!r} config"))


# Importing the modules registers the models.
from . import arfno1d, fno, galerkin1d, galerkin2d, latent1d, latent2d, marching1d, transolver  # noqa: E402,F401
