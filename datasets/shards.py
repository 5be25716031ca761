"""Shards: one dataset generated in pieces (job-array tasks, machines, processes), then merged.

Sample ``i`` depends only on ``(seed, i)``, so contiguous index ranges are independent pieces of work:

- shard ``K/N`` is the K-th of N contiguous ranges of the ``n`` samples, ``[K n // N, (K + 1) n // N)``,
  with a 0-based ``K`` in ``0 .. N-1``: what ``$SLURM_ARRAY_TASK_ID`` gives with ``--array=0-(N-1)`` and
  what Kubernetes gives an indexed job as ``$JOB_COMPLETION_INDEX``;
- ``indices a:b`` is any range ``[a, b)`` (0-based, ``b`` excluded, as Python slices).

A shard file is an ordinary dataset file (grid or mesh) of its ``b - a`` samples: ``n_samples`` is ``b - a``,
and beside the whole recipe (kind, parameters, seed, resolution) it records ``shard_start`` = a,
``shard_stop`` = b, ``total_samples`` = n (and ``shard`` = "K/N" where it was given so). It resumes like
any file, opens like any file, and ``merging.merge_shards`` (``petrov merge``) writes the whole dataset
from a set of shards, identical to one generation of all ``n`` samples.
"""
from __future__ import annotations

import re
from typing import Any

import numpy as np

from .write_path import SHARD_KEYS

_SHARD = re.compile(r"^\s*(-?\d+)\s*/\s*(-?\d+)\s*$")
_RANGE = re.compile(r"^\s*(-?\d+)?\s*:\s*(-?\d+)?\s*$")


def _integer(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool)


def parse_shard(shard: str | tuple[int, int]) -> tuple[int, int]:
    """``"K/N"`` or ``(K, N)`` -> ``(K, N)``, checked: ``N >= 1`` and a 0-based ``K`` in ``0 .. N-1``."""
    if isinstance(shard, str):
        found = _SHARD.match(shard)
        if not found:
            raise ValueError(f"shard {shard!r}: expected K/N, e.g. 0/10 for the first of 10 shards")
        shard = (int(found.group(1)), int(found.group(2)))
    if not (isinstance(shard, (tuple, list)) and len(shard) == 2 and all(map(_integer, shard))):
        raise ValueError(f"shard must be (K, N) or 'K/N' with integers, got {shard!r}")
    index, count = (int(v) for v in shard)
    if count < 1:
        raise ValueError(f"shard {index}/{count}: the number of shards N must be >= 1")
    if not 0 <= index < count:
        raise ValueError(f"shard {index}/{count}: K counts from 0 and must be in 0..{count - 1} (as "
                         f"$SLURM_ARRAY_TASK_ID with --array=0-{count - 1}, or $JOB_COMPLETION_INDEX, give it)")
    return index, count


def shard_range(index: int, count: int, n_samples: int) -> tuple[int, int]:
    """The samples ``[start, stop)`` of shard ``index`` (0-based) of ``count`` over ``n_samples``: contiguous
    ranges whose sizes differ by at most one."""
    return index * n_samples // count, (index + 1) * n_samples // count


def parse_range(indices: str | tuple[int, int] | range | slice) -> tuple[int, int]:
    """``"a:b"``, ``(a, b)``, ``range(a, b)`` or ``slice(a, b)`` -> ``(a, b)`` (unchecked against a size)."""
    if isinstance(indices, str):
        found = _RANGE.match(indices)
        if not found or None in found.groups():
            raise ValueError(f"indices {indices!r}: expected A:B, the samples A..B-1 (e.g. 0:1000)")
        return int(found.group(1)), int(found.group(2))
    if isinstance(indices, (range, slice)) and indices.step in (None, 1):
        indices = (indices.start if indices.start is not None else 0, indices.stop)
    if isinstance(indices, (tuple, list)) and len(indices) == 2 and all(map(_integer, indices)):
        return int(indices[0]), int(indices[1])
    raise ValueError(f"indices must be 'A:B', (A, B), range(A, B) or slice(A, B), got {indices!r}")


def sample_range(n_samples: int, shard: Any = None, indices: Any = None) -> tuple[tuple[int, int], str] | None:
    """The samples ``((start, stop), label)`` a generation of ``n_samples`` writes as a shard (``label``:
    "K/N" or ""), or None for the whole dataset; ValueError naming what does not fit."""
    if shard is None and indices is None:
        return None
    if shard is not None and indices is not None:
        raise ValueError("give a shard (--shard K/N) or a range of indices (--indices A:B), not both")
    if shard is not None:
        index, count = parse_shard(shard)
        if count > n_samples:
            raise ValueError(f"shard {index}/{count}: {count} shards of {n_samples} samples would leave some "
                             f"empty; use at most {n_samples} shards")
        return shard_range(index, count, n_samples), f"{index}/{count}"
    start, stop = parse_range(indices)
    if not 0 <= start < stop <= n_samples:
        raise ValueError(f"indices {start}:{stop}: expected A:B with 0 <= A < B <= n_samples = {n_samples} "
                         f"(the samples A..B-1)")
    return (start, stop), ""


def shard_attrs(attrs: dict[str, Any], part: tuple[tuple[int, int], str] | None) -> dict[str, Any]:
    """A whole dataset's attributes as a shard's (``part`` from ``sample_range``; None: unchanged)."""
    if part is None:
        return attrs
    (start, stop), label = part
    shard = {**attrs, "n_samples": stop - start, "shard_start": start, "shard_stop": stop,
             "total_samples": int(attrs["n_samples"])}
    if label:
        shard["shard"] = label
    return shard


def whole_attrs(shard: dict[str, Any]) -> dict[str, Any]:
    """A shard's attributes as the whole dataset's (``shard_attrs`` undone)."""
    attrs = {k: v for k, v in shard.items() if k not in (*SHARD_KEYS, "shard")}
    attrs["n_samples"] = int(shard["total_samples"])
    return attrs


def first_index(attrs: dict[str, Any]) -> int:
    """The dataset index of a file's first sample (0 unless the file is a shard)."""
    return int(attrs.get("shard_start", 0))


__all__ = ["first_index", "parse_range", "parse_shard", "sample_range", "shard_attrs", "shard_range", "whole_attrs"]
