"""``invert``: recover Darcy coefficients from observed solutions with one of the registered methods.

    result = invert("darcy-141.h5", "pde", resolution=141, indices=slice(900, 910), noise=0.01,
                    noise_stats="runs/darcy-inverse", settings={"grid": 36}, out_dir="inv/pde")

Methods (``METHODS``, [`petrov.inverse.methods`][]): ``pde`` (finite-difference solve + adjoint,
L-BFGS-B), ``refined`` (``pde`` from the learned answer, stopped by the discrepancy principle;
``inverse_run``), ``surrogate`` (Adam through a trained forward operator, ``forward_run``), ``learned``
(a trained inverse operator, ``inverse_run``). ``pde`` and ``surrogate`` can start from the learned
inverse's output (``start="learned"``). ``uncertainty=True`` (pde, refined) adds per cell the
probability of the high phase and per sample an interval for the relative error
([`petrov.inverse.laplace`][]). Everything is validated before anything runs or is written; the
output directory receives ``coefficients.h5`` (recovered a, observed u, pooled truth when known, the
uncertainty), ``metrics.json``/``metrics.csv`` (per sample and mean) and ``inversion.png``, each
written to a temporary file and renamed. The samples run in chunks (``workers`` processes); finished
chunks are kept in the output directory until the end, so a killed run resumes
([`petrov.inverse.runner`][]).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Mapping

import numpy as np
import torch

from ..common.config import asdict
from ..common.files import atomic_write, write_csv, write_json
from ..common.path_checks import ensure_dir
from ..common.outputs import check_outputs, claim_outputs
from ..common.shipped import resolve_source
from ..datasets import average_pool, fit_normalizer
from ..datasets.sampling import pool_kernel
from ..datasets.hdf5_files import h5_image
from ..evaluate.runs import load_run
from ..train.checkpoint import load_operator
from .calibration import conformal_scale, expected_calibration_error, interval_coverage
from .config import InversionConfig, inversion_config
from .learned import output_grid, predict
from .methods import METHODS, NEEDS, STARTS_LEARNED, UNCERTAIN, Operators
from .metrics import inversion_metrics
from .observations import Observations, add_observation_noise, load_observations
from .pde import solver_setup, unknown_grid
from .runner import finish, run_chunks

DEFAULT_GRID = 36  # the reference's coarse target grid (141 -> 36)
METRIC_FIELDS = ["sample", "rel_l2_a", "phase_accuracy", "misfit_clean", "misfit_noisy", "error_low", "error_high",
                 "error_median", "cpu_seconds"]
# what `petrov invert` writes into its output folder (the output-folder rule: petrov.common.outputs)
OUTPUT_FILES = ("coefficients.h5", "metrics.json", "metrics.csv", "inversion.png", "inversion.pdf")


@dataclass
class InversionResult:
    """``a (N, k, k)`` recovered; ``a_true`` the truth pooled to k (or None); ``metrics`` per sample."""

    method: str
    a: np.ndarray
    observations: Observations
    config: InversionConfig
    a_true: np.ndarray | None
    metrics: dict[str, np.ndarray]
    info: list[dict[str, Any]]
    files: list[Path] = field(default_factory=list)

    @property
    def cpu_seconds(self) -> np.ndarray:
        return np.array([i["cpu_seconds"] for i in self.info])

    @property
    def phase_probability(self) -> np.ndarray | None:
        """``(N, k, k)`` probability of the high phase per cell (None without uncertainty)."""
        return self._uncertainty("phase_probability")

    @property
    def error_interval(self) -> np.ndarray | None:
        """``(N, 2)`` interval of each sample's relative error (None without uncertainty)."""
        return self._uncertainty("error_interval")

    def _uncertainty(self, key: str) -> np.ndarray | None:
        if not self.info or "uncertainty" not in self.info[0]:
            return None
        return np.stack([np.asarray(i["uncertainty"][key]) for i in self.info])

    def summary(self) -> dict[str, float]:
        """Mean of every per-sample metric (NaN-free entries) and of the CPU seconds per sample; with
        uncertainty and the truth, the interval coverage and the phase probabilities' expected
        calibration error (over all cells of all samples)."""
        out = {k: float(np.nanmean(v)) for k, v in self.metrics.items()}
        out["cpu_seconds"] = float(self.cpu_seconds.mean())
        if self.phase_probability is not None:
            out["uncertainty_cpu_seconds"] = float(np.mean([i["uncertainty_cpu_seconds"] for i in self.info]))
            if self.a_true is not None:
                out["coverage"] = interval_coverage(self.metrics["rel_l2_a"], self.error_interval)
                out["phase_ece"] = expected_calibration_error(self.phase_probability,
                                                              self.a_true > self.config.threshold)
        out["n"] = len(self.a)
        return out


