"""Every option of `tracegraph fidelity compare` and `fidelity compare-pool` reaches the setting it names.

`fidelity compare` hands one `CompareConfig` (and `explain_only`) to `run_compare`; `compare-pool`
hands its folders, bootstrap, seed and versus arms to `pool_folders`, then writes pooled.json into
-o. Here the drivers and the writers are recording stand-ins (no run is read, no folder need hold a
comparison); each option, given alone on top of the required ones, must change its own settings and
no other, to the value its help promises (tests/flag_tables.py). The tables are written from the
options' help, not read from the code; an option added without a row fails.
"""

import functools
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, plain, stand_in, tabled

# option as typed, the value typed (a tuple: the option repeated once per value), where it lands
# (dotted: a field of a field), the value expected
COMPARE = [
    ("--model-dir", "run-dir", "cfg.model_dir", "run-dir"),
    ("--output-dir", "out", "cfg.output_dir", "out"),
    ("--explanations", ("kelpie=k.tsv", "criage=c.tsv"), "cfg.explanations", {"kelpie": "k.tsv", "criage": "c.tsv"}),
    ("--method", ("tracin", "relatif"), "cfg.methods", ["tracin", "relatif"]),
    ("--facts", "facts.txt", "cfg.facts", "facts.txt"),
    ("--n", "7", "cfg.n", 7),
    ("--k", "3", "cfg.k", 3),  # facts per explanation of the method arms ...
    ("--k", "3", "cfg.local.k", 3),  # ... local-retrain's among them: it searches sets of that size
    ("--candidates", "head-tail", "cfg.candidates", "head-tail"),
    ("--random-like", "kelpie", "cfg.random_like", "kelpie"),
    ("--size-like", "kelpie", "cfg.size_like", "kelpie"),
    ("--versus", ("kelpie", "criage"), "cfg.versus", ["kelpie", "criage"]),
    ("--noise-seed", "11", "cfg.noise_seed", 11),
    ("--retrain-seed", "12", "cfg.retrain_seed", 12),
    ("--arm", ("kelpie", "random"), "cfg.arms", ["kelpie", "random"]),
    ("--explain-only", None, "explain_only", True),  # how the driver runs, not a field of the settings
    ("--bootstrap", "20", "cfg.bootstrap", 20),
    ("--seed", "7", "cfg.seed", 7),  # which facts, the random arm's draws, tie-breaks ...
    ("--seed", "7", "cfg.local.seed", 7),  # ... local-retrain's tie-breaks among them
    ("--local-candidates", "13", "cfg.local.candidates", 13),
    ("--local-steps", "9", "cfg.local.steps", 9),
    ("--loss", "score", "cfg.loss", "score"),
    ("--layers", "last:2", "cfg.layers", "last:2"),
    ("--keep-models", None, "cfg.keep_models", True),
    ("--device", "cpu", "cfg.device", "cpu"),
    ("--num-threads", "5", "torch threads", 5),  # this process's, not a setting of the comparison
]
COMPARE_REQUIRED = ["--model-dir", "run-dir", "--output-dir", "out"]
POOL = [
    ("--output-dir", "pooled", "written to", "pooled"),  # where pooled.json and pooled.md go
    ("--versus", ("kelpie", "criage"), "versus", ["kelpie", "criage"]),
    ("--bootstrap", "20", "n_boot", 20),
    ("--seed", "7", "seed", 7),
]
FOLDERS = ["seed-1", "seed-2"]
POOL_REQUIRED = [*FOLDERS, "--output-dir", "pooled"]


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """What the drivers were handed: ``run_compare``'s and ``pool_folders``' arguments by name, the
    files compare-pool wrote, the threads asked of torch."""
    import torch

    import tracegraph.kg.explain.compare as compare
    import tracegraph.kg.explain.compare_pool as compare_pool
    import tracegraph.runtime.checkpoints as checkpoints

    got = {"threads": 0, "written": []}
    monkeypatch.setattr(torch, "set_num_threads", lambda n: got.__setitem__("threads", n))
    stand_in(
        monkeypatch, compare, "run_compare", got, "compare", {"summary": {}, "n_facts": 0, "finished": [], "arms": []}
    )
    stand_in(
        monkeypatch, compare_pool, "pool_folders", got, "pool", {"summary": {}, "n_facts": 0, "folders": [], "arms": []}
    )
    monkeypatch.setattr(compare_pool, "pooled_markdown", lambda res: "")
    for writer in ("atomic_write_json", "atomic_write_text"):
        monkeypatch.setattr(checkpoints, writer, lambda path, data, **kw: got["written"].append(Path(path)))
    monkeypatch.chdir(tmp_path)  # the paths typed are relative: nothing can land in the checkout
    return got


def _compare_setting(got, where):
    if where == "torch threads":
        return got["threads"]
    return plain(functools.reduce(lambda o, a: o[a] if isinstance(o, dict) else getattr(o, a), where.split("."), got))


def _invoke(seen, command, required, key):
    def invoke(extra):
        seen["threads"], seen["written"] = 0, []
        res = run_cli(["fidelity", command, *required, *extra])
        assert res.exit_code == 0, res.output
        return {**seen[key], "threads": seen["threads"], "written": list(seen["written"])}

    return invoke


@pytest.mark.parametrize(
    "command,table,elsewhere",
    [
        ("compare", COMPARE, set()),
        ("compare-pool", POOL, {"folders"}),  # the argument, not an option: its own test below
    ],
)
def test_every_option_is_in_its_table(command, table, elsewhere):
    assert options_of("fidelity", command) - elsewhere == tabled(table)


def test_each_compare_option_alone_changes_its_own_settings(seen):
    invoke = _invoke(seen, "compare", COMPARE_REQUIRED, "compare")
    assert misrouted(COMPARE, invoke, _compare_setting, fixed={"--model-dir", "--output-dir"}) == {}


def test_each_compare_pool_option_alone_changes_its_own_settings(seen):
    def landed(got, where):
        if where == "written to":
            return str(got["written"][0].parent)
        return plain(got[where])

    invoke = _invoke(seen, "compare-pool", POOL_REQUIRED, "pool")
    assert misrouted(POOL, invoke, landed, fixed={"--output-dir"}) == {}


def test_compare_pool_pools_the_folders_given_in_their_order_and_writes_both_files_to_o(seen):
    _invoke(seen, "compare-pool", [*reversed(FOLDERS), "-o", "pooled"], "pool")([])
    assert plain(seen["pool"]["folders"]) == list(reversed(FOLDERS))
    assert seen["written"] == [Path("pooled/pooled.json"), Path("pooled/pooled.md")]
