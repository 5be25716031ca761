"""petrov export: a trained grid operator's whole inference path (normalisers included) written as ONNX and as a
torch.export program computes what the PyTorch operator computes, at the export's resolution and, with a
dynamic grid size, at others; the ONNX graph holds no complex number; bad requests are one-line errors
that leave nothing behind.

The ONNX tests need the optional packages of ``petrov[export]`` and skip without them; the torch.export
tests run everywhere.
"""
from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest
import torch

from petrov.datasets.normalizers import PointwiseGaussianNormalizer
from petrov.export import FIXED_RESOLUTION, TOLERANCE, export_operator
from petrov.export import api as export_api
from petrov.export.statistics import resample
from petrov.operators import build_model
from petrov.train.checkpoint import load_operator, save_run_checkpoint

HAVE_ONNX = all(importlib.util.find_spec(m) is not None for m in ("onnx", "onnxscript", "onnxruntime"))
needs_onnx = pytest.mark.skipif(not HAVE_ONNX,
                                reason='ONNX export needs the optional packages: pip install "petrov[export]"')
FORMATS = [pytest.param("onnx", marks=needs_onnx), "torch-export"]
SUFFIX = {"onnx": ".onnx", "torch-export": ".pt2"}

_ATTENTION = {"d_model": 16, "n_layers": 1, "n_heads": 2}
_FNO = {"width": 8, "modes": 4, "n_layers": 2, "proj_hidden": 8}
# name -> (options, grid axes, resolution): tiny models, untrained
CASES = {
    "fno1d": (_FNO, 1, 32),
    "fno2d": (_FNO, 2, 17),
    "latent1d": ({**_ATTENTION, "latent_size": 8, "fine_width": 8, "decoder_width": 8, "modes": 4}, 1, 32),
    "latent2d": ({**_ATTENTION, "latent_size": 6, "fine_width": 8, "decoder_width": 8, "modes": 4,
                  "latent_kernel": 3}, 2, 17),
    "latent2d_inverse": ({**_ATTENTION, "latent_size": 6, "fine_width": 8, "coarse_size": 5}, 2, 17),
    "galerkin1d": ({**_ATTENTION, "decoder_width": 8, "modes": 4}, 1, 32),
    "galerkin2d": ({**_ATTENTION, "coarse_size": 6, "decoder_width": 8, "modes": 4}, 2, 17),
    "galerkin2d_inverse": ({**_ATTENTION, "coarse_size": 6}, 2, 17),
    "transolver1d": (_ATTENTION, 1, 32),
    "transolver2d": (_ATTENTION, 2, 17),
    "marching1d": ({**_ATTENTION, "time_steps": 2, "width": 8, "modes": 4, "summary_modes": 3,
                    "mixer": "galerkin"}, 1, 32),
    "arfno1d": ({**_FNO, "time_steps": 2}, 1, 32),
}
DYNAMIC = [name for name in CASES if name not in FIXED_RESOLUTION]
# Exporting a model takes seconds to minutes on a CPU: the fast suite (make test) exports one model of each
# kind -- 1-D attention, 2-D latent attention, spectral, time marching -- and the others run with the slow
# tests (make test-all, CI).
FAST_EXPORTED = ("galerkin1d", "latent2d", "fno2d", "arfno1d")


def model_cases(names) -> list:
    return [name if name in FAST_EXPORTED else pytest.param(name, marks=pytest.mark.slow) for name in names]


def test_the_fast_suite_exports_each_kind_at_a_fixed_and_a_dynamic_grid():
    assert set(FAST_EXPORTED) <= set(DYNAMIC)


def write_run(root: Path, name: str) -> Path:
    """A run folder whose best.pt holds ``name`` (untrained) with point-wise normalisers of non-trivial mean and
    std, fitted (drawn) on a native grid twice as fine as the training resolution, as `petrov train` leaves it."""
    options, ndim, n = CASES[name]
    torch.manual_seed(0)
    model = build_model(name, **options).eval()
    periodic = model.config.periodic
    native = 2 * n if periodic else 2 * (n - 1) + 1
    with torch.no_grad():
        out_grid = model(torch.zeros(2, *(n,) * ndim, model.input_channels)).shape[1:]
    g = torch.Generator().manual_seed(1)

    def stats(grid, **kinds):
        return PointwiseGaussianNormalizer(torch.randn(*grid, generator=g), 0.5 + torch.rand(*grid, generator=g),
                                           periodic=periodic, **kinds)

    x_norm = stats((native,) * ndim + (model.input_channels,))
    follows = out_grid[0] == n  # an inverse model's output lives on its own fixed grid
    y_norm = stats(((native,) * ndim if follows else tuple(out_grid[:-1])) + (out_grid[-1],), strideable=follows)
    run = root / name
    run.mkdir(parents=True, exist_ok=True)
    save_run_checkpoint(run / "best.pt", model, {"x": x_norm, "y": y_norm}, epoch=1,
                        train_config={"data": {"train_resolution": n}})
    return run


