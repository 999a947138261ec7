"""Every option of `tracegraph demo`, `import pykeen` and `import checkpoint` reaches the setting it names.

`demo` hands one `DemoConfig` to `run_demo`, which sets torch's threads and runs the stages (`_run`):
here `_run` is a recording stand-in (nothing is generated or trained) and `torch.set_num_threads` a
recorder, so the threads the stages would run under are seen. The import commands call
`tracegraph.kg.api.import_pykeen` / `import_checkpoint`, here stand-ins that bind what they are given by
the parameter names of the importer it is handed to (`tracegraph.kg.model.pykeen_import.import_pykeen`,
`tracegraph.kg.model.importers.import_checkpoint`): nothing is read or written. The tables are written
from the options' help, not read from the code; each option, given alone, must change its own setting and
no other (tests/flag_tables.py), and an option added without a row fails.
"""

from pathlib import Path
from types import SimpleNamespace

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, plain, stand_in, tabled

# option as typed, the value typed (None: a switch), where it lands, the value expected
DEMO = [
    ("--output-dir", "my-demo", "output_dir", "my-demo"),
    ("--quick", None, "quick", True),
    ("--seed", "7", "seed", 7),
    ("--n-explain", "3", "n_explain", 3),
    ("--device", "auto", "device", "auto"),
    ("--num-threads", "3", "threads", 3),  # the demo's setting ...
    ("--num-threads", "3", "torch threads", 3),  # ... and torch's threads while its stages run
]
PYKEEN = [
    ("--output-dir", "imported", "output_dir", "imported"),  # required: in the base call
    ("--triples-factory-dir", "training_triples", "triples_factory_dir", "training_triples"),
    ("--entity-to-id", "entities.tsv", "entity_to_id", "entities.tsv"),
    ("--relation-to-id", "relations.tsv", "relation_to_id", "relations.tsv"),
    ("--hyperparameters", "config.json", "hyperparameters", "config.json"),
    ("--lr", "0.25", "lr", 0.25),
    ("--label-smoothing", "0.1", "label_smoothing", 0.1),
    ("--trust-pickle", None, "trust_pickle", True),
]
CHECKPOINT = [
    ("--output-dir", "imported", "output_dir", "imported"),  # required, as the two maps: in the base call
    ("--entity-to-id", "node_dict.txt", "entity_to_id", "node_dict.txt"),
    ("--relation-to-id", "rel_dict.txt", "relation_to_id", "rel_dict.txt"),
    ("--lr", "0.25", "lr", 0.25),
    ("--label-smoothing", "0.1", "label_smoothing", 0.1),
    ("--trust-pickle", None, "trust_pickle", True),
]
# the model file, an argument (options_of lists it too): checked to reach the importer in every base call
ELSEWHERE = {"demo": set(), "pykeen": {"model_file"}, "checkpoint": {"file"}}
SUMMARY = {  # what an import records (run.config), as the command prints it
    "source": {"format": "stand-in", "notes": []},
    "model": dict(num_entities=1, num_relations=1, reciprocal=False, embedding_dim=2),
    "lr": 1.0,
}


@pytest.fixture
def seen(monkeypatch, tmp_path):
    """Stand-ins for the demo's stages, torch's thread setter and the two importers."""
    import torch

    import tracegraph.kg.api as api
    import tracegraph.kg.demo.pipeline as pipeline
    from tracegraph.kg.model.importers import import_checkpoint
    from tracegraph.kg.model.pykeen_import import import_pykeen

    got = {"threads": 0}
    monkeypatch.setattr(torch, "set_num_threads", lambda n: got.__setitem__("threads", n))

    def stages(cfg):
        got["demo"] = SimpleNamespace(cfg=cfg, threads=got["threads"])  # the threads set when the stages start
        return {"total_seconds": 0.0}

    monkeypatch.setattr(pipeline, "_run", stages)
    summary = SimpleNamespace(config=SUMMARY)
    stand_in(monkeypatch, api, "import_pykeen", got, "pykeen", summary, like=import_pykeen)
    stand_in(monkeypatch, api, "import_checkpoint", got, "checkpoint", summary, like=import_checkpoint)
    monkeypatch.chdir(tmp_path)  # relative paths: nothing can land in the checkout
    Path("model.pt").write_bytes(b"")  # the model file argument; never opened
    return got


def _ok(*args):
    res = run_cli(args)
    assert res.exit_code == 0, res.output
    return res


@pytest.mark.parametrize(
    "path,table,elsewhere",
    [
        (("demo",), DEMO, ELSEWHERE["demo"]),
        (("import", "pykeen"), PYKEEN, ELSEWHERE["pykeen"]),
        (("import", "checkpoint"), CHECKPOINT, ELSEWHERE["checkpoint"]),
    ],
)
def test_every_option_is_in_its_table(path, table, elsewhere):
    assert options_of(*path) - elsewhere == tabled(table)


def test_each_demo_option_alone_changes_its_own_setting(seen):
    def invoke(extra):
        _ok("demo", *extra)
        demo = seen["demo"]
        return {**vars(demo.cfg), "torch threads": demo.threads}

    assert misrouted(DEMO, invoke, lambda got, w: plain(got[w])) == {}


def test_demo_threads_is_the_same_option_as_num_threads(seen):
    _ok("demo", "--threads", "4")
    assert (seen["demo"].cfg.threads, seen["demo"].threads) == (4, 4)


@pytest.mark.parametrize(
    "command,table,required",
    [
        ("pykeen", PYKEEN, {"--output-dir"}),
        ("checkpoint", CHECKPOINT, {"--output-dir", "--entity-to-id", "--relation-to-id"}),
    ],
)
def test_each_import_option_alone_changes_its_own_setting(seen, command, table, required):
    base = [a for option, value, *_ in table if option in required for a in (option, value)]
    first = "model_file" if command == "pykeen" else "file"  # the argument's parameter in the importer

    def invoke(extra):
        _ok("import", command, "model.pt", *base, *extra)
        assert seen[command][first] == Path("model.pt")
        return seen[command]

    assert misrouted(table, invoke, lambda got, w: plain(got[w]), fixed=required) == {}
