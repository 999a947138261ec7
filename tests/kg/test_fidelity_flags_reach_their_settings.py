"""Every option of `tracegraph fidelity recovery` and `fidelity necessity` reaches the setting it names.

`fidelity recovery` hands one `FidelityConfig` to `run_fidelity`, `fidelity necessity` one
`NecessityConfig` to `run_necessity`. Here both drivers are recording stand-ins (no run is read, no
file need exist); each command is run once with every option away from its default, and each
recorded field must hold the value given. The tables are written from the options' help, not read
from the code, so an option wired to the wrong field, or not at all, fails; an option added without
a row fails too.
"""

import functools
from types import SimpleNamespace

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, tabled

# option as typed, the value typed (a tuple: the option repeated once per value), where the config keeps
# it (dotted: a field of a field), the value expected
RECOVERY = [
    ("--filter", ("known-a.txt", "known-b.txt"), "filter_files", ["known-a.txt", "known-b.txt"]),
    ("--checkpoints", ("2", "5"), "checkpoints", ["2", "5"]),
    ("--loss", "score", "loss", "score"),
    ("--layers", "last:1", "layers", "last:1"),
    ("--n-hops", "3", "n_hops", 3),
    ("--min-degree", "4", "min_degree", 4),
    ("--n-random", "5", "n_random", 5),
    ("--seed", "7", "seed", 7),  # the random baseline's ...
    ("--seed", "7", "removal_options.seed", 7),  # ... and the removal test's random arms
    ("--no-removal", None, "removal", False),
    ("--removal-k", "6", "removal_options.k", 6),
    ("--removal-triples", "2", "removal_options.n_triples", 2),
    ("--max-rank", "9.0", "removal_options.max_rank", 9.0),
    ("--random-draws", "8", "removal_options.random_draws", 8),
    # graded beside the baselines; TracIn, what the command grades, always among them
    ("--method", "relatif,local-retrain", "methods", ["tracin", "relatif", "local-retrain"]),
    ("--device", "cpu", "device", "cpu"),
]
NECESSITY = [
    ("--facts", "facts.txt", "facts", "facts.txt"),
    ("--sides", "head", "sides", "head"),
    ("--n", "4", "n", 4),
    ("--k", "1,3", "ks", [1, 3]),
    ("--k", "1,3", "local.k", 3),  # local-retrain searches sets up to the largest size tested
    ("--method", "degree,random", "methods", ["degree", "random"]),
    ("--seeds", "5,6", "seeds", [5, 6]),
    ("--loss", "score", "loss", "score"),
    ("--layers", "last:1", "layers", "last:1"),
    ("--checkpoints", ("2", "5"), "checkpoints", ["2", "5"]),
    ("--filter", ("known-a.txt", "known-b.txt"), "filter_files", ["known-a.txt", "known-b.txt"]),
    ("--bootstrap", "20", "bootstrap", 20),
    ("--seed", "7", "sample_seed", 7),  # which facts, the random arms, tie-breaks ...
    ("--seed", "7", "local.seed", 7),  # ... local-retrain's tie-breaks among them
    ("--local-candidates", "11", "local.candidates", 11),
    ("--local-steps", "9", "local.steps", 9),
    ("--keep-models", None, "keep_models", True),
    ("--device", "cpu", "device", "cpu"),
    ("--num-threads", "5", "torch threads", 5),  # this process's torch threads when the driver runs
]
# the required run, files and output folder: in every call, each checked to land in its field of the same name
RUN = {"--model-dir": "run-dir", "--train": "train.txt", "--output-dir": "out"}
REQUIRED = {"recovery": {**RUN, "--test": "test.txt", "--mechanisms": "mech.tsv"}, "necessity": RUN}
TABLES = {"recovery": RECOVERY, "necessity": NECESSITY}
ELSEWHERE = {name: set(required) for name, required in REQUIRED.items()}


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    import torch

    import tracegraph.kg.explain.fidelity as fidelity
    import tracegraph.kg.explain.necessity as necessity

    seen = []

    def record(result):
        return lambda cfg, **kw: seen.append(SimpleNamespace(cfg=cfg, threads=torch.get_num_threads())) or result

    monkeypatch.setattr(fidelity, "run_fidelity", record({"recovery": {"summary": {}}}))
    monkeypatch.setattr(necessity, "run_necessity", record({"summary": {}}))
    monkeypatch.chdir(tmp_path)  # the paths typed are relative: nothing can land in the checkout
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # a known start, so --num-threads 5 is seen only if applied
    yield seen
    torch.set_num_threads(threads)


def _field(rec, where):
    return rec.threads if where == "torch threads" else functools.reduce(getattr, where.split("."), rec.cfg)


def _fidelity(command, *args):
    required = [a for option, value in REQUIRED[command].items() for a in (option, value)]
    res = run_cli(["fidelity", command, *required, *args])
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize("command", TABLES)
def test_every_option_of_the_command_is_in_its_table(command):
    assert options_of("fidelity", command) - ELSEWHERE[command] == tabled(TABLES[command])


@pytest.mark.parametrize("command", TABLES)
def test_each_option_alone_changes_its_own_settings(recorded, command):
    import torch

    def invoke(extra):
        torch.set_num_threads(1)  # a known start, so --num-threads 5 is seen only if applied
        _fidelity(command, *extra)
        return recorded[-1]

    assert misrouted(TABLES[command], invoke, _field) == {}


@pytest.mark.parametrize("command", TABLES)
def test_the_required_run_files_and_folder_reach_their_settings(recorded, command):
    _fidelity(command)
    fields = {option: getattr(recorded[-1].cfg, option[2:].replace("-", "_")) for option in REQUIRED[command]}
    assert fields == REQUIRED[command]


@pytest.mark.parametrize("given,graded", [("tracin", ["tracin"]), ("relatif,tracin", ["tracin", "relatif"])])
def test_recovery_grades_tracin_once_whether_named_or_not(recorded, given, graded):
    _fidelity("recovery", "--method", given)
    assert recorded[-1].cfg.methods == graded
