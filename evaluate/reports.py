"""The evaluation table printed by ``petrov evaluate`` (the files are written by
[`petrov.train.metrics.write_metrics`][])."""
from __future__ import annotations

from typing import Any

from ..train.metrics import resolution_label


def format_table(rows: list[dict[str, Any]], train_resolution: Any = None,
                 samples: str = "the test samples", trajectory_metric: str = "state_mean") -> str:
    """A fixed-width text table of the rows (the training resolution marked with ``*``; a pair of points per
    axis written ``16x48``), titled with what was measured on ``samples`` (``petrov evaluate --indices`` may
    pick others than the test's).  Rows of a rollout (``per_time_mean``) are followed by the mean error of
    each predicted state; ``trajectory_metric`` (the run's ``loss.trajectory_metric``) names what their
    ``mean`` is.  Rows of several fields (``fields``) add each field's error ([`per_field_lines`][])."""
    head = f"{'resolution':>11} {'n':>5} {'mean':>11} {'std':>10} {'median':>11} {'max':>10}"
    rollout = bool(rows) and "per_time_mean" in rows[0]
    what = "relative L2"
    if rollout:
        what = ("rollout relative L2 of the predicted space-time block" if trajectory_metric == "space_time"
                else "rollout relative L2 over the predicted states")
        if len(rows[0].get("fields", [])) > 1:
            what += " (all fields together)"
    trained = None if train_resolution is None else resolution_label(train_resolution)
    lines = [f"{what} on {samples}", head, "-" * len(head)]
    for r in rows:
        mark = "*" if trained is not None and resolution_label(r["resolution"]) == trained else " "
        lines.append(f"{resolution_label(r['resolution']):>10}{mark} {r['n']:>5} {r['mean']:>11.4e} "
                     f"{r['std']:>10.2e} {r['median']:>11.4e} {r['max']:>10.2e}")
    if trained is not None and any(resolution_label(r["resolution"]) == trained for r in rows):
        lines.append("* training resolution")
    if rollout:
        lines += per_state_lines(rows)
        if len(rows[0].get("fields", [])) > 1:
            lines += per_field_lines(rows)
    return "\n".join(lines)


def per_state_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The mean relative L2 of each predicted state (the states after the ``history`` given ones), a line
    per resolution."""
    history = rows[0].get("history", 1)
    steps = len(rows[0]["per_time_mean"]) - history
    head = f"{'resolution':>11}  " + " ".join(f"{'k=' + str(history + k):>8}" for k in range(steps))
    several = len(rows[0].get("fields", [])) > 1
    lines = [f"mean relative L2 of each predicted state k{' (all fields)' if several else ''} "
             f"(states 0..{history - 1} given)", head]
    for r in rows:
        lines.append(f"{resolution_label(r['resolution']):>11}  "
                     + " ".join(f"{e:>8.2e}" for e in r["per_time_mean"][history:]))
    return lines


def per_field_lines(rows: list[dict[str, Any]]) -> list[str]:
    """Rows of several fields: each field's relative L2 over the predicted space-time block (mean, median and
    max over the samples), then each field's mean relative L2 at every predicted state, per resolution."""
    names, history = list(rows[0]["fields"]), rows[0].get("history", 1)
    width = max(8, *(len(n) for n in names))
    lines = ["relative L2 of each field over the predicted space-time block",
             f"{'resolution':>11}  {'field':<{width}} {'mean':>11} {'median':>11} {'max':>10}"]
    for r in rows:
        for f, name in enumerate(r["fields"]):
            lines.append(f"{resolution_label(r['resolution']):>11}  {name:<{width}} {r['field_mean'][f]:>11.4e} "
                         f"{r['field_median'][f]:>11.4e} {r['field_max'][f]:>10.2e}")
    steps = len(rows[0]["per_time_field_mean"]) - history
    lines += ["mean relative L2 of each field at each predicted state k",
              f"{'resolution':>11}  {'field':<{width}} " + " ".join(f"{'k=' + str(history + k):>8}"
                                                                     for k in range(steps))]
    for r in rows:
        states = r["per_time_field_mean"][history:]
        for f, name in enumerate(r["fields"]):
            lines.append(f"{resolution_label(r['resolution']):>11}  {name:<{width}} "
                         + " ".join(f"{state[f]:>8.2e}" for state in states))
    return lines


__all__ = ["format_table", "per_field_lines", "per_state_lines"]
