"""Result records: the figures a benchmark measured, one small JSON file per result set,
``benchmarks/results/NAME.json``, committed with the code.  The README's and the docs' result tables are
rendered from them (``docs/render_tables.py``), and ``tests/test_records.py`` checks every record against
the schema below, parses its command with the script's own argument parser, and compares every rendered
table with its record.  A benchmark's ``--out`` JSON keeps everything it measured; the record is the
small summary the tables are drawn from.

A record (``record``: the schema's version; unknown fields are errors)::

    {"record": 1,
     "name": "demo-burgers",                                  # the file's stem
     "metric": "test relative L2, mean over the test samples",  # what the values are
     "commands": ["python examples/burgers.py --out runs/demo-burgers --record"],
     "git": {"commit": "f440d85...", "dirty": false},         # dirty: tracked files differed; null: no checkout
     "device": {"kind": "cpu", "name": "AMD EPYC", "threads": 2},   # a GPU's name where kind is "cuda"
     "software": {"python": "3.12.3", "torch": "2.13.0+cpu", "petrov": "0.2.0"},
     "date": "2026-12-07T18:02:11+00:00",
     "settings": {...},                                       # the script's settings as it ran
     "rows": [{"name": "galerkin1d", "facts": {"parameters": 169729},
               "values": {"256": {"seeds": {"0": 0.0037}}, "512": {...}}}]}

A cell of ``values`` holds the figure per seed (``seeds``: run seed -> value) and, over two or more
seeds, their ``mean`` and sample standard deviation ``std``; ``facts`` are a row's other numbers
(parameters, epochs).  ``commands`` are shell command lines run from the repository root, the script
path relative to it; a result put together from several invocations lists each.

A record transcribed from an earlier write-up (``transcribed_from``: that file) holds what the text
states and nothing more: a cell may carry only the ``mean``, ``std`` and number of seeds ``n`` it
gives, the commit, torch and petrov versions and threads may be null where it gives none
(``source_commit``: the commit of the text transcribed, to check it against), and ``note`` says how
its commands were read from the text.
"""
from __future__ import annotations

import argparse
import contextlib
import datetime
import importlib.util
import json
import math
import platform
import re
import shlex
import statistics
import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable, Iterable, Mapping, Sequence
from unittest import mock

from petrov.common import files, path_checks

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results"
VERSION = 1

# field -> (allowed types, required); nested tables are checked by their own functions below
FIELDS: dict[str, tuple[tuple[type, ...], bool]] = {
    "record": ((int,), True), "name": ((str,), True), "metric": ((str,), True), "commands": ((list,), True),
    "git": ((dict,), True), "device": ((dict,), True), "software": ((dict,), True), "date": ((str,), True),
    "settings": ((dict,), True), "rows": ((list,), True),
    "transcribed_from": ((str,), False), "source_commit": ((str,), False), "note": ((str,), False),
}
GIT_FIELDS = {"commit": (str, type(None)), "dirty": (bool, type(None))}
DEVICE_FIELDS = {"kind": (str,), "name": (str,), "threads": (int, type(None))}
SOFTWARE_FIELDS = {"python": (str, type(None)), "torch": (str, type(None)), "petrov": (str, type(None))}
ROW_FIELDS = {"name", "facts", "values"}
CELL_FIELDS = {"seeds", "mean", "std", "n"}
DEVICE_KINDS = ("cpu", "cuda")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
NAME = re.compile(r"^[a-z0-9][a-z0-9._-]*$")


Values = Mapping[str, Mapping[Any, Mapping[Any, float]]]  # row -> column -> {seed: value}


class RecordError(ValueError):
    """A record that does not hold to the schema, or whose command no longer parses."""


# --- the numbers ----------------------------------------------------------------------------------

def cell(per_seed: Mapping[int | str, float]) -> dict[str, Any]:
    """A measured cell: ``{"seeds": {seed: value}}``, with ``mean`` and the sample ``std`` over two or
    more seeds (seeds as strings, JSON's keys; in seed order)."""
    seeds = {str(k): float(v) for k, v in sorted(per_seed.items(), key=lambda kv: int(kv[0]))}
    out: dict[str, Any] = {"seeds": seeds}
    if len(seeds) > 1:
        out["mean"], out["std"] = statistics.fmean(seeds.values()), statistics.stdev(seeds.values())
    return out


def cell_mean(c: Mapping[str, Any]) -> float:
    """The figure a table shows: the mean over the seeds (the one seed's value for one)."""
    return c["mean"] if "mean" in c else next(iter(c["seeds"].values()))


def cell_n(c: Mapping[str, Any]) -> int:
    """How many seeds the cell's figure is over."""
    return c.get("n", len(c.get("seeds", {})))


# --- where and how it was measured ----------------------------------------------------------------

