"""The one write path of dataset files, on grids or on meshes, generated or merged from shards.

1. The output: missing folders are created, a bad path is one line naming it
   (``petrov.common.outputs.output_file``); a complete file holding the same data (the layout's identity
   attributes agree) is kept as it is, nothing to do; any other existing file needs ``overwrite``.
2. Admission: the caller's check of memory and disk (``resources``), before any work.
3. One writer per path: an exclusive lock on the output for the rest (a second writer is refused).
4. ``FILE.partial`` in the same folder: one holding the same data is resumed (with its chunk size), one
   of other data is refused (discarded with ``overwrite``), else the layout makes an empty one.
5. Filled chunk by chunk in index order: the chunk's data, a flush, then the content hash's chain state
   (``hash_chain_samples``, how many samples it covers, then ``hash_chain``, see ``content_hash``) and
   ``n_complete`` that claim them, a flush; a Ctrl-C or SIGTERM waits until the chunk is claimed. An
   interrupted write is continued from ``n_complete`` by the same command (a chain that covers other
   samples than those, as one cut off between the two attributes, is rebuilt from the stored samples);
   a full disk stops it with the partial file kept, as does any other error once a sample is stored (one
   before that removes the partial file: a rerun with corrected settings starts afresh).
6. ``content_hash`` written, the chain's two attributes removed, the file renamed to ``FILE`` (``os.replace``, synced).

A file format is a [`Layout`][] (grid: ``grid_files``, mesh: ``mesh.storage``); what is written comes
from a block source: a generation's samples (``grid_generation``, ``mesh.generation``) or the shards
being merged (``merging``).
"""
from __future__ import annotations

import contextlib
import datetime
import json
import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Sequence

import h5py
import numpy as np

from ..common.config import asdict
from ..common.disk_space import NoSpace, reporting_no_space
from ..common.files import replace_synced
from ..common.locks import exclusive_lock
from ..common.interrupts import deferred_interrupts, raise_if_interrupted
from ..common.outputs import check_outputs, output_file, require_writable
from ..common.progress import progress_bar
from ..common.version import petrov_version
from .content_hash import ContentHash
from .hdf5_files import file_attrs, open_h5, partial_path, plain, writing_h5

log = logging.getLogger(__name__)

# what a shard file adds: its samples are [shard_start, shard_stop) of a dataset of total_samples
SHARD_KEYS = ("shard_start", "shard_stop", "total_samples")

# (start, chunk, stack) -> blocks (lo, hi, data) of the samples start, start + 1, ..., in order; the
# source may enter what it holds (a worker pool) into ``stack``, which closes when the write ends
Blocks = Callable[[int, int, contextlib.ExitStack], Iterator[tuple[int, int, Any]]]


@dataclass(frozen=True)
class WriteOptions:
    """How a dataset file is written: ``overwrite`` an existing one (it is replaced only once the new one
    is complete), ``chunk_size`` samples at a time (None: a resumed file's, else the format's default), a
    ``progress`` bar, ``callback(n_complete, n_samples)`` after each chunk is on disk."""

    overwrite: bool = False
    chunk_size: int | None = None
    progress: bool = True
    callback: Callable[[int, int], None] | None = None

    def __post_init__(self) -> None:
        size = self.chunk_size
        if size is not None and (isinstance(size, bool) or not isinstance(size, (int, np.integer)) or size < 1):
            raise ValueError(f"chunk_size must be an integer >= 1, got {size!r}")


@dataclass(frozen=True)
class Layout:
    """A file format as the write path sees it.

    ``identity``: the attributes that must agree for a partial file to be resumed or a complete one kept;
    ``create(path, attrs)``: an empty file holding ``attrs`` (``n_complete`` 0);
    ``writer(h5, n_complete, held)``: tidies an open partial file (drops what a chunk cut short left after
    sample ``n_complete - 1``) and returns ``write(lo, data)``, which stores a block at sample ``lo``;
    the datasets it keeps go into ``held``, emptied before the file closes;
    ``samples(data)``: each sample of a block as its stored arrays, in the content hash's order;
    ``reader(h5)``: ``read(lo, hi)``, the block of samples ``[lo, hi)`` of a complete file as ``write`` takes it.
    """

    identity: tuple[str, ...]
    create: Callable[[Path, dict], None]
    writer: Callable[[h5py.File, int, dict], Callable[[int, Any], None]]
    samples: Callable[[Any], Iterable[Sequence[np.ndarray]]]
    reader: Callable[[h5py.File], Callable[[int, int], Any]]


