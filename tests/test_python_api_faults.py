"""Bad input to the Python API (train, load_config, the trained operator, the evaluation and metrics
helpers, the inverse problem's observations): a clear error naming the parameter, before any work.

A tiny ``fno1d`` (width 4, 2 modes) on grids of 16 points and hand-made data; nothing is trained.
"""
import importlib.util

import numpy as np
import pytest
import torch

from petrov.datasets.loading import GridDataset
from petrov.datasets.normalizers import PointwiseGaussianNormalizer
from petrov.evaluate import evaluate_resolutions, make_plots
from petrov.inverse.observations import Observations
from petrov.operators import build_model, save_model
from petrov.train.checkpoint import load_initial_weights
from petrov.train.config import load_config
from petrov.train.config_tables import DataConfig, ModelConfig, OptimConfig, RunConfig, TrainConfig
from petrov.train.metrics import evaluate_relative_l2, read_metrics, summarize
from petrov.train.operator import NormalizedOperator
from petrov.train.trainer import train

OPTIONS = {"width": 4, "modes": 2, "n_layers": 1}
ROW = {"resolution": 16, "n": 2, "mean": 0.1, "std": 0.0, "median": 0.1, "max": 0.1}


def model():
    torch.manual_seed(0)
    return build_model("fno1d", **OPTIONS)


def operator():
    data = torch.randn(4, 16, 1)
    norm = PointwiseGaussianNormalizer.fit(data, periodic=True)
    return NormalizedOperator(model(), norm, norm).eval()


def dataset(n):
    return GridDataset(torch.randn(n, 16, 1), torch.randn(n, 16, 1), kind="burgers", periodic=True,
                       native_resolution=16, indices=np.arange(n))


def test_the_operator_checks_its_input_before_normalizing():  # item 5
    op = operator()
    with pytest.raises(ValueError, match=r"NormalizedOperator: expected x of shape .*got shape \(2, 16\) \(rank 2\)"):
        op(torch.randn(2, 16))
    with pytest.raises(ValueError, match="NormalizedOperator: x must be a floating-point tensor, got torch.int64"):
        op(torch.ones(2, 16, 1, dtype=torch.long))
    with pytest.raises(TypeError, match="NormalizedOperator: x must be a torch.Tensor, got ndarray"):
        op(np.ones((2, 16, 1), dtype=np.float32))


def test_a_float64_operator_answers_in_float64():  # item 6
    x = torch.randn(2, 16, 1)
    assert operator()(x).dtype == torch.float32
    assert operator().double()(x.double()).dtype == torch.float64


def test_train_takes_a_train_config(tmp_path):  # item 9
    with pytest.raises(TypeError, match="config must be a TrainConfig, got a dict; .*load_config.*config_from_dict"):
        train({"data": {"path": "b.h5"}, "model": {"name": "fno1d"}}, tmp_path / "run")
    with pytest.raises(TypeError, match="config must be a TrainConfig, got str 'burgers-quick'"):
        train("burgers-quick", tmp_path / "run")


@pytest.mark.parametrize("data, optim, message", [
    ({}, {"batch_size": "2"}, r"optim\.batch_size: expected an integer, got str '2'"),
    ({"n_train": 0}, {}, r"data\.n_train must be >= 1, got 0"),
    ({}, {"lr": -1.0}, r"optim\.lr.* must be > 0"),
])
def test_a_config_built_in_python_is_validated_like_a_file(tmp_path, data, optim, message):  # item 10
    config = TrainConfig(DataConfig(path=str(tmp_path / "b.h5"), **{"n_train": 6, "n_val": 2, "n_test": 2, **data}),
                         ModelConfig("fno1d", dict(OPTIONS)), OptimConfig(epochs=1, **optim),
                         run=RunConfig(device="cpu", progress=False))
    with pytest.raises(ValueError, match=message):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_metrics_refuse_an_empty_selection():  # item 15
    with pytest.raises(ValueError, match="evaluate_relative_l2: the dataset holds no samples"):
        evaluate_relative_l2(operator(), dataset(0))
    with pytest.raises(ValueError, match="summarize: no per-sample errors"):
        summarize(torch.tensor([]))


@pytest.mark.parametrize("text", ["{not json", "[1, 2]", '{"split": "test"}'])
def test_a_damaged_metrics_file_is_named(tmp_path, text):  # item 16
    (tmp_path / "metrics.json").write_text(text)
    with pytest.raises(ValueError, match=r"metrics\.json' is damaged"):
        read_metrics(tmp_path)


