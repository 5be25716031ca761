"""Inverse coefficient identification for Darcy flow: recover a from an observed solution u.

Four methods share one parametrization of the coefficient, one regularizer and one set of metrics:
``pde`` (finite-difference solver and its adjoint, L-BFGS-B), ``refined`` (``pde`` from the learned
answer, stopped by the discrepancy principle), ``surrogate`` (gradient descent through a trained forward
operator) and ``learned`` (a trained inverse operator u -> a). The pde answers can carry their
uncertainty (``laplace``: phase probabilities and error intervals; ``calibration`` checks them).
``invert`` is the Python entry point, ``petrov invert`` the command line.
"""
from .api import InversionResult, invert
from .calibration import expected_calibration_error, interval_coverage, reliability
from .config import InversionConfig
from .methods import METHODS
from .metrics import data_misfit, inversion_metrics, phase_accuracy, relative_l2
from .observations import Observations, add_observation_noise, load_observations

__all__ = [
    "METHODS", "InversionConfig", "InversionResult", "Observations", "add_observation_noise", "data_misfit",
    "expected_calibration_error", "interval_coverage", "invert", "inversion_metrics", "load_observations",
    "phase_accuracy", "relative_l2", "reliability",
]
