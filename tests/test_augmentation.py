"""Training data moved by the symmetries of its problem: the unit square (``data.augment = "square"``:
the group, grids and points moved alike, Darcy solutions moved with their coefficients; refused where an
even pooling kernel makes the inverse problem's targets break it, and ``"diagonal"`` exact there) and the shifts
of a periodic grid (``"periodic"``: Burgers solutions moved with their initial fields, a stationary
initial law) and with them the odd reflection (``"periodic-odd"``: a centred law), the trainer's draws."""
import itertools

import numpy as np
import pytest
import torch
from skfem import MeshTri

from petrov.datasets.burgers import solve_burgers
from petrov.datasets.darcy import solve_darcy
from petrov.datasets.grf import neumann_grf_std, periodic_grf_1d
from petrov.datasets.mesh.fem import solve_darcy_fem
from petrov.datasets.sampling import average_pool
from petrov.train.augmentation import (SQUARE_SYMMETRIES, SymmetryDraws, augment_batch, check_augmentable,
                                       group_order, permute_square_grid, shift_periodic_grid, square_symmetry)
from petrov.train.data import Batch

ALL = torch.arange(SQUARE_SYMMETRIES)


def test_the_eight_maps_are_the_distinct_isometries_of_the_square():
    points = torch.rand(1, 50, 2, dtype=torch.float64).expand(8, 50, 2)
    moved = square_symmetry(points, ALL)
    assert torch.equal(moved[0], points[0])
    # isometries: every pairwise distance kept
    exact = dict(compute_mode="donot_use_mm_for_euclid_dist")
    assert torch.allclose(torch.cdist(moved, moved, **exact), torch.cdist(points, points, **exact), atol=1e-14)
    # the square onto itself: its corners permuted, its centre fixed
    corners = torch.tensor([[0.0, 0], [1, 0], [1, 1], [0, 1]], dtype=torch.float64).expand(8, 4, 2)
    images = square_symmetry(corners, ALL)
    for g in range(8):
        assert sorted(map(tuple, images[g].tolist())) == sorted(map(tuple, corners[0].tolist()))
    # eight different maps (each corner ordering once): D4 has exactly eight elements
    assert len({tuple(images[g].flatten().tolist()) for g in range(8)}) == 8


def _coords(s):
    """``(s, s, 2)`` node-grid coordinates of [0, 1]², axis 0 = x (as petrov's grids)."""
    t = torch.linspace(0, 1, s, dtype=torch.float64)
    return torch.stack(torch.meshgrid(t, t, indexing="ij"), dim=-1)


@pytest.mark.parametrize("s", [5, 6])
def test_a_grid_field_moves_as_its_points_do(s):
    # the value at node q must reach the node at g(q): the grid permutation is the point map
    field = torch.randn(8, s, s, 3, dtype=torch.float64)
    moved = permute_square_grid(field, ALL)
    coords = _coords(s).reshape(1, s * s, 2).expand(8, s * s, 2)
    targets = torch.round(square_symmetry(coords, ALL) * (s - 1)).long()  # node (i, j) of g(q)
    for g in range(8):
        i, j = targets[g, :, 0], targets[g, :, 1]
        assert torch.equal(moved[g][i, j], field[g].reshape(s * s, 3))


def test_darcy_solutions_move_with_their_coefficients_on_a_grid():
    # -div(a grad u) = 1, u = 0 on the boundary: the solution of a moved coefficient is the moved solution
    rng = np.random.default_rng(0)
    s = 17
    a = np.where(rng.standard_normal((1, s, s)) > 0, 12.0, 3.0) * rng.uniform(0.8, 1.2, (1, s, s))
    u = torch.from_numpy(solve_darcy(a, solver="superlu"))[..., None]
    a_moved = permute_square_grid(torch.from_numpy(a)[..., None].expand(8, s, s, 1), ALL)[..., 0].numpy()
    u_of_moved = torch.from_numpy(solve_darcy(np.ascontiguousarray(a_moved), solver="superlu"))[..., None]
    assert torch.allclose(u_of_moved, permute_square_grid(u.expand(8, s, s, 1), ALL), rtol=0, atol=1e-12)


