"""Point-set models (mesh_attention, mesh_latent, mesh_fno, mesh_transolver): padded batches, grids as meshes, errors.

Invariants: padding invariance (a padded batch gives on each sample's nodes what the sample alone
gives), permutation equivariance of the node order, exact zeros on boundary nodes and padding;
a uniform grid is one mesh among others (``latent2d`` with ``decoder="pointwise"`` and ``mesh_latent``,
``fno2d`` and ``mesh_fno`` compute the same numbers from the same state dict); checkpoints round-trip.
"""
from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from petrov.operators import build_model, list_mixers, load_model, model_config, save_model
from petrov.operators.blocks import SpectralDecoder
from petrov.grids.layout import grid_coordinates, grid_to_points, points_to_grid
from petrov.operators.models import point_set_models
from petrov.operators.p1_grid import p1_grid_interpolation, p1_to_grid
from petrov.grids.transfer import trapezoid_weights

DT = torch.float64
GRID = 8  # mesh_fno's grid in these tests
TINY = {
    "mesh_attention": dict(d_model=8, n_layers=2, n_heads=2, decoder_hidden=6),
    "mesh_latent": dict(d_model=8, n_layers=2, n_heads=2, latent_size=5, fine_width=4, decoder_hidden=6,
                        latent_modes=2, latent_kernel=3),
    "mesh_fno": dict(width=4, modes=3, n_layers=2, proj_hidden=8, grid_size=GRID),
    "mesh_transolver": dict(d_model=8, n_layers=2, n_heads=2, n_slices=4),
}


def field(pos: torch.Tensor) -> torch.Tensor:
    x, y = pos[..., 0], pos[..., 1]
    return torch.stack([torch.sin(math.pi * x) * torch.cos(2 * y) + x * y, 1 + x * x - y], dim=-1)


def sample(mesh) -> dict:
    """One mesh as a batch of one (float64), with its P1 grid interpolation for mesh_fno."""
    pos = torch.from_numpy(mesh.points)[None]
    index, bary = p1_grid_interpolation(mesh.points, mesh.triangles, GRID)
    return dict(x=field(pos), pos=pos, weights=torch.from_numpy(mesh.weights)[None],
                boundary=torch.from_numpy(mesh.boundary)[None], grid_index=index[None], grid_barycentric=bary[None])


def pad(samples: list[dict], extra: int = 4) -> dict:
    """Samples of different sizes padded to one length with arbitrary finite values, weight 0."""
    n = max(s["x"].shape[1] for s in samples) + extra
    g = torch.Generator().manual_seed(11)
    b = len(samples)
    out = dict(x=50 * torch.randn(b, n, 2, generator=g, dtype=DT), pos=torch.rand(b, n, 2, generator=g, dtype=DT),
               weights=torch.zeros(b, n, dtype=DT), mask=torch.zeros(b, n, dtype=torch.bool),
               boundary=torch.rand(b, n, generator=g) < 0.5,
               grid_index=torch.cat([s["grid_index"] for s in samples]),
               grid_barycentric=torch.cat([s["grid_barycentric"] for s in samples]))
    for i, s in enumerate(samples):
        k = s["x"].shape[1]
        for key in ("x", "pos", "weights", "boundary"):
            out[key][i, :k] = s[key][0]
        out["mask"][i, :k] = True
    return out


def inputs(name: str, batch: dict) -> tuple[tuple, dict]:
    args = (batch["x"], batch["pos"], batch["weights"])
    kwargs = {k: batch[k] for k in ("mask", "boundary") if k in batch}
    if name == "mesh_fno":
        kwargs.update(grid_index=batch["grid_index"], grid_barycentric=batch["grid_barycentric"])
    return args, kwargs


def model(name: str, **extra):
    torch.manual_seed(0)
    return build_model(name, **dict(TINY.get(name, {}), in_channels=2, **extra)).double().eval()


def test_the_point_set_models_are_registered_as_such():
    assert set(point_set_models()) == set(TINY)


