"""Viscous Burgers' equation u_t + (u^2/2)_x = nu u_xx on the periodic [0, 1): batched ETDRK4 pseudo-spectral.

Scheme (Cox & Matthews 2002, coefficients by the contour integrals of Kassam & Trefethen 2005), for the
Fourier coefficients v of u on an internal grid of m points:

    v_t = L v + N(v),   L_k = -nu (2 pi k)^2,   N(v)_k = -(i 2 pi k / 2) FFT(u^2)_k   (2/3 rule: k < m/3)

Everything is float64 / complex128 and batched over samples (torch.fft, on the input's device).

Internal grid. The solution stays band-limited: modes above K decay like exp(-nu (2 pi K)^2 t), and the
steepest front has width ~nu / max|u0| (maximum principle), so the band needed grows like max|u0|/nu.
The internal grid m = n 2^p or n / 2^p is the smallest whose dealiased band K = ceil(m/3) - 1 satisfies
K >= max(MIN_BAND, BAND_CONSTANT max|u0| / nu). A large input grid (8192) is spectrally truncated to m,
solved, and zero-padded back; a small input grid is refined (m = n 2^p), solved, and sampled back at the
input points. Measured with FNO GRF inputs at 8192 (max|u0| ~ 0.3..2.2), relative L2 error of u(1) against a
2048-point solve: m = 256 gives 3e-11 (nu=0.1), 1e-10 (0.03), 9e-10 (0.01); m = 512 gives 4e-13, 7e-13,
5e-12. The defaults pick m = 512 at nu = 0.1 and m = 1024..2048 at nu = 0.01. So discarding u0's modes
above m/3 changes u(1) by ~1e-11 or less: viscosity removes them within ~1e-5 time units.

Time step. A main step dt = DT_MAX / 2^j, the largest with dt <= DT_CONSTANT sqrt(nu / max|u0|^3) (an
empirical fit of the measured errors) and dt <= CFL_CONSTANT nu / max|u0|^2 (stability, binding below nu ~
1e-3: the nonlinear term is explicit, and its fastest growing modes are those where advection, rate
~max|u0| 2 pi k, still beats diffusion, nu (2 pi k)^2, i.e. k up to ~max|u0| / nu; measured on a GRF sample
with max|u0| = 1.28 at nu = 3e-4: blown up at dt max|u0|^2 / nu = 6.8, stable at 3.4 and below), preceded by a graded start (START_STEPS steps each of dt/32, ...,
dt/2): the GRF's coefficients decay only like k^-2, and this rough data costs ETDRK4 its order during the
first, stiff transient (equal steps of 0.01 gave 2e-6..6e-6; with the graded start 3e-8). Measured relative
L2 errors with the automatic choice: <= 2e-7 at nu = 0.1, 0.03, 0.01 (67..217 steps). Each sample gets its
own (grid, step), and samples sharing them are batched together, so a sample's result does not depend on
which other samples are in the batch (data generation can resume chunk by chunk bit-identically).

Denormals: handled explicitly, without touching global floating-point state. The only decaying-only
quantities are the propagators exp(L dt), exp(L dt/2); entries below 1e-200 are set to 0 (a change of at
most 1e-200 relative), and the modes above the dealiasing band are removed from the start, so no
coefficient can underflow gradually through repeated multiplication into the slow subnormal range.
"""
from __future__ import annotations

import math

import numpy as np
import torch

from ..common.host import to_numpy

BAND_CONSTANT = 3.0  # K >= BAND_CONSTANT max|u0| / nu (calibrated, see module doc)
MIN_BAND = 100
DT_CONSTANT = 0.15  # dt <= DT_CONSTANT sqrt(nu / max|u0|^3) (calibrated, see module doc)
DT_MAX = 0.02
CFL_CONSTANT = 2.0  # dt <= CFL_CONSTANT nu / max|u0|^2 (stability, see module doc)
START_LEVELS = 5  # graded start: START_STEPS steps at each of dt/2^5, ..., dt/2
START_STEPS = 4
CONTOUR_POINTS = 32
_FLUSH = 1e-200
# memory of a solve per internal grid point (measured: the contour means of the coefficients ~1.2 kB,
# the stepping ~25 B per batched sample); a lower bound, so that no solve that fits is refused
BYTES_PER_POINT = 1200
BYTES_PER_POINT_SAMPLE = 24
FINITE_CHECK_STEPS = 64  # a blown-up time stepping is stopped within this many steps
UNSTABLE_HINT = ("the solver's time stepping blew up at this nu and amplitude (not expected: the step is chosen "
                 "for stability); use a larger --nu or a smaller --sigma, and please report it "
                 "(--resolution does not change the solver's grid or step)")


