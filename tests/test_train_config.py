"""TOML training configs: strict validation, --set overrides, presets, JSON round trip."""
import json

import pytest

from petrov.train.config import (
    TrainConfig,
    config_differences,
    config_to_dict,
    load_config,
    load_config_json,
    parse_override,
    preset_names,
    save_config_json,
)

MINIMAL = """
[data]
path = "data.h5"
train_resolution = 64

[model]
name = "fno1d"

[model.options]
width = 8
modes = 4

[optim]
lr = 1e-3
epochs = 2
"""


@pytest.fixture
def toml_file(tmp_path):
    def write(text):
        path = tmp_path / "config.toml"
        path.write_text(text)
        return path

    return write


def test_minimal_config_fills_defaults(toml_file):
    cfg = load_config(toml_file(MINIMAL))
    assert isinstance(cfg, TrainConfig)
    assert cfg.data.train_resolution == 64 and cfg.data.eval_resolutions == []
    assert cfg.model.options == {"width": 8, "modes": 4}
    assert cfg.optim.optimizer == "adam" and cfg.optim.epochs == 2
    assert cfg.loss.h1_weight == 0.0 and cfg.run.seed == 0


@pytest.mark.parametrize(
    "edit, message",
    [
        (("[optim]", "[optim]\nlearning_rate = 1e-3"), "learning_rate"),  # unknown key
        (("epochs = 2", 'epochs = "two"'), "epochs"),  # wrong type
        (("lr = 1e-3", "lr = true"), "lr"),  # bool is not a number
        (("[optim]", "[optimiser]"), "optimiser"),  # unknown section
        (("modes = 4", "modes = 4\nwidht = 3"), "widht"),  # unknown model option
        (('name = "fno1d"', 'name = "fno1"'), "fno1"),  # unknown model
    ],
)
def test_bad_keys_and_types_are_rejected(toml_file, edit, message):
    old, new = edit
    with pytest.raises((ValueError, KeyError), match=message):
        load_config(toml_file(MINIMAL.replace(old, new, 1)))


def test_missing_required_section_or_key(toml_file):
    with pytest.raises(ValueError, match="missing required table 'model'"):
        load_config(toml_file(MINIMAL.split("[model]")[0]))
    with pytest.raises(ValueError, match="missing required key 'path'"):
        load_config(toml_file(MINIMAL.replace('path = "data.h5"', "")))
    with pytest.raises(ValueError, match="n_samples"):
        load_config(toml_file(MINIMAL + '\n[data.generate]\nkind = "burgers"\n'))


def test_impossible_values_are_rejected(toml_file):
    with pytest.raises(ValueError, match="pct_start"):
        load_config(toml_file(MINIMAL), ["optim.pct_start=1.5"])
    with pytest.raises(ValueError, match="n_val"):
        load_config(toml_file(MINIMAL), ["data.n_val=0"])
    with pytest.raises(ValueError, match="normalizer_grid"):
        load_config(toml_file(MINIMAL), ["data.normalizer_grid=1"])
    with pytest.raises(ValueError, match="optimizer"):
        load_config(toml_file(MINIMAL), ["optim.optimizer=sgd"])


def test_overrides_are_parsed_as_toml_and_validated(toml_file):
    path = toml_file(MINIMAL)
    cfg = load_config(path, ["optim.lr=5e-4", "data.eval_resolutions=[32, 64]", "run.device=cpu",
                             "model.options.modes=3", "loss.h1_weight=0.1"])
    assert cfg.optim.lr == 5e-4
    assert cfg.data.eval_resolutions == [32, 64]
    assert cfg.run.device == "cpu"  # an unquoted string
    assert cfg.model.options["modes"] == 3
    assert cfg.loss.h1_weight == 0.1
    with pytest.raises(ValueError, match="n_epochs"):
        load_config(path, ["optim.n_epochs=3"])
    with pytest.raises(ValueError, match="bogus"):
        load_config(path, ["model.options.bogus=1"])
    with pytest.raises(ValueError, match="lr"):
        load_config(path, ["optim.lr=fast"])
    with pytest.raises(ValueError, match="section.key=value"):
        load_config(path, ["lr=1e-3"])


def test_parse_override():
    assert parse_override("a.b=1") == (["a", "b"], 1)
    assert parse_override("a.b.c = [1, 2]") == (["a", "b", "c"], [1, 2])
    assert parse_override('a.b="x y"') == (["a", "b"], "x y")


