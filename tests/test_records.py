"""Result records (benchmarks/records.py) and the tables rendered from them (docs/render_tables.py).

Every record in benchmarks/results/ holds to the schema, and its commands parse with their scripts'
own argument parsers as the scripts are now; every marked table of the README, benchmarks/README.md and
the docs is its records' rendering.  The checks catch a record's value edited by hand while its table
was not rendered again, and a recorded command with an option its script no longer has.
"""
import argparse
import copy
import json
import math
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT / "docs"))

import records  # noqa: E402
import render_tables  # noqa: E402

RECORD_FILES = sorted(records.RESULTS.glob("*.json"))


def test_there_are_records_and_marked_tables():
    """The checks below run over something: the demo's record, and docs/results.md's tables."""
    assert "demo-burgers" in [p.stem for p in RECORD_FILES]
    lines = (ROOT / "docs" / "results.md").read_text().split("\n")
    names = [name for name, _, _ in render_tables.regions(lines, "docs/results.md")]
    assert {"demo-burgers", "accuracy-darcy-seeds", "accuracy-burgers-seeds"} <= set(names)


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: p.stem)
def test_record_holds_to_the_schema(path):
    record = records.read_record(path)
    if "transcribed_from" in record:
        assert (ROOT / record["transcribed_from"]).is_file()


@pytest.mark.parametrize("path", RECORD_FILES, ids=lambda p: p.stem)
def test_record_commands_parse_with_their_scripts_parsers(path):
    for command in records.read_record(path)["commands"]:
        assert isinstance(records.parse_command(command), argparse.Namespace)


def test_every_marked_table_is_its_records_rendering():
    assert render_tables.check(render_tables.default_files()) == []


def test_every_registered_table_renders():
    for name in render_tables.TABLES.names():
        lines = render_tables.render(name)
        assert any(line.startswith("| ") for line in lines), name


# --- the checks catch what they are for ----------------------------------------------------------

def copy_results(tmp_path: Path) -> Path:
    results = tmp_path / "results"
    results.mkdir()
    for path in RECORD_FILES:
        (results / path.name).write_text(path.read_text())
    return results


def test_a_record_edited_by_hand_fails_the_check_until_rendered(tmp_path):
    results = copy_results(tmp_path)
    page = tmp_path / "page.md"
    page.write_text((ROOT / "docs" / "results.md").read_text())
    assert render_tables.check([page], results) == []

    path = results / "demo-burgers.json"
    record = json.loads(path.read_text())
    cell = record["rows"][0]["values"]["1024"]
    seed = next(iter(cell["seeds"]))
    old = render_tables.sci(cell["seeds"][seed])
    cell["seeds"][seed] *= 1.5
    new = render_tables.sci(cell["seeds"][seed])
    path.write_text(json.dumps(record))

    [message] = render_tables.check([page], results)
    assert "table 'demo-burgers' differs" in message and "page.md" in message
    have, want = re.findall(r"the file has +(.*)\n +the records give +(.*)\n", message)[0]
    assert old in have and new in want and new not in have  # the table's row, named by its line

    assert render_tables.rewrite([page], results) == [page]
    assert render_tables.check([page], results) == []
    assert new in page.read_text()
    text = page.read_text()
    assert render_tables.rewrite([page], results) == [] and page.read_text() == text  # nothing left to do


def test_a_command_with_an_option_its_script_no_longer_has_fails(tmp_path):
    demo = records.read_record(records.RESULTS / "demo-burgers.json")["commands"][0]
    with pytest.raises(records.RecordError, match="no-such-option"):
        records.parse_command(demo + " --no-such-option 3")

    script = "import argparse\n\ndef main(argv=None):\n    p = argparse.ArgumentParser()\n{options}" \
             "    p.parse_args(argv)\n    raise SystemExit('ran past its parser')\n"
    before, after = tmp_path / "before", tmp_path / "after"
    for root, options in ((before, ["--seeds", "--budget"]), (after, ["--seeds"])):
        root.mkdir()
        (root / "bench.py").write_text(script.format(options="".join(f"    p.add_argument({o!r})\n" for o in options)))
    command = "python bench.py --seeds 3 --budget 20"
    assert records.parse_command(command, root=before).budget == "20"
    with pytest.raises(records.RecordError, match="unrecognized arguments: --budget 20"):
        records.parse_command(command, root=after)


def test_marker_mistakes_are_named(tmp_path):
    page = tmp_path / "page.md"
    for text, expected in [
        ("<!-- table: demo-burgers -->\n", "no <!-- /table --> below it"),
        ("<!-- /table -->\n", "without a table marker"),
        ("<!-- table: demo-burger -->\n<!-- /table -->\n", "did you mean 'demo-burgers'"),
    ]:
        page.write_text(text)
        with pytest.raises(render_tables.TableError, match=re.escape(expected)):
            render_tables.check([page])
    page.write_text("```\n<!-- table: not-a-table -->\n```\n")  # a marker shown as code is text
    assert render_tables.check([page]) == []
    assert render_tables.main(["--check", str(tmp_path / "missing.md")]) == 1


