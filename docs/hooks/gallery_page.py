"""mkdocs hook: the gallery page, written when the site is built from the committed figures and the facts
of the trained runs they were drawn from (docs/gallery/facts.json, written by ``docs/gallery.py
--train``): every caption's numbers (resolutions, epochs, errors, samples, CPU time) come from the run
that drew the figure beside it.
"""
from __future__ import annotations

import json
from pathlib import Path

from mkdocs.structure.files import File

FACTS = Path(__file__).resolve().parents[1] / "gallery" / "facts.json"

TITLES = {"burgers": "Burgers", "darcy": "Darcy", "darcy-inverse": "Inverse Darcy",
          "inversion": "Inverse Darcy: refined, with its uncertainty", "marching": "Time marching",
          "mixers": "Mixers"}
# what each figure shows (its layout); the numbers come from the facts
FIGURES = {
    "predictions": "The first test sample, the one of median error and the worst, at {finest}: {what}.",
    "error_vs_resolution": "The test error against the resolution: the median with the 10th–90th percentile band "
                           "of the per-sample errors, the mean and the maximum; the training resolution marked.",
    "training_curves": "Training loss and validation relative L² per epoch ({epochs} epochs; the star marks the best "
                       "validation error, {best_val:.2e} at epoch {best_epoch}) and the learning rate.",
    "spacetime": "Truth, free rollout and error in the (x, t) plane at {finest} points, time running up from the "
                 "given state u₀; the first test sample, the median and the worst.",
    "error_vs_time": "The rollout error against time, one line per resolution: it does not grow along the rollout "
                     "if the marching is stable.",
    "inversion": "Per sample: the observed u, the true and the recovered coefficient on one colour scale, the error, "
                 "and the probability of the high phase per cell (from the Laplace approximation).",
    "mixers": "Test relative L² at {eval_res} of each mixer in the same model, trained at {train_res} for the same "
              "number of epochs.",
}
WHAT = {"burgers": "input u₀, truth and prediction of u(·, 1) on one axis, and their difference",
        "darcy": "coefficient a, truth and prediction of u on one colour scale, and the error",
        "darcy-inverse": "the noisy observed u, the true and the recovered coefficient a (pooled), and the error"}


def listing(values: list) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " and " + values[-1]


def run_caption(name: str, facts: dict) -> str:
    run = facts["run"]
    data, test = run["data"], run["test"]
    resolutions = [r["resolution"] for r in test]
    trained = data["train_resolution"]
    square = name != "burgers" and name != "marching"
    at = (lambda r: f"{r} x {r}") if square else (lambda r: f"n = {r}")
    generated = run.get("generated") or {}
    errors = {r["resolution"]: r["mean"] for r in test}
    noise = f"{data['noise']:g} noise on the normalised input" if data.get("noise") else ""
    target = f"the target pooled to {data['coarse_resolution']} x {data['coarse_resolution']}" \
        if data.get("coarse_resolution") else ""
    inverse = f", with {' and '.join(x for x in (noise, target) if x)}" if noise or target else ""
    stopped = "" if run["epochs"] == run["planned_epochs"] else f" (of {run['planned_epochs']} planned)"
    mean = ", ".join(f"{errors[r]:.2e} at {r}{' (trained)' if r == trained else ''}" for r in resolutions)
    what = "rollout relative L² at the final time" if name == "marching" else "mean relative L²"
    return (f"`{run['model']}` ({run['parameters']:,} parameters), trained at {at(trained)} on {data['n_train']} "
            f"samples for {run['epochs']} epochs{stopped} (best validation relative L² {run['best_val_rel_l2']:.2e} "
            f"at epoch {run['best_epoch']}){inverse}; "
            + (f"{generated['n_samples']} samples generated at {generated['resolution']}; " if generated else "")
            + f"evaluated on the {test[0]['n']} held-out test samples: {what} {mean}.")