def run_file(path: Path, fmt: str, x: torch.Tensor) -> torch.Tensor:
    """The written file run on ``x`` as a user runs it (onnxruntime, or torch.export.load)."""
    if fmt == "onnx":
        import onnxruntime

        session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
        return torch.from_numpy(session.run(["y"], {"x": x.numpy()})[0])
    with torch.no_grad():
        return torch.export.load(path).module()(x)


def relative_l2(out: torch.Tensor, ref: torch.Tensor) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm())


def raw_input(run: Path, n: int, batch: int, seed: int = 5) -> torch.Tensor:
    op = load_operator(run)
    return export_api.random_input(op, n, op.model.grid_ndim, op.model.input_channels, batch,
                                   torch.Generator().manual_seed(seed))


def no_complex_numbers(path: Path) -> None:
    """The ONNX graph holds no Fourier transform node and no complex value (inferred types included)."""
    import onnx

    model = onnx.shape_inference.infer_shapes(onnx.load(str(path)))
    graphs = [model.graph, *[f for f in model.functions]]
    ops = {node.op_type for g in graphs for node in g.node}
    assert not ops & {"DFT", "STFT"}, ops
    complex_types = {onnx.TensorProto.COMPLEX64, onnx.TensorProto.COMPLEX128}
    values = [*model.graph.input, *model.graph.output, *model.graph.value_info]
    assert not [v.name for v in values if v.type.tensor_type.elem_type in complex_types]
    assert not [t.name for t in model.graph.initializer if t.data_type in complex_types]


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", model_cases(CASES))
def test_every_grid_model_exports_at_its_resolution_and_matches(tmp_path, name, fmt):
    run = write_run(tmp_path, name)
    path = tmp_path / f"{name}{SUFFIX[fmt]}"
    result = export_operator(run, path, format=fmt)
    n = CASES[name][2]
    assert result.sizes is None and list(result.differences) == [n]
    assert result.differences[n] <= TOLERANCE
    op = load_operator(run)
    for batch in (1, 3):  # the batch size is free
        x = raw_input(run, n, batch)
        with torch.no_grad():
            ref = op.predict(x)
        assert relative_l2(run_file(path, fmt, x), ref) <= TOLERANCE
    if fmt == "onnx":
        no_complex_numbers(path)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("name", model_cases(DYNAMIC))
def test_a_dynamic_grid_size_matches_at_three_resolutions(tmp_path, name, fmt):
    if fmt == "onnx" and name not in ("fno2d", "latent1d", "transolver2d"):
        pytest.skip("ONNX with a dynamic grid: fno2d, latent1d and transolver2d here; all with -m slow")
    _dynamic_case(tmp_path, name, fmt)


@pytest.mark.slow
@needs_onnx
@pytest.mark.parametrize("name", [n for n in DYNAMIC if n not in ("fno2d", "latent1d", "transolver2d")])
def test_a_dynamic_grid_size_matches_in_onnx_for_every_model(tmp_path, name):
    _dynamic_case(tmp_path, name, "onnx")


def _dynamic_case(tmp_path: Path, name: str, fmt: str) -> None:
    run = write_run(tmp_path, name)
    path = tmp_path / f"{name}{SUFFIX[fmt]}"
    result = export_operator(run, path, format=fmt, dynamic=True)
    n = CASES[name][2]
    assert result.sizes is not None and result.sizes.low <= n and n in result.sizes
    assert len(result.differences) == 3 and n in result.differences  # the export's size and two others
    assert max(result.differences.values()) <= TOLERANCE, result.differences
    other = max(result.differences)  # the written file too, at a batch size the check did not take
    x = raw_input(run, other, 3)
    with torch.no_grad():
        ref = load_operator(run).predict(x)
    assert relative_l2(run_file(path, fmt, x), ref) <= TOLERANCE
    if fmt == "onnx":
        no_complex_numbers(path)


@pytest.mark.parametrize("name", sorted(FIXED_RESOLUTION))
def test_models_with_a_fixed_resolution_refuse_a_dynamic_one_saying_why(tmp_path, name):
    run = write_run(tmp_path, name)
    with pytest.raises(ValueError, match=r"fixed resolution only: its convolutional samplers .*round\(sqrt"):
        export_operator(run, tmp_path / "g.pt2", dynamic=True)
    assert not (tmp_path / "g.pt2").exists()


# --- the statistics a dynamic export resamples in its graph -----------------------------------------------

