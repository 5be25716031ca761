"""Training data augmented by the symmetries of its problem: ``data.augment = "square"`` (the unit
square's quarter turns and reflections), ``"diagonal"`` (the reflection ``x ↔ y`` alone), ``"periodic"``
(shifts along a periodic grid) or ``"periodic-odd"`` (the shifts and the odd reflection ``u(x) → −u(−x)``).

When a problem commutes with a map and its data are drawn from a law the map keeps, a sample moved by the
map -- the pair ``(a ∘ g⁻¹, u ∘ g⁻¹)`` -- is a sample of the same law, and the training split is in
effect as many times larger as the group has elements.

The square.  ``[0, 1]²`` has eight symmetries, the dihedral group D4: the identity, three quarter turns
and four reflections, every one a composition of ``x ↔ y``, ``x → 1 − x`` and ``y → 1 − y``.  Element
``g ∈ {0, …, 7}`` applies, in this order, the swap when bit 0 of ``g`` is set, ``x → 1 − x`` for bit 1
and ``y → 1 − y`` for bit 2 (``square_symmetry``).  Darcy flow ``−∇·(a∇u) = f`` with constant ``f``
and ``u = 0`` on the boundary commutes with every map that preserves distances, and petrov's Darcy data
are drawn from laws invariant under D4: the coefficient thresholds a Gaussian cosine series
``Σ ξ_k cos(πk₁x) cos(πk₂y)`` whose variances are symmetric in ``(k₁, k₂)`` (the swap) and whose signs
are symmetric (a reflection changes the sign of the odd modes); ``darcy-mesh`` domains are turned by a
random number of quarter turns, their holes and deformations drawn without a preferred direction.

Pooled targets.  The inverse problem's target is the coefficient average-pooled from the input grid to a
coarse one (``petrov.datasets.sampling.average_pool``, the reference's pooling): with a kernel ``k`` of even
size, the block of coarse node ``j`` covers fine nodes ``jk − k/2 + 1 … jk + k/2`` (one more after the node
than before), and a reflection ``x → 1 − x`` maps it to a block one fine node off the one pooled there.  The
pooled target of a reflected sample is then not the reflected pooled target: for ``darcy-inverse-gpu``'s
141 → 36 (``k = 4``) the two differ by 4.9e-2 to 7.0e-2 in relative L² (the reflections and quarter turns;
64 samples of its data), twice the error the model is trained to reach.  Only the exchange ``x ↔ y`` (and
the identity) keeps such a pooling: ``"diagonal"``, the subgroup of D4 of these two elements, is exact
there, ``"square"`` is refused.  An odd kernel (``k = 5``: 141 → 29) is centred, and the square is exact.

Periodic shifts.  On a periodic grid of ``s₁ × … × s_d`` nodes (``x_j = j/s`` on ``[0, 1)``, the end
left out) the shifts by whole nodes form the group ``Z_{s₁} × … × Z_{s_d}``; element ``g`` is the
row-major number of its shifts ``(k₁, …, k_d)`` (``periodic_shift_index``), and the moved field is
``f(x − k/s)``.  A PDE with periodic boundaries and coefficients that do not depend on ``x`` commutes
with every shift, by any distance, so with the shifts of the grid exactly.  petrov's Burgers data
(``u_t + (u²/2)_x = ν u_xx`` on the periodic ``[0, 1)``) qualify: the initial field is the Gaussian
``Σ a_k cos(2πkx) + b_k sin(2πkx)`` with ``a_k`` and ``b_k`` of one variance, a law that every shift
keeps (a shift turns each ``(a_k, b_k)`` by an angle).

The odd reflection.  ``"periodic-odd"`` adds to the shifts the reflection ``x → −x`` of the grid
(node ``i`` to node ``−i``, each axis modulo its size) with every field negated: the group of
``2 s₁⋯s_d`` maps ``f(x) → f(x − k/s)`` and ``f(x) → −f(−x − k/s)``, element ``g`` the shift number
``g mod s₁⋯s_d``, reflected when ``g ≥ s₁⋯s_d``.  Burgers commutes with it: for ``v(x, t) =
−u(−x, t)``, ``v_t + v v_x − ν v_xx`` is minus Burgers' residual of ``u`` at ``−x``; and the initial
law keeps it (the reflection takes ``(a_k, b_k)`` to ``(a_k, −b_k)`` and the negation both to their
negatives: a centred Gaussian with these variances is the same law).  Advection at a fixed velocity
does not commute with it (the reflection reverses the flow), nor does a law with a non-zero mean: choose
the group from the problem, not from the grid.

None of them holds for a forcing, coefficient or boundary value that picks a place or direction, nor for data
of your own whose law you have not checked.  The trainer refuses what a group cannot move (a 1-D grid
for the square, a node grid with both ends for the shifts, ...).

How a batch moves (``augment_batch``): grid fields ``(b, *grid, c)`` have their nodes permuted (the
grid's coordinates stay: the values move; ``"periodic-odd"`` negates the reflected ones), point sets
have their points ``pos`` moved by the square (values, weights, boundary flags and the distance to the
boundary travel with their points).  Each training sample gets its own element in each epoch, drawn
from ``(run seed, epoch)`` (``SymmetryDraws``): reproducible, the same after a resume in the middle of
an epoch, the same on every process of a distributed run; read nothing back from the device.
Validation and test see the samples as they are.
"""
from __future__ import annotations

