"""Presets by hand: the shipped files against the values their descriptions and docs/training.md state,
lookup by name or path, every refusal word for word with its file and line, what a preset sets and
what it leaves, the option sources a preset must not override, and a preset document's key order.

References: the numbers written in each preset's own description and in docs/training.md (the
documented defaults), hashlib over the file's bytes, and lines counted by hand in files written here.
No training: every test is fast.
"""

import hashlib
import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import log_lines
from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model.presets import (
    apply_preset,
    decode_json,
    explicit_options,
    line_of_key,
    load_preset,
    parse_preset,
    preset_document,
    setting_defaults,
    setting_names,
    shipped_presets,
)
from tracegraph.kg.model.train import TrainConfig

PRESETS = Path(__file__).resolve().parents[2] / "tracegraph" / "kg" / "model" / "presets"
RUN_SPECIFIC = {
    "train",
    "valid",
    "test",
    "output_dir",
    "entity_map",
    "relation_map",
    "resume",
    "preset",
    "preset_sha256",
    "model",
    "filter_triples",
    "num_entities",
    "num_relations",
}


def _write(tmp_path, text, name="p.json"):
    f = tmp_path / name
    f.write_bytes(text.encode("utf-8") if isinstance(text, str) else text)
    return f


def _doc(settings, **top):
    d = {"format": "tracegraph-preset", "version": 1, **top, "settings": settings}
    return json.dumps(d)


# ---- the shipped presets


def test_shipped_presets_are_the_four_documented_names_sorted():
    assert shipped_presets() == ["conve-paper", "fb15k-237", "umls", "wn18rr"]


def test_a_shipped_preset_names_its_package_file_and_hashes_its_bytes():
    p = load_preset("wn18rr")
    assert p.name == "wn18rr"
    assert p.source == "tracegraph/kg/model/presets/wn18rr.json"
    assert p.sha256 == hashlib.sha256((PRESETS / "wn18rr.json").read_bytes()).hexdigest()


def test_fb15k_237_preset_holds_the_values_its_description_states():
    s = load_preset("fb15k-237").settings
    assert (s["training_mode"], s["loss"], s["optimizer"], s["batch_size"]) == ("1vsall", "ce", "adagrad", 1024)
    assert round(s["learning_rate"], 5) == 0.00428
    assert (s["lr_scheduler"], s["lr_factor"], s["lr_patience"], s["eval_every"]) == ("plateau", 0.95, 9, 5)
    assert (s["embedding_dim"], s["embedding_height"], s["embedding_width"]) == (288, 12, 24)
    assert round(s["relation_dropout"], 3) == 0.118 and round(s["feature_map_dropout"], 3) == 0.488
    assert s["output_dropout"] == 0.5 and s["input_dropout"] == 0.0 and s["label_smoothing"] == 0.0


def test_wn18rr_preset_holds_the_values_its_description_states():
    s = load_preset("wn18rr").settings
    assert (s["training_mode"], s["loss"], s["optimizer"], s["batch_size"]) == ("kvsall", "ce", "adam", 1024)
    assert round(s["learning_rate"], 5) == 0.00162
    assert (s["lr_scheduler"], s["lr_factor"], s["lr_patience"], s["eval_every"]) == ("plateau", 0.95, 1, 5)
    assert (s["embedding_dim"], s["embedding_height"], s["embedding_width"]) == (512, 16, 32)
    assert round(s["relation_dropout"], 3) == 0.227 and round(s["feature_map_dropout"], 3) == 0.332
    assert round(s["output_dropout"], 3) == 0.150 and s["input_dropout"] == 0.0 and s["label_smoothing"] == 0.0


def test_umls_preset_holds_the_values_its_description_states():
    s = load_preset("umls").settings
    assert (s["training_mode"], s["loss"], s["epochs"]) == ("kvsall", "bce", 150)
    assert (s["lr_scheduler"], s["lr_factor"], s["lr_patience"], s["patience"]) == ("plateau", 0.5, 3, 10)


