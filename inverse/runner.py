"""Many observations: fixed chunks of samples, in parallel worker processes, resumable after a kill.

The samples are cut into chunks of ``chunk_size`` consecutive observations (the same chunks whatever
the number of workers or interruptions, so a chunk's answers never depend on how the run went). Each
finished chunk is written at once to ``OUT/.partial-inversion/chunk-NNNNNN.npz`` (temporary file,
fsync, rename), next to ``request.json``, which identifies the request (method, settings, start,
operators, a hash of the observations). A run that finds the same request there loads the finished
chunks and computes only the missing ones; a different request there is an error (delete the folder
or choose another output directory). When every chunk is in, the caller writes the results and
[`finish`][] removes the folder.

Workers (``workers > 0``) are spawned single-threaded processes
([`petrov.common.worker_pool.worker_pool`][], ended with this process even by ``kill -9``); each
loads the trained operators once from their run directories. A progress bar counts the samples.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import shutil
from concurrent.futures import FIRST_COMPLETED, wait
from pathlib import Path
from typing import Any

import numpy as np

from ..common.config import asdict
from ..common.files import atomic_path, write_json
from ..common.locks import Locked, exclusive_lock
from ..common.path_checks import ensure_dir
from ..common.progress import progress_bar
from ..common.worker_pool import worker_pool
from .config import InversionConfig
from .methods import Operators, invert_samples

PARTIAL = ".partial-inversion"
_LOADED: dict[str, Any] = {}  # run directory -> operator, per worker process


def chunk_bounds(n: int, chunk_size: int) -> list[tuple[int, int]]:
    """``[(lo, hi), ...]`` covering ``range(n)`` in chunks of ``chunk_size`` (the last may be shorter)."""
    if isinstance(chunk_size, bool) or not isinstance(chunk_size, int) or chunk_size < 1:
        raise ValueError(f"chunk_size must be an integer >= 1, got {chunk_size!r}")
    return [(lo, min(n, lo + chunk_size)) for lo in range(0, n, chunk_size)]


def request_id(method: str, cfg: InversionConfig, start: str, uncertainty: bool, trace: bool,
               sources: dict[str, str], u: np.ndarray, sample_ids: np.ndarray, chunk_size: int) -> dict[str, Any]:
    """What identifies a request: finished chunks of a run are reused only by a run with the same."""
    digest = hashlib.sha256(np.ascontiguousarray(u, dtype=np.float64).tobytes())
    digest.update(np.ascontiguousarray(sample_ids, dtype=np.int64).tobytes())
    return {"method": method, "settings": asdict(cfg), "start": start, "uncertainty": bool(uncertainty),
            "trace": bool(trace), "operators": sources, "observations_sha256": digest.hexdigest(), "n": int(len(u)),
            "chunk_size": int(chunk_size)}


def _to_json(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _to_json(v) for k, v in value.items()}
    if isinstance(value, np.ndarray):
        return {"__array__": value.tolist(), "dtype": str(value.dtype)}
    if isinstance(value, (np.floating, np.integer)):
        return value.item()
    return value


def _from_json(value: Any) -> Any:
    if isinstance(value, dict):
        if "__array__" in value:
            return np.asarray(value["__array__"], dtype=value["dtype"])
        return {k: _from_json(v) for k, v in value.items()}
    return value


def save_chunk(path: Path, a: np.ndarray, info: list[dict[str, Any]]) -> None:
    """One chunk's answers and infos (plain arrays and JSON; floats round-trip exactly), atomically."""
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as fh:
            np.savez(fh, a=a, info=np.array(json.dumps([_to_json(i) for i in info])))


def load_chunk(path: Path) -> tuple[np.ndarray, list[dict[str, Any]]]:
    with np.load(path, allow_pickle=False) as z:
        return z["a"], [_from_json(i) for i in json.loads(str(z["info"]))]


def _operator(source: Any):
    """An operator given as a module (used as is) or a run directory (loaded once per process)."""
    if source is None or not isinstance(source, str):
        return source
    if source not in _LOADED:
        from ..train.checkpoint import load_operator

        _LOADED[source] = load_operator(source)
    return _LOADED[source]


def _chunk_task(method: str, u: np.ndarray, ids: np.ndarray, noise_std, cfg: InversionConfig, forward, inverse,
                start: str, uncertainty: bool, trace: bool):
    ops = Operators(forward=_operator(forward), inverse=_operator(inverse))
    return invert_samples(method, u, ids, cfg, ops, start, noise_std=noise_std, uncertainty=uncertainty,
                          trace=trace, progress=False)


def _chunk_noise(noise_std: np.ndarray | None, lo: int, hi: int):
    if noise_std is None or np.ndim(noise_std) < 3:
        return noise_std
    return noise_std[lo:hi]