def test_a_removed_key_takes_its_default_and_removing_what_is_not_set_is_an_error():
    # a budget preset trained for a fixed number of epochs: its time budget removed, not only left unplanned
    cfg = load_config("burgers-gpu", ["~run.time_budget_minutes", "run.fill_budget=false", "optim.epochs=300"])
    assert cfg.run.time_budget_minutes is None and cfg.optim.epochs == 300
    assert load_config("burgers-gpu").run.time_budget_minutes == 5
    with pytest.raises(ValueError, match="fill_budget plans the epochs"):  # the preset still plans
        load_config("burgers-gpu", ["~run.time_budget_minutes"])
    with pytest.raises(ValueError, match="does not set 'run.time_budget_minute'; nothing to remove"):
        load_config("burgers-gpu", ["~run.time_budget_minute"])
    with pytest.raises(ValueError, match="no 'trainer' table; nothing to remove"):
        load_config("burgers-gpu", ["~trainer.epochs"])
    with pytest.raises(ValueError, match=r"or ~section.key"):
        load_config("burgers-gpu", ["~epochs"])


def test_resolved_config_round_trips_through_json(toml_file, tmp_path):
    cfg = load_config(toml_file(MINIMAL), ["optim.lr=2e-4"])
    save_config_json(cfg, tmp_path / "config.json")
    back = load_config_json(tmp_path / "config.json")
    assert back == cfg
    assert json.loads((tmp_path / "config.json").read_text()) == config_to_dict(cfg)
    changed = load_config(toml_file(MINIMAL), ["optim.lr=3e-4", "run.device=cpu"])
    assert config_differences(cfg, changed) == ["optim.lr"]  # run.device is a runtime key


def test_shipped_presets_load_and_validate():
    names = preset_names()
    assert "burgers-quick" in names
    for name in names:
        cfg = load_config(name)
        assert cfg.model.name
    assert load_config("burgers-quick.toml") == load_config("burgers-quick")


# The paper presets must build the reference architectures (parameter counts of the reference code).
PAPER_PARAMETERS = {
    "burgers-paper-2048": 530_305,
    "burgers-paper-8192": 530_305,
    "darcy-paper-141": 2_220_829,
    "darcy-paper-211": 2_220_829,
    "darcy-inverse-paper-noise0": 2_383_873,
    "darcy-inverse-paper-noise001": 2_383_873,
    "darcy-inverse-paper-noise01": 2_383_873,
}


@pytest.mark.parametrize("name", sorted(PAPER_PARAMETERS))
def test_paper_presets_build_the_reference_models(name):
    from petrov.operators import build_model
    from petrov.operators.blocks import count_parameters

    cfg = load_config(name)
    model = build_model(cfg.model.name, **cfg.model.options)
    assert count_parameters(model) == PAPER_PARAMETERS[name]


def test_every_preset_builds_its_model_with_every_mixer():
    from petrov.operators import build_model, list_mixers
    from petrov.operators.attention.mixers import causal_mixers

    for name in preset_names():
        cfg = load_config(name)
        if "mixer" not in cfg.model.options:
            continue
        for mixer in list_mixers():
            try:
                build_model(cfg.model.name, **dict(cfg.model.options, mixer=mixer))
            except ValueError as err:  # a causal model (marching1d) takes the mixers with a causal form only
                if mixer in causal_mixers() or "no causal form" not in str(err):
                    raise


def test_unknown_preset_lists_the_presets():
    with pytest.raises(FileNotFoundError, match="burgers-quick"):
        load_config("no-such-preset")


def _generated(tmp_path, generate, data=""):
    """MINIMAL reading a file that does not exist yet, made by a [data.generate] table."""
    return MINIMAL.replace('path = "data.h5"', f'path = "{(tmp_path / "new.h5").as_posix()}"\nn_train = 12\n'
                           f'n_val = 4\nn_test = 4\n{data}') + f"\n[data.generate]\n{generate}\n"


