"""Which resolutions (grid files) or mesh levels (mesh files) a trained operator may be evaluated at.

A data file reaches the strided sub-grids of its native grid (``petrov.datasets.allowed_resolutions``);
an operator with point-wise normalisers reaches those its fitted statistics can be taken to; an
inverse operator only those from which its coarse target grid can be pooled.
"""
from __future__ import annotations

import itertools
from pathlib import Path
from typing import Any, Sequence

from ..datasets import get_recipe, open_dataset
from ..datasets.mesh.recipes import MESH_RECIPES, get_mesh_recipe
from ..datasets.recipes import is_inverse
from ..datasets.sampling import poolable
from ..operators.checks import first_weight
from ..train.model_fit import forward_error, without_advice
from ..train.metrics import resolution_label
from .runs import EvalSetup


class ResolutionChoiceError(ValueError):
    """Resolutions asked for in a form the data file cannot be read at (a word for a grid file): the caller's
    choice is wrong (``petrov evaluate --resolutions``: a usage error), not the run or the file."""


Resolution = int | tuple[int, int]  # points per axis; a pair (n_x, n_y) for a rectangular 2-D grid


def _pair(word: str, text: Any) -> tuple[int, int] | None:
    """``"16x48"`` -> ``(16, 48)``; None for a word that is no pair of numbers (a mesh level's name)."""
    parts = word.lower().split("x")
    if len(parts) != 2 or not all(p.strip().lstrip("-").isdigit() for p in parts):
        return None
    pair = (int(parts[0]), int(parts[1]))
    if min(pair) < 1:
        raise ValueError(f"resolution {word} is not a grid size (whole numbers of grid points per axis, e.g. "
                         f"16x48); resolutions are separated by commas, got {text!r}")
    return pair


def parse_resolutions(text: str | Sequence[Any] | None) -> list[int | tuple[int, int] | str] | None:
    """``"256,512"`` -> ``[256, 512]``; ``"16x48"`` (or a list ``[16, 48]`` in a list) -> the pair ``(16, 48)``
    of points per axis of a rectangular 2-D grid; mesh levels stay names (``"level0,remesh"``); also accepts a
    list; duplicates dropped, order kept; a number below 1 is not a grid size (ValueError)."""
    if text is None:
        return None
    items = text.split(",") if isinstance(text, str) else list(text)
    out: list[int | tuple[int, int] | str] = []
    for item in items:
        word = resolution_label(item).strip()
        if not word:
            raise ValueError(f"resolutions (or mesh levels) are separated by commas, got {text!r}")
        r = int(word) if word.lstrip("-").isdigit() else (_pair(word, text) or word)
        if isinstance(r, int) and r < 1:
            raise ValueError(f"resolution {r} is not a grid size (a whole number of grid points); resolutions "
                             f"(or mesh levels) are separated by commas, got {text!r}")
        if r not in out:
            out.append(r)
    if not out:
        raise ValueError("give at least one resolution")
    if len({isinstance(r, str) for r in out}) > 1:
        raise ValueError(f"resolutions must be integers separated by commas (grid files) or mesh level names "
                         f"(mesh files), not a mix: got {text!r}")
    return out


def allowed_resolutions(setup: EvalSetup, info: dict[str, Any]) -> list[int | tuple[int, ...]]:
    """Resolutions of the data file that the operator's normalisers (and, for the inverse problem,
    the pooled target grid) can be taken to."""
    if is_mesh_info(info):
        return list(info["levels"])
    allowed = list(info["resolutions"])
    if allowed and isinstance(allowed[0], (list, tuple)):  # per axis: a square grid's numbers, else every pair
        square = all(list(axis) == list(allowed[0]) for axis in allowed)
        allowed = list(allowed[0]) if square else list(itertools.product(*allowed))
    xn = setup.operator.x_normalizer
    if xn is not None:
        allowed = [r for r in allowed if xn.reaches(r)]
    coarse = coarse_resolution(setup)
    if coarse is not None:
        allowed = [r for r in allowed if poolable(r, coarse)]
    return sorted(allowed)


def model_refusals(setup: EvalSetup, info: dict[str, Any], resolutions: Sequence[int]) -> dict[int, str]:
    """Resolution -> the trained model's own reason for refusing it (e.g. too few points for its spectral
    modes, without its advice on building a model), from one sample of the file read at each."""
    model = setup.operator.model
    weight = first_weight(model)
    device = weight.device if weight is not None else "cpu"
    refused = {}
    for r in resolutions:
        sample = open_dataset(info["path"], resolution=r, indices=[0], kind=setup.kind,
                              coarse_resolution=coarse_resolution(setup), lazy=True)
        why = forward_error(model, sample, device)
        if why:
            refused[r] = without_advice(why)
    return refused


def is_mesh_info(info: dict[str, Any]) -> bool:
    """Whether ``dataset_info`` describes a mesh (point-set) file."""
    return info.get("layout") == "mesh"


def family(kind: str) -> str:
    """The family of a grid or mesh dataset kind (kinds of one family store the same fields)."""
    return get_mesh_recipe(kind).family if kind in MESH_RECIPES else get_recipe(kind).family


def coarse_resolution(setup: EvalSetup) -> int | None:
    """The inverse target grid: the config's, else the fitted target normaliser's grid."""
    if not is_inverse(setup.kind):
        return None
    d = setup.data_config
    if d is not None and d.coarse_resolution is not None:
        return int(d.coarse_resolution)
    yn = setup.operator.y_normalizer
    if yn is not None and getattr(yn, "grid", ()):
        return int(yn.grid[0])
    return None


