"""Random domains inside [0, 1]²: polygons shared by every mesh of a sample.

A [`Domain`][] is an outer loop (counter-clockwise) and zero or more hole loops (clockwise), each an
``(m, 2)`` float64 array of vertices, the closing edge implied; the domain lies to the left of every loop.
Every edge is at most the coarse spacing ``h`` long, so the coarse mesh takes the vertices as its boundary
nodes and finer meshes (uniform refinements, or a remesh at ``h / 4``) split the same edges: all meshes of
a sample cover exactly the same polygon.

Families (``DOMAIN_FAMILIES``, each ``make(rng, h, gap, max_holes) -> (outer, holes)``):

- ``holes``: the unit square with 1..``max_holes`` elliptic holes (random centre, semi-axes, angle);
- ``notch``: the unit square with a rectangular slot cut in from one side;
- ``lshape``: the unit square with a square corner removed;
- ``deformed``: the square's boundary mapped by ``x + eps psi(x)``, ``psi`` a smooth random field that
  points into the square on its boundary (so the domain stays inside [0, 1]²).

Features keep ``gap * h`` apart (``gap`` = 3): hole to hole, hole to outer boundary, slot width, slot to
corner. Holes are placed by rejection, with the rest of the draws of the same generator, so a domain
depends only on the generator it is given.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable, Sequence

import numpy as np

from ...common.registry import Registry
from .geometry import inside_loop, segment_distance

GAP = 3.0  # features at least GAP coarse spacings apart
PLACEMENT_TRIES = 200  # rejection draws per hole before the hole count is lowered

DOMAIN_FAMILIES: Registry[Callable] = Registry("domain family")


@dataclass(frozen=True)
class Domain:
    """A polygonal domain: ``outer`` (m, 2) counter-clockwise, ``holes`` clockwise loops; ``family`` its name."""

    family: str
    outer: np.ndarray
    holes: tuple[np.ndarray, ...] = ()

    @property
    def loops(self) -> tuple[np.ndarray, ...]:
        return (self.outer, *self.holes)

    @property
    def area(self) -> float:
        return float(sum(signed_area(loop) for loop in self.loops))

    def contains(self, points: np.ndarray) -> np.ndarray:
        """(n,) bool: inside the outer loop and outside every hole (points on an edge: either)."""
        points = np.asarray(points, dtype=np.float64)
        inside = inside_loop(self.outer, points)
        for hole in self.holes:
            inside &= ~inside_loop(hole, points)
        return inside


# --- polygon helpers ---------------------------------------------------------------------------------


def signed_area(loop: np.ndarray) -> float:
    """Shoelace area of a closed loop: positive when counter-clockwise."""
    x, y = loop[:, 0], loop[:, 1]
    return 0.5 * float(np.dot(x, np.roll(y, -1)) - np.dot(np.roll(x, -1), y))


def subdivide(loop: np.ndarray, h: float) -> np.ndarray:
    """The loop with every edge split into ``ceil(length / h)`` equal parts (its vertices kept)."""
    start = np.asarray(loop, dtype=np.float64)
    end = np.roll(start, -1, axis=0)
    parts = np.maximum(1, np.ceil(np.linalg.norm(end - start, axis=1) / h * (1 - 1e-12)).astype(int))
    t = np.concatenate([np.arange(p) / p for p in parts])
    edge = np.repeat(np.arange(len(start)), parts)
    return start[edge] + t[:, None] * (end[edge] - start[edge])


def loop_segments(loop: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    return loop, np.roll(loop, -1, axis=0)


def loop_gap(first: np.ndarray, second: np.ndarray) -> float:
    """Distance between two closed polygons that do not cross, attained at a vertex of one of them (polygons
    that cross, with edges of at most h, come out closer than h / 2)."""
    return float(min(segment_distance(first, *loop_segments(second)).min(),
                     segment_distance(second, *loop_segments(first)).min()))


def _quarter_turns(loop: np.ndarray, k: int) -> np.ndarray:
    """Rotate by k * 90 degrees about (1/2, 1/2): exact in floating point, orientation kept."""
    for _ in range(k % 4):
        loop = np.stack([1.0 - loop[:, 1], loop[:, 0]], axis=1)
    return loop


def _square_corners() -> np.ndarray:
    return np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])


def _ellipse(centre, a: float, b: float, angle: float, h: float) -> np.ndarray:
    """Clockwise polygon on the ellipse, vertices at equal parameter steps, every edge <= h, >= 8 vertices."""
    m = 8
    while True:
        t = -2.0 * np.pi * np.arange(m) / m  # clockwise: a hole
        local = np.stack([a * np.cos(t), b * np.sin(t)], axis=1)
        c, s = math.cos(angle), math.sin(angle)
        loop = np.asarray(centre) + local @ np.array([[c, s], [-s, c]])
        if np.linalg.norm(np.roll(loop, -1, axis=0) - loop, axis=1).max() <= h:
            return loop
        m += max(1, m // 8)


# --- families ----------------------------------------------------------------------------------------


@DOMAIN_FAMILIES.register("holes")
def _holes(rng: np.random.Generator, h: float, gap: float, max_holes: int):
    outer = subdivide(_square_corners(), h)
    wanted = int(rng.integers(1, max_holes + 1))
    holes: list[np.ndarray] = []
    margin = gap * h
    for _ in range(wanted):
        for _ in range(PLACEMENT_TRIES):
            a = rng.uniform(0.06, 0.14)
            b = rng.uniform(0.05, a)
            centre = rng.uniform(margin + b, 1.0 - margin - b, size=2)
            hole = _ellipse(centre, a, b, rng.uniform(0.0, np.pi), h)
            # the square is convex: its distance to the hole is attained at a hole vertex
            if hole.min() < margin or hole.max() > 1.0 - margin:
                continue
            if all(loop_gap(hole, other) >= margin for other in holes):
                holes.append(hole)
                break
    if not holes:  # pragma: no cover - one small hole always fits the square
        raise RuntimeError("could not place a hole in the unit square")
    return outer, holes


@DOMAIN_FAMILIES.register("notch")
def _notch(rng: np.random.Generator, h: float, gap: float, max_holes: int):
    width = rng.uniform(gap * h, max(gap * h, 0.3))
    depth = rng.uniform(0.25, 0.6)
    lo = gap * h + width / 2
    centre = rng.uniform(lo, 1.0 - lo)
    left, right = centre - width / 2, centre + width / 2
    corners = np.array([[0.0, 0.0], [left, 0.0], [left, depth], [right, depth], [right, 0.0],
                        [1.0, 0.0], [1.0, 1.0], [0.0, 1.0]])
    return subdivide(_quarter_turns(corners, int(rng.integers(4))), h), []


@DOMAIN_FAMILIES.register("lshape")
def _lshape(rng: np.random.Generator, h: float, gap: float, max_holes: int):
    c = rng.uniform(0.3, 0.6)
    corners = np.array([[0.0, 0.0], [1.0, 0.0], [1.0, 1.0 - c], [1.0 - c, 1.0 - c], [1.0 - c, 1.0], [0.0, 1.0]])
    return subdivide(_quarter_turns(corners, int(rng.integers(4))), h), []


def _smooth_field(rng: np.random.Generator, modes: int = 4) -> Callable[[np.ndarray], np.ndarray]:
    """A random smooth field: a cosine series of low modes with random phases, decaying as 1/(1 + |k|^2)."""
    k = np.arange(modes)
    coef = rng.standard_normal((modes, modes)) / (1.0 + k[:, None] ** 2 + k[None, :] ** 2)
    phase = rng.uniform(0.0, 2 * np.pi, size=(2, modes))

    def field(p: np.ndarray) -> np.ndarray:
        return ((np.cos(np.pi * p[:, :1] * k + phase[0]) @ coef) * np.cos(np.pi * p[:, 1:] * k + phase[1])).sum(axis=1)

    return field


@DOMAIN_FAMILIES.register("deformed")
def _deformed(rng: np.random.Generator, h: float, gap: float, max_holes: int):
    # x + eps psi(x) with psi = ((1 - 2x) p1, (1 - 2y) p2), p1, p2 smooth in [0, 1] on the boundary (rescaled
    # to that range on a fine sample of it, clipped in between): psi points into the square or along its
    # boundary, so with eps < 1/2 every boundary point stays in [0, 1]²
    eps = rng.uniform(0.08, 0.2)
    fields = (_smooth_field(rng), _smooth_field(rng))
    fine = subdivide(_square_corners(), 1e-3)
    ranges = [(f(fine).min(), np.ptp(f(fine))) for f in fields]

    def deform(x: np.ndarray) -> np.ndarray:
        p1, p2 = (np.clip((f(x) - lo) / span, 0.0, 1.0) for f, (lo, span) in zip(fields, ranges))
        return x + eps * np.stack([(1 - 2 * x[:, 0]) * p1, (1 - 2 * x[:, 1]) * p2], axis=1)

    per_side = math.ceil(1.0 / h)
    while True:  # the map stretches some edges: refine the square until every image edge is <= h
        loop = deform(subdivide(_square_corners(), 1.0 / per_side))
        if np.linalg.norm(np.roll(loop, -1, axis=0) - loop, axis=1).max() <= h:
            return loop, []
        per_side += 1


# --- sampling and checks -----------------------------------------------------------------------------


def parse_families(families: str | Sequence[str]) -> tuple[str, ...]:
    """``"holes,notch"`` or a sequence -> a tuple of registered family names (KeyError naming the choices)."""
    names = [f.strip() for f in families.split(",")] if isinstance(families, str) else list(families)
    names = [f for f in names if f]
    if not names:
        raise ValueError(f"families must name at least one of {DOMAIN_FAMILIES.names()}")
    for name in names:
        DOMAIN_FAMILIES.get(name)
    return tuple(names)


def _self_intersects(loop: np.ndarray) -> bool:
    """Whether two non-adjacent edges of a closed loop cross (vectorised over all pairs)."""
    a, b = loop_segments(loop)
    m = len(loop)

    def orient(p, q, r):
        return np.sign((q[..., 0] - p[..., 0]) * (r[..., 1] - p[..., 1]) - (q[..., 1] - p[..., 1]) * (r[..., 0] - p[..., 0]))

    A, B = a[:, None], b[:, None]
    C, D = a[None, :], b[None, :]
    cross = (orient(A, B, C) * orient(A, B, D) < 0) & (orient(C, D, A) * orient(C, D, B) < 0)
    i, j = np.indices((m, m))
    adjacent = (np.abs(i - j) <= 1) | (np.abs(i - j) == m - 1)
    return bool((cross & ~adjacent).any())


def check_domain(domain: Domain, h: float, gap: float = GAP) -> None:
    """ValueError unless the loops are simple, oriented, inside [0, 1]², edges <= h, holes inside the outer
    loop and every hole at least ``gap * h`` from the other loops."""
    problems = []
    for k, loop in enumerate(domain.loops):
        name = "outer loop" if k == 0 else f"hole {k}"
        if loop.ndim != 2 or loop.shape[1] != 2 or len(loop) < 3 or not np.isfinite(loop).all():
            raise ValueError(f"{domain.family} domain: {name} must be a finite (m >= 3, 2) array")
        if loop.min() < -1e-12 or loop.max() > 1 + 1e-12:
            problems.append(f"{name} leaves [0, 1]²")
        if (signed_area(loop) > 0) != (k == 0):
            problems.append(f"{name} is {'clockwise' if k == 0 else 'counter-clockwise'}")
        if np.linalg.norm(np.roll(loop, -1, axis=0) - loop, axis=1).max() > h * (1 + 1e-9):
            problems.append(f"{name} has an edge longer than h = {h}")
        if _self_intersects(loop):
            problems.append(f"{name} crosses itself")
    for k, hole in enumerate(domain.holes, start=1):
        if not inside_loop(domain.outer, hole).all():
            problems.append(f"hole {k} is not inside the outer loop")
        for j, other in enumerate(domain.loops[:k]):
            if loop_gap(hole, other) < gap * h * (1 - 1e-9):
                problems.append(f"hole {k} is closer than {gap} h to {'the outer loop' if j == 0 else f'hole {j}'}")
    if problems:
        raise ValueError(f"{domain.family} domain: {'; '.join(problems)}")


def sample_domain(rng: np.random.Generator, h: float, families: Sequence[str] = tuple(DOMAIN_FAMILIES),
                  max_holes: int = 3, gap: float = GAP) -> Domain:
    """A random domain: a family drawn uniformly from ``families``, then its shape (see the module doc)."""
    families = parse_families(families)
    family = families[int(rng.integers(len(families)))]
    outer, holes = DOMAIN_FAMILIES.get(family)(rng, h, gap, max_holes)
    domain = Domain(family, np.ascontiguousarray(outer), tuple(np.ascontiguousarray(x) for x in holes))
    check_domain(domain, h, gap)
    return domain


__all__ = ["DOMAIN_FAMILIES", "Domain", "GAP", "check_domain", "loop_gap", "parse_families", "sample_domain",
           "signed_area", "subdivide"]