@pytest.mark.parametrize("native, sizes, kinds", [
    (9, [5, 3, 9], {}),                          # node grid, strided sub-grids
    (9, [6, 4, 13], {}),                         # node grid, interpolated (coarser and finer)
    (16, [8, 4, 2], {"periodic": True}),         # periodic grid, strided sub-grids
    (12, [6, 4, 3], {"cells": True}),            # cell grid, block averages
])
def test_statistics_resampled_in_the_graph_equal_at_resolution(native, sizes, kinds):
    g = torch.Generator().manual_seed(0)
    norm = PointwiseGaussianNormalizer(torch.randn(native, native, 2, generator=g, dtype=torch.float64),
                                       torch.rand(native, native, 2, generator=g, dtype=torch.float64), **kinds)
    for m in sizes:
        here = norm.at_resolution(m)
        for ours, theirs in ((norm.mean, here.mean), (norm.std, here.std)):
            got = resample(ours, (m, m), norm.periodic, norm.cells)
            torch.testing.assert_close(got, theirs, rtol=1e-12, atol=1e-12)


# --- errors: one line, nothing written ---------------------------------------------------------------------

def test_an_unknown_format_and_a_suffix_without_one_are_refused(tmp_path):
    run = write_run(tmp_path, "fno1d")
    with pytest.raises(ValueError, match="unknown export format 'tflite'; registered: onnx, torch-export"):
        export_operator(run, tmp_path / "m.tflite", format="tflite")
    with pytest.raises(ValueError, match=r"which format\? .* \(one of onnx \(\.onnx\), torch-export \(\.pt2\)\)"):
        export_operator(run, tmp_path / "m.bin")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["fno1d"]


def test_an_unwritable_output_path_is_refused_before_the_work(tmp_path):
    run = write_run(tmp_path, "fno1d")
    (tmp_path / "plain").write_text("a file")
    with pytest.raises(NotADirectoryError, match="is a file, not a directory"):
        export_operator(run, tmp_path / "plain" / "m.pt2")
    with pytest.raises(IsADirectoryError, match="is a folder; give a file name"):
        export_operator(run, run)


def test_a_run_folder_without_best_pt_says_so(tmp_path):
    run = write_run(tmp_path, "fno1d")
    (run / "best.pt").rename(run / "last.pt")
    with pytest.raises(FileNotFoundError, match=r"has no best\.pt \(it holds last\.pt\)"):
        export_operator(run, tmp_path / "m.pt2")
    with pytest.raises(FileNotFoundError, match="run folder .* does not exist"):
        export_operator(tmp_path / "nowhere", tmp_path / "m.pt2")
    with pytest.raises(ValueError, match="no shipped operator 'darcy'"):
        export_operator("pretrained:darcy", tmp_path / "m.pt2")


@needs_onnx
def test_onnxruntime_missing_for_the_check_gives_the_pip_line(tmp_path, monkeypatch):
    run = write_run(tmp_path, "fno1d")
    monkeypatch.setitem(sys.modules, "onnxruntime", None)  # import fails as if not installed
    with pytest.raises(ModuleNotFoundError, match=r'checking an ONNX export needs the package onnxruntime, which is '
                                                  r'not installed: pip install "petrov\[export\]"'):
        export_operator(run, tmp_path / "m.onnx")
    assert not (tmp_path / "m.onnx").exists()


def test_an_export_that_fails_its_check_writes_nothing(tmp_path, monkeypatch):
    run = write_run(tmp_path, "fno1d")
    target = tmp_path / "out" / "m.pt2"
    target.parent.mkdir()
    monkeypatch.setattr(export_api, "TOLERANCE", -1.0)  # every difference is too large
    with pytest.raises(ValueError, match="computes other numbers than the PyTorch operator: .* nothing written"):
        export_operator(run, target)
    assert list(target.parent.iterdir()) == []  # no file, no temporary file


def test_mesh_models_are_refused_in_one_line(tmp_path):
    model = build_model("mesh_latent", d_model=16, n_layers=1, n_heads=2, latent_size=4, fine_width=8)
    run = tmp_path / "mesh"
    run.mkdir()
    save_run_checkpoint(run / "best.pt", model, {"x": None, "y": None}, epoch=1)
    with pytest.raises(ValueError, match="mesh_latent takes meshes: .* grid operators only"):
        export_operator(run, tmp_path / "m.pt2", resolution=8)


def test_the_command_writes_the_file_and_answers_errors_in_one_line(tmp_path, cli):
    run = write_run(tmp_path, "fno1d")
    code, out, err = cli("export", run, "-o", tmp_path / "m.pt2", "--dynamic")
    assert code == 0, err
    assert "exported fno1d" in out and "resolution dynamic (6 <= n; traced at 32)" in out
    assert "relative L2 difference" in out and f"wrote {tmp_path / 'm.pt2'}" in out
    assert torch.export.load(tmp_path / "m.pt2").module()(raw_input(run, 64, 1)).shape == (1, 64, 1)
    code, out, err = cli("export", tmp_path / "nowhere", "-o", tmp_path / "n.pt2")
    assert code == 1 and err.count("\n") == 1 and err.startswith("petrov export: error: run folder")
    code, out, err = cli("export", run, "-o", tmp_path / "n.pt2", "--format", "tflite")
    assert code == 2 and err.startswith("petrov export: error: unknown export format 'tflite'; registered: onnx, ")
