"""``tracegraph tune``'s bookkeeping by hand, with no model trained: the storage URL, the study's
storage, sampler and pruner settings, which trials count as finished, a trial's settings and preset
file (written out here byte for byte), its training configuration and pruning reports, the worker
loop's stopping rules (enough finished trials, a timeout, repeated failures named with their reason),
the worker processes, and the summary of a finished study.

References: the training function, the trial objective, the worker loop and the evaluation are
replaced by recorders; trials are Optuna trials built here with known states, values and reports
(in memory, or an SQLite file where the storage itself is the point), and every expected value
(file text, summary, message) is written out by hand.
"""

import dataclasses
import hashlib
import json
import multiprocessing
import sys
import warnings

import numpy as np
import optuna
import pytest
import torch

from tracegraph.errors import DataError, TracegraphError
from tracegraph.kg.model import presets
from tracegraph.kg.model import run_evaluation
from tracegraph.kg.model import train as train_module
from tracegraph.kg.model import tune
from tracegraph.kg.model.presets import Preset
from tracegraph.kg.model.search_space import SearchSpace
from tracegraph.kg.model.tune import TuneConfig
from tracegraph.runtime import progress

S = optuna.trial.TrialState
LR = optuna.distributions.FloatDistribution(0.001, 0.1)


def _space_file(tmp_path, preset=None, pruner=None, name="space.json"):
    doc = {
        "format": "tracegraph-search-space",
        "version": 1,
        "fixed": {"epochs": 2},
        "params": {"learning_rate": {"type": "float", "low": 0.001, "high": 0.1}},
    }
    if preset:
        doc["preset"] = preset
    if pruner:
        doc["pruner"] = pruner
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def _cfg(tmp_path, **kw):
    base = dict(train="T.txt", valid="V.txt", output_dir=str(tmp_path / "study"), search_space="S.json")
    return TuneConfig(**{**base, **kw})


@pytest.fixture(autouse=True)
def no_full_collections(monkeypatch):
    """tune asks Optuna for a garbage collection after every trial; with torch loaded each costs a
    tenth of a second, so here it is skipped (``test_work_collects_garbage_after_every_trial`` records it)."""
    import gc

    monkeypatch.setattr(gc, "collect", lambda *a: 0)


def _trial(number, state, value=None, lr=0.01, run_dir=None, steps=None):
    return optuna.trial.create_trial(
        state=state,
        value=value,
        params={"learning_rate": lr},
        distributions={"learning_rate": LR},
        user_attrs={"run_dir": str(run_dir)} if run_dir else {},
        intermediate_values=steps or {},
    )


# --- small pieces ------------------------------------------------------------------------------