def _dealiased_band(m: int) -> int:
    """Number of kept modes k = 0..K-1 with k < m/3 (the 2/3 rule)."""
    return (m + 2) // 3


def choose_internal_grid(n: int, nu: float, umax: float) -> int:
    """Internal grid size: n / 2^p (coarsen) or n 2^p (refine), the smallest resolving the band."""
    need = max(MIN_BAND, math.ceil(BAND_CONSTANT * umax / nu))
    m = n
    while _dealiased_band(m) - 1 < need:
        m *= 2
    while m % 2 == 0 and _dealiased_band(m // 2) - 1 >= need:
        m //= 2
    return m


def solve_bytes(m: int, batch: int = 1) -> int:
    """Memory (a lower bound) of a solve of ``batch`` samples on the internal grid ``m``."""
    return m * (BYTES_PER_POINT + BYTES_PER_POINT_SAMPLE * batch)


def largest_fitting_grid(n: int, memory: int, batch: int = 1) -> int:
    """The largest internal grid n 2^p or n / 2^p (>= 4) whose solve fits in ``memory`` bytes (0: none)."""
    m = n
    while m % 2 == 0 and m > 4 and solve_bytes(m, batch) > memory:
        m //= 2
    if solve_bytes(m, batch) > memory:
        return 0
    while solve_bytes(2 * m, batch) <= memory:
        m *= 2
    return m


def _round_up(x: float) -> float:
    """``x`` rounded up to two significant digits (a bound that still holds once printed)."""
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / unit * (1 - 1e-12)) * unit


def _size(n_bytes: int) -> str:
    from ..common.disk_space import format_size

    return format_size(n_bytes) if n_bytes < 1e15 else f"{n_bytes:.2g} bytes"


def check_solver_memory(n: int, nu: float, umax: float, memory: int | None, batch: int = 1,
                        amplitude_from: str = "") -> None:
    """ValueError unless the solve of ``batch`` samples of amplitude ``umax`` (max|u0|) on an n-point grid
    at viscosity ``nu`` fits in ``memory`` bytes (None: unknown, no check); says the smallest nu that fits.
    ``amplitude_from``: what set the amplitude (the GRF's parameters), for the message."""
    m = choose_internal_grid(n, nu, umax)
    need = solve_bytes(m, batch)
    if memory is None or need <= memory:
        return
    fit = largest_fitting_grid(n, memory, batch)
    usable = fit and _dealiased_band(fit) - 1 >= MIN_BAND
    smallest = (f"--nu >= {_round_up(BAND_CONSTANT * umax / (_dealiased_band(fit) - 1)):.2g}" if usable
                else "a larger --nu")
    points = f"{m:,}" if m < 1e12 else f"{m:.2g}"
    raise ValueError(f"burgers: nu={nu:g} with initial amplitude max|u0|={umax:.3g} ({amplitude_from}resolution {n}) "
                     f"needs a solver grid of {points} points, about {_size(need)} of memory, {_size(memory)} "
                     f"available; use {smallest} for this amplitude, or a smaller --sigma")


# the largest viscosity: beyond it the linear term nu (2 pi k)^2 overflows float64 on the solver's grid (NaN
# from nu = 1e300); long before it u(t) is the mean of u0: on the periodic domain the advection conserves the
# energy and diffusion removes it from every other mode at least like exp(-4 pi^2 nu t) (Poincare)
LARGEST_NU = 1e100

# a solve of more steps is refused: 10^6 steps took 193 s for two samples on the smallest grid (AMD EPYC core)
MAX_TIME_STEPS = 10**7


def check_time_steps(t: float, nu: float, umax: float, amplitude_from: str = "") -> None:
    """ValueError unless a solve to time ``t`` at viscosity ``nu`` and amplitude ``umax`` (max|u0|) takes at
    most ``MAX_TIME_STEPS`` steps of ``choose_time_step`` (a ``t`` of 1e10 would run for years)."""
    steps = t / choose_time_step(nu, umax)
    if steps > MAX_TIME_STEPS:
        source = f" ({amplitude_from.rstrip(', ')})" if amplitude_from else ""
        raise ValueError(f"burgers: t={t:g} at nu={nu:g} and initial amplitude max|u0|={umax:.3g}{source} "
                         f"takes about {steps:.2g} time steps of the solver, more than "
                         f"{MAX_TIME_STEPS:.0e} (hours to years); use a smaller --t (a larger --nu or a smaller "
                         f"--sigma lengthens the step)")