@pytest.mark.parametrize("generate, data, message", [
    ('kind = "burgers"\nn_samples = 10\nresolution = 256', "", r"data.generate.n_samples = 10 is fewer"),
    ('kind = "darcy"\nn_samples = 24', "", r"data.generate.kind 'darcy' makes 2-D grids but model 'fno1d'"),
    ('kind = "burgerz"\nn_samples = 24', "", r"data.generate.kind: .*did you mean 'burgers'"),
    ('kind = "burgers"\nn_samples = 24\nresolution = 100', "", r"data.train_resolution .* 100-point grid"),
    ('kind = "burgers"\nn_samples = 24\nresolution = 256', "eval_resolutions = [48]", r"data.eval_resolutions"),
    ('kind = "burgers-trajectory"\nn_samples = 24\noptions = { time_step = 3 }', "",
     r"data.generate.options: .*'time_step'"),
], ids=["too-few-samples", "wrong-dimension", "unknown-kind", "train-resolution", "eval-resolution", "bad-option"])
def test_generate_table_is_checked_before_generating(toml_file, tmp_path, generate, data, message):
    with pytest.raises(ValueError, match=message):
        load_config(toml_file(_generated(tmp_path, generate, data)))
    assert not (tmp_path / "new.h5").exists()


@pytest.mark.parametrize("value", ["false", "No", "off"])
def test_quick_mode_off_values(monkeypatch, value):
    from petrov.common.quick import quick_mode

    monkeypatch.setenv("PETROV_QUICK", value)
    assert quick_mode() is False


def test_an_unknown_quick_mode_value_is_an_error(monkeypatch):
    from petrov.common.quick import quick_mode

    monkeypatch.setenv("PETROV_QUICK", "maybe")
    with pytest.raises(ValueError, match="PETROV_QUICK='maybe' is neither on"):
        quick_mode()


def test_quick_mode_says_when_it_shrinks_a_config(toml_file, monkeypatch, caplog):
    monkeypatch.setenv("PETROV_QUICK", "1")
    with caplog.at_level("INFO", logger="petrov.train.config"):
        cfg = load_config(toml_file(MINIMAL))
    assert cfg.optim.epochs == 1 and "quick mode (PETROV_QUICK=1)" in caplog.text


@pytest.mark.parametrize("quick", ["0", "1"])
def test_a_section_that_is_not_a_table(toml_file, monkeypatch, quick):
    monkeypatch.setenv("PETROV_QUICK", quick)
    with pytest.raises(ValueError, match="config.data: expected a table, got int 5"):
        load_config(toml_file('data = 5\n[model]\nname = "fno1d"\n'))


@pytest.mark.parametrize("override, message", [
    ('data.n_train="x"', "data.n_train: expected an integer, got str"),
    ("data.n_train=[1]", "data.n_train: expected an integer, got list"),
    ('data.n_train="12"', "data.n_train: expected an integer, got str"),
    ("data.n_train=12.7", "data.n_train: expected an integer, got float"),
])
def test_quick_mode_leaves_wrong_split_types_to_the_validator(toml_file, monkeypatch, override, message):
    monkeypatch.setenv("PETROV_QUICK", "1")
    with pytest.raises(ValueError, match=message):
        load_config(toml_file(MINIMAL), [override])


def test_a_misspelled_preset_gets_a_suggestion():
    with pytest.raises(FileNotFoundError, match=r"did you mean 'burgers-quick'\?"):
        load_config("burgers-quik")


def test_removing_a_key_takes_no_value():
    with pytest.raises(ValueError, match="~section.key removes a key and takes no =value"):
        parse_override("~optim.lr=1")


def test_a_config_that_is_not_utf8_is_named(tmp_path):
    path = tmp_path / "binary.toml"
    path.write_bytes(b"\xff\xfe[data]\n")
    with pytest.raises(ValueError, match="binary.toml' is not a UTF-8 text file"):
        load_config(path)


@pytest.mark.parametrize("edit, message", [
    ("[run]\nepochs = 2\n", r"'epochs' is not a key of \[run\]; it belongs in \[optim\]"),
    ("[loss]\nlr = 1e-3\n", r"'lr' is not a key of \[loss\]; it belongs in \[optim\]"),
])
def test_a_key_in_the_wrong_table_names_its_table(toml_file, edit, message):
    with pytest.raises(ValueError, match=message):
        load_config(toml_file(MINIMAL + edit))


def test_div_factor_below_one_is_rejected(toml_file):
    with pytest.raises(ValueError, match="optim.div_factor must be >= 1"):
        load_config(toml_file(MINIMAL), ["optim.div_factor=1e-300"])
