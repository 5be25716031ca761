"""``merge_shards`` (``petrov merge``): the whole dataset file from its shards, identical to one generation.

Before anything is written, the shards (``shards``: grid or mesh files of ``petrov generate --shard K/N``
or ``--indices A:B``) are checked, each refusal naming the file and what is wrong: every one a complete
shard; all of one dataset (the same format, kind, parameters, seed, resolution, total number of samples
and petrov version: every attribute but a shard's own range and the time it was written); none given
twice, none overlapping another, none of the samples missing; and each shard's samples read back to its
content hash (one reading pass, so a damaged shard never reaches the output).

The samples are then copied in index order, one chunk at a time (a merged file of many GB never sits in
memory), through the one write path (``write_path``): a partial file an interrupted merge resumes from,
one writer per output, the content hash chained over all the samples, the rename at the end. Samples,
attributes (but ``created``, the merge's time, and ``chunk_size``) and content hash are those of one
generation of all the samples with the same arguments.
"""
from __future__ import annotations

import contextlib
import logging
import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import h5py

from ..common.outputs import output_file
from ..common.path_checks import require_space
from ..common.progress import progress_bar
from .content_hash import VOLATILE
from .grid_files import FIELDS, default_chunk_size, grid_layout
from .hdf5_files import FORMAT, MESH_FORMAT, file_attrs, file_format, open_h5
from .mesh.storage import DEFAULT_CHUNK_SIZE, mesh_file_layout, mesh_groups
from .shards import shard_range, whole_attrs
from .write_path import (SHARD_KEYS, Layout, WriteOptions, already_generated, stored_hash, utc_now,
                         write_dataset)

log = logging.getLogger(__name__)

_OWN = {"shard_start", "shard_stop", "shard", "n_samples"}  # a shard's own attributes: where it lies
_FIRST = ("format", "kind", "seed", "native_resolution", "total_samples", "petrov_version")  # named first
_NAMES = {"native_resolution": "resolution", "total_samples": "n_samples (of the whole dataset)",
          "petrov_version": "petrov version"}
_RESTATED = ("params", "solver_settings", "equation")  # follow from the parameters, each of which is named


@dataclass(frozen=True)
class Shard:
    """A shard file as read for the merge: its samples ``[start, stop)`` of the dataset, its attributes,
    the groups' attributes (mesh files) and the shape of a sample of each field (grid files)."""

    path: Path
    attrs: dict[str, Any]
    groups: dict[str, dict[str, Any]]
    shapes: dict[str, tuple[int, ...]]

    @property
    def start(self) -> int:
        return int(self.attrs["shard_start"])

    @property
    def stop(self) -> int:
        return int(self.attrs["shard_stop"])

    @property
    def span(self) -> str:
        return f"samples {self.start}..{self.stop - 1}"


def read_shard(path: str | os.PathLike) -> Shard:
    """The shard file ``path``, checked to be a complete shard (ValueError naming it otherwise)."""
    path = Path(path)
    with open_h5(path) as h5:
        fmt, attrs = file_format(h5), file_attrs(h5)
        groups = {name: file_attrs(h5[name]) for name in h5 if isinstance(h5[name], h5py.Group)}
        shapes = {name: tuple(h5[name].shape[1:]) for name in FIELDS if fmt == FORMAT and name in h5}
    usage = "petrov merge takes the files `petrov generate KIND ... --shard K/N` (or --indices A:B) writes"
    if fmt not in (FORMAT, MESH_FORMAT):
        raise ValueError(f"{path} is not a petrov dataset file (format {fmt!r}); {usage}")
    if not all(key in attrs for key in SHARD_KEYS):
        raise ValueError(f"{path} is not a shard but a whole dataset ({attrs.get('n_samples')} samples of "
                         f"{attrs.get('kind')}); {usage}")
    n, done = int(attrs["n_samples"]), int(attrs.get("n_complete", 0))
    start, stop, total = (int(attrs[key]) for key in SHARD_KEYS)
    if not (0 <= start < stop <= total and stop - start == n):
        raise ValueError(f"{path}: its shard attributes (samples {start}..{stop - 1} of {total}, {n} stored) "
                         f"contradict each other; the file is damaged or was edited: regenerate that shard")
    if done < n:
        raise ValueError(f"{path} is an unfinished shard ({done} of its {n} samples written); rerun its "
                         f"`petrov generate ... --shard` command to finish it, then merge")
    if not str(attrs.get("content_hash", "")).strip():
        raise ValueError(f"{path} has no content hash to check its samples against; regenerate that shard")
    return Shard(path, attrs, groups, shapes)