@pytest.mark.parametrize("g", range(8))
def test_darcy_solutions_move_with_their_points_on_a_mesh(g, meshes):
    # the P1 solve on the moved mesh (each node keeping its coefficient) gives each node its old value
    mesh = meshes.jittered(8, notch=0.5, seed=1)
    a = np.random.default_rng(2).uniform(1.0, 10.0, len(mesh.triangles))
    u = solve_darcy_fem(MeshTri(mesh.points.T, mesh.triangles.T), a)
    moved = square_symmetry(torch.from_numpy(mesh.points)[None], torch.tensor([g]))[0].numpy()
    # a reflection reverses the triangles' orientation: restore counter-clockwise order
    flips = bin(g >> 1).count("1")
    triangles = mesh.triangles[:, ::-1] if flips % 2 else mesh.triangles
    u_moved = solve_darcy_fem(MeshTri(moved.T, np.ascontiguousarray(triangles.T)), a)
    assert np.allclose(u_moved, u, rtol=0, atol=1e-12 * np.abs(u).max())


def test_the_darcy_coefficient_law_is_symmetric_in_its_two_axes():
    # the swap x <-> y keeps the law: the cosine modes' standard deviations are symmetric in (k1, k2);
    # the reflections change the signs of the odd modes, whose draws are symmetric Gaussians
    std = np.asarray(neumann_grf_std(16))
    assert np.allclose(std, std.T, rtol=1e-14, atol=0)


def test_each_sample_gets_its_own_reproducible_draw_per_epoch():
    draws = SymmetryDraws(seed=3, n_ids=400, device=torch.device("cpu"))
    first, again = draws.table(0).clone(), SymmetryDraws(3, 400, torch.device("cpu")).table(0)
    assert torch.equal(first, again) and not torch.equal(first, draws.table(1))
    assert set(first.tolist()) == set(range(8))  # 400 draws: every element occurs
    b = Batch(torch.zeros(3, 4, 1), torch.zeros(3, 4, 1), torch.arange(3), {}, sample_ids=torch.tensor([7, 0, 399]))
    assert torch.equal(draws.of(b, 0), first[[7, 0, 399]])


def test_a_point_batch_moves_its_points_and_nothing_else():
    pos = torch.rand(2, 5, 2)
    b = Batch(torch.rand(2, 5, 1), torch.rand(2, 5, 1), torch.arange(2),
              {"pos": pos, "weights": torch.rand(2, 5), "boundary_distance": torch.rand(2, 5, 1)},
              weights=torch.rand(2, 5))
    moved = augment_batch(b, torch.tensor([2, 5]))
    assert torch.equal(moved.inputs["pos"], square_symmetry(pos, torch.tensor([2, 5])))
    assert moved.x is b.x and moved.y is b.y and moved.inputs["weights"] is b.inputs["weights"]
    assert b.inputs["pos"] is pos  # the loader's batch is not changed in place


def test_a_grid_batch_moves_input_and_target_each_on_its_own_grid(device):
    # the inverse problem: u on 9 x 9 in, a on 5 x 5 out; the draws looked up on the batch's device
    b = Batch(torch.rand(2, 9, 9, 1, device=device), torch.rand(2, 5, 5, 1, device=device), torch.arange(2),
              {"pos": _coords(9)[None].to(device)}, sample_ids=torch.tensor([4, 1]))
    draws = SymmetryDraws(seed=0, n_ids=8, device=device)
    g = draws.of(b, 2)
    assert g.device.type == torch.device(device).type  # "cuda" is "cuda:0" once allocated
    moved = augment_batch(b, g)
    for k in range(2):  # each sample on its own, against the CPU
        for field, original in ((moved.x, b.x), (moved.y, b.y)):
            expected = permute_square_grid(original[k:k + 1].cpu(), g[k:k + 1].cpu())
            assert torch.equal(field[k:k + 1].cpu(), expected)
    assert moved.inputs["pos"] is b.inputs["pos"]


@pytest.mark.parametrize("item, inputs, message", [
    ((torch.rand(32, 1), torch.rand(32, 1)), set(), "2-D square grids"),
    ((torch.rand(8, 6, 1), torch.rand(8, 6, 1)), set(), "2-D square grids"),
    ({"pos": torch.rand(10, 2) * 2}, set(), "not in [0, 1]²"),
    ({"pos": torch.rand(10, 2)}, {"grid_index", "grid_barycentric"}, "grid_barycentric"),
])
def test_data_the_symmetries_cannot_move_are_clear_errors(item, inputs, message):
    with pytest.raises(ValueError, match=message.replace("[", r"\[").replace("]", r"\]")) as err:
        check_augmentable(item, inputs, "data.h5")
    assert "data.augment" in str(err.value)


