"""``petrov generate`` and ``petrov info`` in-process through the real entry point."""
import json

import h5py
import pytest

from petrov.cli import main


def generate(*args):
    return main(["generate", *map(str, args), "--no-progress"])


def test_generate_burgers_with_equation_parameters(tmp_path, capsys):
    out = tmp_path / "b.h5"
    assert generate("burgers", "--n-samples", 3, "--resolution", 64, "--seed", 9, "-o", out,
                    "--nu", 0.05, "--t", 0.5, "--chunk-size", 2) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    with h5py.File(out, "r") as h5:
        assert h5["x"].shape == (3, 64)
        assert (h5.attrs["nu"], h5.attrs["t"], h5.attrs["seed"], h5.attrs["chunk_size"]) == (0.05, 0.5, 9, 2)


def test_existing_output_is_refused_unless_overwrite(tmp_path, capsys):
    out = tmp_path / "b.h5"
    args = ("burgers", "--n-samples", 2, "--resolution", 64, "-o", out)
    assert generate(*args) == 0
    capsys.readouterr()
    assert generate(*args) == 0  # the same settings again: nothing to do
    assert "nothing to do" in capsys.readouterr().out
    assert generate(*args[:-2], "--seed", 3, "-o", out) == 1
    assert "already exists" in capsys.readouterr().err
    assert generate(*args, "--overwrite") == 0


def test_bad_values_are_reported_not_raised(tmp_path, capsys):
    out = tmp_path / "b.h5"
    assert generate("burgers", "--n-samples", 2, "--resolution", 64, "-o", out, "--nu", -1) == 1
    assert "nu must be a finite positive number" in capsys.readouterr().err
    assert generate("darcy-inverse", "--n-samples", 2, "--resolution", 17, "-o", out,
                    "--coarse-resolution", 6) == 1
    assert "coarse_resolution 6" in capsys.readouterr().err
    assert not out.exists()


def test_unknown_kind_or_option_is_a_usage_error(tmp_path, capsys):
    with pytest.raises(SystemExit) as err:
        generate("heat", "--n-samples", 2, "-o", tmp_path / "h.h5")
    assert err.value.code == 2 and "invalid choice: 'heat'" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        generate("burgers", "--n-samples", 2, "-o", tmp_path / "h.h5", "--averaging", "harmonic")
    assert "unrecognized arguments: --averaging" in capsys.readouterr().err


def test_info_prints_what_the_file_holds(tmp_path, capsys):
    out = tmp_path / "b.h5"
    generate("burgers", "--n-samples", 3, "--resolution", 64, "-o", out)
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    for expected in ("kind:        burgers", "3 of 3 (complete)", "(3, 64), (3, 64)", "periodic, native resolution 64",
                     "resolutions: 2, 4, 8, 16, 32, 64", "nu = 0.1", "petrov_version = "):
        assert expected in text
    assert main(["info", str(out), "--json"]) == 0
    info = json.loads(capsys.readouterr().out)
    assert info["kind"] == "burgers" and info["n_complete"] == 3 and info["resolutions"][-1] == 64


def test_info_on_missing_file(tmp_path, capsys):
    assert main(["info", str(tmp_path / "none.h5")]) == 1
    assert "no such dataset file" in capsys.readouterr().err


def test_generate_darcy_inverse_and_info(tmp_path, capsys):
    out = tmp_path / "inv.h5"
    assert generate("darcy-inverse", "--n-samples", 2, "--resolution", 9, "-o", out, "--coarse-resolution", 5,
                    "--noise", 0.01, "--averaging", "harmonic") == 0
    capsys.readouterr()
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kind:        darcy-inverse" in text and "coarse_resolution = 5" in text and "noise = 0.01" in text
    assert "averaging = harmonic" in text and "resolutions: 2, 3, 5, 9" in text


def test_info_on_an_fno_mat_file(tmp_path, capsys):
    import numpy as np
    import scipy.io

    path = tmp_path / "piececonst_tiny.mat"
    scipy.io.savemat(path, {"coeff": np.full((2, 9, 9), 3.0), "sol": np.zeros((2, 9, 9))})
    assert main(["info", str(path)]) == 0
    text = capsys.readouterr().out
    assert "(fno-mat-v5)" in text and "kind:        darcy" in text and "2 of 2 (complete)" in text
    assert "nodes, native resolution 9" in text and "resolutions: 2, 3, 5, 9" in text
