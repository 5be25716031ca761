"""Training and evaluating operators on meshes: the trainer, the metric and `petrov evaluate` on a mesh file.

A tiny darcy-mesh file (12 samples, coarse spacing, one refinement: level0 ~170 nodes, level1 and the
remesh ~630) is generated once; runs train for two epochs (the numbers mean nothing, the paths do).
"""
from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from petrov.cli import main as cli_main
from petrov.datasets import (fit_point_normalizer, generate_dataset, normalizers, open_mesh_dataset,
                             statistics_grid_size)
from petrov.operators import build_model
from petrov.train import NormalizedOperator, evaluate_relative_l2, load_config, train
from petrov.train.losses import relative_l2_per_sample

TOML = """
[data]
path = "{path}"
level = "level0"
n_train = 6
n_val = 3
n_test = 3
[model]
name = "{model}"
[model.options]
{options}
[optim]
epochs = 2
batch_size = 3
[run]
threads = 1
progress = false
"""
LATENT = "d_model = 8\nn_layers = 1\nn_heads = 2\nlatent_size = 6\nfine_width = 4\ndecoder_hidden = 8"


@pytest.fixture(scope="module")
def mesh_file(tmp_path_factory):
    torch.set_num_threads(1)
    path = tmp_path_factory.mktemp("mesh") / "mesh.h5"
    generate_dataset("darcy-mesh", path, 12, seed=0, progress=False, h=0.08, refinements=1)
    return path


def _config(tmp_path, mesh_file, model="mesh_latent", options=LATENT):
    cfg = tmp_path / f"{model}.toml"
    cfg.write_text(TOML.format(path=mesh_file, model=model, options=options))
    return cfg


