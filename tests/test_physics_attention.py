"""Physics attention (Transolver's slice attention) against a plainly written reference, in float64,
and its invariants: quadrature weights (duplication, padding), permutation equivariance, options."""
from __future__ import annotations

import math

import pytest
import torch

from petrov.operators import Attention
from petrov.operators.attention.mixers import MIXERS, build_mixer

B, H, N, D, G = 2, 2, 9, 3, 4
DT = torch.float64


def _mixer(seed=0, **options):
    """A float64 mixer with O(1) random parameters and a different temperature per head."""
    mixer = build_mixer("physics", D, H, n_slices=G, **options).double()
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in mixer.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=DT))
        mixer.temperature.copy_(torch.tensor([0.3, 1.7], dtype=DT))
    return mixer


def _kv(seed=1, n=N):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(B, H, n, D, generator=g, dtype=DT) for _ in range(2))


def _weights(seed=2, n=N):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(B, n, generator=g, dtype=DT) + 0.1
    w[:, 4] = 0.0  # a point the quadrature ignores
    return w / w.sum(dim=1, keepdim=True)


@torch.no_grad()
def reference(mixer, k, v, weights):
    """The formula point by point, slice by slice, with explicit loops."""
    b, h, n, d = k.shape
    w = torch.full((b, n), 1.0 / n, dtype=DT) if weights is None else weights
    W_s, b_s = mixer.slice.weight, mixer.slice.bias
    Wq, Wk, Wv = mixer.to_q.weight, mixer.to_k.weight, mixer.to_v.weight
    out = torch.zeros(b, h, n, d, dtype=DT)
    for bi in range(b):
        for hi in range(h):
            tau = float(mixer.temperature[hi].clamp(0.1, 5.0))
            s = []
            for i in range(n):
                logits = [float(W_s[j] @ k[bi, hi, i] + b_s[j]) / tau for j in range(G)]
                top = max(logits)
                e = [math.exp(x - top) for x in logits]
                s.append([x / sum(e) for x in e])
            tokens = []
            for j in range(G):
                num = torch.zeros(d, dtype=DT)
                mass = 0.0
                for i in range(n):
                    num = num + w[bi, i] * s[i][j] * v[bi, hi, i]
                    mass = mass + float(w[bi, i]) * s[i][j]
                tokens.append(num / (mass + mixer.eps))
            qs, ks, vs = ([m @ t for t in tokens] for m in (Wq, Wk, Wv))
            mixed = []
            for j in range(G):
                scores = [math.exp(float(qs[j] @ ks[l]) / math.sqrt(d)) for l in range(G)]
                mixed.append(sum(scores[l] * vs[l] for l in range(G)) / sum(scores))
            for i in range(n):
                out[bi, hi, i] = sum(s[i][j] * mixed[j] for j in range(G))
    return out


@pytest.mark.parametrize("weighted", [False, True])
def test_physics_attention_equals_the_plain_reference(weighted):
    mixer = _mixer()
    k, v = _kv()
    w = _weights() if weighted else None
    q = torch.randn_like(k)  # ignored: the mixer has no query at the points
    z = mixer(q, k, v, weights=w)
    torch.testing.assert_close(z, reference(mixer, k, v, w))
    torch.testing.assert_close(mixer(None, k, v, weights=w), z)


def test_without_weights_it_is_the_plain_sum_ratio_with_uniform_weights():
    mixer = _mixer()
    k, v = _kv()
    uniform = torch.full((B, N), 1.0 / N, dtype=DT)
    torch.testing.assert_close(mixer(None, k, v), mixer(None, k, v, weights=uniform))


def test_a_point_of_weight_2w_equals_two_copies_of_weight_w():
    mixer = _mixer()
    k, v = _kv()
    w = _weights()
    # duplicate point 6: once with its weight doubled, once as two copies that share it
    doubled = w.clone()
    doubled[:, 6] *= 2
    copies = torch.cat([w, w[:, 6:7]], dim=1)
    k2, v2 = (torch.cat([t, t[:, :, 6:7]], dim=2) for t in (k, v))
    one = mixer(None, k, v, weights=doubled)
    two = mixer(None, k2, v2, weights=copies)
    torch.testing.assert_close(two[:, :, :N], one)
    torch.testing.assert_close(two[:, :, N], one[:, :, 6])  # the copy gets the same output


def test_padding_points_of_weight_zero_change_nothing_on_the_real_points():
    mixer = _mixer()
    k, v = _kv()
    w = _weights()
    g = torch.Generator().manual_seed(5)
    pad_k, pad_v = (100 * torch.randn(B, H, 5, D, generator=g, dtype=DT) for _ in range(2))  # large garbage
    padded = mixer(None, torch.cat([k, pad_k], 2), torch.cat([v, pad_v], 2),
                   weights=torch.cat([w, torch.zeros(B, 5, dtype=DT)], 1))
    torch.testing.assert_close(padded[:, :, :N], mixer(None, k, v, weights=w))
    assert torch.isfinite(padded).all()


