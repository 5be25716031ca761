"""transolver1d / transolver2d: the published block structure, the grid's quadrature in the slice
integrals, periodic coordinate features, initialization, config errors."""
from __future__ import annotations

import pytest
import torch

from petrov.operators import build_model
from petrov.grids.transfer import grid_weights

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


def _linears(model):
    slices = {id(block.attention.mixer.slice) for block in model.blocks}
    linears = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    return [m for m in linears if id(m) not in slices], [m for m in linears if id(m) in slices]


@pytest.mark.parametrize("slice_init", ["orthogonal", "normal"])
def test_initialization_is_the_references_normal_of_std_init_std(slice_init):
    torch.manual_seed(0)
    model = build_model("transolver2d", d_model=32, n_layers=2, n_heads=4, n_slices=8, slice_init=slice_init)
    others, slices = _linears(model)
    assert len(others) + len(slices) == 2 + 2 * (3 + 4 + 2) + 1  # preprocess; per block k/v/out, slice + 3 token maps, MLP; head
    assert len(slices) == 2
    for group in ([others] if slice_init == "orthogonal" else [others + slices]):
        weights = torch.cat([m.weight.detach().flatten() for m in group])  # ~27,000 draws
        assert abs(float(weights.std()) - 0.02) < 0.0005 and abs(float(weights.mean())) < 0.0005
    assert all(torch.equal(m.bias, torch.zeros_like(m.bias)) for m in others + slices if m.bias is not None)
    assert all(block.attention.q_proj is None for block in model.blocks)  # no query at the points
    for m in slices:  # (G, head_dim) = (8, 8): orthogonal rows of norm 1, or rows of norm ~0.02 sqrt(8)
        gram = m.weight.detach().double() @ m.weight.detach().double().T
        if slice_init == "orthogonal":
            torch.testing.assert_close(gram, torch.eye(8, dtype=DT), atol=1e-5, rtol=0)
        else:
            assert float(gram.diagonal().sqrt().max()) < 0.15


def test_orthogonal_slices_differ_at_initialization():
    """The reason for the orthogonal start: with the reference's normal start every point is assigned
    to every slice almost uniformly (all tokens the same mean); orthogonal rows spread the assignment."""
    torch.manual_seed(0)
    x = torch.randn(2, 12, 12, 1)
    spread = {}
    for slice_init in ("orthogonal", "normal"):
        torch.manual_seed(1)
        model = build_model("transolver2d", d_model=32, n_layers=1, n_heads=2, n_slices=8, slice_init=slice_init)
        seen = []  # the layer calls mixer(q, k, v, pos=..., weights=...)
        hook = model.blocks[0].attention.mixer.register_forward_hook(
            lambda m, args, out: seen.append(m.slice_weights(args[1])))
        model(x)
        hook.remove()
        spread[slice_init] = float(seen[0].detach().std(dim=-1).mean())  # how far from the uniform 1/G per point
    assert spread["orthogonal"] > 5 * spread["normal"], spread


def test_unified_pos_features_are_distances_to_the_reference_grid():
    from petrov.operators.models.transolver import reference_distances

    pos = torch.tensor([[0.0, 0.0], [0.25, 1.0]], dtype=DT)
    d = reference_distances(pos, 3, periodic=False)  # nodes (0, 0), (0, .5), (0, 1), (.5, 0), ...
    nodes = [(i / 2, j / 2) for i in range(3) for j in range(3)]
    expected = torch.tensor([[((p[0] - a) ** 2 + (p[1] - b) ** 2) ** 0.5 for a, b in nodes] for p in pos.tolist()],
                            dtype=DT)
    torch.testing.assert_close(d, expected)
    wrapped = reference_distances(torch.tensor([[0.9]], dtype=DT), 3, periodic=True)  # nodes 0, 0.5, 1 on the circle
    torch.testing.assert_close(wrapped, torch.tensor([[0.1, 0.4, 0.1]], dtype=DT))
    model = build_model("transolver2d", **dict(TINY, unified_pos=4))
    assert model.preprocess[0].in_features == 1 + 16
    x = torch.randn(1, 9, 9, 1)
    assert model(x).shape == (1, 9, 9, 1)


@pytest.mark.parametrize("name, options, match", [
    ("transolver1d", {"dirichlet": True}, "node grid"),
    ("transolver2d", {"temperature": 0.0}, "temperature"),
    ("transolver2d", {"n_slices": 0}, "n_slices"),
    ("transolver2d", {"d_model": 4, "n_heads": 8}, "at least n_heads"),
    ("transolver2d", {"init_std": -1.0}, "init_std"),
    ("transolver2d", {"dropout": 1.0}, "dropout"),
    ("transolver2d", {"slice_init": "xavier"}, "slice_init"),
    ("transolver2d", {"unified_pos": 1}, "unified_pos"),
    ("transolver2d", {"unified_pos": -2}, "unified_pos"),
    ("transolver2d", {"unified_pos": True}, "unified_pos"),
])
def test_bad_config_raises(name, options, match):
    with pytest.raises(ValueError, match=match):
        build_model(name, **options)


def test_node_grid_of_one_point_raises():
    with pytest.raises(ValueError, match="at least 2 points"):
        build_model("transolver2d", **TINY)(torch.randn(1, 1, 5, 1))
