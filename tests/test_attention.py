"""The attention layer: wiring against a plain reference, discretization invariance, equivariance,
eval determinism, autocast, initialization and input validation."""
from __future__ import annotations

import math

import pytest
import torch

from petrov.operators import Attention, list_mixers
from petrov.operators.attention.norms import ColumnNorm, HeadLayerNorm, build_norm

DT = torch.float64
ALL_MIXERS = ["galerkin", "fourier", "softmax", "linear", "performer", "cosformer", "physics"]


def _randomize(layer: Attention, seed=0, std=0.5) -> Attention:
    """O(1) parameters everywhere (the default init is deliberately tiny) so tests see every path."""
    torch.manual_seed(seed)
    with torch.no_grad():
        for name, p in layer.named_parameters():
            p.normal_(0.0, std)
    return layer


def _layer(mixer="galerkin", norm="column", pos_dim=1, d_model=4, n_heads=2, head_dim=3, **kw):
    extra = {"seed": 0} if mixer == "performer" else {}
    layer = Attention(d_model, n_heads=n_heads, head_dim=head_dim, mixer=mixer, norm=norm, pos_dim=pos_dim,
                      **extra, **kw)
    return _randomize(layer).double().eval()


def _smooth_functions(t: torch.Tensor) -> torch.Tensor:
    """Four smooth non-periodic functions of t in [0, 1]: ``(n,) -> (1, n, 4)``."""
    return torch.stack([torch.sin(2 * t + 0.3), torch.cos(3 * t), t**2, torch.exp(-t)], dim=-1)[None]


@torch.no_grad()
def _run(layer, t, weights=None):
    w = None if weights is None else weights[None]
    return layer(_smooth_functions(t), t[None, :, None], w)[0]


# ---------------------------------------------------------------- plain reference of the layer

def _plain_layer(layer: Attention, x, pos, w):
    """The layer written out for one batch entry with explicit loops over heads and channels."""
    n = x.shape[0]
    h, dh = layer.n_heads, layer.head_dim
    w = torch.full((n,), 1.0 / n, dtype=DT) if w is None else w / w.sum()

    def project(lin):
        return [(x @ lin.weight.T + lin.bias)[:, i * dh:(i + 1) * dh] for i in range(h)]

    def column_norm(mat, norm, head):  # each channel: weighted mean 0, weighted L2 norm 1
        out = torch.empty_like(mat)
        for c in range(dh):
            col = mat[:, c]
            mean = (w * col).sum()
            std = torch.sqrt((w * (col - mean) ** 2).sum() + norm.eps)
            out[:, c] = (col - mean) / std * norm.weight[head, c] + norm.bias[head, c]
        return out

    q, k, v = project(layer.q_proj), project(layer.k_proj), project(layer.v_proj)
    heads = []
    for i in range(h):
        qi, ki, vi = q[i], k[i], v[i]
        if "q" in layer.norms:
            qi = column_norm(qi, layer.norms["q"], i)
        if "k" in layer.norms:
            ki = column_norm(ki, layer.norms["k"], i)
        if "v" in layer.norms:
            vi = column_norm(vi, layer.norms["v"], i)
        qi, ki, vi = (torch.cat([m, pos], dim=-1) for m in (qi, ki, vi))
        # Galerkin and Fourier: z_r = Σ_j w_j (q_r·k_j) v_j
        z = torch.stack([sum(w[j] * (qi[r] @ ki[j]) * vi[j] for j in range(n)) for r in range(n)])
        heads.append(z)
    return torch.cat(heads, dim=-1) @ layer.out_proj.weight.T + layer.out_proj.bias


@pytest.mark.parametrize("mixer", ["galerkin", "fourier"])
@pytest.mark.parametrize("weighted", [False, True])
def test_layer_matches_plain_reference(mixer, weighted):
    layer = _layer(mixer, pos_dim=2)
    g = torch.Generator().manual_seed(1)
    x = torch.randn(2, 6, 4, generator=g, dtype=DT)
    pos = torch.rand(2, 6, 2, generator=g, dtype=DT)
    w = torch.rand(2, 6, generator=g, dtype=DT) * 3 if weighted else None  # not summing to 1
    out = layer(x, pos, w)
    for b in range(2):
        ref = _plain_layer(layer, x[b], pos[b], None if w is None else w[b])
        torch.testing.assert_close(out[b], ref)