def test_a_new_problems_record_joins_the_headline():
    """A record of another problem (here one shaped as a Navier-Stokes rollout on a GPU would be) gives its
    headline rows from its own figures: the value at its training resolution, the worst other against it."""
    ns = copy.deepcopy(MEASURED)
    ns.update(name="ns-trial", device={"kind": "cuda", "name": "some GPU", "threads": 1},
              settings={"train_resolution": 64, "budget_minutes": 30},
              rows=[{"name": "marching2d", "facts": {}, "values": {
                  "64": records.cell({0: 0.02, 1: 0.04}), "128": records.cell({0: 0.033, 1: 0.033})}}])
    records.check_record(ns)
    [line] = render_tables.headline_rows("Navier-Stokes", [ns], 3)
    assert line == ("| Navier-Stokes, 30 GPU minutes each (trained at 64, tested at 64, 128) | `marching2d` | "
                    "3.00e-2 ± 1.4e-2 (64) | 1.10 | 2 |")
    del ns["rows"][0]["values"]["128"]  # one resolution only: no ratio to show
    assert render_tables.headline_rows("Navier-Stokes", [ns], 3)[0].endswith("| 3.00e-2 ± 1.4e-2 (64) | — | 2 |")
    del ns["settings"]["train_resolution"]
    with pytest.raises(render_tables.TableError, match="states no train_resolution"):
        render_tables.headline_rows("Navier-Stokes", [ns], 3)


def test_the_headline_is_drawn_from_the_records_it_names():
    """Every figure of the README's headline is a record's: the table names the records of HEADLINE."""
    named = [n for _, names, _ in render_tables.HEADLINE for n in names]
    assert render_tables.TABLES.get("headline").records == tuple(named)
    assert set(named) <= {p.stem for p in RECORD_FILES}
    lines = (ROOT / "README.md").read_text().split("\n")
    assert [name for name, _, _ in render_tables.regions(lines, "README.md")] == ["headline"]


# --- the schema -----------------------------------------------------------------------------------

MEASURED = {
    "record": 1, "name": "example", "metric": "test relative L2", "commands": ["python examples/burgers.py"],
    "git": {"commit": "0" * 40, "dirty": False}, "device": {"kind": "cpu", "name": "some CPU", "threads": 1},
    "software": {"python": "3.11", "torch": "2.13.0", "petrov": "0.2.0"}, "date": "2026-12-07T10:00:00+00:00",
    "settings": {}, "rows": [{"name": "m", "facts": {}, "values": {"256": records.cell({0: 1.0, 1: 2.0})}}],
}


def mutated(path: str, value):
    record = copy.deepcopy(MEASURED)
    *keys, last = path.split(".")
    target = record
    for k in keys:
        target = target[int(k)] if isinstance(target, list) else target[k]
    if value is KeyError:
        del target[last]
    else:
        target[last] = value
    return record


@pytest.mark.parametrize("path, value, problem", [
    ("commands", KeyError, "missing field 'commands'"),
    ("hand_made", True, "unknown field 'hand_made'"),
    ("date", "07/12/2026", "not ISO 8601"),
    ("software.torch", None, "software.torch is null in a measured record"),
    ("device.kind", "tpu", "device kind 'tpu'"),
    ("rows.0.values.256.seeds", {"0": math.nan, "1": 2.0}, "seed 0: nan is not a finite number"),
    ("rows.0.values.256.mean", 1.6, "mean 1.6 is not the seeds' 1.5"),
    ("rows.0.values.256.std", KeyError, "std of the 2 seeds is missing"),
    ("rows.0.values.256", {"mean": 1.5, "std": 0.7, "n": 2}, "lists its value per seed"),
    ("rows", [], "'rows' is empty"),
])
def test_the_schema_refuses(path, value, problem):
    records.check_record(MEASURED)
    with pytest.raises(records.RecordError, match=re.escape(problem)):
        records.check_record(mutated(path, value))


def test_a_transcription_keeps_the_texts_rounded_figures():
    record = mutated("rows.0.values.256", {"seeds": {"0": 6.63e-4, "1": 7.71e-4, "2": 6.84e-4},
                                           "mean": 7.06e-4, "std": 5.7e-5, "n": 3})
    with pytest.raises(records.RecordError, match="std 5.7e-05 is not the seeds'"):
        records.check_record(record)  # measured: the mean and std must be the seeds' own
    record.update(transcribed_from="benchmarks/README.md", git={"commit": None, "dirty": None})
    records.check_record(record)
    assert render_tables.spread(record["rows"][0]["values"]["256"]) == "7.06e-4 ± 5.7e-5"
    record["rows"][0]["values"]["256"]["n"] = 2
    with pytest.raises(records.RecordError, match="n 2 must be a whole number >= the seeds listed"):
        records.check_record(record)


