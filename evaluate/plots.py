"""Figures for trained operators (matplotlib, Agg backend; each written atomically as PNG and PDF).

Rules every figure follows (so that it can go into a paper as it is): fields are drawn on their
physical domain with axis ticks and labels (x, y; x and t for space-time pictures, time running up);
truth and prediction share one colour scale; a power of ten goes into the axis or colorbar label
("|error| (×10⁻³)") instead of an offset text that would collide with a neighbouring title; legends sit
outside the data; samples are the first one, the one of median error and the worst one
([`chosen_samples`][]), named as such; "n" is a number of grid points, never of samples.

- [`plot_predictions`][]: prediction vs truth on a few samples — 1-D: input, truth and prediction,
  point-wise error; 2-D: input, truth, prediction and |error| fields side by side. The fields are
  named after the dataset kind ([`field_names`][]: Burgers u₀ -> u(·, 1), Darcy a -> u, imported
  x -> y) and every colorbar is labelled.
- [`plot_error_vs_resolution`][]: relative L² against the grid size, log-log: the median with a
  percentile band of the per-sample errors ([`percentile_band`][], default 10th–90th), the mean
  and the max as markers, the training resolution marked. (Mean ± std bars would reach below zero
  on a log axis: the errors are skewed.)
- [`plot_inversion`][]: inverse Darcy, per sample: u observed, a true, a recovered, error
  (and, with uncertainty, the probability of the high phase and the error interval).
- [`plot_error_vs_time`][], [`plot_spacetime`][]: trajectories (marching models): rollout error
  against time per resolution; space-time pictures of truth, rollout and |error|.
- [`plot_training_curves`][]: training loss, validation relative L² and learning rate per epoch,
  read from the run's ``log.jsonl`` (or ``log.csv``) written by the trainer.

Every function takes plain data (tensors/arrays/dicts), writes one figure as ``NAME.png`` and
``NAME.pdf`` and returns the PNG's path. The figures live by what they draw: ``figure_style`` (what
every figure shares: files, labels, chosen samples, extents, field names), ``field_plots`` (fields:
predictions, inversions, space-time pictures), ``curve_plots`` (curves: error vs resolution and time,
training curves, comparisons) and ``mesh_plots`` (fields on triangles, error per mesh level); this
module gathers the public names of the first three.
"""
from .curve_plots import (
    axis_points,
    percentile_band,
    plot_comparison,
    plot_error_vs_resolution,
    plot_error_vs_time,
    plot_training_curves,
    read_epoch_log,
)
from .field_plots import plot_inversion, plot_predictions, plot_spacetime
from .figure_style import (
    chosen_samples,
    dataset_domain,
    field_names,
    grid_extent,
    node_extent,
    power_of_ten,
    sample_head,
    save_figure,
    scale_axis,
    scaled_label,
)

__all__ = [
    "axis_points", "chosen_samples", "dataset_domain", "field_names", "grid_extent", "node_extent", "percentile_band",
    "plot_comparison", "plot_error_vs_resolution", "plot_error_vs_time", "plot_inversion", "plot_predictions",
    "plot_spacetime", "plot_training_curves", "power_of_ten", "read_epoch_log", "sample_head", "save_figure",
    "scale_axis", "scaled_label",
]
