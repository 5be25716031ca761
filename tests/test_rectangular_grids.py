"""Rectangular 2-D grids: a model's ``periodic`` (one bool or one per axis) and ``domain`` ([[lo, hi], ...])
set its default coordinates; one function on the box [0, 1] x [0, 3] at (16, 48), (32, 96) and (64, 192)
points (resolution invariance, as tests/test_invariance.py for square grids); per-axis periodicity
(translation along the periodic axis alone); bad input answered with one clear line.  float64, tiny sizes.

Observed differences at the shared points, (16, 48) against (32, 96) and (32, 96) against (64, 192), relative
to the output's norm (seed 0, the configs below): arfno2d 1.1e-4, 5.7e-5 and fno3d 7.3e-5, 3.7e-5 (first
order: the raw periodic coordinate jumps at the wrap); artransolver2d 2.8e-3, 5.8e-4; marching2d 1e-12, then
round-off (Fourier transfers and smooth coordinates); on node grids (17, 49) .. (65, 193): fno2d 5.4e-4,
2.8e-4; latent2d 4.1e-5, 2.0e-5; transolver2d 4.0e-3, 9.8e-4; periodic in x only, (16, 49) .. (64, 193):
latent2d 1.3e-4, 6.7e-5; transolver2d 2.0e-3, 2.1e-4; fno2d 5.1e-4, 2.6e-4.
"""
from __future__ import annotations

import math

import pytest
import torch

from petrov.common.config import from_dict
from petrov.grids.layout import grid_coordinates
from petrov.operators import build_model
from petrov.operators.models import config_class

DT = torch.float64
DOMAIN = [[0.0, 1.0], [0.0, 3.0]]
LENGTHS = (1.0, 3.0)
H, F = 2, 2
MARCHING = {
    "arfno2d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
    "fno3d": dict(width=4, modes=3, time_modes=2, n_layers=2, proj_hidden=8, padding=2),
    "artransolver2d": dict(d_model=8, n_layers=2, n_heads=2, n_slices=3, init_std=0.5, unified_pos=0),
    "marching2d": dict(d_model=8, n_layers=1, n_heads=2, latent_size=8, fine_width=4, latent_modes=2,
                       decoder_width=4, modes=3),
}
STATIONARY = {
    "fno2d": dict(width=4, modes=2, n_layers=2, proj_hidden=8),
    "latent2d": dict(d_model=8, n_layers=1, n_heads=2, latent_size=5, fine_width=4, decoder_width=4, modes=2),
    "transolver2d": dict(d_model=8, n_layers=2, n_heads=2, n_slices=3, init_std=0.5),
}
MIXED = {  # periodic in x, a node grid in y
    "fno2d": dict(STATIONARY["fno2d"], periodic=[True, False]),
    "latent2d": dict(STATIONARY["latent2d"], latent_size=6, periodic=[True, False], dirichlet=False),
    "transolver2d": dict(STATIONARY["transolver2d"], periodic=[True, False], dirichlet=False),
}
# the largest relative difference allowed between (16, 48) and (32, 96) (about 3x the observed one), and
# the least factor by which it must shrink at the next refinement
TOLERANCE = {"arfno2d": 4e-4, "fno3d": 3e-4, "artransolver2d": 1e-2, "marching2d": 1e-10,
             "fno2d": 2e-3, "latent2d": 2e-4, "transolver2d": 1.5e-2}
MIN_RATIO = 1.7


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def field(shape, channels, periodic=(True, True)):
    """``(1, n1, n2, channels)``: a band-limited field on the box [0, 1] x [0, 3] (periodic with the box's
    lengths), sampled at its periodic (``i L / n``) or node (``j L / (n - 1)``) points per axis; the channels
    are the field at successive phases."""
    axes = [torch.arange(n, dtype=DT) / n * L if p else torch.linspace(0.0, L, n, dtype=DT)
            for n, p, L in zip(shape, periodic, LENGTHS)]
    X, Y = torch.meshgrid(*axes, indexing="ij")
    states = [torch.sin(2 * math.pi * X + 0.3 * c) * torch.cos(2 * math.pi * Y / 3)
              + 0.5 * torch.cos(2 * math.pi * (X + 2 * Y / 3) - 0.2 * c) for c in range(channels)]
    return torch.stack(states, dim=-1)[None]


