"""Observed solutions u to invert: read from a petrov dataset file or an array file, plus the noise.

An [`Observations`][] holds ``u (N, m, m)`` as observed (physical units, node grid of [0, 1]^2),
and when known the clean solution and the true coefficient on the same grid.

Sources:
- a dataset file (petrov HDF5 of kind darcy/darcy-inverse, or an FNO ``piececonst`` ``.mat``): the
  samples ``indices`` at ``resolution`` (a strided sub-grid of the native one), truth included;
- ``.npy``: an array ``u`` of shape ``(N, m, m)`` or ``(m, m)``; ``.npz``: key ``u``, optional ``a``
  (true coefficient on the same grid), ``u_clean`` and ``noise_std`` (the standard deviation of the
  observation noise: a scalar, ``(m, m)`` or ``(N, m, m)``; the discrepancy stop and the uncertainty
  need it).

Noise (the reference protocol): ``u_obs = decode(encode(u) + noise * xi)`` with the point-wise Gaussian
normalizer of u (statistics fitted before any noise) and ``xi ~ N(0, 1)`` drawn once per sample from
``(seed, sample number)`` (``petrov.datasets.InputNoise``), so every method sees the same
observation, and a learned inverse operator exactly the input it was trained and evaluated with.
The noise's point-wise standard deviation, ``noise * (std + eps)`` of the normalizer, is kept as
``noise_std``.
"""
from __future__ import annotations

import dataclasses
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from ..common.host import to_numpy
from ..datasets import InputNoise, open_dataset
from ..evaluate.runs import none_selected

ARRAY_SUFFIXES = (".npy", ".npz")


@dataclass(frozen=True)
class Observations:
    """``u (N, m, m)`` observed; ``u_clean``/``a_true`` ``(N, m, m)`` or None; ``sample_ids (N,)``;
    ``noise``: the level added here (float) or None when ``u`` was observed noisy already;
    ``noise_std``: the noise's standard deviation in the units of u, ``(m, m)`` or ``(N, m, m)`` (None:
    unknown, or no noise)."""

    u: np.ndarray
    sample_ids: np.ndarray
    u_clean: np.ndarray | None = None
    a_true: np.ndarray | None = None
    noise: float | None = 0.0
    source: str = ""
    noise_std: np.ndarray | None = None

    def __post_init__(self):
        for name in ("u", "u_clean", "a_true"):
            z = getattr(self, name)
            if not (isinstance(z, np.ndarray) or (z is None and name != "u")):
                raise TypeError(f"Observations: {name} must be a numpy array (N, m, m), got {type(z).__name__}; "
                                f"convert it (np.asarray({name}, dtype=np.float64))")
        where = f" ({self.source})" if self.source else ""
        u = self.u
        if u.ndim != 3 or u.shape[1] != u.shape[2] or u.shape[1] < 3 or len(u) == 0:
            raise ValueError(f"observations must have shape (N, m, m) with N >= 1 and m >= 3, got {u.shape}")
        for name in ("u", "u_clean", "a_true"):
            z = getattr(self, name)
            if z is None:
                continue
            if z.shape != u.shape:
                raise ValueError(f"{name} has shape {z.shape}, the observations {u.shape}")
            if not np.isfinite(z).all():
                bad = int(np.nonzero(~np.isfinite(z).reshape(len(z), -1).all(axis=1))[0][0])
                raise ValueError(f"{name} of sample {int(self.sample_ids[bad])} contains NaN or inf values"
                                 f"{where}")
        zero = ~np.any(u.reshape(len(u), -1) != 0, axis=1)
        if zero.any():  # the misfit is relative to ||u_obs||
            raise ValueError(f"the observation of sample {int(self.sample_ids[int(np.argmax(zero))])} is zero "
                             f"everywhere{where}; a Darcy solution with f != 0 never is, and the relative "
                             f"misfit is undefined for it: drop it")
        if self.noise_std is not None:
            sigma = np.asarray(self.noise_std, dtype=np.float64)
            if sigma.shape not in ((), u.shape[1:], u.shape) or not np.isfinite(sigma).all() or (sigma < 0).any():
                raise ValueError(f"noise_std must be finite, >= 0 and a scalar, (m, m) or (N, m, m) = {u.shape}; "
                                 f"got shape {sigma.shape}{where}")
            object.__setattr__(self, "noise_std", np.broadcast_to(sigma, u.shape[1:]) if sigma.ndim == 0 else sigma)
        if self.a_true is not None and (self.a_true <= 0).any():
            raise ValueError(f"the true coefficient a must be positive{where}")
        if len(self.sample_ids) != len(u):
            raise ValueError(f"{len(self.sample_ids)} sample ids for {len(u)} observations")

    @property
    def resolution(self) -> int:
        return int(self.u.shape[-1])

    def __len__(self) -> int:
        return len(self.u)


def is_array_file(path: str | os.PathLike) -> bool:
    return Path(path).suffix.lower() in ARRAY_SUFFIXES


def _float_array(value: Any, what: str) -> np.ndarray:
    z = np.asarray(value)
    if not np.issubdtype(z.dtype, np.number) or np.iscomplexobj(z):
        raise ValueError(f"{what} must be a real array, got dtype {z.dtype}")
    z = z.astype(np.float64)
    return z[None] if z.ndim == 2 else z