def command_line(argv: Sequence[str] | None = None) -> str:
    """``python SCRIPT ARGS`` as a shell line (quoted), the script relative to the repository root."""
    argv = list(sys.argv if argv is None else argv)
    script = Path(argv[0]).resolve()
    with contextlib.suppress(ValueError):
        script = script.relative_to(ROOT)
    return shlex.join(["python", script.as_posix(), *argv[1:]])


def git_state(root: Path = ROOT) -> dict[str, Any]:
    """The checkout's commit and whether tracked files differ from it (the records themselves aside);
    both None outside a git checkout."""
    def git(*args: str) -> str | None:
        try:
            proc = subprocess.run(["git", *args], cwd=root, capture_output=True, text=True, timeout=30)
        except (OSError, subprocess.TimeoutExpired):
            return None
        return proc.stdout if proc.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if commit is None:
        return {"commit": None, "dirty": None}
    status = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)benchmarks/results")
    return {"commit": commit.strip(), "dirty": None if status is None else bool(status.strip())}


def device_info(device: Any = "cpu", threads: int | None = None) -> dict[str, Any]:
    """The device the figures were measured on: the CPU's model, or the GPU's name for a CUDA device;
    ``threads``: torch's CPU threads (this process's unless given, e.g. one per pinned worker)."""
    import torch

    if device == "auto":  # the scripts' --device default: CUDA where there is one
        device = "cuda" if torch.cuda.is_available() else "cpu"
    device = torch.device(device)
    if device.type == "cuda":
        name = torch.cuda.get_device_name(device)
    else:
        name = _benchmark_common().cpu_model()
    return {"kind": device.type, "name": name, "threads": threads or torch.get_num_threads()}


def software() -> dict[str, Any]:
    import torch

    return {"python": platform.python_version(), "torch": torch.__version__,
            "petrov": _benchmark_common().package_version("petrov")}


def _benchmark_common() -> ModuleType:
    """benchmarks/_common.py (examples/ has a ``_common`` of its own, which may hold the name)."""
    return load_script(HERE / "_common.py")


# --- writing and reading --------------------------------------------------------------------------

def write_record(name: str, values: Values, *, metric: str,
                 facts: Mapping[str, Mapping[str, Any]] | None = None, settings: Mapping[str, Any] | None = None,
                 command: str | Sequence[str] | None = None, device: Any = "cpu", threads: int | None = None,
                 directory: str | Path | None = None) -> Path:
    """Write ``directory/NAME.json`` atomically and return its path.

    ``values``: row -> column -> {seed: value} (rows and columns in the table's order); ``facts``: row ->
    its other numbers; ``command``: the command line(s), by default this process's (:func:`command_line`);
    ``device``/``threads``: what ran the measurement (see :func:`device_info`); ``directory``: by default
    :data:`RESULTS`.  The record is checked against the schema before it is written."""
    commands = [command_line()] if command is None else [command] if isinstance(command, str) else list(command)
    record = {
        "record": VERSION, "name": name, "metric": metric, "commands": commands, "git": git_state(),
        "device": device_info(device, threads), "software": software(),
        "date": datetime.datetime.now().astimezone().isoformat(timespec="seconds"),
        "settings": json.loads(json.dumps(dict(settings or {}), default=str)),
        "rows": [{"name": row, "facts": dict((facts or {}).get(row, {})),
                  "values": {str(col): cell(seeds) for col, seeds in cols.items()}} for row, cols in values.items()],
    }
    check_record(record)
    path = Path(RESULTS if directory is None else directory) / f"{name}.json"
    path_checks.ensure_dir(path.parent, "records directory")
    return files.write_json(path, record)


def try_write_record(name: str, values: Values, **options: Any) -> Path | None:
    """:func:`write_record` at the end of a benchmark: prints the path written, or why no record was
    (no figure to record, a non-finite one) without failing the run, whose ``--out`` JSON holds it all."""
    try:
        path = write_record(name, values, **options)
    except (RecordError, OSError) as err:
        print(f"no record {name!r} written: {err}")
        return None
    print(f"wrote the record {path}")
    return path


def seed_table(runs: Iterable[Mapping[str, Any]], row: Callable[[Mapping[str, Any]], str],
               columns: Callable[[Mapping[str, Any]], Mapping[Any, float]]) -> dict[str, dict[str, dict[int, float]]]:
    """``row -> column -> {seed: value}`` from a benchmark's runs (each with its ``"seed"``), rows and
    columns in the order the runs give them; runs with an ``"error"`` are left out."""
    out: dict[str, dict[str, dict[int, float]]] = {}
    for run in runs:
        if "error" in run:
            continue
        for col, value in columns(run).items():
            out.setdefault(row(run), {}).setdefault(str(col), {})[run["seed"]] = value
    return out