@pytest.mark.parametrize("name", sorted(TINY))
def test_padded_batch_equals_each_sample_alone_with_zeros_on_boundary_and_padding(name, meshes):
    m = model(name)
    samples = [sample(meshes.grid(6, notch=0.5)), sample(meshes.jittered(9, seed=2))]
    batch = pad(samples)
    with torch.no_grad():
        out = m(*inputs(name, batch)[0], **inputs(name, batch)[1])
        assert out.shape == (2, batch["x"].shape[1], 1)
        for i, s in enumerate(samples):
            args, kwargs = inputs(name, s)
            alone = m(*args, **kwargs)[0]
            k = s["x"].shape[1]
            torch.testing.assert_close(out[i, :k], alone, rtol=1e-12, atol=1e-13)
            boundary = s["boundary"][0]
            assert torch.equal(alone[boundary], torch.zeros_like(alone[boundary]))
            assert bool((alone[~boundary] != 0).all())
        assert torch.equal(out[~batch["mask"]], torch.zeros_like(out[~batch["mask"]]))
        free = model(name, dirichlet=False)(*inputs(name, batch)[0], **inputs(name, batch)[1])
        assert bool((free[batch["mask"] & batch["boundary"]] != 0).all())


@pytest.mark.parametrize("name", sorted(TINY))
def test_node_order_does_not_matter(name, meshes):
    m = model(name)
    s = sample(meshes.jittered(8, notch=0.75, seed=3))
    n = s["x"].shape[1]
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(0))
    shuffled = {k: s[k][:, perm] for k in ("x", "pos", "weights", "boundary")}
    inverse = torch.argsort(perm)  # node j of the mesh is node inverse[j] of the shuffled one
    shuffled.update(grid_index=inverse[s["grid_index"]], grid_barycentric=s["grid_barycentric"])
    with torch.no_grad():
        out = m(*inputs(name, s)[0], **inputs(name, s)[1])
        torch.testing.assert_close(m(*inputs(name, shuffled)[0], **inputs(name, shuffled)[1]), out[:, perm],
                                   rtol=1e-12, atol=1e-13)


@pytest.mark.parametrize("norm", ["column", "layer", None])
@pytest.mark.parametrize("mixer", list_mixers())
@pytest.mark.parametrize("name", ["mesh_attention", "mesh_latent"])
def test_every_mixer_and_norm_plugs_in_and_trains(name, mixer, norm, meshes):
    torch.manual_seed(0)
    m = build_model(name, **dict(TINY[name], in_channels=2, mixer=mixer, norm=norm))
    batch = {k: (v.float() if v.is_floating_point() else v) for k, v in pad([sample(meshes.grid(4)),
                                                                            sample(meshes.grid(6, 0.5))]).items()}
    out = m(*inputs(name, batch)[0], **inputs(name, batch)[1])
    assert torch.isfinite(out).all()
    out.square().mean().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in m.parameters() if p.requires_grad)


# ---- a uniform grid is one mesh among others ----------------------------------------------------

def grid_as_points(n: int, x_grid: torch.Tensor) -> dict:
    """A node grid n x n given as a point set: nodes in row-major order, product trapezoid weights,
    the edge nodes as boundary."""
    pos = grid_to_points(grid_coordinates((n, n), dtype=DT)[None])
    w = (trapezoid_weights(n)[:, None] * trapezoid_weights(n)[None]).reshape(1, -1)
    edge = torch.zeros(n, n, dtype=torch.bool)
    edge[0], edge[-1], edge[:, 0], edge[:, -1] = True, True, True, True
    return dict(x=grid_to_points(x_grid), pos=pos, weights=w, boundary=edge.reshape(1, -1))


@pytest.mark.parametrize("n", [6, 13])  # 13: not nested with the latent grid of 6
@pytest.mark.parametrize("mixer", list_mixers())
def test_latent2d_with_the_pointwise_decoder_is_mesh_latent_on_a_grid(mixer, n):
    common = dict(d_model=8, n_layers=2, n_heads=2, latent_size=6, fine_width=4, decoder_hidden=6,
                  latent_modes=2, latent_kernel=3, mixer=mixer)
    torch.manual_seed(0)
    grid_model = build_model("latent2d", **dict(common, decoder="pointwise")).double().eval()
    with torch.no_grad():  # away from the initialization
        for p in grid_model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    # latent2d has no boundary-distance input: the mesh counterpart is the one without it
    mesh_model = build_model("mesh_latent", **common, boundary_features=False).double().eval()
    mesh_model.load_state_dict(grid_model.state_dict())
    x = field(grid_coordinates((n, n), dtype=DT))[None, ..., :1]
    points = grid_as_points(n, x)
    with torch.no_grad():
        expected = grid_model(x)
        got = mesh_model(points["x"], points["pos"], points["weights"], boundary=points["boundary"])
    torch.testing.assert_close(points_to_grid(got, (n, n)), expected, rtol=1e-11, atol=1e-12)