def test_column_norm_gives_zero_mean_unit_l2_per_channel():
    g = torch.Generator().manual_seed(0)
    x = 3 + 2 * torch.randn(2, 3, 50, 4, generator=g, dtype=DT)
    w = torch.rand(2, 50, generator=g, dtype=DT)
    w = w / w.sum(-1, keepdim=True)
    y = ColumnNorm(3, 4, eps=0.0).double()(x, w)
    wb = w[:, None, :, None]
    torch.testing.assert_close((wb * y).sum(-2), torch.zeros(2, 3, 4, dtype=DT))
    torch.testing.assert_close((wb * y**2).sum(-2), torch.ones(2, 3, 4, dtype=DT))


def test_head_layer_norm_is_one_layernorm_per_head():
    norm = HeadLayerNorm(2, 5).double()
    with torch.no_grad():
        norm.weight.normal_(), norm.bias.normal_()
    x = torch.randn(3, 2, 7, 5, dtype=DT)
    for h in range(2):
        ln = torch.nn.LayerNorm(5).double()
        with torch.no_grad():
            ln.weight.copy_(norm.weight[h]), ln.bias.copy_(norm.bias[h])
        torch.testing.assert_close(norm(x)[:, h], ln(x[:, h]))


# ---------------------------------------------------------------- discretization invariance