# --- writing --------------------------------------------------------------------------------------

def test_write_record_from_the_running_command(tmp_path, monkeypatch):
    monkeypatch.setattr(sys, "argv", [str(ROOT / "examples" / "burgers.py"), "--out", "runs/a b", "--record"])
    path = records.write_record("demo-x", {"galerkin1d": {256: {1: 2.0, 0: 1.0}, 512: {0: 3.0}}},
                                metric="test relative L2", facts={"galerkin1d": {"parameters": 7}},
                                settings={"where": tmp_path}, threads=3, directory=tmp_path)
    assert path == tmp_path / "demo-x.json" and sorted(p.name for p in tmp_path.iterdir()) == ["demo-x.json"]
    record = records.read_record(path)
    assert record["commands"] == ["python examples/burgers.py --out 'runs/a b' --record"]
    assert records.split_command(record["commands"][0])[1] == ["--out", "runs/a b", "--record"]
    values = record["rows"][0]["values"]
    assert values["256"] == {"seeds": {"0": 1.0, "1": 2.0}, "mean": 1.5, "std": math.sqrt(0.5)}
    assert values["512"] == {"seeds": {"0": 3.0}}
    assert record["device"]["threads"] == 3 and record["device"]["kind"] == "cpu"
    assert record["settings"] == {"where": str(tmp_path)} and record["rows"][0]["facts"] == {"parameters": 7}
    assert record["git"]["commit"] is None or re.fullmatch(r"[0-9a-f]{40}", record["git"]["commit"])
    with pytest.raises(records.RecordError, match="not a finite number"):
        records.write_record("demo-y", {"m": {256: {0: math.inf}}}, metric="m", directory=tmp_path)
    assert not (tmp_path / "demo-y.json").exists()


def test_compare_accuracy_records_each_seed(tmp_path, monkeypatch):
    """The lines of benchmarks/compare_accuracy.py that write its record, on the results of two seeds."""
    script = records.load_script(ROOT / "benchmarks" / "compare_accuracy.py")
    monkeypatch.setattr(records, "RESULTS", tmp_path)
    argv = ["--problems", "burgers", "--record", "trial"]
    monkeypatch.setattr(sys, "argv", [str(ROOT / "benchmarks" / "compare_accuracy.py"), *argv])
    args = script.parse(argv)
    problem = script.problems(args)["burgers"]
    run = lambda seed, scale: {"seed": seed, "label": "petrov fno1d", "key": "fno", "epochs": 3 + seed,  # noqa: E731
                               "test": {str(r): {"mean": scale * r} for r in problem.eval_res}}
    results = [{"key": "fno", "label": "petrov fno1d", "note": "", "parameters": 11,
                "runs": [run(0, 1e-6), run(1, 3e-6), {"seed": 2, "error": "killed"}]},
               {"key": "neuralop", "label": "neuralop FNO", "note": "", "error": "not installed",
                "runs": [{"seed": 0, "error": "not installed"}]}]
    script.write_accuracy_record(args, problem, results)
    record = records.read_record(tmp_path / "trial-burgers.json")
    [row] = record["rows"]
    assert row["name"] == "petrov fno1d" and row["facts"]["parameters"] == 11 and row["facts"]["epochs"] == [3, 4]
    assert list(row["values"]) == [str(r) for r in problem.eval_res]
    assert row["values"]["1024"]["seeds"] == {"0": 1024e-6, "1": 3072e-6}
    assert row["values"]["1024"]["mean"] == pytest.approx(2048e-6)
    assert record["commands"] == ["python benchmarks/compare_accuracy.py --problems burgers --record trial"]
    assert records.parse_command(record["commands"][0]).record == "trial"


def test_the_demo_records_only_what_it_measures(tmp_path):
    """``examples/burgers.py --record`` refuses --quick and a finished run before any work."""
    demo = records.load_script(ROOT / "examples" / "burgers.py")
    with pytest.raises(SystemExit, match="not with --quick"):
        demo.main(["--quick", "--record", "--out", str(tmp_path / "run")])
    (tmp_path / "run" / "eval").mkdir(parents=True)
    (tmp_path / "run" / "eval" / "metrics.json").write_text("{}")
    with pytest.raises(SystemExit, match="holds a finished run"):
        demo.main(["--record", "--out", str(tmp_path / "run")])
    assert sorted(p.name for p in tmp_path.rglob("*")) == ["eval", "metrics.json", "run"]


