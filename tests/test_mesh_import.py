"""Importing users' meshes (meshio files, .npz) into mesh datasets: round trips, orientation, boundary and
weights computed, every check applied with the sample named, the CLI."""
import json

import h5py
import meshio
import numpy as np
import pytest

from petrov.datasets.mesh import DarcyMeshParams, darcy_mesh_sample, import_meshes, open_mesh_dataset
from petrov.datasets.mesh.geometry import lumped_weights, signed_areas
from petrov.cli import main


@pytest.fixture(scope="module")
def samples():
    """Two Darcy samples on small meshes of different sizes: (points, triangles, a, u) each."""
    p = DarcyMeshParams(h=0.08, refinements=0, modes=16)
    out = []
    for index in (0, 1):
        s = darcy_mesh_sample(p, 0, index)[1]["level0"]
        out.append((s.points, s.triangles, s.x[:, 0].astype(np.float64), s.y[:, 0].astype(np.float64)))
    return out


def write_meshio(path, points, triangles, fields, extra_cells=(), **kwargs):
    cells = [("triangle", triangles), *extra_cells]
    meshio.write(path, meshio.Mesh(points, cells, point_data=fields), **kwargs)
    return path


def assert_round_trip(item, points, triangles, x, y):
    np.testing.assert_array_equal(item["pos"].double().numpy(), points.astype(np.float32))
    np.testing.assert_array_equal(item["triangles"].numpy(), triangles)
    np.testing.assert_array_equal(item["x"][:, 0].numpy(), x.astype(np.float32))
    np.testing.assert_array_equal(item["y"][:, 0].numpy(), y.astype(np.float32))
    np.testing.assert_allclose(item["weights"].numpy(), lumped_weights(points, triangles), rtol=1e-6)
    assert (item["y"][item["boundary"]] == 0).all()  # the Dirichlet nodes found from the edges


@pytest.mark.parametrize("suffix, kwargs", [(".vtu", {}), (".msh", {"file_format": "gmsh22", "binary": True}),
                                            (".xdmf", {})])
def test_meshio_files_round_trip(tmp_path, samples, suffix, kwargs):
    sources = []
    for k, (points, triangles, a, u) in enumerate(samples):
        # boundary line cells (gmsh's physical tags) are ignored
        lines = [("line", triangles[:1, :2])]
        sources.append(write_meshio(tmp_path / f"s{k}{suffix}", points, triangles, {"a": a, "u": u}, lines, **kwargs))
    out = import_meshes(tmp_path / "m.h5", sources, x_field="a", y_field="u")
    ds = open_mesh_dataset(out)
    assert len(ds) == 2 and ds.variant == "mesh" and ds.kind == "imported-mesh"
    for k, (points, triangles, a, u) in enumerate(samples):
        assert_round_trip(ds[k], points, triangles, a, u)
    with h5py.File(out, "r") as h5:
        assert h5.attrs["x_name"] == "a" and h5.attrs["y_name"] == "u" and json.loads(h5.attrs["levels"]) == ["mesh"]
        assert json.loads(h5.attrs["sources"]) == [str(s) for s in sources]


def test_npz_with_channels_and_clockwise_triangles(tmp_path, samples):
    points, triangles, a, u = samples[0]
    path = tmp_path / "s.npz"
    np.savez(path, nodes=points, cells=triangles[:, ::-1], a=np.stack([a, 2 * a], 1), u=u)  # clockwise
    out = import_meshes(tmp_path / "m.h5", [path], x_field="a", y_field="u", points_key="nodes", triangles_key="cells")
    item = open_mesh_dataset(out)[0]
    assert item["x"].shape == (len(points), 2)
    # put counter-clockwise: the same triangles up to the cyclic order of their vertices
    assert sorted(map(tuple, np.sort(item["triangles"].numpy(), 1))) == sorted(map(tuple, np.sort(triangles, 1)))
    assert (signed_areas(points, item["triangles"].numpy()) > 0).all()


def test_rescale_maps_into_the_unit_square(tmp_path, samples):
    points, triangles, a, u = samples[0]
    path = tmp_path / "s.npz"
    np.savez(path, points=points * [4.0, 2.0] - 1.0, triangles=triangles, a=a, u=u)
    with pytest.raises(ValueError, match=r"sample 0 .*outside \[0, 1\]².*--rescale"):
        import_meshes(tmp_path / "m.h5", [path], x_field="a", y_field="u")
    assert not (tmp_path / "m.h5").exists()
    out = import_meshes(tmp_path / "m.h5", [path], x_field="a", y_field="u", rescale=True)
    pos = open_mesh_dataset(out)[0]["pos"].double().numpy()
    assert pos.min() == 0.0 and pos[:, 0].max() == pytest.approx(1.0) and pos[:, 1].max() == pytest.approx(0.5)
    with h5py.File(out, "r") as h5:
        assert json.loads(h5.attrs["rescale"]) == {"offset": [-1.0, -1.0], "scale": 4.0}