def test_movable_data_passes_the_check():
    check_augmentable((torch.rand(9, 9, 1), torch.rand(5, 5, 2)), set(), "data.h5")
    check_augmentable({"pos": torch.rand(10, 2)}, {"boundary_distance"}, "data.h5")


def _numpy_square_map(a: np.ndarray, g: int) -> np.ndarray:
    """Element ``g`` of D4 on fields ``a (b, s, s)`` written with numpy's flips: the swap (bit 0), then
    ``x → 1 − x`` (bit 1, axis 1), then ``y → 1 − y`` (bit 2, axis 2)."""
    if g & 1:
        a = a.transpose(0, 2, 1)
    if g & 2:
        a = a[:, ::-1]
    if g & 4:
        a = a[:, :, ::-1]
    return np.ascontiguousarray(a)


@pytest.mark.parametrize("fine, coarse, kernel", [(13, 5, 3), (13, 4, 4), (141, 36, 4), (141, 29, 5), (13, 7, 2)])
def test_pooling_commutes_with_the_square_for_odd_kernels_and_only_with_the_swap_for_even_ones(fine, coarse,
                                                                                                 kernel):
    """The inverse problem's target is pooled from the input grid: moving a sample moves the fine
    coefficient, so a symmetry is exact only where pooling the moved coefficient gives the moved pooled one."""
    a = np.random.default_rng(0).uniform(3, 12, size=(3, fine, fine))
    commutes = [np.allclose(_numpy_square_map(average_pool(a, coarse), g),
                            average_pool(_numpy_square_map(a, g), coarse), rtol=1e-13, atol=0)
                for g in range(SQUARE_SYMMETRIES)]
    assert commutes == ([True] * 8 if kernel % 2 else [True, True] + [False] * 6)
    moved = permute_square_grid(torch.from_numpy(a[..., None]), ALL[:3]).numpy()[..., 0]  # the trainer's moves
    assert all(np.array_equal(moved[k], _numpy_square_map(a[k:k + 1], k)[0]) for k in range(3))


def test_the_square_is_refused_for_a_target_pooled_by_an_even_kernel_and_the_diagonal_is_not():
    item = (torch.rand(141, 141, 1), torch.rand(36, 36, 1))
    with pytest.raises(ValueError, match="not centred") as err:
        check_augmentable(item, set(), "darcy.h5", "square", pooling=4)
    assert 'data.augment = "diagonal"' in str(err.value) and "141 to 36" in str(err.value)
    check_augmentable(item, set(), "darcy.h5", "diagonal", pooling=4)
    check_augmentable((torch.rand(141, 141, 1), torch.rand(29, 29, 1)), set(), "darcy.h5", "square", pooling=5)


def test_the_diagonal_draws_the_identity_and_the_swap_only():
    assert group_order("diagonal", (torch.rand(9, 9, 1),)) == 2
    draws = SymmetryDraws(seed=3, n_ids=64, device="cpu", order=group_order("diagonal", None))
    g = draws.table(0)
    assert set(g.tolist()) == {0, 1}
    field = torch.rand(64, 5, 5, 1)
    b = Batch(field, field.clone(), torch.arange(64), {}, sample_ids=torch.arange(64))
    moved = augment_batch(b, g, "diagonal")
    expected = torch.where(g[:, None, None, None].bool(), field.transpose(1, 2), field)
    assert torch.equal(moved.x, expected) and torch.equal(moved.y, expected)


def test_the_group_is_closed_under_composition():
    points = torch.rand(1, 20, 2, dtype=torch.float64)
    def key(p):  # 1 - (1 - x) need not be x to the last bit
        return tuple(torch.round(p * 1e9).long().flatten().tolist())

    images = {key(square_symmetry(points, torch.tensor([g]))) for g in range(8)}
    for g, h in itertools.product(range(8), repeat=2):
        assert key(square_symmetry(square_symmetry(points, torch.tensor([g])), torch.tensor([h]))) in images


# --- periodic shifts ---------------------------------------------------------------------------------