def inversion_caption(inv: dict) -> str:
    m = inv["mean"]
    return (f"The refined method (the learned answer of the [inverse Darcy run](#inverse-darcy), then projected "
            f"Gauss-Newton steps until the misfit reaches the noise level) on the last {m['n']} samples of the file, "
            f"observed at {inv['observation_resolution']} with {inv['noise']:g} noise, the coefficient recovered on the "
            f"{inv['grid']} x {inv['grid']} grid: relative L² of a {m['rel_l2_a']:.2e} (mean), phase accuracy "
            f"{m['phase_accuracy']:.3f}, {m['cpu_seconds']:.1f} CPU s per sample (+{m['uncertainty_cpu_seconds']:.1f} s "
            f"for the uncertainty). The {inv['interval']:.0%} error intervals, calibrated on 20 other samples, average "
            f"[{m['error_low']:.2e}, {m['error_high']:.2e}] and cover {m['coverage']:.0%} of these samples; the phase "
            f"probabilities' expected calibration error is {m['phase_ece']:.3f}.")


def cost(facts: dict) -> str:
    machine = facts.get("trained_on") or facts.get("drawn_on") or {}
    minutes = facts.get("cpu_minutes")
    spent = f"{minutes:g} CPU minutes" if minutes is not None else "CPU time not recorded"
    return (f"Drawn from a run trained on {machine.get('date', '?')} ({spent}, {machine.get('cpu', '?')}, "
            f"{machine.get('threads', '?')} thread(s), torch {machine.get('torch', '?')}).")


def figure(name: str, fig: str, text: str) -> list[str]:
    png = f"gallery/{name}/{fig}.png"
    return [f"[![{TITLES[name]}: {fig.replace('_', ' ')}]({png})]({png})", "", f"{text} [PDF](gallery/{name}/{fig}.pdf)", ""]


def section(name: str, facts: dict) -> list[str]:
    lines = [f"## {TITLES[name]}", "", "```bash", *facts["commands"], "```", ""]
    values: dict = {}
    if "run" in facts:
        lines += [run_caption(name, facts), ""]
        test = facts["run"]["test"]
        values = {"finest": test[-1]["resolution"], "epochs": facts["run"]["epochs"],
                  "best_val": facts["run"]["best_val_rel_l2"], "best_epoch": facts["run"]["best_epoch"],
                  "what": WHAT.get(name, "")}
    if name == "inversion" and facts.get("inversion"):
        lines += [inversion_caption(facts["inversion"]), ""]
    if name == "mixers" and facts.get("mixers"):
        rows = facts["mixers"]
        values = {"eval_res": rows[0]["eval_resolution"], "train_res": rows[0]["train_resolution"]}
        lines += ["| mixer | parameters | epochs | s/epoch | relative L² at "
                  f"{rows[0]['train_resolution']} (trained) | at {rows[0]['eval_resolution']} |", "|---|---|---|---|---|---|"]
        lines += [f"| `{r['mixer']}` | {r['params']:,} | {r['epochs']} | {r['seconds_per_epoch']:.1f} | "
                  f"{r['rel_l2_train_res']:.2e} | {r['rel_l2_eval_res']:.2e} |" for r in rows] + [""]
    for fig in facts["figures"]:
        lines += figure(name, fig, FIGURES[fig].format(**values))
    lines += [cost(facts), ""]
    return lines


def page() -> str:
    facts = json.loads(FACTS.read_text()) if FACTS.is_file() else {"examples": {}}
    lines = ["---", "hide:", "  - toc", "---", "", "# Gallery", "",
             "What the examples and commands draw, from runs trained as documented (not quick mode). Each figure "
             "is written as PNG and PDF next to the run's metrics; click a figure for its full size. The captions are "
             "written from the runs' own config and metrics files (`docs/gallery/facts.json`); "
             "`python docs/gallery.py --train` trains the runs and draws the figures again.", ""]
    for name in TITLES:
        if name in facts["examples"]:
            lines += section(name, facts["examples"][name])
        else:
            lines += [f"## {TITLES[name]}", "", f"Not drawn yet: `python docs/gallery.py --train {name}` trains its run "
                      "and draws its figures.", ""]
    return "\n".join(lines)


def on_files(files, config):
    files.append(File.generated(config, "gallery.md", content=page()))
    return files
