"""mkdocs hook: the reference pages of the models, the mixers and the config files, generated at build
time from the registries and the config dataclasses of the installed package (never copied by hand).

- ``models/NAME.md`` for every registered model (``petrov.operators.list_models()``): what it is (its
  line from ``petrov models``, its module's docstring), the presets that train it, and its options
  (``[model.options]``): every field of its config dataclass with its type, default and meaning;
- ``mixers/NAME.md`` for every registered mixer: its options (``mixer_options``) likewise;
- ``configs.md``: the tables of a training config (``[data]``, ``[data.generate]``, ``[model]``,
  ``[optim]``, ``[loss]``, ``[run]``) and the settings of ``petrov invert``, key by key.

A field's meaning is the item ``- ``name``: meaning`` of a docstring list in its class or the
nearest base class that has one (a mixer's option: its class, else the mixers package's docstring).
A field without a meaning fails the build, naming it: new options get documented where they are
declared.
"""
from __future__ import annotations

import dataclasses
import inspect
import json
import re
import sys
import typing
from importlib import resources

from mkdocs.structure.files import File

from petrov.cli.catalog import MIXER_SUMMARIES, MODEL_SUMMARIES, mixer_defaults, preset_summary, summary
from petrov.inverse import InversionConfig
from petrov.operators import list_mixers, list_models
from petrov.operators.attention import mixers as mixers_package
from petrov.operators.attention.mixers import MIXERS
from petrov.operators.models import MODELS, config_class
from petrov.train import config as train_config
from petrov.train.config import preset_names, read_toml

_PAGES: dict[str, str] = {}
ITEM = re.compile(r"^- ((?:``\w+``(?:, )?)+): (.*)$")
SCOPED = re.compile(r"\[`([\w.]+)`\]\[\]")


class UndocumentedField(Exception):
    """A config field or mixer option whose meaning no docstring gives."""


# --- meanings from docstrings ---------------------------------------------------------------------

def docstring_items(doc: str | None) -> dict[str, str]:
    """``{name: meaning}`` of the list items ``- ``name``, ``other``: meaning`` of a docstring (a
    meaning runs on over the item's indented continuation lines)."""
    items: dict[str, str] = {}
    names: list[str] = []
    for line in inspect.cleandoc(doc or "").splitlines():
        match = ITEM.match(line)
        if match:
            names = re.findall(r"``(\w+)``", match.group(1))
            items.update(dict.fromkeys(names, match.group(2).strip()))
        elif names and line.startswith("  ") and line.strip():
            items.update({n: items[n] + " " + line.strip() for n in names})
        else:
            names = []
    return items


def absolute_refs(text: str, module_name: str) -> str:
    """``[`name`][]`` cross-references (resolved by mkdocstrings in the scope of the docstring they
    are written in) made absolute for a page outside that scope: ``[`name`][module.name]``."""
    namespace = vars(sys.modules[module_name])

    def absolute(match: re.Match) -> str:
        name = match.group(1)
        if name.startswith("petrov."):
            return match.group(0)
        head, _, rest = name.partition(".")
        obj = namespace.get(head)
        if obj is None:
            return f"``{name}``"
        path = obj.__name__ if inspect.ismodule(obj) else f"{obj.__module__}.{obj.__qualname__}"
        return f"[`{name}`][{path}{'.' + rest if rest else ''}]"

    return SCOPED.sub(absolute, text)


def field_meanings(cls: type) -> dict[str, str]:
    """Each field's meaning from the docstrings of ``cls`` and its bases (the nearest wins)."""
    meanings: dict[str, str] = {}
    for klass in reversed(cls.__mro__):
        own = docstring_items(klass.__dict__.get("__doc__"))
        meanings.update({k: absolute_refs(v, klass.__module__) for k, v in own.items()})
    return meanings


# --- types and defaults as a reader of a TOML file sees them ----------------------------------------

