"""Shipped operators (petrov.pretrained): honest cards, intact weights, and `pretrained:NAME` wherever a run
directory is taken.

The tests of the shipped operators are parametrized over the cards in the package (none until `make
pretrained` has built them: they then collect nothing). The mechanism is tested on two tiny operators
built by the same build path (`petrov.pretrained.build.build`: `petrov train`, `petrov evaluate`, packing)
into a temporary folder that stands in for the package's.

The honesty rule (`check_fresh_samples`): fresh samples of the operator's data law, drawn with a seed its
training file never used (sample i of seed s depends on (s, i) alone, so no fresh sample is a training or
validation sample), are scored at every resolution of the card. With the card's mean error mu and
per-sample spread sigma over its n_card test samples, the fresh mean m over n samples must satisfy
|m - mu| <= 3 sigma sqrt(1/n + 1/n_card): both means carry sampling error, each of about sigma / sqrt(count).
"""
from __future__ import annotations

import json
import math
import shlex
import shutil
import warnings
from pathlib import Path

import numpy as np
import pytest
import torch

import petrov.pretrained as pretrained
from petrov.cli.main import build_parser
from petrov.datasets import generate_dataset
from petrov.datasets.identity import data_identity
from petrov.evaluate import evaluate_resolutions
from petrov.common import shipped
from petrov.common.shipped import CARD, CONFIG, WEIGHTS
from petrov.inverse import invert, runner
from petrov.pretrained import build
from petrov.pretrained.card_text import generate_command
from petrov.pretrained.cards import card_from_dict, card_to_dict
from petrov.pretrained.recipes import SHIPPED, Recipe
from petrov.train import NormalizedOperator, load_config, load_operator
from petrov.train.checkpoint import load_run_checkpoint
from petrov.train.config import config_differences, config_to_dict, load_config_json

SHIPPED_NAMES = pretrained.names()
FRESH_SEED = 9173  # never a training file's seed (checked against the card)
N_FRESH = 16
SIZE_BUDGET = 30e6  # bytes: every shipped file together

TINY_DARCY = """
[data]
path = "data/tiny-darcy-21.h5"
train_resolution = 21
eval_resolutions = [21, 11]
n_train = 16
n_val = 8
n_test = 16

[data.generate]
kind = "darcy"
n_samples = 40
resolution = 21
seed = 2

[model]
name = "fno2d"
options = { width = 6, modes = 3, n_layers = 1, proj_hidden = 8 }

[optim]
epochs = 4
batch_size = 4
min_warmup_steps = 0

[run]
device = "cpu"
progress = false
"""

TINY_INVERSE = """
[data]
path = "data/tiny-darcy-21.h5"
kind = "darcy-inverse"
train_resolution = 21
eval_resolutions = [21]
coarse_resolution = 6
noise = 0.01
n_train = 16
n_val = 8
n_test = 16

[data.generate]
kind = "darcy"
n_samples = 40
resolution = 21
seed = 2

[model]
name = "galerkin2d_inverse"
options = { coarse_size = 6, d_model = 8, n_layers = 1 }

[optim]
epochs = 2
batch_size = 4
min_warmup_steps = 0

[run]
device = "cpu"
progress = false
"""


def tiny_recipe(name: str, preset: Path) -> Recipe:
    return Recipe(name=name, preset=str(preset), overrides=("optim.lr=2e-3",), summary=f"tiny {name} for the tests",
                  input="a", output="u", domain="the unit square", not_for=("anything real",), expected="nothing")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Two tiny operators (forward fno2d, inverse galerkin2d_inverse) built by the build path into a
    temporary registry: (registry folder, work folder, the training data file)."""
    work = tmp_path_factory.mktemp("pretrained-work")
    dest = work / "shipped"
    for name, text in (("tiny-darcy", TINY_DARCY), ("tiny-inverse", TINY_INVERSE)):
        (work / f"{name}.toml").write_text(text)
        build.build(tiny_recipe(name, work / f"{name}.toml"), work, dest)
    return dest, work, work / "data" / "tiny-darcy-21.h5"


@pytest.fixture
def tiny_registry(tiny, monkeypatch):
    """The tiny operators as the package's shipped ones."""
    monkeypatch.setattr(shipped, "SHIPPED_DIR", tiny[0])
    return tiny


# --- the rules every shipped card and weights file must keep --------------------------------------

_FRESH: dict[str, Path] = {}


