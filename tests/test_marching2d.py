"""The 2-D marching models (arfno2d, fno3d, artransolver2d, marching2d) and the trajectory contract with a
history: the given states come back exactly, causality in x and in the teacher, teacher forcing on the
model's own rollout is the rollout, the steps against a plainly written loop, one function at 32, 64 and
128 points per axis, translation equivariance on the torus, bad input.  float64, tiny sizes."""
from __future__ import annotations

import math

import pytest
import torch

from petrov.grids.layout import grid_coordinates
from petrov.operators import build_model

DT = torch.float64
H, T = 2, 3  # history and predicted states of the tiny models
TINY = {
    "arfno2d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
    "fno3d": dict(width=4, modes=3, time_modes=2, n_layers=2, proj_hidden=8, padding=2),
    "artransolver2d": dict(d_model=8, n_layers=2, n_heads=2, n_slices=3, unified_pos=3, init_std=0.5),
    "marching2d": dict(d_model=8, n_layers=1, n_heads=2, latent_size=8, fine_width=4, latent_modes=2,
                       decoder_width=4, modes=3),
}
MODELS_2D = sorted(TINY)
STEPPING_2D = ["arfno2d", "artransolver2d", "marching2d"]
TINY_1D = {
    "marching1d": dict(width=4, modes=3, encoder_layers=1, decoder_layers=1, summary_modes=3, proj_hidden=8,
                       d_model=8, n_layers=2),
    "arfno1d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
}


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def tiny(name, **options):
    torch.manual_seed(0)
    config = {**TINY, **TINY_1D}[name]
    return build_model(name, **{"history": H, "time_steps": T, **config, **options}).to(DT).eval()


def states(shape, count, seed=0):
    """``(*shape, count)`` random states (rough fields: what the contract holds for any input)."""
    return torch.randn(*shape, count, generator=torch.Generator().manual_seed(seed), dtype=DT)


def smooth(n, channels, seed=0):
    """``(2, n, n, channels)``: a few Fourier modes per state on the torus ``x_i = i/n`` (|k| <= 3): the same
    function at every resolution."""
    g = torch.Generator().manual_seed(seed)
    x = torch.arange(n, dtype=DT) / n
    X, Y = torch.meshgrid(x, x, indexing="ij")
    out = torch.zeros(2, n, n, channels, dtype=DT)
    for k1, k2 in [(1, 0), (0, 1), (1, 1), (2, -1), (3, 2)]:
        a, phase = torch.randn(2, 1, 1, channels, generator=g, dtype=DT), torch.rand(2, 1, 1, channels, generator=g)
        out += a / (k1 * k1 + k2 * k2) * torch.cos(2 * math.pi * (k1 * X + k2 * Y)[None, ..., None] + 6.3 * phase)
    return out


def grid_shape(name, n1=12, n2=16):
    return (2, n1) if name in TINY_1D else (2, n1, n2)


# ---- the contract ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS_2D)
@pytest.mark.parametrize("grid", [(12, 16), (16, 16), (13, 9)])
def test_output_holds_the_given_states_then_the_predictions(name, grid):
    model = tiny(name)
    x = states((2, *grid), H)
    for out in (model(x), model(x, teacher=states((2, *grid), H + T, seed=1))):
        assert out.shape == (2, *grid, H + T)
        assert torch.equal(out[..., :H], x)  # channels 0..h-1 are x itself, bit for bit
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", MODELS_2D + sorted(TINY_1D))
def test_teacher_forcing_on_the_own_rollout_is_the_rollout(name):
    model = tiny(name)
    x = states(grid_shape(name), H)
    rollout = model(x)
    torch.testing.assert_close(model(x, teacher=rollout), rollout, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS_2D + sorted(TINY_1D))
