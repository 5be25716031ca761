"""Time-marching models (marching1d, arfno1d): the trajectory contract, causality, recurrent rollout vs
parallel teacher forcing, training modes through the config/trainer path, rollout evaluation, bad input."""
import json

import pytest
import torch

from petrov.datasets import generate_dataset
from petrov.operators import build_model
from petrov.train.config import config_from_dict
from petrov.evaluate import evaluate_resolutions, make_plots
from petrov.train.losses import per_time_relative_l2, trajectory_loss_per_sample, training_loss_per_sample
from petrov.train.trainer import train

T = 4
TINY = {
    "marching1d": {"time_steps": T, "width": 8, "modes": 4, "encoder_layers": 1, "decoder_layers": 1,
                   "summary_modes": 3, "proj_hidden": 8, "d_model": 8, "n_layers": 2},
    "arfno1d": {"time_steps": T, "width": 8, "modes": 4, "n_layers": 2, "proj_hidden": 8},
}
MODELS = sorted(TINY)


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def tiny(name, **options):
    torch.manual_seed(0)
    return build_model(name, **{**TINY[name], **options}).double().eval()


def smooth_field(b, n, seed=0):
    """A few periodic modes sampled at n points: the same function at every resolution."""
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(b, 3, 2, generator=g, dtype=torch.float64)
    s = torch.arange(n, dtype=torch.float64) / n
    k = torch.arange(1, 4, dtype=torch.float64)
    arg = 2 * torch.pi * k[None, :, None] * s
    return ((a[..., 0, None] * torch.sin(arg) + a[..., 1, None] * torch.cos(arg)) / k[None, :, None]).sum(1)[..., None]


@pytest.mark.parametrize("name", MODELS)
@pytest.mark.parametrize("n", [16, 33, 64])
def test_shapes_and_state_zero_at_several_resolutions(name, n):
    model = tiny(name)
    x = torch.randn(3, n, 1, dtype=torch.float64)
    out = model(x)
    assert out.shape == (3, n, T + 1)
    assert torch.equal(out[..., :1], x)  # snapshot 0 is the given state
    teacher = torch.randn(3, n, T + 1, dtype=torch.float64)
    assert model(x, teacher=teacher).shape == (3, n, T + 1)


