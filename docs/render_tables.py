"""The result tables of the README and the docs, rendered from the result records in benchmarks/results/
(benchmarks/records.py), so that a printed figure is the one its command measured.

    python docs/render_tables.py            # rewrite every marked table in place (`make tables`)
    python docs/render_tables.py --check    # exit 1 naming the first table that differs (`make docs`)

A table sits in a Markdown file between two marker lines; everything between them is this script's:

    <!-- table: demo-burgers -->
    (a caption line naming the record, its command, device, versions, commit and date; then the table)
    <!-- /table -->

The files searched are README.md, benchmarks/README.md and every page under docs/ (or the files given).
``--check`` compares each region with its rendering and names the file, the table and the first line
that differs; without it the regions are rewritten (atomically; the rest of the file is left as it is).

Adding a table takes one function and a marker.  The function gets the records it names (as dicts, in
that order) and returns the Markdown lines of the table; the caption lines are added for it:

    @table("accuracy-mesh", "accuracy-mesh-2026-11-27")
    def accuracy_mesh(record):
        cols = list(record["rows"][0]["values"])
        return [*header(["model", *cols]), *(row([r["name"], *(spread(r["values"][c]) for c in cols)])
                                             for r in record["rows"])]

then put ``<!-- table: accuracy-mesh -->`` and ``<!-- /table -->`` where it belongs and run
``make tables``.  ``tests/test_records.py`` fails while a region differs from its rendering.  With
``brief=True`` (the README's ``headline``) the caption is one short line for all the table's records.
A problem joins the README's headline with one line in ``HEADLINE``: its label and its records (each
stating its ``train_resolution``), e.g. ``("Navier-Stokes", ("ns-marching",), 3)``.
"""
from __future__ import annotations

import argparse
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))

import records  # noqa: E402

from petrov.common.files import atomic_write  # noqa: E402
from petrov.common.registry import Registry  # noqa: E402

START = re.compile(r"^<!-- table: (\S+) -->$")
END = "<!-- /table -->"


@dataclass(frozen=True)
class Table:
    records: tuple[str, ...]  # the record names the function takes, in order
    render: Callable[..., list[str]]
    brief: bool = False  # one short caption line for all its records (a front page), not one per record


TABLES: Registry[Table] = Registry("table")


def table(name: str, *record_names: str, brief: bool = False) -> Callable:
    """Register ``fn(*records) -> lines`` as the table ``name``, drawn from the records named."""
    def add(fn: Callable[..., list[str]]) -> Callable[..., list[str]]:
        TABLES.register(name)(Table(record_names, fn, brief))
        return fn

    return add


class TableError(ValueError):
    """A marker without its end, an unknown table, a record missing or invalid."""


# --- formatting -----------------------------------------------------------------------------------

def sci(x: float, digits: int = 3) -> str:
    """``x`` in scientific notation with ``digits`` significant digits, exponent unpadded: 3.70e-3."""
    mantissa, exponent = f"{x:.{digits - 1}e}".split("e")
    return f"{mantissa}e{int(exponent)}"


def spread(c: dict[str, Any], digits: int = 3) -> str:
    """A cell as tables show it: the mean, and ``± std`` over several seeds."""
    text = sci(records.cell_mean(c), digits)
    return text + (f" ± {sci(c['std'], 2)}" if records.cell_n(c) > 1 and "std" in c else "")


def row(cells: Sequence[Any]) -> str:
    return "| " + " | ".join(str(c) for c in cells) + " |"


def header(cells: Sequence[Any]) -> list[str]:
    return [row(cells), "|" + "---|" * len(cells)]


def resolution(col: str, trained: Any) -> str:
    return f"{col} (trained)" if str(col) == str(trained) else str(col)


def short_commit(record: dict[str, Any]) -> str:
    commit = record["git"]["commit"]
    if commit is None and "transcribed_from" not in record:
        return "commit unknown (not measured in a git checkout)"
    if commit is None:
        source = record.get("source_commit")
        return "commit not recorded" + (f" (figures as written at {source[:7]})" if source else "")
    return f"commit {commit[:7]}" + (" with local changes" if record["git"]["dirty"] else "")


def brief_provenance(recs: Sequence[dict[str, Any]]) -> str:
    """One caption line for several records: each one's file, how it was made, device and date."""
    def one(r: dict[str, Any]) -> str:
        how = f"transcribed from {r['transcribed_from']}" if "transcribed_from" in r else "measured"
        return f"`{r['name']}` ({how}, {r['device']['name']}, {r['date'][:10]})"

    return (f"*From the records in `benchmarks/results/`: {', '.join(one(r) for r in recs)}; their commands, "
            f"commits and settings are in the records and on the docs' Results page.*")