def test_the_mesh_path_converges_to_the_grid_path_on_a_triangulated_grid(meshes):
    """A uniform grid stored as a mesh (each cell cut along one diagonal, lumped-mass weights, as
    ``petrov import --mesh`` stores it) differs from the grid only in the weights of its 4 corners
    (h²/3 and h²/6 where the trapezoid rule has h²/4): with those set to the trapezoid values the mesh
    path computes the grid path's numbers; with the lumped weights the two differ by O(h²)."""
    common = dict(mixer="galerkin", norm="layer", d_model=8, n_layers=2, n_heads=2, dim_feedforward=16,
                  latent_size=6, latent_kernel=3, fine_width=4, decoder_hidden=6, decoder_layers=2)
    torch.manual_seed(0)
    grid_model = build_model("latent2d", **dict(common, decoder="pointwise")).double().eval()
    with torch.no_grad():
        for p in grid_model.parameters():
            p.add_(0.1 * torch.randn_like(p))
    mesh_model = build_model("mesh_latent", **common, boundary_features=False).double().eval()
    mesh_model.load_state_dict(grid_model.state_dict())
    gaps = []
    for k in (10, 20, 40):
        n = k + 1
        mesh = meshes.grid(k)
        pos = torch.from_numpy(mesh.points)[None]
        x = field(pos)[..., :1]
        lumped = torch.from_numpy(mesh.weights)[None]
        trapezoid = (trapezoid_weights(n)[:, None] * trapezoid_weights(n)[None]).reshape(1, -1)
        differ = (lumped - trapezoid).abs() > 1e-12 / k**2
        assert int(differ.sum()) == 4 and torch.allclose(lumped, trapezoid, rtol=0, atol=0.1 / k**2)
        trapezoid = torch.where(differ, trapezoid, lumped)  # round-off aside, the lumped weights
        boundary = torch.from_numpy(mesh.boundary)[None]
        with torch.no_grad():
            expected = grid_to_points(grid_model(points_to_grid(x, (n, n))))
            same = mesh_model(x, pos, trapezoid, boundary=boundary)
            got = mesh_model(x, pos, lumped, boundary=boundary)
        torch.testing.assert_close(same, expected, rtol=1e-11, atol=1e-12)
        gaps.append(float((got - expected).norm() / expected.norm()))
    # second order, the halvings' ratios approaching 4 (seed 0: 2.7, 3.5; the gap 5e-6 at k = 40)
    assert gaps[-1] > 0 and gaps[0] / gaps[1] > 2.2 and gaps[1] / gaps[2] > 3.0, gaps


def test_latent2d_keeps_its_spectral_decoder_and_old_configs_by_default(tmp_path):
    config = dict(d_model=8, n_layers=1, n_heads=2, latent_size=5, fine_width=3, decoder_width=4, modes=2)
    model = build_model("latent2d", **config)
    assert isinstance(model.decoder, SpectralDecoder) and model_config(model)["decoder"] == "spectral"
    # a checkpoint written before the option existed has no "decoder" key
    old = {"format": "petrov-model", "model_name": "latent2d", "config": config,
           "state_dict": model.state_dict(), "petrov_version": "0.1.0", "extra": {}}
    torch.save(old, tmp_path / "old.pt")
    loaded = load_model(tmp_path / "old.pt")
    x = torch.randn(1, 9, 9, 1)
    torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=0)
    with pytest.raises(ValueError, match="decoder must be 'spectral' or 'pointwise'"):
        build_model("latent2d", **dict(config, decoder="fourier"))