def type_name(annotation: typing.Any) -> str:
    """``Optional[int]`` -> ``int or none``, ``Literal["a", "b"]`` -> ``"a" or "b"``, ``list[int]`` ->
    ``list of int``; a dataclass by its name (a table)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if annotation is type(None):
        return "none"
    if origin is typing.Literal:
        return " or ".join(json.dumps(a) for a in args)
    if origin in (typing.Union, getattr(__import__("types"), "UnionType", None)):
        return " or ".join(type_name(a) for a in args)
    if origin in (list, tuple):
        inner = ", ".join(type_name(a) for a in args if a is not Ellipsis)
        return f"list of {inner}" if origin is list else f"({inner})"
    if origin is dict or annotation is dict:
        return "table"
    return getattr(annotation, "__name__", str(annotation))


def default_text(field: dataclasses.Field) -> str:
    """The default as it is written in TOML (``—`` for none, *required* without a default)."""
    if field.default is not dataclasses.MISSING:
        value = field.default
    elif field.default_factory is not dataclasses.MISSING:
        value = field.default_factory()
    else:
        return "*required*"
    if value is None:
        return "—"
    if dataclasses.is_dataclass(value):
        return "(its table)"
    return f"`{json.dumps(value)}`"


def cell(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def options_table(cls: type, where: str) -> str:
    """The Markdown table of ``cls``'s fields: name, type, default, meaning."""
    hints = typing.get_type_hints(cls)
    meanings = field_meanings(cls)
    missing = [f.name for f in dataclasses.fields(cls) if f.name not in meanings]
    if missing:
        raise UndocumentedField(f"{where}: no docstring says what {', '.join(missing)} of "
                                f"{cls.__module__}.{cls.__qualname__} mean(s); add '- ``name``: meaning' "
                                f"to the docstring of the class that declares it")
    rows = ["| key | type | default | meaning |", "|---|---|---|---|"]
    rows += [f"| `{f.name}` | {cell(type_name(hints[f.name]))} | {cell(default_text(f))} | {cell(meanings[f.name])} |"
             for f in dataclasses.fields(cls)]
    return "\n".join(rows)


# --- pages ----------------------------------------------------------------------------------------

def presets_by_model() -> dict[str, list[str]]:
    """The shipped presets that train each model."""
    found: dict[str, list[str]] = {}
    for name in preset_names():
        found.setdefault(read_toml(name).get("model", {}).get("name", ""), []).append(name)
    return found


def sentence(text: str) -> str:
    """A summary line as a sentence: capitalized, with a full stop."""
    return text[:1].upper() + text[1:].rstrip(".") + "."


def object_path(obj: typing.Any) -> str:
    return f"{obj.__module__}.{obj.__qualname__}"


def model_page(name: str, presets: list[str]) -> str:
    model, config = MODELS.get(name), config_class(name)
    module = sys.modules[model.__module__]
    lines = [f"# {name}", "", sentence(summary(name, MODEL_SUMMARIES, model)), "",
             f"Built by `build_model(\"{name}\", **options)` (model class [`{model.__name__}`][{object_path(model)}], "
             f"config [`{config.__name__}`][{object_path(config)}]); in a training config:", "",
             "```toml", "[model]", f'name = "{name}"', "", "[model.options]   # any of the keys below",
             "```", ""]
    if presets:
        lines += ["Shipped presets that train it (`petrov presets show NAME` prints one):", ""]
        lines += [f"- `{p}`: {preset_summary(p)}" for p in presets] + [""]
    lines += ["## Options", "", f"`petrov models {name}` prints them with their defaults.", "",
              options_table(config, f"model {name}"), "",
              "## How it works", "", f"From [`{module.__name__}`][{module.__name__}]:", "",
              absolute_refs(inspect.getdoc(module) or "", module.__name__), ""]
    return "\n".join(lines)


def mixer_option_table(name: str) -> str:
    defaults = mixer_defaults(name)
    if defaults is None:
        return "Any keyword options (a plugin's mixer)."
    if not defaults:
        return "No options."
    factory = MIXERS.get(name)
    meanings = docstring_items(mixers_package.__doc__)
    for klass in reversed(factory.__mro__ if isinstance(factory, type) else (factory,)):
        meanings.update({k: absolute_refs(v, klass.__module__)
                         for k, v in docstring_items(klass.__dict__.get("__doc__")).items()})
    missing = [k for k in defaults if k not in meanings]
    if missing:
        raise UndocumentedField(f"mixer {name}: no docstring says what option(s) {', '.join(missing)} mean; add "
                                f"'- ``name``: meaning' to the mixer class's docstring")
    rows = ["| option | default | meaning |", "|---|---|---|"]
    rows += [f"| `{k}` | {cell('—' if v is None else '`' + json.dumps(v) + '`')} | {cell(meanings[k])} |"
             for k, v in defaults.items()]
    return "\n".join(rows)


def mixer_page(name: str) -> str:
    factory = MIXERS.get(name)
    module = sys.modules[factory.__module__]
    return "\n".join([
        f"# {name}", "", sentence(summary(name, MIXER_SUMMARIES, factory)), "",
        f"Any attention model takes it: `--set model.options.mixer={name}`; its options go to "
        f"`model.options.mixer_options` (class [`{factory.__name__}`][{object_path(factory)}]).", "",
        "## Options", "", f"`petrov mixers {name}` prints them with their defaults.", "",
        mixer_option_table(name), "",
        "## How it works", "", f"From [`{module.__name__}`][{module.__name__}]:", "",
        absolute_refs(inspect.getdoc(module) or "", module.__name__), ""])