@pytest.mark.parametrize("name", MODELS)
def test_recurrent_rollout_equals_parallel_teacher_forcing_on_its_own_states(name):
    # teacher forcing on the rollout's own states is the rollout again: the recurrent temporal state
    # (marching1d: EncoderLayer.step) and the parallel causal form compute the same steps
    model = tiny(name)
    x = smooth_field(2, 32)
    rollout = model(x)
    parallel = model(x, teacher=rollout)
    torch.testing.assert_close(parallel, rollout, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize("name", MODELS)
def test_step_k_does_not_depend_on_later_true_states(name):
    model = tiny(name)
    x = smooth_field(2, 32)
    teacher = torch.randn(2, 32, T + 1, dtype=torch.float64)
    base = model(x, teacher=teacher)
    for k in range(1, T + 1):
        changed = teacher.clone()
        changed[..., k:] += torch.randn_like(changed[..., k:])
        out = model(x, teacher=changed)
        # out[..., j] depends on states 0..j-1: unchanged for j <= k, changed right after
        torch.testing.assert_close(out[..., : k + 1], base[..., : k + 1], rtol=0, atol=0)
        if k < T:
            assert not torch.allclose(out[..., k + 1], base[..., k + 1])


def test_marching_history_reaches_later_steps():
    # causal attention over time: changing state 1 moves every later step (not only step 2)
    model = tiny("marching1d")
    x = smooth_field(1, 32)
    teacher = torch.randn(1, 32, T + 1, dtype=torch.float64)
    changed = teacher.clone()
    changed[..., 1] += 1.0
    later = model(x, teacher=changed)[..., 3:] - model(x, teacher=teacher)[..., 3:]
    assert later.abs().max() > 1e-8


@pytest.mark.parametrize("name", MODELS)
def test_rollout_converges_as_the_grid_is_refined(name):
    # the same smooth u0 on nested grids: the rollouts approach the finest one at the shared points
    # (point-wise activations make harmonics that coarse grids alias, so not equal, but converging)
    model = tiny(name)
    finest = model(smooth_field(1, 512))
    gaps = [((finest[:, :: 512 // n] - model(smooth_field(1, n))).norm() / finest[:, :: 512 // n].norm()).item()
            for n in (16, 64)]
    assert gaps[1] < gaps[0] and gaps[1] < 1e-3


@pytest.mark.parametrize("name", MODELS)
def test_state_modes_band_limit_every_predicted_state(name):
    model = tiny(name, state_modes=3)
    x = torch.randn(2, 32, 1, dtype=torch.float64)  # not band-limited: only the predicted states are
    for out in (model(x), model(x, teacher=torch.randn(2, 32, T + 1, dtype=torch.float64))):
        assert torch.equal(out[..., :1], x)
        spectrum = torch.fft.rfft(out[..., 1:], dim=1).abs()
        assert spectrum[:, 3:].max() < 1e-12 * spectrum[:, :3].max()
    rollout = model(x)
    torch.testing.assert_close(model(x, teacher=rollout), rollout, rtol=1e-12, atol=1e-12)
    with pytest.raises(ValueError, match="state_modes must be None or an integer >= 1"):
        build_model(name, state_modes=0)
    with pytest.raises(ValueError, match="state_modes needs a periodic grid"):
        build_model(name, state_modes=4, periodic=False)


@pytest.mark.parametrize("name", MODELS)
def test_bad_input_raises(name):
    model = tiny(name)
    x = torch.randn(2, 16, 1, dtype=torch.float64)
    with pytest.raises(ValueError, match="teacher must be a trajectory of shape"):
        model(x, teacher=torch.randn(2, 16, T, dtype=torch.float64))
    bad = torch.randn(2, 16, T + 1, dtype=torch.float64)
    bad[0, 3, 2] = float("nan")
    with pytest.raises(ValueError, match="NaN"):
        model(x, teacher=bad)
    with pytest.raises(ValueError, match="input channel"):
        model(torch.randn(2, 16, 2, dtype=torch.float64))
    with pytest.raises(ValueError, match="time_steps must be an integer >= 1"):
        build_model(name, time_steps=0)
    with pytest.raises(ValueError, match="in_channels = 2 disagrees with fields = 1"):
        build_model(name, in_channels=2)


def test_marching_config_errors():
    with pytest.raises(ValueError, match="causal must be true"):
        build_model("marching1d", causal=False)
    with pytest.raises(ValueError, match="point-wise normalization"):
        build_model("marching1d", norm="column")
    with pytest.raises(ValueError, match="summary_modes = 8 needs a grid of at least 14"):
        build_model("marching1d", modes=2)(torch.randn(1, 8, 1))


def test_trajectory_losses_against_plain_formulas():
    g = torch.Generator().manual_seed(0)
    y = torch.randn(3, 16, T + 1, generator=g, dtype=torch.float64)
    p = y + 0.1 * torch.randn(3, 16, T + 1, generator=g, dtype=torch.float64)
    per_time = per_time_relative_l2(p, y)
    for b in range(3):
        for k in range(T + 1):
            expected = torch.linalg.norm(p[b, :, k] - y[b, :, k]) / torch.linalg.norm(y[b, :, k])
            torch.testing.assert_close(per_time[b, k], expected)
    loss = trajectory_loss_per_sample(p, y, 0.1, True)
    naive = torch.stack([training_loss_per_sample(p[..., k:k + 1], y[..., k:k + 1], 0.1, True)
                         for k in range(1, T + 1)], dim=1).mean(1)
    torch.testing.assert_close(loss, naive)


# --- training and evaluation through the config --------------------------------------------------

@pytest.fixture(scope="module")
def trajectory_file(tmp_path_factory):
    path = tmp_path_factory.mktemp("traj") / "t.h5"
    return generate_dataset("burgers-trajectory", path, 14, 64, seed=0, progress=False, time_steps=T)


def trajectory_config(path, name, mode, **options):
    return config_from_dict({
        "data": {"path": str(path), "train_resolution": 32, "eval_resolutions": [16, 32, 64],
                 "n_train": 8, "n_val": 3, "n_test": 3},
        "model": {"name": name, "options": {**TINY[name], **options}},
        "optim": {"epochs": 1, "batch_size": 4, "lr": 1e-3},
        "loss": {"mode": mode, "h1_weight": 0.1},
        "run": {"device": "cpu", "progress": False, "threads": 1},
    })


@pytest.mark.parametrize("name, mode", [("marching1d", "teacher_forcing"), ("marching1d", "pushforward"),
                                        ("arfno1d", "rollout"), ("arfno1d", "pushforward")])
def test_one_epoch_through_the_trainer(tmp_path, trajectory_file, name, mode):
    result = train(trajectory_config(trajectory_file, name, mode), tmp_path / "run")
    assert result.epochs_completed == 1
    rows = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in rows] == [16, 32, 64]
    assert all(0 < r["mean"] < 10 for r in rows)
    log = [json.loads(line) for line in (tmp_path / "run" / "log.jsonl").read_text().splitlines()]
    assert len(log) == 1 and log[0]["train_loss"] > 0


def test_rollout_evaluation_per_time_and_plots(tmp_path, trajectory_file):
    train(trajectory_config(trajectory_file, "marching1d", "teacher_forcing"), tmp_path / "run")
    rows = evaluate_resolutions(tmp_path / "run", out_dir=tmp_path / "eval")
    assert [r["resolution"] for r in rows] == [16, 32, 64]
    for r in rows:
        assert len(r["per_time_mean"]) == T + 1 and r["per_time_mean"][0] == pytest.approx(0, abs=1e-6)
        # the row is the mean over the predicted states (loss.trajectory_metric's default)
        assert r["mean"] == pytest.approx(sum(r["per_time_mean"][1:]) / T) and r["history"] == 1
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())
    assert saved["rows"][0]["per_time_max"] == rows[0]["per_time_max"]
    assert "mean over the predicted states" in saved["metric"]
    # the training run's test rows hold the same quantity under the same names
    trained = json.loads((tmp_path / "run" / "metrics.json").read_text())
    assert trained["metric"] == saved["metric"]
    for t, e in zip(trained["rows"], rows):
        assert t["mean"] == pytest.approx(e["mean"], rel=1e-5)
        assert t["per_time_mean"] == pytest.approx(e["per_time_mean"], rel=1e-5, abs=1e-7)
    paths = make_plots(tmp_path / "run", rows, tmp_path / "eval")
    names = {p.name for p in paths}
    assert {"error_vs_time.png", "spacetime.png", "error_vs_resolution.png"} <= names


def test_config_rejects_unknown_mode_and_mismatched_normalization(trajectory_file):
    with pytest.raises(ValueError, match="unknown training mode 'pushfoward'.*did you mean 'pushforward'"):
        trajectory_config(trajectory_file, "arfno1d", "pushfoward")
    raw = {"data": {"path": "x.h5", "normalize_y": False}, "model": {"name": "arfno1d"},
           "loss": {"mode": "rollout"}}
    with pytest.raises(ValueError, match="normalize_x = data.normalize_y"):
        config_from_dict(raw)


def test_teacher_modes_reject_a_model_without_the_trajectory_contract(tmp_path, trajectory_file):
    cfg = trajectory_config(trajectory_file, "arfno1d", "teacher_forcing")
    cfg.model.name, cfg.model.options = "fno1d", {"width": 8, "modes": 4, "out_channels": T + 1}
    with pytest.raises(ValueError, match="trains a marching model.*FNO1d is not one"):
        train(cfg, tmp_path / "run")
    assert not (tmp_path / "run").exists()


@pytest.mark.parametrize("name, mode", [("marching1d", "teacher_forcing"), ("marching1d", "pushforward"),
                                        ("arfno1d", "rollout")])
def test_a_marching_batch_loss_traces_as_one_graph_with_the_eager_numbers(trajectory_file, tmp_path, name, mode):
    # what a compiled run compiles: the whole batch loss (pushforward's gradient-free pass and the rollout's
    # steps included); dynamo with fullgraph raises on a graph break
    import torch._dynamo

    seen = []
    train(trajectory_config(trajectory_file, name, mode), tmp_path / "run",
          callbacks=[lambda trainer, record: seen.append(trainer) or False])
    trainer = seen[0]
    b = next(iter(trainer.train_batches.iterate()))
    params = list(trainer.model.parameters())
    torch._dynamo.reset()
    results = []
    for loss in (trainer.batch_loss, torch.compile(trainer.batch_loss, backend="eager", fullgraph=True)):
        per_sample, _ = loss(b.x, b.y, b.sample_ids, b.weights, **b.inputs)
        results.append((per_sample.detach(), torch.autograd.grad(per_sample.sum(), params)))
    torch._dynamo.reset()
    (loss_e, grads_e), (loss_c, grads_c) = results
    assert loss_e.shape == (4,) and torch.all(loss_e > 0)
    torch.testing.assert_close(loss_c, loss_e, rtol=1e-6, atol=0)
    for got, want in zip(grads_c, grads_e):
        torch.testing.assert_close(got, want, rtol=1e-5, atol=1e-7)


def test_a_compiled_run_validates_its_free_rollouts_eagerly(tmp_path, trajectory_file, monkeypatch):
    # compiled, a rollout's T steps unroll into one graph whose compilation outweighs the run: validation
    # runs the plain model, training the compiled batch loss ("compiled" here: a wrapper that counts its calls)
    import petrov.train.trainer as trainer_module

    calls = []

    class Compiled(torch.nn.Module):
        def __init__(self, module):
            super().__init__()
            self.module = module

        def forward(self, *args, **kwargs):
            calls.append(type(self.module).__name__)
            return self.module(*args, **kwargs)

    monkeypatch.setattr(trainer_module, "resolve_compile", lambda setting, *a, **k: "default")
    monkeypatch.setattr(trainer_module, "compile_module",
                        lambda module, mode: module if mode == "off" else Compiled(module))
    seen = []
    train(trajectory_config(trajectory_file, "marching1d", "pushforward"), tmp_path / "run",
          callbacks=[lambda t, r: seen.append((t.compile_mode, t.eval_compile_mode, t.eval_net is t.model)) or False])
    assert seen == [("default", "off", True)]
    assert calls and set(calls) == {"BatchLoss"}  # the training steps (and the compiled check) went through it


# --- a marching model and what it is trained and evaluated with -------------------------------------

@pytest.mark.parametrize("name", MODELS)
def test_the_direct_mode_is_refused_for_a_marching_model(tmp_path, trajectory_file, name):
    with pytest.raises(ValueError, match=r"loss.mode = 'direct' \(the default\) trains a non-marching model.*"
                                         r"set loss.mode to one of 'pushforward', 'rollout', 'teacher_forcing'"):
        train(trajectory_config(trajectory_file, name, "direct"), tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_another_number_of_time_steps_is_named_in_training_and_in_evaluation(tmp_path, trajectory_file):
    from petrov.datasets import open_dataset
    from petrov.train.model_fit import check_model_fits_data

    with pytest.raises(ValueError, match=rf"model Marching1d predicts T={T + 2} time steps but the trajectories in "
                                         rf"\S+ have T={T}; set model.options.time_steps = {T}"):
        train(trajectory_config(trajectory_file, "marching1d", "pushforward", time_steps=T + 2), tmp_path / "run")
    data = open_dataset(trajectory_file, resolution=32, indices=[0, 1])
    with pytest.raises(ValueError, match=rf"the run's model ArFNO1d was trained for T={T + 2} time steps but the "
                                         rf"trajectories in t.h5 have T={T}; evaluate it on a trajectory file "
                                         rf"with {T + 2} steps"):
        check_model_fits_data(tiny("arfno1d", time_steps=T + 2).float(), data, torch.device("cpu"), "t.h5",
                              evaluating=True)


def test_a_mixer_without_a_recurrent_form_names_those_the_rollout_takes():
    model = tiny("marching1d", mixer="softmax")
    x = smooth_field(1, 16)
    assert model(x, teacher=torch.zeros(1, 16, T + 1, dtype=x.dtype)).shape == (1, 16, T + 1)  # teacher-forced
    with pytest.raises(ValueError, match="marching1d: mixer 'softmax' has no recurrent form, which the rollout "
                                         "steps one time step at a time; set model.options.mixer to one of "
                                         "cosformer, fourier, galerkin, linear, performer"):
        model(x)
