"""Causal attention in float64: the chunked parallel form against the masked O(n²) formula written
out with loops, the recurrent steps against the parallel form, gradients, and causality itself."""
from __future__ import annotations

import math

import pytest
import torch
from torch.nn import functional as F

from petrov.operators import Attention
from petrov.operators.attention.mixers import MIXERS, build_mixer, causal_mixers
from petrov.operators.attention.mixers.causal import causal_kernel_attention, mixer_state, mixer_step
from petrov.operators.attention.mixers.performer import key_shift

B, H, N, D = 2, 2, 7, 3
DT = torch.float64
LINEAR_COST = ["galerkin", "fourier", "linear", "performer", "cosformer"]
CHUNKS = [1, 3, 7, 64]  # 3 does not divide 7; 64 > n


def _randn(*shape, seed=0, scale=1.0):
    return scale * torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=DT)


def _qkv(d=D, n=N, scale=1.0):
    return tuple(_randn(B, H, n, d, seed=s, scale=scale) for s in range(3))


def _weights(n=N):
    w = torch.rand(B, n, generator=torch.Generator().manual_seed(7), dtype=DT) + 0.1
    w[:, 2] = 0.0  # a point the quadrature ignores
    return w / w.sum(dim=1, keepdim=True)


def _pos(n=N):
    return torch.rand(B, n, 1, generator=torch.Generator().manual_seed(8), dtype=DT)


def masked_reference(kernel, v, weights, normalize, eps=0.0):
    """Naive O(n²) causal attention: ``z_i = Σ_{j≤i} w_j κ(i,j) v_j`` (divided by
    ``Σ_{j≤i} w_j κ(i,j) + eps`` if ``normalize``), explicit loops over every pair j ≤ i."""
    b, h, n, e = v.shape
    w = torch.full((b, n), 1.0 / n, dtype=DT) if weights is None else weights
    out = torch.zeros(b, h, n, e, dtype=DT)
    for bi in range(b):
        for hi in range(h):
            for i in range(n):
                num, den = torch.zeros(e, dtype=DT), 0.0
                for j in range(i + 1):
                    kij = kernel(bi, hi, i, j)
                    num = num + w[bi, j] * kij * v[bi, hi, j]
                    den = den + w[bi, j] * kij
                out[bi, hi, i] = num / (den + eps) if normalize else num
    return out


def mixer_and_reference(name, q, k, v, pos):
    """The causal mixer ``name`` (eps where it has one) and its kernel κ(b, h, i, j) written out."""
    d = q.shape[-1]
    dot = lambda fq, fk: (lambda b, h, i, j: float(fq(q[b, h, i]) @ fk(k[b, h, j])))  # noqa: E731
    ident = lambda t: t  # noqa: E731
    if name in ("galerkin", "fourier"):
        return {}, dot(ident, ident), False, 0.0
    if name == "linear":
        phi = lambda t: F.elu(t) + 1  # noqa: E731
        return {"eps": 1e-3}, dot(phi, phi), True, 1e-3
    if name == "performer":
        omega = build_mixer("performer", d, H, n_features=5, seed=3).omega.double()

        def phi(t):  # m^{-1/2} exp(ω x − |x|²/2), x = t / d^{1/4}, unstabilized
            x = t / d ** 0.25
            return torch.exp(omega @ x - x @ x / 2) / math.sqrt(omega.shape[0])

        return {"n_features": 5, "seed": 3, "eps": 0.0}, dot(phi, phi), True, 0.0
    if name == "cosformer":
        def kernel(b, h, i, j):
            cos = math.cos(math.pi / 2 * float(pos[b, i, 0] - pos[b, j, 0]))
            return cos * float(torch.relu(q[b, h, i]) @ torch.relu(k[b, h, j]))

        return {"eps": 1e-4}, kernel, True, 1e-4
    if name == "softmax":
        return {}, lambda b, h, i, j: math.exp(float(q[b, h, i] @ k[b, h, j]) / math.sqrt(d)), True, 0.0
    raise AssertionError(name)


def test_causal_mixers_are_declared_by_class_attribute():
    assert causal_mixers() == sorted(LINEAR_COST + ["softmax"])


def _check_against_masked_formula(name, weighted, **extra):
    q, k, v = _qkv()
    w, pos = (_weights() if weighted else None), _pos()
    options, kernel, normalize, eps = mixer_and_reference(name, q, k, v, pos)
    mixer = build_mixer(name, D, H, causal=True, **options, **extra).double().eval()
    z = mixer(q, k, v, pos=pos, weights=w)
    torch.testing.assert_close(z, masked_reference(kernel, v, w, normalize, eps))


@pytest.mark.parametrize("chunk", CHUNKS)
@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", LINEAR_COST)
def test_parallel_form_equals_masked_quadratic_formula(name, weighted, chunk):
    _check_against_masked_formula(name, weighted, chunk_size=chunk)


@pytest.mark.parametrize("weighted", [False, True])
def test_causal_softmax_equals_masked_quadratic_formula(weighted):
    _check_against_masked_formula("softmax", weighted)