def test_a_state_reaches_no_earlier_prediction(name):
    # perturb state j (in x for j < h, in the teacher after): the outputs of channels < j stay bit for bit,
    # and so does the prediction of state j itself (from states 0..j-1); a stepping model's next
    # prediction moves.  The teacher's channels 0..h-1 and its last are not read at all.
    model = tiny(name)
    shape = grid_shape(name)
    x, teacher = states(shape, H), states(shape, H + T, seed=1)
    base = model(x, teacher=teacher)
    for j in range(H + T - 1):
        x2, teacher2 = x.clone(), teacher.clone()
        (x2 if j < H else teacher2)[..., j] += 1.0 + states(shape, 1, seed=2 + j)[..., 0]
        out = model(x2, teacher=teacher2)
        torch.testing.assert_close(out[..., :j], base[..., :j], rtol=0, atol=0)
        if j >= H:
            torch.testing.assert_close(out[..., j], base[..., j], rtol=0, atol=0)
        teacher_ignored = name == "fno3d" and j >= H
        if not teacher_ignored:
            assert not torch.allclose(out[..., max(j + 1, H)], base[..., max(j + 1, H)])
        if j < H:  # the same in a rollout
            rolled = model(x2)
            torch.testing.assert_close(rolled[..., :j], model(x)[..., :j], rtol=0, atol=0)
    unread = teacher.clone()
    unread[..., list(range(H)) + [H + T - 1]] = 7.0
    torch.testing.assert_close(model(x, teacher=unread), base, rtol=0, atol=0)


