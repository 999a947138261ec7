"""Every `tracegraph data synthetic` option reaches the generator setting it names.

`data synthetic` builds one `SyntheticConfig` and hands it, with the seed, to `generate`, whose graph
goes to `write`. Here both are recording stand-ins (nothing is generated or written). The table is
written from the options' help, not read from the code; each option, given alone, must change its
own setting and no other (tests/flag_tables.py), and an option added without a row fails.
"""

import re
from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, tabled

# option as typed, the value typed, where the call keeps it ("seed" = generate's seed argument, else the
# SyntheticConfig field), the value expected
TABLE = [
    ("--seed", "11", "seed", 11),
    ("--drugs", "12", "n_drugs", 12),
    ("--genes", "34", "n_genes", 34),
    ("--pathways", "9", "n_pathways", 9),
    ("--diseases", "13", "n_diseases", 13),
    ("--phenotypes", "14", "n_phenotypes", 14),
    ("--test-triples", "6", "n_test", 6),
    ("--treats-per-drug", "3.5", "treats_per_drug", 3.5),
    ("--module-coherence", "0.7", "module_coherence", 0.7),
    ("--noise-edge-fraction", "0.02", "noise_edge_fraction", 0.02),
    ("--noise-treats-fraction", "0.1", "noise_treats_fraction", 0.1),
]
# options that are not a setting of their own: the output folder (where `write` writes, checked below) and
# the preset, which sets several sizes at once (its sizes are checked against the help below; each option is
# also given beside --quick, where it must win)
ELSEWHERE = {"--output-dir", "--quick"}


@pytest.fixture
def recorded(monkeypatch, tmp_path):
    import tracegraph.kg.demo.synthetic as synthetic

    seen = SimpleNamespace(calls=[], written=[])
    graph = object()  # what the stand-in generate returns; write must be handed this
    counts = dict(entities=1, relations=1, train=1, valid=1, test=1, test_mechanism_paths=1)
    monkeypatch.setattr(
        synthetic,
        "generate",
        lambda config, seed=0: seen.calls.append(SimpleNamespace(config=config, seed=seed)) or graph,
    )
    monkeypatch.setattr(synthetic, "write", lambda kg, out_dir: seen.written.append((kg is graph, out_dir)) or counts)
    monkeypatch.chdir(tmp_path)  # -o is relative: nothing can land in the checkout
    return seen


def _field(call, where):
    return call.seed if where == "seed" else getattr(call.config, where)


def _synthetic(*args):
    res = run_cli(["data", "synthetic", "-o", "kg-out", *args])
    assert res.exit_code == 0, res.output
    return res


def test_every_option_of_data_synthetic_is_in_the_table():
    assert options_of("data", "synthetic") - ELSEWHERE == tabled(TABLE)


@pytest.mark.parametrize("quick", [[], ["--quick"]], ids=["alone", "beside --quick"])
def test_each_option_alone_changes_its_own_generator_setting(recorded, quick):
    """With --quick too, a size given beside the preset wins."""

    def invoke(extra):
        _synthetic(*quick, *extra)
        return recorded.calls[-1]

    assert misrouted(TABLE, invoke, _field) == {}
    assert set(recorded.written) == {(True, Path("kg-out"))}  # the generated graph, into -o


def test_defaults_and_quick_sizes_are_the_ones_the_help_states(recorded):
    """Each help's "(default D; quick Q)" holds: D without options, Q with --quick alone."""
    import typer.main

    from tracegraph.cli import app

    cmd = typer.main.get_command(app).commands["data"].commands["synthetic"]  # the options' help texts
    helps = {p.opts[0]: p.help or "" for p in cmd.params}
    _synthetic()
    _synthetic("--quick")
    plain, quick = recorded.calls
    stated = 0
    for option, _, where, _ in TABLE:
        said = re.search(r"default ([\d.]+)(?:; quick (\d+))?", helps[option])
        if said is None:
            continue
        stated += 1
        assert _field(plain, where) == float(said[1]), option
        if said[2] is not None:
            assert _field(quick, where) == int(said[2]), option
    assert stated == 10  # every option but --seed states its default in its help
