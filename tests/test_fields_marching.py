"""Marching models that step a vector of F fields (``fields``): the state-major layout (channel ``s F + f``)
against plain loops, causality in time for F = 3 (a state's fields reach no earlier prediction, in teacher
forcing and in a rollout), teacher forcing on the own rollout is the rollout, the step as a plain loop of the
step network, and fields = 1 computing what the models computed before ``fields`` existed (numbers recorded
on main before the change).  float64, tiny sizes."""
from __future__ import annotations

import pytest
import torch

from petrov.grids.layout import grid_coordinates
from petrov.operators import build_model
from petrov.operators.trajectory import as_channels, as_states, batch_as_steps, windows

DT = torch.float64
H, T, F = 2, 3, 3  # history, predicted states, fields per state
TINY = {
    "arfno1d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
    "marching1d": dict(width=4, modes=3, encoder_layers=1, decoder_layers=1, summary_modes=3, proj_hidden=8,
                       d_model=8, n_layers=2),
    "arfno2d": dict(width=4, modes=3, n_layers=2, proj_hidden=8),
    "fno3d": dict(width=4, modes=3, time_modes=2, n_layers=2, proj_hidden=8, padding=2),
    "artransolver2d": dict(d_model=8, n_layers=2, n_heads=2, n_slices=3, unified_pos=3, init_std=0.5),
    "marching2d": dict(d_model=8, n_layers=1, n_heads=2, latent_size=8, fine_width=4, latent_modes=2,
                       decoder_width=4, modes=3),
}
MODELS = sorted(TINY)
STEPPING = ["arfno1d", "arfno2d", "artransolver2d", "marching2d"]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def tiny(name, **options):
    torch.manual_seed(0)
    return build_model(name, **{"history": H, "time_steps": T, "fields": F, **TINY[name], **options}).to(DT).eval()


def grid_of(name):
    return (2, 10) if name.endswith("1d") else (2, 10, 12)


def randn(*shape, seed=0):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=DT)


# ---- the layout -------------------------------------------------------------------------------------------

def test_states_and_channels_are_state_major():
    u = randn(2, 5, 4 * F)
    s = as_states(u, F)
    for k in range(4):
        for f in range(F):
            assert torch.equal(s[..., k, f], u[..., k * F + f])
    assert torch.equal(as_channels(s), u)
    with pytest.raises(ValueError, match="multiple of 3 channels, got 7"):
        as_states(randn(2, 5, 7), F)


def test_windows_and_steps_in_units_of_states():
    # windows: step k's input is the states k .. k+h-1, all F fields of each, state-major; batch_as_steps
    # puts one F-channel state per step back at its place
    b, n, steps = 2, 5, 3
    states = randn(b, n, (H + steps - 1) * F)
    w = windows(states, H, F)
    assert w.shape == (b * steps, n, H * F)
    for i in range(b):
        for k in range(steps):
            for j in range(H):
                for f in range(F):
                    assert torch.equal(w[i * steps + k, :, j * F + f], states[i, :, (k + j) * F + f])
    per_step = randn(b * steps, n, F, seed=1)
    back = batch_as_steps(per_step, b)
    for i in range(b):
        for k in range(steps):
            assert torch.equal(back[i, :, k * F:(k + 1) * F], per_step[i * steps + k])


# ---- the contract with F fields ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_output_holds_the_given_states_then_f_fields_per_prediction(name):
    model = tiny(name)
    shape = grid_of(name)
    x = randn(*shape, H * F)
    for out in (model(x), model(x, teacher=randn(*shape, (H + T) * F, seed=1))):
        assert out.shape == (*shape, (H + T) * F)
        assert torch.equal(out[..., :H * F], x)
        assert torch.isfinite(out).all()


