"""Importing a user's own triangle meshes with nodal fields into a petrov mesh dataset (``petrov import --mesh``).

Each source file is one sample:

- a file meshio reads (``.msh``, ``.vtu``, ``.vtk``, ``.xdmf``, ``.med``, ...): its points (2-D, or 3-D
  with a constant z), its ``triangle`` cells (``vertex`` and ``line`` cells, e.g. gmsh's boundary tags,
  are ignored; any other cell type is an error), and the point data named ``x_field`` and ``y_field``;
- a ``.npz`` archive with the arrays ``points`` (n, 2), ``triangles`` (t, 3) (0-based) and the nodal
  fields ``x_field``, ``y_field``, each (n,) or (n, c).

Triangles are put counter-clockwise (tools differ in their convention), then every sample passes
``checks.check_mesh`` (duplicate or unused nodes, degenerate or overlapping triangles, indices out of
range, array lengths, NaN/Inf), its boundary nodes are those of the edges used by one triangle and its
lumped-mass weights are computed. The model side expects coordinates in [0, 1]²: points outside are an
error unless ``rescale``, which maps the bounding box of all samples into the unit square (aspect ratio
kept; the attribute ``rescale`` records the offset and scale). The file (kind ``imported-mesh``, one
variant ``mesh``) is written to a temporary file with its content hash, the blocks going into it as a
generation's do (``petrov.datasets.write_path.fill``), and renamed when complete.
"""
from __future__ import annotations

import contextlib
import io
import json
import os
from pathlib import Path
from typing import Iterator, Sequence

import numpy as np

from ...common.files import atomic_path
from ...common.outputs import output_file
from ..write_path import fill
from .checks import check_arrays, check_mesh
from .geometry import orient_counterclockwise
from .recipes import ImportedMeshParams, get_mesh_recipe
from .sample import MeshSample, mesh_sample
from .storage import DEFAULT_CHUNK_SIZE, mesh_attrs, mesh_file_layout, sample_rows

IGNORED_CELLS = ("vertex", "line")  # lower-dimensional cells: boundary markers, not part of the mesh
UNIT_TOLERANCE = 1e-9


def _npz_mesh(path: Path, fields: Sequence[str], points_key: str, triangles_key: str) -> tuple:
    try:
        archive = np.load(path, allow_pickle=False)
    except (ValueError, OSError) as err:
        raise ValueError(f"{path}: cannot read the .npz file (corrupt or truncated?): {err}") from None
    with archive:
        missing = [k for k in (points_key, triangles_key, *fields) if k not in archive.files]
        if missing:
            raise KeyError(f"{path} has no array(s) {missing}; arrays present: {', '.join(sorted(archive.files))} "
                           f"(name the fields with --x-field/--y-field, the mesh with --points-key/--triangles-key)")
        return archive[points_key], archive[triangles_key], [archive[f] for f in fields]


def _meshio_mesh(path: Path, fields: Sequence[str]) -> tuple:
    import meshio  # only here: reading users' mesh files

    said = io.StringIO()  # meshio prints (blank lines, "Error: ..." before exiting): kept out of our output
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            mesh = meshio.read(path)
    except (Exception, SystemExit) as err:  # meshio calls sys.exit(1) when no reader of the format succeeds
        if isinstance(err, SystemExit):  # what meshio printed says why, e.g. "Couldn't read file F as vtu"
            why = " ".join(said.getvalue().split()).removeprefix("Error: ") or "no reader of its format succeeded"
        else:
            why = f"{type(err).__name__}: {err}"
        raise ValueError(f"{path}: meshio cannot read it ({why}); use a format meshio knows "
                         f"(.msh, .vtu, .xdmf, ...) or a .npz of points, triangles and fields") from None
    other = sorted({c.type for c in mesh.cells} - {"triangle", *IGNORED_CELLS})
    if other:
        raise ValueError(f"{path} has {', '.join(other)} cells; only linear triangle meshes can be imported "
                         f"(cell type 'triangle'): split or convert the other cells first")
    blocks = [np.asarray(c.data) for c in mesh.cells if c.type == "triangle"]
    if not blocks:
        raise ValueError(f"{path} has no triangle cells (cell types: {sorted({c.type for c in mesh.cells})})")
    points = np.asarray(mesh.points)
    if points.ndim == 2 and points.shape[1] == 3:
        if np.ptp(points[:, 2]) > 0:
            raise ValueError(f"{path}: the points are not in one plane z = const (z spans {np.ptp(points[:, 2]):.3g}); "
                             f"only planar 2-D meshes can be imported")
        points = points[:, :2]
    missing = [f for f in fields if f not in mesh.point_data]
    if missing:
        raise KeyError(f"{path} has no point data {missing}; point data present: "
                       f"{', '.join(sorted(mesh.point_data)) or 'none'}"
                       + (f" (cell data {sorted(mesh.cell_data)} cannot be used: nodal fields only)" if mesh.cell_data else ""))
    return points, np.concatenate(blocks), [np.asarray(mesh.point_data[f]) for f in fields]