def test_the_storage_is_the_given_url_else_an_absolute_sqlite_file_in_the_output_folder(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = TuneConfig(train="t", valid="v", output_dir="runs/s", search_space="x")
    assert tune.storage_url(cfg) == f"sqlite:///{tmp_path.resolve()}/runs/s/study.db"
    assert tune.storage_url(dataclasses.replace(cfg, storage="")) == f"sqlite:///{tmp_path.resolve()}/runs/s/study.db"
    assert tune.storage_url(dataclasses.replace(cfg, storage="mysql://h/db")) == "mysql://h/db"


def test_the_documented_defaults():
    cfg = TuneConfig(train="t", valid="v", output_dir="o", search_space="s")
    assert (cfg.test, cfg.preset, cfg.study_name, cfg.storage, cfg.trials, cfg.timeout) == (
        None,
        None,
        "tracegraph",
        None,
        20,
        None,
    )
    assert (cfg.devices, cfg.seed, cfg.num_threads) == (["auto"], 0, 0)
    assert cfg.devices is not TuneConfig(train="t", valid="v", output_dir="o", search_space="s").devices


def test_a_trial_takes_the_base_preset_then_the_fixed_then_the_sampled_settings():
    space = SearchSpace(params={}, fixed={"epochs": 2, "batch_size": 64})
    base = Preset("b", "0" * 64, {"epochs": 9, "learning_rate": 0.5, "loss": "ce"}, "b.json")
    assert tune.trial_settings(base, space, {"learning_rate": 0.1}) == {
        "epochs": 2,
        "learning_rate": 0.1,
        "loss": "ce",
        "batch_size": 64,
    }
    assert list(tune.trial_settings(base, space, {"learning_rate": 0.1})) == [
        "epochs",
        "learning_rate",
        "loss",
        "batch_size",
    ]
    assert tune.trial_settings(None, space, {"epochs": 3}) == {"epochs": 3, "batch_size": 64}


def test_finished_trials_are_the_complete_and_the_pruned_ones():
    study = optuna.create_study()
    for state, value in [(S.COMPLETE, 0.1), (S.FAIL, None), (S.PRUNED, None), (S.RUNNING, None), (S.WAITING, None)]:
        study.add_trial(_trial(0, state, value))
    study.add_trial(_trial(0, S.COMPLETE, 0.2))
    assert [(t.number, t.state) for t in tune.finished_trials(study)] == [
        (0, S.COMPLETE),
        (2, S.PRUNED),
        (5, S.COMPLETE),
    ]


def test_without_optuna_every_entry_point_says_how_to_install_it(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # `import optuna` raises ImportError
    hint = "tracegraph tune needs Optuna: pip install 'tracegraph[tune]' (or: pip install optuna)"
    for call in (
        lambda: tune.tune(_cfg(tmp_path)),
        lambda: tune.work(_cfg(tmp_path), "cpu"),
        lambda: tune.finished_trials(None),
    ):
        with pytest.raises(TracegraphError) as e:
            call()
        assert str(e.value) == hint and e.value.__cause__ is None and e.value.__suppress_context__


# --- the study ---------------------------------------------------------------------------------


class _Stop(Exception):
    pass


def test_the_study_is_an_sqlite_file_with_heartbeats_a_seeded_sampler_and_a_median_pruner(tmp_path, monkeypatch):
    made = {}
    real_storage, real_sampler = optuna.storages.RDBStorage, optuna.samplers.TPESampler

    class Storage(real_storage):
        def __init__(self, url, **kw):
            made["storage"] = (url, kw)
            if not url.startswith("sqlite"):
                raise _Stop
            if "note" not in made:  # once: only Optuna's "experimental" warnings are hushed
                made["note"] = warnings.warn("a storage note", UserWarning)
            super().__init__(url, **kw)

    class Sampler(real_sampler):
        def __init__(self, **kw):
            made["sampler"] = kw
            super().__init__(**kw)

    monkeypatch.setattr(optuna.storages, "RDBStorage", Storage)
    monkeypatch.setattr(optuna.samplers, "TPESampler", Sampler)
    cfg = _cfg(tmp_path, study_name="st", seed=40)
    (tmp_path / "study").mkdir()
    space = SearchSpace(params={}, pruner={"n_warmup_steps": 10})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        study = tune.open_study(cfg, space, worker=2)
    assert [str(w.message) for w in caught] == ["a storage note"]  # heartbeats are "experimental": hushed
    url = f"sqlite:///{(tmp_path / 'study' / 'study.db').resolve()}"
    assert made["storage"] == (
        url,
        {"engine_kwargs": {"connect_args": {"timeout": 60}}, "heartbeat_interval": 60, "grace_period": 180},
    )
    assert made["sampler"] == {"seed": 42}
    assert (tmp_path / "study" / "study.db").is_file() and study.study_name == "st"
    assert study.direction == optuna.study.StudyDirection.MAXIMIZE
    assert type(study.pruner) is optuna.pruners.MedianPruner
    assert (study.pruner._n_startup_trials, study.pruner._n_warmup_steps) == (5, 10)
    assert isinstance(study.sampler, real_sampler)
    study.add_trial(_trial(0, S.COMPLETE, 0.5))

    # the same call again loads the study, trials and all; worker 0 seeds with the seed itself
    again = tune.open_study(cfg, SearchSpace(params={}, pruner={"n_startup_trials": 1}))
    assert [t.value for t in again.trials] == [0.5] and made["sampler"] == {"seed": 40}
    assert (again.pruner._n_startup_trials, again.pruner._n_warmup_steps) == (1, 0)

    # a server URL gets no SQLite connection options
    with pytest.raises(_Stop):
        tune.open_study(dataclasses.replace(cfg, storage="mysql://host/db"), space)
    assert made["storage"] == (
        "mysql://host/db",
        {"engine_kwargs": None, "heartbeat_interval": 60, "grace_period": 180},
    )


# --- one trial ---------------------------------------------------------------------------------


class Trial:
    """Stands in for an Optuna trial: samples each range's upper end, records reports and attributes."""

    def __init__(self, number, prune_from=None):
        self.number, self.prune_from = number, prune_from
        self.user_attrs, self.reports = {}, []

    def suggest_float(self, name, low, high, step=None, log=False):
        return high

    def set_user_attr(self, key, value):
        self.user_attrs[key] = value

    def report(self, value, step):
        self.reports.append((step, value))

    def should_prune(self):
        return self.prune_from is not None and self.reports[-1][0] >= self.prune_from


class FakeTrain:
    """Stands in for ``train``: records its config, leaves checkpoints and a model, reports valid MRRs."""

    def __init__(self, mrrs=(0.25, 0.5), result=None, error=None, checkpoints=True):
        self.mrrs, self.result, self.error, self.checkpoints = mrrs, result, error, checkpoints
        self.calls = []

    def __call__(self, cfg, on_evaluation=None):
        from pathlib import Path

        out = Path(cfg.output_dir)
        self.calls.append(cfg)
        self.found = sorted(p.name for p in out.iterdir())  # train() claims only an empty folder
        if self.checkpoints:
            (out / "checkpoints").mkdir()
            (out / "checkpoints" / "epoch_1.pt").write_bytes(b"c")
        (out / "best_model.pt").write_bytes(b"m")
        for epoch, mrr in enumerate(self.mrrs, 1):
            on_evaluation(epoch, mrr)
        if self.error:
            raise self.error
        return self.result or {"best_valid_mrr": np.float32(0.5), "epochs_run": 2}  # float() makes it a float


@pytest.fixture
def fake_train(monkeypatch):
    fake = FakeTrain()
    monkeypatch.setattr(train_module, "train", fake)
    return fake


SPACE = SearchSpace(
    params={"learning_rate": {"type": "float", "low": 0.001, "high": 0.02}},
    fixed={"epochs": 2, "output_channels": 4},
    source="S.json",
)
BASE = Preset("base", "0123456789abcdef" * 4, {"learning_rate": 0.003, "batch_size": 64, "epochs": 9}, "b.json")

PRESET_TEXT = """{
  "format": "tracegraph-preset",
  "version": 1,
  "name": "st-trial-7",
  "description": "trial 7 of tracegraph tune study 'st' starting from preset base (sha256 0123456789ab); \
search space S.json; selected on valid MRR of V.txt",
  "settings": {
    "learning_rate": 0.02,
    "batch_size": 64,
    "epochs": 2,
    "output_channels": 4
  }
}
"""


def test_a_trial_trains_its_preset_on_train_and_valid_with_test_only_filtered(tmp_path, fake_train):
    cfg = _cfg(tmp_path, study_name="st", test="X.txt", seed=11)
    trial = Trial(7)
    value = tune.run_trial(trial, cfg, SPACE, BASE, "cuda:1")
    run_dir = tmp_path / "study" / "trials" / "trial_0007"
    assert value == 0.5 and type(value) is float
    assert fake_train.found == []
    (tcfg,) = fake_train.calls
    assert (tcfg.train, tcfg.valid, tcfg.test, tcfg.output_dir) == ("T.txt", "V.txt", None, str(run_dir))
    assert (tcfg.device, tcfg.seed, tcfg.filter_triples) == ("cuda:1", 11, ["X.txt"])
    assert (tcfg.learning_rate, tcfg.batch_size, tcfg.epochs, tcfg.model) == (0.02, 64, 2, {"output_channels": 4})
    assert tcfg.checkpoint_every == 2  # one checkpoint: the trial keeps best_model.pt only
    assert (tcfg.preset, tcfg.preset_sha256) == ("st-trial-7", hashlib.sha256(PRESET_TEXT.encode()).hexdigest())
    assert (run_dir / "preset.json").read_text() == PRESET_TEXT
    assert sorted(p.name for p in run_dir.iterdir()) == ["best_model.pt", "preset.json"]
    assert trial.user_attrs == {"run_dir": str(run_dir)}
    assert trial.reports == [(1, 0.25), (2, 0.5)]  # valid MRR at each evaluation, keyed by epoch


def test_without_a_base_preset_or_test_file_a_trial_filters_nothing_more(tmp_path, fake_train):
    cfg = _cfg(tmp_path, seed=3)
    tune.run_trial(Trial(12), cfg, SPACE, None, "cpu")
    run_dir = tmp_path / "study" / "trials" / "trial_0012"
    (tcfg,) = fake_train.calls
    assert tcfg.filter_triples == [] and tcfg.learning_rate == 0.02 and tcfg.batch_size == 128
    assert json.loads((run_dir / "preset.json").read_text()) == {
        "format": "tracegraph-preset",
        "version": 1,
        "name": "tracegraph-trial-12",
        "description": "trial 12 of tracegraph tune study 'tracegraph'; search space S.json; selected on valid MRR of V.txt",
        "settings": {"epochs": 2, "output_channels": 4, "learning_rate": 0.02},
    }
    # the same trial folder again (a trial number reused in a fresh study) is trained into again
    (run_dir / "preset.json").unlink()
    (run_dir / "best_model.pt").unlink()
    tune.run_trial(Trial(12), cfg, SPACE, None, "cpu")
    assert len(fake_train.calls) == 2


def test_the_pruner_stops_a_trial_below_the_median(tmp_path, fake_train):
    fake_train.mrrs = (0.3, 0.12346, 0.9)
    trial = Trial(1, prune_from=2)
    with pytest.raises(optuna.TrialPruned) as e:
        tune.run_trial(trial, _cfg(tmp_path), SPACE, None, "cpu")
    assert str(e.value) == "valid MRR 0.1235 at epoch 2 is below the median"
    assert trial.reports == [(1, 0.3), (2, 0.12346)]
    run_dir = tmp_path / "study" / "trials" / "trial_0001"
    assert sorted(p.name for p in run_dir.iterdir()) == ["best_model.pt", "preset.json"]  # still tidied


def test_a_failed_trial_still_drops_its_checkpoints_and_keeps_its_preset(tmp_path, fake_train):
    fake_train.error = TracegraphError("diverged")
    with pytest.raises(TracegraphError, match="diverged"):
        tune.run_trial(Trial(0), _cfg(tmp_path), SPACE, None, "cpu")
    run_dir = tmp_path / "study" / "trials" / "trial_0000"
    assert sorted(p.name for p in run_dir.iterdir()) == ["best_model.pt", "preset.json"]
    fake_train.error, fake_train.checkpoints = None, False  # a run that wrote no checkpoints folder
    (run_dir / "preset.json").unlink()
    (run_dir / "best_model.pt").unlink()
    assert tune.run_trial(Trial(0), _cfg(tmp_path), SPACE, None, "cpu") == 0.5


def test_a_bad_setting_is_named_in_the_trials_preset_file(tmp_path, fake_train):
    space = dataclasses.replace(SPACE, fixed={"epochs": "two"})
    with pytest.raises(DataError) as e:
        tune.run_trial(Trial(3), _cfg(tmp_path), space, None, "cpu")
    preset = tmp_path / "study" / "trials" / "trial_0003" / "preset.json"
    assert str(e.value).startswith(f"{preset}:")
    assert fake_train.calls == []


# --- the worker loop ---------------------------------------------------------------------------


class Objective:
    """Stands in for ``run_trial``: records its arguments, returns or raises what it is given in turn
    (the last again and again), and stops a study that would run on for ever."""

    def __init__(self, *outcomes):
        self.outcomes, self.calls = list(outcomes), []

    def __call__(self, trial, cfg, space, base, device):
        self.calls.append((cfg, space, base, device))
        if len(self.calls) > 12:  # no test here needs as many: a study that never stops
            raise RuntimeError("the study kept starting trials")
        trial.suggest_float("learning_rate", 0.001, 0.1)
        outcome = self.outcomes[min(len(self.calls), len(self.outcomes)) - 1]
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome


@pytest.fixture
def loop(monkeypatch):
    """``work`` on an in-memory study, with the objective and the base preset recorded."""

    class Loop:
        study = optuna.create_study(direction="maximize")
        opened, loaded = [], []

    def open_study(cfg, space, worker=0):
        Loop.opened.append((cfg, space, worker))
        return Loop.study

    def load_preset(name):
        Loop.loaded.append(name)
        return f"preset {name}"

    monkeypatch.setattr(tune, "open_study", open_study)
    monkeypatch.setattr(presets, "load_preset", load_preset)
    return Loop


def test_work_runs_trials_until_the_study_holds_enough_finished_ones(tmp_path, loop, monkeypatch):
    space = _space_file(tmp_path, preset="umls")
    objective = Objective(0.1, optuna.TrialPruned(), 0.3, 0.4)
    monkeypatch.setattr(tune, "run_trial", objective)
    cfg = _cfg(tmp_path, search_space=str(space), trials=3)
    tune.work(cfg, "cuda:3", worker=2)
    assert [t.state for t in loop.study.trials] == [S.COMPLETE, S.PRUNED, S.COMPLETE]  # pruned ones count
    (opened,) = loop.opened
    assert opened[0] is cfg and opened[1].source == str(space) and opened[1].preset == "umls" and opened[2] == 2
    assert loop.loaded == ["umls"]
    assert all(c[0] is cfg and c[1] == opened[1] and c[2:] == ("preset umls", "cuda:3") for c in objective.calls)


def test_work_takes_the_preset_option_over_the_search_spaces(tmp_path, loop, monkeypatch):
    objective = Objective(0.1)
    monkeypatch.setattr(tune, "run_trial", objective)
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path, preset="umls")), preset="wn18rr", trials=1), "cpu")
    assert loop.loaded == ["wn18rr"] and objective.calls[0][2] == "preset wn18rr"
    assert loop.opened[0][2] == 0  # worker 0 unless told


