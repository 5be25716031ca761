"""Attention kernels ("mixers") against plainly written O(n²) references, in float64.

Every mixer computes ``z_i = Σ_j w_j κ(i, j) v_j`` (optionally divided by ``Σ_j w_j κ(i, j) + eps``)
for its own kernel κ; the references below build κ entry by entry with explicit loops.
"""
from __future__ import annotations

import importlib
import math

import pytest
import torch
from torch.nn import functional as F

from petrov.operators.attention.mixers import MIXERS, build_mixer, list_mixers, mixer_options
from petrov.operators.attention.mixers.cosformer import cos_sin_terms
from petrov.operators.attention.mixers.performer import draw_omega, favor_features, seeded_generator

B, H, N, D = 2, 2, 7, 3
DT = torch.float64


def _qkv(seed=0, d=D, n=N, scale=1.0):
    g = torch.Generator().manual_seed(seed)
    return tuple(scale * torch.randn(B, H, n, d, generator=g, dtype=DT) for _ in range(3))


def _weights(seed=1, n=N, with_zero=True):
    g = torch.Generator().manual_seed(seed)
    w = torch.rand(B, n, generator=g, dtype=DT) + 0.1
    if with_zero:
        w[:, 2] = 0.0  # a point the quadrature ignores
    return w / w.sum(dim=1, keepdim=True)


def _pos(seed=2, p=1, n=N):
    g = torch.Generator().manual_seed(seed)
    return torch.rand(B, n, p, generator=g, dtype=DT)


def reference(kernel, q, k, v, weights, normalize, eps=0.0):
    """Naive O(n²): ``kernel(b, h, i, j)`` is a scalar; explicit loops over every pair."""
    b, h, n, _ = q.shape
    w = torch.full((b, n), 1.0 / n, dtype=DT) if weights is None else weights
    out = torch.zeros(b, h, n, v.shape[-1], dtype=DT)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                num = torch.zeros(v.shape[-1], dtype=DT)
                den = 0.0
                for j in range(n):
                    kij = kernel(bi, hi, i, j)
                    num = num + w[bi, j] * kij * v[bi, hi, j]
                    den = den + w[bi, j] * kij
                out[bi, hi, i] = num / (den + eps) if normalize else num
    return out


def _dot_kernel(q, k, fq=lambda t: t, fk=None):
    fk = fk or fq
    return lambda b, h, i, j: float(fq(q[b, h, i]) @ fk(k[b, h, j]))


WEIGHTS = [None, "random"]


@pytest.mark.parametrize("weights", WEIGHTS)
@pytest.mark.parametrize("name", ["galerkin", "fourier"])
def test_galerkin_and_fourier_are_quadratures_of_q_dot_k(name, weights):
    # both are z_i = Σ_j w_j (q_i·k_j) v_j; they differ only in what the layer normalizes
    q, k, v = _qkv()
    w = None if weights is None else _weights()
    z = build_mixer(name, D, H)(q, k, v, weights=w)
    torch.testing.assert_close(z, reference(_dot_kernel(q, k), q, k, v, w, normalize=False))


@pytest.mark.parametrize("weights", WEIGHTS)
def test_fourier_associative_option_is_the_same_operator(weights):
    q, k, v = _qkv()
    w = None if weights is None else _weights()
    plain = build_mixer("fourier", D, H)(q, k, v, weights=w)
    torch.testing.assert_close(build_mixer("fourier", D, H, associative=True)(q, k, v, weights=w), plain)


@pytest.mark.parametrize("weights", WEIGHTS)
def test_softmax_with_quadrature_weights(weights):
    q, k, v = _qkv()
    w = None if weights is None else _weights()
    kernel = lambda b, h, i, j: math.exp(float(q[b, h, i] @ k[b, h, j]) / math.sqrt(D))  # noqa: E731
    z = build_mixer("softmax", D, H)(q, k, v, weights=w)
    torch.testing.assert_close(z, reference(kernel, q, k, v, w, normalize=True))


