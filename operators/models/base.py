"""What the models share: their config, their input checks, the Dirichlet boundary.

Every model keeps its config dataclass as ``.config``: with the registered name that is all
[`petrov.operators.build_model`][] needs to rebuild it.

Grid models ([`GridOperator`][]) take channels-last grids ``x: (b, *grid, in_channels)`` with
``ndim`` grid axes and optional coordinates ``pos: (b, *grid, ndim)`` (default: the uniform grid of
their config, ``i/n`` periodic or ``i/(n-1)`` node grid; see [`petrov.operators.checks.grid_pos`][]).

Point-set models ([`PointSetOperator`][], ``point_set = True``) take meshes: a batch of samples
with different node counts, padded to one length ``n``:

    x        (b, n, c_in)   nodal input values (0 on padding)
    pos      (b, n, 2)      node coordinates in [0, 1]² (finite on padding, e.g. 0)
    weights  (b, n)         quadrature weights, e.g. lumped mass w_j = Σ_{T∋j} |T|/3 (Σ_j w_j = |Ω|),
                            0 on padding
    mask     (b, n) bool    True on real nodes (None: all real)
    boundary (b, n) bool    True on Dirichlet boundary nodes (None: none given)

called ``model(x, pos, weights, mask=None, boundary=None) -> (b, n, c_out)``: every integral they
take uses ``weights``, so padding (weight 0) changes nothing on the real nodes, and a node of weight
0 is a point where the output is evaluated without taking part in any integral.  Outputs are exactly
0 on padding and, with ``dirichlet=True``, on the boundary nodes.  The models with ``boundary_features``
also take ``boundary_distance (b, n, 1)``, the distance of each node to its sample's boundary: a data
loader computes it once per sample ([`PointSetOperator.sample_transform`][]), a direct call may leave it
out and the model computes it ([`boundary_distance`][]).
"""
from __future__ import annotations

import torch
from torch import nn
from torch.nn import functional as F

from ..checks import check_grid_input, check_point_input, checks_values, first_weight, grid_pos, raise_first
from ...grids.domain import domain_axes, periodic_axes


class Operator(nn.Module):
    """``.config``: the model's config dataclass."""

    def __init__(self, config):
        super().__init__()
        self.config = config


class GridOperator(Operator):
    """Base of the grid models: ``.config``, and [`grid_inputs`][] at the top of ``forward``.

    Subclasses set ``ndim`` (grid axes; 0: given by the config's ``ndim``) and, if their input is
    not ``config.in_channels`` wide, ``input_channels``.  The config's ``periodic`` (one bool or one per
    axis) and ``domain`` (``[[lo, hi], ...]`` or None, the unit box; [`petrov.grids.domain`][]) are
    checked here against the grid's axes: ``axis_periodic`` and ``domain`` hold them per axis."""

    ndim: int = 0

    def __init__(self, config):
        super().__init__(config)
        where = type(self).__name__
        self.axis_periodic = periodic_axes(getattr(config, "periodic", False), self.grid_ndim, where)
        self.domain = domain_axes(getattr(config, "domain", None), self.grid_ndim, where)

    @property
    def grid_ndim(self) -> int:
        return self.ndim or int(self.config.ndim)

    @property
    def input_channels(self) -> int:
        return self.config.in_channels

    def grid_inputs(self, x: torch.Tensor, pos: torch.Tensor | None) -> torch.Tensor:
        """Check ``x`` (shape, channels, dtype, device, NaN/inf; a clear ``ValueError`` naming the model) and
        return the coordinates ``(b, *grid, ndim)``: ``pos`` checked, or the config's uniform grid."""
        where = type(self).__name__
        check_grid_input(x, self.grid_ndim, self.input_channels, where, first_weight(self))
        periodic = self.axis_periodic if len(set(self.axis_periodic)) > 1 else self.axis_periodic[0]
        return grid_pos(pos, x, periodic, where, self.domain)


