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
``solver_settings`` (JSON), ``domain_families`` (JSON), ``petrov_version``, ``created``, ``chunk_size``;
each variant group records its ``spacing`` (and ``refinements``: r for ``level{r}``, -1 for a remesh).

Generation writes ``FILE.partial`` chunk by chunk in index order: the rows, then the offsets, a flush,
then ``n_complete``, and renames it to ``FILE`` when every sample is written. Rerunning with the same
kind, parameters, seed and ``n_samples`` resumes after ``n_complete`` (rows beyond it, from a chunk cut
short, are dropped first); sample ``i`` depends only on ``(seed, i)``, so the file equals an
uninterrupted run's whatever the chunking or the number of workers.
"""
from __future__ import annotations

import collections
import contextlib
import datetime
import json
import logging
import os
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

import h5py
import numpy as np

from ...common.config import asdict
from ...common.files import exclusive_lock, replace_synced
from ...common.outputs import check_outputs
from ...common.progress import progress_bar
from ...common.version import petrov_version
from ..darcy import darcy_worker_pool
from ..storage import (
    MESH_FORMAT,
    already_generated,
    check_disk,
    check_generation_args,
    check_output_dir,
    claim_partial,
    file_attrs,
    open_h5,
    partial_path,
)
from .domains import DOMAIN_FAMILIES, Domain
from .recipes import MeshRecipe, get_mesh_recipe
from .sample import MeshSample

MESH_FORMAT_VERSION = 1
_IDENTITY = ("format_version", "kind", "params", "seed", "n_samples")
CHUNK_ROWS = 16384  # rows per HDF5 chunk of a ragged dataset (256 KiB of float64 points)
DEFAULT_CHUNK_SIZE = 16  # samples per written chunk
GENERATION_ADVICE = "the generator made an invalid mesh: please report it with the kind, parameters, seed and index"
OFFSETS = {"node": "node_offsets", "triangle": "triangle_offsets", "vertex": "vertex_offsets"}
DOMAIN_GROUP = "domain"

log = logging.getLogger(__name__)


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


def _sample_rows(sample: MeshSample) -> dict[str, np.ndarray]:
    return {"points": sample.points, "boundary": sample.boundary.astype(np.uint8), "weights": sample.weights,
            "x": sample.x, "y": sample.y, "triangles": sample.triangles}


def _domain_rows(domain: Domain) -> dict[str, np.ndarray]:
    return {"vertices": np.concatenate(domain.loops),
            "loop": np.concatenate([np.full(len(loop), k, np.int32) for k, loop in enumerate(domain.loops)])}


# --- writing -------------------------------------------------------------------------------------


def _create_ragged(group: h5py.Group, layout: dict, n_samples: int) -> None:
    for kind in {row for _, _, row in layout.values()}:
        group.create_dataset(OFFSETS[kind], shape=(n_samples + 1,), dtype="int64", fillvalue=0)
    for name, (tail, dtype, _) in layout.items():
        group.create_dataset(name, shape=(0, *tail), maxshape=(None, *tail), dtype=dtype,
                             chunks=(CHUNK_ROWS, *tail))


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


def mesh_attrs(recipe: MeshRecipe, params, n_samples: int, seed: int | None, chunk_size: int) -> dict[str, Any]:
    """The file attributes of a mesh dataset (module docstring); ``seed`` None for imported data."""
    plain = asdict(params)
    attrs: dict[str, Any] = {
        "format": MESH_FORMAT,
        "format_version": MESH_FORMAT_VERSION,
        "kind": recipe.name,
        "family": recipe.family,
        "equation": recipe.description,
        "params": json.dumps(plain, sort_keys=True),
        "n_samples": int(n_samples),
        "n_complete": 0,
        "levels": json.dumps(recipe.variants(params)),
        "x_name": recipe.x_name,
        "y_name": recipe.y_name,
        "x_channels": int(recipe.x_channels),
        "y_channels": int(recipe.y_channels),
        "solver_settings": json.dumps(recipe.solver_settings(params), sort_keys=True),
        "petrov_version": petrov_version(),
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "chunk_size": int(chunk_size),
    }
    if seed is not None:
        attrs["seed"] = int(seed)
    if recipe.generatable:
        attrs["domain_families"] = json.dumps(DOMAIN_FAMILIES.names())
    clash = sorted(attrs.keys() & plain.keys())
    if clash:
        raise ValueError(f"{recipe.name} parameters reuse file attribute names {clash}; rename them")
    attrs.update(plain)
    return attrs


def create_mesh_file(path: Path, attrs: dict[str, Any], variant_attrs: dict[str, dict] | None = None,
                     **options: Any) -> None:
    """An empty mesh dataset file at ``path`` with groups for ``attrs["levels"]`` (and a domain group if
    the attributes name domain families); ``options`` go to ``h5py.File`` (``locking=False`` for a
    temporary file of [`atomic_path`][petrov.common.files.atomic_path], which holds its own lock)."""
    n_samples = int(attrs["n_samples"])
    layout = mesh_layout(int(attrs["x_channels"]), int(attrs["y_channels"]))
    with h5py.File(path, "w", **options) as h5:
        for variant in json.loads(attrs["levels"]):
            group = h5.create_group(variant)
            _create_ragged(group, layout, n_samples)
            group.attrs.update((variant_attrs or {}).get(variant, {}))
        if "domain_families" in attrs:
            group = h5.create_group(DOMAIN_GROUP)
            _create_ragged(group, DOMAIN_LAYOUT, n_samples)
            group.create_dataset("family", shape=(n_samples,), dtype="int16", fillvalue=-1)
        h5.attrs.update(attrs)


def write_samples(h5: h5py.File, lo: int, samples: list[dict[str, MeshSample]],
                  domains: list[Domain] | None = None) -> None:
    """Write samples ``lo .. lo + len(samples) - 1`` (each ``{variant: MeshSample}``), then flush and set
    ``n_complete``: the data reach the file before the counter that claims them."""
    layout = mesh_layout(int(h5.attrs["x_channels"]), int(h5.attrs["y_channels"]))
    for variant in json.loads(h5.attrs["levels"]):
        _append(h5[variant], layout, lo, [_sample_rows(s[variant]) for s in samples])
    if domains is not None:
        group = h5[DOMAIN_GROUP]
        _append(group, DOMAIN_LAYOUT, lo, [_domain_rows(d) for d in domains])
        names = json.loads(h5.attrs["domain_families"])
        group["family"][lo : lo + len(domains)] = [names.index(d.family) for d in domains]
    h5.flush()
    h5.attrs["n_complete"] = lo + len(samples)
    h5.flush()


def _truncate_file(h5: h5py.File, n_complete: int) -> None:
    layout = mesh_layout(int(h5.attrs["x_channels"]), int(h5.attrs["y_channels"]))
    for variant in json.loads(h5.attrs["levels"]):
        _truncate(h5[variant], layout, n_complete)
    if DOMAIN_GROUP in h5:
        _truncate(h5[DOMAIN_GROUP], DOMAIN_LAYOUT, n_complete)


def _make_sample(kind: str, params, seed: int, index: int) -> tuple[Domain, dict[str, MeshSample]]:
    """One checked sample (runs in the worker processes too)."""
    domain, samples = get_mesh_recipe(kind).sample(params, seed, index)
    for variant, sample in samples.items():
        sample.check(name=f"{kind} sample {index} ({variant})", advice=GENERATION_ADVICE)
    return domain, samples


def _in_order(pool, fn: Callable, calls: Iterable[tuple], window: int) -> Iterator:
    """``fn(*args)`` for each of ``calls``, results in order; with a pool, at most ``window`` in flight."""
    if pool is None:
        for args in calls:
            yield fn(*args)
        return
    pending: collections.deque = collections.deque()
    try:
        for args in calls:
            pending.append(pool.submit(fn, *args))
            if len(pending) >= window:
                yield pending.popleft().result()
        while pending:
            yield pending.popleft().result()
    finally:
        for future in pending:  # interrupted: queued samples are not made
            future.cancel()


def _estimated_bytes(recipe: MeshRecipe, params, n_samples: int) -> int:
    """A generous estimate of the file size: hexagonal-lattice node counts (1.2 / h^2 on the unit square),
    33 bytes per node and two triangles of 12 bytes per node."""
    spacing = [attrs["spacing"] for attrs in recipe.variant_attrs(params).values()]
    nodes = sum(1.2 / s**2 for s in spacing) if spacing else 0.0
    return int(n_samples * nodes * (33 + 24))


def generate_mesh_dataset(
    kind: str,
    path: str | os.PathLike,
    n_samples: int,
    seed: int = 0,
    *,
    overwrite: bool = False,
    chunk_size: int | None = None,
    workers: int = 0,
    progress: bool = True,
    callback: Callable[[int, int], None] | None = None,
    **params: Any,
) -> Path:
    """Generate ``n_samples`` samples of the mesh kind ``kind`` (e.g. ``"darcy-mesh"``) into ``path``.

    As ``petrov.datasets.generate_dataset`` (which calls this for mesh kinds): ``params`` are the kind's
    parameters (unknown names are a ValueError listing the valid ones); an existing ``path`` needs
    ``overwrite``; ``path.partial`` of the same settings is resumed; one writer per path (a second is
    refused). ``workers`` > 0 makes samples in that many single-threaded processes (same file whatever
    the count); ``chunk_size`` samples (default 16) are written at a time, then ``callback(n_complete,
    n_samples)`` runs. Returns ``Path(path)``.
    """
    recipe = get_mesh_recipe(kind)
    if not recipe.generatable:
        recipe.validate(recipe.make_params(params))  # raises, saying how such files are made
    p = recipe.make_params(params)
    recipe.validate(p)
    check_generation_args(n_samples, seed, workers, chunk_size)
    path = Path(path)
    check_output_dir(path)
    check_disk(_estimated_bytes(recipe, p, n_samples), path.parent, "generate fewer samples or use a larger h")
    with exclusive_lock(path, what="generated"):
        if not overwrite and already_generated(path, mesh_attrs(recipe, p, n_samples, seed, chunk_size or 0),
                                               _IDENTITY):
            log.info(f"{path} already holds these {n_samples} samples; nothing to do")
            return path
        check_outputs(path.parent, "generate", [path.name], overwrite=overwrite, scope="file", flag="-o")
        return _generate_locked(recipe, p, path, n_samples, seed, overwrite, chunk_size, workers, progress, callback)


def _generate_locked(recipe: MeshRecipe, p, path: Path, n_samples: int, seed: int, overwrite: bool,
                     chunk_size: int | None, workers: int, progress: bool, callback) -> Path:
    tmp = partial_path(path)
    attrs = mesh_attrs(recipe, p, n_samples, seed, chunk_size or 0)
    old_chunk = claim_partial(path, attrs, overwrite, _IDENTITY)
    chunk_size = chunk_size or old_chunk or DEFAULT_CHUNK_SIZE
    attrs["chunk_size"] = int(chunk_size)
    if not tmp.exists():
        create_mesh_file(tmp, attrs, recipe.variant_attrs(p))

    with contextlib.ExitStack() as stack:
        h5 = stack.enter_context(h5py.File(tmp, "r+"))
        start = int(h5.attrs["n_complete"])
        _truncate_file(h5, start)
        pool = stack.enter_context(darcy_worker_pool(workers)) if workers else None
        log.debug("%s: samples %d..%d of %d%s", tmp, start, n_samples - 1, n_samples,
                  f" (resumed, {start} already written)" if start else "")
        results = _in_order(pool, _make_sample, ((recipe.name, p, seed, i) for i in range(start, n_samples)),
                            window=4 * workers)
        stack.callback(results.close)  # cancels the queued samples on an interruption
        bar = stack.enter_context(progress_bar(total=n_samples, initial=start, unit="sample", enabled=progress,
                                               desc=recipe.name))
        for lo in range(start, n_samples, chunk_size):
            made = [next(results) for _ in range(lo, min(lo + chunk_size, n_samples))]
            write_samples(h5, lo, [s for _, s in made], [d for d, _ in made])
            bar.update(len(made))
            if callback is not None:
                callback(lo + len(made), n_samples)
    replace_synced(tmp, path)
    return path


# --- reading -------------------------------------------------------------------------------------


def open_mesh_h5(path: str | os.PathLike) -> h5py.File:
    """Open a mesh dataset file (complete or ``.partial``); ValueError if it is another kind of file."""
    path = Path(path)
    h5 = open_h5(path)
    fmt = h5.attrs.get("format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt != MESH_FORMAT:
        h5.close()
        hint = " (a grid dataset: open it with petrov.datasets.open_dataset)" if fmt == "petrov-dataset" else ""
        raise ValueError(f"{path} is not a petrov mesh dataset (format {fmt!r}, expected {MESH_FORMAT!r}){hint}")
    return h5


def is_mesh_file(path: str | os.PathLike) -> bool:
    """Whether ``path`` is an HDF5 file holding a petrov mesh dataset."""
    path = Path(path)
    if not path.is_file() or not h5py.is_hdf5(path):
        return False
    with contextlib.suppress(OSError), h5py.File(path, "r") as h5:
        fmt = h5.attrs.get("format")
        return (fmt.decode() if isinstance(fmt, bytes) else fmt) == MESH_FORMAT
    return False


def read_offsets(group: h5py.Group, n: int) -> dict[str, np.ndarray]:
    """The first ``n + 1`` node and triangle offsets of a variant group (int64)."""
    return {kind: np.asarray(group[OFFSETS[kind]][: n + 1]) for kind in ("node", "triangle")}


def read_sample(group: h5py.Group, index: int, offsets: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Sample ``index`` of a variant group: points, boundary (bool), weights, x, y, triangles (int64)."""
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