def utc_now() -> str:
    """The time a file is written, as its ``created`` attribute holds it (UTC, ISO 8601, seconds)."""
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def dataset_attrs(recipe: Any, params: Any, fmt: str, version: int, n_samples: int, chunk_size: int,
                  **specific: Any) -> dict[str, Any]:
    """The attributes every dataset file carries (format, kind, parameters, solver, versions, counts),
    then the format's ``specific`` ones, then every parameter as an attribute of its own."""
    plain_params = asdict(params)
    attrs: dict[str, Any] = {
        "format": fmt,
        "format_version": version,
        "kind": recipe.name,
        "family": recipe.family,
        "equation": recipe.description,
        "params": json.dumps(plain_params, sort_keys=True),
        **specific,
        "solver_settings": json.dumps(recipe.solver_settings(params), sort_keys=True),
        "petrov_version": petrov_version(),
        "created": utc_now(),
        "n_samples": int(n_samples),
        "n_complete": 0,
        "x_name": recipe.x_name,
        "y_name": recipe.y_name,
        "chunk_size": int(chunk_size),
    }
    clash = sorted(attrs.keys() & plain_params.keys())
    if clash:  # parameters are stored as attributes too, beside the file's own
        raise ValueError(f"{recipe.name} parameters reuse file attribute names {clash}; rename them")
    attrs.update(plain_params)
    return attrs


def start_hash(h5: h5py.File) -> None:
    """The content hash's attributes of a new file, made at their final sizes (rewritten in place later,
    never needing new space)."""
    h5.attrs["n_complete"] = np.int64(0)
    h5.attrs["hash_chain"] = np.bytes_(ContentHash().state)
    h5.attrs["hash_chain_samples"] = np.int64(0)
    h5.attrs["content_hash"] = np.bytes_(ContentHash.BLANK)


