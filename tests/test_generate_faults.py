"""Bad input to ``petrov generate``: refused up front with what to change, and no ``.partial`` left behind
by a run that failed before storing a sample (in-process, through the real entry point; tiny sizes)."""
import math
import shutil

import h5py
import numpy as np
import pytest
import torch

from petrov.cli import main
from petrov.datasets import burgers
from petrov.datasets.grid_generation import non_finite_message
from petrov.datasets.recipes import get_recipe

BURGERS = ("burgers", "--n-samples", 2, "--resolution", 64)


def generate(*args):
    return main(["generate", *map(str, args), "--no-progress"])


def error_line(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert err.count("\n") == 0, err  # one line, no traceback
    return err


def partial(out):
    return out.with_name(out.name + ".partial")


# --- 1. a viscosity the solver cannot afford ----------------------------------------------------------

def test_a_tiny_nu_is_refused_with_the_memory_it_needs_and_the_nu_that_fits(tmp_path, capsys):
    out = tmp_path / "nutiny.h5"
    assert generate(*BURGERS, "--nu", 1e-8, "-o", out) == 1
    err = error_line(capsys)
    assert err.startswith("petrov generate: error: burgers: nu=1e-08 with initial amplitude max|u0|=")
    assert "resolution 64) needs a solver grid of " in err and "TB of memory" in err and "use --nu >= " in err
    assert "allocate" not in err
    assert not out.exists() and not partial(out).exists()


def test_the_advised_nu_fits_and_the_defaults_are_never_refused():
    memory = 2**30
    with pytest.raises(ValueError, match=r"use --nu >= (\S+) for this amplitude") as err:
        burgers.check_solver_memory(64, 1e-6, 2.0, memory)
    advised = float(str(err.value).split("--nu >= ")[1].split()[0])
    burgers.check_solver_memory(64, advised, 2.0, memory)  # the advice holds once printed
    with pytest.raises(ValueError):
        burgers.check_solver_memory(64, advised * 0.9, 2.0, memory)
    for n in (64, 1024, 8192):  # the native grid and the FNO amplitudes fit in 1 GB at nu 0.1 and 0.01
        burgers.check_solver_memory(n, 0.1, 2.2, memory, batch=128)
        burgers.check_solver_memory(n, 0.01, 2.2, memory, batch=128)


@pytest.mark.parametrize("kind", ["burgers", "burgers-trajectory"])
def test_a_final_time_of_years_of_solving_is_refused_with_its_step_count(tmp_path, capsys, kind):
    out = tmp_path / "t.h5"
    assert generate(kind, "--n-samples", 2, "--resolution", 64, "--t", 1e10, "-o", out) == 1
    err = error_line(capsys)
    assert "burgers: t=1e+10 at nu=0.1" in err and "takes about 1e+12 time steps" in err and "smaller --t" in err
    assert not out.exists() and not partial(out).exists()
    for nu in (0.1, 1e-3):  # the reference's t = 1, and a horizon 1000 times longer, at FNO amplitudes
        burgers.check_time_steps(1.0, nu, 2.2)
        burgers.check_time_steps(1e3, nu, 2.2)


# --- 2. the random field's parameters -----------------------------------------------------------------

@pytest.mark.parametrize("kind, option, value, named", [
    ("burgers", "--sigma", 1e30, "sigma=1e+30"),
    ("burgers", "--sigma", 1e300, "sigma=1e+300"),
    ("burgers", "--sigma", 1e-300, "sigma=1e-300"),
    ("burgers", "--tau", 1e200, "tau=1e+200"),
    ("burgers", "--alpha", 1e30, "alpha=1e+30"),
    ("burgers", "--nu", 1e300, "nu=1e+300"),  # the solve gave NaN, blamed on a too small nu
    ("darcy", "--alpha", 1e30, "alpha=1e+30"),
    ("darcy", "--tau", 1e200, "tau=1e+200"),
])
def test_field_parameters_out_of_range_are_named(tmp_path, capsys, kind, option, value, named):
    out = tmp_path / "f.h5"
    resolution = 64 if kind == "burgers" else 9
    assert generate(kind, "--n-samples", 1, "--resolution", resolution, option, value, "-o", out) == 1
    err = error_line(capsys)
    assert named in err and f"{option}" in err, err
    assert "int too big" not in err and "out of range" not in err
    assert not out.exists() and not partial(out).exists()


@pytest.mark.parametrize("kind, option, value, named", [
    ("darcy", "--f", 0, "f = 0 makes u = 0 for every coefficient"),
    ("darcy", "--f", 1e300, "|f| = 1e+300 is too large: the samples are stored in float32"),
    ("darcy", "--high", 1e300, "high = 1e+300 is too large"),
    ("darcy", "--low", 1e-35, "|f| / min(high, low) = 1e+35 is too large"),
    ("darcy-mesh", "--f", 1e300, "|f| = 1e+300 is too large"),  # was "the generator made an invalid mesh"
    ("darcy-mesh", "--f", 0, "f = 0 makes u = 0"),
])
def test_darcy_parameters_whose_samples_are_zero_or_beyond_float32_are_named(tmp_path, capsys, kind, option,
                                                                              value, named):
    out = tmp_path / "f.h5"
    grid = ("--resolution", 9) if kind == "darcy" else ()
    assert generate(kind, "--n-samples", 1, *grid, option, value, "-o", out) == 1
    assert named in error_line(capsys)
    assert not out.exists() and not partial(out).exists()


def test_samples_beyond_float32_are_refused_not_stored_as_inf(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(burgers, "solve_burgers", lambda u0, **kwargs: np.full_like(u0, 1e39))
    out = tmp_path / "big.h5"
    assert generate(*BURGERS, "-o", out) == 1
    assert "burgers: y of samples 0..1 exceeds float32's range (3.4e38)" in error_line(capsys)
    assert not out.exists() and not partial(out).exists()


# --- 3. a blown-up solve says why and what to change ----------------------------------------------------

def nan_solver(u0, **kwargs):
    return np.full_like(u0, np.nan)


def test_non_finite_targets_name_the_cause_and_the_remedy(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr(burgers, "solve_burgers", nan_solver)
    out = tmp_path / "nu4.h5"
    assert generate(*BURGERS, "--nu", 1e-4, "-o", out) == 1
    err = error_line(capsys)
    assert "burgers: non-finite values in y for samples 0..1: the solver's time stepping blew up at this nu and " \
           "amplitude (not expected: the step is chosen for stability); use a larger --nu" in err
    assert "--resolution does not change" in err
    darcy = non_finite_message(get_recipe("darcy"), "y", 0, 3)
    assert darcy == "darcy: non-finite values in y for samples 0..3; check the equation parameters"


def test_a_blown_up_time_stepping_stops_early(monkeypatch):
    band, m = 8, 16
    v = torch.full((1, band), complex(math.nan, 0), dtype=torch.complex128)
    ones = torch.ones(band, dtype=torch.float64)
    transforms = []
    rfft = torch.fft.rfft
    monkeypatch.setattr(torch.fft, "rfft", lambda *a, **k: transforms.append(1) or rfft(*a, **k))
    out = burgers._step_all(v, 10**6, m, (ones,) * 6, torch.zeros(band, dtype=torch.complex128))
    assert torch.isnan(out.real).all() and transforms == []  # not a million steps of NaN
    finite = torch.zeros((1, band), dtype=torch.complex128)
    burgers._step_all(finite, 3, m, (ones,) * 6, torch.zeros(band, dtype=torch.complex128))
    assert len(transforms) == 3 * 4  # a finite one is stepped as before


# --- 4. a failed run leaves no partial file unless it stored samples -----------------------------------

def test_a_run_failing_before_any_sample_removes_its_partial_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "g.h5"
    monkeypatch.setattr(burgers, "solve_burgers", nan_solver)
    assert generate(*BURGERS, "--nu", 1e-4, "-o", out) == 1
    capsys.readouterr()
    assert not partial(out).exists()
    monkeypatch.undo()
    assert generate(*BURGERS, "--nu", 1e-2, "-o", out) == 0  # corrected settings start afresh
    assert f"wrote {out}" in capsys.readouterr().out


def test_a_run_failing_after_a_stored_sample_keeps_its_partial_file(tmp_path, capsys, monkeypatch):
    out = tmp_path / "g.h5"
    solve = burgers.solve_burgers
    calls = []

    def second_fails(u0, **kwargs):
        calls.append(1)
        return solve(u0, **kwargs) if len(calls) == 1 else nan_solver(u0)

    monkeypatch.setattr(burgers, "solve_burgers", second_fails)
    assert generate(*BURGERS, "--chunk-size", 1, "-o", out) == 1
    assert "non-finite values in y for samples 1..1" in error_line(capsys)
    with h5py.File(partial(out), "r") as h5:
        assert h5.attrs["n_complete"] == 1


def test_an_interrupted_run_keeps_its_partial_file_even_before_any_sample(tmp_path, capsys, monkeypatch):
    out = tmp_path / "g.h5"

    def interrupted(u0, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(burgers, "solve_burgers", interrupted)
    assert generate(*BURGERS, "-o", out) == 130
    assert "rerun the same command to resume" in capsys.readouterr().err
    assert partial(out).exists()


# --- 5. nothing to do is not "wrote" -------------------------------------------------------------------

def test_nothing_to_do_does_not_say_wrote(tmp_path, capsys):
    data, keep = tmp_path / "data.h5", tmp_path / "keep.h5"
    assert generate(*BURGERS, "-o", data) == 0
    assert capsys.readouterr().out.strip() == f"wrote {data}"
    shutil.copy(data, keep)
    for out in (data, keep):
        before = out.read_bytes()
        assert generate(*BURGERS, "-o", out) == 0
        text = capsys.readouterr().out
        assert f"{out} already holds these 2 samples; nothing to do" in text and "wrote" not in text
        assert out.read_bytes() == before
    assert generate(*BURGERS, "-o", keep, "--overwrite") == 0
    assert f"wrote {keep}" in capsys.readouterr().out