def build(name, config):
    torch.manual_seed(0)
    return build_model(name, domain=DOMAIN, **config).to(DT).eval()


def assert_one_function(model, name, grids, periodic):
    outs = []
    with torch.no_grad():
        for shape, step in grids:
            outs.append(model(field(shape, model.input_channels, periodic))[:, ::step, ::step])
    diffs = [float((b - a).norm() / outs[-1].norm()) for a, b in zip(outs, outs[1:])]
    assert diffs[0] < TOLERANCE[name], diffs
    assert diffs[1] <= diffs[0] / MIN_RATIO or diffs[1] < 1e-13, diffs


TORUS_GRIDS = [((16, 48), 1), ((32, 96), 2), ((64, 192), 4)]
NODE_GRIDS = [((17, 49), 1), ((33, 97), 2), ((65, 193), 4)]
MIXED_GRIDS = [((16, 49), 1), ((32, 97), 2), ((64, 193), 4)]


@pytest.mark.parametrize("name", sorted(MARCHING))
def test_a_marching_model_is_one_function_on_a_rectangular_torus(name):
    model = build(name, dict(MARCHING[name], history=H, time_steps=2, fields=F))
    assert_one_function(model, name, TORUS_GRIDS, (True, True))


@pytest.mark.parametrize("name", sorted(STATIONARY))
def test_a_grid_model_is_one_function_on_a_rectangular_node_grid(name):
    assert_one_function(build(name, STATIONARY[name]), name, NODE_GRIDS, (False, False))


@pytest.mark.parametrize("name", sorted(MIXED))
def test_a_grid_model_periodic_along_one_axis_is_one_function(name):
    assert_one_function(build(name, MIXED[name]), name, MIXED_GRIDS, (True, False))


# ---- the coordinates ---------------------------------------------------------------------------------------

def test_default_coordinates_are_uniform_on_the_domain_per_axis():
    pos = grid_coordinates((4, 5), periodic=(True, False), dtype=DT, domain=((-1.0, 1.0), (0.0, 3.0)))
    for i in range(4):
        for j in range(5):
            assert pos[i, j].tolist() == pytest.approx([-1.0 + 2.0 * i / 4, 3.0 * j / 4], abs=1e-15)
    assert torch.equal(grid_coordinates((4, 5), periodic=True, dtype=DT),
                       grid_coordinates((4, 5), periodic=(True, True), dtype=DT, domain=((0.0, 1.0), (0.0, 1.0))))


@pytest.mark.parametrize("name, config", [("latent2d", MIXED["latent2d"]), ("transolver2d", MIXED["transolver2d"]),
                                          ("arfno2d", dict(MARCHING["arfno2d"], history=H, fields=F))])
def test_the_model_takes_the_domain_grid_when_no_coordinates_are_given(name, config):
    model = build(name, config)
    x = torch.randn(2, 8, 24, model.input_channels, dtype=DT, generator=torch.Generator().manual_seed(0))
    periodic = tuple(model.axis_periodic)
    pos = grid_coordinates((8, 24), periodic=periodic, dtype=DT, domain=((0.0, 1.0), (0.0, 3.0)))
    torch.testing.assert_close(model(x), model(x, pos.expand(2, 8, 24, 2)), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["transolver2d", "fno2d"])