@pytest.mark.parametrize("grid", [(7,), (4, 6)])
def test_a_shift_moves_every_sample_along_every_axis_on_its_own(grid):
    # element g numbers the shifts (k_1, ..., k_d) row-major; the moved field is f(x - k/s), torch.roll's
    field = torch.randn(5, *grid, 2, dtype=torch.float64)
    order = int(np.prod(grid))
    g = torch.tensor([0, 1, 5, 17, order + 4]) % order
    moved = shift_periodic_grid(field, g)
    for k in range(5):
        shifts = np.unravel_index(int(g[k]), grid)
        assert torch.equal(moved[k], torch.roll(field[k], shifts=tuple(int(t) for t in shifts),
                                                dims=tuple(range(len(grid)))))
    assert group_order("periodic", (field[0], field[0])) == order


def test_burgers_solutions_move_with_their_initial_fields():
    # periodic boundaries and a viscosity that does not depend on x: solving commutes with every shift
    n = 64
    u0 = torch.from_numpy(periodic_grf_1d(n, seed=5, indices=[0]))
    shifts = torch.tensor([0, 1, 13, 40])
    moved = shift_periodic_grid(u0[..., None].expand(4, n, 1), shifts)[..., 0]
    u1 = solve_burgers(u0, nu=0.1)
    expected = shift_periodic_grid(u1[..., None].expand(4, n, 1), shifts)[..., 0]
    assert torch.allclose(solve_burgers(moved.contiguous(), nu=0.1), expected, rtol=0, atol=1e-12)


def test_the_burgers_initial_law_is_stationary():
    # the law every shift keeps: the covariance of u0(x_i), u0(x_j) depends on i - j only (sampled: its
    # entries within sampling error of their diagonal's mean; a law with one phase would be far off)
    n, samples = 8, 4000
    u0 = periodic_grf_1d(n, seed=11, indices=range(samples))
    cov = np.cov(u0, rowvar=False)
    lag = (np.arange(n)[None, :] - np.arange(n)[:, None]) % n
    by_lag = np.array([cov[lag == d].mean() for d in range(n)])
    assert np.abs(cov - by_lag[lag]).max() < 0.1 * cov.diagonal().mean()


@pytest.mark.parametrize("grid", [(7,), (4, 6)])
def test_the_odd_reflection_negates_the_mirror_image(grid):
    # elements 0 .. N-1: the shifts; N .. 2N-1: f(x) -> -f(-x - k/s), node i from node -i - k per axis
    field = torch.randn(6, *grid, 2, dtype=torch.float64)
    order = int(np.prod(grid))
    g = torch.tensor([0, 3, order - 1, order, order + 1, 2 * order - 1])
    moved = shift_periodic_grid(field, g, odd=True)
    for k in range(6):
        shifts = np.unravel_index(int(g[k]) % order, grid)
        if g[k] < order:
            assert torch.equal(moved[k], torch.roll(field[k], tuple(int(t) for t in shifts), tuple(range(len(grid)))))
        else:
            source = np.ix_(*((-np.arange(size) - shift) % size for size, shift in zip(grid, shifts)))
            assert torch.equal(moved[k], -field[k][source])
    assert group_order("periodic-odd", (field[0], field[0])) == 2 * order


def test_the_odd_group_has_as_many_distinct_elements_as_its_order():
    field = torch.randn(1, 6, 1, dtype=torch.float64).expand(12, 6, 1)
    moved = shift_periodic_grid(field, torch.arange(12), odd=True)
    assert len({tuple(m.flatten().tolist()) for m in moved}) == 12


def test_burgers_solutions_move_with_their_oddly_reflected_initial_fields():
    # v(x, t) = -u(-x, t) solves Burgers when u does: the reflected, negated elements commute with solving
    n = 64
    u0 = torch.from_numpy(periodic_grf_1d(n, seed=7, indices=[0]))
    g = torch.tensor([n, n + 1, n + 20, 2 * n - 1])
    moved = shift_periodic_grid(u0[..., None].expand(4, n, 1), g, odd=True)[..., 0]
    u1 = solve_burgers(u0, nu=0.1)
    expected = shift_periodic_grid(u1[..., None].expand(4, n, 1), g, odd=True)[..., 0]
    assert not torch.allclose(moved, u0.expand(4, n))  # the fields did move
    assert torch.allclose(solve_burgers(moved.contiguous(), nu=0.1), expected, rtol=0, atol=1e-12)


def test_the_burgers_initial_law_is_centred():
    # negation keeps a Gaussian law only if its mean is zero (the covariance, stationary, is even already);
    # sampled: every node's mean within 0.1 of the standard deviation (a mean of 0.5 std would be far off)
    n, samples = 8, 4000
    u0 = periodic_grf_1d(n, seed=12, indices=range(samples))
    assert np.abs(u0.mean(0)).max() < 0.1 * u0.std(0).mean()