def test_fno2d_is_mesh_fno_on_its_own_grid(meshes):
    s = GRID
    mesh = meshes.grid(s - 1)  # nodes = the s x s grid nodes, row-major
    config = dict(width=4, modes=3, n_layers=2, proj_hidden=8)
    torch.manual_seed(0)
    mesh_model = build_model("mesh_fno", **dict(config, grid_size=s)).double().eval()
    fno = build_model("fno2d", **dict(config, in_channels=2)).double().eval()
    fno.load_state_dict(mesh_model.fno.state_dict())
    batch = sample(mesh)
    x = batch["x"][..., :1]
    with torch.no_grad():
        got = mesh_model(x, batch["pos"], batch["weights"], boundary=batch["boundary"],
                         grid_index=batch["grid_index"], grid_barycentric=batch["grid_barycentric"])
        expected = fno(torch.cat([points_to_grid(x, (s, s)), torch.ones(1, s, s, 1, dtype=DT)], dim=-1))
    expected = grid_to_points(expected).masked_fill(batch["boundary"][..., None], 0.0)
    torch.testing.assert_close(got, expected, rtol=1e-12, atol=1e-13)


# ---- P1 interpolation to the grid (mesh_fno's input) ----------------------------------------------

def test_p1_grid_interpolation_is_exact_for_linear_fields_and_zero_outside(meshes):
    mesh = meshes.jittered(8, notch=0.5, seed=4)
    s = 11
    index, bary = p1_grid_interpolation(mesh.points, mesh.triangles, s)
    assert index.shape == (s * s, 3) and index.dtype == torch.int64 and bary.dtype == DT
    grid = grid_coordinates((s, s), dtype=DT).reshape(-1, 2)
    outside = (grid[:, 0] > 0.5 + 1e-12) & (grid[:, 1] > 0.5 + 1e-12)
    inside = bary.sum(-1)
    torch.testing.assert_close(inside, (~outside).to(DT), rtol=0, atol=1e-14)
    assert bool((bary >= -1e-12).all())
    assert torch.equal(bary[outside], torch.zeros_like(bary[outside])) and torch.equal(index[outside], 0 * index[outside])
    linear = lambda p: 2.0 - p[..., :1] + 3 * p[..., 1:]  # noqa: E731
    got = p1_to_grid(linear(torch.from_numpy(mesh.points))[None], index[None], bary[None])[0]
    torch.testing.assert_close(got[~outside], linear(grid)[~outside], rtol=1e-13, atol=1e-13)
    # the barycentric coordinates reproduce the grid points themselves
    corners = torch.from_numpy(mesh.points)[index]  # (s², 3, 2)
    torch.testing.assert_close((bary[..., None] * corners).sum(1)[~outside], grid[~outside], rtol=0, atol=1e-14)


def test_p1_grid_interpolation_rejects_bad_meshes():
    points = np.array([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0], [1.0, 1.0]])
    with pytest.raises(ValueError, match="shape \\(t, 3\\)"):
        p1_grid_interpolation(points, np.array([[0, 1]]), 4)
    with pytest.raises(ValueError, match="refer to nodes"):
        p1_grid_interpolation(points, np.array([[0, 1, 7]]), 4)
    with pytest.raises(ValueError, match="size"):
        p1_grid_interpolation(points, np.array([[0, 1, 2]]), 1)
    with pytest.raises(ValueError, match="triangulation"):
        p1_grid_interpolation(points, np.array([[0, 1, 2], [0, 1, 2]]), 4)


# ---- configs, checkpoints, input errors -----------------------------------------------------------

@pytest.mark.parametrize("name", sorted(TINY))
def test_checkpoint_round_trip(name, meshes, tmp_path):
    m = model(name).float()  # checkpoints load as float32 models
    with torch.no_grad():
        for p in m.parameters():
            p.add_(0.01 * torch.randn_like(p))
    batch = pad([sample(meshes.grid(4)), sample(meshes.jittered(5, seed=1))])
    batch = {k: v.float() if v.is_floating_point() else v for k, v in batch.items()}
    args, kwargs = inputs(name, batch)
    expected = m(*args, **kwargs)
    torch.manual_seed(123)
    loaded = load_model(save_model(m, tmp_path / "m.pt"))
    assert model_config(loaded) == model_config(m)
    assert torch.equal(loaded(*args, **kwargs), expected)


