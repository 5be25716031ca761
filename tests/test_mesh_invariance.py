"""Discretization invariance on meshes: untrained point-set models converge under mesh refinement.

Domain: the L-shape [0, 1]² minus (0.7, 1]² (the notch cuts latent hats of spacing 1/5 partly, so
``mesh_latent``'s coverage takes values strictly between 0 and 1).  Meshes: the uniform
triangulated grid at h = 1/10, 1/20, 1/40 (nested: every coarse node is a node of the finer ones),
and an independent jittered Delaunay mesh at h ≈ 1/30, all with lumped-mass weights.  A smooth
field is given at the nodes; the outputs are compared at the nodes of the coarsest mesh.  On the
independent mesh those nodes are appended as points of weight 0: they take part in no integral and
read the model's output function there.

Both with and without the distance to the boundary as an input (``boundary_features``: the boundary
nodes of the finer meshes sample the same boundary).  Observed (seed 0, every mixer): the nested differences fall by 4.0 per halving of h (second order:
every integral is a lumped-mass quadrature of a smooth integrand), and the independent mesh is
within 0.3-0.9 times the last nested difference of the finest nested mesh; the same mesh with
uniform weights (a plain mean over the nodes) is off by 20-60 times that difference.
"""
from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from petrov.operators import build_model, list_mixers

NOTCH = 0.7
NESTED = (10, 20, 40)
TINY = {
    "mesh_latent": dict(d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=4, decoder_hidden=8,
                        latent_modes=2, latent_kernel=3),
    "mesh_attention": dict(d_model=8, n_layers=1, n_heads=2, decoder_hidden=8),
}


def field(pos: torch.Tensor) -> torch.Tensor:
    x, y = pos[..., 0], pos[..., 1]
    return (torch.sin(math.pi * x) * torch.cos(2 * y) + x * y)[..., None]


def run(model, mesh, readout=None, uniform=False) -> torch.Tensor:
    """The model's output at the nodes of ``mesh``, or at the nodes of ``readout`` appended to them
    with weight 0."""
    pos, w, bd = (torch.from_numpy(a) for a in (mesh.points, mesh.weights, mesh.boundary))
    if uniform:
        w = torch.full_like(w, float(w.sum()) / len(w))
    if readout is not None:
        pos = torch.cat([pos, torch.from_numpy(readout.points)])
        w = torch.cat([w, torch.zeros(len(readout.points), dtype=w.dtype)])
        bd = torch.cat([bd, torch.from_numpy(readout.boundary)])
    with torch.no_grad():
        out = model(field(pos)[None], pos[None], w[None], boundary=bd[None])[0]
    return out if readout is None else out[len(mesh.points):]


def on_coarsest_nodes(out: torch.Tensor, mesh, k: int) -> torch.Tensor:
    step = k // NESTED[0]
    ij = np.rint(mesh.points * k).astype(int)
    return out[torch.from_numpy(((ij % step) == 0).all(axis=1))]


@pytest.mark.parametrize("features", [False, True])
@pytest.mark.parametrize("mixer", list_mixers())
@pytest.mark.parametrize("name", sorted(TINY))
def test_untrained_point_set_model_converges_under_mesh_refinement(name, mixer, features, meshes):
    torch.manual_seed(0)
    check_converges(build_model(name, **dict(TINY[name], mixer=mixer, boundary_features=features)), features, meshes)


@pytest.mark.parametrize("features", [False, True])
def test_untrained_mesh_transolver_converges_under_mesh_refinement(features, meshes):
    """Transolver's slice tokens are quadratures with the mesh's weights: the same convergence."""
    torch.manual_seed(0)
    model = build_model("mesh_transolver", d_model=8, n_layers=1, n_heads=2, n_slices=4, boundary_features=features)
    check_converges(model, features, meshes)


def check_converges(model, features: bool, meshes) -> None:
    model = model.double().eval()
    outs = [on_coarsest_nodes(run(model, meshes.grid(k, NOTCH)), meshes.grid(k, NOTCH), k) for k in NESTED]
    scale = outs[-1].norm()
    diffs = [float((b - a).norm() / scale) for a, b in zip(outs, outs[1:])]
    assert diffs[-1] > 1e-12  # the nodes do interact (not round-off) ...
    assert diffs[0] / diffs[1] > 3.0, diffs  # ... and the outputs converge (second order: 4)

    coarse, independent = meshes.grid(NESTED[0], NOTCH), meshes.jittered(30, NOTCH, seed=0)
    other = float((run(model, independent, readout=coarse) - outs[-1]).norm() / scale)
    assert other < 1.5 * diffs[-1], (other, diffs)
    if not features:  # what the weights buy (the distance to the boundary takes no integral)
        # the same mesh integrated with a plain mean over its nodes
        mean = float((run(model, independent, readout=coarse, uniform=True) - outs[-1]).norm() / scale)
        assert mean > 5 * diffs[-1], (mean, diffs)