def choose_time_step(nu: float, umax: float) -> float:
    """Main step DT_MAX / 2^j, the largest not above DT_CONSTANT sqrt(nu / max|u0|^3) (an empirical accuracy fit)
    nor CFL_CONSTANT nu / max|u0|^2 (stability of the explicit nonlinear term, binding below nu ~ 1e-3).

    Steps are quantised to powers of two so that samples with similar amplitudes share a step (and a batch).
    """
    umax = max(umax, 1e-12)
    target = min(DT_CONSTANT * math.sqrt(nu / umax**3), CFL_CONSTANT * nu / umax**2)
    return DT_MAX / 2 ** max(0, math.ceil(math.log2(DT_MAX / target) - 1e-12))


def time_schedule(t: float, dt: float, start_levels: int = START_LEVELS) -> list[tuple[float, int]]:
    """[(step, count), ...] covering [0, t]: a graded start, then equal steps no longer than dt.

    The start takes START_STEPS steps of dt/2^L, then of dt/2^(L-1), ..., dt/2: rough initial data (the GRF's
    coefficients decay only like k^-2) otherwise reduces ETDRK4's accuracy during the first, stiff transient.
    """
    if t == 0:
        return []
    schedule = []
    used = 0.0
    for level in range(start_levels, 0, -1):
        step = dt / 2**level
        if used + START_STEPS * step > t / 2:
            continue
        schedule.append((step, START_STEPS))
        used += START_STEPS * step
    rest = t - used
    count = math.ceil(rest / dt - 1e-9)
    schedule.append((rest / count, count))
    return schedule


def etdrk4_coefficients(lin: torch.Tensor, dt: float, points: int = CONTOUR_POINTS):
    """(E, E2, Q, f1, f2, f3) for the diagonal real linear part ``lin`` (Kassam-Trefethen contour means).

    The phi-functions are averaged over points on the upper half of a unit circle around each dt*L and the
    real part is taken (L real), which avoids the cancellation of the direct formulas for small |dt L|.
    """
    hl = (dt * lin).to(torch.complex128)
    r = torch.exp(1j * math.pi * (torch.arange(1, points + 1, dtype=torch.float64, device=lin.device) - 0.5) / points)
    z = hl[:, None] + r[None, :]
    ez = torch.exp(z)
    z3 = z**3
    q = dt * ((torch.exp(z / 2) - 1) / z).mean(dim=1).real
    f1 = dt * ((-4 - z + ez * (4 - 3 * z + z**2)) / z3).mean(dim=1).real
    f2 = dt * ((2 + z + ez * (z - 2)) / z3).mean(dim=1).real
    f3 = dt * ((-4 - 3 * z - z**2 + ez * (4 - z)) / z3).mean(dim=1).real
    e = torch.exp(dt * lin)
    e2 = torch.exp(dt * lin / 2)
    e = torch.where(e < _FLUSH, torch.zeros_like(e), e)
    e2 = torch.where(e2 < _FLUSH, torch.zeros_like(e2), e2)
    return e, e2, q, f1, f2, f3


