"""HDF5 storage of samples on triangle meshes: ragged samples, written atomically and resumably.

File layout (h5py), one group per variant (``level0``, ``level1``, ``level2``, ``remesh``; ``mesh`` for
imported files), every sample's rows concatenated in sample order:

    /<variant>/points            float64 (N, 2)   node coordinates
    /<variant>/boundary          uint8   (N,)     1 on boundary nodes (u = 0 there)
    /<variant>/weights           float64 (N,)     lumped-mass weights, sum over a sample = |Omega|
    /<variant>/x                 float32 (N, c_in)   nodal input (darcy-mesh: a)
    /<variant>/y                 float32 (N, c_out)  nodal target (darcy-mesh: u)
    /<variant>/triangles         int32   (T, 3)   counter-clockwise, indices local to the sample
    /<variant>/node_offsets      int64   (n_samples + 1,)  sample i's nodes are rows [o[i], o[i+1])
    /<variant>/triangle_offsets  int64   (n_samples + 1,)
    /domain/vertices             float64 (V, 2)   the domain polygons (generated kinds only)
    /domain/loop                 int32   (V,)     0: the outer loop (counter-clockwise), k > 0: hole k (clockwise)
    /domain/vertex_offsets       int64   (n_samples + 1,)
    /domain/family               int16   (n_samples,)  index into the ``domain_families`` attribute

Ragged datasets are chunked along their rows (``CHUNK_ROWS``), so reading one sample touches one or two
chunks. Geometry is float64 (the nested levels' shared nodes and the weights stay exact); fields float32
as in the grid files. Attributes: ``format`` ("petrov-mesh-dataset"), ``format_version``, ``kind``,
``family``, ``equation``, ``params`` (JSON) and every parameter, ``seed``, ``n_samples``, ``n_complete``,
``levels`` (JSON list of the variants), ``x_name``/``y_name``, ``x_channels``/``y_channels``,
``solver_settings`` (JSON), ``domain_families`` (JSON), ``petrov_version``, ``created``, ``chunk_size``,
``content_hash``; a shard (``petrov.datasets.shards``) also ``shard_start``, ``shard_stop``,
``total_samples``. Each variant group records its ``spacing`` (and ``refinements``: r for ``level{r}``,
-1 for a remesh).

The content hash (``petrov.datasets.content_hash``) chains, per sample, every stored array of the sample
as stored: for each variant in ``levels`` order, then the domain group, its rows of each dataset in the
order above (the domain's ``family`` code last).

Files are written along the one write path (``petrov.datasets.write_path``; ``mesh_file_layout`` is this
format's part): ``FILE.partial`` chunk by chunk in index order, the rows, then the offsets, a flush, then
``n_complete``, renamed to ``FILE`` when every sample is written. Rerunning with the same kind,
parameters, seed and ``n_samples`` resumes after ``n_complete`` (rows beyond it, from a chunk cut short,
are dropped first); sample ``i`` depends only on ``(seed, i)``, so the file equals an uninterrupted run's
whatever the chunking, the number of workers or the shards it was merged from.
"""
from __future__ import annotations

import contextlib
import json
import os
from pathlib import Path
from typing import Any

import h5py
import numpy as np

from ..hdf5_files import FORMAT, MESH_FORMAT, file_attrs, file_format, open_h5, writing_h5
from ..storage import attribute_error, require_attrs, whole_number
from ..write_path import SHARD_KEYS, Layout, dataset_attrs, start_hash
from .domains import DOMAIN_FAMILIES, Domain
from .recipes import MESH_RECIPES, MeshRecipe
from .sample import MeshSample

MESH_FORMAT_VERSION = 1
IDENTITY = ("format_version", "kind", "params", "seed", "n_samples", *SHARD_KEYS)
CHUNK_ROWS = 16384  # rows per HDF5 chunk of a ragged dataset (256 KiB of float64 points)
DEFAULT_CHUNK_SIZE = 16  # samples per written chunk
OFFSETS = {"node": "node_offsets", "triangle": "triangle_offsets", "vertex": "vertex_offsets"}
DOMAIN_GROUP = "domain"
FAMILY = "family"  # the domain group's per-sample dataset: index into the domain_families attribute


