"""Entry checks shared by the models: clear errors for wrong shapes, channel counts and NaN.

Models call [`check_grid_input`][] on ``x`` and [`grid_pos`][] for ``pos`` at the top of
``forward`` (once per model call, never per layer); point-set models call [`check_point_input`][]
on ``x, pos, weights, mask, boundary``.  All raise ``ValueError`` naming the expected and the
received value.

Checks of sizes, dtypes and devices are plain Python on tensor metadata and always run.  Checks of
values (NaN/inf, negative or zero-sum quadrature weights, coordinates outside the domain) read the
tensor, which on an accelerator makes the host wait for the device: they run where
``checks_values`` says, which is

- never while ``torch.compile`` traces or a CUDA graph is being captured (a compiled or captured step
  has no host read: the data pipeline checks every batch where it enters);
- otherwise as ``set_finite_check`` chose: ``"cpu"`` (default: tensors on the CPU, where a check
  costs one pass over the input and no synchronization; data files are checked once when they are
  loaded), ``"always"`` or ``"never"``.

A check that runs reads the host once (``raise_first``: all the conditions of one call in one
transfer): a model called in eager mode on checked tensors (the CPU's by default) answers bad values
with its clear error, never with a silent NaN.
"""
from __future__ import annotations

from typing import Callable, Sequence

import torch

from ..grids.layout import cached_grid_coordinates

_FINITE_CHECK = {"mode": "cpu"}


def set_finite_check(mode: str) -> None:
    """When models check their inputs for NaN/inf: ``"cpu"`` (default), ``"always"`` or ``"never"``."""
    if mode not in ("cpu", "always", "never"):
        raise ValueError(f"finite check mode must be 'cpu', 'always' or 'never', got {mode!r}")
    _FINITE_CHECK["mode"] = mode


def capturing(t: torch.Tensor) -> bool:
    """True while ``torch.compile`` traces, or while a CUDA graph is captured on ``t``'s (CUDA) device:
    where no value may be read back to the host."""
    if torch.compiler.is_compiling():
        return True
    return t.is_cuda and torch.cuda.is_current_stream_capturing()


def checks_values(t: torch.Tensor) -> bool:
    """Whether value checks look at ``t`` now (module docstring: never while capturing, else
    ``set_finite_check``'s mode)."""
    if capturing(t):
        return False
    mode = _FINITE_CHECK["mode"]
    return mode == "always" or (mode == "cpu" and t.device.type == "cpu")


def raise_first(failures: Sequence[tuple[torch.Tensor, Callable[[], str]]]) -> None:
    """``failures``: pairs ``(flag, message)``, ``flag`` a 0-d bool tensor (True: the check failed).
    ``ValueError(message())`` for the first raised flag; all flags come back in one host transfer (the
    messages, which may read more values, are made only for a failure)."""
    if not failures:
        return
    if len(failures) == 1:
        flags = [bool(failures[0][0])]
    else:
        flags = torch.stack([flag.reshape(()) for flag, _ in failures]).tolist()
    for failed, (_, message) in zip(flags, failures):
        if failed:
            raise ValueError(message())


def non_finite(t: torch.Tensor) -> torch.Tensor:
    """0-d bool: ``t`` holds a NaN or an inf."""
    return ~torch.isfinite(t).all()


def _count_bad(t: torch.Tensor) -> str:
    return f"{int((~torch.isfinite(t)).sum())} of {t.numel()} values"


def non_finite_failure(t: torch.Tensor, where: str) -> tuple[torch.Tensor, Callable[[], str]]:
    """``t`` holds NaN or inf, as ``raise_first`` takes it; the message counts the bad values."""
    return (non_finite(t), lambda: f"{where} contains NaN or inf ({_count_bad(t)}); one bad value would make "
                                   "every output NaN: check the input and its normalization")


def first_weight(module: torch.nn.Module) -> torch.Tensor | None:
    """``module``'s first real floating-point parameter (None if it has none): its dtype and device are
    the ones inputs must have."""
    for p in module.parameters():
        if p.is_floating_point():
            return p
    return None


def check_matches_weights(t: torch.Tensor, name: str, weight: torch.Tensor | None, where: str,
                          owner: str = "model", dtype: bool = True) -> None:
    """ValueError unless ``t`` is on the device of ``weight`` (a parameter of ``owner``, "model" or
    "layer"; None: nothing to compare) and, with ``dtype``, of its dtype (any floating dtype under
    autocast).  Plain Python on metadata: no value is read."""
    if weight is None:
        return
    if t.device != weight.device:
        raise ValueError(f"{where}: {name} is on {t.device} but the {owner}'s weights are on {weight.device}; "
                         f"move the input ({name}.to({str(weight.device)!r})) or the {owner} "
                         f"({owner}.to({str(t.device)!r}))")
    if dtype and t.dtype != weight.dtype and not torch.is_autocast_enabled(t.device.type):
        raise ValueError(f"{where}: {name} is {t.dtype} but the {owner}'s weights are {weight.dtype}; convert the "
                         f"input ({name}.to({weight.dtype})) or the {owner} ({owner}.to({t.dtype}))")


