"""2-D incompressible Navier-Stokes in vorticity form on the torus [0, 1)^2: batched pseudo-spectral, IF-RK4.

Equation (x = axis 1 of a field, y = axis 2, as FNO's ns_2d.py):

    w_t + u.grad(w) = nu Laplacian(w) + f,   u = (psi_y, -psi_x),   -Laplacian(psi) = w.

Discretisation: the Fourier coefficients w_k (rfft2, series normalisation) of w on an m x m solve grid,

    d/dt w_k = L_k w_k + N(w)_k,   L_k = -nu 4 pi^2 |k|^2,
    N(w) = -P(u w_x + v w_y) + f_k,   psi_k = w_k / (4 pi^2 |k|^2)  (psi_0 = 0),

the product formed on the grid and P the 2/3 rule: only modes with |k1|, |k2| < m/3 are kept (the state is
kept in that band, so the quadratic product has no aliasing error in it). The mean of w is 0 and stays 0.

Time stepping: integrating-factor RK4 (Lawson): with E = exp(L dt), E2 = exp(L dt/2),

    a = N(w),  b = N(E2 (w + dt/2 a)),  c = N(E2 w + dt/2 b),  d = N(E w + dt E2 c),
    w <- E w + dt/6 (E a + 2 E2 (b + c) + d),

exact for the viscous term (any dt is stable for it), fourth order for the rest; the forcing sits in N.

Step rule (per sample, each step): from the velocity of the step's first stage,
``dt_cfl = cfl / (2 pi K (max|u| + max|v|))`` with K the largest kept wavenumber (a bound on the advection's
rates on the grid; RK4 is stable for imaginary rates up to 2.83 / dt; cfl = 2 by default: at 128^2 as
accurate as cfl = 0.25 to the rounding of float32), capped at ``DT_MAX``; the step
taken is ``r / ceil(r / dt_cfl)`` with r the time left to the next snapshot, so the snapshot times are hit
exactly. Each sample keeps its own steps (finished samples leave the batch), so a sample's result does not
depend on which other samples share its batch: generation in chunks, resumed or sharded, is bit-identical
(on one torch thread, ``one_thread``, as generation runs it: with more, the FFT library splits a single
transform between threads and not a batch of them, and the last bits would depend on the batch).

Grids: the input lives on an n x n grid (x_i = i/n); the solve grid m is a multiple of n, or any m whose
band |k| < m/3 lies below n's Nyquist frequency (m up to about 1.5 n: 96, 128, 192 for n = 128). The input's
trigonometric interpolant enters the solve grid's band (coefficients copied; modes above the band dropped);
snapshots go back to the n grid exactly: sampled at its points (m a multiple of n: every (m/n)-th solve
point) or evaluated there by zero-padding the band. The recipe solves on its stored grid (m = n = 128) and
draws w0 in that grid's band, so the stored w0 is exactly the solved initial condition. Measured against
solves refined 2x in space and time (256^2; ``benchmarks/navier_stokes_accuracy.py``, 2 samples): nu = 1e-3
to T = 50: 2.3e-5 relative L2 (float32 arithmetic; 1e-8 in float64); nu = 1e-5: 1.6e-3 at t = 8, 2.6e-2 at
t = 20, apart (over 0.1) from t = 31 on (chaos: the two drift apart exponentially); at t = 20 the energy and
enstrophy spectra agree within 0.1% for |k| <= 21 and 6% for 22..42, at t = 40 within 1% for |k| <= 4 and
14% for 22..42. A 64^2 solve is 9.7e-2 apart at t = 20.

Cost: per step and sample 4 evaluations of N, each a batched inverse transform of u, v and a forward one of
u v, v^2 - u^2 (the axis-2 passes cut to the band), ~ 40 passes over (b, m, K + 1) arrays in all: 1.1 ms
in float32, 2.3 ms in float64 per sample at 128^2 on one core (batches of 8, AMD EPYC); steps ~ T 2 pi K
max(|u| + |v|) / cfl: ~925 for nu = 1e-5, T = 20 on 128^2 at cfl 2 (max|u| + |v| grows from ~0.1 to ~0.5).
Precision: float64 (complex128) by default here, float32 (complex64) in the recipe (``dtype``): 2e-5 relative
L2 from the float64 solve at nu = 1e-3, t = 50 and at nu = 1e-5, t = 20 (3e-3 at t = 40).
"""
from __future__ import annotations