@pytest.mark.parametrize("name, options, match", [
    ("mesh_attention", dict(causal=True), "causal"),
    ("mesh_latent", dict(causal=True), "causal"),
    ("mesh_latent", dict(periodic=True), "periodic"),
    ("mesh_fno", dict(periodic=True), "periodic"),
    ("mesh_transolver", dict(periodic=True), "periodic"),
    ("mesh_fno", dict(grid_size=1), "grid_size"),
    ("mesh_fno", dict(modes=5), "modes"),
    ("mesh_attention", dict(decoder_layers=0), "decoder_layers"),
    ("mesh_latent", dict(decoder_hidden=0), "decoder_hidden"),
    ("mesh_latent", dict(latent_size=1), "latent_size"),
    ("mesh_latent", dict(stencil_size=9), "stencil_size"),
    ("mesh_attention", dict(bogus=1), "unknown key"),
])
def test_bad_configs_raise(name, options, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, **dict(TINY[name], **options))


def bad(batch: dict, **change) -> dict:
    return {**batch, **change}


@pytest.mark.parametrize("name", sorted(TINY))
def test_bad_inputs_raise_clear_errors(name, meshes):
    m = model(name)
    ok = pad([sample(meshes.grid(4)), sample(meshes.grid(5))])
    nan_x = ok["x"].clone()
    nan_x[0, 3, 1] = float("nan")
    nan_pos = ok["pos"].clone()
    nan_pos[1, -1, 0] = float("inf")
    far = ok["pos"].clone()
    far[0, 0] = torch.tensor([1.5, 0.2], dtype=DT)
    negative = ok["weights"].clone()
    negative[0, 0] = -1.0
    leaking = ok["weights"].clone()
    leaking[0, -1] = 0.1
    cases = [
        (bad(ok, x=ok["x"][0]), "x of shape"),
        (bad(ok, x=ok["x"][..., :1]), "2 input channel"),
        (bad(ok, pos=ok["pos"][:, :-1]), "pos of shape"),
        (bad(ok, weights=ok["weights"][..., None]), "weights of shape"),
        (bad(ok, mask=ok["mask"].double()), "mask of shape .* bool"),
        (bad(ok, boundary=ok["boundary"][:, 1:]), "boundary of shape"),
        (bad(ok, x=nan_x), "x contains NaN"),
        (bad(ok, pos=nan_pos), "pos contains NaN"),
        (bad(ok, pos=far), "outside \\[0, 1\\]²"),
        (bad(ok, weights=negative), "weights must be >= 0"),
        (bad(ok, weights=ok["weights"] * torch.tensor([[1.0], [0.0]], dtype=DT)), "sample\\(s\\) \\[1\\] sum to 0"),
        (bad(ok, weights=leaking), "0 on padding"),
        (bad(ok, x=ok["x"].float()), "float32 but the model's weights are torch.float64"),
    ]
    for batch, match in cases:
        with pytest.raises(ValueError, match=match):
            args, kwargs = inputs(name, batch)
            m(*args, **kwargs)
    with pytest.raises(ValueError, match="needs the boundary flags"):
        args, kwargs = inputs(name, ok)
        m(*args, **{**kwargs, "boundary": None})


def test_mesh_fno_checks_its_interpolation_inputs(meshes):
    m = model("mesh_fno")
    ok = pad([sample(meshes.grid(4)), sample(meshes.grid(5))])
    args, kwargs = inputs("mesh_fno", ok)
    with pytest.raises(ValueError, match="grid_index of shape"):
        m(*args, **{**kwargs, "grid_index": kwargs["grid_index"][:, :-1]})
    with pytest.raises(ValueError, match="grid_barycentric of shape"):
        m(*args, **{**kwargs, "grid_barycentric": kwargs["grid_barycentric"].long()})
    with pytest.raises(ValueError, match="outside 0"):
        m(*args, **{**kwargs, "grid_index": kwargs["grid_index"] + 1000})
    to_padding = kwargs["grid_index"].clone()
    to_padding[0, 0, 0] = int(ok["mask"][0].sum())  # sample 0's first padding node
    with pytest.raises(ValueError, match="padding nodes"):
        m(*args, **{**kwargs, "grid_index": to_padding})
    with pytest.raises(TypeError, match="grid_index"):
        m(*args, mask=ok["mask"], boundary=ok["boundary"])


