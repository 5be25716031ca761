"""petrov.operators: attention mixers, spectral layers, blocks and operator models."""
from ..common.registry import Registry
from .attention import Attention, AttentionConfig
from .attention.mixers import MIXERS, list_mixers
from .io import load_model, save_model
from ..grids.layout import grid_coordinates
from .models import (
    MODELS,
    build_model,
    list_models,
    model_config,
    model_name,
    point_set_models,
    register_model,
)
from .spectral import SpectralConv

__all__ = [
    "Attention",
    "AttentionConfig",
    "MIXERS",
    "MODELS",
    "Registry",
    "SpectralConv",
    "build_model",
    "grid_coordinates",
    "list_mixers",
    "list_models",
    "load_model",
    "model_config",
    "model_name",
    "point_set_models",
    "register_model",
    "save_model",
]