def test_work_without_any_preset_has_no_base(tmp_path, loop, monkeypatch):
    objective = Objective(0.1)
    monkeypatch.setattr(tune, "run_trial", objective)
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1), "cpu")
    assert loop.loaded == [] and objective.calls[0][2] is None


def test_work_runs_only_what_is_missing_and_nothing_when_the_study_is_full(tmp_path, loop, monkeypatch):
    for state, value in [(S.COMPLETE, 0.1), (S.FAIL, None), (S.PRUNED, None)]:
        loop.study.add_trial(_trial(0, state, value))
    objective = Objective(0.2)
    monkeypatch.setattr(tune, "run_trial", objective)
    cfg = _cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=3)
    tune.work(cfg, "cpu")  # two finished, the failed one not counted: one more
    assert len(objective.calls) == 1 and len(loop.study.trials) == 4
    tune.work(cfg, "cpu")
    assert len(objective.calls) == 1 and len(loop.study.trials) == 4


def test_work_starts_no_trial_after_the_timeout(tmp_path, loop, monkeypatch):
    objective = Objective(0.2)
    monkeypatch.setattr(tune, "run_trial", objective)
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=2, timeout=0.0), "cpu")
    assert objective.calls == []


def test_work_sets_the_torch_threads_only_when_asked(tmp_path, loop, monkeypatch):
    threads = []
    monkeypatch.setattr(torch, "set_num_threads", threads.append)
    monkeypatch.setattr(tune, "run_trial", Objective(0.2))
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1, num_threads=1), "cpu")
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=2, num_threads=0), "cpu")
    assert threads == [1]