def test_a_mesh_model_trains_on_one_level_and_is_tested_on_every_level(mesh_file, tmp_path):
    result = train(load_config(_config(tmp_path, mesh_file)), tmp_path / "run")
    assert [r["resolution"] for r in result.test] == ["level0", "level1", "remesh"]
    assert all(r["n"] == 3 and np.isfinite(r["mean"]) for r in result.test)
    saved = json.loads((tmp_path / "run" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in saved] == ["level0", "level1", "remesh"]


def test_petrov_evaluate_scores_every_level_and_draws_the_triangulations(mesh_file, tmp_path, capsys):
    run = tmp_path / "run"
    train(load_config(_config(tmp_path, mesh_file)), run)
    assert cli_main(["evaluate", str(run), "--resolutions", "level1,remesh"]) == 0
    rows = json.loads((run / "eval" / "metrics.json").read_text())["rows"]
    assert [r["resolution"] for r in rows] == ["level1", "remesh"]
    assert (run / "eval" / "error_vs_level.png").is_file() and (run / "eval" / "predictions.png").is_file()
    assert "remesh" in capsys.readouterr().out


def test_the_masked_grid_fno_trains_with_its_per_mesh_interpolation(mesh_file, tmp_path):
    options = "grid_size = 16\nwidth = 4\nmodes = 3\nn_layers = 1\nproj_hidden = 4"
    result = train(load_config(_config(tmp_path, mesh_file, "mesh_fno", options)), tmp_path / "fno")
    assert len(result.test) == 3 and all(np.isfinite(r["mean"]) for r in result.test)


def test_the_mesh_metric_is_the_quadrature_weighted_relative_l2(mesh_file):
    data = open_mesh_dataset(mesh_file, "level1", range(3))
    model = build_model("mesh_latent", d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=4,
                        decoder_hidden=8).eval()
    op = NormalizedOperator(model)
    got = evaluate_relative_l2(op, data, batch_size=2)
    for k in range(3):
        item = data[k]
        with torch.no_grad():
            pred = model(item["x"][None], item["pos"][None], item["weights"][None],
                         boundary=item["boundary"][None])[0]
        w = item["weights"].double()
        err = pred.double()[:, 0] - item["y"].double()[:, 0]
        plain = torch.sqrt((w * err**2).sum() / (w * item["y"].double()[:, 0] ** 2).sum())
        torch.testing.assert_close(got[k].double(), plain, rtol=1e-5, atol=0)
        # the padded form of the same sum: padding of weight 0 changes nothing
        padded = torch.cat([pred, torch.full((5, 1), 9.0)])[None]
        target = torch.cat([item["y"], torch.zeros(5, 1)])[None]
        weights = torch.cat([item["weights"], torch.zeros(5)])[None]
        torch.testing.assert_close(relative_l2_per_sample(padded, target, weights)[0].double(), plain, rtol=1e-5, atol=0)


def test_point_normalizers_are_quadrature_weighted_fields_on_the_unit_square(mesh_file, monkeypatch):
    monkeypatch.setattr(normalizers, "_FIT_BATCH", 3)  # the samples restricted in two padded batches
    data = open_mesh_dataset(mesh_file, "level0", range(4))
    norm = fit_point_normalizer(data, "x", size=5)
    # node (2, 2) of the 5 x 5 statistics grid, at (0.5, 0.5): a plain loop over the samples' nodes
    num = den = sq = 0.0
    for k in range(4):
        item = data[k]
        pos, w, a = item["pos"].double(), item["weights"].double(), item["x"][:, 0].double()
        hat = (1 - (4 * pos[:, 0] - 2).abs()).clamp_min(0) * (1 - (4 * pos[:, 1] - 2).abs()).clamp_min(0)
        num, den, sq = num + (hat * w * a).sum(), den + (hat * w).sum(), sq + (hat * w * a**2).sum()
    mean = num / den
    torch.testing.assert_close(norm.mean[2, 2, 0].double(), mean, rtol=1e-5, atol=0)
    torch.testing.assert_close(norm.std[2, 2, 0].double(), torch.sqrt(sq / den - mean**2), rtol=1e-4, atol=0)
    item = data[0]
    x, pos = item["x"][None], item["pos"][None]
    torch.testing.assert_close(norm.decode(norm.encode(x, pos), pos), x)
    # a trained operator keeps the model's boundary zeros in raw units, whatever the mean is there
    model = build_model("mesh_latent", d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=4,
                        decoder_hidden=8).eval()
    op = NormalizedOperator(model, norm, fit_point_normalizer(data, "y", size=5))
    with torch.no_grad():
        out = op.predict(x, pos, weights=item["weights"][None], boundary=item["boundary"][None])
    assert float(out[0, item["boundary"]].abs().max()) == 0.0 and float(out.abs().max()) > 0


def test_on_a_uniform_grid_the_field_normalizer_at_its_resolution_is_the_grid_normalizer():
    # samples on the 9 x 9 node grid of [0, 1]² (weights fixed per node, as a grid stored as a mesh): each
    # statistics hat then meets one node, so the field's statistics are the per-node mean and std over
    # the samples, what the grid path's point-wise normaliser holds
    n, samples = 9, 6
    axis = torch.linspace(0, 1, n, dtype=torch.float64)
    pos = torch.stack(torch.meshgrid(axis, axis, indexing="ij"), -1).reshape(-1, 2)
    weights = torch.rand(n * n, generator=torch.Generator().manual_seed(1), dtype=torch.float64) + 0.5
    fields = torch.randn(samples, n * n, 2, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    data = [{"x": u, "pos": pos, "weights": weights} for u in fields]
    norm = fit_point_normalizer(data, "x", size=n)
    mean = fields.mean(0)
    std = (fields.square().mean(0) - mean.square()).sqrt()  # over the samples (population)
    torch.testing.assert_close(norm.mean.reshape(-1, 2).double(), mean, rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(norm.std.reshape(-1, 2).double(), std, rtol=1e-5, atol=1e-6)
    # a coarser statistics grid averages neighbouring nodes: not the point-wise statistics
    assert not torch.allclose(fit_point_normalizer(data, "x", size=5).mean.double(), mean.reshape(n, n, 2)[::2, ::2],
                              atol=1e-2)


def test_the_statistics_grid_is_as_fine_as_the_meshes():
    # the triangulated 9 x 9 node grid's lumped-mass weights: h² inside, h²/2 on the edges, h²/4 or so at
    # the corners (the interior's majority sets the median): the statistics grid is the grid itself
    n = 9
    h = 1 / (n - 1)
    w = torch.full((n, n), h * h, dtype=torch.float64)
    w[0], w[-1], w[:, 0], w[:, -1] = h * h / 2, h * h / 2, h * h / 2, h * h / 2
    w[0, 0] = w[-1, -1] = h * h / 6
    w[0, -1] = w[-1, 0] = h * h / 3
    assert statistics_grid_size([{"weights": w.reshape(-1)}] * 3) == n
    # a mesh twice as fine in each direction: 4x the nodes, a quarter of the weights
    assert statistics_grid_size([{"weights": w.reshape(-1) / 4}] * 3) == 2 * (n - 1) + 1
    with pytest.raises(ValueError, match="quadrature weights are zero"):
        statistics_grid_size([{"weights": torch.zeros(5)}] * 2)


def test_data_normalizer_grid_sets_the_statistics_grid_of_a_mesh_run(mesh_file, tmp_path):
    train(load_config(_config(tmp_path, mesh_file), ["data.normalizer_grid=7"]), tmp_path / "set")
    train(load_config(_config(tmp_path, mesh_file)), tmp_path / "default")
    meshes = statistics_grid_size(open_mesh_dataset(mesh_file, "level0", range(6)))  # the training split
    assert meshes > 7
    for run, size in (("set", 7), ("default", meshes)):
        states = torch.load(tmp_path / run / "best.pt", weights_only=True)["extra"]["normalizers"]
        assert all(states[k]["kind"] == "field" and tuple(states[k]["mean"].shape[:2]) == (size, size)
                   for k in ("x", "y"))


@pytest.mark.parametrize("setting, message", [
    ("--set=model.name=latent2d", "takes grids"),
    ("--set=loss.h1_weight=0.5", "h1_weight"),
    ("--set=data.train_resolution=85", "holds point sets"),
])
def test_mismatched_settings_are_clear_errors(mesh_file, tmp_path, capsys, setting, message):
    cfg = _config(tmp_path, mesh_file, options="")
    assert cli_main(["train", str(cfg), "--out", str(tmp_path / "bad"), setting]) == 1
    assert message in capsys.readouterr().err


def test_a_mesh_model_on_a_grid_file_is_said_first_not_its_levels(mesh_file, tmp_path, capsys):
    grid = tmp_path / "grid.h5"
    generate_dataset("darcy", grid, 4, resolution=9, progress=False)  # fewer samples than the splits too
    cfg = _config(tmp_path, grid, options="")  # data.level = "level0", a mesh preset's setting
    assert cli_main(["train", str(cfg), "--out", str(tmp_path / "bad")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"petrov train: error: model MeshLatent takes point sets (meshes) but {grid} holds grids; choose "
                   f"a grid model")


def test_a_mesh_run_is_evaluated_on_imported_meshes_with_the_fields_it_takes(mesh_file, tmp_path, capsys, meshes):
    run = tmp_path / "run"
    train(load_config(_config(tmp_path, mesh_file)), run)
    sources = []
    for k in range(3):
        mesh = meshes.jittered(6, notch=0.5, seed=k)
        x, y = mesh.points.T
        fields = dict(a=3 + 9 * (x > 0.5), u=x * (1 - x) * y * (1 - y), a2=np.stack([x, y], -1))
        sources.append(tmp_path / f"m{k}.npz")
        np.savez(sources[-1], points=mesh.points, triangles=mesh.triangles, **fields)
    for name, x_field in (("mine.h5", "a"), ("wide.h5", "a2")):
        assert cli_main(["import", "--mesh", *map(str, sources), "--x-field", x_field, "--y-field", "u",
                         "-o", str(tmp_path / name), "--no-progress"]) == 0
    capsys.readouterr()
    # the run's levels are not in the file: its own mesh is scored
    assert cli_main(["evaluate", str(run), "--data", str(tmp_path / "mine.h5"), "--indices", "all", "--no-plots",
                     "--out", str(tmp_path / "ev")]) == 0
    rows = json.loads((tmp_path / "ev" / "metrics.json").read_text())["rows"]
    assert [(r["resolution"], r["n"]) for r in rows] == [("mesh", 3)] and np.isfinite(rows[0]["mean"])
    capsys.readouterr()
    assert cli_main(["evaluate", str(run), "--data", str(tmp_path / "wide.h5"), "--indices", "all", "--no-plots",
                     "--out", str(tmp_path / "ev2")]) == 1
    err = capsys.readouterr().err.strip()
    assert err == (f"petrov evaluate: error: {tmp_path / 'wide.h5'} holds meshes whose fields do not fit the model "
                   f"(trained on 'darcy-mesh' data): its x (a2) has 2 channel(s), the model takes 1; import meshes "
                   f"whose --x-field / --y-field have those channels")


def test_coarser_levels_hold_the_finest_solve_at_their_nodes(mesh_file):
    # nested levels: level0's nodes are level1's first nodes, and its data are level1's there
    coarse, fine = open_mesh_dataset(mesh_file, "level0")[5], open_mesh_dataset(mesh_file, "level1")[5]
    n = len(coarse["pos"])
    torch.testing.assert_close(fine["pos"][:n], coarse["pos"], rtol=0, atol=0)
    torch.testing.assert_close(fine["y"][:n], coarse["y"], rtol=0, atol=0)
    torch.testing.assert_close(fine["x"][:n], coarse["x"], rtol=0, atol=0)


def test_a_mesh_model_trains_on_points_moved_by_the_square_symmetries(mesh_file, tmp_path):
    result = train(load_config(_config(tmp_path, mesh_file)), tmp_path / "plain")
    cfg = tmp_path / "square.toml"
    cfg.write_text(_config(tmp_path, mesh_file).read_text().replace("[model]", 'augment = "square"\n[model]'))
    moved = train(load_config(cfg), tmp_path / "moved")
    assert all(np.isfinite(r["mean"]) for r in moved.test)
    assert [r["mean"] for r in moved.test] != [r["mean"] for r in result.test]


def test_models_with_inputs_tied_to_the_points_refuse_to_move_them(mesh_file, tmp_path, capsys):
    options = "grid_size = 8\nwidth = 4\nmodes = 2\nn_layers = 1\nproj_hidden = 4"
    cfg = _config(tmp_path, mesh_file, "mesh_fno", options)
    assert cli_main(["train", str(cfg), "--out", str(tmp_path / "bad"), "--set=data.augment=square"]) == 1
    err = capsys.readouterr().err
    assert "grid_barycentric" in err and "data.augment" in err and "Traceback" not in err


def _static_batches(dataset, model, batch):
    from petrov.operators.models import node_inputs, sample_transform
    from petrov.train import distributed as dist_
    from petrov.train.batches import Batches

    dataset = dataset.with_transform(sample_transform(model))
    order = dist_.sampler(dataset, dist_.Context(), shuffle=False)
    cpu = torch.device("cpu")
    return (list(Batches(dataset, batch, order, cpu)),
            list(Batches(dataset, batch, order, cpu, static=True, node_inputs=node_inputs(model))))


@pytest.mark.parametrize("name, options", [
    ("mesh_latent", dict(d_model=8, n_layers=1, n_heads=2, latent_size=6, fine_width=4, decoder_hidden=8)),
    ("mesh_fno", dict(grid_size=8, width=4, modes=2, n_layers=1, proj_hidden=4)),
    ("mesh_attention", dict(d_model=8, n_layers=1, n_heads=2, decoder_hidden=8)),
    ("mesh_transolver", dict(d_model=8, n_layers=1, n_heads=2, n_slices=4)),
])
def test_static_mesh_batches_pad_to_the_largest_mesh_of_the_split_and_change_no_output(mesh_file, name, options):
    """Under CUDA graphs every batch of a split has one shape: its rows padded to the batch size, its nodes
    to the split's largest mesh (zero-weight, masked nodes; the per-node inputs padded with them, the
    fixed-shape ones as they are), and the model's outputs on the real nodes are those of the batch
    padded to its own largest mesh (float64)."""
    torch.manual_seed(0)
    model = build_model(name, **options).double().eval()
    data = open_mesh_dataset(mesh_file, "level0", range(7))
    counts = data.node_counts
    assert len(set(counts.tolist())) > 1  # meshes of different sizes: the padding is real
    plain, static = _static_batches(data, model, batch=3)
    assert [b.n for b in static] == [3, 3, 1] and all(b.x.shape[:2] == (3, counts.max()) for b in static)
    assert any(b.x.shape[1] < counts.max() for b in plain)
    for a, b in zip(plain, static):
        n, m = a.n, a.x.shape[1]
        assert b.inputs["mask"][:n].sum(dim=1).tolist() == counts[a.positions.numpy()].tolist()
        assert not b.inputs["mask"][:, m:].any() and float(b.weights[:, m:].abs().sum()) == 0.0
        for key, value in a.inputs.items():
            if value.dim() >= 2 and value.shape[1] == m and key not in ("grid_index", "grid_barycentric"):
                assert torch.equal(b.inputs[key][:n, :m], value), key  # per node: padded with the nodes
            else:
                assert torch.equal(b.inputs[key][:n], value), key  # one shape per sample: as it was
        with torch.no_grad():
            inputs_a = {k: v.double() if v.is_floating_point() else v for k, v in a.inputs.items()}
            inputs_b = {k: v.double() if v.is_floating_point() else v for k, v in b.inputs.items()}
            out_a, out_b = model(a.x.double(), **inputs_a), model(b.x.double(), **inputs_b)
        torch.testing.assert_close(out_b[:n, :m], out_a, rtol=1e-12, atol=1e-12)
        assert float(out_b[:, m:].abs().sum()) == 0.0  # exact zeros on the padding
        w = a.weights.double()
        torch.testing.assert_close(relative_l2_per_sample(out_b[:n], b.y[:n].double(), b.weights[:n].double()),
                                   relative_l2_per_sample(out_a, a.y.double(), w), rtol=1e-12, atol=0)


def test_a_mesh_run_with_cuda_graphs_trains_as_an_eager_run_does(mesh_file, tmp_path, eager_compile):
    """The cuda-graphs code path on the CPU (every batch padded to the split's largest mesh, marked steps;
    compiled by dynamo's eager backend): the run ends where the eager run ends, to rounding."""
    torch.set_num_threads(1)
    eager = train(load_config(_config(tmp_path, mesh_file)), tmp_path / "eager")
    eager_compile("cuda-graphs")
    seen = []
    graphs = train(load_config(_config(tmp_path, mesh_file)), tmp_path / "graphs",
                   callbacks=[lambda trainer, record: seen.append(trainer.train_batches.n_points) or False])
    assert seen == [int(open_mesh_dataset(mesh_file, "level0", range(6)).node_counts.max())] * 2
    a, b = (torch.load(tmp_path / run / "last.pt", weights_only=True)["state_dict"] for run in ("eager", "graphs"))
    for key in a:
        torch.testing.assert_close(b[key], a[key], rtol=1e-4, atol=1e-5)
    assert graphs.best_val_rel_l2 == pytest.approx(eager.best_val_rel_l2, rel=1e-4)
    for x, y in zip(graphs.test, eager.test):
        assert x["mean"] == pytest.approx(y["mean"], rel=1e-4)
