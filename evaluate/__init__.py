"""petrov.evaluate: trained operators scored at several resolutions, their tables and figures.

- [`evaluation`][]: ``evaluate_resolutions`` (one operator, the same samples, several resolutions),
  ``predict``, ``make_plots`` and ``run_evaluation`` (what ``petrov evaluate`` does);
- [`runs`][]: which operator (a run directory, a bare model) and which samples (test split, slices);
- [`resolutions`][]: which resolutions a run may be evaluated at;
- [`reports`][]: the printed table; [`plots`][]: every figure petrov draws (from [`figure_style`][],
  [`field_plots`][], [`curve_plots`][]; [`mesh_plots`][] for meshes).

The per-sample metric loop and the metrics files it shares with training are
[`petrov.train.metrics`][] (re-exported here).
"""
from ..train.metrics import (
    ROW_FIELDS,
    evaluate_relative_l2,
    per_time_row,
    read_metrics,
    resolution_row,
    summarize,
    write_metrics,
)
from .evaluation import evaluate_resolutions, is_trajectory, make_plots, predict, run_evaluation
from .reports import format_table
from .resolutions import allowed_resolutions, parse_resolutions
from .runs import EvalSetup, load_run, parse_indices, select_indices

__all__ = [
    "ROW_FIELDS", "EvalSetup", "allowed_resolutions", "evaluate_relative_l2", "evaluate_resolutions",
    "format_table", "is_trajectory", "load_run", "make_plots", "parse_indices", "parse_resolutions",
    "per_time_row", "predict", "read_metrics", "resolution_row", "run_evaluation", "select_indices",
    "summarize", "write_metrics",
]