def test_work_collects_garbage_after_every_trial(tmp_path, loop, monkeypatch):
    import gc

    collected = []
    monkeypatch.setattr(gc, "collect", lambda *a: collected.append(a) or 0)
    monkeypatch.setattr(tune, "run_trial", Objective(0.2))
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=2), "cpu")
    assert len(collected) >= 2


def test_a_failing_trial_does_not_stop_the_study_but_other_errors_do(tmp_path, loop, monkeypatch):
    monkeypatch.setattr(tune, "run_trial", Objective(TracegraphError("bad"), TracegraphError("bad"), 0.3))
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1), "cpu")
    assert [t.state for t in loop.study.trials] == [S.FAIL, S.FAIL, S.COMPLETE]
    monkeypatch.setattr(tune, "run_trial", Objective(ValueError("a bug")))
    with pytest.raises(ValueError, match="a bug"):
        tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=2), "cpu")


@pytest.mark.parametrize("trials, allowed", [(1, 3), (3, 3), (4, 4)])
def test_a_study_gives_up_after_as_many_failures_as_trials_and_at_least_three(
    tmp_path, loop, monkeypatch, trials, allowed
):
    objective = Objective(TracegraphError("loss fused is not available for ce"))
    monkeypatch.setattr(tune, "run_trial", objective)
    with pytest.raises(TracegraphError) as e:
        tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=trials), "cpu")
    assert len(objective.calls) == allowed and [t.state for t in loop.study.trials] == [S.FAIL] * allowed
    assert str(e.value) == (
        f"tune: {allowed} trials failed, the study stopped; the last: loss fused is not available for ce"
    )