import contextlib
import math

from dataclasses import dataclass
from typing import Any, Literal

import numpy as np
import torch

from ..common.host import to_numpy

CFL = 2.0  # dt 2 pi K (max|u| + max|v|); RK4's limit is 2.83, and 2 was as accurate as 0.25 at 128^2
STABLE_CFL = 2.5  # RK4 is stable on imaginary rates up to 2.83 / dt; a margin for the variable velocity
DT_MAX = 0.05  # the largest step (a flow at rest)
FORCING = 0.1  # FNO: f = 0.1 (sin 2 pi (x + y) + cos 2 pi (x + y))
FINITE_CHECK_STEPS = 64  # a blown-up time stepping is stopped within this many steps
MIN_POINTS = 8  # per axis: the 2/3 band of a smaller grid holds too few modes to carry the flow
# the largest viscosity: nu 4 pi^2 |k|^2 overflows float64 near 1e300 on the solve grid; long before it, the
# solution is the forced steady state f / (8 pi^2 nu) plus w0 decayed like exp(-4 pi^2 nu t)
LARGEST_NU = 1e100
UNSTABLE_HINT = ("the solver's time stepping blew up (not expected: the step is chosen for stability from the "
                 "velocity); use a smaller --cfl, a finer --solve-grid or a larger --nu, and please report it")


def forcing_field(n: int, amplitude: float = FORCING) -> np.ndarray:
    """FNO's forcing ``amplitude (sin 2 pi (x + y) + cos 2 pi (x + y))`` on the n x n periodic grid (float64)."""
    x = np.arange(n) / n
    s = 2 * np.pi * (x[:, None] + x[None, :])
    return amplitude * (np.sin(s) + np.cos(s))


def band(m: int) -> int:
    """The 2/3 rule's kept wavenumbers on an m-point axis: |k| < m/3, i.e. |k| <= band(m)."""
    return (m - 1) // 3


class _Grid:
    """The spectral operators of one solve grid and viscosity. Coefficients are held as (b, m, K + 1): the
    rfft2 layout (k1 in FFT order, k2 >= 0) cut at the band's K = band(m) along k2 (the rows |k1| > K are
    zero): the elementwise work is 2/3 of the full layout's, and the transforms skip the zero columns."""

    def __init__(self, m: int, nu: float, device: torch.device, dtype: torch.dtype):
        self.m, self.nu = m, nu
        self.rdtype = dtype
        self.cdtype = torch.complex128 if dtype == torch.float64 else torch.complex64
        k1 = torch.fft.fftfreq(m, 1.0 / m, dtype=torch.float64, device=device)[:, None]
        k2 = torch.arange(band(m) + 1, dtype=torch.float64, device=device)[None, :]
        kk = 4 * math.pi**2 * (k1**2 + k2**2)
        self.keep = ((k1.abs() <= band(m)) & (k2 >= 0)).to(dtype)
        self.lin = (-nu * kk).to(dtype)  # L_k
        inv = torch.where(kk > 0, 1.0 / torch.where(kk > 0, kk, 1.0), 0.0)
        # u = psi_y, v = -psi_x from w: one batched inverse transform of the two
        self.velocity = torch.stack([2j * math.pi * k2 * inv, -2j * math.pi * k1 * inv]).to(self.cdtype) * self.keep
        # u.grad(w) = (d_xx - d_yy)(u v) + d_xy (v^2 - u^2) for a divergence-free u (Basdevant 1983): two
        # products and one batched forward transform of the two, four transforms per evaluation, not five;
        # N = f - these, so the factors are held negated
        self.uv_factor = (4 * math.pi**2 * (k1**2 - k2**2) * self.keep).to(dtype)
        self.squares_factor = (4 * math.pi**2 * k1 * k2 * self.keep).to(dtype)
        self.rate = 2 * math.pi * band(m)  # the largest kept angular wavenumber

    def nonlinear(self, w: torch.Tensor, f: torch.Tensor, with_speed: bool = False):
        """N(w) (b, m, K+1) and, if asked, max|u| + max|v| per sample (b,)."""
        m, columns = self.m, w.shape[-1]
        uv = torch.fft.irfft(torch.fft.ifft(w[:, None] * self.velocity, dim=-2, norm="forward"), n=m, norm="forward")
        u, v = uv[:, 0], uv[:, 1]
        products = torch.empty_like(uv)
        torch.mul(u, v, out=products[:, 0])
        torch.mul(v - u, v + u, out=products[:, 1])
        flux = torch.fft.fft(torch.fft.rfft(products, norm="forward")[..., :columns], dim=-2, norm="forward")
        out = torch.addcmul(f, flux[:, 0], self.uv_factor).addcmul_(flux[:, 1], self.squares_factor)
        if not with_speed:
            return out
        return out, uv.abs().amax(dim=(2, 3)).sum(dim=1)


