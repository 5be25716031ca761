"""save_model / load_model: exact round trip, extra data, safe loading, clear errors."""
from __future__ import annotations

import os

import pytest
import torch

from petrov.operators import build_model, list_models, load_model, model_config, model_name, save_model
from petrov.operators.io import load_checkpoint
from petrov.operators.models import point_set_models

TINY = {
    "fno1d": (dict(width=4, modes=3, n_layers=2, proj_hidden=8), (2, 16, 1)),
    "fno2d": (dict(width=4, modes=2, n_layers=2, proj_hidden=8), (2, 8, 8, 1)),
    "galerkin1d": (
        dict(d_model=8, n_layers=1, n_heads=2, decoder_width=4, modes=3, mixer="performer"), (2, 16, 1)
    ),
    "galerkin2d": (
        dict(d_model=9, n_layers=1, n_heads=2, coarse_size=5, decoder_width=4, modes=2), (2, 9, 9, 1)
    ),
    "galerkin2d_inverse": (dict(d_model=9, n_layers=1, n_heads=2, coarse_size=5, norm=None), (2, 9, 9, 1)),
    "marching1d": (dict(time_steps=2, width=4, modes=3, encoder_layers=1, decoder_layers=1, summary_modes=3,
                        proj_hidden=8, d_model=8, n_layers=1), (2, 16, 1)),
    "arfno1d": (dict(time_steps=2, width=4, modes=3, n_layers=2, proj_hidden=8), (2, 16, 1)),
    "latent1d": (
        dict(d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=3, decoder_width=4, modes=3,
             latent_modes=2, latent_kernel=3, mixer="linear"), (2, 16, 1)
    ),
    "latent2d": (
        dict(d_model=8, n_layers=1, n_heads=2, latent_size=5, fine_width=3, decoder_width=4, modes=2,
             latent_modes=2, mixer="cosformer"), (2, 9, 9, 1)
    ),
    "latent2d_inverse": (
        dict(d_model=8, n_layers=1, n_heads=2, latent_size=5, coarse_size=6, latent_kernel=3), (2, 11, 11, 1)
    ),
    "transolver1d": (dict(d_model=8, n_layers=1, n_heads=2, n_slices=3), (2, 16, 1)),
    "transolver2d": (dict(d_model=8, n_layers=2, n_heads=2, n_slices=4, temperature=1.0), (2, 9, 9, 1)),
    "arfno2d": (dict(time_steps=2, history=2, width=4, modes=2, n_layers=2, proj_hidden=8), (2, 8, 8, 2)),
    "fno3d": (dict(time_steps=2, history=2, width=4, modes=2, time_modes=2, n_layers=2, proj_hidden=8,
                   padding=2), (2, 8, 8, 2)),
    "artransolver2d": (dict(time_steps=2, history=2, d_model=8, n_layers=1, n_heads=2, n_slices=3, unified_pos=3),
                       (2, 8, 8, 2)),
    "marching2d": (dict(time_steps=2, history=2, d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=3,
                        latent_modes=2, decoder_width=4, modes=2, mixer="linear"), (2, 8, 8, 2)),
}


def test_every_model_is_covered():
    # the point-set models' round trip: tests/test_mesh_models.py
    assert set(TINY) == set(list_models()) - set(point_set_models())


@pytest.mark.parametrize("name", sorted(TINY))
def test_round_trip_reproduces_outputs_exactly(name, tmp_path):
    config, shape = TINY[name]
    torch.manual_seed(0)
    model = build_model(name, **config)
    with torch.no_grad():  # move away from the initialization so a fresh build would differ
        for p in model.parameters():
            p.add_(0.01 * torch.randn_like(p))
    model.eval()
    x = torch.randn(shape)
    expected = model(x)
    path = save_model(model, tmp_path / "m.pt")
    torch.manual_seed(123)  # a different seed: nothing may come from the initialization
    loaded = load_model(path)
    assert not loaded.training
    assert model_name(loaded) == name and model_config(loaded) == model_config(model)
    assert torch.equal(loaded(x), expected)