def test_the_boundary_distance_is_the_distance_to_the_nearest_boundary_node():
    from petrov.operators.models.base import boundary_distance

    g = torch.Generator().manual_seed(0)
    pos = torch.rand(2, 30, 2, generator=g, dtype=DT)
    boundary = torch.zeros(2, 30, dtype=torch.bool)
    boundary[0, [3, 7]] = True
    boundary[1, [0, 1, 2, 29]] = True
    got = boundary_distance(pos, boundary)[..., 0]
    for s in range(2):
        nodes = pos[s, boundary[s]]
        for j in range(30):
            expected = min(float(torch.linalg.norm(pos[s, j] - b)) for b in nodes)
            assert abs(float(got[s, j]) - expected) < 1e-12
    assert float(got[boundary].abs().max()) == 0.0
    with pytest.raises(ValueError, match="boundary nodes"):
        boundary_distance(pos, torch.zeros(2, 30, dtype=torch.bool))


def gino_contender(monkeypatch) -> dict:
    """``benchmarks/mesh_gino.py``'s contender registered for this test only (skipped without
    neuraloperator; the model registry is put back afterwards, so later tests list the shipped models), its
    tiny options."""
    from petrov.operators import models as registry

    pytest.importorskip("neuralop")
    monkeypatch.setattr(registry.MODELS, "_entries", dict(registry.MODELS._entries))
    monkeypatch.setattr(registry, "_CONFIG_CLASSES", dict(registry._CONFIG_CLASSES))
    # mesh_gino imports its folder's ``_common``; the examples' module of that name may be imported already
    # (a whole-suite run): set it aside while the benchmark's is imported, then put it back
    examples_common = sys.modules.pop("_common", None)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "benchmarks"))
    try:
        from mesh_gino import register_gino
    finally:
        sys.path.pop(0)
        if examples_common is not None:
            sys.modules["_common"] = examples_common
    register_gino()
    return dict(latent_size=6, fno_n_modes=[3, 3], fno_hidden_channels=4, fno_n_layers=1, in_gno_radius=0.4,
                out_gno_radius=0.4, gno_embed_channels=4, in_gno_channel_mlp_hidden_layers=[8],
                out_gno_channel_mlp_hidden_layers=[8])


@pytest.mark.parametrize("name", ["mesh_latent", "mesh_attention", "mesh_transolver", "mesh_gino"])
def test_the_loaders_boundary_distance_is_the_one_computed_in_the_forward(name, meshes, monkeypatch):
    """Every mesh model with the boundary distance, the benchmark's GINO contender too, takes the data
    loader's (``sample_transform``) and computes the same function with it."""
    from petrov.datasets.mesh.loading import collate_points

    m = model(name, **(gino_contender(monkeypatch) if name == "mesh_gino" else {}))
    items = []
    for mesh in (meshes.grid(10, notch=0.6), meshes.jittered(7, seed=1)):
        one = sample(mesh)
        item = dict(x=one["x"][0], y=one["x"][0, :, :1], pos=one["pos"][0], weights=one["weights"][0],
                    boundary=one["boundary"][0], triangles=torch.from_numpy(mesh.triangles), index=0)
        items.append({**item, **m.sample_transform()(item)})
    batch = collate_points(items)
    assert batch["boundary_distance"].shape == (*batch["x"].shape[:2], 1)
    tol = 1e-12
    if name == "mesh_gino":  # neuraloperator's spectral weights stay complex64
        m, tol = m.float(), 1e-5
        batch = {k: v.float() if torch.is_tensor(v) and v.is_floating_point() else v for k, v in batch.items()}
    args = (batch["x"], batch["pos"], batch["weights"])
    kwargs = dict(mask=batch["mask"], boundary=batch["boundary"])
    with torch.no_grad():
        given = m(*args, **kwargs, boundary_distance=batch["boundary_distance"])
        computed = m(*args, **kwargs)
    torch.testing.assert_close(given, computed, rtol=tol, atol=tol)
    with pytest.raises(ValueError, match="boundary_distance of shape"):
        m(*args, **kwargs, boundary_distance=batch["boundary_distance"][:, :-1])
    assert model(name, **(gino_contender(monkeypatch) if name == "mesh_gino" else {}),
                 boundary_features=False).sample_transform() is None
