"""A PDEBench file end to end: written here in PDEBench's 2-D compressible-flow layout (four fields per state,
periodic, a rectangular 16 x 24 grid on [0, 1] x [0, 2]), imported with `petrov import --from pdebench`,
trained with a marching model that steps the four fields (`petrov train`), tested and evaluated per field at
two resolutions (`petrov evaluate`); a model of another number of fields or another domain is refused in one
line naming the option to set."""
from __future__ import annotations

import json

import h5py
import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main

N, T, NX, NY = 12, 6, 16, 24
NAMES = ["Vx", "Vy", "density", "pressure"]


@pytest.fixture(autouse=True)
def one_thread():
    torch.set_num_threads(1)


def smooth_fields(rng) -> dict[str, np.ndarray]:
    """(N, T, X, Y) per field: waves travelling along the periodic box with random amplitudes and phases,
    so that a state follows from the ones before it."""
    x = (np.arange(NX) + 0.5) / NX
    y = 2 * (np.arange(NY) + 0.5) / NY
    t = np.linspace(0, 1, T)
    X, Y, TT = np.meshgrid(x, y, t, indexing="ij")  # (X, Y, T)
    out = {}
    for f, name in enumerate(NAMES):
        a, p = rng.uniform(0.5, 1.5, (N, 1, 1, 1)), rng.uniform(0, 2 * np.pi, (N, 1, 1, 1))
        wave = a * np.sin(2 * np.pi * (X - 0.3 * TT) + np.pi * (f + 1) * Y / 2 + p) + (f == 2) * 2.0
        out[name] = np.moveaxis(wave, -1, 1).astype(np.float32)  # (N, T, X, Y)
    return out


@pytest.fixture(scope="module")
def imported(tmp_path_factory):
    """The PDEBench-layout source and the petrov file `petrov import --from pdebench` made of it."""
    root = tmp_path_factory.mktemp("pdebench")
    src = root / "2D_CFD_Rand_M0.1_Eta0.1_Zeta0.1_periodic_16_Train.hdf5"
    with h5py.File(src, "w") as h5:
        for name, values in smooth_fields(np.random.default_rng(0)).items():
            h5[name] = values
        h5["x-coordinate"] = (np.arange(NX) + 0.5) / NX
        h5["y-coordinate"] = 2 * (np.arange(NY) + 0.5) / NY
        h5["t-coordinate"] = np.linspace(0, 1, T + 1)
    out = root / "cfd.h5"
    assert cli_main(["import", "--from", "pdebench", str(src), "-o", str(out)]) == 0
    return out


def write_config(path, data, **model):
    with h5py.File(data, "r") as h5:
        domain = json.loads(h5.attrs["domain"])
    options = {"fields": 4, "history": 2, "time_steps": 3, "periodic": True, "domain": domain, "width": 6,
               "modes": 3, "n_layers": 2, "proj_hidden": 8} | model
    rows = ", ".join(f"{k} = {json.dumps(v)}" for k, v in options.items())
    path.write_text(f"""
[data]
path = "{data}"
train_resolution = [8, 12]
eval_resolutions = [[8, 12], [16, 24]]
n_train = 8
n_val = 2
n_test = 2
normalizer = "global"
first_state = 1
history = 2

[model]
name = "arfno2d"
options = {{ {rows} }}

[optim]
epochs = 2
batch_size = 4
lr = 1e-3

[loss]
mode = "pushforward"
trajectory_metric = "space_time"

[run]
device = "cpu"
progress = false
threads = 1
""")
    return path


