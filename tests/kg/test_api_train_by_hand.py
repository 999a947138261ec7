"""``tracegraph.train``'s wiring by hand, with the training itself replaced by a recorder: which
settings reach the training configuration (config objects, dicts, flat keywords and ``model={}``,
flat model keywords winning, paths as text), unknown settings refused word for word before any work,
``quiet`` silencing progress and INFO lines only while training, the signature ``help()`` shows (the
ConvE paper's defaults written out here), and the run it returns; the import helpers return the run
they wrote."""

import inspect
import logging
import os
from pathlib import Path

import pytest

import tracegraph
from tracegraph.errors import TracegraphError
from tracegraph.kg import api
from tracegraph.kg.model import train as train_module
from tracegraph.kg.model.train_config import TrainConfig


class Recorder:
    """Stands in for the training function: keeps the config and the logging state it ran under."""

    def __init__(self):
        self.cfg = None

    def __call__(self, cfg):
        log = logging.getLogger("tracegraph")
        self.cfg = cfg
        self.progress_env = os.environ.get("TRACEGRAPH_PROGRESS")
        self.level, self.handlers = log.level, len(log.handlers)
        raise _Stop  # no run directory is written, so the Run would not open: stop here


class _Stop(Exception):
    pass


@pytest.fixture
def recorder(monkeypatch):
    rec = Recorder()
    monkeypatch.setattr(train_module, "train", rec)
    return rec


def _call(**kw):
    with pytest.raises(_Stop):
        tracegraph.train(**kw)


def test_flat_keywords_dicts_and_config_objects_reach_the_training_config(recorder, tmp_path):
    _call(train=tmp_path / "t.txt", output_dir=tmp_path / "o", epochs=3, embedding_dim=12, output_channels=2)
    cfg = recorder.cfg
    assert isinstance(cfg, TrainConfig)
    assert (cfg.train, cfg.output_dir) == (str(tmp_path / "t.txt"), str(tmp_path / "o"))  # paths as text
    assert type(cfg.train) is str and cfg.epochs == 3 and cfg.batch_size == 128
    assert cfg.model == {"embedding_dim": 12, "output_channels": 2}

    base = TrainConfig(train="a.txt", output_dir="o", epochs=7, model={"embedding_dim": 20, "kernel_size": 5})
    _call(config=base, batch_size=4, embedding_dim=12)  # keywords over the config; flat model keys over its model
    assert (recorder.cfg.train, recorder.cfg.epochs, recorder.cfg.batch_size) == ("a.txt", 7, 4)
    assert recorder.cfg.model == {"embedding_dim": 12, "kernel_size": 5}

    _call(config={"train": "b.txt", "output_dir": "o", "model": {"reciprocal": False}}, model={"kernel_size": 3})
    assert recorder.cfg.train == "b.txt" and recorder.cfg.model == {"kernel_size": 3}  # model= replaces the dict's
    _call(config={"train": "b.txt", "output_dir": "o", "model": {"reciprocal": False}}, reciprocal=True)
    assert recorder.cfg.model == {"reciprocal": True}


def test_unknown_settings_are_refused_by_name_before_training(recorder):
    with pytest.raises(TracegraphError) as e:
        tracegraph.train(train="t", output_dir="o", epoch=3, zeta=1, embedding_dim=12)
    assert str(e.value) == "train() got unknown setting(s) 'epoch', 'zeta'; see help(tracegraph.train)"
    with pytest.raises(TracegraphError) as e:
        tracegraph.train(config={"train": "t", "output_dir": "o", "lr": 0.1, "embedding_dim": 12})
    assert str(e.value) == "train() got unknown setting(s) 'embedding_dim', 'lr' in config"
    assert recorder.cfg is None


def test_quiet_silences_progress_and_info_only_while_training(recorder, monkeypatch):
    log = logging.getLogger("tracegraph")
    monkeypatch.setenv("TRACEGRAPH_PROGRESS", "1")
    monkeypatch.setattr(log, "handlers", [])
    monkeypatch.setattr(log, "level", logging.INFO)
    _call(train="t", output_dir="o", quiet=True)
    assert recorder.progress_env == "0" and recorder.level >= logging.WARNING and recorder.handlers == 0
    assert os.environ["TRACEGRAPH_PROGRESS"] == "1" and log.level == logging.INFO  # restored afterwards
    _call(train="t", output_dir="o")  # not quiet: progress as on the command line, a handler for the log
    assert recorder.progress_env == "1" and recorder.level == logging.INFO and recorder.handlers == 1