# --- validation of the inputs ---------------------------------------------------------------------

# The noise level is relative: the standard deviation of the added noise in units of u's point-wise
# standard deviation over the training solutions (``decode(encode(u) + level * xi)``,
# petrov.inverse.observations).  At 1 the noise is as large as the whole variation of u between samples,
# so nothing of the coefficient is left to recover; above it only noise is inverted (and huge levels
# overflow the operators' float32 arithmetic).  The reference protocol uses levels up to a few percent.
MAX_NOISE = 1.0


def parse_noise(noise: Any) -> float | None:
    """A level in ``[0, MAX_NOISE]`` (added per the reference protocol) or ``"observed"`` (None: already
    noisy)."""
    if isinstance(noise, str):
        if noise.strip().lower() == "observed":
            return None
        try:
            noise = float(noise)
        except ValueError:
            raise ValueError(f"noise must be a number in [0, {MAX_NOISE:g}] or 'observed', got {noise!r}") from None
    if isinstance(noise, bool) or not isinstance(noise, (int, float)) or not (np.isfinite(noise) and noise >= 0):
        raise ValueError(f"noise must be a finite number in [0, {MAX_NOISE:g}] or 'observed', got {noise!r}")
    if noise > MAX_NOISE:
        raise ValueError(f"noise {noise:g} is too large: the level is relative to the point-wise spread of u "
                         f"(1 = noise as large as u's variation between samples, which leaves nothing to recover); "
                         f"give a level in [0, {MAX_NOISE:g}], e.g. 0.01")
    return float(noise)


# the data a run given as --forward-run / --inverse-run must have been trained on
RUN_KINDS = {"forward operator": ("darcy", "a Darcy forward operator a -> u"),
             "inverse operator": ("darcy-inverse", "an inverse Darcy operator u -> a")}


def _operator(source: Any, what: str):
    if source is None or isinstance(source, torch.nn.Module):
        return source
    path = Path(resolve_source(source))  # a shipped operator (pretrained:NAME) is a run directory
    if not path.exists():
        raise FileNotFoundError(f"{what} run {str(path)!r} does not exist")
    if not (path.is_dir() and (path / "config.json").is_file()):
        return load_operator(path)
    setup = load_run(path)
    kind, needed = RUN_KINDS.get(what, (None, ""))
    if kind is not None and setup.kind is not None and setup.kind != kind:
        raise ValueError(f"{what} run {str(path)!r} was trained on {setup.kind!r} data; this needs {needed}, "
                         f"a run trained on {kind!r} data")
    return setup.operator


# the runs whose normalizers hold the point-wise statistics of u on the grid: kind -> which normalizer
NOISE_STATS_KINDS = {"darcy-inverse": "x_normalizer", "darcy": "y_normalizer"}


def _run_statistics_of_u(path: Path):
    """The point-wise statistics of u a trained run holds: an inverse Darcy run's input normalizer, a
    forward Darcy run's output normalizer (a run of other data: a ValueError saying what is needed)."""
    if not (path / "config.json").is_file():  # not a run directory: _operator says what it is
        return _operator(path, "noise statistics").x_normalizer
    setup = load_run(path)
    which = NOISE_STATS_KINDS.get(setup.kind) if setup.kind is not None else "x_normalizer"
    if which is None:
        raise ValueError(f"noise statistics run {str(path)!r} was trained on {setup.kind!r} data; the noise needs the "
                         f"point-wise statistics of u on the grid: give --noise-stats a run trained on 'darcy-inverse' "
                         f"or 'darcy' data, or a Darcy dataset file")
    normalizer = getattr(setup.operator, which)
    if normalizer is None:
        field = "data.normalize_x" if which == "x_normalizer" else "data.normalize_y"
        raise ValueError(f"noise statistics run {str(path)!r} holds no statistics of u (it was trained with {field} "
                         f"= false): give --noise-stats a Darcy dataset file instead")
    return normalizer