@pytest.mark.parametrize("weights", WEIGHTS)
def test_linear_elu_kernel(weights):
    q, k, v = _qkv()
    w = None if weights is None else _weights()
    phi = lambda t: F.elu(t) + 1  # noqa: E731
    z = build_mixer("linear", D, H, eps=1e-3)(q, k, v, weights=w)
    torch.testing.assert_close(z, reference(_dot_kernel(q, k, phi), q, k, v, w, normalize=True, eps=1e-3))


@pytest.mark.parametrize("weights", WEIGHTS)
def test_performer_equals_its_explicit_random_feature_kernel(weights):
    # inputs large enough that the stabilizers shift the exponents a lot; they must cancel
    q, k, v = _qkv(scale=3.0)
    w = None if weights is None else _weights()
    mixer = build_mixer("performer", D, H, n_features=5, seed=3, eps=0.0).double()
    omega = mixer.omega

    def phi(t):  # m^{-1/2} exp(ω x − |x|²/2), x = t / d^{1/4}, unstabilized
        x = t / D ** 0.25
        return torch.exp(omega @ x - x @ x / 2) / math.sqrt(omega.shape[0])

    z = mixer.eval()(q, k, v, weights=w)
    torch.testing.assert_close(z, reference(_dot_kernel(q, k, phi), q, k, v, w, normalize=True))


def test_performer_approximates_softmax_with_many_features():
    q, k, v = _qkv(scale=0.5)
    w = _weights()
    exact = build_mixer("softmax", D, H)(q, k, v, weights=w)
    approx = build_mixer("performer", D, H, n_features=4096, seed=0).double().eval()(q, k, v, weights=w)
    assert (approx - exact).abs().max() < 0.05 * exact.abs().max()


def test_performer_stabilizer_keeps_float32_finite():
    # logits ~ |q||k|/sqrt(d) of a few hundred: exp overflows float32 without the stabilizer
    q, k, v = _qkv(seed=5, scale=12.0)
    mixer = build_mixer("performer", D, H, n_features=8, seed=1, eps=0.0).double().eval()
    exact = mixer(q, k, v)
    z32 = mixer.float()(q.float(), k.float(), v.float())
    assert torch.isfinite(z32).all()
    assert (z32.double() - exact).abs().max() < 1e-3 * exact.abs().max()


@pytest.mark.parametrize("p", [1, 2])
@pytest.mark.parametrize("weights", WEIGHTS)
def test_cosformer_decomposed_form_equals_direct_cos_weighted_form(p, weights):
    q, k, v = _qkv()
    w = None if weights is None else _weights()
    pos = _pos(p=p)

    def kernel(b, h, i, j):
        cos = math.prod(math.cos(math.pi / 2 * float(pos[b, i, a] - pos[b, j, a])) for a in range(p))
        return cos * float(torch.relu(q[b, h, i]) @ torch.relu(k[b, h, j]))

    z = build_mixer("cosformer", D, H, eps=1e-4)(q, k, v, pos=pos, weights=w)
    torch.testing.assert_close(z, reference(kernel, q, k, v, w, normalize=True, eps=1e-4))


def test_cos_sin_terms_factor_the_product_of_cosines():
    x = _pos(p=3)
    terms = cos_sin_terms(x)  # (b, n, 8)
    assert terms.shape == (B, N, 8)
    direct = torch.cos(math.pi / 2 * (x[:, :, None, :] - x[:, None, :, :])).prod(dim=-1)
    torch.testing.assert_close(terms @ terms.transpose(1, 2), direct)


def test_cosformer_domain_rescales_and_rejects_outside_points():
    q, k, v = _qkv()
    pos = _pos(p=2)
    base = build_mixer("cosformer", D, H)(q, k, v, pos=pos)
    scaled = build_mixer("cosformer", D, H, domain=(-1.0, 3.0))(q, k, v, pos=4 * pos - 1)
    torch.testing.assert_close(scaled, base)
    with pytest.raises(ValueError, match="outside the domain"):
        build_mixer("cosformer", D, H)(q, k, v, pos=pos + 1.5)
    with pytest.raises(ValueError, match="needs the point coordinates"):
        build_mixer("cosformer", D, H)(q, k, v)


