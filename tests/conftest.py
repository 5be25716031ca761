"""Shared test fixtures, the ``cuda`` marker's rule (such tests are skipped where torch sees no GPU) and the
order of the tests (the README's test first)."""
from types import SimpleNamespace
from typing import NamedTuple

import h5py
import numpy as np
import pytest
import scipy.io
import torch


def pytest_configure(config):
    # pytest-xdist's --dist loadscope hands out the test files with the most tests first unless told
    # --no-loadscope-reorder: the README's file, two tests, went last and its test of several minutes ran
    # alone at the end of `make test`.  The order below is the one the workers take.
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


def pytest_collection_modifyitems(config, items):
    # The README's test first (a stable sort: the others keep their order): one test of several minutes, a
    # third of the fast suite, which under pytest-xdist (make test) then runs on one worker while the other
    # takes the rest, instead of starting last and running alone.
    items.sort(key=lambda item: item.path.name != "test_readme.py")
    if torch.cuda.is_available():
        return
    skip = pytest.mark.skip(reason="needs a CUDA device (torch.cuda.is_available() is False)")
    for item in items:
        if "cuda" in item.keywords:
            item.add_marker(skip)


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.cuda)]


@pytest.fixture
def eager_compile(monkeypatch):
    """``eager_compile(mode)``: the run's ``run.compile`` resolved to ``mode`` on the CPU, compiled with dynamo's
    eager backend (the graph capture and the wrapping without code generation: the compiled code paths, cuda-graphs'
    static shapes included, in seconds)."""
    from petrov.train import compilation, trainer as trainer_module

    def use(mode: str) -> None:
        monkeypatch.setattr(compilation, "resolve_compile", lambda setting, device, point_data=False,
                            distributed=False: mode)
        monkeypatch.setattr(compilation, "compile_options", lambda m: {"backend": "eager"})
        monkeypatch.setattr(trainer_module, "resolve_compile", compilation.resolve_compile)

    return use


@pytest.fixture(params=DEVICES)
def device(request):
    """Each device a numerical test should hold on: the CPU always, CUDA where there is one (with TF32
    off for the test, so float32 products are float32 products there too)."""
    flags = (torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32)
    torch.backends.cuda.matmul.allow_tf32 = torch.backends.cudnn.allow_tf32 = False
    try:
        yield torch.device(request.param)
    finally:
        torch.backends.cuda.matmul.allow_tf32, torch.backends.cudnn.allow_tf32 = flags


def write_v5(path, arrays):
    scipy.io.savemat(path, arrays)  # MATLAB 5 format, arrays in MATLAB index order
    return path


def write_v73(path, arrays):
    """What MATLAB's save -v7.3 produces, as far as a reader sees it: an HDF5 file after a 512-byte header
    block, each variable an HDF5 dataset whose axes are reversed (column-major storage)."""
    with h5py.File(path, "w", userblock_size=512) as h5:
        for name, value in arrays.items():
            h5.create_dataset(name, data=np.asarray(value).T)
            h5[name].attrs["MATLAB_class"] = np.bytes_("double")
    header = b"MATLAB 7.3 MAT-file, Platform: GLNXA64, Created on: Mon Jan  1 00:00:00 2024 HDF5 schema 1.00 ."
    with open(path, "r+b") as fh:
        fh.write(header.ljust(116) + b"\x00" * 8 + b"\x00\x02IM")
    return path


@pytest.fixture
def mat_writers():
    """``(write_v5, write_v73)``: ``writer(path, {name: array}) -> path``, arrays in MATLAB index order."""
    return write_v5, write_v73


# ---- small triangulated domains for the point-set tests ------------------------------------------

class Mesh(NamedTuple):
    """``points (n, 2)``, ``triangles (t, 3)``, lumped-mass ``weights (n,)`` = Σ_{T∋j} |T|/3 and
    ``boundary (n,)`` (nodes on an edge that belongs to one triangle only), numpy float64/int64/bool."""

    points: np.ndarray
    triangles: np.ndarray
    weights: np.ndarray
    boundary: np.ndarray


def finish_mesh(points: np.ndarray, triangles: np.ndarray) -> Mesh:
    p = points[triangles]  # (t, 3, 2)
    e1, e2 = p[:, 1] - p[:, 0], p[:, 2] - p[:, 0]
    area = 0.5 * np.abs(e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0])
    assert area.min() > 1e-12, "degenerate triangle"
    weights = np.zeros(len(points))
    for corner in range(3):
        np.add.at(weights, triangles[:, corner], area / 3)
    edges = np.sort(np.concatenate([triangles[:, [0, 1]], triangles[:, [1, 2]], triangles[:, [2, 0]]]), axis=1)
    unique, count = np.unique(edges, axis=0, return_counts=True)
    boundary = np.zeros(len(points), dtype=bool)
    boundary[unique[count == 1].ravel()] = True
    return Mesh(points, triangles.astype(np.int64), weights, boundary)