def check_resolutions(resolutions: list[int], setup: EvalSetup, info: dict[str, Any], data_path: Path) -> None:
    """[`ResolutionChoiceError`][] naming the ``resolutions`` the data file cannot be read at for this operator
    (``allowed_resolutions``) or the trained model cannot take (``model_refusals``, one sample each; its
    reason), and the resolutions of the file it takes (each tried only then).  A model that refuses every
    resolution of the file does not fit the data at all (channels, kind): left to the evaluation, which
    says so (``check_model_fits_data``)."""
    allowed = allowed_resolutions(setup, info)
    words = [r for r in resolutions if isinstance(r, str)]
    if words and not is_mesh_info(info):
        raise ResolutionChoiceError(
            f"resolution {words[0]!r} is not a whole number: {data_path} is a grid file, read at resolutions "
            f"(numbers of grid points; mesh level names are for mesh files); allowed resolutions: "
            f"{taken_resolutions(allowed, model_refusals(setup, info, allowed))}")
    bad = [r for r in resolutions if r not in allowed]
    if is_mesh_info(info):
        refused, everywhere = {}, {}
    else:
        refused = model_refusals(setup, info, [r for r in resolutions if r in allowed])
        everywhere = model_refusals(setup, info, allowed) if bad or refused else {}
        if len(everywhere) == len(allowed):  # not a matter of resolution
            refused, everywhere = {}, {}
    bad += list(refused)
    if bad:
        why = next((f" ({refused[r]})" for r in bad if r in refused), "")
        cased = {str(a).lower(): a for a in allowed}
        near = [cased[str(r).lower()] for r in bad if isinstance(r, str) and str(r).lower() in cased]
        if near and not why:
            why = f" (did you mean {near[0]!r}?)"
        raise ResolutionChoiceError(
            f"resolution{'s' if len(bad) > 1 else ''} {', '.join(map(resolution_label, bad))} not available for this "
            f"trained model from {data_path}{why}; allowed resolutions: {taken_resolutions(allowed, everywhere)}")


def taken_resolutions(allowed: list, refused: dict) -> str:
    """The ``allowed`` resolutions less those the trained model ``refused`` (all of them: a misfit that is
    not a matter of resolution, left to the evaluation), for a message."""
    if not refused or len(refused) == len(allowed):
        return ", ".join(map(resolution_label, allowed))
    return (f"{', '.join(resolution_label(r) for r in allowed if r not in refused)} (those of the file the trained "
            f"model takes)")


IMPORTED_MESH = "imported-mesh"  # a user's own meshes (petrov import --mesh): fields of any meaning


def check_kind(setup: EvalSetup, info: dict[str, Any], data_path: Path) -> None:
    """ValueError unless ``data_path`` holds the data the operator was trained on: a file of the same family,
    or, for a mesh operator, meshes imported with ``petrov import --mesh`` (or a run trained on such meshes
    on a generated mesh file) whose fields are as wide as the model's input and output: mesh files are read
    without their kind, so the model predicts on any mesh (``fields_fit``)."""
    if setup.kind is None:
        return
    trained, found = family(setup.kind), family(info["kind"])
    if trained == found:
        return
    if is_mesh_info(info) and setup.kind in MESH_RECIPES and IMPORTED_MESH in (info["kind"], setup.kind):
        fields_fit(setup, info, data_path)
        return
    also = " (or meshes of your own: petrov import --mesh)" if setup.kind in MESH_RECIPES else ""
    raise ValueError(
        f"{data_path} holds {info['kind']!r} data but the model was trained on {setup.kind!r} data; "
        f"evaluate it on a {trained} file{also}"
    )


def fields_fit(setup: EvalSetup, info: dict[str, Any], data_path: Path) -> None:
    """ValueError unless the mesh file's nodal fields x and y have the channels the mesh model takes and
    predicts (its config's ``in_channels`` / ``out_channels``, where it has them)."""
    config = getattr(setup.operator.model, "config", None)
    attrs = info.get("attrs", {})
    wanted = {f: getattr(config, f"{io}_channels", None) for f, io in (("x", "in"), ("y", "out"))}
    found = {f: attrs.get(f"{f}_channels") for f in ("x", "y")}
    wrong = [f for f in ("x", "y") if wanted[f] is not None and found[f] is not None and int(found[f]) != wanted[f]]
    if wrong:
        said = "; ".join(f"its {f} ({attrs.get(f'{f}_name', f)}) has {int(found[f])} channel(s), the model "
                         f"{'takes' if f == 'x' else 'predicts'} {wanted[f]}" for f in wrong)
        raise ValueError(f"{data_path} holds meshes whose fields do not fit the model (trained on {setup.kind!r} "
                         f"data): {said}; import meshes whose --x-field / --y-field have those channels")


def default_resolutions(setup: EvalSetup, info: dict[str, Any]) -> list[int]:
    d = setup.data_config
    if is_mesh_info(info):
        levels = list(info["levels"])
        wanted = list(d.eval_levels) if d is not None and d.eval_levels else levels
        # another mesh file (e.g. imported meshes) with none of the run's levels: its own
        return wanted if set(wanted) & set(levels) else levels
    if d is not None and d.eval_resolutions:
        return parse_resolutions(d.eval_resolutions)
    if d is not None and d.train_resolution:
        return parse_resolutions([d.train_resolution])
    return [int(info["native_resolution"])]



__all__ = ["ResolutionChoiceError", "allowed_resolutions", "check_kind", "check_resolutions", "coarse_resolution",
           "default_resolutions", "family", "fields_fit", "is_mesh_info", "model_refusals",
           "parse_resolutions", "resolution_label"]