def test_permutation_equivariance():
    mixer = _mixer()
    k, v = _kv()
    w = _weights()
    perm = torch.randperm(N, generator=torch.Generator().manual_seed(3))
    out = mixer(None, k, v, weights=w)
    torch.testing.assert_close(mixer(None, k[:, :, perm], v[:, :, perm], weights=w[:, perm]), out[:, :, perm])


def test_tokens_are_weighted_averages_so_constants_pass_through():
    # a constant feature field gives tokens equal to it (up to eps), whatever the assignment; the
    # token attention's softmax mixes equal tokens into W_v times them, and de-slicing sums s_ij to 1
    mixer = _mixer(eps=0.0)
    k, _ = _kv()
    c = torch.tensor([0.5, -2.0, 1.5], dtype=DT)
    v = c.expand(B, H, N, D)
    z = mixer.tokens(mixer.slice_weights(k), v, _weights())
    torch.testing.assert_close(z, c.expand(B, H, G, D))
    torch.testing.assert_close(mixer(None, k, v, weights=_weights()), (mixer.to_v.weight @ c).expand(B, H, N, D))


def test_layer_builds_no_query_projection_and_every_parameter_learns():
    layer = Attention(8, n_heads=2, mixer="physics", n_slices=5, pos_dim=1)
    assert layer.q_proj is None and layer.k_proj is not None and layer.v_proj is not None
    assert layer.norms is not None and len(layer.norms) == 0  # the reference normalizes nothing
    out = layer(torch.randn(2, 11, 8), torch.rand(2, 11, 1), torch.rand(2, 11))
    out.square().sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in layer.parameters())
    assert layer.mixer.slice.weight.shape == (5, 4 + 1)  # head_dim 4 + the coordinate
    assert layer.mixer.temperature.shape == (2,)


def test_slice_projection_starts_orthogonal_and_temperature_is_clamped():
    mixer = build_mixer("physics", 8, 3, n_slices=6, temperature=0.7).double()
    w = mixer.slice.weight  # (6, 8): orthonormal rows (drawn in float32)
    torch.testing.assert_close(w @ w.T, torch.eye(6, dtype=DT), rtol=0, atol=1e-6)
    torch.testing.assert_close(mixer.temperature.detach(), torch.full((3,), 0.7, dtype=DT))  # float32 0.7
    k = torch.randn(1, 3, 5, 8, dtype=DT)
    with torch.no_grad():
        mixer.temperature.fill_(-1.0)  # an optimizer step could do this; the clamp holds τ at 0.1
    s = mixer.slice_weights(k)
    expected = torch.softmax(mixer.slice(k) / 0.1, dim=-1)
    torch.testing.assert_close(s, expected)
    torch.testing.assert_close(s.sum(-1), torch.ones(1, 3, 5, dtype=DT))


def test_sums_over_points_run_in_float32_under_autocast():
    mixer = build_mixer("physics", D, H, n_slices=G)
    g = torch.Generator().manual_seed(0)
    k, v = (torch.randn(B, H, 256, D, generator=g).bfloat16() for _ in range(2))
    w = torch.rand(B, 256, generator=g)
    with torch.no_grad(), torch.autocast("cpu", dtype=torch.bfloat16):
        s = mixer.slice_weights(k)
        z = mixer.tokens(s, v, w)
        out = mixer(None, k, v, weights=w)
    assert s.dtype == torch.float32 and z.dtype == torch.float32
    assert out.dtype == torch.bfloat16
    with torch.no_grad():
        exact = mixer.double()(None, k.double(), v.double(), weights=w.double())
    assert float((out.double() - exact).norm() / exact.norm()) < 2e-2


def test_no_causal_form_and_bad_options_raise():
    assert not MIXERS.get("physics").supports_causal
    with pytest.raises(ValueError, match="no causal form"):
        build_mixer("physics", D, H, causal=True)
    with pytest.raises(ValueError, match="n_slices"):
        build_mixer("physics", D, H, n_slices=0)
    with pytest.raises(ValueError, match="temperature"):
        build_mixer("physics", D, H, temperature=0.0)
    with pytest.raises(ValueError, match="temperature"):
        build_mixer("physics", D, H, temperature=9.0)
    with pytest.raises(ValueError, match="eps"):
        build_mixer("physics", D, H, eps=-1.0)
    mixer = build_mixer("physics", D, H, n_slices=G)
    k, v = _kv()
    with pytest.raises(ValueError, match="built for 2 heads of width 3"):
        mixer.float()(None, k[:, :1].float(), v[:, :1].float())
    with pytest.raises(ValueError, match=r"\(b, h, n, d\)"):
        mixer(None, k.float(), None)