def test_conve_paper_preset_is_the_documented_defaults_without_early_stopping():
    # docs/training.md and the ConvE paper: d=200 as 10x20, 32 3x3 filters, dropout 0.2/0.2/0.3,
    # Adam lr 0.003, batch 128, label smoothing 0.1, KvsAll BCE, reciprocal, constant rate
    documented = {
        "epochs": 100,
        "batch_size": 128,
        "learning_rate": 0.003,
        "optimizer": "adam",
        "weight_decay": 0.0,
        "lr_scheduler": "none",
        "lr_decay": 1.0,
        "label_smoothing": 0.1,
        "training_mode": "kvsall",
        "loss": "bce",
        "patience": 0,
        "eval_every": 1,
        "embedding_dim": 200,
        "embedding_height": 10,
        "embedding_width": 20,
        "output_channels": 32,
        "kernel_size": 3,
        "input_dropout": 0.2,
        "feature_map_dropout": 0.2,
        "output_dropout": 0.3,
        "entity_dropout": 0.0,
        "relation_dropout": 0.0,
        "reciprocal": True,
    }
    assert load_preset("conve-paper").settings == documented


# ---- what a preset may set


def test_setting_names_split_train_and_model_options_and_leave_out_run_specific_ones():
    train, model = setting_names()
    assert {"learning_rate", "epochs", "patience", "lr_factor", "optimizer", "seed"} <= train
    assert {"embedding_dim", "input_dropout", "reciprocal", "concat_axis"} <= model
    assert not (train & model)
    assert not ((train | model) & RUN_SPECIFIC)
    assert "embedding_dim" not in train and "learning_rate" not in model


def test_setting_defaults_are_the_documented_defaults():
    d = setting_defaults()
    expected = {
        "epochs": 100,
        "batch_size": 128,
        "learning_rate": 0.003,
        "lr_scheduler": "none",
        "optimizer": "adam",
        "loss": "bce",
        "label_smoothing": 0.1,
        "training_mode": "kvsall",
        "patience": None,
        "embedding_dim": 200,
        "embedding_height": 10,
        "embedding_width": 20,
        "input_dropout": 0.2,
        "output_dropout": 0.3,
        "reciprocal": True,
    }
    for k, v in expected.items():
        assert k in d and d[k] == v and type(d[k]) is type(v), k
    assert not (set(d) & RUN_SPECIFIC)
    train, model = setting_names()
    assert set(d) == train | model


# ---- lookup by name or path


def test_unknown_name_is_refused_word_for_word():
    with pytest.raises(TracegraphError) as e:
        load_preset("nope")
    assert not isinstance(e.value, DataError)
    assert str(e.value) == (
        "unknown preset 'nope'; shipped: conve-paper, fb15k-237, umls, wn18rr (or give the path of a .json preset file)"
    )


def test_a_missing_json_path_is_refused_naming_the_file(tmp_path):
    f = tmp_path / "gone.json"
    with pytest.raises(DataError) as e:
        load_preset(str(f))
    assert str(e.value) == f"{f}: preset file not found"


def test_a_file_without_the_json_suffix_is_read_as_a_preset(tmp_path):
    f = _write(tmp_path, _doc({"epochs": 7}, name="mine"), name="mypreset")
    p = load_preset(str(f))
    assert (p.name, p.settings, p.source) == ("mine", {"epochs": 7}, str(f))
    assert p.sha256 == hashlib.sha256(f.read_bytes()).hexdigest()


def test_a_folder_named_like_a_shipped_preset_is_not_a_preset_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "umls").mkdir()
    assert load_preset("umls").source == "tracegraph/kg/model/presets/umls.json"


def test_the_name_falls_back_to_the_file_stem(tmp_path):
    f = _write(tmp_path, _doc({"epochs": 7}), name="best_preset.json")
    assert load_preset(str(f)).name == "best_preset"
    f = _write(tmp_path, _doc({"epochs": 7}, name=""), name="empty_name.json")
    assert load_preset(str(f)).name == "empty_name"


def test_the_settings_are_a_copy_and_kept_as_written(tmp_path):
    data = _doc({"learning_rate": 1, "patience": None, "reciprocal": False}).encode()
    p = parse_preset(data, "x.json")
    assert p.settings == {"learning_rate": 1, "patience": None, "reciprocal": False}
    assert p.sha256 == hashlib.sha256(data).hexdigest()


# ---- refusals word for word, with file and line