def test_earlier_failures_count_and_a_full_study_is_no_failure(tmp_path, loop, monkeypatch):
    for _ in range(2):
        loop.study.add_trial(_trial(0, S.FAIL))
    objective = Objective(TracegraphError("x"), 0.5)
    monkeypatch.setattr(tune, "run_trial", objective)
    with pytest.raises(TracegraphError) as e:
        tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1), "cpu")
    assert len(objective.calls) == 1 and str(e.value) == "tune: 3 trials failed, the study stopped; the last: x"
    # three failures, but the one trial asked for finishes: no error
    objective = Objective(0.5)
    monkeypatch.setattr(tune, "run_trial", objective)
    tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1), "cpu")
    assert len(objective.calls) == 1


def test_a_trial_failed_without_a_reason_points_to_the_log(tmp_path, loop, monkeypatch):
    for _ in range(3):  # e.g. marked failed by the heartbeat after its worker died
        loop.study.add_trial(_trial(0, S.FAIL))
    monkeypatch.setattr(tune, "run_trial", Objective(TracegraphError("x")))
    with pytest.raises(TracegraphError) as e:  # the fresh failure has a reason, but it is not the last...
        tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1), "cpu")
    assert str(e.value) == "tune: 4 trials failed, the study stopped; the last: x"
    monkeypatch.setattr(tune, "run_trial", Objective(optuna.TrialPruned()))
    loop.study.add_trial(_trial(0, S.FAIL))  # ...until a reasonless one comes after it
    with pytest.raises(TracegraphError) as e:
        tune.work(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=2), "cpu")
    assert str(e.value) == "tune: 5 trials failed, the study stopped; the last: see the log above"