def _recipe(shard: Shard) -> dict[str, Any]:
    """What must agree between the shards of one dataset: every attribute but the shard's own and the
    writing's (the petrov version stays: another version may make other samples)."""
    kept = {k: v for k, v in shard.attrs.items() if k not in VOLATILE | _OWN}
    return {**kept, "petrov_version": shard.attrs.get("petrov_version"), "sample shapes": shard.shapes}


def _foreign(shard: Shard, first: Shard) -> str | None:
    """What makes ``shard`` a shard of other data than ``first`` (None: the same dataset)."""
    mine, theirs = _recipe(shard), _recipe(first)
    keys = [k for k in _FIRST if k in mine or k in theirs]
    keys += sorted(k for k in mine.keys() | theirs.keys() if k not in _FIRST and k not in _RESTATED)
    keys += [k for k in _RESTATED if k in mine or k in theirs]
    diff = [k for k in keys if mine.get(k) != theirs.get(k)]
    if not diff:
        return None
    named = [k for k in diff if k not in _RESTATED] or diff
    shown = "; ".join(f"{_NAMES.get(k, k)} {mine.get(k)!r} there, {theirs.get(k)!r} in {first.path}"
                      for k in named[:3])
    return (f"{shard.path} is a shard of another dataset than {first.path}: {shown}; merge the shards of one "
            f"`petrov generate` command (the same kind, parameters, seed, resolution and --n-samples)")


def _missing_hint(shards: Sequence[Shard], lo: int, hi: int, total: int) -> str:
    """Which ``--shard K/N`` would have written samples ``lo..hi-1``, where the shards say N."""
    labels = {s.attrs.get("shard", "") for s in shards}
    counts = {int(label.split("/")[1]) for label in labels if label}
    if len(counts) != 1 or "" in labels:
        return f"`petrov generate ... --indices {lo}:{hi}`"
    count = counts.pop()
    ranges = [shard_range(k, count, total) for k in range(count)]
    missing = [k for k, (start, stop) in enumerate(ranges) if start < hi and stop > lo]
    return " and ".join(f"`--shard {k}/{count}`" for k in missing)


def check_shards(paths: Sequence[str | os.PathLike]) -> list[Shard]:
    """The shards ``paths`` in index order, checked to make one whole dataset together (module docstring;
    the content hashes are checked by ``verify_shards``)."""
    if isinstance(paths, (str, os.PathLike)):
        paths = [paths]
    if not paths:
        raise ValueError("give the shard files to merge (the files `petrov generate ... --shard K/N` wrote)")
    shards = [read_shard(path) for path in paths]
    seen: dict[tuple[int, int], Path] = {}
    for shard in shards:
        stat = os.stat(shard.path)
        if (stat.st_dev, stat.st_ino) in seen:
            other = seen[stat.st_dev, stat.st_ino]
            also = "" if other == shard.path else f" (also as {other})"
            raise ValueError(f"{shard.path} is given twice{also}; give each shard once")
        seen[stat.st_dev, stat.st_ino] = shard.path
        problem = _foreign(shard, shards[0])
        if problem:
            raise ValueError(problem)
    shards.sort(key=lambda s: (s.start, s.stop))
    total, reached = int(shards[0].attrs["total_samples"]), 0
    for before, shard in zip([None, *shards], shards):
        if before is not None and shard.start < before.stop:
            if (shard.start, shard.stop) == (before.start, before.stop):
                raise ValueError(f"{before.path} and {shard.path} both hold {shard.span} (the same shard twice?); "
                                 f"give each shard once")
            raise ValueError(f"{before.path} ({before.span}) and {shard.path} ({shard.span}) overlap; merge shards "
                             f"of disjoint ranges (--shard K/N with one N for all of them)")
        if shard.start > reached:
            _refuse_missing(shards, reached, shard.start, total)
        reached = shard.stop
    if reached < total:
        _refuse_missing(shards, reached, total, total)
    return shards