def grid_mesh(k: int, notch: float = 1.0) -> Mesh:
    """The node grid (i, j)/k of [0, 1]² minus the open square (notch, 1]² (an L-shape for notch < 1;
    notch * k must be an integer), each kept cell split into two triangles; nodes in row-major
    (i, j) order, as ``grid_to_points`` orders a grid."""
    corner = round(notch * k)
    assert abs(corner - notch * k) < 1e-9, "notch * k must be an integer"
    i, j = np.meshgrid(np.arange(k + 1), np.arange(k + 1), indexing="ij")
    keep = ~((i > corner) & (j > corner))
    ids = np.full((k + 1, k + 1), -1)
    ids[keep] = np.arange(int(keep.sum()))
    points = np.stack([i[keep], j[keep]], axis=-1) / k
    ci, cj = (a.ravel() for a in np.meshgrid(np.arange(k), np.arange(k), indexing="ij"))
    cell = ~((ci + 1 > corner) & (cj + 1 > corner))  # cells in the notch are dropped
    ci, cj = ci[cell], cj[cell]
    a, b, c, d = ids[ci, cj], ids[ci + 1, cj], ids[ci + 1, cj + 1], ids[ci, cj + 1]
    triangles = np.concatenate([np.stack([a, b, c], -1), np.stack([a, c, d], -1)])
    return finish_mesh(points.astype(np.float64), triangles)


def jittered_mesh(k: int, notch: float = 1.0, seed: int = 0, jitter: float = 0.25) -> Mesh:
    """The nodes of ``grid_mesh(k, notch)`` with the interior ones moved by up to ``jitter / k`` in
    each direction, Delaunay-triangulated (scipy), the triangles in the notch dropped; checked to
    cover exactly the domain."""
    from scipy.spatial import Delaunay

    base = grid_mesh(k, notch)
    rng = np.random.default_rng(seed)
    points = base.points.copy()
    inner = ~base.boundary
    points[inner] += rng.uniform(-jitter / k, jitter / k, size=(int(inner.sum()), 2))
    triangles = Delaunay(points).simplices
    centre = points[triangles].mean(axis=1)
    triangles = triangles[~((centre[:, 0] > notch) & (centre[:, 1] > notch))]
    mesh = finish_mesh(points, triangles)
    assert abs(mesh.weights.sum() - (1 - (1 - notch) ** 2)) < 1e-12, "the triangulation does not fit the domain"
    assert np.array_equal(mesh.boundary, base.boundary)
    return mesh


@pytest.fixture
def meshes():
    """``SimpleNamespace(grid=grid_mesh, jittered=jittered_mesh, Mesh=Mesh)``: small triangulated domains."""
    return SimpleNamespace(grid=grid_mesh, jittered=jittered_mesh, Mesh=Mesh)


def write_pdebench_darcy(path, n_samples: int, n: int = 128, seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """A small file with the layout of PDEBench's 2-D Darcy files: nu (N, n, n), tensor (N, 1, n, n),
    x-coordinate/y-coordinate the n cell centres of [0, 1]."""
    rng = np.random.default_rng(seed)
    centres = (np.arange(n) + 0.5) / n
    nu = np.where(rng.standard_normal((n_samples, n, n)) > 0, 1.0, 0.1).astype(np.float32)
    xx, yy = np.meshgrid(centres, centres, indexing="ij")
    bump = np.sin(np.pi * xx) * np.sin(np.pi * yy)
    tensor = (bump[None] * (1 + 0.1 * rng.standard_normal((n_samples, 1, 1)))).astype(np.float32)[:, None]
    with h5py.File(path, "w") as h5:
        h5["nu"], h5["tensor"] = nu, tensor
        h5["x-coordinate"], h5["y-coordinate"] = centres.astype(np.float32), centres.astype(np.float32)
        h5["t-coordinate"] = np.zeros(2, np.float32)
    return nu, tensor[:, 0]


@pytest.fixture
def pdebench_darcy():
    """``write(path, n_samples, n=128)``: a small file with the layout of PDEBench's 2-D Darcy files."""
    return write_pdebench_darcy


TINY_FNO1D = """
[data]
path = "b.h5"
train_resolution = 32
eval_resolutions = [32, 64]
n_train = 8
n_val = 4
n_test = 4
[model]
name = "fno1d"
[model.options]
width = 8
modes = 4
n_layers = 1
[optim]
epochs = {epochs}
batch_size = 4
[run]
progress = false
device = "cpu"
"""


@pytest.fixture(scope="session")
def tiny_fno1d_toml():
    """``(epochs) -> TOML`` of a tiny ``fno1d`` run on ``b.h5`` (Burgers at 64 points): trained at 32 on 8
    samples, validated on 4, tested on 4 at 32 and 64, on the CPU."""
    return lambda epochs: TINY_FNO1D.format(epochs=epochs)


@pytest.fixture
def here(world, tmp_path, monkeypatch):
    """A copy of the test module's ``world`` (a folder of files) as the working directory."""
    import shutil

    for item in world.iterdir():
        (shutil.copytree if item.is_dir() else shutil.copy2)(item, tmp_path / item.name)
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.fixture
def cli(capsys):
    """``cli(*args) -> (exit code, stdout, stderr)`` of ``petrov ARGS``, in this process."""
    from petrov.cli.main import main

    def run(*args):
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return code, out, err

    return run