def test_a_periodic_batch_moves_input_and_target_together(device):
    b = Batch(torch.rand(3, 16, 1, device=device), torch.rand(3, 16, 2, device=device), torch.arange(3),
              {"pos": torch.linspace(0, 1, 17, device=device)[:-1, None]}, sample_ids=torch.tensor([2, 0, 9]))
    draws = SymmetryDraws(seed=1, n_ids=10, device=device, order=16)
    g = draws.of(b, 0)
    moved = augment_batch(b, g, "periodic")
    for k in range(3):
        shift = int(g[k])
        assert torch.equal(moved.x[k].cpu(), torch.roll(b.x[k].cpu(), shift, 0))
        assert torch.equal(moved.y[k].cpu(), torch.roll(b.y[k].cpu(), shift, 0))
    assert moved.inputs["pos"] is b.inputs["pos"]  # the grid stays, the values move


def test_an_odd_batch_negates_input_and_target_together(device):
    b = Batch(torch.rand(4, 16, 1, device=device), torch.rand(4, 16, 2, device=device), torch.arange(4),
              {"pos": torch.linspace(0, 1, 17, device=device)[:-1, None]}, sample_ids=torch.arange(4))
    g = torch.tensor([2, 16, 21, 31])
    moved = augment_batch(b, g, "periodic-odd")
    for field, original in ((moved.x, b.x), (moved.y, b.y)):
        assert torch.equal(field.cpu(), shift_periodic_grid(original.cpu(), g, odd=True))
    assert (moved.x[1:] <= 0).all() and (moved.y[1:] <= 0).all()  # reflected: negated


def test_draws_cover_a_group_of_any_order():
    table = SymmetryDraws(seed=0, n_ids=2000, device=torch.device("cpu"), order=64).table(0)
    assert set(table.tolist()) == set(range(64))


@pytest.mark.parametrize("item, periodic, message", [
    ((torch.rand(16, 1), torch.rand(16, 1)), False, "is not periodic"),
    ({"pos": torch.rand(10, 1)}, True, "point sets"),
    ((torch.rand(16, 1), torch.rand(8, 1)), True, "differ"),
])
@pytest.mark.parametrize("group", ["periodic", "periodic-odd"])
def test_data_the_shifts_cannot_move_are_clear_errors(item, periodic, message, group):
    with pytest.raises(ValueError, match=message) as err:
        check_augmentable(item, set(), "data.h5", group, periodic=periodic)
    assert f'data.augment = "{group}"' in str(err.value)


def test_a_periodic_grid_passes_the_check():
    check_augmentable((torch.rand(16, 1), torch.rand(16, 3)), set(), "data.h5", "periodic", periodic=True)
    check_augmentable((torch.rand(4, 6, 1), torch.rand(4, 6, 1)), set(), "data.h5", "periodic", periodic=True)


# --- the trainer ------------------------------------------------------------------------------------

def _grid_data(n_train=8, n_val=4, s=9):
    from petrov.datasets import GridDataset, PointwiseGaussianNormalizer
    from petrov.train.data import TrainingData

    g = torch.Generator().manual_seed(0)
    x = torch.rand(n_train + n_val, s, s, 1, generator=g)
    y = x.cumsum(1) / s  # not symmetric: moved samples are other samples
    part = [GridDataset(x[k], y[k], kind="darcy", periodic=False, native_resolution=s, indices=np.asarray(k))
            for k in (np.arange(n_train), np.arange(n_train, n_train + n_val))]
    return TrainingData(part[0], part[1], PointwiseGaussianNormalizer.fit(part[0].x),
                        PointwiseGaussianNormalizer.fit(part[0].y), noise=0.0)


def _grid_config(augment, **data):
    from petrov.train.config import config_from_dict

    return config_from_dict({
        "data": {"path": "synthetic", "n_train": 8, "n_val": 4, "n_test": 0, "augment": augment, **data},
        "model": {"name": "fno2d", "options": {"width": 4, "modes": 2, "n_layers": 1, "proj_hidden": 4}},
        "optim": {"epochs": 2, "batch_size": 4},
        "run": {"device": "cpu", "progress": False, "threads": 1},
    })