def provenance(record: dict[str, Any]) -> str:
    """The caption line of one record: where its figures come from."""
    device = record["device"]
    threads = device["threads"]
    where = device["name"] + (f" ({threads} thread{'s' if threads != 1 else ''})" if threads else "")
    soft = ", ".join(f"{k} {v}" for k, v in record["software"].items() if v and k != "python")
    commands = " and ".join(f"`{c}`" for c in record["commands"])
    how = f"transcribed from {record['transcribed_from']}:" if "transcribed_from" in record else "measured by"
    parts = [f"Record `benchmarks/results/{record['name']}.json`, {how} {commands} on {where}", soft,
             short_commit(record), record["date"][:10]]
    return "*" + "; ".join(p for p in parts if p) + ".*"


# --- the tables -----------------------------------------------------------------------------------

@table("demo-burgers", "demo-burgers")
def demo_burgers(record: dict[str, Any]) -> list[str]:
    """`make demo`'s figure: the test relative L2 per resolution of the one trained model."""
    first = record["rows"][0]
    cols = list(first["values"])
    lines = header(["model", "parameters", "epochs", *(resolution(c, first["facts"].get("train_resolution"))
                                                       for c in cols)])
    for r in record["rows"]:
        f = r["facts"]
        lines.append(row([f"`{r['name']}` (`{record['settings'].get('preset', '?')}`, seed "
                          f"{', '.join(next(iter(r['values'].values()))['seeds'])})", f"{f['parameters']:,}",
                          f["epochs"], *(sci(records.cell_mean(r["values"][c])) for c in cols)]))
    return lines


def trained_column(record: dict[str, Any]) -> str:
    """The column of the training resolution: the record's ``settings.train_resolution``, else its first
    row's ``facts.train_resolution`` (a benchmark writes one of them)."""
    trained = record["settings"].get("train_resolution", record["rows"][0]["facts"].get("train_resolution"))
    if trained is None:
        raise TableError(f"record {record['name']!r} states no train_resolution (settings or its first row's facts)")
    return str(trained)


def seeds_table(recs: Sequence[dict[str, Any]], digits: int, per_seed_at: str | None = None) -> list[str]:
    """Rows of several records, one column per resolution: mean ± std over the seeds; with
    ``per_seed_at`` a last column with each seed's value there (where the record states them)."""
    cols = list(recs[0]["rows"][0]["values"])
    trained = trained_column(recs[0])
    lines = header(["model", "parameters", "epochs (per seed)", *(resolution(c, trained) for c in cols),
                    *([f"per seed at {per_seed_at}"] if per_seed_at else [])])
    for rec in recs:
        for r in rec["rows"]:
            f = r["facts"]
            epochs = ", ".join(f"{e:g}" for e in f.get("epochs", [])) or "—"
            counts = sorted(set(f["parameters"] if isinstance(f.get("parameters"), list) else [f.get("parameters")]))
            params = ", ".join(f"{c:,}" for c in counts) if counts != [None] else "—"  # one count per seed, or one
            cells = [r["name"], params, epochs, *(spread(r["values"][c], digits) if c in r["values"] else "—"
                                                  for c in cols)]
            if per_seed_at:
                seeds = r["values"].get(per_seed_at, {}).get("seeds", {})
                cells.append(", ".join(f"{sci(v, digits)} (seed {s})" for s, v in seeds.items()) or "—")
            lines.append(row(cells))
    return lines


@table("accuracy-darcy-seeds", "accuracy-darcy-seeds-2026-11-28", "accuracy-darcy-performer-2026-11-28")
def accuracy_darcy_seeds(*recs: dict[str, Any]) -> list[str]:
    """Darcy at an equal 20-minute CPU budget, mean ± std of the test relative L2 over seeds 0-2."""
    return seeds_table(recs, digits=4)


@table("accuracy-burgers-seeds", "accuracy-burgers-seeds-2026-11-28")
def accuracy_burgers_seeds(record: dict[str, Any]) -> list[str]:
    """Burgers at an equal 20-minute CPU budget, mean ± std over seeds 0-2, each seed at 1024."""
    return seeds_table([record], digits=3, per_seed_at=trained_column(record))


@table("marching-burgers", "marching-burgers-2026-11-28")
def marching_burgers(record: dict[str, Any]) -> list[str]:
    """Time marching on Burgers trajectories at an equal CPU budget: the rollout relative L2 at t = 1 per
    resolution, one run per model."""
    return seeds_table([record], digits=4)