# --- figures in prose -----------------------------------------------------------------------------

PROSE_PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]

# Error figures that may stand in prose because they are not petrov's results: (page, figure) -> why.
NOT_RESULTS = {
    ("docs/results.md", "1.017e-3"): "published: the reference Galerkin Transformer's hybrid, its notebook",
    ("docs/results.md", "1.39e-2"): "published: the FNO paper's Burgers range",
    ("docs/results.md", "1.49e-2"): "published: the FNO paper's Burgers range",
    ("docs/results.md", "1.123e-3"): "published: the reference repository's Fourier-type hybrid",
    ("docs/results.md", "4.9e-3"): "published: Transolver++ on Darcy 85",
    ("docs/results.md", "5.7e-3"): "published: Transolver on Darcy 85",
    ("docs/results.md", "6.3e-3"): "published: LNO on Darcy 85",
    ("docs/results.md", "8.4e-3"): "published: the Galerkin Transformer on Darcy 85",
    ("docs/results.md", "1.08e-2"): "published: the FNO paper on Darcy 85",
    ("docs/results.md", "2.5e-2"): "published learned inverse at 1% noise; the mesh benchmark's target",
    ("docs/gpus.md", "4.9e-3"): "a target: darcy-gpu's error at 85",
    ("docs/gpus.md", "2.5e-2"): "a target: darcy-inverse-gpu's error",
    ("docs/measurements.md", "2.5e-2"): "a target: the mesh benchmark's and darcy-inverse-gpu's error",
    ("docs/export.md", "2.1e-08"): "a call's printed output in a code example, not a measurement",
    ("docs/export.md", "2.0e-08"): "a call's printed output in a code example, not a measurement",
    ("docs/export.md", "2.8e-08"): "a call's printed output in a code example, not a measurement",
}

# Results still stated in prose or in hand-written tables, waiting for a record and a rendered table (or a
# link to one): how many per page, and why they have none yet. A count may only fall.
UNTRACED = {
    "docs/results.md": (119, "the rows without a record that follow each rendered table (the mesh tables, the Darcy "
                             "example, the inverse, time marching, one-seed contenders) and the prose about them"),
    "docs/measurements.md": (178, "the log of earlier runs and design measurements, with the machine and date "
                                  "as written down then; no commit, most without a command"),
    "docs/gpus.md": (29, "the H200 checks and the GPU presets' CPU runs, in hand-written tables"),
    "docs/problems/navier-stokes.md": (10, "the data recipe's accuracy (benchmarks/navier_stokes_accuracy.py "
                                           "writes no record)"),
    "docs/problems/meshes.md": (8, "darcy-mesh-quick's figures on two CPUs"),
}


def prose_results() -> dict[str, list[tuple[int, str]]]:
    """``{page: [(line, figure)]}``: the error figures outside rendered tables, less ``NOT_RESULTS``."""
    found = {}
    for path in PROSE_PAGES:
        where = render_tables.shown_path(path)
        figures = render_tables.prose_figures(path.read_text(), where)
        found[where] = [(n, f) for n, f in figures if (where, f) not in NOT_RESULTS]
    return found


def test_prose_states_no_result_figure_outside_a_rendered_table():
    problems = []
    for where, figures in prose_results().items():
        known = UNTRACED.get(where, (0, ""))[0]
        listed = ", ".join(f"{f} (line {n})" for n, f in figures)
        if len(figures) > known:
            problems.append(f"{where}: {len(figures)} result figures outside a rendered table, {known} known: "
                            f"{listed}; put a new one in a table rendered from its record (docs/render_tables.py) "
                            f"or link to the table that has it")
        elif len(figures) < known:
            problems.append(f"{where}: {len(figures)} result figures outside a rendered table: lower its "
                            f"UNTRACED count from {known}")
    assert problems == []


def test_the_allow_list_names_figures_that_are_there():
    present = {(render_tables.shown_path(p), f) for p in PROSE_PAGES
               for _, f in render_tables.prose_figures(p.read_text(), render_tables.shown_path(p))}
    assert set(NOT_RESULTS) <= present, sorted(set(NOT_RESULTS) - present)
    assert set(UNTRACED) <= {render_tables.shown_path(p) for p in PROSE_PAGES}


def test_prose_figures_are_found_outside_tables_only():
    text = ("A prose error of 3.52e-3, a tolerance of 1e-3 and a version 2.13.0.\n"
            "<!-- table: demo-burgers -->\n| m | 3.50e-3 |\n<!-- /table -->\n"
            "```\n# printed 1.7e-05\n```\nand v1.2e-3x is no figure; 4.1e-4 ± 2e-5.\n")
    assert render_tables.prose_figures(text, "page.md") == [(1, "3.52e-3"), (6, "1.7e-05"), (8, "4.1e-4")]
