"""Layout conversions: values, gradients (float64 gradcheck) and the memory layout gradients arrive in.

The conversions materialize contiguous tensors both ways; a gradient in the other layout makes every
elementwise op of the backward pass walk memory transposed (a speed problem, never a wrong number).
"""
from __future__ import annotations

import torch

from petrov.grids.layout import channels_first, channels_last, grid_to_points, points_to_grid
from petrov.operators.attention.kernels import weighted_outer

DT = torch.float64


def _x(*shape, seed=0):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(*shape, generator=g, dtype=DT, requires_grad=True)


def test_channels_first_and_last_are_movedim_and_inverse():
    x = _x(2, 5, 4, 3)  # (b, h, w, c)
    cf = channels_first(x)
    assert cf.shape == (2, 3, 5, 4) and cf.is_contiguous()
    torch.testing.assert_close(cf, x.movedim(-1, 1), rtol=0, atol=0)
    torch.testing.assert_close(channels_last(cf), x, rtol=0, atol=0)
    # the output is a new tensor, also when movedim is already contiguous (c = 1)
    y = _x(2, 5, 1)
    assert channels_first(y).data_ptr() != y.data_ptr()


def test_layout_conversions_pass_gradcheck():
    x = _x(2, 4, 3)
    assert torch.autograd.gradcheck(lambda t: channels_first(t) * torch.arange(4, dtype=DT), (x,))
    assert torch.autograd.gradcheck(lambda t: channels_last(t).cumsum(-1), (x,))


def _grad_seen_by(t: torch.Tensor, seen: list) -> torch.Tensor:
    """``t`` through an identity whose hook records the gradient as autograd delivers it (a leaf's
    ``.grad`` would be re-laid out by AccumulateGrad and hide the layout)."""
    mid = t * 1.0
    mid.register_hook(seen.append)
    return mid


def test_gradient_through_a_conversion_is_contiguous_in_the_input_layout():
    x = _x(2, 6, 3)  # channels last
    weight = torch.randn(2, 3, 6, dtype=DT)
    seen = []
    (channels_first(_grad_seen_by(x, seen)) * weight).sum().backward()
    assert seen[0].is_contiguous()
    torch.testing.assert_close(seen[0], weight.movedim(1, -1))


def test_weighted_outer_matches_a_plain_sum_with_and_without_weights():
    b, h, n, f, e = 2, 3, 7, 4, 5
    a, c = _x(b, h, n, f), _x(b, h, n, e, seed=1)
    w = torch.rand(b, n, dtype=DT)
    w = w / w.sum(-1, keepdim=True)
    plain = torch.zeros(b, h, f, e, dtype=DT)
    plain_w = torch.zeros(b, h, f, e, dtype=DT)
    for j in range(n):
        outer = a[:, :, j, :, None] * c[:, :, j, None, :]
        plain += outer / n
        plain_w += w[:, None, j, None, None] * outer
    torch.testing.assert_close(weighted_outer(a, c, None), plain)
    torch.testing.assert_close(weighted_outer(a, c, w), plain_w)


def test_weighted_outer_gradients_pass_gradcheck_and_keep_points_major_layout():
    a, c = _x(2, 2, 5, 3), _x(2, 2, 5, 4, seed=1)
    w = torch.rand(2, 5, dtype=DT)
    assert torch.autograd.gradcheck(lambda s, t: weighted_outer(s, t, None), (a, c))
    assert torch.autograd.gradcheck(lambda s, t: weighted_outer(s, t, w), (a, c))
    seen = []
    weighted_outer(_grad_seen_by(a, seen), _grad_seen_by(c, seen), None).square().sum().backward()
    assert len(seen) == 2 and all(g.is_contiguous() for g in seen)


def test_points_grid_round_trip():
    x = _x(2, 3, 4, 5)
    torch.testing.assert_close(points_to_grid(grid_to_points(x), (3, 4)), x, rtol=0, atol=0)
