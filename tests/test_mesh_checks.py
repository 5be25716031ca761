"""check_mesh: every kind of broken mesh is a ValueError naming the sample, the problem and what to do."""
import numpy as np
import pytest

from petrov.datasets.mesh import check_mesh


def two_triangles():
    points = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    triangles = np.array([[0, 1, 2], [0, 2, 3]])
    return points, triangles, {"u": np.zeros(4)}


def test_a_valid_mesh_passes():
    points, triangles, fields = two_triangles()
    check_mesh(points, triangles, fields=fields)


def broken(kind):
    points, triangles, fields = two_triangles()
    if kind == "duplicate nodes":
        points = np.vstack([points, points[2]])
        triangles = np.array([[0, 1, 2], [0, 4, 3]])
        fields = {"u": np.zeros(5)}
    elif kind == "unreferenced nodes":
        points = np.vstack([points, [[0.5, 2.0]]])
        fields = {"u": np.zeros(5)}
    elif kind == "inverted":
        triangles = np.array([[0, 1, 2], [0, 3, 2]])
    elif kind == "degenerate":
        points = np.vstack([points, [[0.5, 0.0]]])
        triangles = np.array([[0, 4, 1], [0, 1, 2], [0, 2, 3]])
        fields = {"u": np.zeros(5)}
    elif kind == "nan field":
        fields = {"u": np.array([0.0, np.nan, 0.0, 0.0])}
    elif kind == "inf point":
        points = points.copy()
        points[1, 0] = np.inf
    elif kind == "lengths":
        fields = {"u": np.zeros(3)}
    elif kind == "out of range":
        triangles = np.array([[0, 1, 2], [0, 2, 4]])
    elif kind == "one-based":
        triangles = triangles + 1
    elif kind == "overlap":
        points = np.vstack([points, [[0.6, 0.3]]])
        triangles = np.array([[0, 1, 2], [0, 2, 3], [0, 1, 4]])
        fields = {"u": np.zeros(5)}
    return points, triangles, fields


@pytest.mark.parametrize("kind, message", [
    ("duplicate nodes", "duplicate nodes"),
    ("unreferenced nodes", "belong to no triangle"),
    ("inverted", "inverted"),
    ("degenerate", "degenerate triangle"),
    ("nan field", "field 'u' has NaN/Inf at 1 node"),
    ("inf point", "NaN/Inf coordinates"),
    ("lengths", "field 'u' has 3 rows for 4 nodes"),
    ("out of range", "indices run from 0 to 4 but there are 4 nodes"),
    ("one-based", "0-based"),
    ("overlap", "overlaps itself or is folded"),
])
def test_broken_meshes_are_named(kind, message):
    points, triangles, fields = broken(kind)
    with pytest.raises(ValueError, match=message) as err:
        check_mesh(points, triangles, fields=fields, name="sample 7 (run.vtu)")
    assert str(err.value).startswith("sample 7 (run.vtu): ")
    assert "import it again" in str(err.value)  # what to do


def test_shapes_and_types():
    points, triangles, _ = two_triangles()
    with pytest.raises(ValueError, match=r"real \(n, 2\) array"):
        check_mesh(points[:, :1], triangles)
    with pytest.raises(ValueError, match="must be integers"):
        check_mesh(points, triangles.astype(float))
    with pytest.raises(ValueError, match=r"\(t >= 1, 3\)"):
        check_mesh(points, triangles[:, :2])