def check_grid_input(x: torch.Tensor, ndim: int, channels: int, where: str,
                     weight: torch.Tensor | None = None) -> None:
    """Check ``x`` is a finite channels-last grid tensor ``(b, *grid, channels)`` with ``ndim`` grid axes,
    a non-empty batch and, if ``weight`` (a parameter of the model, ``first_weight``) is given, its
    floating dtype and device."""
    if not isinstance(x, torch.Tensor):
        raise TypeError(f"{where}: x must be a torch.Tensor, got {type(x).__name__}")
    if x.dim() != ndim + 2:
        grid = ", ".join(f"n{i + 1}" for i in range(ndim))
        raise ValueError(
            f"{where}: expected x of shape (batch, {grid}, {channels}) (rank {ndim + 2}, "
            f"channels last), got shape {tuple(x.shape)} (rank {x.dim()})"
        )
    if x.shape[-1] != channels:
        raise ValueError(
            f"{where}: expected {channels} input channel(s) in the last dim, got {x.shape[-1]} "
            f"(shape {tuple(x.shape)}); inputs are channels-last (batch, *grid, channels)"
        )
    if not torch.is_floating_point(x):
        raise ValueError(f"{where}: x must be a floating-point tensor, got {x.dtype}")
    if x.shape[0] == 0 or any(n == 0 for n in x.shape[1:-1]):
        raise ValueError(f"{where}: got an empty input of shape {tuple(x.shape)}; give at least one sample "
                         "and a non-empty grid")
    check_matches_weights(x, "x", weight, where)
    if checks_values(x):
        raise_first([(non_finite(x), lambda: f"{where}: input contains NaN or inf ({_count_bad(x)}); "
                                              "check the data and its normalization")])


def grid_pos(
    pos: torch.Tensor | None, x: torch.Tensor, periodic: bool | tuple[bool, ...], where: str,
    domain: tuple[tuple[float, float], ...] | None = None,
) -> torch.Tensor:
    """Coordinates ``(b, *grid, d)`` for the grid of ``x: (b, *grid, c)``.

    ``pos=None`` gives the uniform grid of [`grid_coordinates`][petrov.grids.layout.grid_coordinates]
    (``periodic``, one bool or one per axis, chooses ``i/n`` or ``i/(n-1)``, on the box ``domain``, None:
    the unit box; built once per grid, dtype and device, and shared);
    a given ``pos`` must be ``(b, *grid, d)`` or ``(1, *grid, d)`` with ``d`` the number of grid axes,
    on ``x``'s device, and finite.
    """
    grid = tuple(x.shape[1:-1])
    d = len(grid)
    if pos is None:
        coords = cached_grid_coordinates(grid, periodic, x.dtype, x.device, domain=domain)
        return coords.unsqueeze(0).expand(x.shape[0], *coords.shape)
    expected = f"({x.shape[0]}, {', '.join(map(str, grid))}, {d})"
    if not isinstance(pos, torch.Tensor) or pos.dim() != d + 2:
        shape = tuple(pos.shape) if isinstance(pos, torch.Tensor) else type(pos).__name__
        raise ValueError(f"{where}: expected pos of shape {expected}, got {shape}")
    if tuple(pos.shape[1:-1]) != grid or pos.shape[-1] != d or pos.shape[0] not in (1, x.shape[0]):
        raise ValueError(
            f"{where}: expected pos of shape {expected} (coordinates of the input grid), "
            f"got {tuple(pos.shape)}"
        )
    if pos.device != x.device:
        raise ValueError(f"{where}: pos is on {pos.device} but x is on {x.device}; move pos (pos.to(x.device))")
    if checks_values(pos):
        raise_first([(non_finite(pos), lambda: f"{where}: pos contains NaN or inf")])
    return pos.to(x.dtype).expand(x.shape[0], *pos.shape[1:])


def _shape(t: object) -> object:
    return tuple(t.shape) if isinstance(t, torch.Tensor) else type(t).__name__


def _outside_message(where: str, pos: torch.Tensor, outside: torch.Tensor, real: torch.Tensor) -> str:
    return (f"{where}: {int(outside.sum())} point(s) of positive weight lie outside [0, 1]² (coordinates from "
            f"{float(pos[real].min()):.4g} to {float(pos[real].max()):.4g}); map the domain into the unit square")