def read_mesh_source(path: str | os.PathLike, x_field: str, y_field: str, *, points_key: str = "points",
                     triangles_key: str = "triangles") -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """points, triangles, x, y of one source file as they are stored there (nothing checked yet)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such mesh file: {path}")
    if path.stat().st_size == 0:
        raise ValueError(f"{path} is empty (0 bytes): no mesh in it; write the mesh into it again (a format meshio "
                         f"reads, .msh, .vtu, .xdmf, ..., or a .npz of points, triangles and fields)")
    fields = (x_field, y_field)
    if path.suffix.lower() == ".npz":
        points, triangles, (x, y) = _npz_mesh(path, fields, points_key, triangles_key)
    else:
        points, triangles, (x, y) = _meshio_mesh(path, fields)
    return points, triangles, x, y


def _checked(path: Path, number: int, x_field: str, y_field: str, points, triangles, x, y, offset,
             scale) -> MeshSample:
    name = f"sample {number} ({path})"
    for field, values in ((x_field, x), (y_field, y)):
        if np.ndim(values) not in (1, 2):
            raise ValueError(f"{name}: field {field!r} has shape {np.shape(values)}; nodal fields are (n,) or (n, c)")
    points, triangles = check_arrays(points, triangles, name)  # now the triangles can index the points
    points = (points - offset) / scale
    lo, hi = points.min(axis=0), points.max(axis=0)
    if (lo < -UNIT_TOLERANCE).any() or (hi > 1 + UNIT_TOLERANCE).any():
        raise ValueError(f"{name}: the points span [{lo[0]:.4g}, {hi[0]:.4g}] x [{lo[1]:.4g}, {hi[1]:.4g}], outside "
                         f"[0, 1]² where petrov's mesh models work; pass rescale=True (--rescale) to map the samples' "
                         f"common bounding box into the unit square (aspect ratio kept)")
    triangles = orient_counterclockwise(points, triangles)
    check_mesh(points, triangles, fields={x_field: x, y_field: y}, name=name)
    return mesh_sample(points, triangles, x, y).check(name=name)  # again: values beyond float32


def _channels(values: np.ndarray) -> int:
    return int(np.shape(values)[1]) if np.ndim(values) == 2 else 1


def import_meshes(
    output: str | os.PathLike,
    sources: Sequence[str | os.PathLike],
    *,
    x_field: str,
    y_field: str,
    points_key: str = "points",
    triangles_key: str = "triangles",
    rescale: bool = False,
    overwrite: bool = False,
    chunk_size: int | None = None,
    description: str | None = None,
    progress: bool = False,
) -> Path:
    """Write the meshes ``sources`` (one sample per file, module docstring) into the mesh dataset ``output``.

    ``x_field``/``y_field``: the nodal input and target (point data names, or .npz array names);
    ``points_key``/``triangles_key``: the .npz array names of the mesh. An existing ``output`` is a
    FileExistsError unless ``overwrite``. Returns ``Path(output)``.
    """
    if isinstance(sources, (str, os.PathLike)):
        sources = [sources]
    sources = [Path(s) for s in sources]
    if not sources:
        raise ValueError("give at least one mesh file to import")
    if chunk_size is not None and (isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1):
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    output = Path(output)
    if output.exists() and not overwrite:
        raise FileExistsError(f"{output} already exists; pass --overwrite (overwrite=True in Python) to replace it")
    seen: dict[tuple[int, int], Path] = {}
    for src in sources:
        if not src.is_file():
            raise FileNotFoundError(f"no such mesh file: {src}")
        if output.exists() and os.path.samefile(src, output):
            raise ValueError(f"the output {output} is also a source; choose another name")
        stat = src.stat()  # the same file under two names is given twice too
        if (stat.st_dev, stat.st_ino) in seen:
            other = seen[stat.st_dev, stat.st_ino]
            also = "" if other == src else f" (also as {other})"
            raise ValueError(f"{src} is given twice{also}; give each mesh file once (each file is one sample)")
        seen[stat.st_dev, stat.st_ino] = src
    output_file(output)  # the one rule for outputs: missing folders are created

    def read(path: Path):
        return read_mesh_source(path, x_field, y_field, points_key=points_key, triangles_key=triangles_key)

    first = read(sources[0])
    channels = (_channels(first[2]), _channels(first[3]))
    offset, scale = _bounding_box(sources, read) if rescale else (np.zeros(2), 1.0)
    recipe = get_mesh_recipe("imported-mesh")
    chunk = chunk_size or DEFAULT_CHUNK_SIZE
    attrs = mesh_attrs(recipe, ImportedMeshParams(), len(sources), None, chunk)
    attrs.update(x_name=x_field, y_name=y_field, x_channels=channels[0], y_channels=channels[1],
                 equation=description or attrs["equation"],
                 sources=json.dumps([str(s) for s in sources]),
                 rescale=json.dumps({"offset": offset.tolist(), "scale": scale} if rescale else None))

    def samples() -> Iterator[MeshSample]:
        for number, path in enumerate(sources):
            points, triangles, x, y = first if number == 0 else read(path)
            if (_channels(x), _channels(y)) != channels:
                raise ValueError(f"sample {number} ({path}): fields with {_channels(x)}/{_channels(y)} channels, "
                                 f"the first sample has {channels[0]}/{channels[1]}; every sample needs the same")
            yield _checked(path, number, x_field, y_field, points, triangles, x, y, offset, scale)

    def blocks(start: int, size: int, stack):
        made = samples()
        for lo in range(start, len(sources), size):
            hi = min(lo + size, len(sources))
            yield lo, hi, [sample_rows(attrs, {"mesh": next(made)}) for _ in range(lo, hi)]

    layout = mesh_file_layout(attrs, locking=False)  # the temp file's lock is atomic_path's; HDF5's would clash
    with atomic_path(output) as tmp:  # each writer its own temp file: the final file is always whole
        layout.create(tmp, attrs)
        fill(tmp, layout, blocks, len(sources), chunk, progress=progress, desc="import", shown=output, locking=False)
    return output


def _bounding_box(sources: Sequence[Path], read) -> tuple[np.ndarray, float]:
    """(offset, scale) mapping the common bounding box of all samples' finite points into [0, 1]²,
    aspect ratio kept (a first pass over the sources)."""
    lo, hi = np.full(2, np.inf), np.full(2, -np.inf)
    for path in sources:
        points = np.asarray(read(path)[0], dtype=np.float64)
        if points.ndim == 2 and points.shape[1] == 2:  # other shapes are reported by the checks
            finite = points[np.isfinite(points).all(axis=1)]
            if len(finite):
                lo, hi = np.minimum(lo, finite.min(axis=0)), np.maximum(hi, finite.max(axis=0))
    extent = float((hi - lo).max())
    if not (np.isfinite(extent) and extent > 0):
        raise ValueError("the meshes have no finite extent to rescale")
    return lo, extent


__all__ = ["import_meshes", "read_mesh_source"]
