"""Operator models, registered by name in ``MODELS``.

Every model takes channels-last grid tensors ``x: (b, *grid, in_channels)`` and optional
coordinates ``pos: (b, *grid, d)`` (default: the uniform grid of its config, see
``petrov.operators.layout.grid_coordinates``) and returns ``(b, *grid_out, out_channels)``.
A model is rebuilt from ``model.config`` (a plain dict) alone: ``build_model(name, **config)``.

Adding a model: ``@register_model("name", Config)`` on a class whose ``__init__`` takes the
config dataclass; import its module below.
"""
from __future__ import annotations

from ..config import asdict, from_dict
from ..registry import Registry

MODELS: Registry = Registry("model")


def register_model(name: str, config_cls: type):
    """Register a model class under ``name`` with its config dataclass."""

    def add(cls):
        cls.config_class = config_cls
        cls.model_name = name
        return MODELS.register(name)(cls)

    return add


def list_models() -> list[str]:
    """Names of the registered models."""
    return MODELS.names()


def build_model(name: str, **config):
    """Build model ``name`` from keyword config; unknown keys or names raise a clear error.

    The returned model has ``model.config`` (plain dict of the full config, defaults filled in)
    and ``model.model_name``, which is all :func:`load_model` needs to rebuild it.
    """
    cls = MODELS.get(name)
    cfg = from_dict(cls.config_class, config, context=f"model {name!r} config")
    model = cls(cfg)
    model.config = asdict(cfg)
    return model


# Importing the modules registers the models.
from . import fno, hybrid1d, hybrid2d, latent2d  # noqa: E402,F401