def read_record(path: str | Path) -> dict[str, Any]:
    """A record file, checked (:class:`RecordError` naming the file and what is wrong)."""
    path = Path(path)
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        raise RecordError(f"{path}: not a readable JSON record ({err})") from None
    try:
        check_record(record)
    except RecordError as err:
        raise RecordError(f"{path}: {err}") from None
    if record["name"] != path.stem:
        raise RecordError(f"{path}: its name is {record['name']!r}, not the file's {path.stem!r}")
    return record


def read_records(directory: str | Path = RESULTS) -> dict[str, dict[str, Any]]:
    """Every record in ``directory``, by name."""
    return {p.stem: read_record(p) for p in sorted(Path(directory).glob("*.json"))}


# --- the schema -----------------------------------------------------------------------------------

def check_record(record: Any) -> None:
    """Raise :class:`RecordError` with every way ``record`` departs from the schema (module docstring)."""
    problems = record_problems(record)
    if problems:
        raise RecordError("; ".join(problems))


def record_problems(record: Any) -> list[str]:
    if not isinstance(record, dict):
        return [f"a record is a JSON object, not {type(record).__name__}"]
    out = [f"unknown field {k!r}" for k in record if k not in FIELDS]
    for key, (types, required) in FIELDS.items():
        if key not in record:
            out += [f"missing field {key!r}"] if required else []
        elif not isinstance(record[key], types) or isinstance(record[key], bool) and bool not in types:
            out.append(f"{key!r} must be {' or '.join(t.__name__ for t in types)}, not {type(record[key]).__name__}")
    if out:
        return out
    transcribed = "transcribed_from" in record
    if record["record"] != VERSION:
        out.append(f"schema version {record['record']} (this code reads {VERSION})")
    if not NAME.match(record["name"]):
        out.append(f"name {record['name']!r}: lower-case letters, digits, '.', '_' and '-' only")
    if not DATE.match(record["date"]):
        out.append(f"date {record['date']!r} is not ISO 8601 (YYYY-MM-DD...)")
    if not record["commands"] or not all(isinstance(c, str) and c.strip() for c in record["commands"]):
        out.append("'commands' must list one or more command lines")
    out += _table_problems("git", record["git"], GIT_FIELDS)
    out += _table_problems("device", record["device"], DEVICE_FIELDS)
    out += _table_problems("software", record["software"], SOFTWARE_FIELDS)
    if record["device"].get("kind") not in DEVICE_KINDS:
        out.append(f"device kind {record['device'].get('kind')!r} is not one of {DEVICE_KINDS}")
    if not transcribed:
        out += [f"{k} is null in a measured record" for k in ("device.threads", "software.torch")
                if record[k.split(".")[0]].get(k.split(".")[1]) is None]
    if not record["rows"]:
        out.append("'rows' is empty")
    names = [r.get("name") for r in record["rows"] if isinstance(r, dict)]
    out += [f"row {n!r} appears twice" for n in sorted({n for n in names if names.count(n) > 1})]
    for i, row in enumerate(record["rows"]):
        out += _row_problems(i, row, transcribed)
    return out


def _table_problems(where: str, table: dict, fields: Mapping[str, tuple[type, ...]]) -> list[str]:
    out = [f"unknown field {where}.{k}" for k in table if k not in fields]
    for key, types in fields.items():
        if key not in table:
            out.append(f"missing field {where}.{key}")
        elif not isinstance(table[key], types) or isinstance(table[key], bool) and bool not in types:
            out.append(f"{where}.{key} must be {' or '.join(t.__name__ for t in types)}")
    return out


def _row_problems(i: int, row: Any, transcribed: bool) -> list[str]:
    if not isinstance(row, dict) or not isinstance(row.get("name"), str) or not isinstance(row.get("values"), dict):
        return [f"row {i} must be an object with a 'name' and 'values'"]
    where = f"row {row['name']!r}"
    out = [f"{where}: unknown field {k!r}" for k in row if k not in ROW_FIELDS]
    if not isinstance(row.get("facts", {}), dict):
        out.append(f"{where}: 'facts' must be an object")
    if not row["values"]:
        out.append(f"{where}: no values")
    for col, c in row["values"].items():
        out += [f"{where}, column {col!r}: {p}" for p in _cell_problems(c, transcribed)]
    return out


