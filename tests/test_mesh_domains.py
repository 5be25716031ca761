"""Random domains and the Delaunay mesher: valid polygons per family, boundary-conforming meshes of good
quality that cover exactly the polygon, nested refinements, an independent remesh of the same polygon."""
import numpy as np
import pytest

from petrov.datasets.mesh import DOMAIN_FAMILIES, Domain, mesh_domain, sample_domain, to_skfem
from petrov.datasets.mesh.domains import check_domain, loop_gap, signed_area, subdivide
from petrov.datasets.mesh.fem import from_skfem
from petrov.datasets.mesh.geometry import boundary_distance, boundary_edges, min_angle, segment_distance, signed_areas
from petrov.datasets.mesh.mesher import boundary_nodes, hexagonal_lattice

H = 0.058


def domains(family, count=8, seed=0):
    return [sample_domain(np.random.default_rng([seed, i]), H, [family]) for i in range(count)]


@pytest.mark.parametrize("family", DOMAIN_FAMILIES.names())
def test_every_family_gives_valid_domains_inside_the_unit_square(family):
    for domain in domains(family):
        assert domain.family == family
        check_domain(domain, H)  # simple, oriented, edges <= h, holes inside and 3 h apart
        for loop in domain.loops:
            assert loop.min() >= 0.0 and loop.max() <= 1.0
        assert 0.4 < domain.area < 1.0


def test_holes_keep_three_spacings_from_each_other_and_the_boundary():
    seen = set()
    for domain in domains("holes", count=20):
        seen.add(len(domain.holes))
        for k, hole in enumerate(domain.holes):
            assert signed_area(hole) < 0  # clockwise
            for other in domain.loops[: k + 1]:
                assert loop_gap(hole, other) >= 3 * H - 1e-12
    assert seen == {1, 2, 3}


def test_a_domain_depends_only_on_its_generator():
    a = sample_domain(np.random.default_rng([5, 3, 7]), H)
    b = sample_domain(np.random.default_rng([5, 3, 7]), H)
    assert a.family == b.family and all(np.array_equal(x, y) for x, y in zip(a.loops, b.loops))


def test_check_domain_names_what_is_wrong():
    outer = subdivide(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), H)
    hole = np.array([[0.1, 0.1], [0.1, 0.2], [0.2, 0.2], [0.2, 0.1]])  # clockwise, 0.1 from the boundary
    with pytest.raises(ValueError, match="hole 1 is closer than 3.0 h to the outer loop"):
        check_domain(Domain("test", outer, (hole,)), H)
    with pytest.raises(ValueError, match="outer loop is clockwise"):
        check_domain(Domain("test", outer[::-1]), H)
    with pytest.raises(ValueError, match="edge longer than h"):
        check_domain(Domain("test", outer), H / 2)
    bowtie = np.array([[0.0, 0.0], [0.05, 0.05], [0.0, 0.05], [0.05, 0.0]])
    with pytest.raises(ValueError, match="crosses itself"):
        check_domain(Domain("test", bowtie), H)


@pytest.mark.parametrize("h", [H, H / 4])
def test_boundary_distance_is_the_plain_distance_near_the_boundary(h):
    for family in DOMAIN_FAMILIES.names():
        domain = domains(family, count=1)[0]
        nodes, segments = boundary_nodes(domain, h)
        points = hexagonal_lattice(np.random.default_rng(0), h)
        plain = segment_distance(points, nodes[segments[:, 0]], nodes[segments[:, 1]])  # every pair
        near = boundary_distance(points, nodes, segments, 0.55 * h)
        close = plain < 0.55 * h
        np.testing.assert_allclose(near[close], plain[close], rtol=1e-12)
        assert np.isinf(near[~close]).all() and close.any()


@pytest.mark.parametrize("family", DOMAIN_FAMILIES.names())
@pytest.mark.parametrize("h", [H, H / 4])
def test_meshes_conform_to_the_polygon_and_cover_it_exactly(family, h):
    for i, domain in enumerate(domains(family, count=3)):
        points, triangles = mesh_domain(domain, h, np.random.default_rng(i))
        area = signed_areas(points, triangles)
        assert (area > 0).all()  # counter-clockwise
        assert area.sum() == pytest.approx(domain.area, rel=1e-12)  # no gap, no overlap beyond the polygon
        assert np.degrees(min_angle(points, triangles)) > 15.0
        # the mesh boundary is exactly the subdivided polygon: every segment an edge, nothing else
        nodes, segments = boundary_nodes(domain, h)
        np.testing.assert_array_equal(points[: len(nodes)], nodes)
        mesh_edges = {tuple(e) for e in boundary_edges(triangles)}
        assert mesh_edges == {tuple(sorted(s)) for s in segments}
        assert domain.contains(points[triangles].mean(axis=1)).all()


def test_coarse_mesh_size_and_levels():
    domain = domains("holes", count=1)[0]
    points, triangles = mesh_domain(domain, H, np.random.default_rng(0))
    assert 300 <= len(points) <= 400
    coarse = to_skfem(points, triangles)
    fine = coarse.refined()
    fine_points, fine_triangles = from_skfem(fine)
    np.testing.assert_array_equal(fine_points[: len(points)], points)  # nested: the coarse nodes come first
    assert len(fine_triangles) == 4 * len(triangles)
    assert signed_areas(fine_points, fine_triangles).sum() == pytest.approx(domain.area, rel=1e-12)
    remesh, _ = mesh_domain(domain, H / 2, np.random.default_rng(1))
    assert 0.8 < len(remesh) / len(fine_points) < 1.25
    interior = remesh[len(boundary_nodes(domain, H / 2)[0]):]
    assert np.min(np.linalg.norm(interior[:, None] - fine_points[None], axis=2), axis=1).max() > 0.0


def test_a_slit_narrower_than_the_spacing_cannot_be_meshed():
    # a hole 0.2 h wide whose walls have nodes at different heights: a node of one wall falls inside the
    # diametral circle of a segment of the other, and the domain's interior lies beyond that segment
    w = 0.2 * H
    outer = subdivide(np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]]), H)
    slit = subdivide(np.array([[0.5, 0.3], [0.5, 0.7], [0.5 + w, 0.7], [0.5 + w, 0.67], [0.5 + w, 0.3]]), H)
    with pytest.raises(RuntimeError, match="boundary segment"):
        mesh_domain(Domain("test", outer, (slit,)), H, np.random.default_rng(0), attempts=2)