def _noise_normalizer(noise_stats: Any, ops: Operators, source: Any):
    """The point-wise statistics of u for the noise: given, the inverse run's, or fitted on the file."""
    if noise_stats is None:
        if ops.inverse is not None and getattr(ops.inverse, "x_normalizer", None) is not None:
            return ops.inverse.x_normalizer
        if isinstance(source, (str, os.PathLike)) and not str(source).lower().endswith((".npy", ".npz")):
            noise_stats = source
        else:
            return None
    if not isinstance(noise_stats, (str, os.PathLike)):
        return noise_stats  # a normalizer object
    path = Path(resolve_source(noise_stats))
    if path.is_dir():
        return _run_statistics_of_u(path)
    if not path.exists():
        raise FileNotFoundError(f"noise statistics source {str(path)!r} does not exist")
    return fit_normalizer(path, "x", kind="darcy-inverse")


def _resolve_grid(cfg: InversionConfig, ops: Operators, obs: Observations, method: str) -> InversionConfig:
    grid = cfg.grid
    if grid is None:
        grid = output_grid(ops.inverse, obs.resolution) if ops.inverse is not None else DEFAULT_GRID
        grid = min(grid, obs.resolution)
    if grid > obs.resolution:
        raise ValueError(f"the output grid ({grid}) is finer than the observations ({obs.resolution})")
    if obs.a_true is not None:
        try:
            pool_kernel(obs.resolution, grid)
        except ValueError as err:
            raise ValueError(f"the true coefficient cannot be pooled to the output grid: {err}") from None
    return replace(cfg, grid=int(grid))


def _check_operators(ops: Operators, n_obs: int, cfg: InversionConfig) -> None:
    """One forward pass of each trained operator on the observation grid (clear error before any work)."""
    if ops.forward is not None:
        predict(ops.forward, np.full((1, n_obs, n_obs), cfg.threshold))


def _check_uncertainty(method: str, obs: Observations, cfg: InversionConfig) -> None:
    """The posterior is computed for pde answers whose unknown lives on the solve grid."""
    if method not in UNCERTAIN:
        raise ValueError(f"uncertainty is computed for the methods {', '.join(sorted(UNCERTAIN))}, not {method!r}")
    n_solver, _ = solver_setup(obs.resolution, cfg.solver_resolution)
    unknown = unknown_grid(cfg, n_solver)
    if unknown != n_solver:
        raise ValueError(f"uncertainty needs the pde unknown on the solve grid ({n_solver} nodes per side; it is on "
                         f"{unknown}): set pde_grid={n_solver} (petrov invert --set pde_grid={n_solver})")


# --- the entry point --------------------------------------------------------------------------------