def check_generation_args(n_samples: int, seed: int, workers: int) -> None:
    """ValueError unless n_samples >= 1, seed >= 0 and workers >= 0 are integers."""
    for name, value, minimum in (("n_samples", n_samples, 1), ("seed", seed, 0), ("workers", workers, 0)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < minimum:
            raise ValueError(f"{name} must be an integer >= {minimum}, got {value!r}")


# --- the partial file -------------------------------------------------------------------------------


def _resumable(tmp: Path, attrs: dict, identity: Sequence[str]) -> tuple[bool, str, int | None]:
    """Whether ``tmp`` is a write of the same data (the ``identity`` attributes agree), if not why, and
    its chunk size."""
    try:
        with open_h5(tmp) as h5:
            old = file_attrs(h5)
    except ValueError as err:
        return False, f"it cannot be read: {err}", None
    diff = [f"{k}: {old.get(k)!r} there vs {attrs.get(k)!r} now" for k in identity if old.get(k) != attrs.get(k)]
    chunk = old.get("chunk_size")
    return (not diff), "; ".join(diff), (int(chunk) if chunk else None)


def already_generated(path: Path, attrs: dict, identity: Sequence[str]) -> bool:
    """Whether ``path`` is a complete file of the same data (writing it again is a no-op)."""
    if not path.is_file() or not _resumable(path, attrs, identity)[0]:
        return False
    with open_h5(path) as h5:
        done = file_attrs(h5)
    return int(done.get("n_complete", -1)) >= int(done.get("n_samples", 0))


def claim_partial(path: Path, attrs: dict, overwrite: bool, identity: Sequence[str]) -> int | None:
    """Prepare ``path.partial`` for a write of ``attrs`` (call it holding the path's lock).

    An existing ``path`` is a FileExistsError unless ``overwrite``. A partial file of the same data
    (same ``identity`` attributes) is kept to be resumed, and its chunk size returned; one of other
    data (or one that cannot be read) is a ValueError, or is deleted with ``overwrite``. Returns None
    when nothing is resumed or the partial file recorded no chunk size.
    """
    tmp = partial_path(path)
    if path.exists() and not overwrite:
        raise FileExistsError(f"{path} already exists; pass --overwrite (overwrite=True in Python) to replace it")
    if not tmp.exists():
        return None
    ok, why, old_chunk = _resumable(tmp, attrs, identity)
    if not ok and not overwrite:
        unreadable = why.startswith("it cannot be read")
        what = "cannot be resumed" if unreadable else "holds an interrupted generation with different settings"
        raise ValueError(f"{tmp} {what} ({why}); delete it, or pass --overwrite (overwrite=True in Python) to "
                         f"discard it" + ("" if unreadable else ", or rerun with the same settings to resume"))
    if not ok:
        tmp.unlink()
        return None
    require_writable(tmp, "the partial file", f"make it writable (chmod u+w {tmp}) to resume the samples it "
                                              f"holds, or delete it to start again")
    return old_chunk


# --- the write ----------------------------------------------------------------------------------------


def write_dataset(path: str | os.PathLike, attrs: dict, layout: Layout, blocks: Blocks, options: WriteOptions, *,
                  default_chunk: int, admit: Callable[[int], None], desc: str = "", command: str = "generate",
                  what: str = "generated") -> Path:
    """Write the dataset file ``path`` (attributes ``attrs``, format ``layout``, samples from ``blocks``)
    along the module docstring's steps, as ``options`` say; returns ``Path(path)``.

    ``default_chunk``: samples per chunk unless ``options`` or a resumed file say otherwise;
    ``admit(bytes_already_written)`` raises if the write cannot fit; ``command``/``what`` name the writer
    in refusals."""
    path = output_file(path)
    n_samples = int(attrs["n_samples"])
    overwrite = options.overwrite
    if not overwrite and already_generated(path, attrs, layout.identity):
        log.info(f"{path} already holds these {n_samples} samples; nothing to do")
        return path
    check_outputs(path.parent, command, [path.name], overwrite=overwrite, scope="file", flag="-o")
    tmp = partial_path(path)
    admit(tmp.stat().st_size if tmp.is_file() else 0)
    # one writer per path: a second one (with overwrite or not) never touches this one's files
    with exclusive_lock(path, what=what):
        check_outputs(path.parent, command, [path.name], overwrite=overwrite, scope="file", flag="-o")
        old_chunk = claim_partial(path, attrs, overwrite, layout.identity)
        # a resumed file keeps its chunks, so its chunk layout is the same as an uninterrupted run's
        chunk = int(options.chunk_size or old_chunk or default_chunk)
        if not tmp.exists():
            layout.create(tmp, {**attrs, "chunk_size": chunk})
        try:
            fill(tmp, layout, blocks, n_samples, chunk, progress=options.progress, callback=options.callback,
                 desc=desc)
        except NoSpace as err:
            raise NoSpace(f"{err}; the samples written so far are kept in {tmp}: the same command resumes "
                          f"from there") from None
        except Exception:
            discard_if_empty(tmp)  # a failure (not an interruption) before any sample: nothing to resume
            raise
        with reporting_no_space(path):
            replace_synced(tmp, path)
    return path


def stored_samples(tmp: Path) -> int | None:
    """How many samples the partial file ``tmp`` holds (its ``n_complete``), None where it cannot be read."""
    try:
        with open_h5(tmp) as h5:
            return int(file_attrs(h5).get("n_complete", -1))
    except (OSError, ValueError):
        return None


def discard_if_empty(tmp: Path) -> None:
    """Delete the partial file ``tmp`` if it holds no sample (a failed write leaves nothing to resume)."""
    if stored_samples(tmp) == 0:
        with contextlib.suppress(FileNotFoundError):
            tmp.unlink()
        log.debug("%s: removed, it held no samples", tmp)


def resumed_chain(h5: h5py.File, layout: Layout, n_complete: int, chunk: int) -> ContentHash:
    """The content hash's chain after the first ``n_complete`` samples of the partial file ``h5``: its
    ``hash_chain`` when ``hash_chain_samples`` (written before it) says it covers exactly those, else (a
    claim cut off before ``n_complete``, or a partial file of a petrov that kept no count) read back from
    the stored samples, ``chunk`` at a time."""
    chain, covered = h5.attrs.get("hash_chain"), h5.attrs.get("hash_chain_samples")
    if chain is not None and covered is not None and int(covered) == n_complete:
        return ContentHash(plain(chain))
    if n_complete:
        log.info("%s: the content hash of its %d samples is read back from them", h5.filename, n_complete)
    return stored_hash(h5, layout, n_complete, chunk)


def stored_hash(h5: h5py.File, layout: Layout, n: int, chunk: int,
                after_block: Callable[[int], None] | None = None) -> ContentHash:
    """The content hash of the first ``n`` samples stored in ``h5`` (``layout``'s file), read ``chunk`` at a
    time; ``after_block(k)`` after each block of ``k`` samples (a progress bar)."""
    digest, read = ContentHash(), layout.reader(h5)
    for lo in range(0, n, chunk):
        hi = min(lo + chunk, n)
        for arrays in layout.samples(read(lo, hi)):
            digest.add(*arrays)
        if after_block is not None:
            after_block(hi - lo)
    return digest


def fill(tmp: Path, layout: Layout, blocks: Blocks, n_samples: int, chunk: int, *, progress: bool = True,
         callback: Callable[[int, int], None] | None = None, desc: str = "", **options: Any) -> None:
    """Write the blocks into the file ``tmp`` made by ``layout.create`` from its ``n_complete`` on, then its
    ``content_hash`` (steps 5 and 6 of the module docstring, before the rename); each block's data are
    flushed (errors raised) before the counter and the hash chain that claim them. ``options`` go to
    ``hdf5_files.writing_h5`` (``shown``, ``locking``)."""
    named = options.get("shown") or tmp  # the file errors name
    with contextlib.ExitStack() as stack:
        h5 = stack.enter_context(writing_h5(tmp, "r+", **options))
        start = int(h5.attrs["n_complete"])
        held: dict = {}  # the writer's datasets: their write errors surface at flush(), not when freed
        stack.callback(held.clear)  # freed before the file closes, even when an error keeps this frame
        write = layout.writer(h5, start, held)
        digest = resumed_chain(h5, layout, start, chunk)
        log.debug("%s: samples %d..%d of %d in chunks of %d%s", tmp, start, n_samples - 1, n_samples, chunk,
                  f" (resumed, {start} already written)" if start else "")
        source = blocks(start, chunk, stack)
        stack.callback(source.close)  # an interruption: queued work is dropped
        bar = stack.enter_context(progress_bar(total=n_samples, initial=start, unit="sample", enabled=progress,
                                               desc=desc))
        done = start
        while done < n_samples:
            raise_if_interrupted()
            lo, hi, data = next(source)
            if lo != done or not lo < hi <= n_samples:
                raise RuntimeError(f"{tmp}: a block of samples {lo}..{hi - 1} where sample {done} was due")
            # an interrupt arriving here is raised once the chunk is claimed, not between its attributes
            with deferred_interrupts(), reporting_no_space(named):
                write(lo, data)
                h5.flush()  # the data reach the file before the counter that claims them
                for arrays in layout.samples(data):
                    digest.add(*arrays)
                # the count before the chain: a claim cut off anywhere leaves the count unequal to n_complete
                h5.attrs.modify("hash_chain_samples", np.int64(hi))
                h5.attrs.modify("hash_chain", np.bytes_(digest.state))
                h5.attrs.modify("n_complete", np.int64(hi))
                h5.flush()
            del data, arrays  # freed (a sample's views hold its block) before the next block is made
            done = hi
            bar.update(hi - lo)
            if callback is not None:
                callback(hi, n_samples)
        with reporting_no_space(named):
            h5.attrs.modify("content_hash", np.bytes_(digest.value))
            for name in ("hash_chain", "hash_chain_samples"):  # the chain's state; the file is complete
                if name in h5.attrs:
                    del h5.attrs[name]


__all__ = ["Blocks", "Layout", "SHARD_KEYS", "WriteOptions", "already_generated", "check_generation_args",
           "claim_partial", "dataset_attrs", "discard_if_empty", "fill", "resumed_chain", "start_hash",
           "stored_hash", "stored_samples", "utc_now", "write_dataset"]