def test_extra_round_trip_and_file_contents(tmp_path):
    model = build_model("fno1d", **TINY["fno1d"][0])
    extra = {"x_mean": torch.arange(3.0), "note": "normalizers", "eps": 1e-8, "nested": {"k": [1, 2]}}
    path = save_model(model, tmp_path / "m.pt", extra=extra)
    loaded, got = load_model(path, return_extra=True)
    assert torch.equal(got["x_mean"], extra["x_mean"])
    assert got["note"] == "normalizers" and got["eps"] == 1e-8 and got["nested"] == {"k": [1, 2]}
    raw = torch.load(path, weights_only=True)
    assert set(raw) >= {"model_name", "config", "state_dict", "petrov_version", "extra"}
    assert load_checkpoint(path)["model_name"] == "fno1d"
    assert [p.name for p in tmp_path.iterdir()] == ["m.pt"]  # no temporary file left behind


def test_save_overwrites_atomically(tmp_path):
    path = tmp_path / "m.pt"
    a = build_model("fno1d", **TINY["fno1d"][0])
    b = build_model("fno1d", **dict(TINY["fno1d"][0], width=5))
    save_model(a, path)
    save_model(b, path)
    assert model_config(load_model(path))["width"] == 5
    assert os.listdir(tmp_path) == ["m.pt"]


def test_missing_file_raises(tmp_path):
    with pytest.raises(FileNotFoundError, match="no checkpoint"):
        load_model(tmp_path / "nope.pt")
    save_model(build_model("fno1d"), tmp_path / "new" / "dir" / "m.pt")  # output folders are created
    assert (tmp_path / "new" / "dir" / "m.pt").is_file()


@pytest.mark.parametrize("content", [b"", b"garbage" * 20, "truncate"])
def test_corrupt_file_raises(tmp_path, content):
    path = tmp_path / "m.pt"
    if content == "truncate":
        save_model(build_model("fno1d", **TINY["fno1d"][0]), path)
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    else:
        path.write_bytes(content)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_model(path)


def test_unsafe_objects_are_not_loaded(tmp_path):
    path = tmp_path / "evil.pt"
    torch.save({"format": "petrov-model", "model_name": "fno1d", "config": {},
                "state_dict": {}, "extra": {"obj": _Custom()}}, path)
    with pytest.raises(ValueError, match="holds pickled code") as err:
        load_model(path)
    assert "weights_only=False" not in str(err.value)  # never advise running the file's code


class _Custom:
    pass


def test_not_a_petrov_checkpoint(tmp_path):
    path = tmp_path / "other.pt"
    torch.save({"weights": torch.zeros(2)}, path)
    with pytest.raises(ValueError, match="not a petrov model checkpoint"):
        load_model(path)


def _rewrite(path, **changes):
    raw = torch.load(path, weights_only=True)
    raw.update(changes)
    torch.save(raw, path)


def test_unknown_model_name_raises(tmp_path):
    path = save_model(build_model("fno1d", **TINY["fno1d"][0]), tmp_path / "m.pt")
    _rewrite(path, model_name="fno9d")
    with pytest.raises(KeyError, match="unknown model 'fno9d'"):
        load_model(path)


def test_config_mismatch_raises(tmp_path):
    path = save_model(build_model("fno1d", **TINY["fno1d"][0]), tmp_path / "m.pt")
    raw = torch.load(path, weights_only=True)
    _rewrite(path, config=dict(raw["config"], colour="red"))
    with pytest.raises(ValueError, match="config does not match.*unknown key"):
        load_model(path)
    _rewrite(path, config=dict(raw["config"], width=7))
    with pytest.raises(ValueError, match="weights do not match"):
        load_model(path)


def test_save_rejects_a_plain_module(tmp_path):
    with pytest.raises(ValueError, match="build_model"):
        save_model(torch.nn.Linear(2, 2), tmp_path / "m.pt")


def test_a_model_built_with_its_own_constructor_saves_and_loads(tmp_path):
    from petrov.operators.models.fno import FNO1d, FNO1dConfig

    model = FNO1d(FNO1dConfig(width=8, modes=4, n_layers=1))
    loaded = load_model(save_model(model, tmp_path / "m.pt"))
    assert model_name(loaded) == "fno1d" and model_config(loaded) == model_config(model)
    x = torch.randn(2, 16, 1)
    torch.testing.assert_close(loaded(x), model.eval()(x), rtol=0, atol=0)