def _line_data(n_train=8, n_val=4, s=16, periodic=True):
    from petrov.datasets import GridDataset, PointwiseGaussianNormalizer
    from petrov.train.data import TrainingData

    g = torch.Generator().manual_seed(1)
    x = torch.rand(n_train + n_val, s, 1, generator=g)
    y = x.cumsum(1) / s  # not shift-equivariant: moved samples are other samples
    part = [GridDataset(x[k], y[k], kind="burgers", periodic=periodic, native_resolution=s, indices=np.asarray(k))
            for k in (np.arange(n_train), np.arange(n_train, n_train + n_val))]
    return TrainingData(part[0], part[1], PointwiseGaussianNormalizer.fit(part[0].x),
                        PointwiseGaussianNormalizer.fit(part[0].y), noise=0.0)


def _line_config(augment):
    cfg = _grid_config(augment)
    cfg.model.name, cfg.model.options = "fno1d", {"width": 4, "modes": 2, "n_layers": 1, "proj_hidden": 4}
    return cfg


@pytest.mark.parametrize("group", ["square", "periodic", "periodic-odd"])
def test_an_augmented_run_trains_on_moved_samples_and_repeats_itself(tmp_path, group):
    from petrov.train import load_operator, train

    config, data = (_grid_config, _grid_data) if group == "square" else (_line_config, _line_data)
    weights = {}
    for name, augment in (("plain", "none"), ("moved", group), ("again", group)):
        train(config(augment), tmp_path / name, data=data())
        weights[name] = torch.cat([p.flatten() for p in load_operator(tmp_path / name).model.parameters()])
    assert not torch.equal(weights["plain"], weights["moved"])  # the option is not a no-op
    assert torch.equal(weights["moved"], weights["again"])  # the draws are seeded


def test_shifting_a_node_grid_is_a_clear_error(tmp_path):
    from petrov.train import train

    with pytest.raises(ValueError, match="not periodic"):
        train(_line_config("periodic"), tmp_path / "run", data=_line_data(periodic=False))


def test_augmenting_one_dimensional_data_by_the_square_is_a_clear_error(tmp_path):
    from petrov.train import train

    with pytest.raises(ValueError, match="2-D square grids"):
        train(_line_config("square"), tmp_path / "run", data=_line_data())


def _pooled_data(n_train=8, n_val=4, fine=13, coarse=4):
    """An inverse problem's splits: inputs on ``fine`` x ``fine``, targets pooled to ``coarse`` x ``coarse``."""
    from petrov.datasets import GridDataset, PointwiseGaussianNormalizer
    from petrov.train.data import TrainingData

    g = torch.Generator().manual_seed(2)
    a = torch.rand(n_train + n_val, fine, fine, generator=g, dtype=torch.float64)
    u = a.cumsum(1) / fine
    y = torch.from_numpy(average_pool(a.numpy(), coarse)).float()[..., None]
    part = [GridDataset(u[k].float()[..., None], y[k], kind="darcy-inverse", periodic=False, native_resolution=fine,
                        indices=np.asarray(k), coarse_resolution=coarse)
            for k in (np.arange(n_train), np.arange(n_train, n_train + n_val))]
    return TrainingData(part[0], part[1], PointwiseGaussianNormalizer.fit(part[0].x),
                        PointwiseGaussianNormalizer.fit(part[0].y), noise=0.0)


def test_the_trainer_refuses_the_square_for_targets_an_even_kernel_pooled_and_trains_the_diagonal(tmp_path):
    from petrov.train import load_operator, train

    def config(augment, coarse=4):
        cfg = _grid_config(augment)
        cfg.model.name = "latent2d_inverse"
        cfg.model.options = {"coarse_size": coarse, "d_model": 8, "n_layers": 1, "n_heads": 2, "dim_feedforward": 8,
                             "latent_size": 4, "fine_width": 4, "decoder_hidden": 8}
        return cfg

    with pytest.raises(ValueError, match="blocks of 4 x 4"):
        train(config("square"), tmp_path / "square", data=_pooled_data())
    weights = {}
    for name, augment in (("plain", "none"), ("diagonal", "diagonal")):
        train(config(augment), tmp_path / name, data=_pooled_data())
        weights[name] = torch.cat([p.flatten() for p in load_operator(tmp_path / name).model.parameters()])
    assert not torch.equal(weights["plain"], weights["diagonal"])
    train(config("square", coarse=5), tmp_path / "odd", data=_pooled_data(fine=13, coarse=5))  # k = 3: exact


def test_an_unknown_augmentation_is_a_config_error():
    with pytest.raises(ValueError, match="augment"):
        _grid_config("rotations")