def test_invalid_json_names_file_and_line(tmp_path):
    with pytest.raises(DataError) as e:
        decode_json(b'{"a": 1,\n "b": }', "p.json")
    assert str(e.value) == "p.json:2: invalid JSON: Expecting value"
    assert e.value.line == 2


def test_bytes_that_are_not_utf8_are_refused_naming_the_file():
    with pytest.raises(DataError) as e:
        decode_json(b'{"a": "\xff"}', "p.json")
    assert str(e.value) == "p.json: not UTF-8 text: invalid start byte"


def test_a_byte_order_mark_is_tolerated_with_a_note_naming_the_file(tmp_path):
    f = _write(tmp_path, b"\xef\xbb\xbf" + _doc({"epochs": 3}).encode())
    with log_lines() as lines:
        p = load_preset(str(f))
    assert p.settings == {"epochs": 3}
    assert lines == [f"{f}:1: removed a UTF-8 byte-order mark"]


def test_a_preset_file_that_is_not_json_names_the_file_and_line(tmp_path):
    f = _write(tmp_path, '{"format": "tracegraph-preset",\n\n "version": 1,,}')
    with pytest.raises(DataError) as e:
        load_preset(str(f))
    assert str(e.value) == f"{f}:3: invalid JSON: Expecting property name enclosed in double quotes"


@pytest.mark.parametrize(
    "text",
    ["[1, 2]", '{"format": "tracegraph-search-space", "version": 1, "settings": {}}', '{"version": 1, "settings": {}}'],
)
def test_not_a_preset_file_is_refused_on_line_one(text):
    with pytest.raises(DataError) as e:
        parse_preset(text.encode(), "p.json")
    assert str(e.value) == 'p.json:1: not a preset file: expected {"format": "tracegraph-preset", ...}'


def test_another_version_is_refused_on_its_line():
    data = b'{"format": "tracegraph-preset",\n\n "version": 2,\n "settings": {}}'
    with pytest.raises(DataError) as e:
        parse_preset(data, "p.json")
    assert str(e.value) == "p.json:3: preset version 2 is not supported (this tracegraph reads 1)"


def test_a_missing_version_is_refused_without_a_line():
    with pytest.raises(DataError) as e:
        parse_preset(b'{"format": "tracegraph-preset", "settings": {}}', "p.json")
    assert str(e.value) == "p.json: preset version None is not supported (this tracegraph reads 1)"


def test_settings_that_are_not_an_object_are_refused_on_their_line():
    data = b'{"format": "tracegraph-preset", "version": 1,\n "settings": [1]}'
    with pytest.raises(DataError) as e:
        parse_preset(data, "p.json")
    assert str(e.value) == 'p.json:2: "settings" must be an object of option names to values'
    with pytest.raises(DataError) as e:
        parse_preset(b'{"format": "tracegraph-preset", "version": 1}', "p.json")
    assert str(e.value) == 'p.json: "settings" must be an object of option names to values'


def test_an_unknown_or_run_specific_setting_is_refused_on_its_line():
    data = b'{"format": "tracegraph-preset", "version": 1, "settings": {\n "epochs": 2,\n "output_dir": "x"}}'
    with pytest.raises(DataError) as e:
        parse_preset(data, "p.json")
    assert str(e.value) == (
        "p.json:3: unknown setting 'output_dir' (a train option name with underscores, e.g. learning_rate)"
    )


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        ("reciprocal", 1, "bool"),  # a bool takes only true/false
        ("epochs", True, "int"),  # an int refuses a bool ...
        ("epochs", 2.0, "int"),  # ... and a float
        ("learning_rate", True, "float"),  # a float refuses a bool
        ("learning_rate", "0.1", "float"),
        ("patience", True, "NoneType"),  # the optional count refuses a bool
        ("patience", 1.5, "NoneType"),
        ("optimizer", 3, "str"),
        ("epochs", None, "int"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_on_its_line(key, value, kind):
    data = (
        '{"format": "tracegraph-preset", "version": 1,\n "settings": {\n "%s": %s}}' % (key, json.dumps(value))
    ).encode()
    with pytest.raises(DataError) as e:
        parse_preset(data, "p.json")
    assert str(e.value) == f"p.json:3: setting {key!r}: {value!r} is not a {kind}"


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("reciprocal", False),
        ("epochs", 0),
        ("learning_rate", 1),  # an int is a float
        ("learning_rate", 0.5),
        ("patience", None),
        ("patience", 4),
        ("optimizer", "adagrad"),
    ],
)
def test_a_value_of_the_right_kind_is_accepted(key, value):
    p = parse_preset(_doc({key: value}).encode(), "p.json")
    assert p.settings == {key: value}


