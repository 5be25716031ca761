"""transolver1d / transolver2d: the published block structure, the grid's quadrature in the slice
integrals, periodic coordinate features, initialization, config errors."""
from __future__ import annotations

import pytest
import torch

from petrov.operators import build_model
from petrov.operators.transfer import grid_weights

DT = torch.float64
TINY = dict(d_model=8, n_layers=2, n_heads=2, n_slices=3)


def test_grid_weights_are_the_trapezoid_product_or_uniform():
    n1, n2 = 4, 6
    expected = torch.zeros(n1 * n2, dtype=DT)
    for i in range(n1):
        for j in range(n2):
            wi = (0.5 if i in (0, n1 - 1) else 1.0) / (n1 - 1)
            wj = (0.5 if j in (0, n2 - 1) else 1.0) / (n2 - 1)
            expected[i * n2 + j] = wi * wj  # row-major, like grid_to_points
    torch.testing.assert_close(grid_weights((n1, n2), periodic=False), expected)
    torch.testing.assert_close(grid_weights((n1, n2), periodic=True), torch.full((n1 * n2,), 1 / 24, dtype=DT))
    assert float(grid_weights((5, 7, 3), periodic=False).sum()) == pytest.approx(1.0)


def _captured_weights(model, x):
    seen = []
    hooks = [block.attention.mixer.register_forward_hook(lambda m, args, kwargs, out: seen.append(kwargs["weights"]),
                                                         with_kwargs=True) for block in model.blocks]
    model(x)
    for h in hooks:
        h.remove()
    return seen


def test_slice_integrals_use_the_grids_quadrature():
    node = build_model("transolver2d", **TINY).double()
    seen = _captured_weights(node, torch.randn(2, 5, 7, 1, dtype=DT))
    assert len(seen) == 2
    for w in seen:  # trapezoid weights, the same for every sample
        torch.testing.assert_close(w, grid_weights((5, 7), periodic=False).expand(2, 35))
    periodic = build_model("transolver1d", **TINY).double()
    assert _captured_weights(periodic, torch.randn(2, 16, 1, dtype=DT)) == [None, None]  # uniform 1/n


def test_blocks_are_pre_norm_residual_and_the_model_composes_them():
    torch.manual_seed(0)
    model = build_model("transolver2d", **dict(TINY, dirichlet=False)).double().eval()
    x = torch.randn(2, 6, 6, 1, dtype=DT)
    pos = torch.stack(torch.meshgrid(*[torch.linspace(0, 1, 6, dtype=DT)] * 2, indexing="ij"), -1)
    w = grid_weights((6, 6), periodic=False)[None]
    h = model.preprocess(torch.cat([x, pos.expand(2, 6, 6, 2)], -1)).reshape(2, 36, 8)
    for block in model.blocks:
        h = h + block.attention(block.norm1(h), None, w)
        h = h + block.mlp.net[3](block.mlp.net[1](block.mlp.net[0](block.norm2(h))))
    expected = model.head(model.norm(h)).reshape(2, 6, 6, 1)
    torch.testing.assert_close(model(x), expected)


def test_periodic_coordinates_enter_as_cos_and_sin():
    model = build_model("transolver1d", **TINY).double().eval()
    x = torch.randn(2, 16, 1, dtype=DT)
    pos = (torch.arange(16, dtype=DT) / 16)[None, :, None]
    torch.testing.assert_close(model(x, pos + 1.0), model(x, pos))  # a period changes nothing
    assert model.preprocess[0].in_features == 1 + 2
    assert build_model("transolver1d", **dict(TINY, periodic=False)).preprocess[0].in_features == 1 + 1


def test_initialization_is_the_references_normal_of_std_init_std():
    torch.manual_seed(0)
    model = build_model("transolver2d", d_model=32, n_layers=2, n_heads=4, n_slices=8)
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert len(linears) == 2 + 2 * (3 + 4 + 2) + 1  # preprocess; per block k/v/out, slice + 3 token maps, MLP; head
    weights = torch.cat([m.weight.detach().flatten() for m in linears])  # ~27,000 draws
    assert abs(float(weights.std()) - 0.02) < 0.0005 and abs(float(weights.mean())) < 0.0005
    assert all(torch.equal(m.bias, torch.zeros_like(m.bias)) for m in linears if m.bias is not None)
    assert all(block.attention.q_proj is None for block in model.blocks)  # no query at the points


@pytest.mark.parametrize("name, options, match", [
    ("transolver1d", {"dirichlet": True}, "node grid"),
    ("transolver2d", {"temperature": 0.0}, "temperature"),
    ("transolver2d", {"n_slices": 0}, "n_slices"),
    ("transolver2d", {"d_model": 4, "n_heads": 8}, "at least n_heads"),
    ("transolver2d", {"init_std": -1.0}, "init_std"),
    ("transolver2d", {"dropout": 1.0}, "dropout"),
])
def test_bad_config_raises(name, options, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, **options)


def test_node_grid_of_one_point_raises():
    with pytest.raises(ValueError, match="at least 2 points"):
        build_model("transolver2d", **TINY)(torch.randn(1, 1, 5, 1))