def test_a_worker_process_logs_and_works_on_its_device(tmp_path, monkeypatch):
    calls = []
    monkeypatch.setattr(progress, "setup_logging", lambda *a, **k: calls.append(("logging", a, k)))
    monkeypatch.setattr(tune, "work", lambda *a, **k: calls.append(("work", a, k)))
    cfg = _cfg(tmp_path, devices=["cuda:0", "cuda:1"], seed=5)
    tune._worker_main(dataclasses.asdict(cfg), "cuda:1", 1)
    assert calls == [("logging", (), {}), ("work", (cfg, "cuda:1", 1), {})]


class FakeProcess:
    log = []
    exitcodes = {}

    def __init__(self, target, args, name):
        self.target, self.args, self.name = target, args, name
        self.exitcode = None

    def start(self):
        FakeProcess.log.append(("start", self.name))

    def join(self):
        FakeProcess.log.append(("join", self.name))
        self.exitcode = FakeProcess.exitcodes.get(self.args[1], 0)


@pytest.fixture
def processes(monkeypatch):
    made = []

    class Ctx:
        def Process(self, **kw):
            made.append(FakeProcess(**kw))
            return made[-1]

    contexts = []
    monkeypatch.setattr(multiprocessing, "get_context", lambda method: contexts.append(method) or Ctx())
    FakeProcess.log, FakeProcess.exitcodes = [], {}
    return made, contexts