# ---- applying a preset


def test_apply_preset_sets_train_and_model_settings_and_records_name_and_hash():
    cfg = TrainConfig(train="t", output_dir="o", model={"kernel_size": 5, "input_dropout": 0.4})
    data = _doc({"epochs": 9, "optimizer": "adagrad", "embedding_dim": 50, "input_dropout": 0.1}, name="p").encode()
    p = parse_preset(data, "p.json")
    got = apply_preset(cfg, p)
    assert (got.epochs, got.optimizer) == (9, "adagrad")
    assert got.model == {"kernel_size": 5, "input_dropout": 0.1, "embedding_dim": 50}
    assert not hasattr(got, "embedding_dim")
    assert got.preset == "p" and got.preset_sha256 == hashlib.sha256(data).hexdigest()
    assert (got.train, got.output_dir, got.learning_rate) == ("t", "o", 0.003)  # left as they were
    # the original is untouched
    assert cfg.epochs == 100 and cfg.model == {"kernel_size": 5, "input_dropout": 0.4} and cfg.preset is None


def test_apply_preset_leaves_explicit_settings_alone():
    cfg = TrainConfig(train="t", output_dir="o", epochs=3, model={"input_dropout": 0.4})
    p = parse_preset(
        _doc({"epochs": 9, "batch_size": 64, "input_dropout": 0.1, "embedding_dim": 50}).encode(), "q.json"
    )
    got = apply_preset(cfg, p, explicit={"epochs", "input_dropout"})
    assert (got.epochs, got.batch_size) == (3, 64)
    assert got.model == {"input_dropout": 0.4, "embedding_dim": 50}
    assert got.preset == "q"


def test_explicit_options_are_those_from_the_command_line_or_the_environment():
    sources = {"a": "COMMANDLINE", "b": "ENVIRONMENT", "c": "DEFAULT", "d": "DEFAULT_MAP", "e": None}

    class Ctx:
        params = dict.fromkeys(sources, 0)

        def get_parameter_source(self, name):
            return None if sources[name] is None else SimpleNamespace(name=sources[name])

    assert explicit_options(Ctx()) == {"a", "b"}


def test_explicit_options_from_a_real_click_command():
    import click
    from click.testing import CliRunner

    seen = {}

    @click.command()
    @click.option("--epochs", default=1, envvar="TG_TEST_EPOCHS")
    @click.option("--batch-size", default=2)
    @click.option("--seed", default=3)
    @click.pass_context
    def cmd(ctx, epochs, batch_size, seed):
        seen["x"] = explicit_options(ctx)

    CliRunner().invoke(cmd, ["--batch-size", "5"], env={"TG_TEST_EPOCHS": "4"}, catch_exceptions=False)
    assert seen["x"] == {"epochs", "batch_size"}


def test_preset_document_keys_in_order_with_extras_before_settings():
    doc = preset_document("n", "d", {"epochs": 1}, trial=7, value=0.5)
    assert list(doc.items()) == [
        ("format", "tracegraph-preset"),
        ("version", 1),
        ("name", "n"),
        ("description", "d"),
        ("trial", 7),
        ("value", 0.5),
        ("settings", {"epochs": 1}),
    ]
    p = parse_preset(json.dumps(doc).encode(), "x.json")
    assert (p.name, p.settings) == ("n", {"epochs": 1})


def test_line_of_key_is_the_first_quoted_occurrence_counted_from_one():
    data = b'{"epochs_x": 1,\n "b": 2,\n\n "epochs": 3,\n "epochs": 4}'
    assert line_of_key(data, "epochs") == 4
    assert line_of_key(data, "epochs_x") == 1
    assert line_of_key(data, "b") == 2
    assert line_of_key(data, "gone") is None
    assert line_of_key(b'"k"', "k") == 1