@pytest.mark.parametrize("case, error, match", [
    ("quads", ValueError, "has quad cells; only linear triangle meshes"),
    ("no field", KeyError, r"has no point data \['u'\]; point data present: a"),
    ("duplicate", ValueError, r"sample 1 \(.*s1.vtu\): 1 pair\(s\) of duplicate nodes"),
    ("nan", ValueError, r"sample 1 \(.*s1.vtu\): field 'u' has NaN/Inf"),
    ("not planar", ValueError, "not in one plane"),
    ("unreadable", ValueError, "meshio cannot read it"),
    ("missing file", FileNotFoundError, "no such mesh file"),
])
def test_bad_meshes_are_named_and_leave_no_file(tmp_path, samples, case, error, match):
    points, triangles, a, u = samples[1]
    good = write_meshio(tmp_path / "s0.vtu", *samples[0][:2], {"a": samples[0][2], "u": samples[0][3]})
    bad = tmp_path / "s1.vtu"
    fields, cells = {"a": a, "u": u}, [("triangle", triangles)]
    if case == "quads":
        cells.append(("quad", np.array([[0, 1, 2, 3]])))
    elif case == "no field":
        fields = {"a": a}
    elif case == "duplicate":
        points = np.vstack([points, points[:1]])
        fields = {"a": np.append(a, 0.0), "u": np.append(u, 0.0)}
        triangles = triangles.copy()
        triangles[triangles == 0] = len(points) - 1
        triangles[0, np.flatnonzero(triangles[0] == len(points) - 1)] = 0
        cells = [("triangle", triangles)]
    elif case == "nan":
        fields = {"a": a, "u": np.where(np.arange(len(u)) == 5, np.nan, u)}
    if case == "not planar":
        points3 = np.column_stack([points, np.linspace(0, 1, len(points))])
        meshio.write(bad, meshio.Mesh(points3, cells, point_data=fields))
    elif case == "unreadable":
        bad.write_text("not a mesh")
    elif case != "missing file":
        meshio.write(bad, meshio.Mesh(points, cells, point_data=fields))
    out = tmp_path / "m.h5"
    with pytest.raises(error, match=match):
        import_meshes(out, [good, bad], x_field="a", y_field="u")
    assert not out.exists() and not list(tmp_path.glob(".m.h5.*"))


def test_cli_import_meshes_then_info(tmp_path, samples, capsys):
    sources = [str(write_meshio(tmp_path / f"s{k}.vtu", p, t, {"a": a, "u": u})) for k, (p, t, a, u) in enumerate(samples)]
    out = tmp_path / "m.h5"
    assert main(["import", "--mesh", *sources, "--x-field", "a", "--y-field", "u", "-o", str(out), "--no-progress"]) == 0
    assert f"wrote {out}" in capsys.readouterr().out
    assert main(["info", str(out)]) == 0
    text = capsys.readouterr().out
    assert "kind:        imported-mesh" in text and "2 of 2 (complete)" in text and "  mesh  " in text
    assert main(["import", "--mesh", *sources, "--x-field", "a", "-o", str(out)]) == 2
    assert "--mesh needs --y-field" in capsys.readouterr().err
    assert main(["import", "--mesh", *sources, "--x-field", "a", "--y-field", "u", "--grid", "nodes", "-o", str(out)]) == 2
    assert "--grid applies to grid arrays" in capsys.readouterr().err
    assert main(["import", "--x", "x.npy", "-o", str(out)]) == 2
    assert "grid arrays need --y, --grid" in capsys.readouterr().err


def test_meshio_prints_nothing_and_empty_files_are_named(tmp_path, samples, capsys):
    points, triangles, a, u = samples[0]
    msh = write_meshio(tmp_path / "s0.msh", points, triangles, {"a": a, "u": u}, file_format="gmsh22", binary=True)
    capsys.readouterr()
    import_meshes(tmp_path / "m.h5", [msh], x_field="a", y_field="u")
    assert capsys.readouterr() == ("", "")  # meshio's gmsh reader prints a blank line of its own
    (tmp_path / "bad.vtu").write_text("not a mesh")
    with pytest.raises(ValueError, match=r"bad.vtu: meshio cannot read it \(Couldn't read file .*bad.vtu as vtu\)"):
        import_meshes(tmp_path / "o.h5", [tmp_path / "bad.vtu"], x_field="a", y_field="u")
    assert capsys.readouterr() == ("", "")
    for name in ("empty.vtu", "empty.msh", "empty.npz"):
        (tmp_path / name).write_bytes(b"")
        with pytest.raises(ValueError, match=rf"{name} is empty \(0 bytes\): no mesh in it"):
            import_meshes(tmp_path / "o.h5", [msh, tmp_path / name], x_field="a", y_field="u")
    assert not (tmp_path / "o.h5").exists()


def test_a_mesh_file_given_twice_is_refused(tmp_path, samples):
    points, triangles, a, u = samples[0]
    src = write_meshio(tmp_path / "s0.vtu", points, triangles, {"a": a, "u": u})
    (tmp_path / "link.vtu").symlink_to(src)
    with pytest.raises(ValueError, match=r"s0.vtu is given twice; give each mesh file once"):
        import_meshes(tmp_path / "m.h5", [src, src], x_field="a", y_field="u")
    with pytest.raises(ValueError, match=r"link.vtu is given twice \(also as .*s0.vtu\)"):
        import_meshes(tmp_path / "m.h5", [src, tmp_path / "link.vtu"], x_field="a", y_field="u")
    assert not (tmp_path / "m.h5").exists()