def test_workers_are_spawned_one_per_device_and_all_started_before_any_is_waited_for(tmp_path, processes):
    made, contexts = processes
    cfg = _cfg(tmp_path, devices=["cuda:0", "cuda:1"], seed=5)
    tune._run_workers(cfg)
    assert contexts == ["spawn"]
    assert [(p.target, p.args, p.name) for p in made] == [
        (tune._worker_main, (dataclasses.asdict(cfg), "cuda:0", 0), "tune-cuda:0"),
        (tune._worker_main, (dataclasses.asdict(cfg), "cuda:1", 1), "tune-cuda:1"),
    ]
    assert FakeProcess.log == [
        ("start", "tune-cuda:0"),
        ("start", "tune-cuda:1"),
        ("join", "tune-cuda:0"),
        ("join", "tune-cuda:1"),
    ]


def test_failed_workers_are_named_with_their_exit_codes(tmp_path, processes):
    FakeProcess.exitcodes = {"cuda:1": 3, "cpu": -9}
    with pytest.raises(TracegraphError) as e:
        tune._run_workers(_cfg(tmp_path, devices=["cuda:0", "cuda:1", "cpu"]))
    assert str(e.value) == (
        "tune workers failed: tune-cuda:1 (exit 3), tune-cpu (exit -9); the study keeps what finished — run again to resume"
    )


# --- the whole study ---------------------------------------------------------------------------


@pytest.fixture
def study(tmp_path, monkeypatch):
    """``tune`` on an in-memory study that the recorded worker loop fills with the trials given."""

    class Study:
        study = optuna.create_study(direction="maximize")
        log, trials, evaluations = [], [], []

    def open_study(cfg, space, *more):
        Study.log.append(("open", cfg, space.source, more))
        return Study.study

    def work(cfg, device, *more):
        Study.log.append(("work", cfg, device, more))
        for t in Study.trials:
            Study.study.add_trial(t)

    def run_workers(cfg, *more):
        Study.log.append(("workers", cfg, more))
        for t in Study.trials:
            Study.study.add_trial(t)

    def evaluate_files(*args, **kw):
        Study.evaluations.append((args, kw))
        return {"metrics": {"both": {"mrr": 0.25}}, "output_dir": "x"}

    monkeypatch.setattr(tune, "open_study", open_study)
    monkeypatch.setattr(tune, "work", work)
    monkeypatch.setattr(tune, "_run_workers", run_workers)
    monkeypatch.setattr(run_evaluation, "evaluate_files", evaluate_files)
    return Study


def _trials_with_runs(tmp_path):
    runs = []
    for i in range(3):
        d = tmp_path / f"run{i}"
        d.mkdir()
        (d / "preset.json").write_bytes(b'{"name":  "trial %d"}\n' % i)  # not canonical JSON: copied, not re-dumped
        runs.append(d)
    return runs, [
        _trial(0, S.COMPLETE, 0.4, lr=0.01, run_dir=runs[0], steps={1: 0.3, 3: 0.4, 2: 0.5}),
        _trial(1, S.PRUNED, None, lr=0.05, run_dir=runs[1], steps={1: 0.1}),
        _trial(2, S.COMPLETE, 0.6, lr=0.02, run_dir=runs[2]),
        _trial(3, S.FAIL),
    ]