@pytest.mark.parametrize("name", ["galerkin", "fourier", "softmax", "linear", "performer", "cosformer", "physics"])
def test_none_weights_equal_explicit_uniform_weights(name):
    q, k, v = _qkv()
    mixer = build_mixer(name, D, H, **({"seed": 0} if name == "performer" else {})).double().eval()
    pos = _pos(p=1)
    uniform = torch.full((B, N), 1.0 / N, dtype=DT)
    torch.testing.assert_close(mixer(q, k, v, pos=pos, weights=uniform), mixer(q, k, v, pos=pos))


@pytest.mark.parametrize("name, where, helper", [
    ("galerkin", "kernels", "weighted_outer"),  # via kernels.key_value_matrix
    ("linear", "kernels", "normalized_kernel_attention"),  # via kernels.feature_map_attention
    ("performer", "kernels", "normalized_kernel_attention"),
    ("cosformer", "mixers.cosformer", "normalized_kernel_attention"),
    ("physics", "mixers.physics", "slice_sums"),  # the slice tokens: Σ_i w_i s_ij v_i and Σ_i w_i s_ij
])
def test_linear_kernels_sum_and_normalize_in_float32_under_autocast(name, where, helper, monkeypatch):
    module = importlib.import_module(f"petrov.operators.attention.{where}")
    original, seen = getattr(module, helper), []

    def spy(*tensors_and_options):
        tensors = [t for t in tensors_and_options if isinstance(t, torch.Tensor)]
        seen.append((torch.is_autocast_enabled("cpu"), {t.dtype for t in tensors}))
        return original(*tensors_and_options)

    monkeypatch.setattr(module, helper, spy)
    q, k, v = (t.float().bfloat16() for t in _qkv(n=64))
    mixer = build_mixer(name, D, H, **({"seed": 0} if name == "performer" else {})).eval().requires_grad_(False)
    pos = _pos(p=1, n=64).float()
    with torch.autocast("cpu", dtype=torch.bfloat16):
        z = mixer(q, k, v, pos=pos, weights=_weights(n=64).float())
    assert seen == [(False, {torch.float32})]
    assert z.dtype == torch.bfloat16  # handed back in the caller's dtype
    exact = mixer.double()(q.double(), k.double(), v.double(), pos=pos.double(), weights=_weights(n=64))
    assert float((z.double() - exact).abs().max() / exact.abs().max()) < 1e-2


# ---------------------------------------------------------------- FAVOR+ random features

def _kernel_estimate_error(m: int, ortho: bool, seeds=range(64), d=16) -> float:
    """RMS relative error of φ(q)·φ(k) against exp(q·k/√d), over a fixed set of seeds."""
    g = torch.Generator().manual_seed(0)
    q, k = (0.3 * torch.randn(32, d, generator=g, dtype=DT) for _ in range(2))
    exact = torch.exp(q @ k.T / math.sqrt(d))
    s = d ** -0.25
    errors = []
    for seed in seeds:
        omega = draw_omega(m, d, seeded_generator(seed, 0), ortho)
        estimate = favor_features(q * s, omega) @ favor_features(k * s, omega).T
        errors.append((((estimate - exact) / exact) ** 2).mean())
    return float(torch.stack(errors).mean().sqrt())


def test_favor_estimate_error_falls_as_features_grow():
    errors = [_kernel_estimate_error(m, ortho=True) for m in (16, 64, 256)]
    assert errors[0] > 1.5 * errors[1] > 2.25 * errors[2]  # ~ m^{-1/2}: halves per 4x features


@pytest.mark.parametrize("m", [16, 32])
def test_orthogonal_features_beat_iid_at_equal_count(m):
    assert _kernel_estimate_error(m, ortho=True) < 0.97 * _kernel_estimate_error(m, ortho=False)