def zero_boundary(out: torch.Tensor) -> torch.Tensor:
    """``(b, *grid, c)``: the interior kept, exact zeros on the first and last points of every grid
    axis (the Dirichlet value of a node-grid solution)."""
    ndim = out.dim() - 2
    return F.pad(out[(slice(None), *[slice(1, -1)] * ndim)], (0, 0) + (1, 1) * ndim)


# boundary_distance on an accelerator or under torch.compile: candidate nodes per pass, so that a pass
# holds at most about this many distances (or one chunk of 256 nodes)
_DISTANCES_PER_PASS = 2**24


def boundary_distance(pos: torch.Tensor, boundary: torch.Tensor) -> torch.Tensor:
    """``(b, n, 1)``: the distance from every point to the nearest boundary node of its sample (0 on the
    boundary nodes).  The domain's geometry as a point-wise input (where the solution must vanish): on
    a refined mesh the boundary nodes sample the same boundary more densely, so the distance converges
    (an overestimate of at most ~h²/(8δ) at distance δ from a boundary sampled with spacing h).
    ``pos (b, n, 2)``, ``boundary (b, n)`` bool with at least one True per sample (checked where
    ``petrov.operators.checks.checks_values`` says; a sample without one gets distance inf).

    On the CPU in eager mode the boundary nodes are gathered first (``k`` of them at most per sample:
    O(n k), a size read from the data, free on the CPU); on an accelerator and under ``torch.compile``
    every node is a candidate, masked unless it is a boundary node, in passes over chunks of nodes
    (O(n²) work, fixed shapes, no host read).  Both give the same numbers: each distance is computed
    alone (no matrix-product formula) and the minimum does not depend on the order."""
    if checks_values(boundary):
        raise_first([((boundary.sum(dim=1) == 0).any(),
                      lambda: "boundary_features needs boundary nodes in every sample (boundary flags all False)")])
    with torch.no_grad():
        if pos.device.type == "cpu" and not torch.compiler.is_compiling():
            return _nearest_gathered(pos, boundary)[..., None]
        return _nearest_masked(pos, boundary)[..., None]


def boundary_distance_inputs(item: dict) -> dict[str, torch.Tensor]:
    """A mesh sample's ``boundary_distance (n, 1)`` from its ``pos (n, 2)`` and ``boundary (n,)`` (see
    [`boundary_distance`][]): the per-sample input of the models with ``boundary_features``, computed
    once per sample by a data loader instead of in every forward (on an accelerator that would be
    O(n²) work per step)."""
    return {"boundary_distance": boundary_distance(item["pos"][None], item["boundary"][None])[0]}


def _distances(pos: torch.Tensor, nodes: torch.Tensor) -> torch.Tensor:
    """``(b, n, k)`` exact Euclidean distances (0 on a node itself)."""
    return torch.cdist(pos, nodes, compute_mode="donot_use_mm_for_euclid_dist")


def _nearest_gathered(pos: torch.Tensor, boundary: torch.Tensor) -> torch.Tensor:
    """``(b, n)``: the boundary nodes gathered to the front (as many columns as the largest count)."""
    b, n, _ = pos.shape
    counts = boundary.sum(dim=1)
    k = max(int(counts.max()), 1)
    first = torch.argsort((~boundary).to(torch.int8), dim=1, stable=True)[:, :k]  # boundary nodes first
    nodes = pos.gather(1, first[..., None].expand(b, k, 2))
    real = torch.arange(k, device=pos.device)[None, :] < counts[:, None]  # (b, k)
    return _distances(pos, nodes).masked_fill(~real[:, None, :], float("inf")).amin(dim=-1)


