"""Every `tracegraph train` option reaches the training settings it names.

`train` hands one `TrainConfig` to the training loop; here the loop is a recording stand-in. The
table is written from the options' help, not read from the code; each option, given alone, must
change its own field and no other (tests/flag_tables.py), and an option without a row fails.
"""

import pytest

from tests.conftest import run_cli
from tests.flag_tables import misrouted, options_of, tabled

# option as typed, the value typed, where TrainConfig keeps it ("model." = the ConvE overrides), the value expected
TABLE = [
    ("--unseen", "drop", "unseen", "drop"),
    ("--epochs", "7", "epochs", 7),
    ("--batch-size", "64", "batch_size", 64),
    ("--learning-rate", "0.0123", "learning_rate", 0.0123),
    ("--lr-decay", "0.97", "lr_decay", 0.97),
    ("--label-smoothing", "0.25", "label_smoothing", 0.25),
    ("--training-mode", "1vsall", "training_mode", "1vsall"),
    ("--loss-impl", "standard", "loss_impl", "standard"),
    ("--embedding-dim", "48", "model.embedding_dim", 48),
    ("--embedding-height", "6", "model.embedding_height", 6),
    ("--embedding-width", "8", "model.embedding_width", 8),
    ("--output-channels", "5", "model.output_channels", 5),
    ("--kernel-size", "2", "model.kernel_size", 2),
    ("--input-dropout", "0.11", "model.input_dropout", 0.11),
    ("--feature-map-dropout", "0.12", "model.feature_map_dropout", 0.12),
    ("--output-dropout", "0.13", "model.output_dropout", 0.13),
    ("--no-reciprocal", None, "model.reciprocal", False),
    ("--entity-dropout", "0.14", "model.entity_dropout", 0.14),
    ("--relation-dropout", "0.15", "model.relation_dropout", 0.15),
    ("--seed", "17", "seed", 17),
    ("--device", "cpu", "device", "cpu"),
    ("--precision", "bf16", "precision", "bf16"),
    ("--use-mixed-precision", None, "use_mixed_precision", True),
    ("--gradient-checkpointing", None, "gradient_checkpointing", True),
    ("--memory-cleanup", None, "memory_cleanup", True),
    ("--compile", None, "compile", True),
    ("--no-cuda-graphs", None, "cuda_graphs", False),
    ("--no-tf32", None, "tf32", False),
    ("--deterministic", None, "deterministic", True),
    ("--num-workers", "3", "num_workers", 3),
    ("--checkpoint-every", "4", "checkpoint_every", 4),
    ("--eval-every", "2", "eval_every", 2),
    ("--patience", "6", "patience", 6),
    ("--min-epochs", "5", "min_epochs", 5),
    ("--lr-scheduler", "plateau", "lr_scheduler", "plateau"),
    ("--lr-factor", "0.3", "lr_factor", 0.3),
    ("--lr-patience", "9", "lr_patience", 9),
    ("--lr-step-size", "11", "lr_step_size", 11),
    ("--lr-min", "0.0002", "lr_min", 0.0002),
    ("--lr-threshold", "0.02", "lr_threshold", 0.02),
    ("--optimizer", "adagrad", "optimizer", "adagrad"),
    ("--weight-decay", "0.001", "weight_decay", 0.001),
    ("--loss", "ce", "loss", "ce"),
    ("--resume", None, "resume", True),
    ("--overwrite", None, "overwrite", True),
    ("--num-threads", "3", "torch threads", 3),  # this process's torch threads, not a setting of the run
]
# options that are not a setting of their own: the files (checked below), the dataset shortcut and the preset (its
# own tests: tests/kg/test_presets_by_hand.py)
ELSEWHERE = {"--train", "--output-dir", "--valid", "--test", "--dataset", "--entity-to-id", "--relation-to-id"}
ELSEWHERE |= {"--preset"}


@pytest.fixture
def recorded(monkeypatch):
    """The configs the training loop was handed; each carries the torch threads set before it."""
    import torch

    import tracegraph.kg.model.train as train_module

    seen, threads = [], [0]
    monkeypatch.setattr(torch, "set_num_threads", lambda n: threads.append(n))
    monkeypatch.setattr(train_module, "train", lambda cfg: seen.append((cfg, threads[-1])) or threads.append(0) or {})
    return seen


def _field(got, where):
    cfg, threads = got
    if where == "torch threads":
        return threads
    return cfg.model[where[6:]] if where.startswith("model.") else getattr(cfg, where)


def test_every_option_of_train_is_in_the_table():
    assert options_of("train") - ELSEWHERE == tabled(TABLE)


def test_each_option_alone_changes_its_own_training_setting(recorded, tmp_path):
    (tmp_path / "t.txt").write_text("a\tr\tb\n")
    base = ["train", "--train", tmp_path / "t.txt", "-o", tmp_path / "run"]

    def invoke(extra):
        res = run_cli([*base, *extra])
        assert res.exit_code == 0, res.output
        return recorded[-1]

    assert misrouted(TABLE, invoke, _field) == {}


def test_the_files_reach_the_training_settings(recorded, tmp_path):
    files = {n: tmp_path / f"{n}.txt" for n in ("train", "valid", "test", "ents", "rels")}
    for f in files.values():
        f.write_text("a\tr\tb\n")
    args = ["train", "--train", files["train"], "-o", tmp_path / "run", "--valid", files["valid"]]
    args += ["--test", files["test"], "--entity-to-id", files["ents"], "--relation-to-id", files["rels"]]
    assert run_cli(args).exit_code == 0
    ((cfg, _),) = recorded
    assert (cfg.train, cfg.valid, cfg.test) == tuple(str(files[n]) for n in ("train", "valid", "test"))
    assert (cfg.entity_map, cfg.relation_map, cfg.output_dir) == (
        str(files["ents"]),
        str(files["rels"]),
        str(tmp_path / "run"),
    )