@pytest.mark.parametrize("name", MODELS)
def test_teacher_forcing_on_the_own_rollout_is_the_rollout(name):
    model = tiny(name)
    x = randn(*grid_of(name), H * F)
    rollout = model(x)
    torch.testing.assert_close(model(x, teacher=rollout), rollout, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_a_state_and_each_of_its_fields_reach_no_earlier_prediction(name):
    # perturb state j (all its fields, then one field alone): every output state <= j stays bit for bit (the
    # prediction of state j comes from the states before it), and the next prediction moves (except fno3d's
    # ignored teacher); the same in a rollout for the given states; teacher forcing and rollout agree
    model = tiny(name)
    shape = grid_of(name)
    x, teacher = randn(*shape, H * F), randn(*shape, (H + T) * F, seed=1)
    base, base_rollout = model(x, teacher=teacher), model(x)
    for j in range(H + T - 1):
        for fields in (range(F), [F - 1]):
            x2, teacher2 = x.clone(), teacher.clone()
            for f in fields:
                (x2 if j < H else teacher2)[..., j * F + f] += 1.0 + randn(*shape, seed=2 + j)
            out = model(x2, teacher=teacher2)
            kept = (j + 1) * F if j >= H else j * F  # states 0..j (j predicted), or 0..j-1 (j given)
            torch.testing.assert_close(out[..., :kept], base[..., :kept], rtol=0, atol=0)
            nxt = slice(max(j + 1, H) * F, (max(j + 1, H) + 1) * F)
            if not (name == "fno3d" and j >= H):
                assert not torch.allclose(out[..., nxt], base[..., nxt])
            if j < H:
                rolled = model(x2)
                torch.testing.assert_close(rolled[..., :j * F], base_rollout[..., :j * F], rtol=0, atol=0)
                torch.testing.assert_close(model(x2, teacher=rolled), rolled, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", STEPPING)
def test_the_rollout_is_the_step_network_on_the_shifted_window_of_f_fields(name):
    # a plain loop: u_{k+h} = [u_{k+h-1} +] F([u_k .. u_{k+h-1}] [, k/T]), each state F channels
    model = tiny(name)
    x = randn(*grid_of(name), H * F)
    pos = grid_coordinates(x.shape[1:-1], periodic=True, dtype=DT).expand(x.shape[0], *x.shape[1:-1], -1)
    residual = getattr(model.config, "residual", True)
    trajectory = [x[..., i * F:(i + 1) * F] for i in range(H)]
    for k in range(T):
        window = torch.cat(trajectory[-H:], dim=-1)
        if name == "arfno1d":
            window = torch.cat([window, torch.full_like(window[..., :1], k / T)], dim=-1)
        change = model.step_net(window, pos)
        assert change.shape[-1] == F
        trajectory.append(trajectory[-1] + change if residual else change)
    torch.testing.assert_close(model(x), torch.cat(trajectory, dim=-1), rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_wrong_channel_counts_name_the_fields(name):
    model = tiny(name)
    shape = grid_of(name)
    with pytest.raises(ValueError, match=rf"expected {H * F} input channels .* {F} fields each \(history = {H}, "
                                         rf"fields = {F}.*got {H * F - 1}") as err:
        model(randn(*shape, H * F - 1))
    assert "\n" not in str(err.value)
    with pytest.raises(ValueError, match=rf"teacher must be a trajectory of shape .*{(H + T) * F}\).*{F} fields each"):
        model(randn(*shape, H * F), teacher=randn(*shape, H + T))
    with pytest.raises(ValueError, match=f"in_channels = 2 disagrees with fields = {F}"):
        tiny(name, in_channels=2)
    with pytest.raises(ValueError, match="fields must be an integer >= 1"):
        tiny(name, fields=0)
    assert tiny(name, in_channels=F, out_channels=F).config.in_channels == F


# ---- fields = 1 is the model from before fields ------------------------------------------------------------

# float64 outputs of the tiny models below (seed 0, inputs from a generator seeded 1, one thread), computed on
# main before ``fields`` (commit 0451700): parameter count, then per call (rollout, teacher forcing) the sum,
# the sum of squares and the last value of the output.  What can make them differ without a change of the
# mathematics: a module built in another order (another draw of the initial weights: the counts match, the
# numbers not), another torch (the pinned 2.13 here) or FFT library (round-off: hence the tolerance).
REFERENCE = {
    "arfno1d": (301, [[-30.76917198934784, 108.12118044580271, -1.1172155921303035],
                      [-11.190473557140274, 101.7641127219064, -0.5692224516711252]]),
    "marching1d": (1761, [[-21.091482077720876, 126.95496002296412, 0.43560872893270186],
                          [-6.291427739154603, 127.43245768946954, -0.5294094482700042]]),
    "arfno2d": (1261, [[-87.1022033286247, 616.6870462370638, -0.14633584478278028],
                       [-86.15782505058509, 616.762651300582, -0.13807867461212908]]),
    "fno3d": (4721, [[181.2198618717738, 623.290479914747, 0.16870403515975818],
                     [181.2198618717738, 623.290479914747, 0.16870403515975818]]),
    "artransolver2d": (5347, [[-18.568196173650758, 2726.3209680591826, 2.140559917324222],
                              [-666.563073038767, 1323.5345359036153, -1.2668194067746317]]),
    "marching2d": (3509, [[-147.94541946696464, 1546.2409378725663, -1.4103482833643841],
                          [-65.09701058957104, 1447.1510878364084, 0.2048222979723397]]),
}


def reference_model(name, **options):
    config = dict(TINY[name], history=H, time_steps=T, **options)
    if name == "arfno1d":
        config["state_modes"] = 4
    torch.manual_seed(0)
    return build_model(name, **config).to(DT).eval()


@pytest.mark.parametrize("name", MODELS)
def test_fields_one_computes_what_the_model_computed_before_fields(name):
    default, explicit = reference_model(name), reference_model(name, fields=1)
    shapes = {k: v.shape for k, v in default.state_dict().items()}
    assert shapes == {k: v.shape for k, v in explicit.state_dict().items()}
    count, stats = REFERENCE[name]
    assert sum(p.numel() for p in default.parameters()) == count
    g = torch.Generator().manual_seed(1)
    grid = (10,) if name.endswith("1d") else (10, 14)
    x = torch.randn(2, *grid, H, generator=g, dtype=DT)
    teacher = torch.randn(2, *grid, H + T, generator=g, dtype=DT)
    with torch.no_grad():
        for model in (default, explicit):
            for out, (total, squares, last) in zip((model(x), model(x, teacher=teacher)), stats):
                got = [float(out.sum()), float((out * out).sum()), float(out.flatten()[-1])]
                torch.testing.assert_close(torch.tensor(got, dtype=DT), torch.tensor([total, squares, last], dtype=DT),
                                           rtol=1e-11, atol=1e-11)
        torch.testing.assert_close(explicit(x, teacher=teacher), default(x, teacher=teacher), rtol=0, atol=0)