def test_a_pdebench_file_trains_and_is_evaluated_per_field_at_two_resolutions(tmp_path, imported, capsys):
    config = write_config(tmp_path / "cfd.toml", imported)
    assert cli_main(["train", str(config), "--out", str(tmp_path / "run")]) == 0
    rows = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in rows] == [[8, 12], [16, 24]]
    for r in rows:
        assert r["fields"] == NAMES and len(r["field_mean"]) == 4 and 0 < r["mean"] < 10
        assert len(r["per_time_field_mean"]) == 5 and all(len(s) == 4 for s in r["per_time_field_mean"])
    capsys.readouterr()
    assert cli_main(["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "8x12" in out and "16x24" in out and all(name in out for name in NAMES)
    saved = json.loads((tmp_path / "eval" / "metrics.json").read_text())["rows"]
    for t, e in zip(rows, saved):  # the run's test and evaluate's are one quantity
        assert t["mean"] == pytest.approx(e["mean"], rel=1e-5)
    assert {"states.png", "error_vs_time.png"} <= {p.name for p in (tmp_path / "eval").iterdir()}


@pytest.mark.parametrize("model, expected", [
    ({"fields": 1}, "set model.options.fields = 4"),
    ({"domain": [[0.0, 1.0], [0.0, 1.0]]}, "set model.options.domain = [["),
    ({"periodic": [True, False]}, "set model.options.periodic = [true, true]"),
])
def test_a_model_of_other_fields_or_geometry_is_refused_in_one_line(tmp_path, imported, capsys, model, expected):
    config = write_config(tmp_path / "cfd.toml", imported, **model)
    assert cli_main(["train", str(config), "--out", str(tmp_path / "run")]) != 0
    err = capsys.readouterr().err.strip()
    assert expected in err and len(err.splitlines()) == 1, err


def test_the_diffusion_reaction_preset_trains_on_a_file_of_pdebench_layout(tmp_path, capsys):
    """`pdebench-diffusion-reaction` as its comment runs it, on a small file of PDEBench's group-per-sample
    layout (two fields on 16 x 16 cells of [-1, 1]^2, 14 states): import, train, evaluate per field at two
    resolutions; only the sizes are made small."""
    rng = np.random.default_rng(1)
    src = tmp_path / "2D_diff-react_NA_NA.h5"
    centres = np.linspace(-1, 1, 33)[1::2]
    X, Y = np.meshgrid(centres, centres, indexing="ij")
    with h5py.File(src, "w") as h5:
        for i in range(10):
            a = rng.uniform(0.5, 1.5, 2)
            states = [[a[f] * np.exp(-0.2 * (f + 1) * t) * np.cos(np.pi * (X + 1) / 2) * np.cos(np.pi * f * (Y + 1) / 2)
                       for f in range(2)] for t in np.linspace(0, 1, 14)]
            g = h5.create_group(f"{i:04d}")
            g["data"] = np.moveaxis(np.asarray(states), 1, -1)  # (T, X, Y, C)
            g["grid/x"], g["grid/y"], g["grid/t"] = centres, centres, np.linspace(0, 1, 14)
    data = tmp_path / "data" / "2D_diff-react.h5"
    assert cli_main(["import", "--from", "pdebench", str(src), "--grid", "cells", "--fields", "u", "v",
                     "-o", str(data)]) == 0
    small = ["data.train_resolution=8", "data.eval_resolutions=[8, 16]", "data.n_train=6", "data.n_val=2",
             "data.n_test=2", "data.history=2", "data.states=5", "model.options.history=2", "model.options.time_steps=3",
             "model.options.width=4", "model.options.modes=3", "model.options.padding=2", "optim.epochs=1",
             "~run.time_budget_minutes", "run.fill_budget=false", "run.device=\"cpu\"", "run.progress=false",
             f"data.path=\"{data}\""]
    args = [a for s in small for a in ("--set", s)]
    assert cli_main(["train", "pdebench-diffusion-reaction", "--out", str(tmp_path / "run"), *args]) == 0
    capsys.readouterr()
    assert cli_main(["evaluate", str(tmp_path / "run"), "--out", str(tmp_path / "eval")]) == 0
    out = capsys.readouterr().out
    assert "field" in out and " u " in f" {out} " and " v " in f" {out} "
    rows = json.loads((tmp_path / "eval" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in rows] == [8, 16] and all(r["fields"] == ["u", "v"] for r in rows)
