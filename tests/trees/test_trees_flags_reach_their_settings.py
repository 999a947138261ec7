"""Every option of `tracegraph trees pretrain|finetune|probe` reaches the setting it names.

Each command ends in one heavy call: `pretrain(cfg, …)`, `finetune(cfg, …)` or, with --trees/--labels,
`finetune_on_labels(cfg, …)`, and for `probe` either `probe_on_labels(encoder, load_labelled(dc), …)` or, with
--study, `probe_study(seeds, …)`. Here that call is a recording stand-in (its arguments kept by parameter name),
as is `set_threads`. The tables are written from the options' help and names, not read from the wiring; each
option, given alone, must change its own setting and no other (tests/flag_tables.py), and an option added
without a row fails. Paths are relative to a temporary folder.
"""

import importlib
from pathlib import Path

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, stand_in, tabled

# option as typed, the value typed (None: a flag), where the stand-in's record keeps it, the value expected.
# "cfg." = the TrainConfig (".data." its DataConfig, ".encoder." the encoder settings); otherwise the heavy
# call's parameter of that name; "num_threads" = what set_threads got.
SHARED = [  # options of pretrain and finetune alike
    ("--num-trees", "17", "cfg.data.num_trees", 17),
    ("--max-nodes", "33", "cfg.data.max_nodes", 33),
    ("--data-seed", "5", "cfg.data.seed", 5),
    ("--cache-dir", "cache", "cfg.data.cache_dir", "cache"),
    ("--hidden-channels", "24", "cfg.encoder.hidden_channels", 24),
    ("--num-interactions", "2", "cfg.encoder.num_interactions", 2),
    ("--num-rbf", "9", "cfg.encoder.num_rbf", 9),
    ("--cutoff", "4.5", "cfg.encoder.cutoff", 4.5),
    ("--readout", "sum", "cfg.encoder.readout", "sum"),
    ("--epochs", "4", "cfg.epochs", 4),
    ("--batch-size", "6", "cfg.batch_size", 6),
    ("--lr", "0.0042", "cfg.lr", 0.0042),
    ("--precision", "bf16", "cfg.precision", "bf16"),
    ("--device", "cpu", "cfg.device", "cpu"),
    ("--gradient-accumulation-steps", "7", "cfg.gradient_accumulation_steps", 7),
    ("--gradient-checkpointing", None, "cfg.gradient_checkpointing", True),
    ("--memory-cleanup", None, "cfg.memory_cleanup", True),
    ("--seed", "11", "cfg.seed", 11),
    ("--output-dir", "out", "output_dir", Path("out")),
    ("--resume", None, "resume", True),
    ("--trees", "trees", "cfg.data.trees_dir", "trees"),
    ("--node-spacing", "2.5", "cfg.data.node_spacing", 2.5),
    ("--trees-per-image", "13", "cfg.data.trees_per_image", 13),
    ("--image-root", "disc", "cfg.data.image_root", "disc"),
    ("--num-threads", "19", "num_threads", 19),
]
PRETRAIN = SHARED + [
    ("--swc-dir", "swc", "cfg.data.swc_dir", "swc"),
    ("--keep-every", "3", "cfg.data.keep_every", 3),
    ("--order-weight", "0.7", "cfg.order_weight", 0.7),
    ("--growth-weight", "0.3", "cfg.growth_weight", 0.3),
]
FINETUNE = SHARED + [
    ("--encoder", "enc.pt", "encoder_path", Path("enc.pt")),
    ("--freeze-encoder", None, "cfg.freeze_encoder", True),
    ("--labels", "labels.csv", "cfg.data.labels", "labels.csv"),
    ("--folds", "12", "folds", 12),
    ("--test-fraction", "0.4", "test_fraction", 0.4),
    ("--compare-random", None, "compare_random", True),
]
# without --trees/--labels: synthetic classes, and no files to split (--folds, --test-fraction and --compare-random
# are, by their help, about --trees files)
FILES_ONLY = {"--trees", "--labels", "--folds", "--test-fraction", "--compare-random"}
FINETUNE_SYNTHETIC = [row for row in FINETUNE if row[0] not in FILES_ONLY]
PROBE_LABELLED = [  # "ds." = the DataConfig handed to load_labelled (its stand-in passes it on as the dataset)
    ("--encoder", "enc.pt", "encoder_path", Path("enc.pt")),
    ("--no-compare-random", None, "compare_random", False),
    ("--seed", "11", "seed", 11),
    ("--max-nodes", "33", "ds.max_nodes", 33),
    ("--output-dir", "out", "output_dir", Path("out")),
    ("--trees", "trees", "ds.trees_dir", "trees"),
    ("--labels", "labels.csv", "ds.labels", "labels.csv"),
    ("--node-spacing", "2.5", "ds.node_spacing", 2.5),
    ("--trees-per-image", "13", "ds.trees_per_image", 13),
    ("--image-root", "disc", "ds.image_root", "disc"),
    ("--folds", "12", "folds", 12),
    ("--test-fraction", "0.4", "test_fraction", 0.4),
    ("--cache-dir", "cache", "ds.cache_dir", "cache"),
    ("--num-threads", "19", "num_threads", 19),
]
PROBE_STUDY = [
    ("--seed", "11", "seeds", [11]),
    ("--num-trees", "17", "labelled_trees", 17),
    ("--max-nodes", "33", "max_nodes", 33),
    ("--pretrain-trees", "21", "pretrain_trees", 21),
    ("--epochs", "4", "epochs", 4),
    ("--output-dir", "out", "output_dir", Path("out")),
    ("--cache-dir", "cache", "cache_dir", "cache"),
    ("--num-threads", "19", "num_threads", 19),
]
LABELLED = {"arms": {}, "split": "files"}  # what _headline needs of a labelled run's result
# case: command, the heavy call stubbed, what it returns, what both runs give to reach it, what the control must
# give besides (other paths than the table's), the table
CASES = {
    "pretrain": ("pretrain", "tracegraph.trees.train:pretrain", [], [], ["-o", "other"], PRETRAIN),
    "finetune-labelled": (
        "finetune",
        "tracegraph.trees.labelled_runs:finetune_on_labels",
        LABELLED,
        [],
        ["-o", "other", "--labels", "other.csv"],
        FINETUNE,
    ),
    "finetune-synthetic": ("finetune", "tracegraph.trees.train:finetune", [], [], ["-o", "other"], FINETUNE_SYNTHETIC),
    "probe-labelled": (
        "probe",
        "tracegraph.trees.labelled_runs:probe_on_labels",
        LABELLED,
        [],
        ["--labels", "other.csv", "--encoder", "other.pt"],
        PROBE_LABELLED,
    ),
    "probe-study": ("probe", "tracegraph.trees.probe:probe_study", {}, ["--study"], ["-o", "other"], PROBE_STUDY),
}
# --study is not a setting of its own: it picks probe_study, whose case records only because it is given
ELSEWHERE = {"pretrain": set(), "finetune": set(), "probe": {"--study"}}