def index_page(title: str, intro: str, rows: list[tuple[str, str]]) -> str:
    table = ["| name | what it is |", "|---|---|"] + [f"| [`{n}`]({n}.md) | {cell(text)} |" for n, text in rows]
    return "\n".join([f"# {title}", "", intro, "", *table, ""])


CONFIG_TABLES = [
    ("[data]", train_config.DataConfig, "Which file, which samples, which resolutions or mesh levels."),
    ("[data.generate]", train_config.GenerateConfig, "How the data file is generated when it does not exist."),
    ("[model]", train_config.ModelConfig, "Which model; `[model.options]` holds the model's own options, "
     "on [each model's page](models/index.md)."),
    ("[optim]", train_config.OptimConfig, "The optimizer and its learning-rate schedule."),
    ("[loss]", train_config.LossConfig, "The training loss and, for marching models, the training mode."),
    ("[run]", train_config.RunConfig, "How the run executes: seed, device, precision, threads, budgets."),
]


def configs_page() -> str:
    example = (resources.files("petrov.train.configs") / "burgers-quick.toml").read_text()
    lines = ["# Config files", "",
             "A training config is a TOML file (or a shipped preset: `petrov presets` lists them) with the "
             "tables below; only `[data]` and `[model]` are required. Every key is checked against the "
             "dataclass behind its table: an unknown or mistyped key is an error naming it. "
             "`--set TABLE.KEY=VALUE` changes any key on the command line (the value is parsed as TOML).", "",
             "The `burgers-quick` preset (`petrov presets show burgers-quick`):", "",
             "```toml", example.rstrip(), "```", ""]
    for table, cls, what in CONFIG_TABLES:
        lines += [f"## `{table}`", "", what + f" ([`{cls.__name__}`][{object_path(cls)}])", "",
                  options_table(cls, table), ""]
    lines += ["## Presets", "", "| preset | what it is for | model |", "|---|---|---|"]
    for name in preset_names():
        model = read_toml(name).get("model", {}).get("name", "")
        link = f"[`{model}`](models/{model}.md)" if model in list_models() else f"`{model}`"
        lines.append(f"| `{name}` | {cell(preset_summary(name))} | {link} |")
    lines += ["", "## Inversion settings", "",
              "`petrov invert ... --set KEY=VALUE` and `petrov.inverse.invert(..., settings={...})` take these "
              f"keys ([`InversionConfig`][{object_path(InversionConfig)}]); the methods read the ones that "
              "concern them.", "", options_table(InversionConfig, "inversion settings"), ""]
    return "\n".join(lines)


def on_config(config):
    _PAGES.clear()
    presets = presets_by_model()
    models, mixers = list_models(), list_mixers()
    for name in models:
        _PAGES[f"models/{name}.md"] = model_page(name, presets.get(name, []))
    _PAGES["models/index.md"] = index_page(
        "Models", "Every registered model (`petrov models`), with its options on its own page. Models take "
        "channels-last grids `(b, *grid, c)` (point-set models: nodes, weights and a mask) and are built by "
        "`build_model(name, **options)` or by the `[model]` table of a training config.",
        [(n, summary(n, MODEL_SUMMARIES, MODELS.get(n))) for n in models])
    for name in mixers:
        _PAGES[f"mixers/{name}.md"] = mixer_page(name)
    _PAGES["mixers/index.md"] = index_page(
        "Attention mixers", "The attention kernels (`petrov mixers`), all with the interface "
        "`(q, k, v, pos, weights) -> z`; every attention model takes any of them by name "
        "(`model.options.mixer`).", [(n, summary(n, MIXER_SUMMARIES, MIXERS.get(n))) for n in mixers])
    _PAGES["configs.md"] = configs_page()
    entries = [{"Config files": "configs.md"},
               {"Models": ["models/index.md"] + [{n: f"models/{n}.md"} for n in models]},
               {"Mixers": ["mixers/index.md"] + [{n: f"mixers/{n}.md"} for n in mixers]}]
    at = next(i for i, e in enumerate(config.nav) if isinstance(e, dict) and "Python API" in e) + 1
    config.nav[at:at] = entries
    return config


def on_files(files, config):
    for path, content in _PAGES.items():
        files.append(File.generated(config, path, content=content))
    return files
