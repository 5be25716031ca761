"""Training data augmented by the symmetries of the unit square (``data.augment = "square"``).

The square ``[0, 1]²`` has eight symmetries, the dihedral group D4: the identity, three quarter turns and
four reflections, every one a composition of ``x ↔ y``, ``x → 1 − x`` and ``y → 1 − y``.  Element
``g ∈ {0, …, 7}`` applies, in this order, the swap when bit 0 of ``g`` is set, ``x → 1 − x`` for bit 1
and ``y → 1 − y`` for bit 2 (``square_symmetry``).

When a problem commutes with them, a sample moved by ``g`` -- the pair ``(a ∘ g⁻¹, u ∘ g⁻¹)`` -- is a
sample of the same law, and the training split is in effect eight times larger.  Darcy flow
``−∇·(a∇u) = f`` with constant ``f`` and ``u = 0`` on the boundary commutes with every map that
preserves distances, and petrov's Darcy data are drawn from laws invariant under D4: the coefficient
thresholds a Gaussian cosine series ``Σ ξ_k cos(πk₁x) cos(πk₂y)`` whose variances are symmetric in
``(k₁, k₂)`` (the swap) and whose signs are symmetric (a reflection changes the sign of the odd
modes); ``darcy-mesh`` domains are turned by a random number of quarter turns, their holes and
deformations drawn without a preferred direction.  It does not hold for Burgers (1-D), for a forcing
or boundary values that pick a direction, or for data of your own whose law you have not checked.

How a batch moves (``augment_batch``): grid fields ``(b, s, s, c)`` have their nodes permuted (the
grid's coordinates stay: the values move), point sets have their points ``pos`` moved (values, weights,
boundary flags and the distance to the boundary travel with their points).  Each training sample gets
its own element in each epoch, drawn from ``(run seed, epoch)`` (``SymmetryDraws``): reproducible, the
same after a resume in the middle of an epoch, the same on every process of a distributed run; read
nothing back from the device.  Validation and test see the samples as they are.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any

import torch

from ..operators.shape_cache import shape_cached
from .data import Batch

SQUARE_SYMMETRIES = 8
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


def permute_square_grid(field: torch.Tensor, g: torch.Tensor) -> torch.Tensor:
    """``field (b, s, s, c)`` with each sample's nodes permuted by its element of ``g (b,)``:
    the field ``f ∘ g⁻¹`` on the same grid."""
    b, s, _, c = field.shape
    index = _every_grid_permutation(s, field.device)[g.to(field.device)]
    flat = field.reshape(b, s * s, c).gather(1, index[..., None].expand(b, s * s, c))
    return flat.reshape(field.shape)


class SymmetryDraws:
    """The element of D4 each training sample gets in each epoch: a table over the samples' numbers
    (``Batch.sample_ids``, ``n_ids`` of them) drawn from ``(seed, epoch)``, moved to the device once
    per epoch."""

    def __init__(self, seed: int, n_ids: int, device: torch.device):
        self.seed, self.n_ids, self.device = int(seed), int(n_ids), device
        self._epoch, self._table = None, None

    def table(self, epoch: int) -> torch.Tensor:
        if epoch != self._epoch:
            generator = torch.Generator().manual_seed(self.seed * 1_000_003 + epoch)
            self._table = torch.randint(SQUARE_SYMMETRIES, (self.n_ids,), generator=generator).to(self.device)
            self._epoch = epoch
        return self._table

    def of(self, b: Batch, epoch: int) -> torch.Tensor:
        """``(b,)`` the elements of batch ``b``'s samples in ``epoch``."""
        return self.table(epoch)[b.sample_ids.to(self.device, non_blocking=True)]


def augment_batch(b: Batch, g: torch.Tensor) -> Batch:
    """Batch ``b`` with its sample ``k`` moved by ``g[k]``: point sets' ``pos`` (``(b, n, 2)``, the
    values with them), grids' fields ``x``, ``y`` (``(b, s, s, c)``, each its own ``s``) permuted."""
    if b.weights is not None:  # point sets
        return replace(b, inputs={**b.inputs, "pos": square_symmetry(b.inputs["pos"], g)})
    return replace(b, x=permute_square_grid(b.x, g), y=permute_square_grid(b.y, g))


def check_augmentable(item: Any, model_inputs: set[str], where: str) -> None:
    """``ValueError`` unless a training sample ``item`` (a grid item ``(x, y, ...)`` or a point-set
    dict) can be moved by the square's symmetries: square 2-D grids, or points in ``[0, 1]²`` whose
    model takes no per-sample input tied to the original points (``model_inputs``: the keys its data
    loader adds)."""
    advice = "train without it (data.augment = \"none\")"
    if isinstance(item, dict):
        pos = item["pos"]
        if pos.shape[-1] != 2 or pos.min() < 0 or pos.max() > 1:
            raise ValueError(f"data.augment = \"square\" moves the points by the symmetries of [0, 1]², but "
                             f"{where}'s points are not in [0, 1]² (coordinates {float(pos.min()):.3g} to "
                             f"{float(pos.max()):.3g}); {advice}")
        tied = sorted(model_inputs - _INVARIANT_INPUTS)
        if tied:
            raise ValueError(f"data.augment = \"square\" moves the points, but the model's per-sample inputs "
                             f"{tied} are computed once at each sample's original points; {advice}")
        return
    for name, field in zip(("input", "target"), item[:2]):
        if field.dim() != 3 or field.shape[0] != field.shape[1]:
            raise ValueError(f"data.augment = \"square\" needs 2-D square grids, but {where}'s {name} has shape "
                             f"{tuple(field.shape)} (grid, channels); {advice}")


__all__ = ["SQUARE_SYMMETRIES", "SymmetryDraws", "augment_batch", "check_augmentable", "permute_square_grid",
           "square_grid_permutation", "square_symmetry"]