def to_solve_grid(w: torch.Tensor, m: int, keep: torch.Tensor, cdtype: torch.dtype) -> torch.Tensor:
    """Coefficients (b, m, K+1) on the m grid (``_Grid``'s layout), in its 2/3 band, of the trigonometric
    interpolant of ``w (b, n, n)``; the modes at +-n/2 of an even n (which its grid cannot tell apart) are
    left out."""
    b, n = w.shape[0], w.shape[-1]
    spec = torch.fft.rfft2(w, norm="forward")  # (b, n, n//2 + 1)
    k = min(band(m), (n - 1) // 2)  # modes |k1|, |k2| <= k are on both grids
    out = torch.zeros(b, m, band(m) + 1, dtype=cdtype, device=w.device)
    out[:, : k + 1, : k + 1] = spec[:, : k + 1, : k + 1]
    if k:
        out[:, m - k :, : k + 1] = spec[:, n - k :, : k + 1]
    return out * keep


def from_solve_grid(w: torch.Tensor, m: int, n: int) -> torch.Tensor:
    """The n x n grid values (b, n, n) of the band-limited field with coefficients ``w`` (b, m, K+1) on the m
    grid (``usable_grid(m, n)``)."""
    if m % n == 0:
        return torch.fft.irfft2(w, s=(m, m), norm="forward")[:, :: m // n, :: m // n]
    k = band(m) + 1  # the band fits below n's Nyquist: zero-pad
    spec = torch.zeros(w.shape[0], n, n // 2 + 1, dtype=w.dtype, device=w.device)
    spec[:, :k, :k] = w[:, :k, :k]
    spec[:, n - k + 1 :, :k] = w[:, m - k + 1 :, :k]
    return torch.fft.irfft2(spec, s=(n, n), norm="forward")


def _advance(grid: _Grid, w: torch.Tensor, f: torch.Tensor, left: torch.Tensor, cfl: float, dt_max: float):
    """One IF-RK4 step of every row of ``w`` towards its time ``left`` away (b,), float64 on the host side;
    returns the new state and the time left after the step (exactly 0 once reached)."""
    a, speed = grid.nonlinear(w, f, with_speed=True)
    dt_cfl = torch.clamp(cfl / (grid.rate * speed.double()), max=dt_max)
    count = torch.ceil(left / dt_cfl)
    dt = left / count
    left = torch.where(count <= 1, torch.zeros_like(left), left - dt)
    h = dt.to(grid.rdtype)[:, None, None]
    e2 = torch.exp(grid.lin * (h / 2))
    e2w = e2 * w
    b = grid.nonlinear(torch.addcmul(e2w, e2 * (h / 2), a), f)
    c = grid.nonlinear(torch.addcmul(e2w, b, h / 2), f)
    d = grid.nonlinear(e2 * torch.addcmul(e2w, c, h), f)
    # E w + h/6 (E a + 2 E2 (b + c) + d) with E = E2^2, in fewer passes over the arrays
    new = e2 * torch.addcmul(e2 * torch.addcmul(w, a, h / 6), b.add_(c), h / 3)
    return new.addcmul_(d, h / 6), left


def _solve_batch(grid: _Grid, w: torch.Tensor, f: torch.Tensor, times: list[float], n: int, cfl: float,
                 dt_max: float) -> tuple[torch.Tensor, int]:
    """Snapshots (b, len(times), n, n) of the rows of ``w`` (coefficients on the solve grid) at ``times``
    (> 0, increasing), and the number of steps the batch took."""
    b = w.shape[0]
    out = torch.empty(b, len(times), n, n, dtype=grid.rdtype, device=w.device)
    steps, before = 0, 0.0
    for j, t in enumerate(times):
        left = torch.full((b,), t - before, dtype=torch.float64, device=w.device)
        before = t
        while True:
            active = torch.nonzero(left > 0)[:, 0]
            if active.numel() == 0:
                break
            if active.numel() == b:
                w, left = _advance(grid, w, f, left, cfl, dt_max)
            else:  # the others reached t: they leave the batch (their result must not depend on it)
                w[active], left[active] = _advance(grid, w[active], f, left[active], cfl, dt_max)
            steps += 1
            if steps % FINITE_CHECK_STEPS == 0 and not torch.isfinite(w).all():
                return torch.full_like(out, math.nan), steps
        out[:, j] = from_solve_grid(w, grid.m, n)
    return out, steps


def _check_input(w0, nu: float, times) -> tuple[torch.Tensor, np.ndarray]:
    w = w0 if isinstance(w0, torch.Tensor) else torch.as_tensor(np.asarray(w0))
    if w.dim() != 3 or w.shape[1] != w.shape[2]:
        raise ValueError(f"w0 must have shape (batch, n, n), got {tuple(w.shape)}")
    if w.is_complex() or w.dtype == torch.bool:
        raise ValueError(f"w0 must be real, got dtype {w.dtype}")
    if w.shape[1] < MIN_POINTS:
        raise ValueError(f"w0 needs at least {MIN_POINTS} x {MIN_POINTS} grid points, got n={w.shape[1]}")
    if not (math.isfinite(nu) and 0 < nu <= LARGEST_NU):
        raise ValueError(f"viscosity nu must be positive, finite and at most {LARGEST_NU:g}, got {nu}")
    times = np.asarray(times, dtype=np.float64)
    if times.ndim != 1 or times.size == 0:
        raise ValueError(f"times must be a non-empty 1-D sequence, got shape {times.shape}")
    if not (np.isfinite(times).all() and times[0] >= 0 and np.all(np.diff(times) > 0)):
        raise ValueError(f"times must be finite, >= 0 and strictly increasing, got {times.tolist()}")
    w64 = w.detach().to(torch.float64)
    if not torch.isfinite(w64).all():
        raise ValueError("w0 contains NaN or inf values")
    return w64, times


def solve_navier_stokes(
    w0,
    nu: float = 1e-5,
    times=(1.0,),
    *,
    forcing: float = FORCING,
    solve_grid: int | None = None,
    cfl: float = CFL,
    dt_max: float = DT_MAX,
    dtype: torch.dtype = torch.float64,
    batch_size: int = 8,
):
    """Snapshots w(., t_k) of the vorticity from ``w0`` at increasing ``times`` (t_0 >= 0; t = 0 gives w0).

    ``w0``: (b, n, n) numpy array or torch tensor, values at (i/n, j/n) (axis 1 is x); its mean is
    ignored (the flow's mean vorticity is 0). Returns (b, len(times), n, n), the same type and device
    (numpy: float64; torch: w0's floating dtype). ``forcing``: the amplitude A of
    ``f = A (sin 2 pi (x + y) + cos 2 pi (x + y))``; ``solve_grid``: m (default n; ``usable_grid``);
    ``cfl``, ``dt_max``: the step rule (module docstring); ``dtype``: float64 or float32 arithmetic.
    Samples are solved ``batch_size`` at a time; a sample's result does not depend on its batch.
    """
    w64, times = _check_input(w0, nu, times)
    b, n = w64.shape[0], w64.shape[-1]
    m = n if solve_grid is None else int(solve_grid)
    if not usable_grid(m, n):
        raise ValueError(grid_message(m, n))
    if dtype not in (torch.float32, torch.float64):
        raise ValueError(f"dtype must be torch.float32 or torch.float64, got {dtype}")
    if not (cfl > 0 and dt_max > 0 and math.isfinite(forcing)) or batch_size < 1:
        raise ValueError(f"cfl, dt_max and batch_size must be positive and forcing finite, got {cfl}, {dt_max}, "
                         f"{batch_size}, {forcing}")
    out = w64[:, None].repeat(1, len(times), 1, 1)
    later = times > 0
    if b and later.any():
        grid = _Grid(m, nu, w64.device, dtype)
        f = to_solve_grid(torch.as_tensor(forcing_field(m, forcing), device=w64.device)[None], m, grid.keep,
                          grid.cdtype)
        for lo in range(0, b, batch_size):
            w = to_solve_grid(w64[lo : lo + batch_size], m, grid.keep, grid.cdtype)
            snaps, _ = _solve_batch(grid, w, f, times[later].tolist(), n, cfl, dt_max)
            out[lo : lo + batch_size, torch.from_numpy(later).to(out.device)] = snaps.to(torch.float64)
    if isinstance(w0, torch.Tensor):
        return out.to(dtype=w0.dtype if w0.is_floating_point() else torch.float64)
    return to_numpy(out, np.float64)


def usable_grid(m: int, n: int) -> bool:
    """Whether the snapshots of a solve on m x m go back to the n x n grid exactly: m a multiple of n (sampled), or
    m's 2/3 band below n's Nyquist frequency (zero-padded); and m >= ``MIN_POINTS``."""
    return m >= MIN_POINTS and (m % n == 0 or band(m) <= (n - 1) // 2)


def grid_message(m: int, n: int) -> str:
    return (f"solve_grid must be a multiple of the stored grid {n} (its points are sampled) or at most about 1.5 x "
            f"{n} (its 2/3 band then lies below the stored grid's Nyquist frequency), and at least {MIN_POINTS}; "
            f"got {m}")


# --- generation: cost estimate, threads, worker processes ----------------------------------------

MAX_TIME_STEPS = 10**6  # per sample: refused beyond (hours per sample at 128^2, see check_time_steps)
# measured cost of one step of one sample per solve-grid point and log2(m) on one core (AMD EPYC, batches
# of 8, an idle machine): 1.1 ms (float32) and 2.3 ms (float64) at 128^2
SECONDS_PER_POINT_STEP = {"float32": 1.0e-8, "float64": 2.0e-8}


def speed_scale(n: int, alpha: float, tau: float, sigma: float) -> float:
    """A typical max|u| + max|v| of the initial velocity of the GRF w0 (four standard deviations of each
    component: ``Var u = sum_k s_k^2 / 2 (2 pi k2)^2 / (4 pi^2 |k|^2)^2``, ``s_k`` the field's std)."""
    from .grf import periodic_grf_2d_std

    k = np.fft.fftfreq(n, 1.0 / n)
    kk = 4 * np.pi**2 * (k[:, None] ** 2 + k[None, :] ** 2)
    kk[0, 0] = 1.0
    std = periodic_grf_2d_std(n, alpha=alpha, tau=tau, sigma=sigma)
    variance = np.sum(std**2 / 2 * (2 * np.pi * k[None, :]) ** 2 / kk**2)
    return 2 * 4 * math.sqrt(variance)


def estimate_steps(t: float, time_steps: int, nu: float, speed0: float, m: int, forcing: float = FORCING,
                   cfl: float = CFL, dt_max: float = DT_MAX) -> float:
    """About how many steps one sample's solve to ``t`` takes on the m grid, from the step rule with the
    speed ``speed0 + g min(s, 1 / (8 pi^2 nu))`` at time s: the forcing's mode gains at most
    ``g = |forcing| sqrt(2) / (2 pi)`` of max|u| + max|v| per time unit until viscosity balances it (an
    estimate: the nonlinear transfer is not in it); at least one step per snapshot interval."""
    g = abs(forcing) * math.sqrt(2) / (2 * math.pi)
    tau = 1 / (8 * math.pi**2 * nu)
    grown = t * t / 2 if t <= tau else tau * tau / 2 + tau * (t - tau)
    return max(t / dt_max, 2 * math.pi * band(m) * (speed0 * t + g * grown) / cfl) + time_steps


def check_time_steps(t: float, time_steps: int, nu: float, speed0: float, m: int, forcing: float = FORCING,
                     cfl: float = CFL, precision: str = "float64", samples: int = 1) -> None:
    """ValueError naming the estimated step count and time unless one sample's solve takes at most
    ``MAX_TIME_STEPS`` steps (``estimate_steps``)."""
    steps = estimate_steps(t, time_steps, nu, speed0, m, forcing, cfl)
    if steps <= MAX_TIME_STEPS:
        return
    hours = steps * SECONDS_PER_POINT_STEP[precision] * m * m * math.log2(m) / 3600
    raise ValueError(f"navier-stokes: t={t:g} with {time_steps} snapshots at nu={nu:g} takes about {steps:.2g} "
                     f"time steps per sample on the {m} x {m} solve grid (about {hours:.2g} hours per sample on one "
                     f"core, {hours * samples / 24:.2g} days for {samples}), more than {MAX_TIME_STEPS:.0e} per "
                     f"sample; use a smaller --t or fewer --time-steps (a larger --nu or a smaller --solve-grid "
                     f"shortens it too)")


@contextlib.contextmanager
def one_thread():
    """torch on one intra-op thread inside the block: with more, the FFT library splits a transform between
    threads for some batch sizes and not others, and a sample's last bits would depend on its batch."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(before)


def _solve_part(w0: np.ndarray, nu: float, times: np.ndarray, options: dict) -> np.ndarray:
    with one_thread():
        return solve_navier_stokes(w0, nu, times, **options)


def solve_samples(w0: np.ndarray, nu: float, times, pool=None, part_size: int = 8, **options) -> np.ndarray:
    """``solve_navier_stokes(w0, nu, times, **options)`` on one torch thread, in this process or, given a
    process ``pool`` (``petrov.common.worker_pool``), split into contiguous parts of about ``part_size``
    samples (batches of 8 to 16 ran fastest at 128^2), a whole number of them per worker, solved by its
    workers; the result does not depend on the split (bit for bit)."""
    times = np.asarray(times, dtype=np.float64)
    workers = getattr(pool, "_max_workers", 0) if pool else 0
    if not workers or len(w0) < 2:
        return _solve_part(w0, nu, times, options)
    parts = workers * max(1, math.ceil(len(w0) / (workers * part_size)))
    futures = [pool.submit(_solve_part, w0[rows], nu, times, options)
               for rows in np.array_split(np.arange(len(w0)), min(len(w0), parts)) if len(rows)]
    return np.concatenate([future.result() for future in futures])


# --- the recipe (``petrov generate navier-stokes``, registered in ``recipes``) ---------------------


@dataclass(frozen=True)
class NavierStokesParams:
    """2-D Navier-Stokes in vorticity form on the torus (FNO's recipe) and the solver's controls."""

    nu: float = 1e-5  # viscosity
    t: float = 20.0  # final time T
    time_steps: int = 20  # snapshots after w0, at t_k = k t / time_steps
    alpha: float = 2.5  # initial-vorticity GRF smoothness exponent
    tau: float = 7.0  # GRF inverse length scale
    sigma: float = 7.0**1.5  # GRF amplitude (FNO: tau^(alpha - 1))
    forcing: float = FORCING  # f = forcing (sin 2 pi (x + y) + cos 2 pi (x + y))
    solve_grid: int = 0  # solver grid per axis (n the stored grid: a multiple of n, or at most ~1.5 n); 0: n
    cfl: float = CFL  # the step: dt 2 pi K (max|u| + max|v|) <= cfl, K the largest kept wavenumber
    precision: Literal["float32", "float64"] = "float32"  # the solver's arithmetic (the samples are stored in float32)


def solve_grid_of(p: NavierStokesParams, resolution: int) -> int:
    """The solve grid of ``p`` for the stored grid ``resolution``."""
    return p.solve_grid or resolution


def snapshot_times(p: NavierStokesParams) -> np.ndarray:
    """``t_k = k t / T``, ``k = 0..T`` (``T = time_steps``; float64, the last one exactly t)."""
    return np.linspace(0.0, p.t, p.time_steps + 1)


def validate(p: NavierStokesParams, resolution: int) -> None:
    """ValueError (one line) for parameters or a stored grid the solver cannot use."""
    for name in ("nu", "t", "tau", "sigma", "cfl"):
        value = getattr(p, name)
        if not (math.isfinite(value) and value > 0):
            raise ValueError(f"{name} must be a finite positive number, got {value}")
    if p.nu > LARGEST_NU:
        raise ValueError(f"nu={p.nu:g} is beyond the solver's largest ({LARGEST_NU:g}); choose a smaller --nu: long "
                         f"before it w(t) is the forced steady state f / (8 pi^2 nu) plus w0 decayed like "
                         f"exp(-4 pi^2 nu t)")
    if not p.alpha > 1.0:
        raise ValueError(f"alpha must be > 1 for a finite-variance 2-D field, got {p.alpha}")
    if not math.isfinite(p.forcing):
        raise ValueError(f"forcing must be finite, got {p.forcing}")
    if p.cfl > STABLE_CFL:
        raise ValueError(f"cfl={p.cfl:g} is beyond the time stepping's stability (RK4 on advection, with a margin: "
                         f"{STABLE_CFL}); choose --cfl <= {CFL:g} for accuracy")
    for name, value in (("resolution", resolution), ("time_steps", p.time_steps), ("solve_grid", p.solve_grid)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise ValueError(f"{name} must be an integer, got {value!r}")
    if resolution < MIN_POINTS:
        raise ValueError(f"resolution must be at least {MIN_POINTS} (the 2/3 rule keeps |k| < n/3 of an n-point "
                         f"axis), got {resolution}")
    if p.time_steps < 1:
        raise ValueError(f"time_steps must be an integer >= 1, got {p.time_steps}")
    if p.solve_grid and not usable_grid(p.solve_grid, resolution):
        raise ValueError("--solve-grid 0 (the stored grid) or: " + grid_message(p.solve_grid, resolution))


def check_generation(p: NavierStokesParams, resolution: int, samples: int = 1) -> None:
    """The checks before any work beyond ``validate``: the random field, and the step count of ``samples``
    samples (``check_time_steps``)."""
    from .grf import check_periodic_grf_2d

    check_periodic_grf_2d(resolution, alpha=p.alpha, tau=p.tau, sigma=p.sigma)
    speed0 = speed_scale(min(resolution, 256), p.alpha, p.tau, p.sigma)
    check_time_steps(p.t, p.time_steps, p.nu, speed0, solve_grid_of(p, resolution), p.forcing, p.cfl, p.precision,
                     samples)


def produce(p: NavierStokesParams, resolution: int, seed: int, indices, workers: Any = 0):
    """``(w0 (b, n, n), y (b, n, n, T + 1))`` of samples ``indices``: w0 drawn per index (``grf.periodic_grf_2d``,
    its modes |k1|, |k2| <= band(m) of the solve grid m), solved on one torch thread each, in the worker
    processes of a pool if given."""
    from .grf import periodic_grf_2d

    m = solve_grid_of(p, resolution)
    # w0 in the solve grid's 2/3 band: the stored x is then exactly the initial condition the solver evolves
    w0 = periodic_grf_2d(resolution, seed, indices, alpha=p.alpha, tau=p.tau, sigma=p.sigma, modes=band(m))
    trajectory = solve_samples(w0, p.nu, snapshot_times(p), pool=workers or None, forcing=p.forcing, solve_grid=m,
                               cfl=p.cfl, dtype=getattr(torch, p.precision))
    return w0, np.moveaxis(trajectory, 1, -1)


def solver_settings(p: NavierStokesParams) -> dict:
    return {"solver": "petrov.datasets.navier_stokes.solve_navier_stokes",
            "method": "pseudo-spectral, 2/3 dealiased, integrating-factor RK4, CFL-adaptive step",
            "nu": p.nu, "forcing": p.forcing, "solve_grid": p.solve_grid or "stored grid", "cfl": p.cfl,
            "precision": p.precision, "times": snapshot_times(p).tolist()}
