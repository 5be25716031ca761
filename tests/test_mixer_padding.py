"""Every registered mixer on padded point sets, through the attention layer, in float64.

Point-set batches hold samples of different sizes padded to one length: the padding points carry
quadrature weight 0 and arbitrary finite values (features and coordinates).  Invariants:

- padding invariance: on the real points, the padded batch gives what each sample alone gives;
- permutation equivariance: reordering the points (padding included) reorders the output.
"""
from __future__ import annotations

import pytest
import torch

from petrov.operators import MIXERS, Attention, list_mixers

D_MODEL, HEADS, POS = 8, 2, 2
SIZES = (7, 4)  # real points per sample
N_PAD = 10  # padded length
NORMS = ["column", "layer", None]


def layer(mixer: str, norm) -> Attention:
    torch.manual_seed(0)
    options = {"seed": 3} if mixer == "performer" else {}
    # a larger init than the default, so that every kernel is far from its linear regime
    return Attention(D_MODEL, pos_dim=POS, n_heads=HEADS, mixer=mixer, norm=norm, init_gain=1.0,
                     **options).double().eval()


def sample(n: int, seed: int):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(1, n, D_MODEL, generator=g, dtype=torch.float64)
    pos = torch.rand(1, n, POS, generator=g, dtype=torch.float64)
    w = torch.rand(1, n, generator=g, dtype=torch.float64) + 0.2
    return x, pos, w


def padded_batch():
    """The samples of ``SIZES`` padded to ``N_PAD`` points with large, arbitrary finite values."""
    g = torch.Generator().manual_seed(99)
    x = 30 * torch.randn(len(SIZES), N_PAD, D_MODEL, generator=g, dtype=torch.float64)
    pos = 4 * torch.randn(len(SIZES), N_PAD, POS, generator=g, dtype=torch.float64)  # also outside [0, 1]²
    w = torch.zeros(len(SIZES), N_PAD, dtype=torch.float64)
    for b, n in enumerate(SIZES):
        xb, pb, wb = sample(n, b)
        x[b, :n], pos[b, :n], w[b, :n] = xb[0], pb[0], wb[0]
    return x, pos, w


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("mixer", list_mixers())
def test_padding_points_of_weight_zero_change_nothing_on_the_real_points(mixer, norm):
    attn = layer(mixer, norm)
    x, pos, w = padded_batch()
    with torch.no_grad():
        out = attn(x, pos, w)
        assert torch.isfinite(out).all()  # padding outputs are finite (and ignored)
        for b, n in enumerate(SIZES):
            alone = attn(*sample(n, b))
            torch.testing.assert_close(out[b, :n], alone[0], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("norm", NORMS)
@pytest.mark.parametrize("mixer", list_mixers())
def test_attention_is_permutation_equivariant_on_padded_batches(mixer, norm):
    attn = layer(mixer, norm)
    x, pos, w = padded_batch()
    perm = torch.randperm(N_PAD, generator=torch.Generator().manual_seed(5))  # padding moves in between
    with torch.no_grad():
        out = attn(x, pos, w)
        shuffled = attn(x[:, perm], pos[:, perm], w[:, perm])
    for b, n in enumerate(SIZES):
        real = w[b, perm] > 0
        torch.testing.assert_close(shuffled[b, real], out[b, perm[real]], rtol=1e-11, atol=1e-12)


@pytest.mark.parametrize("mixer", list_mixers())
def test_padding_gradients_are_finite_and_zero_for_padding_values(mixer):
    # a padding point must not leak into the loss of the real points, not even through a NaN gradient
    attn = layer(mixer, "column")
    x, pos, w = padded_batch()
    x.requires_grad_(True)
    mask = w > 0
    out = attn(x, pos, w)
    (out * mask[..., None]).square().sum().backward()
    assert torch.isfinite(x.grad).all()
    assert torch.equal(x.grad[~mask], torch.zeros_like(x.grad[~mask]))


def mixer_level(name: str):
    options = {"seed": 3, "eps": 1e-6} if name == "performer" else {}
    return MIXERS.get(name)(5, HEADS, **options).double().eval()


@pytest.mark.parametrize("name", list_mixers())
def test_mixer_ignores_padding_whatever_its_values(name):
    # at the mixer itself (no normalization in front): real q, k of norm ~ 6, so that the performer's
    # key features exp(ω·k - |k|²/2) are small, and padding keys placed where those features are
    # largest (k = ω_r): a stabilizer that looked at the padding would underflow every real key
    mixer = mixer_level(name)
    g = torch.Generator().manual_seed(7)
    n, pad = 6, 3
    q, k, v = (3 * torch.randn(1, HEADS, n, 5, generator=g, dtype=torch.float64) for _ in range(3))
    pos = torch.rand(1, n, 1, generator=g, dtype=torch.float64)
    w = torch.rand(1, n, generator=g, dtype=torch.float64) + 0.1
    w = w / w.sum()
    alone = mixer(q, k, v, pos=pos, weights=w)
    if name == "performer":
        k_pad = (mixer.omega[:pad] * 5 ** 0.25).expand(1, HEADS, pad, 5)
    else:
        k_pad = 50 * torch.randn(1, HEADS, pad, 5, generator=g, dtype=torch.float64)
    q_pad, v_pad = (50 * torch.randn(1, HEADS, pad, 5, generator=g, dtype=torch.float64) for _ in range(2))
    padded = mixer(torch.cat([q, q_pad], 2), torch.cat([k, k_pad], 2), torch.cat([v, v_pad], 2),
                   pos=torch.cat([pos, torch.full((1, pad, 1), -3.0, dtype=torch.float64)], 1),
                   weights=torch.cat([w, torch.zeros(1, pad, dtype=torch.float64)], 1))
    assert torch.isfinite(padded).all()
    torch.testing.assert_close(padded[:, :, :n], alone, rtol=1e-11, atol=1e-12)