import math
from dataclasses import replace
from typing import Any

import torch

from ..datasets.sampling import pool_kernel
from ..grids.shape_cache import shape_cached
from .data import Batch, sample_ids

SQUARE_SYMMETRIES = 8
# the groups of the square's symmetries, by their number of elements: D4's elements are numbered so that
# the first two are the identity and the exchange x <-> y (bit 0), the subgroup "diagonal"
SQUARE_GROUPS = {"square": SQUARE_SYMMETRIES, "diagonal": 2}
PERIODIC_GROUPS = ("periodic", "periodic-odd")  # the groups that move fields along a periodic grid
# per-sample inputs that a symmetry of the square leaves as they are (the distance to the boundary is
# a distance); any other per-sample input of a model is tied to its sample's original points
_INVARIANT_INPUTS = {"pos", "weights", "mask", "boundary", "boundary_distance"}


def square_symmetry(pos: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``pos (b, n, 2)`` in ``[0, 1]²`` moved by the elements ``g (b,)`` of D4 (module docstring):
    ``(x, y) → (y, x)`` if ``g & 1``, then ``x → 1 − x`` if ``g & 2``, then ``y → 1 − y`` if ``g & 4``."""
    g = g.to(pos.device)[:, None]
    swap = (g & 1).bool()
    x = torch.where(swap, pos[..., 1], pos[..., 0])
    y = torch.where(swap, pos[..., 0], pos[..., 1])
    x = torch.where((g & 2).bool(), 1 - x, x)
    y = torch.where((g & 4).bool(), 1 - y, y)
    return torch.stack([x, y], dim=-1)


def square_grid_permutation(size: int, g: torch.Tensor) -> torch.Tensor:
    """``(b, size²)`` flat node indices: row ``k`` of a field moved by ``g[k]`` takes its value at node
    ``i`` from node ``index[k, i]`` of the original (a node grid or a cell-centred grid of the unit
    square: node ``(i, j)`` at ``x = i h``, ``1 − x`` is node ``size − 1 − i``)."""
    ij = torch.arange(size, device=g.device)
    i, j = torch.meshgrid(ij, ij, indexing="ij")
    # the moved field at node p equals the original at g⁻¹(p); each generator is its own inverse, and
    # g⁻¹ applies them in reverse order: y-flip, x-flip, then the swap
    g = g[:, None, None]
    j = torch.where((g & 4).bool(), size - 1 - j, j)
    i = torch.where((g & 2).bool(), size - 1 - i, i)
    swap = (g & 1).bool()
    i, j = torch.where(swap, j, i), torch.where(swap, i, j)
    return (i * size + j).reshape(len(g), size * size)


@shape_cached
def _every_grid_permutation(size: int, device: torch.device) -> torch.Tensor:
    """``(8, size²)``: ``square_grid_permutation`` of every element, built once per size and device."""
    return square_grid_permutation(size, torch.arange(SQUARE_SYMMETRIES, device=device))


def gather_nodes(field: torch.Tensor, index: torch.Tensor) -> torch.Tensor:
    """``field (b, *grid, c)`` with sample ``k``'s value at node ``i`` (flat, row-major) taken from its
    node ``index[k, i]`` (``index (b, s₁⋯s_d)``): the one gather behind every moved grid field."""
    b, c = field.shape[0], field.shape[-1]
    flat = field.reshape(b, -1, c).gather(1, index[..., None].expand(-1, -1, c))
    return flat.reshape(field.shape)


def permute_square_grid(field: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``field (b, s, s, c)`` with each sample's nodes permuted by its element of ``g (b,)``:
    the field ``f ∘ g⁻¹`` on the same grid."""
    return gather_nodes(field, _every_grid_permutation(field.shape[1], field.device)[g.to(field.device)])


def periodic_shift_index(grid: tuple[int, ...], g: torch.Tensor,
                         reflect: torch.Tensor | None = None) -> torch.Tensor:
    """``(b, s₁⋯s_d)`` flat node indices on the periodic ``grid = (s₁, …, s_d)``: row ``k`` of a field
    shifted by ``g[k]``, the row-major number of the shifts ``(k₁, …, k_d)``, takes its value at node
    ``i`` from node ``i − k`` (each axis modulo its size): the field ``f(x − k/s)``.  Where
    ``reflect (b,)`` (bool) is set, from node ``−i − k``: the field ``f(−x − k/s)``."""
    shifts = torch.unravel_index(g, grid)
    nodes = torch.meshgrid(*(torch.arange(size, device=g.device) for size in grid), indexing="ij")
    per_sample = (-1,) + (1,) * len(grid)
    direction = 1 if reflect is None else 1 - 2 * reflect.long().view(per_sample)
    flat = torch.zeros((), dtype=torch.long, device=g.device)
    for node, size, shift in zip(nodes, grid, shifts):
        flat = flat * size + (direction * node - shift.view(per_sample)) % size
    return flat.reshape(len(g), -1)


def move_periodic(fields: tuple[torch.Tensor, ...], g: torch.Tensor,
                  odd: bool = False) -> tuple[torch.Tensor, ...]:
    """``fields`` (each ``(b, *grid, c)``, one grid) with sample ``k`` moved by element ``g[k]`` (``(b,)``)
    of the periodic shifts (``odd``: of the shifts and the odd reflection; module docstring); the node
    indices built once for all of them."""
    grid = tuple(fields[0].shape[1:-1])
    g, shifts = g.to(fields[0].device), math.prod(grid)
    reflect = g >= shifts if odd else None
    index = periodic_shift_index(grid, g % shifts, reflect)
    moved = tuple(gather_nodes(field, index) for field in fields)
    if not odd:
        return moved
    sign = (1 - 2 * reflect.to(fields[0].dtype)).view((-1,) + (1,) * (fields[0].dim() - 1))
    return tuple(field * sign for field in moved)


def shift_periodic_grid(field: torch.Tensor, g: torch.Tensor, odd: bool = False) -> torch.Tensor:
    """``field (b, *grid, c)`` with each sample moved along its periodic grid by its element of
    ``g (b,)`` (``move_periodic``)."""
    return move_periodic((field,), g, odd)[0]


def group_order(group: str, item: Any) -> int:
    """The number of elements of ``group`` acting on a training sample ``item``: 8 for the square, 2 for
    the diagonal, the number of grid nodes for the periodic shifts, twice that with the odd reflection."""
    if group in SQUARE_GROUPS:
        return SQUARE_GROUPS[group]
    return math.prod(item[0].shape[:-1]) * (2 if group == "periodic-odd" else 1)


class SymmetryDraws:
    """The element of a group of ``order`` elements (D4 by default) each training sample gets in each
    epoch: a table over the samples' numbers (``Batch.sample_ids``, ``n_ids`` of them) drawn from
    ``(seed, epoch)``, moved to the device once per epoch."""

    def __init__(self, seed: int, n_ids: int, device: torch.device, order: int = SQUARE_SYMMETRIES):
        self.seed, self.n_ids, self.device, self.order = int(seed), int(n_ids), device, int(order)
        self._epoch, self._table = None, None

    def table(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._table = torch.randint(self.order, (self.n_ids,), generator=generator).to(self.device)
            self._epoch = epoch
        return self._table

    def of(self, b: Batch, epoch: int) -> torch.Tensor:
        """``(b,)`` the elements of batch ``b``'s samples in ``epoch``."""
        return self.table(epoch)[b.sample_ids.to(self.device, non_blocking=True)]


def augment_batch(b: Batch, g: torch.Tensor, group: str = "square") -> Batch:
    """Batch ``b`` with its sample ``k`` moved by element ``g[k]`` of ``group``: the square and the
    diagonal (``g`` numbered as D4's elements) move point sets' ``pos`` (``(b, n, 2)``, the values with them)
    and permute grids' fields ``x``, ``y`` (``(b, s, s, c)``, each its own ``s``); the periodic groups move
    ``x`` and ``y`` (``(b, *grid, c)``, one grid) along their grid."""
    if group in PERIODIC_GROUPS:
        x, y = move_periodic((b.x, b.y), g, odd=group == "periodic-odd")
        return replace(b, x=x, y=y)
    if b.weights is not None:  # point sets
        return replace(b, inputs={**b.inputs, "pos": square_symmetry(b.inputs["pos"], g)})
    return replace(b, x=permute_square_grid(b.x, g), y=permute_square_grid(b.y, g))


def check_augmentable(item: Any, model_inputs: set[str], where: str, group: str = "square",
                      periodic: bool = False, pooling: int = 1) -> None:
    """``ValueError`` unless a training sample ``item`` (a grid item ``(x, y, ...)`` or a point-set
    dict) can be moved by ``group``.  The square and the diagonal: square 2-D grids, or points in
    ``[0, 1]²`` whose model takes no per-sample input tied to the original points (``model_inputs``: the
    keys its data loader adds); the square also needs a target pooled by a kernel of odd size
    (``pooling``: its size, 1 for none; module docstring).  The periodic groups: a grid that is
    ``periodic`` (its dataset's flag: the file's ``grid = "periodic"``), input and target on it."""
    advice = "train without it (data.augment = \"none\")"
    if group in PERIODIC_GROUPS:
        _check_shiftable(item, where, periodic, advice, group)
        return
    option = f"data.augment = \"{group}\""
    if isinstance(item, dict):
        pos = item["pos"]
        if pos.shape[-1] != 2 or pos.min() < 0 or pos.max() > 1:
            raise ValueError(f"{option} moves the points by symmetries of [0, 1]², but "
                             f"{where}'s points are not in [0, 1]² (coordinates {float(pos.min()):.3g} to "
                             f"{float(pos.max()):.3g}); {advice}")
        tied = sorted(model_inputs - _INVARIANT_INPUTS)
        if tied:
            raise ValueError(f"{option} moves the points, but the model's per-sample inputs "
                             f"{tied} are computed once at each sample's original points; {advice}")
        return
    for name, field in zip(("input", "target"), item[:2]):
        if field.dim() != 3 or field.shape[0] != field.shape[1]:
            raise ValueError(f"{option} needs 2-D square grids, but {where}'s {name} has shape "
                             f"{tuple(field.shape)} (grid, channels); {advice}")
    if group == "square" and pooling % 2 == 0:
        fine, coarse = item[0].shape[0], item[1].shape[0]
        raise ValueError(f"data.augment = \"square\" is not a symmetry of {where}'s samples: their target is "
                         f"average-pooled from {fine} to {coarse} points per axis by blocks of {pooling} x "
                         f"{pooling}, which are not centred on their coarse nodes, so a reflected sample's "
                         f"pooled target is not the reflected pooled target; use data.augment = \"diagonal\" "
                         f"(the exchange x <-> y, exact here), a data.coarse_resolution pooled by an odd kernel "
                         f"({fine} - 1 = k (coarse - 1) with k odd), or \"none\"")


def symmetry_draws(train: Any, cfg: Any, transform: Any, seed: int, device: torch.device) -> SymmetryDraws:
    """The draws of ``data.augment`` (``cfg``: the ``DataConfig``) for the training split ``train``, checked on
    its first sample (``transform``: a point-set model's per-sample inputs, which the symmetry must not
    invalidate; a target pooled by an even kernel allows only the diagonal)."""
    item, group = train[0], cfg.augment
    added = set(transform(item)) if transform is not None and isinstance(item, dict) else set()
    coarse = getattr(train, "coarse_resolution", None)
    pooling = pool_kernel(train.resolution, coarse) if coarse else 1
    check_augmentable(item, added, cfg.path, group, periodic=bool(getattr(train, "periodic", False)), pooling=pooling)
    n_ids = max(len(train), int(sample_ids(train).max()) + 1)
    return SymmetryDraws(seed, n_ids, device, group_order(group, item))


def _check_shiftable(item: Any, where: str, periodic: bool, advice: str, group: str) -> None:
    """``check_augmentable`` for the periodic groups."""
    option = f"data.augment = \"{group}\""
    if isinstance(item, dict):
        raise ValueError(f"{option} moves fields along a periodic grid, but {where} holds point sets "
                         f"(meshes); {advice}")
    if not periodic:
        raise ValueError(f"{option} moves fields along a periodic grid, but {where}'s grid is not periodic (its "
                         f"nodes include both ends of [0, 1], or it is a cell grid); train Darcy data on the unit "
                         f"square with data.augment = \"square\", others with \"none\"")
    x, y = item[:2]
    if x.shape[:-1] != y.shape[:-1]:
        raise ValueError(f"{option} moves input and target together, but {where}'s input grid "
                         f"{tuple(x.shape[:-1])} and target grid {tuple(y.shape[:-1])} differ; {advice}")


__all__ = ["PERIODIC_GROUPS", "SQUARE_GROUPS", "SQUARE_SYMMETRIES", "SymmetryDraws", "augment_batch",
           "check_augmentable", "gather_nodes", "group_order", "move_periodic", "periodic_shift_index",
           "permute_square_grid", "shift_periodic_grid", "square_grid_permutation", "square_symmetry", "symmetry_draws"]
