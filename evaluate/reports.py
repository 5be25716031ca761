"""The evaluation table printed by ``petrov evaluate`` (the files are written by
[`petrov.train.metrics.write_metrics`][])."""
from __future__ import annotations

from typing import Any


def format_table(rows: list[dict[str, Any]], train_resolution: int | None = None,
                 samples: str = "the test samples") -> str:
    """A fixed-width text table of the rows (the training resolution marked with ``*``), titled with
    what was measured on ``samples`` (``petrov evaluate --indices`` may pick others than the test's)."""
    head = f"{'resolution':>11} {'n':>5} {'mean':>11} {'std':>10} {'median':>11} {'max':>10}"
    what = "rollout relative L2 over the predicted states" if rows and "per_time_mean" in rows[0] else "relative L2"
    lines = [f"{what} on {samples}", head, "-" * len(head)]
    for r in rows:
        mark = "*" if train_resolution is not None and r["resolution"] == train_resolution else " "
        lines.append(f"{r['resolution']:>10}{mark} {r['n']:>5} {r['mean']:>11.4e} {r['std']:>10.2e} "
                     f"{r['median']:>11.4e} {r['max']:>10.2e}")
    if train_resolution is not None and any(r["resolution"] == train_resolution for r in rows):
        lines.append("* training resolution")
    return "\n".join(lines)



__all__ = ["format_table"]