def test_help_lists_every_setting_with_its_default():
    sig = inspect.signature(tracegraph.train)
    names = list(sig.parameters)
    assert names[:4] == ["config", "quiet", "train", "output_dir"]
    assert names[-11:] == [
        "embedding_dim",
        "embedding_height",
        "embedding_width",
        "output_channels",
        "kernel_size",
        "input_dropout",
        "feature_map_dropout",
        "output_dropout",
        "entity_dropout",
        "relation_dropout",
        "reciprocal",
    ]
    p = sig.parameters
    assert p["config"].kind is inspect.Parameter.POSITIONAL_OR_KEYWORD and p["config"].default is None
    assert all(p[n].kind is inspect.Parameter.KEYWORD_ONLY for n in names[1:])
    # the documented defaults (the ConvE paper's sizes and dropouts), written out here
    want = dict(quiet=False, train=None, output_dir=None, epochs=100, batch_size=128, learning_rate=0.003)
    want |= dict(label_smoothing=0.1, model={}, filter_triples=[], embedding_dim=200, embedding_height=10)
    want |= dict(embedding_width=20, output_channels=32, kernel_size=3, input_dropout=0.2)
    want |= dict(feature_map_dropout=0.2, output_dropout=0.3, entity_dropout=0.0, relation_dropout=0.0)
    want |= dict(reciprocal=True, device="auto", valid=None)
    assert {k: p[k].default for k in want} == want
    assert sig.return_annotation == "Run"
    assert len(names) == 2 + len(TrainConfig.__dataclass_fields__) + 11


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    d = tmp_path_factory.mktemp("api")
    (d / "t.txt").write_text("".join(f"e{i}\tr\te{(i + 1) % 4}\n" for i in range(8)))
    run = tracegraph.train(
        train=d / "t.txt",
        output_dir=d / "run",
        epochs=1,
        batch_size=4,
        device="cpu",
        embedding_dim=12,
        embedding_height=3,
        embedding_width=4,
        output_channels=2,
        quiet=True,
    )
    return d, run


def test_train_returns_the_finished_run_opened_on_its_device(tiny_run):
    d, run = tiny_run
    assert isinstance(run, tracegraph.Run) and run.path == d / "run" and str(run.device) == "cpu"
    settings = run.config["train"]  # the run's config.json: the settings it trained with
    assert settings["model"]["embedding_dim"] == 12 and (d / "run" / "final_model.pt").is_file()
    assert Path(settings["train"]) == d / "t.txt" and settings["epochs"] == 1


def test_the_import_helpers_return_the_run_they_wrote(tiny_run, monkeypatch, tmp_path):
    import shutil

    from tracegraph.kg.model import importers, pykeen_import

    calls = []

    def fake(name):
        def write(model_file, output_dir, *args, **kw):  # "writes" a run: a copy of a trained one
            calls.append((name, model_file, output_dir, args, kw))
            shutil.copytree(tiny_run[0] / "run", output_dir)

        return write

    monkeypatch.setattr(pykeen_import, "import_pykeen", fake("pykeen"))
    monkeypatch.setattr(importers, "import_checkpoint", fake("checkpoint"))
    a = api.import_pykeen("m.pkl", tmp_path / "o", triples_factory_dir="tf", lr=0.1)
    b = api.import_checkpoint("c.pt", tmp_path / "p", "e.txt", "r.txt", trust_pickle=True)
    assert calls == [
        ("pykeen", "m.pkl", tmp_path / "o", (), {"triples_factory_dir": "tf", "lr": 0.1}),
        ("checkpoint", "c.pt", tmp_path / "p", ("e.txt", "r.txt"), {"trust_pickle": True}),
    ]
    assert isinstance(a, tracegraph.Run) and (a.path, b.path) == (tmp_path / "o", tmp_path / "p")
    assert str(a.device) == "cpu" and len(b.entities) == 8
    assert api.open_run(tmp_path / "o", device="meta").device.type == "meta"
    assert str(tracegraph.open_run(tmp_path / "o").device) == "cpu"  # the default