def _point_value_failures(x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor, mask: torch.Tensor | None,
                         where: str) -> list[tuple[torch.Tensor, Callable[[], str]]]:
    """The value checks of ``check_point_input``, as ``raise_first`` takes them."""
    real = weights > 0
    tol = 1e-6
    outside = ((pos < -tol) | (pos > 1 + tol)).any(dim=-1) & real
    sums = weights.sum(dim=1)
    failures = [
        (non_finite(pos), lambda: f"{where}: pos contains NaN or inf (padding points too must hold finite "
                                  "coordinates, e.g. 0)"),
        (non_finite(weights), lambda: f"{where}: weights contain NaN or inf"),
        ((weights < 0).any(), lambda: f"{where}: weights must be >= 0 (quadrature weights, 0 on padding)"),
        ((sums <= 0).any(), lambda: f"{where}: the weights of sample(s) {(sums <= 0).nonzero().flatten().tolist()} "
                                    "sum to 0; every sample needs a point of positive weight"),
    ]
    if mask is not None:
        failures.append((((weights != 0) & ~mask).any(),
                         lambda: f"{where}: weights must be 0 on padding (where mask is False); got nonzero "
                                 "weights there"))
    failures += [
        (outside.any(), lambda: _outside_message(where, pos, outside, real)),
        (non_finite(x), lambda: f"{where}: x contains NaN or inf ({_count_bad(x)}); check the data and its "
                                "normalization (padding points must hold finite values, e.g. 0)"),
    ]
    return failures


def check_point_input(x: torch.Tensor, pos: torch.Tensor, weights: torch.Tensor,
                      mask: torch.Tensor | None = None, boundary: torch.Tensor | None = None, *,
                      channels: int, where: str, weight: torch.Tensor | None = None) -> None:
    """Check a padded batch of point sets, ``ValueError`` naming what is wrong:

    - ``x (b, n, channels)`` floating, non-empty, in the dtype and on the device of ``weight`` (a
      parameter of the model, see [`check_grid_input`][]);
    - ``pos (b, n, 2)`` floating and finite everywhere (padding included), inside ``[0, 1]²`` on the
      points of positive weight;
    - ``weights (b, n)`` finite, >= 0, with a positive sum in every sample;
    - ``mask (b, n)`` bool (True on real points) or None (all real); weights 0 wherever mask is False;
    - ``boundary (b, n)`` bool or None;
    - every tensor on ``x``'s device;
    - ``x`` finite.

    The checks of values (everything but shapes, dtypes and devices) run where ``checks_values``
    says, all in one host read.
    """
    if not isinstance(x, torch.Tensor) or x.dim() != 3:
        raise ValueError(f"{where}: expected x of shape (batch, n_points, {channels}), got {_shape(x)}")
    b, n, c = x.shape
    if c != channels:
        raise ValueError(f"{where}: expected {channels} input channel(s) in the last dim of x "
                         f"(batch, n_points, channels), got shape {tuple(x.shape)}")
    if not torch.is_floating_point(x):
        raise ValueError(f"{where}: x must be a floating-point tensor, got {x.dtype}")
    if b == 0 or n == 0:
        raise ValueError(f"{where}: got an empty input of shape {tuple(x.shape)}; give at least one sample "
                         "and one point")
    check_matches_weights(x, "x", weight, where)
    if not isinstance(pos, torch.Tensor) or tuple(pos.shape) != (b, n, 2) or not torch.is_floating_point(pos):
        raise ValueError(f"{where}: expected pos of shape ({b}, {n}, 2) (floating node coordinates in "
                         f"[0, 1]², one row per point of x), got {_shape(pos)}")
    if not isinstance(weights, torch.Tensor) or tuple(weights.shape) != (b, n) \
            or not torch.is_floating_point(weights):
        raise ValueError(f"{where}: expected weights of shape ({b}, {n}) (floating quadrature weights, "
                         f"0 on padding), got {_shape(weights)}")
    for name, t in (("mask", mask), ("boundary", boundary)):
        if t is not None and (not isinstance(t, torch.Tensor) or tuple(t.shape) != (b, n)
                              or t.dtype != torch.bool):
            got = f"{_shape(t)} {t.dtype}" if isinstance(t, torch.Tensor) else _shape(t)
            raise ValueError(f"{where}: expected {name} of shape ({b}, {n}) and dtype bool, got {got}")
    for name, t in (("pos", pos), ("weights", weights), ("mask", mask), ("boundary", boundary)):
        if t is not None and t.device != x.device:
            raise ValueError(f"{where}: {name} is on {t.device} but x is on {x.device}; give every input on "
                             f"one device ({name}.to(x.device))")
    if checks_values(x):  # they read every value (module docstring)
        raise_first(_point_value_failures(x, pos, weights, mask, where))
