"""The evaluation table printed by ``petrov evaluate`` (the files are written by
[`petrov.train.metrics.write_metrics`][])."""
from __future__ import annotations

from typing import Any


def format_table(rows: list[dict[str, Any]], train_resolution: int | None = None,
                 samples: str = "the test samples", trajectory_metric: str = "state_mean") -> str:
    """A fixed-width text table of the rows (the training resolution marked with ``*``), titled with
    what was measured on ``samples`` (``petrov evaluate --indices`` may pick others than the test's).
    Rows of a rollout (``per_time_mean``) are followed by the mean error of each predicted state;
    ``trajectory_metric`` (the run's ``loss.trajectory_metric``) names what their ``mean`` is."""
    head = f"{'resolution':>11} {'n':>5} {'mean':>11} {'std':>10} {'median':>11} {'max':>10}"
    rollout = bool(rows) and "per_time_mean" in rows[0]
    what = "relative L2"
    if rollout:
        what = ("rollout relative L2 of the predicted space-time block" if trajectory_metric == "space_time"
                else "rollout relative L2 over the predicted states")
    lines = [f"{what} on {samples}", head, "-" * len(head)]
    for r in rows:
        mark = "*" if train_resolution is not None and r["resolution"] == train_resolution else " "
        lines.append(f"{r['resolution']:>10}{mark} {r['n']:>5} {r['mean']:>11.4e} {r['std']:>10.2e} "
                     f"{r['median']:>11.4e} {r['max']:>10.2e}")
    if train_resolution is not None and any(r["resolution"] == train_resolution for r in rows):
        lines.append("* training resolution")
    if rollout:
        lines += per_state_lines(rows)
    return "\n".join(lines)


def per_state_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The mean relative L2 of each predicted state (the states after the ``history`` given ones), a line
    per resolution."""
    history = rows[0].get("history", 1)
    steps = len(rows[0]["per_time_mean"]) - history
    head = f"{'resolution':>11}  " + " ".join(f"{'k=' + str(history + k):>8}" for k in range(steps))
    lines = [f"mean relative L2 of each predicted state k (states 0..{history - 1} given)", head]
    for r in rows:
        lines.append(f"{r['resolution']:>11}  " + " ".join(f"{e:>8.2e}" for e in r["per_time_mean"][history:]))
    return lines


__all__ = ["format_table"]