def fresh_data(card, folder: Path) -> Path:
    """``N_FRESH`` new samples of ``card``'s data law (seed ``FRESH_SEED``), one file per law."""
    g = card.data.generate
    assert g and FRESH_SEED != card.data.seed, "the fresh samples need the card's data recipe and another seed"
    params = {k: v for k, v in (g.get("options") or {}).items() if k != "workers"}
    key = json.dumps([g["kind"], g.get("resolution"), params], sort_keys=True)
    if key not in _FRESH or not _FRESH[key].exists():
        path = folder / f"fresh-{len(_FRESH)}.h5"
        generate_dataset(g["kind"], path, N_FRESH, resolution=g.get("resolution"), seed=FRESH_SEED, progress=False,
                         **params)
        _FRESH[key] = path
    return _FRESH[key]


def check_fresh_samples(card, source: str, data: Path) -> list[str]:
    """The rows where the fresh mean error breaks the rule of the module docstring (empty: honest)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "not the data this run was trained on": fresh samples, on purpose
        rows = evaluate_resolutions(source, data, list(card.maps.evaluated_at), indices="all")
    broken = []
    for row in rows:
        claimed = card.row(row["resolution"])
        bound = 3 * claimed.std * math.sqrt(1 / row["n"] + 1 / claimed.n)
        if not abs(row["mean"] - claimed.mean) <= bound:
            broken.append(f"at {row['resolution']}: fresh mean {row['mean']:.4e} over {row['n']} samples, the card "
                          f"says {claimed.mean:.4e} (std {claimed.std:.2e}, n {claimed.n}): off by more than "
                          f"{bound:.2e}")
    return broken


def command_differences(card, folder: Path, monkeypatch) -> list[str]:
    """Parse the card's command as `petrov train` does and load its config: the keys where it differs from
    the config the weights were trained with (the shipped config.json and the checkpoint's)."""
    words = shlex.split(card.training.command)
    while words and "=" in words[0]:  # an environment assignment: PETROV_QUICK=1 for a quick build
        key, value = words.pop(0).split("=", 1)
        monkeypatch.setenv(key, value)
    assert words[0] == "petrov", card.training.command
    args = build_parser().parse_args(words[1:])
    assert args.command == "train" and args.config == card.data.preset and not args.resume
    config = load_config(args.config, list(args.set or []))
    saved = load_config_json(folder / CONFIG)
    state = load_run_checkpoint(folder / WEIGHTS)
    assert state["model_name"] == config.model.name
    assert state["train_config"]["model"] == config_to_dict(config)["model"]
    assert config_to_dict(config)["data"]["generate"] == card.data.generate
    return config_differences(config, saved, ignore=frozenset())


@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_weights_match_their_card(name):
    card = pretrained.card(name)
    folder = pretrained.folder(name)
    assert not card.quick, f"{name} is a quick build (toy weights): never ship it"
    assert card.license == "MIT" and card.name == name
    for file, facts in card.files.items():
        assert shipped.sha256_file(folder / file) == facts.sha256 and (folder / file).stat().st_size == facts.bytes
    assert isinstance(pretrained.load(name), NormalizedOperator)


@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_card_command_is_a_valid_petrov_train_call(name, monkeypatch):
    card = pretrained.card(name)
    assert command_differences(card, pretrained.folder(name), monkeypatch) == []


@pytest.mark.parametrize("name", SHIPPED_NAMES)
def test_shipped_card_holds_on_fresh_samples(name, tmp_path_factory):
    card = pretrained.card(name)
    data = fresh_data(card, tmp_path_factory.mktemp("fresh"))
    assert check_fresh_samples(card, shipped.PREFIX + name, data) == []


def test_the_shipped_files_fit_the_size_budget():
    files = [f for n in SHIPPED_NAMES for f in pretrained.folder(n).iterdir() if f.is_file()]
    total = sum(f.stat().st_size for f in files)
    assert total <= SIZE_BUDGET, f"the shipped operators take {total / 1e6:.1f} MB, over {SIZE_BUDGET / 1e6:.0f} MB"


def test_every_recipe_is_a_valid_training_config_of_its_preset():
    for recipe in SHIPPED:
        config = load_config(recipe.preset, list(recipe.overrides))
        # fixed epochs: the weights do not depend on the machine's speed
        assert not config.run.fill_budget and config.run.time_budget_minutes is None, recipe.name


def test_no_operators_shipped_is_said_in_one_line(cli, monkeypatch, tmp_path):
    monkeypatch.setattr(shipped, "SHIPPED_DIR", tmp_path)
    code, out, err = cli("pretrained")
    assert code == 0 and out.strip() == pretrained.none_shipped() and len(out.splitlines()) == 1 and not err
    assert pretrained.none_shipped() in pretrained.cards_page([], pretrained.none_shipped())


# --- the mechanism, on tiny operators built by the same path ----------------------------------------

def test_the_build_packs_weights_config_and_a_valid_card(tiny_registry):
    dest, work, data = tiny_registry
    assert pretrained.names() == ["tiny-darcy", "tiny-inverse"]
    for name in pretrained.names():
        card = pretrained.card(name)
        run = work / build.RUNS / name
        assert (dest / name / WEIGHTS).read_bytes() == (run / WEIGHTS).read_bytes()
        assert card.files[WEIGHTS].sha256 == shipped.sha256_file(run / WEIGHTS)
        metrics = json.loads((run / "eval" / "metrics.json").read_text())["rows"]
        assert [(r.resolution, r.n, r.mean, r.median, r.max) for r in card.evaluation.rows] == \
            [(r["resolution"], r["n"], r["mean"], r["median"], r["max"]) for r in metrics]
        assert card.training.wall_seconds > 0 and card.training.epochs == (4 if name == "tiny-darcy" else 2)
        assert card.data.identity == load_run_checkpoint(run / WEIGHTS)["data_identity"] and card.data.seed == 2
        assert card.model.parameters == sum(p.numel() for p in load_operator(run).model.parameters())
        assert card_from_dict(json.loads((dest / name / CARD).read_text())) == card
    inverse = pretrained.card("tiny-inverse").data
    assert inverse.kind == "darcy-inverse" and inverse.noise == 0.01


def test_load_gives_the_runs_operator(tiny_registry):
    _, work, _ = tiny_registry
    op = pretrained.load("tiny-darcy")
    same = load_operator("pretrained:tiny-darcy")
    run = load_operator(work / build.RUNS / "tiny-darcy")
    assert isinstance(op, NormalizedOperator) and not op.training
    a = torch.rand(2, 21, 21, 1) * 9 + 3
    with torch.no_grad():
        assert torch.equal(op(a), run(a)) and torch.equal(same(a), run(a))


def test_evaluate_takes_pretrained_names(tiny_registry, cli, tmp_path, monkeypatch):
    _, work, data = tiny_registry
    run = work / build.RUNS / "tiny-darcy"
    by_name = evaluate_resolutions("pretrained:tiny-darcy", data, [21, 11])
    assert by_name == evaluate_resolutions(run, data, [21, 11])
    monkeypatch.chdir(tmp_path)  # the default output folder: pretrained-eval/NAME here, never the package's folder
    code, out, err = cli("evaluate", "pretrained:tiny-darcy", "--data", data, "--no-plots")
    assert code == 0, err
    assert json.loads((tmp_path / "pretrained-eval" / "tiny-darcy" / "metrics.json").read_text())["rows"][0]["mean"] \
        == pytest.approx(pretrained.card("tiny-darcy").row(21).mean)


def test_invert_takes_pretrained_names(tiny_registry):
    _, work, data = tiny_registry
    runs = work / build.RUNS
    common = dict(resolution=21, indices=slice(24, 26), noise=0.01, settings={"max_iter": 3, "steps": 3})
    for method, role in (("refined", "inverse_run"), ("learned", "inverse_run"), ("surrogate", "forward_run")):
        name = "tiny-inverse" if role == "inverse_run" else "tiny-darcy"
        extra = {"inverse_run": "pretrained:tiny-inverse", "start": "learned"} if method == "surrogate" else {}
        got = invert(data, method, **{role: f"pretrained:{name}"}, **extra, **common)
        extra = {"inverse_run": runs / "tiny-inverse", "start": "learned"} if method == "surrogate" else {}
        want = invert(data, method, **{role: runs / name}, **extra, **common)
        np.testing.assert_array_equal(got.a, want.a)
    # a worker process loads its operators from the source as written
    assert isinstance(runner._operator("pretrained:tiny-inverse"), NormalizedOperator)
    with pytest.raises(ValueError, match="trained on 'darcy-inverse' data; this needs a Darcy forward operator"):
        invert(data, "surrogate", forward_run="pretrained:tiny-inverse", **common)


def test_training_continues_from_a_shipped_operator(tiny_registry, cli, tmp_path, monkeypatch):
    _, work, _ = tiny_registry
    monkeypatch.chdir(work)  # where the operator's data file is, as its config names it
    code, out, err = cli("train", "--continue", "pretrained:tiny-darcy", "--out", tmp_path / "more",
                         "--set", "optim.epochs=1")
    assert code == 0, err
    started = load_run_checkpoint(tmp_path / "more" / "last.pt")
    assert started["train_config"]["run"]["init_from"] == str(pretrained.folder("tiny-darcy"))


def test_list_and_show(tiny_registry, cli):
    code, out, err = cli("pretrained")
    assert code == 0 and not err
    lines = out.splitlines()
    assert lines[0].startswith("tiny-darcy    tiny tiny-darcy for the tests; test relative L2 ") and "at 11" in lines[0]
    code, out, _ = cli("pretrained", "show", "tiny-darcy")
    card = pretrained.card("tiny-darcy")
    assert code == 0 and out.startswith("# `tiny-darcy`") and card.training.command in out
    assert f"{card.row(11).mean:.3e}" in out and card.files[WEIGHTS].sha256 in out and "Licence: MIT" in out
    code, out, _ = cli("pretrained", "show", "tiny-darcy", "--json")
    assert code == 0 and card_from_dict(json.loads(out)) == card


@pytest.mark.parametrize("args, says", [
    (("show", "tiny-darcx"), "no shipped operator 'tiny-darcx'; shipped: tiny-darcy, tiny-inverse (did you mean"),
    (("tiny-darcy",), "did you mean `petrov pretrained show tiny-darcy`?"),
    (("shwo", "tiny-darcy"), "unknown action 'shwo'"),
    (("show",), "name the operator to show"),
])
def test_a_wrong_name_or_action_is_one_usage_line(tiny_registry, cli, args, says):
    code, out, err = cli("pretrained", *args)
    first, *rest = err.strip().splitlines()
    assert code == 2 and not out and first.startswith("petrov pretrained: error: ") and says in first, err
    assert rest == ["run 'petrov pretrained --help' for usage"]


def copy_registry(tiny_registry, tmp_path, monkeypatch) -> Path:
    """A copy of the tiny registry to damage, standing in for the package's folder."""
    copy = tmp_path / "shipped"
    shutil.copytree(tiny_registry[0], copy)
    monkeypatch.setattr(shipped, "SHIPPED_DIR", copy)
    return copy


def one_line_error(cli, *args) -> str:
    code, out, err = cli(*args)
    assert code == 1 and not out and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    return err.strip()


def test_damaged_weights_are_refused_in_one_line(tiny_registry, tmp_path, monkeypatch, cli):
    copy = copy_registry(tiny_registry, tmp_path, monkeypatch)
    weights = copy / "tiny-darcy" / WEIGHTS
    raw = bytearray(weights.read_bytes())
    raw[len(raw) // 2] ^= 0xFF  # one flipped byte inside the tensors: torch would read it without a word
    weights.write_bytes(bytes(raw))
    with pytest.raises(ValueError, match=r"the shipped weights of 'tiny-darcy' \(.*\) do not match their card"):
        pretrained.load("tiny-darcy")
    err = one_line_error(cli, "evaluate", "pretrained:tiny-darcy", "--data", tiny_registry[2], "--out", tmp_path / "e")
    assert "do not match their card" in err and "reinstall petrov" in err
    weights.unlink()
    with pytest.raises(FileNotFoundError, match="has no best.pt"):
        load_operator("pretrained:tiny-darcy")


def test_a_card_whose_hash_does_not_match_is_refused_in_one_line(tiny_registry, tmp_path, monkeypatch, cli):
    copy = copy_registry(tiny_registry, tmp_path, monkeypatch)
    path = copy / "tiny-inverse" / CARD
    raw = json.loads(path.read_text())
    raw["files"][CONFIG]["sha256"] = "0" * 64
    path.write_text(json.dumps(raw))
    err = one_line_error(cli, "invert", tiny_registry[2], "--method", "learned", "--inverse-run",
                         "pretrained:tiny-inverse", "--resolution", "21", "--indices", "30:32", "--out", tmp_path / "inv")
    assert "the shipped config.json of 'tiny-inverse'" in err and "do not match their card" in err


def test_an_unknown_name_is_one_line(tiny_registry, cli, tmp_path):
    with pytest.raises(ValueError, match=r"no shipped operator 'tiny'; shipped: tiny-darcy, tiny-inverse"):
        pretrained.load("tiny")
    err = one_line_error(cli, "evaluate", "pretrained:tiny-darcx", "--out", tmp_path / "e")
    assert err == ("petrov evaluate: error: no shipped operator 'tiny-darcx' (did you mean 'tiny-darcy'?); shipped: "
                   "tiny-darcy, tiny-inverse (petrov pretrained lists them)")


@pytest.mark.parametrize("change, says", [
    (lambda c: c.pop("not_for"), "card: missing key 'not_for'"),
    (lambda c: c["training"]["machine"].pop("cpu"), "card.training.machine: missing key 'cpu'"),
    (lambda c: c.update(weights="x"), "card: unknown key(s) 'weights'"),
    (lambda c: c["evaluation"]["rows"][0].update(mean="small"), "card.evaluation.rows[0].mean: expected a number"),
    (lambda c: c["evaluation"]["rows"][0].update(max=float("nan")), "card.evaluation.rows[0].max: expected a finite"),
    (lambda c: c["evaluation"]["rows"].pop(), "one row per resolution of maps.evaluated_at"),
    (lambda c: c["files"][WEIGHTS].update(sha256="abc"), "sha256: expected 64 lowercase hexadecimal digits"),
    (lambda c: c["files"].pop(CONFIG), "card.files: expected the hashes of 'best.pt' and 'config.json'"),
    (lambda c: c.update(license="CC-BY-NC"), "the project's licence 'MIT'"),
    (lambda c: c["training"].update(command="python train.py"), "card.training.command: expected `petrov train ...`"),
    (lambda c: c.update(card_format=2), "card format 2 was written by a newer petrov"),
    (lambda c: c.update(name="Tiny Darcy"), "is not a name"),
])
def test_the_card_schema_names_what_is_wrong(tiny_registry, change, says):
    raw = card_to_dict(pretrained.card("tiny-darcy"))
    change(raw)
    with pytest.raises(ValueError) as err:
        card_from_dict(raw)
    assert says in str(err.value) and len(str(err.value).splitlines()) == 1


def test_the_tiny_cards_command_is_a_valid_petrov_train_call(tiny_registry, monkeypatch):
    for name in pretrained.names():
        assert command_differences(pretrained.card(name), pretrained.folder(name), monkeypatch) == []


@pytest.mark.parametrize("name", ["tiny-darcy", "tiny-inverse"])
def test_the_tiny_cards_hold_on_fresh_samples_and_flattering_ones_do_not(tiny_registry, tmp_path, name):
    card = pretrained.card(name)
    data = fresh_data(card, tmp_path)
    assert check_fresh_samples(card, f"pretrained:{name}", data) == []
    flattering = card_from_dict(card_to_dict(card))
    for row in flattering.evaluation.rows:
        row.mean, row.median = row.mean / 3, row.median / 3  # a card claiming a third of its error
    assert len(check_fresh_samples(flattering, f"pretrained:{name}", data)) == len(card.evaluation.rows)


def test_a_quick_build_is_never_written_into_the_package(tmp_path, capsys):
    assert build.main(["--quick", "--dest", str(shipped.SHIPPED_DIR), "--work", str(tmp_path)]) == 2
    assert "never shipped" in capsys.readouterr().err
    assert build.main(["--only", "darcy-85"]) == 2  # a real build names its destination (the checkout's folder)
    assert "give --dest" in capsys.readouterr().err
    assert build.main(["--only", "darcy-58", "--quick"]) == 2
    assert "no recipe 'darcy-58'; recipes: darcy-85, burgers-1024" in capsys.readouterr().err


def test_the_cards_generate_command_writes_the_training_file_again(tiny_registry, cli, tmp_path):
    card = pretrained.card("tiny-darcy")
    words = shlex.split(generate_command(card))
    assert words[:2] == ["petrov", "generate"] and words[-2:] == ["-o", card.data.path]
    code, _, err = cli(*words[1:-1], tmp_path / "again.h5", "--no-progress")
    assert code == 0, err
    again = data_identity(tmp_path / "again.h5")
    assert (again["content"], again["attrs"]) == (card.data.identity["content"], card.data.identity["attrs"])


def test_the_documentation_page_is_written_from_the_cards(tiny_registry):
    cards = pretrained.cards()
    page = pretrained.cards_page(cards, pretrained.none_shipped())
    assert page.startswith("# Pretrained operators") and "| [`tiny-darcy`](#tiny-darcy) |" in page
    for card in cards:
        assert pretrained.card_markdown(card) in page and card.training.command in page
        assert all(f"{r.mean:.3e}" in page and f"{r.max:.3e}" in page for r in card.evaluation.rows)
