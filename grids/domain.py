"""A grid model's geometry: which axes are periodic, and the box ``[lo_1, hi_1] x ... x [lo_d, hi_d]`` the
grid covers.

A grid model's config holds

- ``periodic``: one bool for every axis, or one per axis (``[true, false]``: periodic in ``x``, a node grid
  in ``y``);
- ``domain``: ``[[lo, hi], ...]``, one pair per axis, or None for the unit box ``[0, 1]^d``.

They set the default coordinates of a grid of any shape ``(n_1, ..., n_d)``: per axis ``lo + (hi - lo) i /
n`` on a periodic axis (the right end point is the left one), ``lo + (hi - lo) i / (n - 1)`` on a node
axis ([`petrov.grids.layout.grid_coordinates`][]).  A rectangular domain's aspect ratio is in these
coordinates, which the models see; the grid's points per axis are free at every call.
"""
from __future__ import annotations

import math
from typing import Optional, Sequence, Union

Periodic = Union[bool, tuple[bool, ...]]  # the config annotation: one bool, or one per axis
Domain = Optional[tuple[tuple[float, float], ...]]  # the config annotation: [lo, hi] per axis, None: unit box


def _flags(periodic: object) -> tuple[bool, ...] | None:
    """``periodic`` as a tuple of bools (a bool: one entry), None if it is neither a bool nor a sequence of them."""
    if isinstance(periodic, bool):
        return (periodic,)
    if isinstance(periodic, (tuple, list)) and periodic and all(isinstance(p, bool) for p in periodic):
        return tuple(periodic)
    return None


def any_periodic(periodic: Periodic) -> bool:
    """Whether some axis is periodic (``periodic`` a bool or one per axis)."""
    return any(_flags(periodic) or ())


def all_periodic(periodic: Periodic) -> bool:
    """Whether every axis is periodic (``periodic`` a bool or one per axis)."""
    flags = _flags(periodic)
    return bool(flags) and all(flags)


def periodic_axes(periodic: object, ndim: int, where: str) -> tuple[bool, ...]:
    """``(ndim,)`` bools: ``periodic`` for every axis (a bool) or per axis (a list of ``ndim`` bools);
    ``ValueError`` otherwise."""
    flags = _flags(periodic)
    if flags is None:
        raise ValueError(f"{where}: periodic must be true, false or a list of {ndim} bools (one per grid axis), "
                         f"got {periodic!r}")
    if isinstance(periodic, bool):
        return flags * ndim
    if len(flags) != ndim:
        raise ValueError(f"{where}: periodic = {list(flags)} has {len(flags)} entries but the model has {ndim} grid "
                         f"axes; give one bool for all axes or {ndim} (one per axis)")
    return flags


def domain_axes(domain: object, ndim: int, where: str) -> tuple[tuple[float, float], ...] | None:
    """``domain`` checked and as a tuple of ``ndim`` pairs ``(lo, hi)`` with finite ``lo < hi``; None (the unit
    box) stays None.  ``ValueError`` naming the fault otherwise."""
    if domain is None:
        return None
    usage = (f"domain must be None (the unit box) or a list of {ndim} pairs [lo, hi] with finite lo < hi, one "
             f"per grid axis, e.g. {[[0.0, 1.0]] * ndim}")
    if not isinstance(domain, (tuple, list)) or len(domain) != ndim:
        raise ValueError(f"{where}: {usage}; got {_plain(domain)!r}")
    axes = []
    for axis, pair in enumerate(domain):
        ok = isinstance(pair, (tuple, list)) and len(pair) == 2 and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in pair)
        if not ok or not pair[0] < pair[1]:
            raise ValueError(f"{where}: {usage}; axis {axis} has {_plain(pair)!r}")
        axes.append((float(pair[0]), float(pair[1])))
    return tuple(axes)


def _plain(value: object) -> object:
    """``value`` with its tuples as lists: as a config file writes it."""
    return [_plain(v) for v in value] if isinstance(value, (tuple, list)) else value


def axis_lengths(domain: Sequence[tuple[float, float]] | None, ndim: int) -> tuple[float, ...]:
    """``hi - lo`` per axis (1 on the unit box)."""
    return (1.0,) * ndim if domain is None else tuple(hi - lo for lo, hi in domain)


__all__ = ["Domain", "Periodic", "all_periodic", "any_periodic", "axis_lengths", "domain_axes", "periodic_axes"]