def test_a_study_writes_the_best_trials_preset_and_its_summary(tmp_path, study):
    runs, study.trials = _trials_with_runs(tmp_path)
    space = _space_file(tmp_path)
    out = tmp_path / "a" / "study"  # made, parents too
    cfg = _cfg(tmp_path, output_dir=str(out), search_space=str(space), study_name="st", trials=3, devices=["cuda:2"])
    summary = tune.tune(cfg)
    assert study.log == [("open", cfg, str(space), ()), ("work", cfg, "cuda:2", ())]
    assert (out / "best_preset.json").read_bytes() == b'{"name":  "trial 2"}\n'
    expected = {
        "study_name": "st",
        "storage": f"sqlite:///{out.resolve()}/study.db",
        "best_trial": 2,
        "best_valid_mrr": 0.6,
        "best_params": {"learning_rate": 0.02},
        "best_run_dir": str(runs[2]),
        "best_preset": str(out / "best_preset.json"),
        "trials": [
            {"number": 0, "state": "COMPLETE", "value": 0.4, "params": {"learning_rate": 0.01}, "last_epoch": 3},
            {"number": 1, "state": "PRUNED", "value": None, "params": {"learning_rate": 0.05}, "last_epoch": 1},
            {"number": 2, "state": "COMPLETE", "value": 0.6, "params": {"learning_rate": 0.02}, "last_epoch": None},
            {"number": 3, "state": "FAIL", "value": None, "params": {"learning_rate": 0.01}, "last_epoch": None},
        ],
        "config": {
            "train": "T.txt",
            "valid": "V.txt",
            "output_dir": str(out),
            "search_space": str(space),
            "test": None,
            "preset": None,
            "study_name": "st",
            "storage": None,
            "trials": 3,
            "timeout": None,
            "devices": ["cuda:2"],
            "seed": 0,
            "num_threads": 0,
        },
    }
    assert summary == expected and study.evaluations == []
    assert json.loads((out / "tune_summary.json").read_text()) == expected
    tune.tune(cfg)  # again, into the folder now there
    assert study.log[-1][0] == "work"


def test_the_test_file_is_ranked_once_with_the_best_trials_model(tmp_path, study):
    runs, study.trials = _trials_with_runs(tmp_path)
    out = tmp_path / "study"
    cfg = _cfg(tmp_path, search_space=str(_space_file(tmp_path)), test="X.txt", devices=["cuda:1", "cuda:0"])
    summary = tune.tune(cfg)
    assert study.log[1] == ("workers", cfg, ())  # several devices: worker processes, this one waits
    assert len(study.log) == 2
    # the run's own data files as filter (None), no top answers (0), 256 queries a batch, 65536 entities at a time
    assert study.evaluations == [((runs[2], "X.txt", None, out / "test_evaluation", 0, 256, 65536, "cuda:1"), {})]
    assert summary["test"] == {"both": {"mrr": 0.25}}
    assert json.loads((out / "tune_summary.json").read_text())["test"] == {"both": {"mrr": 0.25}}


def test_a_study_without_a_complete_trial_is_an_error(tmp_path, study):
    _, trials = _trials_with_runs(tmp_path)
    study.trials = [trials[1], trials[3], _trial(0, S.FAIL), _trial(0, S.PRUNED)]
    with pytest.raises(TracegraphError) as e:
        tune.tune(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), study_name="st"))
    assert str(e.value) == "no trial of study 'st' completed (2 failed, 2 pruned); see the log above"
    assert not (tmp_path / "study" / "tune_summary.json").exists()


def test_settings_are_checked_before_any_study_is_opened(tmp_path, study):
    with pytest.raises(TracegraphError) as e:
        tune.tune(_cfg(tmp_path, trials=0))
    assert str(e.value) == "--trials must be >= 1"
    assert not (tmp_path / "study").exists()
    with pytest.raises(DataError, match="search-space file not found"):  # the file before the devices
        tune.tune(_cfg(tmp_path, search_space=str(tmp_path / "none.json"), devices=[]))
    assert (tmp_path / "study").is_dir()
    with pytest.raises(TracegraphError) as e:
        tune.tune(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), devices=[]))
    assert str(e.value) == "--devices needs at least one device"
    assert study.log == []
    _, study.trials = _trials_with_runs(tmp_path)
    assert tune.tune(_cfg(tmp_path, search_space=str(_space_file(tmp_path)), trials=1))["best_trial"] == 2