def mesh_layout(x_channels: int, y_channels: int) -> dict[str, tuple[tuple[int, ...], str, str]]:
    """Each variant group's ragged datasets: name -> (shape after the row axis, dtype, row kind)."""
    return {
        "points": ((2,), "float64", "node"),
        "boundary": ((), "uint8", "node"),
        "weights": ((), "float64", "node"),
        "x": ((x_channels,), "float32", "node"),
        "y": ((y_channels,), "float32", "node"),
        "triangles": ((3,), "int32", "triangle"),
    }


DOMAIN_LAYOUT = {"vertices": ((2,), "float64", "vertex"), "loop": ((), "int32", "vertex")}


def mesh_groups(attrs: dict[str, Any]) -> list[tuple[str, dict]]:
    """The groups of a mesh file with the ragged datasets of each: the variants, then the domains (where
    the attributes name domain families)."""
    layout = mesh_layout(int(attrs["x_channels"]), int(attrs["y_channels"]))
    groups = [(variant, layout) for variant in json.loads(attrs["levels"])]
    return groups + ([(DOMAIN_GROUP, DOMAIN_LAYOUT)] if "domain_families" in attrs else [])


def _as_stored(layout: dict, arrays: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    return {name: np.asarray(arrays[name], dtype=dtype) for name, (_, dtype, _) in layout.items()}


def sample_rows(attrs: dict[str, Any], samples: dict[str, MeshSample], domain: Domain | None = None) -> dict:
    """One sample as a block of the write path holds it: ``{group: {dataset: rows}}`` in the stored dtypes
    (``samples``: ``{variant: MeshSample}``; ``domain`` for files that store domains)."""
    rows = {}
    for group, layout in mesh_groups(attrs):
        if group == DOMAIN_GROUP:
            loops = {"vertices": np.concatenate(domain.loops),
                     "loop": np.concatenate([np.full(len(loop), k) for k, loop in enumerate(domain.loops)])}
            families = json.loads(attrs["domain_families"])
            rows[group] = {**_as_stored(layout, loops), FAMILY: np.int16(families.index(domain.family))}
        else:
            s = samples[group]
            rows[group] = _as_stored(layout, {"points": s.points, "boundary": s.boundary, "weights": s.weights,
                                              "x": s.x, "y": s.y, "triangles": s.triangles})
    return rows


def mesh_attrs(recipe: MeshRecipe, params, n_samples: int, seed: int | None, chunk_size: int) -> dict[str, Any]:
    """The file attributes of a mesh dataset (module docstring); ``seed`` None for imported data."""
    specific: dict[str, Any] = {"levels": json.dumps(recipe.variants(params)), "x_channels": int(recipe.x_channels),
                                "y_channels": int(recipe.y_channels)}
    if seed is not None:
        specific["seed"] = int(seed)
    if recipe.generatable:
        specific["domain_families"] = json.dumps(DOMAIN_FAMILIES.names())
    return dataset_attrs(recipe, params, MESH_FORMAT, MESH_FORMAT_VERSION, n_samples, chunk_size, **specific)


# --- writing -------------------------------------------------------------------------------------


def _create_ragged(group: h5py.Group, layout: dict, n_samples: int) -> None:
    for kind in {row for _, _, row in layout.values()}:
        group.create_dataset(OFFSETS[kind], shape=(n_samples + 1,), dtype="int64", fillvalue=0)
    for name, (tail, dtype, _) in layout.items():
        group.create_dataset(name, shape=(0, *tail), maxshape=(None, *tail), dtype=dtype,
                             chunks=(CHUNK_ROWS, *tail))


def create_mesh_file(path: Path, attrs: dict[str, Any], variant_attrs: dict[str, dict] | None = None,
                     **options: Any) -> None:
    """An empty mesh dataset file at ``path`` with groups for ``attrs["levels"]`` (and a domain group if
    the attributes name domain families); ``options`` go to ``h5py.File`` (``locking=False`` for a
    temporary file of ``petrov.common.files.atomic_path``, which holds its own lock)."""
    n_samples = int(attrs["n_samples"])
    try:
        with writing_h5(path, "w", **options) as h5:
            for name, layout in mesh_groups(attrs):
                group = h5.create_group(name)
                _create_ragged(group, layout, n_samples)
                group.attrs.update((variant_attrs or {}).get(name, {}))
                if name == DOMAIN_GROUP:
                    group.create_dataset(FAMILY, shape=(n_samples,), dtype="int16", fillvalue=-1)
            h5.attrs.update(attrs)
            start_hash(h5)
    except BaseException:
        Path(path).unlink(missing_ok=True)  # nothing written yet: no partial file to keep
        raise


def _append(group: h5py.Group, layout: dict, lo: int, rows: list[dict[str, np.ndarray]]) -> None:
    """Append the rows of samples ``lo, lo + 1, ...`` and then set their offsets."""
    ends = {}
    for kind in {row for _, _, row in layout.values()}:
        names = [n for n, (_, _, row) in layout.items() if row == kind]
        start = int(group[OFFSETS[kind]][lo])
        sizes = [len(r[names[0]]) for r in rows]
        end = start + int(np.sum(sizes))
        for name in names:
            ds = group[name]
            ds.resize((end, *ds.shape[1:]))
            ds[start:end] = np.concatenate([r[name] for r in rows]).astype(ds.dtype, copy=False)
        ends[kind] = start + np.cumsum(sizes)
    for kind, offsets in ends.items():  # after the rows: the offsets claim them
        group[OFFSETS[kind]][lo + 1 : lo + 1 + len(rows)] = offsets


def _truncate(group: h5py.Group, layout: dict, n_complete: int) -> None:
    """Drop the rows after sample ``n_complete - 1`` (written by a chunk that was cut short)."""
    for name, (_, _, kind) in layout.items():
        ds = group[name]
        ds.resize((int(group[OFFSETS[kind]][n_complete]), *ds.shape[1:]))


def _writer(h5: h5py.File, n_complete: int, held: dict):
    groups = mesh_groups(file_attrs(h5))
    for name, layout in groups:
        _truncate(h5[name], layout, n_complete)

    def write(lo: int, rows: list[dict]) -> None:
        for name, layout in groups:
            _append(h5[name], layout, lo, [r[name] for r in rows])
            if name == DOMAIN_GROUP:
                h5[name][FAMILY][lo : lo + len(rows)] = [r[name][FAMILY] for r in rows]

    return write


def _reader(h5: h5py.File):
    groups = mesh_groups(file_attrs(h5))

    def read(lo: int, hi: int) -> list[dict]:
        rows: list[dict] = [{} for _ in range(lo, hi)]
        for name, layout in groups:
            group = h5[name]
            offsets = {kind: group[OFFSETS[kind]][lo : hi + 1] for kind in {row for _, _, row in layout.values()}}
            for r in rows:
                r[name] = {}
            for field, (_, _, kind) in layout.items():
                o = offsets[kind]
                block = group[field][int(o[0]) : int(o[-1])]
                for r, part in zip(rows, np.split(block, o[1:-1] - o[0])):
                    r[name][field] = part
            if name == DOMAIN_GROUP:
                for r, code in zip(rows, group[FAMILY][lo:hi]):
                    r[name][FAMILY] = code
        return rows

    return read


def mesh_file_layout(attrs: dict[str, Any], variant_attrs: dict[str, dict] | None = None, **options: Any) -> Layout:
    """The write path's view of a mesh file with these attributes (a block: a list of ``sample_rows``;
    ``variant_attrs``: each group's attributes; ``options`` to ``h5py.File`` when the file is made)."""
    groups = mesh_groups(attrs)

    def samples(rows: list[dict]):
        for r in rows:
            yield [r[name][field] for name, layout in groups for field in layout] + (
                [r[DOMAIN_GROUP][FAMILY]] if groups and groups[-1][0] == DOMAIN_GROUP else [])

    return Layout(identity=IDENTITY, create=lambda path, a: create_mesh_file(path, a, variant_attrs, **options),
                  writer=_writer, samples=samples, reader=_reader)


# --- reading -------------------------------------------------------------------------------------


def _json_attr(path: Path, attrs: dict[str, Any], name: str, kind: type) -> Any:
    """The JSON attribute ``name`` decoded, a ``kind`` (list or dict), else ``attribute_error``."""
    value = attrs[name]
    try:
        decoded = json.loads(value)
    except (TypeError, ValueError):
        decoded = None
    if not isinstance(decoded, kind):
        raise attribute_error(path, name, value, f"is not a JSON {'list' if kind is list else 'object'}")
    return decoded


def check_mesh_attrs(path: Path, h5: h5py.File, attrs: dict[str, Any]) -> None:
    """ValueError naming the first attribute of a mesh file (module docstring) that is missing or damaged:
    kind, the counts, channels, the JSON ones (``levels``, whose groups must exist, ``domain_families``,
    ``params``, ``solver_settings``)."""
    require_attrs(path, attrs, ("kind", "n_samples", "n_complete", "levels", "x_channels", "y_channels"))
    if attrs["kind"] not in MESH_RECIPES:
        raise attribute_error(path, "kind", attrs["kind"],
                              f"is not a mesh dataset kind ({', '.join(MESH_RECIPES.names())})")
    n = whole_number(path, "n_samples", attrs["n_samples"])
    if whole_number(path, "n_complete", attrs["n_complete"]) > n:
        raise attribute_error(path, "n_complete", attrs["n_complete"], f"is more than n_samples = {n}")
    for name in ("x_channels", "y_channels"):
        whole_number(path, name, attrs[name], minimum=1)
    levels = _json_attr(path, attrs, "levels", list)
    if not levels or not all(isinstance(v, str) and isinstance(h5.get(v), h5py.Group) for v in levels):
        raise attribute_error(path, "levels", attrs["levels"], f"does not list the file's mesh groups "
                              f"({', '.join(k for k in h5 if k != DOMAIN_GROUP) or 'none'})")
    for name, kind in (("domain_families", list), ("params", dict), ("solver_settings", dict)):
        if name in attrs:
            _json_attr(path, attrs, name, kind)


def open_mesh_h5(path: str | os.PathLike) -> h5py.File:
    """Open a mesh dataset file (complete or ``.partial``); ValueError if it is another kind of file or
    its attributes are missing or damaged ([`check_mesh_attrs`][])."""
    path = Path(path)
    h5 = open_h5(path)
    try:
        fmt = file_format(h5)
        if fmt != MESH_FORMAT:
            hint = " (a grid dataset: open it with petrov.datasets.open_dataset)" if fmt == FORMAT else ""
            raise ValueError(f"{path} is not a petrov mesh dataset (format {fmt!r}, expected {MESH_FORMAT!r}){hint}")
        check_mesh_attrs(path, h5, file_attrs(h5))
    except BaseException:
        h5.close()
        raise
    return h5


def is_mesh_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HDF5 file holding a petrov mesh dataset."""
    path = Path(path)
    if not path.is_file() or not h5py.is_hdf5(path):
        return False
    with contextlib.suppress(OSError), h5py.File(path, "r") as h5:
        return file_format(h5) == MESH_FORMAT
    return False


def read_offsets(group: h5py.Group, n: int) -> dict[str, np.ndarray]:
    """The first ``n + 1`` node and triangle offsets of a variant group (int64)."""
    return {kind: np.asarray(group[OFFSETS[kind]][: n + 1]) for kind in ("node", "triangle")}


def read_sample(group: h5py.Group | dict, index: int, offsets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sample ``index`` of a variant group (or of its arrays in memory, [`read_rows`][]): points,
    boundary (bool), weights, x, y, triangles (int64)."""
    lo, hi = int(offsets["node"][index]), int(offsets["node"][index + 1])
    t_lo, t_hi = int(offsets["triangle"][index]), int(offsets["triangle"][index + 1])
    return {
        "points": group["points"][lo:hi],
        "boundary": group["boundary"][lo:hi].astype(bool),
        "weights": group["weights"][lo:hi],
        "x": group["x"][lo:hi],
        "y": group["y"][lo:hi],
        "triangles": group["triangles"][t_lo:t_hi].astype(np.int64),
    }


def read_rows(group: h5py.Group, offsets: dict[str, np.ndarray], first: int, stop: int
              ) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """Samples ``first .. stop - 1`` of a variant group read whole, one read per array: the arrays and
    the offsets into them (``read_sample(arrays, index, offsets)`` then reads sample ``index`` from memory)."""
    rows = {kind: (int(offsets[kind][first]), int(offsets[kind][stop])) for kind in ("node", "triangle")}
    arrays = {name: group[name][slice(*rows["triangle" if name == "triangles" else "node"])]
              for name in ("points", "boundary", "weights", "x", "y", "triangles")}
    return arrays, {kind: offsets[kind] - rows[kind][0] for kind in rows}


def read_domain(h5: h5py.File, index: int) -> Domain:
    """The domain polygons of sample ``index`` (generated files only)."""
    if DOMAIN_GROUP not in h5:
        raise ValueError(f"{h5.filename} stores no domains (imported meshes)")
    group = h5[DOMAIN_GROUP]
    lo, hi = (int(v) for v in group[OFFSETS["vertex"]][index : index + 2])
    vertices, loop = group["vertices"][lo:hi], group["loop"][lo:hi]
    loops = [vertices[loop == k] for k in range(int(loop.max()) + 1)]
    family = json.loads(h5.attrs["domain_families"])[int(group[FAMILY][index])]
    return Domain(family, loops[0], tuple(loops[1:]))


def mesh_info(path: str | os.PathLike) -> dict[str, Any]:
    """What a mesh dataset holds: kind, sample counts, variants with node/triangle counts, attributes."""
    with open_mesh_h5(path) as h5:
        attrs = file_attrs(h5)
        n = int(attrs["n_complete"])
        levels = {}
        for variant in json.loads(attrs["levels"]):
            offsets = read_offsets(h5[variant], n)
            nodes, triangles = np.diff(offsets["node"]), np.diff(offsets["triangle"])
            stats = lambda v: {"min": int(v.min()), "mean": float(v.mean()), "max": int(v.max())} if n else {}
            levels[variant] = {"nodes": stats(nodes), "triangles": stats(triangles), **file_attrs(h5[variant])}
        families = {}
        if DOMAIN_GROUP in h5 and n:
            names = json.loads(attrs["domain_families"])
            codes, counts = np.unique(h5[DOMAIN_GROUP][FAMILY][:n], return_counts=True)
            families = {names[c]: int(k) for c, k in zip(codes, counts)}
        return {
            "path": str(path), "source": MESH_FORMAT, "layout": "mesh", "kind": attrs["kind"],
            "n_samples": int(attrs["n_samples"]), "n_complete": n, "complete": n >= int(attrs["n_samples"]),
            "levels": levels, "domain_families": families, "attrs": attrs,
        }


__all__ = ["CHUNK_ROWS", "IDENTITY", "MESH_FORMAT", "MESH_FORMAT_VERSION", "check_mesh_attrs", "create_mesh_file",
           "is_mesh_file", "mesh_attrs", "mesh_file_layout", "mesh_groups", "mesh_info", "mesh_layout", "open_mesh_h5",
           "read_domain", "read_offsets", "read_rows", "read_sample", "sample_rows"]
