"""Mesh dataset kinds: what one sample is, on which meshes (variants), with which parameters.

A [`MeshRecipe`][] is the mesh counterpart of ``petrov.datasets.recipes.Recipe``: instead of a grid
resolution, each sample is stored on the named meshes ``variants(params)`` (e.g. ``level0``, ``level1``,
``level2``, ``remesh``), each with its own node count. ``sample(params, seed, index)`` makes sample
``index`` from ``(seed, index)`` alone, so samples can be made in any order, by any worker, and a run can
resume.

Kinds:

- ``darcy-mesh``: Darcy flow on random irregular domains (``petrov.datasets.mesh.darcy``), x = a, y = u;
- ``imported-mesh``: a user's own meshes and nodal fields (``petrov import --mesh``), one variant ``mesh``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping

from ...common.config import from_dict
from ...common.registry import Registry
from ..recipes import add_imported_kind, add_kind
from . import darcy


@dataclass(frozen=True)
class MeshRecipe:
    """A mesh dataset kind. ``sample(params, seed, index) -> (Domain, {variant: MeshSample})``;
    ``validate(params)`` raises ValueError on impossible values; ``variant_attrs(params)`` gives each
    variant group's attributes (e.g. its nominal spacing)."""

    name: str
    description: str
    family: str
    params_cls: type
    x_name: str
    y_name: str
    sample: Callable[..., Any] | None  # None: not generated (imported data)
    variants: Callable[[Any], list[str]]
    validate: Callable[[Any], None]
    solver_settings: Callable[[Any], dict]
    variant_attrs: Callable[[Any], dict[str, dict]] = lambda p: {}
    x_channels: int = 1
    y_channels: int = 1

    @property
    def generatable(self) -> bool:
        return self.sample is not None

    def make_params(self, params: Mapping[str, Any] | None = None):
        """Strict parameter dataclass from a mapping (unknown names list the valid ones)."""
        return from_dict(self.params_cls, dict(params or {}), context=f"{self.name} parameters")


MESH_RECIPES: Registry[MeshRecipe] = Registry("mesh dataset kind")


def get_mesh_recipe(kind: str) -> MeshRecipe:
    """The mesh recipe registered as ``kind`` (KeyError listing the registered kinds otherwise)."""
    return MESH_RECIPES.get(kind)


def _darcy_spacings(p: darcy.DarcyMeshParams) -> dict[str, dict]:
    fine = p.h / 2**p.refinements
    attrs = {f"level{r}": {"spacing": p.h / 2**r, "refinements": r} for r in range(p.refinements + 1)}
    attrs["remesh"] = {"spacing": fine, "refinements": -1}  # -1: meshed anew, not a refinement
    return attrs


add_kind(
    MESH_RECIPES, MeshRecipe, "darcy-mesh",
    description="Darcy -div(a grad u) = f on random domains in [0,1]^2 (holes, notch, L-shape, deformed "
    "square), u = 0 on the boundary; P1 FEM on nested levels and a remesh; x = a, y = u at the nodes",
    params_cls=darcy.DarcyMeshParams,
    x_name="a",
    y_name="u",
    sample=darcy.darcy_mesh_sample,
    variants=darcy.variants,
    validate=darcy.validate,
    solver_settings=darcy.solver_settings,
    variant_attrs=_darcy_spacings,
)


@dataclass(frozen=True)
class ImportedMeshParams:
    """No parameters: the data come from the user's meshes."""


add_imported_kind(
    MESH_RECIPES, MeshRecipe, "imported-mesh", "`petrov import --mesh`",
    description="a user's own triangle meshes with nodal input/output fields (petrov import --mesh)",
    params_cls=ImportedMeshParams, sample=None, variants=lambda p: ["mesh"],
)


__all__ = ["ImportedMeshParams", "MESH_RECIPES", "MeshRecipe", "get_mesh_recipe"]