@pytest.mark.parametrize("mixer", ["galerkin", "fourier", "physics"])
def test_same_functions_at_n_and_2n_points_agree_within_quadrature_error(mixer):
    # left-endpoint grid t_i = i/n with the default uniform weights: a first-order quadrature,
    # so outputs at shared points differ by O(1/n) and the difference halves when n doubles
    layer = _layer(mixer)
    fine = 1024
    y_fine = _run(layer, torch.arange(fine, dtype=DT) / fine)
    scale = y_fine.abs().max()
    err, gap = {}, {}
    for n in (32, 64, 128):
        y_n = _run(layer, torch.arange(n, dtype=DT) / n)
        y_2n = _run(layer, torch.arange(2 * n, dtype=DT) / (2 * n))
        gap[n] = float((y_n - y_2n[::2]).abs().max() / scale)
        err[n] = float((y_n - y_fine[:: fine // n]).abs().max() / scale)
    assert gap[32] < 0.05
    assert gap[64] < 0.6 * gap[32] and gap[128] < 0.6 * gap[64]
    assert err[64] < 0.6 * err[32] and err[128] < 0.6 * err[64]


@pytest.mark.parametrize("norm", ["column", "layer"])
@pytest.mark.parametrize("mixer", ["galerkin", "fourier", "physics"])
def test_nonuniform_points_with_weights_approximate_the_integral(mixer, norm):
    # 200 random points clustered near 0 with their cell lengths as weights, against a fine uniform
    # midpoint rule evaluated at the same points (added to the fine set with weight 0)
    layer = _layer(mixer, norm=norm)
    g = torch.Generator().manual_seed(0)
    t = torch.sort(torch.rand(200, generator=g, dtype=DT) ** 2).values
    edges = torch.cat([torch.zeros(1, dtype=DT), (t[1:] + t[:-1]) / 2, torch.ones(1, dtype=DT)])
    cells = edges[1:] - edges[:-1]
    fine = 1024
    t_ref = torch.cat([(torch.arange(fine, dtype=DT) + 0.5) / fine, t])
    w_ref = torch.cat([torch.full((fine,), 1.0 / fine, dtype=DT), torch.zeros(200, dtype=DT)])
    y_ref = _run(layer, t_ref, w_ref)[fine:]
    scale = y_ref.abs().max()
    weighted = float((_run(layer, t, cells) - y_ref).abs().max() / scale)
    uniform = float((_run(layer, t) - y_ref).abs().max() / scale)
    assert weighted < 5e-3
    assert uniform > 10 * weighted  # ignoring the weights is a wrong quadrature


def test_weights_are_normalized_per_batch_entry():
    layer = _layer("galerkin")
    x, pos = torch.randn(2, 9, 4, dtype=DT), torch.rand(2, 9, 1, dtype=DT)
    w = torch.rand(2, 9, dtype=DT) + 0.1
    torch.testing.assert_close(layer(x, pos, w * torch.tensor([[5.0], [0.01]], dtype=DT)), layer(x, pos, w))


def test_shared_pos_and_weights_broadcast_over_the_batch():
    layer = _layer("fourier")
    x = torch.randn(3, 9, 4, dtype=DT)
    pos, w = torch.rand(1, 9, 1, dtype=DT), torch.rand(1, 9, dtype=DT)
    torch.testing.assert_close(layer(x, pos, w), layer(x, pos.expand(3, 9, 1), w.expand(3, 9)))


# ---------------------------------------------------------------- symmetries and modes

@pytest.mark.parametrize("mixer", ALL_MIXERS)
def test_permutation_equivariance(mixer):
    # without coordinates the layer cannot tell the points apart (cosformer needs them: they are
    # permuted with the points)
    pos_dim = 1 if mixer == "cosformer" else 0
    layer = _layer(mixer, pos_dim=pos_dim)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 11, 4, generator=g, dtype=DT)
    w = torch.rand(2, 11, generator=g, dtype=DT)
    pos = torch.rand(2, 11, 1, generator=g, dtype=DT) if pos_dim else None
    perm = torch.randperm(11, generator=g)
    out = layer(x, pos, w)
    out_perm = layer(x[:, perm], None if pos is None else pos[:, perm], w[:, perm])
    torch.testing.assert_close(out_perm, out[:, perm])


@pytest.mark.parametrize("mixer", ALL_MIXERS)
def test_eval_is_deterministic_and_dropout_is_off(mixer):
    layer = _layer(mixer, dropout=0.5)
    no_dropout = _layer(mixer, dropout=0.0)
    no_dropout.load_state_dict(layer.state_dict())
    x, pos = torch.randn(2, 10, 4, dtype=DT), torch.rand(2, 10, 1, dtype=DT)
    first, second = layer(x, pos), layer(x, pos)
    assert torch.equal(first, second)
    torch.testing.assert_close(first, no_dropout(x, pos), rtol=0, atol=0)
    layer.train()
    assert not torch.allclose(layer(x, pos), first)  # dropout is active in training


def test_performer_layers_with_the_same_seed_agree():
    a = Attention(8, n_heads=2, mixer="performer", seed=11, pos_dim=1).double().eval()
    b = Attention(8, n_heads=2, mixer="performer", seed=11, pos_dim=1).double().eval()
    b.load_state_dict(a.state_dict())  # same weights; features must already agree by seed
    torch.manual_seed(5)
    c = Attention(8, n_heads=2, mixer="performer", seed=11, pos_dim=1).double().eval()
    assert torch.equal(c.mixer.omega, a.mixer.omega)
    x, pos = torch.randn(1, 6, 8, dtype=DT), torch.rand(1, 6, 1, dtype=DT)
    assert torch.equal(a(x, pos), b(x, pos))


@pytest.mark.parametrize("mixer", ["galerkin", "linear", "performer", "cosformer", "physics"])
def test_autocast_bfloat16_close_to_float32(mixer):
    torch.manual_seed(0)
    extra = {"seed": 0} if mixer == "performer" else {}
    layer = _randomize(Attention(32, n_heads=4, mixer=mixer, pos_dim=1, **extra), std=0.2).eval()
    g = torch.Generator().manual_seed(0)
    x = torch.randn(2, 512, 32, generator=g)
    pos = (torch.arange(512) / 512.0).expand(2, 512)[..., None]
    with torch.no_grad():
        ref = layer(x, pos)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = layer(x, pos)
    assert low.dtype == torch.bfloat16
    assert float((low.float() - ref).norm() / ref.norm()) < 1e-2


# ---------------------------------------------------------------- construction and init

def test_head_dim_is_independent_of_d_model_over_heads():
    layer = Attention(12, n_heads=3, head_dim=7, mixer="galerkin", pos_dim=2)
    assert layer.q_proj.weight.shape == (21, 12)
    assert layer.out_proj.weight.shape == (12, 3 * (7 + 2))
    assert layer.norms["k"].weight.shape == (3, 7)
    out = layer(torch.randn(2, 5, 12), torch.rand(2, 5, 2))
    assert out.shape == (2, 5, 12)
    assert Attention(12, n_heads=3).head_dim == 4


def test_initialization_is_small_xavier_plus_diagonal_with_zero_bias():
    torch.manual_seed(0)
    layer = Attention(16, n_heads=2, head_dim=12, init_gain=1e-2, init_diagonal=1e-2)
    bound = 1e-2 * math.sqrt(6.0 / (16 + 24))  # xavier-uniform bound for a 24 x 16 matrix
    for proj in (layer.q_proj, layer.k_proj, layer.v_proj):
        rest = proj.weight - 1e-2 * torch.eye(24, 16)
        assert rest.abs().max() <= bound + 1e-9 and rest.std() > 0.3 * bound
        assert torch.equal(proj.bias, torch.zeros(24))


def test_normalized_matrices_follow_the_mixer():
    assert set(Attention(8, n_heads=2, mixer="galerkin").norms) == {"k", "v"}
    assert set(Attention(8, n_heads=2, mixer="fourier").norms) == {"q", "k"}
    assert set(Attention(8, n_heads=2, mixer="linear").norms) == set()
    assert set(Attention(8, n_heads=2, mixer="galerkin", norm=None).norms) == set()
    assert isinstance(Attention(8, n_heads=2, mixer="fourier", norm="layer").norms["q"], HeadLayerNorm)


def test_every_registered_mixer_and_norm_builds_and_backpropagates():
    for mixer in list_mixers():
        for norm in ("column", "layer", None):
            layer = Attention(8, n_heads=2, mixer=mixer, norm=norm, pos_dim=1)
            out = layer(torch.randn(2, 9, 8), torch.rand(2, 9, 1), torch.rand(2, 9))
            out.sum().backward()
            assert out.shape == (2, 9, 8)
            # every parameter learns (a mixer reading no query has no query projection)
            assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())


# ---------------------------------------------------------------- bad input

def test_bad_inputs_raise_clear_errors():
    layer = Attention(8, n_heads=2, pos_dim=2)
    x, pos = torch.randn(2, 5, 8), torch.rand(2, 5, 2)
    with pytest.raises(ValueError, match=r"\(b, n, 8\)"):
        layer(torch.randn(5, 8), pos)  # wrong rank
    with pytest.raises(ValueError, match=r"\(b, n, 8\)"):
        layer(torch.randn(2, 5, 7), pos)  # wrong channel count
    with pytest.raises(ValueError, match="pos must have shape"):
        layer(x, torch.rand(2, 4, 2))  # pos of the wrong length
    with pytest.raises(ValueError, match="pos must have shape"):
        layer(x, torch.rand(2, 5, 1))
    with pytest.raises(ValueError, match="pass pos"):
        layer(x)  # missing pos
    with pytest.raises(ValueError, match="pos_dim=0"):
        Attention(8, n_heads=2)(x, pos)
    with pytest.raises(ValueError, match="weights must have shape"):
        layer(x, pos, torch.rand(2, 4))
    with pytest.raises(ValueError, match="nonnegative"):
        layer(x, pos, -torch.rand(2, 5))
    with pytest.raises(ValueError, match="NaN"):
        layer(x, pos, torch.full((2, 5), float("nan")))
    with pytest.raises(ValueError, match="sum to 0"):
        layer(x, pos, torch.zeros(2, 5))


def test_bad_construction_raises_clear_errors():
    with pytest.raises(KeyError, match="galerkin"):
        Attention(8, n_heads=2, mixer="galerkn")
    with pytest.raises(KeyError, match="column"):
        Attention(8, n_heads=2, norm="batch")
    with pytest.raises(ValueError, match="no option"):
        Attention(8, n_heads=2, mixer="galerkin", n_features=4)
    with pytest.raises(ValueError, match="pos_dim > 0"):
        Attention(8, n_heads=2, mixer="cosformer")
    with pytest.raises(ValueError, match="head_dim"):
        Attention(8, n_heads=2, head_dim=0)
    with pytest.raises(ValueError, match="dropout"):
        Attention(8, n_heads=2, dropout=1.0)


def test_norm_builder_rejects_unknown_names():
    with pytest.raises(KeyError, match="or None"):
        build_norm("instance", 2, 4)


# ---------------------------------------------------------------- folded output projection

@pytest.mark.parametrize("norm", ["column", "layer"])
@pytest.mark.parametrize("weighted", [False, True])
def test_folded_output_projection_equals_projecting_the_mixer_output(norm, weighted):
    # associative Fourier goes through the folded path out_proj(q kv) = q (kv W^T) + b; the dense
    # Fourier kernel (same operator) through out_proj(mixer(q, k, v)): values and gradients agree
    folded = _layer("fourier", norm=norm, pos_dim=2, associative=True)
    plain = _layer("fourier", norm=norm, pos_dim=2)
    plain.load_state_dict(folded.state_dict())
    g = torch.Generator().manual_seed(2)
    x = torch.randn(2, 7, 4, generator=g, dtype=DT)
    pos = torch.rand(2, 7, 2, generator=g, dtype=DT)
    w = torch.rand(2, 7, generator=g, dtype=DT) if weighted else None
    outs, grads = [], []
    for layer in (folded, plain):
        xi = x.clone().requires_grad_()
        out = layer(xi, pos, w)
        out.square().sum().backward()
        outs.append(out.detach())
        grads.append([xi.grad] + [p.grad for p in layer.parameters()])
    torch.testing.assert_close(outs[0], outs[1])
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b)


def test_folded_galerkin_layer_passes_gradcheck():
    layer = _layer("galerkin", norm="layer", pos_dim=1)
    g = torch.Generator().manual_seed(3)
    x = torch.randn(2, 5, 4, generator=g, dtype=DT, requires_grad=True)
    pos = torch.rand(2, 5, 1, generator=g, dtype=DT)
    assert torch.autograd.gradcheck(lambda t: layer(t, pos), (x,))