def run_chunks(method: str, u: np.ndarray, sample_ids: np.ndarray, cfg: InversionConfig, ops: Operators,
               start: str = "midpoint", *, noise_std: np.ndarray | None = None, uncertainty: bool = False,
               trace: bool = False, workers: int = 0, chunk_size: int = 8, out_dir: Path | None = None,
               sources: dict[str, Any] | None = None, progress: bool = True):
    """Every sample of ``u (N, m, m)`` through [`petrov.inverse.methods.invert_samples`][], chunk by
    chunk: ``(a (N, grid, grid), info)``. ``out_dir``: where the finished chunks are kept (None: in memory
    only, no resumption). ``sources``: the operators' run directories (``{"forward": ..., "inverse": ...}``)
    that workers load; operators given as objects are sent to the workers as they are."""
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 0:
        raise ValueError(f"workers must be an integer >= 0, got {workers!r}")
    bounds = chunk_bounds(len(u), chunk_size)
    sources = {k: (str(v) if v is not None else None) for k, v in (sources or {}).items()}
    forward = sources.get("forward") or ops.forward
    inverse = sources.get("inverse") or ops.inverse
    if out_dir is None:
        return _compute(bounds, method, u, sample_ids, cfg, forward, inverse, start, noise_std, uncertainty,
                        trace, workers, None, progress, {})
    partial = Path(out_dir) / PARTIAL
    request = request_id(method, cfg, start, uncertainty, trace, {k: v or "" for k, v in sources.items()}, u,
                         sample_ids, chunk_size)
    made = [p for p in (Path(out_dir), partial) if not p.exists()]  # what this call creates
    ensure_dir(out_dir, "output directory", "--out")
    partial.mkdir(exist_ok=True)
    try:
        with exclusive_lock(partial / "request.json", what="inverted"):
            done = _resume(partial, request, len(bounds))
            return _compute(bounds, method, u, sample_ids, cfg, forward, inverse, start, noise_std, uncertainty,
                            trace, workers, partial, progress, done)
    except Locked:
        raise  # another process is running this inversion: its folder is not ours to tidy
    except BaseException:
        if partial in made:  # a folder of an earlier run is left as it was
            _discard_if_empty(partial, made)
        raise


def _discard_if_empty(partial: Path, made: list[Path]) -> None:
    """After a failure: remove ``partial`` if it holds no finished chunk (nothing to resume from), and
    the folders in ``made`` (created by this run) if that leaves them empty."""
    if any(partial.glob("chunk-*.npz")):
        return  # finished work: kept for the rerun
    shutil.rmtree(partial, ignore_errors=True)
    for folder in reversed(made):
        with contextlib.suppress(OSError):
            folder.rmdir()  # only if empty


def _resume(partial: Path, request: dict[str, Any], n_chunks: int) -> dict[int, tuple[np.ndarray, list]]:
    """The finished chunks of the same request in ``partial`` (an error for another request)."""
    saved = partial / "request.json"
    if saved.exists():
        try:
            old = json.loads(saved.read_text())
        except (OSError, ValueError):
            old = None
        if old != json.loads(json.dumps(request)):
            diff = sorted(k for k in request if old is None or old.get(k) != request[k])
            raise ValueError(f"{partial} holds an interrupted inversion of another request (differs in "
                             f"{', '.join(diff) or 'format'}); delete that folder to start over, or rerun "
                             f"with the same observations and settings to resume it")
    else:
        write_json(saved, request)
    done = {}
    for k in range(n_chunks):
        path = partial / f"chunk-{k:06d}.npz"
        if path.exists():
            try:
                done[k] = load_chunk(path)
            except (OSError, ValueError, KeyError):
                path.unlink()  # written atomically, so only a foreign or damaged file: compute it again
    return done


def _compute(bounds, method, u, sample_ids, cfg, forward, inverse, start, noise_std, uncertainty, trace, workers,
             partial: Path | None, progress: bool, done: dict[int, tuple[np.ndarray, list]]):
    results = dict(done)
    todo = [k for k in range(len(bounds)) if k not in results]
    args = lambda k: (method, u[bounds[k][0]:bounds[k][1]], sample_ids[bounds[k][0]:bounds[k][1]],  # noqa: E731
                      _chunk_noise(noise_std, *bounds[k]), cfg, forward, inverse, start, uncertainty, trace)
    finished = sum(hi - lo for k, (lo, hi) in enumerate(bounds) if k in results)
    bar = progress_bar(total=len(u), initial=finished, unit="sample", desc=f"{method} inversion", enabled=progress)

    def keep(k: int, result) -> None:
        results[k] = result
        if partial is not None:
            save_chunk(partial / f"chunk-{k:06d}.npz", *result)
        bar.update(bounds[k][1] - bounds[k][0])

    with bar:
        if workers == 0 or len(todo) <= 1:
            for k in todo:
                keep(k, _chunk_task(*args(k)))
        else:
            with worker_pool(min(workers, len(todo))) as pool:
                pending = {pool.submit(_chunk_task, *args(k)): k for k in todo}
                while pending:
                    ready, _ = wait(pending, return_when=FIRST_COMPLETED)
                    for fut in ready:
                        keep(pending.pop(fut), fut.result())
    a = np.concatenate([results[k][0] for k in range(len(bounds))])
    info = [i for k in range(len(bounds)) for i in results[k][1]]
    return a, info


def finish(out_dir: Path) -> None:
    """Remove the finished chunks once the results are written."""
    shutil.rmtree(Path(out_dir) / PARTIAL, ignore_errors=True)