@pytest.mark.parametrize("weighted", [False, True])
@pytest.mark.parametrize("name", LINEAR_COST)
def test_recurrent_steps_equal_parallel_form(name, weighted):
    q, k, v = _qkv(scale=2.0)
    w, pos = (_weights() if weighted else None), _pos()
    options = mixer_and_reference(name, q, k, v, pos)[0]
    mixer = build_mixer(name, D, H, causal=True, chunk_size=3, **options).double().eval()
    parallel = mixer(q, k, v, pos=pos, weights=w)
    state = mixer_state(mixer, B, H, D, 1, dtype=DT)
    size = [t.shape for t in state]
    steps = []
    for t in range(N):
        weight = 1.0 / N if w is None else w[:, t]
        z, state = mixer_step(mixer, state, q[:, :, t], k[:, :, t], v[:, :, t], pos[:, t], weight)
        assert [s.shape for s in state] == size  # constant-size state
        steps.append(z)
    torch.testing.assert_close(torch.stack(steps, dim=2), parallel)


@pytest.mark.parametrize("eps", [None, 1e-2])
def test_chunked_kernel_passes_gradcheck(eps):
    phi_q, phi_k = (_randn(1, 2, 5, 3, seed=s).exp().requires_grad_() for s in (0, 1))
    v = _randn(1, 2, 5, 2, seed=2).requires_grad_()
    w = _weights(5)[:1].requires_grad_()
    fn = lambda a, b, c, d: causal_kernel_attention(a, b, c, d, eps, chunk_size=2)  # noqa: E731
    assert torch.autograd.gradcheck(fn, (phi_q, phi_k, v, w))


@pytest.mark.parametrize("mixer", LINEAR_COST + ["softmax"])
def test_layer_outputs_before_i_do_not_move_when_later_points_change(mixer):
    torch.manual_seed(0)
    options = {"seed": 0} if mixer == "performer" else {}
    layer = Attention(6, n_heads=2, mixer=mixer, norm="layer", pos_dim=1, causal=True, **options).double().eval()
    x, pos, w = _randn(B, N, 6, seed=4), _pos(), _weights()
    i = 3
    x2 = x.clone()
    x2[:, i + 1:] = _randn(B, N - i - 1, 6, seed=5)
    before, after = layer(x, pos, w), layer(x2, pos, w)
    torch.testing.assert_close(after[:, : i + 1], before[:, : i + 1], rtol=0, atol=0)
    assert (after[:, i + 1:] - before[:, i + 1:]).abs().min() > 0  # later points did move


@pytest.mark.parametrize("mixer", LINEAR_COST)
def test_layer_steps_equal_layer_forward(mixer):
    torch.manual_seed(1)
    options = {"seed": 0} if mixer == "performer" else {}
    layer = Attention(6, n_heads=2, mixer=mixer, norm="layer", pos_dim=1, causal=True, chunk_size=2,
                      **options).double().eval()
    x, pos = _randn(B, N, 6, seed=4), _pos()
    for w in (None, _weights()):
        state = layer.init_state(B, N)
        ys = []
        for t in range(N):
            y, state = layer.step(state, x[:, t], pos[:, t], None if w is None else w[:, t])
            ys.append(y)
        torch.testing.assert_close(torch.stack(ys, dim=1), layer(x, pos, w))


