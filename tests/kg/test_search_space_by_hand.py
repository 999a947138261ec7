"""``tracegraph tune``'s search-space file by hand: what a valid file reads to, every refusal word
for word with its line, the range rules at their edges, and what each range asks the sampler for.

References: files written out line by line here (so each key's line is known), and a recording
trial that returns what it was asked (the calls written out by hand).
"""

import json

import pytest

from tracegraph.errors import DataError
from tracegraph.kg.model.search_space import SearchSpace, read_search_space, suggest

HEAD = '{\n  "format": "tracegraph-search-space",\n  "version": 1,\n'  # lines 1-3


def write(tmp_path, body: str):
    p = tmp_path / "space.json"
    p.write_text(HEAD + body + "}\n")
    return p


def refusal(tmp_path, body: str) -> str:
    p = write(tmp_path, body)
    with pytest.raises(DataError) as e:
        read_search_space(p)
    assert str(e.value).startswith(f"{p}:")  # every refusal names the file
    return str(e.value).removeprefix(f"{p}:")


GOOD = """  "preset": "umls",
  "description": "anything",
  "fixed": {"epochs": 50, "eval_every": 5},
  "params": {
    "learning_rate": {"type": "float", "low": 0.0003, "high": 0.01, "log": true},
    "output_dropout": {"type": "float", "low": 0.0, "high": 0.5, "step": 0.05},
    "lr_patience": {"type": "int", "low": 1, "high": 10},
    "batch_size": {"type": "categorical", "choices": [128, 256, 512]},
    "embedding_shape": {"type": "categorical", "choices": ["10x20", "12X24"]}
  },
  "pruner": {"n_startup_trials": 5, "n_warmup_steps": 10}
"""


def test_a_valid_file_reads_to_its_parts(tmp_path):
    p = write(tmp_path, GOOD)
    s = read_search_space(p)
    assert s == SearchSpace(
        params=json.loads(HEAD + GOOD + "}")["params"],
        fixed={"epochs": 50, "eval_every": 5},
        preset="umls",
        pruner={"n_startup_trials": 5, "n_warmup_steps": 10},
        source=str(p),
    )
    minimal = read_search_space(write(tmp_path, '  "params": {"seed": {"type": "int", "low": 0, "high": 3}}\n'))
    assert (minimal.fixed, minimal.preset, minimal.pruner) == ({}, None, {})


def test_file_level_refusals_name_the_line(tmp_path):
    p = tmp_path / "none.json"
    with pytest.raises(DataError) as e:
        read_search_space(p)
    assert str(e.value) == f"{p}: search-space file not found"
    p.write_text('{"format": "tracegraph-preset", "version": 1}')
    with pytest.raises(DataError) as e:
        read_search_space(p)
    assert str(e.value) == f'{p}:1: not a search-space file: expected {{"format": "tracegraph-search-space", ...}}'
    p.write_text("[1, 2]")
    with pytest.raises(DataError, match="not a search-space file"):
        read_search_space(p)
    p.write_text('{\n  "format": "tracegraph-search-space",\n  "version": 2\n}')
    with pytest.raises(DataError) as e:
        read_search_space(p)
    assert str(e.value) == f"{p}:3: search-space version 2 is not supported (this tracegraph reads 1)"
    assert refusal(tmp_path, '  "params": {"seed": {"type": "int", "low": 0, "high": 3}},\n  "trials": 5\n') == (
        "5: unknown key 'trials'"
    )
    assert refusal(tmp_path, '  "params": {}\n') == '4: "params" must be a non-empty object of setting names to ranges'
    # no "params" at all: no line to name, the file alone
    assert (
        refusal(tmp_path, '  "fixed": {"epochs": 50}\n')
        == ' "params" must be a non-empty object of setting names to ranges'
    )


def test_setting_refusals_name_the_setting_and_its_line(tmp_path):
    one = '  "params": {"seed": {"type": "int", "low": 0, "high": 3}}'
    assert refusal(tmp_path, '  "fixed": {"epoch": 5},\n' + one + "\n") == "4: unknown setting 'epoch' in \"fixed\""
    assert refusal(tmp_path, '  "params": {\n    "learnig_rate": {"type": "float", "low": 0.1, "high": 1}\n  }\n') == (
        "5: unknown setting 'learnig_rate' in \"params\""
    )
    assert refusal(tmp_path, one + ',\n  "pruner": {"patience": 3}\n') == (
        '5: "pruner" may only set interval_steps, n_startup_trials, n_warmup_steps'
    )
    assert refusal(tmp_path, one + ',\n  "pruner": [1]\n').endswith(
        '"pruner" may only set interval_steps, n_startup_trials, n_warmup_steps'
    )