def invert(
    source: str | os.PathLike | Observations,
    method: str = "pde",
    *,
    resolution: int | None = None,
    indices: Any = None,
    noise: float | str = 0.0,
    noise_seed: int = 0,
    noise_stats: Any = None,
    forward_run: Any = None,
    inverse_run: Any = None,
    start: str = "midpoint",
    settings: InversionConfig | Mapping[str, Any] | None = None,
    uncertainty: bool = False,
    calibrate: Any = None,
    out_dir: str | os.PathLike | None = None,
    plots: bool = True,
    n_plots: int = 4,
    overwrite: bool = False,
    workers: int = 0,
    chunk_size: int = 8,
    progress: bool = False,
    trace: bool = False,
) -> InversionResult:
    """Recover the coefficients of the observations in ``source`` with ``method``.

    ``source``: a Darcy dataset file (samples ``indices`` at ``resolution``; truth known), an array
    file ``.npy``/``.npz`` (physical units, see ``observations``) or an [`Observations`][].
    ``noise``: a level added per the reference protocol with ``noise_seed`` and the point-wise
    statistics ``noise_stats`` (a run directory, a dataset file or a normalizer; default the inverse
    run's, else the source file's), or ``"observed"`` for observations that are noisy already.
    ``forward_run``/``inverse_run``: run directories, shipped operators (``"pretrained:NAME"``,
    [`petrov.common.shipped`][]) or loaded operators for ``surrogate``/``learned`` (and ``refined``, which
    starts from the learned answer).
    ``start``: ``"midpoint"`` or ``"learned"`` (pde/surrogate start from the learned inverse's output).
    ``settings``: [`InversionConfig`][] or a mapping of its fields. ``uncertainty``: phase
    probabilities and error intervals (pde/refined, the unknown on the solve grid). ``calibrate``:
    indices of other samples of the same dataset file (truth known, e.g. validation samples) inverted
    first with the same settings to measure the intervals' split-conformal factors
    (``error_scale``, [`petrov.inverse.calibration.conformal_scale`][]). ``out_dir``: where to write,
    under the output-folder rule of [`petrov.common.outputs`][] (``overwrite``: into a folder holding
    other files; another command's outputs are never written over), and where finished chunks are kept
    until the end (a rerun resumes). ``workers``: processes (0: this one), ``chunk_size`` samples each
    at a time. ``progress``: a bar on a terminal. ``trace``: pde iterates in ``info[i]["trace"]``
    (error-vs-time curves).
    """
    cfg = inversion_config(settings)
    METHODS.get(method)  # KeyError naming the methods
    level = parse_noise(noise)
    if start not in ("midpoint", "learned"):
        raise ValueError(f"start must be 'midpoint' or 'learned', got {start!r}")
    if method in STARTS_LEARNED:  # refined: from the learned answer to the noise level
        start, cfg = "learned", replace(cfg, stop="discrepancy")
    ops = Operators(forward=_operator(forward_run, "forward operator"), inverse=_operator(inverse_run, "inverse operator"))
    wanted = {NEEDS.get(method)} | ({"inverse"} if start == "learned" else set())
    for role in sorted(wanted - {None}):
        if getattr(ops, role) is None:
            flag = "forward_run (--forward-run)" if role == "forward" else "inverse_run (--inverse-run)"
            why = " (it starts from the learned answer)" if method in STARTS_LEARNED else \
                (" with start=learned" if role == "inverse" and NEEDS.get(method) != "inverse" else "")
            raise ValueError(f"method {method!r}{why} needs a trained {role} operator: give {flag}")
    obs = source if isinstance(source, Observations) else load_observations(source, resolution, indices)
    if level is None:
        obs = replace(obs, noise=None)
    elif level > 0:
        obs = add_observation_noise(obs, level, _noise_normalizer(noise_stats, ops, source), noise_seed)
    cfg = _resolve_grid(cfg, ops, obs, method)
    uncertainty = uncertainty or calibrate is not None
    if uncertainty:
        _check_uncertainty(method, obs, cfg)
    if calibrate is not None:
        if isinstance(source, Observations) or obs.a_true is None:
            raise ValueError("calibrate needs a dataset file with the true coefficients (its validation samples)")
        cal = invert(source, method, resolution=resolution, indices=calibrate, noise=noise, noise_seed=noise_seed,
                     noise_stats=noise_stats, forward_run=ops.forward, inverse_run=ops.inverse, start=start,
                     settings=replace(cfg, error_scale=None), uncertainty=True, workers=workers,
                     chunk_size=chunk_size, progress=progress)
        if set(np.asarray(cal.observations.sample_ids)) & set(np.asarray(obs.sample_ids)):
            raise ValueError("the calibration samples must differ from the samples to invert")
        cfg = replace(cfg, error_scale=conformal_scale(cal.metrics["rel_l2_a"], cal.metrics["error_median"],
                                                       cfg.interval))
    _check_operators(ops, obs.resolution, cfg)
    out = None if out_dir is None else Path(out_dir)
    if out is not None:
        check_outputs(out, "invert", OUTPUT_FILES, overwrite=overwrite)

    a_true = None if obs.a_true is None else average_pool(obs.a_true, cfg.grid)
    sources = {role: str(src) for role, src in (("forward", forward_run), ("inverse", inverse_run))
               if isinstance(src, (str, os.PathLike))}
    a, info = run_chunks(method, obs.u, np.asarray(obs.sample_ids), cfg, ops, start, noise_std=obs.noise_std,
                         uncertainty=uncertainty, trace=trace, workers=workers, chunk_size=chunk_size,
                         out_dir=out, sources=sources, progress=progress)
    if not np.isfinite(a).all():
        raise ValueError(f"method {method!r} returned non-finite coefficients; check the inputs and settings")
    metrics = inversion_metrics(a, obs.u, a_true=a_true, u_clean=obs.u_clean, low=cfg.low, high=cfg.high,
                                f=cfg.f, averaging=cfg.averaging)
    if uncertainty:
        interval = np.stack([np.asarray(i["uncertainty"]["error_interval"]) for i in info])
        metrics.update(error_low=interval[:, 0], error_high=interval[:, 1],
                       error_median=np.array([i["uncertainty"]["error_median"] for i in info]))
    result = InversionResult(method, a, obs, cfg, a_true, metrics, info)
    if out is not None:
        claim_outputs(out, "invert", OUTPUT_FILES, overwrite=overwrite)
        result.files = write_result(result, out, plots=plots, n_plots=n_plots)
        finish(out)
    return result


