"""What 0.2 keeps of 0.1: checkpoints load and compute the same outputs, the old module paths import
(with a DeprecationWarning naming the new one), every registered model round-trips through the public
save/load protocol, and the package root answers its version.

tests/data/checkpoints-0.1/ was written by petrov 0.1 (commit 1f422fa): one tiny model file per model
registered then, each holding an input ``x`` and the output ``y`` that version computed, and one run
checkpoint (``latent2d_inverse`` trained one epoch on inverse Darcy data with input noise 0.1, seed 4)
with that run's predictions on three samples.
"""
from __future__ import annotations

import importlib
import subprocess
import sys
import warnings
from pathlib import Path

import pytest
import torch

import petrov
from petrov.datasets import InputNoise
from petrov.operators import build_model, list_models, load_model, save_model
from petrov.train import load_operator

OLD = Path(__file__).parent / "data" / "checkpoints-0.1"
OLD_MODELS = ["arfno1d", "fno1d", "fno2d", "galerkin1d", "galerkin2d", "galerkin2d_inverse", "latent1d",
              "latent2d", "latent2d_inverse", "marching1d"]


@pytest.mark.parametrize("name", OLD_MODELS)
def test_model_files_of_0_1_load_and_compute_the_same_outputs(name):
    model, extra = load_model(OLD / f"{name}.pt", return_extra=True)  # float32 weights, as models are built
    assert extra["written_by"].startswith("petrov 0.1")
    with torch.no_grad():
        y = model(extra["x"].float())
    # the same operator, to float32 round-off (0.1 computed y in float64 with these weights)
    torch.testing.assert_close(y.double(), extra["y"], rtol=1e-4, atol=1e-5)


def test_a_run_checkpoint_of_0_1_loads_with_the_noise_its_config_gave():
    operator = load_operator(OLD / "run-latent2d_inverse-best.pt")
    assert operator.noise == InputNoise(0.1, 4)  # 0.1 did not save it: read from the run's config
    expected = torch.load(OLD / "run-latent2d_inverse-expected.pt", weights_only=True)
    with torch.no_grad():
        y = operator.predict(expected["x"], noise=operator.noise, sample_ids=expected["ids"])
    torch.testing.assert_close(y, expected["y"])


@pytest.mark.parametrize("name", list_models())
def test_every_registered_model_round_trips_through_save_and_load(name, tmp_path):
    model = build_model(name).double().eval()
    path = save_model(model, tmp_path / f"{name}.pt") or tmp_path / f"{name}.pt"
    again = load_model(path).double()
    assert type(again) is type(model) and again.config == model.config
    for (k, a), (k2, b) in zip(model.state_dict().items(), again.state_dict().items()):
        assert k == k2
        torch.testing.assert_close(a, b, rtol=0, atol=0)


MOVED_NAMES = [
    ("petrov.train.cli", "petrov.cli"),
    ("petrov.train.evaluate", "petrov.evaluate"),
    ("petrov.train.plots", "petrov.evaluate.plots"),
    ("petrov.train.inverse", "petrov.inverse"),
    ("petrov.train.inverse.pde", "petrov.inverse.pde"),
    ("petrov.train.inverse.commands", "petrov.cli.inverse"),
    ("petrov.datasets.commands", "petrov.cli.data"),
    ("petrov.operators.mixers", "petrov.operators.attention.mixers"),
    ("petrov.operators.mixers.galerkin", "petrov.operators.attention.mixers.galerkin"),
    ("petrov.operators.mixers._kernels", "petrov.operators.attention.kernels"),
    ("petrov.operators.normalization", "petrov.operators.attention.norms"),
    ("petrov.operators.fused_galerkin", "petrov.operators.attention.fused"),
    ("petrov.operators.models.latent2d", "petrov.operators.models.latent"),
    ("petrov.operators.latent", "petrov.operators.latent_encoder"),
]


@pytest.mark.parametrize("old, new", MOVED_NAMES)
def test_old_module_paths_import_the_moved_module_with_a_deprecation_warning(old, new):
    sys.modules.pop(old, None)
    with pytest.warns(DeprecationWarning, match=f"{old} moved to {new}"):
        module = importlib.import_module(old)
    assert module is importlib.import_module(new)  # one module object: registries stay single


def test_old_top_level_names_still_resolve():
    from petrov.inverse import invert
    from petrov.operators.attention import Attention

    with pytest.warns(DeprecationWarning, match="petrov.inverse.invert"):
        from petrov.train import invert as old_invert
    assert old_invert is invert
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the attention module became a package under the same name
        from petrov.operators.attention import Attention as again
    assert again is Attention


def test_package_version_equals_the_command_line_version():
    out = subprocess.run([sys.executable, "-m", "petrov", "--version"], capture_output=True, text=True,
                         check=True).stdout.strip()
    assert petrov.__version__ != "unknown"
    assert out == f"petrov {petrov.__version__}"