@table("mesh-operators", "mesh-operators-2026-11-27")
def mesh_operators(record: dict[str, Any]) -> list[str]:
    """Darcy on irregular meshes at an equal CPU budget, mean ± std over the seeds on every level, and each
    level's mean against the trained level's (how far the operator is from one across meshes)."""
    lines = seeds_table([record], digits=3)
    trained = trained_column(record)
    others = [c for c in record["rows"][0]["values"] if c != trained]
    lines[0] = lines[0][:-1] + "".join(f"| {c} / {trained} " for c in others) + "|"
    lines[1] += "---|" * len(others)
    for i, r in enumerate(record["rows"], start=2):
        at = records.cell_mean(r["values"][trained])
        lines[i] = lines[i][:-1] + "".join(f"| {records.cell_mean(r['values'][c]) / at:.3f} " for c in others) + "|"
    return lines


@table("navier-stokes-1e5", "navier-stokes-1e5")
def navier_stokes_1e5(record: dict[str, Any]) -> list[str]:
    """Navier–Stokes at nu = 1e-5 (FNO's benchmark) at an equal CPU budget: the relative L2 of the predicted
    space-time block per resolution, mean ± std over the seeds."""
    return seeds_table([record], digits=3)


# The README's headline: (the problem's label, the records of its rows, significant digits).  A row per
# row of each record, its figure at the record's training resolution; the label gets the budget where the
# record's settings give one.  A new problem (Navier-Stokes, once its record is in benchmarks/results/) is
# one more line here; its record names its training resolution as the others do.
HEADLINE: tuple[tuple[str, tuple[str, ...], int], ...] = (
    ("Burgers, `make demo`", ("demo-burgers",), 3),
    ("Burgers", ("accuracy-burgers-seeds-2026-11-28",), 3),
    ("Darcy", ("accuracy-darcy-seeds-2026-11-28", "accuracy-darcy-performer-2026-11-28"), 4),
    ("Navier–Stokes ν = 1e-5", ("navier-stokes-1e5",), 3),
)


def headline_problem(label: str, record: dict[str, Any]) -> str:
    """``label``, the budget where the record's settings give one, and its resolutions: "Darcy, 20 CPU
    minutes each (trained at 85, tested at 61, 85, 141, 211)"."""
    budget = record["settings"].get("budget_minutes")
    device = "GPU" if record["device"]["kind"] == "cuda" else "CPU"
    label += f", {budget:g} {device} minutes each" if budget else ""
    return f"{label} (trained at {trained_column(record)}, tested at {', '.join(record['rows'][0]['values'])})"


def headline_rows(label: str, recs: Sequence[dict[str, Any]], digits: int) -> list[str]:
    """One line per model: the figure at the training resolution, the worst other resolution against it
    ("—" where the record has no other), the seeds."""
    out = []
    for rec in recs:
        trained = trained_column(rec)
        for r in rec["rows"]:
            if trained not in r["values"]:
                raise TableError(f"record {rec['name']!r}, row {r['name']!r}: no value at the training "
                                 f"resolution {trained}")
            at = records.cell_mean(r["values"][trained])
            others = [records.cell_mean(c) for col, c in r["values"].items() if col != trained]
            worst = f"{max(others) / at:.2f}" if others else "—"
            out.append(row([headline_problem(label, recs[0]), f"`{r['name']}`",
                            spread(r["values"][trained], digits) + f" ({trained})", worst,
                            records.cell_n(r["values"][trained])]))
    return out


@table("headline", *(name for _, names, _ in HEADLINE for name in names), brief=True)
def headline(*recs: dict[str, Any]) -> list[str]:
    """The README's: each problem's figures at the training resolution, and the worst of the other
    resolutions against it (how far the operator is from one across grids)."""
    by_name = {r["name"]: r for r in recs}
    return [*header(["problem", "model", "relative L² at the training resolution", "worst other resolution / "
                     "training", "seeds"]),
            *(line for label, names, digits in HEADLINE
              for line in headline_rows(label, [by_name[n] for n in names], digits))]


# --- the regions ----------------------------------------------------------------------------------

def render(name: str, results: Path = records.RESULTS) -> list[str]:
    """The lines between the markers of table ``name``: a caption line per record, then the table."""
    try:
        spec = TABLES.get(name)
    except KeyError as err:
        raise TableError(str(err.args[0])) from None
    recs = []
    for rec in spec.records:
        path = Path(results) / f"{rec}.json"
        if not path.is_file():
            raise TableError(f"table {name!r} is drawn from {path}, which does not exist: run the command that "
                             f"writes it")
        try:
            recs.append(records.read_record(path))
        except records.RecordError as err:
            raise TableError(f"table {name!r}: {err}") from None
    captions = ["", brief_provenance(recs)] if spec.brief else [line for r in recs for line in ("", provenance(r))]
    return [*captions, "", *spec.render(*recs), ""]