def _refuse_missing(shards: Sequence[Shard], lo: int, hi: int, total: int) -> None:
    raise ValueError(f"samples {lo}..{hi - 1} of the {total} are in none of the shards given; add the shard that "
                     f"holds them, or write it with {_missing_hint(shards, lo, hi, total)}")


def _layout(first: Shard, **options: Any) -> Layout:
    if first.attrs["format"] == FORMAT:
        return grid_layout(first.shapes, **options)
    return mesh_file_layout(first.attrs, {name: first.groups[name] for name, _ in mesh_groups(first.attrs)
                                          if name in first.groups}, **options)


def verify_shards(shards: Sequence[Shard], chunk: int, progress: bool = True) -> None:
    """Read every shard's samples back to its content hash (ValueError naming a shard that differs)."""
    layout = _layout(shards[0])
    total = sum(s.stop - s.start for s in shards)
    with progress_bar(total=total, unit="sample", enabled=progress, desc="check shards") as bar:
        for shard in shards:
            with open_h5(shard.path) as h5:
                digest = stored_hash(h5, layout, shard.stop - shard.start, chunk, after_block=bar.update)
            if digest.value != shard.attrs["content_hash"]:
                raise ValueError(f"{shard.path}: its samples do not match its content hash (damaged, or changed "
                                 f"after it was written); regenerate that shard (its petrov generate command with "
                                 f"--overwrite), then merge")


def _copied(shards: Sequence[Shard], layout: Layout):
    """The block source of the write path: the shards' samples in index order, ``chunk`` at a time."""

    def blocks(start: int, chunk: int, stack: contextlib.ExitStack):
        for shard in shards:
            if shard.stop <= start:
                continue
            with open_h5(shard.path) as h5:
                read = layout.reader(h5)
                for lo in range(max(start, shard.start), shard.stop, chunk):
                    hi = min(lo + chunk, shard.stop)
                    yield lo, hi, read(lo - shard.start, hi - shard.start)

    return blocks


def merge_shards(
    shards: Sequence[str | os.PathLike],
    output: str | os.PathLike,
    *,
    overwrite: bool = False,
    chunk_size: int | None = None,
    progress: bool = True,
    callback: Callable[[int, int], None] | None = None,
) -> Path:
    """Write the dataset file ``output`` from the shard files ``shards`` (any order; module docstring).

    Refusals (ValueError, before anything is written) name the file and what differs or which samples
    are missing. An existing ``output`` holding the same data is kept (nothing to do); another is a
    FileExistsError unless ``overwrite``. ``chunk_size``: samples copied at a time (default: the shards'
    chunk size); ``callback(n_complete, n_samples)`` runs after each chunk is on disk. Returns ``Path(output)``.
    """
    output = output_file(output, create=False)  # a bad path is refused before the shards are read
    WriteOptions(chunk_size=chunk_size)
    checked = check_shards(shards)
    for shard in checked:
        if output.exists() and os.path.samefile(shard.path, output):
            raise ValueError(f"the output {output} is one of the shards; choose another -o")
    first = checked[0]
    chain = ("content_hash", "hash_chain", "hash_chain_samples")  # the whole file's are made as it is written
    attrs = {k: v for k, v in whole_attrs(first.attrs).items() if k not in chain}
    attrs.update(n_complete=0, created=utc_now())
    layout = _layout(first)
    if not overwrite and already_generated(output, attrs, layout.identity):
        log.info(f"{output} already holds these {attrs['n_samples']} samples; nothing to do")
        return output
    chunk = chunk_size or int(first.attrs.get("chunk_size") or 0) or _default_chunk(first)
    verify_shards(checked, chunk, progress)
    needed = sum(os.stat(s.path).st_size for s in checked)

    def admit(already_written: int) -> None:
        require_space(output, needed - already_written, "free some space, or merge into another folder (-o)", flag="-o")

    options = WriteOptions(overwrite=overwrite, chunk_size=chunk, progress=progress, callback=callback)
    return write_dataset(output, attrs, layout, _copied(checked, layout), options, default_chunk=chunk,
                         admit=admit, desc=f"merge {attrs['kind']}", command="merge", what="merged")


def _default_chunk(first: Shard) -> int:
    if first.attrs["format"] == FORMAT:
        return default_chunk_size(math.prod(first.shapes["x"]))
    return DEFAULT_CHUNK_SIZE


__all__ = ["Shard", "check_shards", "merge_shards", "read_shard", "verify_shards"]
