"""Training-step time of the 2-D marching models on Navier–Stokes-sized batches, one thread.

    python benchmarks/ns_step_times.py                      # every model at its default size
    python benchmarks/ns_step_times.py --models marching2d --set marching2d.latent_size=16

A step is forward + backward of a relative-L² loss over the ``T`` predicted states, float32, on a batch of
``--batch`` (8) trajectories of ``--grid`` (64) x 64 points with ``history`` = ``--history`` (10) given states
and ``time_steps`` = ``--steps`` (10): ``teacher_forcing`` (the ``T`` windows of true states as one batch),
``rollout`` (the ``T`` steps of a free rollout, differentiated through all of them) and ``pushforward`` (a
teacher-forced pass without gradient, then a differentiated one).  The data are random fields (the
time does not depend on the values).  Printed with the CPU model: the parameters, the median CPU seconds of
this one-thread process per step of each mode (wall seconds beside them: on a busy machine the CPU time is
the closer measure of the work), and the epochs of ``--samples`` (1000) trajectories that ``--budget-minutes``
(20) of one core buy at the teacher-forced step's pace (a budget the presets are sized from).
"""
from __future__ import annotations

import argparse
import json
import statistics
import time

import torch

from petrov.operators import build_model
from petrov.operators.blocks import count_parameters

from _common import format_table, machine_info, print_machine

MODELS = ("arfno2d", "fno3d", "artransolver2d", "marching2d")


def median_times(run, repeats: int) -> tuple[float, float]:
    """Median wall-clock and process CPU seconds of ``run()`` over ``repeats`` calls after a warm-up call (on a
    busy machine the CPU time of this one-thread process is the closer measure of its work)."""
    run()
    wall, cpu = [], []
    for _ in range(repeats):
        w, c = time.perf_counter(), time.process_time()
        run()
        wall.append(time.perf_counter() - w)
        cpu.append(time.process_time() - c)
    return statistics.median(wall), statistics.median(cpu)


def relative_l2(pred: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return ((pred - y).flatten(1).norm(dim=1) / y.flatten(1).norm(dim=1)).mean()


def step(model, x, y, mode: str, h: int):
    def run():
        model.zero_grad(set_to_none=True)
        if mode == "teacher_forcing":
            pred = model(x, teacher=y)
        elif mode == "pushforward":
            with torch.no_grad():
                one = model(x, teacher=y)
            pred = model(x, teacher=torch.cat([y[..., :h], one[..., h:]], dim=-1))
        else:
            pred = model(x)
        relative_l2(pred[..., h:], y[..., h:]).backward()
    return run


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", nargs="+", default=list(MODELS))
    p.add_argument("--modes", nargs="+", default=["teacher_forcing", "rollout", "pushforward"])
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--grid", type=int, default=64)
    p.add_argument("--history", type=int, default=10)
    p.add_argument("--steps", type=int, default=10)
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--samples", type=int, default=1000)
    p.add_argument("--budget-minutes", type=float, default=20.0)
    p.add_argument("--set", action="append", default=[], metavar="MODEL.KEY=JSON",
                   help="a config option of one model, e.g. marching2d.latent_size=16 (repeatable)")
    return p.parse_args(argv)


def options_of(settings: list[str]) -> dict[str, dict]:
    out: dict[str, dict] = {}
    for item in settings:
        target, _, value = item.partition("=")
        name, _, key = target.partition(".")
        out.setdefault(name, {})[key] = json.loads(value)
    return out


def main(argv=None) -> None:
    args = parse_args(argv)
    torch.set_num_threads(args.threads)
    print_machine(machine_info(args.threads))
    extra = options_of(args.set)
    g = torch.Generator().manual_seed(0)
    h, t, n = args.history, args.steps, args.grid
    y = torch.randn(args.batch, n, n, h + t, generator=g)
    x = y[..., :h].contiguous()
    rows = []
    for name in args.models:
        torch.manual_seed(0)
        model = build_model(name, history=h, time_steps=t, **extra.get(name, {})).train()
        seconds = {mode: median_times(step(model, x, y, mode, h), args.repeats) for mode in args.modes}
        tf = seconds["teacher_forcing"][1] if "teacher_forcing" in seconds else None
        epochs = args.budget_minutes * 60 / tf * args.batch / args.samples if tf else None
        rows.append([name, f"{count_parameters(model):,}",
                     *(f"{seconds[m][1]:.2f} ({seconds[m][0]:.2f})" for m in args.modes),
                     "-" if epochs is None else f"{epochs:.1f}"])
        print(rows[-1], flush=True)
    print(f"\nbatch {args.batch}, {n} x {n}, history {h}, time_steps {t}, float32, {args.threads} thread(s); "
          f"CPU seconds (wall seconds) per step, forward + backward, median of {args.repeats}")
    print(format_table(["model", "parameters", *args.modes, f"epochs of {args.samples} in {args.budget_minutes:g} "
                                                            "CPU min (teacher-forced)"], rows))


if __name__ == "__main__":
    main()