def from_arrays(path: str | os.PathLike) -> Observations:
    """Observations from ``.npy`` (u) or ``.npz`` (``u``, optional ``a``, ``u_clean``), physical units."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"observation file {str(path)!r} does not exist")
    try:
        loaded = np.load(path, allow_pickle=False)
    except Exception as err:  # OSError, ValueError, zipfile.BadZipFile, EOFError for damaged files
        raise ValueError(f"cannot read {path} as a numpy .npy/.npz file (corrupt or truncated?): {err}") from None
    if path.suffix.lower() == ".npy":
        fields = {"u": loaded}
    else:
        with loaded:
            unknown = sorted(set(loaded.files) - {"u", "a", "u_clean", "noise_std"})
            if "u" not in loaded.files or unknown:
                raise ValueError(f"{path} must hold an array 'u' and optionally 'a', 'u_clean' and 'noise_std'; "
                                 f"found {loaded.files}")
            try:
                fields = {k: loaded[k] for k in loaded.files}
            except Exception as err:  # zipfile, zlib and numpy each raise their own type for damage
                raise ValueError(f"cannot read {path}: a member is damaged (corrupt or truncated?): "
                                 f"{type(err).__name__}: {err}") from None
    shape = tuple(np.shape(fields["u"]))  # as the file holds it: a 2-D array is read as one sample below
    if len(shape) not in (2, 3) or shape[-1] != shape[-2] or shape[-1] < 3 or 0 in shape:
        raise ValueError(f"'u' in {path} has shape {shape}; it must be one field (m, m) or samples (N, m, m) on a "
                         f"square grid of m >= 3 nodes per side")
    u = _float_array(fields["u"], f"'u' in {path}")
    get = lambda key: _float_array(fields[key], f"{key!r} in {path}") if key in fields else None  # noqa: E731
    sigma = None if "noise_std" not in fields else _float_array(fields["noise_std"], f"'noise_std' in {path}")
    if sigma is not None and sigma.ndim == 3 and sigma.shape[0] == 1 and sigma.shape != u.shape:
        sigma = sigma[0]  # an (m, m) field read as one sample
    return Observations(u=u, sample_ids=np.arange(len(u)), a_true=get("a"), u_clean=get("u_clean"),
                        noise=0.0, source=str(path), noise_std=sigma)


def from_dataset(path: str | os.PathLike, resolution: int | None = None, indices: Any = None) -> Observations:
    """Clean observations (and the truth) of samples ``indices`` of a Darcy dataset file at ``resolution``."""
    data = open_dataset(path, resolution=resolution, indices=indices, kind="darcy", dtype=torch.float64)
    if len(data) == 0:
        raise ValueError(f"no samples selected from {path} ({none_selected(indices)})")
    u = to_numpy(data.y[..., 0])
    return Observations(u=u.copy(), sample_ids=np.asarray(data.indices), u_clean=u,
                        a_true=to_numpy(data.x[..., 0]), noise=0.0, source=str(path))


def load_observations(source: str | os.PathLike, resolution: int | None = None,
                      indices: Any = None) -> Observations:
    """An array file (``.npy``/``.npz``) or a dataset file, dispatched by the extension."""
    if is_array_file(source):
        if resolution is not None or indices not in (None, "all"):
            raise ValueError("resolution and indices apply to dataset files; an array file is used whole")
        return from_arrays(source)
    if not Path(source).exists():
        raise FileNotFoundError(f"data file {str(source)!r} does not exist")
    return from_dataset(source, resolution, None if indices == "all" else indices)


def add_observation_noise(obs: Observations, noise: float, normalizer, seed: int = 0) -> Observations:
    """``decode(encode(u) + noise xi)`` per the reference protocol (see the module docstring).

    ``normalizer``: the point-wise Gaussian normalizer of u (``PointwiseGaussianNormalizer``, fitted
    on clean training solutions; restricted to the observation grid here). ``noise = 0`` returns ``obs``.
    """
    noise = InputNoise(noise, seed)  # checks the level and the seed
    if obs.noise is None and noise:
        raise ValueError("these observations are already noisy (noise 'observed'); do not add more")
    if not noise:
        return obs
    if normalizer is None:
        raise ValueError("adding noise needs the point-wise statistics of u: give noise_stats "
                         "(a trained run directory or a dataset file)")
    try:
        norm = normalizer.at_resolution(obs.resolution).to(dtype=torch.float64)
        x = torch.from_numpy(obs.u)[..., None]
        noisy = norm.decode(noise.apply(norm.encode(x), obs.sample_ids))
        sigma = noise.level * (norm.decode(torch.ones_like(x[:1])) - norm.decode(torch.zeros_like(x[:1])))
    except ValueError as err:
        raise ValueError(f"cannot add noise on the {obs.resolution}-point grid: {err}") from None
    return dataclasses.replace(obs, u=to_numpy(noisy[..., 0]), noise=noise.level,
                               noise_std=to_numpy(sigma[0, ..., 0]))