def read_domain(h5: h5py.File, index: int) -> Domain:
    """The domain polygons of sample ``index`` (generated files only)."""
    if DOMAIN_GROUP not in h5:
        raise ValueError(f"{h5.filename} stores no domains (imported meshes)")
    group = h5[DOMAIN_GROUP]
    lo, hi = (int(v) for v in group[OFFSETS["vertex"]][index : index + 2])
    vertices, loop = group["vertices"][lo:hi], group["loop"][lo:hi]
    loops = [vertices[loop == k] for k in range(int(loop.max()) + 1)]
    family = json.loads(h5.attrs["domain_families"])[int(group["family"][index])]
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
            codes, counts = np.unique(h5[DOMAIN_GROUP]["family"][:n], return_counts=True)
            families = {names[c]: int(k) for c, k in zip(codes, counts)}
        return {
            "path": str(path), "source": MESH_FORMAT, "layout": "mesh", "kind": attrs["kind"],
            "n_samples": int(attrs["n_samples"]), "n_complete": n, "complete": n >= int(attrs["n_samples"]),
            "levels": levels, "domain_families": families, "attrs": attrs,
        }


__all__ = ["CHUNK_ROWS", "MESH_FORMAT", "MESH_FORMAT_VERSION", "create_mesh_file", "generate_mesh_dataset",
           "is_mesh_file", "mesh_attrs", "mesh_info", "mesh_layout", "open_mesh_h5", "read_domain", "read_offsets",
           "read_sample", "write_samples"]
