"""Inverse coefficient identification for Darcy flow: recover a from an observed solution u.

Three methods share one parametrization of the coefficient on a coarse grid, one regularizer and one
set of metrics: ``pde`` (finite-difference solver and its adjoint, L-BFGS-B), ``surrogate`` (gradient
descent through a trained forward operator) and ``learned`` (a trained inverse operator u -> a).
``invert`` is the Python entry point, ``petrov invert`` the command line.
"""
from .api import METHODS, InversionResult, invert
from .config import InversionConfig
from .metrics import data_misfit, inversion_metrics, phase_accuracy, relative_l2
from .observations import Observations, add_observation_noise, load_observations

__all__ = [
    "METHODS", "InversionConfig", "InversionResult", "Observations", "add_observation_noise", "data_misfit",
    "invert", "inversion_metrics", "load_observations", "phase_accuracy", "relative_l2",
]