def test_causal_layer_passes_gradcheck():
    torch.manual_seed(2)
    layer = Attention(4, n_heads=2, mixer="galerkin", norm="layer", pos_dim=1, causal=True, chunk_size=2).double()
    x = _randn(1, 5, 4, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(lambda t: layer(t, _pos(5)[:1]), (x,))


def test_full_sequence_state_is_the_noncausal_result():
    # the last causal output sees every point: it equals the non-causal layer's last row
    torch.manual_seed(3)
    causal = Attention(6, n_heads=2, mixer="linear", norm=None, causal=True, chunk_size=3).double()
    plain = Attention(6, n_heads=2, mixer="linear", norm=None).double()
    plain.load_state_dict(causal.state_dict())
    x = _randn(B, N, 6, seed=9)
    torch.testing.assert_close(causal(x)[:, -1], plain(x)[:, -1])


def test_performer_causal_key_shift_cancels_for_wide_heads():
    d = 160  # max |ω_r|²/2 exceeds the headroom: the keys are shifted by a constant
    q, k, v = _qkv(d=d, n=5, scale=0.3)
    mixer = build_mixer("performer", d, H, n_features=8, seed=0, eps=0.0, causal=True).double().eval()
    assert key_shift(mixer.omega) > 0
    omega = mixer.omega

    def phi(t):
        x = t / d ** 0.25
        return torch.exp(omega @ x - x @ x / 2) / math.sqrt(omega.shape[0])

    kernel = lambda b, h, i, j: float(phi(q[b, h, i]) @ phi(k[b, h, j]))  # noqa: E731
    torch.testing.assert_close(mixer(q, k, v), masked_reference(kernel, v, None, True))


def test_column_norm_with_causal_is_refused():
    with pytest.raises(ValueError, match="point-wise normalization.*norm='layer' or None"):
        Attention(8, n_heads=2, mixer="galerkin", norm="column", causal=True)
    Attention(8, n_heads=2, mixer="linear", norm="column", causal=True)  # linear normalizes nothing: fine


def test_mixer_without_causal_support_is_refused(monkeypatch):
    class Plain(torch.nn.Module):
        def __init__(self, head_dim, n_heads):
            super().__init__()

    monkeypatch.setitem(MIXERS._entries, "plain", Plain)
    with pytest.raises(ValueError, match="'plain' has no causal form; causal=True works with"):
        Attention(8, n_heads=2, mixer="plain", norm=None, causal=True)


def test_recurrent_entry_points_refuse_what_they_cannot_do():
    with pytest.raises(ValueError, match="causal=True"):
        Attention(8, n_heads=2, mixer="galerkin", norm="layer").init_state(1, 4)
    with pytest.raises(ValueError, match="'softmax' has no recurrent form"):
        Attention(8, n_heads=2, mixer="softmax", causal=True).init_state(1, 4)
    layer = Attention(8, n_heads=2, mixer="galerkin", norm="layer", causal=True)
    with pytest.raises(ValueError, match="state from init_state"):
        layer.step(None, torch.zeros(1, 8))
    with pytest.raises(ValueError, match=r"x_t of shape \(b, 8\)"):
        layer.step(layer.init_state(1, 4), torch.zeros(1, 3, 8))
    with pytest.raises(ValueError, match="does not fit"):
        layer.step(layer.init_state(2, 4), torch.zeros(1, 8))
    with pytest.raises(ValueError, match="weight_t must be finite and >= 0"):
        layer.step(layer.init_state(1, 4), torch.zeros(1, 8), weight_t=-0.5)


@pytest.mark.parametrize("options", [{"chunk_size": 0}, {"chunk_size": 2.5}, {"causal": "yes"}])
def test_bad_causal_options_raise(options):
    with pytest.raises(ValueError, match="chunk_size|causal"):
        build_mixer("linear", D, H, **options)


def test_causal_softmax_with_zero_first_weight_is_an_error():
    q, k, v = _qkv()
    w = _weights()
    w[:, 0] = 0.0
    with pytest.raises(ValueError, match="first token has weight 0"):
        build_mixer("softmax", D, H, causal=True)(q, k, v, weights=w)


@pytest.mark.parametrize("mixer", LINEAR_COST)
def test_causal_autocast_bfloat16_close_to_float32_in_both_forms(mixer):
    # prefix sums, features and normalizers run in float32 under autocast, so bfloat16 loses only
    # the digits of its inputs and outputs
    torch.manual_seed(0)
    extra = {"seed": 0} if mixer == "performer" else {}
    layer = Attention(32, n_heads=4, mixer=mixer, norm="layer", pos_dim=1, causal=True, **extra).eval()
    x = torch.randn(2, 300, 32, generator=torch.Generator().manual_seed(0))
    pos = (torch.arange(300) / 300.0).expand(2, 300)[..., None]
    with torch.no_grad():
        ref = layer(x, pos)
        with torch.autocast("cpu", dtype=torch.bfloat16):
            low = layer(x, pos)
            state = layer.init_state(2, 300)
            y, state = layer.step(state, x[:, 0], pos[:, 0])
    assert state.mixer.kv.dtype == torch.float32
    assert float((low.float() - ref).norm() / ref.norm()) < 2e-2
    assert float((y.float() - ref[:, 0]).norm() / ref[:, 0].norm()) < 2e-2


def test_chunked_form_never_keeps_a_state_per_point():
    # what autograd saves for backward: chunk-sized score blocks and one f x e state per chunk,
    # never the n x f x e prefix states of every point
    n, f, e, c = 2048, 16, 16, 32
    phi_q, phi_k = (_randn(1, 1, n, f, seed=s).exp().requires_grad_() for s in (0, 1))
    v = _randn(1, 1, n, e, seed=2).requires_grad_()
    sizes = []

    def pack(t):
        sizes.append(t.numel())
        return t

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda t: t):
        causal_kernel_attention(phi_q, phi_k, v, None, 1e-6, chunk_size=c).sum().backward()
    assert max(sizes) <= n * c  # the masked c x c blocks: n c entries
    assert max(sizes) < n * f * e / 2


def test_cosformer_steps_on_its_own_domain():
    torch.manual_seed(4)
    layer = Attention(6, n_heads=2, mixer="cosformer", norm=None, pos_dim=1, causal=True, domain=(2.0, 3.0)).double()
    x, pos = _randn(B, N, 6, seed=4), 2.0 + _pos()
    state = layer.init_state(B, N)
    ys = []
    for t in range(N):
        y, state = layer.step(state, x[:, t], pos[:, t])
        ys.append(y)
    torch.testing.assert_close(torch.stack(ys, dim=1), layer(x, pos))