def _to_internal(u0: torch.Tensor, m: int) -> torch.Tensor:
    """Band-limited Fourier coefficients (b, K) on the internal grid m of the trigonometric interpolant of u0."""
    n = u0.shape[-1]
    band = _dealiased_band(m)
    spec = torch.fft.rfft(u0, dim=-1)
    keep = min(band, n // 2 + 1)
    v = torch.zeros(u0.shape[0], band, dtype=torch.complex128, device=u0.device)
    v[:, :keep] = spec[:, :keep] * (m / n)
    if n % 2 == 0 and keep == n // 2 + 1:
        # the input's Nyquist term is shared between modes +-n/2 once the grid is refined
        v[:, n // 2] = v[:, n // 2] / 2
    return v


def _from_internal(v: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """Samples on the n-point output grid of the band-limited function with coefficients v (internal grid m)."""
    if m <= n:  # zero-pad: the band is below both Nyquist frequencies
        return torch.fft.irfft(v * (n / m), n=n, dim=-1)
    return torch.fft.irfft(v, n=m, dim=-1)[:, :: m // n]


def _step_all(v: torch.Tensor, steps: int, m: int, coeffs, g: torch.Tensor) -> torch.Tensor:
    e, e2, q, f1, f2, f3 = coeffs
    band = v.shape[-1]
    if steps == 0:
        return v

    def nonlinear(w):
        u = torch.fft.irfft(w, n=m, dim=-1)
        return g * torch.fft.rfft(u * u, dim=-1)[:, :band]

    for i in range(steps):
        if i % FINITE_CHECK_STEPS == 0 and not torch.isfinite(v).all():
            return torch.full_like(v, math.nan)  # blown up: the result is non-finite anyway
        nv = nonlinear(v)
        a = e2 * v + q * nv
        na = nonlinear(a)
        b = e2 * v + q * na
        nb = nonlinear(b)
        c = e2 * a + q * (2 * nb - nv)
        nc = nonlinear(c)
        v = e * v + f1 * nv + 2 * f2 * (na + nb) + f3 * nc
    return v


def snapshot_schedule(times, dt: float, start_levels: int = START_LEVELS) -> list[list[tuple[float, int]]]:
    """Per snapshot time t_k (increasing, >= 0), the steps [(step, count), ...] from t_{k-1} (0 for k = 0) to t_k.

    The steps are those of ``time_schedule(t_last, dt, start_levels)``, the schedule of a single solve to the
    last time (graded start included), with every step that straddles snapshot times cut at them.
    """
    intervals: list[list[tuple[float, int]]] = [[] for _ in times]
    tol = 1e-12 * times[-1]
    k, now = 0, 0.0

    def reached() -> int:  # index of the first snapshot time not yet reached
        j = k
        while j < len(times) and times[j] - now <= tol:
            j += 1
        return j

    k = reached()
    for step, count in time_schedule(times[-1], dt, start_levels):
        while count and k < len(times):
            whole = min(count, math.floor((times[k] - now) / step + 1e-9))
            if whole > 0:
                intervals[k].append((step, whole))
                now, count = now + whole * step, count - whole
            else:  # the next step straddles t_k (and maybe later snapshot times): cut it at each
                end = now + step
                while times[k] < end - tol:
                    intervals[k].append((times[k] - now, 1))
                    now, k = times[k], k + 1
                intervals[k].append((end - now, 1))
                now, count = end, count - 1
            k = reached()
    return intervals


def _solve_group(x: torch.Tensor, nu: float, times, m: int, dt: float, start_levels: int, batch_size: int):
    """Solve all rows of x (b, n) float64 on internal grid m with main step dt; returns the snapshots at
    ``times`` (b, len(times), n) float64, taken from one time stepping."""
    n = x.shape[-1]
    band = _dealiased_band(m)
    wave = 2 * math.pi * torch.arange(band, dtype=torch.float64, device=x.device)
    cache: dict[float, tuple] = {}

    def coefficients(step: float) -> tuple:  # one set per distinct step
        if step not in cache:
            cache[step] = etdrk4_coefficients(-nu * wave**2, step)
        return cache[step]

    intervals = [[(coefficients(step), count) for step, count in interval]
                 for interval in snapshot_schedule(times, dt, start_levels)]
    g = -0.5j * wave
    out = torch.empty(x.shape[0], len(times), n, dtype=x.dtype, device=x.device)
    for start in range(0, x.shape[0], batch_size):
        v = _to_internal(x[start : start + batch_size], m)
        for k, stages in enumerate(intervals):
            for coeffs, count in stages:
                v = _step_all(v, count, m, coeffs, g)
            out[start : start + batch_size, k] = _from_internal(v, m, n)
    return out


def _check_input(u0, nu: float, t: float) -> torch.Tensor:
    x = u0 if isinstance(u0, torch.Tensor) else torch.as_tensor(np.asarray(u0))
    if x.dim() != 2:
        raise ValueError(f"u0 must have shape (batch, n), got {tuple(x.shape)}")
    if x.is_complex() or x.dtype == torch.bool:
        raise ValueError(f"u0 must be real, got dtype {x.dtype}")
    if not (nu > 0 and math.isfinite(nu)):
        raise ValueError(f"viscosity nu must be positive and finite, got {nu}")
    if not (t >= 0 and math.isfinite(t)):
        raise ValueError(f"final time t must be >= 0 and finite, got {t}")
    if x.shape[1] < 4:
        raise ValueError(f"u0 needs at least 4 grid points, got n={x.shape[1]}")
    x64 = x.detach().to(torch.float64)
    if not torch.isfinite(x64).all():
        raise ValueError("u0 contains NaN or inf values")
    return x64


def solve_burgers(
    u0,
    nu: float = 0.1,
    t: float = 1.0,
    *,
    n_internal: int | None = None,
    dt: float | None = None,
    start_levels: int = START_LEVELS,
    batch_size: int = 128,
):
    """Solve u_t + (u^2/2)_x = nu u_xx on the periodic [0,1) from u(., 0) = u0 up to time t.

    u0: (b, n) numpy array or torch tensor, samples on x_j = j/n. Returns u(., t) of the same type, shape,
    dtype and device (computed in float64). ``n_internal`` (grid of the spectral solve: n 2^p or n / 2^p) and
    ``dt`` (main time step, then rounded down to fit t) are chosen per sample from nu and max|u0| when None;
    samples sharing the choice are solved together in chunks of ``batch_size``, so a sample's result does
    not depend on which other samples are in the batch. ``start_levels``: halvings of the graded start
    (0 = equal steps).
    """
    _check_input(u0, nu, t)
    return solve_burgers_trajectory(u0, nu, [t], n_internal=n_internal, dt=dt, start_levels=start_levels,
                                    batch_size=batch_size)[:, 0]


def solve_burgers_trajectory(
    u0,
    nu: float = 0.1,
    times=(1.0,),
    *,
    n_internal: int | None = None,
    dt: float | None = None,
    start_levels: int = START_LEVELS,
    batch_size: int = 128,
):
    """Snapshots u(., t_k) of the solution from u0 at increasing ``times`` t_0 < t_1 < ... (t_0 >= 0).

    Returns (b, len(times), n), same type, dtype and device as u0 (see [`solve_burgers`][] for the other
    arguments). One time stepping serves all snapshots: it is split at each t_k (the graded start in the
    first interval, then equal steps no longer than the main step in each interval), so u(., t_k) differs
    from ``solve_burgers(u0, nu, t_k)`` only by the solver's own error (<= ~2e-7 relative, module doc). A
    snapshot at t = 0 is u0 itself.
    """
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"times must be a non-empty 1-D sequence, got shape {times.shape}")
    x64 = _check_input(u0, nu, float(times[-1]) if np.isfinite(times).all() else float("nan"))
    if not (times[0] >= 0 and np.all(np.diff(times) > 0)):
        raise ValueError(f"times must be >= 0 and strictly increasing, got {times.tolist()}")
    b, n = x64.shape
    if dt is not None and not (dt > 0):
        raise ValueError(f"dt must be positive, got {dt}")
    if n_internal is not None and not _is_power_of_two_multiple(int(n_internal), n):
        raise ValueError(f"n_internal must be n * 2^p or n / 2^p (>= 4) for n={n}, got {n_internal}")
    if batch_size < 1 or start_levels < 0:
        raise ValueError(f"batch_size must be >= 1 and start_levels >= 0, got {batch_size}, {start_levels}")

    # t = 0 gives the initial condition itself, not its band-limited projection
    out = x64[:, None, :].repeat(1, len(times), 1)
    if times[-1] > 0 and b:
        umax = x64.abs().amax(dim=1).tolist()
        settings = [
            (
                choose_internal_grid(n, nu, um) if n_internal is None else int(n_internal),
                choose_time_step(nu, um) if dt is None else float(dt),
            )
            for um in umax
        ]
        memory = _free_memory(x64.device)
        for m, step in sorted(set(settings)):
            rows = torch.tensor([i for i, s in enumerate(settings) if s == (m, step)], device=x64.device)
            if n_internal is None:
                check_solver_memory(n, nu, max(umax[i] for i in rows.tolist()), memory, min(len(rows), batch_size))
            out[rows] = _solve_group(x64[rows], nu, times.tolist(), m, step, start_levels, batch_size)
            if dt is not None and not torch.isfinite(out[rows]).all():  # the automatic step is stable
                um = max(umax[i] for i in rows.tolist())
                raise ValueError(f"the time stepping blew up (non-finite values) with dt={dt:g} at nu={nu:g} and "
                                 f"max|u0|={um:.3g}: a stable step is at most ~{CFL_CONSTANT:g} nu / max|u0|^2 = "
                                 f"{CFL_CONSTANT * nu / um**2:.3g}; give a smaller dt, or dt=None to have it chosen")
        out[:, torch.from_numpy(times == 0).to(out.device)] = x64[:, None, :]
    if isinstance(u0, torch.Tensor):
        return out.to(dtype=u0.dtype if u0.is_floating_point() else torch.float64)
    dtype = np.asarray(u0).dtype
    return to_numpy(out, dtype if dtype.kind == "f" else np.float64)


def _free_memory(device: torch.device) -> int | None:
    """Bytes free for a solve on ``device`` (None where unknown)."""
    if device.type == "cuda":
        return torch.cuda.mem_get_info(device)[0]
    from .resources import available_memory

    return available_memory()


def _is_power_of_two_multiple(m: int, n: int) -> bool:
    big, small = max(m, n), min(m, n)
    ratio = big // small
    return m >= 4 and big % small == 0 and ratio & (ratio - 1) == 0