def test_shifting_along_the_periodic_axis_shifts_the_output(name):
    # periodic in x only: a shift by whole cells along x of the field and of its coordinates moves the output
    # with it (transolver2d: the x coordinate enters as (cos, sin) of 2π x / L, the slice integrals treat the
    # points as a set; fno2d: its FFT commutes with the shift); y is a node grid and is not shifted.  (latent2d
    # is not equivariant: its attention sees the fixed latent grid's coordinates.)
    model = build(name, MIXED[name])
    x = torch.randn(2, 12, 9, 1, dtype=DT, generator=torch.Generator().manual_seed(0))
    pos = grid_coordinates((12, 9), periodic=(True, False), dtype=DT,
                           domain=((0.0, 1.0), (0.0, 3.0))).expand(2, 12, 9, 2)
    rolled_pos = pos.clone()
    rolled_pos[..., 0] = torch.roll(pos[..., 0], 5, dims=1)
    out = model(x, pos)
    torch.testing.assert_close(model(torch.roll(x, 5, dims=1), rolled_pos), torch.roll(out, 5, dims=1),
                               rtol=1e-10, atol=1e-12)


# ---- bad input -------------------------------------------------------------------------------------------

def one_line(err) -> str:
    message = str(err.value)
    assert "\n" not in message
    return message


def test_modes_too_large_for_one_axis_name_the_axis():
    model = build("fno2d", dict(STATIONARY["fno2d"], modes=6))
    model(torch.randn(1, 12, 36, 1, dtype=DT))
    with pytest.raises(ValueError, match=r"6 modes on grid axis 0 .* at least 12 points, got 8") as err:
        model(torch.randn(1, 8, 36, 1, dtype=DT))
    one_line(err)
    with pytest.raises(ValueError, match=r"6 modes on the last grid axis .* got 8") as err:
        model(torch.randn(1, 36, 8, 1, dtype=DT))
    one_line(err)


@pytest.mark.parametrize("domain, fault", [
    ([[0.0, 1.0]], "got \\[\\[0.0, 1.0\\]\\]"),
    ([[0.0, 1.0], [2.0, 2.0]], "axis 1 has \\[2.0, 2.0\\]"),
    ([[0.0, 1.0], [0.0, math.inf]], "axis 1 has"),
    ([[0.0, 1.0, 2.0], [0.0, 1.0]], "axis 0 has"),
])
@pytest.mark.parametrize("name", ["fno2d", "latent2d", "transolver2d", "galerkin2d", "marching2d"])
def test_a_bad_domain_is_one_clear_line(name, domain, fault):
    with pytest.raises(ValueError, match=rf"domain must be None \(the unit box\) or a list of 2 pairs.*{fault}") as err:
        build_model(name, domain=domain)
    one_line(err)


@pytest.mark.parametrize("name", ["fno2d", "latent2d", "transolver2d", "galerkin2d", "arfno2d", "fno3d"])
def test_a_periodic_list_of_the_wrong_length_is_one_clear_line(name):
    with pytest.raises(ValueError, match=r"periodic = \[False, False, False\] has 3 entries but the model has 2 grid "
                                         r"axes") as err:
        build_model(name, periodic=[False, False, False])
    one_line(err)


def test_a_config_file_gets_the_types_checked():
    cls = config_class("fno2d")
    assert from_dict(cls, {"periodic": [True, False], "domain": [[0, 1], [0, 3]]}).domain == ((0.0, 1.0), (0.0, 3.0))
    with pytest.raises(ValueError, match="periodic"):
        from_dict(cls, {"periodic": "yes"})
    with pytest.raises(ValueError, match="domain"):
        from_dict(cls, {"domain": [[0, "a"], [0, 1]]})


def test_periodicity_rules_name_the_axis_kind():
    with pytest.raises(ValueError, match="state_modes needs a periodic grid .* on every axis"):
        build_model("arfno2d", periodic=[True, False], state_modes=3)
    with pytest.raises(ValueError, match="periodic = true and dirichlet = false"):
        build_model("marching2d", periodic=[True, False])
    with pytest.raises(ValueError, match="dirichlet=True needs a node grid"):
        build_model("transolver2d", periodic=[False, True])
    with pytest.raises(ValueError, match="periodic and domain are grid options"):
        build_model("mesh_latent", domain=DOMAIN)