def _run(monkeypatch, case, args):
    """Run the case's command with `args`; the one call its stand-in got, by parameter name, + num_threads."""
    import tracegraph.cli.trees as cli
    import tracegraph.trees.labelled_runs as labelled_runs

    command, target, returns, always, _, _ = CASES[case]
    module, name = target.split(":")
    calls, threads = [], []
    stand_in(monkeypatch, importlib.import_module(module), name, {}, returns=lambda args: calls.append(args) or returns)
    monkeypatch.setattr(cli, "set_threads", threads.append)  # also keeps this process's torch threads as they are
    monkeypatch.setattr(labelled_runs, "load_labelled", lambda dc: dc)  # the probe's data settings, passed on
    res = run_cli(["trees", command, *always, *args])
    assert res.exit_code == 0, res.output
    (call,), (num_threads,) = calls, threads
    return {**call, "num_threads": num_threads}


def _at(record, where):
    for part in where.split("."):
        record = record[part] if isinstance(record, dict) else getattr(record, part)
    return record


@pytest.mark.parametrize("command", ["pretrain", "finetune", "probe"])
def test_every_option_of_the_command_has_a_row(command):
    rows = [row for c, *_, table in CASES.values() if c == command for row in table]
    assert options_of("trees", command) - ELSEWHERE[command] == tabled(rows)


@pytest.mark.parametrize("case", CASES)
def test_each_option_alone_changes_its_own_setting(case, monkeypatch, tmp_path):
    """Each option on top of what reaches the case (with other paths) changes its own setting and no other."""
    monkeypatch.chdir(tmp_path)
    base, table = CASES[case][-2], CASES[case][-1]
    assert misrouted(table, lambda extra: _run(monkeypatch, case, [*base, *extra]), _at) == {}


def test_a_probe_of_synthetic_classes_reads_its_trees_as_the_options_say(monkeypatch, tmp_path):
    """Without --trees or --study: each --seed's labelled synthetic trees, --num-trees and --max-nodes, cached in --cache-dir."""
    import tracegraph.trees.probe as probe_module

    monkeypatch.chdir(tmp_path)
    asked = []
    monkeypatch.setattr(probe_module, "labelled_split", lambda dc: asked.append(dc) or ([], []))
    monkeypatch.setattr(probe_module, "load_encoder", lambda path: None)
    monkeypatch.setattr(probe_module, "probe", lambda enc, train, test: 0.5)
    args = ["trees", "probe", "--encoder", "enc.pt", "--no-compare-random", "--seed", "4", "--seed", "9"]
    res = run_cli([*args, "--num-trees", "17", "--max-nodes", "33", "--cache-dir", "cache"])
    assert res.exit_code == 0, res.output
    got = [(dc.num_trees, dc.max_nodes, dc.seed, dc.cache_dir) for dc in asked]
    assert got == [(17, 33, 2004, "cache"), (17, 33, 2009, "cache")]  # labelled trees draw with seed 2000 + --seed


@pytest.mark.parametrize(
    "extra,named",
    [
        (["--trees", "t", "--labels", "l.csv"], "leave out --trees, --labels"),
        (["--encoder", "enc.pt"], "leave out --encoder"),
        (["--no-compare-random"], "leave out --no-compare-random"),
    ],
)
def test_a_study_refuses_the_options_it_would_ignore(tmp_path, extra, named):
    from tests.conftest import run_cli_error

    run_cli_error(["trees", "probe", "--study", "-o", tmp_path / "out", *extra], tmp_path, contains=named)