def regions(lines: Sequence[str], where: str) -> list[tuple[str, int, int]]:
    """``(name, start, end)`` of every marked table: the indices of its two marker lines (markers in a
    fenced code block are text, not tables)."""
    found, open_, fenced = [], None, False
    for i, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            fenced = not fenced
        if fenced:
            continue
        start = START.match(line.strip())
        if start:
            if open_:
                raise TableError(f"{where}:{i + 1}: table {start.group(1)!r} starts inside table {open_[0]!r} "
                                 f"(line {open_[1] + 1}); close it with {END}")
            open_ = (start.group(1), i)
        elif line.strip() == END:
            if not open_:
                raise TableError(f"{where}:{i + 1}: {END} without a table marker above it")
            found.append((open_[0], open_[1], i))
            open_ = None
    if open_:
        raise TableError(f"{where}:{open_[1] + 1}: table {open_[0]!r} has no {END} below it")
    return found


ERROR_FIGURE = re.compile(r"(?<![\w.])\d\.\d+e-\d+")  # an error as the tables print one: 3.52e-3, 1.017e-3


def prose_figures(text: str, where: str) -> list[tuple[int, str]]:
    """``(line number, figure)`` of every error figure (``ERROR_FIGURE``) of ``text`` outside its marked
    tables: figures that no record backs, unless they are not results (a published peer's, a constant)."""
    lines = text.split("\n")
    inside = {i for _, start, end in regions(lines, where) for i in range(start, end + 1)}
    return [(i + 1, m.group()) for i, line in enumerate(lines) if i not in inside
            for m in ERROR_FIGURE.finditer(line)]


def rendered(text: str, where: str, results: Path = records.RESULTS) -> str:
    """``text`` with every marked table rendered from its records."""
    lines = text.split("\n")
    for name, start, end in reversed(regions(lines, where)):
        lines[start + 1:end] = render(name, results)
    return "\n".join(lines)


def difference(text: str, where: str, results: Path = records.RESULTS) -> str | None:
    """None when every table of ``text`` is its rendering; else which table and line differ first."""
    lines = text.split("\n")
    for name, start, end in regions(lines, where):
        want, have = render(name, results), lines[start + 1:end]
        if want == have:
            continue
        at = next((i for i, (a, b) in enumerate(zip(have, want)) if a != b), min(len(have), len(want)))
        shown = lambda seq: repr(seq[at]) if at < len(seq) else "(the table ends)"  # noqa: E731
        return (f"{where}:{start + 2 + at}: table {name!r} differs from its records at its line {at + 1}:\n"
                f"  the file has     {shown(have)}\n  the records give {shown(want)}\n"
                f"run `make tables` (python docs/render_tables.py) to rewrite it")
    return None


def default_files() -> list[Path]:
    return [ROOT / "README.md", ROOT / "benchmarks" / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]


def shown_path(path: Path) -> str:
    try:
        return str(path.resolve().relative_to(ROOT))
    except ValueError:
        return str(path)


def check(paths: Sequence[Path], results: Path = records.RESULTS) -> list[str]:
    """One message per file whose tables differ from their records (empty: all agree)."""
    out = []
    for path in paths:
        diff = difference(path.read_text(), shown_path(path), results)
        if diff:
            out.append(diff)
    return out


def rewrite(paths: Sequence[Path], results: Path = records.RESULTS) -> list[Path]:
    """Render every marked table in place; returns the files that changed."""
    changed = []
    for path in paths:
        text = path.read_text()
        new = rendered(text, shown_path(path), results)
        if new != text:
            atomic_write(path, new)
            changed.append(path)
    return changed


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("files", nargs="*", type=Path, help="Markdown files (default: README.md, benchmarks/README.md, "
                                                       "docs/**/*.md)")
    p.add_argument("--check", action="store_true", help="change nothing; exit 1 when a table differs from its records")
    p.add_argument("--results", type=Path, default=records.RESULTS, help="the records' folder (default %(default)s)")
    args = p.parse_args(argv)
    paths = args.files or default_files()
    try:
        if args.check:
            problems = check(paths, args.results)
            for message in problems:
                print(message, file=sys.stderr)
            return 1 if problems else 0
        for path in rewrite(paths, args.results):
            print(f"rendered the tables of {shown_path(path)}")
    except (TableError, OSError) as err:
        print(f"render_tables: {err}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