def test_orthogonal_blocks_are_orthogonal_with_chi_norms():
    omega = draw_omega(20, 8, seeded_generator(0, 0), ortho=True)
    for block in (omega[:8], omega[8:16]):
        gram = block @ block.T
        torch.testing.assert_close(gram, torch.diag(torch.diagonal(gram)))
    assert omega.shape == (20, 8)
    assert not torch.allclose(omega[:8].norm(dim=1), omega[:8].norm(dim=1)[0].expand(8))


def test_performer_same_seed_same_features_and_different_seed_differs():
    a, b, c = (build_mixer("performer", 5, 1, seed=s) for s in (7, 7, 8))
    assert torch.equal(a.omega, b.omega)
    assert not torch.allclose(a.omega, c.omega)


def test_performer_redraws_every_interval_in_training_and_freezes_in_eval():
    q, k, v = _qkv()
    mixer = build_mixer("performer", D, H, seed=4, redraw_interval=3).double()
    first = mixer.omega.clone()
    mixer.eval()
    for _ in range(5):
        mixer(q, k, v)
    assert torch.equal(mixer.omega, first) and int(mixer.calls) == 0
    mixer.train()
    for _ in range(3):
        mixer(q, k, v)
    assert torch.equal(mixer.omega, first)
    mixer(q, k, v)  # 4th training call: second draw
    assert not torch.allclose(mixer.omega, first)
    twin = build_mixer("performer", D, H, seed=4, redraw_interval=3).double()
    twin.redraw(1)
    assert torch.equal(mixer.omega, twin.omega) and int(mixer.draw) == 1


def test_performer_never_redraws_with_interval_zero():
    q, k, v = _qkv()
    mixer = build_mixer("performer", D, H, seed=4, redraw_interval=0).double().train()
    first = mixer.omega.clone()
    for _ in range(5):
        mixer(q, k, v)
    assert torch.equal(mixer.omega, first)


def test_performer_state_dict_reproduces_outputs():
    q, k, v = _qkv()
    trained = build_mixer("performer", D, H, seed=1, redraw_interval=1).double().train()
    trained(q, k, v)
    trained(q, k, v)  # now on draw 1
    fresh = build_mixer("performer", D, H, seed=99, redraw_interval=1).double()
    fresh.load_state_dict(trained.state_dict())
    trained.eval(), fresh.eval()
    torch.testing.assert_close(fresh(q, k, v), trained(q, k, v), rtol=0, atol=0)


# ---------------------------------------------------------------- registry and options

def test_registry_lists_the_six_mixers_with_their_norm_choice():
    assert set(list_mixers()) >= {"galerkin", "fourier", "softmax", "linear", "performer", "cosformer"}
    assert set(MIXERS.get("galerkin").normalized) == {"k", "v"}
    assert set(MIXERS.get("fourier").normalized) == {"q", "k"}
    for name in ("softmax", "linear", "performer", "cosformer", "physics"):
        assert MIXERS.get(name).normalized == ()
    assert MIXERS.get("physics").inputs == ("k", "v")  # no query at the points
    assert set(mixer_options("performer")) == {"n_features", "redraw_interval", "seed", "ortho", "eps",
                                                "causal", "chunk_size"}


@pytest.mark.parametrize("name, options, match", [
    ("galerkin", {"eps": 1e-6}, "no option"),
    ("performer", {"n_feature": 8}, "no option"),
    ("performer", {"n_features": 0}, "n_features"),
    ("performer", {"redraw_interval": -1}, "redraw_interval"),
    ("linear", {"eps": -1.0}, "eps"),
    ("cosformer", {"domain": (1.0, 0.0)}, "domain"),
    ("softmax", {"scale": 0.0}, "scale"),
    ("physics", {"n_slices": 0}, "n_slices"),
    ("physics", {"temperature": -0.5}, "temperature"),
    ("physics", {"n_slice": 8}, "no option"),
])
def test_bad_mixer_options_raise(name, options, match):
    with pytest.raises(ValueError, match=match):
        build_mixer(name, D, H, **options)


def test_unknown_mixer_name_raises_naming_the_valid_ones():
    with pytest.raises(KeyError, match="galerkin"):
        build_mixer("galrkin", D, H)