def test_fno3d_ignores_the_teacher():
    model = tiny("fno3d")
    x = states((2, 12, 16), H)
    torch.testing.assert_close(model(x, teacher=states((2, 12, 16), H + T, seed=3)), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("name", STEPPING_2D + ["arfno1d"])
def test_the_rollout_is_the_step_applied_to_the_shifted_window(name):
    # a plain loop over the steps with the step network alone: u_{k+h} = [u_{k+h-1} +] F(u_k..u_{k+h-1}[, k/T])
    model = tiny(name)
    x = states(grid_shape(name), H)
    pos = grid_coordinates(x.shape[1:-1], periodic=True, dtype=DT).expand(x.shape[0], *x.shape[1:-1], -1)
    residual = getattr(model.config, "residual", True)
    trajectory = [x[..., i:i + 1] for i in range(H)]
    for k in range(T):
        window = torch.cat(trajectory[-H:], dim=-1)
        if name == "arfno1d":  # its time channel
            window = torch.cat([window, torch.full_like(window[..., :1], k / T)], dim=-1)
        change = model.step_net(window, pos)
        trajectory.append(trajectory[-1] + change if residual else change)
    torch.testing.assert_close(model(x), torch.cat(trajectory, dim=-1), rtol=1e-12, atol=1e-12)


def test_residual_and_state_modes_shape_the_step():
    x = smooth(16, H)
    direct = tiny("marching2d", residual=False)
    residual = tiny("marching2d")
    change = residual.step_net(x, None)  # the same weights: residual's state = last + the direct one's
    torch.testing.assert_close(residual(x)[..., H], x[..., -1] + change[..., 0], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(direct(x)[..., H], change[..., 0], rtol=1e-12, atol=1e-12)
    limited = tiny("arfno2d", state_modes=3)(states((2, 16, 16), H))
    spectrum = torch.fft.fft2(limited[..., H:], dim=(1, 2)).abs()
    k = torch.fft.fftfreq(16, 1 / 16).abs()
    high = (k[:, None] >= 3) | (k[None, :] >= 3)  # |k_i| <= modes - 1 on every axis is kept
    assert spectrum[:, high].max() < 1e-12 * spectrum.max()


# ---- one function at every resolution, and on the shifted torus -------------------------------------------

@pytest.mark.parametrize("name", MODELS_2D)
def test_one_trajectory_at_32_64_and_128_points(name):
    # a smooth field on nested periodic grids: the trajectories agree at the shared points up to the grid's
    # interpolation (the differences shrink at least 1.7-fold per refinement, or sit at round-off);
    # marching2d (Fourier transfers, smooth coordinates) is one function to round-off, teacher-forced too
    model = tiny(name)
    outs, forced = [], []
    with torch.no_grad():
        for n in (32, 64, 128):
            x = smooth(n, H)
            step = n // 32
            outs.append(model(x)[:, ::step, ::step])
            forced.append(model(x, teacher=smooth(n, H + T, seed=1))[:, ::step, ::step])
    for runs in (outs, forced):
        diffs = [float((b - a).norm() / runs[-1].norm()) for a, b in zip(runs, runs[1:])]
        assert diffs[1] < 1e-3 and (diffs[1] <= diffs[0] / 1.7 or max(diffs) < 1e-12), diffs
        if name == "marching2d":
            assert max(diffs) < 1e-12, diffs


@pytest.mark.parametrize("name", ["arfno2d", "fno3d", "artransolver2d"])
@pytest.mark.parametrize("shift", [(1, 0), (3, -5)])
def test_shifting_the_field_and_its_coordinates_shifts_the_trajectory(name, shift):
    # on the torus, a translation by whole cells of the states and of their coordinates together moves the
    # output with them: nothing in these models depends on the grid's index (spectral convolutions commute
    # with the shift, the attention treats the points as a set)
    model = tiny(name)
    x = states((2, 12, 16), H)
    pos = grid_coordinates((12, 16), periodic=True, dtype=DT).expand(2, 12, 16, 2)
    teacher = states((2, 12, 16), H + T, seed=1)
    roll = lambda t: torch.roll(t, shift, dims=(1, 2))  # noqa: E731
    for kwargs, kwargs_rolled in (({}, {}), (dict(teacher=teacher), dict(teacher=roll(teacher)))):
        out = model(x, pos, **kwargs)
        torch.testing.assert_close(model(roll(x), roll(pos), **kwargs_rolled), roll(out), rtol=1e-10, atol=1e-12)


# ---- bad input ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS_2D + sorted(TINY_1D))
def test_bad_input_is_answered_with_what_to_do(name):
    model = tiny(name)
    shape = grid_shape(name, 16, 16)
    with pytest.raises(ValueError, match=rf"expected {H} input channel\(s\) in the last dim, the states 0..{H - 1} "
                                         rf"the model steps from \(history = {H}\), got 1.*history = 1"):
        model(states(shape, 1))  # a history shorter than the model's
    x = states(shape, H)
    with pytest.raises(ValueError, match=r"teacher must be a trajectory of shape \(.*\) \(batch, \*grid, h \+ T"):
        model(x, teacher=states(shape, H + T - 1))
    if name != "fno3d":
        bad = states(shape, H + T)
        bad[0, 3, ..., H] = float("nan")
        with pytest.raises(ValueError, match="teacher contains NaN"):
            model(x, teacher=bad)
    with pytest.raises(ValueError, match="rank"):
        model(states((*shape, 4), H))
    with pytest.raises(ValueError, match="history must be an integer >= 1"):
        tiny(name, history=0)
    with pytest.raises(ValueError, match="in_channels = 2 disagrees with fields = 1"):
        tiny(name, in_channels=2)
    with pytest.raises(ValueError, match="time_steps must be an integer >= 1"):
        tiny(name, time_steps=0)


def test_config_errors_name_the_fix():
    with pytest.raises(ValueError, match=r"time_modes = 8 needs a time axis of at least 14 points, but "
                                         r"time_steps \+ padding = 10; use time_modes <= 6"):
        build_model("fno3d", time_steps=4)
    with pytest.raises(ValueError, match="periodic = true and dirichlet = false"):
        build_model("marching2d", periodic=False)
    with pytest.raises(ValueError, match="causal must be false"):
        build_model("marching2d", causal=True, norm="layer")
    with pytest.raises(ValueError, match="need a grid of at least 24 points"):
        build_model("arfno2d")(torch.randn(1, 16, 16, 1))  # FNO's 12 modes on 16 points


def test_the_contract_with_one_state_is_the_one_dimensional_one():
    # history 1 (the default): x = u_0, the output u_0..u_T, as marching1d and arfno1d always had
    for name in MODELS_2D:
        model = build_model(name, time_steps=2, **{**TINY[name], **({"time_modes": 2} if name == "fno3d" else {})})
        assert model.config.history == 1
        assert model(torch.randn(1, 16, 16, 1)).shape == (1, 16, 16, 3)