@pytest.mark.parametrize(
    "key,spec,problem",
    [
        ("seed", 3, 'expected {"type": "float" | "int" | "categorical", ...}'),
        ("seed", {"type": "uniform", "low": 0, "high": 1}, '"type" must be float, int or categorical'),
        ("learning_rate", {"type": "float", "low": 0.1, "high": 0.1}, 'needs numeric "low" < "high"'),
        ("learning_rate", {"type": "float", "low": 0.2, "high": 0.1}, 'needs numeric "low" < "high"'),
        ("learning_rate", {"type": "float", "low": "0", "high": 1}, 'needs numeric "low" < "high"'),
        ("learning_rate", {"type": "float", "low": False, "high": 1}, 'needs numeric "low" < "high"'),
        ("learning_rate", {"type": "float", "high": 1}, 'needs numeric "low" < "high"'),
        ("seed", {"type": "int", "low": 0, "high": 2.5}, 'needs numeric "low" < "high" (integers)'),
        ("learning_rate", {"type": "float", "low": 0, "high": 1, "log": True}, '"log": true needs "low" > 0'),
        ("learning_rate", {"type": "float", "low": -1, "high": 1, "log": True}, '"log": true needs "low" > 0'),
        ("learning_rate", {"type": "float", "low": 0, "high": 1, "Step": 0.1}, "unknown keys ['Step']"),
        (
            "learning_rate",
            {"type": "float", "low": 0.1, "high": 1, "log": True, "step": 0.1, "Log": 1},
            "unknown keys ['Log']",
        ),
        ("batch_size", {"type": "categorical", "choices": []}, '"choices" must be a non-empty list'),
        ("batch_size", {"type": "categorical", "choices": 128}, '"choices" must be a non-empty list'),
        (
            "batch_size",
            {"type": "categorical", "choices": [[128]]},
            "choices must be numbers, strings, booleans or null",
        ),
        (
            "embedding_shape",
            {"type": "categorical", "choices": ["10x20", "0x20"]},
            'choices must be strings "HxW" (e.g. "10x20")',
        ),
        (
            "embedding_shape",
            {"type": "categorical", "choices": ["10x"]},
            'choices must be strings "HxW" (e.g. "10x20")',
        ),
        (
            "embedding_shape",
            {"type": "categorical", "choices": ["10x20x2"]},
            'choices must be strings "HxW" (e.g. "10x20")',
        ),
        ("embedding_shape", {"type": "categorical", "choices": [200]}, 'choices must be strings "HxW" (e.g. "10x20")'),
        ("embedding_shape", {"type": "int", "low": 1, "high": 3}, 'embedding_shape is categorical ("HxW" choices)'),
    ],
)
def test_each_range_rule(tmp_path, key, spec, problem):
    body = '  "params": {\n    "' + key + '": ' + json.dumps(spec) + "\n  }\n"
    assert refusal(tmp_path, body) == f"5: {key}: {problem}"


@pytest.mark.parametrize(
    "spec",
    [
        {"type": "float", "low": 1e-9, "high": 1, "log": True},  # log with any positive low
        {"type": "float", "low": 0, "high": 1e-9},
        {"type": "int", "low": -3, "high": -2},
        {"type": "categorical", "choices": [None, True, 0.5, "x"]},
        {"type": "float", "low": 0.5, "high": 1, "log": False, "step": 0.1},
    ],
)
def test_ranges_at_the_edge_of_the_rules_are_accepted(tmp_path, spec):
    assert read_search_space(write(tmp_path, '  "params": {"seed": ' + json.dumps(spec) + "}\n")).params["seed"] == spec


class Recorder:
    """A trial that records what it is asked and answers with the range's upper end (or last choice)."""

    def __init__(self):
        self.calls = []

    def suggest_categorical(self, name, choices):
        self.calls.append(("categorical", name, choices))
        return choices[-1]

    def suggest_int(self, name, low, high, step=1, log=False):
        self.calls.append(("int", name, low, high, step, log))
        return high

    def suggest_float(self, name, low, high, step=None, log=False):
        self.calls.append(("float", name, low, high, step, log))
        return high


def test_suggest_asks_for_each_range_as_written_and_a_shape_sets_three_settings(tmp_path):
    space = read_search_space(write(tmp_path, GOOD))
    t = Recorder()
    got = suggest(t, space)
    assert t.calls == [
        ("float", "learning_rate", 0.0003, 0.01, None, True),
        ("float", "output_dropout", 0.0, 0.5, 0.05, False),
        ("int", "lr_patience", 1, 10, 1, False),
        ("categorical", "batch_size", [128, 256, 512]),
        ("categorical", "embedding_shape", ["10x20", "12X24"]),
    ]
    assert got == {
        "learning_rate": 0.01,
        "output_dropout": 0.5,
        "lr_patience": 10,
        "batch_size": 512,
        "embedding_height": 12,
        "embedding_width": 24,
        "embedding_dim": 288,
    }
    step = SearchSpace(params={"seed": {"type": "int", "low": 0, "high": 8, "step": 2, "log": False}})
    t = Recorder()
    assert suggest(t, step) == {"seed": 8} and t.calls == [("int", "seed", 0, 8, 2, False)]
    log = SearchSpace(params={"lr_patience": {"type": "int", "low": 1, "high": 64, "log": True}})
    t = Recorder()
    assert suggest(t, log) == {"lr_patience": 64} and t.calls == [("int", "lr_patience", 1, 64, 1, True)]


def test_a_one_wide_shape_is_a_shape(tmp_path):
    spec = {"type": "categorical", "choices": ["1x200", "20x10"]}
    p = write(tmp_path, '  "params": {"embedding_shape": ' + json.dumps(spec) + "}\n")
    t = Recorder()
    assert suggest(t, read_search_space(p)) == {"embedding_height": 20, "embedding_width": 10, "embedding_dim": 200}


def test_a_file_that_is_not_json_names_its_line(tmp_path):
    p = write(tmp_path, '  "params": {,}\n')
    with pytest.raises(DataError) as e:
        read_search_space(p)
    assert str(e.value).startswith(f"{p}:4: ")