# --- output ---------------------------------------------------------------------------------------

def _write_h5(path: Path, arrays: dict[str, np.ndarray], attrs: dict[str, Any]) -> Path:
    """HDF5 file made in memory, then written atomically (temp file, fsync, rename): HDF5 itself never
    meets a full disk."""
    return atomic_write(path, h5_image(arrays, attrs))


def metric_rows(result: InversionResult) -> list[dict[str, Any]]:
    """One row per sample: its number in the source, the metrics, CPU seconds."""
    rows = []
    for i, sid in enumerate(result.observations.sample_ids):
        row = {"sample": int(sid), **{k: float(v[i]) for k, v in result.metrics.items()},
               "cpu_seconds": float(result.info[i]["cpu_seconds"])}
        rows.append(row)
    return rows


def write_result(result: InversionResult, out_dir: Path, *, plots: bool = True, n_plots: int = 4) -> list[Path]:
    """``coefficients.h5``, ``metrics.json``, ``metrics.csv`` and (``plots``) ``inversion.png`` in ``out_dir``."""
    out_dir = ensure_dir(out_dir, "output directory", "--out")
    obs = result.observations
    meta = {"method": result.method, "source": obs.source,
            "noise": "observed" if obs.noise is None else obs.noise, "grid": result.config.grid,
            "observation_resolution": obs.resolution, "settings": asdict(result.config)}
    arrays = {"a": result.a, "u_observed": obs.u, "sample_ids": np.asarray(obs.sample_ids)}
    if result.a_true is not None:
        arrays["a_true"] = result.a_true
    if result.phase_probability is not None:
        arrays["phase_probability"] = result.phase_probability
        arrays["error_interval"] = result.error_interval
        meta["interval"] = result.config.interval
    files = [_write_h5(out_dir / "coefficients.h5", arrays, {**meta, "settings": json.dumps(meta["settings"])})]
    rows = metric_rows(result)
    doc = {**meta, "mean": result.summary(), "samples": rows,
           "info": [{k: v for k, v in i.items() if k not in ("trace", "uncertainty")} for i in result.info]}
    write_json(out_dir / "metrics.json", doc)
    write_csv(out_dir / "metrics.csv", rows, [f for f in METRIC_FIELDS if f == "sample" or f in rows[0]])
    files += [out_dir / "metrics.json", out_dir / "metrics.csv"]
    if plots:
        from ..evaluate.plots import plot_inversion  # matplotlib: imported when drawing, not at start-up

        files.append(plot_inversion(obs.u, result.a, out_dir / "inversion.png", a_true=result.a_true,
                                    sample_ids=obs.sample_ids, n=n_plots,
                                    title=f"{result.method} inversion (noise {meta['noise']})",
                                    phase_probability=result.phase_probability,
                                    error_interval=result.error_interval))
    return files