def _nearest_masked(pos: torch.Tensor, boundary: torch.Tensor) -> torch.Tensor:
    """``(b, n)``: every node a candidate, the interior ones masked, chunk by chunk of nodes."""
    b, n, _ = pos.shape
    chunk = max(256, _DISTANCES_PER_PASS // (b * n))
    best = None
    for start in range(0, n, chunk):
        dist = _distances(pos, pos[:, start:start + chunk])
        dist = dist.masked_fill(~boundary[:, None, start:start + chunk], float("inf")).amin(dim=-1)
        best = dist if best is None else torch.minimum(best, dist)
    return best


class PointSetOperator(Operator):
    """Base of the point-set (mesh) models: ``.config``, [`point_inputs`][] at the top of ``forward``
    and [`finish`][] at its end.  Point sets have no order: ``causal`` attention is refused.

    With ``config.boundary_features`` the inputs gain a channel, the distance to the boundary
    ([`boundary_distance`][]), so the model sees the domain's shape (holes, notches) at every node."""

    point_set = True

    def __init__(self, config):
        super().__init__(config)
        if getattr(config, "causal", False):
            raise ValueError(f"{type(self).__name__}: causal=True orders the points, which a mesh does not; "
                             "use causal=False")

    def point_inputs(self, x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                     mask: torch.Tensor | None, boundary: torch.Tensor | None) -> torch.Tensor:
        """Check the batch (shapes, matching n, mask and weights, NaN/inf: a clear ``ValueError``
        naming the model); return ``pos`` in ``x``'s dtype."""
        check_point_input(x, pos, weights, mask, boundary, channels=self.config.in_channels,
                          where=type(self).__name__, weight=first_weight(self))
        return pos.to(x.dtype)

    @property
    def feature_channels(self) -> int:
        """Channels of [`features`][]: the inputs, plus the boundary distance if configured."""
        return self.config.in_channels + int(getattr(self.config, "boundary_features", False))

    def sample_transform(self):
        """What a data loader adds to each mesh sample for this model: the distance to the boundary
        (``boundary_distance``, [`boundary_distance_inputs`][]) with ``config.boundary_features``, else
        nothing (None)."""
        return boundary_distance_inputs if getattr(self.config, "boundary_features", False) else None

    def node_inputs(self) -> tuple[str, ...]:
        """The per-node tensors among what [`sample_transform`][] adds (``boundary_distance (n, 1)``):
        padded with the nodes when a batch is padded to more nodes."""
        return ("boundary_distance",) if getattr(self.config, "boundary_features", False) else ()

    def features(self, x: torch.Tensor, pos: torch.Tensor, boundary: torch.Tensor | None,
                 mask: torch.Tensor | None = None, distance: torch.Tensor | None = None) -> torch.Tensor:
        """``x (b, n, c_in)`` [+ the distance to the boundary with ``config.boundary_features``:
        ``distance (b, n, 1)`` as given (the data loader's, [`sample_transform`][]), else computed here;
        padding (``~mask``) is no boundary, whatever its flags say]."""
        if not getattr(self.config, "boundary_features", False):
            return x
        if distance is not None:
            if tuple(distance.shape) != (*x.shape[:2], 1) or distance.device != x.device:
                raise ValueError(f"{type(self).__name__}: expected boundary_distance of shape "
                                 f"{(*x.shape[:2], 1)} on {x.device} (one distance per node), got "
                                 f"{tuple(distance.shape)} on {distance.device}")
            return torch.cat([x, distance.to(x.dtype)], dim=-1)
        if boundary is None:
            raise ValueError(f"{type(self).__name__}: boundary_features=True needs the boundary flags: pass "
                             "boundary (b, n) bool, or build the model with boundary_features=False")
        real = boundary if mask is None else boundary & mask
        return torch.cat([x, boundary_distance(pos, real).to(x.dtype)], dim=-1)

    def finish(self, out: torch.Tensor, mask: torch.Tensor | None, boundary: torch.Tensor | None) -> torch.Tensor:
        """``out (b, n, c)`` with exact zeros on padding (``~mask``) and, with ``config.dirichlet``, on
        ``boundary`` (then required: the zeros would silently be missing)."""
        zero = None if mask is None else ~mask
        if getattr(self.config, "dirichlet", False):
            if boundary is None:
                raise ValueError(f"{type(self).__name__}: dirichlet=True needs the boundary flags: pass boundary "
                                 "(b, n) bool (True on Dirichlet nodes), or build the model with dirichlet=False")
            zero = boundary if zero is None else zero | boundary
        return out if zero is None else out.masked_fill(zero.unsqueeze(-1), 0.0)