def test_make_plots_checks_its_arguments(tmp_path):  # item 17
    with pytest.raises(ValueError, match=r"rows\[0\] is not a metrics row \(it lacks resolution, .*got keys \['foo'\]"):
        make_plots(model(), [{"foo": 1}], tmp_path / "ev", tmp_path / "b.h5")
    with pytest.raises(ValueError, match="rows must be the non-empty list of metrics rows"):
        make_plots(model(), [], tmp_path / "ev", tmp_path / "b.h5")
    for n in (0, -1):
        with pytest.raises(ValueError, match=f"n_samples must be an integer >= 1 .*got {n}"):
            make_plots(model(), [ROW], tmp_path / "ev", tmp_path / "b.h5", n_samples=n)


@pytest.mark.parametrize("batch_size", [0, -1])
def test_the_evaluation_batch_size_is_checked(tmp_path, batch_size):  # item 18
    with pytest.raises(ValueError, match=f"evaluate_resolutions: batch_size must be an integer >= 1.*got {batch_size}"):
        evaluate_resolutions(model(), tmp_path / "b.h5", [16], batch_size=batch_size)
    with pytest.raises(ValueError, match=f"evaluate_relative_l2: batch_size must be an integer >= 1.*got {batch_size}"):
        evaluate_relative_l2(operator(), dataset(2), batch_size=batch_size)


def test_init_from_a_checkpoint_file_says_it_takes_a_run_directory(tmp_path):  # item 19
    (tmp_path / "run").mkdir()
    for path in (tmp_path / "g.pt", tmp_path / "run" / "best.pt"):
        save_model(model(), path)
    with pytest.raises(ValueError, match="run.init_from takes a run directory .*got the file .*g.pt'; give the folder"):
        load_initial_weights(model(), ModelConfig("fno1d", dict(OPTIONS)), tmp_path / "g.pt")
    with pytest.raises(ValueError, match=r"takes a run directory .*best.pt'; .*\('.*run' here\)"):
        load_initial_weights(model(), ModelConfig("fno1d", dict(OPTIONS)), str(tmp_path / "run" / "best.pt"))


@pytest.mark.parametrize("override, message", [
    ("model.options.mixer=softmaks", "unknown mixer 'softmaks'; registered: .*softmax"),
    ("model.options.mixer_options.n_features=8", "mixer 'physics' has no option.*n_features"),
    ("run.init_from=no-such-run", "no-such-run.best.pt' does not exist"),
    ("run.compile=cuda-graphs", "'cuda-graphs' needs a CUDA device .*trains on cpu.*use 'default' or 'off'"),
    pytest.param("run.tensorboard=true", "needs the tensorboard package", marks=pytest.mark.skipif(
        importlib.util.find_spec("tensorboard") is not None, reason="tensorboard is installed here")),
])
def test_what_the_config_alone_decides_is_refused_before_its_data_are_generated(tmp_path, monkeypatch,
                                                                                override, message):
    # darcy-gpu's data take minutes to generate on a CPU: a mistyped mixer must not wait for them
    def generate(*args, **kwargs):
        raise AssertionError("the data were generated before the config's own error was raised")

    monkeypatch.setattr("petrov.train.data.ensure_data_file", generate)
    monkeypatch.chdir(tmp_path)
    config = load_config("darcy-gpu", [override, "run.device=cpu", "run.progress=false"])
    with pytest.raises((KeyError, ValueError, FileNotFoundError), match=message):
        train(config, tmp_path / "run")
    assert not (tmp_path / "run").exists()


def test_observations_check_the_type_of_u():  # item 20
    u = np.random.default_rng(0).random((1, 4, 4)) + 1
    with pytest.raises(TypeError, match=r"Observations: u must be a numpy array \(N, m, m\), got list"):
        Observations(u.tolist(), np.array([0]))
    with pytest.raises(TypeError, match="Observations: a_true must be a numpy array"):
        Observations(u, np.array([0]), a_true=torch.ones(1, 4, 4))
    with pytest.raises(ValueError, match="is zero everywhere; ") as err:  # no empty "()" without a source
        Observations(np.zeros((1, 4, 4)), np.array([0]))
    assert "()" not in str(err.value)


def test_load_config_checks_its_argument_types():  # item 24
    with pytest.raises(TypeError, match=r"got a dict; validate a dict with petrov\.train\.config\.config_from_dict"):
        load_config({"data": {"path": "b.h5"}, "model": {"name": "fno1d"}})
    with pytest.raises(TypeError, match="overrides takes a list of \"key=value\" strings .*got 'optim.lr=1e-4'"):
        load_config("burgers-quick", "optim.lr=1e-4")
    assert load_config("burgers-quick", ("optim.lr=1e-4",)).optim.lr == 1e-4


def test_evaluate_takes_only_petrov_models(tmp_path):  # item 29
    with pytest.raises(TypeError, match="a petrov model, got Linear: Linear is not a registered petrov model"):
        evaluate_resolutions(torch.nn.Linear(1, 1), tmp_path / "b.h5", [16])
