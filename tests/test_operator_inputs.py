"""Bad inputs of the operators' Python API get a clear error naming what is wrong (API sweep items 4, 8, 11, 12,
13, 14, 22, 26): checkpoints, the attention layer, SpectralConv, grid_coordinates and mesh_fno."""
from __future__ import annotations

import math

import pytest
import torch

from petrov.operators import Attention, build_model, load_model, save_model
from petrov.operators.attention.norms import ColumnNorm
from petrov.grids.layout import grid_coordinates
from petrov.operators.spectral import SpectralConv


# ---- checkpoints (items 4, 14) -----------------------------------------------------------------------

@pytest.fixture
def saved(tmp_path):
    """``edit(fn) -> path``: a tiny fno1d checkpoint, its dict changed in place by ``fn``."""
    good = save_model(build_model("fno1d", width=4, modes=2, n_layers=1, proj_hidden=4), tmp_path / "m.pt")

    def edit(fn):
        checkpoint = torch.load(good, weights_only=True)
        fn(checkpoint)
        torch.save(checkpoint, tmp_path / "bad.pt")
        return tmp_path / "bad.pt"
    return edit


def test_load_model_refuses_nan_weights(saved):
    def poison(checkpoint):
        next(iter(checkpoint["state_dict"].values())).fill_(math.nan)
    with pytest.raises(ValueError, match="bad.pt.*NaN/inf"):
        load_model(saved(poison))


@pytest.mark.parametrize("key, value, message", [
    ("config", [1, 2], "config should be a dict, got list"),
    ("config", None, "config should be a dict, got None"),
    ("config", {1: 2}, "config should have names as keys, got the key 1"),
    ("state_dict", [1], "state_dict should be a dict, got list"),
    ("extra", [1], "extra should be a dict, got list"),
    ("model_name", 3, "model_name should be a str, got int"),
])
def test_load_model_names_a_malformed_field(saved, key, value, message):
    with pytest.raises(ValueError, match=f"bad.pt.*damaged.*{message}"):
        load_model(saved(lambda checkpoint: checkpoint.__setitem__(key, value)), return_extra=True)


def test_load_model_wraps_an_unknown_name_in_the_config(saved):
    path = saved(lambda checkpoint: checkpoint["config"].__setitem__("activation", "nope"))
    with pytest.raises(ValueError, match="bad.pt.*config does not match model 'fno1d'.*unknown activation 'nope'"):
        load_model(path)


# ---- the attention layer (items 8, 11, 12) -----------------------------------------------------------

@pytest.mark.parametrize("mixer", ["galerkin", "softmax", "physics"])
def test_attention_refuses_an_empty_batch(mixer):
    layer = Attention(8, n_heads=2, mixer=mixer, pos_dim=1)
    with pytest.raises(ValueError, match="empty batch"):
        layer(torch.randn(0, 6, 8), torch.rand(0, 6, 1))


@pytest.mark.parametrize("eps", [math.nan, math.inf, 0.0, -1e-5, None, "1e-5", True])
def test_attention_checks_norm_eps(eps):
    with pytest.raises(ValueError, match="norm_eps must be a finite number > 0"):
        Attention(8, norm_eps=eps)


def test_model_config_checks_norm_eps_and_the_norm_its_eps():
    with pytest.raises(ValueError, match=r"norm_eps .* got nan"):
        build_model("galerkin1d", d_model=8, norm_eps=math.nan)
    with pytest.raises(ValueError, match="eps must be a finite number >= 0, got nan"):
        ColumnNorm(2, 4, eps=math.nan)


def test_attention_wants_tensors_and_a_floating_x():
    x, pos = torch.randn(2, 6, 8), torch.rand(2, 6, 1)
    with pytest.raises(TypeError, match="pos must be a torch.Tensor or None, got ndarray"):
        Attention(8, pos_dim=1)(x, pos.numpy())
    with pytest.raises(TypeError, match="weights must be a torch.Tensor or None, got ndarray"):
        Attention(8)(x, None, torch.rand(2, 6).numpy())
    with pytest.raises(ValueError, match=r"x must be a floating-point tensor, got torch.int64.*x.to\(torch.float32\)"):
        Attention(8)(torch.ones(2, 6, 8, dtype=torch.long))


# ---- SpectralConv (item 13) --------------------------------------------------------------------------

def test_spectral_conv_checks_dtype_and_ndim():
    with pytest.raises(ValueError, match="SpectralConv: x must be a floating-point tensor, got torch.int64"):
        SpectralConv(2, 2, 3)(torch.ones(1, 2, 8, dtype=torch.long))
    with pytest.raises(TypeError, match="SpectralConv: x must be a torch.Tensor"):
        SpectralConv(2, 2, 3)(torch.ones(1, 2, 8).numpy())
    for ndim in (0, -1, 2.0, "2"):
        with pytest.raises(ValueError, match="ndim .* must be an integer >= 1"):
            SpectralConv(2, 2, 3, ndim=ndim)


# ---- grid_coordinates (item 22) ----------------------------------------------------------------------

@pytest.mark.parametrize("grid, error, message", [
    (16, TypeError, r"got int 16; for a 1-D grid give \(16,\)"),
    ("16", TypeError, "got str '16'"),
    ((-1, 4), ValueError, r"got \(-1, 4\)"),
    ((0,), ValueError, r"got \(0,\)"),
    ((), ValueError, "no axis"),
    ((4.0,), ValueError, r"got \(4.0,\)"),
])
def test_grid_coordinates_checks_the_grid(grid, error, message):
    with pytest.raises(error, match=f"grid must be a tuple of grid sizes .*{message}"):
        grid_coordinates(grid)


# ---- mesh_fno (item 26) ------------------------------------------------------------------------------

def test_mesh_fno_without_its_grid_inputs_points_to_sample_transform():
    model = build_model("mesh_fno", width=4, modes=2, n_layers=1, proj_hidden=4, grid_size=4)
    x, pos, weights = torch.randn(1, 5, 1), torch.rand(1, 5, 2), torch.ones(1, 5)
    with pytest.raises(TypeError, match="grid_index and grid_barycentric missing.*sample_transform"):
        model(x, pos, weights)
    with pytest.raises(TypeError, match="MeshFNO: grid_barycentric missing"):
        model(x, pos, weights, grid_index=torch.zeros(1, 16, 3, dtype=torch.long))
