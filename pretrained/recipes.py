"""What ships: each operator's training preset, its exact overrides and what its card says in words.

A [`Recipe`][] is one shipped operator: ``petrov train PRESET --out runs/pretrained/NAME --set ...``
with the epochs fixed (the presets' time budgets removed, so the weights do not depend on the machine's
speed), and the sentences of its card (what it maps, what it is not for). ``petrov.pretrained.build``
trains, evaluates and packs them; the figures on a card are measured then, never written here.
"""
from __future__ import annotations

from dataclasses import dataclass

# the presets plan their epochs to fill a time budget; the shipped weights train a fixed number instead
FIXED_EPOCHS = ("~run.time_budget_minutes", "run.fill_budget=false")


@dataclass(frozen=True)
class Recipe:
    """One shipped operator: ``name``, the training ``preset`` and its ``overrides`` (``--set`` items),
    the card's ``summary``, ``input``, ``output``, ``domain`` and ``not_for`` lines, and ``expected``: what
    the preset's own measurements lead one to expect (printed by the build before it trains)."""

    name: str
    preset: str
    overrides: tuple[str, ...]
    summary: str
    input: str
    output: str
    domain: str
    not_for: tuple[str, ...]
    expected: str

    def train_args(self, out: str) -> list[str]:
        """The ``petrov train`` arguments (after ``petrov``) that make this operator in ``out``."""
        sets = [word for item in self.overrides for word in ("--set", item)]
        return ["train", self.preset, "--out", out, *sets]


_DARCY_LAW = ("a = 12 where a Gaussian random field psi ~ N(0, (-Laplacian + 9 I)^-2) with zero normal derivative "
              "is >= 0, a = 3 elsewhere")
_DARCY_EQUATION = "-div(a grad u) = 1 on the unit square, u = 0 on its boundary"
_DARCY_NOT_FOR = (
    "coefficients of another law: other values than 12 and 3, smooth or log-normal fields, other correlation "
    "lengths (tau other than 3) or smoothness (alpha other than 2)",
    "other forcings than f = 1, other boundary conditions than u = 0, other domains than the unit square",
    "grids that are not node grids x_i = i/(n-1) reachable from 421 by a stride (85, 141, 211, ...)",
)

SHIPPED = (
    Recipe(
        name="darcy-85",
        preset="darcy-gpu",
        overrides=(*FIXED_EPOCHS, "optim.epochs=120"),
        summary="Darcy flow a -> u on the unit square: latent2d (physics attention) trained at 85 x 85",
        input=f"the coefficient a(x) on a node grid ({_DARCY_LAW})",
        output="the solution u(x) on the same grid",
        domain=_DARCY_EQUATION + "; node grids 85 x 85, 141 x 141, 211 x 211 (any grid strided from 421)",
        not_for=_DARCY_NOT_FOR,
        expected="4.91e-3 at 85, 4.73e-3 at 141, 4.75e-3 at 211 after 120 epochs in 55 minutes on 2 Intel Xeon "
                 "cores (2026-11-29)",
    ),
    Recipe(
        name="burgers-1024",
        preset="burgers-gpu",
        overrides=(*FIXED_EPOCHS, "optim.epochs=300"),
        summary="Burgers' equation u0 -> u(., 1), viscosity 0.1, periodic: latent1d (Fourier attention) trained "
                "at n = 1024",
        input="the initial condition u0(x) on the periodic grid x_j = j/n "
              "(u0 ~ N(0, 625 (-Laplacian + 25 I)^-2))",
        output="the solution u(x, 1) on the same grid",
        domain="u_t + (u^2/2)_x = 0.1 u_xx on the periodic [0, 1), t = 1; n = 256 to 8192 (any n = 8192 / 2^k)",
        not_for=("other viscosities than 0.1 and other final times than t = 1",
                 "initial conditions of another law (other amplitude sigma = 25, length tau = 5 or smoothness "
                 "alpha = 2), forcing terms, non-periodic boundaries"),
        expected="3.59e-4 at 1024 (3.59e-4 to 3.61e-4 over 256 ... 8192) after 300 epochs of about 8 s on 2 Intel "
                 "Xeon cores (2026-11-29)",
    ),
    Recipe(
        name="darcy-inverse-141",
        preset="darcy-inverse-gpu",
        overrides=(*FIXED_EPOCHS, "optim.epochs=40"),
        summary="Inverse Darcy u -> a with 1% noise: latent2d_inverse from u at 141 x 141 to a on 36 x 36 (the "
                "start of petrov invert --method refined)",
        input="the observed solution u(x) on a node grid, with noise of 1% of u's point-wise spread (it was "
              "trained and tested on u normalised point-wise plus 0.01 N(0, 1): petrov invert --noise 0.01 adds "
              "that to clean u)",
        output="the coefficient a average-pooled to the 36 x 36 grid",
        domain=_DARCY_EQUATION + f" ({_DARCY_LAW}); observations on node grids 141 x 141 and 211 x 211",
        not_for=(*_DARCY_NOT_FOR, "other noise levels than 1% (it was trained with 0.01 only)",
                 "coefficients on other grids than 36 x 36 without interpolation"),
        expected="3.46e-2 at 141, 3.40e-2 at 211 after 40 epochs of ~157 s on one AMD EPYC core (2026-12-06)",
    ),
    Recipe(
        name="darcy-mesh",
        preset="darcy-mesh-quick",
        overrides=("optim.epochs=40",),
        summary="Darcy flow a -> u on irregular triangle meshes: mesh_latent trained on level1 meshes",
        input="the coefficient a at the mesh nodes (a = 12 / 3 from a thresholded Gaussian field, as the grid "
              "data's)",
        output="the P1 finite-element solution u at the nodes",
        domain="-div(a grad u) = 1 on random domains inside the unit square (squares with elliptic holes, notched, "
               "L-shaped and deformed squares), u = 0 on the boundary; meshes level0 (~330 nodes) to level2 "
               "(~5,000) and an independent remesh",
        not_for=("domains outside the unit square or of other shapes than the four families",
                 "other coefficient laws, forcings or boundary conditions (as for the grid operator)",
                 "meshes much coarser than level0 (spacing 0.058) or finer than level2"),
        expected="5.2e-2 to 5.4e-2 on every level after 11 epochs (2.9 minutes of one Intel Xeon core); 40 epochs "
                 "not measured before",
    ),
)


def shipped_recipe(name: str) -> Recipe:
    """The recipe of the shipped operator ``name`` (KeyError naming them otherwise)."""
    for recipe in SHIPPED:
        if recipe.name == name:
            return recipe
    raise KeyError(f"no recipe {name!r}; recipes: {', '.join(r.name for r in SHIPPED)}")


__all__ = ["FIXED_EPOCHS", "SHIPPED", "Recipe", "shipped_recipe"]