def _finite(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _cell_problems(c: Any, transcribed: bool) -> list[str]:
    if not isinstance(c, dict):
        return ["a cell must be an object"]
    out = [f"unknown field {k!r}" for k in c if k not in CELL_FIELDS]
    seeds = c.get("seeds", {})
    if not isinstance(seeds, dict) or not all(re.fullmatch(r"-?\d+", k) for k in seeds):
        return out + ["'seeds' must map seed numbers to values"]
    out += [f"seed {k}: {v!r} is not a finite number" for k, v in seeds.items() if not _finite(v)]
    out += [f"{k} {c[k]!r} is not a finite number" for k in ("mean", "std") if k in c and not _finite(c[k])]
    if "std" in c and _finite(c["std"]) and c["std"] < 0:
        out.append("std < 0")
    if "n" in c and not (isinstance(c["n"], int) and not isinstance(c["n"], bool) and c["n"] >= max(1, len(seeds))):
        out.append(f"n {c['n']!r} must be a whole number >= the seeds listed")
    if not seeds and "mean" not in c:
        out.append("no value: neither 'seeds' nor 'mean'")
    if out or transcribed:
        return out  # a transcription keeps the text's rounded mean and std, not recomputed ones
    if not seeds:
        return ["a measured cell lists its value per seed ('seeds')"]
    if "n" in c and c["n"] != len(seeds):
        return [f"n {c['n']} differs from the {len(seeds)} seeds listed"]
    if len(seeds) > 1:
        expected = cell(seeds)
        for key in ("mean", "std"):
            if key not in c:
                out.append(f"{key} of the {len(seeds)} seeds is missing")
            elif not math.isclose(c[key], expected[key], rel_tol=1e-9, abs_tol=1e-300):
                out.append(f"{key} {c[key]!r} is not the seeds' {expected[key]!r}")
    elif "mean" in c and c["mean"] != next(iter(seeds.values())):
        out.append(f"mean {c['mean']!r} is not the one seed's value")
    return out


# --- the command ----------------------------------------------------------------------------------

class _Parsed(Exception):
    """Raised in place of running a script past its argument parsing; carries the parser."""

    def __init__(self, parser: argparse.ArgumentParser):
        super().__init__("parsed")
        self.parser = parser


def load_script(path: str | Path) -> ModuleType:
    """Import the script at ``path`` as a module, without running it (its ``__main__`` block stays
    out), with its own folder's helpers first on the path: ``_common`` is benchmarks/_common.py for a
    benchmark and examples/_common.py for an example, whichever was imported before."""
    path = Path(path).resolve()
    name = "_petrov_script_" + re.sub(r"\W", "_", path.with_suffix("").as_posix())
    if name in sys.modules:
        return sys.modules[name]
    held = sys.modules.pop("_common", None)
    sys.path.insert(0, str(path.parent))
    try:
        spec = importlib.util.spec_from_file_location(name, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except BaseException:
            del sys.modules[name]
            raise
    finally:
        sys.path.remove(str(path.parent))
        sys.modules.pop("_common", None)
        if held is not None:
            sys.modules["_common"] = held
    return module


def split_command(command: str, root: Path = ROOT) -> tuple[Path, list[str]]:
    """The script (a ``.py`` file under ``root``, the repository) and its arguments in a recorded
    command line."""
    words = shlex.split(command)
    at = next((i for i, w in enumerate(words) if w.endswith(".py")), None)
    if at is None:
        raise RecordError(f"{command!r}: no python script in the command")
    script = Path(root) / words[at]
    if not script.is_file():
        raise RecordError(f"{command!r}: {words[at]} is not a script of the repository")
    return script, words[at + 1:]


def parse_command(command: str, root: Path = ROOT) -> argparse.Namespace:
    """Parse a recorded command's arguments with its script's own argument parser, running nothing
    else: the script's ``main(argv)`` is called with ``ArgumentParser.parse_args`` stopped at its first
    call, and that parser (every option the script has now) reads the recorded arguments.  The checks a
    script makes after parsing (e.g. ``--jobs`` against this machine's cores) are not made.  Raises
    :class:`RecordError` naming what no longer parses."""
    script, argv = split_command(command, root)
    shown = script.relative_to(root).as_posix()
    module = load_script(script)
    if not callable(getattr(module, "main", None)):
        raise RecordError(f"{shown} has no main(argv) to take its parser from")

    def stop(parser, args=None, namespace=None):
        raise _Parsed(parser)

    try:
        with mock.patch.object(argparse.ArgumentParser, "parse_args", stop):
            module.main(list(argv))
    except _Parsed as parsed:
        parser = parsed.parser
    else:
        raise RecordError(f"{shown}: main(argv) returned without parsing its arguments")

    def error(message: str):
        raise RecordError(f"{command!r} no longer parses: {message}")

    def leave(status: int = 0, message: str | None = None):
        raise RecordError(f"{command!r} makes the parser exit ({(message or '').strip() or f'status {status}'})")

    with mock.patch.object(parser, "error", error), mock.patch.object(parser, "exit", leave):
        return parser.parse_args(list(argv))


__all__ = ["RESULTS", "ROOT", "RecordError", "cell", "cell_mean", "cell_n", "check_record", "command_line",
           "device_info", "git_state", "load_script", "parse_command", "read_record", "read_records",
           "record_problems", "seed_table", "split_command", "try_write_record", "write_record"]
